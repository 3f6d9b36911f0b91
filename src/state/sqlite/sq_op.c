/*
 * sq_op.c - the life of one operation of the SQLite backend (sq.h): made
 * by a driver query (sq_db.c) or a payload file's work (sq_files.c), run
 * now on the loop's connection for a read or queued on the writer thread
 * for a write (src/core/worker.c), answered once on the loop unless
 * cancelled, then freed.
 */
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "sq.h"

struct sq_op *
tg_state_sq_op_new(struct sq *sq, enum sq_domain dom, sq_fn run, sq_fn answer)
{
	struct sq_op *o = tg_xcalloc(1, sizeof(*o));

	o->pub.be = sq->be;
	o->sq = sq;
	o->dom = dom;
	o->run = run;
	o->answer = answer;
	return o;
}

static void
op_free(struct sq_op *o)
{
	if (o->cleanup != NULL)
		o->cleanup(o);
	free(o);
}

/* 1 when the store o needs is open; else o answers UNAVAILABLE. */
static int
configured(struct sq_op *o)
{
	static const char *const names[] = {
		[SQ_OUTBOX] = "webhook outbox", [SQ_RUNS] = "run registry",
		[SQ_OWNERS] = "correlation ownership store",
	};
	const struct sq *sq = o->sq;

	if (o->dom == SQ_NONE || (o->dom == SQ_OUTBOX && sq->ob_w.db != NULL) ||
	    (o->dom == SQ_RUNS && sq->runs_w.db != NULL) ||
	    (o->dom == SQ_OWNERS && sq->own_w.db != NULL))
		return 1;
	o->res.rc = TG_STATE_UNAVAILABLE;
	tg_err_set(&o->res.err, "state: no %s is configured", names[o->dom]);
	return 0;
}

struct tg_state_op *
tg_state_sq_read(struct sq_op *o)
{
	struct tg_state_op *(*next)(struct sq_op *);

	if (configured(o))
		o->run(o);
	o->answer(o);
	if ((next = o->next) != NULL) {
		o->next = NULL;
		return next(o);
	}
	op_free(o);
	return NULL;
}

static void
on_run(void *arg)
{
	struct sq_op *o = arg;

	o->run(o);
}

/* Answers, on the loop. cancelled: the worker skipped run or is stopping. */
static void
on_done(void *arg, int cancelled)
{
	struct sq_op *o = arg;

	o->job = NULL;
	if (!o->cancelled) {
		if (cancelled) {
			o->res.rc = TG_STATE_UNAVAILABLE;
			tg_err_set(&o->res.err, "state: closing");
		}
		o->answer(o);
		if (o->next != NULL && !cancelled) {
			struct tg_state_op *(*next)(struct sq_op *) = o->next;

			o->next = NULL;
			(void)next(o);
			return;
		}
	}
	op_free(o);
}

struct tg_state_op *
tg_state_sq_write(struct sq_op *o)
{
	if (!configured(o))
		return tg_state_sq_read(o);
	o->job = tg_worker_submit(o->sq->w, on_run, on_done, o);
	return &o->pub;
}

void
tg_state_sq_cancel(struct tg_state_op *op)
{
	struct sq_op *o = (struct sq_op *)op;

	o->cancelled = 1;
	if (o->job != NULL && !o->keep)
		tg_worker_cancel(o->job);
}

/* ---- open / close ---- */

