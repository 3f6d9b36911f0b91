/*
 * admin.c - the admin listener: /healthz (the process answers), /readyz
 * (every service with credentials holds a vendor token, which proves the
 * vendor reachable and the credentials good; the state's health beside,
 * admin_state.c; 503 "draining" from SIGTERM until the process exits, as
 * the listener stays open through the drain), /metrics (Prometheus text,
 * with the pools' per-owner series, then each feature's), HEAD on those
 * three as GET without the body (probes), and the features' admin APIs
 * (gw_endpoint_role.admin_prefix: /webhooks…), and the console (GET /,
 * admin_console.c). Each request gets its request
 * id and access line first (admin_log.c).
 */
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "tidegate/clock.h"
#include "tidegate/frontdoor.h"
#include "tidegate/http.h"
#include "tidegate/json.h"
#include "tidegate/quota.h"
#include "gw.h"

/* Every series whose labels are known in advance, at 0 from start: each
 * service's operations' latency, and the counters by service and by a
 * fixed vocabulary. Those labelled by status code appear with their first
 * request. */
static void
touch_metrics(struct tg_metrics *m)
{
	static const char *const per_service[] = { "tidegate_validation_failures_total",
		"tidegate_validation_offloaded_total", "tidegate_client_send_timeouts_total",
		NULL };
	static const char *const rules[] = { "char", "form", "percent", "encoded",
		"dot_params", "reserved", NULL };
	const char *const *p, *svc;
	char labels[128];
	int op, s;

	tg_metrics_touch(m, "tidegate_token_replays_total", "");
	tg_metrics_touch(m, "tidegate_spans_exported_total", "");
	tg_metrics_touch(m, "tidegate_spans_dropped_total", "reason=\"queue_full\"");
	tg_metrics_touch(m, "tidegate_spans_dropped_total", "reason=\"export_failed\"");
	tg_metrics_touch(m, "tidegate_spans_dropped_total", "reason=\"reload\"");
	for (s = 0; s < 2; s++) {
		svc = s ? "sim" : "dex";
		for (op = 0; op < TG_OP_COUNT; op++) {
			if (op != TG_OP_PASSTHROUGH && (op >= TG_OP_SIM_TOKEN) != s)
				continue;
			snprintf(labels, sizeof(labels), "service=\"%s\",op=\"%s\"", svc,
			    tg_op_name((enum tg_op)op));
			tg_metrics_touch(m, "tidegate_request_duration_seconds", labels);
		}
		snprintf(labels, sizeof(labels), "service=\"%s\"", svc);
		for (p = per_service; *p != NULL; p++)
			tg_metrics_touch(m, *p, labels);
		for (p = rules; *p != NULL; p++) {
			snprintf(labels, sizeof(labels), "service=\"%s\",rule=\"%s\"", svc, *p);
			tg_metrics_touch(m, "tidegate_request_target_refusals_total", labels);
		}
		snprintf(labels, sizeof(labels), "service=\"%s\",result=\"hit\"", svc);
		tg_metrics_touch(m, "tidegate_login_cache_total", labels);
		snprintf(labels, sizeof(labels), "service=\"%s\",result=\"miss\"", svc);
		tg_metrics_touch(m, "tidegate_login_cache_total", labels);
	}
}

void
gw_metrics_declare(struct tg_metrics *m)
{
	tg_metrics_help(m, "tidegate_requests_total", "counter",
	    "Client requests by service, canonical operation and status.");
	tg_metrics_help(m, "tidegate_request_duration_seconds", "histogram",
	    "Time from request arrival to the last byte handed to the client (long-polls "
	    "apart).");
	tg_metrics_help(m, "tidegate_login_cache_total", "counter",
	    "Callers' own logins answered from the cache (hit) or by the vendor (miss).");
	tg_metrics_help(m, "tidegate_token_replays_total", "counter",
	    "Requests replayed after the vendor refused the gateway's token.");
	tg_metrics_help(m, "tidegate_request_target_refusals_total", "counter",
	    "Request targets refused before routing, by rule (400; reserved: 404).");
	tg_metrics_help(m, "tidegate_validation_failures_total", "counter",
	    "Requests refused with 400 VALIDATION_FAILED before reaching the vendor.");
	tg_metrics_help(m, "tidegate_validation_offloaded_total", "counter",
	    "Request bodies checked on the worker thread (validation.worker_min_body or more).");
	tg_metrics_help(m, "tidegate_client_send_timeouts_total", "counter",
	    "Clients reset because they took no byte of their answer for client_send_timeout.");
	tg_metrics_help(m, "tidegate_spans_exported_total", "counter",
	    "Spans accepted by the OTLP collector (tracing.otlp_url).");
	tg_metrics_help(m, "tidegate_spans_dropped_total", "counter",
	    "Spans not exported: the queue was full (tracing.max_queue), or their export "
	    "failed (no connection, no answer, not 2xx).");
	touch_metrics(m);
}

static void
family(struct evbuffer *out, const char *name, const char *type, const char *help)
{
	evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void
reply_json(struct evhttp_request *req, int status, yajl_gen g)
{
	struct evbuffer *b = evbuffer_new();
	const unsigned char *buf;
	size_t len;

	yajl_gen_get_buf(g, &buf, &len);
	evbuffer_add(b, buf, len);
	tg_reply_buf(req, status, "application/json", b);	/* a HEAD: the head alone */
	evbuffer_free(b);
}

/* The listeners' front doors (frontdoor.h): connections open, refused
 * and closed for a time limit, per listener. */
static void
render_clients(struct gw *gw, struct evbuffer *out)
{
	static const char *const ln[GW_NLISTENERS] = { "dex", "sim", "admin" };
	struct tg_frontdoor_stats st[GW_NLISTENERS];
	int l;

	for (l = 0; l < GW_NLISTENERS; l++)
		gw_listener_stats(gw, l, &st[l]);
	family(out, "tidegate_client_connections", "gauge", "Client connections open.");
	for (l = 0; l < GW_NLISTENERS; l++)
		evbuffer_add_printf(out, "tidegate_client_connections{listener=\"%s\"} %llu\n",
		    ln[l], (unsigned long long)st[l].open);
	family(out, "tidegate_client_connections_refused_total", "counter",
	    "Client connections refused at accept (max_clients, max_clients_per_ip), and "
	    "requests through a trusted proxy refused 429 over max_clients_per_ip.");
	for (l = 0; l < GW_NLISTENERS; l++)
		evbuffer_add_printf(out, "tidegate_client_connections_refused_total{listener=\"%s\","
		    "reason=\"max_clients\"} %llu\n"
		    "tidegate_client_connections_refused_total{listener=\"%s\","
		    "reason=\"max_clients_per_ip\"} %llu\n", ln[l],
		    (unsigned long long)st[l].refused_max, ln[l],
		    (unsigned long long)st[l].refused_addr);
	family(out, "tidegate_client_timeouts_total", "counter",
	    "Client connections closed for a time limit (header, body, body_rate, keepalive).");
	for (l = 0; l < GW_NLISTENERS; l++)
		evbuffer_add_printf(out, "tidegate_client_timeouts_total{listener=\"%s\",kind=\"header\"}"
		    " %llu\ntidegate_client_timeouts_total{listener=\"%s\",kind=\"body\"} %llu\n"
		    "tidegate_client_timeouts_total{listener=\"%s\",kind=\"body_rate\"} %llu\n"
		    "tidegate_client_timeouts_total{listener=\"%s\",kind=\"keepalive\"} %llu\n",
		    ln[l], (unsigned long long)st[l].header_timeouts, ln[l],
		    (unsigned long long)st[l].body_timeouts, ln[l],
		    (unsigned long long)st[l].body_too_slow, ln[l],
		    (unsigned long long)st[l].idle_closed);
}

/* Series read from the pools and token sources at scrape time, one family
 * at a time (the text format wants a family's samples together). */
static void
render_gauges(struct gw *gw, struct evbuffer *out)
{
	static const char *const states[] = { "idle", "busy", "queued" };
	struct tg_upstream_stats us[2];
	struct tg_token_stats ts[2];
	int64_t now = tg_clock_now_ms();
	const char *n[2] = { gw->rt->svc[0].name, gw->rt->svc[1].name };
	int i, k;

	for (i = 0; i < 2; i++) {
		tg_upstream_get_stats(gw->rt->svc[i].api, &us[i]);
		gw_vendor_stats(&gw->rt->svc[i], &ts[i]);
	}
	family(out, "tidegate_inflight_requests", "gauge", "Client requests being processed.");
	evbuffer_add_printf(out, "tidegate_inflight_requests %zu\n", gw->inflight);
	family(out, "tidegate_upstream_connections", "gauge",
	    "Upstream pool connections (idle, busy) and queued requests.");
	for (i = 0; i < 2; i++)
		for (k = 0; k < 3; k++)
			evbuffer_add_printf(out,
			    "tidegate_upstream_connections{service=\"%s\",state=\"%s\"} %zu\n",
			    n[i], states[k], k == 0 ? us[i].idle : k == 1 ? us[i].busy :
			    us[i].queued);
	family(out, "tidegate_upstream_requests_total", "counter",
	    "Requests sent upstream (sent), and of them retries and failovers.");
	for (i = 0; i < 2; i++)
		evbuffer_add_printf(out,
		    "tidegate_upstream_requests_total{service=\"%s\",kind=\"sent\"} %llu\n"
		    "tidegate_upstream_requests_total{service=\"%s\",kind=\"retry\"} %llu\n"
		    "tidegate_upstream_requests_total{service=\"%s\",kind=\"failover\"} %llu\n",
		    n[i], us[i].requests, n[i], us[i].retries, n[i], us[i].failovers);
	family(out, "tidegate_upstream_reads_total", "counter",
	    "Reads that brought vendor answer bytes in (a large answer is read in large chunks).");
	for (i = 0; i < 2; i++)
		evbuffer_add_printf(out, "tidegate_upstream_reads_total{service=\"%s\"} %llu\n",
		    n[i], us[i].reads);
	family(out, "tidegate_token_logins_total", "counter", "Vendor logins made by the gateway.");
	for (i = 0; i < 2; i++)
		evbuffer_add_printf(out, "tidegate_token_logins_total{service=\"%s\"} %llu\n",
		    n[i], ts[i].logins);
	family(out, "tidegate_token_login_failures_total", "counter", "Vendor logins that failed.");
	for (i = 0; i < 2; i++)
		evbuffer_add_printf(out,
		    "tidegate_token_login_failures_total{service=\"%s\"} %llu\n", n[i],
		    ts[i].login_failures);
	family(out, "tidegate_token_expiry_seconds", "gauge",
	    "Seconds until the gateway's vendor token expires (0: none).");
	for (i = 0; i < 2; i++)
		evbuffer_add_printf(out, "tidegate_token_expiry_seconds{service=\"%s\"} %lld\n",
		    n[i], (long long)(ts[i].expires_at_ms > now ?
		    (ts[i].expires_at_ms - now) / 1000 : 0));
}

/* The per-owner pool series: connections (busy and queued), waits, queue
 * timeouts; struct owner_family says which one is being written. */
static const char *const owner_series[] = { "tidegate_upstream_owner_connections",
	"tidegate_upstream_owner_waits_total", "tidegate_upstream_owner_queue_timeouts_total" };

struct owner_family {
	struct evbuffer *out;
	const char *service;
	int which;
};

/* A label value: key names come from the configuration and may hold any
 * character; the text format escapes backslash, quote and newline. */
static void
label_value(struct evbuffer *out, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			evbuffer_add_printf(out, "\\%c", *v);
		else if (*v == '\n')
			evbuffer_add(out, "\\n", 2);
		else
			evbuffer_add(out, v, 1);
	}
}

static void
on_owner(const struct tg_upstream_owner_stats *st, void *arg)
{
	struct owner_family *f = arg;
	int k;

	for (k = 0; k < (f->which == 0 ? 2 : 1); k++) {
		evbuffer_add_printf(f->out, "%s{service=\"%s\",owner=\"", owner_series[f->which],
		    f->service);
		label_value(f->out, st->owner != NULL ? st->owner : "(gateway)");
		if (f->which == 0)
			evbuffer_add_printf(f->out, "\",state=\"%s\"} %zu\n", k ? "queued" : "busy",
			    k ? st->queued : st->busy);
		else
			evbuffer_add_printf(f->out, "\"} %llu\n", f->which == 1 ? st->waits :
			    st->timeouts);
	}
}

/* The pools' queues: totals per service, then each owner's share (owner
 * names are the configured keys plus the fixed buckets: bounded). */
static void
render_owners(struct gw *gw, struct evbuffer *out)
{
	static const char *const help[] = {
		"Upstream connections held (busy) and requests queued, by owner: API key, "
		"(caller tokens), (no key), or (gateway) for the gateway's own calls.",
		"Requests passed over in the queue because their owner held pool.max_conns_per_key "
		"connections.",
		"Requests answered 503 UPSTREAM_BUSY after pool.queue_timeout, by owner." };
	struct tg_upstream_stats us;
	struct owner_family f = { out, NULL, 0 };
	int i;

	family(out, "tidegate_upstream_queue_timeouts_total", "counter",
	    "Requests that waited pool.queue_timeout for a connection (answered 503).");
	for (i = 0; i < 2; i++) {
		tg_upstream_get_stats(gw->rt->svc[i].api, &us);
		evbuffer_add_printf(out, "tidegate_upstream_queue_timeouts_total{service=\"%s\"} "
		    "%llu\n", gw->rt->svc[i].name, us.queue_timeouts);
	}
	for (f.which = 0; f.which < 3; f.which++) {
		family(out, owner_series[f.which], f.which == 0 ? "gauge" : "counter",
		    help[f.which]);
		for (i = 0; i < 2; i++) {
			f.service = gw->rt->svc[i].name;
			tg_upstream_foreach_owner(gw->rt->svc[i].api, on_owner, &f);
		}
	}
}

/* Prometheus's own names for a reload's outcome, so its alert rules
 * (ConfigReloadFailed) read the gateway too. */
static void
render_reload(struct gw *gw, struct evbuffer *out)
{
	family(out, "tidegate_config_last_reload_successful", "gauge",
	    "Whether the last configuration reload (SIGHUP) succeeded (the start counts as one).");
	evbuffer_add_printf(out, "tidegate_config_last_reload_successful %d\n", gw->reload_ok);
	family(out, "tidegate_config_last_reload_success_timestamp_seconds", "gauge",
	    "Unix time of the last configuration loaded (the start, or a successful reload).");
	evbuffer_add_printf(out, "tidegate_config_last_reload_success_timestamp_seconds "
	    "%lld.%03lld\n", (long long)(gw->reload_ok_at_ms / 1000),
	    (long long)(gw->reload_ok_at_ms % 1000));
}

static void
metrics(struct gw *gw, struct evhttp_request *req)
{
	struct evbuffer *b = evbuffer_new();

	tg_metrics_render(gw->metrics, b);
	tg_metrics_process_render(b);
	render_reload(gw, b);
	render_gauges(gw, b);
	render_clients(gw, b);
	render_owners(gw, b);
	gw_admin_state_metrics(gw, b);
	gw_admin_origins_metrics(gw, b);
	gw_admin_budget_metrics(gw, b);
	gw_scrape(gw, req, b);	/* takes b; replies once every feature's part is in */
}

/* Draining (SIGTERM until exit, drain_delay included) is its own answer:
 * 503 with "status": "draining", whatever the tokens say, so a balancer
 * stops sending here; listeners_stop_in_ms says how long the dex and sim
 * listeners still accept (0 once they stopped). */
/* One meaning: the instance can serve (it is not draining). What the
 * vendor does is beside it: each service's token ("services") and whole
 * state ("vendor": up, logging in, login failing, unreachable, no
 * credentials), its hosts ("origins"), the state backend ("state"). */
static void
readyz(struct gw *gw, struct evhttp_request *req)
{
	yajl_gen g = tg_json_gen_new();
	int ready = !gw->draining && !gw->stopping, i, ok;
	int64_t left = gw->draining ? 0 : gw->delay_end_ms - tg_clock_mono_ms();
	const char *state;

	yajl_gen_map_open(g);
	tg_json_str(g, "services");
	yajl_gen_map_open(g);
	for (i = 0; i < 2; i++) {
		struct gw_service *s = &gw->rt->svc[i];

		state = gw_vendor_state(s, &ok);
		tg_json_kv_str(g, s->name, state);
	}
	yajl_gen_map_close(g);
	tg_json_str(g, "vendor");
	yajl_gen_map_open(g);
	for (i = 0; i < 2; i++)
		tg_json_kv_str(g, gw->rt->svc[i].name, gw_vendor_health(&gw->rt->svc[i]));
	yajl_gen_map_close(g);
	gw_admin_origins_ready(gw, g);
	if (gw->quota != NULL) {	/* limits on a local share: the database is away */
		tg_json_str(g, "quota");
		yajl_gen_map_open(g);
		tg_json_kv_int(g, "fallback_limits", tg_quota_fallback(gw->quota));
		tg_json_kv_str(g, "state", tg_quota_fallback(gw->quota) ? "local-shares" :
		    "leasing");
		yajl_gen_map_close(g);
	}
	if (!gw_admin_state_ready(gw, g))
		tg_json_kv_bool(g, "degraded", 0);
	tg_json_kv_bool(g, "ready", ready);
	tg_json_kv_bool(g, "draining", !ready);
	tg_json_kv_str(g, "status", ready ? "ready" : "draining");
	if (!ready) {	/* drain_delay: the listeners still serve this long */
		tg_json_kv_int(g, "listeners_stop_in_ms", left > 0 ? left : 0);
	}
	yajl_gen_map_close(g);
	reply_json(req, ready ? 200 : 503, g);
	yajl_gen_free(g);
}

static void
healthz(struct evhttp_request *req)
{
	yajl_gen g = tg_json_gen_new();

	yajl_gen_map_open(g);
	tg_json_kv_str(g, "status", "ok");
	yajl_gen_map_close(g);
	reply_json(req, 200, g);
	yajl_gen_free(g);
}

/* The access log's op of a core path: the probes' own, else "unknown"
 * (a fixed vocabulary, whatever path a client sends). */
static const char *
core_op(const char *path, int *probe)
{
	const char *op = gw_admin_probe(path, strlen(path));

	*probe = op != NULL;
	if (op == NULL && (strcmp(path, "/") == 0 || strncmp(path, "/console/", 9) == 0))
		return "console";
	if (op == NULL && strcmp(path, "/fleet") == 0)
		return "fleet";
	return op != NULL ? op : "unknown";
}

/* A request refused on its head (admin_auth.c): its answer, the connection
 * closed after it. */
static void
refused(struct gw *gw, struct evhttp_request *req, int fault)
{
	char msg[160];

	tg_frontdoor_close_after(req);
	if (fault == TG_HEAD_KEY_MISSING || fault == TG_HEAD_KEY_UNKNOWN)
		evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
		    "Bearer");
	if (fault == TG_HEAD_BODY_TOO_LARGE)
		snprintf(msg, sizeof(msg), "an admin request body is at most %lld bytes "
		    "(admin_max_body)", (long long)gw->rt->cfg.admin_max_body);
	else
		snprintf(msg, sizeof(msg), "%s", tg_head_fault_message(fault));
	gw_admin_reply_error(gw, req, tg_head_fault_status(fault), tg_head_fault_code(fault),
	    msg);
}

void
gw_admin_on_request(struct evhttp_request *req, void *arg)
{
	struct gw_lctx *lc = arg;
	const char *path = tg_http_path(req), *op = NULL;
	enum evhttp_cmd_type m = evhttp_request_get_command(req);
	int fault = tg_frontdoor_refusal(req), probe = 0;
	int feat = gw_feat_admin_find(lc->gw, path, &op);

	if (feat < 0)
		op = core_op(path, &probe);
	gw_admin_begin(lc->gw, req, op, probe);
	if (fault != 0) {	/* refused on its head (frontdoor.h): answer, close */
		refused(lc->gw, req, fault);
	} else if (feat >= 0) {
		if (gw_admin_may_act(lc->gw, req))	/* admin-read: GETs only */
			gw_feat_admin(lc->gw, feat, req, path);	/* its admin API (/webhooks…) */
	} else if (m != EVHTTP_REQ_GET && m != EVHTTP_REQ_HEAD) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET, HEAD");
		gw_admin_reply_error(lc->gw, req, 405, NULL,
		    "only GET and HEAD here (POST: /webhooks/…)");
	} else if (strcmp(path, "/healthz") == 0) {
		healthz(req);
	} else if (strcmp(path, "/readyz") == 0) {
		readyz(lc->gw, req);
	} else if (strcmp(path, "/metrics") == 0) {
		metrics(lc->gw, req);
	} else if (strcmp(path, "/fleet") == 0) {
		gw_admin_fleet(lc->gw, req);
	} else if (gw_admin_console(req, path)) {
		;	/* the console's page or one of its files (admin_console.c) */
	} else {
		gw_admin_reply_error(lc->gw, req, 404, NULL, "no such admin endpoint");
	}
}
