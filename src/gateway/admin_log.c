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
 * leaves costs nothing afterwards. Called by admin.c at arrival and by
 * features (gw_admin_set_key).
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/clock.h"
#include "tidegate/frontdoor.h"
#include "tidegate/http.h"
#include "tidegate/json.h"
#include "gw.h"

#define ERROR_BODY_MAX 4096	/* bytes of an error body read for its code */

struct gw_admin_req {
	TAILQ_ENTRY(gw_admin_req) next;	/* gw->admin_reqs */
	struct gw *gw;
	struct evhttp_request *req;	/* until the exchange ends */
	struct evbuffer *out;		/* req's body on its way out, watched */
	struct evbuffer_cb_entry *watch;
	const char *op, *method;	/* static */
	char *path, *user_agent, *key;	/* owned; user_agent and key may be NULL */
	char id[TG_UUID_LEN], trace_id[33], client[64];
	char error[64];			/* the code of the error body sent, or "" */
	uint64_t request_bytes, bytes;
	int64_t t0;
};

/* The "error" member of a JSON error body (errors.h) into out; the
 * admin's are small, a longer one is left unread. */
static void
error_code(struct evbuffer *body, char *out, size_t size)
{
	char text[ERROR_BODY_MAX];
	ev_ssize_t n = evbuffer_copyout(body, text, sizeof(text));
	struct tg_err err;
	yajl_val v = n > 0 ? tg_json_parse(text, (size_t)n, &err) : NULL;
	const char *code = v != NULL ? tg_json_get_str(v, "error") : NULL;

	if (code != NULL)
		snprintf(out, size, "%s", code);
	yajl_tree_free(v);
}

/* The answer's body goes out (a HEAD's was dropped before: none). Every
 * admin answer passes here, the core's, a feature's or the front door's,
 * so the code of an error answer is read from what was sent. */
static void
on_out(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct gw_admin_req *a = arg;
	const char *ct;

	if (info->n_added == 0)
		return;
	a->bytes += info->n_added;
	ct = evhttp_find_header(evhttp_request_get_output_headers(a->req), "Content-Type");
	if (a->error[0] == '\0' && evhttp_request_get_response_code(a->req) >= 400 &&
	    ct != NULL && strncmp(ct, "application/json", 16) == 0)
		error_code(buf, a->error, sizeof(a->error));
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

/* The line, once: written, with the status sent; or the client went first
 * (req is gone then, and its output buffer with it: libevent runs no
 * callback when it frees a buffer, so the watch needs no removal). */
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

	gw_req_ids(req, a->id, a->trace_id);
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

void
gw_admin_set_key(struct gw *gw, struct evhttp_request *req, const char *name)
{
	struct gw_admin_req *a;

	TAILQ_FOREACH(a, &gw->admin_reqs, next) {
		if (a->req == req) {
			free(a->key);
			a->key = name != NULL ? tg_xstrdup(name) : NULL;
			return;
		}
	}
}
