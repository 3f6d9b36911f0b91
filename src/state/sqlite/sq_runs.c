/*
 * sq_runs.c - the run registry's operations of the SQLite state backend
 * (include/tidegate/state.h, "run registry"): each wraps one call of the
 * registry (include/tidegate/runs_store.h). Writes (add, status, checks,
 * figures, archive, expire, purge) run on the writer thread's connection;
 * get, list, due, next_due, next_unhandled, stats and archive reads on
 * the loop's.
 */
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_gen.h>

#include "tidegate/json.h"
#include "sq.h"

/* ---- copies of a new run (sweeps use them too) ---- */

struct tg_run_new *
tg_state_sq_run_new_dup(const struct tg_run_new *r)
{
	struct tg_run_new *c = tg_xcalloc(1, sizeof(*c));

	*c = *r;
	c->simulation_id = tg_state_sq_dup(r->simulation_id);
	c->api_key = tg_state_sq_dup(r->api_key);
	c->host = tg_state_sq_dup(r->host);
	c->case_id = tg_state_sq_dup(r->case_id);
	c->case_sha256 = tg_state_sq_dup(r->case_sha256);
	c->validation = tg_state_sq_dup(r->validation);
	c->callback_url = tg_state_sq_dup(r->callback_url);
	return c;
}

void
tg_state_sq_run_new_free(struct tg_run_new *r)
{
	if (r == NULL)
		return;
	free((char *)r->simulation_id);
	free((char *)r->api_key);
	free((char *)r->host);
	free((char *)r->case_id);
	free((char *)r->case_sha256);
	free((char *)r->validation);
	free((char *)r->callback_url);
	free(r);
}

static void
free_run_new(struct sq_op *o)
{
	tg_state_sq_run_new_free(o->in);
}

/* ---- writes ---- */

static void
run_add(struct sq_op *o)
{
	tg_state_sq_rc(o, tg_runs_add(o->sq->wruns, o->in, o->t1, &o->res.err));
}

struct tg_state_op *
tg_state_sq_runs_add(void *impl, const struct tg_run_new *run, int64_t now_ms,
    tg_state_done_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_RUNS, run_add, tg_state_sq_answer_done,
	    (void (*)(void))cb, arg);

	o->in = tg_state_sq_run_new_dup(run);
	o->cleanup = free_run_new;
	o->t1 = now_ms;
	return tg_state_sq_write(o);
}

static void
run_set_status(struct sq_op *o)
{
	o->n1 = tg_state_sq_rc(o, tg_runs_set_status(o->sq->wruns, o->s1,
	    (enum tg_run_status)o->t1, o->t2, o->t3, &o->res.err));
}

struct tg_state_op *
tg_state_sq_runs_set_status(void *impl, const char *id, enum tg_run_status status,
    int64_t completed_at, int64_t now_ms, tg_state_num_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_RUNS, run_set_status,
	    tg_state_sq_answer_num, (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(id);
	o->t1 = status;
	o->t2 = completed_at;
	o->t3 = now_ms;
	return tg_state_sq_write(o);
}

static void
run_check_failed(struct sq_op *o)
{
	tg_state_sq_rc(o, tg_runs_check_failed(o->sq->wruns, o->s1, o->s2, o->t1, o->t2,
	    &o->res.err));
}

struct tg_state_op *
tg_state_sq_runs_check_failed(void *impl, const char *id, const char *why,
    int64_t retry_after_ms, int64_t now_ms, tg_state_done_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_RUNS, run_check_failed,
	    tg_state_sq_answer_done, (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(id);
	o->s2 = tg_state_sq_dup(why);
	o->t1 = retry_after_ms;
	o->t2 = now_ms;
	return tg_state_sq_write(o);
}

static void
run_set_handled(struct sq_op *o)
{
	tg_state_sq_rc(o, tg_runs_set_handled(o->sq->wruns, o->s1, &o->res.err));
}

struct tg_state_op *
tg_state_sq_runs_set_handled(void *impl, const char *id, tg_state_done_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_RUNS, run_set_handled,
	    tg_state_sq_answer_done, (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(id);
	return tg_state_sq_write(o);
}

/* The figures travel as JSON text: the caller's tree stays the caller's. */
static void
run_set_figures(struct sq_op *o)
{
	yajl_val v = tg_json_parse(o->s2, strlen(o->s2), &o->res.err);

	if (v == NULL) {
		tg_state_sq_rc(o, -1);
		return;
	}
	tg_state_sq_rc(o, tg_runs_set_figures(o->sq->wruns, o->s1, v, &o->res.err));
	yajl_tree_free(v);
}

struct tg_state_op *
tg_state_sq_runs_set_figures(void *impl, const char *id, yajl_val results,
    tg_state_done_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_RUNS, run_set_figures,
	    tg_state_sq_answer_done, (void (*)(void))cb, arg);
	yajl_gen g = tg_json_gen_new();
	const unsigned char *buf;
	size_t len;

	tg_json_gen_val(g, results);
	yajl_gen_get_buf(g, &buf, &len);
	o->s1 = tg_state_sq_dup(id);
	o->s2 = tg_xstrndup((const char *)buf, len);
	yajl_gen_free(g);
	return tg_state_sq_write(o);
}

static void
run_archive(struct sq_op *o)
{
	tg_state_sq_rc(o, tg_runs_archive(o->sq->wruns, o->s1, o->p, o->np, o->t1,
	    &o->res.err));
}

struct tg_state_op *
tg_state_sq_runs_archive(void *impl, const char *id, const void *data, size_t len,
    int64_t now_ms, tg_state_done_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_RUNS, run_archive,
	    tg_state_sq_answer_done, (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(id);
	tg_state_sq_copy_bytes(o, data, len);
	o->t1 = now_ms;
	return tg_state_sq_write(o);
}

static void
run_expire(struct sq_op *o)
{
	size_t n = 0;

	tg_state_sq_rc(o, tg_runs_expire(o->sq->wruns, o->t1, &n, &o->res.err));
	o->n1 = (int64_t)n;
}

struct tg_state_op *
tg_state_sq_runs_expire(void *impl, int64_t now_ms, tg_state_num_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_RUNS, run_expire,
	    tg_state_sq_answer_num, (void (*)(void))cb, arg);

	o->t1 = now_ms;
	return tg_state_sq_write(o);
}

static void
run_purge(struct sq_op *o)
{
	size_t nr = 0, ns = 0;

	tg_state_sq_rc(o, tg_runs_purge(o->sq->wruns, o->t1, &nr, &ns, &o->res.err));
	o->n1 = (int64_t)nr;
	o->n2 = (int64_t)ns;
}

struct tg_state_op *
tg_state_sq_runs_purge(void *impl, int64_t now_ms, tg_state_pair_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_RUNS, run_purge,
	    tg_state_sq_answer_pair, (void (*)(void))cb, arg);

	o->t1 = now_ms;
	return tg_state_sq_write(o);
}

/* ---- reads of runs ---- */

static void
free_runs(struct sq_op *o)
{
	tg_runs_free(o->p, o->np);
}

static void
answer_runs(struct sq_op *o)
{
	((tg_state_runs_cb)o->cb)(&o->res, o->p, o->res.rc == 0 ? o->np : 0, o->more, o->arg);
}

/* A read answered with runs. */
static struct sq_op *
runs_op(void *impl, sq_fn run, tg_state_runs_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_RUNS, run, answer_runs,
	    (void (*)(void))cb, arg);

	o->cleanup = free_runs;
	return o;
}

static void
run_get(struct sq_op *o)
{
	struct tg_run *r = tg_xcalloc(1, sizeof(*r));

	o->p = r;
	if (tg_state_sq_rc(o, tg_runs_get(o->sq->rruns, o->s1, r, &o->res.err)) == 0)
		o->np = 1;
}

struct tg_state_op *
tg_state_sq_runs_get(void *impl, const char *id, tg_state_runs_cb cb, void *arg)
{
	struct sq_op *o = runs_op(impl, run_get, cb, arg);

	o->s1 = tg_state_sq_dup(id);
	return tg_state_sq_read(o);
}

static void
run_list(struct sq_op *o)
{
	struct tg_run *runs = NULL;
	size_t n = 0;

	if (tg_state_sq_rc(o, tg_runs_list(o->sq->rruns, o->in, &runs, &n, &o->more,
	    &o->res.err)) == 0) {
		o->p = runs;
		o->np = n;
	}
}

struct tg_state_op *
tg_state_sq_runs_list(void *impl, const struct tg_runs_query *q, tg_state_runs_cb cb,
    void *arg)
{
	struct sq_op *o = runs_op(impl, run_list, cb, arg);

	o->in = (void *)q;	/* a read: used before this returns */
	return tg_state_sq_read(o);
}

static void
run_get_many(struct sq_op *o)
{
	struct tg_run *runs = NULL;
	size_t n = 0;

	if (tg_state_sq_rc(o, tg_runs_get_many(o->sq->rruns, o->s1, &runs, &n,
	    &o->res.err)) == 0) {
		o->p = runs;
		o->np = n;
	}
}

struct tg_state_op *
tg_state_sq_runs_get_many(void *impl, const char *ids_json, tg_state_runs_cb cb, void *arg)
{
	struct sq_op *o = runs_op(impl, run_get_many, cb, arg);

	o->s1 = tg_state_sq_dup(ids_json);
	return tg_state_sq_read(o);
}

static void
run_due(struct sq_op *o)
{
	struct tg_run *runs = NULL;
	size_t n = 0;

	if (tg_state_sq_rc(o, tg_runs_due(o->sq->rruns, o->t1, (size_t)o->t2, &runs, &n,
	    &o->res.err)) == 0) {
		o->p = runs;
		o->np = n;
	}
}

struct tg_state_op *
tg_state_sq_runs_due(void *impl, int64_t now_ms, size_t max, tg_state_runs_cb cb, void *arg)
{
	struct sq_op *o = runs_op(impl, run_due, cb, arg);

	o->t1 = now_ms;
	o->t2 = (int64_t)max;
	return tg_state_sq_read(o);
}

/* ---- other reads ---- */

static void
run_next_due(struct sq_op *o)
{
	o->n1 = tg_runs_next_due(o->sq->rruns, o->t1);
	o->res.rc = TG_STATE_OK;
}

struct tg_state_op *
tg_state_sq_runs_next_due(void *impl, int64_t now_ms, tg_state_num_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_RUNS, run_next_due,
	    tg_state_sq_answer_num, (void (*)(void))cb, arg);

	o->t1 = now_ms;
	return tg_state_sq_read(o);
}

static void
run_unhandled(struct sq_op *o)
{
	enum tg_run_status st = TG_RUN_IN_PROGRESS;

	tg_state_sq_rc(o, tg_runs_next_unhandled(o->sq->rruns, &o->out, &st, &o->res.err));
	o->n1 = st;
}

static void
answer_unhandled(struct sq_op *o)
{
	((tg_state_unhandled_cb)o->cb)(&o->res, o->res.rc == 0 ? o->out : NULL,
	    (enum tg_run_status)o->n1, o->arg);
}

struct tg_state_op *
tg_state_sq_runs_next_unhandled(void *impl, tg_state_unhandled_cb cb, void *arg)
{
	return tg_state_sq_read(tg_state_sq_op_new(impl, SQ_RUNS, run_unhandled,
	    answer_unhandled, (void (*)(void))cb, arg));
}

static void
run_stats(struct sq_op *o)
{
	struct tg_runs_stats *s = tg_xcalloc(1, sizeof(*s));

	o->p = s;
	tg_state_sq_rc(o, tg_runs_stats(o->sq->rruns, s, &o->res.err));
}

static void
answer_stats(struct sq_op *o)
{
	((tg_state_runs_stats_cb)o->cb)(&o->res, o->res.rc == 0 ? o->p : NULL, o->arg);
}

struct tg_state_op *
tg_state_sq_runs_stats(void *impl, tg_state_runs_stats_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_RUNS, run_stats, answer_stats,
	    (void (*)(void))cb, arg);

	o->cleanup = tg_state_sq_free_bytes;
	return tg_state_sq_read(o);
}

static void
run_archived(struct sq_op *o)
{
	tg_state_sq_rc(o, tg_runs_archived(o->sq->rruns, o->s1, &o->p, &o->np, &o->res.err));
}

static void
answer_blob(struct sq_op *o)
{
	((tg_state_blob_cb)o->cb)(&o->res, o->res.rc == 0 ? o->p : NULL,
	    o->res.rc == 0 ? o->np : 0, o->arg);
}

struct tg_state_op *
tg_state_sq_runs_archived(void *impl, const char *id, tg_state_blob_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_RUNS, run_archived, answer_blob,
	    (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(id);
	o->cleanup = tg_state_sq_free_bytes;
	return tg_state_sq_read(o);
}

static void
run_usage(struct sq_op *o)
{
	tg_state_sq_rc(o, tg_runs_archive_usage(o->sq->rruns, &o->n1, &o->n2, &o->res.err));
}

struct tg_state_op *
tg_state_sq_runs_archive_usage(void *impl, tg_state_pair_cb cb, void *arg)
{
	return tg_state_sq_read(tg_state_sq_op_new(impl, SQ_RUNS, run_usage,
	    tg_state_sq_answer_pair, (void (*)(void))cb, arg));
}
