/*
 * quota_take.c - the hot path of the lease client (quota.h): a take counts
 * in memory against the local share (or the local bucket when the limit
 * is not leased, its share of a rate by demand, or the fallback share),
 * never allocates and never does I/O; at low water (or with no share of
 * a rate yet) it only activates the limit's renew event. Also the
 * figures for the RateLimit fields, the batch size, giving back, the
 * references that keep a dropped limit alive, and waiters.
 */
#include <math.h>
#include <stdlib.h>

#include <event2/event.h>

#include "quota_int.h"
#include "tidegate/clock.h"

#define DAY_MS	86400000LL

int64_t
tg_quota_today(void)
{
	int64_t ms = tg_clock_now_ms();

	return ms >= 0 ? ms / 86400000 : -1 - (-ms - 1) / 86400000;
}

int64_t
tg_quota_batch(const struct tg_quota_limit *l)
{
	const struct tg_quota *q = l->q;
	double want = ceil(l->per_s * (double)q->o.lease_ms / 1000.0);
	int64_t cap = l->def.kind == TG_QUOTA_RATE ? l->rate.burst : l->def.limit, b;

	b = want < 1 ? 1 : want > (double)q->o.max_batch ? q->o.max_batch : (int64_t)want;
	return b < cap ? b : cap;
}

static void
limit_free(struct tg_quota_limit *l)
{
	event_free(l->renew);
	free((char *)l->def.name);
	free(l);
}

struct tg_quota_limit *
tg_quota_ref(struct tg_quota_limit *l)
{
	l->refs++;
	return l;
}

void
tg_quota_unref(struct tg_quota_limit *l)
{
	if (--l->refs == 0)
		limit_free(l);
}

static int64_t
ms_to_midnight(void)
{
	int64_t now = tg_clock_now_ms(), r = DAY_MS - now % DAY_MS;

	return r > 0 ? r : 1;
}

/* A new UTC day: the old day's share and count no longer mean anything. */
static void
day_roll(struct tg_quota_limit *l)
{
	int64_t today = tg_quota_today();

	if (today == l->day)
		return;
	l->day = today;
	l->share = 0;
	l->used = 0;
	l->fb_used = 0;
}

static int64_t
ceil_s(int64_t us)
{
	return (us + 999999) / 1000000;
}

const struct tg_rate *
tg_quota_local_rate(const struct tg_quota_limit *l)
{
	if (l->fallback)
		return &l->fb_rate;
	if (!l->lease)
		return &l->rate;
	return l->sh_mode ? &l->sh_rate : NULL;
}

/* The figures of l at now_us into v (retry_ms and pending untouched). */
static void
figures(struct tg_quota_limit *l, int64_t now_us, struct tg_quota_verdict *v)
{
	const struct tg_rate *r = tg_quota_local_rate(l);
	int64_t left;

	switch (l->def.kind) {
	case TG_QUOTA_RATE:
		v->quota = l->rate.burst;
		v->window_s = ceil_s(l->rate.burst * l->rate.interval_us);
		if (r) {
			v->left = tg_rate_left(r, l->tat, now_us) + l->share;
			v->reset_s = ceil_s(tg_rate_reset(r, l->tat, now_us));
		} else {
			v->left = l->share + l->fleet_left;
			v->reset_s = ceil_s((l->rate.burst - v->left) * l->rate.interval_us);
		}
		break;
	case TG_QUOTA_SLOTS:
		v->quota = l->def.limit;
		v->window_s = 1;
		v->left = l->def.limit - l->in_use;
		v->reset_s = 0;
		break;
	default:
		v->quota = l->def.limit;
		v->window_s = 86400;
		v->left = l->def.limit - l->used + l->share;	/* a share is used, to the fleet */
		v->reset_s = ceil_s(ms_to_midnight() * 1000);
		break;
	}
	left = v->left;
	v->left = left < 0 ? 0 : left > v->quota ? v->quota : left;
}

/* The fallback share of SLOTS and DAY: the limit / the instances last seen. */
static int64_t
fb_limit(const struct tg_quota_limit *l)
{
	int64_t n = l->q->instances > 0 ? l->q->instances : 1, s = l->def.limit / n;

	return s > 0 ? s : 1;
}

/* Not leased, or falling back, or a share by demand: the local rule. 0
 * granted, else retry ms. */
static int64_t
take_local(struct tg_quota_limit *l, int64_t n, int64_t now_us)
{
	const struct tg_rate *r = tg_quota_local_rate(l);

	switch (l->def.kind) {
	case TG_QUOTA_RATE:
		if (tg_rate_left(r, l->tat, now_us) < n)
			return tg_rate_wait(r, l->tat, now_us) / 1000 + 1;
		tg_rate_take(r, &l->tat, now_us, n);
		return 0;
	case TG_QUOTA_SLOTS:
		if (l->in_use + n > (l->fallback ? fb_limit(l) + l->held : l->def.limit))
			return 1000;
		l->in_use += n;
		return 0;
	default:
		if (l->fallback ? l->fb_used + n > fb_limit(l) : l->used + n > l->def.limit)
			return ms_to_midnight();
		l->fb_used += l->fallback ? n : 0;
		l->used += n;
		return 0;
	}
}

/* Leased: from the share. 0 granted, else retry ms (*pending set when a
 * renewal may still bring units). */
static int64_t
take_share(struct tg_quota_limit *l, int64_t n, int64_t now_us, int *pending)
{
	int64_t have = l->def.kind == TG_QUOTA_SLOTS ? l->held - l->in_use : l->share;

	if (have < n) {
		*pending = !l->dry;
		if (!l->op)
			event_active(l->renew, 0, 0);
		if (l->def.kind == TG_QUOTA_DAY && l->used + n > l->def.limit)
			return ms_to_midnight();
		if (l->def.kind == TG_QUOTA_RATE && l->fleet_wait_until_us > now_us)
			return (l->fleet_wait_until_us - now_us) / 1000 + 1;
		return l->def.kind == TG_QUOTA_SLOTS ? 1000 : l->q->o.tick_ms;
	}
	if (l->def.kind == TG_QUOTA_SLOTS)
		l->in_use += n;
	else
		l->share -= n;
	if (have - n < (tg_quota_batch(l) + 1) / 2 && !l->op)
		event_active(l->renew, 0, 0);
	return 0;
}

/* Has the demand risen well above the one last reported (no sooner than
 * a quarter period after it)? Then a refused take asks again at once. */
static int
share_rose(const struct tg_quota_limit *l, int64_t now_us)
{
	int64_t quarter = l->q->o.share_ms * 250, el = now_us - l->sh_asked_us;

	if (el < quarter)
		return 0;
	return (double)l->sh_count * 1e6 / (double)el > 1.25 * l->sh_reported + 1.0;
}

/* A share of the fleet's rate by demand: the local bucket at that share
 * (none given: nothing until the next report); none yet, lapsed or
 * outgrown: a report goes out now (*pending). */
static int64_t
take_rshare(struct tg_quota_limit *l, int64_t n, int64_t now_us, int *pending)
{
	int none = now_us >= l->sh_until_us, zero = l->sh_share < 1e-3;
	int64_t next_ms;

	l->sh_count += n;
	if (none || ((zero || tg_rate_left(&l->sh_rate, l->tat, now_us) < n)
	    && share_rose(l, now_us))) {
		*pending = 1;
		if (!l->op)
			event_active(l->renew, 0, 0);
	}
	if (!none && !zero)
		return take_local(l, n, now_us);
	next_ms = (l->sh_asked_us + l->q->o.share_ms * 1000 - now_us) / 1000 + 1;
	return next_ms > l->q->o.tick_ms ? next_ms : l->q->o.tick_ms;	/* the next report */
}

int
tg_quota_take(struct tg_quota_limit *l, int64_t n, int64_t now_us,
    struct tg_quota_verdict *v)
{
	int64_t retry;
	int pending = 0;

	if (l->def.kind == TG_QUOTA_DAY)
		day_roll(l);
	l->demand += n;
	if (!l->lease || (l->sh_mode && l->fallback))
		retry = take_local(l, n, now_us);
	else if (l->sh_mode)
		retry = take_rshare(l, n, now_us, &pending);
	else if (l->fallback)
		retry = take_share(l, n, now_us, &pending) == 0 ? 0 : take_local(l, n, now_us);
	else
		retry = take_share(l, n, now_us, &pending);
	if (v) {
		figures(l, now_us, v);
		v->retry_ms = retry;
		v->pending = retry && pending && !l->fallback;
	}
	return retry ? -1 : 0;
}

void
tg_quota_peek(struct tg_quota_limit *l, int64_t now_us, struct tg_quota_verdict *v)
{
	if (l->def.kind == TG_QUOTA_DAY)
		day_roll(l);
	figures(l, now_us, v);
	v->retry_ms = 0;
	v->pending = 0;
}

void
tg_quota_give(struct tg_quota_limit *l, int64_t n, int64_t now_us)
{
	if (n <= 0)
		return;
	switch (l->def.kind) {
	case TG_QUOTA_RATE:
		if (tg_quota_local_rate(l))
			tg_rate_give(tg_quota_local_rate(l), &l->tat, now_us, n);
		else if (!l->removed)
			l->share += n;
		break;
	case TG_QUOTA_SLOTS:
		l->in_use -= n < l->in_use ? n : l->in_use;
		break;
	default:
		if (l->day != tg_quota_today())
			return;		/* yesterday's unit: the new day is whole */
		if (l->lease && !l->fallback) {
			l->share += l->removed ? 0 : n;	/* still used, to the fleet */
			break;
		}
		l->used -= n < l->used ? n : l->used;
		l->fb_used -= n < l->fb_used ? n : l->fb_used;
		break;
	}
	tg_quota_wake(l);
}

/* ---- waiters ---- */

void
tg_quota_wait(struct tg_quota_limit *l, struct tg_quota_waiter *w,
    void (*cb)(struct tg_quota_waiter *w, void *arg), void *arg)
{
	w->limit = tg_quota_ref(l);
	w->cb = cb;
	w->arg = arg;
	w->prev = l->waiters.prev;
	w->next = &l->waiters;
	l->waiters.prev->next = w;
	l->waiters.prev = w;
}

static void
unlink_waiter(struct tg_quota_waiter *w)
{
	w->prev->next = w->next;
	w->next->prev = w->prev;
	w->next = w->prev = NULL;
}

void
tg_quota_wait_cancel(struct tg_quota_waiter *w)
{
	struct tg_quota_limit *l = w->limit;

	if (!w->next)
		return;
	unlink_waiter(w);
	w->limit = NULL;
	tg_quota_unref(l);
}

/* Each waiter is called once; one that waits again joins a later round. */
void
tg_quota_wake(struct tg_quota_limit *l)
{
	struct tg_quota_waiter round = { 0 }, *w;

	if (l->waiters.next == &l->waiters)
		return;
	tg_quota_ref(l);
	round.next = l->waiters.next;
	round.prev = l->waiters.prev;
	round.next->prev = round.prev->next = &round;
	l->waiters.next = l->waiters.prev = &l->waiters;
	while ((w = round.next) != &round) {
		unlink_waiter(w);
		w->limit = NULL;
		tg_quota_unref(l);
		w->cb(w, w->arg);
	}
	tg_quota_unref(l);
}
