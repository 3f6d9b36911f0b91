/*
 * outbox.h - the statements of the webhook outbox's domain (private to
 * src/state/; stmts.c lists them): jobs (outbox.c), admin
 * (outbox_admin.c), the relay key (outbox_key.c), payloads (payload.c)
 * and the payload store of chunk rows (payload_rows.c). The jobs table
 * (outbox_jobs) is the same in both databases: one row a job, with its
 * lease (owner instance, token, expiry) in the row.
 */
#ifndef TG_STATE_OUTBOX_H
#define TG_STATE_OUTBOX_H

#include "db.h"

extern const struct tg_db_table tg_state_outbox_stmts, tg_state_outbox_admin_stmts,
    tg_state_outbox_key_stmts, tg_state_payload_stmts, tg_state_payload_rows_stmts;

#endif
