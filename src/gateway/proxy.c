/*
 * proxy.c - the arrival of one client request on the dex or sim listener:
 * request id, the front door's refusal of its head, the normalised target
 * (paths.c), a feature's own path prefix, the route onto a canonical
 * operation, caller authentication, logins (logins.c), the request check
 * (validate.c), then the relay (relay.c). A request is tagged with its
 * caller (gw_req_owner) for the pool's per-key limits; the client's close
 * while it lives ends it (reply.c, gw_req_finish).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/clock.h"
#include "tidegate/frontdoor.h"
#include "tidegate/http.h"
#include "tidegate/log.h"
#include "gw.h"

/* The client's connection closed before we finished. If libevent already
 * detached the request it is ours to release (sending on a detached
 * request frees it); otherwise libevent frees it with the connection. */
static void
on_client_close(struct evhttp_connection *conn, void *arg)
{
	struct gw_req *r = arg;
	struct evhttp_request *req = r->req;

	r->conn = NULL;
	r->req = NULL;
	r->client_gone = 1;
	/* the reply will never be written; flush.c may have dropped the client */
	r->error = gw_flush_closed(r) ? "client_send_timeout" : "client_closed";
	if (r->status == 0 || r->started)
		r->status = r->started ? r->status : 499;
	if (req != NULL && evhttp_request_get_connection(req) == NULL) {
		if (r->started)
			evhttp_send_reply_end(req);
		else
			evhttp_send_reply(req, 499, "Client Closed Request", NULL);
	}
	gw_req_finish(r);
}


/* ---- arrival ---- */

static struct gw_req *
req_new(struct gw *gw, int listener, struct evhttp_request *req)
{
	struct gw_req *r = tg_xcalloc(1, sizeof(*r));
	int flag;

	r->gw = gw;
	r->rt = gw->rt;
	r->rt->refs++;
	r->svc = &r->rt->svc[listener];
	r->req = req;
	r->conn = evhttp_request_get_connection(req);
	r->method = tg_http_method(req);
	r->path = tg_xstrdup(tg_http_path(req));
	r->t0_us = tg_clock_mono_us();
	r->t0 = r->t0_us / 1000;
	flag = gw_req_ids(req, r->id, r->trace_id);
	r->sampled = flag != 0;
	if (gw->otlp != NULL)
		gw_span_arrive(r, flag);	/* tracing: its SERVER span starts */
	gw_access_note(r);
	gw->inflight++;
	TAILQ_INSERT_TAIL(&gw->reqs, r, inflight_next);
	tg_frontdoor_set_closecb(r->conn, on_client_close, r);
	return r;
}

/* A known path, another method: Allow names the path's methods. */
static void
reply_405(struct gw_req *r)
{
	char allow[64];

	tg_route_allow(r->svc->routes, r->path, allow, sizeof(allow));
	gw_req_reply_405(r, allow);
}

/* An unknown path: the route path it nearly is, if one is near. */
static void
not_found(struct gw_req *r)
{
	char msg[400];

	snprintf(msg, sizeof(msg), "no such endpoint");
	gw_path_hint(r, msg + strlen(msg), sizeof(msg) - strlen(msg));
	gw_req_reply_error(r, 404, "NOT_FOUND", msg);
}

/* Its head announced more than the caller may send: which cap, and why. */
static void
too_large(struct gw_req *r)
{
	char msg[512];

	gw_body_cap_message(r->rt, r->svc, r->op == TG_OP_DEX_AUTHENTICATE ||
	    r->op == TG_OP_SIM_TOKEN, msg, sizeof(msg));
	gw_req_reply_error(r, 413, "PAYLOAD_TOO_LARGE", msg);
}

/* A body declared as a type its route does not take (415, RFC 9110
 * 15.5.16) is refused before it is read as the route's: an XML body would
 * otherwise be told "invalid JSON", a form "malformed number". Accept-Post
 * names what the route takes. A body without Content-Type is read as the
 * route's first type, as legacy tools send it. */
static int
media_refused(struct gw_req *r)
{
	const char *accepts = r->m.route != NULL ? r->m.route->accepts : NULL;
	const char *ct;
	char msg[400];

	if (accepts == NULL ||
	    evbuffer_get_length(evhttp_request_get_input_buffer(r->req)) == 0 ||
	    tg_http_media_accepted(accepts, ct = tg_http_header(r->req, "Content-Type")))
		return 0;
	snprintf(msg, sizeof(msg), "Content-Type %.100s is not taken here: this endpoint takes "
	    "%s%s%s", ct, accepts, strcmp(accepts, "application/json") == 0 ?
	    " (or a +json type)" : "", strncasecmp(ct, "application/x-www-form-urlencoded",
	    33) == 0 ? "; curl -d sends application/x-www-form-urlencoded: add -H "
	    "'Content-Type: application/json'" : "");
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "Accept-Post", accepts);
	gw_req_reply_error(r, 415, "UNSUPPORTED_MEDIA_TYPE", msg);
	return 1;
}

void
gw_on_request(struct evhttp_request *req, void *arg)
{
	struct gw_lctx *lc = arg;
	int rc, fault = tg_frontdoor_refusal(req);	/* first: it decides the client */
	struct gw_req *r = req_new(lc->gw, lc->listener, req);

	if (fault != 0)		/* refused on its head (frontdoor.h): answer, close */
		tg_frontdoor_close_after(req);
	if (fault != 0 && fault != TG_HEAD_BAD_TARGET && fault != TG_HEAD_NOT_FOUND &&
	    fault != TG_HEAD_BODY_TOO_LARGE && fault != TG_HEAD_UNAVAILABLE) {
		gw_req_reply_error(r, tg_head_fault_status(fault), tg_head_fault_code(fault),
		    tg_head_fault_message(fault));
		return;
	}
	if (gw_path_prepare(r) != 0)
		return;		/* 400 or 404 sent; r->path is normalised from here on */
	r->fault = fault;
	if (fault != TG_HEAD_BAD_TARGET && gw_feat_prefix(r))
		return;		/* a feature's own endpoint: never upstream */
	if (fault != 0 && fault != TG_HEAD_BODY_TOO_LARGE) {
		/* refused for its target, which passes now: cannot be */
		gw_req_reply_error(r, 400, "BAD_REQUEST_TARGET", tg_head_fault_message(fault));
		return;
	}
	rc = tg_route_match(r->svc->routes, r->method, r->path, &r->m);
	r->op = r->m.route != NULL ? r->m.route->op : TG_OP_PASSTHROUGH;
	if (fault != 0) {
		too_large(r);
		return;
	}
	if (rc < 0) {
		reply_405(r);
		return;
	}
	if (rc == 0 && !r->svc->cfg->passthrough) {
		not_found(r);
		return;
	}
	if (gw_req_authenticate(r) != 0 || media_refused(r))
		return;
	if (r->op == TG_OP_DEX_AUTHENTICATE || r->op == TG_OP_SIM_TOKEN) {
		gw_login_handle(r);
		return;
	}
	if (gw_validate(r) != 0)
		return;
	gw_req_validated(r);
}

