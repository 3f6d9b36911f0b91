/*
 * reply.c - the end of one client request: the replies every part of the
 * gateway sends (JSON errors of DESIGN.md, buffers, generated JSON, the
 * start and end of a streamed relay), the words for upstream and token
 * failures, the access log line and the request's metrics, and freeing
 * the request (gw_req_finish; its SERVER span, spans.c), after which its
 * reply's tracker (flush.c) owns the connection until the reply is written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/clock.h"
#include "tidegate/frontdoor.h"
#include "tidegate/http.h"
#include "tidegate/log.h"
#include "gw.h"

/* ---- lifetime ---- */

/* service="dex",op="export": made once per service and operation, as every
 * request is counted under it. */
static const char *
op_labels(const struct gw_req *r, size_t *len)
{
	static char *cache[2][TG_OP_COUNT];
	static size_t lens[2][TG_OP_COUNT];
	enum tg_op op = r->op;
	int s = r->svc->index == GW_SIM;

	if (cache[s][op] == NULL) {
		cache[s][op] = tg_xasprintf("service=\"%s\",op=\"%s\"", r->svc->name,
		    tg_op_name(op));
		lens[s][op] = strlen(cache[s][op]);
	}
	*len = lens[s][op];
	return cache[s][op];
}

char *
gw_access_client(struct evhttp_request *req, char *client, size_t size, uint64_t *body)
{
	const char *ua = tg_http_header(req, "User-Agent");

	tg_frontdoor_client(req, client, size);	/* decided by the front door */
	*body = evbuffer_get_length(evhttp_request_get_input_buffer(req));
	return ua != NULL ? tg_xstrndup(ua, strnlen(ua, 256)) : NULL;
}

void
gw_access_note(struct gw_req *r)
{
	const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(r->req);
	const char *q = u != NULL ? evhttp_uri_get_query(u) : NULL;
	const char *param = r->svc->routes->job_param, *job;
	struct evkeyvalq args;

	r->up_ms = -1;
	if (r->rt->cfg.access_log) {	/* the User-Agent is copied for the line only */
		r->user_agent = gw_access_client(r->req, r->client, sizeof(r->client),
		    &r->request_bytes);
	} else {
		tg_frontdoor_client(r->req, r->client, sizeof(r->client));
		r->request_bytes = evbuffer_get_length(evhttp_request_get_input_buffer(r->req));
	}
	if (param == NULL || q == NULL)
		return;
	TAILQ_INIT(&args);
	if (evhttp_parse_query_str(q, &args) == 0 &&
	    (job = evhttp_find_header(&args, param)) != NULL)
		r->job = tg_xstrndup(job, strnlen(job, 128));
	evhttp_clear_headers(&args);
}

/* One vocabulary (docs/configuration.md): origin = which vendor host
 * answered this request's own call (primary, fallback; none: every host
 * out, nothing sent; null: no call of its own); served = how the answer
 * was made (relayed, fetched, coalesced, long-poll, cached, spool,
 * gateway). Features write the second kind into r->origin: split here. */
static void
origin_served(const struct gw_req *r, const char **origin, const char **served)
{
	const char *o = r->origin;

	*origin = NULL;
	*served = "gateway";
	if (o == NULL)
		return;
	if (strcmp(o, "primary") == 0 || strcmp(o, "fallback") == 0) {
		*origin = o;
		*served = r->error != NULL && !r->started ? "gateway" : "relayed";
	} else if (strcmp(o, "none") == 0) {
		*origin = o;
	} else {
		*served = strcmp(o, "cache") == 0 ? "cached" : o;
	}
}

void
gw_access_line(const struct gw_access *a)
{
	tg_log(TG_LOG_INFO, "access", TG_LS("id", a->id), TG_LS("trace_id", a->trace_id),
	    TG_LS("client", a->client), TG_LS("user_agent", a->user_agent),
	    TG_LS("service", a->service), TG_LS("op", a->op),
	    TG_LS("method", a->method), TG_LS("path", a->path),
	    TG_LS("correlationId", a->correlation_id), TG_LI("status", a->status),
	    TG_LI("request_bytes", a->request_bytes), TG_LI("bytes", a->bytes),
	    TG_LI("ms", a->ms), TG_LS("key", a->key),
	    TG_LS("origin", a->origin), TG_LS("served", a->served),
	    TG_LS("upstream_addr", a->upstream_addr),
	    TG_LI("upstream_status", a->upstream_status),
	    a->upstream_ms >= 0 ? TG_LI("upstream_ms", a->upstream_ms) :
	    TG_LS("upstream_ms", NULL),
	    TG_LS("retry", a->retry), TG_LS("error", a->error));
}

static void
access_line(struct gw_req *r, int64_t ms)
{
	struct gw_access a = { .id = r->id, .trace_id = r->trace_id, .client = r->client,
		.user_agent = r->user_agent, .service = r->svc->name, .op = tg_op_name(r->op),
		.method = r->method, .path = r->path, .correlation_id = r->job,
		.status = r->status, .request_bytes = r->request_bytes, .bytes = r->bytes,
		.ms = ms, .key = r->key ? r->key->name : NULL,
		.upstream_status = r->upstream_status, .upstream_ms = r->up_ms,
		.retry = r->retry, .error = r->error };
	char addr[300];

	origin_served(r, &a.origin, &a.served);
	gw_origin_addr(r->svc, a.origin, r->op == TG_OP_SIM_TOKEN, addr, sizeof(addr));
	a.upstream_addr = *addr ? addr : NULL;
	gw_access_line(&a);
}

static void
access_log(struct gw_req *r)
{
	int64_t now_us = tg_clock_mono_us(), ms = now_us / 1000 - r->t0;	/* one clock read */
	char labels[160];
	const char *base;
	size_t n;
	int code = r->status >= 100 && r->status <= 999 ? r->status : 0;

	base = op_labels(r, &n);
	memcpy(labels, base, n);		/* base + ,code="NNN" */
	memcpy(labels + n, ",code=\"", 7);
	labels[n + 7] = (char)('0' + code / 100);
	labels[n + 8] = (char)('0' + code / 10 % 10);
	labels[n + 9] = (char)('0' + code % 10);
	memcpy(labels + n + 10, "\"", 2);
	tg_metrics_inc(r->gw->metrics, "tidegate_requests_total", labels, 1);
	tg_metrics_observe(r->gw->metrics, r->histogram ? r->histogram :
	    "tidegate_request_duration_seconds", base,
	    (double)(now_us - r->t0_us) / 1e6);
	if (!r->rt->cfg.access_log)
		return;
	access_line(r, ms);
}

void
gw_req_finish(struct gw_req *r)
{
	struct gw *gw = r->gw;

	access_log(r);
	if (r->span_id[0] != '\0') {	/* tracing: the request's SERVER span ends */
		const char *origin, *served;

		origin_served(r, &origin, &served);
		gw_span_server(r, origin, served);
	}
	gw_feat_free(r);
	if (r->offload != NULL)
		r->offload->cancel(r->offload);	/* its check on the worker */
	gw_flush_handover(r);	/* the reply's tracker (flush.c) owns the connection now */
	if (r->up != NULL)
		tg_up_req_cancel(r->up);
	gw_vcall_cancel(r->call);
	gw_runtime_unref(r->rt);
	if (r->body != NULL)
		evbuffer_free(r->body);
	if (r->capture != NULL)
		evbuffer_free(r->capture);
	if (r->vendor_error != NULL)
		evbuffer_free(r->vendor_error);
	free(r->path);
	free(r->uri);
	free(r->user_agent);
	free(r->job);
	TAILQ_REMOVE(&gw->reqs, r, inflight_next);
	free(r);
	gw->inflight--;
	gw_maybe_exit(gw);
}

/* 1 when conn (borrowed; NULL: 0) came through a retired listener
 * (listeners.c): its answers close it, so its client moves to the new
 * address. */
static int
conn_retired(const struct gw *gw, struct evhttp_connection *conn)
{
	struct evhttp *http = conn != NULL ? evhttp_connection_get_server(conn) : NULL;
	const struct gw_retired *r;

	for (r = gw->retired; r != NULL && http != NULL; r = r->next)
		if (r->http == http)
			return 1;
	return 0;
}

void
gw_req_common_headers(struct gw_req *r)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(r->req);

	evhttp_remove_header(h, "X-Request-Id");
	evhttp_add_header(h, "X-Request-Id", r->id);
	gw_req_close_header(r);
}

void
gw_req_close_header(struct gw_req *r)
{
	if (r->gw->draining || (r->gw->retired != NULL && conn_retired(r->gw, r->conn)))
		evhttp_add_header(evhttp_request_get_output_headers(r->req), "Connection",
		    "close");
}

void
gw_req_reply_buf(struct gw_req *r, int status, const char *ctype, struct evbuffer *b)
{
	r->status = status;
	if (r->req != NULL) {
		if (b != NULL && evhttp_request_get_command(r->req) != EVHTTP_REQ_HEAD)
			r->bytes += evbuffer_get_length(b);	/* a HEAD's is not sent */
		gw_req_common_headers(r);
		gw_flush_start(r);
		tg_reply_buf(r->req, status, ctype, b);
		r->req = NULL;
	}
	gw_req_finish(r);
}

void
gw_req_reply_json(struct gw_req *r, int status, yajl_gen g)
{
	struct evbuffer *b = evbuffer_new();
	const unsigned char *buf;
	size_t len;

	yajl_gen_get_buf(g, &buf, &len);
	evbuffer_add(b, buf, len);
	gw_req_reply_buf(r, status, "application/json", b);
	evbuffer_free(b);
}

const char *
gw_req_owner(const struct gw_req *r)
{
	if (r->auth == GW_AUTH_CALLER)
		return GW_OWNER_CALLERS;
	return r->key != NULL ? r->key->name : GW_OWNER_NO_KEY;
}

/* Retry-After: the queue just waited queue_timeout without a connection
 * coming free, so sooner is unlikely to fare better. */
void
gw_req_reply_busy(struct gw_req *r, const struct tg_up_req *u)
{
	int64_t s = (r->rt->cfg.queue_timeout + 999) / 1000;
	char ra[24], msg[320];

	if (r->req != NULL) {
		snprintf(ra, sizeof(ra), "%lld", (long long)(s > 0 ? s : 1));
		evhttp_add_header(evhttp_request_get_output_headers(r->req), "Retry-After", ra);
	}
	snprintf(msg, sizeof(msg), "the %s vendor API is busy: %s", r->svc->name,
	    u != NULL ? tg_up_req_detail(u) : "no connection came free");
	gw_req_reply_error(r, 503, "UPSTREAM_BUSY", msg);
}

void
gw_req_reply_error(struct gw_req *r, int status, const char *code, const char *msg)
{
	struct evbuffer *b = evbuffer_new();

	r->error = code;
	tg_error_body(b, status, code, msg, r->id, NULL, 0);
	gw_req_reply_buf(r, status, "application/json", b);
	evbuffer_free(b);
}

void
gw_req_reply_405(struct gw_req *r, const char *allow)
{
	if (r->req != NULL && allow != NULL && *allow != '\0')
		evhttp_add_header(evhttp_request_get_output_headers(r->req), "Allow", allow);
	gw_req_reply_error(r, 405, "METHOD_NOT_ALLOWED", "method not allowed on this path");
}

/* ---- upstream exchange ---- */

/*
 * The relayed reply ends: r is finished first (its connection handed to
 * the reply's tracker, flush.c), then the reply is ended, because evhttp
 * may write the end, report the reply complete and free the connection
 * all inside evhttp_send_reply_end (a body without chunked framing whose
 * bytes already left). A truncated body must not look complete: abort
 * resets the connection rather than ending the stream.
 */
static void
end_reply(struct gw_req *r, int abort)
{
	struct evhttp_request *req = r->req;

	if (abort)
		tg_http_conn_reset(r->conn);
	r->req = NULL;
	gw_req_finish(r);
	evhttp_send_reply_end(req);
}

void
gw_req_reply_start(struct gw_req *r, int status)
{
	gw_req_common_headers(r);
	r->status = status;
	gw_flush_start(r);
	evhttp_send_reply_start(r->req, status, tg_http_reason(status));
	r->started = 1;
}

void
gw_req_reply_end(struct gw_req *r, int abort)
{
	end_reply(r, abort);
}

static int
error_status(enum tg_up_error err, const char **code)
{
	switch (err) {
	case TG_UP_TIMEOUT:
		*code = "UPSTREAM_TIMEOUT";
		return 504;
	case TG_UP_CONNECT:
		*code = "UPSTREAM_UNREACHABLE";
		return 502;
	case TG_UP_TLS:
		*code = "UPSTREAM_TLS_FAILED";
		return 502;
	case TG_UP_BUSY:
		*code = "UPSTREAM_BUSY";
		return 503;
	case TG_UP_DOWN:
		*code = "UPSTREAM_UNAVAILABLE";
		return 503;
	default:
		*code = "UPSTREAM_ERROR";
		return 502;
	}
}

/* The vendor's answer ended; u (the attempt, borrowed) words its failure. */
int
gw_upstream_error(enum tg_up_error err, const char *detail, const char *svc, const char *what,
    char *msg, size_t len, const char **code)
{
	int status = error_status(err, code);

	if (err == TG_UP_TLS)
		snprintf(msg, len, "the %s vendor %s failed TLS verification: %s", svc, what,
		    detail != NULL && *detail != '\0' ? detail : "handshake failed");
	else if (err == TG_UP_BUSY)
		snprintf(msg, len, "the %s vendor %s is busy: %s", svc, what,
		    detail != NULL && *detail != '\0' ? detail : "no connection came free");
	else if (err == TG_UP_DOWN)
		snprintf(msg, len, "the %s vendor %s is unavailable: %s", svc, what,
		    detail != NULL && *detail != '\0' ? detail : "every origin is out of service");
	else
		snprintf(msg, len, "the %s vendor %s could not be reached: %s", svc, what,
		    tg_up_error_str(err));
	return status;
}

static int
idempotent(const struct gw_req *r)
{
	enum evhttp_cmd_type m = evhttp_request_get_command(r->req);

	return m == EVHTTP_REQ_GET || m == EVHTTP_REQ_HEAD || m == EVHTTP_REQ_PUT ||
	    m == EVHTTP_REQ_DELETE || m == EVHTTP_REQ_OPTIONS;
}

void
gw_req_reply_upstream(struct gw_req *r, const struct tg_up_req *u, enum tg_up_error err,
    const char *what)
{
	const char *code;
	char msg[400];
	int status = gw_upstream_error(err, u != NULL ? tg_up_req_detail(u) : NULL, r->svc->name,
	    what, msg, sizeof(msg), &code);
	char ra[16];
	size_t n;

	if (u != NULL) {
		r->origin = err == TG_UP_DOWN ? "none" : tg_up_req_origin(u);
		r->retry = tg_up_req_why(u);
	}
	if (err == TG_UP_DOWN && u != NULL) {
		snprintf(ra, sizeof(ra), "%d", tg_up_req_retry_after(u));
		evhttp_add_header(evhttp_request_get_output_headers(r->req), "Retry-After", ra);
	} else if ((err == TG_UP_RESET || err == TG_UP_TIMEOUT || err == TG_UP_PROTOCOL) &&
	    !idempotent(r) && (n = strlen(msg)) < sizeof(msg) - 1) {
		snprintf(msg + n, sizeof(msg) - n, "; the request was sent and no answer came: "
		    "it may have taken effect at the vendor (a simulation run may exist: list "
		    "the case's runs before submitting again)");
	}
	gw_req_reply_error(r, status, code, msg);
}

void
gw_req_reply_token_error(struct gw_req *r, const char *what, const char *why,
    int retry_after)
{
	const char *code;
	char ra[16], msg[640];
	int status = gw_token_error(r->svc->tokens, what, why, msg, sizeof(msg), &code);

	snprintf(ra, sizeof(ra), "%d", retry_after > 0 ? retry_after : 1);
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "Retry-After", ra);
	gw_req_reply_error(r, status, code, msg);
}

/* The client's headers for the vendor, each attempt (Authorization: the
 * caller's own in caller-token mode; the gateway's token is set by the
 * call). */

/* 400 VALIDATION_FAILED with every problem, counted per service. */
void
gw_reply_problems(struct gw_req *r, struct tg_problems *p)
{
	struct evbuffer *b = evbuffer_new();
	char msg[160];

	if (p->total > p->n)
		snprintf(msg, sizeof(msg), "%zu problems in the request (the first %zu listed)",
		    p->total, p->n);
	else
		snprintf(msg, sizeof(msg), "%zu problem%s in the request", p->total,
		    p->total == 1 ? "" : "s");
	r->error = "VALIDATION_FAILED";
	tg_metrics_inc(r->gw->metrics, "tidegate_validation_failures_total",
	    r->svc->index == GW_DEX ? "service=\"dex\"" : "service=\"sim\"", 1);
	tg_error_body(b, 400, "VALIDATION_FAILED", msg, r->id, p->v, p->n);
	gw_req_reply_buf(r, 400, "application/json", b);	/* frees r */
	evbuffer_free(b);
}
