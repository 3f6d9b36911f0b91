/*
 * pg.h - private contract between the files of the PostgreSQL state
 * backend: the backend's handle (a small pool of libpq connections driven
 * by libevent on the loop, a FIFO of operations waiting for a free
 * connection), the operation record every seam call fills, and the
 * prepared statements.
 *
 * Files: backend.c (open, close), pg_conn.c (connections:
 * connect, prepare, send, read, fail and reconnect), pg_schema.c (the
 * schema's migrations and the statements' SQL), pg_err.c (errors without
 * secrets), pg_shared.c (owners, tokens, poll entries), pg_wake.c
 * (LISTEN/NOTIFY wake-ups, the leads held, health), pg_outbox.c (the
 * webhook outbox's jobs and leases), pg_outbox_admin.c (its admin
 * queries), pg_payload.c (its payloads, in chunk rows), pg_runs.c (the run
 * registry), pg_sweeps.c (sweeps), pg_vtable.c (the vtable).
 *
 * Threads: the loop's only. Nothing here blocks once tg_state_open has
 * returned (open itself connects and migrates synchronously, once).
 */
#ifndef TG_STATE_PG_H
#define TG_STATE_PG_H

#include <stdint.h>

#include <libpq-fe.h>

#include "tidegate/map.h"
#include "tidegate/state.h"
#include "../backend.h"
#include "../outbox_rules.h"

#define PG_POOL		2	/* connections per backend */
#define PG_MAXP		16	/* parameters of a statement at most */
#define PG_CHUNK	1048576	/* payload bytes per row at most (pg_schema.c's SQL too) */
#define PG_BACKOFF_MIN	100	/* ms before the first reconnect */
#define PG_BACKOFF_MAX	5000	/* ms between reconnects at most */
#define PG_CONNECT_MS	10000	/* a connection attempt gives up after */

/** The prepared statements (pg_schema.c holds their SQL). */
enum pg_stmt {
	PG_OWNERS_RECORD, PG_OWNERS_LOOKUP, PG_OWNERS_PRUNE, PG_OWNERS_COUNT,
	PG_TOKEN_GET, PG_TOKEN_PUT, PG_TOKEN_INVALIDATE,
	PG_POLL_LEAD, PG_POLL_PUBLISH, PG_POLL_FETCH, PG_POLL_RELEASE, PG_NOTIFY,
	PG_OB_ADD, PG_OB_SET_CID, PG_OB_ABANDON, PG_OB_LEASE, PG_OB_CHUNK, PG_OB_RENEW,
	PG_OB_RELEASE, PG_OB_COMPLETE, PG_OB_NEXT_DUE, PG_OB_STATE, PG_OB_APPEND,
	PG_OB_COMMIT, PG_OB_DROP, PG_OB_SET, PG_OB_GET, PG_OB_LIST, PG_OB_REDELIVER,
	PG_OB_REDELIVER_SINCE, PG_OB_PURGE, PG_OB_STATS, PG_OB_HOLD, PG_OB_ADOPT,
	/* runs and sweeps (pg_runs.c, pg_sweeps.c) */
	PG_RUN_INSERT, PG_RUN_BRIEF, PG_RUN_UPDATE, PG_RUN_COUNT_CHECK, PG_RUN_CHECK_FAILED,
	PG_RUN_GET, PG_RUN_DUE, PG_RUN_NEXT_DUE, PG_RUN_LIST, PG_RUN_UNHANDLED, PG_RUN_HANDLED,
	PG_RUN_FIGURES, PG_RUN_STATS, PG_RUN_ARCHIVE, PG_RUN_ARCHIVED, PG_RUN_ARCHIVE_USAGE,
	PG_RUN_EXPIRE, PG_RUN_PURGE,
	PG_SW_CREATE, PG_SW_GET, PG_SW_LIST, PG_SW_VARIANTS, PG_SW_CLAIM, PG_SW_SUBMITTED,
	PG_SW_UNCLAIM, PG_SW_SETTLE, PG_SW_RUNNING,
	PG_RUN_MANY,
	PG_NSTMT
};

/** What an operation needs configured. */
enum pg_domain { PG_ANY, PG_OWNERS, PG_OUTBOX, PG_RUNS };

enum pg_conn_state { PG_DOWN, PG_CONNECTING, PG_PREPARING, PG_IDLE, PG_BUSY };

struct pg;
struct pg_op;

/** Reads result r (borrowed; NULL when o->res.rc != 0) and calls the
 * operation's callback. */
typedef void (*pg_answer_fn)(struct pg_op *o, const PGresult *r);

/** One connection of the pool. */
struct pg_conn {
	struct pg *pg;
	PGconn *c;			/* NULL while down */
	struct event *io;		/* on PQsocket; what it waits for: */
	short what;
	struct event *timer;		/* reconnect backoff, connect timeout */
	enum pg_conn_state st;
	int nprep;			/* statements prepared so far */
	int backoff_ms;
	struct pg_op *op;		/* in flight (BUSY) */
	PGresult *last;			/* its result so far */
	int listener;			/* LISTENs for the wake-ups (pg_wake.c) */
};

struct pg {
	const struct tg_state_backend *be;	/* this backend's vtable */
	struct event_base *base;
	const char *const *keys;		/* connection parameters (libpq's */
	const char *const *vals;		/* keyword/value arrays; owned) */
	char *secret;				/* the password: never in err or logs */
	char *instance;				/* hostname:pid */
	struct pg_conn conn[PG_POOL];
	struct pg_op *head, **tail;		/* waiting for a connection */
	struct event *kick;			/* dispatch on the next loop turn */
	char down[256];				/* why the last connection failed */
	int owners;				/* ownership configured */
	int outbox;				/* the webhook outbox configured */
	struct tg_state_rules rules;		/* its schedule and lease length */
	struct tg_outbox_stats ctr;		/* its counters since open */
	char *spool;				/* where leased payloads are spooled */
	int64_t keep_ms;
	long long max_rows;
	int runs;				/* run registry and sweeps configured: */
	int64_t retention_ms, grace_ms, archive_keep_ms;
	int64_t archive_max_run, archive_max_total;
	int closing;
	/* wake-ups and health (pg_wake.c) */
	void (*wake)(void *ctx, const char *topic, const char *what);
	void *wake_ctx;
	int heard;			/* the listener has listened before */
	struct tg_map *leads;		/* keys this instance leads -> until (mono ms) */
	unsigned long long queries, lat[TG_STATE_LAT_BUCKETS + 1];
	double lat_sum;
	unsigned long long wakeups, notifies;
};

/** One operation; freed by pg_conn.c once answered or cancelled. */
struct pg_op {
	struct tg_state_op pub;
	struct pg *pg;
	struct pg_op *next;		/* in the FIFO */
	struct pg_conn *conn;		/* in flight on it; NULL while queued */
	int stmt;			/* enum pg_stmt */
	int nparams;
	char *val[PG_MAXP];		/* parameter values (owned; NULL: SQL NULL) */
	int len[PG_MAXP];
	int fmt[PG_MAXP];		/* 0 text, 1 binary */
	int binary;			/* results in binary */
	int cancelled;
	int keep;			/* runs even when cancelled (payload writes) */
	int again;			/* set by answer: queued again for its next step */
	void (*cleanup)(struct pg_op *o);	/* frees p when the op goes; may be NULL */
	void *p;			/* the op's own state (cleanup frees it) */
	int64_t n1, n2;			/* the op's own numbers */
	void *ctx;			/* kept across steps (owned: free()) */
	int64_t sent_us;		/* when it was sent (monotonic µs) */
	pg_answer_fn answer;
	void (*cb)(void);		/* the typed callback, cast back by answer */
	void *arg;
	struct tg_state_res res;
};

/* ---- pg_conn.c ---- */

/** A new operation of pg running statement stmt; cb is the typed
 * callback, cast. The caller owns it until tg_state_pg_submit. */
struct pg_op *tg_state_pg_op_new(struct pg *pg, enum pg_stmt stmt, pg_answer_fn answer,
    void (*cb)(void), void *arg);
/** Parameters, in order: a string (borrowed, copied; NULL: SQL NULL), a
 * number, bytes (borrowed, copied; sent in binary). o borrowed. */
void tg_state_pg_param_str(struct pg_op *o, const char *s);
void tg_state_pg_param_i64(struct pg_op *o, int64_t n);
void tg_state_pg_param_bin(struct pg_op *o, const void *data, size_t len);
/** len bytes drained from buf (borrowed) into a binary parameter of o. */
void tg_state_pg_param_buf(struct pg_op *o, struct evbuffer *buf, size_t len);
/** Forget o's parameters and result and make it run stmt next: an answer
 * (o borrowed) then sets the new parameters and o->again, and o is queued
 * again when the answer returns, its handle unchanged. */
void tg_state_pg_op_reuse(struct pg_op *o, enum pg_stmt stmt);
/** Answer o (ownership taken) now with rc and why (borrowed). */
void tg_state_pg_fail(struct pg_op *o, int rc, const char *why);
/**
 * From o's answer (o borrowed): run stmt next as a step of the same
 * operation, answered by answer; the parameters are dropped for the
 * caller to give again, the handle stays valid, cb is not called yet.
 */
void tg_state_pg_again(struct pg_op *o, enum pg_stmt stmt, pg_answer_fn answer);
/** Takes ownership of o: queued for the first free connection (its
 * handle), or answered at once UNAVAILABLE when no connection is up, the
 * backend is closing, or dom is not configured (NULL). */
struct tg_state_op *tg_state_pg_submit(struct pg_op *o, enum pg_domain dom);
/** The seam's cancel for this backend (op borrowed). */
void tg_state_pg_cancel(struct tg_state_op *op);
/** Start the pool (pg borrowed); takes ownership of first, a connection
 * already made (blocking, at open) and set non-blocking. */
void tg_state_pg_pool_start(struct pg *pg, PGconn *first);
/** Stop the pool (pg borrowed): every operation not answered yet answers
 * UNAVAILABLE now, every connection closes. */
void tg_state_pg_pool_stop(struct pg *pg);
/** The name of prepared statement i (static, borrowed). */
const char *tg_state_pg_stmt_name(int i);

/* ---- pg_wake.c ---- */

#define PG_CHANNEL	"tidegate"	/* the one NOTIFY channel of a fleet */

/** An operation of pg (borrowed) was answered by the server after us µs. */
void tg_state_pg_lat(struct pg *pg, int64_t us);
/** The wake-ups that came on k (borrowed) go to the seam's watches. */
void tg_state_pg_notifies(struct pg_conn *k);
/** k (borrowed) listens again: after the first time, wake-ups may have
 * been lost meanwhile; every watch hears a NULL one. */
void tg_state_pg_listening(struct pg_conn *k);
/** This instance leads key (borrowed) until mono ms (0: no longer). */
void tg_state_pg_lead_held(struct pg *pg, const char *key, int64_t until);
/** c's (borrowed) server notices go to pg's (borrowed) debug log. */
void tg_state_pg_quiet(struct pg *pg, PGconn *c);
/** Free what pg_wake.c keeps in pg (borrowed). */
void tg_state_pg_wake_free(struct pg *pg);
void tg_state_pg_listen(void *impl, void (*wake)(void *ctx, const char *topic,
    const char *what), void *ctx);
void tg_state_pg_health(const void *impl, struct tg_state_health *h);
struct tg_state_op *tg_state_pg_notify(void *impl, const char *topic, const char *what,
    tg_state_done_cb cb, void *arg);

/* ---- pg_schema.c ---- */

/** The SQL of prepared statement i (static, borrowed). */
const char *tg_state_pg_sql(int i);
/** Create or migrate the schema on c (borrowed; blocking, at open only),
 * under an advisory lock: 0, or -1 with err (secret borrowed, scrubbed). */
int tg_state_pg_migrate(PGconn *c, const char *secret, struct tg_err *err);

/* ---- pg_err.c ---- */

/** err = prefix + msg (borrowed) on one line, every occurrence of secret
 * (borrowed; NULL or "": none) replaced by "***". */
void tg_state_pg_err(struct tg_err *err, const char *prefix, const char *msg,
    const char *secret);

/* ---- answers shared by several operations (pg_conn.c) ---- */

void tg_state_pg_answer_done(struct pg_op *o, const PGresult *r);
/** n: the first column of the first row as a number (0 when none). */
void tg_state_pg_answer_num(struct pg_op *o, const PGresult *r);

/* ---- the operations (include/tidegate/state.h; impl is the struct pg *) ---- */

struct tg_state_op *tg_state_pg_owners_record(void *impl, const char *family,
    const char *cid, const char *key, int64_t now_ms, tg_state_done_cb cb, void *arg);
struct tg_state_op *tg_state_pg_owners_lookup(void *impl, const char *family,
    const char *cid, int64_t now_ms, tg_state_str_cb cb, void *arg);
struct tg_state_op *tg_state_pg_owners_prune(void *impl, int64_t now_ms, tg_state_num_cb cb,
    void *arg);
struct tg_state_op *tg_state_pg_owners_count(void *impl, tg_state_num_cb cb, void *arg);
struct tg_state_op *tg_state_pg_token_get(void *impl, const char *service,
    tg_state_token_cb cb, void *arg);
struct tg_state_op *tg_state_pg_token_put(void *impl, const char *service,
    const struct tg_state_token *t, tg_state_done_cb cb, void *arg);
struct tg_state_op *tg_state_pg_token_invalidate(void *impl, const char *service,
    const char *token, tg_state_done_cb cb, void *arg);
struct tg_state_op *tg_state_pg_poll_lead(void *impl, const char *key, int64_t now_ms,
    int64_t ttl_ms, tg_state_num_cb cb, void *arg);
struct tg_state_op *tg_state_pg_poll_publish(void *impl, const char *key,
    const struct tg_state_answer *a, int64_t now_ms, int64_t ttl_ms, tg_state_done_cb cb,
    void *arg);
struct tg_state_op *tg_state_pg_poll_fetch(void *impl, const char *key, int64_t now_ms,
    tg_state_answer_cb cb, void *arg);
struct tg_state_op *tg_state_pg_poll_release(void *impl, const char *key, tg_state_done_cb cb,
    void *arg);

struct tg_state_op *tg_state_pg_outbox_add(void *impl, const struct tg_outbox_new *job,
    int64_t now_ms, tg_state_str_cb cb, void *arg);
struct tg_state_op *tg_state_pg_outbox_set_cid(void *impl, const char *id, const char *cid,
    tg_state_done_cb cb, void *arg);
struct tg_state_op *tg_state_pg_outbox_abandon(void *impl, const char *id, const char *reason,
    int64_t now_ms, tg_state_done_cb cb, void *arg);
struct tg_state_op *tg_state_pg_outbox_lease(void *impl, int64_t now_ms, tg_state_lease_cb cb,
    void *arg);
struct tg_state_op *tg_state_pg_outbox_renew(void *impl, const struct tg_outbox_lease *l,
    int64_t now_ms, tg_state_num_cb cb, void *arg);
struct tg_state_op *tg_state_pg_outbox_release(void *impl, const struct tg_outbox_lease *l,
    tg_state_done_cb cb, void *arg);
struct tg_state_op *tg_state_pg_outbox_complete(void *impl, const struct tg_outbox_lease *l,
    const struct tg_outbox_result *r, int64_t now_ms, tg_state_outcome_cb cb, void *arg);
struct tg_state_op *tg_state_pg_outbox_hold(void *impl, const char *const *ids, size_t n,
    int64_t now_ms, tg_state_done_cb cb, void *arg);
struct tg_state_op *tg_state_pg_outbox_adopt(void *impl, int64_t now_ms, size_t max,
    tg_state_jobs_cb cb, void *arg);
/** The rows of r (borrowed) as jobs to o's tg_state_jobs_cb; a get
 * (o->n1) without a row is NOT_FOUND (pg_outbox_admin.c). */
void tg_state_pg_answer_jobs(struct pg_op *o, const PGresult *r);
struct tg_state_op *tg_state_pg_outbox_next_due(void *impl, tg_state_num_cb cb, void *arg);
struct tg_state_op *tg_state_pg_payload_open(void *impl, const char *id,
    tg_state_payload_cb cb, void *arg);
struct tg_state_op *tg_state_pg_payload_append(struct tg_state_payload *w,
    struct evbuffer *buf, tg_state_done_cb cb, void *arg);
struct tg_state_op *tg_state_pg_payload_commit(struct tg_state_payload *w, int64_t now_ms,
    tg_state_done_cb cb, void *arg);
void tg_state_pg_payload_abort(struct tg_state_payload *w);
struct tg_state_op *tg_state_pg_payload_set(void *impl, const char *id, const void *data,
    size_t len, int64_t now_ms, tg_state_done_cb cb, void *arg);
struct tg_state_op *tg_state_pg_outbox_list(void *impl, const struct tg_outbox_query *q,
    tg_state_jobs_cb cb, void *arg);
struct tg_state_op *tg_state_pg_outbox_get(void *impl, const char *id, tg_state_jobs_cb cb,
    void *arg);
struct tg_state_op *tg_state_pg_outbox_redeliver(void *impl, const char *id, int64_t now_ms,
    tg_state_done_cb cb, void *arg);
struct tg_state_op *tg_state_pg_outbox_redeliver_since(void *impl, int64_t since_ms,
    int64_t now_ms, tg_state_num_cb cb, void *arg);
struct tg_state_op *tg_state_pg_outbox_purge(void *impl, int64_t before_ms,
    tg_state_num_cb cb, void *arg);
struct tg_state_op *tg_state_pg_outbox_stats(void *impl, int64_t now_ms,
    tg_state_outbox_stats_cb cb, void *arg);
/* pg_runs.c */
struct tg_state_op *tg_state_pg_runs_add(void *impl, const struct tg_run_new *run,
    int64_t now_ms, tg_state_done_cb cb, void *arg);
struct tg_state_op *tg_state_pg_runs_set_status(void *impl, const char *id,
    enum tg_run_status status, int64_t completed_at, int64_t now_ms, tg_state_num_cb cb,
    void *arg);
struct tg_state_op *tg_state_pg_runs_check_failed(void *impl, const char *id, const char *why,
    int64_t retry_after_ms, int64_t now_ms, tg_state_done_cb cb, void *arg);
struct tg_state_op *tg_state_pg_runs_due(void *impl, int64_t now_ms, size_t max,
    tg_state_runs_cb cb, void *arg);
struct tg_state_op *tg_state_pg_runs_next_due(void *impl, int64_t now_ms, tg_state_num_cb cb,
    void *arg);
struct tg_state_op *tg_state_pg_runs_next_unhandled(void *impl, tg_state_unhandled_cb cb,
    void *arg);
struct tg_state_op *tg_state_pg_runs_set_handled(void *impl, const char *id,
    tg_state_done_cb cb, void *arg);
struct tg_state_op *tg_state_pg_runs_get(void *impl, const char *id, tg_state_runs_cb cb,
    void *arg);
struct tg_state_op *tg_state_pg_runs_get_many(void *impl, const char *ids_json,
    tg_state_runs_cb cb, void *arg);
struct tg_state_op *tg_state_pg_runs_list(void *impl, const struct tg_runs_query *q,
    tg_state_runs_cb cb, void *arg);
struct tg_state_op *tg_state_pg_runs_set_figures(void *impl, const char *id, yajl_val results,
    tg_state_done_cb cb, void *arg);
struct tg_state_op *tg_state_pg_runs_stats(void *impl, tg_state_runs_stats_cb cb, void *arg);
struct tg_state_op *tg_state_pg_runs_archive(void *impl, const char *id, const void *data,
    size_t len, int64_t now_ms, tg_state_done_cb cb, void *arg);
struct tg_state_op *tg_state_pg_runs_archived(void *impl, const char *id, tg_state_blob_cb cb,
    void *arg);
struct tg_state_op *tg_state_pg_runs_archive_usage(void *impl, tg_state_pair_cb cb, void *arg);
struct tg_state_op *tg_state_pg_runs_expire(void *impl, int64_t now_ms, tg_state_num_cb cb,
    void *arg);
struct tg_state_op *tg_state_pg_runs_purge(void *impl, int64_t now_ms, tg_state_pair_cb cb,
    void *arg);
/** Parameters of run (borrowed) as PG_RUN_INSERT and PG_SW_SUBMITTED take
 * them (13, $4 to $16), for pg (borrowed), in sweep_id (borrowed; NULL:
 * none) at now_ms; o borrowed. */
void tg_state_pg_param_run(struct pg_op *o, const struct pg *pg, const struct tg_run_new *run,
    const char *sweep_id, int64_t now_ms);
/** A run's columns (pg_schema.c's RUN_COLS) of row i of r (borrowed) into
 * run (borrowed; it takes ownership of what it is given). */
void tg_state_pg_run_row(const PGresult *r, int i, struct tg_run *run);
/** Column col of row i of r (borrowed): malloc'd text, NULL for NULL. */
char *tg_state_pg_col_str(const PGresult *r, int i, int col);
/** Column col of row i of r (borrowed) as a number; 0 for NULL. */
int64_t tg_state_pg_col_i64(const PGresult *r, int i, int col);
/** A time parameter of o (borrowed): t, or SQL NULL when t is 0. */
void tg_state_pg_param_time(struct pg_op *o, int64_t t);
/** Answer o (borrowed, rc and err set) before its call returns, and free
 * it (pg_conn.c): the caller's o is gone. NULL, for the call to return. */
struct tg_state_op *tg_state_pg_answer_now(struct pg_op *o);
/** The number of rows a command changed (r borrowed). */
int64_t tg_state_pg_changed(const PGresult *r);

/* pg_sweeps.c */
struct tg_state_op *tg_state_pg_sweep_create(void *impl, const struct tg_sweep_new *s,
    int64_t now_ms, tg_state_str_cb cb, void *arg);
struct tg_state_op *tg_state_pg_sweep_get(void *impl, const char *id, tg_state_sweeps_cb cb,
    void *arg);
struct tg_state_op *tg_state_pg_sweep_list(void *impl, const char *api_key, const char *state,
    size_t limit, size_t offset, tg_state_sweeps_cb cb, void *arg);
struct tg_state_op *tg_state_pg_sweep_variants(void *impl, const char *id,
    tg_state_variants_cb cb, void *arg);
struct tg_state_op *tg_state_pg_sweep_claim(void *impl, const char *id, int64_t now_ms,
    tg_state_claim_cb cb, void *arg);
struct tg_state_op *tg_state_pg_sweep_submitted(void *impl, const char *id, const char *name,
    const struct tg_run_new *run, int64_t now_ms, tg_state_done_cb cb, void *arg);
struct tg_state_op *tg_state_pg_sweep_unclaim(void *impl, const char *id, const char *name,
    const char *why, int final, int64_t now_ms, tg_state_done_cb cb, void *arg);
struct tg_state_op *tg_state_pg_sweep_settle(void *impl, const char *id, int64_t now_ms,
    tg_state_num_cb cb, void *arg);
struct tg_state_op *tg_state_pg_sweep_running(void *impl, tg_state_strs_cb cb, void *arg);
/** The claims instance (borrowed) still holds are pending again, on c
 * (borrowed; blocking, at open only): 0, or -1 with err (secret borrowed,
 * scrubbed). */
int tg_state_pg_sweeps_recover(PGconn *c, const char *instance, const char *secret,
    struct tg_err *err);

/* ---- backend.c ---- */

/** The seam's open and close for this backend (backend.h). */
void *tg_state_pg_open(struct event_base *base, const struct tg_state_opts *opts,
    struct tg_err *err);
void tg_state_pg_close(void *impl);

/* ---- pg_check.c ---- */

/** The seam's check for this backend (backend.h); opts borrowed, out the
 * caller's. */
int tg_state_pg_check(const struct tg_state_opts *opts, struct tg_state_problems *out);

#endif
