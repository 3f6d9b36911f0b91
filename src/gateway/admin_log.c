/*
 * admin_log.c - the admin listener's requests as the dex and sim ones are
 * seen: a request id (the client's valid X-Request-Id, else a new one)
 * set on the answer at arrival, before any handler replies, so that every
 * answer carries it and every error body names it (tg_http_request_id:
 * the core's, a feature's, the front door's refusals), a trace id, and
 * one access line with the same fields as theirs once the exchange ends
 * (tg_frontdoor_set_on_end): the answer written, or the connection closed
 * first (499 client_closed). The small record behind the line is this
 * file's, freed at that end, so a held request (held.c) whose client
 * leaves costs nothing afterwards. The error answers say their code here
 * (gw_admin_reply_error), the webhook admin API the key it authenticated
 * (gw_admin_set_key). Called by admin.c at arrival and for its errors,
 * and by the features' admin APIs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/clock.h"
#include "tidegate/errors.h"
#include "tidegate/frontdoor.h"
#include "tidegate/http.h"
#include "gw.h"

struct gw_admin_req {
	TAILQ_ENTRY(gw_admin_req) next;	/* gw->admin_reqs */
	struct gw *gw;
	struct evhttp_request *req;	/* until the exchange ends */
	struct evbuffer *out;		/* req's body on its way out, watched */
	struct evbuffer_cb_entry *watch;
	const char *op, *method;	/* static */
	char *path, *user_agent, *key;	/* owned; user_agent and key may be NULL */
	char id[TG_UUID_LEN], trace_id[33], client[64];
	char error[64];			/* the code of the error answer, or "" */
	uint64_t request_bytes, bytes;
	int64_t t0;
};

/* The answer's body goes out: every admin answer passes here, the
 * core's, a feature's or the front door's (a HEAD's was dropped before,
 * tg_reply_buf: none). */
static void
on_out(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct gw_admin_req *a = arg;

	a->bytes += info->n_added;
}

static void
admin_req_free(struct gw_admin_req *a)
{
	TAILQ_REMOVE(&a->gw->admin_reqs, a, next);
	free(a->path);
	free(a->user_agent);
	free(a->key);
	free(a);
}

/* The line, once: written, with the status sent; or the client went first.
 * Then req is not ours to touch: libevent frees it with the connection
 * (or, had it detached it, when it is answered, before adding a byte),
 * and no callback runs when a buffer is freed, so the watch stays. */
static void
on_end(struct evhttp_request *req, int written, void *arg)
{
	struct gw_admin_req *a = arg;
	struct gw_access l = { .id = a->id, .trace_id = a->trace_id, .client = a->client,
		.user_agent = a->user_agent, .service = "admin", .op = a->op,
		.method = a->method, .path = a->path, .request_bytes = a->request_bytes,
		.ms = tg_clock_mono_ms() - a->t0, .key = a->key, .served = "gateway",
		.upstream_ms = -1 };

	if (written) {
		evbuffer_remove_cb_entry(a->out, a->watch);
		l.status = evhttp_request_get_response_code(req);
		l.bytes = a->bytes;
		l.error = a->error[0] != '\0' ? a->error : NULL;
	} else {
		l.status = 499;
		l.error = "client_closed";
	}
	gw_access_line(&l);
	admin_req_free(a);
}

void
gw_admin_begin(struct gw *gw, struct evhttp_request *req, const char *op, int probe)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	const struct gw_config *cfg = &gw->rt->cfg;
	struct gw_admin_req *a = tg_xcalloc(1, sizeof(*a));

	(void)gw_req_ids(req, a->id, a->trace_id);
	evhttp_remove_header(h, "X-Request-Id");
	evhttp_add_header(h, "X-Request-Id", a->id);
	if (!cfg->access_log || (probe && !cfg->access_log_probes) ||
	    tg_frontdoor_set_on_end(req, on_end, a) != 0) {
		free(a);	/* no line for it */
		return;
	}
	a->gw = gw;
	a->req = req;
	a->op = op;
	a->method = tg_http_method(req);
	a->path = tg_xstrdup(tg_http_path(req));
	a->t0 = tg_clock_mono_ms();
	a->user_agent = gw_access_client(req, a->client, sizeof(a->client), &a->request_bytes);
	a->out = evhttp_request_get_output_buffer(req);
	a->watch = evbuffer_add_cb(a->out, on_out, a);
	TAILQ_INSERT_TAIL(&gw->admin_reqs, a, next);
}

/* The record of req, or NULL (not logged); few are in flight at once. */
static struct gw_admin_req *
find(struct gw *gw, struct evhttp_request *req)
{
	struct gw_admin_req *a;

	TAILQ_FOREACH(a, &gw->admin_reqs, next)
		if (a->req == req)
			return a;
	return NULL;
}

void
gw_admin_set_key(struct gw *gw, struct evhttp_request *req, const char *name)
{
	struct gw_admin_req *a = find(gw, req);

	if (a != NULL) {
		free(a->key);
		a->key = name != NULL ? tg_xstrdup(name) : NULL;
	}
}

void
gw_admin_reply_error(struct gw *gw, struct evhttp_request *req, int status,
    const char *code, const char *msg)
{
	struct gw_admin_req *a = find(gw, req);
	struct evbuffer *b = evbuffer_new();

	if (code == NULL)
		code = tg_error_code(status);
	if (a != NULL)
		snprintf(a->error, sizeof(a->error), "%s", code);
	tg_error_body(b, status, code, msg, tg_http_request_id(req), NULL, 0);
	tg_reply_buf(req, status, "application/json", b);	/* a HEAD: the head alone */
	evbuffer_free(b);
}
