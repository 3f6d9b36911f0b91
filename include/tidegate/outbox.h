/*
 * outbox.h - the webhook outbox of the SQLite state backend
 * (src/state/sqlite/outbox.c, outbox_lease.c, outbox_payload.c,
 * outbox_admin.c): jobs in SQLite, payload files beside the database,
 * leases, the retry schedule and the admin queries. The synchronous calls
 * the asynchronous seam (tidegate/state.h) wraps: only the backend calls
 * them (reads on the loop's connection, writes on its writer thread; one
 * fsync per write transaction with synchronous=FULL). Features and the
 * delivery worker go through tidegate/state.h.
 */
#ifndef TIDEGATE_OUTBOX_H
#define TIDEGATE_OUTBOX_H

#include <stddef.h>
#include <stdint.h>

#include "tidegate/config.h"
#include "tidegate/util.h"

struct evbuffer;

/* ---- jobs (outbox.c, outbox_payload.c) ---- */

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

/** Return codes of the calls that name one job (besides 0 and -1). */
#define TG_OUTBOX_NOT_FOUND	(-2)	/* no such job: 404 */
#define TG_OUTBOX_CONFLICT	(-3)	/* the job's state forbids it: 409 */
#define TG_OUTBOX_OVER_QUOTA	(-4)	/* a payload write over its quota (why in err) */
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

/** Zero fields take their defaults. */
struct tg_outbox_opts {
	const char *path;		/* SQLite file (copied); required */
	const char *payload_dir;	/* (copied) NULL: "<path>.payloads" */
	const int64_t *schedule_ms;	/* delay before attempt i+1, i = 0…n-1 (copied);
					 * NULL: 0, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h */
	size_t nschedule;
	int jitter_pct;			/* each delay grows by a random 0…pct %; 0: 10; -1: none */
	int64_t retry_after_max_ms;	/* cap on a Retry-After; 0: 24 h */
	int64_t lease_ms;		/* attempt lease; 0: 60 s (the worker renews it) */
	int sync_normal;		/* synchronous=NORMAL instead of FULL (docs/webhooks.md) */
};

struct tg_outbox;
/**
 * Open (creating) the database in WAL mode, create the payload directory,
 * and remove payload files no job needs (unfinished writes, delivered or
 * gone jobs, unknown ids). opts is borrowed (what it points to is copied).
 * NULL with err; else the caller owns the outbox: tg_outbox_close.
 */
struct tg_outbox *tg_outbox_open(const struct tg_outbox_opts *opts, struct tg_err *err);
/** Takes ownership of ob and closes it; NULL-safe. Payload writers still
 * open are the caller's bug. */
void tg_outbox_close(struct tg_outbox *ob);

/** A new job; every string borrowed (copied into the database). */
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
/**
 * Store a job in state waiting and write its webhook-id into id. The
 * transaction is committed (durable) when this returns 0; -1 with err. ob
 * and job are borrowed; id is the caller's buffer.
 */
int tg_outbox_add(struct tg_outbox *ob, const struct tg_outbox_new *job, int64_t now_ms,
    char id[TG_WEBHOOK_ID_LEN], struct tg_err *err);

/**
 * Set the correlationId of job id when it was added before the vendor
 * named it (relay mode: the callback URL given to the vendor carries the
 * job's id). ob, id and cid borrowed. 0, TG_OUTBOX_NOT_FOUND or -1 with err.
 */
int tg_outbox_set_correlation_id(struct tg_outbox *ob, const char *id, const char *cid,
    struct tg_err *err);

struct tg_outbox_payload;
/**
 * Start writing the payload of waiting job id into a new file beside the
 * database (an unfinished earlier one is replaced). Returns a writer the
 * caller owns and ends with _commit or _abort; ob (borrowed) must outlive
 * it; id is borrowed (copied).
 * NULL with TG_OUTBOX_NOT_FOUND/CONFLICT/-1 in *rc (rc may be NULL) and err.
 */
struct tg_outbox_payload *tg_outbox_payload_open(struct tg_outbox *ob, const char *id, int *rc,
    struct tg_err *err);
/**
 * From now on a write to p (borrowed) that would take the bytes the
 * outbox holds above q (copied) writes nothing and returns
 * TG_OUTBOX_OVER_QUOTA with the cap in err (then abort); the commit checks
 * the same (bytes written to the fd directly). A writer without a quota
 * is never refused (payloads the gateway makes itself).
 */
void tg_outbox_payload_limit(struct tg_outbox_payload *p, const struct tg_outbox_quota *q);
/** Why waiting job id has no payload yet (why borrowed): its last error
 * until the payload's commit clears it; a job not waiting is left alone.
 * 0 or -1 with err; ob and id borrowed. */
int tg_outbox_note(struct tg_outbox *ob, const char *id, const char *why, struct tg_err *err);
/**
 * The payload bytes ob (borrowed) holds: every job's into *all, those of
 * api_key's jobs (borrowed; NULL: the jobs without a key) into *mine. 0,
 * or -1 with err.
 */
int tg_outbox_usage(struct tg_outbox *ob, const char *api_key, int64_t *all, int64_t *mine,
    struct tg_err *err);
/** The file's descriptor for direct writes (borrowed: never close it). */
int tg_outbox_payload_fd(const struct tg_outbox_payload *p);
/** Write all of buf (borrowed) to the file, draining it; -1 or
 * TG_OUTBOX_OVER_QUOTA with err (then abort). p is borrowed. */
int tg_outbox_payload_write(struct tg_outbox_payload *p, struct evbuffer *buf,
    struct tg_err *err);
/** Write n bytes of data (borrowed, not kept); p is borrowed. -1 or
 * TG_OUTBOX_OVER_QUOTA with err. */
int tg_outbox_payload_append(struct tg_outbox_payload *p, const void *data, size_t n,
    struct tg_err *err);
/**
 * fsync the file, move it into place and mark the job ready, due now;
 * durable when it returns 0. Takes ownership of p: frees it in every case;
 * on -1 the job stays
 * waiting and the file is removed.
 */
int tg_outbox_payload_commit(struct tg_outbox_payload *p, int64_t now_ms, struct tg_err *err);
/** Drop the file; the job stays waiting. Takes ownership of p and frees it;
 * NULL-safe. */
void tg_outbox_payload_abort(struct tg_outbox_payload *p);
/** open + append + commit for a payload in memory; ob, id and data borrowed.
 * Codes as _open. */
int tg_outbox_payload_set(struct tg_outbox *ob, const char *id, const void *data, size_t n,
    int64_t now_ms, struct tg_err *err);
/**
 * A waiting job whose payload will never come (the export failed): dead,
 * with reason (borrowed, stored as its last error); ob and id borrowed. 0, NOT_FOUND,
 * CONFLICT (not waiting) or -1.
 */
int tg_outbox_abandon(struct tg_outbox *ob, const char *id, const char *reason, int64_t now_ms,
    struct tg_err *err);

/* Leases: how the worker takes a job for one attempt. Public so that
 * tests (and any other worker) can drive the outbox without the loop. */

/** One leased attempt; owned by the caller, freed with tg_outbox_lease_free
 * (which frees its strings too). */
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
/**
 * Lease the most overdue ready job whose next attempt is due at now_ms,
 * that holds no live lease (an expired lease is taken over: at least
 * once after a crash) and whose URL's host is not in skip_hosts (borrowed;
 * NULL: none; hosts as tg_outbox_lease.host names them): jobs of a host
 * at its in-flight share wait, uncounted, while others go. Counts the
 * attempt. 1 with *out set (the caller takes ownership:
 * tg_outbox_lease_free), 0 when none is due, -1 with err. ob is borrowed.
 */
int tg_outbox_lease(struct tg_outbox *ob, int64_t now_ms, const struct tg_strlist *skip_hosts,
    struct tg_outbox_lease **out, struct tg_err *err);
/** Push the lease's expiry to now_ms + lease length. -1 when it was lost.
 * ob and l are borrowed. */
int tg_outbox_lease_renew(struct tg_outbox *ob, struct tg_outbox_lease *l, int64_t now_ms,
    struct tg_err *err);
/** Give the lease up without an outcome (shutdown): the job is due again at
 * once. ob and l are borrowed (still freed with tg_outbox_lease_free). */
int tg_outbox_lease_release(struct tg_outbox *ob, const struct tg_outbox_lease *l,
    struct tg_err *err);
/** Takes ownership of l and frees it; NULL-safe. */
void tg_outbox_lease_free(struct tg_outbox_lease *l);

/** What one attempt came to; error borrowed ("" or NULL on success). */
/* An attempt's status when the gateway refused to send it (the egress
 * policy refuses the URL's host now): dead at once, no schedule. */
#define TG_OUTBOX_REFUSED	(-1)

struct tg_outbox_result {
	int status;			/* HTTP status, 0 when no answer,
					 * TG_OUTBOX_REFUSED */
	int64_t retry_after_ms;		/* from Retry-After, -1 when none */
	const char *error;		/* why it failed (no secrets) */
};
/**
 * Record the attempt's outcome under its lease: 2xx delivered, 410 gone,
 * anything else a failure that retries on the schedule (Retry-After
 * stretching the delay, capped) or, after the last attempt, dead. The new
 * state and (for ready) the next attempt time go to *state / *next_at
 * (either may be NULL). -1 with err when the lease was lost (nothing
 * changed) or SQLite failed. ob, l and res are borrowed.
 */
int tg_outbox_complete(struct tg_outbox *ob, const struct tg_outbox_lease *l,
    const struct tg_outbox_result *res, int64_t now_ms, enum tg_outbox_state *state,
    int64_t *next_at, struct tg_err *err);
/**
 * The delay after `failed` failed attempts (1…): the schedule's entry plus
 * jitter, stretched to retry_after_ms (>= 0) up to the cap; -1 when the
 * schedule is exhausted (dead letter). ob is borrowed.
 */
int64_t tg_outbox_delay(const struct tg_outbox *ob, int failed, int64_t retry_after_ms);
/** Earliest time (ms) a job may become leasable; INT64_MAX when none can. ob
 * is borrowed. */
int64_t tg_outbox_next_due(struct tg_outbox *ob);

/* ---- admin (outbox_admin.c) ---- */

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
/**
 * Jobs matching q, newest first, into *jobs (malloc'd array the caller
 * frees with tg_outbox_jobs_free) and *n. -1 with err. ob and q are
 * borrowed.
 */
int tg_outbox_list(struct tg_outbox *ob, const struct tg_outbox_query *q,
    struct tg_outbox_job **jobs, size_t *n, struct tg_err *err);
/** One job into *job (the caller's; on 0 it owns the strings:
 * tg_outbox_job_cleanup). ob and id borrowed. 0, TG_OUTBOX_NOT_FOUND or -1. */
int tg_outbox_get(struct tg_outbox *ob, const char *id, struct tg_outbox_job *job,
    struct tg_err *err);
/**
 * Deliver job id again from scratch: ready, due now_ms, attempt count
 * reset. For ready (pulled forward) and dead jobs; CONFLICT for waiting,
 * leased, delivered and gone jobs (the payload of the last two is gone),
 * NOT_FOUND, or -1. ob and id are borrowed.
 */
int tg_outbox_redeliver(struct tg_outbox *ob, const char *id, int64_t now_ms,
    struct tg_err *err);
/**
 * The same for every job that failed at or after since_ms: dead ones with
 * a payload, and ready ones retrying (not leased). Their number in *n. ob is
 * borrowed.
 */
int tg_outbox_redeliver_since(struct tg_outbox *ob, int64_t since_ms, int64_t now_ms,
    size_t *n, struct tg_err *err);
/** Delete finished jobs (delivered, gone, dead) done before before_ms and their
 * files; their number in *n. ob is borrowed. */
int tg_outbox_purge(struct tg_outbox *ob, int64_t before_ms, size_t *n, struct tg_err *err);

/** Counters for /metrics: depth now, the rest since the outbox was opened. */
struct tg_outbox_stats {
	uint64_t depth[TG_OUTBOX_NSTATES];	/* jobs by state */
	uint64_t leased;			/* live leases (attempts in flight) */
	uint64_t attempts;			/* leases taken */
	uint64_t delivered, gone, dead, retries;	/* outcomes recorded */
	uint64_t first_delay_count;		/* time to first attempt: number … */
	int64_t first_delay_sum_ms;		/* … and sum (ready → first lease) */
};
/** Fill st (borrowed) from ob (borrowed); -1 with err. */
int tg_outbox_get_stats(struct tg_outbox *ob, int64_t now_ms, struct tg_outbox_stats *st,
    struct tg_err *err);
/**
 * Parse a schedule of durations ("0", "5s", "5m" …; list borrowed) into an
 * array for tg_outbox_opts: the caller takes ownership of *ms (free()). -1 with err for an empty list or a
 * bad duration.
 */
int tg_outbox_schedule_parse(const struct tg_strlist *list, int64_t **ms, size_t *n,
    struct tg_err *err);


#endif
