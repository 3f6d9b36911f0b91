/*
 * sq_payload.c - webhook payloads through the SQLite state backend
 * (include/tidegate/state.h, "payloads"): the writer wraps the outbox's
 * payload file (outbox_payload.c). Every step that touches the file or
 * the database (open, append, commit, abort) runs on the writer thread in
 * FIFO order, so appends and the commit after them arrive in the order
 * given. An append moves the caller's evbuffer chains into its own buffer
 * (no copy) and the writer thread drains it into the file: with one
 * append in flight, memory stays bounded by one chunk whatever the size.
 * A writer's quota is kept here, on the loop, and copied into each of its
 * appends and its commit: the writer thread checks it (outbox_quota.c).
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "sq.h"

struct sq_payload {
	struct tg_state_payload pub;
	struct sq *sq;
	struct tg_outbox_payload *p;	/* the file; used on the writer thread only */
	struct tg_outbox_quota q;	/* the loop's copy (zero: none) */
};

/* ---- dropping a writer nobody holds ---- */

static void
run_drop(void *arg)
{
	tg_outbox_payload_abort(arg);
}

static void
on_dropped(void *arg, int cancelled)
{
	if (cancelled)	/* the thread has stopped: nothing else uses the file now */
		tg_outbox_payload_abort(arg);
}

void
tg_state_sq_payload_drop(struct sq *sq, struct tg_outbox_payload *p)
{
	if (p == NULL)
		return;
	if (sq->closing)
		tg_outbox_payload_abort(p);
	else
		tg_worker_submit(sq->w, run_drop, on_dropped, p);
}

/* ---- open ---- */

static void
run_open(struct sq_op *o)
{
	int rc = -1;

	o->p = tg_outbox_payload_open(o->sq->wob, o->s1, &rc, &o->res.err);
	tg_state_sq_rc(o, o->p != NULL ? 0 : rc);
}

static void
answer_open(struct sq_op *o)
{
	struct sq_payload *w = NULL;

	if (o->p != NULL) {
		w = tg_xcalloc(1, sizeof(*w));
		w->pub.be = o->sq->be;
		w->sq = o->sq;
		w->p = o->p;
		o->p = NULL;
	}
	((tg_state_payload_cb)o->cb)(&o->res, w ? &w->pub : NULL, o->arg);
}

static void
drop_open(struct sq_op *o)
{
	tg_state_sq_payload_drop(o->sq, o->p);
}

struct tg_state_op *
tg_state_sq_payload_open(void *impl, const char *id, tg_state_payload_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_OUTBOX, run_open, answer_open,
	    (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(id);
	o->cleanup = drop_open;
	return tg_state_sq_write(o);
}

/* ---- append ---- */

/* The quota the operation carries (t2, t3), for the writer thread. */
static void
limit_of(struct sq_op *o, struct tg_outbox_payload *p)
{
	struct tg_outbox_quota q = { o->t2, o->t3 };

	tg_outbox_payload_limit(p, &q);
}

static void
limit_copy(struct sq_op *o, const struct sq_payload *w)
{
	o->t2 = w->q.max_bytes;
	o->t3 = w->q.key_max_bytes;
}

void
tg_state_sq_payload_limit(struct tg_state_payload *pw, const struct tg_outbox_quota *q)
{
	((struct sq_payload *)pw)->q = *q;
}

static void
run_append(struct sq_op *o)
{
	struct sq_payload *w = o->in;

	limit_of(o, w->p);
	tg_state_sq_rc(o, tg_outbox_payload_write(w->p, o->p, &o->res.err));
}

static void
free_buf(struct sq_op *o)
{
	evbuffer_free(o->p);
}

struct tg_state_op *
tg_state_sq_payload_append(struct tg_state_payload *pw, struct evbuffer *buf,
    tg_state_done_cb cb, void *arg)
{
	struct sq_payload *w = (struct sq_payload *)pw;
	struct sq_op *o = tg_state_sq_op_new(w->sq, SQ_OUTBOX, run_append,
	    tg_state_sq_answer_done, (void (*)(void))cb, arg);

	o->p = evbuffer_new();
	evbuffer_add_buffer(o->p, buf);
	limit_copy(o, w);
	o->in = w;
	o->keep = 1;
	o->cleanup = free_buf;
	return tg_state_sq_write(o);
}

/* ---- commit / abort: both end the writer ---- */

static void
run_commit(struct sq_op *o)
{
	struct sq_payload *w = o->in;

	limit_of(o, w->p);
	tg_state_sq_rc(o, tg_outbox_payload_commit(w->p, o->t1, &o->res.err));
	w->p = NULL;	/* commit frees it in every case */
}

/* The writer goes with its last operation. A commit the worker never ran
 * (closing) still holds the file: drop it. */
static void
free_writer(struct sq_op *o)
{
	struct sq_payload *w = o->in;

	tg_state_sq_payload_drop(o->sq, w->p);
	free(w);
}

struct tg_state_op *
tg_state_sq_payload_commit(struct tg_state_payload *pw, int64_t now_ms, tg_state_done_cb cb,
    void *arg)
{
	struct sq_payload *w = (struct sq_payload *)pw;
	struct sq_op *o = tg_state_sq_op_new(w->sq, SQ_OUTBOX, run_commit,
	    tg_state_sq_answer_done, (void (*)(void))cb, arg);

	o->in = w;
	o->t1 = now_ms;
	limit_copy(o, w);
	o->keep = 1;
	o->cleanup = free_writer;
	return tg_state_sq_write(o);
}

static void
run_abort(struct sq_op *o)
{
	struct sq_payload *w = o->in;

	tg_outbox_payload_abort(w->p);
	w->p = NULL;
}

static void
answer_nothing(struct sq_op *o)
{
}

void
tg_state_sq_payload_abort(struct tg_state_payload *pw)
{
	struct sq_payload *w = (struct sq_payload *)pw;
	struct sq_op *o = tg_state_sq_op_new(w->sq, SQ_OUTBOX, run_abort, answer_nothing,
	    NULL, NULL);

	o->in = w;
	o->keep = 1;
	o->cleanup = free_writer;
	tg_state_sq_write(o);
}

/* ---- a payload in memory ---- */

static void
run_set(struct sq_op *o)
{
	tg_state_sq_rc(o, tg_outbox_payload_set(o->sq->wob, o->s1, o->p, o->np, o->t1,
	    &o->res.err));
}

struct tg_state_op *
tg_state_sq_payload_set(void *impl, const char *id, const void *data, size_t len,
    int64_t now_ms, tg_state_done_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_OUTBOX, run_set,
	    tg_state_sq_answer_done, (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(id);
	tg_state_sq_copy_bytes(o, data, len);
	o->t1 = now_ms;
	return tg_state_sq_write(o);
}

/* ---- the bytes held ---- */

static void
run_usage(struct sq_op *o)
{
	tg_state_sq_rc(o, tg_outbox_usage(o->sq->wob, o->s1, &o->n1, &o->n2, &o->res.err));
}

/* On the writer thread: its connection counts the payloads being written. */
struct tg_state_op *
tg_state_sq_outbox_usage(void *impl, const char *api_key, tg_state_pair_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_OUTBOX, run_usage,
	    tg_state_sq_answer_pair, (void (*)(void))cb, arg);

	o->s1 = tg_state_sq_dup(api_key);
	return tg_state_sq_write(o);
}
