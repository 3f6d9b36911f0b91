/*
 * budget.c - the vendor's budget per service, the gate in front of its
 * API upstream (upstream.h): at most budget.rate requests a second with
 * budget.burst at once and budget.concurrent in flight, two limits of the
 * quota engine's lease client (quota.h: "vendor:<svc>:rate" and
 * "vendor:<svc>:slots", taken in memory from shares leased from the
 * fleet's figures in the state, their waiters waking the queue),
 * and the pause a vendor's 429 (or 503) with Retry-After asks for. Kept
 * in struct gw, so a reload changes the limits without resetting what
 * was used; the current runtime's upstream is the one gated and woken.
 *
 * The pause is the fleet's: one seen here is stored as a row of the
 * state's shared answers ("vendor_pause:<svc>", fresh until the pause
 * ends), and the other instances are woken on topic "vendor_pause" with
 * "<svc> <until, Unix ms>"; an instance reads the rows at start and
 * whenever wake-ups may have been lost. Logins (class urgent) are never
 * held back; every other call waits while paused (a poll too: the pause
 * is the vendor's word that any call is unwelcome). A pause is capped at
 * budget.pause_max, on the instance that saw it and on those told of it.
 *
 * Without a budget configured no gate is set (no cost per request) until
 * a pause is first seen.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>

#include "tidegate/clock.h"
#include "tidegate/http.h"
#include "tidegate/log.h"
#include "tidegate/quota.h"
#include "tidegate/state.h"
#include "gw.h"

struct gw_budget {
	struct gw *gw;
	int service;
	const char *name;		/* "dex" / "sim" (static) */
	struct tg_upstream *up;		/* the current runtime's API (borrowed) */
	int gated;			/* the gate is set on up */
	struct tg_quota *q;		/* the limits' client, made with the first */
	struct tg_quota_store *store;	/* q's, over the state; NULL: none */
	struct tg_quota_limit *rate, *slots;	/* borrowed from q; NULL: none */
	struct tg_quota_waiter rate_w, slots_w;
	int rate_waiting, slots_waiting;
	long long inflight;		/* slots taken from slots */
	char rate_name[32], slots_name[32];
	int64_t pause_max_ms;
	int64_t pause_until;		/* Unix ms; 0: none */
	int64_t pause_end_mono;		/* the same, tg_clock_mono_ms */
	struct tg_state_watch *watch;
	struct tg_state_op *write, *fetch;	/* in flight, or NULL */
	int dirty;			/* a longer pause came while writing */
	char key[32];			/* "vendor_pause:<svc>" */
	unsigned long long throttled, pauses_local, pauses_remote, delayed;
};

static void
on_units(struct tg_quota_waiter *w, void *arg)
{
	struct gw_budget *b = arg;

	if (w == &b->rate_w)
		b->rate_waiting = 0;
	else
		b->slots_waiting = 0;
	if (b->up != NULL)
		tg_upstream_gate_kick(b->up);
}

static void
wait_for(struct gw_budget *b, struct tg_quota_limit *l, struct tg_quota_waiter *w,
    int *waiting)
{
	if (*waiting)
		return;
	*waiting = 1;
	tg_quota_wait(l, w, on_units, b);
}

static void
waits_cancel(struct gw_budget *b)
{
	if (b->rate_waiting)
		tg_quota_wait_cancel(&b->rate_w);
	if (b->slots_waiting)
		tg_quota_wait_cancel(&b->slots_w);
	b->rate_waiting = b->slots_waiting = 0;
}

static int
gate_take(void *arg, enum tg_up_class k, int64_t queued_ms, int64_t *wait_ms)
{
	struct gw_budget *b = arg;
	struct tg_quota_verdict v;
	int64_t now;

	if (b->pause_until != 0 && (now = tg_clock_now_ms()) < b->pause_until) {
		*wait_ms = b->pause_until - now;
		return 0;
	}
	now = tg_clock_mono_us();
	if (b->slots != NULL && tg_quota_take(b->slots, 1, now, &v) != 0) {
		*wait_ms = -1;		/* the waiter wakes the queue */
		wait_for(b, b->slots, &b->slots_w, &b->slots_waiting);
		return 0;
	}
	if (b->rate != NULL && tg_quota_take(b->rate, 1, now, &v) != 0) {
		if (b->slots != NULL)
			tg_quota_give(b->slots, 1, now);
		*wait_ms = v.retry_ms;	/* a backstop behind the waiter */
		wait_for(b, b->rate, &b->rate_w, &b->rate_waiting);
		return 0;
	}
	if (b->slots != NULL)
		b->inflight++;
	if (queued_ms < b->pause_end_mono)
		b->delayed++;	/* it waited for a pause to end */
	return 1;
}

static void
gate_put(void *arg, enum tg_up_class k, int unused)
{
	struct gw_budget *b = arg;
	int64_t now = tg_clock_mono_us();

	if (b->slots != NULL && b->inflight > 0) {
		b->inflight--;
		tg_quota_give(b->slots, 1, now);	/* its waiter wakes the queue */
	}
	if (unused && b->rate != NULL)
		tg_quota_give(b->rate, 1, now);
}

static void
gate_set(struct gw_budget *b)
{
	struct tg_up_gate g = { gate_take, gate_put, b };

	if (b->up == NULL || b->gated)
		return;
	tg_upstream_set_gate(b->up, &g);
	b->gated = 1;
}

/* A pause until (Unix ms) heard of: kept when it ends later than the one
 * held, capped at pause_max from now. 1 when it was taken. */
static int
pause_take(struct gw_budget *b, int64_t until, int remote)
{
	int64_t now = tg_clock_now_ms();

	if (until > now + b->pause_max_ms)
		until = now + b->pause_max_ms;
	if (until <= now || until <= b->pause_until)
		return 0;
	b->pause_until = until;
	b->pause_end_mono = tg_clock_mono_ms() + (until - now);
	if (remote)
		b->pauses_remote++;
	else
		b->pauses_local++;
	tg_log(TG_LOG_WARN, "vendor_pause", TG_LS("service", b->name),
	    TG_LI("ms", until - now), TG_LS("from", remote ? "fleet" : "vendor"));
	gate_set(b);
	if (b->up != NULL)
		tg_upstream_gate_kick(b->up);	/* waiters re-arm for the new end */
	return 1;
}

static void pause_write(struct gw_budget *b);

static void
on_written(const struct tg_state_res *res, void *arg)
{
	struct gw_budget *b = arg;

	b->write = NULL;
	if (res->rc != 0)
		tg_log(TG_LOG_WARN, "vendor_pause_share_failed", TG_LS("service", b->name),
		    TG_LS("error", res->err.msg));
	if (b->dirty)
		pause_write(b);
}

static void
on_notified(const struct tg_state_res *res, void *arg)
{
	on_written(res, arg);
}

/* The row first (a late joiner reads it), then the wake-up. */
static void
on_stored(const struct tg_state_res *res, void *arg)
{
	struct gw_budget *b = arg;
	char what[64];

	b->write = NULL;
	if (res->rc != 0) {
		on_written(res, arg);
		return;
	}
	snprintf(what, sizeof(what), "%s %" PRId64, b->name, b->pause_until);
	b->write = tg_state_notify(b->gw->state, "vendor_pause", what, on_notified, b);
}

static void
pause_write(struct gw_budget *b)
{
	struct tg_state_answer a = { 429, "text/plain", NULL, 0, 0 };
	char body[24];
	int64_t now = tg_clock_now_ms();

	b->dirty = 0;
	if (b->gw->state == NULL || b->pause_until <= now)
		return;
	snprintf(body, sizeof(body), "%" PRId64, b->pause_until);
	a.body = body;
	a.len = strlen(body);
	b->write = tg_state_poll_publish(b->gw->state, b->key, &a, now, b->pause_until - now,
	    on_stored, b);
}

void
gw_budget_seen(struct gw_budget *b, int status, const struct evkeyvalq *h)
{
	const char *v = h != NULL ? evhttp_find_header(h, "Retry-After") : NULL;
	int64_t now = tg_clock_now_ms(), s;

	if (b == NULL)
		return;
	if (status == 429)
		b->throttled++;
	if (v == NULL || (s = tg_http_retry_after_s(v, now / 1000,
	    (b->pause_max_ms + 999) / 1000)) <= 0)
		return;
	if (!pause_take(b, now + s * 1000, 0))
		return;
	if (b->write != NULL)
		b->dirty = 1;
	else
		pause_write(b);
}

static void
on_row(const struct tg_state_res *res, const struct tg_state_answer *a, void *arg)
{
	struct gw_budget *b = arg;
	char buf[24];

	b->fetch = NULL;
	if (a == NULL || a->len == 0 || a->len >= sizeof(buf))
		return;
	memcpy(buf, a->body, a->len);
	buf[a->len] = '\0';
	pause_take(b, strtoll(buf, NULL, 10), 1);
}

static void
row_read(struct gw_budget *b)
{
	if (b->fetch == NULL)
		b->fetch = tg_state_poll_fetch(b->gw->state, b->key, tg_clock_now_ms(), on_row,
		    b);
}

/* "<svc> <until>" from another instance; NULL: wake-ups may have been
 * lost, so the row is read again. */
static void
on_wake(const char *topic, const char *what, void *arg)
{
	struct gw_budget *b = arg;
	size_t n = strlen(b->name);
	char *end;
	long long until;

	if (what == NULL) {
		row_read(b);
		return;
	}
	if (strncmp(what, b->name, n) != 0 || what[n] != ' ')
		return;
	until = strtoll(what + n + 1, &end, 10);
	if (*end == '\0')
		pause_take(b, until, 1);
}

/* The lease client of b's limits: over the state's quota domain, leasing
 * the fleet's rate and slots when the state is shared (PostgreSQL), the
 * limits local to the instance without one. */
static void
client_new(struct gw_budget *b)
{
	struct tg_quota_opts o = { 0 };
	struct tg_state_health h = { 0 };

	if (b->gw->state != NULL) {
		tg_state_health(b->gw->state, &h);
		b->store = tg_quota_store_state(b->gw->state);
		o.timeout_ms = tg_state_timeout_ms(b->gw->state);
	}
	o.fleet = h.shared;
	b->q = tg_quota_new(b->gw->base, b->store, &o);
}

/* The limits of c (borrowed) defined in b's client, made with the first
 * limit (its timer runs only while a budget is set); a limit kept by
 * name keeps what was used. */
static void
limits_define(struct gw_budget *b, const struct gw_service_cfg *c)
{
	struct tg_quota_def d[2];
	struct tg_quota_limit *slots;
	struct tg_err err;
	size_t n = 0;

	memset(d, 0, sizeof(d));
	if (c->budget_rate > 0) {
		d[n].name = b->rate_name;
		d[n].kind = TG_QUOTA_RATE;
		d[n].per_second = c->budget_rate;
		d[n++].burst = c->budget_burst > 0 ? c->budget_burst :
		    c->budget_rate >= 1 ? (int64_t)c->budget_rate : 1;
	}
	if (c->budget_concurrent > 0) {
		d[n].name = b->slots_name;
		d[n].kind = TG_QUOTA_SLOTS;
		d[n++].limit = c->budget_concurrent;
	}
	waits_cancel(b);
	if (b->q == NULL && n > 0)
		client_new(b);
	if (b->q != NULL && tg_quota_define(b->q, d, n, &err) != 0)
		tg_log(TG_LOG_ERROR, "vendor_budget_refused", TG_LS("service", b->name),
		    TG_LS("error", err.msg));	/* the key table's bounds keep it valid */
	b->rate = b->q != NULL ? tg_quota_find(b->q, b->rate_name) : NULL;
	slots = b->q != NULL ? tg_quota_find(b->q, b->slots_name) : NULL;
	if (slots != b->slots)
		b->inflight = 0;	/* a new limit: nothing of it is held */
	b->slots = slots;
}

/* budget.* of s's configuration (borrowed) into b; s's API gated when a
 * limit is set or a pause was ever seen. */
static void
budget_config(struct gw_budget *b, struct gw_service *s)
{
	const struct gw_service_cfg *c = s->cfg;

	limits_define(b, c);
	b->pause_max_ms = c->budget_pause_max > 0 ? c->budget_pause_max : 60000;
	b->up = s->api;
	b->gated = 0;
	if (b->rate != NULL || b->slots != NULL || b->pause_until != 0)
		gate_set(b);
}

void
gw_budget_attach(struct gw *gw, struct gw_service *s)
{
	struct gw_budget *b = gw->budget[s->index];
	struct tg_state_health h;

	if (b == NULL) {
		b = gw->budget[s->index] = tg_xcalloc(1, sizeof(*b));
		b->gw = gw;
		b->service = s->index;
		b->name = s->name;
		snprintf(b->key, sizeof(b->key), "vendor_pause:%s", s->name);
		snprintf(b->rate_name, sizeof(b->rate_name), "vendor:%s:rate", s->name);
		snprintf(b->slots_name, sizeof(b->slots_name), "vendor:%s:slots", s->name);
		if (gw->state != NULL) {
			tg_state_health(gw->state, &h);
			if (h.shared) {
				b->watch = tg_state_watch(gw->state, "vendor_pause", on_wake, b);
				row_read(b);
			}
		}
	}
	budget_config(b, s);
}

void
gw_budget_detach(struct gw *gw, struct gw_service *s)
{
	struct gw_budget *b = gw->budget[s->index];

	if (b != NULL && b->up == s->api)
		b->up = NULL;
}

void
gw_budget_free(struct gw_budget *b)
{
	if (b == NULL)
		return;
	waits_cancel(b);
	tg_quota_free(b->q);
	tg_quota_store_state_free(b->store);	/* after its client */
	tg_state_cancel(b->write);
	tg_state_cancel(b->fetch);
	if (b->watch != NULL)
		tg_state_unwatch(b->gw->state, b->watch);
	free(b);
}

void
gw_budget_stats(const struct gw_budget *b, struct gw_budget_stats *st)
{
	int64_t now = tg_clock_now_ms();

	memset(st, 0, sizeof(*st));
	if (b == NULL)
		return;
	st->throttled = b->throttled;
	st->pauses_local = b->pauses_local;
	st->pauses_remote = b->pauses_remote;
	st->delayed = b->delayed;
	st->paused_ms = b->pause_until > now ? b->pause_until - now : 0;
	st->inflight = b->inflight;
}
