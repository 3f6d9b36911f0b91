/*
 * runs.h - what the run registry's domain files share (private to
 * src/state/): a run's columns and its insert, written once for runs.c
 * (a run recorded on its own) and sweeps.c (a sweep's variant's run), and
 * the run registry's limits kept in the opened state.
 */
#ifndef TG_STATE_RUNS_H
#define TG_STATE_RUNS_H

#include "db.h"
#include "run_rules.h"

/* A run's columns as tg_state_run_read reads them. */
#define TG_RUN_COLS "simulation_id, api_key, host, case_id, case_sha256, status," \
	" vendor_status, submitted_at, expires_at, status_at, completed_at, next_check_at," \
	" checks, validation, failure, last_error, callback_url, sweep_id, variant," \
	" CAST(archived AS integer), results_size, figures"
/* $1 simulation_id, $2 sweep_id, $3 variant, then tg_state_run_params'. */
#define TG_RUN_INTO "runs (simulation_id, api_key, host, case_id, case_sha256," \
	" submitted_at, expires_at, status, vendor_status, status_at, completed_at," \
	" next_check_at, validation, callback_url, sweep_id, variant)"
#define TG_RUN_VALUES "(CAST($1 AS text), CAST($4 AS text), CAST($5 AS text)," \
	" CAST($6 AS text), CAST($7 AS text), CAST($8 AS bigint), CAST($9 AS bigint)," \
	" CAST($10 AS text), CAST($11 AS text), CAST($12 AS bigint), CAST($13 AS bigint)," \
	" CAST($14 AS bigint), CAST($15 AS text), CAST($16 AS text), CAST($2 AS text)," \
	" CAST($3 AS text))"

/** The run's parameters $4 to $16 of run (borrowed) in sweep_id
 * (borrowed; NULL: none) at now_ms, with the registry's retention of st
 * (borrowed); q borrowed. */
void tg_state_run_params(struct tg_db_q *q, const struct tg_state *st,
    const struct tg_run_new *run, const char *sweep_id, int64_t now_ms);
/** Row i of r (borrowed, TG_RUN_COLS) into run (the caller's: it takes
 * ownership of what it is given, tg_runs_free). */
void tg_state_run_read(const struct tg_db_rows *r, int i, struct tg_run *run);
/** A status column: the status, or -1 for NULL or an unknown one. */
int tg_state_run_status_at(const struct tg_db_rows *r, int i, int col);

#endif
