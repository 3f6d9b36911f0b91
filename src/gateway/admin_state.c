/*
 * admin_state.c - the state seam's part of the admin listener: what
 * tg_state_health says, as Prometheus series on /metrics (backend up,
 * query latency, leads held, wake-ups sent and heard) and as the "state"
 * member of /readyz, which says "degraded" with the reason while the
 * backend cannot answer. A degraded instance stays ready: it proxies with
 * the tokens it holds; what needs a durable commit answers 503 meanwhile.
 */
#include <stdio.h>

#include <event2/buffer.h>

#include "tidegate/json.h"
#include "tidegate/state.h"
#include "gw.h"

static void
family(struct evbuffer *out, const char *name, const char *type, const char *help)
{
	evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void
latency(struct evbuffer *out, const struct tg_state_health *h)
{
	unsigned long long n = 0;
	int i;

	family(out, "tidegate_state_query_duration_seconds", "histogram",
	    "Time from sending a state operation to the server's answer.");
	for (i = 0; i <= TG_STATE_LAT_BUCKETS; i++) {
		n += h->lat[i];
		if (i < TG_STATE_LAT_BUCKETS)
			evbuffer_add_printf(out, "tidegate_state_query_duration_seconds_bucket"
			    "{backend=\"%s\",le=\"%g\"} %llu\n", h->backend, h->lat_le[i], n);
		else
			evbuffer_add_printf(out, "tidegate_state_query_duration_seconds_bucket"
			    "{backend=\"%s\",le=\"+Inf\"} %llu\n", h->backend, n);
	}
	evbuffer_add_printf(out, "tidegate_state_query_duration_seconds_sum{backend=\"%s\"} %.6f\n"
	    "tidegate_state_query_duration_seconds_count{backend=\"%s\"} %llu\n", h->backend,
	    h->lat_sum, h->backend, h->queries);
}

void
gw_admin_state_metrics(struct gw *gw, struct evbuffer *out)
{
	struct tg_state_health h;

	if (gw->state == NULL)
		return;
	tg_state_health(gw->state, &h);
	family(out, "tidegate_state_up", "gauge",
	    "1 while the state backend can take operations, else 0.");
	evbuffer_add_printf(out, "tidegate_state_up{backend=\"%s\"} %d\n", h.backend, h.up);
	latency(out, &h);
	family(out, "tidegate_state_leases_held", "gauge",
	    "Fleet leads this instance holds now (polls, logins, fleet-wide tasks).");
	evbuffer_add_printf(out, "tidegate_state_leases_held %zu\n", h.leases);
	family(out, "tidegate_state_listening", "gauge",
	    "1 while this instance hears other instances' wake-ups (a fleet's LISTEN "
	    "connection is up), else 0.");
	evbuffer_add_printf(out, "tidegate_state_listening %d\n", h.listening);
	family(out, "tidegate_state_wakeups_total", "counter",
	    "Wake-ups heard from other instances (PostgreSQL LISTEN/NOTIFY).");
	evbuffer_add_printf(out, "tidegate_state_wakeups_total %llu\n", h.wakeups);
	family(out, "tidegate_state_pipelined_total", "counter",
	    "State operations sent behind others still in flight on their connection "
	    "(PostgreSQL pipeline mode), instead of waiting for a free one.");
	evbuffer_add_printf(out, "tidegate_state_pipelined_total %llu\n", h.pipelined);
	family(out, "tidegate_state_notifies_total", "counter",
	    "Wake-ups sent to other instances.");
	evbuffer_add_printf(out, "tidegate_state_notifies_total %llu\n", h.notifies);
}

int
gw_admin_state_ready(struct gw *gw, yajl_gen g)
{
	struct tg_state_health h;

	if (gw->state == NULL)
		return 0;
	tg_state_health(gw->state, &h);
	tg_json_str(g, "state");
	yajl_gen_map_open(g);
	tg_json_kv_str(g, "backend", h.backend);
	tg_json_kv_bool(g, "up", h.up);
	tg_json_kv_bool(g, "shared", h.shared);
	if (!h.up)
		tg_json_kv_str(g, "reason", h.reason);
	yajl_gen_map_close(g);
	if (!h.up) {
		tg_json_kv_bool(g, "degraded", 1);
		tg_json_kv_str(g, "reason", h.reason);
	}
	return !h.up;
}
