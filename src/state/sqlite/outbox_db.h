/*
 * outbox_db.h - private contract between the outbox files of the SQLite
 * state backend: the SQLite handle and prepared statements (outbox.c),
 * leases (outbox_lease.c), payload files (outbox_payload.c) and admin
 * queries (outbox_admin.c). Not for other modules: they call
 * include/tidegate/outbox.h (or the state seam).
 */
#ifndef TG_STATE_OUTBOX_DB_H
#define TG_STATE_OUTBOX_DB_H

#include <sys/queue.h>

#include <sqlite3.h>

#include "tidegate/map.h"
#include "tidegate/outbox.h"
#include "../outbox_rules.h"

/* ---- outbox.c ---- */

enum wh_stmt {
	S_BEGIN, S_COMMIT, S_ROLLBACK,
	S_INSERT, S_STATE, S_SET_READY, S_PICK, S_JOB_FOR_LEASE, S_COUNT_ATTEMPT,
	S_LEASE_PUT, S_LEASE_TOKEN, S_LEASE_RENEW, S_LEASE_DEL, S_FINISH, S_NEXT_DUE,
	S_ABANDON, S_GET, S_LIST, S_REDELIVER, S_REDELIVER_SINCE, S_DEPTH, S_LEASED,
	S_PURGE_SEL, S_DELETE, S_FILE_JOB, S_SET_CID, S_HELD, S_JOB_KEY, S_NOTE,
	S_COUNT
};

/* A payload being written (outbox_payload.c); its bytes count toward the
 * quota (outbox_quota.c) while it is open. */
struct tg_outbox_payload {
	TAILQ_ENTRY(tg_outbox_payload) entry;	/* ob->writers */
	struct tg_outbox *ob;
	char id[TG_WEBHOOK_ID_LEN];
	char *key;			/* the job's API key, or NULL */
	char *part;
	int fd;
	int64_t size;
	struct tg_outbox_quota q;	/* zero: none */
};
TAILQ_HEAD(ob_writers, tg_outbox_payload);

/* The committed payload bytes of ready and dead jobs, summed from the
 * database when first needed and kept in step from then on. */
struct ob_held {
	int valid;
	int64_t all;
	struct tg_map *by_key;		/* API key ("" for none) -> int64_t bytes */
};

struct tg_outbox {
	sqlite3 *db;
	sqlite3_stmt *st[S_COUNT];
	char *path, *dir;
	struct tg_state_rules rules;	/* schedule, jitter, lease (../outbox_rules.h) */
	struct tg_outbox_stats ctr;	/* counters since open (depth unused) */
	struct ob_writers writers;	/* payloads being written */
	struct ob_held held;
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

/* ---- outbox_quota.c ---- */

/** Committed payload bytes of key's jobs (borrowed; NULL: none) change by
 * delta (a commit, a delivery). */
void tg_state_ob_held_add(struct tg_outbox *ob, const char *key, int64_t delta);
/** Sum them from the database again when next needed (a purge). */
void tg_state_ob_held_forget(struct tg_outbox *ob);
/** Free what the count holds (close). */
void tg_state_ob_held_free(struct tg_outbox *ob);
/** 0 when n more bytes of p fit its quota; TG_OUTBOX_OVER_QUOTA or -1 with err. */
int tg_state_ob_room(struct tg_outbox_payload *p, int64_t n, struct tg_err *err);
/** The API key of job id (a copy the caller frees), or NULL. */
char *tg_state_ob_job_key(struct tg_outbox *ob, const char *id);

/* ---- outbox_payload.c ---- */

/** "<dir>/<id>.body" (malloc'd). */
char *tg_state_ob_payload_path(const struct tg_outbox *ob, const char *id);
/** Remove the payload file of id (missing is fine). */
void tg_state_ob_payload_remove(const struct tg_outbox *ob, const char *id);
/** Remove files of the payload directory that no job needs. */
int tg_state_ob_payload_sweep(struct tg_outbox *ob, struct tg_err *err);

#endif
