/*
 * test_router.c - every spelling of a data exchange or simulation path maps
 * to its canonical operation; captures, 405 detection, template expansion.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tidegate/dex.h"
#include "tidegate/ops.h"
#include "tidegate/routes.h"
#include "tidegate/sim.h"

static enum tg_op
op(const struct tg_service_routes *sr, const char *method, const char *path, int *rc)
{
	struct tg_route_match m;

	*rc = tg_route_match(sr, method, path, &m);
	return m.route ? m.route->op : TG_OP_PASSTHROUGH;
}

static void
test_dex_aliases(void **state)
{
	static const char *const prefixes[] = { "/public/v1", "/public", "/api/public/v1",
		"/api", "" };
	static const struct { const char *m, *p; enum tg_op op; } cases[] = {
		{ "POST", "/authenticate", TG_OP_DEX_AUTHENTICATE },
		{ "POST", "/export/activities", TG_OP_DEX_EXPORT },
		{ "GET", "/export", TG_OP_DEX_EXPORT_GET },
		{ "POST", "/import/activities", TG_OP_DEX_IMPORT_JSON },
		{ "POST", "/import/activities/file", TG_OP_DEX_IMPORT_FILE },
		{ "GET", "/import/status", TG_OP_DEX_IMPORT_STATUS },
		{ "GET", "/import/result", TG_OP_DEX_IMPORT_RESULT },
		{ "GET", "/import/failed", TG_OP_DEX_IMPORT_FAILED },
		{ "GET", "/import/activities/failed", TG_OP_DEX_IMPORT_FAILED },
	};
	char path[128];
	size_t i, j;
	int rc;

	for (i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++) {
		for (j = 0; j < sizeof(cases) / sizeof(cases[0]); j++) {
			snprintf(path, sizeof(path), "%s%s", prefixes[i], cases[j].p);
			if (op(&tg_dex_service_routes, cases[j].m, path, &rc) != cases[j].op)
				fail_msg("%s %s", cases[j].m, path);
			assert_int_equal(rc, 1);
		}
	}
}

static void
test_dex_unknown_and_405(void **state)
{
	int rc;

	assert_int_equal(op(&tg_dex_service_routes, "GET", "/public/v2/new", &rc),
	    TG_OP_PASSTHROUGH);
	assert_int_equal(rc, 0);
	op(&tg_dex_service_routes, "DELETE", "/public/v1/import/status", &rc);
	assert_int_equal(rc, -1);
	op(&tg_dex_service_routes, "GET", "/publicx/export", &rc);
	assert_int_equal(rc, 0);
	op(&tg_dex_service_routes, "POST", "/public/v1/export/", &rc);
	assert_int_equal(rc, 0);	/* no kind: not an export, passed through */
}

static void
test_captures_and_expand(void **state)
{
	struct tg_route_match m;
	char *s;

	assert_int_equal(tg_route_match(&tg_dex_service_routes, "POST",
	    "/api/export/work-orders", &m), 1);
	assert_string_equal(tg_route_param(&m, "kind"), "work-orders");
	s = tg_route_expand("/public/v1/export/{kind}", &m);
	assert_string_equal(s, "/public/v1/export/work-orders");
	free(s);
	assert_null(tg_route_expand("/x/{missing}", &m));
	assert_int_equal(tg_route_match(&tg_sim_service_routes, "GET",
	    "/v1/simulations/abc-1/results", &m), 1);
	assert_int_equal(m.route->op, TG_OP_SIM_RESULTS);
	assert_string_equal(tg_route_param(&m, "id"), "abc-1");
	assert_int_equal(tg_route_match(&tg_sim_service_routes, "POST", "/api/oauth2/token",
	    &m), 1);
	assert_int_equal(m.route->op, TG_OP_SIM_TOKEN);
	assert_int_equal(tg_route_match(&tg_sim_service_routes, "GET", "/simulations", &m), 1);
	assert_int_equal(m.route->op, TG_OP_SIM_LIST);
	assert_int_equal(tg_route_match(&tg_sim_service_routes, "POST", "/simulations", &m), 1);
	assert_int_equal(m.route->op, TG_OP_SIM_SUBMIT);
	assert_string_equal(tg_op_name(TG_OP_DEX_EXPORT_GET), "export_get");
}

/* A 404's "did you mean": under the prefix sent, only when near. */
static void
test_suggest(void **state)
{
	static const struct {
		const char *sent, *near;	/* near NULL: no hint */
	} cases[] = {
		{ "/public/v1/import/statu", "/public/v1/import/status" },
		{ "/public/v1/exports/activities", "/public/v1/export/activities" },
		{ "/api/Import/Result", "/api/import/result" },
		{ "/import/activities/faild", "/import/activities/failed" },
		{ "/public/v2/brand-new", NULL },
		{ "/public/v1/export/activities/x", NULL },
		{ "/", NULL },
	};
	char out[128];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (cases[i].near == NULL) {
			assert_int_equal(tg_route_suggest(&tg_dex_service_routes, cases[i].sent, out,
			    sizeof(out)), 0);
			continue;
		}
		assert_int_equal(tg_route_suggest(&tg_dex_service_routes, cases[i].sent, out,
		    sizeof(out)), 1);
		assert_string_equal(out, cases[i].near);
	}
	assert_int_equal(tg_route_suggest(&tg_sim_service_routes, "/api/v1/simulation/abc",
	    out, sizeof(out)), 1);
	assert_string_equal(out, "/api/v1/simulations/abc");
}

/* The second-byte test that rules routes and prefixes out before they are
 * walked (router.c) decides as the whole comparison would: a capture or
 * a bare "/" right after the first '/', a one-byte prefix, a path that
 * does not begin with '/' or is empty (read no further than its NUL). */
static void
test_second_byte_filter(void **state)
{
	static const struct tg_route routes[] = {
		{ 1, "GET", "/{id}", "one", "/u/{id}", NULL, NULL },
		{ 2, "GET", "/", "root", "/", NULL, NULL },
		{ 3, "GET", "/ab/c", "abc", "/abc", NULL, NULL },
		{ 4, "POST", "/ab/c", "abc_post", "/abc", NULL, NULL },
	};
	static const char *const prefixes[] = { "/", "/a", "" };
	static const struct tg_service_routes sr = { routes, 4, prefixes, 3, NULL, NULL };
	static const struct { const char *m, *p; int rc; enum tg_op op; } cases[] = {
		{ "GET", "//x", 1, 1 },		/* prefix "/", then "/{id}" */
		{ "GET", "/x", 1, 1 },
		{ "GET", "/", 1, 2 },
		{ "GET", "/ab/c", 1, 3 },	/* not "/a" + "b/c" */
		{ "DELETE", "/ab/c", -1, 0 },
		{ "GET", "/a/ab/c", 1, 3 },
		{ "GET", "/ab/d", 0, 0 },
		{ "GET", "x", 0, 0 },
		{ "GET", "", 0, 0 },
	};
	struct tg_route_match m;
	size_t i;
	char *p;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		p = strdup(cases[i].p);		/* its own allocation: ASan sees past its NUL */
		assert_int_equal(tg_route_match(&sr, cases[i].m, p, &m), cases[i].rc);
		assert_int_equal(m.route != NULL ? m.route->op : 0, cases[i].op);
		free(p);
	}
	assert_int_equal(tg_route_match(&sr, "GET", "//x", &m), 1);
	assert_string_equal(tg_route_param(&m, "id"), "x");
}

/* A table's seconds (routes.h) names the byte after the first '/' of
 * every pattern, none of which begins with "/{": a route added with
 * another initial fails here, not silently in the router. And it rules
 * a path out only where no pattern could match it. */
static void
test_seconds_cover_the_patterns(void **state)
{
	const struct tg_service_routes *t[] = { &tg_dex_service_routes, &tg_sim_service_routes };
	struct tg_route_match m;
	size_t i, j;

	for (i = 0; i < 2; i++) {
		assert_non_null(t[i]->seconds);
		for (j = 0; j < t[i]->nroutes; j++) {
			const char *p = t[i]->routes[j].pattern;

			assert_int_equal(p[0], '/');
			assert_true(p[1] != '{' && p[1] != '\0');
			if (strchr(t[i]->seconds, p[1]) == NULL)
				fail_msg("%s: '%c' not in \"%s\"", p, p[1], t[i]->seconds);
		}
	}
	assert_int_equal(tg_route_match(&tg_dex_service_routes, "GET", "/public/v1/bench", &m), 0);
	assert_int_equal(tg_route_match(&tg_dex_service_routes, "GET", "/", &m), 0);
	assert_int_equal(tg_route_match(&tg_dex_service_routes, "GET", "/export", &m), 1);
	assert_int_equal(tg_route_match(&tg_sim_service_routes, "GET", "/v1/cases/7", &m), 1);
	assert_string_equal(tg_route_param(&m, "id"), "7");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_dex_aliases),
		cmocka_unit_test(test_dex_unknown_and_405),
		cmocka_unit_test(test_captures_and_expand),
		cmocka_unit_test(test_suggest),
		cmocka_unit_test(test_second_byte_filter),
		cmocka_unit_test(test_seconds_cover_the_patterns),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
