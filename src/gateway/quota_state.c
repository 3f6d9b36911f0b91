/*
 * quota_state.c - the lease client's store over the state seam (quota.h,
 * state.h tg_state_quota_*): a rate's grant with the fleet's wait and
 * units left worked out from the TAT the take returned (rate.h), a day's
 * and slots' grants as the seam answers them, a rate's share, and the
 * live instances (the fallback share's divisor) refreshed now and then
 * alongside.
 */
#include <math.h>
#include <stdlib.h>

#include "tidegate/clock.h"
#include "tidegate/quota.h"
#include "tidegate/rate.h"
#include "tidegate/state.h"

#define MEMBERS_EVERY_MS	5000	/* how often an instance says it is live */
#define MEMBERS_TTL_MS		15000	/* and for how long that counts */

struct qs_op;

struct qs {
	struct tg_quota_store store;	/* first: what the client holds */
	struct tg_state *st;
	struct qs_op *ops;		/* in flight: cancelled when the store goes */
	int64_t instances;
	int64_t members_at_ms;
	struct tg_state_op *members;
};

/* One lease or hand-back in flight. */
struct qs_op {
	struct qs *s;
	struct qs_op *next, **prev;	/* on s->ops while in flight */
	struct tg_state_op *h;
	struct tg_rate rate;
	int64_t now_us;
	double share;			/* share: as answered */
	int sharing;
	tg_quota_store_cb cb;
	void *arg;
	int answered;
};

static void
members_cb(const struct tg_state_res *res, int64_t n, void *arg)
{
	struct qs *s = arg;

	s->members = NULL;
	if (res->rc == TG_STATE_OK && n > 0)
		s->instances = n;
}

static void
members(struct qs *s, int64_t now_ms)
{
	if (s->members || now_ms - s->members_at_ms < MEMBERS_EVERY_MS)
		return;
	s->members_at_ms = now_ms;
	s->members = tg_state_quota_members(s->st, now_ms, now_ms + MEMBERS_TTL_MS, members_cb,
	    s);
}

static void
unlink_op(struct qs_op *o)
{
	if (o->prev == NULL)
		return;
	*o->prev = o->next;
	if (o->next)
		o->next->prev = o->prev;
	o->prev = NULL;
}

static void
answered(struct qs_op *o, const struct tg_state_res *res, int64_t a, int64_t b)
{
	struct tg_quota_grant g = { 0 };

	g.granted = a;
	g.used = b;
	g.instances = o->s->instances;
	if (o->sharing) {
		g.used = 0;
		g.share = o->share;
		g.sharers = b;
	}
	if (res->rc == TG_STATE_OK && o->rate.interval_us > 0) {
		g.left = tg_rate_left(&o->rate, b, o->now_us);
		g.wait_ms = (tg_rate_wait(&o->rate, b, o->now_us) + 999) / 1000;
	}
	unlink_op(o);
	o->cb(res->rc == TG_STATE_OK ? 0 : -1, &g, o->arg);
	if (o->h || o->answered)
		free(o);	/* answered later, or after the call returned */
	else
		o->answered = 1;
}

static void
pair_cb(const struct tg_state_res *res, int64_t a, int64_t b, void *arg)
{
	answered(arg, res, a, b);
}

static void
done_cb(const struct tg_state_res *res, void *arg)
{
	answered(arg, res, 0, 0);
}

/* The handle the client keeps: o, or NULL when it was answered already. */
static void *
started(struct qs_op *o, struct tg_state_op *h)
{
	if (o->answered) {
		free(o);
		return NULL;
	}
	o->h = h;
	o->next = o->s->ops;	/* in flight until answered or cancelled */
	if (o->next)
		o->next->prev = &o->next;
	o->prev = &o->s->ops;
	o->s->ops = o;
	return o;
}

static struct qs_op *
op_new(struct qs *s, tg_quota_store_cb cb, void *arg)
{
	struct qs_op *o = tg_xcalloc(1, sizeof(*o));

	o->s = s;
	o->cb = cb;
	o->arg = arg;
	members(s, tg_clock_now_ms());
	return o;
}

static void *
qs_take(void *ctx, const struct tg_quota_def *d, int64_t day, int64_t n, int64_t now_ms,
    int64_t ttl_ms, tg_quota_store_cb cb, void *arg)
{
	struct qs_op *o = op_new(ctx, cb, arg);
	struct tg_state *st = o->s->st;

	if (d->kind == TG_QUOTA_RATE) {
		tg_rate_init(&o->rate, d->per_second, d->burst);
		o->now_us = now_ms * 1000;
		return started(o, tg_state_quota_rate_take(st, d->name, o->rate.interval_us,
		    o->rate.burst, n, o->now_us, pair_cb, o));
	}
	if (d->kind == TG_QUOTA_DAY)
		return started(o, tg_state_quota_day_take(st, d->name, day, d->limit, n, pair_cb,
		    o));
	return started(o, tg_state_quota_slots_take(st, d->name, d->limit, n, now_ms,
	    now_ms + ttl_ms, pair_cb, o));
}

static void *
qs_give(void *ctx, const struct tg_quota_def *d, int64_t day, int64_t n, int64_t now_ms,
    tg_quota_store_cb cb, void *arg)
{
	struct qs_op *o = op_new(ctx, cb, arg);
	struct tg_state *st = o->s->st;
	struct tg_rate r;

	if (d->kind == TG_QUOTA_RATE) {
		tg_rate_init(&r, d->per_second, d->burst);
		return started(o, tg_state_quota_rate_give(st, d->name, r.interval_us, r.burst, n,
		    now_ms * 1000, done_cb, o));
	}
	if (d->kind == TG_QUOTA_DAY)
		return started(o, tg_state_quota_day_give(st, d->name, day, n, done_cb, o));
	return started(o, tg_state_quota_slots_give(st, d->name, n, done_cb, o));
}

static void
share_cb(const struct tg_state_res *res, int64_t granted, int64_t n, void *arg)
{
	struct qs_op *o = arg;

	o->share = (double)granted / 1000.0;
	answered(o, res, 0, n);
}

/* In thousandths of a unit a second, demand capped so that demand x
 * limit stays within 64 bits. */
static void *
qs_share(void *ctx, const struct tg_quota_def *d, double demand, int64_t now_ms,
    int64_t ttl_ms, tg_quota_store_cb cb, void *arg)
{
	struct qs_op *o = op_new(ctx, cb, arg);

	o->sharing = 1;
	return started(o, tg_state_quota_share(o->s->st, d->name,
	    llround(demand < 1e6 ? demand * 1000.0 : 1e9), llround(d->per_second * 1000.0),
	    now_ms, now_ms + ttl_ms, share_cb, o));
}

static void
qs_cancel(void *ctx, void *op)
{
	struct qs_op *o = op;

	unlink_op(o);
	tg_state_cancel(o->h);
	free(o);
}

struct tg_quota_store *
tg_quota_store_state(struct tg_state *st)
{
	struct qs *s = tg_xcalloc(1, sizeof(*s));

	s->store.take = qs_take;
	s->store.give = qs_give;
	s->store.cancel = qs_cancel;
	s->store.share = qs_share;
	s->store.ctx = s;
	s->st = st;
	s->members_at_ms = -MEMBERS_EVERY_MS;
	return &s->store;
}

void
tg_quota_store_state_free(struct tg_quota_store *store)
{
	struct qs *s = (struct qs *)store;

	if (!s)
		return;
	while (s->ops)		/* hand-backs still in flight: never answered now */
		qs_cancel(s, s->ops);
	if (s->members)
		tg_state_cancel(s->members);
	free(s);
}
