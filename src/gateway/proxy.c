/*
 * proxy.c - one client request through the gateway: request id, route,
 * caller authentication, vendor token, upstream exchange, and the reply
 * relayed to the client as it arrives (backpressure both ways: the vendor
 * connection is paused while the client's output buffer is above a high
 * mark; a client that stalls for client_send_timeout is dropped by the
 * reply's tracker, flush.c, and its vendor request cancelled). Requests
 * are tagged with their caller (gw_req_owner) so that one API key cannot
 * hold every vendor connection; one that waited the pool's queue timeout
 * is answered 503 UPSTREAM_BUSY. A vendor 401 on a gateway-held token
 * invalidates it and replays the request once. Features registered for
 * a request's operation (feature.c) are asked at each step: they may
 * answer it themselves, keep a copy of the vendor's answer, or hold the
 * answer until their own work is done (an export's webhook job made
 * durable). Called by the dex and sim listeners; handlers for specific
 * operations (logins) hand back to gw_req_proxy().
 */
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

#define CLIENT_HIGH_WATER (1024 * 1024)

/* Any feature registered for r's operation. */
#define NOPFEAT_ANY(r)	((r)->gw->nby_op[(r)->op] != 0)

static const char *const hop_by_hop[] = {
	"Connection", "Keep-Alive", "Proxy-Authenticate", "Proxy-Authorization", "TE",
	"Trailer", "Transfer-Encoding", "Upgrade", "Proxy-Connection",
};


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

static void
access_log(struct gw_req *r)
{
	int64_t ms = tg_clock_mono_ms() - r->t0;
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
	tg_metrics_observe(r->gw->metrics, "tidegate_request_duration_seconds", base,
	    (double)ms / 1000.0);
	if (!r->rt->cfg.access_log)
		return;
	tg_log(TG_LOG_INFO, "access", TG_LS("id", r->id), TG_LS("service", r->svc->name),
	    TG_LS("op", tg_op_name(r->op)),
	    TG_LS("method", r->method), TG_LS("path", r->path), TG_LI("status", r->status),
	    TG_LI("upstream_status", r->upstream_status), TG_LI("bytes", r->bytes),
	    TG_LI("ms", ms), TG_LS("key", r->key ? r->key->name : NULL),
	    TG_LS("origin", r->origin), TG_LS("error", r->error));
}

static void
finish(struct gw_req *r)
{
	struct gw *gw = r->gw;

	access_log(r);
	gw_feat_free(r);
	gw_validate_forget(r);
	gw_flush_handover(r);	/* the reply's tracker (flush.c) owns the connection now */
	if (r->up != NULL)
		tg_up_req_cancel(r->up);
	gw_vcall_cancel(r->call);
	gw_runtime_unref(r->rt);
	if (r->body != NULL)
		evbuffer_free(r->body);
	if (r->capture != NULL)
		evbuffer_free(r->capture);
	free(r->path);
	free(r->uri);
	free(r);
	gw->inflight--;
	gw_maybe_exit(gw);
}

static void
add_common_headers(struct gw_req *r)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(r->req);

	evhttp_remove_header(h, "X-Request-Id");
	evhttp_add_header(h, "X-Request-Id", r->id);
	if (r->gw->draining)
		evhttp_add_header(h, "Connection", "close");
}

void
gw_req_reply_buf(struct gw_req *r, int status, const char *ctype, struct evbuffer *b)
{
	r->status = status;
	if (r->req != NULL) {
		r->bytes += b ? evbuffer_get_length(b) : 0;
		add_common_headers(r);
		gw_flush_start(r);
		tg_reply_buf(r->req, status, ctype, b);
		r->req = NULL;
	}
	finish(r);
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

/* The client's connection closed before we finished. If libevent already
 * detached the request it is ours to release (sending on a detached
 * request frees it); otherwise libevent frees it with the connection. */
static void
on_client_close(struct evhttp_connection *conn, void *arg)
{
	struct gw_req *r = arg;
	struct evhttp_request *req = r->req;

	r->conn = NULL;
	r->req = NULL;
	r->client_gone = 1;
	/* the reply will never be written; flush.c may have dropped the client */
	r->error = gw_flush_closed(r) ? "client_send_timeout" : "client_closed";
	if (r->status == 0 || r->started)
		r->status = r->started ? r->status : 499;
	if (req != NULL && evhttp_request_get_connection(req) == NULL) {
		if (r->started)
			evhttp_send_reply_end(req);
		else
			evhttp_send_reply(req, 499, "Client Closed Request", NULL);
	}
	finish(r);
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
	finish(r);
	evhttp_send_reply_end(req);
}

void
gw_req_reply_start(struct gw_req *r, int status)
{
	add_common_headers(r);
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
is_hop_by_hop(const char *name, const char *connection)
{
	const char *p;
	size_t i, n = strlen(name);

	switch (name[0] | 0x20) {	/* the list's initials: most names skip it */
	case 'c': case 'k': case 'p': case 't': case 'u':
		for (i = 0; i < TG_NELEM(hop_by_hop); i++)
			if (strcasecmp(name, hop_by_hop[i]) == 0)
				return 1;
	}
	/* Headers named in Connection are hop-by-hop too (RFC 9110 7.6.1). */
	for (p = connection; p != NULL && *p; p++) {
		while (*p == ' ' || *p == ',')
			p++;
		if (strncasecmp(p, name, n) == 0 && (p[n] == '\0' || p[n] == ',' || p[n] == ' '))
			return 1;
		p = strchr(p, ',');
		if (p == NULL)
			break;
	}
	return 0;
}

/* What becomes of the vendor's answer: the served partial cases are kept
 * by the core (for the diff); features of the operation ask the rest. */
static enum gw_head
head_action(struct gw_req *r, int status)
{
	enum gw_head h = NOPFEAT_ANY(r) ? gw_feat_head(r, status) : GW_HEAD_RELAY;

	if (h == GW_HEAD_RELAY && status == 200 && r->op == TG_OP_SIM_CASE &&
	    r->gw->cases != NULL)
		h = GW_HEAD_CAPTURE;
	return h;
}

static void
on_head(struct gw_vcall *c, int status, const struct evkeyvalq *headers, void *arg)
{
	struct gw_req *r = arg;
	struct evkeyvalq *out;
	const char *conn = evhttp_find_header(headers, "Connection");
	struct evkeyval *kv;
	enum gw_head h;

	r->upstream_status = status;
	r->origin = tg_up_req_origin(gw_vcall_upstream(c));
	out = evhttp_request_get_output_headers(r->req);
	TAILQ_FOREACH(kv, headers, next)
		if (!is_hop_by_hop(kv->key, conn))
			evhttp_add_header(out, kv->key, kv->value);
	/* A held answer keeps the vendor's headers (Location …); its length is
	 * set again when the feature holding it sends the captured body. */
	h = head_action(r, status);
	if (h == GW_HEAD_HOLD) {
		r->held = 1;
		r->capture = evbuffer_new();
		evhttp_remove_header(out, "Content-Length");
		return;
	}
	add_common_headers(r);
	r->status = status;
	if (evhttp_request_get_command(r->req) == EVHTTP_REQ_HEAD || status == 204 ||
	    status == 304 || status < 200)
		return;		/* no body: replied in on_done */
	if (h == GW_HEAD_CAPTURE)
		r->capture = evbuffer_new();
	gw_flush_start(r);
	evhttp_send_reply_start(r->req, status, tg_http_reason(status));
	r->started = 1;
}

static void
on_client_drained(struct evhttp_connection *conn, void *arg)
{
	struct gw_req *r = arg;

	if (r->paused && r->call != NULL) {
		r->paused = 0;
		gw_vcall_resume(r->call);
	}
}

/* Partial cases and creation answers are small; past this nothing is kept. */
#define CAPTURE_MAX (16 * 1024 * 1024)

static void
capture(struct gw_req *r, struct evbuffer *buf)
{
	size_t n = evbuffer_get_length(buf);

	if (evbuffer_get_length(r->capture) + n > CAPTURE_MAX) {
		evbuffer_free(r->capture);
		r->capture = NULL;
		return;
	}
	evbuffer_add(r->capture, evbuffer_pullup(buf, -1), n);
}

static void
on_body(struct gw_vcall *c, struct evbuffer *buf, void *arg)
{
	struct gw_req *r = arg;
	struct bufferevent *bev;

	if (r->held && r->capture != NULL)
		capture(r, buf);
	if (!r->started || r->req == NULL) {
		evbuffer_drain(buf, evbuffer_get_length(buf));
		return;
	}
	r->bytes += evbuffer_get_length(buf);
	if (r->capture != NULL)
		capture(r, buf);
	evhttp_send_reply_chunk_with_cb(r->req, buf, on_client_drained, r);
	bev = evhttp_connection_get_bufferevent(r->conn);
	if (!r->paused && evbuffer_get_length(bufferevent_get_output(bev)) > CLIENT_HIGH_WATER) {
		r->paused = 1;
		gw_vcall_pause(c);
	}
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
	default:
		*code = "UPSTREAM_ERROR";
		return 502;
	}
}

/* The vendor's answer ended; u (the attempt, borrowed) words its failure. */
static void
answered(struct gw_req *r, const struct tg_up_req *u, enum tg_up_error err)
{
	if (NOPFEAT_ANY(r) && gw_feat_done(r, err, r->capture))
		return;		/* a feature held the answer and replied */
	if (err == TG_UP_OK && r->capture != NULL && r->op == TG_OP_SIM_CASE) {
		gw_case_served(r, r->capture);
		r->capture = NULL;
	}
	if (err == TG_UP_OK && r->started) {
		end_reply(r, 0);
	} else if (err == TG_UP_OK) {
		gw_req_reply_buf(r, r->status ? r->status : r->upstream_status, NULL, NULL);
	} else if (r->started) {
		r->error = tg_up_error_str(err);
		end_reply(r, 1);
	} else if (err == TG_UP_BUSY) {
		gw_req_reply_busy(r, u);
	} else {
		gw_req_reply_upstream(r, u, err, "API");
	}
}

static void
on_done(struct gw_vcall *c, enum tg_up_error err, void *arg)
{
	struct gw_req *r = arg;

	r->call = NULL;		/* freed below, once r is answered */
	answered(r, gw_vcall_upstream(c), err);
	gw_vcall_cancel(c);
}

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
	else
		snprintf(msg, len, "the %s vendor %s could not be reached: %s", svc, what,
		    tg_up_error_str(err));
	return status;
}

void
gw_req_reply_upstream(struct gw_req *r, const struct tg_up_req *u, enum tg_up_error err,
    const char *what)
{
	const char *code;
	char msg[400];
	int status = gw_upstream_error(err, u != NULL ? tg_up_req_detail(u) : NULL, r->svc->name,
	    what, msg, sizeof(msg), &code);

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
static void
copy_request_headers(struct gw_vcall *c, struct evkeyvalq *out, void *arg)
{
	struct gw_req *r = arg;
	struct evkeyvalq *in = evhttp_request_get_input_headers(r->req);
	const char *conn = evhttp_find_header(in, "Connection");
	char addr[128], *fwd;
	const char *prev;
	struct evkeyval *h;
	ev_uint16_t port;
	char *host = NULL;

	TAILQ_FOREACH(h, in, next) {
		if (is_hop_by_hop(h->key, conn) || strcasecmp(h->key, "Host") == 0 ||
		    strcasecmp(h->key, "Content-Length") == 0 ||
		    strcasecmp(h->key, "Expect") == 0 ||
		    strcasecmp(h->key, "X-Api-Key") == 0 ||
		    strcasecmp(h->key, "X-Request-Id") == 0 ||
		    strcasecmp(h->key, "X-Forwarded-For") == 0 ||
		    strcasecmp(h->key, "X-Tidegate-Callback-Url") == 0 ||
		    (r->auth != GW_AUTH_CALLER && strcasecmp(h->key, "Authorization") == 0))
			continue;
		evhttp_add_header(out, h->key, h->value);
	}
	evhttp_add_header(out, "X-Request-Id", r->id);
	evhttp_connection_get_peer(r->conn, &host, &port);
	snprintf(addr, sizeof(addr), "%s", host ? host : "unknown");
	prev = evhttp_find_header(in, "X-Forwarded-For");
	fwd = prev ? tg_xasprintf("%s, %s", prev, addr) : tg_xstrdup(addr);
	evhttp_add_header(out, "X-Forwarded-For", fwd);
	free(fwd);
}

static void
on_no_token(struct gw_vcall *c, const char *why, int retry_after, void *arg)
{
	struct gw_req *r = arg;
	char what[64];

	r->call = NULL;
	snprintf(what, sizeof(what), "could not obtain a %s vendor token", r->svc->name);
	gw_req_reply_token_error(r, what, why, retry_after);
	gw_vcall_cancel(c);
}

static const struct gw_vcall_cbs call_cbs = { on_head, on_body, on_done, on_no_token,
	copy_request_headers };

/* The client's query string without the parameter the gateway consumed
 * (dryRun): segments are copied as sent, so encoding is untouched. */
static char *
forward_query(const char *q, const char *drop)
{
	size_t dl = drop ? strlen(drop) : 0, n = 0, len;
	char *out = tg_xmalloc(strlen(q) + 1);
	const char *seg = q, *amp;

	while (*seg) {
		amp = strchr(seg, '&');
		len = amp ? (size_t)(amp - seg) : strlen(seg);
		if (!(dl && len >= dl && strncmp(seg, drop, dl) == 0 &&
		    (len == dl || seg[dl] == '='))) {
			if (n > 0)
				out[n++] = '&';
			memcpy(out + n, seg, len);
			n += len;
		}
		seg += len + (amp != NULL);
	}
	out[n] = '\0';
	return out;
}

/* Upstream URI: base path + the op's template (or the client's path when
 * passing through) + the client's query string. */
char *
gw_upstream_uri(struct gw_req *r)
{
	const struct evhttp_uri *cu = evhttp_request_get_evhttp_uri(r->req);
	const char *q = cu ? evhttp_uri_get_query(cu) : NULL;
	const char *base = tg_upstream_base_path(r->svc->api);
	char *path, *uri, *fq;

	if (r->m.route != NULL)
		path = tg_route_expand(r->svc->cfg->routes[r->m.route->op], &r->m);
	else
		path = tg_xstrdup(r->path);
	if (path == NULL)
		path = tg_xstrdup(r->path);
	fq = forward_query(q ? q : "", r->drop_query);
	uri = tg_xasprintf("%s%s%s%s", base, path, *fq ? "?" : "", fq);
	free(fq);
	free(path);
	return uri;
}

void
gw_req_proxy(struct gw_req *r)
{
	struct gw_vcall_req q;

	if (r->uri == NULL)
		r->uri = gw_upstream_uri(r);
	memset(&q, 0, sizeof(q));
	q.rt = r->rt;
	q.service = r->svc->index;
	q.method = evhttp_request_get_command(r->req);
	q.uri = r->uri;
	q.body = r->body ? r->body : evhttp_request_get_input_buffer(r->req);
	q.no_token = r->auth != GW_AUTH_GATEWAY;	/* the caller's own Authorization */
	q.owner = gw_req_owner(r);
	q.replay_max = (size_t)r->svc->cfg->replay_max_body;
	r->call = gw_vcall_start(&q, &call_cbs, r);
}

/* ---- arrival ---- */

static struct gw_req *
req_new(struct gw *gw, int listener, struct evhttp_request *req)
{
	struct gw_req *r = tg_xcalloc(1, sizeof(*r));
	const char *rid = tg_http_header(req, "X-Request-Id");

	r->gw = gw;
	r->rt = gw->rt;
	r->rt->refs++;
	r->svc = &r->rt->svc[listener];
	r->req = req;
	r->conn = evhttp_request_get_connection(req);
	r->method = tg_http_method(req);
	r->path = tg_xstrdup(tg_http_path(req));
	r->t0 = tg_clock_mono_ms();
	if (rid != NULL && tg_http_request_id_valid(rid, strlen(rid)))
		snprintf(r->id, sizeof(r->id), "%s", rid);
	else
		tg_id_uuid4(r->id);
	gw->inflight++;
	tg_frontdoor_set_closecb(r->conn, on_client_close, r);
	return r;
}

void
gw_on_request(struct evhttp_request *req, void *arg)
{
	struct gw_lctx *lc = arg;
	struct gw_req *r = req_new(lc->gw, lc->listener, req);
	int rc, fault = tg_frontdoor_refusal(req);

	if (fault != 0)		/* refused on its head (frontdoor.h): answer, close */
		tg_frontdoor_close_after(req);
	if (fault != 0 && fault != TG_HEAD_BAD_TARGET && fault != TG_HEAD_NOT_FOUND) {
		gw_req_reply_error(r, tg_head_fault_status(fault), tg_head_fault_code(fault),
		    tg_head_fault_message(fault));
		return;
	}
	if (gw_path_prepare(r) != 0)
		return;		/* 400 or 404 sent; r->path is normalised from here on */
	if (fault != 0) {	/* refused for its target, which passes now: cannot be */
		gw_req_reply_error(r, 400, "BAD_REQUEST_TARGET", tg_head_fault_message(fault));
		return;
	}
	if (gw_feat_prefix(r))
		return;		/* a feature's own endpoint: never upstream */
	rc = tg_route_match(r->svc->routes, r->method, r->path, &r->m);
	r->op = r->m.route != NULL ? r->m.route->op : TG_OP_PASSTHROUGH;
	if (rc < 0) {
		gw_req_reply_error(r, 405, "METHOD_NOT_ALLOWED", "method not allowed on this path");
		return;
	}
	if (rc == 0 && !r->svc->cfg->passthrough) {
		gw_req_reply_error(r, 404, "NOT_FOUND", "no such endpoint");
		return;
	}
	if (gw_req_authenticate(r) != 0)
		return;
	if (r->op == TG_OP_DEX_AUTHENTICATE || r->op == TG_OP_SIM_TOKEN) {
		gw_login_handle(r);
		return;
	}
	if (gw_validate(r) != 0)
		return;
	gw_req_validated(r);
}

void
gw_req_validated(struct gw_req *r)
{
	if (NOPFEAT_ANY(r) && gw_feat_request(r) != 0)
		return;		/* a feature answers */
	gw_req_proxy(r);
}
