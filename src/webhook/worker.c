/*
 * worker.c - the delivery worker on the gateway's event loop: a timer set
 * to the outbox's next due time leases jobs up to the in-flight limit and
 * starts an attempt for each (deliver.c); a second timer renews the leases
 * of attempts in flight, so a long upload keeps its job while a crashed
 * process's leases run out; drain and teardown for SIGTERM and exit.
 * Created by the gateway at start-up. The state seam (tidegate/state.h)
 * announces no job, so the worker asks it: a timer set to the outbox's
 * next due time, after each attempt, and whenever the feature kicks it
 * after its own writes that make a job due (a payload committed, a
 * redelivery). One lease is asked for at a time; every call answers later
 * or at once.
 *
 * How often it looks when nothing is due: every TICK_MAX_MS with one
 * instance (its own file: a clock step is noticed soon), but in a fleet
 * only every third of the lease (webhooks.lease / 3, 20 s by default),
 * so that an idle instance leaves the database alone: each instance
 * delivers the jobs it readies itself, and the next due time it reads
 * covers the others' retries and leases running out (a dead instance's
 * jobs are taken at their lease's end). What that period leaves slow, a
 * ready job no instance leases (an instance draining for SIGTERM, or
 * killed between readying a job and leasing it), is covered by a wake-up:
 * a draining worker tells the fleet (topic "outbox") when it starts and
 * when its last attempt is over, and a worker looks at once on any
 * "outbox" wake-up or when wake-ups may have been lost.
 *
 * Attempts are counted per callback host too: a lease skips the jobs of a
 * host holding its share (max_inflight_per_host), so receivers on one host
 * that answer slowly leave the other slots to other hosts. Skipped jobs
 * stay due without an attempt counted; an attempt's end looks again.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "tidegate/clock.h"
#include "tidegate/log.h"
#include "tidegate/map.h"
#include "tidegate/webhook.h"
#include "wh.h"

#define ATTEMPT_TIMEOUT_MS	15000
#define ATTEMPT_DEADLINE_MS	60000
#define MAX_INFLIGHT		8
/* Look again at least this often: wall-clock steps, leases expiring, jobs
 * other writers made due (the seam announces nothing). */
#define TICK_MAX_MS		1000
/* A due job the lease did not get (another instance took it): not again
 * at once. */
#define MISSED_MS		100
#define RETRY_DB_MS		1000
#define USER_AGENT		"tidegate-webhook"
#define LEASE_MS		60000	/* the outbox's default lease */
#define WAKE_TOPIC		"outbox"
#define RELEASE_WAIT_MS		2000	/* teardown waits this long for releases */

static void
ms_tv(int64_t ms, struct timeval *tv)
{
	tv->tv_sec = (time_t)(ms / 1000);
	tv->tv_usec = (suseconds_t)(ms % 1000 * 1000);
}

static void on_due(const struct tg_state_res *res, int64_t due, void *arg);

/* Look again after delay_ms; -1: at the outbox's next due time (asked of
 * the seam), at most tick_max away, which also notices jobs other
 * writers made due. */
static void
schedule(struct tg_webhook *w, int64_t delay_ms)
{
	struct timeval tv;
	struct tg_state_op *op;

	if (w->draining || w->inflight >= w->opts.max_inflight)
		return;		/* an attempt's end looks again */
	if (delay_ms < 0) {
		if (w->asking)
			return;
		w->asking = 1;
		op = tg_state_outbox_next_due(w->st, on_due, w);
		if (w->asking)
			w->due_op = op;
		return;
	}
	ms_tv(delay_ms, &tv);
	evtimer_add(w->tick, &tv);
}

static void
on_due(const struct tg_state_res *res, int64_t due, void *arg)
{
	struct tg_webhook *w = arg;
	int64_t now = tg_clock_now_ms();

	w->asking = 0;
	w->due_op = NULL;
	if (res->rc != TG_STATE_OK) {
		schedule(w, RETRY_DB_MS);
	} else if (due <= now && w->missed) {
		w->missed = 0;
		schedule(w, MISSED_MS);
	} else if (due <= now) {
		tg_webhook_kick(w);
	} else {
		schedule(w, due == INT64_MAX || due - now > w->tick_max ? w->tick_max : due - now);
	}
}

void
tg_webhook_host_take(struct tg_webhook *w, const char *host)
{
	uintptr_t n;

	if (w->hosts == NULL)
		w->hosts = tg_map_new(NULL);
	n = (uintptr_t)tg_map_get(w->hosts, host);
	tg_map_put(w->hosts, host, (void *)(n + 1));
}

void
tg_webhook_host_give(struct tg_webhook *w, const char *host)
{
	uintptr_t n = w->hosts != NULL ? (uintptr_t)tg_map_get(w->hosts, host) : 0;

	if (n > 1)
		tg_map_put(w->hosts, host, (void *)(n - 1));
	else if (n == 1)
		tg_map_del(w->hosts, host);
}

/* The hosts holding their share now, into skip (its array the caller's:
 * free skip->v; the strings borrowed from the map). */
static void
hosts_full(const struct tg_webhook *w, struct tg_strlist *skip)
{
	const char *host;
	void *n;
	size_t pos = 0;

	skip->v = NULL;
	skip->n = 0;
	while (w->hosts != NULL && tg_map_next(w->hosts, &pos, &host, &n)) {
		if ((uintptr_t)n < w->opts.max_inflight_per_host)
			continue;
		skip->v = tg_xrealloc(skip->v, (skip->n + 1) * sizeof(*skip->v));
		skip->v[skip->n++] = (char *)host;
	}
}

static void drained_maybe(struct tg_webhook *w);

/* A lease came (or none was due): start its attempt and look for more. */
static void
on_leased(const struct tg_state_res *res, struct tg_outbox_lease *l, void *arg)
{
	struct tg_webhook *w = arg;

	w->leasing = 0;
	w->lease_op = NULL;
	if (w->draining) {
		if (l != NULL)
			tg_webhook_lease_release(w, l);
		drained_maybe(w);
		return;
	}
	if (res->rc != TG_STATE_OK) {
		tg_log(TG_LOG_ERROR, "webhook_lease_failed", TG_LS("error", res->err.msg));
		schedule(w, RETRY_DB_MS);
		return;
	}
	if (l == NULL && w->kicked) {
		tg_webhook_kick(w);	/* kicked meanwhile: a job may have come since */
		return;
	}
	w->missed = l == NULL;
	if (l == NULL && w->skipping) {
		schedule(w, TICK_MAX_MS);	/* jobs held back by the share: an end kicks */
		return;
	}
	if (l == NULL) {
		schedule(w, -1);
		return;
	}
	tg_webhook_attempt_start(w, l);
	tg_webhook_kick(w);	/* the next lease, from the loop */
}

/* The timer asks whether a job is due (a read); a kick leases at once.
 * One lease at a time; its answer asks for the next. */
static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct tg_webhook *w = arg;
	struct tg_strlist skip;
	struct tg_state_op *op;

	if (!w->kicked) {
		schedule(w, -1);
		return;
	}
	if (w->leasing)
		return;		/* kicked stays: its answer leases again */
	w->kicked = 0;
	if (w->draining || w->inflight >= w->opts.max_inflight)
		return;
	hosts_full(w, &skip);
	w->skipping = skip.n > 0;
	w->leasing = 1;
	op = tg_state_outbox_lease(w->st, tg_clock_now_ms(), &skip, on_leased, w);
	if (w->leasing)
		w->lease_op = op;
	free(skip.v);
}

static void
on_renew(evutil_socket_t fd, short what, void *arg)
{
	struct tg_webhook *w = arg;

	tg_webhook_attempts_renew(w, tg_clock_now_ms());
}

/* Another instance drained (or wake-ups were lost): its ready jobs are
 * nobody's until someone looks. */
static void
on_wake(const char *topic, const char *what, void *arg)
{
	(void)topic;
	(void)what;
	tg_webhook_kick(arg);
}

static void
on_notified(const struct tg_state_res *res, void *arg)
{
	(void)res;	/* best effort: the others look on their own timer too */
}

static void
on_drained(evutil_socket_t fd, short what, void *arg)
{
	struct tg_webhook *w = arg;
	void (*cb)(void *) = w->on_drained;

	if (cb != NULL && w->watch != NULL)	/* its last attempts' retries: the others' */
		(void)tg_state_notify(w->st, WAKE_TOPIC, "drained", on_notified, NULL);
	w->on_drained = NULL;
	if (cb != NULL)
		cb(w->drained_arg);
}

/* Drained: no attempt in flight and no lease on its way. */
static void
drained_maybe(struct tg_webhook *w)
{
	if (w->draining && w->inflight == 0 && !w->leasing)
		event_active(w->drained_ev, EV_TIMEOUT, 1);
}

void
tg_webhook_worker_attempt_over(struct tg_webhook *w)
{
	if (w->draining) {
		drained_maybe(w);
		return;
	}
	tg_webhook_kick(w);
}

/* The deadline and the share per host, defaults applied (opts.max_inflight
 * and attempt_timeout_ms set already). */
static void
limits_set(struct tg_webhook *w, int64_t attempt_deadline_ms, size_t per_host)
{
	w->opts.attempt_deadline_ms = attempt_deadline_ms > 0 ? attempt_deadline_ms :
	    ATTEMPT_DEADLINE_MS;
	if (w->opts.attempt_deadline_ms < w->opts.attempt_timeout_ms)
		w->opts.attempt_deadline_ms = w->opts.attempt_timeout_ms;
	w->opts.max_inflight_per_host = per_host > 0 ? per_host :
	    w->opts.max_inflight / 4 > 0 ? w->opts.max_inflight / 4 : 1;
}

static void
opts_copy(struct tg_webhook *w, const struct tg_webhook_opts *opts)
{
	if (opts != NULL)
		w->opts = *opts;
	if (w->opts.lease_ms <= 0)
		w->opts.lease_ms = LEASE_MS;
	if (w->opts.attempt_timeout_ms <= 0)
		w->opts.attempt_timeout_ms = ATTEMPT_TIMEOUT_MS;
	if (w->opts.max_inflight == 0)
		w->opts.max_inflight = MAX_INFLIGHT;
	limits_set(w, w->opts.attempt_deadline_ms, w->opts.max_inflight_per_host);
	w->ca_file = w->opts.ca_file != NULL ? tg_xstrdup(w->opts.ca_file) : NULL;
	w->opts.ca_file = w->ca_file;
	w->user_agent = tg_xstrdup(w->opts.user_agent != NULL ? w->opts.user_agent :
	    USER_AGENT);
	w->opts.user_agent = w->user_agent;
}

struct tg_webhook *
tg_webhook_new(struct event_base *base, struct evdns_base *dns, struct tg_state *st,
    const struct tg_egress *pol, const struct tg_webhook_opts *opts,
    const struct tg_webhook_cbs *cbs, void *arg, struct tg_err *err)
{
	struct tg_webhook *w;
	struct tg_state_health h;
	struct timeval tv;

	if (base == NULL || st == NULL || pol == NULL || cbs == NULL || cbs->secrets == NULL) {
		tg_err_set(err, "webhook worker needs a loop, the state, a policy and secrets");
		return NULL;
	}
	w = tg_xcalloc(1, sizeof(*w));
	w->base = base;
	w->dns = dns;
	w->st = st;
	w->pol = pol;
	w->cbs = *cbs;
	w->arg = arg;
	opts_copy(w, opts);
	TAILQ_INIT(&w->attempts);
	TAILQ_INIT(&w->releases);
	w->tick = evtimer_new(base, on_tick, w);
	w->drained_ev = event_new(base, -1, 0, on_drained, w);
	w->renew = event_new(base, -1, EV_PERSIST, on_renew, w);
	ms_tv(w->opts.lease_ms / 3, &tv);
	evtimer_add(w->renew, &tv);
	tg_state_health(st, &h);
	w->tick_max = h.shared && w->opts.lease_ms / 3 > TICK_MAX_MS ? w->opts.lease_ms / 3 :
	    TICK_MAX_MS;
	if (h.shared)
		w->watch = tg_state_watch(st, WAKE_TOPIC, on_wake, w);
	tg_webhook_kick(w);
	return w;
}

void
tg_webhook_kick(struct tg_webhook *w)
{
	if (w->draining)
		return;
	w->kicked = 1;
	event_active(w->tick, EV_TIMEOUT, 1);
}

void
tg_webhook_set_limits(struct tg_webhook *w, int64_t attempt_deadline_ms, size_t per_host)
{
	limits_set(w, attempt_deadline_ms, per_host);
	tg_webhook_kick(w);	/* a wider share may let skipped jobs go */
}

void
tg_webhook_set_policy(struct tg_webhook *w, const struct tg_egress *pol)
{
	w->pol = pol;
}

void
tg_webhook_drain(struct tg_webhook *w, void (*cb)(void *arg), void *arg)
{
	if (!w->draining && w->watch != NULL)	/* its ready jobs: the others' now */
		(void)tg_state_notify(w->st, WAKE_TOPIC, "drain", on_notified, NULL);
	w->draining = 1;
	w->on_drained = cb;
	w->drained_arg = arg;
	event_del(w->tick);
	tg_state_cancel(w->due_op);
	w->due_op = NULL;
	w->asking = 0;
	drained_maybe(w);
}

size_t
tg_webhook_inflight(const struct tg_webhook *w)
{
	return w->inflight;
}

static void
on_bound(evutil_socket_t fd, short what, void *arg)
{
}

/* Teardown: the leases given back (and one still being taken) are
 * answered by the seam's writer on the loop; run it (bounded) so that they
 * are written before the state closes, then forget what is left (those
 * jobs wait for their lease to run out: at least once either way). */
static void
releases_wait(struct tg_webhook *w)
{
	int64_t end = tg_clock_mono_ms() + RELEASE_WAIT_MS;
	struct timeval tv = { 0, 10000 };
	struct event *bound;

	if (TAILQ_EMPTY(&w->releases) && !w->leasing)
		return;
	bound = evtimer_new(w->base, on_bound, NULL);
	while ((!TAILQ_EMPTY(&w->releases) || w->leasing) && tg_clock_mono_ms() < end) {
		evtimer_add(bound, &tv);
		event_base_loop(w->base, EVLOOP_ONCE);
	}
	event_free(bound);
	tg_webhook_releases_cancel(w);
}

void
tg_webhook_free(struct tg_webhook *w)
{
	if (w == NULL)
		return;
	w->draining = 1;		/* a lease still coming is given back */
	w->on_drained = NULL;		/* the loop runs below: nobody is told now */
	event_del(w->tick);
	tg_state_cancel(w->due_op);
	tg_webhook_attempts_abandon(w);
	releases_wait(w);
	if (w->leasing)		/* never answered: its job waits for the lease to run out */
		tg_state_cancel(w->lease_op);
	tg_state_unwatch(w->st, w->watch);
	event_free(w->tick);
	event_free(w->renew);
	event_free(w->drained_ev);
	tg_map_free(w->origins);
	tg_map_free(w->hosts);
	free(w->ca_file);
	free(w->user_agent);
	free(w);
}
