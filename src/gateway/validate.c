/*
 * validate.c - the gateway's side of request validation: picks the
 * validator for an operation (export filters, activity imports, simulation
 * cases), answers 400 with every problem listed, replaces the body with its
 * normalised form, serves dry runs, and remembers the partial cases the
 * vendor served so submissions can be diffed against them. Called from
 * proxy.c before a request is sent upstream.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "tidegate/http.h"
#include "tidegate/json.h"
#include "tidegate/log.h"
#include "gw.h"

void
gw_reply_problems(struct gw_req *r, struct tg_problems *p)
{
	struct evbuffer *b = evbuffer_new();
	char msg[160];

	if (p->total > p->n)
		snprintf(msg, sizeof(msg), "%zu problems in the request (the first %zu listed)",
		    p->total, p->n);
	else
		snprintf(msg, sizeof(msg), "%zu problem%s in the request", p->total,
		    p->total == 1 ? "" : "s");
	r->error = "VALIDATION_FAILED";
	tg_metrics_inc(r->gw->metrics, "tidegate_validation_failures_total",
	    r->svc->index == GW_DEX ? "service=\"dex\"" : "service=\"sim\"", 1);
	tg_error_body(b, 400, "VALIDATION_FAILED", msg, r->id, p->v, p->n);
	gw_req_reply_buf(r, 400, "application/json", b);	/* frees r */
	evbuffer_free(b);
}

static int
check_export(struct gw_req *r, struct tg_problems *p)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(r->req);
	struct tg_export_opts o = { r->svc->cfg->strict, r->svc->cfg->wp_status_field };
	const char *kind = tg_route_param(&r->m, "kind");
	size_t len = evbuffer_get_length(in), outlen;
	char *out = NULL;

	if (!tg_export_kind_known(kind) && !o.strict)
		return 0;	/* an export kind newer than this gateway: the vendor decides */
	if (tg_export_check(kind, (const char *)evbuffer_pullup(in, -1), len, &o, &out, &outlen,
	    p) != 0)
		return -1;
	r->body = evbuffer_new();
	evbuffer_add(r->body, out, outlen);
	free(out);
	return 0;
}

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

/* 0: proceed; -1: problems in p; 1: replied (413 or dry run). */
static int
check_import(struct gw_req *r, int file, struct tg_problems *p)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(r->req);
	struct tg_import_result res = { 0, 0 };
	char *dry = tg_http_query(r->req, "dryRun");
	int too_large = 0, is_dry = dry && strcmp(dry, "true") == 0, rc;

	free(dry);
	r->drop_query = "dryRun";
	require_project(r, file, p);
	if (file)
		rc = tg_import_check_multipart(in, tg_http_header(r->req, "Content-Type"),
		    (size_t)r->rt->cfg.max_body, &res, p, &too_large);
	else
		rc = tg_import_check_json(in, &res, p);
	if (too_large) {
		gw_req_reply_error(r, 413, "PAYLOAD_TOO_LARGE", "the uploaded file is too large");
		return 1;
	}
	if (rc != 0 || p->total > 0)
		return -1;
	if (is_dry) {
		reply_dry_run(r, &res);
		return 1;
	}
	return 0;
}

static int
check_case(struct gw_req *r, struct tg_problems *p)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(r->req);
	struct tg_case_kinds k = { r->svc->cfg->construction_types, r->svc->cfg->om_types };
	struct tg_err err;
	enum tg_case_type type;
	const char *id;
	yajl_val v, base = NULL;
	int rc;

	v = tg_json_parse((const char *)evbuffer_pullup(in, -1), evbuffer_get_length(in), &err);
	if (v == NULL) {
		tg_problems_add(p, "", "json", "%s", err.msg);
		return -1;
	}
	if ((id = tg_json_get_str(v, "caseId")) != NULL && r->gw->cases != NULL)
		base = tg_case_store_get(r->gw->cases, id);
	rc = tg_case_check(v, base, &k, &type, p);
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "X-Tidegate-Case-Diff",
	    base ? "checked" : "skipped (base case not served through this gateway)");
	yajl_tree_free(v);
	return rc;
}

int
gw_validate(struct gw_req *r)
{
	struct tg_problems p;
	enum tg_op op = r->m.route ? r->m.route->op : TG_OP_PASSTHROUGH;
	int rc = 0;

	if (!r->svc->cfg->validate)
		return 0;
	memset(&p, 0, sizeof(p));
	p.max = (size_t)r->rt->cfg.max_problems;
	switch (op) {
	case TG_OP_DEX_EXPORT:
		rc = check_export(r, &p);
		gw_hook_check(r, &p);
		if (p.total > 0)
			rc = -1;
		break;
	case TG_OP_DEX_IMPORT_JSON:
	case TG_OP_DEX_IMPORT_FILE:
		rc = check_import(r, op == TG_OP_DEX_IMPORT_FILE, &p);
		break;
	case TG_OP_SIM_SUBMIT:
		rc = check_case(r, &p);
		break;
	default:
		break;
	}
	if (rc < 0)
		gw_reply_problems(r, &p);
	tg_problems_cleanup(&p);
	return rc == 0 ? 0 : -1;
}

void
gw_case_served(struct gw_req *r, struct evbuffer *body)
{
	const char *id = tg_route_param(&r->m, "id");
	yajl_val v = tg_json_parse((const char *)evbuffer_pullup(body, -1),
	    evbuffer_get_length(body), NULL);

	evbuffer_free(body);
	if (v == NULL || !YAJL_IS_OBJECT(v) || id == NULL || r->gw->cases == NULL) {
		yajl_tree_free(v);
		return;
	}
	tg_case_store_put(r->gw->cases, id, v);
}
