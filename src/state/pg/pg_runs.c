/*
 * pg_runs.c - what the PostgreSQL backend's sweeps (pg_sweeps.c) and
 * payloads read and write of rows and runs; the run registry itself is
 * written once (src/state/runs.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/json.h"
#include "pg.h"
#include "../run_rules.h"

#define CB(cb)	((void (*)(void))(cb))

/* ---- helpers shared with pg_sweeps.c ---- */

char *
tg_state_pg_col_str(const PGresult *r, int i, int col)
{
	return PQgetisnull(r, i, col) ? NULL : tg_xstrdup(PQgetvalue(r, i, col));
}

int64_t
tg_state_pg_col_i64(const PGresult *r, int i, int col)
{
	return PQgetisnull(r, i, col) ? 0 : strtoll(PQgetvalue(r, i, col), NULL, 10);
}

int64_t
tg_state_pg_changed(const PGresult *r)
{
	return strtoll(PQcmdTuples((PGresult *)r), NULL, 10);
}

void
tg_state_pg_param_time(struct pg_op *o, int64_t t)
{
	if (t != 0)
		tg_state_pg_param_i64(o, t);
	else
		tg_state_pg_param_str(o, NULL);
}

void
tg_state_pg_param_run(struct pg_op *o, const struct pg *pg, const struct tg_run_new *run,
    const char *sweep_id, int64_t now_ms)
{
	struct tg_state_run_row row;

	tg_state_run_row(run, sweep_id, pg->retention_ms, now_ms, &row);
	tg_state_pg_param_str(o, run->api_key);
	tg_state_pg_param_str(o, run->host);
	tg_state_pg_param_str(o, run->case_id);
	tg_state_pg_param_str(o, run->case_sha256);
	tg_state_pg_param_i64(o, row.submitted_at);
	tg_state_pg_param_i64(o, row.expires_at);
	tg_state_pg_param_str(o, row.status);
	tg_state_pg_param_str(o, row.vendor_status);
	tg_state_pg_param_i64(o, now_ms);
	tg_state_pg_param_time(o, row.completed_at);
	tg_state_pg_param_time(o, row.next_check_at);
	tg_state_pg_param_str(o, run->validation);
	tg_state_pg_param_str(o, row.callback_url);
}
