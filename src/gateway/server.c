/*
 * server.c - the gateway's lifecycle: build a runtime (upstreams, token
 * sources, keys) from a configuration, start the validation worker
 * (validate.c), bind the listeners once the entry point has registered the
 * features (listeners.c; refusing non-loopback addresses when no API keys
 * are configured), reload on SIGHUP without dropping connections (a
 * changed listen address is bound first and the old one retired; a
 * refused reload keeps everything, tidegate_config_last_reload_successful
 * says 0), and stop on SIGTERM: /readyz answers 503 for drain_delay while
 * the listeners still serve, then the drain (requests, checks, whatever
 * each feature waits for: its idle callback, and a last export of the
 * spans queued (otlp.c); the admin listener stays open so /readyz says
 * "draining" until the end; past drain_timeout what is left is cut, and
 * logged as such). Called by src/tidegate.c.
 */
#include <arpa/inet.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/http.h>

#include "tidegate/clock.h"
#include "tidegate/errors.h"
#include "tidegate/http.h"
#include "tidegate/log.h"
#include "tidegate/notify.h"
#include "tidegate/sim.h"
#include "tidegate/worker.h"
#include "gw.h"

/* Every problem of a refused file, joined with "; " (NULL when none). */
static char *
load_for_reload(const char *path, struct gw_config *cfg)
{
	struct tg_cfg_report rep = { 0 };
	char *all = NULL, *next;
	size_t i;

	gw_config_load(path, cfg, &rep);
	for (i = 0; i < rep.n; i++) {
		next = tg_xasprintf("%s%s%s", all ? all : "", all ? "; " : "", rep.v[i].msg);
		free(all);
		all = next;
	}
	tg_config_report_cleanup(&rep);
	return all;
}

static int
reload_apply(struct gw *gw)
{
	struct gw_runtime *rt, *old;
	struct gw_rebind rb;
	struct gw_config cfg;
	struct tg_err err;
	const char *refused;
	char *why;
	int l;

	if ((why = load_for_reload(gw->config_path, &cfg)) != NULL) {
		tg_log(TG_LOG_ERROR, "reload_failed", TG_LS("reason", why));
		free(why);
		gw_config_free(&cfg);
		return -1;
	}
	if ((refused = gw_tls_downgrade(gw, &cfg)) != NULL) {
		tg_log(TG_LOG_ERROR, "reload_failed", TG_LS("reason", refused));
		gw_config_free(&cfg);
		return -1;
	}
	/* a changed listen address is bound first: a bind that fails keeps all */
	if (gw_rebind_prepare(gw, &cfg, &rb, &err) != 0 ||
	    (rt = gw_runtime_new(gw, &cfg, &err)) == NULL) {
		gw_rebind_abort(&rb);
		tg_log(TG_LOG_ERROR, "reload_failed", TG_LS("reason", err.msg));
		gw_config_free(&cfg);
		return -1;
	}
	old = gw->rt;
	gw->rt = rt;
	if (gw->tls != NULL)
		gw_tls_reload(gw, &rt->cfg);
	for (l = 0; l < GW_NLISTENERS; l++)
		gw_listener_door(gw, l, &rt->cfg);
	gw_rebind_commit(gw, &rb);
	gw_feat_reload(gw, &old->cfg);
	gw_otlp_reload(gw, &rt->cfg, gw_maybe_exit);
	gw_runtime_unref(old);
	tg_log_set_level((enum tg_log_level)tg_log_level_parse(rt->cfg.log_level));
	tg_log(TG_LOG_INFO, "reloaded", TG_LS("config", gw->config_path));
	return 0;
}

/* SIGHUP: the new configuration, or the old one kept; the outcome goes to
 * tidegate_config_last_reload_successful (admin.c). */
static void
reload(struct gw *gw)
{
	gw->reload_ok = reload_apply(gw) == 0;
	if (gw->reload_ok)
		gw->reload_ok_at_ms = tg_clock_now_ms();
}

#define DRAIN_GRACE_MS	1000	/* past drain_timeout: to write the cut requests' 503s */

/* A request still in flight past drain_timeout is ended by the gateway,
 * not its client: 503 DRAIN_TIMEOUT when its answer has not started, else
 * its connection is reset (a truncated answer must not look complete).
 * Its access log line says drain_timeout either way. */
static void
cut(struct gw_req *r)
{
	struct evbuffer *b;
	char msg[320];
	int safe = strcmp(r->method, "GET") == 0 || strcmp(r->method, "HEAD") == 0;

	r->error = "drain_timeout";
	if (r->started && r->req != NULL) {
		gw_req_reply_end(r, 1);
		return;
	}
	snprintf(msg, sizeof(msg), "the gateway is shutting down and drain_timeout (%lld ms) "
	    "passed before this request was answered%s", (long long)r->rt->cfg.drain_timeout,
	    safe ? "" : "; it may have taken effect at the vendor");
	if (r->req != NULL)	/* a held answer's vendor headers are not this answer's */
		evhttp_clear_headers(evhttp_request_get_output_headers(r->req));
	b = evbuffer_new();
	tg_error_body(b, 503, "DRAIN_TIMEOUT", msg, r->id, NULL, 0);
	gw_req_reply_buf(r, 503, "application/json", b);	/* frees r */
	evbuffer_free(b);
}

/* drain_timeout: cut what is left, then exit once the 503s are written
 * (gw_maybe_exit), or DRAIN_GRACE_MS later whatever remains. */
static void
on_drain_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct gw *gw = arg;
	struct timeval tv = { DRAIN_GRACE_MS / 1000, DRAIN_GRACE_MS % 1000 * 1000 };
	struct gw_req *r;
	int again = gw->drain_cut;

	tg_log(TG_LOG_WARN, "drain_timeout", TG_LI("inflight", gw->inflight),
	    TG_LI("unflushed", gw->unflushed));
	gw->drain_cut = 1;
	while ((r = TAILQ_FIRST(&gw->reqs)) != NULL)
		cut(r);		/* each ends, leaving the list */
	if (again)
		event_base_loopexit(gw->base, NULL);
	else
		evtimer_add(gw->drain_timer, &tv);
	gw_maybe_exit(gw);
}

/* The dex and sim listeners stop accepting; the admin listener stays, so
 * probes see 503 "draining" (admin.c) rather than a refused connection. */
static void
drain(struct gw *gw)
{
	struct timeval tv;
	int l;

	if (gw->draining)
		return;
	gw->draining = 1;
	for (l = 0; l < GW_NLISTENERS; l++)
		if (l != GW_ADMIN)
			gw_listener_close(gw->http[l]);
	tg_log(TG_LOG_INFO, "draining", TG_LI("inflight", gw->inflight));
	gw_feat_drain(gw);
	gw_maybe_exit(gw);
	gw->drain_timer = evtimer_new(gw->base, on_drain_timeout, gw);
	tv.tv_sec = gw->rt->cfg.drain_timeout / 1000;
	tv.tv_usec = (gw->rt->cfg.drain_timeout % 1000) * 1000;
	evtimer_add(gw->drain_timer, &tv);
}

static void
on_delay_over(evutil_socket_t fd, short what, void *arg)
{
	drain(arg);
}

/*
 * SIGTERM: with drain_delay, /readyz answers 503 (admin.c) while the
 * listeners keep accepting and serving, so a balancer probing it takes
 * this instance out before the listeners close; then the drain. SIGINT
 * (a terminal's ^C) and a second SIGTERM during the delay start the drain
 * at once: an impatient operator is not made to wait, and requests in
 * flight are still drained. The service manager hears STOPPING=1 once.
 */
static void
stop(struct gw *gw, int sig)
{
	int64_t delay = gw->rt->cfg.drain_delay;
	struct timeval tv = { (time_t)(delay / 1000), (suseconds_t)(delay % 1000 * 1000) };

	if (gw->draining)
		return;
	if (!gw->stopping)
		tg_notify_stopping();
	if (gw->stopping || sig == SIGINT || delay == 0) {
		if (gw->stopping)
			tg_log(TG_LOG_INFO, "drain_delay_cut", TG_LS("signal",
			    sig == SIGINT ? "SIGINT" : "SIGTERM"));
		gw->stopping = 1;
		drain(gw);
		return;
	}
	gw->stopping = 1;
	gw->delay_end_ms = tg_clock_mono_ms() + delay;
	gw->delay_timer = evtimer_new(gw->base, on_delay_over, gw);
	evtimer_add(gw->delay_timer, &tv);
	tg_log(TG_LOG_INFO, "drain_delay", TG_LI("ms", delay),
	    TG_LS("reason", "/readyz answers 503; the listeners serve until the delay ends"));
}

/* The service manager hears of both (notify.h: nothing without systemd). */
static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	if (sig == SIGHUP) {
		tg_notify_reloading();
		reload(arg);
		tg_notify_ready();
	} else {
		stop(arg, (int)sig);
	}
}

struct gw *
gw_new(struct event_base *base, const char *config_path, struct gw_config *cfg,
    struct tg_state *st, struct tg_err *err)
{
	struct gw *gw = tg_xcalloc(1, sizeof(*gw));
	static const int sigs[3] = { SIGHUP, SIGTERM, SIGINT };
	int i;

	gw->base = base;
	gw->state = st;
	TAILQ_INIT(&gw->reqs);
	TAILQ_INIT(&gw->admin_reqs);
	gw->config_path = tg_xstrdup(config_path);
	gw->reload_ok = 1;	/* the start loaded it */
	gw->reload_ok_at_ms = tg_clock_now_ms();
	gw->metrics = tg_metrics_new();
	gw_metrics_declare(gw->metrics);
	gw->reap_ev = event_new(base, -1, 0, gw_runtime_on_reap, gw);
	/* the features register next, before the loop runs */
	gw->start_ev = event_new(base, -1, 0, gw_feat_on_start, gw);
	event_active(gw->start_ev, EV_TIMEOUT, 1);
	if ((gw->worker = tg_worker_new(base, err)) == NULL) {
		gw_free(gw);
		return NULL;
	}
	gw->dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
	    EVDNS_BASE_DISABLE_WHEN_INACTIVE);
	if (cfg->sim.remember_cases > 0)
		gw->cases = tg_case_store_new((size_t)cfg->sim.remember_cases);
	if ((gw->rt = gw_runtime_new(gw, cfg, err)) == NULL) {
		gw_free(gw);
		return NULL;
	}
	gw->otlp = gw_otlp_new(gw, &gw->rt->cfg, gw_maybe_exit, err);	/* NULL: tracing off */
	if (gw->otlp == NULL && err->msg[0] != '\0') {
		gw_free(gw);
		return NULL;
	}
	for (i = 0; i < 3; i++) {
		gw->sig[i] = evsignal_new(base, sigs[i], on_signal, gw);
		evsignal_add(gw->sig[i], NULL);
	}
	return gw;
}

int
gw_start(struct gw *gw, struct tg_err *err)
{
	int i;

	static const struct gw_listener_kind kinds[GW_NLISTENERS] = {
		{ gw_on_request, gw_head_check }, { gw_on_request, gw_head_check },
		{ gw_admin_on_request, gw_admin_head_check } };

	if (gw_listeners_bind(gw, kinds, err) != 0)
		return -1;
	for (i = 0; i < 2; i++)
		gw_vendor_prefetch(&gw->rt->svc[i]);
	return 0;
}

void
gw_free(struct gw *gw)
{
	int i;

	if (gw == NULL)
		return;
	for (i = 0; i < 3; i++)
		if (gw->sig[i] != NULL)
			event_free(gw->sig[i]);
	if (gw->drain_timer != NULL)
		event_free(gw->drain_timer);
	if (gw->delay_timer != NULL)
		event_free(gw->delay_timer);
	gw_listeners_free(gw);
	gw_admin_fleet_cancel(gw);	/* before the state answers them */
	/* Checks still owed (their requests are gone with the listeners): the
	 * running one ends first; they release runtimes, so before the reap. */
	tg_worker_free(gw->worker);
	gw->worker = NULL;
	gw_feat_stop(gw);	/* they may use the runtimes' upstreams */
	gw_otlp_free(gw->otlp);
	gw_runtime_unref(gw->rt);
	gw_runtime_reap(gw);
	gw_budget_free(gw->budget[0]);	/* after the upstreams it gates */
	gw_budget_free(gw->budget[1]);
	event_free(gw->reap_ev);
	event_free(gw->start_ev);
	tg_case_store_free(gw->cases);
	if (gw->dns != NULL)
		evdns_base_free(gw->dns, 0);
	tg_metrics_free(gw->metrics);
	gw_tls_free(gw);
	free(gw->config_path);
	free(gw);
}

