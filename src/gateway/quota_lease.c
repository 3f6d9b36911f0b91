/*
 * quota_lease.c - the lease client's background (quota.h), never on the
 * hot path: renewal in batches sized to the recent demand, handing back
 * what was not used within the hold, the deadline of every lease, the
 * fallback share while the store does not answer, and the timer step.
 */
#include <event2/event.h>

#include "quota_int.h"
#include "tidegate/clock.h"

static void
gave_cb(int rc, const struct tg_quota_grant *g, void *arg)
{
	(void)rc;
	(void)g;
	(void)arg;
}

void
tg_quota_hand_back(struct tg_quota_limit *l, int64_t n)
{
	const struct tg_quota_store *s = l->q->store;

	if (!s || n <= 0)
		return;
	s->give(s->ctx, &l->def, l->day, n, tg_clock_now_ms(), gave_cb, NULL);
	if (l->def.kind == TG_QUOTA_SLOTS)
		l->held -= n;
	else
		l->share -= n;
	if (l->def.kind == TG_QUOTA_DAY)
		l->used -= n;
}

/* Off the share: the local rule on limit / instances until a lease answers. */
static void
fall_back(struct tg_quota_limit *l)
{
	int64_t n = l->q->instances > 0 ? l->q->instances : 1;

	if (l->def.kind == TG_QUOTA_RATE && !l->fallback) {
		tg_rate_init(&l->fb_rate, l->def.per_second / (double)n,
		    l->def.burst / n > 0 ? l->def.burst / n : 1);
		l->tat = 0;
	}
	if (!l->fallback) {
		l->fb_used = 0;
		l->q->fallbacks++;
	}
	l->fallback = 1;
}

static void
took_cb(int rc, const struct tg_quota_grant *g, void *arg)
{
	struct tg_quota_limit *l = arg;
	int64_t now_us = tg_clock_mono_us();

	l->op = NULL;
	if (rc == 0 && l->removed) {
		tg_quota_hand_back(l, g->granted);
	} else if (rc == 0) {
		l->fallback = 0;
		if (g->instances > 0)
			l->q->instances = g->instances;
		if (l->def.kind == TG_QUOTA_SLOTS)
			l->held = g->used;	/* a holding that expired meanwhile is gone */
		else
			l->share += g->granted;
		if (l->def.kind == TG_QUOTA_DAY)
			l->used = g->used;
		if (l->def.kind == TG_QUOTA_RATE) {
			l->fleet_left = g->left;
			l->fleet_wait_until_us = now_us + g->wait_ms * 1000;
		}
		if (g->granted > 0)
			l->last_grant_us = now_us;
		l->dry = g->granted == 0 && l->op_n > 0;
	} else if (!l->removed) {
		fall_back(l);
	}
	tg_quota_wake(l);
	tg_quota_unref(l);
}

void
tg_quota_renew(struct tg_quota_limit *l, int64_t now_us)
{
	const struct tg_quota_store *s = l->q->store;
	int64_t n = tg_quota_batch(l);

	if (!l->lease || l->op || l->removed)
		return;
	if (l->def.kind == TG_QUOTA_DAY && l->day != tg_quota_today())
		return;		/* the next take rolls the day first */
	l->op_n = n;
	l->op_since_us = now_us;
	tg_quota_ref(l);
	l->op = (void *)1;	/* an answer before take returns clears it */
	l->op = s->take(s->ctx, &l->def, l->day, n, tg_clock_now_ms(),
	    l->q->o.hold_ms * 4, took_cb, l);
}

/* A lease unanswered past its deadline: cancelled, the store unreachable. */
static void
deadline(struct tg_quota_limit *l, int64_t now_us)
{
	const struct tg_quota_store *s = l->q->store;

	if (!l->op || now_us - l->op_since_us < l->q->o.timeout_ms * 1000)
		return;
	s->cancel(s->ctx, l->op);
	l->op = NULL;
	fall_back(l);
	tg_quota_wake(l);
	tg_quota_unref(l);
}

/* Units unused a hold after the last grant go back to the fleet. */
static void
hold(struct tg_quota_limit *l, int64_t now_us)
{
	int64_t spare = l->def.kind == TG_QUOTA_SLOTS ? l->held - l->in_use : l->share;

	if (!l->lease || l->fallback || l->op || spare <= 0)
		return;
	if (now_us - l->last_grant_us < l->q->o.hold_ms * 1000)
		return;
	tg_quota_hand_back(l, spare);
}

static void
limit_tick(struct tg_quota_limit *l, int64_t now_us, double dt_s)
{
	double inst = (double)l->demand / dt_s;

	l->per_s = inst > l->per_s ? inst : l->per_s * 0.8 + inst * 0.2;
	l->demand = 0;
	deadline(l, now_us);
	hold(l, now_us);
	if (l->lease && !l->op && (l->fallback || (l->def.kind == TG_QUOTA_SLOTS
	    && l->held > 0 && now_us - l->op_since_us >= l->q->o.hold_ms * 1000)))
		tg_quota_renew(l, now_us);	/* a probe, or the slot lease kept alive */
	if (l->def.kind == TG_QUOTA_RATE && l->waiters.next != &l->waiters
	    && (!l->lease || l->fallback))
		if (tg_rate_wait(l->fallback ? &l->fb_rate : &l->rate, l->tat, now_us) == 0)
			tg_quota_wake(l);
}

void
tg_quota_tick(struct tg_quota *q, int64_t now_us)
{
	struct tg_quota_limit *l;
	double dt_s = (double)(now_us - q->last_tick_us) / 1e6;

	if (dt_s <= 0)
		dt_s = (double)q->o.tick_ms / 1000.0;
	q->last_tick_us = now_us;
	for (l = q->limits; l; l = l->next)
		limit_tick(l, now_us, dt_s);
}
