/*
 * replay.c - writes whose outcome is unknown, made known (db.h: a query
 * with replay set; tg_db_submit sends a fleet's here). The PostgreSQL
 * driver answers TG_STATE_UNKNOWN when a connection was lost after a
 * write was sent: the server may have committed it. A replay query is one
 * statement keyed by an id chosen before it was sent (an outbox job, a
 * sweep, a run by the vendor's id) or an upsert (an owner record): sent
 * again on the reconnected database it finds the row the first send
 * committed (its key taken: CONFLICT, which means OK here) or commits it.
 *
 * Why a read would not do: a server that has not noticed its client is
 * gone (a network fault, a frozen peer) may still run the first send and
 * commit it after the read found nothing; and a commit waiting for a
 * synchronous standby is invisible to others until it ends. The replay
 * meets the first send on the key instead: it waits for a first send that
 * inserted the row until that one commits (conflict: it exists) or rolls
 * back (the replay inserts it), and a first send that had not inserted it
 * yet fails on the key later. After a failover (the standby promoted),
 * what the new primary holds is all there is: a commit the old primary
 * had not sent to a synchronous standby is gone with it, and the replay
 * commits the row again. So OK tells the truth: the row exists.
 *
 * Replays are sent every REPLAY_MS while the database cannot be reached,
 * until state.timeout after the unknown answer; one still out then is
 * cancelled and the caller hears UNKNOWN (the row may exist). Only the
 * caller's query waits: the first send is answered by the driver as
 * usual, and nothing here runs while the database answers.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "tidegate/clock.h"
#include "tidegate/log.h"
#include "backend.h"
#include "db.h"
#include "seam.h"

#define REPLAY_MS	100	/* between sends while the database is down */

struct tg_db_try;

/* A replay query: its handle (be: replay_be, whose cancel is here). */
struct tg_db_replay {
	struct tg_state_op pub;
	TAILQ_ENTRY(tg_db_replay) next;		/* st->replays */
	struct tg_state *st;
	struct tg_db_q *q;		/* the caller's (owned): answered once; its
					 * parameters are copied into each send */
	struct tg_db_try *cur;		/* the send out, or NULL */
	struct tg_state_op *cur_op;	/* its handle (NULL: answered at once) */
	struct event *timer;		/* the next send, or the deadline */
	int64_t deadline_ms;		/* monotonic; 0 until the outcome is unknown */
	struct tg_err lost;		/* why it became unknown */
	int in_call, done;
};

/* One send: a query of its own, answered into its replay. */
struct tg_db_try {
	struct tg_db_q q;
	struct tg_db_replay *rp;	/* NULL once cancelled */
};

static void replay_cancel(struct tg_state_op *op);
static const struct tg_state_backend replay_be = { .name = "replay", .cancel = replay_cancel };

static void
params_copy(struct tg_db_param *dst, const struct tg_db_param *src, int n)
{
	int i;

	for (i = 0; i < n; i++) {
		dst[i] = src[i];
		if (src[i].p != NULL) {
			dst[i].p = tg_xmalloc(src[i].len + 1);
			memcpy(dst[i].p, src[i].p, src[i].len + 1);
		}
	}
}

/* The caller's query answered (it goes). */
static void
q_free(struct tg_db_q *q)
{
	int i;

	if (q->cleanup != NULL)
		q->cleanup(q);
	for (i = 0; i < q->npar; i++)
		free(q->par[i].p);
	free(q);
}

/* Nothing here calls db.c or state.c (they call this file): the seam's
 * cancel and the codes, as those files have them. */
static void
op_cancel(struct tg_state_op *op)
{
	if (op != NULL)
		op->be->cancel(op);
}

static int
down(int rc)
{
	return rc == TG_STATE_UNAVAILABLE || rc == TG_STATE_UNKNOWN;
}

static void
rp_free(struct tg_db_replay *rp)
{
	TAILQ_REMOVE(&rp->st->replays, rp, next);
	if (rp->timer != NULL)
		event_free(rp->timer);
	free(rp);
}

/* Answer the caller with res (rows r, borrowed; NULL unless OK). */
static void
finish(struct tg_db_replay *rp, const struct tg_state_res *res, const struct tg_db_rows *r)
{
	rp->q->res = *res;
	rp->q->answer(rp->q, r);
	q_free(rp->q);
	rp->q = NULL;
	rp->done = 1;
	if (rp->timer != NULL)
		evtimer_del(rp->timer);
}

static void
unknown(struct tg_db_replay *rp, const char *why)
{
	struct tg_state_res res;

	res.rc = TG_STATE_UNKNOWN;
	tg_err_set(&res.err, "state: the outcome of a write is unknown: %s (%.120s)", why,
	    rp->lost.msg);
	tg_log(TG_LOG_WARN, "state_write_unknown", TG_LS("statement", rp->q->stmt->name),
	    TG_LS("why", res.err.msg), TG_LS("instance", rp->st->instance));
	finish(rp, &res, NULL);
}

static void
arm(struct tg_db_replay *rp, int64_t ms)
{
	struct timeval tv;
	int64_t left = rp->deadline_ms - tg_clock_mono_ms();

	if (ms > left)
		ms = left;
	if (ms < 0)
		ms = 0;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(rp->timer, &tv);
}

static void on_try(struct tg_db_q *q, const struct tg_db_rows *r);
static void on_timer(evutil_socket_t fd, short what, void *arg);

/* Send the statement (again). */
static void
send_try(struct tg_db_replay *rp)
{
	struct tg_db_try *t = tg_xcalloc(1, sizeof(*t));
	struct tg_state_op *op;

	t->q.stmt = rp->q->stmt;
	t->q.answer = on_try;
	params_copy(t->q.par, rp->q->par, rp->q->npar);
	t->q.npar = rp->q->npar;
	t->q.group = rp->q->group;	/* each send may commit with others */
	t->rp = rp;
	rp->cur = t;
	rp->in_call++;
	op = rp->st->be->db->submit(rp->st->impl, &t->q);
	rp->in_call--;
	rp->cur_op = rp->cur != NULL ? op : NULL;
	if (rp->cur != NULL && rp->deadline_ms != 0)
		arm(rp, INT64_MAX);	/* at the deadline, whatever is out */
}

/* The outcome became unknown (the first send's answer was lost). */
static void
lost(struct tg_db_replay *rp, const struct tg_state_res *res)
{
	rp->lost = res->err;
	rp->deadline_ms = tg_clock_mono_ms() + rp->st->timeout_ms;
	rp->timer = evtimer_new(rp->st->base, on_timer, rp);
	tg_log(TG_LOG_INFO, "state_write_replay", TG_LS("statement", rp->q->stmt->name),
	    TG_LS("why", res->err.msg), TG_LS("instance", rp->st->instance));
}

static void
on_try(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct tg_db_try *t = (struct tg_db_try *)q;
	struct tg_db_replay *rp = t->rp;
	struct tg_state_res res = q->res;

	if (rp == NULL)
		return;				/* cancelled */
	rp->cur = NULL;
	rp->cur_op = NULL;
	if (rp->deadline_ms == 0 && res.rc == TG_STATE_UNKNOWN && !rp->st->closing)
		lost(rp, &res);
	else if (rp->deadline_ms == 0) {
		finish(rp, &res, r);		/* the first send's answer */
		goto out;
	}
	if (down(res.rc)) {
		if (rp->st->closing || tg_clock_mono_ms() >= rp->deadline_ms)
			unknown(rp, rp->st->closing ? "the state closed before the database "
			    "answered again" : "the database did not answer again within "
			    "state.timeout");
		else
			arm(rp, REPLAY_MS);
		goto out;
	}
	if (res.rc == TG_STATE_CONFLICT)	/* the key is taken: by the first send */
		res.rc = TG_STATE_OK;
	tg_log(TG_LOG_INFO, "state_write_known", TG_LS("statement", rp->q->stmt->name),
	    TG_LI("rc", res.rc), TG_LS("instance", rp->st->instance));
	finish(rp, &res, res.rc == TG_STATE_OK ? r : NULL);
out:
	if (rp->done && rp->in_call == 0)
		rp_free(rp);
}

/* The next send is due, or the deadline passed with one still out. */
static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct tg_db_replay *rp = arg;

	if (rp->cur != NULL) {
		rp->cur->rp = NULL;
		rp->cur = NULL;
		op_cancel(rp->cur_op);		/* it may still commit: unknown */
		rp->cur_op = NULL;
		unknown(rp, "the database did not answer again within state.timeout");
	} else if (tg_clock_mono_ms() >= rp->deadline_ms) {
		unknown(rp, "the database did not answer again within state.timeout");
	} else {
		rp->in_call++;
		send_try(rp);
		rp->in_call--;
	}
	if (rp->done && rp->in_call == 0)
		rp_free(rp);
}

struct tg_state_op *
tg_db_replay_submit(struct tg_state *st, struct tg_db_q *q)
{
	struct tg_db_replay *rp = tg_xcalloc(1, sizeof(*rp));

	rp->pub.be = &replay_be;
	rp->st = st;
	rp->q = q;
	TAILQ_INSERT_TAIL(&st->replays, rp, next);
	rp->in_call++;
	send_try(rp);
	rp->in_call--;
	if (rp->done) {
		rp_free(rp);
		return NULL;
	}
	return &rp->pub;
}

static void
replay_cancel(struct tg_state_op *op)
{
	struct tg_db_replay *rp = (struct tg_db_replay *)op;

	if (rp->cur != NULL) {
		rp->cur->rp = NULL;		/* its answer is dropped */
		op_cancel(rp->cur_op);
	}
	q_free(rp->q);
	rp_free(rp);
}

void
tg_db_replays_close(struct tg_state *st)
{
	struct tg_db_replay *rp;

	while ((rp = TAILQ_FIRST(&st->replays)) != NULL) {
		if (rp->cur != NULL)
			rp->cur->rp = NULL;
		unknown(rp, "the state closed before the database answered again");
		rp_free(rp);
	}
}
