/*
 * quota.c - the lease client's set of limits (quota.h): creation, reload
 * by name (a limit redefined keeps what was used; one dropped hands its
 * share back and lives on while referenced), and the background timer.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "quota_int.h"
#include "tidegate/clock.h"

const char *
tg_quota_kind_str(enum tg_quota_kind k)
{
	return k == TG_QUOTA_RATE ? "rate" : k == TG_QUOTA_SLOTS ? "slots" : "day";
}

static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	tg_quota_tick(arg, tg_clock_mono_us());
}

struct tg_quota *
tg_quota_new(struct event_base *base, const struct tg_quota_store *store,
    const struct tg_quota_opts *opts)
{
	struct tg_quota *q = tg_xcalloc(1, sizeof(*q));
	struct timeval tv;

	q->base = base;
	q->store = store;
	if (opts)
		q->o = *opts;
	q->o.lease_ms = q->o.lease_ms > 0 ? q->o.lease_ms : 200;
	q->o.hold_ms = q->o.hold_ms > 0 ? q->o.hold_ms : 1000;
	q->o.max_batch = q->o.max_batch > 0 ? q->o.max_batch : 1000;
	q->o.timeout_ms = q->o.timeout_ms > 0 ? q->o.timeout_ms : 2000;
	q->o.tick_ms = q->o.tick_ms > 0 ? q->o.tick_ms : 50;
	q->o.share_ms = q->o.share_ms > 0 ? q->o.share_ms : 1000;
	q->last_tick_us = tg_clock_mono_us();
	q->timer = event_new(base, -1, EV_PERSIST, tick_cb, q);
	tv.tv_sec = q->o.tick_ms / 1000;
	tv.tv_usec = (q->o.tick_ms % 1000) * 1000;
	event_add(q->timer, &tv);
	return q;
}

/* Take l out of the set: its share goes back, it lives on while referenced. */
static void
limit_drop(struct tg_quota_limit *l)
{
	int64_t back = l->def.kind == TG_QUOTA_SLOTS ? l->held - l->in_use : l->share;

	l->removed = 1;
	if (l->lease && !l->fallback && back > 0)
		tg_quota_hand_back(l, back);
	if (l->sh_mode && l->sh_asked_us > 0)
		tg_quota_withdraw(l);
	l->share = 0;
	l->held = l->in_use;
	tg_quota_unref(l);
}

void
tg_quota_free(struct tg_quota *q)
{
	struct tg_quota_limit *l, *next;

	if (!q)
		return;
	for (l = q->limits; l; l = next) {
		next = l->next;
		tg_quota_wake(l);
		if (l->op && q->store) {
			q->store->cancel(q->store->ctx, l->op);
			l->op = NULL;
			l->refs--;
		}
		limit_drop(l);
	}
	event_free(q->timer);
	free(q);
}

static int
def_check(const struct tg_quota_def *d, struct tg_err *err)
{
	struct tg_rate r;

	if (!d->name || !*d->name) {
		tg_err_set(err, "a limit needs a name");
		return -1;
	}
	if (d->kind == TG_QUOTA_RATE && tg_rate_init(&r, d->per_second, d->burst) < 0) {
		tg_err_set(err, "limit %s: rate must be in (0, 1e6] a second and burst in "
		    "[1, 1e9]", d->name);
		return -1;
	}
	if (d->kind != TG_QUOTA_RATE && (d->limit < 1 || d->limit > 1000000000000LL)) {
		tg_err_set(err, "limit %s: must be in [1, 1e12]", d->name);
		return -1;
	}
	return 0;
}

static void
renew_cb(evutil_socket_t fd, short what, void *arg)
{
	(void)fd;
	(void)what;
	tg_quota_renew(arg, tg_clock_mono_us());
}

/* (Re)apply d to l: the figures change, what was used stays. */
static void
limit_set(struct tg_quota *q, struct tg_quota_limit *l, const struct tg_quota_def *d)
{
	const char *name = l->def.name;
	int64_t n = q->instances > 0 ? q->instances : 1;

	l->def = *d;
	l->def.name = name;
	if (d->kind == TG_QUOTA_RATE) {
		tg_rate_init(&l->rate, d->per_second, d->burst);
		tg_rate_init(&l->fb_rate, d->per_second / (double)n,
		    d->burst / n > 0 ? d->burst / n : 1);
	}
	l->lease = q->store && (q->o.fleet || d->kind == TG_QUOTA_DAY);
	l->sh_mode = l->lease && d->kind == TG_QUOTA_RATE && !q->o.exact_rates
	    && q->store->share != NULL;
	if (l->sh_mode && l->sh_until_us > 0)
		tg_quota_share_apply(l);	/* the new figures at the last answer */
	else if (l->sh_mode)
		l->sh_rate = l->rate;		/* figures until the first answer */
}

static struct tg_quota_limit *
limit_new(struct tg_quota *q, const struct tg_quota_def *d)
{
	struct tg_quota_limit *l = tg_xcalloc(1, sizeof(*l));

	l->q = q;
	l->def.name = tg_xstrdup(d->name);
	l->refs = 1;
	l->day = tg_quota_today();
	l->waiters.next = l->waiters.prev = &l->waiters;
	l->renew = event_new(q->base, -1, 0, renew_cb, l);
	limit_set(q, l, d);
	return l;
}

struct tg_quota_limit *
tg_quota_find(struct tg_quota *q, const char *name)
{
	struct tg_quota_limit *l;

	for (l = q->limits; l; l = l->next)
		if (strcmp(l->def.name, name) == 0)
			return l;
	return NULL;
}

int
tg_quota_define(struct tg_quota *q, const struct tg_quota_def *defs, size_t n,
    struct tg_err *err)
{
	struct tg_quota_limit *keep = NULL, **tail = &keep, *l, **pp;
	size_t i, j;


	for (i = 0; i < n; i++) {
		if (def_check(&defs[i], err) < 0)
			return -1;
		for (j = 0; j < i; j++)
			if (strcmp(defs[i].name, defs[j].name) == 0) {
				tg_err_set(err, "limit %s is defined twice", defs[i].name);
				return -1;
			}
	}
	for (i = 0; i < n; i++) {
		for (pp = &q->limits; (l = *pp); pp = &l->next)
			if (strcmp(l->def.name, defs[i].name) == 0 && l->def.kind == defs[i].kind)
				break;
		if (l) {
			*pp = l->next;
			limit_set(q, l, &defs[i]);
		} else {
			l = limit_new(q, &defs[i]);
		}
		l->next = NULL;
		*tail = l;
		tail = &l->next;
	}
	while ((l = q->limits)) {
		q->limits = l->next;
		tg_quota_wake(l);
		limit_drop(l);
	}
	q->limits = keep;
	return 0;
}

const struct tg_quota_def *
tg_quota_limit_def(const struct tg_quota_limit *l)
{
	return &l->def;
}

int
tg_quota_fallback(const struct tg_quota *q)
{
	const struct tg_quota_limit *l;
	int n = 0;

	for (l = q->limits; l; l = l->next)
		n += l->fallback;
	return n;
}

unsigned long long
tg_quota_fallbacks(const struct tg_quota *q)
{
	return q->fallbacks;
}

int
tg_quota_limit_fallback(const struct tg_quota_limit *l)
{
	return l->fallback;
}

int64_t
tg_quota_limit_share(const struct tg_quota_limit *l)
{
	return l->def.kind == TG_QUOTA_SLOTS ? l->held - l->in_use : l->share;
}

double
tg_quota_limit_rate(const struct tg_quota_limit *l, int64_t now_us)
{
	const struct tg_rate *r = tg_quota_local_rate(l);

	if (l->def.kind != TG_QUOTA_RATE)
		return 0;
	if (l->sh_mode && !l->fallback && now_us >= l->sh_until_us)
		return 0;
	return r && r != &l->rate ? 1e6 / (double)r->interval_us : l->def.per_second;
}
