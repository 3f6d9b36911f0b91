/*
 * relay.c - a client request sent to the vendor and its answer relayed as
 * it arrives: the upstream path and query from the route template, the
 * client's headers minus hop-by-hop ones, the call (vendor.c: token, one
 * replay of a 401), and backpressure both ways (the vendor is paused while
 * more than CLIENT_HIGH_WATER waits for the client; a client that takes no
 * byte for client_send_timeout is dropped by flush.c and its call
 * cancelled). Features of the operation decide at the head whether the
 * answer is relayed, copied for them, or held until they answer
 * (feature.c). An error answer (400 and above) is read, up to
 * GW_VENDOR_ERROR_MAX, and wrapped in the gateway's error body
 * (vendor_error.c); every other answer streams through as it comes. Called by proxy.c, by logins that are not cached, by the
 * request check when it passes a request (gw_req_validated), and by
 * features that hand a request back (gw_req_proxy).
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
#include "tidegate/hblock.h"
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


static int
is_hop_by_hop(const char *name, const char *connection)
{
	const char *p;
	size_t i, n;
	int c = name[0] | 0x20;

	switch (c) {	/* the list's initials: most names skip it */
	case 'c': case 'k': case 'p': case 't': case 'u':
		for (i = 0; i < TG_NELEM(hop_by_hop); i++)
			if ((hop_by_hop[i][0] | 0x20) == c && strcasecmp(name, hop_by_hop[i]) == 0)
				return 1;
	}
	if (connection == NULL)
		return 0;
	n = strlen(name);
	/* Headers named in Connection are hop-by-hop too (RFC 9110 7.6.1);
	 * conn_named() has dropped the values that name none. */
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

/* A Connection value that names no header besides those always hop-by-hop
 * (keep-alive, close: most of them) need not be read for every header. */
static const char *
conn_named(const char *connection)
{
	if (connection == NULL || strcasecmp(connection, "keep-alive") == 0 ||
	    strcasecmp(connection, "close") == 0)
		return NULL;
	return connection;
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
copy_answer_headers(struct evkeyvalq *out, const struct evkeyvalq *headers,
    const char *conn)
{
	struct evkeyval *kv;

	TAILQ_FOREACH(kv, headers, next)
		if (!is_hop_by_hop(kv->key, conn))
			evhttp_add_header(out, kv->key, kv->value);
}

/*
 * The head of an answer streamed to the client, written as one block
 * (hblock.h): the vendor's Date first (libevent looks for it by name and
 * adds its own when it finds none), its end-to-end headers, the request's
 * X-Request-Id in place of the vendor's. Content-Length stays an entry of
 * its own: libevent frames the answer by it. (It adds no default
 * Content-Type: tg_http_new.)
 */
static void
relay_head_block(struct gw_req *r, struct evkeyvalq *out, const struct evkeyvalq *headers,
    const char *conn, const char *date)
{
	struct tg_hblock b;
	struct evkeyval *kv;

	tg_hblock_init(&b);
	if (date != NULL)
		tg_hblock_add(&b, "Date", date);
	TAILQ_FOREACH(kv, headers, next) {
		if (is_hop_by_hop(kv->key, conn))
			continue;
		switch (kv->key[0] | 0x20) {
		case 'c':
			if (strcasecmp(kv->key, "Content-Length") == 0) {
				evhttp_add_header(out, kv->key, kv->value);
				continue;
			}
			break;
		case 'd':
			if (strcasecmp(kv->key, "Date") == 0)
				continue;
			break;
		case 'x':
			if (strcasecmp(kv->key, "X-Request-Id") == 0)
				continue;
			break;
		}
		tg_hblock_add(&b, kv->key, kv->value);
	}
	if (tg_header_find(out, "X-Request-Id") != NULL)
		evhttp_remove_header(out, "X-Request-Id");
	tg_hblock_add(&b, "X-Request-Id", r->id);
	tg_hblock_attach(&b, out);
	gw_req_close_header(r);
}

/* The vendor's Connection and Date, in one pass over its head (the first
 * of each, as evhttp_find_header would give). */
static void
find_conn_date(const struct evkeyvalq *headers, const char **conn, const char **date)
{
	const struct evkeyval *kv;

	TAILQ_FOREACH(kv, headers, next) {
		if ((kv->key[0] | 0x20) == 'c' && *conn == NULL &&
		    strcasecmp(kv->key, "Connection") == 0)
			*conn = kv->value;
		else if ((kv->key[0] | 0x20) == 'd' && *date == NULL &&
		    strcasecmp(kv->key, "Date") == 0)
			*date = kv->value;
	}
}

static void
on_head(struct gw_vcall *c, int status, const struct evkeyvalq *headers, void *arg)
{
	struct gw_req *r = arg;
	struct evkeyvalq *out = evhttp_request_get_output_headers(r->req);
	const char *conn = NULL, *date = NULL;
	int head = evhttp_request_get_command(r->req) == EVHTTP_REQ_HEAD;
	enum gw_head h;

	find_conn_date(headers, &conn, &date);
	conn = conn_named(conn);

	r->upstream_status = status;
	r->origin = tg_up_req_origin(gw_vcall_upstream(c));
	r->retry = tg_up_req_why(gw_vcall_upstream(c));
	h = head_action(r, status);
	/* A held answer keeps the vendor's headers (Location …); its length is
	 * set again when the feature holding it sends the captured body. */
	if (h == GW_HEAD_HOLD) {
		copy_answer_headers(out, headers, conn);
		r->held = 1;
		r->capture = evbuffer_new();
		evhttp_remove_header(out, "Content-Length");
		return;
	}
	if (!head && status >= 400 && h == GW_HEAD_RELAY && r->op != TG_OP_SIM_TOKEN) {
		/* an error: read (bounded) and wrapped in on_done (vendor_error.c) */
		copy_answer_headers(out, headers, conn);
		r->vendor_error = evbuffer_new();
		evhttp_remove_header(out, "Content-Length");
		return;
	}
	r->status = status;
	if (head || status == 204 || status == 304 || status < 200) {
		copy_answer_headers(out, headers, conn);
		gw_req_common_headers(r);
		return;		/* no body: replied in on_done */
	}
	relay_head_block(r, out, headers, conn, date);
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
	if (r->vendor_error != NULL && evbuffer_get_length(r->vendor_error) <=
	    GW_VENDOR_ERROR_MAX)	/* one byte past the bound tells it was cut */
		evbuffer_remove_buffer(buf, r->vendor_error, GW_VENDOR_ERROR_MAX + 1 -
		    evbuffer_get_length(r->vendor_error));
	if (!r->started || r->req == NULL) {
		evbuffer_drain(buf, evbuffer_get_length(buf));
		return;
	}
	r->bytes += evbuffer_get_length(buf);
	if (r->capture != NULL)
		capture(r, buf);
	evhttp_send_reply_chunk_with_cb(r->req, buf, on_client_drained, r);
	if (gw_flush_write(r))
		return;		/* all written: nothing waits, on_client_drained will not run */
	bev = evhttp_connection_get_bufferevent(r->conn);
	if (!r->paused && evbuffer_get_length(bufferevent_get_output(bev)) > CLIENT_HIGH_WATER) {
		r->paused = 1;
		gw_vcall_pause(c);
	}
}

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
		gw_req_reply_end(r, 0);
	} else if (err == TG_UP_OK && r->held) {
		gw_req_reply_vendor(r, r->upstream_status, NULL, r->capture);	/* an error wrapped */
	} else if (err == TG_UP_OK && r->vendor_error != NULL) {
		gw_req_reply_vendor(r, r->upstream_status, NULL, r->vendor_error);
	} else if (err == TG_UP_OK) {
		gw_req_reply_buf(r, r->status ? r->status : r->upstream_status, NULL, NULL);
	} else if (r->started) {
		r->error = tg_up_error_str(err);
		gw_req_reply_end(r, 1);
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
	if (r->up_t0 != 0)
		r->up_ms = tg_clock_mono_ms() - r->up_t0;
	answered(r, gw_vcall_upstream(c), err);
	gw_vcall_cancel(c);
}

/* The client's headers the gateway sets itself or keeps (the key, the
 * trace, the callback): by their initial first, as most names are none. */
static int
not_forwarded(const char *name, enum gw_auth auth)
{
	static const char *const names[] = { "Host", "Content-Length", "Expect", "X-Api-Key",
		"X-Request-Id", "X-Forwarded-For", "traceparent", "tracestate",
		"X-Tidegate-Callback-Url" };
	size_t i;

	switch (name[0] | 0x20) {
	case 'a':
		return auth != GW_AUTH_CALLER && strcasecmp(name, "Authorization") == 0;
	case 'c': case 'e': case 'h': case 't': case 'x':
		for (i = 0; i < TG_NELEM(names); i++)
			if (strcasecmp(name, names[i]) == 0)
				return 1;
	}
	return 0;
}

static void
copy_request_headers(struct gw_vcall *c, struct evkeyvalq *out, void *arg)
{
	struct gw_req *r = arg;
	struct evkeyvalq *in = evhttp_request_get_input_headers(r->req);
	const char *conn = conn_named(tg_header_find(in, "Connection"));
	struct evkeyval *h;

	TAILQ_FOREACH(h, in, next)
		if (!is_hop_by_hop(h->key, conn) && !not_forwarded(h->key, r->auth))
			tg_header_add(out, h->key, h->value);
	/* X-Request-Id, traceparent, tracestate, X-Forwarded-For: vendor.c,
	 * from the trace given to the call (gw_trace_of_req). */
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
 * (dryRun) into out (room for strlen(q) + 1): segments are copied as sent,
 * so encoding is untouched. Returns the bytes written. */
static size_t
forward_query(const char *q, const char *drop, char *out)
{
	size_t dl = drop ? strlen(drop) : 0, n = 0, len;
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
	return n;
}

struct tg_upstream *
gw_req_upstream(const struct gw_req *r)
{
	return r->op == TG_OP_SIM_TOKEN ? r->svc->auth : r->svc->api;
}

/* Upstream URI: base path + the op's template (or the client's path when
 * passing through) + the client's query string. A simulation token
 * request goes to the login endpoint (gw_req_upstream): sim.token_url is
 * its whole URL, else sim.auth_url's path + the token route. */
char *
gw_upstream_uri(struct gw_req *r)
{
	const struct evhttp_uri *cu = evhttp_request_get_evhttp_uri(r->req);
	const char *q = cu ? evhttp_uri_get_query(cu) : NULL;
	const char *base = tg_upstream_base_path(gw_req_upstream(r)), *path = r->path;
	char *expanded = NULL, *uri;
	size_t bl = strlen(base), pl, n;

	if (r->op == TG_OP_SIM_TOKEN && r->svc->cfg->token_url != NULL)
		path = *base ? "" : "/";
	else if (r->m.route != NULL &&
	    (expanded = tg_route_expand(r->svc->cfg->routes[r->m.route->op], &r->m)) != NULL)
		path = expanded;
	pl = strlen(path);
	/* one allocation, no printf: base, path, then '?' and the query */
	uri = tg_xmalloc(bl + pl + (q != NULL ? strlen(q) : 0) + 2);
	memcpy(uri, base, bl);
	memcpy(uri + bl, path, pl);
	n = bl + pl;
	if (forward_query(q != NULL ? q : "", r->drop_query, uri + n + 1) > 0)
		uri[n] = '?';
	else
		uri[n] = '\0';
	free(expanded);
	return uri;
}

void
gw_req_proxy(struct gw_req *r)
{
	struct gw_vcall_req q;
	struct gw_trace t;

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
	gw_trace_of_req(&t, r);
	q.trace = &t;
	q.token_endpoint = gw_req_upstream(r) != r->svc->api;
	r->up_t0 = tg_clock_mono_ms();
	r->call = gw_vcall_start(&q, &call_cbs, r);
}


void
gw_req_continue(struct gw_req *r)
{
	if (gw_feat_request(r) != 0)
		return;		/* a later feature answers */
	gw_req_proxy(r);
}

void
gw_req_done_continue(struct gw_req *r)
{
	answered(r, NULL, TG_UP_OK);
}

void
gw_req_validated(struct gw_req *r)
{
	if (NOPFEAT_ANY(r) && gw_feat_request(r) != 0)
		return;		/* a feature answers */
	gw_req_proxy(r);
}

