/*
 * gate.c - the priority classes of the queue and the gate in front of the
 * vendor (a budget kept by the gateway): a class on each request, the
 * gate's take before a queued request of a gated class starts, its put
 * once the request no longer holds what it took (freed, or failed before
 * it was sent), and the timer that asks the gate again. Called by pool.c
 * (dispatch) and request.c (free).
 */
#include "tidegate/clock.h"
#include "up.h"

static const char *const class_names[TG_UP_NCLASS] = {
	"urgent", "poll", "read", "create",
};

const char *
tg_up_class_str(enum tg_up_class k)
{
	return (unsigned)k < TG_UP_NCLASS ? class_names[k] : "urgent";
}

void
tg_up_req_set_class(struct tg_up_req *r, enum tg_up_class k)
{
	struct up_origin *o = r->o;
	int queued = r->queued;

	if ((unsigned)k >= TG_UP_NCLASS || r->c != NULL || r->done || r->cancelled)
		return;
	if (!queued) {
		r->klass = (int)k;
		return;
	}
	/* Just sent: the newest of its owner in any class, so the tail of
	 * the new class's queue, its place in the aging list kept. */
	TAILQ_REMOVE(&r->w->queue[o->index][r->klass], r, qentry);
	r->u->class_queued[r->klass]--;
	r->klass = (int)k;
	TAILQ_INSERT_TAIL(&r->w->queue[o->index][k], r, qentry);
	r->u->class_queued[k]++;
}

void
tg_upstream_set_gate(struct tg_upstream *u, const struct tg_up_gate *gate)
{
	if (gate != NULL)
		u->gate = *gate;
	else
		u->gate.take = NULL;
	tg_upstream_gate_kick(u);
}

void
tg_upstream_gate_kick(struct tg_upstream *u)
{
	evtimer_del(u->gate_timer);
	event_active(u->pump, EV_TIMEOUT, 0);
}

void
tg_upstream_on_gate_timer(evutil_socket_t fd, short what, void *arg)
{
	struct tg_upstream *u = arg;

	event_active(u->pump, EV_TIMEOUT, 0);
}

void
tg_upstream_gate_count(struct tg_up_req *r)
{
	struct tg_upstream *u = r->u;

	if (r->klass != TG_UP_CLASS_URGENT && r->seq <= u->gate_refused_upto &&
	    u->gate.take != NULL) {
		u->gate_waits[r->klass]++;
		r->gate_held = 1;
	}
}

int
tg_upstream_gate_admit(struct tg_upstream *u, struct tg_up_req *r)
{
	int64_t wait_ms = -1;
	struct timeval tv;

	if (u->gate.take == NULL || r->klass == TG_UP_CLASS_URGENT || r->gated || r->probe)
		return 1;
	if (u->gate.take(u->gate.arg, (enum tg_up_class)r->klass, r->queued_at, &wait_ms)) {
		r->gated = 1;
		tg_upstream_gate_count(r);
		return 1;
	}
	/* Every request queued now waits behind this one: each enqueue runs
	 * the pump, which asks again, so the mark covers later ones too. */
	r->gate_held = 1;
	u->gate_refused_upto = u->seq;
	if (wait_ms >= 0 && u->opts.queue_timeout_ms >= 0 && r->queued_at +
	    u->opts.queue_timeout_ms < tg_clock_mono_ms() + wait_ms) {
		r->gate_ahead_ms = wait_ms;
		return -1;
	}
	if (wait_ms >= 0) {
		tv.tv_sec = (time_t)(wait_ms / 1000);
		tv.tv_usec = (suseconds_t)((wait_ms % 1000) * 1000);
		evtimer_add(u->gate_timer, &tv);
	}
	return 0;
}

void
tg_upstream_gate_put(struct tg_up_req *r, int unused)
{
	struct tg_upstream *u = r->u;

	if (!r->gated)
		return;
	r->gated = 0;
	if (u->gate.put != NULL)
		u->gate.put(u->gate.arg, (enum tg_up_class)r->klass, unused);
	event_active(u->pump, EV_TIMEOUT, 0);	/* a concurrency slot came free */
}

void
tg_upstream_class_stats(const struct tg_upstream *u, struct tg_upstream_class_stats *st)
{
	int k;

	for (k = 0; k < TG_UP_NCLASS; k++) {
		st->gate_waits[k] = u->gate_waits[k];
		st->timeouts[k] = u->class_timeouts[k];
		st->queued[k] = u->class_queued[k];
	}
}
