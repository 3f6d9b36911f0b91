/*
 * health.c - the two origins of an upstream used as one (upstream.h):
 * which origin a request goes to, outlier ejection, the active probe that
 * brings an ejected origin back, a 503's Retry-After, and the retry
 * budget. The anchors are Envoy's outlier detection (consecutive errors,
 * an ejection time that grows with each ejection) and its retry budget
 * (retries in flight at most a share of the requests in flight), and
 * HAProxy's health checks (an origin is back when a check passes).
 *
 * An origin is in service unless ejected (eject_after consecutive
 * failures: connect, TLS, reset, timeout, 502/503/504; out for
 * eject_base_ms doubled by each repeat, up to eject_max_ms, then until a
 * probe gets an answer below 500) or holding a 503's Retry-After. A
 * request goes to the primary while it is in service, else to the
 * fallback, else fails at once (TG_UP_DOWN). With one origin nothing is
 * ejected: there is nowhere else to go. Called by request.c and pool.c;
 * calls neither (the probe's timer and request are request.c's).
 */
#include <stdio.h>
#include <string.h>

#include <event2/event.h>

#include "tidegate/clock.h"
#include "tidegate/log.h"
#include "up.h"

static int
in_service(const struct up_origin *o, int64_t now)
{
	return !o->h.ejected && now >= o->h.avoid_until;
}

/* ms until o may serve again (an ejection's rest, or the Retry-After). */
static int64_t
out_for(const struct up_origin *o, int64_t now)
{
	int64_t a = o->h.ejected ? o->h.ejected_until - now : 0, b = o->h.avoid_until - now;

	if (o->h.ejected && a < o->u->opts.probe_interval_ms)
		a = o->u->opts.probe_interval_ms;	/* a probe must pass first */
	return a > b ? a : b;
}

/* Every origin out: r's detail names each, with its last error. */
static void
all_down(struct tg_upstream *u, struct tg_up_req *r, int64_t now)
{
	int64_t soon = INT64_MAX, ms;
	size_t n = 0;
	int i;

	n += (size_t)snprintf(r->detail, sizeof(r->detail), "every origin is out of service:");
	for (i = 0; i < u->norigins && n < sizeof(r->detail); i++) {
		ms = out_for(&u->origin[i], now);
		soon = ms < soon ? ms : soon;
		n += (size_t)snprintf(r->detail + n, sizeof(r->detail) - n, "%s %s %s (%s)",
		    i ? ";" : "", u->origin[i].name, u->origin[i].hosthdr,
		    u->origin[i].h.last_error[0] ? u->origin[i].h.last_error : "held back");
	}
	r->retry_after = (int)((soon + 999) / 1000);
	if (r->retry_after < 1)
		r->retry_after = 1;
}

struct up_origin *
tg_upstream_route(struct tg_upstream *u, struct tg_up_req *r)
{
	int64_t now = tg_clock_mono_ms();

	if (u->norigins < 2 || in_service(&u->origin[0], now))
		return &u->origin[0];
	if (in_service(&u->origin[1], now)) {
		r->why = TG_UP_WHY_EJECTED;
		u->origin[0].h.failovers[TG_UP_WHY_EJECTED]++;
		return &u->origin[1];
	}
	all_down(u, r, now);
	return NULL;
}

struct up_origin *
tg_upstream_other(const struct up_origin *o)
{
	struct tg_upstream *u = o->u;
	struct up_origin *x = &u->origin[1 - o->index];

	return u->norigins > 1 && in_service(x, tg_clock_mono_ms()) ? x : NULL;
}

static void
probe_arm(struct up_origin *o, int64_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };

	evtimer_add(o->h.probe, &tv);
}

static void
eject(struct up_origin *o)
{
	const struct tg_upstream_opts *op = &o->u->opts;
	int64_t t = op->eject_base_ms;
	int i;

	for (i = 0; i < o->h.ejections && t < op->eject_max_ms; i++)
		t *= 2;
	if (t > op->eject_max_ms)
		t = op->eject_max_ms;
	o->h.ejected = 1;
	o->h.ejections++;
	o->h.ejections_total++;
	o->h.ejected_until = tg_clock_mono_ms() + t;
	tg_log(TG_LOG_WARN, "upstream_ejected", TG_LS("origin", o->name),
	    TG_LS("host", o->hosthdr), TG_LI("fails", o->h.fails), TG_LI("for_ms", t),
	    TG_LS("reason", o->h.last_error));
	probe_arm(o, t);
}

void
tg_upstream_health_fail(struct up_origin *o, const char *why)
{
	snprintf(o->h.last_error, sizeof(o->h.last_error), "%s", why);
	o->h.fails++;
	if (o->u->norigins > 1 && o->u->opts.eject_after > 0 && !o->h.ejected &&
	    o->h.fails >= o->u->opts.eject_after)
		eject(o);
}

void
tg_upstream_health_ok(struct up_origin *o)
{
	o->h.fails = 0;
	/* In service for a whole base time since it came back: the next
	 * ejection starts from the base again. */
	if (o->h.ejections > 0 && !o->h.ejected &&
	    tg_clock_mono_ms() - o->h.back_at > o->u->opts.eject_base_ms)
		o->h.ejections = 0;
}

void
tg_upstream_health_avoid(struct up_origin *o, long ra_s)
{
	int64_t ms = (int64_t)ra_s * 1000;

	if (ms > o->u->opts.retry_after_max_ms)
		ms = o->u->opts.retry_after_max_ms;
	if (ms > 0 && o->u->norigins > 1)
		o->h.avoid_until = tg_clock_mono_ms() + ms;
}

int
tg_upstream_budget_ok(const struct tg_upstream *u)
{
	size_t cap = u->nlive * (size_t)u->opts.retry_budget_pct / 100;

	if (cap < (size_t)u->opts.retry_budget_min)
		cap = (size_t)u->opts.retry_budget_min;
	return u->nretrying < cap;
}

void
tg_upstream_budget_take(struct tg_up_req *r)
{
	if (!r->retrying && !r->probe) {
		r->retrying = 1;
		r->u->nretrying++;
	}
}

/* ---- the probe ---- */

static void
back(struct up_origin *o)
{
	o->h.ejected = 0;
	o->h.fails = 0;
	o->h.back_at = tg_clock_mono_ms();
	tg_log(TG_LOG_INFO, "upstream_back", TG_LS("origin", o->name),
	    TG_LS("host", o->hosthdr));
}

void
tg_upstream_probe_done(struct tg_up_req *r, int status)
{
	struct up_origin *o = r->o;

	o->h.probing = NULL;
	o->h.probes++;
	if (status > 0 && status < 500) {
		back(o);
		return;
	}
	o->h.probe_failures++;
	if (status >= 500)
		snprintf(o->h.last_error, sizeof(o->h.last_error), "probe answered %d", status);
	else if (r->detail[0] != '\0')
		snprintf(o->h.last_error, sizeof(o->h.last_error), "probe: %.150s", r->detail);
	probe_arm(o, o->u->opts.probe_interval_ms);
}

int
tg_upstream_probe_due(struct up_origin *o)
{
	int64_t now = tg_clock_mono_ms();

	if (!o->h.ejected || o->h.probing != NULL)
		return 0;
	if (now < o->h.ejected_until) {
		probe_arm(o, o->h.ejected_until - now);
		return 0;
	}
	return 1;
}

void
tg_upstream_health_free(struct up_origin *o)
{
	if (o->h.probe != NULL)
		event_free(o->h.probe);
	o->h.probe = NULL;
}

/* ---- stats ---- */

const char *
tg_up_why_str(enum tg_up_why w)
{
	static const char *const names[TG_UP_NWHY] = { "connect", "reset", "timeout", "tls",
		"502", "503", "504", "ejected" };

	return (int)w >= 0 && w < TG_UP_NWHY ? names[w] : "unknown";
}

int
tg_upstream_origin_stats(const struct tg_upstream *u, int i,
    struct tg_upstream_origin_stats *st)
{
	const struct up_origin *o;
	int64_t now = tg_clock_mono_ms();

	if (i < 0 || i >= u->norigins)
		return -1;
	o = &u->origin[i];
	memset(st, 0, sizeof(*st));
	st->name = o->name;
	st->host = o->hosthdr;
	st->in_service = in_service(o, now);
	st->out_ms = st->in_service ? 0 : out_for(o, now);
	st->fails = o->h.fails;
	st->last_error = o->h.last_error;
	st->ejections = o->h.ejections_total;
	st->probes = o->h.probes;
	st->probe_failures = o->h.probe_failures;
	memcpy(st->failovers, o->h.failovers, sizeof(st->failovers));
	memcpy(st->retries, o->h.retries, sizeof(st->retries));
	memcpy(st->lat, o->h.lat, sizeof(st->lat));
	st->lat_sum_us = o->h.lat_sum_us;
	return 0;
}
