/*
 * test_runs_json.c - the run registry's records as the extension API and
 * the run webhooks show them (src/sim/runs_json.c): a run with its
 * callback's query redacted and its times in ISO 8601, a terminal event,
 * the 410 body of a run past expiry, and a page whose limit is capped.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tidegate/json.h"
#include "tidegate/registry.h"
#include "gen_tree.h"

#define T0	1700000000000LL		/* 2023-11-14T22:13:20Z */
#define SEC	1000LL
#define DAY	(86400LL * 1000)

static const char FIGURES[] = "{\"availability\": 0.956643, \"totalCost\": 7266549}";

/* A run as the registry hands it out; fields borrowed but figures. */
static struct tg_run
run_of(const char *id, enum tg_run_status st)
{
	struct tg_run run = {
		.simulation_id = (char *)id, .api_key = "team-a", .host = "fallback",
		.case_id = "CASE-OM-1", .status = st, .vendor_status = TG_RUN_IN_PROGRESS,
		.submitted_at = T0, .expires_at = T0 + 30 * DAY, .status_at = T0 + 200 * SEC,
		.checks = 3, .validation = "passed (diff checked)",
		.callback_url = "https://hooks.example/run?token=s3cret",
	};

	memset(run.case_sha256, 'a', 64);
	run.figures = tg_json_parse(FIGURES, sizeof(FIGURES) - 1, NULL);
	return run;
}

static yajl_val
run_tree(const struct tg_run *run)
{
	yajl_gen g = tg_json_gen_new();

	tg_run_json(g, run);
	return gen_tree(g);
}

static void
test_run_json(void **state)
{
	struct tg_run run = run_of("sim-1", TG_RUN_IN_PROGRESS);
	yajl_val t = run_tree(&run);

	assert_non_null(t);
	assert_string_equal(tg_json_get_str(t, "simulationId"), "sim-1");
	assert_string_equal(tg_json_get_str(t, "callbackUrl"), "https://hooks.example/run?…");
	assert_string_equal(tg_json_get_str(t, "submittedAt"), "2023-11-14T22:13:20Z");
	assert_string_equal(tg_json_get_str(t, "expiresAt"), "2023-12-14T22:13:20Z");
	assert_true(YAJL_IS_NULL(tg_json_get(t, "completedAt")));
	assert_true(YAJL_IS_NULL(tg_json_get(t, "nextCheckAt")));
	assert_string_equal(tg_json_get_str(t, "status"), "IN_PROGRESS");
	assert_string_equal(tg_json_get_str(t, "vendorStatus"), "IN_PROGRESS");
	assert_int_equal(YAJL_GET_INTEGER(tg_json_get(t, "checks")), 3);
	assert_string_equal(tg_json_get(tg_json_get(t, "figures"), "availability")->u.number.r,
	    "0.956643");
	assert_int_equal(tg_json_get(t, "figures")->u.object.len, 2);
	assert_null(strstr(tg_json_get_str(t, "callbackUrl"), "s3cret"));
	yajl_tree_free(t);
	run.vendor_status = -1;			/* none reported */
	run.callback_url = "https://hooks.example/run#frag";
	t = run_tree(&run);
	assert_true(YAJL_IS_NULL(tg_json_get(t, "vendorStatus")));
	assert_string_equal(tg_json_get_str(t, "callbackUrl"), "https://hooks.example/run");
	yajl_tree_free(t);
	yajl_tree_free(run.figures);
}

static void
test_event_json(void **state)
{
	struct tg_run run = run_of("sim-f", TG_RUN_FAILED);
	yajl_gen g = tg_json_gen_new();
	yajl_val t;

	run.failure = "the vendor reported FAILED 3 min 12 s after submission";
	tg_runs_event_json(g, &run, T0 + 200 * SEC);
	t = gen_tree(g);
	assert_string_equal(tg_json_get_str(t, "type"), "simulation.failed");
	assert_string_equal(tg_json_get_str(t, "timestamp"), "2023-11-14T22:16:40Z");
	assert_string_equal(tg_json_get_str(tg_json_get(t, "data"), "simulationId"), "sim-f");
	assert_string_equal(tg_json_get_str(tg_json_get(t, "data"), "failure"), run.failure);
	yajl_tree_free(t);
	yajl_tree_free(run.figures);
}

/* The 410 of a run past expiry: when it was submitted and expired. */
static void
test_retention_message(void **state)
{
	struct tg_run run = run_of("b", TG_RUN_EXPIRED);
	yajl_gen g = tg_json_gen_new();
	const char *msg;
	yajl_val t;

	run.vendor_status = TG_RUN_COMPLETED;
	run.archived = 1;
	tg_runs_retention_message(g, &run, "req-1");
	t = gen_tree(g);
	assert_int_equal(YAJL_GET_INTEGER(tg_json_get(t, "statusCode")), 410);
	assert_string_equal(tg_json_get_str(t, "error"), "GONE");
	assert_string_equal(tg_json_get_str(t, "requestId"), "req-1");
	assert_string_equal(tg_json_get_str(t, "simulationId"), "b");
	assert_string_equal(tg_json_get_str(t, "submittedAt"), "2023-11-14T22:13:20Z");
	assert_string_equal(tg_json_get_str(t, "expiredAt"), "2023-12-14T22:13:20Z");
	assert_string_equal(tg_json_get_str(t, "status"), "COMPLETED");
	assert_true(YAJL_IS_TRUE(tg_json_get(t, "archived")));
	msg = tg_json_get_str(t, "message");
	assert_non_null(strstr(msg, "submitted at 2023-11-14T22:13:20Z"));
	assert_non_null(strstr(msg, "expired at 2023-12-14T22:13:20Z"));
	assert_non_null(strstr(msg, "(archived)"));
	yajl_tree_free(t);
	yajl_tree_free(run.figures);
}

static void
test_page_json(void **state)
{
	struct tg_run run = run_of("r3", TG_RUN_COMPLETED);
	struct tg_runs_query q = { .status = "COMPLETED", .limit = 5000, .offset = 2 };
	yajl_gen g = tg_json_gen_new();
	yajl_val t;

	tg_runs_page_json(g, &run, 1, &q, 0);
	t = gen_tree(g);
	assert_int_equal(tg_json_get(t, "runs")->u.array.len, 1);
	assert_string_equal(tg_json_get_str(tg_json_ptr(t, "/runs/0"), "simulationId"), "r3");
	assert_string_equal(tg_json_get_str(tg_json_ptr(t, "/runs/0"), "status"), "COMPLETED");
	assert_int_equal(YAJL_GET_INTEGER(tg_json_get(t, "limit")), 1000);
	assert_int_equal(YAJL_GET_INTEGER(tg_json_get(t, "offset")), 2);
	assert_true(YAJL_IS_FALSE(tg_json_get(t, "more")));
	yajl_tree_free(t);
	q.limit = 0;
	g = tg_json_gen_new();
	tg_runs_page_json(g, NULL, 0, &q, 1);
	t = gen_tree(g);
	assert_int_equal(tg_json_get(t, "runs")->u.array.len, 0);
	assert_int_equal(YAJL_GET_INTEGER(tg_json_get(t, "limit")), TG_RUNS_LIST_LIMIT);
	assert_true(YAJL_IS_TRUE(tg_json_get(t, "more")));
	yajl_tree_free(t);
	yajl_tree_free(run.figures);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_run_json),
		cmocka_unit_test(test_event_json),
		cmocka_unit_test(test_retention_message),
		cmocka_unit_test(test_page_json),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
