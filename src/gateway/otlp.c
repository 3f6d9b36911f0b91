/*
 * otlp.c - the span exporter (tracing.*): spans made by spans.c are
 * copied into a bounded queue of plain structs (no JSON, no allocation on
 * the request path; a full queue drops the new span and counts it), and a
 * timer every tracing.flush_interval (or a kick once the queue passes half
 * full) encodes a batch as OTLP/HTTP JSON and POSTs it to
 * tracing.otlp_url through the upstream client, one export in flight at a
 * time. A failed export (no connection, no answer, not 2xx) drops its
 * batch, counts it, and warns at most once a minute; nothing is retried.
 * Made by server.c at start and on SIGHUP; on SIGTERM the drain waits for
 * a last export of what is queued (gw_otlp_idle; the exporter then calls
 * back the drain's wake it was made with, so it names no caller), at most DRAIN_MS
 * (and drain_timeout); what is left then is lost. Metrics: tidegate_spans_exported_total,
 * tidegate_spans_dropped_total{reason}.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/clock.h"
#include "tidegate/json.h"
#include "tidegate/log.h"
#include "version.h"
#include "gw.h"

#define BATCH_MAX	512		/* spans in one export */
#define ANSWER_MAX	(64 * 1024)	/* the collector's answer, read and dropped */
#define WARN_EVERY_MS	60000
#define READ_TIMEOUT_MS	10000
#define DRAIN_MS	2000		/* the longest a drain waits for the last export */

struct gw_otlp {
	struct gw *gw;			/* borrowed */
	void (*wake)(struct gw *gw);	/* the drain's: told when an export ends */
	struct tg_upstream *up;
	char *url, *service, *path;	/* path: the URL's, "/" when none */
	int64_t flush_ms;
	size_t max, n, head;		/* queue capacity, spans queued, the oldest */
	struct gw_span *q;		/* a ring of max */
	struct event *timer, *kick, *give_up;
	int draining, gave_up;		/* the drain's wait: begun, over */
	struct tg_up_req *inflight;	/* the export in flight (the pool's) */
	struct evbuffer *body;		/* its body */
	size_t inflight_n;		/* its spans */
	int64_t warned_at;		/* monotonic ms of the last warning; 0: none */
	unsigned long long unwarned;	/* spans dropped since */
};

/* ---- the OTLP/HTTP JSON encoding ---- */

/* {"key": key, "value": {type: v}}; none for an empty v. */
static void
attr(yajl_gen g, const char *key, const char *type, const char *v)
{
	if (v == NULL || *v == '\0')
		return;
	yajl_gen_map_open(g);
	tg_json_kv_str(g, "key", key);
	tg_json_str(g, "value");
	yajl_gen_map_open(g);
	tg_json_kv_str(g, type, v);
	yajl_gen_map_close(g);
	yajl_gen_map_close(g);
}

static void
attr_str(yajl_gen g, const char *key, const char *v)
{
	attr(g, key, "stringValue", v);
}

/* int64 values are strings in the protobuf JSON mapping OTLP follows. */
static void
attr_int(yajl_gen g, const char *key, long long v)
{
	char s[24];

	snprintf(s, sizeof(s), "%lld", v);
	attr(g, key, "intValue", s);
}

static void
span_attrs(yajl_gen g, const struct gw_span *s)
{
	tg_json_str(g, "attributes");
	yajl_gen_array_open(g);
	attr_str(g, "http.request.method", s->method);
	if (s->kind == GW_SPAN_SERVER) {
		attr_str(g, "url.path", s->path);
		attr_str(g, "client.address", s->addr);
		attr_str(g, "tidegate.request_id", s->rid);
		attr_str(g, "tidegate.served", s->served);
		attr_str(g, "tidegate.origin", s->origin);
		attr_str(g, "tidegate.key", s->key);
	} else {
		attr_str(g, "server.address", s->addr);
		attr_str(g, "tidegate.retry", s->retry);
	}
	if (s->status > 0)
		attr_int(g, "http.response.status_code", s->status);
	yajl_gen_array_close(g);
}

static void
span_json(yajl_gen g, const struct gw_span *s)
{
	char name[96], t[24];

	yajl_gen_map_open(g);
	tg_json_kv_str(g, "traceId", s->trace_id);
	tg_json_kv_str(g, "spanId", s->span_id);
	if (s->parent_id[0] != '\0')
		tg_json_kv_str(g, "parentSpanId", s->parent_id);
	snprintf(name, sizeof(name), "%s%s%s", s->service ? s->service : "",
	    s->service ? " " : "", s->op ? s->op : "");
	tg_json_kv_str(g, "name", name);
	tg_json_kv_int(g, "kind", s->kind);
	snprintf(t, sizeof(t), "%" PRId64, s->start_ns);
	tg_json_kv_str(g, "startTimeUnixNano", t);
	snprintf(t, sizeof(t), "%" PRId64, s->end_ns);
	tg_json_kv_str(g, "endTimeUnixNano", t);
	span_attrs(g, s);
	tg_json_str(g, "status");
	yajl_gen_map_open(g);
	if (s->error)
		tg_json_kv_int(g, "code", 2);	/* STATUS_CODE_ERROR; else unset */
	yajl_gen_map_close(g);
	yajl_gen_map_close(g);
}

void
gw_otlp_encode(const struct gw_span *v, size_t n, const char *service, struct evbuffer *out)
{
	yajl_gen g = tg_json_gen_new();
	size_t i;

	yajl_gen_map_open(g);
	tg_json_str(g, "resourceSpans");
	yajl_gen_array_open(g);
	yajl_gen_map_open(g);
	tg_json_str(g, "resource");
	yajl_gen_map_open(g);
	tg_json_str(g, "attributes");
	yajl_gen_array_open(g);
	attr_str(g, "service.name", service);
	yajl_gen_array_close(g);
	yajl_gen_map_close(g);
	tg_json_str(g, "scopeSpans");
	yajl_gen_array_open(g);
	yajl_gen_map_open(g);
	tg_json_str(g, "scope");
	yajl_gen_map_open(g);
	tg_json_kv_str(g, "name", "tidegate");
	tg_json_kv_str(g, "version", TG_VERSION);
	yajl_gen_map_close(g);
	tg_json_str(g, "spans");
	yajl_gen_array_open(g);
	for (i = 0; i < n; i++)
		span_json(g, &v[i]);
	yajl_gen_array_close(g);
	yajl_gen_map_close(g);
	yajl_gen_array_close(g);
	yajl_gen_map_close(g);
	yajl_gen_array_close(g);
	yajl_gen_map_close(g);
	tg_json_gen_flush(g, out);	/* one copy: yajl prints in pieces of a few bytes */
	yajl_gen_free(g);
}

/* ---- the queue and the exports ---- */

static void
kick(struct gw_otlp *o)
{
	if (!event_pending(o->kick, EV_TIMEOUT, NULL))
		event_active(o->kick, EV_TIMEOUT, 0);
}

void
gw_otlp_add(struct gw_otlp *o, const struct gw_span *s)
{
	if (o->n >= o->max) {
		tg_metrics_inc(o->gw->metrics, "tidegate_spans_dropped_total",
		    "reason=\"queue_full\"", 1);
		return;
	}
	o->q[(o->head + o->n++) % o->max] = *s;
	if (o->n * 2 > o->max && o->inflight == NULL)
		kick(o);	/* exported from the loop, not from the request's end */
}

static void
warn_failed(struct gw_otlp *o, int status, enum tg_up_error err)
{
	int64_t now = tg_clock_mono_ms();

	o->unwarned += o->inflight_n;
	if (o->warned_at != 0 && now - o->warned_at < WARN_EVERY_MS)
		return;
	tg_log(TG_LOG_WARN, "otlp_export_failed", TG_LS("url", o->url),
	    err != TG_UP_OK ? TG_LS("error", tg_up_error_str(err)) : TG_LI("status", status),
	    TG_LI("spans_dropped", (int64_t)o->unwarned),
	    TG_LS("note", "spans are dropped; the next warning comes a minute later at the "
	    "earliest"));
	o->warned_at = now;
	o->unwarned = 0;
}

static void
on_exported(int status, const struct evkeyvalq *h, struct evbuffer *body,
    enum tg_up_error err, void *arg)
{
	struct gw_otlp *o = arg;

	o->inflight = NULL;
	evbuffer_free(o->body);
	o->body = NULL;
	if (err == TG_UP_OK && status >= 200 && status < 300) {
		tg_metrics_inc(o->gw->metrics, "tidegate_spans_exported_total", "",
		    (double)o->inflight_n);
	} else {
		tg_metrics_inc(o->gw->metrics, "tidegate_spans_dropped_total",
		    "reason=\"export_failed\"", (double)o->inflight_n);
		warn_failed(o, status, err);
	}
	o->inflight_n = 0;
	if (o->n * 2 > o->max || (o->gw->draining && o->n > 0))
		kick(o);
	else if (o->gw->draining)
		o->wake(o->gw);
}

static void
flush(struct gw_otlp *o)
{
	struct evkeyvalq h;
	size_t n = o->n < BATCH_MAX ? o->n : BATCH_MAX;

	if (o->inflight != NULL || n == 0)
		return;
	if (n > o->max - o->head)
		n = o->max - o->head;	/* up to the ring's end; the rest next time */
	o->body = evbuffer_new();
	gw_otlp_encode(o->q + o->head, n, o->service, o->body);
	o->head = (o->head + n) % o->max;
	o->n -= n;
	o->inflight_n = n;
	TAILQ_INIT(&h);
	evhttp_add_header(&h, "Content-Type", "application/json");
	evhttp_add_header(&h, "User-Agent", gw_user_agent());
	o->inflight = tg_upstream_fetch(o->up, EVHTTP_REQ_POST, o->path, &h, o->body,
	    ANSWER_MAX, on_exported, o);
	evhttp_clear_headers(&h);
}

static void
on_flush(evutil_socket_t fd, short what, void *arg)
{
	flush(arg);
}

static void
on_give_up(evutil_socket_t fd, short what, void *arg)
{
	struct gw_otlp *o = arg;

	o->gave_up = 1;		/* what is still queued or in flight is lost */
	o->wake(o->gw);
}

int
gw_otlp_idle(struct gw_otlp *o)
{
	struct timeval tv = { DRAIN_MS / 1000, DRAIN_MS % 1000 * 1000 };

	if (o == NULL || o->gave_up || (o->n == 0 && o->inflight == NULL))
		return 1;
	if (!o->draining) {
		o->draining = 1;
		evtimer_add(o->give_up, &tv);
	}
	if (o->inflight == NULL)
		kick(o);	/* the last export; its end calls o->wake */
	return 0;
}

/* ---- life ---- */

struct gw_otlp *
gw_otlp_new(struct gw *gw, const struct gw_config *c, void (*wake)(struct gw *gw),
    struct tg_err *err)
{
	struct tg_upstream_opts opts = { .connect_timeout_ms = c->connect_timeout,
		.read_timeout_ms = READ_TIMEOUT_MS, .max_conns = 1, .max_idle = 1,
		.tls_verify = c->tls_verify, .ca_file = c->tls_ca_file };
	struct gw_otlp *o;
	struct timeval tv = { c->otlp_flush / 1000, c->otlp_flush % 1000 * 1000 };

	err->msg[0] = '\0';
	if (c->otlp_url == NULL)
		return NULL;
	o = tg_xcalloc(1, sizeof(*o));
	o->gw = gw;
	o->wake = wake;
	if ((o->up = tg_upstream_new(gw->base, gw->dns, c->otlp_url, NULL, &opts, err)) == NULL) {
		free(o);
		return NULL;
	}
	o->url = tg_xstrdup(c->otlp_url);
	o->service = tg_xstrdup(c->otlp_service != NULL ? c->otlp_service : "tidegate");
	o->path = tg_xstrdup(*tg_upstream_base_path(o->up) ? tg_upstream_base_path(o->up) : "/");
	o->flush_ms = c->otlp_flush;
	o->max = (size_t)c->otlp_max_queue;
	o->q = tg_xcalloc(o->max, sizeof(*o->q));
	o->kick = event_new(gw->base, -1, 0, on_flush, o);
	o->timer = event_new(gw->base, -1, EV_PERSIST, on_flush, o);
	o->give_up = evtimer_new(gw->base, on_give_up, o);
	evtimer_add(o->timer, &tv);
	tg_log(TG_LOG_INFO, "tracing", TG_LS("otlp_url", o->url), TG_LS("service", o->service),
	    TG_LI("flush_interval_ms", o->flush_ms), TG_LI("max_queue", (int64_t)o->max));
	return o;
}

void
gw_otlp_free(struct gw_otlp *o)
{
	if (o == NULL)
		return;
	tg_upstream_free(o->up);	/* an export in flight: cancelled, no callback */
	if (o->body != NULL)
		evbuffer_free(o->body);
	event_free(o->kick);
	event_free(o->timer);
	event_free(o->give_up);
	free(o->q);
	free(o->url);
	free(o->service);
	free(o->path);
	free(o);
}

static int
same(const struct gw_otlp *o, const struct gw_config *c)
{
	return c->otlp_url != NULL && strcmp(o->url, c->otlp_url) == 0 &&
	    strcmp(o->service, c->otlp_service != NULL ? c->otlp_service : "tidegate") == 0 &&
	    o->flush_ms == c->otlp_flush && o->max == (size_t)c->otlp_max_queue;
}

/* The spans old still queues go on in n (NULL: tracing off), as many as
 * its queue holds; the rest, and old's export cancelled in flight, are
 * counted dropped (reason="reload"). */
static void
carry(struct gw_otlp *old, struct gw_otlp *n)
{
	size_t moved = 0;

	if (old == NULL)
		return;
	while (n != NULL && old->n > 0 && n->n < n->max) {
		n->q[(n->head + n->n++) % n->max] = old->q[old->head];
		old->head = (old->head + 1) % old->max;
		old->n--;
		moved++;
	}
	if (old->n + old->inflight_n > 0)
		tg_metrics_inc(old->gw->metrics, "tidegate_spans_dropped_total",
		    "reason=\"reload\"", (double)(old->n + old->inflight_n));
	if (moved > 0)
		kick(n);
}

void
gw_otlp_reload(struct gw *gw, const struct gw_config *c, void (*wake)(struct gw *gw))
{
	struct gw_otlp *old = gw->otlp;
	struct tg_err err;

	if (old != NULL ? same(old, c) : c->otlp_url == NULL)
		return;
	gw->otlp = gw_otlp_new(gw, c, wake, &err);
	carry(old, gw->otlp);
	gw_otlp_free(old);
	if (gw->otlp == NULL && err.msg[0] != '\0')
		tg_log(TG_LOG_ERROR, "tracing_failed", TG_LS("reason", err.msg));
	else if (gw->otlp == NULL)
		tg_log(TG_LOG_INFO, "tracing", TG_LS("otlp_url", NULL));
}
