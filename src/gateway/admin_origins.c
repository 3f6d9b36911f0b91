/*
 * admin_origins.c - the vendor origins' part of the admin listener: each
 * service's primary and fallback host as the upstream's health sees them
 * (tg_upstream_origin_stats), as the "origins" member of /readyz (in
 * service or out, for how long, consecutive failures, last error) and as
 * Prometheus series on /metrics (in service gauge, ejections, failovers
 * and retries by reason, requests failed fast with every origin out, the
 * vendor's latency as a histogram).
 * An origin out of service does not make the instance unready: the other
 * serves, and with both out requests fail fast with 503. The vendor's
 * state per service (gw_vendor_health) sums the token and the hosts up
 * for /readyz's "vendor" member and tidegate_vendor_up.
 */
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>

#include "tidegate/json.h"
#include "tidegate/upstream.h"
#include "gw.h"

static void
family(struct evbuffer *out, const char *name, const char *type, const char *help)
{
	evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* by reason: failovers away from the origin (which 0) or retries on it (1) */
static void
by_reason(struct evbuffer *out, struct gw *gw, int which)
{
	static const char *const names[] = { "tidegate_upstream_origin_failovers_total",
		"tidegate_upstream_origin_retries_total" };
	struct tg_upstream_origin_stats st;
	int i, k, w;

	family(out, names[which], "counter", which == 0 ?
	    "Requests sent to the other origin instead of this one, by reason (ejected: this "
	    "one was out of service)." :
	    "Requests tried again on this origin after a failure, by reason.");
	for (i = 0; i < 2; i++)
		for (k = 0; tg_upstream_origin_stats(gw->rt->svc[i].api, k, &st) == 0; k++)
			for (w = 0; w < TG_UP_NWHY; w++)
				evbuffer_add_printf(out, "%s{service=\"%s\",origin=\"%s\","
				    "reason=\"%s\"} %llu\n", names[which], gw->rt->svc[i].name,
				    st.name, tg_up_why_str((enum tg_up_why)w), which == 0 ?
				    st.failovers[w] : st.retries[w]);
}

/* The vendor's latency per origin: the upstream keeps counts per bucket,
 * the text format wants them cumulative. */
static void
latency(struct evbuffer *out, const char *svc, const struct tg_upstream_origin_stats *st)
{
	static const char n[] = "tidegate_vendor_request_duration_seconds";
	unsigned long long sum = 0;
	int b;

	for (b = 0; b <= TG_UP_LAT_NB; b++) {
		sum += st->lat[b];
		if (b < TG_UP_LAT_NB)
			evbuffer_add_printf(out, "%s_bucket{service=\"%s\",origin=\"%s\",le=\"%g\"} "
			    "%llu\n", n, svc, st->name, tg_upstream_lat_le(b), sum);
		else
			evbuffer_add_printf(out, "%s_bucket{service=\"%s\",origin=\"%s\",le=\"+Inf\"}"
			    " %llu\n", n, svc, st->name, sum);
	}
	evbuffer_add_printf(out, "%s_sum{service=\"%s\",origin=\"%s\"} %.6f\n"
	    "%s_count{service=\"%s\",origin=\"%s\"} %llu\n", n, svc, st->name,
	    (double)st->lat_sum_us / 1e6, n, svc, st->name, sum);
}

void
gw_admin_origins_metrics(struct gw *gw, struct evbuffer *out)
{
	struct tg_upstream_origin_stats st;
	struct tg_upstream_stats us;
	int i, k, pass;
	static const char *const fam[] = { "tidegate_upstream_origin_in_service",
		"tidegate_upstream_origin_ejections_total" };

	for (pass = 0; pass < 2; pass++) {
		family(out, fam[pass], pass ? "counter" : "gauge", pass ?
		    "Times the origin was taken out of service (consecutive failures)." :
		    "1 while the vendor origin takes requests; 0 while ejected or holding a "
		    "503's Retry-After.");
		for (i = 0; i < 2; i++)
			for (k = 0; tg_upstream_origin_stats(gw->rt->svc[i].api, k, &st) == 0; k++)
				evbuffer_add_printf(out, "%s{service=\"%s\",origin=\"%s\"} %llu\n",
				    fam[pass], gw->rt->svc[i].name, st.name, pass ? st.ejections :
				    (unsigned long long)st.in_service);
	}
	by_reason(out, gw, 0);
	by_reason(out, gw, 1);
	family(out, "tidegate_vendor_request_duration_seconds", "histogram",
	    "Vendor calls by the time from sending to the response head (or the attempt's "
	    "failure), one per attempt: retries and failovers count again; probes do not.");
	for (i = 0; i < 2; i++)
		for (k = 0; tg_upstream_origin_stats(gw->rt->svc[i].api, k, &st) == 0; k++)
			latency(out, gw->rt->svc[i].name, &st);
	family(out, "tidegate_vendor_up", "gauge",
	    "1 while the vendor service answers and the gateway holds its token (/readyz "
	    "\"vendor\": up), else 0.");
	for (i = 0; i < 2; i++)
		evbuffer_add_printf(out, "tidegate_vendor_up{service=\"%s\"} %d\n",
		    gw->rt->svc[i].name, strcmp(gw_vendor_health(&gw->rt->svc[i]), "up") == 0);
	family(out, "tidegate_upstream_down_total", "counter",
	    "Requests answered 503 at once because every origin of the service was out.");
	for (i = 0; i < 2; i++) {
		tg_upstream_get_stats(gw->rt->svc[i].api, &us);
		evbuffer_add_printf(out, "tidegate_upstream_down_total{service=\"%s\"} %llu\n",
		    gw->rt->svc[i].name, us.down);
	}
}

const char *
gw_vendor_health(struct gw_service *s)
{
	struct tg_upstream_origin_stats st;
	int ok, k, answering = 0;
	const char *tok = gw_vendor_state(s, &ok);

	for (k = 0; tg_upstream_origin_stats(s->api, k, &st) == 0; k++)
		answering |= st.in_service && st.fails == 0;
	if (!answering)
		return "unreachable";	/* every host out, or its last call failed */
	if (!ok)
		return strcmp(tok, "vendor login failing") == 0 ? "login failing" : "logging in";
	return "up";
}

void
gw_admin_origins_ready(struct gw *gw, yajl_gen g)
{
	struct tg_upstream_origin_stats st;
	int i, k;

	tg_json_str(g, "origins");
	yajl_gen_map_open(g);
	for (i = 0; i < 2; i++) {
		tg_json_str(g, gw->rt->svc[i].name);
		yajl_gen_array_open(g);
		for (k = 0; tg_upstream_origin_stats(gw->rt->svc[i].api, k, &st) == 0; k++) {
			yajl_gen_map_open(g);
			tg_json_kv_str(g, "origin", st.name);
			tg_json_kv_str(g, "host", st.host);
			tg_json_kv_str(g, "state", st.in_service ? "in service" : "out");
			if (!st.in_service)
				tg_json_kv_int(g, "backInMs", st.out_ms);
			tg_json_kv_int(g, "fails", st.fails);
			if (st.last_error[0] != '\0')
				tg_json_kv_str(g, "lastError", st.last_error);
			yajl_gen_map_close(g);
		}
		yajl_gen_array_close(g);
	}
	yajl_gen_map_close(g);
}
