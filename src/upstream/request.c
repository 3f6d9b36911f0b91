/*
 * request.c - one upstream request from tg_upstream_send to on_done: the
 * evhttp request built for each attempt, libevent's callbacks mapped to
 * on_head / on_body / on_done, the outcome of a failed attempt (failover,
 * one retry, or the error), the queue deadline's TG_UP_BUSY, and pause /
 * resume / cancel. Called by the pool's pump (tg_upstream_req_start) and by the
 * users of upstream.h.
 *
 * libevent reports failures three ways: a done callback with response code
 * 0 (connect failed or timed out, no error callback), an error callback
 * followed by a done callback with NULL, or nothing at all when we dropped
 * the connection ourselves. So the outcome is judged from what the
 * connection saw (established, sent, got_bytes; see pool.c), not from
 * libevent's error code alone.
 *
 * A user callback may cancel its request; the request is then freed when
 * the outermost of our frames returns (hold/release), never under it.
 *
 * Log lines about a request name it by its own X-Request-Id and trace id
 * (request_id, trace_id: what its caller put in its headers), looked up
 * only when a line is written.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/bufferevent_ssl.h>
#include <event2/util.h>

#include "tidegate/clock.h"
#include "tidegate/hblock.h"
#include "tidegate/ids.h"
#include "tidegate/log.h"
#include "up.h"

static void
hold(struct tg_up_req *r)
{
	r->depth++;
}

/* Free r if it is over and no frame of ours still uses it; r may be
 * gone after this returns. */
static void
release(struct tg_up_req *r)
{
	if (--r->depth == 0 && (r->done || r->cancelled))
		tg_upstream_req_free(r);
}

static int
idempotent(enum evhttp_cmd_type m)
{
	return m == EVHTTP_REQ_GET || m == EVHTTP_REQ_HEAD || m == EVHTTP_REQ_PUT ||
	    m == EVHTTP_REQ_DELETE || m == EVHTTP_REQ_OPTIONS;
}

void
tg_upstream_req_ids(const struct tg_up_req *r, struct up_req_ids *ids)
{
	ids->rid = r != NULL ? evhttp_find_header(&r->headers, "X-Request-Id") : NULL;
	(void)tg_id_trace_of(r != NULL ? evhttp_find_header(&r->headers, "traceparent") : NULL,
	    ids->trace);
}

/* Path for logs: the query may carry credentials. */
static void
log_path(const struct tg_up_req *r, char *buf, size_t len)
{
	snprintf(buf, len, "%.*s", (int)strcspn(r->uri, "?"), r->uri);
}

static void
complete(struct tg_up_req *r, enum tg_up_error err)
{
	if (r->cancelled || r->done)
		return;
	r->done = 1;
	if (r->kick != NULL)
		event_del(r->kick);
	r->cbs.on_done(r, err, r->arg);
}

static void
deliver_body(struct tg_up_req *r)
{
	if (r->cbs.on_body != NULL)
		r->cbs.on_body(r, r->in, r->arg);
	else
		evbuffer_drain(r->in, evbuffer_get_length(r->in));
}

/* Hand over what is buffered, then finish once the response is complete
 * and nothing is held back by a pause. Caller holds r. */
static void
deliver(struct tg_up_req *r)
{
	if (!r->paused && !r->cancelled && evbuffer_get_length(r->in) > 0)
		deliver_body(r);
	if (r->finished && !r->cancelled && !r->done &&
	    (!r->paused || evbuffer_get_length(r->in) == 0))
		complete(r, TG_UP_OK);
}

/* Logged when the refusal takes effect (from the loop, or a cancel before
 * it), not in tg_upstream_send: the caller adds its headers, the request
 * id among them, after send returns. Once. */
static void
log_refused(struct tg_up_req *r)
{
	struct up_req_ids ids;

	if (r->refused != 1)
		return;
	r->refused = 2;
	tg_upstream_req_ids(r, &ids);
	tg_log(TG_LOG_WARN, "upstream_target_refused", TG_LS("origin", r->o->name),
	    TG_LS("reason", r->detail), UP_IDS(ids));
}

static void
on_req_kick(evutil_socket_t fd, short what, void *arg)
{
	struct tg_up_req *r = arg;

	hold(r);
	if (r->refused) {
		log_refused(r);
		complete(r, TG_UP_BAD_TARGET);
	}
	else if (r->down)
		complete(r, TG_UP_DOWN);
	else
		deliver(r);
	release(r);
}

static void
kick(struct tg_up_req *r)
{
	if (r->kick == NULL)
		r->kick = event_new(r->u->base, -1, 0, on_req_kick, r);
	event_active(r->kick, EV_TIMEOUT, 0);
}

static enum tg_up_error
classify(const struct up_conn *c)
{
	if (c->timed_out || (c->has_lerr && c->lerr == EVREQ_HTTP_TIMEOUT))
		return TG_UP_TIMEOUT;
	if (!c->sent)
		return TG_UP_CONNECT;
	if (c->has_lerr && (c->lerr == EVREQ_HTTP_INVALID_HEADER ||
	    c->lerr == EVREQ_HTTP_DATA_TOO_LONG))
		return TG_UP_PROTOCOL;
	return TG_UP_RESET;
}

/* Returns TG_UP_TLS when the handshake is what failed, else err. */
static enum tg_up_error
describe(struct tg_up_req *r, const struct up_conn *c, enum tg_up_error err)
{
	struct up_origin *o = c->o;
	int dns = bufferevent_socket_get_dns_error(c->bev);
	struct up_req_ids ids;
	char tls[160];

	if (!c->established && tg_upstream_tls_describe((struct up_conn *)c, tls, sizeof(tls))) {
		snprintf(r->detail, sizeof(r->detail), "TLS with %s: %s", o->hosthdr, tls);
		tg_upstream_req_ids(r, &ids);
		tg_log(TG_LOG_WARN, "upstream_tls_failed", TG_LS("origin", o->name),
		    TG_LS("host", o->hosthdr), TG_LS("reason", tls), UP_IDS(ids));
		return TG_UP_TLS;
	}
	if (dns != 0)
		snprintf(r->detail, sizeof(r->detail), "cannot resolve %s: %s", o->host,
		    evutil_gai_strerror(dns));
	else if (err == TG_UP_TIMEOUT)
		snprintf(r->detail, sizeof(r->detail), c->established ?
		    "no answer from %s within %lld ms" : "connect to %s timed out after %lld ms",
		    o->hosthdr, (long long)(c->established ? o->u->opts.read_timeout_ms :
		    o->u->opts.connect_timeout_ms));
	else if (err == TG_UP_CONNECT)
		snprintf(r->detail, sizeof(r->detail), c->established ?
		    "connection to %s closed before the request was sent" :
		    "cannot connect to %s", o->hosthdr);
	else
		snprintf(r->detail, sizeof(r->detail), "%s from %s", err == TG_UP_PROTOCOL ?
		    "malformed response" : "connection closed mid-exchange", o->hosthdr);
	return err;
}

static enum tg_up_why
why_of(enum tg_up_error err)
{
	switch (err) {
	case TG_UP_TIMEOUT:
		return TG_UP_WHY_TIMEOUT;
	case TG_UP_TLS:
		return TG_UP_WHY_TLS;
	case TG_UP_CONNECT:
		return TG_UP_WHY_CONNECT;
	default:
		return TG_UP_WHY_RESET;
	}
}

/* The origin r may try next after failing on its own (why), or NULL: the
 * other one in service, r not there yet, and, once r was sent, the budget
 * (a request the origin never got costs it nothing). */
static struct up_origin *
failover_target(struct tg_up_req *r, int sent)
{
	struct up_origin *x;

	if (r->probe || r->failed_over || (x = tg_upstream_other(r->o)) == NULL)
		return NULL;
	return !sent || tg_upstream_budget_ok(r->u) ? x : NULL;
}

static void
fail_over(struct tg_up_req *r, struct up_origin *x, enum tg_up_why why)
{
	struct up_req_ids ids;
	char path[128];

	log_path(r, path, sizeof(path));
	tg_upstream_req_ids(r, &ids);
	tg_log(TG_LOG_INFO, "upstream_failover", TG_LS("origin", r->o->name),
	    TG_LS("to", x->name), TG_LS("path", path), TG_LS("why", tg_up_why_str(why)),
	    TG_LS("reason", r->detail), UP_IDS(ids));
	r->failed_over = 1;
	r->fresh = 0;
	r->why = (int)why;
	r->u->failovers++;
	r->o->h.failovers[why]++;
	tg_upstream_budget_take(r);
	tg_upstream_enqueue(x, r, 1);
}

/*
 * Nothing came back on this attempt. With two origins, the other one (in
 * service) gets it once: any request that was not sent, an idempotent one
 * after a reset or a timeout. Else one retry on a fresh connection of the
 * same origin for idempotent requests, or any request that provably was
 * not sent; timeouts are not retried there (the caller's time is spent and
 * a slow upstream should not get twice the load), nor rejected
 * certificates (they do not heal in a millisecond).
 */
static void
attempt_failed(struct tg_up_req *r, enum tg_up_error err, int stale, int sent,
    int retryable)
{
	struct tg_upstream *u = r->u;
	struct up_origin *x;
	struct up_req_ids ids;
	char path[128];

	log_path(r, path, sizeof(path));
	tg_upstream_req_ids(r, &ids);
	if (stale)
		r->sent_us = 0;	/* the kept-alive socket's, not the vendor's time */
	tg_upstream_lat_end(r);
	if (!r->probe && !stale)
		tg_upstream_health_fail(r->o, r->detail);
	if (!r->head && !r->got_bytes) {
		if (!stale && (!sent || idempotent(r->method)) &&
		    (x = failover_target(r, sent)) != NULL) {
			fail_over(r, x, why_of(err));
			return;
		}
		if (retryable && !r->retried && !r->probe && !r->failed_over &&
		    err != TG_UP_TIMEOUT && (idempotent(r->method) || !sent)) {
			r->retried = 1;
			r->fresh = 1;
			r->why = (int)why_of(err);
			u->retries++;
			r->o->h.retries[why_of(err)]++;
			tg_log(TG_LOG_INFO, "upstream_retry", TG_LS("origin", r->o->name),
			    TG_LS("path", path), TG_LS("reason", r->detail), UP_IDS(ids));
			tg_upstream_enqueue(r->o, r, 1);
			return;
		}
	}
	tg_log(r->probe ? TG_LOG_DEBUG : TG_LOG_WARN, "upstream_failed",
	    TG_LS("origin", r->o->name), TG_LS("path", path),
	    TG_LS("error", tg_up_error_str(err)), TG_LS("reason", r->detail), UP_IDS(ids));
	hold(r);
	complete(r, err);
	release(r);
}

static void
failure(struct tg_up_req *r, struct up_conn *c)
{
	enum tg_up_error err = classify(c);
	int established = c->established, sent = c->sent;
	/* A kept-alive connection the origin had closed: not the origin's
	 * failure; a fresh connection to it is tried first. */
	int stale = c->nreq > 0 && err != TG_UP_TIMEOUT && !r->got_bytes && !r->head;

	err = describe(r, c, err);
	tg_upstream_req_unbind(r);
	tg_upstream_conn_kill(c);
	if (!established)
		r->u->connect_errors++;
	attempt_failed(r, err, stale, sent, c->tls_verify_err == 0);
}

/* The connection can carry another request only if the body's end was
 * framed (length, chunked, or no body at all), not marked by a close. */
static int
reusable(const struct tg_up_req *r, const struct evkeyvalq *h)
{
	const char *te;

	if (r->method == EVHTTP_REQ_HEAD || r->status == 204 || r->status == 304)
		return 1;
	if (tg_header_find(h, "Content-Length") != NULL)
		return 1;	/* the common case: one search */
	te = tg_header_find(h, "Transfer-Encoding");
	return te != NULL && strcasecmp(te, "chunked") == 0;
}

static void
success(struct tg_up_req *r, struct up_conn *c, struct evhttp_request *ereq)
{
	tg_upstream_req_unbind(r);
	tg_upstream_conn_release(c, reusable(r, evhttp_request_get_input_headers(ereq)));
	r->finished = 1;
	hold(r);
	deliver(r);
	release(r);
}

static void
on_req_error(enum evhttp_request_error e, void *arg)
{
	struct up_conn *c = arg;

	c->lerr = e;
	c->has_lerr = 1;
}

static void
on_req_done(struct evhttp_request *ereq, void *arg)
{
	struct up_conn *c = arg;
	struct tg_up_req *r = c->r;

	if (r == NULL) {
		tg_upstream_conn_kill(c);
		return;
	}
	if (ereq != NULL && evhttp_request_get_response_code(ereq) > 0 && !c->has_lerr &&
	    r->head)
		success(r, c, ereq);
	else
		failure(r, c);
}

static void
copy_headers(struct evkeyvalq *dst, const struct evkeyvalq *src)
{
	struct evkeyval *kv;

	TAILQ_FOREACH(kv, src, next)
		evhttp_add_header(dst, kv->key, kv->value);
}

/* A 502, 503 or 504 of o: a failure of o (a 503's Retry-After keeps it
 * out); an idempotent request goes to the other origin, this answer
 * dropped unseen (1: r is off c, which is closed). */
static int
gateway_error(struct tg_up_req *r, struct up_conn *c, int code, const struct evkeyvalq *h)
{
	const char *ra = code == 503 ? evhttp_find_header(h, "Retry-After") : NULL;
	enum tg_up_why why = code == 502 ? TG_UP_WHY_502 : code == 503 ? TG_UP_WHY_503 :
	    TG_UP_WHY_504;
	struct up_origin *x;
	char *end;
	long s;

	snprintf(r->detail, sizeof(r->detail), "%s answered %d", r->o->hosthdr, code);
	tg_upstream_health_fail(r->o, r->detail);
	if (ra != NULL && (s = strtol(ra, &end, 10)) > 0 && *end == '\0')
		tg_upstream_health_avoid(r->o, s);
	if (!idempotent(r->method) || (x = failover_target(r, 1)) == NULL) {
		r->detail[0] = '\0';
		return 0;	/* relayed as it is */
	}
	tg_upstream_req_unbind(r);
	tg_upstream_conn_kill(c);
	fail_over(r, x, why);
	return 1;
}

static int
on_req_head(struct evhttp_request *ereq, void *arg)
{
	struct up_conn *c = arg;
	struct tg_up_req *r = c->r;
	int code = evhttp_request_get_response_code(ereq), alive;
	struct evkeyvalq *h;

	if (r == NULL)
		return -1;
	if (code == 100)
		return 0;
	tg_upstream_lat_end(r);
	if (!r->probe && (code == 502 || code == 503 || code == 504)) {
		if (gateway_error(r, c, code, evhttp_request_get_input_headers(ereq)))
			return -1;	/* libevent drops the connection */
	} else if (!r->probe) {
		tg_upstream_health_ok(r->o);
	}
	r->head = 1;
	r->status = code;
	/* libevent's own list, borrowed for the callback; a fetch, which
	 * hands the head over with the body at the end, keeps a copy. */
	h = evhttp_request_get_input_headers(ereq);
	if (r->fetch != NULL)
		copy_headers(&r->resp_headers, h);
	hold(r);
	if (r->cbs.on_head != NULL)
		r->cbs.on_head(r, code, h, r->arg);
	alive = c->r == r;
	if (alive && r->paused)
		bufferevent_disable(c->bev, EV_READ);
	release(r);
	/* A cancel in on_head: -1 makes libevent drop the connection now. */
	return alive ? 0 : -1;
}

static void
on_req_body(struct evhttp_request *ereq, void *arg)
{
	struct up_conn *c = arg;
	struct tg_up_req *r = c->r;

	if (r == NULL)
		return;
	/* Moved, not copied; what the consumer leaves stays for next time. */
	evbuffer_add_buffer(r->in, evhttp_request_get_input_buffer(ereq));
	if (r->paused)
		return;
	hold(r);
	deliver_body(r);
	release(r);
}

/* The fallback may live under another base path than the primary: the
 * target rewritten into *own (the caller frees it), else r's own. */
static const char *
uri_for(const struct tg_up_req *r, char **own)
{
	const char *pb = r->u->origin[0].base_path;
	size_t n = strlen(pb);

	*own = NULL;
	if (r->o == &r->u->origin[0] || strcmp(pb, r->o->base_path) == 0 ||
	    strncmp(r->uri, pb, n) != 0)
		return r->uri;
	return *own = tg_xconcat(r->o->base_path, r->uri + n, NULL);
}

/* Host and Content-Length: the pool's, never a caller's. */
static int
set_here(const char *name)
{
	switch (name[0] | 0x20) {
	case 'h':
		return strcasecmp(name, "Host") == 0;
	case 'c':
		return strcasecmp(name, "Content-Length") == 0;
	}
	return 0;
}

static struct evhttp_request *
build(struct tg_up_req *r, struct up_conn *c)
{
	struct evhttp_request *ereq = evhttp_request_new(on_req_done, c);
	struct evkeyval *kv;
	struct tg_hblock b;

	evhttp_request_set_header_cb(ereq, on_req_head);
	evhttp_request_set_chunked_cb(ereq, on_req_body);
	evhttp_request_set_error_cb(ereq, on_req_error);
	/* One block, one write (hblock.h): Content-Length first, as the
	 * block's key, where libevent looks for it (it adds its own to a POST
	 * or PUT without one), then Host, then the caller's headers. */
	tg_hblock_init(&b);
	if (r->body != NULL) {
		/* By reference: no copy of a large body, and the caller's
		 * buffer is intact for a retry. */
		evbuffer_add_buffer_reference(evhttp_request_get_output_buffer(ereq), r->body);
		tg_hblock_add_u64(&b, "Content-Length", evbuffer_get_length(r->body));
	} else if (r->seg != NULL) {
		/* The first bytes behind the head, the rest as they leave
		 * (filebody.c): never the whole file in memory. */
		tg_up_body_first(r, evhttp_request_get_output_buffer(ereq));
		tg_hblock_add_u64(&b, "Content-Length", (uint64_t)r->seglen);
	}
	tg_hblock_add(&b, "Host", r->o->hosthdr);
	TAILQ_FOREACH(kv, &r->headers, next)
		if (!set_here(kv->key))
			tg_hblock_add(&b, kv->key, kv->value);
	tg_hblock_attach(&b, evhttp_request_get_output_headers(ereq));
	return ereq;
}

void
tg_upstream_req_start(struct tg_up_req *r, struct up_conn *c)
{
	struct evhttp_request *ereq = build(r, c);
	char *own;
	const char *uri = uri_for(r, &own);
	/* Up and kept alive: evhttp only puts the request in its output
	 * (on_output notes the bytes) and runs no callback that can end r
	 * or c, so c may be written at once afterwards. */
	int up = c->established && !c->closed;
	int rc;

	tg_upstream_req_bind(r, c);
	c->sent = 0;
	c->has_lerr = 0;
	tg_upstream_lat_start(r);
	/* Callbacks may run (and finish r) before this returns: r and c are
	 * not touched afterwards unless libevent refused the request or c
	 * was up (then none can). */
	rc = evhttp_make_request(c->evcon, ereq, r->method, uri);	/* copies uri */
	free(own);
	if (rc != 0) {
		evhttp_request_free(ereq);
		failure(r, c);
	} else if (up) {
		tg_upstream_conn_write_now(c);
	}
}

void
tg_upstream_req_fail_start(struct tg_up_req *r)
{
	snprintf(r->detail, sizeof(r->detail), "cannot set up a connection to %s",
	    r->o->hosthdr);
	r->u->connect_errors++;
	attempt_failed(r, TG_UP_CONNECT, 0, 0, 1);	/* never connected: not stale */
}

void
tg_upstream_req_connect_timeout(struct up_conn *c)
{
	failure(c->r, c);
}

void
tg_upstream_req_expire(struct tg_up_req *r)
{
	struct tg_upstream *u = r->u;
	struct up_origin *o = r->o;
	int64_t waited = tg_clock_mono_ms() - r->queued_at;
	struct up_req_ids ids;
	char path[128];

	/* An owner whose cap is the whole pool is held back by the pool. */
	tg_upstream_gate_count(r);
	if (r->gate_ahead_ms > 0)
		snprintf(r->detail, sizeof(r->detail), "the vendor's budget (a pause it asked "
		    "for, a rate or a concurrency limit) holds calls back for %lld ms more, "
		    "past pool.queue_timeout: not sent", (long long)r->gate_ahead_ms);
	else if (r->gate_held)
		snprintf(r->detail, sizeof(r->detail), "the vendor's budget (a rate, a "
		    "concurrency limit or a pause it asked for) held it back for %lld ms",
		    (long long)waited);
	else if (tg_upstream_owner_capped(r, o) && r->w->busy[o->index] < u->opts.max_conns)
		snprintf(r->detail, sizeof(r->detail), "its caller holds %zu of the %zu "
		    "connections, the most one caller may hold, and none came free within %lld ms",
		    r->w->busy[o->index], u->opts.max_conns, (long long)waited);
	else
		snprintf(r->detail, sizeof(r->detail), "all %zu connections are busy and none "
		    "came free within %lld ms", u->opts.max_conns, (long long)waited);
	tg_upstream_dequeue(r);
	r->w->timeouts++;
	u->queue_timeouts++;
	u->class_timeouts[r->klass]++;
	log_path(r, path, sizeof(path));
	tg_upstream_req_ids(r, &ids);
	tg_log(TG_LOG_WARN, "upstream_busy", TG_LS("origin", o->name), TG_LS("path", path),
	    TG_LS("owner", r->w->name), TG_LS("reason", r->detail), UP_IDS(ids));
	hold(r);
	complete(r, TG_UP_BUSY);
	release(r);
}

struct evkeyvalq *
tg_up_req_headers(struct tg_up_req *r)
{
	return &r->headers;
}

/*
 * Defence in depth: evhttp copies the target into the request line as it
 * is, so a CR or LF there would end the line and start a header of the
 * sender's choosing, and a space would end the target. Whoever built uri
 * (a client's path, a template, an id from a vendor answer), such a
 * request is never sent: it ends with TG_UP_BAD_TARGET from the event
 * loop, as any failure would. Returns 1 when refused.
 */
static int
refuse_target(struct tg_up_req *r)
{
	const unsigned char *p = (const unsigned char *)r->uri;
	size_t i;

	for (i = 0; p[i] > 0x20 && p[i] < 0x7f; i++)
		;
	if (p[i] == '\0')
		return 0;
	snprintf(r->detail, sizeof(r->detail), "request target refused: byte 0x%02X at "
	    "offset %zu (a control character, space or non-ASCII byte)", p[i], i);
	r->refused = 1;		/* logged by log_refused */
	kick(r);
	return 1;
}

struct tg_up_req *
tg_upstream_send(struct tg_upstream *u, enum evhttp_cmd_type method, const char *uri,
    const struct evkeyvalq *headers, struct evbuffer *body, const struct tg_up_cbs *cbs,
    void *arg)
{
	struct tg_up_req *r = tg_xcalloc(1, sizeof(*r));
	struct up_origin *o;

	r->u = u;
	r->method = method;
	r->uri = tg_xstrdup(uri);
	TAILQ_INIT(&r->headers);
	TAILQ_INIT(&r->resp_headers);
	if (headers != NULL)
		copy_headers(&r->headers, headers);
	r->body = body;
	r->cbs = *cbs;
	r->arg = arg;
	r->in = evbuffer_new();
	r->o = &u->origin[0];
	r->w = u->untagged;
	r->why = -1;
	TAILQ_INSERT_TAIL(&u->live, r, lentry);
	u->requests++;
	u->nlive++;
	/* Started by the pump: no callback runs before send returns. */
	if (refuse_target(r))
		return r;
	if ((o = tg_upstream_route(u, r)) == NULL) {
		r->down = 1;	/* every origin out: fail fast, from the loop */
		u->down++;
		kick(r);
		return r;
	}
	tg_upstream_enqueue(o, r, 0);
	return r;
}

struct tg_up_req *
tg_upstream_send_file(struct tg_upstream *u, enum evhttp_cmd_type method, const char *uri,
    const struct evkeyvalq *headers, int fd, int64_t len, const struct tg_up_cbs *cbs,
    void *arg)
{
	struct evbuffer_file_segment *seg;
	struct tg_up_req *r;

	if (fd < 0 || len < 0 || (seg = evbuffer_file_segment_new(fd, 0, len, 0)) == NULL)
		return NULL;
	/* Nothing starts before the pump runs, so the segment is in place. */
	r = tg_upstream_send(u, method, uri, headers, NULL, cbs, arg);
	r->seg = seg;
	r->seglen = len;
	r->fd = fd;
	return r;
}

void
tg_upstream_req_free(struct tg_up_req *r)
{
	struct up_conn *c;

	tg_upstream_dequeue(r);
	if (r->gated)
		tg_upstream_gate_put(r, 0);
	if ((c = tg_upstream_req_unbind(r)) != NULL)
		tg_upstream_conn_kill(c);
	TAILQ_REMOVE(&r->u->live, r, lentry);
	if (!r->probe)
		r->u->nlive--;
	if (r->retrying)
		r->u->nretrying--;
	free(r->uri);
	evhttp_clear_headers(&r->headers);
	evhttp_clear_headers(&r->resp_headers);
	evbuffer_free(r->in);
	if (r->kick != NULL)
		event_free(r->kick);
	if (r->fetch_free != NULL)
		r->fetch_free(r->fetch);
	if (r->seg != NULL)
		evbuffer_file_segment_free(r->seg);
	free(r);
}

void
tg_up_req_pause(struct tg_up_req *r)
{
	if (r == NULL || r->done || r->cancelled || r->paused)
		return;
	r->paused = 1;
	/* Before the head evhttp turns reading on itself; on_req_head
	 * applies the pause then. */
	if (r->c != NULL && r->head)
		bufferevent_disable(r->c->bev, EV_READ);
}

void
tg_up_req_resume(struct tg_up_req *r)
{
	if (r == NULL || r->done || r->cancelled || !r->paused)
		return;
	r->paused = 0;
	if (r->c != NULL && r->head)
		bufferevent_enable(r->c->bev, EV_READ);
	/* Not from here: resume may be called from inside on_body. */
	if (evbuffer_get_length(r->in) > 0 || r->finished)
		kick(r);
}

void
tg_up_req_cancel(struct tg_up_req *r)
{
	struct up_conn *c;

	if (r == NULL || r->cancelled || r->done)
		return;
	log_refused(r);
	r->cancelled = 1;
	tg_upstream_dequeue(r);
	/* Never reused with a half-read response: closed, and its slot (and
	 * the owner's) goes to the next request in the queue. */
	if ((c = tg_upstream_req_unbind(r)) != NULL)
		tg_upstream_conn_kill(c);
	if (r->kick != NULL)
		event_del(r->kick);
	if (r->depth == 0)
		tg_upstream_req_free(r);
}

const char *
tg_up_req_origin(const struct tg_up_req *r)
{
	return r->o->name;
}

const char *
tg_up_req_detail(const struct tg_up_req *r)
{
	return r->detail;
}

int64_t
tg_up_req_held_ms(const struct tg_up_req *r)
{
	return r->gate_ahead_ms;
}

const char *
tg_up_req_why(const struct tg_up_req *r)
{
	return r->why >= 0 ? tg_up_why_str((enum tg_up_why)r->why) : NULL;
}

int
tg_up_req_retry_after(const struct tg_up_req *r)
{
	return r->down ? r->retry_after : 0;
}

/* ---- health probes (health.c) ---- */

static void
on_probe_done(struct tg_up_req *r, enum tg_up_error err, void *arg)
{
	tg_upstream_probe_done(r, err == TG_UP_OK ? r->status : 0);
}

static struct tg_up_req *
probe_send(struct up_origin *o)
{
	static const struct tg_up_cbs cbs = { NULL, NULL, on_probe_done };
	struct tg_upstream *u = o->u;
	struct tg_up_req *r = tg_xcalloc(1, sizeof(*r));

	r->u = u;
	r->probe = 1;
	r->method = EVHTTP_REQ_GET;
	r->uri = tg_xstrdup(u->opts.probe_path);
	TAILQ_INIT(&r->headers);
	TAILQ_INIT(&r->resp_headers);
	evhttp_add_header(&r->headers, "User-Agent", "tidegate-probe");
	r->cbs = cbs;
	r->in = evbuffer_new();
	r->o = o;
	r->w = u->untagged;
	r->why = -1;
	r->fresh = 1;
	TAILQ_INSERT_TAIL(&u->live, r, lentry);
	tg_upstream_enqueue(o, r, 1);
	return r;
}

void
tg_upstream_on_probe(evutil_socket_t fd, short what, void *arg)
{
	struct up_origin *o = arg;

	if (tg_upstream_probe_due(o))
		o->h.probing = probe_send(o);
}

const char *
tg_up_error_str(enum tg_up_error err)
{
	switch (err) {
	case TG_UP_OK: return "ok";
	case TG_UP_CONNECT: return "connect";
	case TG_UP_TIMEOUT: return "timeout";
	case TG_UP_RESET: return "reset";
	case TG_UP_PROTOCOL: return "protocol";
	case TG_UP_TOO_LARGE: return "too_large";
	case TG_UP_BAD_TARGET: return "bad_target";
	case TG_UP_BUSY: return "busy";
	case TG_UP_TLS: return "tls";
	case TG_UP_DOWN: return "down";
	}
	return "unknown";
}
