/*
 * outbox_db.h - private contract between the outbox files of the SQLite
 * state backend: the SQLite handle and prepared statements (outbox.c),
 * leases (outbox_lease.c), payload files (outbox_payload.c) and admin
 * queries (outbox_admin.c). Not for other modules: they call
 * include/tidegate/outbox.h (or the state seam).
 */
#ifndef TG_STATE_OUTBOX_DB_H
#define TG_STATE_OUTBOX_DB_H

#include <sqlite3.h>

#include "tidegate/outbox.h"
#include "../outbox_rules.h"

/* ---- outbox.c ---- */

enum wh_stmt {
	S_BEGIN, S_COMMIT, S_ROLLBACK,
	S_INSERT, S_STATE, S_SET_READY, S_PICK, S_JOB_FOR_LEASE, S_COUNT_ATTEMPT,
	S_LEASE_PUT, S_LEASE_TOKEN, S_LEASE_RENEW, S_LEASE_DEL, S_FINISH, S_NEXT_DUE,
	S_ABANDON, S_GET, S_LIST, S_REDELIVER, S_REDELIVER_SINCE, S_DEPTH, S_LEASED,
	S_PURGE_SEL, S_DELETE, S_FILE_JOB, S_SET_CID,
	S_COUNT
};

struct tg_outbox {
	sqlite3 *db;
	sqlite3_stmt *st[S_COUNT];
	char *path, *dir;
	struct tg_state_rules rules;	/* schedule, jitter, lease (../outbox_rules.h) */
	struct tg_outbox_stats ctr;	/* counters since open (depth unused) */
	void (*notify)(void *arg);	/* a job became due (the worker) */
	void *notify_arg;
};

/** The prepared statement i, reset and unbound, ready for binds. */
sqlite3_stmt *tg_state_ob_stmt(struct tg_outbox *ob, enum wh_stmt i);
/** Step a statement expected to finish (no rows); 0 or -1 with err. */
int tg_state_ob_step_done(struct tg_outbox *ob, sqlite3_stmt *s, struct tg_err *err);
/** BEGIN IMMEDIATE / COMMIT / ROLLBACK; 0 or -1 with err. */
int tg_state_ob_begin(struct tg_outbox *ob, struct tg_err *err);
int tg_state_ob_commit(struct tg_outbox *ob, struct tg_err *err);
void tg_state_ob_rollback(struct tg_outbox *ob);
void tg_state_ob_sql_err(struct tg_outbox *ob, struct tg_err *err, const char *what);
/** Text column or NULL, copied. */
char *tg_state_ob_col_str(sqlite3_stmt *s, int col);
/** tg_outbox_lease with the skip list joined (tg_state_skip_join; NULL:
 * none), as the writer thread's operation carries it. */
int tg_outbox_lease_joined(struct tg_outbox *ob, int64_t now_ms, const char *skip,
    struct tg_outbox_lease **out, struct tg_err *err);
/** The job's state, or TG_OUTBOX_NOT_FOUND / -1. */
int tg_state_ob_job_state(struct tg_outbox *ob, const char *id, struct tg_err *err);
void tg_state_ob_notify(struct tg_outbox *ob);

/* ---- outbox_payload.c ---- */

/** "<dir>/<id>.body" (malloc'd). */
char *tg_state_ob_payload_path(const struct tg_outbox *ob, const char *id);
/** Remove the payload file of id (missing is fine). */
void tg_state_ob_payload_remove(const struct tg_outbox *ob, const char *id);
/** Remove files of the payload directory that no job needs. */
int tg_state_ob_payload_sweep(struct tg_outbox *ob, struct tg_err *err);

#endif
