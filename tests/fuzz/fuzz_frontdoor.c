/*
 * fuzz_frontdoor.c - raw bytes a client could send, through the front
 * door's framing (src/http/frontdoor.c) as libevent would deliver them:
 * the input split into reads of sizes the input chooses, each read added
 * to the connection's input buffer and framed, what passed drained as
 * evhttp would. Checks: no crash, no leak, nothing held beyond a head's
 * limit, and without a refusal what passed on is a prefix of the bytes
 * received, in order (a refusal passes a stand-in request instead).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

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
	if (c.st != ST_DISCARD) {	/* no refusal: the bytes passed are a prefix */
		size_t np = evbuffer_get_length(passed), nf = evbuffer_get_length(fed);

		if (np > nf || (np > 0 && memcmp(evbuffer_pullup(passed, -1),
		    evbuffer_pullup(fed, -1), np) != 0))
			abort();
	}
	evbuffer_free(fed);
	bufferevent_free(c.bev);
	evbuffer_free(c.hold);
	evbuffer_free(in);
	evbuffer_free(passed);
	return 0;
}
