/*
 * state.h - the state seam: the one way to durable or shared state
 * (webhook outbox jobs, leases and payloads; the run registry and sweeps;
 * correlation ownership; vendor token records; poll-entry leadership and
 * cached terminal answers). Implemented by src/state/ (dispatch, state.c)
 * and its backends: src/state/sqlite/ (one instance, the default) and, for
 * a fleet, a PostgreSQL backend driven by libpq on the event loop. Callers
 * never learn which backend answers.
 *
 * Contract of every operation
 *   struct tg_state_op *tg_state_<domain>_<verb>(st, <args>, cb, arg)
 *   - Arguments are borrowed for the call only: the seam copies what it
 *     needs before returning (an evbuffer handed to an append is drained).
 *   - cb(res, <results>, arg) is called exactly once, on the loop thread,
 *     unless the operation is cancelled first with tg_state_cancel(): then
 *     never, and the seam frees what it holds.
 *   - cb may run before the call returns (the SQLite backend answers reads
 *     at once); the call then returns NULL. Otherwise it returns a handle
 *     (borrowed, owned by the seam) valid until cb has been called.
 *   - Results handed to cb are borrowed for the duration of cb, unless the
 *     callback type says it takes ownership.
 *   - res->rc is 0, TG_STATE_NOT_FOUND, TG_STATE_CONFLICT (the record's
 *     state forbids it), TG_STATE_REFUSED (over a configured cap),
 *     TG_STATE_UNAVAILABLE (the backend cannot be reached, or is closing,
 *     or the domain is not configured: callers answer 503 + Retry-After;
 *     a write answered so was not committed, unless a deadline passed:
 *     below), TG_STATE_UNKNOWN (a write was sent and the connection was
 *     lost, or closed, before its answer: it may have committed; 503 +
 *     Retry-After too, and an answer that promises something must not
 *     say it will not happen) or TG_STATE_ERROR; res->err says why (never
 *     a secret). tg_state_rc_down() tells the two 503 codes.
 *   - A write keyed by an id chosen before it is sent (outbox_add,
 *     sweep_create, runs_add) or an upsert (owners_record) is never
 *     answered UNKNOWN at once: it is sent again on the reconnected
 *     database (every 100 ms while it cannot be reached, for state.timeout
 *     after the loss), which finds the row the first send committed or
 *     commits it: OK then means the record exists. UNKNOWN comes only when
 *     the database did not answer again by then (the record may exist:
 *     outbox_add and sweep_create still give the id it has if it does).
 *     SQLite never answers UNKNOWN: its writer thread runs a write to its
 *     end and answers it, or skips it (UNAVAILABLE, never run).
 *   - Writes on one struct tg_state are answered in the order they were
 *     issued. A read issued after a write's callback sees that write; a
 *     read issued while the write is still pending may not.
 *   - Every operation is answered within its deadline (opts.timeout_ms,
 *     each step of an operation of several steps its own): one the server
 *     has not answered by then answers TG_STATE_UNAVAILABLE, err "…no
 *     answer within N ms (state.timeout)", and may still have committed.
 *     SQLite answers from this process (the loop, or its writer thread)
 *     and keeps no timer.
 *
 * Threads: all functions here are for the loop thread. The SQLite backend
 * answers reads synchronously on the loop (its own read connection, WAL)
 * and runs every write (a commit, an fsync, a payload file write) on one
 * writer thread with its own connections, in FIFO order, answering later
 * on the loop (src/core/worker.c). Token records and poll leadership live
 * in memory with SQLite (one instance always leads; nothing is shared).
 * The PostgreSQL backend (src/state/pg/) opens without touching the
 * network (it connects and migrates on the loop, so that a database down
 * at start only makes the instance degraded) and answers every operation
 * later, from libpq driven on the loop; only an UNAVAILABLE answer (down,
 * an operation timed out and the server has not answered since, closing,
 * a domain it does not hold yet) comes before the call returns. While its
 * first connection is being made, operations wait for it (within their
 * deadline). Its leases carry the payload in an unlinked
 * temporary file (payload_path "/proc/self/fd/N", spool_fd), written from
 * the payload's chunk rows before the lease is answered and gone once the
 * lease is freed.
 *
 * Times are milliseconds since the epoch, passed in by the caller.
 */
#ifndef TIDEGATE_STATE_H
#define TIDEGATE_STATE_H

#include <stddef.h>
#include <stdint.h>

#include <yajl/yajl_tree.h>

#include "tidegate/config.h"
#include "tidegate/run_records.h"
#include "tidegate/util.h"

struct event_base;
struct evbuffer;

/* ---- webhook outbox: records ---- */

enum tg_outbox_state {
	TG_OUTBOX_WAITING,	/* added, no payload yet */
	TG_OUTBOX_READY,	/* payload committed; due at next_at (retrying if attempts > 0) */
	TG_OUTBOX_DELIVERED,	/* a 2xx answer */
	TG_OUTBOX_GONE,		/* 410: the receiver wants no more */
	TG_OUTBOX_DEAD,		/* schedule exhausted, or abandoned while waiting */
	TG_OUTBOX_NSTATES
};
/** "waiting", "ready", … (static, borrowed). */
const char *tg_outbox_state_str(enum tg_outbox_state s);
/** The state named s (borrowed), or -1. */
int tg_outbox_state_parse(const char *s);

/** What the why of a refusal for a key's share (not the cap of all) says,
 * in every backend. */
#define TG_OUTBOX_QUOTA_KEY_WHY	"this API key's share"

/**
 * Caps on the payload bytes the outbox holds: the committed payloads of
 * ready and dead jobs (a dead letter keeps its data for redelivery) and
 * the payloads being written. Zero fields: no cap.
 */
struct tg_outbox_quota {
	int64_t max_bytes;		/* every job's */
	int64_t key_max_bytes;		/* the jobs of one API key (those without
					 * one count as one key) */
};

/** "msg_" and 32 hex digits: the webhook-id, stable across attempts. */
#define TG_WEBHOOK_ID_LEN	40

/** The outbox's settings (tg_state_opts.outbox); zero fields take their
 * defaults, every pointer borrowed for the open. */
struct tg_outbox_opts {
	const char *path;		/* SQLite file; required with SQLite */
	const char *payload_dir;	/* SQLite: the payload files (NULL:
					 * "<path>.payloads"); PostgreSQL: where
					 * leased payloads are spooled (NULL:
					 * $TMPDIR, else /tmp) */
	const int64_t *schedule_ms;	/* delay before attempt i+1, i = 0…n-1;
					 * NULL: 0, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h */
	size_t nschedule;
	int jitter_pct;			/* each delay grows by a random 0…pct %; 0: 10; -1: none */
	int64_t retry_after_max_ms;	/* cap on a Retry-After; 0: 24 h */
	int64_t lease_ms;		/* attempt lease; 0: 60 s (the worker renews it) */
	int sync_normal;		/* SQLite: synchronous=NORMAL instead of FULL
					 * (docs/webhooks.md) */
};
/**
 * Parse a schedule of durations ("0", "5s", "5m" …; list borrowed) into an
 * array for tg_outbox_opts: the caller takes ownership of *ms (free()). -1
 * with err for an empty list or a bad duration.
 */
int tg_outbox_schedule_parse(const struct tg_strlist *list, int64_t **ms, size_t *n,
    struct tg_err *err);

/** A new job; every string borrowed (copied). */
struct tg_outbox_new {
	const char *url;		/* required; checked with tg_egress_check_url first */
	const char *secret_ref;		/* required: the name the worker's secrets callback
					 * resolves; never the secret itself */
	const char *api_key;		/* name of the caller's gateway key, or NULL */
	const char *kind;		/* required, e.g. "export" */
	const char *correlation_id;	/* or NULL */
	const char *service;		/* or NULL */
	const char *content_type;	/* NULL: application/json */
};

/** One leased attempt; owned by the caller, freed with tg_outbox_lease_free
 * (which frees its strings and closes its spool file). */
struct tg_outbox_lease {
	char id[TG_WEBHOOK_ID_LEN];
	char token[33];			/* this lease's secret handle */
	char *url, *secret_ref, *content_type, *kind, *correlation_id, *service, *api_key;
	char *payload_path;		/* the committed payload file (PostgreSQL:
					 * "/proc/self/fd/N" of spool_fd) */
	int spool_fd;			/* PostgreSQL: an unlinked file holding the
					 * payload (owned, closed by lease_free); 0: none */
	int64_t size;			/* its length in bytes */
	int attempt;			/* 1 for the first attempt */
	int64_t expires_at;		/* ms; renew before then */
	int64_t first_delay_ms;		/* attempt 1: ms since the payload was ready; else -1 */
	char *host;			/* the URL's host, as the lease's skip list
					 * names hosts (lower case, no brackets) */
};
/** Takes ownership of l and frees it; NULL-safe. */
void tg_outbox_lease_free(struct tg_outbox_lease *l);

/* An attempt's status when the gateway refused to send it (the egress
 * policy refuses the URL's host now): dead at once, no schedule. */
#define TG_OUTBOX_REFUSED	(-1)

/** What one attempt came to; error borrowed ("" or NULL on success). */
struct tg_outbox_result {
	int status;			/* HTTP status, 0 when no answer,
					 * TG_OUTBOX_REFUSED */
	int64_t retry_after_ms;		/* from Retry-After, -1 when none */
	const char *error;		/* why it failed (no secrets) */
};

/** One job as listed; strings owned by it (tg_outbox_job_cleanup). */
struct tg_outbox_job {
	char id[TG_WEBHOOK_ID_LEN];
	enum tg_outbox_state state;
	char *url, *kind, *correlation_id, *service, *api_key, *secret_ref, *last_error;
	int attempts;
	int last_status;		/* 0: none */
	int leased;			/* an attempt holds a live lease */
	int64_t size;			/* payload bytes, -1 before it exists */
	int64_t created_at, ready_at, next_at, first_attempt_at, last_attempt_at, done_at;
					/* ms; 0 when not (yet) */
};
/** Free the strings j owns (j itself is borrowed). */
void tg_outbox_job_cleanup(struct tg_outbox_job *j);
/** Takes ownership of the array jobs[0..n): cleans up each and frees it. */
void tg_outbox_jobs_free(struct tg_outbox_job *jobs, size_t n);

/** Filters; zero fields match everything. */
struct tg_outbox_query {
	int state;			/* enum tg_outbox_state, or -1 for any */
	int64_t since_ms;		/* created at or after */
	const char *correlation_id;	/* borrowed */
	size_t limit;			/* 0: 100 */
	size_t offset;
};

/** Counters for /metrics: depth now, the rest since the state was opened
 * (this instance's). */
struct tg_outbox_stats {
	uint64_t depth[TG_OUTBOX_NSTATES];	/* jobs by state */
	uint64_t leased;			/* live leases (attempts in flight) */
	uint64_t attempts;			/* leases taken */
	uint64_t delivered, gone, dead, retries;	/* outcomes recorded */
	uint64_t first_delay_count;		/* time to first attempt: number … */
	int64_t first_delay_sum_ms;		/* … and sum (ready → first lease) */
	uint64_t payload_reused;		/* attempts that read a payload this
						 * instance had spooled (PostgreSQL) */
};

/* ---- results ---- */

enum tg_state_rc {
	TG_STATE_OK = 0,
	TG_STATE_NOT_FOUND,	/* no such record: 404 */
	TG_STATE_CONFLICT,	/* its state forbids it: 409 */
	TG_STATE_REFUSED,	/* over a cap (err says which) */
	TG_STATE_UNAVAILABLE,	/* backend unreachable or closing: 503 + Retry-After */
	TG_STATE_ERROR,		/* anything else */
	TG_STATE_UNKNOWN	/* a write sent, its answer lost: it may have
				 * committed (503 + Retry-After, outcome unknown) */
};
/** "ok", "not found", … (static, borrowed). */
const char *tg_state_rc_str(int rc);
/** 1 when rc says the backend could not answer (UNAVAILABLE, UNKNOWN):
 * 503 + Retry-After. */
int tg_state_rc_down(int rc);

/** What every callback gets first (borrowed for the callback). */
struct tg_state_res {
	int rc;			/* enum tg_state_rc */
	struct tg_err err;	/* why, when rc != 0 */
};

struct tg_state;		/* one opened backend */
struct tg_state_op;		/* an operation not answered yet */
struct tg_state_payload;	/* a payload being written */

/* ---- open / close ---- */

/** Which backend and what it keeps; every pointer borrowed for the open. */
/** Correlation ownership's settings (tg_state_opts.owners). */
struct tg_owners_opts {
	const char *path;	/* SQLite file, created if missing (borrowed) */
	int64_t keep_ms;	/* rows older than this no longer count; <= 0: 30 days */
	long long max_rows;	/* rows kept per API key at most; <= 0: 1,000,000 */
};

struct tg_state_opts {
	const char *url;			/* NULL or "": SQLite; "postgresql://…": a fleet */
	const struct tg_runs_opts *runs;	/* run registry and sweeps; NULL: none */
	const struct tg_outbox_opts *outbox;	/* webhook outbox; NULL: none */
	const struct tg_owners_opts *owners;	/* correlation ownership; NULL: none */
	const char *instance;			/* this instance's name (leases, token
						 * records); NULL: none */
	int64_t timeout_ms;			/* an operation's deadline (ms);
						 * <= 0: TG_STATE_TIMEOUT_MS */
	const char *listen_url;			/* PostgreSQL: where the connection that
						 * LISTENs goes; NULL: url, on a
						 * connection of the pool */
	int pooler;				/* PostgreSQL: url leads through a pooler
						 * (TG_STATE_POOLER_*) */
};
/* What lies between a fleet's instances and the server (state.pooler). */
#define TG_STATE_POOLER_NONE		0	/* direct: statements prepared once
						 * per connection */
#define TG_STATE_POOLER_TRANSACTION	1	/* a pooler that may give each
						 * transaction another server
						 * connection: no session state */
#define TG_STATE_TIMEOUT_MS	3000

/**
 * Open the backend opts->url names (base borrowed, must outlive the
 * state; opts borrowed). NULL with err for an unknown scheme, a backend
 * not built in, a URL that does not parse, or a store that cannot be
 * opened (a PostgreSQL server that cannot be reached is not one: the
 * state opens degraded, see tg_state_health). The caller owns the state:
 * tg_state_close.
 */
struct tg_state *tg_state_open(struct event_base *base, const struct tg_state_opts *opts,
    struct tg_err *err);
/** The parts of the state a check names (tg_state_check). */
enum tg_state_part {
	TG_STATE_PART_URL,		/* state.url: the backend and how to reach it */
	TG_STATE_PART_OUTBOX,		/* opts->outbox's file and payload directory */
	TG_STATE_PART_RUNS,		/* opts->runs's file */
	TG_STATE_PART_OWNERS,		/* opts->owners's file */
	TG_STATE_PART_LISTEN_URL,	/* state.listen_url: how to reach the server */
	TG_STATE_NPARTS
};

/** What a check found, per part (bad[i] set: err[i] says why); the
 * caller's, filled by tg_state_check. */
struct tg_state_problems {
	int bad[TG_STATE_NPARTS];
	struct tg_err err[TG_STATE_NPARTS];
};

/**
 * What tg_state_open would refuse in opts (borrowed), found without
 * writing a byte or connecting: the URL's scheme and, for PostgreSQL, its
 * syntax as libpq reads it; for SQLite, each store's directory writable
 * and its file, when it exists, a regular file the process may read and
 * write that opens read-only and passes SQLite's quick_check with a
 * schema version this tidegate knows (a missing file is fine: the open
 * creates it). Access is judged with the effective ids, as the open
 * would. Fills *out (borrowed); 0, or -1 when a part is bad. The start
 * and tidegate -t both call it before anything is opened.
 */
int tg_state_check(const struct tg_state_opts *opts, struct tg_state_problems *out);
/**
 * Takes ownership of st and closes it; NULL-safe. Operations not answered
 * yet are answered now with TG_STATE_UNAVAILABLE (a write among them may
 * have committed). Payload writers still open are the caller's bug.
 */
void tg_state_close(struct tg_state *st);
/** The backend's name ("sqlite", …; static, borrowed); st is borrowed. */
const char *tg_state_backend_name(const struct tg_state *st);
/** The deadline every operation of st (borrowed) is answered within, ms. */
int64_t tg_state_timeout_ms(const struct tg_state *st);
/**
 * Forget op (borrowed; no longer valid after this call): its callback is
 * never called. A write already under way may still commit; a payload
 * append or commit still happens (the payload stays whole), only its
 * callback is dropped. NULL-safe.
 */
void tg_state_cancel(struct tg_state_op *op);

/* ---- callback types (res borrowed; arg is the caller's, passed back) ---- */

/** No result beyond res. */
typedef void (*tg_state_done_cb)(const struct tg_state_res *res, void *arg);
/** A number: a count, a time, or a flag; said at each operation. */
typedef void (*tg_state_num_cb)(const struct tg_state_res *res, int64_t n, void *arg);
/** Two numbers, said at each operation. */
typedef void (*tg_state_pair_cb)(const struct tg_state_res *res, int64_t a, int64_t b,
    void *arg);
/** A string (borrowed; NULL when rc != 0), said at each operation. */
typedef void (*tg_state_str_cb)(const struct tg_state_res *res, const char *s, void *arg);
/** Bytes (borrowed; NULL when rc != 0), said at each operation. */
typedef void (*tg_state_blob_cb)(const struct tg_state_res *res, const void *data, size_t len,
    void *arg);
/** Strings (borrowed, each and the array), said at each operation. */
typedef void (*tg_state_strs_cb)(const struct tg_state_res *res, const char *const *s,
    size_t n, void *arg);

/** A leased job; the callback takes ownership of l (tg_outbox_lease_free);
 * l is NULL when rc != 0 or no job is due. */
typedef void (*tg_state_lease_cb)(const struct tg_state_res *res, struct tg_outbox_lease *l,
    void *arg);
/** The state a completed attempt left its job in, and (READY) its next time. */
typedef void (*tg_state_outcome_cb)(const struct tg_state_res *res,
    enum tg_outbox_state state, int64_t next_at, void *arg);
/** Jobs (borrowed array; a get gives n 1). */
typedef void (*tg_state_jobs_cb)(const struct tg_state_res *res,
    const struct tg_outbox_job *jobs, size_t n, void *arg);
/** Outbox counters (borrowed; NULL when rc != 0). */
typedef void (*tg_state_outbox_stats_cb)(const struct tg_state_res *res,
    const struct tg_outbox_stats *st, void *arg);
/** A payload writer; the callback takes ownership of w (NULL when rc != 0)
 * and ends it with tg_state_payload_commit or tg_state_payload_abort. */
typedef void (*tg_state_payload_cb)(const struct tg_state_res *res,
    struct tg_state_payload *w, void *arg);
/** Runs (borrowed array; a get gives n 1); more: further runs match. */
typedef void (*tg_state_runs_cb)(const struct tg_state_res *res, const struct tg_run *runs,
    size_t n, int more, void *arg);
/** Registry counters (borrowed; NULL when rc != 0). */
typedef void (*tg_state_runs_stats_cb)(const struct tg_state_res *res,
    const struct tg_runs_stats *st, void *arg);
/** A run whose end is not handled yet: id borrowed, NULL when none. */
typedef void (*tg_state_unhandled_cb)(const struct tg_state_res *res, const char *id,
    enum tg_run_status status, void *arg);
/** Sweeps (borrowed array; a get gives n 1); more: further sweeps match. */
typedef void (*tg_state_sweeps_cb)(const struct tg_state_res *res,
    const struct tg_sweep *sweeps, size_t n, int more, void *arg);
/** A sweep's variants (borrowed array). */
typedef void (*tg_state_variants_cb)(const struct tg_state_res *res,
    const struct tg_sweep_variant *v, size_t n, void *arg);
/** A claimed variant (borrowed), NULL when nothing may be submitted now. */
typedef void (*tg_state_claim_cb)(const struct tg_state_res *res,
    const struct tg_sweep_claim *c, void *arg);

/** A vendor token record (strings borrowed). */
struct tg_state_token {
	const char *token;
	int64_t expires_at;	/* ms; 0: unknown */
};
/** The token of a service (borrowed; NULL when rc != 0). */
typedef void (*tg_state_token_cb)(const struct tg_state_res *res,
    const struct tg_state_token *t, void *arg);

/** A poll entry's answer (body and content_type borrowed). */
struct tg_state_answer {
	int status;		/* HTTP status the vendor gave */
	const char *content_type;	/* or NULL */
	const void *body;
	size_t len;
	int64_t expires_at;	/* fetch: wall ms it is fresh until (publish: unused) */
};
/** A cached answer (borrowed; NULL when rc != 0). */
typedef void (*tg_state_answer_cb)(const struct tg_state_res *res,
    const struct tg_state_answer *a, void *arg);

/* ---- webhook outbox: jobs ---- */

/** Store a waiting job (st and job borrowed, copied); cb gets its
 * webhook-id (borrowed) once durable, and with UNKNOWN the id the job
 * has if it was committed (tg_state_outbox_get finds out). */
struct tg_state_op *tg_state_outbox_add(struct tg_state *st, const struct tg_outbox_new *job,
    int64_t now_ms, tg_state_str_cb cb, void *arg);
/** Name the correlationId of job id (st, id, cid borrowed). NOT_FOUND. */
struct tg_state_op *tg_state_outbox_set_cid(struct tg_state *st, const char *id,
    const char *cid, tg_state_done_cb cb, void *arg);
/** A waiting job whose payload will never come: dead with reason (st, id,
 * reason borrowed). NOT_FOUND, CONFLICT (not waiting). */
struct tg_state_op *tg_state_outbox_abandon(struct tg_state *st, const char *id,
    const char *reason, int64_t now_ms, tg_state_done_cb cb, void *arg);
/** Lease the most overdue due job whose URL's host is not in skip_hosts
 * (st, skip_hosts borrowed; NULL: none; see tg_outbox_lease); see
 * tg_state_lease_cb. */
struct tg_state_op *tg_state_outbox_lease(struct tg_state *st, int64_t now_ms,
    const struct tg_strlist *skip_hosts, tg_state_lease_cb cb, void *arg);
/** Push lease l's expiry on (st, l borrowed); cb's n: the new expiry (set
 * l->expires_at to it). CONFLICT when the lease was lost. */
struct tg_state_op *tg_state_outbox_renew(struct tg_state *st, const struct tg_outbox_lease *l,
    int64_t now_ms, tg_state_num_cb cb, void *arg);
/** Give lease l up without an outcome (st, l borrowed): due again at once. */
struct tg_state_op *tg_state_outbox_release(struct tg_state *st,
    const struct tg_outbox_lease *l, tg_state_done_cb cb, void *arg);
/** Record the attempt's outcome under lease l (st, l, r borrowed).
 * CONFLICT when the lease was lost. */
struct tg_state_op *tg_state_outbox_complete(struct tg_state *st,
    const struct tg_outbox_lease *l, const struct tg_outbox_result *r, int64_t now_ms,
    tg_state_outcome_cb cb, void *arg);
/** cb's n: earliest time a job may become leasable, INT64_MAX when none
 * (st borrowed). */
struct tg_state_op *tg_state_outbox_next_due(struct tg_state *st, tg_state_num_cb cb,
    void *arg);

/* ---- webhook outbox: payloads (streamed: bounded memory) ---- */

/** Start writing the payload of waiting job id (st, id borrowed); see
 * tg_state_payload_cb. NOT_FOUND, CONFLICT (not waiting). */
struct tg_state_op *tg_state_payload_open(struct tg_state *st, const char *id,
    tg_state_payload_cb cb, void *arg);
/**
 * Append what buf holds (borrowed; drained now, its bytes moved without a
 * copy) to the payload (w borrowed). cb says they are written. Keep one
 * append in flight per writer (wait for cb) so memory stays bounded by
 * one chunk.
 */
struct tg_state_op *tg_state_payload_append(struct tg_state_payload *w, struct evbuffer *buf,
    tg_state_done_cb cb, void *arg);
/** Make the payload durable and the job ready, due now. Takes ownership of
 * w (gone when this returns). On failure the job stays waiting. */
struct tg_state_op *tg_state_payload_commit(struct tg_state_payload *w, int64_t now_ms,
    tg_state_done_cb cb, void *arg);
/** Drop the payload; the job stays waiting. Takes ownership of w; NULL-safe. */
void tg_state_payload_abort(struct tg_state_payload *w);
/**
 * From now on an append to w (borrowed) that would take the payload bytes
 * the outbox holds (tg_outbox_quota: committed payloads of ready and dead
 * jobs, and payloads being written) above q (copied) stores nothing and
 * answers TG_STATE_REFUSED, err naming the cap: abort the writer then.
 * Writers without a limit (and tg_state_payload_set) are never refused.
 * SQLite holds the count exactly; PostgreSQL sums the payload rows in
 * each append, so appends of several writers (or instances) at once may
 * pass it by at most one append each.
 */
void tg_state_payload_limit(struct tg_state_payload *w, const struct tg_outbox_quota *q);
/** Why waiting job id has no payload yet (st, id, why borrowed): its
 * last error until a payload is committed. A job that no longer waits (or
 * none) is left alone. */
struct tg_state_op *tg_state_outbox_note(struct tg_state *st, const char *id, const char *why,
    tg_state_done_cb cb, void *arg);
/** The payload bytes the outbox holds: cb's a every job's, b those of
 * api_key's jobs (st, api_key borrowed; NULL: the jobs without a key). */
struct tg_state_op *tg_state_outbox_usage(struct tg_state *st, const char *api_key,
    tg_state_pair_cb cb, void *arg);
/** Open, append and commit a small payload in memory (st, id, data
 * borrowed; data copied). Codes as tg_state_payload_open. */
struct tg_state_op *tg_state_payload_set(struct tg_state *st, const char *id,
    const void *data, size_t len, int64_t now_ms, tg_state_done_cb cb, void *arg);

/* ---- webhook outbox: admin ---- */

/** Jobs matching q (st, q borrowed), newest first. */
/**
 * A waiting job's fetch of its export data belongs to the instance that
 * added it (held for the outbox's lease_ms from the add) or adopted it:
 * hold renews this instance's hold on the waiting jobs ids (n of them; all
 * borrowed) from now_ms; adopt gives this instance the waiting jobs whose
 * hold ran out (the instance fetching them died), oldest first, at most
 * max (cb's jobs borrowed). With SQLite (one instance) hold is OK and
 * adopt finds none at once.
 */
struct tg_state_op *tg_state_outbox_hold(struct tg_state *st, const char *const *ids, size_t n,
    int64_t now_ms, tg_state_done_cb cb, void *arg);
struct tg_state_op *tg_state_outbox_adopt(struct tg_state *st, int64_t now_ms, size_t max,
    tg_state_jobs_cb cb, void *arg);
struct tg_state_op *tg_state_outbox_list(struct tg_state *st, const struct tg_outbox_query *q,
    tg_state_jobs_cb cb, void *arg);
/** Job id (st, id borrowed); NOT_FOUND. */
struct tg_state_op *tg_state_outbox_get(struct tg_state *st, const char *id,
    tg_state_jobs_cb cb, void *arg);
/** Deliver job id again from scratch (st, id borrowed). NOT_FOUND, CONFLICT. */
struct tg_state_op *tg_state_outbox_redeliver(struct tg_state *st, const char *id,
    int64_t now_ms, tg_state_done_cb cb, void *arg);
/** The same for every job that failed at or after since_ms (st borrowed);
 * cb's n: their number. */
struct tg_state_op *tg_state_outbox_redeliver_since(struct tg_state *st, int64_t since_ms,
    int64_t now_ms, tg_state_num_cb cb, void *arg);
/** Delete finished jobs done before before_ms (st borrowed); cb's n: their
 * number. */
struct tg_state_op *tg_state_outbox_purge(struct tg_state *st, int64_t before_ms,
    tg_state_num_cb cb, void *arg);
/** Depth by state and the counters (st borrowed). */
struct tg_state_op *tg_state_outbox_stats(struct tg_state *st, int64_t now_ms,
    tg_state_outbox_stats_cb cb, void *arg);

/* ---- webhook outbox: the relay key ---- */

#define TG_STATE_KEY_LEN	32

/**
 * The state's relay key (st borrowed): TG_STATE_KEY_LEN random bytes made
 * once per state (the first call on a store without one makes and stores
 * them; concurrent first calls of a fleet's instances agree on one) and
 * the same for every instance sharing it, across restarts. cb's data is
 * the key (borrowed; never logged). UNAVAILABLE without an outbox.
 */
struct tg_state_op *tg_state_outbox_key(struct tg_state *st, tg_state_blob_cb cb, void *arg);

/* ---- run registry ---- */

/** Record a submission (st, run borrowed, copied); durable when cb runs
 * with 0. CONFLICT: the simulation id is known. */
struct tg_state_op *tg_state_runs_add(struct tg_state *st, const struct tg_run_new *run,
    int64_t now_ms, tg_state_done_cb cb, void *arg);
/** What a status check found (st, id borrowed; tg_runs_set_status). cb's
 * n: 1 when the run became terminal with this call. NOT_FOUND. */
struct tg_state_op *tg_state_runs_set_status(struct tg_state *st, const char *id,
    enum tg_run_status status, int64_t completed_at, int64_t now_ms, tg_state_num_cb cb,
    void *arg);
/** A check without a usable answer (st, id, why borrowed;
 * tg_runs_check_failed). NOT_FOUND. */
struct tg_state_op *tg_state_runs_check_failed(struct tg_state *st, const char *id,
    const char *why, int64_t retry_after_ms, int64_t now_ms, tg_state_done_cb cb, void *arg);
/** Up to max in-progress runs whose check is due (st borrowed). */
struct tg_state_op *tg_state_runs_due(struct tg_state *st, int64_t now_ms, size_t max,
    tg_state_runs_cb cb, void *arg);
/** cb's n: the earliest next check, INT64_MAX when none (st borrowed). */
struct tg_state_op *tg_state_runs_next_due(struct tg_state *st, int64_t now_ms,
    tg_state_num_cb cb, void *arg);
/** The run that ended longest ago whose end is not handled (st borrowed). */
struct tg_state_op *tg_state_runs_next_unhandled(struct tg_state *st,
    tg_state_unhandled_cb cb, void *arg);
/** The end of run id is handled (st, id borrowed). */
struct tg_state_op *tg_state_runs_set_handled(struct tg_state *st, const char *id,
    tg_state_done_cb cb, void *arg);
/** Run id (st, id borrowed); NOT_FOUND. */
struct tg_state_op *tg_state_runs_get(struct tg_state *st, const char *id,
    tg_state_runs_cb cb, void *arg);
/** The runs among ids (n of them; st, ids borrowed) the registry holds, in
 * no particular order (the others are not named). */
struct tg_state_op *tg_state_runs_get_many(struct tg_state *st, const char *const *ids,
    size_t n, tg_state_runs_cb cb, void *arg);
/** Runs matching q (st, q borrowed), newest first; ERROR for an unknown
 * status name (answer 400). */
struct tg_state_op *tg_state_runs_list(struct tg_state *st, const struct tg_runs_query *q,
    tg_state_runs_cb cb, void *arg);
/** Keep the key figures of results (st, id, results borrowed, copied).
 * NOT_FOUND; ERROR when results is not an object. */
struct tg_state_op *tg_state_runs_set_figures(struct tg_state *st, const char *id,
    yajl_val results, tg_state_done_cb cb, void *arg);
/** Registry counters (st borrowed). */
struct tg_state_op *tg_state_runs_stats(struct tg_state *st, tg_state_runs_stats_cb cb,
    void *arg);
/** Archive the results of a completed run (st, id, data borrowed, copied;
 * len is capped by the archive limits). REFUSED over a cap, CONFLICT when
 * the run has not completed, NOT_FOUND. */
struct tg_state_op *tg_state_runs_archive(struct tg_state *st, const char *id,
    const void *data, size_t len, int64_t now_ms, tg_state_done_cb cb, void *arg);
/** The archived results of run id (st, id borrowed); NOT_FOUND when none. */
struct tg_state_op *tg_state_runs_archived(struct tg_state *st, const char *id,
    tg_state_blob_cb cb, void *arg);
/** cb's a, b: archived bytes and runs (st borrowed). */
struct tg_state_op *tg_state_runs_archive_usage(struct tg_state *st, tg_state_pair_cb cb,
    void *arg);
/** Mark runs past expiry EXPIRED (st borrowed); cb's n: their number. */
struct tg_state_op *tg_state_runs_expire(struct tg_state *st, int64_t now_ms,
    tg_state_num_cb cb, void *arg);
/** Delete runs and sweeps past retention (st borrowed); cb's a, b: runs and
 * sweeps removed. */
struct tg_state_op *tg_state_runs_purge(struct tg_state *st, int64_t now_ms,
    tg_state_pair_cb cb, void *arg);

/* ---- sweeps ---- */

/** Store a sweep with every variant pending (st, s borrowed, copied); cb
 * gets its id (borrowed) once durable, and with UNKNOWN the id it has if
 * it was committed. */
struct tg_state_op *tg_state_sweep_create(struct tg_state *st, const struct tg_sweep_new *s,
    int64_t now_ms, tg_state_str_cb cb, void *arg);
/** Sweep id (st, id borrowed); NOT_FOUND. */
struct tg_state_op *tg_state_sweep_get(struct tg_state *st, const char *id,
    tg_state_sweeps_cb cb, void *arg);
/** Sweeps of api_key (NULL: all) in state (NULL: both), newest first (all
 * borrowed). */
struct tg_state_op *tg_state_sweep_list(struct tg_state *st, const char *api_key,
    const char *state, size_t limit, size_t offset, tg_state_sweeps_cb cb, void *arg);
/** The variants of sweep id in request order (st, id borrowed). */
struct tg_state_op *tg_state_sweep_variants(struct tg_state *st, const char *id,
    tg_state_variants_cb cb, void *arg);
/** Claim the next pending variant of sweep id (st, id borrowed). */
struct tg_state_op *tg_state_sweep_claim(struct tg_state *st, const char *id, int64_t now_ms,
    tg_state_claim_cb cb, void *arg);
/** The vendor accepted claimed variant name: record run (all borrowed,
 * copied). CONFLICT when not submitting. */
struct tg_state_op *tg_state_sweep_submitted(struct tg_state *st, const char *id,
    const char *name, const struct tg_run_new *run, int64_t now_ms, tg_state_done_cb cb,
    void *arg);
/** The submission of variant name failed (all borrowed); final: rejected
 * for good. CONFLICT when not submitting. */
struct tg_state_op *tg_state_sweep_unclaim(struct tg_state *st, const char *id,
    const char *name, const char *why, int final, int64_t now_ms, tg_state_done_cb cb,
    void *arg);
/** Mark sweep id done when every variant ended (st, id borrowed); cb's n:
 * 1 when it became done with this call. */
struct tg_state_op *tg_state_sweep_settle(struct tg_state *st, const char *id,
    int64_t now_ms, tg_state_num_cb cb, void *arg);
/** Ids of the sweeps still running, oldest first (st borrowed). */
struct tg_state_op *tg_state_sweep_running(struct tg_state *st, tg_state_strs_cb cb,
    void *arg);

/* ---- correlation ownership ---- */

/** Job cid of family was created by key (all borrowed, copied). */
struct tg_state_op *tg_state_owners_record(struct tg_state *st, const char *family,
    const char *cid, const char *key, int64_t now_ms, tg_state_done_cb cb, void *arg);
/** cb's s: the key that created job cid of family (all borrowed);
 * NOT_FOUND when no live record names it. */
struct tg_state_op *tg_state_owners_lookup(struct tg_state *st, const char *family,
    const char *cid, int64_t now_ms, tg_state_str_cb cb, void *arg);
/** The owner of a job (borrowed; NULL when rc != 0) and whether the
 * caller now leads the poll key asked for (1) or not (0). */
typedef void (*tg_state_owner_lead_cb)(const struct tg_state_res *res, const char *owner,
    int led, void *arg);
/**
 * tg_state_owners_lookup and, in the same statement, tg_state_poll_lead of
 * lead_key for ttl_ms (a fleet's first poll of a job in one round trip):
 * the lead is taken only when the caller may read the job, caller_key
 * naming its owner (NULL: a caller without a key, and no owner recorded);
 * else led is 0. One instance always leads a job it may read. A lead
 * taken and not used is given up with tg_state_poll_release. All borrowed.
 */
struct tg_state_op *tg_state_owners_lookup_lead(struct tg_state *st, const char *family,
    const char *cid, int64_t now_ms, const char *caller_key, const char *lead_key,
    int64_t ttl_ms, tg_state_owner_lead_cb cb, void *arg);
/** Remove records past their age or count (st borrowed); cb's n: removed. */
struct tg_state_op *tg_state_owners_prune(struct tg_state *st, int64_t now_ms,
    tg_state_num_cb cb, void *arg);
/** cb's n: records held (st borrowed). */
struct tg_state_op *tg_state_owners_count(struct tg_state *st, tg_state_num_cb cb, void *arg);

/* ---- quotas: the fleet's figures of the quota engine's limits ----
 * (src/gateway/quota*.c leases its shares here; every name borrowed,
 * copied.) A rate: interval_us and burst as rate.h's, times in µs since
 * the epoch. A day: day is the UTC day (days since the epoch). Slots: the
 * units this instance (state.instance) holds until expires_ms, renewed by
 * each take (n may be 0); expired holdings free themselves. */

/** Take up to n units of rate name at now_us: cb's a the units granted
 * (0..n), b the fleet's TAT after it. */
struct tg_state_op *tg_state_quota_rate_take(struct tg_state *st, const char *name,
    int64_t interval_us, int64_t burst, int64_t n, int64_t now_us, tg_state_pair_cb cb,
    void *arg);
/** Give back n units of rate name (borrowed) taken and not used (the TAT
 * moves back, never behind now_us). */
struct tg_state_op *tg_state_quota_rate_give(struct tg_state *st, const char *name,
    int64_t interval_us, int64_t burst, int64_t n, int64_t now_us, tg_state_done_cb cb,
    void *arg);
/** Take up to n of the limit units of day name (borrowed): cb's a
 * granted, b the day's units used after it (fleet-wide). */
struct tg_state_op *tg_state_quota_day_take(struct tg_state *st, const char *name,
    int64_t day, int64_t limit, int64_t n, tg_state_pair_cb cb, void *arg);
/** Give back n units of day name (borrowed; never below 0). */
struct tg_state_op *tg_state_quota_day_give(struct tg_state *st, const char *name,
    int64_t day, int64_t n, tg_state_done_cb cb, void *arg);
/** Hold up to n more of the limit slots of name (borrowed), the holding
 * now lasting until expires_ms: cb's a granted, b this instance's holding after it. */
struct tg_state_op *tg_state_quota_slots_take(struct tg_state *st, const char *name,
    int64_t limit, int64_t n, int64_t now_ms, int64_t expires_ms, tg_state_pair_cb cb,
    void *arg);
/** Hold n fewer slots of name (borrowed; never below 0). */
struct tg_state_op *tg_state_quota_slots_give(struct tg_state *st, const char *name,
    int64_t n, tg_state_done_cb cb, void *arg);
/** This instance asks for demand of rate name (borrowed; limit units a
 * second for the fleet; both in thousandths of a unit a second) until
 * expires_ms (at or before now_ms: it withdraws): cb's a the share it is
 * given (same unit; 0 when withdrawing; at most what the other live
 * shares leave of limit), b how many instances hold a live share, this
 * one included. */
struct tg_state_op *tg_state_quota_share(struct tg_state *st, const char *name,
    int64_t demand, int64_t limit, int64_t now_ms, int64_t expires_ms, tg_state_pair_cb cb,
    void *arg);
/** This instance counts as live until until_ms (st borrowed): cb's n the
 * live instances (this one included) at now_ms. */
struct tg_state_op *tg_state_quota_members(struct tg_state *st, int64_t now_ms,
    int64_t until_ms, tg_state_num_cb cb, void *arg);

/* ---- the fleet's instances (fleet.c) ---- */

/** One instance as the state knows it (all borrowed for the callback). */
struct tg_state_instance {
	const char *name;		/* its state.instance */
	int self;			/* the instance that asked */
	int64_t live_until_ms;		/* its quota membership counts until; 0: none */
	const char *const *leads;	/* poll entry keys it leads now (lead:runs, a
					 * token login, polls), sorted, at most
					 * TG_STATE_FLEET_LEADS */
	size_t nleads;
	int64_t lead_count;		/* all it leads now; -1: unknown */
	int64_t webhook_leases;		/* outbox jobs it holds a live lease on; -1: unknown */
	int64_t claims;			/* sweep variants it is submitting; -1: unknown */
};
#define TG_STATE_FLEET_LEADS	100
#define TG_STATE_FLEET_MAX	1000	/* instances listed at most */
/** Instances (borrowed array), sorted by name. */
typedef void (*tg_state_fleet_cb)(const struct tg_state_res *res,
    const struct tg_state_instance *v, size_t n, void *arg);
/** The instances seen in st's (borrowed) state at now_ms: every quota
 * member, every holder of a live lead, webhook lease or sweep claim, and
 * this instance, each with what it holds. One instance (SQLite) records
 * none of it: cb gets this instance alone, its figures unknown (-1). */
struct tg_state_op *tg_state_fleet_list(struct tg_state *st, int64_t now_ms,
    tg_state_fleet_cb cb, void *arg);

/* ---- vendor token records ---- */

/** The token held for service (st, service borrowed); NOT_FOUND when none. */
struct tg_state_op *tg_state_token_get(struct tg_state *st, const char *service,
    tg_state_token_cb cb, void *arg);
/** Hold t for service, replacing any (all borrowed, copied). */
struct tg_state_op *tg_state_token_put(struct tg_state *st, const char *service,
    const struct tg_state_token *t, tg_state_done_cb cb, void *arg);
/** A vendor refused token (all borrowed; NULL: whatever is held): drop the
 * record if it still holds that token. NOT_FOUND when it holds another
 * (already replaced) or none. */
struct tg_state_op *tg_state_token_invalidate(struct tg_state *st, const char *service,
    const char *token, tg_state_done_cb cb, void *arg);

/* ---- poll entries and leases ---- */

/**
 * Become (or stay) the instance leading key for ttl_ms (st, key borrowed):
 * cb's n is 1 when this instance leads (the key was free, its lead had
 * run out, or this instance held it: renewed), 0 when another instance
 * leads or an answer published for key is still fresh (use it:
 * tg_state_poll_fetch). Keys name poll entries, and leases: "login:<svc>"
 * (who logs in), "lead:<name>" (who runs a fleet-wide task).
 */
struct tg_state_op *tg_state_poll_lead(struct tg_state *st, const char *key, int64_t now_ms,
    int64_t ttl_ms, tg_state_num_cb cb, void *arg);
/** Give key's lead up, if this instance holds it (st, key borrowed). */
struct tg_state_op *tg_state_poll_release(struct tg_state *st, const char *key,
    tg_state_done_cb cb, void *arg);
/** Publish key's answer for ttl_ms to the other instances, give its lead
 * up, and wake their watches of topic "poll" with key (all borrowed,
 * copied when kept). */
struct tg_state_op *tg_state_poll_publish(struct tg_state *st, const char *key,
    const struct tg_state_answer *a, int64_t now_ms, int64_t ttl_ms, tg_state_done_cb cb,
    void *arg);
/** The answer an instance published for key, still fresh (st, key
 * borrowed; a->expires_at says until when); NOT_FOUND when none is. */
struct tg_state_op *tg_state_poll_fetch(struct tg_state *st, const char *key, int64_t now_ms,
    tg_state_answer_cb cb, void *arg);

/* ---- wake-ups across instances ---- */

/** A wake-up on topic (borrowed): what (borrowed) changed, as the other
 * instance said; NULL when anything may have (wake-ups may have been lost:
 * the backend's listening connection was made again). */
typedef void (*tg_state_wake_cb)(const char *topic, const char *what, void *arg);
struct tg_state_watch;

/** Tell the other instances that what changed on topic (all borrowed;
 * topic a short lowercase word, what ≤ 1000 bytes). With SQLite there is
 * nobody to tell: OK at once. Delivery is best effort: a watcher must
 * still look on its own timer. */
struct tg_state_op *tg_state_notify(struct tg_state *st, const char *topic, const char *what,
    tg_state_done_cb cb, void *arg);
/** Call cb on every other instance's wake-up on topic (st, topic
 * borrowed) until tg_state_unwatch. The state owns the watch; with
 * SQLite it never fires. */
struct tg_state_watch *tg_state_watch(struct tg_state *st, const char *topic,
    tg_state_wake_cb cb, void *arg);
/** Stop w (taken; NULL-safe); st borrowed. */
void tg_state_unwatch(struct tg_state *st, struct tg_state_watch *w);

/* ---- health ---- */

#define TG_STATE_LAT_BUCKETS	8	/* query latency buckets */

/** What the backend says of itself (filled by tg_state_health). */
struct tg_state_health {
	const char *backend;		/* "sqlite", "postgresql" (static) */
	int up;				/* it can take operations now: connected,
					 * and the server answered since the
					 * last connection lost or operation
					 * timed out */
	char reason[256];		/* why not (no secret), when !up */
	int shared;			/* other instances share it (a fleet) */
	int listening;			/* other instances' wake-ups are heard now */
	int conns_ready;		/* connections that can take work now (a
					 * fleet's; 0 for one instance) */
	unsigned long long queries;	/* operations answered by the server */
	double lat_le[TG_STATE_LAT_BUCKETS];	/* the buckets' upper bounds, seconds */
	unsigned long long lat[TG_STATE_LAT_BUCKETS + 1];	/* per bucket, +Inf last */
	double lat_sum;			/* seconds */
	unsigned long long wakeups;	/* other instances' wake-ups received */
	unsigned long long pipelined;	/* operations sent behind others still in
					 * flight on their connection */
	unsigned long long notifies;	/* wake-ups sent */
	size_t leases;			/* leads this instance holds now */
};

/** Fill h (borrowed) from st (borrowed); never blocks, no I/O. */
void tg_state_health(const struct tg_state *st, struct tg_state_health *h);

#endif
