/*
 * fetch.c - tg_upstream_fetch: a whole-body exchange on top of the
 * streaming request, for small answers (logins, token refreshes, polls).
 * Used by the token cache and the poll multiplexer. The state lives as
 * long as the request (freed with it), so cancelling the returned handle
 * cleans up too.
 */
#include <stdlib.h>

#include "up.h"

struct up_fetch {
	tg_up_fetch_cb cb;
	void *arg;
	size_t max;
	struct evbuffer *buf;
};

static void
fetch_free(void *p)
{
	struct up_fetch *f = p;

	evbuffer_free(f->buf);
	free(f);
}

/* Over the limit: the caller hears it now; the connection is dropped
 * rather than drained of a body nobody wants. */
static void
too_large(struct tg_up_req *r, struct up_fetch *f)
{
	tg_up_req_cancel(r);
	f->cb(r->status, &r->resp_headers, NULL, TG_UP_TOO_LARGE, f->arg);
}

static void
on_fetch_head(struct tg_up_req *r, int status, const struct evkeyvalq *headers, void *arg)
{
	struct up_fetch *f = arg;
	const char *cl = evhttp_find_header(headers, "Content-Length");

	if (cl != NULL && strtoull(cl, NULL, 10) > f->max)
		too_large(r, f);
}

static void
on_fetch_body(struct tg_up_req *r, struct evbuffer *buf, void *arg)
{
	struct up_fetch *f = arg;

	evbuffer_add_buffer(f->buf, buf);
	if (evbuffer_get_length(f->buf) > f->max)
		too_large(r, f);
}

static void
on_fetch_done(struct tg_up_req *r, enum tg_up_error err, void *arg)
{
	struct up_fetch *f = arg;

	f->cb(r->head ? r->status : 0, r->head ? &r->resp_headers : NULL,
	    err == TG_UP_OK ? f->buf : NULL, err, f->arg);
}

static const struct tg_up_cbs fetch_cbs = { on_fetch_head, on_fetch_body, on_fetch_done };

struct tg_up_req *
tg_upstream_fetch(struct tg_upstream *u, enum evhttp_cmd_type method, const char *uri,
    const struct evkeyvalq *headers, struct evbuffer *body, size_t max_body,
    tg_up_fetch_cb cb, void *arg)
{
	struct up_fetch *f = tg_xcalloc(1, sizeof(*f));
	struct tg_up_req *r;

	f->cb = cb;
	f->arg = arg;
	f->max = max_body;
	f->buf = evbuffer_new();
	r = tg_upstream_send(u, method, uri, headers, body, &fetch_cbs, f);
	r->fetch = f;
	r->fetch_free = fetch_free;
	return r;
}
