/*
 * validate.c - the gateway's side of request checks: runs the check its
 * route names (tg_route.check, body_check.h; the services declare them in
 * their route tables), answers 400 with every problem listed, or what the
 * check's verdict says (413, a dry run), replaces the body with its
 * normalised form, and lets a feature read the body beside the check (its
 * scan) and add its own problems. It knows no operation. Called from
 * proxy.c before a request is sent upstream.
 *
 * A body of validation.worker_min_body or more is checked on the worker
 * thread (src/core/worker.c), so a 20 MB case does not hold up /healthz and
 * every other request while it is parsed and diffed. The check then owns
 * everything it reads: the body (moved out of the request, so a client
 * that goes away cannot free it underneath), a reference to the runtime
 * whose configuration it reads, and what its begin step took of the
 * request. Inline and off the loop the same functions run on the same
 * inputs, so the answers are the same; only where they run differs.
 */
#include <stddef.h>
#include <stdlib.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "tidegate/body_check.h"
#include "tidegate/worker.h"
#include "gw.h"

/* One request's check: the route's check and what the core holds for it. */
struct gw_check {
	struct gw_req *r;		/* the request; NULL once it ended */
	struct gw *gw;
	struct gw_runtime *rt;		/* held: the configuration the check reads */
	struct tg_job *job;		/* on the worker; NULL when inline */
	struct evbuffer *body;		/* the body: owned off the loop, else borrowed */
	int owns_body;
	int scan_id;			/* the feature reading the body too, or -1 */
	struct gw_offload off;		/* r->offload while on the worker */
	struct tg_check c;
};

static void
check_free(struct gw_check *k)
{
	if (k->owns_body && k->body != NULL)
		evbuffer_free(k->body);
	k->c.kind->free(&k->c);
	gw_feat_scan_free(k->gw, k->scan_id, k->c.scanned);
	tg_problems_cleanup(&k->c.p);
	gw_runtime_unref(k->rt);
	free(k);
}

/* The scan of the feature reading the body too (tg_check.scan): on
 * whichever thread the check runs, reading only its argument. */
static void *
scan_body(void *arg, const struct tg_check_body *b)
{
	struct gw_check *k = arg;

	return gw_feat_scan(k->gw, k->scan_id, b);
}

static void
check_run(void *arg)
{
	struct gw_check *k = arg;

	k->c.kind->run(&k->c, k->body);
}

static int
check_between(struct gw_check *k)
{
	return k->c.kind->between != NULL && k->c.kind->between(&k->c);
}

/* Strings of the configuration are borrowed: k holds the runtime. */
static struct gw_check *
check_new(struct gw_req *r, const struct tg_body_check *kind)
{
	struct gw_check *k = tg_xcalloc(1, sizeof(*k));
	const struct gw_service_cfg *sc = r->svc->cfg;
	struct tg_check_in in = {
		.req = r->req, .m = &r->m, .request_id = r->id,
		.max_problems = (size_t)r->rt->cfg.max_problems,
		.max_body = (size_t)r->rt->cfg.max_body,
		.strict = sc->strict, .wp_status_field = sc->wp_status_field,
		.case_rules = &sc->cases, .cases = r->gw->cases,
	};

	k->r = r;
	k->gw = r->gw;
	k->rt = r->rt;
	k->rt->refs++;
	k->c.kind = kind;
	k->c.p.max = in.max_problems;
	kind->begin(&k->c, &in);
	if (k->c.drop_query != NULL)
		r->drop_query = k->c.drop_query;
	if (gw_feat_wants_scan(r, &k->scan_id)) {
		k->c.scan = scan_body;
		k->c.scan_arg = k;
	}
	return k;
}

/* ---- verdicts, on the loop ---- */

static void
free_ref(const void *data, size_t len, void *arg)
{
	free(arg);
}

/* The body is where the rest of the request's way reads it. 0: proceed;
 * -1: replied. */
static int
check_verdict(struct gw_check *k)
{
	struct gw_req *r = k->r;
	struct tg_check_out out = { 0 };
	int rc = k->c.kind->verdict(&k->c, &out);

	if (out.header != NULL)
		evhttp_add_header(evhttp_request_get_output_headers(r->req), out.header,
		    out.header_value);
	if (rc > 0 && out.reply != NULL) {
		gw_req_reply_buf(r, out.status, "application/json", out.reply);
		evbuffer_free(out.reply);
		return -1;
	}
	if (rc > 0) {
		gw_req_reply_error(r, out.status, out.code, out.msg);
		return -1;
	}
	if (out.body != NULL) {
		r->body = evbuffer_new();	/* by reference: no copy */
		evbuffer_add_reference(r->body, out.body, out.len, free_ref, out.body);
	}
	gw_feat_check(r, k->scan_id, k->c.scanned, &k->c.p);	/* takes the scan */
	k->c.scanned = NULL;
	if (rc < 0 || k->c.p.total > 0) {
		gw_reply_problems(r, &k->c.p);
		return -1;
	}
	return 0;
}

/* ---- inline, or on the worker ---- */

/* The request ends while its check is on the worker (r->offload): the
 * check never touches it again; on_check_done frees the check. */
static void
check_cancel(struct gw_offload *o)
{
	struct gw_check *k = (struct gw_check *)((char *)o - offsetof(struct gw_check, off));

	k->r = NULL;
	tg_worker_cancel(k->job);
}

static void
on_check_done(void *arg, int cancelled)
{
	struct gw_check *k = arg;
	struct gw_req *r = k->r;
	struct gw *gw = k->gw;
	int rc;

	k->job = NULL;
	if (cancelled || r == NULL) {	/* the request ended, or the worker stops */
		check_free(k);
		gw_maybe_exit(gw);
		return;
	}
	if (check_between(k)) {
		k->job = tg_worker_submit(gw->worker, check_run, on_check_done, k);
		return;
	}
	r->offload = NULL;
	evbuffer_add_buffer(evhttp_request_get_input_buffer(r->req), k->body);
	rc = check_verdict(k);
	check_free(k);
	if (rc == 0)
		gw_req_validated(r);
}

int
gw_validate(struct gw_req *r)
{
	const struct tg_body_check *kind = r->m.route ? r->m.route->check : NULL;
	struct evbuffer *in;
	struct gw_check *k;
	int rc;

	if (!r->svc->cfg->validate || kind == NULL)
		return 0;
	in = evhttp_request_get_input_buffer(r->req);
	k = check_new(r, kind);
	if (r->gw->worker != NULL &&
	    evbuffer_get_length(in) >= (size_t)r->rt->cfg.check_worker_min) {
		k->body = evbuffer_new();
		k->owns_body = 1;
		evbuffer_add_buffer(k->body, in);	/* moves the chains: no copy */
		tg_metrics_inc(r->gw->metrics, "tidegate_validation_offloaded_total",
		    r->svc->index == GW_DEX ? "service=\"dex\"" : "service=\"sim\"", 1);
		k->off.cancel = check_cancel;
		r->offload = &k->off;
		k->job = tg_worker_submit(r->gw->worker, check_run, on_check_done, k);
		return -1;	/* on_check_done goes on with the request */
	}
	k->body = in;
	do
		check_run(k);
	while (check_between(k));
	rc = check_verdict(k);
	check_free(k);
	return rc;
}

