/*
 * runs.c - the run registry, written once for every backend
 * (include/tidegate/state.h, "run registry"): a run recorded, its status
 * checks, and reading runs. The rules (what a check changes, the retry
 * delay, figures) are run_rules.c's; retention and the archive are
 * runs_keep.c's.
 *
 * A status check (set_status, check_failed) takes two steps of one
 * operation (tg_db_again): it reads the run, computes the change, and
 * applies it only to the run as it read it (same status, same number of
 * checks); when another writer changed the run in between (an instance of
 * a fleet), it reads it again.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_gen.h>

#include "tidegate/json.h"
#include "runs.h"
#include "seam.h"

enum { INSERT, BRIEF, UPDATE, COUNT_CHECK, CHECK_FAILED, GET, MANY, DUE, NEXT_DUE, LIST,
	UNHANDLED, HANDLED, FIGURES };

static const struct tg_db_stmt sql[] = {
	[INSERT] = { "run_insert", TG_DB_RUNS, 1,
	    "INSERT INTO " TG_RUN_INTO " VALUES " TG_RUN_VALUES, NULL },
	[BRIEF] = { "run_brief", TG_DB_RUNS, 0, "SELECT status, submitted_at, host, validation,"
	    " checks FROM runs WHERE simulation_id = $1", NULL },
	[UPDATE] = { "run_update", TG_DB_RUNS, 1, "UPDATE runs SET status = $2, vendor_status ="
	    " coalesce($3, vendor_status), status_at = $4, completed_at = coalesce($5,"
	    " completed_at), next_check_at = $6, checks = checks + 1, failure = coalesce($7,"
	    " failure), last_error = NULL WHERE simulation_id = $1 AND status = $8"
	    " AND checks = $9", NULL },
	[COUNT_CHECK] = { "run_count_check", TG_DB_RUNS, 1,
	    "UPDATE runs SET checks = checks + 1 WHERE simulation_id = $1", NULL },
	[CHECK_FAILED] = { "run_check_failed", TG_DB_RUNS, 1, "UPDATE runs SET checks ="
	    " checks + 1, last_error = $2, next_check_at = CASE WHEN status = 'IN_PROGRESS'"
	    " THEN $3 ELSE next_check_at END WHERE simulation_id = $1 AND checks = $4", NULL },
	[GET] = { "run_get", TG_DB_RUNS, 0,
	    "SELECT " TG_RUN_COLS " FROM runs WHERE simulation_id = $1", NULL },
	[MANY] = { "run_many", TG_DB_RUNS, 0, "SELECT " TG_RUN_COLS " FROM runs WHERE"
	    " simulation_id IN (SELECT jsonb_array_elements_text(CAST($1 AS jsonb)))",
	    "SELECT " TG_RUN_COLS " FROM runs WHERE simulation_id IN"
	    " (SELECT value FROM json_each($1))" },
	[DUE] = { "run_due", TG_DB_RUNS, 0, "SELECT " TG_RUN_COLS " FROM runs WHERE status ="
	    " 'IN_PROGRESS' AND next_check_at IS NOT NULL AND next_check_at <= $1 AND"
	    " expires_at > $1 ORDER BY next_check_at, submitted_at, simulation_id LIMIT $2",
	    NULL },
	[NEXT_DUE] = { "run_next_due", TG_DB_RUNS, 0, "SELECT min(next_check_at) FROM runs"
	    " WHERE status = 'IN_PROGRESS' AND next_check_at IS NOT NULL AND expires_at > $1",
	    NULL },
	[LIST] = { "run_list", TG_DB_RUNS, 0, "SELECT " TG_RUN_COLS " FROM runs WHERE"
	    " (CAST($1 AS text) IS NULL OR status = $1) AND (CAST($2 AS text) IS NULL OR"
	    " case_id = $2) AND (CAST($3 AS text) IS NULL OR sweep_id = $3) AND"
	    " (CAST($4 AS text) IS NULL OR api_key = $4) AND submitted_at >= $5 AND"
	    " submitted_at < $6 ORDER BY submitted_at DESC, simulation_id LIMIT $7 OFFSET $8",
	    NULL },
	[UNHANDLED] = { "run_unhandled", TG_DB_RUNS, 0, "SELECT simulation_id, status FROM runs"
	    " WHERE NOT ended_handled AND status <> 'IN_PROGRESS'"
	    " ORDER BY status_at, simulation_id LIMIT 1", NULL },
	[HANDLED] = { "run_handled", TG_DB_RUNS, 1,
	    "UPDATE runs SET ended_handled = true WHERE simulation_id = $1", NULL },
	[FIGURES] = { "run_figures", TG_DB_RUNS, 1,
	    "UPDATE runs SET figures = $2 WHERE simulation_id = $1", NULL },
};

const struct tg_db_table tg_state_runs_stmts = { sql, TG_NELEM(sql) };

/* One operation: the typed callback its answer calls, and what a status
 * check keeps across its steps. */
/* One operation: what a status check keeps across its steps, and a
 * list's page. */
struct op {
	struct tg_db_op d;
	size_t limit;			/* a list's page */
	int missing;			/* no row: NOT_FOUND */
	enum tg_run_status status;	/* set_status: what the vendor said */
	int64_t completed_at, retry_after_ms, now_ms;
	char *why;			/* check_failed */
};

static void
op_cleanup(struct tg_db_q *q)
{
	free(((struct op *)q)->why);
	tg_db_op_cleanup(q);
}

static struct op *
op_new(struct tg_state *st, int stmt, void (*answer)(struct tg_db_q *,
    const struct tg_db_rows *), const char *id, void *arg)
{
	struct op *o = tg_db_op_new(sizeof(*o), st, &sql[stmt], answer, id, arg);

	o->d.q.cleanup = op_cleanup;
	return o;
}

/* ---- rows and parameters (sweeps.c's too) ---- */

int
tg_state_run_status_at(const struct tg_db_rows *r, int i, int col)
{
	const char *s = tg_db_str(r, i, col);

	return s != NULL ? tg_runs_status_parse(s) : -1;
}

void
tg_state_run_read(const struct tg_db_rows *r, int i, struct tg_run *run)
{
	const char *fig = tg_db_str(r, i, 21), *sha = tg_db_str(r, i, 4);
	int st = tg_state_run_status_at(r, i, 5);

	memset(run, 0, sizeof(*run));
	run->simulation_id = tg_db_strdup(r, i, 0);
	run->api_key = tg_db_strdup(r, i, 1);
	run->host = tg_db_strdup(r, i, 2);
	run->case_id = tg_db_strdup(r, i, 3);
	snprintf(run->case_sha256, sizeof(run->case_sha256), "%s", sha != NULL ? sha : "");
	run->status = st < 0 ? TG_RUN_UNKNOWN : st;
	run->vendor_status = tg_state_run_status_at(r, i, 6);
	run->submitted_at = tg_db_i64(r, i, 7);
	run->expires_at = tg_db_i64(r, i, 8);
	run->status_at = tg_db_i64(r, i, 9);
	run->completed_at = tg_db_i64(r, i, 10);
	run->next_check_at = tg_db_i64(r, i, 11);
	run->checks = (int)tg_db_i64(r, i, 12);
	run->validation = tg_db_strdup(r, i, 13);
	run->failure = tg_db_strdup(r, i, 14);
	run->last_error = tg_db_strdup(r, i, 15);
	run->callback_url = tg_db_strdup(r, i, 16);
	run->sweep_id = tg_db_strdup(r, i, 17);
	run->variant = tg_db_strdup(r, i, 18);
	run->archived = tg_db_i64(r, i, 19) != 0;
	run->results_size = tg_db_i64(r, i, 20);
	run->figures = fig != NULL ? tg_json_parse(fig, strlen(fig), NULL) : NULL;
}

void
tg_state_run_params(struct tg_db_q *q, const struct tg_state *st, const struct tg_run_new *run,
    const char *sweep_id, int64_t now_ms)
{
	struct tg_state_run_row row;

	tg_state_run_row(run, sweep_id, st->runs.retention_ms, now_ms, &row);
	tg_db_text(q, run->api_key);
	tg_db_text(q, run->host);
	tg_db_text(q, run->case_id);
	tg_db_text(q, run->case_sha256);
	tg_db_int(q, row.submitted_at);
	tg_db_int(q, row.expires_at);
	tg_db_text(q, row.status);
	tg_db_text(q, row.vendor_status);
	tg_db_int(q, now_ms);
	tg_db_time(q, row.completed_at);
	tg_db_time(q, row.next_check_at);
	tg_db_text(q, run->validation);
	tg_db_text(q, row.callback_url);
}

/* ---- add ---- */

static void
answer_add(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;

	(void)r;
	if (q->res.rc == TG_STATE_CONFLICT)
		tg_err_set(&q->res.err, "simulation %s is already recorded", o->d.id);
	o->d.cb.done(&q->res, o->d.arg);
}

struct tg_state_op *
tg_state_runs_add(struct tg_state *st, const struct tg_run_new *run, int64_t now_ms,
    tg_state_done_cb cb, void *arg)
{
	struct op *o = op_new(st, INSERT, answer_add, NULL, arg);
	struct tg_err err;

	o->d.cb.done = cb;
	if (tg_state_run_new_ok(run, &err) != 0)
		return tg_db_fail(&o->d.q, TG_STATE_ERROR, err.msg);
	o->d.id = tg_xstrdup(run->simulation_id);
	o->d.q.replay = 1;		/* keyed by the vendor's id: sent again when lost */
	tg_db_text(&o->d.q, run->simulation_id);
	tg_db_text(&o->d.q, NULL);
	tg_db_text(&o->d.q, NULL);
	tg_state_run_params(&o->d.q, st, run, NULL, now_ms);
	return tg_db_submit(st, &o->d.q);
}

/* ---- status checks: read the run, then change it as it was read ---- */

/* The run was read (NOT_FOUND set when it is missing): 1 when it was. */
static int
brief_found(struct op *o, const struct tg_db_rows *r)
{
	if (r == NULL)
		return 0;
	if (tg_db_nrows(r) > 0)
		return 1;
	o->d.q.res.rc = TG_STATE_NOT_FOUND;
	tg_err_set(&o->d.q.res.err, "no simulation run %s", o->d.id);
	return 0;
}

static void answer_status_brief(struct tg_db_q *q, const struct tg_db_rows *r);

/* Read the run again (another writer changed it in between). */
static void
reread(struct op *o, void (*answer)(struct tg_db_q *, const struct tg_db_rows *))
{
	tg_db_again(&o->d.q, &sql[BRIEF]);
	o->d.q.answer = answer;
	tg_db_text(&o->d.q, o->d.id);
}

static void
answer_status_done(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;
	int updated = q->stmt == &sql[UPDATE];

	if (r != NULL && updated && tg_db_changes(r) == 0) {
		reread(o, answer_status_brief);
		return;
	}
	o->d.cb.num(&q->res, r != NULL && updated && tg_runs_status_terminal(o->status), o->d.arg);
}

/* The update of what the vendor said to the run as brief read it. */
static void
status_update(struct op *o, const struct tg_db_rows *r)
{
	struct tg_state_run_change c;
	char *was = tg_db_strdup(r, 0, 0);
	int checks = (int)tg_db_i64(r, 0, 4);

	tg_state_run_change(o->status, o->completed_at, o->now_ms, tg_db_i64(r, 0, 1),
	    tg_db_str(r, 0, 2), tg_db_str(r, 0, 3), checks, &c);
	tg_db_again(&o->d.q, &sql[UPDATE]);
	o->d.q.answer = answer_status_done;
	tg_db_text(&o->d.q, o->d.id);
	tg_db_text(&o->d.q, c.status);
	tg_db_text(&o->d.q, c.vendor_status);
	tg_db_int(&o->d.q, o->now_ms);
	tg_db_time(&o->d.q, c.completed_at);
	tg_db_time(&o->d.q, c.next_check_at);
	tg_db_text(&o->d.q, c.failure);
	tg_db_text(&o->d.q, was);
	tg_db_int(&o->d.q, checks);
	free(c.failure);
	free(was);
}

/* brief: status, submitted_at, host, validation, checks. A final run's
 * check is only counted. */
static void
answer_status_brief(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;
	int st;

	if (!brief_found(o, r)) {
		o->d.cb.num(&q->res, 0, o->d.arg);
		return;
	}
	st = tg_state_run_status_at(r, 0, 0);
	if (st >= 0 && tg_runs_status_terminal(st)) {
		tg_db_again(q, &sql[COUNT_CHECK]);
		q->answer = answer_status_done;
		tg_db_text(q, o->d.id);
		return;
	}
	status_update(o, r);
}

struct tg_state_op *
tg_state_runs_set_status(struct tg_state *st, const char *id, enum tg_run_status status,
    int64_t completed_at, int64_t now_ms, tg_state_num_cb cb, void *arg)
{
	struct op *o = op_new(st, BRIEF, answer_status_brief, id, arg);

	o->d.cb.num = cb;
	o->d.q.writes = 1;
	o->status = status;
	o->completed_at = completed_at;
	o->now_ms = now_ms;
	if ((unsigned)status >= TG_RUN_NSTATUS)
		return tg_db_fail(&o->d.q, TG_STATE_ERROR, "run status is not a status");
	return tg_db_submit(st, &o->d.q);
}

static void answer_failed_brief(struct tg_db_q *q, const struct tg_db_rows *r);

static void
answer_failed_done(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;

	if (r != NULL && tg_db_changes(r) == 0) {
		reread(o, answer_failed_brief);
		return;
	}
	o->d.cb.done(&q->res, o->d.arg);
}

static void
answer_failed_brief(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;
	int checks;

	if (!brief_found(o, r)) {
		o->d.cb.done(&q->res, o->d.arg);
		return;
	}
	checks = (int)tg_db_i64(r, 0, 4);
	tg_db_again(q, &sql[CHECK_FAILED]);
	q->answer = answer_failed_done;
	tg_db_text(q, o->d.id);
	tg_db_text(q, o->why);
	tg_db_int(q, o->now_ms + tg_state_run_retry_delay(checks, o->retry_after_ms));
	tg_db_int(q, checks);
}

struct tg_state_op *
tg_state_runs_check_failed(struct tg_state *st, const char *id, const char *why,
    int64_t retry_after_ms, int64_t now_ms, tg_state_done_cb cb, void *arg)
{
	struct op *o = op_new(st, BRIEF, answer_failed_brief, id, arg);

	o->d.cb.done = cb;
	o->d.q.writes = 1;
	o->why = tg_xstrdup(tg_state_run_check_error(why));
	o->retry_after_ms = retry_after_ms;
	o->now_ms = now_ms;
	return tg_db_submit(st, &o->d.q);
}

/* ---- reading runs ---- */

/* The rows as runs, at most o->limit (0: all; more when there are more). */
static void
answer_rows(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;
	struct tg_run *runs = NULL;
	int more;
	size_t i, n = tg_db_page(&o->d, r, o->limit, o->missing, "simulation run", &more);

	if (n > 0)
		runs = tg_xcalloc(n, sizeof(*runs));
	for (i = 0; i < n; i++)
		tg_state_run_read(r, (int)i, &runs[i]);
	o->d.cb.runs(&q->res, runs, n, more, o->d.arg);
	tg_runs_free(runs, n);
}

struct tg_state_op *
tg_state_runs_get(struct tg_state *st, const char *id, tg_state_runs_cb cb, void *arg)
{
	struct op *o = op_new(st, GET, answer_rows, id, arg);

	o->d.cb.runs = cb;
	o->missing = 1;
	return tg_db_submit(st, &o->d.q);
}

/* The ids travel as one JSON array, which both databases read as a set
 * (one statement, whatever their number). */
struct tg_state_op *
tg_state_runs_get_many(struct tg_state *st, const char *const *ids, size_t n,
    tg_state_runs_cb cb, void *arg)
{
	struct op *o = op_new(st, MANY, answer_rows, NULL, arg);
	yajl_gen g = tg_json_gen_new();
	const unsigned char *buf;
	size_t i, len;

	o->d.cb.runs = cb;
	yajl_gen_array_open(g);
	for (i = 0; i < n; i++)
		tg_json_str(g, ids[i]);
	yajl_gen_array_close(g);
	yajl_gen_get_buf(g, &buf, &len);
	tg_db_text(&o->d.q, (const char *)buf);
	yajl_gen_free(g);
	return tg_db_submit(st, &o->d.q);
}

struct tg_state_op *
tg_state_runs_due(struct tg_state *st, int64_t now_ms, size_t max, tg_state_runs_cb cb,
    void *arg)
{
	struct op *o = op_new(st, DUE, answer_rows, NULL, arg);

	o->d.cb.runs = cb;
	tg_db_int(&o->d.q, now_ms);
	tg_db_int(&o->d.q, max > 0 && max < INT64_MAX ? (int64_t)max : INT64_MAX);
	return tg_db_submit(st, &o->d.q);
}

struct tg_state_op *
tg_state_runs_list(struct tg_state *st, const struct tg_runs_query *q, tg_state_runs_cb cb,
    void *arg)
{
	struct op *o = op_new(st, LIST, answer_rows, NULL, arg);
	struct tg_err err;

	o->d.cb.runs = cb;
	o->limit = tg_state_runs_page(q->limit);
	if (tg_state_runs_status_ok(q->status, &err) != 0)
		return tg_db_fail(&o->d.q, TG_STATE_ERROR, err.msg);
	tg_db_text(&o->d.q, q->status);
	tg_db_text(&o->d.q, q->case_id);
	tg_db_text(&o->d.q, q->sweep_id);
	tg_db_text(&o->d.q, q->api_key);
	tg_db_int(&o->d.q, q->from_ms);
	tg_db_int(&o->d.q, q->to_ms > 0 ? q->to_ms : INT64_MAX);
	tg_db_int(&o->d.q, (int64_t)o->limit + 1);
	tg_db_int(&o->d.q, q->offset < INT64_MAX ? (int64_t)q->offset : INT64_MAX);
	return tg_db_submit(st, &o->d.q);
}

static void
answer_next_due(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;
	int64_t due = INT64_MAX;

	if (r != NULL && tg_db_nrows(r) > 0 && !tg_db_isnull(r, 0, 0))
		due = tg_db_i64(r, 0, 0);
	o->d.cb.num(&q->res, due, o->d.arg);
}

struct tg_state_op *
tg_state_runs_next_due(struct tg_state *st, int64_t now_ms, tg_state_num_cb cb, void *arg)
{
	struct op *o = op_new(st, NEXT_DUE, answer_next_due, NULL, arg);

	o->d.cb.num = cb;
	tg_db_int(&o->d.q, now_ms);
	return tg_db_submit(st, &o->d.q);
}

static void
answer_unhandled(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;
	const char *id = NULL;
	int st = TG_RUN_IN_PROGRESS;

	if (r != NULL && tg_db_nrows(r) > 0) {
		id = tg_db_str(r, 0, 0);
		st = tg_state_run_status_at(r, 0, 1);
		st = st >= 0 ? st : TG_RUN_UNKNOWN;
	}
	o->d.cb.unhandled(&q->res, id, (enum tg_run_status)st, o->d.arg);
}

struct tg_state_op *
tg_state_runs_next_unhandled(struct tg_state *st, tg_state_unhandled_cb cb, void *arg)
{
	struct op *o = op_new(st, UNHANDLED, answer_unhandled, NULL, arg);

	o->d.cb.unhandled = cb;
	return tg_db_submit(st, &o->d.q);
}

struct tg_state_op *
tg_state_runs_set_handled(struct tg_state *st, const char *id, tg_state_done_cb cb, void *arg)
{
	struct op *o = op_new(st, HANDLED, tg_db_answer_done, id, arg);

	o->d.cb.done = cb;
	return tg_db_submit(st, &o->d.q);
}

static void
answer_figures(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;

	if (r != NULL && tg_db_changes(r) == 0) {
		q->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&q->res.err, "no simulation run %s", o->d.id);
	}
	o->d.cb.done(&q->res, o->d.arg);
}

struct tg_state_op *
tg_state_runs_set_figures(struct tg_state *st, const char *id, yajl_val results,
    tg_state_done_cb cb, void *arg)
{
	struct op *o = op_new(st, FIGURES, answer_figures, id, arg);
	struct tg_err err;
	char *fig = tg_state_run_figures(id, results, &err);

	o->d.cb.done = cb;
	if (fig == NULL)
		return tg_db_fail(&o->d.q, TG_STATE_ERROR, err.msg);
	tg_db_text(&o->d.q, fig);
	free(fig);
	return tg_db_submit(st, &o->d.q);
}
