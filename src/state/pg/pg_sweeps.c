/*
 * pg_sweeps.c - sweeps in the PostgreSQL state backend
 * (include/tidegate/state.h, "sweeps"), with the semantics of
 * sqlite/sweep_store.c: a sweep and its variants stored in one statement
 * (the variants travel as one JSON array), claims bounded by the sweep's
 * concurrency across every instance (tidegate_sweep_claim locks the
 * sweep's row, then counts what is in flight, then takes the first
 * pending variant FOR UPDATE SKIP LOCKED), and submitted / unclaim that
 * change a variant only while it is submitting, the run and the variant
 * together. Every statement is pg_schema.c's.
 *
 * A claim names the instance that made it. At open (in the migration's
 * transaction, pg_schema.c, once the first connection is made), the
 * claims this instance's name still holds are pending again (as SQLite's
 * at its open):
 * a process stopped in the middle of a submission leaves none behind,
 * provided its name is the same after a restart (state.instance); the
 * default, host:pid, is not.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_gen.h>

#include "tidegate/ids.h"
#include "tidegate/json.h"
#include "pg.h"
#include "../run_rules.h"

#define CB(cb)	((void (*)(void))(cb))

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
param_variants(struct pg_op *o, const struct tg_sweep_new *s)
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
	o->val[o->nparams++] = tg_xstrndup((const char *)buf, len);
	yajl_gen_free(g);
}

static void
answer_create(struct pg_op *o, const PGresult *r)
{
	if (o->res.rc == TG_STATE_CONFLICT)	/* an id drawn twice: never seen */
		o->res.rc = TG_STATE_ERROR;
	((tg_state_str_cb)o->cb)(&o->res, o->res.rc == TG_STATE_OK ? o->val[0] : NULL, o->arg);
}

struct tg_state_op *
tg_state_pg_sweep_create(void *impl, const struct tg_sweep_new *s, int64_t now_ms,
    tg_state_str_cb cb, void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_SW_CREATE, answer_create, CB(cb), arg);
	char hex[33], id[TG_SWEEP_ID_LEN];

	if (tg_state_sweep_new_ok(s, &o->res.err) != 0 || names_unique(s, &o->res.err) != 0) {
		o->res.rc = TG_STATE_ERROR;
		return tg_state_pg_answer_now(o);
	}
	tg_id_hex(hex, 16);
	snprintf(id, sizeof(id), "swp_%s", hex);
	tg_state_pg_param_str(o, id);
	tg_state_pg_param_str(o, s->api_key);
	tg_state_pg_param_str(o, s->base_case_id);
	tg_state_pg_param_i64(o, now_ms);
	tg_state_pg_param_i64(o, s->concurrency > 0 ? s->concurrency : TG_SWEEP_CONCURRENCY);
	tg_state_pg_param_str(o, s->callback_url);
	param_variants(o, s);
	return tg_state_pg_submit(o, PG_RUNS);
}

/* ---- reading sweeps ---- */

/* Row i of SWEEP_COLS into sw. */
static void
sweep_row(const PGresult *r, int i, struct tg_sweep *sw)
{
	memset(sw, 0, sizeof(*sw));
	snprintf(sw->id, sizeof(sw->id), "%s", PQgetvalue(r, i, 8));
	sw->api_key = tg_state_pg_col_str(r, i, 0);
	sw->base_case_id = tg_state_pg_col_str(r, i, 1);
	sw->created_at = tg_state_pg_col_i64(r, i, 2);
	sw->concurrency = (int)tg_state_pg_col_i64(r, i, 3);
	sw->callback_url = tg_state_pg_col_str(r, i, 4);
	sw->state = strcmp(PQgetvalue(r, i, 5), "done") == 0 ? TG_SWEEP_DONE : TG_SWEEP_RUNNING;
	sw->nvariants = (size_t)tg_state_pg_col_i64(r, i, 6);
	sw->done_at = tg_state_pg_col_i64(r, i, 7);
}

/* The rows as sweeps, at most limit (0: all); none: NOT_FOUND when get. */
static void
answer_sweeps(struct pg_op *o, const PGresult *r, size_t limit, int get)
{
	struct tg_sweep *sw = NULL;
	size_t i, n = r != NULL ? (size_t)PQntuples(r) : 0;
	int more = limit > 0 && n > limit;

	if (more)
		n = limit;
	if (r != NULL && n == 0 && get) {
		o->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&o->res.err, "no sweep %s", o->val[0]);
	}
	if (n > 0)
		sw = tg_xcalloc(n, sizeof(*sw));
	for (i = 0; i < n; i++)
		sweep_row(r, (int)i, &sw[i]);
	((tg_state_sweeps_cb)o->cb)(&o->res, sw, n, more, o->arg);
	tg_sweeps_free(sw, n);
}

static void
answer_get(struct pg_op *o, const PGresult *r)
{
	answer_sweeps(o, r, 0, 1);
}

/* $3 asked for one row past the page (none: refused before it was sent). */
static void
answer_list(struct pg_op *o, const PGresult *r)
{
	answer_sweeps(o, r, r != NULL ? (size_t)strtoll(o->val[2], NULL, 10) - 1 : 0, 0);
}

struct tg_state_op *
tg_state_pg_sweep_get(void *impl, const char *id, tg_state_sweeps_cb cb, void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_SW_GET, answer_get, CB(cb), arg);

	tg_state_pg_param_str(o, id);
	return tg_state_pg_submit(o, PG_RUNS);
}

struct tg_state_op *
tg_state_pg_sweep_list(void *impl, const char *api_key, const char *state, size_t limit,
    size_t offset, tg_state_sweeps_cb cb, void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_SW_LIST, answer_list, CB(cb), arg);

	if (tg_state_sweep_state_ok(state, &o->res.err) != 0) {
		o->res.rc = TG_STATE_ERROR;
		return tg_state_pg_answer_now(o);
	}
	tg_state_pg_param_str(o, api_key);
	tg_state_pg_param_str(o, state);
	tg_state_pg_param_i64(o, (int64_t)tg_state_sweeps_page(limit) + 1);
	tg_state_pg_param_i64(o, offset < INT64_MAX ? (int64_t)offset : INT64_MAX);
	return tg_state_pg_submit(o, PG_RUNS);
}

/* Row i: name, state, sha, simulation_id, error, attempts, submitted_at,
 * the run's status, failure and figures. */
static void
variant_row(const PGresult *r, int i, struct tg_sweep_variant *v)
{
	const char *fig = PQgetisnull(r, i, 9) ? NULL : PQgetvalue(r, i, 9);
	int st;

	memset(v, 0, sizeof(*v));
	v->name = tg_state_pg_col_str(r, i, 0);
	v->state = tg_state_variant_state_parse(PQgetvalue(r, i, 1));
	snprintf(v->case_sha256, sizeof(v->case_sha256), "%s", PQgetvalue(r, i, 2));
	v->simulation_id = tg_state_pg_col_str(r, i, 3);
	v->error = tg_state_pg_col_str(r, i, 4);
	v->attempts = (int)tg_state_pg_col_i64(r, i, 5);
	v->submitted_at = tg_state_pg_col_i64(r, i, 6);
	/* A run purged from the registry has long expired. */
	st = PQgetisnull(r, i, 7) ? TG_RUN_EXPIRED : tg_runs_status_parse(PQgetvalue(r, i, 7));
	v->run_status = st < 0 ? TG_RUN_UNKNOWN : st;
	v->failure = tg_state_pg_col_str(r, i, 8);
	v->figures = fig != NULL ? tg_json_parse(fig, strlen(fig), NULL) : NULL;
}

/* The first row stands for the sweep itself (no sweep: none). */
static void
answer_variants(struct pg_op *o, const PGresult *r)
{
	struct tg_sweep_variant *v = NULL;
	size_t i, n = 0;

	if (r != NULL && PQntuples(r) == 0) {
		o->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&o->res.err, "no sweep %s", o->val[0]);
	} else if (r != NULL) {
		n = (size_t)PQntuples(r) - 1;
		v = n > 0 ? tg_xcalloc(n, sizeof(*v)) : NULL;
		for (i = 0; i < n; i++)
			variant_row(r, (int)i + 1, &v[i]);
	}
	((tg_state_variants_cb)o->cb)(&o->res, v, n, o->arg);
	tg_sweep_variants_free(v, n);
}

struct tg_state_op *
tg_state_pg_sweep_variants(void *impl, const char *id, tg_state_variants_cb cb, void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_SW_VARIANTS, answer_variants, CB(cb), arg);

	tg_state_pg_param_str(o, id);
	return tg_state_pg_submit(o, PG_RUNS);
}

static void
answer_running(struct pg_op *o, const PGresult *r)
{
	const char **ids = NULL;
	size_t i, n = r != NULL ? (size_t)PQntuples(r) : 0;

	if (n > 0)
		ids = tg_xcalloc(n, sizeof(*ids));
	for (i = 0; i < n; i++)
		ids[i] = PQgetvalue(r, (int)i, 0);
	((tg_state_strs_cb)o->cb)(&o->res, ids, n, o->arg);
	free(ids);
}

struct tg_state_op *
tg_state_pg_sweep_running(void *impl, tg_state_strs_cb cb, void *arg)
{
	return tg_state_pg_submit(tg_state_pg_op_new(impl, PG_SW_RUNNING, answer_running,
	    CB(cb), arg), PG_RUNS);
}

/* ---- the submission queue ---- */

/* Binary: name, case body, sha, the sweep's key; no row: no sweep; a NULL
 * name: nothing may be claimed now. */
static void
answer_claim(struct pg_op *o, const PGresult *r)
{
	struct tg_sweep_claim c;

	if (r == NULL || PQntuples(r) == 0 || PQgetisnull(r, 0, 0)) {
		if (r != NULL && PQntuples(r) == 0) {
			o->res.rc = TG_STATE_NOT_FOUND;
			tg_err_set(&o->res.err, "no sweep %s", o->val[0]);
		}
		((tg_state_claim_cb)o->cb)(&o->res, NULL, o->arg);
		return;
	}
	memset(&c, 0, sizeof(c));
	c.name = PQgetvalue(r, 0, 0);
	c.len = (size_t)PQgetlength(r, 0, 1);
	c.body = PQgetvalue(r, 0, 1);		/* libpq ends every value with a NUL */
	snprintf(c.case_sha256, sizeof(c.case_sha256), "%.*s", PQgetlength(r, 0, 2),
	    PQgetvalue(r, 0, 2));
	c.api_key = PQgetisnull(r, 0, 3) ? NULL : PQgetvalue(r, 0, 3);
	((tg_state_claim_cb)o->cb)(&o->res, &c, o->arg);
}

struct tg_state_op *
tg_state_pg_sweep_claim(void *impl, const char *id, int64_t now_ms, tg_state_claim_cb cb,
    void *arg)
{
	struct pg *pg = impl;
	struct pg_op *o = tg_state_pg_op_new(pg, PG_SW_CLAIM, answer_claim, CB(cb), arg);

	tg_state_pg_param_str(o, id);
	tg_state_pg_param_str(o, pg->instance);
	o->binary = 1;
	return tg_state_pg_submit(o, PG_RUNS);
}

/* The variant's state before the change (NULL: none) said it was
 * submitting, else a code; id and name borrowed. */
static void
expect_submitting(struct pg_op *o, const PGresult *r, const char *id, const char *name)
{
	const char *was;

	if (r == NULL || PQntuples(r) == 0)
		return;
	if (PQgetisnull(r, 0, 0)) {
		o->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&o->res.err, "no variant %.64s in sweep %s", name, id);
		return;
	}
	was = PQgetvalue(r, 0, 0);
	if (strcmp(was, "submitting") != 0) {
		o->res.rc = TG_STATE_CONFLICT;
		tg_err_set(&o->res.err, "sweep variant %.64s is %s, not submitting", name, was);
	}
}

/* $1 the run, $2 the sweep, $3 the variant. */
static void
answer_submitted(struct pg_op *o, const PGresult *r)
{
	if (o->res.rc == TG_STATE_CONFLICT)	/* the run's id is known */
		tg_err_set(&o->res.err, "simulation %s is already recorded", o->val[0]);
	expect_submitting(o, r, o->val[1], o->val[2]);
	((tg_state_done_cb)o->cb)(&o->res, o->arg);
}

struct tg_state_op *
tg_state_pg_sweep_submitted(void *impl, const char *id, const char *name,
    const struct tg_run_new *run, int64_t now_ms, tg_state_done_cb cb, void *arg)
{
	struct pg *pg = impl;
	struct pg_op *o = tg_state_pg_op_new(pg, PG_SW_SUBMITTED, answer_submitted, CB(cb),
	    arg);

	if (tg_state_run_new_ok(run, &o->res.err) != 0) {
		o->res.rc = TG_STATE_ERROR;
		return tg_state_pg_answer_now(o);
	}
	tg_state_pg_param_str(o, run->simulation_id);
	tg_state_pg_param_str(o, id);
	tg_state_pg_param_str(o, name);
	tg_state_pg_param_run(o, pg, run, id, now_ms);
	return tg_state_pg_submit(o, PG_RUNS);
}

static void
answer_unclaim(struct pg_op *o, const PGresult *r)
{
	expect_submitting(o, r, o->val[0], o->val[1]);
	((tg_state_done_cb)o->cb)(&o->res, o->arg);
}

struct tg_state_op *
tg_state_pg_sweep_unclaim(void *impl, const char *id, const char *name, const char *why,
    int final, int64_t now_ms, tg_state_done_cb cb, void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_SW_UNCLAIM, answer_unclaim, CB(cb), arg);

	tg_state_pg_param_str(o, id);
	tg_state_pg_param_str(o, name);
	tg_state_pg_param_str(o, tg_state_variant_state_name(final ? TG_VARIANT_REJECTED :
	    TG_VARIANT_PENDING));
	tg_state_pg_param_str(o, tg_state_variant_unclaim_error(why));
	return tg_state_pg_submit(o, PG_RUNS);
}

/* No row: no sweep; else 1 when it became done with this call. */
static void
answer_settle(struct pg_op *o, const PGresult *r)
{
	if (r != NULL && PQntuples(r) == 0) {
		o->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&o->res.err, "no sweep %s", o->val[0]);
	}
	((tg_state_num_cb)o->cb)(&o->res, r != NULL && PQntuples(r) > 0 ?
	    tg_state_pg_col_i64(r, 0, 0) : 0, o->arg);
}

struct tg_state_op *
tg_state_pg_sweep_settle(void *impl, const char *id, int64_t now_ms, tg_state_num_cb cb,
    void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_SW_SETTLE, answer_settle, CB(cb), arg);

	tg_state_pg_param_str(o, id);
	tg_state_pg_param_i64(o, now_ms);
	return tg_state_pg_submit(o, PG_RUNS);
}
