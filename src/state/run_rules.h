/*
 * run_rules.h - the rules of the run registry and sweeps that every state
 * backend applies alike (run_rules.c): what a new run and a new sweep must
 * hold, the text recorded when the vendor reports a run FAILED, the names
 * of a variant's states, and the page sizes of lists. Private to
 * src/state/; used by sqlite/registry.c, sqlite/sweep_store.c and the
 * PostgreSQL backend (pg/pg_runs.c, pg/pg_sweeps.c).
 */
#ifndef TG_STATE_RUN_RULES_H
#define TG_STATE_RUN_RULES_H

#include <stddef.h>
#include <stdint.h>

#include <yajl/yajl_tree.h>

#include "tidegate/run_records.h"

/** The columns a new run is stored with (strings static or borrowed from
 * the run the row was made of). */
struct tg_state_run_row {
	const char *status, *vendor_status;	/* vendor_status NULL: none */
	const char *callback_url;		/* NULL: none (a sweep's run) */
	int64_t submitted_at, expires_at, completed_at, next_check_at;	/* 0: NULL */
};

/** The registry's limits, ms and bytes (tg_state_runs_limits). */
struct tg_state_runs_limits {
	int64_t retention_ms, grace_ms, archive_keep_ms;
	int64_t archive_max_run, archive_max_total;
};

/** What a status check changes in an in-progress run. */
struct tg_state_run_change {
	const char *status, *vendor_status;	/* static; vendor_status NULL: keep */
	int64_t completed_at, next_check_at;	/* 0: keep / NULL */
	char *failure;				/* owned (free()); NULL: keep */
	int terminal;				/* the run ends with this change */
};

/** The limits opts (borrowed) sets, each 0 replaced by its default. */
void tg_state_runs_limits(const struct tg_runs_opts *opts, struct tg_state_runs_limits *l);
/** 0, or -1 with err when run (borrowed) lacks what a run needs. */
int tg_state_run_new_ok(const struct tg_run_new *run, struct tg_err *err);
/** 0, or -1 with err when s (borrowed) is not a sweep that can be stored. */
int tg_state_sweep_new_ok(const struct tg_sweep_new *s, struct tg_err *err);
/**
 * The failure text of a run submitted at submitted_at on host (borrowed;
 * NULL: unknown) with gateway validation (borrowed; NULL: not recorded)
 * that failed at failed_at. malloc'd: the caller takes ownership.
 */
char *tg_state_run_failure_text(int64_t submitted_at, const char *host, const char *validation,
    int64_t failed_at);
/**
 * The row of run (borrowed; row borrows its strings) as it is stored in
 * sweep sweep_id (borrowed; NULL: none) at now_ms, expiring retention_ms
 * after its submission when the vendor gave no expiry.
 */
void tg_state_run_row(const struct tg_run_new *run, const char *sweep_id, int64_t retention_ms,
    int64_t now_ms, struct tg_state_run_row *row);
/**
 * The change status st brings to an in-progress run submitted at
 * submitted_at on host, validated as validation (both borrowed; NULL:
 * unknown), checked checks times, at now_ms (completed_at: the vendor's
 * time, 0: now). c borrowed; the caller frees c->failure.
 */
void tg_state_run_change(enum tg_run_status st, int64_t completed_at, int64_t now_ms,
    int64_t submitted_at, const char *host, const char *validation, int checks,
    struct tg_state_run_change *c);
/** The delay before the check after checks checks when this one had no
 * usable answer and the vendor asked for retry_after_ms (0: nothing). */
int64_t tg_state_run_retry_delay(int checks, int64_t retry_after_ms);
/** What a failed check records as its error: why (borrowed) or a default
 * (static, borrowed). */
const char *tg_state_run_check_error(const char *why);
/**
 * The key figures of results (borrowed): its numbers, as a JSON object.
 * malloc'd (the caller takes ownership), or NULL with err when results is
 * not an object; id (borrowed) names the run in err.
 */
char *tg_state_run_figures(const char *id, yajl_val results, struct tg_err *err);
/**
 * 0, or -1 with err when results of len bytes for run id (borrowed) break
 * a cap: more than max_run bytes, or a total over max_total once the run's
 * old results (old bytes) give way, used bytes being archived now.
 */
int tg_state_archive_caps(const char *id, size_t len, int64_t old, int64_t used,
    int64_t max_run, int64_t max_total, struct tg_err *err);
/** The counter of st (borrowed) a row named name (borrowed: "sweeps
 * running", "variants pending", …) counts, or NULL. */
uint64_t *tg_state_runs_stats_counter(struct tg_runs_stats *st, const char *name);
/** What an unclaimed variant records as its error (static or why, borrowed). */
const char *tg_state_variant_unclaim_error(const char *why);
/** The stored name of variant state s ("pending", …; static, borrowed). */
const char *tg_state_variant_state_name(enum tg_variant_state s);
/** A stored variant state name (borrowed) as its enum; unknown: rejected. */
int tg_state_variant_state_parse(const char *s);
/** The page a runs list asks for (0: default, capped). */
size_t tg_state_runs_page(size_t limit);
/** The page a sweeps list asks for (0: default, capped). */
size_t tg_state_sweeps_page(size_t limit);
/** 0, or -1 with err when status (borrowed; NULL: any) is no run status. */
int tg_state_runs_status_ok(const char *status, struct tg_err *err);
/** 0, or -1 with err when state (borrowed; NULL: any) is no sweep state. */
int tg_state_sweep_state_ok(const char *state, struct tg_err *err);

#endif
