/*
 * sq_sweeps.c - the sweeps' operations of the SQLite state backend
 * (include/tidegate/state.h, "sweeps"): each wraps one call of the sweep
 * store (include/tidegate/runs_store.h, sweep_store.c). create, claim,
 * submitted, unclaim and settle run on the writer thread's connection;
 * get, list, variants and running read on the loop's.
 */
#include <stdlib.h>
#include <string.h>

#include "sq.h"

/* ---- create ---- */

static void
free_sweep_new(struct sq_op *o)
{
	struct tg_sweep_new *s = o->in;
	size_t i;

	if (s == NULL)
		return;
	for (i = 0; i < s->nvariants; i++) {
		free(s->variants[i].name);
		free(s->variants[i].body);
	}
	free((void *)s->variants);
	free((char *)s->api_key);
	free((char *)s->base_case_id);
	free((char *)s->callback_url);
	free(s);
}

static struct tg_sweep_new *
sweep_new_dup(const struct tg_sweep_new *s)
{
	struct tg_sweep_new *c = tg_xcalloc(1, sizeof(*c));
	struct tg_sweep_variant_new *v = tg_xcalloc(s->nvariants + 1, sizeof(*v));
	size_t i;

	*c = *s;
	c->api_key = tg_state_sq_dup(s->api_key);
	c->base_case_id = tg_state_sq_dup(s->base_case_id);
	c->callback_url = tg_state_sq_dup(s->callback_url);
	for (i = 0; i < s->nvariants; i++) {
		v[i].name = tg_state_sq_dup(s->variants[i].name);
		v[i].body = tg_xstrndup(s->variants[i].body, s->variants[i].len);
		v[i].len = s->variants[i].len;
	}
	c->variants = v;
	return c;
}

static void
run_create(struct sq_op *o)
{
	char id[TG_SWEEP_ID_LEN];

	if (tg_state_sq_rc(o, tg_runs_sweep_create(o->sq->wruns, o->in, o->t1, id,
	    &o->res.err)) == 0)
		o->out = tg_xstrdup(id);
}

struct tg_state_op *
tg_state_sq_sweep_create(void *impl, const struct tg_sweep_new *s, int64_t now_ms,
    tg_state_str_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_RUNS, run_create,
	    tg_state_sq_answer_str, (void (*)(void))cb, arg);

	o->in = sweep_new_dup(s);
	o->cleanup = free_sweep_new;
	o->t1 = now_ms;
	return tg_state_sq_write(o);
}

/* ---- reads of sweeps ---- */

static void
free_sweeps(struct sq_op *o)
{
	tg_sweeps_free(o->p, o->np);
}

static void
answer_sweeps(struct sq_op *o)
{
	((tg_state_sweeps_cb)o->cb)(&o->res, o->p, o->res.rc == 0 ? o->np : 0, o->more,
	    o->arg);
}

static void
run_get(struct sq_op *o)
{
	struct tg_sweep *s = tg_xcalloc(1, sizeof(*s));

	o->p = s;
	if (tg_state_sq_rc(o, tg_runs_sweep_get(o->sq->rruns, o->s1, s, &o->res.err)) == 0)
		o->np = 1;
}

struct tg_state_op *
tg_state_sq_sweep_get(void *impl, const char *id, tg_state_sweeps_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_RUNS, run_get, answer_sweeps,
	    (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(id);
	o->cleanup = free_sweeps;
	return tg_state_sq_read(o);
}

static void
run_list(struct sq_op *o)
{
	struct tg_sweep *s = NULL;
	size_t n = 0;

	if (tg_state_sq_rc(o, tg_runs_sweep_list(o->sq->rruns, o->s1, o->s2, (size_t)o->t1,
	    (size_t)o->t2, &s, &n, &o->more, &o->res.err)) == 0) {
		o->p = s;
		o->np = n;
	}
}

struct tg_state_op *
tg_state_sq_sweep_list(void *impl, const char *api_key, const char *state, size_t limit,
    size_t offset, tg_state_sweeps_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_RUNS, run_list, answer_sweeps,
	    (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(api_key);
	o->s2 = tg_state_sq_dup(state);
	o->t1 = (int64_t)limit;
	o->t2 = (int64_t)offset;
	o->cleanup = free_sweeps;
	return tg_state_sq_read(o);
}

static void
run_variants(struct sq_op *o)
{
	struct tg_sweep_variant *v = NULL;
	size_t n = 0;

	if (tg_state_sq_rc(o, tg_runs_sweep_variants(o->sq->rruns, o->s1, &v, &n,
	    &o->res.err)) == 0) {
		o->p = v;
		o->np = n;
	}
}

static void
answer_variants(struct sq_op *o)
{
	((tg_state_variants_cb)o->cb)(&o->res, o->p, o->res.rc == 0 ? o->np : 0, o->arg);
}

static void
free_variants(struct sq_op *o)
{
	tg_sweep_variants_free(o->p, o->np);
}

struct tg_state_op *
tg_state_sq_sweep_variants(void *impl, const char *id, tg_state_variants_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_RUNS, run_variants, answer_variants,
	    (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(id);
	o->cleanup = free_variants;
	return tg_state_sq_read(o);
}

static void
run_running(struct sq_op *o)
{
	char **ids = NULL;
	size_t n = 0;

	if (tg_state_sq_rc(o, tg_runs_sweeps_running(o->sq->rruns, &ids, &n,
	    &o->res.err)) == 0) {
		o->p = ids;
		o->np = n;
	}
}

static void
answer_ids(struct sq_op *o)
{
	((tg_state_strs_cb)o->cb)(&o->res, (const char *const *)o->p,
	    o->res.rc == 0 ? o->np : 0, o->arg);
}

static void
free_ids(struct sq_op *o)
{
	tg_runs_ids_free(o->p, o->np);
}

struct tg_state_op *
tg_state_sq_sweep_running(void *impl, tg_state_strs_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_RUNS, run_running, answer_ids,
	    (void (*)(void))cb, arg);

	o->cleanup = free_ids;
	return tg_state_sq_read(o);
}

/* ---- the variant queue ---- */

static void
run_claim(struct sq_op *o)
{
	struct tg_sweep_claim *c = tg_xcalloc(1, sizeof(*c));

	o->p = c;
	o->n1 = tg_state_sq_rc(o, tg_runs_sweep_claim(o->sq->wruns, o->s1, o->t1, c,
	    &o->res.err));
}

static void
answer_claim(struct sq_op *o)
{
	((tg_state_claim_cb)o->cb)(&o->res, o->res.rc == 0 && o->n1 == 1 ? o->p : NULL,
	    o->arg);
}

static void
free_claim(struct sq_op *o)
{
	tg_sweep_claim_cleanup(o->p);
	free(o->p);
}

struct tg_state_op *
tg_state_sq_sweep_claim(void *impl, const char *id, int64_t now_ms, tg_state_claim_cb cb,
    void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_RUNS, run_claim, answer_claim,
	    (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(id);
	o->t1 = now_ms;
	o->cleanup = free_claim;
	return tg_state_sq_write(o);
}

static void
run_submitted(struct sq_op *o)
{
	tg_state_sq_rc(o, tg_runs_sweep_submitted(o->sq->wruns, o->s1, o->s2, o->in, o->t1,
	    &o->res.err));
}

static void
free_run_new(struct sq_op *o)
{
	tg_state_sq_run_new_free(o->in);
}

struct tg_state_op *
tg_state_sq_sweep_submitted(void *impl, const char *id, const char *name,
    const struct tg_run_new *run, int64_t now_ms, tg_state_done_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_RUNS, run_submitted,
	    tg_state_sq_answer_done, (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(id);
	o->s2 = tg_state_sq_dup(name);
	o->in = tg_state_sq_run_new_dup(run);
	o->cleanup = free_run_new;
	o->t1 = now_ms;
	return tg_state_sq_write(o);
}

static void
run_unclaim(struct sq_op *o)
{
	tg_state_sq_rc(o, tg_runs_sweep_unclaim(o->sq->wruns, o->s1, o->s2, o->s3, (int)o->t1,
	    o->t2, &o->res.err));
}

struct tg_state_op *
tg_state_sq_sweep_unclaim(void *impl, const char *id, const char *name, const char *why,
    int final, int64_t now_ms, tg_state_done_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_RUNS, run_unclaim,
	    tg_state_sq_answer_done, (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(id);
	o->s2 = tg_state_sq_dup(name);
	o->s3 = tg_state_sq_dup(why);
	o->t1 = final;
	o->t2 = now_ms;
	return tg_state_sq_write(o);
}

static void
run_settle(struct sq_op *o)
{
	o->n1 = tg_state_sq_rc(o, tg_runs_sweep_settle(o->sq->wruns, o->s1, o->t1,
	    &o->res.err));
}

struct tg_state_op *
tg_state_sq_sweep_settle(void *impl, const char *id, int64_t now_ms, tg_state_num_cb cb,
    void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_RUNS, run_settle,
	    tg_state_sq_answer_num, (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(id);
	o->t1 = now_ms;
	return tg_state_sq_write(o);
}
