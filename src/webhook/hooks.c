/*
 * hooks.c - the gateway's webhook machinery as a whole: starts the
 * delivery worker on the state seam's outbox (gw->state) at start-up,
 * resumes the payload fetchers of jobs a previous run left waiting (read
 * through the seam, a page at a time), resolves signing
 * secrets from the running configuration (so a SIGHUP rotates them),
 * turns attempt outcomes into metrics, swaps the egress policy on reload,
 * drains on SIGTERM and purges finished jobs after webhooks.retention.
 * Called by feature.c (lifecycle, metrics); the request side is
 * callbacks.c, the payload fetcher hook_fetch.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "tidegate/clock.h"
#include "tidegate/log.h"
#include "tidegate/map.h"
#include "hooks_int.h"

#define PURGE_EVERY_MS	(3600 * 1000)
#define RESUME_PAGE	500
#define RETRY_MS	5000	/* background work the seam refused: again after */

/* A scrape's part waiting for the outbox's counters (out and s borrowed). */
struct wh_scrape {
	struct evbuffer *out;
	struct gw_scrape *s;
	int64_t cap;			/* webhooks.payload_max_bytes, for the usage */
};

/* ---- worker callbacks ---- */

/* The current runtime, not the one a job was created under: rotating
 * webhooks.secret (or a key's) with SIGHUP applies to the next attempt. */
static const struct tg_strlist *
on_secrets(const char *ref, void *arg)
{
	struct wh_hooks *h = arg;

	return wh_secrets(h->gw->rt, ref);
}

static const char *
result_of(enum tg_outbox_state st)
{
	switch (st) {
	case TG_OUTBOX_DELIVERED:
		return "delivered";
	case TG_OUTBOX_GONE:
		return "gone";
	case TG_OUTBOX_DEAD:
		return "dead";
	default:
		return "retry";
	}
}

static void
on_outcome(const struct tg_webhook_outcome *o, void *arg)
{
	struct wh_hooks *h = arg;
	struct tg_metrics *m = h->gw->metrics;
	char labels[48];

	snprintf(labels, sizeof(labels), "result=\"%s\"", result_of(o->state));
	tg_metrics_inc(m, "tidegate_webhook_attempts_total", labels, 1);
	if (o->state == TG_OUTBOX_DEAD)
		tg_metrics_inc(m, "tidegate_webhook_dead_letters_total", "reason=\"exhausted\"", 1);
	tg_metrics_observe(m, "tidegate_webhook_attempt_duration_seconds", "",
	    (double)o->duration_ms / 1000.0);
	if (o->first_delay_ms >= 0)
		tg_metrics_observe(m, "tidegate_webhook_first_attempt_seconds", "",
		    (double)o->first_delay_ms / 1000.0);
	if (o->error != NULL && strncmp(o->error, "egress refused", 14) == 0)
		tg_metrics_inc(m, "tidegate_webhook_egress_refusals_total", "stage=\"attempt\"",
		    1);
}

static void
on_drained(void *arg)
{
	struct wh_hooks *h = arg;

	h->drained = 1;
	gw_maybe_exit(h->gw);
}

/* ---- retention ---- */

static void
on_purged(const struct tg_state_res *res, int64_t n, void *arg)
{
	struct wh_hooks *h = arg;

	h->purging = 0;
	h->purge_op = NULL;
	if (res->rc != TG_STATE_OK)
		tg_log(TG_LOG_ERROR, "webhook_purge_failed", TG_LS("error", res->err.msg));
	else if (n > 0)
		tg_log(TG_LOG_INFO, "webhook_purged", TG_LI("jobs", n));
}

static void
on_purge(evutil_socket_t fd, short what, void *arg)
{
	struct wh_hooks *h = arg;
	struct tg_state_op *op;

	if (h->purging)
		return;
	h->purging = 1;
	op = tg_state_outbox_purge(h->st, tg_clock_now_ms() - wh_cfg(h->gw->rt)->wh_retention,
	    on_purged, h);
	if (h->purging)
		h->purge_op = op;
}

/* ---- start ---- */

/* Jobs a previous run left waiting for their export data, a page at a
 * time; each full page asks for the next from the loop. */
static void
on_resume_page(const struct tg_state_res *res, const struct tg_outbox_job *jobs, size_t n,
    void *arg)
{
	struct wh_hooks *h = arg;
	const struct wh_cfg *c = wh_cfg(h->gw->rt);
	struct timeval tv = { RETRY_MS / 1000, 0 };
	size_t i;

	h->resuming = 0;
	h->resume_op = NULL;
	if (res->rc != TG_STATE_OK) {
		tg_log(TG_LOG_ERROR, "webhook_resume_failed", TG_LS("error", res->err.msg));
		evtimer_add(h->resume_ev, &tv);		/* try again */
		return;
	}
	for (i = 0; i < n; i++)
		wh_fetch_start(h, jobs[i].id, jobs[i].api_key, c->wh_mode == WH_RELAY ? NULL :
		    jobs[i].correlation_id, jobs[i].created_at, 0);
	h->resumed += n;
	h->resume_offset += n;
	if (n == RESUME_PAGE)
		event_active(h->resume_ev, EV_TIMEOUT, 1);
	else
		h->resumed_all = 1;	/* the relay endpoint may trust fetches */
	if (n < RESUME_PAGE && h->resumed > 0)
		tg_log(TG_LOG_INFO, "webhook_fetch_resumed", TG_LI("jobs", h->resumed));
}

static void
on_resume(evutil_socket_t fd, short what, void *arg)
{
	struct wh_hooks *h = arg;
	struct tg_outbox_query q = { TG_OUTBOX_WAITING, 0, NULL, RESUME_PAGE, h->resume_offset };
	struct tg_state_op *op;

	if (h->resuming || h->gw->draining)
		return;
	h->resuming = 1;
	op = tg_state_outbox_list(h->st, &q, on_resume_page, h);
	if (h->resuming)
		h->resume_op = op;
}

static int
fleet(struct wh_hooks *h)
{
	struct tg_state_health hl;

	tg_state_health(h->st, &hl);
	h->fleet = hl.shared;
	return h->fleet;
}

void
tg_webhook_outbox_opts(const struct gw_config *g, struct tg_outbox_opts *o)
{
	const struct wh_cfg *c = wh_cfg_of(g);

	memset(o, 0, sizeof(*o));
	o->path = c->wh_db_path;
	o->schedule_ms = c->wh_schedule_ms;
	o->nschedule = c->wh_nschedule;
	o->lease_ms = c->wh_lease;
}

struct wh_hooks *
wh_hooks_new(struct gw *gw)
{
	struct wh_hooks *h = tg_xcalloc(1, sizeof(*h));

	h->gw = gw;
	h->st = gw->state;
	h->fetches = tg_map_new(wh_fetch_free);
	TAILQ_INIT(&h->admin);
	TAILQ_INIT(&h->adds);
	return h;
}

int
wh_hooks_start(struct wh_hooks *h, struct tg_err *err)
{
	struct gw *gw = h->gw;
	const struct wh_cfg *c = wh_cfg(gw->rt);
	struct tg_webhook_opts wo = {
		.attempt_timeout_ms = c->wh_attempt_timeout,
		.attempt_deadline_ms = c->wh_attempt_deadline,
		.max_inflight = (size_t)c->wh_max_inflight,
		.max_inflight_per_host = (size_t)c->wh_max_inflight_per_host,
		.ca_file = c->wh_ca_file, .lease_ms = c->wh_lease,
	};
	struct tg_webhook_cbs cbs = { on_secrets, on_outcome };
	struct timeval tv = { PURGE_EVERY_MS / 1000, 0 };

	if (h->st == NULL) {
		tg_err_set(err, "webhooks need the state seam (its outbox)");
		return -1;
	}
	if ((h->pol = tg_egress_new(&c->wh_allow, err)) == NULL)
		return -1;
	if ((h->w = tg_webhook_new(gw->base, gw->dns, h->st, h->pol, &wo, &cbs, h, err)) == NULL)
		return -1;
	wh_relay_key_start(h);
	h->resume_ev = evtimer_new(gw->base, on_resume, h);
	if (fleet(h))
		wh_adopt_start(h);	/* not every waiting job: the dead's */
	else
		on_resume(-1, 0, h);
	h->purge = event_new(gw->base, -1, EV_PERSIST, on_purge, h);
	evtimer_add(h->purge, &tv);
	on_purge(-1, 0, h);
	tg_log(TG_LOG_INFO, "webhooks", TG_LS("mode", c->wh_mode_str),
	    TG_LS("db", c->wh_db_path), TG_LI("schedule", c->wh_nschedule));
	return 0;
}

/* ---- reload, drain, stop ---- */

static void
retired_free(struct wh_hooks *h)
{
	size_t i;

	for (i = 0; i < h->nretired; i++)
		tg_egress_free(h->retired[i]);
	free(h->retired);
	h->retired = NULL;
	h->nretired = 0;
}

void
wh_hooks_reload(struct wh_hooks *h, const struct gw_config *was)
{
	const struct wh_cfg *old = wh_cfg_of(was);
	const struct wh_cfg *c = wh_cfg(h->gw->rt);
	struct tg_egress *pol;
	struct tg_err err;
	size_t i;

	if ((pol = tg_egress_new(&c->wh_allow, &err)) == NULL) {
		tg_log(TG_LOG_ERROR, "webhook_policy_kept", TG_LS("reason", err.msg));
		return;
	}
	tg_webhook_set_policy(h->w, pol);
	tg_webhook_set_limits(h->w, c->wh_attempt_deadline, (size_t)c->wh_max_inflight_per_host);
	/* Attempts in flight may still read the old policies. */
	if (tg_webhook_inflight(h->w) == 0) {
		retired_free(h);
		tg_egress_free(h->pol);
	} else {
		h->retired = tg_xrealloc(h->retired, (h->nretired + 1) * sizeof(*h->retired));
		h->retired[h->nretired++] = h->pol;
	}
	h->pol = pol;
	if (strcmp(c->wh_db_path, old->wh_db_path) != 0 || c->wh_lease != old->wh_lease ||
	    c->wh_nschedule != old->wh_nschedule ||
	    c->wh_attempt_timeout != old->wh_attempt_timeout ||
	    c->wh_max_inflight != old->wh_max_inflight)
		goto restart;
	for (i = 0; i < c->wh_nschedule; i++)
		if (c->wh_schedule_ms[i] != old->wh_schedule_ms[i])
			goto restart;
	return;
restart:
	tg_log(TG_LOG_WARN, "reload_webhooks_kept", TG_LS("reason", "webhooks.db, schedule, "
	    "lease, attempt_timeout and max_inflight need a restart"));
}

void
wh_hooks_drain(struct wh_hooks *h)
{
	/* Waiting jobs stay waiting: the next start polls them again. */
	tg_map_free(h->fetches);
	h->fetches = tg_map_new(wh_fetch_free);
	tg_webhook_drain(h->w, on_drained, h);
}

void
wh_hooks_free(struct wh_hooks *h)
{
	int flush;

	if (h == NULL)
		return;
	if (h->purge != NULL)		/* nothing of ours may start from here on */
		event_del(h->purge);
	if (h->resume_ev != NULL)
		event_del(h->resume_ev);
	wh_admin_cancel(h);
	wh_adds_cancel(h);
	tg_state_cancel(h->purge_op);
	tg_state_cancel(h->resume_op);
	wh_relay_key_stop(h);
	wh_adopt_stop(h);
	tg_map_free(h->fetches);
	tg_map_free(h->quota_key_waits);	/* after the fetchers that count in it */
	flush = h->w != NULL && tg_webhook_inflight(h->w) > 0;
	tg_webhook_free(h->w);
	/* Cancelled DNS lookups report back through the loop once. */
	if (flush)
		event_base_loop(h->gw->base, EVLOOP_NONBLOCK);
	if (h->purge != NULL)
		event_free(h->purge);
	if (h->resume_ev != NULL)
		event_free(h->resume_ev);
	tg_egress_free(h->pol);
	retired_free(h);
	free(h);
}

/* ---- metrics ---- */

/* The counters came: the series into the scrape's part, which goes on.
 * Touches nothing of the feature (the scrape may outlive it). */
static void
on_stats(const struct tg_state_res *res, const struct tg_outbox_stats *st, void *arg)
{
	struct wh_scrape *ws = arg;
	struct evbuffer *out = ws->out;
	int i;

	if (res->rc == TG_STATE_OK) {
		evbuffer_add_printf(out, "# HELP tidegate_webhook_jobs Webhook jobs in the "
		    "outbox by state.\n# TYPE tidegate_webhook_jobs gauge\n");
		for (i = 0; i < TG_OUTBOX_NSTATES; i++)
			evbuffer_add_printf(out, "tidegate_webhook_jobs{state=\"%s\"} %llu\n",
			    tg_outbox_state_str((enum tg_outbox_state)i),
			    (unsigned long long)st->depth[i]);
		evbuffer_add_printf(out, "# HELP tidegate_webhook_attempts_in_flight Delivery "
		    "attempts holding a lease.\n# TYPE tidegate_webhook_attempts_in_flight gauge\n"
		    "tidegate_webhook_attempts_in_flight %llu\n", (unsigned long long)st->leased);
		evbuffer_add_printf(out, "# HELP tidegate_webhook_payload_reused_total Attempts "
		    "whose payload this instance had read from the database before (a copy "
		    "kept for retries).\n# TYPE tidegate_webhook_payload_reused_total counter\n"
		    "tidegate_webhook_payload_reused_total %llu\n",
		    (unsigned long long)st->payload_reused);
	}
	gw_scrape_release(ws->s);
	free(ws);
}

/* The payload bytes held, beside their cap (the quota's). */
static void
on_usage(const struct tg_state_res *res, int64_t all, int64_t mine, void *arg)
{
	struct wh_scrape *ws = arg;

	if (res->rc == TG_STATE_OK)
		evbuffer_add_printf(ws->out, "# HELP tidegate_webhook_payload_bytes Webhook payload "
		    "bytes held (waiting, ready and dead jobs).\n"
		    "# TYPE tidegate_webhook_payload_bytes gauge\n"
		    "tidegate_webhook_payload_bytes %lld\n"
		    "# HELP tidegate_webhook_payload_max_bytes Their cap "
		    "(webhooks.payload_max_bytes).\n"
		    "# TYPE tidegate_webhook_payload_max_bytes gauge\n"
		    "tidegate_webhook_payload_max_bytes %lld\n", (long long)all, (long long)ws->cap);
	gw_scrape_release(ws->s);
	free(ws);
}

static struct wh_scrape *
scrape_part(struct evbuffer *out, struct gw_scrape *s)
{
	struct wh_scrape *ws = tg_xcalloc(1, sizeof(*ws));

	ws->out = out;
	ws->s = s;
	gw_scrape_hold(s);
	return ws;
}

void
wh_hooks_metrics(struct wh_hooks *h, struct evbuffer *out, struct gw_scrape *s)
{
	struct wh_scrape *ws = scrape_part(out, s);

	tg_state_outbox_stats(h->st, tg_clock_now_ms(), on_stats, ws);
	ws = scrape_part(out, s);
	ws->cap = wh_cfg(h->gw->rt)->wh_payload_max_bytes;
	tg_state_outbox_usage(h->st, NULL, on_usage, ws);
}
