/*
 * fuzz_frontdoor.c - raw bytes a client could send, through the front
 * door's framing (src/http/frontdoor.c) as libevent would deliver them:
 * the input split into reads of sizes the input chooses, each read added
 * to the connection's input buffer and framed, what passed drained as
 * evhttp would. Checks: no crash, no leak, nothing held beyond a head's
 * limit, and without a refusal what passed on is the bytes received, in
 * order, but for dropped empty lines (a refusal passes a stand-in instead)
 * when nothing was rewritten: a chunked body's size lines and trailer, and
 * a head with a tab, are written by the front door in the form evhttp
 * reads (fuzz_edge.c holds evhttp's reading of those to the front door's).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "http/door.h"
#include "tidegate/http.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
feed(struct conn *c, struct evbuffer *in, struct evbuffer *passed, const uint8_t *p, size_t n)
{
	struct evbuffer_cb_info info;

	memset(&info, 0, sizeof(info));
	info.orig_size = evbuffer_get_length(in);
	info.n_added = n;
	evbuffer_add(in, p, n);
	tg_door_on_input(in, &info, c);
	evbuffer_add_buffer(passed, in);	/* evhttp takes what passed */
}

/* b (n bytes) without CRLF pairs, in place; the new length. */
static size_t
strip_crlf(unsigned char *b, size_t n)
{
	size_t i, o = 0;

	for (i = 0; i < n; i++) {
		if (b[i] == '\r' && i + 1 < n && b[i + 1] == '\n') {
			i++;
			continue;
		}
		b[o++] = b[i];
	}
	return o;
}

/* Bytes the front door may write in its own form: a chunked body (its
 * size lines and trailer), a tab in a head. */
static int
rewritten(struct evbuffer *fed)
{
	size_t n = evbuffer_get_length(fed), i;
	const char *p = (const char *)evbuffer_pullup(fed, -1);

	for (i = 0; i < n; i++)
		if (p[i] == '\t' || (n - i >= 7 && strncasecmp(p + i, "chunked", 7) == 0))
			return 1;
	return 0;
}

/* Without a refusal what passed is what came, in order, but for the empty
 * lines the front door drops before a request line (RFC 9112 section 2.2):
 * with every CRLF pair taken out of both, passed is a prefix of fed. */
static int
same_but_empty_lines(struct evbuffer *passed, struct evbuffer *fed)
{
	size_t np = evbuffer_get_length(passed), nf = evbuffer_get_length(fed);
	unsigned char *p = malloc(np + 1), *f = malloc(nf + 1);
	int ok;

	evbuffer_copyout(passed, p, np);
	evbuffer_copyout(fed, f, nf);
	np = strip_crlf(p, np);
	nf = strip_crlf(f, nf);
	ok = np <= nf && (np == 0 || memcmp(p, f, np) == 0);
	free(p);
	free(f);
	return ok;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct event_base *base;
	static const struct tg_frontdoor door = { .max_head = 4096, .max_body = 1 << 20 };
	struct evbuffer *in = evbuffer_new(), *passed = evbuffer_new(), *fed = evbuffer_new();
	struct conn c;
	size_t off = 0, n;

	if (base == NULL)
		base = event_base_new();
	memset(&c, 0, sizeof(c));
	c.door = &door;
	c.hold = evbuffer_new();
	c.bev = bufferevent_socket_new(base, -1, 0);	/* no socket: a reset is a no-op */
	while (off < size) {
		n = 1 + data[off] % 64;		/* the read sizes come from the input */
		off++;
		if (n > size - off)
			n = size - off;
		evbuffer_add(fed, data + off, n);
		feed(&c, in, passed, data + off, n);
		off += n;
		if (evbuffer_get_length(c.hold) > door.max_head + 64 + 8192)
			abort();
	}
	if (c.st != ST_DISCARD && !rewritten(fed) && !same_but_empty_lines(passed, fed))
		abort();
	evbuffer_free(fed);
	bufferevent_free(c.bev);
	event_base_loop(base, EVLOOP_NONBLOCK);	/* runs the bufferevent's finaliser */
	evbuffer_free(c.hold);
	evbuffer_free(in);
	evbuffer_free(passed);
	return 0;
}
