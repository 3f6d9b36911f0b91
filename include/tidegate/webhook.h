/*
 * webhook.h - the gateway's own delivery of callbackUrl webhooks: Standard
 * Webhooks signing (sign.c), the egress (SSRF) policy applied to callback
 * URLs (egress.c, resolve.c), the durable outbox in SQLite with payload
 * files beside it (outbox.c, payload.c, admin.c) and the delivery worker
 * on the event loop (deliver.c, worker.c). Called by the gateway: the
 * export route adds jobs and attaches their payloads, the admin listener
 * lists and redelivers, the metrics endpoint reads the counters.
 *
 * The order of calls for one job:
 *   tg_egress_check_url()        at request time, 400 when refused
 *   tg_outbox_add()              job "waiting", durable when it returns
 *   tg_outbox_payload_open() … _write() … _commit()   job "ready"
 *   the worker leases, signs, sends, records the outcome and calls
 *   on_outcome: "delivered", "gone" (410), "dead" (schedule exhausted), or
 *   "ready" again with the next attempt time.
 *
 * Everything runs on one thread; the outbox calls block on SQLite (one
 * fsync per transaction with synchronous=FULL).
 */
#ifndef TIDEGATE_WEBHOOK_H
#define TIDEGATE_WEBHOOK_H

#include <stddef.h>
#include <stdint.h>

#include <yajl/yajl_gen.h>

#include "tidegate/config.h"
#include "tidegate/util.h"

struct event_base;
struct evdns_base;
struct evbuffer;
struct sockaddr;

/* ---- signing (sign.c) ---- */

/** Decoded key length bounds for "whsec_" secrets (the spec asks 24..64). */
#define TG_WEBHOOK_KEY_MIN	24
#define TG_WEBHOOK_KEY_MAX	512

/**
 * Decode "whsec_<base64>" (borrowed) into its key: the caller takes ownership
 * of the buffer (free()), its length in *len. NULL with err for anything malformed; err never
 * quotes the secret.
 */
uint8_t *tg_webhook_secret_decode(const char *secret, size_t *len, struct tg_err *err);

struct tg_webhook_signer;
/**
 * A streaming signer over "id.ts." followed by the body bytes given to
 * _update, one HMAC-SHA256 per secret (secrets borrowed, decoded now; the
 * caller keeps nothing alive). NULL with err when a secret is malformed or
 * id is empty or contains '.'; id is borrowed (copied). The caller owns the
 * signer: tg_webhook_signer_free.
 */
struct tg_webhook_signer *tg_webhook_signer_new(const char *const *secrets, size_t nsecrets,
    const char *id, int64_t ts, struct tg_err *err);
/** s and data are borrowed; data is not kept. */
void tg_webhook_signer_update(struct tg_webhook_signer *s, const void *data, size_t n);
/**
 * The webhook-signature header value, "v1,<base64>" per secret in the
 * order given, space-separated; the caller takes ownership (free()). s is
 * borrowed (still freed with tg_webhook_signer_free). Call once.
 */
char *tg_webhook_signer_final(struct tg_webhook_signer *s);
/** Takes ownership of s and frees it; NULL-safe. */
void tg_webhook_signer_free(struct tg_webhook_signer *s);
/** One-shot signature of a body in memory; secrets, id and body borrowed; the
 * caller takes ownership of the result (free()), or NULL with err. */
char *tg_webhook_sign(const char *const *secrets, size_t nsecrets, const char *id, int64_t ts,
    const void *body, size_t len, struct tg_err *err);
/**
 * Receiver side: 0 when one of the "v1,…" signatures in sig_header matches
 * secret over id.ts.body (constant-time comparison) and, when tolerance_s
 * is above 0, ts lies within tolerance_s of now_s. -1 with the reason in
 * err otherwise. All arguments borrowed.
 */
int tg_webhook_verify(const char *secret, const char *id, const char *ts,
    const char *sig_header, const void *body, size_t len, int64_t now_s, int64_t tolerance_s,
    struct tg_err *err);

/* ---- egress policy (egress.c, resolve.c) ---- */

struct tg_egress;
/**
 * A policy refusing every special-purpose address range (see
 * docs/webhooks.md) except what allow names: CIDRs ("10.0.0.0/8",
 * "fd00::/8"), single addresses, host names ("hooks.internal") and name
 * suffixes ("*.svc.cluster.local"); borrowed, copied; NULL means none.
 * NULL with err naming a bad entry. The caller owns the policy:
 * tg_egress_free.
 */
struct tg_egress *tg_egress_new(const struct tg_strlist *allow, struct tg_err *err);
/** Takes ownership of p and frees it; NULL-safe. */
void tg_egress_free(struct tg_egress *p);
/**
 * The synchronous check at request time. 0 when url may be used: http or
 * https, a host, no user info, and the host either an allowed literal
 * address or a name (whose addresses are checked by DNS at each attempt).
 * -1 with the reason in why (which may quote the URL's host, never its
 * query). p and url are borrowed.
 */
int tg_egress_check_url(const struct tg_egress *p, const char *url, struct tg_err *why);
/**
 * One resolved address of host (may be NULL): 0 when allowed (public, in
 * an allowed CIDR, or host allow-listed by name), -1 with why. p, host and
 * sa are borrowed.
 */
int tg_egress_check_addr(const struct tg_egress *p, const char *host, const struct sockaddr *sa,
    struct tg_err *why);
/**
 * The special-purpose range sa falls in ("loopback", "private", …), or
 * NULL for a public address. IPv6 forms embedding an IPv4 address
 * (mapped, compatible, NAT64, 6to4) report the embedded address's range.
 * Static string (borrowed); sa is borrowed.
 */
const char *tg_egress_range(const struct sockaddr *sa);

struct tg_egress_lookup;
/** addr: the checked address to connect to (IP literal), or NULL and why. Both borrowed. */
typedef void (*tg_egress_cb)(const char *addr, const char *why, void *arg);
/**
 * Resolve host (an IP literal is checked without DNS) through dns and
 * check EVERY address: one refused address refuses the host. cb runs
 * exactly once, from the loop (never inside this call), unless the
 * lookup is cancelled; timeout_ms bounds the DNS wait. p, base and dns
 * are borrowed and must outlive the lookup; host is copied. The lookup
 * is freed after cb returns. The returned handle stays owned by the
 * lookup (borrowed): valid until cb is called or tg_egress_lookup_cancel.
 */
struct tg_egress_lookup *tg_egress_resolve(const struct tg_egress *p, struct event_base *base,
    struct evdns_base *dns, const char *host, int64_t timeout_ms, tg_egress_cb cb, void *arg);
/**
 * No callback after this; l (borrowed) is no longer valid (it is freed now
 * or by evdns). A DNS query still in flight is cancelled and
 * its memory released when evdns reports the cancel, so the loop must run
 * once more before the evdns_base is freed.
 */
void tg_egress_lookup_cancel(struct tg_egress_lookup *l);

/* ---- the outbox (outbox.c, payload.c, admin.c) ---- */

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
/** The file's descriptor for direct writes (borrowed: never close it). */
int tg_outbox_payload_fd(const struct tg_outbox_payload *p);
/** Write all of buf (borrowed) to the file, draining it; -1 with err (then
 * abort). p is borrowed. */
int tg_outbox_payload_write(struct tg_outbox_payload *p, struct evbuffer *buf,
    struct tg_err *err);
/** Write n bytes of data (borrowed, not kept); p is borrowed. -1 with err. */
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
	char *payload_path;		/* the committed payload file */
	int64_t size;			/* its length in bytes */
	int attempt;			/* 1 for the first attempt */
	int64_t expires_at;		/* ms; renew before then */
	int64_t first_delay_ms;		/* attempt 1: ms since the payload was ready; else -1 */
};
/**
 * Lease the most overdue ready job whose next attempt is due at now_ms
 * and that holds no live lease (an expired lease is taken over: at least
 * once after a crash). Counts the attempt. 1 with *out set (the caller takes
 * ownership: tg_outbox_lease_free), 0 when none is due, -1 with err. ob is
 * borrowed.
 */
int tg_outbox_lease(struct tg_outbox *ob, int64_t now_ms, struct tg_outbox_lease **out,
    struct tg_err *err);
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
struct tg_outbox_result {
	int status;			/* HTTP status, 0 when no answer */
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

/* ---- admin (admin.c) ---- */

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
 * A job as JSON into g: id, state, url (query redacted), kind,
 * correlationId, service, apiKey, attempts, lastStatus, lastError, size,
 * leased, and ISO 8601 times (null when not yet). g and job are borrowed.
 */
void tg_outbox_job_json(yajl_gen g, const struct tg_outbox_job *job);
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

/* ---- the delivery worker (deliver.c, worker.c) ---- */

/** Zero fields take their defaults. */
struct tg_webhook_opts {
	int64_t attempt_timeout_ms;	/* DNS, connect, and silence while sending or
					 * awaiting the answer; 0: 15 s */
	size_t max_inflight;		/* attempts at once; 0: 8 */
	int tls_insecure;		/* 1: skip certificate verification (tests only) */
	const char *ca_file;		/* PEM bundle (copied); NULL: system store */
	const char *user_agent;		/* (copied) NULL: "tidegate-webhook" */
};

/** What on_outcome hears after each attempt; everything borrowed for the call. */
struct tg_webhook_outcome {
	const char *id, *kind, *correlation_id, *service, *api_key;	/* NULL when unset */
	const char *host;		/* the callback URL's host (never its query) */
	int attempt;			/* 1-based */
	int status;			/* HTTP status, 0 when none came */
	const char *error;		/* "" on success, else why (no secrets) */
	enum tg_outbox_state state;	/* READY (will retry), DELIVERED, GONE or DEAD */
	int64_t next_at;		/* READY: when the next attempt is due (ms) */
	int64_t duration_ms;		/* this attempt, DNS to answer */
	int64_t first_delay_ms;		/* attempt 1: payload ready → attempt start; else -1 */
};

struct tg_webhook_cbs {
	/**
	 * The whsec_ secrets for ref, current first (older ones during a
	 * rotation): a list borrowed until the call returns, or NULL when ref
	 * is unknown (the attempt fails and retries).
	 */
	const struct tg_strlist *(*secrets)(const char *ref, void *arg);
	/** After each attempt, once its outcome is durable. May be NULL. */
	void (*on_outcome)(const struct tg_webhook_outcome *o, void *arg);
};

struct tg_webhook;
/**
 * Start delivering the outbox's due jobs on base. base, dns, ob and pol
 * are borrowed and must outlive the worker; opts (may be NULL) and cbs are
 * copied (with the strings opts points to); arg is passed to the callbacks.
 * NULL with err; else the caller owns the worker: tg_webhook_free.
 */
struct tg_webhook *tg_webhook_new(struct event_base *base, struct evdns_base *dns,
    struct tg_outbox *ob, const struct tg_egress *pol, const struct tg_webhook_opts *opts,
    const struct tg_webhook_cbs *cbs, void *arg, struct tg_err *err);
/** Look for due jobs now (the outbox already does this on commit and
 * redeliver). w is borrowed. */
void tg_webhook_kick(struct tg_webhook *w);
/**
 * Use pol (borrowed) from the next attempt on, e.g. after a configuration
 * reload. Attempts in flight may still read the previous policy: free it
 * only once tg_webhook_inflight() has been 0 (or keep one spare).
 */
void tg_webhook_set_policy(struct tg_webhook *w, const struct tg_egress *pol);
/**
 * Stop taking jobs; on_drained(arg) runs from the loop once no attempt is
 * in flight (at most about one attempt timeout later). w and arg borrowed.
 */
void tg_webhook_drain(struct tg_webhook *w, void (*on_drained)(void *arg), void *arg);
/** Attempts in flight now; w is borrowed. */
size_t tg_webhook_inflight(const struct tg_webhook *w);
/**
 * Stop at once: attempts in flight are abandoned and their leases
 * released (due again at the next start: at least once). Takes ownership of
 * w and frees it; NULL-safe; not
 * from inside on_outcome. Run the loop once more before freeing dns.
 */
void tg_webhook_free(struct tg_webhook *w);

/* ---- the feature (src/webhook/feature.c) ---- */

struct gw;
struct gw_config;
struct tg_cfg_report;
/** The feature's keys (webhooks.*, keys[].webhook_secret) in c (borrowed;
 * parsed fields filled), problems into rep: gw_config_add_check. */
void tg_webhook_config_check(struct gw_config *c, struct tg_cfg_report *rep);
/**
 * Register the webhook feature with gw (borrowed), configured by gw's
 * running configuration: callbackUrl on exports (deliver and relay modes),
 * the relay endpoint, callback URL checks for other features, the admin
 * API under /webhooks, the delivery worker. 0, or -1 with err (the outbox
 * could not be opened). gw owns the feature from then on (gw_free).
 */
int tg_webhook_register(struct gw *gw, struct tg_err *err);

#endif
