/*
 * pg_op.c - the life of one operation of the PostgreSQL backend (pg.h):
 * made by a domain's query (pg_db.c) or the probe's ping (pg_wake.c),
 * queued in the backend's FIFO until pg_conn.c hands it to an idle connection, answered
 * exactly once (unless cancelled), then freed.
 *
 * Deadlines: every operation submitted gets one, state.timeout after it
 * was queued (each step of an operation of several steps gets its own):
 * its callback comes by then.
 * The operations not done yet are kept in pg->live, by deadline, and one
 * timer waits for the first. An operation whose deadline passes answers
 * UNAVAILABLE, "no answer within N ms" (a write sent: UNKNOWN, it may
 * still commit). Still
 * queued, it is never sent; it fails alone while the connections work (a
 * backlog, not a silent server), with the whole queue while none is ready.
 * Sent, its caller hears at once and its answer, should it come, is
 * dropped (exactly once); its connection is judged silent state.timeout
 * after the send: then it is closed (a server that does not answer one
 * query will not answer those after it either) and reconnected after the
 * backoff, every queued operation fails with the same cause, and until
 * the server answers again (pg_wake.c's probe asks it) new operations
 * fail at once.
 *
 * A cancelled operation is never answered; once sent, its query still runs
 * (a payload write runs even when cancelled while queued). An operation
 * of several steps (a lease reading its payload's chunks) is queued again
 * by its answer with the next statement, its handle unchanged.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "tidegate/clock.h"
#include "tidegate/log.h"
#include "pg.h"

static void arm(struct pg *pg);

struct pg_op *
tg_state_pg_op_new(struct pg *pg, int stmt, pg_answer_fn answer)
{
	struct pg_op *o = tg_xcalloc(1, sizeof(*o));

	o->pub.be = pg->be;
	o->pg = pg;
	o->stmt = stmt;
	o->answer = answer;
	return o;
}

void
tg_state_pg_param_str(struct pg_op *o, const char *s)
{
	o->val[o->nparams++] = s != NULL ? tg_xstrdup(s) : NULL;
}

void
tg_state_pg_param_i64(struct pg_op *o, int64_t n)
{
	char num[24];

	snprintf(num, sizeof(num), "%lld", (long long)n);
	tg_state_pg_param_str(o, num);
}

static void
params_free(struct pg_op *o)
{
	int i;

	for (i = 0; i < o->nparams; i++) {
		free(o->val[i]);
		o->val[i] = NULL;
		o->len[i] = 0;
		o->fmt[i] = 0;
	}
	o->nparams = 0;
}

void
tg_state_pg_again(struct pg_op *o, int stmt, pg_answer_fn answer)
{
	params_free(o);
	o->stmt = stmt;
	o->answer = answer;
	o->again = 1;
}

static void
unlive(struct pg_op *o)
{
	if (!o->in_live)
		return;
	TAILQ_REMOVE(&o->pg->live, o, lived);
	o->in_live = 0;
}

/* o's deadline starts now: last in pg->live, whose deadlines are in order
 * since every one is the same time after its start. */
static void
live(struct pg_op *o)
{
	struct pg *pg = o->pg;

	unlive(o);
	o->deadline_ms = tg_clock_mono_ms() + pg->timeout_ms;
	TAILQ_INSERT_TAIL(&pg->live, o, lived);
	o->in_live = 1;
	if (!evtimer_pending(pg->deadline_ev, NULL))
		arm(pg);
}

static void
op_free(struct pg_op *o)
{
	unlive(o);
	if (o->cleanup != NULL)
		o->cleanup(o);
	params_free(o);
	free(o);
}

/* At the head of the FIFO, so that an operation's steps run back to back. */
static void
requeue(struct pg_op *o)
{
	struct pg *pg = o->pg;

	o->again = 0;
	o->conn = NULL;
	o->sent = 0;
	memset(&o->res, 0, sizeof(o->res));
	o->next = pg->head;
	if (pg->head == NULL)
		pg->tail = &o->next;
	pg->head = o;
	live(o);
	tg_state_pg_kick(pg);
}

void
tg_state_pg_finish(struct pg_op *o, const PGresult *r)
{
	o->again = 0;
	if (!o->cancelled)
		o->answer(o, o->res.rc == TG_STATE_OK ? r : NULL);
	if (!o->again || o->cancelled)
		op_free(o);
	else
		requeue(o);
}

void
tg_state_pg_fail(struct pg_op *o, int rc, const char *why)
{
	o->res.rc = rc;
	tg_err_set(&o->res.err, "%s", why);
	tg_state_pg_finish(o, NULL);
}

int
tg_state_pg_lost_rc(const struct pg_op *o)
{
	return o->sent && !o->lookup && o->stmt != PG_PING ? TG_STATE_UNKNOWN :
	    TG_STATE_UNAVAILABLE;
}

void
tg_state_pg_fail_queue(struct pg *pg, const char *why)
{
	struct pg_op *o;

	while ((o = pg->head) != NULL) {
		pg->head = o->next;
		if (pg->head == NULL)
			pg->tail = &pg->head;
		tg_state_pg_fail(o, TG_STATE_UNAVAILABLE, why);
	}
}

void
tg_state_pg_enqueue(struct pg_op *o)
{
	struct pg *pg = o->pg;

	*pg->tail = o;
	pg->tail = &o->next;
	live(o);
	tg_state_pg_kick(pg);
}

/* Why o cannot be queued now (NULL: it can). */
static const char *
refusal(const struct pg *pg, enum pg_domain dom)
{
	if (pg->closing)
		return "state: closing";
	if (dom == PG_OWNERS && !pg->owners)
		return "state: no correlation ownership store is configured";
	if (dom == PG_OUTBOX && !pg->outbox)
		return "state: no webhook outbox is configured";
	if (dom == PG_RUNS && !pg->runs)
		return "state: no run registry is configured";
	if (pg->unsure == PG_TIMED_OUT)
		return pg->down;	/* waiting an answer again would only wait */
	if (tg_state_pg_nup(pg) == 0 && pg->down[0] != '\0')
		return pg->down;	/* down; while the first connection is being
					 * made, operations wait for it */
	return NULL;
}

struct tg_state_op *
tg_state_pg_submit(struct pg_op *o, enum pg_domain dom)
{
	const char *why = refusal(o->pg, dom);

	if (why != NULL) {
		tg_state_pg_fail(o, TG_STATE_UNAVAILABLE, why);
		return NULL;
	}
	tg_state_pg_enqueue(o);
	return &o->pub;
}

/* Out of the FIFO, when o is queued there. */
static void
unqueue(struct pg_op *o)
{
	struct pg_op **p;

	for (p = &o->pg->head; *p != NULL; p = &(*p)->next)
		if (*p == o) {
			*p = o->next;
			if (o->pg->tail == &o->next)
				o->pg->tail = p;
			return;
		}
}

void
tg_state_pg_cancel(struct tg_state_op *op)
{
	struct pg_op *o = (struct pg_op *)op;

	if (o->conn != NULL || o->keep) {	/* sent, or a payload write that still runs:
						 * its answer is dropped when it comes */
		o->cancelled = 1;
		return;
	}
	unqueue(o);
	op_free(o);
}

/* ---- deadlines ---- */

/* Connections of pg that can be sent to (ready, or working). */
static int
ready(const struct pg *pg)
{
	int i, n = 0;

	for (i = 0; i < PG_POOL; i++)
		n += pg->conn[i].st >= PG_IDLE;
	return n;
}

/* o waits on its connection until when (monotonic ms): in pg->live in
 * order, wherever that falls. */
static void
live_until(struct pg_op *o, int64_t when)
{
	struct pg *pg = o->pg;
	struct pg_op *p;

	o->deadline_ms = when;
	for (p = TAILQ_LAST(&pg->live, pg_live); p != NULL && p->deadline_ms > when;
	    p = TAILQ_PREV(p, pg_live, lived))
		;
	if (p == NULL)
		TAILQ_INSERT_HEAD(&pg->live, o, lived);
	else
		TAILQ_INSERT_AFTER(&pg->live, p, o, lived);
	o->in_live = 1;
	arm(pg);
}

/* The server does not answer (why, borrowed): health is unsure, new
 * operations fail at once, and so does what is queued. */
static void
silent(struct pg *pg, const char *why)
{
	snprintf(pg->down, sizeof(pg->down), "%s", why);
	tg_state_pg_unsure(pg, PG_TIMED_OUT);
}

/*
 * o's deadline passed (it is out of pg->live). Queued: it fails, never
 * sent; while no connection is ready, so does the whole queue (nothing
 * will go in time). Sent state.timeout ago: the server did not answer it,
 * so it will not answer what follows either: the connection is closed,
 * o and the queue fail. Sent later (it waited for a connection): its
 * caller hears now, its answer is dropped when it comes, and the
 * connection is given until state.timeout after the send.
 */
static void
expire(struct pg_op *o)
{
	struct pg *pg = o->pg;
	int64_t sent_ms = o->sent_us / 1000, now = tg_clock_mono_ms();
	char why[sizeof(pg->down)];

	snprintf(why, sizeof(why), "state: postgresql unavailable: no answer within %lld ms "
	    "(state.timeout)", (long long)pg->timeout_ms);
	if (o->conn == NULL || now - sent_ms >= pg->timeout_ms)
		tg_log(TG_LOG_WARN, "state_pg_timeout", TG_LS("why", why),
		    TG_LS("statement", o->stmt >= 0 ? tg_state_pg_stmt_name(o->pg, o->stmt) : "ping"),
		    TG_LS("while", o->conn == NULL ? "queued" : "sent"),
		    TG_LS("instance", pg->instance));
	if (o->conn == NULL) {
		unqueue(o);
		tg_state_pg_fail(o, TG_STATE_UNAVAILABLE, why);
		if (ready(pg) == 0) {
			silent(pg, why);
			tg_state_pg_fail_queue(pg, why);
		}
	} else if (now - sent_ms >= pg->timeout_ms) {
		silent(pg, why);
		tg_state_pg_conn_drop(o->conn, why);
		tg_state_pg_fail_queue(pg, why);
	} else {
		o->res.rc = tg_state_pg_lost_rc(o);
		tg_err_set(&o->res.err, "%s", why);
		if (!o->cancelled)
			o->answer(o, NULL);
		o->again = 0;
		o->cancelled = 1;
		live_until(o, sent_ms + pg->timeout_ms);
	}
}

static void
on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct pg *pg = arg;
	struct pg_op *o;

	while ((o = TAILQ_FIRST(&pg->live)) != NULL && o->deadline_ms <= tg_clock_mono_ms()) {
		unlive(o);
		expire(o);
	}
	arm(pg);
}

/* The timer at the first deadline (an operation answered before it only
 * makes it fire early: it looks again). */
static void
arm(struct pg *pg)
{
	struct pg_op *o = TAILQ_FIRST(&pg->live);
	int64_t left;
	struct timeval tv;

	if (o == NULL) {
		evtimer_del(pg->deadline_ev);
		return;
	}
	left = o->deadline_ms - tg_clock_mono_ms();
	if (left < 0)
		left = 0;
	tv.tv_sec = left / 1000;
	tv.tv_usec = (left % 1000) * 1000;
	evtimer_add(pg->deadline_ev, &tv);
}

void
tg_state_pg_deadlines_start(struct pg *pg)
{
	TAILQ_INIT(&pg->live);
	pg->deadline_ev = evtimer_new(pg->base, on_deadline, pg);
}

void
tg_state_pg_deadlines_stop(struct pg *pg)
{
	if (pg->deadline_ev != NULL)
		event_free(pg->deadline_ev);
	pg->deadline_ev = NULL;
}
