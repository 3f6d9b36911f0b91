/*
 * outbox.h - what the files of the webhook outbox's domain share (private
 * to src/state/): the jobs table's columns as a listed job reads them, and
 * the rows of such a query as jobs (outbox_admin.c). The jobs table
 * (outbox_jobs) is the same in both databases: one row a job, with its
 * lease (owner instance, token, expiry) in the row.
 */
#ifndef TG_STATE_OUTBOX_H
#define TG_STATE_OUTBOX_H

#include "tidegate/state.h"
#include "db.h"

/* A job's columns; then the time a lease is judged live at, and ", false)". */
#define TG_OUTBOX_JOB_COLS "id, state, url, kind, correlation_id, service, api_key," \
	" secret_ref, last_error, attempts, last_status, payload_size, created_at, ready_at," \
	" next_at, first_attempt_at, last_attempt_at, done_at," \
	" coalesce(state <> 'waiting' AND lease_expires > "

/** The rows of r (borrowed; TG_OUTBOX_JOB_COLS) as jobs (the caller's:
 * tg_outbox_jobs_free); their number in *n. */
struct tg_outbox_job *tg_state_outbox_jobs(const struct tg_db_rows *r, size_t *n);

extern const struct tg_db_table tg_state_outbox_stmts, tg_state_outbox_admin_stmts,
    tg_state_outbox_key_stmts, tg_state_payload_stmts, tg_state_payload_rows_stmts;

#endif
