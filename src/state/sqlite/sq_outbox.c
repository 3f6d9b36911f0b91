/*
 * sq_outbox.c - the webhook outbox's operations of the SQLite state
 * backend (include/tidegate/state.h, "webhook outbox: jobs" and
 * "admin"): each wraps one call of the outbox store
 * (include/tidegate/outbox.h). Writes run on the writer thread's
 * connection; list, get and next_due read on the loop's. The counters of
 * stats live with the writer's connection, so stats is queued behind the
 * writes it counts.
 */
#include <stdlib.h>
#include <string.h>

#include "outbox_db.h"
#include "sq.h"

/* ---- add ---- */

static void
free_new(struct sq_op *o)
{
	struct tg_outbox_new *j = o->in;

	if (j == NULL)
		return;
	free((char *)j->url);
	free((char *)j->secret_ref);
	free((char *)j->api_key);
	free((char *)j->kind);
	free((char *)j->correlation_id);
	free((char *)j->service);
	free((char *)j->content_type);
	free(j);
}

static void
run_add(struct sq_op *o)
{
	char id[TG_WEBHOOK_ID_LEN];

	if (tg_state_sq_rc(o, tg_outbox_add(o->sq->wob, o->in, o->t1, id, &o->res.err)) == 0)
		o->out = tg_xstrdup(id);
}

struct tg_state_op *
tg_state_sq_outbox_add(void *impl, const struct tg_outbox_new *job, int64_t now_ms,
    tg_state_str_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_OUTBOX, run_add, tg_state_sq_answer_str,
	    (void (*)(void))cb, arg);
	struct tg_outbox_new *j = tg_xcalloc(1, sizeof(*j));

	j->url = tg_state_sq_dup(job->url);
	j->secret_ref = tg_state_sq_dup(job->secret_ref);
	j->api_key = tg_state_sq_dup(job->api_key);
	j->kind = tg_state_sq_dup(job->kind);
	j->correlation_id = tg_state_sq_dup(job->correlation_id);
	j->service = tg_state_sq_dup(job->service);
	j->content_type = tg_state_sq_dup(job->content_type);
	o->in = j;
	o->cleanup = free_new;
	o->t1 = now_ms;
	return tg_state_sq_write(o);
}

/* ---- one job by id ---- */

static void
run_set_cid(struct sq_op *o)
{
	tg_state_sq_rc(o, tg_outbox_set_correlation_id(o->sq->wob, o->s1, o->s2, &o->res.err));
}

struct tg_state_op *
tg_state_sq_outbox_set_cid(void *impl, const char *id, const char *cid, tg_state_done_cb cb,
    void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_OUTBOX, run_set_cid,
	    tg_state_sq_answer_done, (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(id);
	o->s2 = tg_state_sq_dup(cid);
	return tg_state_sq_write(o);
}

static void
run_abandon(struct sq_op *o)
{
	tg_state_sq_rc(o, tg_outbox_abandon(o->sq->wob, o->s1, o->s2, o->t1, &o->res.err));
}

struct tg_state_op *
tg_state_sq_outbox_abandon(void *impl, const char *id, const char *reason, int64_t now_ms,
    tg_state_done_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_OUTBOX, run_abandon,
	    tg_state_sq_answer_done, (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(id);
	o->s2 = tg_state_sq_dup(reason);
	o->t1 = now_ms;
	return tg_state_sq_write(o);
}

static void
run_note(struct sq_op *o)
{
	tg_state_sq_rc(o, tg_outbox_note(o->sq->wob, o->s1, o->s2, &o->res.err));
}

struct tg_state_op *
tg_state_sq_outbox_note(void *impl, const char *id, const char *why, tg_state_done_cb cb,
    void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_OUTBOX, run_note,
	    tg_state_sq_answer_done, (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(id);
	o->s2 = tg_state_sq_dup(why);
	return tg_state_sq_write(o);
}

static void
run_redeliver(struct sq_op *o)
{
	tg_state_sq_rc(o, tg_outbox_redeliver(o->sq->wob, o->s1, o->t1, &o->res.err));
}

struct tg_state_op *
tg_state_sq_outbox_redeliver(void *impl, const char *id, int64_t now_ms, tg_state_done_cb cb,
    void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_OUTBOX, run_redeliver,
	    tg_state_sq_answer_done, (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(id);
	o->t1 = now_ms;
	return tg_state_sq_write(o);
}

/* ---- leases ---- */

static void
run_lease(struct sq_op *o)
{
	struct tg_outbox_lease *l = NULL;

	if (tg_state_sq_rc(o, tg_outbox_lease_joined(o->sq->wob, o->t1, o->s1, &l,
	    &o->res.err)) == 1)
		o->p = l;
}

static void
answer_lease(struct sq_op *o)
{
	struct tg_outbox_lease *l = o->p;

	o->p = NULL;
	((tg_state_lease_cb)o->cb)(&o->res, l, o->arg);
}

/* A lease nobody took (cancelled): freed; the job is leased until its
 * lease runs out, then taken again (at least once). */
static void
drop_lease(struct sq_op *o)
{
	tg_outbox_lease_free(o->p);
}

struct tg_state_op *
tg_state_sq_outbox_lease(void *impl, int64_t now_ms, const struct tg_strlist *skip_hosts,
    tg_state_lease_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_OUTBOX, run_lease, answer_lease,
	    (void (*)(void))cb, arg);

	o->t1 = now_ms;
	o->s1 = tg_state_skip_join(skip_hosts);
	o->cleanup = drop_lease;
	return tg_state_sq_write(o);
}

/* What the store reads of a lease: its job, token and attempt. */
static struct tg_outbox_lease *
lease_dup(const struct tg_outbox_lease *l)
{
	struct tg_outbox_lease *c = tg_xcalloc(1, sizeof(*c));

	memcpy(c->id, l->id, sizeof(c->id));
	memcpy(c->token, l->token, sizeof(c->token));
	c->url = tg_state_sq_dup(l->url);
	c->secret_ref = tg_state_sq_dup(l->secret_ref);
	c->content_type = tg_state_sq_dup(l->content_type);
	c->kind = tg_state_sq_dup(l->kind);
	c->correlation_id = tg_state_sq_dup(l->correlation_id);
	c->service = tg_state_sq_dup(l->service);
	c->api_key = tg_state_sq_dup(l->api_key);
	c->payload_path = tg_state_sq_dup(l->payload_path);
	c->size = l->size;
	c->attempt = l->attempt;
	c->expires_at = l->expires_at;
	c->first_delay_ms = l->first_delay_ms;
	return c;
}

static void
free_lease_in(struct sq_op *o)
{
	tg_outbox_lease_free(o->in);
}

/* A lost lease is a conflict, not a failure of the store. */
static void
lease_lost(struct sq_op *o, int rc)
{
	if (rc != 0 && strstr(o->res.err.msg, "was lost") != NULL)
		o->res.rc = TG_STATE_CONFLICT;
}

static void
run_renew(struct sq_op *o)
{
	struct tg_outbox_lease *l = o->in;

	lease_lost(o, tg_state_sq_rc(o, tg_outbox_lease_renew(o->sq->wob, l, o->t1,
	    &o->res.err)));
	o->n1 = l->expires_at;
}

struct tg_state_op *
tg_state_sq_outbox_renew(void *impl, const struct tg_outbox_lease *l, int64_t now_ms,
    tg_state_num_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_OUTBOX, run_renew,
	    tg_state_sq_answer_num, (void (*)(void))cb, arg);

	o->in = lease_dup(l);
	o->cleanup = free_lease_in;
	o->t1 = now_ms;
	return tg_state_sq_write(o);
}

static void
run_release(struct sq_op *o)
{
	tg_state_sq_rc(o, tg_outbox_lease_release(o->sq->wob, o->in, &o->res.err));
}

struct tg_state_op *
tg_state_sq_outbox_release(void *impl, const struct tg_outbox_lease *l, tg_state_done_cb cb,
    void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_OUTBOX, run_release,
	    tg_state_sq_answer_done, (void (*)(void))cb, arg);

	o->in = lease_dup(l);
	o->cleanup = free_lease_in;
	return tg_state_sq_write(o);
}

/* ---- complete ---- */

static void
run_complete(struct sq_op *o)
{
	struct tg_outbox_result r = { (int)o->t2, o->t3, o->s1 };
	enum tg_outbox_state st = TG_OUTBOX_READY;
	int64_t next = 0;
	int rc;

	rc = tg_outbox_complete(o->sq->wob, o->in, &r, o->t1, &st, &next, &o->res.err);
	lease_lost(o, tg_state_sq_rc(o, rc));
	o->n1 = st;
	o->n2 = next;
}

static void
answer_outcome(struct sq_op *o)
{
	((tg_state_outcome_cb)o->cb)(&o->res, (enum tg_outbox_state)o->n1, o->n2, o->arg);
}

struct tg_state_op *
tg_state_sq_outbox_complete(void *impl, const struct tg_outbox_lease *l,
    const struct tg_outbox_result *r, int64_t now_ms, tg_state_outcome_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_OUTBOX, run_complete, answer_outcome,
	    (void (*)(void))cb, arg);

	o->in = lease_dup(l);
	o->cleanup = free_lease_in;
	o->t1 = now_ms;
	o->t2 = r->status;
	o->t3 = r->retry_after_ms;
	o->s1 = tg_state_sq_dup(r->error);
	return tg_state_sq_write(o);
}

/* ---- reads ---- */

static void
run_next_due(struct sq_op *o)
{
	o->n1 = tg_outbox_next_due(o->sq->rob);
	o->res.rc = TG_STATE_OK;
}

struct tg_state_op *
tg_state_sq_outbox_next_due(void *impl, tg_state_num_cb cb, void *arg)
{
	return tg_state_sq_read(tg_state_sq_op_new(impl, SQ_OUTBOX, run_next_due,
	    tg_state_sq_answer_num, (void (*)(void))cb, arg));
}

static void
free_jobs(struct sq_op *o)
{
	tg_outbox_jobs_free(o->p, o->np);
}

static void
answer_jobs(struct sq_op *o)
{
	((tg_state_jobs_cb)o->cb)(&o->res, o->p, o->res.rc == 0 ? o->np : 0, o->arg);
}

static void
run_list(struct sq_op *o)
{
	struct tg_outbox_job *jobs = NULL;
	size_t n = 0;

	if (tg_state_sq_rc(o, tg_outbox_list(o->sq->rob, o->in, &jobs, &n,
	    &o->res.err)) == 0) {
		o->p = jobs;
		o->np = n;
	}
}

struct tg_state_op *
tg_state_sq_outbox_list(void *impl, const struct tg_outbox_query *q, tg_state_jobs_cb cb,
    void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_OUTBOX, run_list, answer_jobs,
	    (void (*)(void))cb, arg);

	o->in = (void *)q;	/* a read: used before this returns */
	o->cleanup = free_jobs;
	return tg_state_sq_read(o);
}

static void
run_get(struct sq_op *o)
{
	struct tg_outbox_job *j = tg_xcalloc(1, sizeof(*j));

	o->p = j;
	if (tg_state_sq_rc(o, tg_outbox_get(o->sq->rob, o->s1, j, &o->res.err)) == 0)
		o->np = 1;
}

struct tg_state_op *
tg_state_sq_outbox_get(void *impl, const char *id, tg_state_jobs_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_OUTBOX, run_get, answer_jobs,
	    (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(id);
	o->cleanup = free_jobs;
	return tg_state_sq_read(o);
}

/* ---- bulk admin ---- */

static void
run_redeliver_since(struct sq_op *o)
{
	size_t n = 0;

	tg_state_sq_rc(o, tg_outbox_redeliver_since(o->sq->wob, o->t1, o->t2, &n,
	    &o->res.err));
	o->n1 = (int64_t)n;
}

struct tg_state_op *
tg_state_sq_outbox_redeliver_since(void *impl, int64_t since_ms, int64_t now_ms,
    tg_state_num_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_OUTBOX, run_redeliver_since,
	    tg_state_sq_answer_num, (void (*)(void))cb, arg);

	o->t1 = since_ms;
	o->t2 = now_ms;
	return tg_state_sq_write(o);
}

static void
run_purge(struct sq_op *o)
{
	size_t n = 0;

	tg_state_sq_rc(o, tg_outbox_purge(o->sq->wob, o->t1, &n, &o->res.err));
	o->n1 = (int64_t)n;
}

struct tg_state_op *
tg_state_sq_outbox_purge(void *impl, int64_t before_ms, tg_state_num_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_OUTBOX, run_purge,
	    tg_state_sq_answer_num, (void (*)(void))cb, arg);

	o->t1 = before_ms;
	return tg_state_sq_write(o);
}

static void
run_stats(struct sq_op *o)
{
	struct tg_outbox_stats *s = tg_xcalloc(1, sizeof(*s));

	o->p = s;
	tg_state_sq_rc(o, tg_outbox_get_stats(o->sq->wob, o->t1, s, &o->res.err));
}

static void
answer_stats(struct sq_op *o)
{
	((tg_state_outbox_stats_cb)o->cb)(&o->res, o->res.rc == 0 ? o->p : NULL, o->arg);
}

static void
free_p(struct sq_op *o)
{
	free(o->p);
}

struct tg_state_op *
tg_state_sq_outbox_stats(void *impl, int64_t now_ms, tg_state_outbox_stats_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_OUTBOX, run_stats, answer_stats,
	    (void (*)(void))cb, arg);

	o->t1 = now_ms;
	o->cleanup = free_p;
	return tg_state_sq_write(o);
}

/* ---- one instance: a waiting job's fetch is always its own ---- */

static void
run_ok(struct sq_op *o)
{
	o->res.rc = TG_STATE_OK;
}

struct tg_state_op *
tg_state_sq_outbox_hold(void *impl, const char *const *ids, size_t n, int64_t now_ms,
    tg_state_done_cb cb, void *arg)
{
	return tg_state_sq_read(tg_state_sq_op_new(impl, SQ_NONE, run_ok,
	    tg_state_sq_answer_done, (void (*)(void))cb, arg));
}

static void
answer_none(struct sq_op *o)
{
	((tg_state_jobs_cb)o->cb)(&o->res, NULL, 0, o->arg);
}

struct tg_state_op *
tg_state_sq_outbox_adopt(void *impl, int64_t now_ms, size_t max, tg_state_jobs_cb cb,
    void *arg)
{
	return tg_state_sq_read(tg_state_sq_op_new(impl, SQ_NONE, run_ok, answer_none,
	    (void (*)(void))cb, arg));
}
