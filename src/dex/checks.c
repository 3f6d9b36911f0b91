/*
 * checks.c - the data exchange routes' request checks (body_check.h), as
 * the route table names them (routes.c): an export's body (tables E1-E7,
 * normalised to the vendor's spelling, read once for a feature's scan
 * too), and an activity import's JSON body or multipart upload with its
 * query (projectId, dryRun). What runs on the worker thread reads only the
 * check's own state and the body.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "tidegate/body_check.h"
#include "tidegate/dex.h"
#include "tidegate/http.h"
#include "tidegate/ids.h"
#include "tidegate/json.h"
#include "tidegate/util.h"

/* ---- exports ---- */

struct export_check {
	char *kind;
	int skip;			/* a kind newer than this gateway, let through */
	struct tg_export_opts eo;	/* strings borrowed from the configuration */
	int rc;
	char *out;			/* the normalised body */
	size_t outlen;
};

static void
export_begin(struct tg_check *c, const struct tg_check_in *in)
{
	struct export_check *x = tg_xcalloc(1, sizeof(*x));
	const char *kind = tg_route_param(in->m, "kind");

	x->kind = kind ? tg_xstrdup(kind) : NULL;
	x->eo.strict = in->strict;
	x->eo.wp_status_field = in->wp_status_field;
	/* A kind not known is the vendor's to judge (a kind added since), but a
	 * near miss of a known one is a typo: refused with its "did you mean",
	 * as near misses of field names are. */
	x->skip = !tg_export_kind_known(kind) && !x->eo.strict &&
	    tg_export_kind_hint(kind) == NULL;
	c->priv = x;
}

/* The check, and what a feature (the webhook's callbackUrl) reads of the
 * same body: one parse for both. */
static void
export_run(struct tg_check *c, struct evbuffer *body)
{
	struct export_check *x = c->priv;
	size_t len = evbuffer_get_length(body);
	struct tg_check_body b = { NULL, 0, NULL, 0, NULL, 0, NULL };
	struct tg_export_out xo = { NULL, 0, NULL, 0, NULL };
	struct tg_err err;

	b.tree = tg_json_parse((const char *)evbuffer_pullup(body, -1), len, &err);
	if (!x->skip && b.tree == NULL) {
		(void)tg_export_check_tree(x->kind, NULL, &x->eo, 0, &xo, &c->p);
		tg_problems_add(&c->p, "", "json", "%s", err.msg);
		x->rc = -1;
	} else if (!x->skip) {
		x->rc = tg_export_check_tree(x->kind, b.tree, &x->eo, c->scan != NULL, &xo,
		    &c->p);
		b.checked = x->rc == 0;
	}
	b.sent = xo.body;
	b.sentlen = xo.len;
	b.stripped = xo.stripped;
	b.stripped_len = xo.stripped_len;
	b.callback = xo.callback;
	if (c->scan != NULL)
		c->scanned = c->scan(c->scan_arg, &b);
	x->out = xo.body;	/* the body sent: the request's from here */
	x->outlen = xo.len;
	xo.body = NULL;
	tg_export_out_cleanup(&xo);
	yajl_tree_free(b.tree);		/* a large tree's free: here too, not on the loop */
}

static int
export_verdict(struct tg_check *c, struct tg_check_out *out)
{
	struct export_check *x = c->priv;

	if (x->skip)
		return 0;
	if (x->rc != 0)
		return -1;
	out->body = x->out;
	out->len = x->outlen;
	x->out = NULL;
	return 0;
}

static void
export_free(struct tg_check *c)
{
	struct export_check *x = c->priv;

	if (x == NULL)
		return;
	free(x->kind);
	free(x->out);
	free(x);
}

const struct tg_body_check tg_dex_export_check = {
	.begin = export_begin,
	.run = export_run,
	.verdict = export_verdict,
	.free = export_free,
};

/* ---- imports ---- */

struct import_check {
	int file, dry, too_large, rc;
	char *ctype;
	size_t max_part;
	char msg[160];			/* a 413's words (tg_check_out.msg) */
	struct tg_import_result res;
	char request_id[TG_UUID_LEN];	/* named by a dry run's answer */
};

/* The import endpoints name the project in the query string. */
static void
require_project(struct evhttp_request *req, int file, struct tg_problems *p)
{
	char *v = tg_http_query(req, "projectId");

	if (v == NULL && file)
		v = tg_http_query(req, "correlationId");	/* the spec's table names it */
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
import_begin(struct tg_check *c, const struct tg_check_in *in, int file)
{
	struct import_check *x = tg_xcalloc(1, sizeof(*x));
	const char *ct = tg_http_header(in->req, "Content-Type");
	struct dry d = { 0, 0, &c->p };

	(void)tg_http_query_walk(in->req, dry_param, &d);
	x->dry = d.on;
	c->drop_query = "dryRun";
	x->file = file;
	require_project(in->req, file, &c->p);
	x->ctype = ct ? tg_xstrdup(ct) : NULL;
	x->max_part = in->max_body;
	snprintf(x->request_id, sizeof(x->request_id), "%s", in->request_id);
	c->priv = x;
}

static void
import_json_begin(struct tg_check *c, const struct tg_check_in *in)
{
	import_begin(c, in, 0);
}

static void
import_file_begin(struct tg_check *c, const struct tg_check_in *in)
{
	import_begin(c, in, 1);
}

static void
import_run(struct tg_check *c, struct evbuffer *body)
{
	struct import_check *x = c->priv;

	if (x->file)
		x->rc = tg_import_check_multipart(body, x->ctype, x->max_part, &x->res, &c->p,
		    &x->too_large);
	else
		x->rc = tg_import_check_json(body, &x->res, &c->p);
}

/* A dry run's answer: the body is valid, what it holds. */
static struct evbuffer *
dry_run_body(const struct import_check *x)
{
	yajl_gen g = tg_json_gen_new();
	struct evbuffer *b = evbuffer_new();

	yajl_gen_map_open(g);
	tg_json_kv_bool(g, "valid", 1);
	tg_json_kv_int(g, "rows", (long long)x->res.rows);
	tg_json_kv_int(g, "bytes", (long long)x->res.bytes);
	tg_json_kv_str(g, "requestId", x->request_id);
	yajl_gen_map_close(g);
	tg_json_gen_flush(g, b);
	yajl_gen_free(g);
	return b;
}

static int
import_verdict(struct tg_check *c, struct tg_check_out *out)
{
	struct import_check *x = c->priv;

	if (x->too_large) {
		out->status = 413;
		out->code = "PAYLOAD_TOO_LARGE";
		snprintf(x->msg, sizeof(x->msg), "a part of the upload is larger than %zu bytes, "
		    "the limit of one part (max_body)", x->max_part);
		out->msg = x->msg;
		return 1;
	}
	if (x->rc != 0 || c->p.total > 0)
		return -1;
	if (x->dry) {
		out->status = 200;
		out->reply = dry_run_body(x);
		return 1;
	}
	return 0;
}

static void
import_free(struct tg_check *c)
{
	struct import_check *x = c->priv;

	if (x == NULL)
		return;
	free(x->ctype);
	free(x);
}

const struct tg_body_check tg_dex_import_json_check = {
	.begin = import_json_begin,
	.run = import_run,
	.verdict = import_verdict,
	.free = import_free,
};

const struct tg_body_check tg_dex_import_file_check = {
	.begin = import_file_begin,
	.run = import_run,
	.verdict = import_verdict,
	.free = import_free,
};
