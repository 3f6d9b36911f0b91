/*
 * quota_lease.c - the lease client's background (quota.h), never on the
 * hot path: renewal in batches sized to the recent demand (or a rate's
 * share by demand, reported every period while used), handing back
 * what was not used within the hold, the deadline of every lease, the
 * fallback share while the store does not answer, and the timer step.
 */
#include <math.h>

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
tg_quota_withdraw(struct tg_quota_limit *l)
{
	const struct tg_quota_store *s = l->q->store;

	s->share(s->ctx, &l->def, 0, tg_clock_now_ms(), 0, gave_cb, NULL);
}

void
tg_quota_share_apply(struct tg_quota_limit *l)
{
	const struct tg_quota_def *d = &l->def;
	double s = l->sh_share < d->per_second ? l->sh_share : d->per_second;
	int64_t b = (int64_t)((double)d->burst * s / d->per_second), full;

	/* at least 2 (the fleet's burst allowing): with a burst of 1 a unit
	 * due between two arrivals is lost, a fifth of a small share of
	 * paced requests; the fleet may pass its burst by one unit an
	 * instance for that. A share too small to count is no share
	 * (quota_take.c); its rate only keeps the bucket defined. */
	b = b < 2 ? 2 : b;
	tg_rate_init(&l->sh_rate, s > 1e-3 ? s : 1e-3, b > d->burst ? d->burst : b);
	/* the TAT read at the new rate: an empty bucket stays empty for one
	 * refill at most, not for as long as the old, slower rate needed */
	full = tg_clock_mono_us() + l->sh_rate.burst * l->sh_rate.interval_us;
	l->tat = l->tat > full ? full : l->tat;
}

/* A share given. One that follows none starts full while the fleet had
 * spare (it was given at least its demand), else empty: a fleet asking
 * for more than the limit has an empty bucket, and a full one here would
 * add a burst the fleet does not have. */
static void
share_given(struct tg_quota_limit *l, const struct tg_quota_grant *g)
{
	int64_t now_us = tg_clock_mono_us();
	int fresh = now_us >= l->sh_until_us || l->sh_share < 1e-3;

	l->fallback = 0;
	if (g->instances > 0)
		l->q->instances = g->instances;
	l->sh_share = g->share;
	l->sh_until_us = l->op_since_us + l->q->o.share_ms * 3000;
	tg_quota_share_apply(l);
	if (fresh && g->share < l->sh_reported && g->share >= 1e-3)
		l->tat = now_us + l->sh_rate.burst * l->sh_rate.interval_us;
}

static void
shared_cb(int rc, const struct tg_quota_grant *g, void *arg)
{
	struct tg_quota_limit *l = arg;

	l->op = NULL;
	if (rc == 0 && l->removed) {
		tg_quota_withdraw(l);
	} else if (rc == 0) {
		share_given(l, g);
	} else if (!l->removed) {
		fall_back(l);
	}
	tg_quota_wake(l);
	tg_quota_unref(l);
}

/* Report the demand a second since the last report (over at least a
 * quarter period, at most one: an instance idle longer asks for what
 * came since) and learn the fleet's. */
static void
share_renew(struct tg_quota_limit *l, int64_t now_us)
{
	const struct tg_quota_store *s = l->q->store;
	int64_t p = l->q->o.share_ms * 1000, el = now_us - l->sh_asked_us;

	el = el < p / 4 ? p / 4 : el > p ? p : el;
	l->sh_reported = (double)l->sh_count * 1e6 / (double)el;
	l->sh_count = 0;
	l->sh_asked_us = now_us;
	l->op_since_us = now_us;
	tg_quota_ref(l);
	l->op = (void *)1;	/* an answer before share returns clears it */
	l->op = s->share(s->ctx, &l->def, l->sh_reported, tg_clock_now_ms(),
	    l->q->o.share_ms * 3, shared_cb, l);
}

void
tg_quota_renew(struct tg_quota_limit *l, int64_t now_us)
{
	const struct tg_quota_store *s = l->q->store;
	int64_t n = tg_quota_batch(l);

	if (!l->lease || l->op || l->removed)
		return;
	if (l->sh_mode) {
		share_renew(l, now_us);
		return;
	}
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
	/* a share by demand is reported every period while used, and once
	 * more (as none) when it no longer is */
	if (l->sh_mode && !l->fallback && !l->op && now_us - l->sh_asked_us >=
	    l->q->o.share_ms * 1000 && (l->sh_count > 0 || l->sh_reported > 0))
		tg_quota_renew(l, now_us);
	if (l->def.kind == TG_QUOTA_RATE && l->waiters.next != &l->waiters
	    && tg_quota_local_rate(l))
		if (tg_rate_wait(tg_quota_local_rate(l), l->tat, now_us) == 0)
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
