/*
 * validate.c - the gateway's side of request validation: picks the
 * validator for an operation (export filters, activity imports, simulation
 * cases), answers 400 with every problem listed, replaces the body with its
 * normalised form, serves dry runs, and remembers the partial cases the
 * vendor served so submissions can be diffed against them. Called from
 * proxy.c before a request is sent upstream.
 *
 * A body of validation.worker_min_body or more is checked on the worker
 * thread (src/core/worker.c), so a 20 MB case does not hold up /healthz and
 * every other request while it is parsed and diffed. The check then owns
 * everything it reads: the body (moved out of the request, so a client
 * that goes away cannot free it underneath), a reference to the runtime
 * whose configuration it reads, and a reference to the served case it
 * diffs against. Inline and off the loop the same functions run on the
 * same inputs, so the answers are the same; only where they run differs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "tidegate/http.h"
#include "tidegate/json.h"
#include "tidegate/log.h"
#include "tidegate/crypto.h"
#include "tidegate/worker.h"
#include "gw.h"

/* One request's check: its inputs, taken on the loop, and its results. */
struct gw_check {
	struct gw_req *r;		/* the request; NULL once it ended */
	struct gw *gw;
	struct gw_runtime *rt;		/* held: the configuration the check reads */
	struct tg_job *job;		/* on the worker; NULL when inline */
	enum tg_op op;
	struct evbuffer *body;		/* the body: owned off the loop, else borrowed */
	int owns_body;
	int rc;				/* the check function's verdict */
	struct tg_problems p;
	/* exports */
	char *kind;
	int skip;			/* an export kind newer than this gateway */
	struct tg_export_opts eo;
	char *out;			/* the normalised body */
	size_t outlen;
	int scan_id;			/* the feature reading the body too, or -1 */
	void *scan;			/* what it read (gw_check_role.scan) */
	/* imports */
	int file, dry, too_large;
	char *ctype;
	size_t max_part;
	struct tg_import_result res;
	/* cases: parsed (phase 0), then checked against the base (phase 1) */
	int phase;
	struct tg_case_rules k;
	yajl_val tree;			/* the submission, until checked */
	int parsed;
	struct tg_case_ref *base;
	int digest;			/* the run registry records the body's SHA-256 */
	char sha[2 * TG_SHA256_LEN + 1];	/* hex */
	char *case_id;
};

static void
check_free(struct gw_check *c)
{
	if (c->owns_body && c->body != NULL)
		evbuffer_free(c->body);
	free(c->kind);
	free(c->out);
	free(c->ctype);
	free(c->case_id);
	gw_feat_scan_free(c->gw, c->scan_id, c->scan);
	yajl_tree_free(c->tree);
	tg_case_ref_release(c->base);
	tg_problems_cleanup(&c->p);
	gw_runtime_unref(c->rt);
	free(c);
}

/* ---- the checks: on the worker thread or inline; they read only c ---- */

/* The export check, and what a feature (the webhook's callbackUrl) reads
 * of the same body: one parse for both. */
static void
run_export(struct gw_check *c)
{
	size_t len = evbuffer_get_length(c->body);
	struct gw_body b = { NULL, 0, NULL, 0, NULL, 0, NULL };
	struct tg_export_out xo = { NULL, 0, NULL, 0, NULL };
	struct tg_err err;

	b.tree = tg_json_parse((const char *)evbuffer_pullup(c->body, -1), len, &err);
	if (!c->skip && b.tree == NULL) {
		(void)tg_export_check_tree(c->kind, NULL, &c->eo, 0, &xo, &c->p);
		tg_problems_add(&c->p, "", "json", "%s", err.msg);
		c->rc = -1;
	} else if (!c->skip) {
		c->rc = tg_export_check_tree(c->kind, b.tree, &c->eo, c->scan_id >= 0, &xo, &c->p);
		b.checked = c->rc == 0;
	}
	b.sent = xo.body;
	b.sentlen = xo.len;
	b.stripped = xo.stripped;
	b.stripped_len = xo.stripped_len;
	b.callback = xo.callback;
	if (c->scan_id >= 0)
		c->scan = gw_feat_scan(c->gw, c->scan_id, &b);
	c->out = xo.body;	/* the body sent: the request's from here */
	c->outlen = xo.len;
	xo.body = NULL;
	tg_export_out_cleanup(&xo);
	yajl_tree_free(b.tree);		/* a large tree's free: here too, not on the loop */
}

static void
run_case(struct gw_check *c)
{
	struct tg_err err;
	enum tg_case_type type;
	const char *id;
	size_t len = evbuffer_get_length(c->body);
	const char *bytes = (const char *)evbuffer_pullup(c->body, -1);

	if (c->phase == 0) {
		if ((c->tree = tg_json_parse(bytes, len, &err)) == NULL) {
			tg_problems_add(&c->p, "", "json", "%s", err.msg);
			c->rc = -1;
		}
		c->parsed = c->tree != NULL;
		return;
	}
	c->rc = tg_case_check(c->tree, tg_case_ref_tree(c->base), &c->k, &type, &c->p);
	if (c->rc == 0 && c->digest) {
		uint8_t md[TG_SHA256_LEN];

		tg_sha256_oneshot(bytes, len, md);
		tg_hex(md, sizeof(md), c->sha);
		id = tg_json_get_str(c->tree, "caseId");
		c->case_id = id ? tg_xstrdup(id) : NULL;
	}
	/* Freeing a large tree takes long too: here, not on the loop. */
	yajl_tree_free(c->tree);
	c->tree = NULL;
}

static void
check_run(void *arg)
{
	struct gw_check *c = arg;

	switch (c->op) {
	case TG_OP_DEX_EXPORT:
		run_export(c);
		break;
	case TG_OP_DEX_IMPORT_JSON:
		c->rc = tg_import_check_json(c->body, &c->res, &c->p);
		break;
	case TG_OP_DEX_IMPORT_FILE:
		c->rc = tg_import_check_multipart(c->body, c->ctype, c->max_part, &c->res, &c->p,
		    &c->too_large);
		break;
	case TG_OP_SIM_SUBMIT:
		run_case(c);
		break;
	default:
		break;
	}
}

/*
 * On the loop between two runs: a parsed case is given the served case its
 * caseId names (the store is the loop's). 1 when another run is needed.
 */
static int
check_between(struct gw_check *c)
{
	const char *id;

	if (c->op != TG_OP_SIM_SUBMIT || c->phase != 0 || c->tree == NULL)
		return 0;
	if ((id = tg_json_get_str(c->tree, "caseId")) != NULL && c->gw->cases != NULL)
		c->base = tg_case_store_ref(c->gw->cases, id);
	c->phase = 1;
	return 1;
}

/* ---- inputs, taken on the loop ---- */

/* The import endpoints name the project in the query string. */
static void
require_project(struct gw_req *r, int file, struct tg_problems *p)
{
	char *v = tg_http_query(r->req, "projectId");

	if (v == NULL && file)
		v = tg_http_query(r->req, "correlationId");	/* the spec's table names it */
	if (v == NULL || *v == '\0')
		tg_problems_add(p, "", "required", "query parameter 'projectId' is required%s",
		    file ? " (or 'correlationId', as the spec's table names it)" : "");
	free(v);
}

/* dryRun: true or false, once; anything else is refused, so that a
 * caller who believes it checks (dryRun=1, a bare dryRun) never imports. */
struct dry {
	int seen, on;
	struct tg_problems *p;
};

static int
dry_param(const char *name, const char *value, void *arg)
{
	struct dry *d = arg;

	if (strcasecmp(name, "dryRun") != 0)
		return 0;
	if (d->seen++ > 0) {
		tg_problems_add(d->p, "", "ambiguous", "query parameter 'dryRun' is given more "
		    "than once");
		return 1;
	}
	if (strcmp(value, "true") != 0 && strcmp(value, "false") != 0)
		tg_problems_add(d->p, "", "type", "query parameter 'dryRun' must be true or "
		    "false, got '%.40s'", value);
	d->on = strcmp(value, "true") == 0;
	return 0;
}

static void
import_inputs(struct gw_check *c, struct gw_req *r)
{
	const char *ct = tg_http_header(r->req, "Content-Type");
	struct dry d = { 0, 0, &c->p };

	(void)tg_http_query_walk(r->req, dry_param, &d);
	c->dry = d.on;
	r->drop_query = "dryRun";
	c->file = c->op == TG_OP_DEX_IMPORT_FILE;
	require_project(r, c->file, &c->p);
	c->ctype = ct ? tg_xstrdup(ct) : NULL;
	c->max_part = (size_t)r->rt->cfg.max_body;
}

/* Strings of the configuration are borrowed: c holds the runtime. */
static struct gw_check *
check_new(struct gw_req *r, enum tg_op op)
{
	struct gw_check *c = tg_xcalloc(1, sizeof(*c));
	const char *kind;

	c->r = r;
	c->gw = r->gw;
	c->rt = r->rt;
	c->rt->refs++;
	c->op = op;
	c->scan_id = -1;
	c->p.max = (size_t)r->rt->cfg.max_problems;
	if (op == TG_OP_DEX_EXPORT) {
		kind = tg_route_param(&r->m, "kind");
		c->kind = kind ? tg_xstrdup(kind) : NULL;
		c->eo.strict = r->svc->cfg->strict;
		c->eo.wp_status_field = r->svc->cfg->wp_status_field;
		c->skip = !tg_export_kind_known(kind) && !c->eo.strict;
		(void)gw_feat_wants_scan(r, &c->scan_id);
	} else if (op == TG_OP_SIM_SUBMIT) {
		c->k = r->svc->cfg->cases;	/* shallow: c holds the runtime */
		c->digest = r->gw->case_digest;
	} else {
		import_inputs(c, r);
	}
	return c;
}

/* ---- verdicts, on the loop ---- */

static void
reply_dry_run(struct gw_req *r, const struct tg_import_result *res)
{
	yajl_gen g = tg_json_gen_new();
	struct evbuffer *b = evbuffer_new();

	yajl_gen_map_open(g);
	tg_json_kv_bool(g, "valid", 1);
	tg_json_kv_int(g, "rows", (long long)res->rows);
	tg_json_kv_int(g, "bytes", (long long)res->bytes);
	tg_json_kv_str(g, "requestId", r->id);
	yajl_gen_map_close(g);
	tg_json_gen_flush(g, b);
	yajl_gen_free(g);
	gw_req_reply_buf(r, 200, "application/json", b);
	evbuffer_free(b);
}

static void
free_ref(const void *data, size_t len, void *arg)
{
	free(arg);
}

/* 0: proceed; -1: problems in c->p; 1: replied (413 or dry run). */
static int
import_verdict(struct gw_check *c, struct gw_req *r)
{
	if (c->too_large) {
		gw_req_reply_error(r, 413, "PAYLOAD_TOO_LARGE", "the uploaded file is too large");
		return 1;
	}
	if (c->rc != 0 || c->p.total > 0)
		return -1;
	if (c->dry) {
		reply_dry_run(r, &c->res);
		return 1;
	}
	return 0;
}

static int
case_verdict(struct gw_check *c, struct gw_req *r)
{
	if (!c->parsed)
		return -1;	/* not JSON: no diff header */
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "X-Tidegate-Case-Diff",
	    c->base ? "checked" : "skipped (base case not served through this gateway)");
	if (c->rc != 0)
		return -1;
	if (c->digest) {	/* for the run registry: no second pass over the body */
		r->case_sha256 = tg_xstrdup(c->sha);
		r->case_id = c->case_id;
		c->case_id = NULL;
	}
	return 0;
}

/* The body is where the rest of the request's way reads it. 0: proceed;
 * -1: replied. */
static int
check_verdict(struct gw_check *c)
{
	struct gw_req *r = c->r;
	int rc = 0;

	switch (c->op) {
	case TG_OP_DEX_EXPORT:
		if (!c->skip && c->rc != 0)
			rc = -1;
		else if (!c->skip) {
			r->body = evbuffer_new();	/* by reference: no copy */
			evbuffer_add_reference(r->body, c->out, c->outlen, free_ref, c->out);
			c->out = NULL;
		}
		gw_feat_check(r, c->scan_id, c->scan, &c->p);	/* takes the scan */
		c->scan = NULL;
		if (c->p.total > 0)
			rc = -1;
		break;
	case TG_OP_SIM_SUBMIT:
		rc = case_verdict(c, r);
		break;
	default:
		rc = import_verdict(c, r);
		break;
	}
	if (rc < 0)
		gw_reply_problems(r, &c->p);
	return rc == 0 ? 0 : -1;
}

/* ---- inline, or on the worker ---- */

static void
on_check_done(void *arg, int cancelled)
{
	struct gw_check *c = arg;
	struct gw_req *r = c->r;
	struct gw *gw = c->gw;
	int rc;

	c->job = NULL;
	if (cancelled || r == NULL) {	/* the request ended, or the worker stops */
		check_free(c);
		gw_maybe_exit(gw);
		return;
	}
	if (check_between(c)) {
		c->job = tg_worker_submit(gw->worker, check_run, on_check_done, c);
		return;
	}
	r->check = NULL;
	evbuffer_add_buffer(evhttp_request_get_input_buffer(r->req), c->body);
	rc = check_verdict(c);
	check_free(c);
	if (rc == 0)
		gw_req_validated(r);
}

static int
checked_op(enum tg_op op)
{
	return op == TG_OP_DEX_EXPORT || op == TG_OP_DEX_IMPORT_JSON ||
	    op == TG_OP_DEX_IMPORT_FILE || op == TG_OP_SIM_SUBMIT;
}

int
gw_validate(struct gw_req *r)
{
	enum tg_op op = r->op;
	struct evbuffer *in;
	struct gw_check *c;
	int rc;

	if (!r->svc->cfg->validate || !checked_op(op))
		return 0;
	in = evhttp_request_get_input_buffer(r->req);
	c = check_new(r, op);
	if (r->gw->worker != NULL &&
	    evbuffer_get_length(in) >= (size_t)r->rt->cfg.check_worker_min) {
		c->body = evbuffer_new();
		c->owns_body = 1;
		evbuffer_add_buffer(c->body, in);	/* moves the chains: no copy */
		tg_metrics_inc(r->gw->metrics, "tidegate_validation_offloaded_total",
		    r->svc->index == GW_DEX ? "service=\"dex\"" : "service=\"sim\"", 1);
		r->check = c;
		c->job = tg_worker_submit(r->gw->worker, check_run, on_check_done, c);
		return -1;	/* on_check_done goes on with the request */
	}
	c->body = in;
	do
		check_run(c);
	while (check_between(c));
	rc = check_verdict(c);
	check_free(c);
	return rc;
}

void
gw_validate_forget(struct gw_req *r)
{
	if (r->check != NULL) {
		r->check->r = NULL;
		tg_worker_cancel(r->check->job);
		r->check = NULL;
	}
	free(r->case_id);
	free(r->case_sha256);
	r->case_id = r->case_sha256 = NULL;
}
