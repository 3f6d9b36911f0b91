/*
 * sweeps.c - sweeps, written once for every backend
 * (include/tidegate/state.h, "sweeps"): a sweep and its variants stored
 * in one statement (the variants travel as one JSON array), claims
 * bounded by the sweep's concurrency across every instance, and
 * submitted / unclaim that change a variant only while it is submitting,
 * the run and the variant together.
 *
 * A claim names the instance that made it. PostgreSQL claims through
 * tidegate_sweep_claim (it locks the sweep's row, counts what is in
 * flight, then takes the first pending variant FOR UPDATE SKIP LOCKED);
 * SQLite's one writer reads the candidate and takes it in one
 * transaction. Claims left submitting by a stopped instance are pending
 * again when it opens its state (the drivers' open).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_gen.h>

#include "tidegate/ids.h"
#include "tidegate/json.h"
#include "runs.h"
#include "seam.h"

enum { CREATE, GET, LIST, VARIANTS, CLAIM, SUBMITTED, UNCLAIM, SETTLE, RUNNING };

#define SWEEP_COLS "api_key, base_case_id, created_at, concurrency, callback_url," \
	" state, variants, done_at, sweep_id"
/* SQLite: the variant a claim of sweep $1 takes now (none: nothing may be). */
#define CANDIDATE "(SELECT position FROM sweep_variants WHERE sweep_id = $1 AND state =" \
	" 'pending' AND (SELECT state FROM sweeps WHERE sweep_id = $1) = 'running' AND" \
	" (SELECT count(*) FROM sweep_variants WHERE sweep_id = $1 AND state =" \
	" 'submitting') + (SELECT count(*) FROM runs WHERE sweep_id = $1 AND status =" \
	" 'IN_PROGRESS') < (SELECT concurrency FROM sweeps WHERE sweep_id = $1)" \
	" ORDER BY position LIMIT 1)"
/* SQLite: the variant's state before a change (a statement of no column
 * after it leaves these rows as the answer). */
#define STATE_BEFORE(s, n) "SELECT (SELECT state FROM sweep_variants WHERE sweep_id = " s \
	" AND name = " n ");"

static const struct tg_db_stmt sql[] = {
	[CREATE] = { "sw_create", TG_DB_RUNS, 1, "WITH s AS (INSERT INTO sweeps (sweep_id,"
	    " api_key, base_case_id, created_at, concurrency, callback_url, state, variants)"
	    " VALUES ($1, $2, $3, $4, $5, $6, 'running', json_array_length($7::json))"
	    " RETURNING sweep_id) INSERT INTO sweep_variants (sweep_id, position, name, state,"
	    " case_body, case_sha256) SELECT s.sweep_id, e.pos - 1, e.v->>'name', 'pending',"
	    " convert_to(e.v->>'body', 'UTF8'), e.v->>'sha' FROM s,"
	    " json_array_elements($7::json) WITH ORDINALITY AS e(v, pos)",
	    "INSERT INTO sweeps (sweep_id, api_key, base_case_id, created_at, concurrency,"
	    " callback_url, state, variants) VALUES ($1, $2, $3, $4, $5, $6, 'running',"
	    " json_array_length($7)); INSERT INTO sweep_variants (sweep_id, position, name,"
	    " state, case_body, case_sha256) SELECT $1, key, json_extract(value, '$.name'),"
	    " 'pending', CAST(json_extract(value, '$.body') AS BLOB), json_extract(value,"
	    " '$.sha') FROM json_each($7)" },
	[GET] = { "sw_get", TG_DB_RUNS, 0,
	    "SELECT " SWEEP_COLS " FROM sweeps WHERE sweep_id = $1", NULL },
	[LIST] = { "sw_list", TG_DB_RUNS, 0, "SELECT " SWEEP_COLS " FROM sweeps WHERE"
	    " (CAST($1 AS text) IS NULL OR api_key = $1) AND (CAST($2 AS text) IS NULL OR"
	    " state = $2) ORDER BY created_at DESC, sweep_id LIMIT $3 OFFSET $4", NULL },
	/* The first row says whether the sweep exists (name NULL). */
	[VARIANTS] = { "sw_variants", TG_DB_RUNS, 0, "SELECT NULL, NULL, NULL, NULL, NULL,"
	    " NULL, NULL, NULL, NULL, NULL, -1 FROM sweeps WHERE sweep_id = $1 UNION ALL"
	    " SELECT v.name, v.state, v.case_sha256, v.simulation_id, v.error, v.attempts,"
	    " v.submitted_at, r.status, r.failure, r.figures, v.position FROM sweep_variants v"
	    " LEFT JOIN runs r ON r.simulation_id = v.simulation_id WHERE v.sweep_id = $1"
	    " ORDER BY 11", NULL },
	/* name, body, sha, the sweep's key; no row: no sweep; NULL name:
	 * nothing may be claimed now */
	[CLAIM] = { "sw_claim", TG_DB_RUNS, 1,
	    "SELECT c_name, c_body, c_sha, c_key FROM tidegate_sweep_claim($1, $2)",
	    "SELECT v.name, v.case_body, v.case_sha256, s.api_key FROM sweeps s LEFT JOIN"
	    " sweep_variants v ON v.sweep_id = s.sweep_id AND v.position = " CANDIDATE
	    " WHERE s.sweep_id = $1; UPDATE sweep_variants SET state = 'submitting', attempts"
	    " = attempts + 1, claimed_by = $2 WHERE sweep_id = $1 AND position = " CANDIDATE },
	/* The variant's state before (NULL: none); the run and the variant
	 * change together, or not at all (a known simulation id: CONFLICT). */
	[SUBMITTED] = { "sw_submitted", TG_DB_RUNS, 1, "WITH v AS (UPDATE sweep_variants SET"
	    " state = 'submitted', case_body = NULL, simulation_id = $1, submitted_at = $8,"
	    " error = NULL WHERE sweep_id = $2 AND name = $3 AND state = 'submitting'"
	    " RETURNING 1), i AS (INSERT INTO " TG_RUN_INTO " SELECT * FROM (VALUES "
	    TG_RUN_VALUES ") x WHERE EXISTS (SELECT 1 FROM v) RETURNING 1) SELECT (SELECT"
	    " state FROM sweep_variants WHERE sweep_id = $2 AND name = $3)",
	    STATE_BEFORE("$2", "$3") " UPDATE sweep_variants SET state = 'submitted',"
	    " case_body = NULL, simulation_id = $1, submitted_at = $8, error = NULL WHERE"
	    " sweep_id = $2 AND name = $3 AND state = 'submitting'; INSERT INTO " TG_RUN_INTO
	    " SELECT * FROM (VALUES " TG_RUN_VALUES ") WHERE changes() > 0" },
	[UNCLAIM] = { "sw_unclaim", TG_DB_RUNS, 1, "WITH v AS (UPDATE sweep_variants SET"
	    " state = $3, error = $4, case_body = CASE WHEN $3 = 'rejected' THEN NULL ELSE"
	    " case_body END WHERE sweep_id = $1 AND name = $2 AND state = 'submitting'"
	    " RETURNING 1) SELECT (SELECT state FROM sweep_variants WHERE sweep_id = $1 AND"
	    " name = $2)",
	    STATE_BEFORE("$1", "$2") " UPDATE sweep_variants SET state = $3, error = $4,"
	    " case_body = CASE WHEN $3 = 'rejected' THEN NULL ELSE case_body END WHERE"
	    " sweep_id = $1 AND name = $2 AND state = 'submitting'" },
	/* No row: no such sweep; else 1 when it became done now. */
	[SETTLE] = { "sw_settle", TG_DB_RUNS, 1, "WITH d AS (UPDATE sweeps SET state = 'done',"
	    " done_at = $2 WHERE sweep_id = $1 AND state = 'running' AND NOT EXISTS (SELECT 1"
	    " FROM sweep_variants v WHERE v.sweep_id = $1 AND v.state IN ('pending',"
	    " 'submitting')) AND NOT EXISTS (SELECT 1 FROM runs r WHERE r.sweep_id = $1 AND"
	    " r.status = 'IN_PROGRESS') RETURNING 1) SELECT (SELECT count(*) FROM d) FROM"
	    " sweeps WHERE sweep_id = $1",
	    "UPDATE sweeps SET state = 'done', done_at = $2 WHERE sweep_id = $1 AND state ="
	    " 'running' AND NOT EXISTS (SELECT 1 FROM sweep_variants v WHERE v.sweep_id = $1"
	    " AND v.state IN ('pending', 'submitting')) AND NOT EXISTS (SELECT 1 FROM runs r"
	    " WHERE r.sweep_id = $1 AND r.status = 'IN_PROGRESS'); SELECT changes() FROM"
	    " sweeps WHERE sweep_id = $1" },
	[RUNNING] = { "sw_running", TG_DB_RUNS, 0, "SELECT sweep_id FROM sweeps WHERE state ="
	    " 'running' ORDER BY created_at, sweep_id", NULL },
};

const struct tg_db_table tg_state_sweeps_stmts = { sql, TG_NELEM(sql) };

struct op {
	struct tg_db_op d;
	char *name, *run_id;	/* a variant's, and its run's */
	size_t limit;		/* a list's page */
	int get;		/* no row: NOT_FOUND */
};

static void
op_cleanup(struct tg_db_q *q)
{
	struct op *o = (struct op *)q;

	free(o->name);
	free(o->run_id);
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

/* ---- create ---- */

/* 0, or -1 with err when two variants of s (borrowed) share a name. */
static int
names_unique(const struct tg_sweep_new *s, struct tg_err *err)
{
	size_t i, j;

	for (i = 0; i < s->nvariants; i++)
		for (j = 0; j < i; j++)
			if (strcmp(s->variants[i].name, s->variants[j].name) == 0) {
				tg_err_set(err, "sweep variant name '%.64s' is given twice",
				    s->variants[i].name);
				return -1;
			}
	return 0;
}

/* The variants of s (borrowed) as a JSON array of {"name", "body", "sha"}. */
static void
param_variants(struct tg_db_q *q, const struct tg_sweep_new *s)
{
	char sha[TG_RUNS_SHA_LEN];
	const unsigned char *buf;
	yajl_gen g = tg_json_gen_new();
	size_t i, len;

	yajl_gen_array_open(g);
	for (i = 0; i < s->nvariants; i++) {
		tg_runs_case_digest(s->variants[i].body, s->variants[i].len, sha);
		yajl_gen_map_open(g);
		tg_json_str(g, "name");
		tg_json_str(g, s->variants[i].name);
		tg_json_str(g, "body");
		yajl_gen_string(g, (const unsigned char *)s->variants[i].body, s->variants[i].len);
		tg_json_str(g, "sha");
		tg_json_str(g, sha);
		yajl_gen_map_close(g);
	}
	yajl_gen_array_close(g);
	yajl_gen_get_buf(g, &buf, &len);
	tg_db_text(q, (const char *)buf);
	yajl_gen_free(g);
}

static void
answer_create(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;

	(void)r;
	if (q->res.rc == TG_STATE_CONFLICT)	/* an id drawn twice: never seen */
		q->res.rc = TG_STATE_ERROR;
	o->d.cb.str(&q->res, q->res.rc == TG_STATE_OK || q->res.rc == TG_STATE_UNKNOWN ?
	    o->d.id : NULL, o->d.arg);
}

struct tg_state_op *
tg_state_sweep_create(struct tg_state *st, const struct tg_sweep_new *s, int64_t now_ms,
    tg_state_str_cb cb, void *arg)
{
	char hex[33], id[TG_SWEEP_ID_LEN];
	struct op *o;
	struct tg_err err;

	tg_id_hex(hex, 16);
	snprintf(id, sizeof(id), "swp_%s", hex);
	o = op_new(st, CREATE, answer_create, id, arg);
	o->d.cb.str = cb;
	o->d.q.replay = 1;		/* keyed by that id: sent again when lost */
	if (tg_state_sweep_new_ok(s, &err) != 0 || names_unique(s, &err) != 0)
		return tg_db_fail(&o->d.q, TG_STATE_ERROR, err.msg);
	tg_db_text(&o->d.q, s->api_key);
	tg_db_text(&o->d.q, s->base_case_id);
	tg_db_int(&o->d.q, now_ms);
	tg_db_int(&o->d.q, s->concurrency > 0 ? s->concurrency : TG_SWEEP_CONCURRENCY);
	tg_db_text(&o->d.q, s->callback_url);
	param_variants(&o->d.q, s);
	return tg_db_submit(st, &o->d.q);
}

/* ---- reading sweeps ---- */

/* Row i of SWEEP_COLS into sw. */
static void
sweep_row(const struct tg_db_rows *r, int i, struct tg_sweep *sw)
{
	const char *id = tg_db_str(r, i, 8), *state = tg_db_str(r, i, 5);

	memset(sw, 0, sizeof(*sw));
	snprintf(sw->id, sizeof(sw->id), "%s", id != NULL ? id : "");
	sw->api_key = tg_db_strdup(r, i, 0);
	sw->base_case_id = tg_db_strdup(r, i, 1);
	sw->created_at = tg_db_i64(r, i, 2);
	sw->concurrency = (int)tg_db_i64(r, i, 3);
	sw->callback_url = tg_db_strdup(r, i, 4);
	sw->state = state != NULL && strcmp(state, "done") == 0 ? TG_SWEEP_DONE :
	    TG_SWEEP_RUNNING;
	sw->nvariants = (size_t)tg_db_i64(r, i, 6);
	sw->done_at = tg_db_i64(r, i, 7);
}

/* The rows as sweeps, at most o->limit (0: all); none: NOT_FOUND for a get. */
static void
answer_sweeps(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;
	struct tg_sweep *sw = NULL;
	int more;
	size_t i, n = tg_db_page(&o->d, r, o->limit, o->get, "sweep", &more);

	if (n > 0)
		sw = tg_xcalloc(n, sizeof(*sw));
	for (i = 0; i < n; i++)
		sweep_row(r, (int)i, &sw[i]);
	o->d.cb.sweeps(&q->res, sw, n, more, o->d.arg);
	tg_sweeps_free(sw, n);
}

struct tg_state_op *
tg_state_sweep_get(struct tg_state *st, const char *id, tg_state_sweeps_cb cb, void *arg)
{
	struct op *o = op_new(st, GET, answer_sweeps, id, arg);

	o->d.cb.sweeps = cb;
	o->get = 1;
	return tg_db_submit(st, &o->d.q);
}

struct tg_state_op *
tg_state_sweep_list(struct tg_state *st, const char *api_key, const char *state,
    size_t limit, size_t offset, tg_state_sweeps_cb cb, void *arg)
{
	struct op *o = op_new(st, LIST, answer_sweeps, NULL, arg);
	struct tg_err err;

	o->d.cb.sweeps = cb;
	o->limit = tg_state_sweeps_page(limit);
	if (tg_state_sweep_state_ok(state, &err) != 0)
		return tg_db_fail(&o->d.q, TG_STATE_ERROR, err.msg);
	tg_db_text(&o->d.q, api_key);
	tg_db_text(&o->d.q, state);
	tg_db_int(&o->d.q, (int64_t)o->limit + 1);
	tg_db_int(&o->d.q, offset < INT64_MAX ? (int64_t)offset : INT64_MAX);
	return tg_db_submit(st, &o->d.q);
}

/* Row i: name, state, sha, simulation_id, error, attempts, submitted_at,
 * the run's status, failure and figures. */
static void
variant_row(const struct tg_db_rows *r, int i, struct tg_sweep_variant *v)
{
	const char *fig = tg_db_str(r, i, 9), *sha = tg_db_str(r, i, 2);
	int st;

	memset(v, 0, sizeof(*v));
	v->name = tg_db_strdup(r, i, 0);
	v->state = tg_state_variant_state_parse(tg_db_str(r, i, 1));
	snprintf(v->case_sha256, sizeof(v->case_sha256), "%s", sha != NULL ? sha : "");
	v->simulation_id = tg_db_strdup(r, i, 3);
	v->error = tg_db_strdup(r, i, 4);
	v->attempts = (int)tg_db_i64(r, i, 5);
	v->submitted_at = tg_db_i64(r, i, 6);
	/* A run purged from the registry has long expired. */
	st = tg_db_isnull(r, i, 7) ? TG_RUN_EXPIRED : tg_state_run_status_at(r, i, 7);
	v->run_status = st < 0 ? TG_RUN_UNKNOWN : st;
	v->failure = tg_db_strdup(r, i, 8);
	v->figures = fig != NULL ? tg_json_parse(fig, strlen(fig), NULL) : NULL;
}

/* The first row stands for the sweep itself (no sweep: none). */
static void
answer_variants(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;
	struct tg_sweep_variant *v = NULL;
	size_t i, n = 0;

	if (r != NULL && tg_db_nrows(r) == 0) {
		q->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&q->res.err, "no sweep %s", o->d.id);
	} else if (r != NULL) {
		n = (size_t)tg_db_nrows(r) - 1;
		v = n > 0 ? tg_xcalloc(n, sizeof(*v)) : NULL;
		for (i = 0; i < n; i++)
			variant_row(r, (int)i + 1, &v[i]);
	}
	o->d.cb.variants(&q->res, v, n, o->d.arg);
	tg_sweep_variants_free(v, n);
}

struct tg_state_op *
tg_state_sweep_variants(struct tg_state *st, const char *id, tg_state_variants_cb cb,
    void *arg)
{
	struct op *o = op_new(st, VARIANTS, answer_variants, id, arg);

	o->d.cb.variants = cb;
	return tg_db_submit(st, &o->d.q);
}

static void
answer_running(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;
	const char **ids = NULL;
	size_t i, n = r != NULL ? (size_t)tg_db_nrows(r) : 0;

	if (n > 0)
		ids = tg_xcalloc(n, sizeof(*ids));
	for (i = 0; i < n; i++)
		ids[i] = tg_db_str(r, (int)i, 0);
	o->d.cb.strs(&q->res, ids, n, o->d.arg);
	free(ids);
}

struct tg_state_op *
tg_state_sweep_running(struct tg_state *st, tg_state_strs_cb cb, void *arg)
{
	struct op *o = op_new(st, RUNNING, answer_running, NULL, arg);

	o->d.cb.strs = cb;
	return tg_db_submit(st, &o->d.q);
}

/* ---- the submission queue ---- */

static void
answer_claim(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;
	struct tg_sweep_claim c;
	const char *sha;

	if (r == NULL || tg_db_nrows(r) == 0 || tg_db_isnull(r, 0, 0)) {
		if (r != NULL && tg_db_nrows(r) == 0) {
			q->res.rc = TG_STATE_NOT_FOUND;
			tg_err_set(&q->res.err, "no sweep %s", o->d.id);
		}
		o->d.cb.claim(&q->res, NULL, o->d.arg);
		return;
	}
	memset(&c, 0, sizeof(c));
	c.name = (char *)tg_db_str(r, 0, 0);
	c.body = (char *)tg_db_blob(r, 0, 1, &c.len);	/* every cell ends with a NUL */
	sha = tg_db_str(r, 0, 2);
	snprintf(c.case_sha256, sizeof(c.case_sha256), "%s", sha != NULL ? sha : "");
	c.api_key = (char *)tg_db_str(r, 0, 3);
	o->d.cb.claim(&q->res, &c, o->d.arg);
}

struct tg_state_op *
tg_state_sweep_claim(struct tg_state *st, const char *id, int64_t now_ms, tg_state_claim_cb cb,
    void *arg)
{
	struct op *o = op_new(st, CLAIM, answer_claim, id, arg);

	(void)now_ms;
	o->d.cb.claim = cb;
	tg_db_text(&o->d.q, st->instance);
	return tg_db_submit(st, &o->d.q);
}

/* The variant's state before the change (NULL: none) said it was
 * submitting, else a code. */
static void
expect_submitting(struct op *o, const struct tg_db_rows *r)
{
	const char *was;

	if (r == NULL || tg_db_nrows(r) == 0)
		return;
	if ((was = tg_db_str(r, 0, 0)) == NULL) {
		o->d.q.res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&o->d.q.res.err, "no variant %.64s in sweep %s", o->name, o->d.id);
	} else if (strcmp(was, "submitting") != 0) {
		o->d.q.res.rc = TG_STATE_CONFLICT;
		tg_err_set(&o->d.q.res.err, "sweep variant %.64s is %s, not submitting", o->name,
		    was);
	}
}

static void
answer_submitted(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;

	if (q->res.rc == TG_STATE_CONFLICT)	/* the run's id is known */
		tg_err_set(&q->res.err, "simulation %s is already recorded", o->run_id);
	expect_submitting(o, r);
	o->d.cb.done(&q->res, o->d.arg);
}

struct tg_state_op *
tg_state_sweep_submitted(struct tg_state *st, const char *id, const char *name,
    const struct tg_run_new *run, int64_t now_ms, tg_state_done_cb cb, void *arg)
{
	struct op *o = op_new(st, SUBMITTED, answer_submitted, NULL, arg);
	struct tg_err err;

	o->d.cb.done = cb;
	if (tg_state_run_new_ok(run, &err) != 0)
		return tg_db_fail(&o->d.q, TG_STATE_ERROR, err.msg);
	o->d.id = tg_xstrdup(id);
	o->name = tg_xstrdup(name);
	o->run_id = tg_xstrdup(run->simulation_id);
	tg_db_text(&o->d.q, run->simulation_id);
	tg_db_text(&o->d.q, id);
	tg_db_text(&o->d.q, name);
	tg_state_run_params(&o->d.q, st, run, id, now_ms);
	return tg_db_submit(st, &o->d.q);
}

static void
answer_unclaim(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;

	expect_submitting(o, r);
	o->d.cb.done(&q->res, o->d.arg);
}

struct tg_state_op *
tg_state_sweep_unclaim(struct tg_state *st, const char *id, const char *name, const char *why,
    int final, int64_t now_ms, tg_state_done_cb cb, void *arg)
{
	struct op *o = op_new(st, UNCLAIM, answer_unclaim, id, arg);

	(void)now_ms;
	o->d.cb.done = cb;
	o->name = tg_xstrdup(name != NULL ? name : "");
	tg_db_text(&o->d.q, name);
	tg_db_text(&o->d.q, tg_state_variant_state_name(final ? TG_VARIANT_REJECTED :
	    TG_VARIANT_PENDING));
	tg_db_text(&o->d.q, tg_state_variant_unclaim_error(why));
	return tg_db_submit(st, &o->d.q);
}

/* No row: no sweep; else 1 when it became done with this call. */
static void
answer_settle(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;

	if (r != NULL && tg_db_nrows(r) == 0) {
		q->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&q->res.err, "no sweep %s", o->d.id);
	}
	o->d.cb.num(&q->res, r != NULL && tg_db_nrows(r) > 0 ? tg_db_i64(r, 0, 0) : 0, o->d.arg);
}

struct tg_state_op *
tg_state_sweep_settle(struct tg_state *st, const char *id, int64_t now_ms, tg_state_num_cb cb,
    void *arg)
{
	struct op *o = op_new(st, SETTLE, answer_settle, id, arg);

	o->d.cb.num = cb;
	tg_db_int(&o->d.q, now_ms);
	return tg_db_submit(st, &o->d.q);
}
