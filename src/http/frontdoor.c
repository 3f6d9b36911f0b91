/*
 * frontdoor.c - the front door of frontdoor.h. Per connection a small state
 * machine walks the bytes the client sends: a head (parsed and checked
 * whole before a byte of it is passed on), then its body by Content-Length
 * or by chunks (sizes, data, CRLFs and trailer lines checked as they pass),
 * then the next head. It sits on the socket bufferevent's input buffer: a
 * callback on that buffer runs inside each read, before evhttp's read
 * callback, takes the new bytes aside and puts back what has been framed
 * (evbuffer_remove_buffer hands whole chains over without copying). What
 * evhttp writes goes to the socket as before: the front door costs nothing
 * on the way out. A refused head is replaced by a bodiless stand-in request
 * and everything after it is discarded. The state lives in a table indexed
 * by descriptor, claimed when evhttp sets the connection up and released by
 * its close callback, which the front door owns (tg_frontdoor_set_closecb).
 * Called by libevent for every connection of a listener
 * (tg_frontdoor_attach).
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/clock.h"
#include "tidegate/errors.h"
#include "tidegate/frontdoor.h"
#include "tidegate/http.h"
#include "tidegate/util.h"
#include "door.h"



#define LINE_MAX_BYTES 8192	/* a chunk-size or trailer line */

/*
 * evhttp reads the target with its own URI parser and drops the connection
 * without a word when that fails (an authority after "//" with a port over
 * 65535, a relative path with a ':' ...). Only a target that does not begin
 * with exactly one '/' can fail it, so only such a rare one is asked (the
 * very parser, not a copy of its rules).
 */
static int
evhttp_reads_target(const struct tg_head *h)
{
	struct evhttp_uri *u;
	char *t;

	if (h->target[0] == '/' && (h->tlen == 1 || h->target[1] != '/'))
		return 1;
	t = tg_xstrndup(h->target, h->tlen);
	u = evhttp_uri_parse_with_flags(t, EVHTTP_URI_NONCONFORMANT);
	free(t);
	if (u == NULL)
		return 0;
	evhttp_uri_free(u);
	return 1;
}

/* Tell the test hook (tg_frontdoor.decided) what was decided. */
static void
decided(struct conn *c, const struct tg_head *h, int body_end, int fault)
{
	struct tg_frontdoor_decision d = { h, body_end, fault, c->body };

	c->door->decided(&d, c->door->decided_arg);
}

/* Replace the head (hlen bytes of src) by a bodiless stand-in that carries
 * the fault, keep the method and target when they parsed (the target when
 * evhttp reads it too), drop the rest. */
static void
refuse(struct conn *c, struct evbuffer *src, struct evbuffer *dst, const struct tg_head *h,
    int fault)
{
	const struct tg_head_field *rid = h != NULL ? tg_head_get(h, "X-Request-Id") : NULL;

	if (h != NULL && h->line_ok && !evhttp_reads_target(h))
		evbuffer_add_printf(dst, "%.*s / HTTP/1.1\r\n", (int)h->mlen, h->method);
	else if (h != NULL && h->line_ok)
		evbuffer_add_printf(dst, "%.*s %.*s HTTP/1.1\r\n", (int)h->mlen, h->method,
		    (int)h->tlen, h->target);
	else
		evbuffer_add_printf(dst, "GET / HTTP/1.1\r\n");
	evbuffer_add_printf(dst, "Host: refused\r\nConnection: close\r\nContent-Length: 0\r\n"
	    TG_HEAD_REFUSAL_FIELD ": %d\r\n", fault);
	if (rid != NULL && tg_http_request_id_valid(rid->value, rid->vlen))
		evbuffer_add_printf(dst, "X-Request-Id: %.*s\r\n", (int)rid->vlen, rid->value);
	evbuffer_add(dst, "\r\n", 2);
	evbuffer_drain(src, evbuffer_get_length(src));
	c->st = ST_DISCARD;
	c->fault = fault;
	c->fault_at = ++c->requests;
	c->body = 0;
	if (c->door->decided != NULL)
		decided(c, h, 0, fault);
}

/* Empty lines before a request line are ignored (RFC 9112 §2.2): 1 when
 * what follows may be a request line, 0 when a read ended on the CR of one
 * more (its LF is yet to come: the next request is not refused for it). */
static int
skip_empty_lines(struct evbuffer *src)
{
	char two[2];
	ev_ssize_t n;

	while ((n = evbuffer_copyout(src, two, 2)) == 2 && two[0] == '\r' && two[1] == '\n')
		evbuffer_drain(src, 2);
	return n != 1 || two[0] != '\r';
}

/* A head went on to evhttp: its body (if any) is framed next, a chunked
 * one counted against limit. */
static void
head_passed(struct conn *c, const struct tg_head *h, uint64_t limit)
{
	c->requests++;
	c->since = c->read_at;		/* inside tg_door_on_input, which read it */
	c->st = h->chunked ? ST_CHUNK_SIZE : h->length > 0 ? ST_BODY : ST_HEAD;
	c->left = c->body = h->length > 0 ? (uint64_t)h->length : 0;
	c->limit = limit;
	c->rate_since = c->since;
	c->rate_base = 0;
	if (c->door->decided != NULL)
		decided(c, h, 0, 0);
}

/* What the listener says of a head that parsed: 0 or a fault; *limit the
 * body bytes it may send (max_body, or less as the check says). A bodiless
 * head costs one test unless the listener asked to see every head. */
static int
door_fault(struct conn *c, const struct tg_head *h, uint64_t *limit)
{
	const struct tg_frontdoor *d = c->door;
	int fault = TG_HEAD_OK;

	*limit = d->max_body;
	if (!evhttp_reads_target(h))
		return TG_HEAD_BAD_TARGET;
	if (d->check != NULL && (h->length > 0 || h->chunked || d->check_bodiless)) {
		fault = d->check(h, d->arg, limit);
		if (*limit > d->max_body)
			*limit = d->max_body;	/* evhttp's own limit stays above */
	}
	if (fault == TG_HEAD_OK && h->length >= 0 && (uint64_t)h->length > *limit)
		fault = TG_HEAD_BODY_TOO_LARGE;
	return fault;
}

/* h as evhttp reads what the front door read: each field "name: value",
 * no tab before a value (evhttp skips spaces only), the request line as
 * sent. h borrows the bytes being written over, which are not dst's. */
static void
write_head(struct evbuffer *dst, const struct tg_head *h)
{
	size_t i;

	evbuffer_add(dst, h->method, (size_t)(h->target + h->tlen + 9 - h->method));
	evbuffer_add(dst, "\r\n", 2);
	for (i = 0; i < h->nfields; i++) {
		evbuffer_add(dst, h->f[i].name, h->f[i].nlen);
		evbuffer_add(dst, ": ", 2);
		evbuffer_add(dst, h->f[i].value, h->f[i].vlen);
		evbuffer_add(dst, "\r\n", 2);
	}
	evbuffer_add(dst, "\r\n", 2);
}

/* A head in src: refused as soon as a fault shows, passed on once whole
 * and checked. 1 done, 0 more bytes needed. */
static int
step_head(struct conn *c, struct evbuffer *src, struct evbuffer *dst)
{
	size_t n, hlen = 0;
	struct tg_head h;
	uint64_t limit = 0;
	int fault;

	if (!skip_empty_lines(src) || (n = evbuffer_get_length(src)) == 0)
		return 0;
	if (n > c->door->max_head)
		n = c->door->max_head;
	fault = tg_head_scan((const char *)evbuffer_pullup(src, (ev_ssize_t)n), n, &h, &hlen);
	if (fault == TG_HEAD_INCOMPLETE) {
		if (n < c->door->max_head)
			return 0;
		fault = TG_HEAD_TOO_LARGE;
	}
	if (fault == TG_HEAD_OK)
		fault = door_fault(c, &h, &limit);
	if (fault != TG_HEAD_OK) {
		refuse(c, src, dst, fault == TG_HEAD_TOO_LARGE ? NULL : &h, fault);
		return 1;
	}
	if (h.tab) {
		write_head(dst, &h);
		evbuffer_drain(src, hlen);
	} else {
		evbuffer_remove_buffer(src, dst, hlen);
	}
	head_passed(c, &h, limit);
	return 1;
}

/* Pass up to c->left bytes; then go to state next. */
static int
step_move(struct conn *c, struct evbuffer *src, struct evbuffer *dst, int next)
{
	size_t n = evbuffer_get_length(src);

	if ((uint64_t)n > c->left)
		n = (size_t)c->left;
	evbuffer_remove_buffer(src, dst, n);
	c->left -= n;
	if (c->left == 0)
		c->st = next;
	if (c->st == ST_HEAD && c->door->decided != NULL)
		decided(c, NULL, 1, 0);
	return 1;
}

/* One CRLF-terminated line into buf (NUL-terminated, CRLF kept): its length,
 * 0 when incomplete, -1 when too long or ending in a bare LF. */
static ev_ssize_t
peek_line(struct evbuffer *src, char *buf, size_t size)
{
	struct evbuffer_ptr nl = evbuffer_search(src, "\n", 1, NULL);
	size_t len;

	if (nl.pos < 0)
		return evbuffer_get_length(src) >= size ? -1 : 0;
	len = (size_t)nl.pos + 1;
	if (len >= size || len < 2)
		return -1;
	evbuffer_copyout(src, buf, len);
	buf[len] = '\0';
	if (buf[len - 2] != '\r' || memchr(buf, '\r', len - 2) != NULL)
		return -1;
	return (ev_ssize_t)len;
}

/* "HEX CRLF": the one spelling of a chunk-size line evhttp reads as the
 * front door does (evhttp's strtoll would take "0x5" as 5, and it refuses
 * the extensions RFC 9112 lets a client send). */
static void
add_chunk_line(struct evbuffer *dst, uint64_t size)
{
	char buf[24], *p = buf + sizeof(buf);

	*--p = '\n';
	*--p = '\r';
	do {
		*--p = "0123456789ABCDEF"[size & 15];
		size >>= 4;
	} while (size > 0);
	evbuffer_add(dst, p, (size_t)(buf + sizeof(buf) - p));
}

/* A chunk-size line (extensions checked and dropped), counted against the
 * request's limit before the front door writes its own for evhttp. */
static int
step_chunk_size(struct conn *c, struct evbuffer *src, struct evbuffer *dst)
{
	char line[LINE_MAX_BYTES];
	ev_ssize_t len = peek_line(src, line, sizeof(line));
	uint64_t size = 0;

	if (len <= 0)
		return (int)len;
	if (tg_head_chunk_size(line, (size_t)len, &size) != 0)
		return -1;
	if (size > c->limit) {
		c->fault = TG_HEAD_BODY_TOO_LARGE;
		return -1;
	}
	c->limit -= size;
	c->body += size;
	evbuffer_drain(src, (size_t)len);
	add_chunk_line(dst, size);
	c->left = size;
	c->st = size > 0 ? ST_CHUNK_DATA : ST_TRAILER;
	return 1;
}

static int
step_chunk_end(struct conn *c, struct evbuffer *src, struct evbuffer *dst)
{
	char two[2];

	if (evbuffer_copyout(src, two, 2) < 2)
		return 0;
	if (two[0] != '\r' || two[1] != '\n')
		return -1;
	evbuffer_remove_buffer(src, dst, 2);
	c->st = ST_CHUNK_SIZE;
	return 1;
}

/* Trailer fields after the last chunk, up to the empty line: checked as
 * header fields are, at most max_head bytes of them, and dropped (nothing
 * here reads one; evhttp would add them to the request's headers after
 * the front door's check had passed them). The empty line ends the body. */
static int
step_trailer(struct conn *c, struct evbuffer *src, struct evbuffer *dst)
{
	char line[LINE_MAX_BYTES];
	ev_ssize_t len = peek_line(src, line, sizeof(line));

	if (len <= 0)
		return (int)len;
	evbuffer_drain(src, (size_t)len);
	if (len == 2) {
		evbuffer_add(dst, "\r\n", 2);
		c->st = ST_HEAD;
		if (c->door->decided != NULL)
			decided(c, NULL, 1, 0);
		return 1;
	}
	c->left += (uint64_t)len;
	return tg_head_field_line_ok(line, (size_t)len) && c->left <= c->door->max_head ? 1 : -1;
}

/* The PROXY header that opens a connection of a proxy_protocol listener,
 * before any HTTP byte: its address becomes the connection's. Malformed,
 * too large, or refused by the per-address limit: the connection is reset
 * unanswered (the balancer, not a client, broke the protocol). */
static int
step_proxy(struct conn *c, struct evbuffer *src)
{
	size_t n = evbuffer_get_length(src);
	struct tg_proxy_hdr h;
	int len;

	if (n > TG_PROXY_V2_MAX)
		n = TG_PROXY_V2_MAX;
	len = tg_http_proxy_parse(evbuffer_pullup(src, (ev_ssize_t)n), n, &h);
	if (len == 0)
		return 0;
	if (len < 0 || tg_door_proxied(c, &h) != 0) {
		evbuffer_drain(src, evbuffer_get_length(src));
		c->st = ST_DISCARD;
		tg_http_fd_reset(bufferevent_getfd(c->bev));
		return 0;
	}
	evbuffer_drain(src, (size_t)len);
	c->st = ST_HEAD;
	return 1;
}

static int
step(struct conn *c, struct evbuffer *src, struct evbuffer *dst)
{
	switch (c->st) {
	case ST_PROXY:
		return step_proxy(c, src);
	case ST_HEAD:
		return step_head(c, src, dst);
	case ST_BODY:
		return step_move(c, src, dst, ST_HEAD);
	case ST_CHUNK_SIZE:
		return step_chunk_size(c, src, dst);
	case ST_CHUNK_DATA:
		return step_move(c, src, dst, ST_CHUNK_END);
	case ST_CHUNK_END:
		return step_chunk_end(c, src, dst);
	case ST_TRAILER:
		return step_trailer(c, src, dst);
	default:
		evbuffer_drain(src, evbuffer_get_length(src));
		return 0;
	}
}

/* Move the bytes of in from offset off on into c->hold; the bytes before
 * off were framed already and wait for evhttp. */
static void
hold_from(struct conn *c, struct evbuffer *in, size_t off)
{
	struct evbuffer *tmp;

	if (off == 0) {
		evbuffer_add_buffer(c->hold, in);
		return;
	}
	tmp = evbuffer_new();
	evbuffer_remove_buffer(in, tmp, off);
	evbuffer_add_buffer(c->hold, in);
	evbuffer_add_buffer(in, tmp);
	evbuffer_free(tmp);
}

/* The common case, framed where the bytes lie (no move, no copy): whole
 * heads that pass, inside one chain of the buffer, and Content-Length
 * bodies. Returns the offset where it stopped: the end of in, or the first
 * byte that needs the careful path (a head split over chains or reads, a
 * refused head, a chunked body, empty lines). */
static size_t
frame_in_place(struct conn *c, struct evbuffer *in, size_t off)
{
	size_t len = evbuffer_get_length(in), n, hlen;
	struct evbuffer_iovec v;
	struct evbuffer_ptr at;
	struct tg_head h;
	uint64_t limit;

	while (off < len) {
		if (c->st == ST_BODY) {
			n = (uint64_t)(len - off) < c->left ? len - off : (size_t)c->left;
			c->left -= n;
			off += n;
			c->st = c->left == 0 ? ST_HEAD : ST_BODY;
			if (c->st == ST_HEAD && c->door->decided != NULL)
				decided(c, NULL, 1, 0);
			continue;
		}
		evbuffer_ptr_set(in, &at, off, EVBUFFER_PTR_SET);
		if (c->st != ST_HEAD || evbuffer_peek(in, -1, &at, &v, 1) < 1 ||
		    tg_head_scan(v.iov_base, v.iov_len, &h, &hlen) != TG_HEAD_OK || h.tab ||
		    hlen > c->door->max_head || door_fault(c, &h, &limit) != TG_HEAD_OK)
			break;
		off += hlen;
		head_passed(c, &h, limit);
	}
	return off;
}

/*
 * A chunked body went bad after its head had passed (a malformed line, a
 * chunk over the request's limit): evhttp is told the body ends here, as a
 * chunked body ends (the last chunk, or the empty line closing the trailer
 * section), so that it hands the request to its handler, which learns the
 * fault from tg_frontdoor_refusal, answers it and closes; nothing of what
 * the client sent after it is read. Never a reset: the client learns why.
 */
static void
body_fault(struct conn *c, struct evbuffer *dst)
{
	if (c->st == ST_TRAILER)
		evbuffer_add(dst, "\r\n", 2);
	else
		evbuffer_add(dst, "0\r\n\r\n", 5);
	if (c->fault == 0)
		c->fault = TG_HEAD_BAD_CHUNK;
	c->fault_at = c->requests;
	if (c->door->decided != NULL)
		decided(c, NULL, 1, c->fault);
	evbuffer_drain(c->hold, evbuffer_get_length(c->hold));
	c->st = ST_DISCARD;
}

/* Inside each read into the connection's input buffer, before evhttp reads
 * it: frame the new bytes and keep back what may not pass yet. */
void
tg_door_on_input(struct evbuffer *in, const struct evbuffer_cb_info *info, void *arg)
{
	struct conn *c = arg;
	size_t len, off;
	int rc = 1;

	if (c->busy || info->n_added == 0)
		return;
	c->busy = 1;
	len = evbuffer_get_length(in);
	off = len - info->n_added;
	c->read_at = tg_clock_mono_ms();	/* one read, for every use below */
	if ((c->st != ST_HEAD && c->st != ST_PROXY) ||
	    (evbuffer_get_length(c->hold) == 0 && c->requests > 0))
		c->since = c->read_at;	/* body bytes, or a new head begins */
	if (evbuffer_get_length(c->hold) == 0 && c->st != ST_DISCARD)
		off = frame_in_place(c, in, off);
	if (off < len)
		hold_from(c, in, off);
	while (rc > 0 && evbuffer_get_length(c->hold) > 0)
		rc = step(c, c->hold, in);
	if (rc < 0)
		body_fault(c, in);
	c->busy = 0;
}

/* The fault is found by the request's place on its connection, not by a
 * field of it: no header search per request, and a body that went bad has
 * no field to carry one. */
int
tg_frontdoor_refusal(struct evhttp_request *req)
{
	int fault = tg_door_request_begins(req);

	return fault > 0 && fault < TG_HEAD_NFAULTS ? fault : 0;
}

void
tg_frontdoor_close_after(struct evhttp_request *req)
{
	struct evkeyvalq *out = evhttp_request_get_output_headers(req);

	evhttp_remove_header(out, "Connection");
	evhttp_add_header(out, "Connection", "close");
}

void
tg_frontdoor_reply(struct evhttp_request *req, int fault)
{
	tg_frontdoor_close_after(req);
	tg_reply_error(req, tg_head_fault_status(fault), tg_head_fault_code(fault),
	    tg_head_fault_message(fault), NULL, 0);
}
