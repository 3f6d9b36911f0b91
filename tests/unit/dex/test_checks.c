/*
 * test_checks.c - unit tests of the request checks the route tables
 * name (body_check.h; src/dex/checks.c, src/sim/submit_check.c), driven
 * through the tables as the request core drives them: which routes carry
 * a check, an export normalised and scanned, a submission that is not
 * JSON and one that fails its check. Run by meson test (suite unit).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include "tidegate/body_check.h"
#include "tidegate/dex.h"
#include "tidegate/sim.h"

/* The check each operation's routes carry: only these four read a body. */
static const struct tg_body_check *
expected(int op)
{
	switch (op) {
	case TG_OP_DEX_EXPORT:
		return &tg_dex_export_check;
	case TG_OP_DEX_IMPORT_JSON:
		return &tg_dex_import_json_check;
	case TG_OP_DEX_IMPORT_FILE:
		return &tg_dex_import_file_check;
	case TG_OP_SIM_SUBMIT:
		return &tg_sim_submit_check;
	default:
		return NULL;
	}
}

static void
test_tables_name_checks(void **state)
{
	const struct tg_service_routes *t[] = { &tg_dex_service_routes, &tg_sim_service_routes };
	size_t i, j, n = 0;

	for (i = 0; i < 2; i++)
		for (j = 0; j < t[i]->nroutes; j++) {
			assert_ptr_equal(t[i]->routes[j].check, expected(t[i]->routes[j].op));
			n += t[i]->routes[j].check != NULL;
		}
	assert_int_equal(n, 4);
	assert_string_equal(tg_dex_service_routes.job_param, "correlationId");
	assert_null(tg_sim_service_routes.job_param);
}

/* What the scan hook saw. */
struct seen {
	int calls, checked, tree;
	char sent[64];
};

static void *
scan(void *arg, const struct tg_check_body *b)
{
	struct seen *s = arg;

	s->calls++;
	s->checked = b->checked;
	s->tree = b->tree != NULL;
	if (b->sent != NULL)
		snprintf(s->sent, sizeof(s->sent), "%.*s", (int)b->sentlen, b->sent);
	return s;
}

/* begin, run (again while between asks), verdict, free: the core's order. */
static int
drive(const struct tg_body_check *k, const struct tg_check_in *in, const char *body,
    struct seen *s, struct tg_check_out *out, struct tg_check *c)
{
	struct evbuffer *b = evbuffer_new();
	int rc;

	memset(c, 0, sizeof(*c));
	memset(out, 0, sizeof(*out));
	c->kind = k;
	c->p.max = 10;
	c->scan = scan;
	c->scan_arg = s;
	k->begin(c, in);
	evbuffer_add(b, body, strlen(body));
	do
		k->run(c, b);
	while (k->between != NULL && k->between(c));
	rc = k->verdict(c, out);
	k->free(c);
	evbuffer_free(b);
	return rc;
}

static void
test_export_through_route(void **state)
{
	struct tg_route_match m;
	struct tg_check_in in = { 0 };
	struct tg_check_out out;
	struct tg_check c;
	struct seen s = { 0 };

	assert_int_equal(tg_route_match(&tg_dex_service_routes, "POST",
	    "/public/v1/export/activities", &m), 1);
	in.m = &m;
	assert_int_equal(drive(m.route->check, &in, "{\"projectID\":\"P\"}", &s, &out, &c), 0);
	assert_non_null(out.body);	/* normalised to the vendor's spelling */
	assert_string_equal(out.body, "{\"projectId\":\"P\"}");
	assert_int_equal(out.len, strlen(out.body));
	free(out.body);
	assert_int_equal(s.calls, 1);
	assert_true(s.checked && s.tree);
	assert_string_equal(s.sent, "{\"projectId\":\"P\"}");
	assert_int_equal(c.p.total, 0);
	tg_problems_cleanup(&c.p);

	memset(&s, 0, sizeof(s));	/* not JSON: the problem at "", scanned unchecked */
	assert_int_equal(drive(m.route->check, &in, "{", &s, &out, &c), -1);
	assert_null(out.body);
	assert_true(c.p.total >= 1);
	assert_string_equal(c.p.v[c.p.n - 1].code, "json");
	assert_int_equal(s.calls, 1);
	assert_false(s.checked || s.tree);
	tg_problems_cleanup(&c.p);
}

static void
test_submit_through_route(void **state)
{
	struct tg_route_match m;
	struct tg_case_rules rules = { 0 };
	struct tg_check_in in = { .case_rules = &rules };
	struct tg_check_out out;
	struct tg_check c;
	struct seen s = { 0 };

	assert_int_equal(tg_route_match(&tg_sim_service_routes, "POST", "/api/v1/simulations",
	    &m), 1);
	in.m = &m;
	/* not JSON: no diff header, never scanned */
	assert_int_equal(drive(m.route->check, &in, "nope", &s, &out, &c), -1);
	assert_null(out.header);
	assert_int_equal(s.calls, 0);
	assert_string_equal(c.p.v[0].code, "json");
	tg_problems_cleanup(&c.p);
	/* JSON but no case: checked once, with no served base to diff against */
	assert_int_equal(drive(m.route->check, &in, "[]", &s, &out, &c), -1);
	assert_string_equal(out.header, "X-Tidegate-Case-Diff");
	assert_string_equal(out.header_value,
	    "skipped (base case not served through this gateway)");
	assert_int_equal(s.calls, 1);
	assert_false(s.checked);
	assert_string_equal(s.sent, "");
	assert_true(c.p.total >= 1);
	tg_problems_cleanup(&c.p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_tables_name_checks),
		cmocka_unit_test(test_export_through_route),
		cmocka_unit_test(test_submit_through_route),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
