/*
 * runs_store.h - the run registry and sweep store of the SQLite state
 * backend (src/state/sqlite/registry.c, retention.c, sweep_store.c): the
 * synchronous calls the asynchronous seam (tidegate/state.h) wraps, and
 * the records both speak (struct tg_run, struct tg_sweep …). Callers
 * still using these calls directly run on the loop thread and block on
 * SQLite (one fsync per write transaction with synchronous=FULL); new
 * code goes through tidegate/state.h. Times are milliseconds since the
 * epoch, passed in by the caller; 0 means "none" in every time field.
 *
 * Ownership: the struct tg_runs *r, ids, names and other const char *
 * arguments and queries are borrowed for the call only (strings are
 * copied into the database); what a call hands back is said at the call.
 */
#ifndef TIDEGATE_RUNS_STORE_H
#define TIDEGATE_RUNS_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <yajl/yajl_tree.h>

#include "tidegate/util.h"

/** Page size of run and sweep lists when the query names none, and its cap. */
#define TG_RUNS_LIST_LIMIT	100
#define TG_RUNS_LIST_MAX	1000

/* ---- statuses and the check schedule (registry.c) ---- */

enum tg_run_status {
	TG_RUN_IN_PROGRESS,	/* the vendor is running it */
	TG_RUN_COMPLETED,	/* results can be fetched (until expiry) */
	TG_RUN_FAILED,		/* the vendor gives no reason; see tg_run.failure */
	TG_RUN_EXPIRED,		/* past expires_at: the vendor has deleted it */
	TG_RUN_UNKNOWN,		/* the vendor answered 404 before expiry */
	TG_RUN_NSTATUS
};
/** "IN_PROGRESS", "COMPLETED", … (static, borrowed). */
const char *tg_runs_status_str(enum tg_run_status s);
/** The status named s (exact, upper case; borrowed), or -1. */
int tg_runs_status_parse(const char *s);
/** 1 for every status but IN_PROGRESS: no more checks are made. */
int tg_runs_status_terminal(enum tg_run_status s);

/** The check schedule: 2 s, doubling with every check, capped at 5 min. */
#define TG_RUNS_CHECK_MIN_MS	2000
#define TG_RUNS_CHECK_MAX_MS	300000
/**
 * Delay from the check numbered `checks` (0 for the submission itself)
 * to the next one: 2 s, 4 s, 8 s … 256 s, then 300 s for as long as the
 * run stays in progress.
 */
int64_t tg_runs_check_delay(int checks);

/* Return codes of calls that name one run or sweep (besides 0 and -1). */
#define TG_RUNS_NOT_FOUND	(-2)	/* no such run / sweep: 404 */
#define TG_RUNS_CONFLICT	(-3)	/* its state forbids it: 409 */
#define TG_RUNS_REFUSED		(-4)	/* over an archive cap (reason in err) */

/* ---- the registry (registry.c) ---- */

/** Zero fields take their defaults. */
struct tg_runs_opts {
	const char *path;		/* SQLite file (borrowed for the open); required */
	int64_t retention_ms;		/* expires_at when the vendor gave none; 0: 30 d */
	int64_t grace_ms;		/* rows kept after expires_at; 0: 7 d */
	int64_t archive_keep_ms;	/* archived rows kept after expires_at; 0: 90 d */
	int64_t archive_max_run;	/* bytes of one run's archived results; 0: 16 MiB */
	int64_t archive_max_total;	/* bytes of all archived results; 0: 1 GiB */
	int sync_normal;		/* synchronous=NORMAL instead of FULL */
};

struct tg_runs;
/**
 * Open (creating or upgrading; PRAGMA user_version) the registry in WAL
 * mode. Sweep variants left "submitting" by a stopped process go back to
 * "pending" (the interrupted submission may have reached the vendor:
 * docs/simulations.md). NULL with err, also for a database written by a
 * newer schema; opts is borrowed for the call. The caller owns the
 * registry: tg_runs_close.
 */
struct tg_runs *tg_runs_open(const struct tg_runs_opts *opts, struct tg_err *err);
/** Takes ownership of r and closes it; NULL-safe. */
void tg_runs_close(struct tg_runs *r);

#define TG_RUNS_SHA_LEN	65	/* 64 hex digits and NUL */
/** Lower-case hex SHA-256 of the case bytes sent to the vendor (borrowed);
 * safe on any thread (the validation worker computes it with the check). */
void tg_runs_case_digest(const void *body, size_t len, char out[TG_RUNS_SHA_LEN]);

/** An accepted submission; every string borrowed (copied into the database). */
struct tg_run_new {
	const char *simulation_id;	/* required: the vendor's simulationId */
	const char *api_key;		/* name of the caller's gateway key, or NULL */
	const char *host;		/* required: "primary", "fallback" or an origin */
	const char *case_id;		/* required */
	const char *case_sha256;	/* required: tg_runs_case_digest of the body sent */
	int64_t submitted_at;		/* the vendor's submittedAt; 0: now */
	int64_t expires_at;		/* the vendor's expiresAt; 0: submitted + retention */
	enum tg_run_status status;	/* the vendor's first answer (IN_PROGRESS is 0) */
	const char *validation;		/* the gateway's verdict, e.g. "passed (diff checked)" */
	const char *callback_url;	/* checked by the egress policy first; or NULL */
};
/**
 * Record a submission; durable (committed) when it returns 0, so call it
 * before the client is answered. The first check is due at
 * submitted_at + tg_runs_check_delay(0) while the run is in progress.
 * TG_RUNS_CONFLICT when the simulation id is already recorded, -1 with err.
 * r and run borrowed (run's strings copied).
 */
int tg_runs_add(struct tg_runs *r, const struct tg_run_new *run, int64_t now_ms,
    struct tg_err *err);

/** One run as stored; strings and figures owned by it (tg_run_cleanup). */
struct tg_run {
	char *simulation_id, *api_key, *host, *case_id;
	char case_sha256[TG_RUNS_SHA_LEN];
	enum tg_run_status status;	/* the registry's view (EXPIRED, UNKNOWN included) */
	int vendor_status;		/* last status the vendor reported, or -1 */
	int64_t submitted_at, expires_at, status_at, completed_at, next_check_at;
	int checks;			/* status checks made (answered or not) */
	char *validation;		/* verdict at submission, or NULL */
	char *failure;			/* what the gateway knows of a failure, or NULL */
	char *last_error;		/* why the last check got no answer, or NULL */
	char *callback_url, *sweep_id, *variant;	/* or NULL */
	int archived;			/* results held in the registry */
	int64_t results_size;		/* bytes archived (0 when not) */
	yajl_val figures;		/* key result figures (tg_runs_set_figures), or NULL */
};
/** Free what run owns (run itself is borrowed); NULL-safe. */
void tg_run_cleanup(struct tg_run *run);
/** Takes ownership of an array from tg_runs_list or tg_runs_due: cleans up
 * each run and frees it; NULL-safe. */
void tg_runs_free(struct tg_run *runs, size_t n);

/**
 * What a status check (the tracker's, or a client's GET passed through)
 * found: st from the vendor's answer (tg_runs_status_parse; UNKNOWN for a
 * 404 before expiry), completed_at its completedAt (0: now). Counts the
 * check; while in progress the next is due at now + tg_runs_check_delay.
 * A FAILED run gets its failure text (time to failure, host, validation).
 * A terminal run keeps its first terminal status. Returns 1 when the run
 * became terminal with this call (fire its webhook, settle its sweep),
 * 0 otherwise, TG_RUNS_NOT_FOUND, or -1 with err.
 */
int tg_runs_set_status(struct tg_runs *r, const char *id, enum tg_run_status st,
    int64_t completed_at, int64_t now_ms, struct tg_err *err);
/**
 * A check that got no usable answer (connection failure, 5xx, 429): count
 * it, keep why (borrowed; no secrets) and retry on the schedule, no sooner
 * than retry_after_ms (>= 0, capped at 1 h) when the vendor sent one.
 * 0, TG_RUNS_NOT_FOUND or -1.
 */
int tg_runs_check_failed(struct tg_runs *r, const char *id, const char *why,
    int64_t retry_after_ms, int64_t now_ms, struct tg_err *err);
/**
 * Up to max in-progress runs whose check is due (next_check_at <= now,
 * not past expiry), most overdue first (then oldest submission), into
 * *runs (the caller takes ownership: tg_runs_free) and *n. -1 with err.
 */
int tg_runs_due(struct tg_runs *r, int64_t now_ms, size_t max, struct tg_run **runs,
    size_t *n, struct tg_err *err);
/**
 * Earliest next_check_at of an in-progress run not past expiry at now_ms
 * (arm the tracker's timer for it); INT64_MAX when none.
 */
int64_t tg_runs_next_due(struct tg_runs *r, int64_t now_ms);
/**
 * The run that ended (any terminal status, EXPIRED included) longest ago
 * whose end the gateway has not handled yet (figures, archive, webhook,
 * sweep): 1 with *id (the caller takes ownership: free()) and *st, 0 when
 * none (*id NULL), -1 with err. The
 * mark survives restarts, so an end is handled at least once.
 */
int tg_runs_next_unhandled(struct tg_runs *r, char **id, enum tg_run_status *st,
    struct tg_err *err);
/** The end of run id is handled. 0 or -1 with err. */
int tg_runs_set_handled(struct tg_runs *r, const char *id, struct tg_err *err);

/** One run into *run (the caller's; on 0 it owns what run holds:
 * tg_run_cleanup). 0, TG_RUNS_NOT_FOUND or -1. */
int tg_runs_get(struct tg_runs *r, const char *id, struct tg_run *run, struct tg_err *err);

/** The runs named in ids_json (a JSON array of ids, borrowed) that r
 * holds: *runs (the caller takes ownership: tg_runs_free) and *n. 0, or -1
 * with err. */
int tg_runs_get_many(struct tg_runs *r, const char *ids_json, struct tg_run **runs,
    size_t *n, struct tg_err *err);

/** Filters of the run list; zero fields match everything; strings borrowed. */
struct tg_runs_query {
	const char *status;		/* a tg_runs_status_str name */
	const char *case_id, *sweep_id, *api_key;
	int64_t from_ms, to_ms;		/* submitted_at in [from, to) */
	size_t limit;			/* 0: 100; at most 1000 */
	size_t offset;
};
/**
 * Runs matching q, newest submission first, into *runs (the caller takes
 * ownership: tg_runs_free)
 * and *n; *more (may be NULL) is set when further runs match beyond the
 * page. -1 with err (an unknown status name included: answer 400).
 */
int tg_runs_list(struct tg_runs *r, const struct tg_runs_query *q, struct tg_run **runs,
    size_t *n, int *more, struct tg_err *err);

/**
 * Keep the key figures of a completed run's results (the numeric
 * top-level members of results, borrowed and copied) for run lists and sweep
 * summaries; they outlive the vendor's retention. 0, TG_RUNS_NOT_FOUND,
 * -1 (results not an object).
 */
int tg_runs_set_figures(struct tg_runs *r, const char *id, yajl_val results,
    struct tg_err *err);

/** What the registry holds now, for the gateway's metrics. */
struct tg_runs_stats {
	uint64_t runs[TG_RUN_NSTATUS];	/* rows by status */
	uint64_t archived, archived_bytes;	/* archived runs and their results' bytes */
	uint64_t sweeps_running, sweeps_done;
	uint64_t variants_pending, variants_submitting; /* sweep variants not yet submitted */
};
/** Counts of the registry (a few aggregate queries) into st (borrowed). 0 or
 * -1 with err. */
int tg_runs_stats(struct tg_runs *r, struct tg_runs_stats *st, struct tg_err *err);

/* ---- retention and archive (retention.c) ---- */

/** 1 when run (borrowed) is past its expires_at at now_ms: status and results
 * answer 410. */
int tg_runs_expired(const struct tg_run *run, int64_t now_ms);
/**
 * Store the results body (borrowed) of a COMPLETED run so that it can be
 * served after the vendor deletes it. TG_RUNS_REFUSED with the reason in
 * err when len exceeds archive_max_run or the archive would exceed
 * archive_max_total (nothing stored); TG_RUNS_CONFLICT when the run has
 * not completed; TG_RUNS_NOT_FOUND; -1. Replacing an archive is allowed.
 */
int tg_runs_archive(struct tg_runs *r, const char *id, const void *results, size_t len,
    int64_t now_ms, struct tg_err *err);
/**
 * The archived results of run id into *data (the caller takes ownership:
 * free()) and *len. TG_RUNS_NOT_FOUND when there is no such run or nothing archived.
 */
int tg_runs_archived(struct tg_runs *r, const char *id, void **data, size_t *len,
    struct tg_err *err);
/** Archived bytes and runs now (for metrics). -1 with err. */
int tg_runs_archive_usage(struct tg_runs *r, int64_t *bytes, int64_t *runs,
    struct tg_err *err);
/**
 * Mark every run whose expires_at <= now (and not yet EXPIRED) EXPIRED:
 * no more checks, vendor status kept. Count in *n (may be NULL). Runs of
 * running sweeps may have ended: settle them (tg_runs_sweeps_running).
 * r borrowed; n is the caller's.
 */
int tg_runs_expire(struct tg_runs *r, int64_t now_ms, size_t *n, struct tg_err *err);
/**
 * Delete runs past expires_at + grace (archived ones: + archive_keep),
 * with their archived results, and finished sweeps with no runs left
 * (and past created_at + retention + grace). Counts in *nruns / *nsweeps
 * (either may be NULL; the caller's). r borrowed. -1 with err.
 */
int tg_runs_purge(struct tg_runs *r, int64_t now_ms, size_t *nruns, size_t *nsweeps,
    struct tg_err *err);

/* ---- sweeps (sweep_store.c) ---- */

#define TG_SWEEP_ID_LEN		40	/* "swp_" and 32 hex digits, NUL */
#define TG_SWEEP_CONCURRENCY	4	/* default in-flight variants per sweep */
#define TG_SWEEP_MAX_VARIANTS	1000	/* hard upper bound of one sweep */

enum tg_sweep_state { TG_SWEEP_RUNNING, TG_SWEEP_DONE };
/** "running" / "done" (static, borrowed). */
const char *tg_sweep_state_str(enum tg_sweep_state s);

/** A variant ready to queue: its name and the patched case to submit. From
 * tg_sweep_build its strings are owned (tg_sweep_built_free); in a
 * tg_sweep_new they are borrowed. */
struct tg_sweep_variant_new {
	char *name;
	char *body;			/* serialised case JSON */
	size_t len;
};

/** A new sweep; strings and variants borrowed (copied into the database). */
struct tg_sweep_new {
	const char *api_key;		/* name of the caller's gateway key, or NULL */
	const char *base_case_id;	/* required */
	const char *callback_url;	/* sweep webhook, or NULL */
	int concurrency;		/* variants in flight at once; 0: TG_SWEEP_CONCURRENCY */
	const struct tg_sweep_variant_new *variants;
	size_t nvariants;		/* 1 … TG_SWEEP_MAX_VARIANTS, names unique */
};
/**
 * Store a sweep, state running, with every variant pending and its case
 * held in the registry until submitted. One transaction: durable when it
 * returns 0, with the new id in id (the caller's buffer). r and s
 * borrowed (copied). -1 with err.
 */
int tg_runs_sweep_create(struct tg_runs *r, const struct tg_sweep_new *s, int64_t now_ms,
    char id[TG_SWEEP_ID_LEN], struct tg_err *err);

/** A sweep's own record; strings owned by it (tg_sweep_cleanup). */
struct tg_sweep {
	char id[TG_SWEEP_ID_LEN];
	char *api_key, *base_case_id, *callback_url;
	int concurrency;
	enum tg_sweep_state state;
	size_t nvariants;
	int64_t created_at, done_at;
};
/** Free what s owns (s itself is borrowed); NULL-safe. */
void tg_sweep_cleanup(struct tg_sweep *s);
/** Sweep id into *s (the caller's; on 0 it owns what s holds:
 * tg_sweep_cleanup). 0, TG_RUNS_NOT_FOUND or -1. */
int tg_runs_sweep_get(struct tg_runs *r, const char *id, struct tg_sweep *s,
    struct tg_err *err);
/**
 * Sweeps of api_key (NULL: all) in state ("running", "done"; NULL: both),
 * newest first, at most limit (0: 100; capped at 1000) from offset, into
 * *out (the caller takes ownership: tg_sweeps_free) and *n; *more (may be
 * NULL) when there are more.
 * -1 with err for an unknown state or a database error.
 */
int tg_runs_sweep_list(struct tg_runs *r, const char *api_key, const char *state, size_t limit,
    size_t offset, struct tg_sweep **out, size_t *n, int *more, struct tg_err *err);
/** Takes ownership of the array s[0..n): cleans up each and frees it; NULL-safe. */
void tg_sweeps_free(struct tg_sweep *s, size_t n);

enum tg_variant_state {
	TG_VARIANT_PENDING,	/* queued, case held */
	TG_VARIANT_SUBMITTING,	/* claimed: a POST /simulations is under way */
	TG_VARIANT_SUBMITTED,	/* a run exists (simulation_id) */
	TG_VARIANT_REJECTED	/* the vendor refused it (error) */
};
/** One variant with its run's status; owned strings and figures. */
struct tg_sweep_variant {
	char *name;
	enum tg_variant_state state;
	char case_sha256[TG_RUNS_SHA_LEN];
	char *simulation_id;		/* once submitted */
	enum tg_run_status run_status;	/* valid when submitted */
	char *error;			/* why it was rejected / last submission error */
	char *failure;			/* the run's failure text, or NULL */
	int attempts;			/* submissions tried */
	int64_t submitted_at;
	yajl_val figures;		/* the run's key figures, or NULL */
};
/** "PENDING", "SUBMITTING", "REJECTED", or the run's status once submitted
 * (static, borrowed); v is borrowed. */
const char *tg_sweep_variant_status(const struct tg_sweep_variant *v);
/**
 * The variants of sweep id in their request order into *v (the caller takes
 * ownership: tg_sweep_variants_free) and *n. TG_RUNS_NOT_FOUND or -1.
 */
int tg_runs_sweep_variants(struct tg_runs *r, const char *id, struct tg_sweep_variant **v,
    size_t *n, struct tg_err *err);
/** Takes ownership of the array v[0..n) and frees it with what it owns; NULL-safe. */
void tg_sweep_variants_free(struct tg_sweep_variant *v, size_t n);

/** A claimed variant: what to POST and under which key; owned strings. */
struct tg_sweep_claim {
	char *name;
	char *body;
	size_t len;
	char case_sha256[TG_RUNS_SHA_LEN];
	char *api_key;			/* the sweep's, or NULL */
};
/** Free what c owns (c itself is borrowed); NULL-safe. */
void tg_sweep_claim_cleanup(struct tg_sweep_claim *c);
/**
 * Take the next pending variant of sweep id (request order) for
 * submission when fewer than the sweep's concurrency are in flight
 * (submitting, or submitted and in progress); it turns "submitting".
 * 1 with *c filled (the caller's; it then owns what c holds:
 * tg_sweep_claim_cleanup), 0 when nothing may be submitted now,
 * TG_RUNS_NOT_FOUND, or -1 with err.
 */
int tg_runs_sweep_claim(struct tg_runs *r, const char *id, int64_t now_ms,
    struct tg_sweep_claim *c, struct tg_err *err);
/**
 * The vendor accepted claimed variant name: in one transaction record its
 * run (as tg_runs_add; sweep id and variant name are set here, run's
 * callback_url ignored) and mark the variant submitted, dropping its held
 * case. TG_RUNS_CONFLICT when the variant is not submitting.
 */
int tg_runs_sweep_submitted(struct tg_runs *r, const char *id, const char *name,
    const struct tg_run_new *run, int64_t now_ms, struct tg_err *err);
/**
 * The submission of claimed variant name failed (why borrowed). final:
 * the vendor refused the case (4xx): the variant is rejected for good;
 * else (no answer, 5xx) it is pending again. TG_RUNS_CONFLICT when not
 * submitting.
 */
int tg_runs_sweep_unclaim(struct tg_runs *r, const char *id, const char *name,
    const char *why, int final, int64_t now_ms, struct tg_err *err);
/**
 * Mark sweep id done when every variant has ended: rejected, or submitted
 * with a terminal run. 1 when it became done with this call (fire the
 * sweep webhook), 0 when not yet (or already done), TG_RUNS_NOT_FOUND, -1.
 */
int tg_runs_sweep_settle(struct tg_runs *r, const char *id, int64_t now_ms,
    struct tg_err *err);
/**
 * Ids of the sweeps still running, oldest first (at start-up: continue
 * submitting; after tg_runs_expire: settle). The caller takes ownership of
 * *ids, an array of strings: tg_runs_ids_free.
 */
int tg_runs_sweeps_running(struct tg_runs *r, char ***ids, size_t *n, struct tg_err *err);
/** Takes ownership of ids[0..n) and frees the strings and the array; NULL-safe. */
void tg_runs_ids_free(char **ids, size_t n);

#endif
