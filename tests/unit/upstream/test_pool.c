/*
 * test_pool.c - the upstream pool against in-process evhttp servers on
 * 127.0.0.1 (plain and TLS, same event loop): keep-alive reuse, the
 * max_conns limit with FIFO queueing, the idempotent retry, failover to
 * the fallback origin, read and connect timeouts, a malformed answer,
 * streaming 50 MB with pause/resume, cancel mid-stream, fetch's max_body,
 * and TLS verification (good chain, wrong host, unknown CA) with throwaway
 * certificates made by the openssl CLI in a temporary directory; file
 * bodies (tg_upstream_send_file) and the connect-address override;
 * targets with CTLs or spaces refused before anything is sent (the log
 * line naming the request id added after send); owner
 * tags (the per-owner cap, FIFO among the owners under it, untagged
 * requests never capped), the queue deadline (TG_UP_BUSY, nothing sent)
 * and a cancel giving the connection and the owner's slot back.
 */
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/ssl.h>

#include "tidegate/clock.h"
#include "tidegate/http.h"
#include "tidegate/log.h"
#include "tidegate/upstream.h"
#include "harness.h"

#define BIG_TOTAL	(50u * 1024 * 1024)
#define BIG_CHUNK	(64u * 1024)
#define SINK_HIGH	(2u * 1024 * 1024)

/* One streamed response of the server (one at a time). */
struct stream {
	struct evhttp_request *req;
	size_t sent;
	int active;
};

/* Replies held back by /slow. */
struct held {
	struct evhttp_request *req;
	struct event *ev;
};

static struct {
	char dir[64];			/* certificates, made once */
	struct event_base *base;
	struct evdns_base *dns;
	struct event *ticker;
	struct evhttp *http;
	int port;
	SSL_CTX *sctx;			/* server side of the TLS tests */
	int conns;			/* connections the server accepted */
	int cur, max_cur;		/* /slow requests in progress */
	int order[16], norder;
	int drop_hits, drop_post_hits;
	int ok_hits, hang_hits;
	struct stream st;
} T;

/* ---- the server ---- */

static void
pattern(unsigned char *p, size_t n, size_t off)
{
	size_t i;

	for (i = 0; i < n; i++)
		p[i] = (unsigned char)((off + i) % 251);
}

static void
reply_text(struct evhttp_request *req, int status, const char *text)
{
	struct evbuffer *b = evbuffer_new();

	evbuffer_add_printf(b, "%s", text);
	evhttp_send_reply(req, status, "OK", b);
	evbuffer_free(b);
}

static void
on_held(evutil_socket_t fd, short what, void *arg)
{
	struct held *h = arg;

	T.cur--;
	reply_text(h->req, 200, "slow");
	event_free(h->ev);
	free(h);
}

static void
h_slow(struct evhttp_request *req)
{
	struct held *h = calloc(1, sizeof(*h));
	struct timeval tv = { 0, 50000 };
	char *i = tg_http_query(req, "i");

	if (T.norder < 16)
		T.order[T.norder++] = atoi(i);
	free(i);
	if (++T.cur > T.max_cur)
		T.max_cur = T.cur;
	h->req = req;
	h->ev = evtimer_new(T.base, on_held, h);
	evtimer_add(h->ev, &tv);
}

static void
on_drop(evutil_socket_t fd, short what, void *arg)
{
	evhttp_connection_free(arg);
}

/* Close the connection without answering, outside libevent's callback. */
static void
h_drop(struct evhttp_request *req, int *hits)
{
	struct timeval zero = { 0, 0 };

	if ((*hits)++ == 0)
		event_base_once(T.base, -1, EV_TIMEOUT, on_drop,
		    evhttp_request_get_connection(req), &zero);
	else
		reply_text(req, 200, "second");
}

static void stream_next(struct stream *s);

static void
on_chunk_written(struct evhttp_connection *evcon, void *arg)
{
	stream_next(arg);
}

/* Next chunk only once the previous one left for the kernel: the server
 * never buffers more than one chunk, so the client's pause is what stops it. */
static void
stream_next(struct stream *s)
{
	unsigned char buf[BIG_CHUNK];
	struct evbuffer *b;
	size_t n = BIG_TOTAL - s->sent < BIG_CHUNK ? BIG_TOTAL - s->sent : BIG_CHUNK;

	if (!s->active)
		return;
	if (n == 0) {
		s->active = 0;
		evhttp_send_reply_end(s->req);
		return;
	}
	pattern(buf, n, s->sent);
	b = evbuffer_new();
	evbuffer_add(b, buf, n);
	s->sent += n;
	evhttp_send_reply_chunk_with_cb(s->req, b, on_chunk_written, s);
	evbuffer_free(b);
}

static void
on_stream_abandoned(evutil_socket_t fd, short what, void *arg)
{
	evhttp_send_reply_end(arg);	/* detached from its connection: frees it */
}

/* The client went away mid-stream: libevent detaches the request from the
 * connection and leaves it to us to end. */
static void
on_stream_close(struct evhttp_connection *evcon, void *arg)
{
	struct stream *s = arg;
	struct timeval zero = { 0, 0 };

	if (!s->active)
		return;
	s->active = 0;
	event_base_once(T.base, -1, EV_TIMEOUT, on_stream_abandoned, s->req, &zero);
}

static void
h_big(struct evhttp_request *req)
{
	T.st.req = req;
	T.st.sent = 0;
	T.st.active = 1;
	evhttp_connection_set_closecb(evhttp_request_get_connection(req), on_stream_close, &T.st);
	evhttp_send_reply_start(req, 200, "OK");
	stream_next(&T.st);
}

static void
h_sized(struct evhttp_request *req, int chunked)
{
	unsigned char buf[100 * 1024];
	struct evbuffer *b = evbuffer_new();

	pattern(buf, sizeof(buf), 0);
	evbuffer_add(b, buf, sizeof(buf));
	if (chunked) {
		evhttp_send_reply_start(req, 200, "OK");
		evhttp_send_reply_chunk(req, b);
		evhttp_send_reply_end(req);
	} else
		evhttp_send_reply(req, 200, "OK", b);
	evbuffer_free(b);
}

static void
on_server(struct evhttp_request *req, void *arg)
{
	const char *path = tg_http_path(req), *host = tg_http_header(req, "Host");
	char len[32];

	if (strcmp(path, "/ok") == 0) {
		T.ok_hits++;
		reply_text(req, 200, host ? host : "-");
	}
	else if (strcmp(path, "/len") == 0) {
		snprintf(len, sizeof(len), "%zu",
		    evbuffer_get_length(evhttp_request_get_input_buffer(req)));
		reply_text(req, 200, len);
	} else if (strcmp(path, "/slow") == 0)
		h_slow(req);
	else if (strcmp(path, "/drop") == 0)
		h_drop(req, evhttp_request_get_command(req) == EVHTTP_REQ_POST ?
		    &T.drop_post_hits : &T.drop_hits);
	else if (strcmp(path, "/hang") == 0)
		T.hang_hits++;	/* never answered; freed with the server */
	else if (strcmp(path, "/big") == 0)
		h_big(req);
	else if (strcmp(path, "/sized") == 0 || strcmp(path, "/chunked") == 0)
		h_sized(req, path[1] == 'c');
	else if (strcmp(path, "/close") == 0) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
		reply_text(req, 200, "bye");
	} else
		reply_text(req, 404, "none");
}

static struct bufferevent *
on_accept(struct event_base *base, void *arg)
{
	T.conns++;
	if (T.sctx != NULL)
		return bufferevent_openssl_socket_new(base, -1, SSL_new(T.sctx),
		    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
	return bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
}

/* (Re)start the server, over TLS with cert/key from T.dir when name is set. */
static void
server_start(const char *name)
{
	struct tg_err err;
	char cert[128], key[128];

	if (name != NULL) {
		snprintf(cert, sizeof(cert), "%s/%s.pem", T.dir, name);
		snprintf(key, sizeof(key), "%s/%s.key", T.dir, name);
		T.sctx = SSL_CTX_new(TLS_server_method());
		assert_int_equal(SSL_CTX_use_certificate_chain_file(T.sctx, cert), 1);
		assert_int_equal(SSL_CTX_use_PrivateKey_file(T.sctx, key, SSL_FILETYPE_PEM), 1);
	}
	T.http = tg_http_listen(T.base, "127.0.0.1:0", 64 << 20, &T.port, &err);
	assert_non_null(T.http);
	evhttp_set_bevcb(T.http, on_accept, NULL);
	evhttp_set_gencb(T.http, on_server, NULL);
}

/* ---- harness ---- */

static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
}

static int
setup(void **state)
{
	struct timeval tv = { 0, 5000 };
	char *dir = T.dir[0] ? strdup(T.dir) : NULL;

	memset(&T, 0, sizeof(T));
	if (dir != NULL) {
		snprintf(T.dir, sizeof(T.dir), "%s", dir);
		free(dir);
	}
	T.base = event_base_new();
	T.dns = evdns_base_new(T.base, 0);
	T.ticker = event_new(T.base, -1, EV_PERSIST, on_tick, NULL);
	event_add(T.ticker, &tv);
	return 0;
}

static int
teardown(void **state)
{
	if (T.http != NULL)
		evhttp_free(T.http);
	SSL_CTX_free(T.sctx);
	event_free(T.ticker);
	evdns_base_free(T.dns, 0);
	event_base_free(T.base);
	T.http = NULL;
	T.sctx = NULL;
	return 0;
}

static struct tg_upstream *
up_new(const char *url, const char *fallback, const struct tg_upstream_opts *opts)
{
	struct tg_upstream *u;
	struct tg_err err;

	u = tg_upstream_new(T.base, T.dns, url, fallback, opts, &err);
	if (u == NULL)
		fail_msg("tg_upstream_new: %s", err.msg);
	return u;
}

static char *
url_of(const char *scheme, int port)
{
	return tg_xasprintf("%s://127.0.0.1:%d", scheme, port);
}

/* A port nothing listens on. */
static int
closed_port(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	close(fd);
	return ntohs(sa.sin_port);
}

/* ---- a client that records what it saw ---- */

struct call {
	int status, done, heads, dones;
	enum tg_up_error err;
	struct evbuffer *body;
	const char *origin;
	char detail[200];
};

static void
on_c_head(struct tg_up_req *r, int status, const struct evkeyvalq *h, void *arg)
{
	struct call *c = arg;

	c->status = status;
	c->heads++;
	c->origin = tg_up_req_origin(r);
}

static void
on_c_body(struct tg_up_req *r, struct evbuffer *buf, void *arg)
{
	struct call *c = arg;

	evbuffer_add_buffer(c->body, buf);
}

static void
on_c_done(struct tg_up_req *r, enum tg_up_error err, void *arg)
{
	struct call *c = arg;

	c->err = err;
	c->done = 1;
	c->dones++;
	snprintf(c->detail, sizeof(c->detail), "%s", tg_up_req_detail(r));
	/* Both must be harmless once the response is complete. */
	tg_up_req_pause(r);
	tg_up_req_resume(r);
	tg_up_req_cancel(r);
}

static const struct tg_up_cbs call_cbs = { on_c_head, on_c_body, on_c_done };

static void
call_init(struct call *c)
{
	memset(c, 0, sizeof(*c));
	c->body = evbuffer_new();
}

static struct tg_up_req *
call_send(struct tg_upstream *u, struct call *c, enum evhttp_cmd_type m, const char *uri,
    struct evbuffer *body)
{
	call_init(c);
	return tg_upstream_send(u, m, uri, NULL, body, &call_cbs, c);
}

static void
call_done(struct call *c)
{
	evbuffer_free(c->body);
}

static char *
body_str(struct call *c)
{
	size_t n = evbuffer_get_length(c->body);
	char *s = tg_xmalloc(n + 1);

	evbuffer_copyout(c->body, s, n);
	s[n] = '\0';
	return s;
}

/* ---- tests ---- */

static void
test_keepalive(void **state)
{
	struct tg_upstream *u;
	struct tg_upstream_stats st;
	struct evkeyvalq h;
	struct call c;
	char *url, *want, *got;
	int i;

	server_start(NULL);
	url = url_of("http", T.port);
	u = up_new(url, NULL, NULL);
	want = tg_xasprintf("127.0.0.1:%d", T.port);
	TAILQ_INIT(&h);
	evhttp_add_header(&h, "Host", "evil.example");
	for (i = 0; i < 10; i++) {
		call_init(&c);
		tg_upstream_send(u, EVHTTP_REQ_GET, "/ok", &h, NULL, &call_cbs, &c);
		assert_true(th_run_until(T.base, &c.done, 1, 3000));
		assert_int_equal(c.err, TG_UP_OK);
		assert_int_equal(c.status, 200);
		got = body_str(&c);
		assert_string_equal(got, want);
		free(got);
		call_done(&c);
	}
	assert_int_equal(T.conns, 1);
	tg_upstream_get_stats(u, &st);
	assert_int_equal(st.idle, 1);
	assert_int_equal(st.busy, 0);
	assert_int_equal(st.requests, 10);
	evhttp_clear_headers(&h);
	free(want);
	free(url);
	tg_upstream_free(u);
}

static void
test_pool_limit_fifo(void **state)
{
	struct tg_upstream_opts o = { .max_conns = 2, .tls_verify = 1 };
	struct tg_upstream_stats st;
	struct tg_upstream *u;
	struct call c[5];
	char *url, uri[32];
	int i, all = 0;

	server_start(NULL);
	url = url_of("http", T.port);
	u = up_new(url, NULL, &o);
	for (i = 0; i < 5; i++) {
		snprintf(uri, sizeof(uri), "/slow?i=%d", i);
		call_send(u, &c[i], EVHTTP_REQ_GET, uri, NULL);
	}
	tg_upstream_get_stats(u, &st);
	assert_int_equal(st.queued, 5);
	while (!all) {
		assert_true(th_run_until(T.base, &c[4].done, 1, 5000));
		tg_upstream_get_stats(u, &st);
		assert_true(st.busy + st.idle <= 2);
		for (all = 1, i = 0; i < 5; i++)
			all &= c[i].done;
	}
	for (i = 0; i < 5; i++) {
		assert_int_equal(c[i].err, TG_UP_OK);
		call_done(&c[i]);
	}
	assert_int_equal(T.conns, 2);
	assert_int_equal(T.max_cur, 2);
	assert_int_equal(T.norder, 5);
	assert_int_equal(T.order[0] + T.order[1], 1);	/* 0 and 1 first, either order */
	assert_int_equal(T.order[2], 2);
	assert_int_equal(T.order[3], 3);
	assert_int_equal(T.order[4], 4);
	free(url);
	tg_upstream_free(u);
}

/* With one connection, the queue starts urgent requests (logins) first,
 * then the gateway's polls, callers' reads, their submissions, each class
 * oldest first, whatever order they came in. */
static void
test_class_order(void **state)
{
	static const enum tg_up_class k[6] = { TG_UP_CLASS_CREATE, TG_UP_CLASS_CREATE,
		TG_UP_CLASS_READ, TG_UP_CLASS_POLL, TG_UP_CLASS_URGENT, TG_UP_CLASS_POLL };
	static const int want[6] = { 0, 4, 3, 5, 2, 1 };
	struct tg_upstream_opts o = { .max_conns = 1, .tls_verify = 1 };
	struct tg_upstream *u;
	struct tg_up_req *r;
	struct call c[6];
	char *url, uri[32];
	int i;

	server_start(NULL);
	url = url_of("http", T.port);
	u = up_new(url, NULL, &o);
	for (i = 0; i < 6; i++) {
		snprintf(uri, sizeof(uri), "/slow?i=%d", i);
		r = call_send(u, &c[i], EVHTTP_REQ_GET, uri, NULL);
		tg_up_req_set_class(r, k[i]);
		if (i == 0)	/* the first holds the one connection */
			assert_true(th_run_until(T.base, &T.norder, 1, 3000));
	}
	assert_true(th_run_until(T.base, &c[1].done, 1, 5000));
	for (i = 0; i < 6; i++) {
		assert_int_equal(c[i].err, TG_UP_OK);
		assert_int_equal(T.order[i], want[i]);
		call_done(&c[i]);
	}
	free(url);
	tg_upstream_free(u);
}

/* A gate that admits `open` requests, then refuses with a wait. */
struct gate_t {
	int open, takes, refusals, puts, unused;
	int64_t queued_ms;
	enum tg_up_class seen[8];
};

static int
g_take(void *arg, enum tg_up_class k, int64_t queued_ms, int64_t *wait_ms)
{
	struct gate_t *g = arg;

	if (g->open == 0) {
		g->refusals++;
		g->queued_ms = queued_ms;
		*wait_ms = 20;
		return 0;
	}
	g->open--;
	if (g->takes < 8)
		g->seen[g->takes] = k;
	g->takes++;
	return 1;
}

static void
g_put(void *arg, enum tg_up_class k, int unused)
{
	struct gate_t *g = arg;

	g->puts++;
	g->unused += unused;
}

/* Urgent requests pass a closed gate; the others wait for it (asked again
 * on the timer), in class order, and each hands back what it took. */
static void
test_gate(void **state)
{
	struct tg_upstream_opts o = { .max_conns = 4, .tls_verify = 1 };
	struct tg_upstream_class_stats cs;
	struct gate_t g = { 0 };
	struct tg_up_gate gate = { g_take, g_put, &g };
	struct tg_upstream *u;
	struct call c[3];
	char *url;
	int never = 0;

	server_start(NULL);
	url = url_of("http", T.port);
	u = up_new(url, NULL, &o);
	tg_upstream_set_gate(u, &gate);
	tg_up_req_set_class(call_send(u, &c[0], EVHTTP_REQ_GET, "/slow?i=0", NULL),
	    TG_UP_CLASS_CREATE);
	tg_up_req_set_class(call_send(u, &c[1], EVHTTP_REQ_GET, "/slow?i=1", NULL),
	    TG_UP_CLASS_POLL);
	call_send(u, &c[2], EVHTTP_REQ_GET, "/slow?i=2", NULL);	/* urgent */
	assert_true(th_run_until(T.base, &c[2].done, 1, 3000));
	th_run_until(T.base, &never, 1, 100);	/* the gate stays shut */
	assert_int_equal(c[0].done + c[1].done, 0);
	assert_true(g.refusals >= 2);		/* asked again on its timer */
	assert_true(g.queued_ms > 0 && g.queued_ms <= tg_clock_mono_ms() - 90);
	g.open = 2;
	assert_true(th_run_until(T.base, &c[0].done, 1, 3000));
	assert_int_equal(c[1].done, 1);
	assert_int_equal(g.takes, 2);
	assert_int_equal(g.seen[0], TG_UP_CLASS_POLL);
	assert_int_equal(g.seen[1], TG_UP_CLASS_CREATE);
	tg_upstream_class_stats(u, &cs);
	assert_int_equal(cs.gate_waits[TG_UP_CLASS_POLL], 1);	/* once each */
	assert_int_equal(cs.gate_waits[TG_UP_CLASS_CREATE], 1);
	assert_int_equal(cs.gate_waits[TG_UP_CLASS_URGENT], 0);
	call_done(&c[0]);
	call_done(&c[1]);
	call_done(&c[2]);
	tg_upstream_free(u);
	assert_int_equal(g.puts, 2);
	assert_int_equal(g.unused, 0);
	free(url);
}

static void
test_retry_idempotent(void **state)
{
	struct tg_upstream_stats st;
	struct tg_upstream *u;
	struct evbuffer *body = evbuffer_new();
	struct call c;
	char *url;

	server_start(NULL);
	url = url_of("http", T.port);
	u = up_new(url, NULL, NULL);
	call_send(u, &c, EVHTTP_REQ_GET, "/drop", NULL);
	assert_true(th_run_until(T.base, &c.done, 1, 3000));
	assert_int_equal(c.err, TG_UP_OK);
	assert_int_equal(T.drop_hits, 2);
	tg_upstream_get_stats(u, &st);
	assert_int_equal(st.retries, 1);
	call_done(&c);

	evbuffer_add_printf(body, "{\"a\":1}");
	call_send(u, &c, EVHTTP_REQ_POST, "/drop", body);
	assert_true(th_run_until(T.base, &c.done, 1, 3000));
	assert_int_equal(c.err, TG_UP_RESET);
	assert_int_equal(c.heads, 0);
	assert_int_equal(T.drop_post_hits, 1);
	tg_upstream_get_stats(u, &st);
	assert_int_equal(st.retries, 1);
	assert_int_equal(st.connect_errors, 0);
	assert_int_equal(evbuffer_get_length(body), 7);
	call_done(&c);
	evbuffer_free(body);
	free(url);
	tg_upstream_free(u);
}

static void
test_failover(void **state)
{
	struct tg_upstream_stats st;
	struct tg_upstream *u;
	struct call c;
	char *dead, *live;

	server_start(NULL);
	dead = url_of("http", closed_port());
	live = url_of("http", T.port);
	u = up_new(dead, live, NULL);
	call_send(u, &c, EVHTTP_REQ_POST, "/ok", NULL);
	assert_true(th_run_until(T.base, &c.done, 1, 3000));
	assert_int_equal(c.err, TG_UP_OK);
	assert_string_equal(c.origin, "fallback");
	tg_upstream_get_stats(u, &st);
	assert_int_equal(st.failovers, 1);
	assert_int_equal(st.connect_errors, 1);
	assert_int_equal(st.retries, 0);
	call_done(&c);
	tg_upstream_free(u);

	/* Without a fallback: one retry, then the connect error. */
	u = up_new(dead, NULL, NULL);
	call_send(u, &c, EVHTTP_REQ_GET, "/ok", NULL);
	assert_true(th_run_until(T.base, &c.done, 1, 3000));
	assert_int_equal(c.err, TG_UP_CONNECT);
	assert_int_equal(c.heads, 0);
	assert_non_null(strstr(c.detail, "cannot connect"));
	tg_upstream_get_stats(u, &st);
	assert_int_equal(st.retries, 1);
	assert_int_equal(st.connect_errors, 2);
	call_done(&c);
	tg_upstream_free(u);
	free(dead);
	free(live);
}

static void
test_read_timeout(void **state)
{
	struct tg_upstream_opts o = { .read_timeout_ms = 200, .tls_verify = 1 };
	struct tg_upstream_stats st;
	struct tg_upstream *u;
	struct call c;
	int64_t t0;
	char *url;

	server_start(NULL);
	url = url_of("http", T.port);
	u = up_new(url, NULL, &o);
	t0 = tg_clock_mono_ms();
	call_send(u, &c, EVHTTP_REQ_GET, "/hang", NULL);
	assert_true(th_run_until(T.base, &c.done, 1, 3000));
	assert_int_equal(c.err, TG_UP_TIMEOUT);
	assert_true(tg_clock_mono_ms() - t0 >= 150);
	assert_true(tg_clock_mono_ms() - t0 < 2000);
	tg_upstream_get_stats(u, &st);
	assert_int_equal(st.retries, 0);
	assert_int_equal(st.busy, 0);
	call_done(&c);
	free(url);
	tg_upstream_free(u);
}

/* A peer that answers anything with a line that is not HTTP. */
static void
on_garbage_accept(evutil_socket_t fd, short what, void *arg)
{
	int *cfd = arg;
	ssize_t n = 0;

	if ((*cfd = accept(fd, NULL, NULL)) >= 0)
		n = write(*cfd, "NOT-HTTP garbage\r\n\r\n", 20);
	(void)n;
}

static void
test_protocol_error(void **state)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	struct tg_upstream_stats st;
	struct tg_upstream *u;
	struct event *ev;
	struct call c;
	int lfd = socket(AF_INET, SOCK_STREAM, 0), cfd = -1;
	char *url;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(lfd, 8), 0);
	getsockname(lfd, (struct sockaddr *)&sa, &sl);
	ev = event_new(T.base, lfd, EV_READ, on_garbage_accept, &cfd);
	event_add(ev, NULL);
	url = url_of("http", ntohs(sa.sin_port));
	u = up_new(url, NULL, NULL);
	call_send(u, &c, EVHTTP_REQ_GET, "/ok", NULL);
	assert_true(th_run_until(T.base, &c.done, 1, 3000));
	assert_int_equal(c.err, TG_UP_PROTOCOL);
	tg_upstream_get_stats(u, &st);
	assert_int_equal(st.retries, 0);	/* bytes came back: not retried */
	call_done(&c);
	tg_upstream_free(u);
	free(url);
	event_free(ev);
	if (cfd >= 0)
		close(cfd);
	close(lfd);
}

/* ---- streaming ---- */

struct sink {
	struct tg_up_req *r;
	struct evbuffer *held;
	struct event *drain;
	size_t got, max_held, max_gap, cancel_at;
	int pauses, bad, done, dones;
	enum tg_up_error err;
};

static void
sink_consume(struct sink *s)
{
	unsigned char buf[BIG_CHUNK], want[BIG_CHUNK];
	int n;

	while ((n = evbuffer_remove(s->held, buf, sizeof(buf))) > 0) {
		pattern(want, (size_t)n, s->got);
		s->bad |= memcmp(buf, want, (size_t)n) != 0;
		s->got += (size_t)n;
	}
}

static void
on_drain(evutil_socket_t fd, short what, void *arg)
{
	struct sink *s = arg;

	sink_consume(s);
	tg_up_req_resume(s->r);
}

static void
on_s_body(struct tg_up_req *r, struct evbuffer *buf, void *arg)
{
	struct sink *s = arg;
	struct timeval tv = { 0, 2000 };
	size_t held, gap;

	if (s->cancel_at > 0 && s->got + evbuffer_get_length(buf) >= s->cancel_at) {
		tg_up_req_cancel(r);
		s->done = 1;
		return;
	}
	evbuffer_add_buffer(s->held, buf);
	held = evbuffer_get_length(s->held);
	gap = T.st.sent - s->got;
	s->max_held = held > s->max_held ? held : s->max_held;
	s->max_gap = gap > s->max_gap ? gap : s->max_gap;
	if (held >= SINK_HIGH) {
		/* Pausing twice is harmless. */
		tg_up_req_pause(r);
		tg_up_req_pause(r);
		s->pauses++;
		evtimer_add(s->drain, &tv);
	}
}

static void
on_s_done(struct tg_up_req *r, enum tg_up_error err, void *arg)
{
	struct sink *s = arg;

	sink_consume(s);
	s->err = err;
	s->done = 1;
	s->dones++;
}

static const struct tg_up_cbs sink_cbs = { NULL, on_s_body, on_s_done };

static void
sink_start(struct sink *s, struct tg_upstream *u)
{
	s->held = evbuffer_new();
	s->drain = evtimer_new(T.base, on_drain, s);
	s->r = tg_upstream_send(u, EVHTTP_REQ_GET, "/big", NULL, NULL, &sink_cbs, s);
}

static void
sink_free(struct sink *s)
{
	event_free(s->drain);
	evbuffer_free(s->held);
}

static void
test_stream_backpressure(void **state)
{
	struct tg_upstream *u;
	struct sink s = { 0 };
	char *url;

	server_start(NULL);
	url = url_of("http", T.port);
	u = up_new(url, NULL, NULL);
	sink_start(&s, u);
	assert_true(th_run_until(T.base, &s.done, 1, 20000));
	assert_int_equal(s.err, TG_UP_OK);
	assert_int_equal(s.got, BIG_TOTAL);
	assert_false(s.bad);
	assert_true(s.pauses > 0);
	/* The consumer held a few MB at most, and the server could not run
	 * ahead of it by more than the socket buffers. */
	assert_true(s.max_held < SINK_HIGH + 2 * 1024 * 1024);
	assert_true(s.max_gap < 24u * 1024 * 1024);
	if (getenv("TG_TEST_LOG"))
		fprintf(stderr, "pauses %d max_held %zu max_gap %zu\n", s.pauses, s.max_held,
		    s.max_gap);
	sink_free(&s);
	free(url);
	tg_upstream_free(u);
}

static void
test_cancel_mid_stream(void **state)
{
	struct tg_upstream_stats st;
	struct tg_upstream *u;
	struct sink s = { .cancel_at = 1024 * 1024 };
	struct call c;
	char *url;

	server_start(NULL);
	url = url_of("http", T.port);
	u = up_new(url, NULL, NULL);
	sink_start(&s, u);
	assert_true(th_run_until(T.base, &s.done, 1, 5000));
	th_run_for(T.base, 100);
	assert_int_equal(s.dones, 0);
	tg_upstream_get_stats(u, &st);
	assert_int_equal(st.busy, 0);
	assert_int_equal(st.idle, 0);
	assert_false(T.st.active);
	/* The pool goes on with a new connection. */
	call_send(u, &c, EVHTTP_REQ_GET, "/ok", NULL);
	assert_true(th_run_until(T.base, &c.done, 1, 3000));
	assert_int_equal(c.err, TG_UP_OK);
	assert_int_equal(T.conns, 2);
	call_done(&c);
	sink_free(&s);
	free(url);
	tg_upstream_free(u);
}

static void
test_cancel_queued(void **state)
{
	struct tg_upstream_opts o = { .max_conns = 1, .tls_verify = 1 };
	struct tg_upstream_stats st;
	struct tg_upstream *u;
	struct tg_up_req *r;
	struct call a, b, d;
	char *url;

	server_start(NULL);
	url = url_of("http", T.port);
	u = up_new(url, NULL, &o);
	call_send(u, &a, EVHTTP_REQ_GET, "/slow?i=0", NULL);
	r = call_send(u, &b, EVHTTP_REQ_GET, "/slow?i=1", NULL);
	call_send(u, &d, EVHTTP_REQ_GET, "/slow?i=2", NULL);
	th_run_for(T.base, 20);
	tg_upstream_get_stats(u, &st);
	assert_int_equal(st.queued, 2);
	tg_up_req_cancel(r);
	assert_true(th_run_until(T.base, &d.done, 1, 3000));
	assert_int_equal(a.err, TG_UP_OK);
	assert_int_equal(d.err, TG_UP_OK);
	assert_int_equal(b.dones, 0);
	assert_int_equal(T.norder, 2);
	call_done(&a);
	call_done(&b);
	call_done(&d);
	/* Requests still in flight at free are dropped without callbacks. */
	call_send(u, &a, EVHTTP_REQ_GET, "/hang", NULL);
	th_run_for(T.base, 20);
	tg_upstream_free(u);
	assert_int_equal(a.dones, 0);
	call_done(&a);
	free(url);
}

/* ---- owners and the queue deadline ---- */

struct owners {
	struct tg_upstream_owner_stats st[4];
	char name[4][16];
	int n;
};

static void
on_owner(const struct tg_upstream_owner_stats *st, void *arg)
{
	struct owners *w = arg;

	if (w->n >= 4)
		return;
	w->st[w->n] = *st;
	snprintf(w->name[w->n], sizeof(w->name[0]), "%s", st->owner ? st->owner : "-");
	w->n++;
}

/* The stats of owner name ("-": untagged); fails the test when absent. */
static struct tg_upstream_owner_stats
owner_stats(struct tg_upstream *u, const char *name)
{
	struct owners w;
	int i;

	memset(&w, 0, sizeof(w));
	tg_upstream_foreach_owner(u, on_owner, &w);
	for (i = 0; i < w.n; i++)
		if (strcmp(w.name[i], name) == 0)
			return w.st[i];
	fail_msg("no owner %s", name);
	return w.st[0];
}

static struct tg_up_req *
call_owned(struct tg_upstream *u, struct call *c, const char *uri, const char *owner)
{
	struct tg_up_req *r = call_send(u, c, EVHTTP_REQ_GET, uri, NULL);

	tg_up_req_set_owner(r, owner);
	return r;
}

/*
 * max_conns 2, one per owner: a0 a1 b0 b1 queued in that order. Plain FIFO
 * would start a0 and a1; with the cap a1 waits for a0 and b0 goes first,
 * then a1 and b1. Each owner's second request was passed over once.
 */
static void
test_owner_cap_fifo(void **state)
{
	struct tg_upstream_opts o = { .max_conns = 2, .max_conns_per_owner = 1,
		.tls_verify = 1 };
	static const char *const own[4] = { "a", "a", "b", "b" };
	struct tg_upstream_owner_stats a, b;
	struct tg_upstream *u;
	struct call c[4];
	char *url, uri[32];
	int i;

	server_start(NULL);
	url = url_of("http", T.port);
	u = up_new(url, NULL, &o);
	for (i = 0; i < 4; i++) {
		snprintf(uri, sizeof(uri), "/slow?i=%d", i);
		call_owned(u, &c[i], uri, own[i]);
	}
	th_run_for(T.base, 20);
	a = owner_stats(u, "a");
	b = owner_stats(u, "b");
	assert_int_equal(a.busy, 1);
	assert_int_equal(a.queued, 1);
	assert_int_equal(b.busy, 1);
	assert_int_equal(b.queued, 1);
	for (i = 0; i < 4; i++)
		assert_true(th_run_until(T.base, &c[i].done, 1, 3000));
	for (i = 0; i < 4; i++) {
		assert_int_equal(c[i].err, TG_UP_OK);
		call_done(&c[i]);
	}
	assert_int_equal(T.norder, 4);
	assert_int_equal(T.order[0] + T.order[1], 0 + 2);	/* a0 and b0 first */
	assert_int_equal(T.order[2] + T.order[3], 1 + 3);
	assert_int_equal(T.max_cur, 2);
	a = owner_stats(u, "a");
	assert_int_equal(a.busy, 0);
	assert_int_equal(a.waits, 1);
	assert_int_equal(owner_stats(u, "b").waits, 1);
	assert_int_equal(owner_stats(u, "-").waits, 0);
	free(url);
	tg_upstream_free(u);
}

/* An owner at its cap does not hold back untagged requests (the caller's
 * own calls) or other owners, even when they come later. */
static void
test_owner_cap_others_pass(void **state)
{
	struct tg_upstream_opts o = { .max_conns = 4, .max_conns_per_owner = 2,
		.tls_verify = 1 };
	struct tg_upstream_stats st;
	struct tg_upstream *u;
	struct call hang[4], mine, other;
	char *url;
	int i;

	server_start(NULL);
	url = url_of("http", T.port);
	u = up_new(url, NULL, &o);
	for (i = 0; i < 4; i++)
		call_owned(u, &hang[i], "/hang", "greedy");
	th_run_for(T.base, 50);
	assert_int_equal(T.hang_hits, 2);	/* its cap: two of the four */
	call_send(u, &mine, EVHTTP_REQ_GET, "/ok", NULL);
	assert_true(th_run_until(T.base, &mine.done, 1, 3000));
	assert_int_equal(mine.err, TG_UP_OK);
	call_owned(u, &other, "/ok", "other");
	assert_true(th_run_until(T.base, &other.done, 1, 3000));
	assert_int_equal(other.err, TG_UP_OK);
	assert_int_equal(T.ok_hits, 2);
	tg_upstream_get_stats(u, &st);
	assert_int_equal(st.queued, 2);
	assert_int_equal(owner_stats(u, "greedy").busy, 2);
	assert_int_equal(owner_stats(u, "greedy").queued, 2);
	assert_true(owner_stats(u, "greedy").waits >= 1);
	tg_upstream_free(u);	/* the hanging ones go without callbacks */
	for (i = 0; i < 4; i++) {
		assert_int_equal(hang[i].dones, 0);
		call_done(&hang[i]);
	}
	call_done(&mine);
	call_done(&other);
	free(url);
}

/* Every connection busy: a queued request fails with TG_UP_BUSY after the
 * queue timeout, and nothing of it reaches the server. */
static void
test_queue_deadline(void **state)
{
	struct tg_upstream_opts o = { .max_conns = 1, .queue_timeout_ms = 150, .tls_verify = 1 };
	struct tg_upstream_stats st;
	struct tg_upstream *u;
	struct call h, q;
	int64_t t0;
	char *url;

	server_start(NULL);
	url = url_of("http", T.port);
	u = up_new(url, NULL, &o);
	call_send(u, &h, EVHTTP_REQ_GET, "/hang", NULL);
	th_run_for(T.base, 20);
	t0 = tg_clock_mono_ms();
	call_send(u, &q, EVHTTP_REQ_GET, "/ok", NULL);
	assert_true(th_run_until(T.base, &q.done, 1, 3000));
	assert_int_equal(q.err, TG_UP_BUSY);
	assert_true(tg_clock_mono_ms() - t0 >= 140);
	assert_true(tg_clock_mono_ms() - t0 < 1000);
	assert_int_equal(q.heads, 0);
	assert_non_null(strstr(q.detail, "all 1 connections are busy"));
	assert_int_equal(T.ok_hits, 0);
	assert_int_equal(T.conns, 1);
	tg_upstream_get_stats(u, &st);
	assert_int_equal(st.queue_timeouts, 1);
	assert_int_equal(st.queued, 0);
	assert_int_equal(st.busy, 1);
	assert_int_equal(owner_stats(u, "-").timeouts, 1);
	assert_string_equal(tg_up_error_str(TG_UP_BUSY), "busy");
	assert_int_equal(h.dones, 0);	/* the one in flight is untouched */
	tg_upstream_free(u);
	call_done(&h);
	call_done(&q);
	free(url);
}

/* The deadline of an owner held back by its own cap, while the pool has a
 * free connection: the detail says so. */
static void
test_queue_deadline_owner(void **state)
{
	struct tg_upstream_opts o = { .max_conns = 2, .max_conns_per_owner = 1,
		.queue_timeout_ms = 100, .tls_verify = 1 };
	struct tg_upstream *u;
	struct call h, q;
	char *url;

	server_start(NULL);
	url = url_of("http", T.port);
	u = up_new(url, NULL, &o);
	call_owned(u, &h, "/hang", "k");
	call_owned(u, &q, "/ok", "k");
	assert_true(th_run_until(T.base, &q.done, 1, 3000));
	assert_int_equal(q.err, TG_UP_BUSY);
	assert_non_null(strstr(q.detail, "holds 1 of the 2 connections"));
	assert_int_equal(T.ok_hits, 0);
	assert_int_equal(owner_stats(u, "k").timeouts, 1);
	assert_int_equal(owner_stats(u, "k").waits, 1);
	tg_upstream_free(u);
	call_done(&h);
	call_done(&q);
	free(url);
}

/* Cancelling a request in flight closes its connection and gives its
 * owner's slot back: the owner's next request is served at once, on a new
 * connection (the old one is never reused half-read). */
static void
test_cancel_releases(void **state)
{
	struct tg_upstream_opts o = { .max_conns = 2, .max_conns_per_owner = 1,
		.tls_verify = 1 };
	struct tg_upstream_stats st;
	struct tg_upstream *u;
	struct tg_up_req *r;
	struct call h, q;
	char *url;

	server_start(NULL);
	url = url_of("http", T.port);
	u = up_new(url, NULL, &o);
	r = call_owned(u, &h, "/hang", "k");
	call_owned(u, &q, "/ok", "k");
	th_run_for(T.base, 50);
	assert_int_equal(T.hang_hits, 1);
	assert_int_equal(owner_stats(u, "k").queued, 1);
	assert_int_equal(q.done, 0);
	tg_up_req_cancel(r);
	assert_true(th_run_until(T.base, &q.done, 1, 3000));
	assert_int_equal(q.err, TG_UP_OK);
	assert_int_equal(T.ok_hits, 1);
	assert_int_equal(T.conns, 2);
	assert_int_equal(h.dones, 0);
	tg_upstream_get_stats(u, &st);
	assert_int_equal(st.busy, 0);
	assert_int_equal(st.queued, 0);
	assert_int_equal(owner_stats(u, "k").busy, 0);
	call_done(&h);
	call_done(&q);
	free(url);
	tg_upstream_free(u);
}

/* ---- fetch ---- */

struct fres {
	int status, calls;
	enum tg_up_error err;
	size_t len;
};

static void
on_fetched(int status, const struct evkeyvalq *h, struct evbuffer *body, enum tg_up_error err,
    void *arg)
{
	struct fres *f = arg;

	f->status = status;
	f->err = err;
	f->len = body ? evbuffer_get_length(body) : 0;
	f->calls++;
}

static void
fetch_one(struct tg_upstream *u, const char *uri, size_t max, struct fres *f)
{
	memset(f, 0, sizeof(*f));
	tg_upstream_fetch(u, EVHTTP_REQ_GET, uri, NULL, NULL, max, on_fetched, f);
	assert_true(th_run_until(T.base, &f->calls, 1, 3000));
	th_run_for(T.base, 20);
	assert_int_equal(f->calls, 1);
}

static void
test_fetch_max_body(void **state)
{
	struct tg_upstream *u;
	struct fres f;
	char *url;

	server_start(NULL);
	url = url_of("http", T.port);
	u = up_new(url, NULL, NULL);
	fetch_one(u, "/sized", 1 << 20, &f);
	assert_int_equal(f.err, TG_UP_OK);
	assert_int_equal(f.len, 100 * 1024);
	fetch_one(u, "/sized", 10 * 1024, &f);
	assert_int_equal(f.err, TG_UP_TOO_LARGE);
	assert_int_equal(f.status, 200);
	fetch_one(u, "/chunked", 10 * 1024, &f);
	assert_int_equal(f.err, TG_UP_TOO_LARGE);
	fetch_one(u, "/ok", 1024, &f);
	assert_int_equal(f.err, TG_UP_OK);
	free(url);
	tg_upstream_free(u);
}

static void
test_body_by_reference(void **state)
{
	static unsigned char big[1 << 20];
	struct evbuffer *body = evbuffer_new();
	struct tg_upstream *u;
	struct call c;
	char *url, *got;

	server_start(NULL);
	url = url_of("http", T.port);
	u = up_new(url, NULL, NULL);
	evbuffer_add(body, big, sizeof(big));
	call_send(u, &c, EVHTTP_REQ_PATCH, "/len", body);
	assert_true(th_run_until(T.base, &c.done, 1, 3000));
	assert_int_equal(c.err, TG_UP_OK);
	got = body_str(&c);
	assert_string_equal(got, "1048576");
	assert_int_equal(evbuffer_get_length(body), sizeof(big));
	free(got);
	call_done(&c);
	evbuffer_free(body);
	free(url);
	tg_upstream_free(u);
}

/* A file body goes out whole, twice from the same descriptor. */
static void
test_send_file(void **state)
{
	static unsigned char buf[3 << 20];
	char path[] = "/tmp/tg-upstream-file-XXXXXX", *url, *got;
	struct tg_upstream *u;
	struct call c;
	int fd = mkstemp(path), i;

	assert_true(fd >= 0);
	unlink(path);
	pattern(buf, sizeof(buf), 7);
	assert_int_equal(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	server_start(NULL);
	url = url_of("http", T.port);
	u = up_new(url, NULL, NULL);
	for (i = 0; i < 2; i++) {
		call_init(&c);
		assert_non_null(tg_upstream_send_file(u, EVHTTP_REQ_POST, "/len", NULL, fd,
		    sizeof(buf), &call_cbs, &c));
		assert_true(th_run_until(T.base, &c.done, 1, 3000));
		assert_int_equal(c.err, TG_UP_OK);
		got = body_str(&c);
		assert_string_equal(got, "3145728");
		free(got);
		call_done(&c);
	}
	assert_null(tg_upstream_send_file(u, EVHTTP_REQ_POST, "/len", NULL, -1, 10, &call_cbs,
	    &c));
	close(fd);
	free(url);
	tg_upstream_free(u);
}

/* ---- TLS ---- */

static int
make_certs(void **state)
{
	static const char script[] =
	    "set -e\ncd \"$1\"\n"
	    "key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out $1; }\n"
	    "ca() { key $1.key; openssl req -x509 -new -key $1.key -out $1.pem -days 2"
	    " -subj /CN=$1; }\n"
	    "leaf() { key $1.key; openssl req -new -key $1.key -out $1.csr -subj /CN=$2;"
	    " printf 'subjectAltName=%s\\nbasicConstraints=CA:FALSE\\n' $3 > $1.ext;"
	    " openssl x509 -req -in $1.csr -CA ca.pem -CAkey ca.key -CAcreateserial"
	    " -days 2 -extfile $1.ext -out $1.pem; }\n"
	    "ca ca; ca ca2\n"
	    "leaf srv 127.0.0.1 IP:127.0.0.1,DNS:localhost\n"
	    "leaf other other.example DNS:other.example\n";
	char path[128], cmd[256];
	FILE *f;

	snprintf(T.dir, sizeof(T.dir), "/tmp/tg-upstream-XXXXXX");
	if (mkdtemp(T.dir) == NULL)
		return -1;
	snprintf(path, sizeof(path), "%s/mk.sh", T.dir);
	if ((f = fopen(path, "w")) == NULL)
		return -1;
	fputs(script, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "sh %s %s >/dev/null 2>&1", path, T.dir);
	return system(cmd) == 0 ? 0 : -1;
}

static int
remove_certs(void **state)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", T.dir);
	return system(cmd) == 0 ? 0 : -1;
}

static struct tg_upstream *
tls_client(int port, const char *ca, int64_t connect_ms)
{
	struct tg_upstream_opts o = { .connect_timeout_ms = connect_ms, .tls_verify = 1 };
	struct tg_upstream *u;
	char cafile[128], *url = url_of("https", port);

	snprintf(cafile, sizeof(cafile), "%s/%s.pem", T.dir, ca);
	o.ca_file = cafile;
	u = up_new(url, NULL, &o);
	free(url);
	return u;
}

static void
test_tls_verified(void **state)
{
	struct tg_upstream *u;
	struct call c;
	int i;

	server_start("srv");
	u = tls_client(T.port, "ca", 0);
	for (i = 0; i < 3; i++) {
		call_send(u, &c, EVHTTP_REQ_GET, "/ok", NULL);
		assert_true(th_run_until(T.base, &c.done, 1, 3000));
		assert_int_equal(c.err, TG_UP_OK);
		assert_int_equal(c.status, 200);
		call_done(&c);
	}
	assert_int_equal(T.conns, 1);
	/* A TLS connection the server closed is replaced, not reconnected. */
	for (i = 0; i < 2; i++) {
		call_send(u, &c, EVHTTP_REQ_GET, "/close", NULL);
		assert_true(th_run_until(T.base, &c.done, 1, 3000));
		assert_int_equal(c.err, TG_UP_OK);
		call_done(&c);
	}
	call_send(u, &c, EVHTTP_REQ_GET, "/ok", NULL);
	assert_true(th_run_until(T.base, &c.done, 1, 3000));
	assert_int_equal(c.err, TG_UP_OK);
	assert_int_equal(T.conns, 3);
	call_done(&c);
	tg_upstream_free(u);
}

static void
tls_refused(const char *cert, const char *ca, const char *reason)
{
	struct tg_upstream_stats st;
	struct tg_upstream *u;
	struct call c;

	server_start(cert);
	u = tls_client(T.port, ca, 0);
	call_send(u, &c, EVHTTP_REQ_GET, "/ok", NULL);
	assert_true(th_run_until(T.base, &c.done, 1, 3000));
	assert_int_equal(c.err, TG_UP_TLS);
	assert_int_equal(c.heads, 0);
	if (strstr(c.detail, reason) == NULL)
		fail_msg("detail '%s' lacks '%s'", c.detail, reason);
	tg_upstream_get_stats(u, &st);
	assert_int_equal(st.connect_errors, 1);	/* a rejected certificate is not retried */
	assert_int_equal(st.retries, 0);
	call_done(&c);
	tg_upstream_free(u);
}

static void
test_tls_wrong_host(void **state)
{
	tls_refused("other", "ca", "mismatch");
}

static void
test_tls_unknown_ca(void **state)
{
	tls_refused("srv", "ca2", "certificate verify failed");
}

/* A listener that never accepts: TCP completes, the handshake never does,
 * so the connect timeout (not the read timeout) must end it. */
static void
test_tls_connect_timeout(void **state)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	struct tg_upstream *u;
	struct call c;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int64_t t0;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 8), 0);
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	u = tls_client(ntohs(sa.sin_port), "ca", 200);
	t0 = tg_clock_mono_ms();
	call_send(u, &c, EVHTTP_REQ_GET, "/ok", NULL);
	assert_true(th_run_until(T.base, &c.done, 1, 3000));
	assert_int_equal(c.err, TG_UP_TIMEOUT);
	assert_true(tg_clock_mono_ms() - t0 < 1500);
	assert_non_null(strstr(c.detail, "timed out"));
	call_done(&c);
	tg_upstream_free(u);
	close(fd);
}

static struct tg_upstream *
named_client(const char *host, int port, const char *addr)
{
	struct tg_upstream_opts o = { .tls_verify = 1 };
	struct tg_upstream *u;
	struct tg_err err;
	char cafile[128], *url = tg_xasprintf("https://%s:%d", host, port);

	snprintf(cafile, sizeof(cafile), "%s/ca.pem", T.dir);
	o.ca_file = cafile;
	u = up_new(url, NULL, &o);
	free(url);
	assert_int_equal(tg_upstream_set_connect_addr(u, addr, &err), 0);
	return u;
}

/* The socket goes to the given address (T.dns knows no names), while
 * Host, SNI and the certificate check stay on the URL's host. */
static void
test_connect_addr(void **state)
{
	struct tg_upstream *u;
	struct tg_err err;
	struct call c;
	char *got, *want;

	server_start("other");
	u = named_client("other.example", T.port, "127.0.0.1");
	call_send(u, &c, EVHTTP_REQ_GET, "/ok", NULL);
	assert_true(th_run_until(T.base, &c.done, 1, 3000));
	assert_int_equal(c.err, TG_UP_OK);
	got = body_str(&c);
	want = tg_xasprintf("other.example:%d", T.port);
	assert_string_equal(got, want);
	free(got);
	free(want);
	call_done(&c);
	assert_int_equal(tg_upstream_set_connect_addr(u, "other.example", &err), -1);
	tg_upstream_free(u);
	/* A certificate for the address but not the name is refused. */
	evhttp_free(T.http);
	SSL_CTX_free(T.sctx);
	server_start("srv");
	u = named_client("other.example", T.port, "127.0.0.1");
	call_send(u, &c, EVHTTP_REQ_GET, "/ok", NULL);
	assert_true(th_run_until(T.base, &c.done, 1, 3000));
	assert_int_equal(c.err, TG_UP_TLS);
	assert_non_null(strstr(c.detail, "mismatch"));
	call_done(&c);
	tg_upstream_free(u);
}

static void
test_bad_urls(void **state)
{
	struct tg_err err;

	assert_null(tg_upstream_new(T.base, T.dns, "ftp://127.0.0.1/", NULL, NULL, &err));
	assert_null(tg_upstream_new(T.base, T.dns, "http://127.0.0.1/?q=1", NULL, NULL, &err));
	assert_null(tg_upstream_new(T.base, NULL, "http://vendor.example", NULL, NULL, &err));
	assert_non_null(strstr(err.msg, "evdns"));
	assert_null(tg_upstream_new(T.base, T.dns, "http://127.0.0.1", "nope", NULL, &err));
}

static void
test_base_path(void **state)
{
	struct tg_upstream *u = up_new("http://127.0.0.1:1/api/v1/", NULL, NULL);

	assert_string_equal(tg_upstream_base_path(u), "/api/v1");
	tg_upstream_free(u);
	u = up_new("https://[::1]:8443", NULL, NULL);
	assert_string_equal(tg_upstream_base_path(u), "");
	tg_upstream_free(u);
}

/* A CTL, space or non-ASCII byte in the target never reaches the request
 * line: no connection, no bytes, TG_UP_BAD_TARGET from the loop (never
 * from inside send), and the pool serves the next request as before. */
static void
test_bad_target_refused(void **state)
{
	static const char *const bad[] = {
		"/vendor/a\rX-Injected:1", "/a\r\nX-Injected: 1", "/a b", "/a\tb", "/a\x7f",
		"/caf\xc3\xa9", "/p?x=a b",
	};
	struct tg_upstream *u;
	struct tg_up_req *r;
	struct call c;
	char *url;
	size_t i;

	server_start(NULL);
	url = url_of("http", T.port);
	u = up_new(url, NULL, NULL);
	for (i = 0; i < TG_NELEM(bad); i++) {
		call_send(u, &c, EVHTTP_REQ_GET, bad[i], NULL);
		assert_int_equal(c.done, 0);
		assert_true(th_run_until(T.base, &c.done, 1, 3000));
		assert_int_equal(c.err, TG_UP_BAD_TARGET);
		assert_int_equal(c.heads, 0);
		assert_int_equal(c.dones, 1);
		assert_non_null(strstr(c.detail, "request target refused: byte 0x"));
		call_done(&c);
	}
	r = call_send(u, &c, EVHTTP_REQ_GET, "/a\rb", NULL);
	tg_up_req_cancel(r);		/* before the loop runs: no callback, no leak */
	event_base_loop(T.base, EVLOOP_NONBLOCK);
	assert_int_equal(c.dones, 0);
	call_done(&c);
	assert_int_equal(T.conns, 0);
	call_send(u, &c, EVHTTP_REQ_GET, "/ok?x=%41", NULL);
	assert_true(th_run_until(T.base, &c.done, 1, 3000));
	assert_int_equal(c.err, TG_UP_OK);
	assert_int_equal(c.status, 200);
	assert_int_equal(T.conns, 1);
	call_done(&c);
	assert_string_equal(tg_up_error_str(TG_UP_BAD_TARGET), "bad_target");
	assert_string_equal(tg_up_error_str(TG_UP_TLS), "tls");
	free(url);
	tg_upstream_free(u);
}

/* A refused target's log line names the request id and trace the caller
 * put in its headers after send returned (as the gateway does): it is
 * written from the loop, or at a cancel that comes first, once. */
static void
test_bad_target_logged(void **state)
{
	struct tg_upstream *u;
	struct tg_up_req *r;
	struct call c;
	char *url, *logbuf = NULL;
	size_t loglen = 0;
	FILE *logfp = open_memstream(&logbuf, &loglen);
	const char *p;
	int n = 0;

	server_start(NULL);
	url = url_of("http", T.port);
	u = up_new(url, NULL, NULL);
	tg_log_init(logfp, TG_LOG_WARN);
	r = call_send(u, &c, EVHTTP_REQ_GET, "/a b", NULL);
	evhttp_add_header(tg_up_req_headers(r), "X-Request-Id", "req-bad");
	evhttp_add_header(tg_up_req_headers(r), "traceparent",
	    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01");
	assert_true(th_run_until(T.base, &c.done, 1, 3000));
	assert_int_equal(c.err, TG_UP_BAD_TARGET);
	call_done(&c);
	r = call_send(u, &c, EVHTTP_REQ_GET, "/a\rb", NULL);
	evhttp_add_header(tg_up_req_headers(r), "X-Request-Id", "req-gone");
	tg_up_req_cancel(r);
	event_base_loop(T.base, EVLOOP_NONBLOCK);
	call_done(&c);
	tg_log_init(stderr, getenv("TG_TEST_LOG") ? TG_LOG_DEBUG : TG_LOG_OFF);
	fclose(logfp);
	for (p = logbuf; (p = strstr(p, "\"upstream_target_refused\"")) != NULL; p++)
		n++;
	assert_int_equal(n, 2);
	assert_non_null(strstr(logbuf, "\"request_id\":\"req-bad\",\"trace_id\":"
	    "\"4bf92f3577b34da6a3ce929d0e0e4736\""));
	assert_non_null(strstr(logbuf, "\"request_id\":\"req-gone\",\"trace_id\":null"));
	free(logbuf);
	free(url);
	tg_upstream_free(u);
}

#define T_(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		T_(test_keepalive),
		T_(test_pool_limit_fifo),
		T_(test_class_order),
		T_(test_gate),
		T_(test_retry_idempotent),
		T_(test_failover),
		T_(test_read_timeout),
		T_(test_protocol_error),
		T_(test_stream_backpressure),
		T_(test_cancel_mid_stream),
		T_(test_cancel_queued),
		T_(test_owner_cap_fifo),
		T_(test_owner_cap_others_pass),
		T_(test_queue_deadline),
		T_(test_queue_deadline_owner),
		T_(test_cancel_releases),
		T_(test_fetch_max_body),
		T_(test_body_by_reference),
		T_(test_send_file),
		T_(test_tls_verified),
		T_(test_tls_wrong_host),
		T_(test_tls_unknown_ca),
		T_(test_tls_connect_timeout),
		T_(test_connect_addr),
		T_(test_bad_urls),
		T_(test_base_path),
		T_(test_bad_target_refused),
		T_(test_bad_target_logged),
	};

	tg_log_init(stderr, getenv("TG_TEST_LOG") ? TG_LOG_DEBUG : TG_LOG_OFF);
	signal(SIGPIPE, SIG_IGN);	/* as in both binaries: peers do close mid-write */
	return cmocka_run_group_tests(tests, make_certs, remove_certs);
}
