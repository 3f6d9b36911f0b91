/*
 * filebody.c - a request body read from a file (tg_upstream_send_file:
 * webhook payloads of any size), sent in bounded pieces with
 * backpressure. libevent would map the whole file into memory at once
 * (a file segment added to a buffer that does not drain to a socket is
 * "materialized": mmap of all of it), and the pages stay resident until
 * the request ends: a 1 GB payload cost 1 GB of RSS per attempt. Here:
 *   - at most FIRST bytes are read into the request's own buffer, which
 *     evhttp moves behind the head it writes (so the head and the first
 *     bytes leave in order, whatever the connection's state);
 *   - the rest is added to the connection's output buffer while the
 *     kernel takes what is there: the pool's output callback (pool.c,
 *     on_output) calls tg_up_body_more as bytes leave. On a plain
 *     connection it is one sendfile segment of the file for all the rest
 *     (nothing mapped, nothing copied: the output buffer drains to the
 *     socket); on TLS, where OpenSSL needs the bytes in memory, reads of
 *     PIECE bytes keep at most WINDOW bytes queued.
 * The refill runs inside the drain, before the bufferevent looks whether
 * its output ran empty, so evhttp never sees the request written before
 * its last byte is queued.
 */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "tidegate/log.h"
#include "up.h"

#define PIECE	(64 * 1024)	/* a read, on TLS */
#define WINDOW	(256 * 1024)	/* queued at most, on TLS; and the first bytes */

/* n bytes of r's file at r->body_off read onto the end of out: 0, or -1
 * (logged; the receiver then sees a short body and the attempt fails). */
static int
read_piece(struct tg_up_req *r, struct evbuffer *out, size_t n)
{
	struct evbuffer_iovec v;
	ssize_t got;

	if (evbuffer_reserve_space(out, (ev_ssize_t)n, &v, 1) < 1)
		return -1;
	do
		got = pread(r->fd, v.iov_base, n, (off_t)r->body_off);
	while (got < 0 && errno == EINTR);
	if (got <= 0) {
		tg_log(TG_LOG_ERROR, "upstream_body_read", TG_LS("error",
		    got < 0 ? strerror(errno) : "the file is shorter than its length"),
		    TG_LI("offset", r->body_off));
		return -1;
	}
	v.iov_len = (size_t)got;
	evbuffer_commit_space(out, &v, 1);
	r->body_off += got;
	return 0;
}

void
tg_up_body_first(struct tg_up_req *r, struct evbuffer *req_out)
{
	int64_t n = r->seglen < WINDOW ? r->seglen : WINDOW;

	r->body_off = 0;
	while (r->body_off < n)
		if (read_piece(r, req_out, (size_t)(n - r->body_off)) < 0)
			return;
}

void
tg_up_body_more(struct tg_up_req *r, const struct up_conn *c, struct evbuffer *out)
{
	int64_t left = r->seglen - r->body_off;

	if (left <= 0)
		return;
	if (!c->o->tls) {
		if (evbuffer_add_file_segment(out, r->seg, r->body_off, left) == 0)
			r->body_off = r->seglen;
		return;
	}
	while (left > 0 && evbuffer_get_length(out) < WINDOW) {
		if (read_piece(r, out, (size_t)(left < PIECE ? left : PIECE)) < 0)
			return;
		left = r->seglen - r->body_off;
	}
}
