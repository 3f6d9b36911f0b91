/*
 * pg_runs.c - the run registry in the PostgreSQL state backend
 * (include/tidegate/state.h, "run registry"), with the semantics of
 * sqlite/registry.c and retention.c: the rules both share are
 * src/state/run_rules.c's, the SQL is pg_schema.c's.
 *
 * Most operations are one prepared statement. A status check (set_status,
 * check_failed) takes two steps of one operation (tg_state_pg_again): it
 * reads the run, computes the change as SQLite does, and applies it only
 * to the run as it read it (same status, same number of checks); when
 * another instance changed the run in between, it reads it again. An
 * archive is one call of tidegate_run_archive, which holds an advisory
 * lock while it counts the archive's bytes, so that instances together
 * stay within its total.
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

static int
col_status(const PGresult *r, int i, int col)
{
	return PQgetisnull(r, i, col) ? -1 : tg_runs_status_parse(PQgetvalue(r, i, col));
}

void
tg_state_pg_run_row(const PGresult *r, int i, struct tg_run *run)
{
	const char *fig;
	int st = col_status(r, i, 5);

	memset(run, 0, sizeof(*run));
	run->simulation_id = tg_state_pg_col_str(r, i, 0);
	run->api_key = tg_state_pg_col_str(r, i, 1);
	run->host = tg_state_pg_col_str(r, i, 2);
	run->case_id = tg_state_pg_col_str(r, i, 3);
	snprintf(run->case_sha256, sizeof(run->case_sha256), "%s", PQgetvalue(r, i, 4));
	run->status = st < 0 ? TG_RUN_UNKNOWN : st;
	run->vendor_status = col_status(r, i, 6);
	run->submitted_at = tg_state_pg_col_i64(r, i, 7);
	run->expires_at = tg_state_pg_col_i64(r, i, 8);
	run->status_at = tg_state_pg_col_i64(r, i, 9);
	run->completed_at = tg_state_pg_col_i64(r, i, 10);
	run->next_check_at = tg_state_pg_col_i64(r, i, 11);
	run->checks = (int)tg_state_pg_col_i64(r, i, 12);
	run->validation = tg_state_pg_col_str(r, i, 13);
	run->failure = tg_state_pg_col_str(r, i, 14);
	run->last_error = tg_state_pg_col_str(r, i, 15);
	run->callback_url = tg_state_pg_col_str(r, i, 16);
	run->sweep_id = tg_state_pg_col_str(r, i, 17);
	run->variant = tg_state_pg_col_str(r, i, 18);
	run->archived = tg_state_pg_col_i64(r, i, 19) != 0;
	run->results_size = tg_state_pg_col_i64(r, i, 20);
	fig = PQgetisnull(r, i, 21) ? NULL : PQgetvalue(r, i, 21);
	run->figures = fig != NULL ? tg_json_parse(fig, strlen(fig), NULL) : NULL;
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

/* ---- add ---- */

static void
answer_add(struct pg_op *o, const PGresult *r)
{
	if (o->res.rc == TG_STATE_CONFLICT)
		tg_err_set(&o->res.err, "simulation %s is already recorded", o->val[0]);
	((tg_state_done_cb)o->cb)(&o->res, o->arg);
}

struct tg_state_op *
tg_state_pg_runs_add(void *impl, const struct tg_run_new *run, int64_t now_ms,
    tg_state_done_cb cb, void *arg)
{
	struct pg *pg = impl;
	struct pg_op *o = tg_state_pg_op_new(pg, PG_RUN_INSERT, answer_add, CB(cb), arg);

	if (tg_state_run_new_ok(run, &o->res.err) != 0) {
		o->res.rc = TG_STATE_ERROR;
		return tg_state_pg_answer_now(o);
	}
	tg_state_pg_param_str(o, run->simulation_id);
	tg_state_pg_param_str(o, NULL);
	tg_state_pg_param_str(o, NULL);
	tg_state_pg_param_run(o, pg, run, NULL, now_ms);
	return tg_state_pg_submit(o, PG_RUNS);
}

/* ---- status checks: read the run, then change it as it was read ---- */

/* What a status check keeps across its steps (o->ctx). */
struct check {
	enum tg_run_status status;	/* set_status: what the vendor said */
	int64_t completed_at, retry_after_ms, now_ms;
	int failed;			/* check_failed, why: */
	char why[];
};

static struct pg_op *
check_new(struct pg *pg, pg_answer_fn answer, void (*cb)(void), void *arg, const char *id,
    const char *why)
{
	struct pg_op *o = tg_state_pg_op_new(pg, PG_RUN_BRIEF, answer, cb, arg);
	const char *w = tg_state_run_check_error(why);
	struct check *c = tg_xcalloc(1, sizeof(*c) + strlen(w) + 1);

	memcpy(c->why, w, strlen(w) + 1);
	o->ctx = c;
	tg_state_pg_param_str(o, id);
	return o;
}

/* Read the run again (another instance changed it in between). */
static void
reread(struct pg_op *o, pg_answer_fn answer)
{
	char *id = tg_xstrdup(o->val[0]);

	tg_state_pg_again(o, PG_RUN_BRIEF, answer);
	tg_state_pg_param_str(o, id);
	free(id);
}

static int
brief_found(struct pg_op *o, const PGresult *r)
{
	if (r == NULL)
		return 0;
	if (PQntuples(r) > 0)
		return 1;
	o->res.rc = TG_STATE_NOT_FOUND;
	tg_err_set(&o->res.err, "no simulation run %s", o->val[0]);
	return 0;
}

static void answer_status_brief(struct pg_op *o, const PGresult *r);

static void
answer_status_done(struct pg_op *o, const PGresult *r)
{
	struct check *c = o->ctx;

	if (r != NULL && o->stmt == PG_RUN_UPDATE && tg_state_pg_changed(r) == 0) {
		reread(o, answer_status_brief);
		return;
	}
	((tg_state_num_cb)o->cb)(&o->res, r != NULL && o->stmt == PG_RUN_UPDATE &&
	    tg_runs_status_terminal(c->status), o->arg);
}

/* brief: status, submitted_at, host, validation, checks. */
static void
answer_status_brief(struct pg_op *o, const PGresult *r)
{
	struct check *k = o->ctx;
	struct tg_state_run_change c;
	char *id, *was;
	int st, checks;

	if (!brief_found(o, r)) {
		((tg_state_num_cb)o->cb)(&o->res, 0, o->arg);
		return;
	}
	id = tg_xstrdup(o->val[0]);
	st = col_status(r, 0, 0);
	if (st >= 0 && tg_runs_status_terminal(st)) {	/* final: only counted */
		tg_state_pg_again(o, PG_RUN_COUNT_CHECK, answer_status_done);
		tg_state_pg_param_str(o, id);
		free(id);
		return;
	}
	checks = (int)tg_state_pg_col_i64(r, 0, 4);
	was = tg_xstrdup(PQgetvalue(r, 0, 0));
	tg_state_run_change(k->status, k->completed_at, k->now_ms, tg_state_pg_col_i64(r, 0, 1),
	    PQgetisnull(r, 0, 2) ? NULL : PQgetvalue(r, 0, 2),
	    PQgetisnull(r, 0, 3) ? NULL : PQgetvalue(r, 0, 3), checks, &c);
	tg_state_pg_again(o, PG_RUN_UPDATE, answer_status_done);
	tg_state_pg_param_str(o, id);
	tg_state_pg_param_str(o, c.status);
	tg_state_pg_param_str(o, c.vendor_status);
	tg_state_pg_param_i64(o, k->now_ms);
	tg_state_pg_param_time(o, c.completed_at);
	tg_state_pg_param_time(o, c.next_check_at);
	tg_state_pg_param_str(o, c.failure);
	tg_state_pg_param_str(o, was);
	tg_state_pg_param_i64(o, checks);
	free(c.failure);
	free(was);
	free(id);
}

struct tg_state_op *
tg_state_pg_runs_set_status(void *impl, const char *id, enum tg_run_status status,
    int64_t completed_at, int64_t now_ms, tg_state_num_cb cb, void *arg)
{
	struct pg_op *o = check_new(impl, answer_status_brief, CB(cb), arg, id, NULL);
	struct check *c = o->ctx;

	c->status = status;
	c->completed_at = completed_at;
	c->now_ms = now_ms;
	if ((unsigned)status >= TG_RUN_NSTATUS) {
		o->res.rc = TG_STATE_ERROR;
		tg_err_set(&o->res.err, "run status %d is not a status", (int)status);
		return tg_state_pg_answer_now(o);
	}
	return tg_state_pg_submit(o, PG_RUNS);
}

static void answer_failed_brief(struct pg_op *o, const PGresult *r);

static void
answer_failed_done(struct pg_op *o, const PGresult *r)
{
	if (r != NULL && tg_state_pg_changed(r) == 0) {
		reread(o, answer_failed_brief);
		return;
	}
	((tg_state_done_cb)o->cb)(&o->res, o->arg);
}

static void
answer_failed_brief(struct pg_op *o, const PGresult *r)
{
	struct check *k = o->ctx;
	char *id;
	int checks;

	if (!brief_found(o, r)) {
		((tg_state_done_cb)o->cb)(&o->res, o->arg);
		return;
	}
	id = tg_xstrdup(o->val[0]);
	checks = (int)tg_state_pg_col_i64(r, 0, 4);
	tg_state_pg_again(o, PG_RUN_CHECK_FAILED, answer_failed_done);
	tg_state_pg_param_str(o, id);
	tg_state_pg_param_str(o, k->why);
	tg_state_pg_param_i64(o, k->now_ms + tg_state_run_retry_delay(checks,
	    k->retry_after_ms));
	tg_state_pg_param_i64(o, checks);
	free(id);
}

struct tg_state_op *
tg_state_pg_runs_check_failed(void *impl, const char *id, const char *why,
    int64_t retry_after_ms, int64_t now_ms, tg_state_done_cb cb, void *arg)
{
	struct pg_op *o = check_new(impl, answer_failed_brief, CB(cb), arg, id, why);
	struct check *c = o->ctx;

	c->retry_after_ms = retry_after_ms;
	c->now_ms = now_ms;
	return tg_state_pg_submit(o, PG_RUNS);
}

/* ---- reading runs ---- */

/* The rows of r as runs, at most limit (0: all; more when there are more). */
static void
answer_rows(struct pg_op *o, const PGresult *r, size_t limit, int none_is_missing)
{
	struct tg_run *runs = NULL;
	size_t i, n = r != NULL ? (size_t)PQntuples(r) : 0;
	int more = limit > 0 && n > limit;

	if (more)
		n = limit;
	if (r != NULL && n == 0 && none_is_missing) {
		o->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&o->res.err, "no simulation run %s", o->val[0]);
	}
	if (n > 0)
		runs = tg_xcalloc(n, sizeof(*runs));
	for (i = 0; i < n; i++)
		tg_state_pg_run_row(r, (int)i, &runs[i]);
	((tg_state_runs_cb)o->cb)(&o->res, runs, n, more, o->arg);
	tg_runs_free(runs, n);
}

static void
answer_get(struct pg_op *o, const PGresult *r)
{
	answer_rows(o, r, 0, 1);
}

static void
answer_due(struct pg_op *o, const PGresult *r)
{
	answer_rows(o, r, 0, 0);
}

/* $7 asked for one row past the page (none: refused before it was sent). */
static void
answer_list(struct pg_op *o, const PGresult *r)
{
	answer_rows(o, r, r != NULL ? (size_t)strtoll(o->val[6], NULL, 10) - 1 : 0, 0);
}

struct tg_state_op *
tg_state_pg_runs_get(void *impl, const char *id, tg_state_runs_cb cb, void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_RUN_GET, answer_get, CB(cb), arg);

	tg_state_pg_param_str(o, id);
	return tg_state_pg_submit(o, PG_RUNS);
}

struct tg_state_op *
tg_state_pg_runs_get_many(void *impl, const char *ids_json, tg_state_runs_cb cb, void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_RUN_MANY, answer_due, CB(cb), arg);

	tg_state_pg_param_str(o, ids_json);
	return tg_state_pg_submit(o, PG_RUNS);
}

struct tg_state_op *
tg_state_pg_runs_due(void *impl, int64_t now_ms, size_t max, tg_state_runs_cb cb, void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_RUN_DUE, answer_due, CB(cb), arg);

	tg_state_pg_param_i64(o, now_ms);
	tg_state_pg_param_i64(o, max > 0 && max < INT64_MAX ? (int64_t)max : INT64_MAX);
	return tg_state_pg_submit(o, PG_RUNS);
}

struct tg_state_op *
tg_state_pg_runs_list(void *impl, const struct tg_runs_query *q, tg_state_runs_cb cb,
    void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_RUN_LIST, answer_list, CB(cb), arg);
	size_t limit = tg_state_runs_page(q->limit);

	if (tg_state_runs_status_ok(q->status, &o->res.err) != 0) {
		o->res.rc = TG_STATE_ERROR;
		return tg_state_pg_answer_now(o);
	}
	tg_state_pg_param_str(o, q->status);
	tg_state_pg_param_str(o, q->case_id);
	tg_state_pg_param_str(o, q->sweep_id);
	tg_state_pg_param_str(o, q->api_key);
	tg_state_pg_param_i64(o, q->from_ms);
	tg_state_pg_param_i64(o, q->to_ms > 0 ? q->to_ms : INT64_MAX);
	tg_state_pg_param_i64(o, (int64_t)limit + 1);
	tg_state_pg_param_i64(o, q->offset < INT64_MAX ? (int64_t)q->offset : INT64_MAX);
	return tg_state_pg_submit(o, PG_RUNS);
}

static void
answer_next_due(struct pg_op *o, const PGresult *r)
{
	int64_t due = INT64_MAX;

	if (r != NULL && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
		due = tg_state_pg_col_i64(r, 0, 0);
	((tg_state_num_cb)o->cb)(&o->res, due, o->arg);
}

struct tg_state_op *
tg_state_pg_runs_next_due(void *impl, int64_t now_ms, tg_state_num_cb cb, void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_RUN_NEXT_DUE, answer_next_due, CB(cb),
	    arg);

	tg_state_pg_param_i64(o, now_ms);
	return tg_state_pg_submit(o, PG_RUNS);
}

static void
answer_unhandled(struct pg_op *o, const PGresult *r)
{
	const char *id = NULL;
	int st = TG_RUN_IN_PROGRESS;

	if (r != NULL && PQntuples(r) > 0) {
		id = PQgetvalue(r, 0, 0);
		st = col_status(r, 0, 1);
		st = st >= 0 ? st : TG_RUN_UNKNOWN;
	}
	((tg_state_unhandled_cb)o->cb)(&o->res, id, (enum tg_run_status)st, o->arg);
}

struct tg_state_op *
tg_state_pg_runs_next_unhandled(void *impl, tg_state_unhandled_cb cb, void *arg)
{
	return tg_state_pg_submit(tg_state_pg_op_new(impl, PG_RUN_UNHANDLED, answer_unhandled,
	    CB(cb), arg), PG_RUNS);
}

struct tg_state_op *
tg_state_pg_runs_set_handled(void *impl, const char *id, tg_state_done_cb cb, void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_RUN_HANDLED, tg_state_pg_answer_done,
	    CB(cb), arg);

	tg_state_pg_param_str(o, id);
	return tg_state_pg_submit(o, PG_RUNS);
}

static void
answer_figures(struct pg_op *o, const PGresult *r)
{
	if (r != NULL && tg_state_pg_changed(r) == 0) {
		o->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&o->res.err, "no simulation run %s", o->val[0]);
	}
	((tg_state_done_cb)o->cb)(&o->res, o->arg);
}

struct tg_state_op *
tg_state_pg_runs_set_figures(void *impl, const char *id, yajl_val results,
    tg_state_done_cb cb, void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_RUN_FIGURES, answer_figures, CB(cb), arg);
	char *fig = tg_state_run_figures(id, results, &o->res.err);

	if (fig == NULL) {
		o->res.rc = TG_STATE_ERROR;
		return tg_state_pg_answer_now(o);
	}
	tg_state_pg_param_str(o, id);
	tg_state_pg_param_str(o, fig);
	free(fig);
	return tg_state_pg_submit(o, PG_RUNS);
}

/* Rows: a status (its runs, archived, archived bytes) or a counter name. */
static void
answer_stats(struct pg_op *o, const PGresult *r)
{
	struct tg_runs_stats st;
	uint64_t *c;
	int i, s;

	memset(&st, 0, sizeof(st));
	for (i = 0; r != NULL && i < PQntuples(r); i++) {
		if ((s = col_status(r, i, 0)) >= 0) {
			st.runs[s] = (uint64_t)tg_state_pg_col_i64(r, i, 1);
			st.archived += (uint64_t)tg_state_pg_col_i64(r, i, 2);
			st.archived_bytes += (uint64_t)tg_state_pg_col_i64(r, i, 3);
		} else if ((c = tg_state_runs_stats_counter(&st, PQgetvalue(r, i, 0))) != NULL) {
			*c = (uint64_t)tg_state_pg_col_i64(r, i, 1);
		}
	}
	((tg_state_runs_stats_cb)o->cb)(&o->res, r != NULL ? &st : NULL, o->arg);
}

struct tg_state_op *
tg_state_pg_runs_stats(void *impl, tg_state_runs_stats_cb cb, void *arg)
{
	return tg_state_pg_submit(tg_state_pg_op_new(impl, PG_RUN_STATS, answer_stats, CB(cb),
	    arg), PG_RUNS);
}

/* ---- archive, expiry and purge ---- */

/* a_found, a_status, a_vendor, a_used, a_old, a_stored; $2 the results. */
static void
answer_archive(struct pg_op *o, const PGresult *r)
{
	struct pg *pg = o->pg;
	int st, vst;

	if (r != NULL && PQntuples(r) == 1 && tg_state_pg_col_i64(r, 0, 5) == 0) {
		st = col_status(r, 0, 1);
		vst = col_status(r, 0, 2);
		if (tg_state_pg_col_i64(r, 0, 0) == 0) {
			o->res.rc = TG_STATE_NOT_FOUND;
			tg_err_set(&o->res.err, "no simulation run %s", o->val[0]);
		} else if (st != TG_RUN_COMPLETED && vst != TG_RUN_COMPLETED) {
			o->res.rc = TG_STATE_CONFLICT;
			tg_err_set(&o->res.err, "simulation %s has not completed (%s)", o->val[0],
			    tg_runs_status_str(st < 0 ? TG_RUN_UNKNOWN : st));
		} else if (tg_state_archive_caps(o->val[0], (size_t)o->len[1],
		    tg_state_pg_col_i64(r, 0, 4), tg_state_pg_col_i64(r, 0, 3),
		    pg->archive_max_run, pg->archive_max_total, &o->res.err) != 0) {
			o->res.rc = TG_STATE_REFUSED;
		} else {
			o->res.rc = TG_STATE_ERROR;
			tg_err_set(&o->res.err, "results of %s were not archived", o->val[0]);
		}
	}
	((tg_state_done_cb)o->cb)(&o->res, o->arg);
}

struct tg_state_op *
tg_state_pg_runs_archive(void *impl, const char *id, const void *data, size_t len,
    int64_t now_ms, tg_state_done_cb cb, void *arg)
{
	struct pg *pg = impl;
	struct pg_op *o = tg_state_pg_op_new(pg, PG_RUN_ARCHIVE, answer_archive, CB(cb), arg);

	if ((data == NULL && len > 0) || len > INT32_MAX) {
		o->res.rc = data == NULL ? TG_STATE_ERROR : TG_STATE_REFUSED;
		tg_err_set(&o->res.err, data == NULL ? "no results to archive" :
		    "results of %s are too large to archive", id);
		return tg_state_pg_answer_now(o);
	}
	tg_state_pg_param_str(o, id);
	tg_state_pg_param_bin(o, data, len);
	tg_state_pg_param_i64(o, pg->archive_max_run);
	tg_state_pg_param_i64(o, pg->archive_max_total);
	return tg_state_pg_submit(o, PG_RUNS);
}

/* Binary: the results' bytes. */
static void
answer_archived(struct pg_op *o, const PGresult *r)
{
	if (r != NULL && PQntuples(r) > 0) {
		((tg_state_blob_cb)o->cb)(&o->res, PQgetvalue(r, 0, 0),
		    (size_t)PQgetlength(r, 0, 0), o->arg);
		return;
	}
	if (r != NULL) {
		o->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&o->res.err, "no archived results for simulation %s", o->val[0]);
	}
	((tg_state_blob_cb)o->cb)(&o->res, NULL, 0, o->arg);
}

struct tg_state_op *
tg_state_pg_runs_archived(void *impl, const char *id, tg_state_blob_cb cb, void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_RUN_ARCHIVED, answer_archived, CB(cb),
	    arg);

	tg_state_pg_param_str(o, id);
	o->binary = 1;
	return tg_state_pg_submit(o, PG_RUNS);
}

static void
answer_pair(struct pg_op *o, const PGresult *r)
{
	int ok = r != NULL && PQntuples(r) > 0;

	((tg_state_pair_cb)o->cb)(&o->res, ok ? tg_state_pg_col_i64(r, 0, 0) : 0,
	    ok ? tg_state_pg_col_i64(r, 0, 1) : 0, o->arg);
}

struct tg_state_op *
tg_state_pg_runs_archive_usage(void *impl, tg_state_pair_cb cb, void *arg)
{
	return tg_state_pg_submit(tg_state_pg_op_new(impl, PG_RUN_ARCHIVE_USAGE, answer_pair,
	    CB(cb), arg), PG_RUNS);
}

static void
answer_changed(struct pg_op *o, const PGresult *r)
{
	((tg_state_num_cb)o->cb)(&o->res, r != NULL ? tg_state_pg_changed(r) : 0, o->arg);
}

struct tg_state_op *
tg_state_pg_runs_expire(void *impl, int64_t now_ms, tg_state_num_cb cb, void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_RUN_EXPIRE, answer_changed, CB(cb), arg);

	tg_state_pg_param_i64(o, now_ms);
	return tg_state_pg_submit(o, PG_RUNS);
}

struct tg_state_op *
tg_state_pg_runs_purge(void *impl, int64_t now_ms, tg_state_pair_cb cb, void *arg)
{
	struct pg *pg = impl;
	struct pg_op *o = tg_state_pg_op_new(pg, PG_RUN_PURGE, answer_pair, CB(cb), arg);

	tg_state_pg_param_i64(o, now_ms);
	tg_state_pg_param_i64(o, pg->grace_ms);
	tg_state_pg_param_i64(o, pg->archive_keep_ms);
	tg_state_pg_param_i64(o, pg->retention_ms);
	return tg_state_pg_submit(o, PG_RUNS);
}
