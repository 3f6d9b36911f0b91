/*
 * worker.c - the delivery worker on the gateway's event loop: a timer set
 * to the outbox's next due time leases jobs up to the in-flight limit and
 * starts an attempt for each (deliver.c); a second timer renews the leases
 * of attempts in flight, so a long upload keeps its job while a crashed
 * process's leases run out; drain and teardown for SIGTERM and exit.
 * Created by the gateway at start-up; woken by the outbox when a payload
 * is committed or a job is redelivered.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "tidegate/clock.h"
#include "tidegate/log.h"
#include "tidegate/webhook.h"
#include "wh.h"

#define ATTEMPT_TIMEOUT_MS	15000
#define MAX_INFLIGHT		8
/* Look again at least this often: wall-clock steps, leases expiring. */
#define TICK_MAX_MS		5000
#define RETRY_DB_MS		1000
#define USER_AGENT		"tidegate-webhook"

static void
ms_tv(int64_t ms, struct timeval *tv)
{
	tv->tv_sec = (time_t)(ms / 1000);
	tv->tv_usec = (suseconds_t)(ms % 1000 * 1000);
}

static void
schedule(struct tg_webhook *w, int64_t delay_ms)
{
	struct timeval tv;

	if (w->draining || w->inflight >= w->opts.max_inflight)
		return;		/* an attempt's end looks again */
	if (delay_ms < 0) {
		int64_t due = tg_outbox_next_due(w->ob), now = tg_clock_now_ms();

		delay_ms = due == INT64_MAX || due - now > TICK_MAX_MS ? TICK_MAX_MS :
		    due > now ? due - now : 0;
	}
	ms_tv(delay_ms, &tv);
	evtimer_add(w->tick, &tv);
}

static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct tg_webhook *w = arg;
	struct tg_outbox_lease *l;
	struct tg_err err;
	int rc;

	while (!w->draining && w->inflight < w->opts.max_inflight) {
		rc = tg_outbox_lease(w->ob, tg_clock_now_ms(), &l, &err);
		if (rc < 0) {
			tg_log(TG_LOG_ERROR, "webhook_lease_failed", TG_LS("error", err.msg));
			schedule(w, RETRY_DB_MS);
			return;
		}
		if (rc == 0)
			break;
		tg_webhook_attempt_start(w, l);
	}
	schedule(w, -1);
}

static void
on_renew(evutil_socket_t fd, short what, void *arg)
{
	struct tg_webhook *w = arg;

	tg_webhook_attempts_renew(w, tg_clock_now_ms());
}

static void
on_drained(evutil_socket_t fd, short what, void *arg)
{
	struct tg_webhook *w = arg;
	void (*cb)(void *) = w->on_drained;

	w->on_drained = NULL;
	if (cb != NULL)
		cb(w->drained_arg);
}

static void
on_notify(void *arg)
{
	tg_webhook_kick(arg);
}

void
tg_webhook_worker_attempt_over(struct tg_webhook *w)
{
	if (w->draining) {
		if (w->inflight == 0)
			event_active(w->drained_ev, EV_TIMEOUT, 1);
		return;
	}
	tg_webhook_kick(w);
}

static void
opts_copy(struct tg_webhook *w, const struct tg_webhook_opts *opts)
{
	if (opts != NULL)
		w->opts = *opts;
	if (w->opts.attempt_timeout_ms <= 0)
		w->opts.attempt_timeout_ms = ATTEMPT_TIMEOUT_MS;
	if (w->opts.max_inflight == 0)
		w->opts.max_inflight = MAX_INFLIGHT;
	w->ca_file = w->opts.ca_file != NULL ? tg_xstrdup(w->opts.ca_file) : NULL;
	w->opts.ca_file = w->ca_file;
	w->user_agent = tg_xstrdup(w->opts.user_agent != NULL ? w->opts.user_agent :
	    USER_AGENT);
	w->opts.user_agent = w->user_agent;
}

struct tg_webhook *
tg_webhook_new(struct event_base *base, struct evdns_base *dns, struct tg_outbox *ob,
    const struct tg_egress *pol, const struct tg_webhook_opts *opts,
    const struct tg_webhook_cbs *cbs, void *arg, struct tg_err *err)
{
	struct tg_webhook *w;
	struct timeval tv;

	if (base == NULL || ob == NULL || pol == NULL || cbs == NULL || cbs->secrets == NULL) {
		tg_err_set(err, "webhook worker needs a loop, an outbox, a policy and secrets");
		return NULL;
	}
	w = tg_xcalloc(1, sizeof(*w));
	w->base = base;
	w->dns = dns;
	w->ob = ob;
	w->pol = pol;
	w->cbs = *cbs;
	w->arg = arg;
	opts_copy(w, opts);
	TAILQ_INIT(&w->attempts);
	w->tick = evtimer_new(base, on_tick, w);
	w->drained_ev = event_new(base, -1, 0, on_drained, w);
	w->renew = event_new(base, -1, EV_PERSIST, on_renew, w);
	ms_tv(tg_outbox_lease_ms(ob) / 3, &tv);
	evtimer_add(w->renew, &tv);
	tg_outbox_set_notify(ob, on_notify, w);
	tg_webhook_kick(w);
	return w;
}

void
tg_webhook_kick(struct tg_webhook *w)
{
	if (!w->draining)
		event_active(w->tick, EV_TIMEOUT, 1);
}

void
tg_webhook_set_policy(struct tg_webhook *w, const struct tg_egress *pol)
{
	w->pol = pol;
}

void
tg_webhook_drain(struct tg_webhook *w, void (*cb)(void *arg), void *arg)
{
	w->draining = 1;
	w->on_drained = cb;
	w->drained_arg = arg;
	event_del(w->tick);
	if (w->inflight == 0)
		event_active(w->drained_ev, EV_TIMEOUT, 1);
}

size_t
tg_webhook_inflight(const struct tg_webhook *w)
{
	return w->inflight;
}

void
tg_webhook_free(struct tg_webhook *w)
{
	if (w == NULL)
		return;
	tg_outbox_set_notify(w->ob, NULL, NULL);
	tg_webhook_attempts_abandon(w);
	event_free(w->tick);
	event_free(w->renew);
	event_free(w->drained_ev);
	free(w->ca_file);
	free(w->user_agent);
	free(w);
}
