/*
 * admin.c - the admin listener: /healthz (the process answers), /readyz
 * (every service with credentials holds a vendor token, which proves the
 * vendor reachable and the credentials good), /metrics (Prometheus text).
 */
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "tidegate/clock.h"
#include "tidegate/http.h"
#include "tidegate/json.h"
#include "gw.h"

void
gw_metrics_declare(struct tg_metrics *m)
{
	tg_metrics_help(m, "tidegate_requests_total", "counter",
	    "Client requests by service, canonical operation and status.");
	tg_metrics_help(m, "tidegate_request_duration_seconds", "histogram",
	    "Time from request arrival to the last byte handed to the client.");
	tg_metrics_help(m, "tidegate_login_cache_total", "counter",
	    "Callers' own logins answered from the cache (hit) or by the vendor (miss).");
	tg_metrics_help(m, "tidegate_token_replays_total", "counter",
	    "Requests replayed after the vendor refused the gateway's token.");
	tg_metrics_help(m, "tidegate_token_logins_total", "counter",
	    "Vendor logins made by the gateway.");
	tg_metrics_help(m, "tidegate_token_login_failures_total", "counter",
	    "Vendor logins that failed.");
	tg_metrics_help(m, "tidegate_token_expiry_seconds", "gauge",
	    "Seconds until the gateway's vendor token expires (0: none).");
	tg_metrics_help(m, "tidegate_upstream_connections", "gauge",
	    "Upstream pool connections by state.");
	tg_metrics_help(m, "tidegate_upstream_requests_total", "counter",
	    "Requests sent upstream, with retries and failovers.");
	tg_metrics_help(m, "tidegate_inflight_requests", "gauge",
	    "Client requests being processed.");
}

static void
render_gauges(struct gw *gw, struct evbuffer *out)
{
	struct tg_upstream_stats us;
	struct tg_token_stats ts;
	int64_t now = tg_clock_now_ms();
	int i;

	evbuffer_add_printf(out, "tidegate_inflight_requests %zu\n", gw->inflight);
	for (i = 0; i < 2; i++) {
		struct gw_service *s = &gw->rt->svc[i];

		tg_upstream_get_stats(s->api, &us);
		evbuffer_add_printf(out,
		    "tidegate_upstream_connections{service=\"%s\",state=\"idle\"} %zu\n"
		    "tidegate_upstream_connections{service=\"%s\",state=\"busy\"} %zu\n"
		    "tidegate_upstream_connections{service=\"%s\",state=\"queued\"} %zu\n"
		    "tidegate_upstream_requests_total{service=\"%s\",kind=\"sent\"} %llu\n"
		    "tidegate_upstream_requests_total{service=\"%s\",kind=\"retry\"} %llu\n"
		    "tidegate_upstream_requests_total{service=\"%s\",kind=\"failover\"} %llu\n",
		    s->name, us.idle, s->name, us.busy, s->name, us.queued, s->name, us.requests,
		    s->name, us.retries, s->name, us.failovers);
		if (s->tokens == NULL)
			continue;
		tg_token_get_stats(s->tokens, &ts);
		evbuffer_add_printf(out,
		    "tidegate_token_logins_total{service=\"%s\"} %llu\n"
		    "tidegate_token_login_failures_total{service=\"%s\"} %llu\n"
		    "tidegate_token_expiry_seconds{service=\"%s\"} %lld\n",
		    s->name, ts.logins, s->name, ts.login_failures, s->name,
		    (long long)(ts.expires_at_ms > now ? (ts.expires_at_ms - now) / 1000 : 0));
	}
}

static void
metrics(struct gw *gw, struct evhttp_request *req)
{
	struct evbuffer *b = evbuffer_new();

	tg_metrics_render(gw->metrics, b);
	render_gauges(gw, b);
	tg_reply_buf(req, 200, "text/plain; version=0.0.4", b);
	evbuffer_free(b);
}

static void
readyz(struct gw *gw, struct evhttp_request *req)
{
	yajl_gen g = tg_json_gen_new();
	struct tg_token_stats ts;
	int ready = !gw->draining, i;
	const char *state;

	yajl_gen_map_open(g);
	tg_json_str(g, "services");
	yajl_gen_map_open(g);
	for (i = 0; i < 2; i++) {
		struct gw_service *s = &gw->rt->svc[i];

		if (s->tokens == NULL) {
			state = "no credentials (callers bring their own)";
		} else if (tg_token_peek(s->tokens) != NULL) {
			state = "token held";
		} else {
			tg_token_get_stats(s->tokens, &ts);
			state = ts.failing ? "vendor login failing" : "logging in";
			tg_token_prefetch(s->tokens);
			ready = 0;
		}
		tg_json_kv_str(g, s->name, state);
	}
	yajl_gen_map_close(g);
	tg_json_kv_bool(g, "ready", ready);
	tg_json_kv_bool(g, "draining", gw->draining);
	yajl_gen_map_close(g);
	tg_reply_json(req, ready ? 200 : 503, g);
	yajl_gen_free(g);
}

void
gw_admin_on_request(struct evhttp_request *req, void *arg)
{
	struct gw_lctx *lc = arg;
	const char *path = tg_http_path(req);
	yajl_gen g;

	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
		tg_reply_error(req, 405, NULL, "the admin API is read-only", NULL, 0);
	} else if (strcmp(path, "/healthz") == 0) {
		g = tg_json_gen_new();
		yajl_gen_map_open(g);
		tg_json_kv_str(g, "status", "ok");
		yajl_gen_map_close(g);
		tg_reply_json(req, 200, g);
		yajl_gen_free(g);
	} else if (strcmp(path, "/readyz") == 0) {
		readyz(lc->gw, req);
	} else if (strcmp(path, "/metrics") == 0) {
		metrics(lc->gw, req);
	} else {
		tg_reply_error(req, 404, NULL, "no such admin endpoint", NULL, 0);
	}
}
