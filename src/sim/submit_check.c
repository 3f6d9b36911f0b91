/*
 * submit_check.c - the check of POST /simulations (body_check.h), as the
 * route table names it (routes.c): the case is parsed (run, maybe on the
 * worker thread), given the partial case its caseId names from the store
 * of served cases (between, on the loop: the store is the loop's), then
 * checked and diffed against it (run again). A feature reading the body
 * too (the run registry's digest) scans it once it is checked.
 */
#include <stdlib.h>

#include <event2/buffer.h>

#include "tidegate/body_check.h"
#include "tidegate/json.h"
#include "tidegate/sim.h"
#include "tidegate/util.h"

struct submit_check {
	int phase;			/* 0: to parse; 1: to check against base */
	struct tg_case_rules k;		/* shallow: the configuration's lists */
	struct tg_case_store *cases;	/* the served cases, or NULL (borrowed) */
	yajl_val tree;			/* the submission, until checked */
	int parsed;
	struct tg_case_ref *base;
	int rc;
};

static void
submit_begin(struct tg_check *c, const struct tg_check_in *in)
{
	struct submit_check *x = tg_xcalloc(1, sizeof(*x));

	x->k = *in->case_rules;
	x->cases = in->cases;
	c->priv = x;
}

static void
submit_run(struct tg_check *c, struct evbuffer *body)
{
	struct submit_check *x = c->priv;
	struct tg_check_body b = { NULL, 0, NULL, 0, NULL, 0, NULL };
	struct tg_err err;
	enum tg_case_type type;
	size_t len = evbuffer_get_length(body);
	const char *bytes = (const char *)evbuffer_pullup(body, -1);

	if (x->phase == 0) {
		if ((x->tree = tg_json_parse(bytes, len, &err)) == NULL) {
			tg_problems_add(&c->p, "", "json", "%s", err.msg);
			x->rc = -1;
		}
		x->parsed = x->tree != NULL;
		return;
	}
	x->rc = tg_case_check(x->tree, tg_case_ref_tree(x->base), &x->k, &type, &c->p);
	if (c->scan != NULL) {
		b.tree = x->tree;
		b.checked = x->rc == 0;
		if (b.checked) {	/* the caller's body is the one sent */
			b.sent = bytes;
			b.sentlen = len;
		}
		c->scanned = c->scan(c->scan_arg, &b);
	}
	/* Freeing a large tree takes long too: here, not on the loop. */
	yajl_tree_free(x->tree);
	x->tree = NULL;
}

static int
submit_between(struct tg_check *c)
{
	struct submit_check *x = c->priv;
	const char *id;

	if (x->phase != 0 || x->tree == NULL)
		return 0;
	if ((id = tg_json_get_str(x->tree, "caseId")) != NULL && x->cases != NULL)
		x->base = tg_case_store_ref(x->cases, id);
	x->phase = 1;
	return 1;
}

static int
submit_verdict(struct tg_check *c, struct tg_check_out *out)
{
	struct submit_check *x = c->priv;

	if (!x->parsed)
		return -1;	/* not JSON: no diff header */
	out->header = "X-Tidegate-Case-Diff";
	out->header_value = x->base ? "checked" :
	    "skipped (base case not served through this gateway)";
	return x->rc != 0 ? -1 : 0;
}

static void
submit_free(struct tg_check *c)
{
	struct submit_check *x = c->priv;

	if (x == NULL)
		return;
	yajl_tree_free(x->tree);
	tg_case_ref_release(x->base);
	free(x);
}

const struct tg_body_check tg_sim_submit_check = {
	.begin = submit_begin,
	.run = submit_run,
	.between = submit_between,
	.verdict = submit_verdict,
	.free = submit_free,
};
