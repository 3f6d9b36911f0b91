/*
 * fuzz_edge.c - the differential test of the edge: the same bytes, in read
 * sizes the input chooses, go through the front door (src/http/frontdoor.c)
 * to evhttp's own parser (libevent in this process, listening on a unix
 * socket of the abstract namespace: evhttp_get_request, which takes one
 * end of a socketpair, is not exported by libevent 2.1). The front door tells what it decided for each request
 * (tg_frontdoor.decided); a handler records what evhttp delivered. They
 * must agree on every request, in order: its method, target, body length
 * and fault (a refusal's stand-in, a body cut by a fault). Disagreement
 * aborts: two parsers deciding framing differently is how a request is
 * smuggled. Replayed over tests/fuzz/corpus/edge by scripts/test; grown
 * with scripts/fuzz edge SECONDS.
 *
 * Input: byte 0 picks k = byte0 % 8 cuts, the next k bytes are the lengths
 * (1 to 256) of the first k reads, the rest of the input is what the client
 * sends (its remainder is the last read). Heads aimed at /small get a body
 * limit of 8 bytes from the listener's check; /refused is refused by it.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/http_struct.h>	/* the request's HTTP version */
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>

#include "tidegate/frontdoor.h"
#include "tidegate/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAX_REQS 64

struct rec {
	char method[16];
	char target[512];
	uint64_t body;
	int fault;
	int whole;		/* door: its body ended (or it had none) */
	int closes;		/* evhttp: closes the connection after it */
};

static struct {
	struct rec door[MAX_REQS], http[MAX_REQS];
	size_t ndoor, nhttp;
} seen;

static struct event_base *base;
static struct evhttp *http;
static struct tg_frontdoor_stats stats;
static struct sockaddr_un addr;	/* the listener's, abstract: no file */
static socklen_t addrlen;

static int
check(const struct tg_head *h, void *arg, uint64_t *limit)
{
	if (h->tlen >= 6 && memcmp(h->target, "/small", 6) == 0)
		*limit = 8;
	if (h->tlen == 8 && memcmp(h->target, "/refused", 8) == 0)
		return TG_HEAD_KEY_MISSING;
	return 0;
}

static void
on_decided(const struct tg_frontdoor_decision *d, void *arg)
{
	struct rec *r;

	if (d->body_end) {		/* the body of the last head passed */
		if (seen.ndoor == 0 || seen.door[seen.ndoor - 1].whole)
			abort();	/* a body end without its head */
		r = &seen.door[seen.ndoor - 1];
		r->body = d->body;
		r->fault = d->fault;
		r->whole = 1;
		return;
	}
	if (seen.ndoor == MAX_REQS)
		return;
	r = &seen.door[seen.ndoor++];
	memset(r, 0, sizeof(*r));
	if (d->head != NULL && d->head->line_ok) {
		snprintf(r->method, sizeof(r->method), "%.*s", (int)d->head->mlen,
		    d->head->method);
		snprintf(r->target, sizeof(r->target), "%.*s", (int)d->head->tlen,
		    d->head->target);
	}
	r->fault = d->fault;
	r->whole = d->fault != 0 || d->head == NULL ||
	    (!d->head->chunked && d->head->length <= 0);
}

static struct tg_frontdoor door = {
	.max_head = 4096, .max_body = 1 << 16, .stats = &stats, .check = check,
	.check_bodiless = 1, .decided = on_decided,
};

static const char *
method_name(enum evhttp_cmd_type t)
{
	switch (t) {
	case EVHTTP_REQ_GET: return "GET";
	case EVHTTP_REQ_POST: return "POST";
	case EVHTTP_REQ_HEAD: return "HEAD";
	case EVHTTP_REQ_PUT: return "PUT";
	case EVHTTP_REQ_DELETE: return "DELETE";
	case EVHTTP_REQ_OPTIONS: return "OPTIONS";
	case EVHTTP_REQ_PATCH: return "PATCH";
	default: return "?";
	}
}

/* evhttp's own rule (evhttp_send_done, evhttp_is_connection_close): it
 * closes after this request; a refusal is answered with Connection: close.
 * An absolute-form target naming a host it does not serve is a proxy
 * request to evhttp, kept alive only when both the request and the answer
 * say Proxy-Connection: keep-alive (this answer does not). */
static int
closes(struct evhttp_request *req, int fault)
{
	const char *conn = evhttp_find_header(evhttp_request_get_input_headers(req),
	    "Connection");

	if (fault != 0 || (req->flags & EVHTTP_PROXY_REQUEST))
		return 1;
	if (conn != NULL && evutil_ascii_strcasecmp(conn, "close") == 0)
		return 1;
	return req->major == 1 && req->minor == 0 &&
	    (conn == NULL || evutil_ascii_strcasecmp(conn, "keep-alive") != 0);
}

static void
on_request(struct evhttp_request *req, void *arg)
{
	int fault = tg_frontdoor_refusal(req);
	struct rec *r;

	if (seen.nhttp < MAX_REQS) {
		r = &seen.http[seen.nhttp++];
		memset(r, 0, sizeof(*r));
		snprintf(r->method, sizeof(r->method), "%s",
		    method_name(evhttp_request_get_command(req)));
		snprintf(r->target, sizeof(r->target), "%s", evhttp_request_get_uri(req));
		r->body = evbuffer_get_length(evhttp_request_get_input_buffer(req));
		r->fault = fault;
		r->closes = closes(req, fault);
	}
	if (fault != 0)
		tg_frontdoor_reply(req, fault);
	else
		evhttp_send_reply(req, 200, "OK", NULL);
}

/* Run the loop until nothing moves (at most 64 turns), reading and
 * dropping what evhttp answers so that its writes never block. */
static void
settle(int peer)
{
	char buf[4096];
	size_t before;
	int turns, quiet = 0;

	for (turns = 0; turns < 64 && quiet < 3; turns++) {
		before = seen.nhttp;
		event_base_loop(base, EVLOOP_NONBLOCK);
		quiet = seen.nhttp == before ? quiet + 1 : 0;
		while (recv(peer, buf, sizeof(buf), MSG_DONTWAIT) > 0)
			quiet = 0;
	}
}

static int
same(const struct rec *d, const struct rec *h)
{
	if (d->fault != h->fault)
		return 0;
	if (d->fault != 0 && d->body == 0 && h->body == 0 && strcmp(h->target, "/") == 0)
		return 1;		/* a refusal's stand-in: its fault is what counts */
	if (d->fault != 0 && strcmp(d->method, "") == 0)
		return 1;		/* refused before its request line parsed */
	return strcmp(d->method, h->method) == 0 && strcmp(d->target, h->target) == 0 &&
	    d->body == h->body;
}

/* FUZZ_EDGE_TRACE set: both lists on stderr (reading a corpus entry). */
static void
trace(void)
{
	size_t i;

	for (i = 0; i < seen.ndoor; i++)
		fprintf(stderr, "door %zu: %s %s body %llu fault %d%s\n", i, seen.door[i].method,
		    seen.door[i].target, (unsigned long long)seen.door[i].body,
		    seen.door[i].fault, seen.door[i].whole ? "" : " (body unfinished)");
	for (i = 0; i < seen.nhttp; i++)
		fprintf(stderr, "http %zu: %s %s body %llu fault %d%s\n", i, seen.http[i].method,
		    seen.http[i].target, (unsigned long long)seen.http[i].body,
		    seen.http[i].fault, seen.http[i].closes ? " (closes)" : "");
}

/* Every request evhttp delivered is the one the front door decided, in
 * order; the front door may have decided more only after one evhttp
 * closes on, or a last one whose body never ended. */
static void
compare(void)
{
	size_t i, whole = 0;

	if (getenv("FUZZ_EDGE_TRACE") != NULL)
		trace();

	for (i = 0; i < seen.ndoor; i++)
		whole += seen.door[i].whole;
	if (seen.nhttp > seen.ndoor)
		abort();
	for (i = 0; i < seen.nhttp; i++)
		if (!seen.door[i].whole || !same(&seen.door[i], &seen.http[i]))
			abort();
	if (seen.nhttp < whole && (seen.nhttp == 0 || !seen.http[seen.nhttp - 1].closes))
		abort();
}

/* The evhttp of a listener (tg_http_new, the front door attached) on a
 * unix socket of the abstract namespace. */
static void
setup(void)
{
	struct evconnlistener *l;

	base = event_base_new();
	http = tg_http_new(base, (size_t)door.max_body);
	tg_frontdoor_attach(http, &door);
	evhttp_set_gencb(http, on_request, NULL);
	memset(&addr, 0, sizeof(addr));
	addr.sun_family = AF_UNIX;
	snprintf(addr.sun_path + 1, sizeof(addr.sun_path) - 1, "tidegate-fuzz-edge-%d",
	    (int)getpid());
	addrlen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
	    strlen(addr.sun_path + 1));
	l = evconnlistener_new_bind(base, NULL, NULL, LEV_OPT_CLOSE_ON_FREE, 64,
	    (struct sockaddr *)&addr, (int)addrlen);
	if (l == NULL || evhttp_bind_listener(http, l) == NULL)
		abort();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t k, i, off, n;
	int peer;

	if (base == NULL)
		setup();
	if (size == 0 || (peer = socket(AF_UNIX, SOCK_STREAM, 0)) < 0)
		return 0;
	if (connect(peer, (struct sockaddr *)&addr, addrlen) != 0)
		abort();
	memset(&seen, 0, sizeof(seen));
	k = data[0] % 8;
	off = 1 + (k < size - 1 ? k : size - 1);
	for (i = 0; off < size; i++) {
		n = i < k && 1 + i < size ? 1 + (size_t)data[1 + i] : size - off;
		if (n > size - off)
			n = size - off;
		if (send(peer, data + off, n, MSG_NOSIGNAL) != (ssize_t)n)
			break;		/* the connection went: what was decided stands */
		off += n;
		settle(peer);
	}
	shutdown(peer, SHUT_WR);
	settle(peer);
	compare();
	for (i = 0; i < 64 && stats.open > 0; i++)
		event_base_loop(base, EVLOOP_NONBLOCK);
	close(peer);
	return 0;
}
