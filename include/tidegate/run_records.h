/*
 * run_records.h - the records of the run registry and sweeps as the state
 * seam (tidegate/state.h) speaks them: struct tg_run, struct tg_sweep …,
 * the run statuses and the check schedule, and the calls that free or
 * name them (src/state/run_records.c). Times are milliseconds since the
 * epoch; 0 means "none" in every time field. Strings a record owns are
 * freed by its cleanup call; borrowed ones are said at the field.
 */
#ifndef TIDEGATE_RUN_RECORDS_H
#define TIDEGATE_RUN_RECORDS_H

#include <stddef.h>
#include <stdint.h>

#include <yajl/yajl_tree.h>

#include "tidegate/util.h"

/** Page size of run and sweep lists when the query names none, and its cap. */
#define TG_RUNS_LIST_LIMIT	100
#define TG_RUNS_LIST_MAX	1000

/* ---- statuses and the check schedule ---- */

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

/* ---- the registry ---- */

/** The registry's settings (tg_state_opts.runs); zero fields take their
 * defaults. */
struct tg_runs_opts {
	const char *path;		/* SQLite file (borrowed for the open); required */
	int64_t retention_ms;		/* expires_at when the vendor gave none; 0: 30 d */
	int64_t grace_ms;		/* rows kept after expires_at; 0: 7 d */
	int64_t archive_keep_ms;	/* archived rows kept after expires_at; 0: 90 d */
	int64_t archive_max_run;	/* bytes of one run's archived results; 0: 16 MiB */
	int64_t archive_max_total;	/* bytes of all archived results; 0: 1 GiB */
	int sync_normal;		/* synchronous=NORMAL instead of FULL */
};

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
/** Takes ownership of the array runs[0..n): cleans up each run and frees
 * it; NULL-safe. */
void tg_runs_free(struct tg_run *runs, size_t n);

/** Filters of the run list; zero fields match everything; strings borrowed. */
struct tg_runs_query {
	const char *status;		/* a tg_runs_status_str name */
	const char *case_id, *sweep_id, *api_key;
	int64_t from_ms, to_ms;		/* submitted_at in [from, to) */
	size_t limit;			/* 0: 100; at most 1000 */
	size_t offset;
};

/** What the registry holds now, for the gateway's metrics. */
struct tg_runs_stats {
	uint64_t runs[TG_RUN_NSTATUS];	/* rows by status */
	uint64_t archived, archived_bytes;	/* archived runs and their results' bytes */
	uint64_t sweeps_running, sweeps_done;
	uint64_t variants_pending, variants_submitting; /* sweep variants not yet submitted */
};

/* ---- retention ---- */

/** 1 when run (borrowed) is past its expires_at at now_ms: status and results
 * answer 410. */
int tg_runs_expired(const struct tg_run *run, int64_t now_ms);

/* ---- sweeps ---- */

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

#endif
