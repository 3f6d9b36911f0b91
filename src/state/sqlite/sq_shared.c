/*
 * sq_shared.c - what a fleet shares and one instance keeps to itself, in
 * the SQLite state backend (include/tidegate/state.h): correlation
 * ownership (owners.c's table: record and prune on the writer thread,
 * lookup on the loop; the row count lives with the writer's connection,
 * so count is queued behind the writes), vendor token records (a small
 * table in memory), and poll-entry leadership and cached answers (one
 * instance always leads; publish keeps nothing and fetch finds nothing,
 * since the poll multiplexer already holds its own answers; release and
 * notify have nobody to tell and answer OK; a waiting webhook job's fetch
 * is always this instance's: hold is OK, adopt finds none).
 */
#include <stdlib.h>
#include <string.h>

#include "sq.h"

/* ---- correlation ownership ---- */

static void
run_record(struct sq_op *o)
{
	tg_state_sq_rc(o, tg_owners_record(o->sq->wown, o->s1, o->s2, o->s3, o->t1,
	    &o->res.err));
}

struct tg_state_op *
tg_state_sq_owners_record(void *impl, const char *family, const char *cid, const char *key,
    int64_t now_ms, tg_state_done_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_OWNERS, run_record,
	    tg_state_sq_answer_done, (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(family);
	o->s2 = tg_state_sq_dup(cid);
	o->s3 = tg_state_sq_dup(key);
	o->t1 = now_ms;
	return tg_state_sq_write(o);
}

static void
run_lookup(struct sq_op *o)
{
	int rc = tg_owners_lookup(o->sq->rown, o->s1, o->s2, o->t1, &o->out, &o->res.err);

	if (rc == TG_OWNERS_NONE) {
		o->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&o->res.err, "no owner recorded for %s %s", o->s1, o->s2);
		return;
	}
	tg_state_sq_rc(o, rc);
}

struct tg_state_op *
tg_state_sq_owners_lookup(void *impl, const char *family, const char *cid, int64_t now_ms,
    tg_state_str_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_OWNERS, run_lookup,
	    tg_state_sq_answer_str, (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(family);
	o->s2 = tg_state_sq_dup(cid);
	o->t1 = now_ms;
	return tg_state_sq_read(o);
}

static void
run_prune(struct sq_op *o)
{
	long long n = tg_owners_prune(o->sq->wown, o->t1, &o->res.err);

	tg_state_sq_rc(o, n < 0 ? -1 : 0);
	o->n1 = n;
}

struct tg_state_op *
tg_state_sq_owners_prune(void *impl, int64_t now_ms, tg_state_num_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_OWNERS, run_prune,
	    tg_state_sq_answer_num, (void (*)(void))cb, arg);

	o->t1 = now_ms;
	return tg_state_sq_write(o);
}

static void
run_count(struct sq_op *o)
{
	o->n1 = tg_owners_count(o->sq->wown);
	o->res.rc = TG_STATE_OK;
}

struct tg_state_op *
tg_state_sq_owners_count(void *impl, tg_state_num_cb cb, void *arg)
{
	return tg_state_sq_write(tg_state_sq_op_new(impl, SQ_OWNERS, run_count,
	    tg_state_sq_answer_num, (void (*)(void))cb, arg));
}

/* ---- vendor token records (in memory, loop thread only) ---- */

struct sq_token {
	struct sq_token *next;
	char *service, *token;
	int64_t expires_at;
};

static struct sq_token **
token_find(struct sq *sq, const char *service)
{
	struct sq_token **t;

	for (t = &sq->tokens; *t != NULL; t = &(*t)->next)
		if (strcmp((*t)->service, service) == 0)
			break;
	return t;
}

static void
token_free(struct sq_token *t)
{
	free(t->service);
	free(t->token);
	free(t);
}

void
tg_state_sq_tokens_free(struct sq *sq)
{
	struct sq_token *t;

	while ((t = sq->tokens) != NULL) {
		sq->tokens = t->next;
		token_free(t);
	}
}

static void
run_token_get(struct sq_op *o)
{
	struct sq_token *t = *token_find(o->sq, o->s1);

	if (t == NULL) {
		o->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&o->res.err, "no token held for %s", o->s1);
		return;
	}
	o->out = tg_xstrdup(t->token);
	o->n1 = t->expires_at;
	o->res.rc = TG_STATE_OK;
}

static void
answer_token(struct sq_op *o)
{
	struct tg_state_token t = { o->out, o->n1 };

	((tg_state_token_cb)o->cb)(&o->res, o->res.rc == 0 ? &t : NULL, o->arg);
}

struct tg_state_op *
tg_state_sq_token_get(void *impl, const char *service, tg_state_token_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_NONE, run_token_get, answer_token,
	    (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(service);
	return tg_state_sq_read(o);
}

static void
run_token_put(struct sq_op *o)
{
	struct sq_token **slot = token_find(o->sq, o->s1), *t = *slot;

	if (t == NULL) {
		t = *slot = tg_xcalloc(1, sizeof(*t));
		t->service = tg_xstrdup(o->s1);
	}
	free(t->token);
	t->token = tg_xstrdup(o->s2);
	t->expires_at = o->t1;
	o->res.rc = TG_STATE_OK;
}

struct tg_state_op *
tg_state_sq_token_put(void *impl, const char *service, const struct tg_state_token *t,
    tg_state_done_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_NONE, run_token_put,
	    tg_state_sq_answer_done, (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(service);
	o->s2 = tg_state_sq_dup(t->token != NULL ? t->token : "");
	o->t1 = t->expires_at;
	return tg_state_sq_read(o);
}

static void
run_token_invalidate(struct sq_op *o)
{
	struct sq_token **slot = token_find(o->sq, o->s1), *t = *slot;

	if (t == NULL || (o->s2 != NULL && strcmp(t->token, o->s2) != 0)) {
		o->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&o->res.err, "%s holds no such token", o->s1);
		return;
	}
	*slot = t->next;
	token_free(t);
	o->res.rc = TG_STATE_OK;
}

struct tg_state_op *
tg_state_sq_token_invalidate(void *impl, const char *service, const char *token,
    tg_state_done_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_NONE, run_token_invalidate,
	    tg_state_sq_answer_done, (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(service);
	o->s2 = tg_state_sq_dup(token);
	return tg_state_sq_read(o);
}

/* ---- poll entries: one instance ---- */

static void
run_lead(struct sq_op *o)
{
	o->n1 = 1;
	o->res.rc = TG_STATE_OK;
}

struct tg_state_op *
tg_state_sq_poll_lead(void *impl, const char *key, int64_t now_ms, int64_t ttl_ms,
    tg_state_num_cb cb, void *arg)
{
	return tg_state_sq_read(tg_state_sq_op_new(impl, SQ_NONE, run_lead,
	    tg_state_sq_answer_num, (void (*)(void))cb, arg));
}

static void
run_publish(struct sq_op *o)
{
	o->res.rc = TG_STATE_OK;
}

struct tg_state_op *
tg_state_sq_poll_publish(void *impl, const char *key, const struct tg_state_answer *a,
    int64_t now_ms, int64_t ttl_ms, tg_state_done_cb cb, void *arg)
{
	return tg_state_sq_read(tg_state_sq_op_new(impl, SQ_NONE, run_publish,
	    tg_state_sq_answer_done, (void (*)(void))cb, arg));
}

/* Nothing to give up, nobody to tell: one instance. */
struct tg_state_op *
tg_state_sq_poll_release(void *impl, const char *key, tg_state_done_cb cb, void *arg)
{
	return tg_state_sq_read(tg_state_sq_op_new(impl, SQ_NONE, run_publish,
	    tg_state_sq_answer_done, (void (*)(void))cb, arg));
}

struct tg_state_op *
tg_state_sq_notify(void *impl, const char *topic, const char *what, tg_state_done_cb cb,
    void *arg)
{
	return tg_state_sq_read(tg_state_sq_op_new(impl, SQ_NONE, run_publish,
	    tg_state_sq_answer_done, (void (*)(void))cb, arg));
}

struct tg_state_op *
tg_state_sq_outbox_hold(void *impl, const char *const *ids, size_t n, int64_t now_ms,
    tg_state_done_cb cb, void *arg)
{
	return tg_state_sq_read(tg_state_sq_op_new(impl, SQ_NONE, run_publish,
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
	return tg_state_sq_read(tg_state_sq_op_new(impl, SQ_NONE, run_publish, answer_none,
	    (void (*)(void))cb, arg));
}

static void
run_fetch(struct sq_op *o)
{
	o->res.rc = TG_STATE_NOT_FOUND;
	tg_err_set(&o->res.err, "no answer published for %s (one instance)", o->s1);
}

static void
answer_fetch(struct sq_op *o)
{
	((tg_state_answer_cb)o->cb)(&o->res, NULL, o->arg);
}

struct tg_state_op *
tg_state_sq_poll_fetch(void *impl, const char *key, int64_t now_ms, tg_state_answer_cb cb,
    void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_NONE, run_fetch, answer_fetch,
	    (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(key);
	return tg_state_sq_read(o);
}
