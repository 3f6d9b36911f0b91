/*
 * held.c - admin requests answered later: a feature whose answer waits on
 * the state seam (an outbox listing, a redelivery, the counters of a
 * scrape) holds the request, and learns when it takes it back whether the
 * client is still there. The scrape of /metrics gathers each feature's
 * part, some written later, and replies once every part is in, in the
 * features' order.
 */
#include <stdlib.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "tidegate/frontdoor.h"
#include "tidegate/http.h"
#include "gw.h"

struct gw_held {
	struct evhttp_request *req;	/* NULL once the client went */
	struct evhttp_connection *conn;
};

static void
on_gone(struct evhttp_connection *conn, void *arg)
{
	struct gw_held *h = arg;

	h->req = NULL;		/* libevent frees the request with its connection */
	h->conn = NULL;
}

struct gw_held *
gw_held_new(struct evhttp_request *req)
{
	struct gw_held *h = tg_xcalloc(1, sizeof(*h));

	h->req = req;
	h->conn = evhttp_request_get_connection(req);
	if (h->conn != NULL)
		tg_frontdoor_set_closecb(h->conn, on_gone, h);
	return h;
}

struct evhttp_request *
gw_held_take(struct gw_held *h)
{
	struct evhttp_request *req = h->req;

	if (h->conn != NULL)
		tg_frontdoor_set_closecb(h->conn, NULL, NULL);
	free(h);
	return req;
}

/* ---- the scrape ---- */

struct gw_scrape {
	struct gw_held *held;
	struct evbuffer *parts[GW_MAX_FEATURES + 1];	/* the core's, then each feature's */
	int nparts;
	int pending;
};

void
gw_scrape_hold(struct gw_scrape *s)
{
	s->pending++;
}

void
gw_scrape_release(struct gw_scrape *s)
{
	struct evhttp_request *req;
	int i;

	if (--s->pending > 0)
		return;
	for (i = 1; i < s->nparts; i++)
		evbuffer_add_buffer(s->parts[0], s->parts[i]);
	if ((req = gw_held_take(s->held)) != NULL)
		tg_reply_buf(req, 200, "text/plain; version=0.0.4", s->parts[0]);
	for (i = 0; i < s->nparts; i++)
		evbuffer_free(s->parts[i]);
	free(s);
}

void
gw_scrape(struct gw *gw, struct evhttp_request *req, struct evbuffer *core)
{
	struct gw_scrape *s = tg_xcalloc(1, sizeof(*s));
	const struct gw_background_role *b;
	int id;

	s->held = gw_held_new(req);
	s->parts[0] = core;
	s->nparts = 1;
	s->pending = 1;		/* until every feature has been asked */
	for (id = 0; id < gw->nfeat; id++) {
		if ((b = gw->feat[id]->background) == NULL || b->metrics == NULL)
			continue;
		s->parts[s->nparts] = evbuffer_new();
		b->metrics(gw->feat_ctx[id], s->parts[s->nparts++], s);
	}
	gw_scrape_release(s);
}
