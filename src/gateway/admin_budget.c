/*
 * admin_budget.c - the vendor budget's part of /metrics: per service and
 * queue class, calls the budget held back and calls answered 503 after
 * the queue timeout; per service, the vendor's 429s, the pauses started
 * (from a vendor answer here, or told by another instance), the calls a
 * pause held back, the pause left and the calls in flight the budget
 * counts. Class names are fixed (tg_up_class_str): the labels are bounded.
 */
#include <event2/buffer.h>

#include "tidegate/upstream.h"
#include "gw.h"

static const char *const fams[][3] = {
	{ "tidegate_vendor_budget_waits_total", "counter",
	  "Vendor calls the vendor budget (rate, concurrency, pause) held back in the queue, "
	  "by class." },
	{ "tidegate_vendor_budget_refusals_total", "counter",
	  "Vendor calls answered 503 UPSTREAM_BUSY after pool.queue_timeout, by class." },
	{ "tidegate_vendor_throttled_total", "counter",
	  "Vendor answers 429 (too many requests) seen by this instance." },
	{ "tidegate_vendor_pauses_total", "counter",
	  "Pauses of a service's calls started by a vendor Retry-After: seen here (vendor) "
	  "or told by another instance (fleet)." },
	{ "tidegate_vendor_pause_delayed_total", "counter",
	  "Vendor calls held back by a pause." },
	{ "tidegate_vendor_pause_seconds", "gauge",
	  "Seconds left of the service's pause (0: none)." },
	{ "tidegate_vendor_budget_inflight", "gauge",
	  "Vendor calls in flight counted against budget.concurrent." },
};

static void
family(struct evbuffer *out, int i)
{
	evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n", fams[i][0], fams[i][2],
	    fams[i][0], fams[i][1]);
}

static void
by_class(struct gw *gw, struct evbuffer *out, int which)
{
	struct tg_upstream_class_stats cs;
	int i, k;

	family(out, which);
	for (i = 0; i < 2; i++) {
		tg_upstream_class_stats(gw->rt->svc[i].api, &cs);
		for (k = 1; k < TG_UP_NCLASS; k++)
			evbuffer_add_printf(out, "%s{service=\"%s\",class=\"%s\"} %llu\n",
			    fams[which][0], gw->rt->svc[i].name,
			    tg_up_class_str((enum tg_up_class)k),
			    which == 0 ? cs.gate_waits[k] : cs.timeouts[k]);
	}
}

void
gw_admin_budget_metrics(struct gw *gw, struct evbuffer *out)
{
	struct gw_budget_stats st[2];
	int i, f;

	by_class(gw, out, 0);
	by_class(gw, out, 1);
	for (i = 0; i < 2; i++)
		gw_budget_stats(gw->budget[i], &st[i]);
	for (f = 2; f < 7; f++) {
		family(out, f);
		for (i = 0; i < 2; i++) {
			const char *n = gw->rt->svc[i].name;

			if (f == 3)
				evbuffer_add_printf(out, "%s{service=\"%s\",from=\"vendor\"} %llu\n"
				    "%s{service=\"%s\",from=\"fleet\"} %llu\n", fams[f][0], n,
				    st[i].pauses_local, fams[f][0], n, st[i].pauses_remote);
			else
				evbuffer_add_printf(out, "%s{service=\"%s\"} %lld\n", fams[f][0], n,
				    f == 2 ? (long long)st[i].throttled :
				    f == 4 ? (long long)st[i].delayed :
				    f == 5 ? (long long)((st[i].paused_ms + 999) / 1000) :
				    st[i].inflight);
		}
	}
}
