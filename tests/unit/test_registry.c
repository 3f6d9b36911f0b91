/*
 * test_registry.c - the run registry (src/sim/registry.c, retention.c)
 * without an event loop: recording submissions and reading them back after
 * close and reopen, status checks and the check schedule, failure texts,
 * checks that got no answer, due runs in order, list filters and paging
 * with their JSON, key figures, the archive and its caps, expiry with the
 * 410 body, purge after the grace period, the counts behind the metrics,
 * ends not yet handled (kept across reopen), schema versioning and the
 * upgrade from version 1, and garbage inputs. Times are passed in; nothing
 * sleeps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "tidegate/clock.h"
#include "tidegate/json.h"
#include "tidegate/registry.h"
#include "gen_tree.h"

#define T0	1700000000000LL		/* 2023-11-14T22:13:20Z */
#define SEC	1000LL
#define DAY	(86400LL * 1000)

static struct {
	char dir[64];
	char db[96];
	struct tg_runs *r;
} R;

static struct tg_runs *
open_with(const struct tg_runs_opts *o)
{
	struct tg_runs_opts d = { .path = R.db };
	struct tg_err err = { "" };
	struct tg_runs *r;

	if (o == NULL)
		o = &d;
	if ((r = tg_runs_open(o, &err)) == NULL)
		fail_msg("open: %s", err.msg);
	return r;
}

static int
setup(void **state)
{
	snprintf(R.dir, sizeof(R.dir), "/tmp/tg-runs-XXXXXX");
	if (mkdtemp(R.dir) == NULL)
		return -1;
	snprintf(R.db, sizeof(R.db), "%s/runs.db", R.dir);
	R.r = open_with(NULL);
	return 0;
}

static int
teardown(void **state)
{
	char cmd[128];

	tg_runs_close(R.r);
	R.r = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", R.dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void
add_full(const char *id, const char *case_id, const char *key, int64_t sub,
    enum tg_run_status st)
{
	char sha[TG_RUNS_SHA_LEN];
	struct tg_run_new n = {
		.simulation_id = id, .api_key = key, .host = "primary", .case_id = case_id,
		.case_sha256 = sha, .submitted_at = sub, .status = st,
		.validation = "passed (diff checked)",
	};
	struct tg_err err = { "" };

	tg_runs_case_digest(id, strlen(id), sha);
	if (tg_runs_add(R.r, &n, sub, &err) != 0)
		fail_msg("add %s: %s", id, err.msg);
}

static void
add(const char *id, int64_t sub)
{
	add_full(id, "CASE-OM-1", "demo-key", sub, TG_RUN_IN_PROGRESS);
}

static void
get(const char *id, struct tg_run *run)
{
	struct tg_err err = { "" };

	if (tg_runs_get(R.r, id, run, &err) != 0)
		fail_msg("get %s: %s", id, err.msg);
}

static int
set(const char *id, enum tg_run_status st, int64_t done, int64_t now)
{
	struct tg_err err = { "" };

	return tg_runs_set_status(R.r, id, st, done, now, &err);
}

static yajl_val
run_tree(const struct tg_run *run)
{
	yajl_gen g = tg_json_gen_new();

	tg_run_json(g, run);
	return gen_tree(g);
}

/* The ids a list or due call returned, joined by spaces. */
static char *
ids(const struct tg_run *runs, size_t n)
{
	char *s = tg_xstrdup(""), *t;
	size_t i;

	for (i = 0; i < n; i++) {
		t = tg_xasprintf("%s%s%s", s, i ? " " : "", runs[i].simulation_id);
		free(s);
		s = t;
	}
	return s;
}

static void
expect_list(const struct tg_runs_query *q, const char *want, int want_more)
{
	struct tg_err err = { "" };
	struct tg_run *runs;
	size_t n;
	char *got;
	int more = -1;

	if (tg_runs_list(R.r, q, &runs, &n, &more, &err) != 0)
		fail_msg("list: %s", err.msg);
	got = ids(runs, n);
	assert_string_equal(got, want);
	assert_int_equal(more, want_more);
	free(got);
	tg_runs_free(runs, n);
}

static void
expect_due(int64_t now, size_t max, const char *want)
{
	struct tg_err err = { "" };
	struct tg_run *runs;
	size_t n;
	char *got;

	assert_int_equal(tg_runs_due(R.r, now, max, &runs, &n, &err), 0);
	got = ids(runs, n);
	assert_string_equal(got, want);
	free(got);
	tg_runs_free(runs, n);
}

/* ---- statuses and schedule ---- */

static void
test_status_names_and_schedule(void **state)
{
	static const int64_t want[] = { 2000, 4000, 8000, 16000, 32000, 64000, 128000, 256000,
		300000, 300000 };
	int i;

	for (i = 0; i < TG_RUN_NSTATUS; i++)
		assert_int_equal(tg_runs_status_parse(tg_runs_status_str(i)), i);
	assert_int_equal(tg_runs_status_parse("in_progress"), -1);
	assert_int_equal(tg_runs_status_parse(NULL), -1);
	assert_false(tg_runs_status_terminal(TG_RUN_IN_PROGRESS));
	assert_true(tg_runs_status_terminal(TG_RUN_FAILED));
	assert_true(tg_runs_status_terminal(TG_RUN_UNKNOWN));
	for (i = 0; i < (int)TG_NELEM(want); i++)
		assert_int_equal(tg_runs_check_delay(i), want[i]);
	assert_int_equal(tg_runs_check_delay(-3), TG_RUNS_CHECK_MIN_MS);
	assert_int_equal(tg_runs_check_delay(1 << 30), TG_RUNS_CHECK_MAX_MS);
}

/* ---- lifecycle ---- */

static void
test_lifecycle_and_reopen(void **state)
{
	struct tg_run_new n = {
		.simulation_id = "sim-1", .api_key = "team-a", .host = "primary",
		.case_id = "CASE-OM-1", .submitted_at = T0,
		.validation = "passed (diff checked)",
		.callback_url = "https://hooks.example/run?token=s3cret",
	};
	char sha[TG_RUNS_SHA_LEN];
	struct tg_err err = { "" };
	struct tg_run run;
	yajl_val t;

	tg_runs_case_digest("{}", 2, sha);
	assert_string_equal(sha,
	    "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a");
	n.case_sha256 = sha;
	assert_int_equal(tg_runs_add(R.r, &n, T0 + 10, &err), 0);
	get("sim-1", &run);
	assert_int_equal(run.status, TG_RUN_IN_PROGRESS);
	assert_int_equal(run.vendor_status, TG_RUN_IN_PROGRESS);
	assert_int_equal(run.submitted_at, T0);
	assert_int_equal(run.expires_at, T0 + 30 * DAY);
	assert_int_equal(run.next_check_at, T0 + 2 * SEC);
	assert_int_equal(run.checks, 0);
	assert_string_equal(run.case_sha256, sha);
	assert_string_equal(run.callback_url, "https://hooks.example/run?token=s3cret");
	t = run_tree(&run);
	assert_string_equal(tg_json_get_str(t, "callbackUrl"), "https://hooks.example/run?…");
	assert_string_equal(tg_json_get_str(t, "submittedAt"), "2023-11-14T22:13:20Z");
	assert_string_equal(tg_json_get_str(t, "expiresAt"), "2023-12-14T22:13:20Z");
	assert_true(YAJL_IS_NULL(tg_json_get(t, "completedAt")));
	yajl_tree_free(t);
	tg_run_cleanup(&run);

	/* Still running: the next check waits twice as long. */
	assert_int_equal(set("sim-1", TG_RUN_IN_PROGRESS, 0, T0 + 2 * SEC), 0);
	get("sim-1", &run);
	assert_int_equal(run.next_check_at, T0 + 6 * SEC);
	assert_int_equal(run.checks, 1);
	tg_run_cleanup(&run);
	/* Completed: 1 once, and the first terminal status stays. */
	assert_int_equal(set("sim-1", TG_RUN_COMPLETED, T0 + 5 * SEC, T0 + 6 * SEC), 1);
	assert_int_equal(set("sim-1", TG_RUN_FAILED, 0, T0 + 7 * SEC), 0);
	assert_int_equal(set("sim-1", TG_RUN_COMPLETED, 0, T0 + 8 * SEC), 0);

	tg_runs_close(R.r);
	R.r = open_with(NULL);
	get("sim-1", &run);
	assert_int_equal(run.status, TG_RUN_COMPLETED);
	assert_int_equal(run.completed_at, T0 + 5 * SEC);
	assert_int_equal(run.status_at, T0 + 6 * SEC);
	assert_int_equal(run.next_check_at, 0);
	assert_int_equal(run.checks, 4);
	assert_string_equal(run.api_key, "team-a");
	assert_string_equal(run.validation, "passed (diff checked)");
	assert_null(run.failure);
	tg_run_cleanup(&run);

	assert_int_equal(tg_runs_add(R.r, &n, T0, &err), TG_RUNS_CONFLICT);
	assert_non_null(strstr(err.msg, "already recorded"));
	n.simulation_id = "sim-2";
	n.host = NULL;
	assert_int_equal(tg_runs_add(R.r, &n, T0, &err), -1);
	assert_int_equal(set("nope", TG_RUN_COMPLETED, 0, T0), TG_RUNS_NOT_FOUND);
	assert_int_equal(tg_runs_get(R.r, "nope", &run, &err), TG_RUNS_NOT_FOUND);
	assert_int_equal(tg_runs_set_status(R.r, "sim-1", TG_RUN_NSTATUS, 0, T0, &err), -1);
}

static void
test_first_answer_terminal(void **state)
{
	struct tg_run run;

	add_full("sim-done", "CASE-OM-1", NULL, T0, TG_RUN_COMPLETED);
	get("sim-done", &run);
	assert_int_equal(run.status, TG_RUN_COMPLETED);
	assert_int_equal(run.next_check_at, 0);
	assert_int_equal(run.completed_at, T0);
	assert_null(run.api_key);
	tg_run_cleanup(&run);
	/* A 404 before expiry: UNKNOWN, terminal, no vendor status of its own. */
	add("sim-lost", T0);
	assert_int_equal(set("sim-lost", TG_RUN_UNKNOWN, 0, T0 + 2 * SEC), 1);
	get("sim-lost", &run);
	assert_int_equal(run.status, TG_RUN_UNKNOWN);
	assert_int_equal(run.vendor_status, TG_RUN_IN_PROGRESS);
	assert_int_equal(run.completed_at, 0);
	tg_run_cleanup(&run);
}

static void
test_failure_text(void **state)
{
	char sha[TG_RUNS_SHA_LEN] = "00";
	struct tg_run_new n = {
		.simulation_id = "sim-f", .host = "fallback", .case_id = "CASE-CON-1",
		.case_sha256 = sha, .submitted_at = T0,
		.validation = "passed (diff skipped: base case not served)",
	};
	struct tg_err err = { "" };
	struct tg_run run;
	yajl_gen g;
	yajl_val t;

	assert_int_equal(tg_runs_add(R.r, &n, T0, &err), 0);
	assert_int_equal(set("sim-f", TG_RUN_FAILED, T0 + 192 * SEC, T0 + 200 * SEC), 1);
	get("sim-f", &run);
	assert_int_equal(run.status, TG_RUN_FAILED);
	assert_non_null(run.failure);
	assert_non_null(strstr(run.failure, "FAILED 3 min 12 s after submission"));
	assert_non_null(strstr(run.failure, "host: fallback"));
	assert_non_null(strstr(run.failure, "diff skipped"));
	g = tg_json_gen_new();
	tg_runs_event_json(g, &run, T0 + 200 * SEC);
	t = gen_tree(g);
	assert_string_equal(tg_json_get_str(t, "type"), "simulation.failed");
	assert_string_equal(tg_json_get_str(t, "timestamp"), "2023-11-14T22:16:40Z");
	assert_string_equal(tg_json_get_str(tg_json_get(t, "data"), "simulationId"), "sim-f");
	assert_string_equal(tg_json_get_str(tg_json_get(t, "data"), "failure"), run.failure);
	yajl_tree_free(t);
	tg_run_cleanup(&run);
}

static void
test_check_failed(void **state)
{
	struct tg_err err = { "" };
	struct tg_run run;

	add("sim-c", T0);
	assert_int_equal(tg_runs_check_failed(R.r, "sim-c", "upstream timeout", -1,
	    T0 + 2 * SEC, &err), 0);
	get("sim-c", &run);
	assert_int_equal(run.checks, 1);
	assert_int_equal(run.next_check_at, T0 + 6 * SEC);
	assert_string_equal(run.last_error, "upstream timeout");
	assert_int_equal(run.status, TG_RUN_IN_PROGRESS);
	tg_run_cleanup(&run);
	/* Retry-After stretches the delay, up to an hour. */
	assert_int_equal(tg_runs_check_failed(R.r, "sim-c", "429", 60 * SEC, T0 + 6 * SEC, &err),
	    0);
	get("sim-c", &run);
	assert_int_equal(run.next_check_at, T0 + 66 * SEC);
	tg_run_cleanup(&run);
	assert_int_equal(tg_runs_check_failed(R.r, "sim-c", NULL, DAY, T0 + 66 * SEC, &err), 0);
	get("sim-c", &run);
	assert_int_equal(run.next_check_at, T0 + 66 * SEC + 3600 * SEC);
	assert_string_equal(run.last_error, "no answer");
	tg_run_cleanup(&run);
	/* An answer clears the error. */
	assert_int_equal(set("sim-c", TG_RUN_COMPLETED, 0, T0 + 4000 * SEC), 1);
	get("sim-c", &run);
	assert_null(run.last_error);
	assert_int_equal(run.checks, 4);
	tg_run_cleanup(&run);
	/* A terminal run is never rescheduled. */
	assert_int_equal(tg_runs_check_failed(R.r, "sim-c", "x", -1, T0 + 5000 * SEC, &err), 0);
	get("sim-c", &run);
	assert_int_equal(run.next_check_at, 0);
	tg_run_cleanup(&run);
	assert_int_equal(tg_runs_check_failed(R.r, "nope", "x", -1, T0, &err),
	    TG_RUNS_NOT_FOUND);
}

/* ---- due checks ---- */

static void
test_due_ordering(void **state)
{
	add("a", T0);				/* due T0 + 2 s */
	add("b", T0 - 1 * SEC);			/* due T0 + 1 s */
	add("c", T0 + 500);			/* due T0 + 2.5 s */
	add("d", T0);				/* due T0 + 2 s, same as a: by submission, id */
	add_full("done", "CASE-OM-1", NULL, T0 - 5 * SEC, TG_RUN_COMPLETED);
	add("old", T0 - 31 * DAY);		/* past expiry, never marked: not due */

	assert_int_equal(tg_runs_next_due(R.r, T0), T0 + 1 * SEC);
	expect_due(T0, 0, "");
	expect_due(T0 + 2 * SEC, 0, "b a d");
	expect_due(T0 + 3 * SEC, 1, "b");
	expect_due(T0 + 3 * SEC, 0, "b a d c");
	/* Checked runs move back in the queue. */
	assert_int_equal(set("b", TG_RUN_IN_PROGRESS, 0, T0 + 3 * SEC), 0);	/* T0 + 7 s */
	assert_int_equal(set("a", TG_RUN_COMPLETED, 0, T0 + 3 * SEC), 1);
	expect_due(T0 + 3 * SEC, 0, "d c");
	expect_due(T0 + 7 * SEC, 0, "d c b");
	assert_int_equal(set("c", TG_RUN_FAILED, 0, T0 + 3 * SEC), 1);
	assert_int_equal(set("d", TG_RUN_COMPLETED, 0, T0 + 3 * SEC), 1);
	assert_int_equal(tg_runs_next_due(R.r, T0 + 3 * SEC), T0 + 7 * SEC);
	assert_int_equal(set("b", TG_RUN_COMPLETED, 0, T0 + 7 * SEC), 1);
	assert_int_equal(tg_runs_next_due(R.r, T0 + 7 * SEC), INT64_MAX);
}

/* ---- listing ---- */

static void
test_list_filters(void **state)
{
	struct tg_runs_query q = { 0 };
	struct tg_err err = { "" };
	struct tg_run *runs;
	size_t n;
	int more;
	yajl_gen g;
	yajl_val t;

	add_full("r1", "CASE-OM-1", "team-a", T0 + 1 * SEC, TG_RUN_IN_PROGRESS);
	add_full("r2", "CASE-OM-2", "team-a", T0 + 2 * SEC, TG_RUN_IN_PROGRESS);
	add_full("r3", "CASE-OM-1", "team-b", T0 + 3 * SEC, TG_RUN_IN_PROGRESS);
	add_full("r4", "CASE-CON-1", "team-b", T0 + 4 * SEC, TG_RUN_IN_PROGRESS);
	add_full("r5", "CASE-OM-1", "team-a", T0 + 5 * SEC, TG_RUN_IN_PROGRESS);
	assert_int_equal(set("r3", TG_RUN_COMPLETED, 0, T0 + 10 * SEC), 1);
	assert_int_equal(set("r5", TG_RUN_FAILED, 0, T0 + 10 * SEC), 1);

	expect_list(&q, "r5 r4 r3 r2 r1", 0);
	q.status = "IN_PROGRESS";
	expect_list(&q, "r4 r2 r1", 0);
	q.case_id = "CASE-OM-1";
	expect_list(&q, "r1", 0);
	q.status = NULL;
	expect_list(&q, "r5 r3 r1", 0);
	q.api_key = "team-a";
	expect_list(&q, "r5 r1", 0);
	q = (struct tg_runs_query){ .from_ms = T0 + 2 * SEC, .to_ms = T0 + 4 * SEC };
	expect_list(&q, "r3 r2", 0);
	q = (struct tg_runs_query){ .sweep_id = "swp_none" };
	expect_list(&q, "", 0);
	q = (struct tg_runs_query){ .limit = 2 };
	expect_list(&q, "r5 r4", 1);
	q.offset = 2;
	expect_list(&q, "r3 r2", 1);
	q.offset = 4;
	expect_list(&q, "r1", 0);
	q.offset = 9;
	expect_list(&q, "", 0);

	q = (struct tg_runs_query){ .status = "DONE" };
	assert_int_equal(tg_runs_list(R.r, &q, &runs, &n, NULL, &err), -1);
	assert_non_null(strstr(err.msg, "unknown run status 'DONE'"));

	q = (struct tg_runs_query){ .status = "COMPLETED", .limit = 5000 };
	assert_int_equal(tg_runs_list(R.r, &q, &runs, &n, &more, &err), 0);
	g = tg_json_gen_new();
	tg_runs_page_json(g, runs, n, &q, more);
	tg_runs_free(runs, n);
	t = gen_tree(g);
	assert_int_equal(tg_json_get(t, "runs")->u.array.len, 1);
	assert_string_equal(tg_json_get_str(tg_json_ptr(t, "/runs/0"), "simulationId"), "r3");
	assert_string_equal(tg_json_get_str(tg_json_ptr(t, "/runs/0"), "status"), "COMPLETED");
	assert_int_equal(YAJL_GET_INTEGER(tg_json_get(t, "limit")), 1000);
	assert_true(YAJL_IS_FALSE(tg_json_get(t, "more")));
	yajl_tree_free(t);
}

/* ---- figures ---- */

static void
test_figures(void **state)
{
	static const char src[] = "{\"caseType\": \"O&M\", \"availability\": 0.956643,"
	    " \"totalCost\": 7266549, \"vesselUtilisation\": {\"CTV\": 0.5},"
	    " \"allTasksCompleted\": true}";
	yajl_val res = tg_json_parse(src, sizeof(src) - 1, NULL), t;
	struct tg_err err = { "" };
	struct tg_run run;

	assert_non_null(res);
	add("sim-x", T0);
	assert_int_equal(tg_runs_set_figures(R.r, "sim-x", res, &err), 0);
	assert_int_equal(tg_runs_set_figures(R.r, "nope", res, &err), TG_RUNS_NOT_FOUND);
	assert_int_equal(tg_runs_set_figures(R.r, "sim-x", tg_json_get(res, "totalCost"), &err),
	    -1);
	get("sim-x", &run);
	t = run_tree(&run);
	assert_string_equal(tg_json_get(tg_json_get(t, "figures"), "availability")->u.number.r,
	    "0.956643");
	assert_int_equal(tg_json_get(t, "figures")->u.object.len, 2);
	yajl_tree_free(t);
	tg_run_cleanup(&run);
	yajl_tree_free(res);
}

/* ---- archive ---- */

static void
test_archive_caps(void **state)
{
	struct tg_runs_opts o = { .archive_max_run = 100, .archive_max_total = 250 };
	char big[101];
	struct tg_err err = { "" };
	struct tg_run run;
	int64_t bytes, count;
	void *data;
	size_t len;

	tg_runs_close(R.r);
	o.path = R.db;
	R.r = open_with(&o);
	memset(big, 'x', sizeof(big));
	add("r1", T0);
	add("r2", T0);
	add("r3", T0);
	add("r4", T0);
	assert_int_equal(set("r1", TG_RUN_COMPLETED, 0, T0 + 5 * SEC), 1);
	assert_int_equal(set("r2", TG_RUN_COMPLETED, 0, T0 + 5 * SEC), 1);
	assert_int_equal(set("r3", TG_RUN_COMPLETED, 0, T0 + 5 * SEC), 1);

	assert_int_equal(tg_runs_archive(R.r, "r4", big, 10, T0, &err), TG_RUNS_CONFLICT);
	assert_non_null(strstr(err.msg, "has not completed"));
	assert_int_equal(tg_runs_archive(R.r, "nope", big, 10, T0, &err), TG_RUNS_NOT_FOUND);
	assert_int_equal(tg_runs_archive(R.r, "r1", big, 101, T0, &err), TG_RUNS_REFUSED);
	assert_non_null(strstr(err.msg, "at most 100 bytes per run"));
	assert_int_equal(tg_runs_archive(R.r, "r1", big, 100, T0, &err), 0);
	assert_int_equal(tg_runs_archive(R.r, "r2", big, 100, T0, &err), 0);
	assert_int_equal(tg_runs_archive(R.r, "r3", big, 100, T0, &err), TG_RUNS_REFUSED);
	assert_non_null(strstr(err.msg, "archive full: 200 of 250 bytes used"));
	/* Replacing counts only the difference. */
	assert_int_equal(tg_runs_archive(R.r, "r1", "{\"a\":1}", 7, T0, &err), 0);
	assert_int_equal(tg_runs_archive(R.r, "r3", big, 100, T0, &err), 0);
	assert_int_equal(tg_runs_archive_usage(R.r, &bytes, &count, &err), 0);
	assert_int_equal(bytes, 207);
	assert_int_equal(count, 3);

	assert_int_equal(tg_runs_archived(R.r, "r1", &data, &len, &err), 0);
	assert_int_equal(len, 7);
	assert_string_equal(data, "{\"a\":1}");
	free(data);
	assert_int_equal(tg_runs_archived(R.r, "r4", &data, &len, &err), TG_RUNS_NOT_FOUND);
	assert_null(data);
	assert_int_equal(tg_runs_archived(R.r, "nope", &data, &len, &err), TG_RUNS_NOT_FOUND);
	get("r1", &run);
	assert_true(run.archived);
	assert_int_equal(run.results_size, 7);
	tg_run_cleanup(&run);
}

/* ---- expiry and purge ---- */

static void
check_410(const struct tg_run *run)
{
	yajl_gen g = tg_json_gen_new();
	const char *msg;
	yajl_val t;

	tg_runs_retention_message(g, run, "req-1");
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
	yajl_tree_free(t);
}

static void
test_expire_and_purge(void **state)
{
	struct tg_err err = { "" };
	struct tg_run run;
	size_t n, ns;
	void *data;
	size_t len;

	add("a", T0);
	add("b", T0);
	add("c", T0 + DAY);
	assert_int_equal(set("b", TG_RUN_COMPLETED, 0, T0 + 5 * SEC), 1);
	assert_int_equal(tg_runs_archive(R.r, "b", "{}", 2, T0 + 6 * SEC, &err), 0);

	assert_int_equal(tg_runs_expire(R.r, T0 + 30 * DAY - 1, &n, &err), 0);
	assert_int_equal(n, 0);
	assert_int_equal(tg_runs_expire(R.r, T0 + 30 * DAY, &n, &err), 0);
	assert_int_equal(n, 2);
	assert_int_equal(tg_runs_expire(R.r, T0 + 30 * DAY, &n, &err), 0);
	assert_int_equal(n, 0);
	get("a", &run);
	assert_int_equal(run.status, TG_RUN_EXPIRED);
	assert_int_equal(run.vendor_status, TG_RUN_IN_PROGRESS);
	assert_int_equal(run.next_check_at, 0);
	assert_true(tg_runs_expired(&run, T0 + 30 * DAY));
	assert_false(tg_runs_expired(&run, T0 + 30 * DAY - 1));
	tg_run_cleanup(&run);
	/* An expired run takes no answers any more. */
	assert_int_equal(set("a", TG_RUN_COMPLETED, 0, T0 + 30 * DAY), 0);
	get("b", &run);
	assert_int_equal(run.status, TG_RUN_EXPIRED);
	assert_int_equal(run.vendor_status, TG_RUN_COMPLETED);
	check_410(&run);
	tg_run_cleanup(&run);
	expect_due(T0 + 30 * DAY, 0, "c");	/* not a, not b */

	/* Grace of 7 days; archived runs 90. */
	assert_int_equal(tg_runs_purge(R.r, T0 + 37 * DAY - 1, &n, &ns, &err), 0);
	assert_int_equal(n, 0);
	assert_int_equal(tg_runs_purge(R.r, T0 + 37 * DAY, &n, &ns, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(tg_runs_get(R.r, "a", &run, &err), TG_RUNS_NOT_FOUND);
	get("c", &run);
	tg_run_cleanup(&run);
	assert_int_equal(tg_runs_purge(R.r, T0 + 38 * DAY, &n, NULL, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(tg_runs_archived(R.r, "b", &data, &len, &err), 0);
	free(data);
	assert_int_equal(tg_runs_purge(R.r, T0 + 120 * DAY, NULL, NULL, &err), 0);
	assert_int_equal(tg_runs_archived(R.r, "b", &data, &len, &err), TG_RUNS_NOT_FOUND);
	assert_int_equal(tg_runs_get(R.r, "b", &run, &err), TG_RUNS_NOT_FOUND);
}

/* ---- counts ---- */

static void
expect_stats(const struct tg_runs_stats *want)
{
	struct tg_runs_stats st;
	struct tg_err err = { "" };
	int i;

	memset(&st, 0xff, sizeof(st));
	if (tg_runs_stats(R.r, &st, &err) != 0)
		fail_msg("stats: %s", err.msg);
	for (i = 0; i < TG_RUN_NSTATUS; i++)
		if (st.runs[i] != want->runs[i])
			fail_msg("runs %s: %llu, want %llu", tg_runs_status_str(i),
			    (unsigned long long)st.runs[i], (unsigned long long)want->runs[i]);
	assert_int_equal(st.archived, want->archived);
	assert_int_equal(st.archived_bytes, want->archived_bytes);
	assert_int_equal(st.sweeps_running, want->sweeps_running);
	assert_int_equal(st.sweeps_done, want->sweeps_done);
	assert_int_equal(st.variants_pending, want->variants_pending);
	assert_int_equal(st.variants_submitting, want->variants_submitting);
}

/* Claim the next variant of sweep id, expecting name; nothing kept. */
static void
claim_one(const char *id, const char *name)
{
	struct tg_sweep_claim c;
	struct tg_err err = { "" };

	if (tg_runs_sweep_claim(R.r, id, T0, &c, &err) != 1)
		fail_msg("claim %s: %s", name, err.msg);
	assert_string_equal(c.name, name);
	tg_sweep_claim_cleanup(&c);
}

static void
test_stats(void **state)
{
	struct tg_sweep_variant_new v[] = {
		{ "base", "{}", 2 }, { "ctv-3", "{\"x\":3}", 7 }, { "ctv-4", "{\"x\":4}", 7 },
	};
	struct tg_sweep_new sw = { .base_case_id = "C", .concurrency = 2, .variants = v,
		.nvariants = 3 };
	struct tg_run_new rn = { .simulation_id = "s1", .host = "primary", .case_id = "C",
		.case_sha256 = "00", .submitted_at = T0 };
	struct tg_runs_stats want = { .runs = { 0 } };
	char a[TG_SWEEP_ID_LEN], b[TG_SWEEP_ID_LEN];
	struct tg_err err = { "" };

	expect_stats(&want);
	add("r1", T0);
	add("r2", T0);
	add("r3", T0);
	add("r4", T0);
	assert_int_equal(set("r1", TG_RUN_COMPLETED, 0, T0 + 5 * SEC), 1);
	assert_int_equal(set("r2", TG_RUN_FAILED, 0, T0 + 5 * SEC), 1);
	assert_int_equal(set("r3", TG_RUN_UNKNOWN, 0, T0 + 5 * SEC), 1);
	assert_int_equal(tg_runs_archive(R.r, "r1", "{\"cost\":12}", 11, T0, &err), 0);
	want.runs[TG_RUN_IN_PROGRESS] = 1;
	want.runs[TG_RUN_COMPLETED] = want.runs[TG_RUN_FAILED] = 1;
	want.runs[TG_RUN_UNKNOWN] = 1;
	want.archived = 1;
	want.archived_bytes = 11;
	expect_stats(&want);

	/* Sweep a: one variant submitted (a run), one submitting, one pending. */
	assert_int_equal(tg_runs_sweep_create(R.r, &sw, T0, a, &err), 0);
	want.sweeps_running = 1;
	want.variants_pending = 3;
	expect_stats(&want);
	claim_one(a, "base");
	assert_int_equal(tg_runs_sweep_submitted(R.r, a, "base", &rn, T0, &err), 0);
	claim_one(a, "ctv-3");
	want.runs[TG_RUN_IN_PROGRESS] = 2;
	want.variants_pending = 1;
	want.variants_submitting = 1;
	expect_stats(&want);
	/* Sweep b: its only variant rejected, so it is done. */
	sw.nvariants = 1;
	assert_int_equal(tg_runs_sweep_create(R.r, &sw, T0, b, &err), 0);
	claim_one(b, "base");
	assert_int_equal(tg_runs_sweep_unclaim(R.r, b, "base", "400", 1, T0, &err), 0);
	assert_int_equal(tg_runs_sweep_settle(R.r, b, T0, &err), 1);
	want.sweeps_done = 1;
	expect_stats(&want);

	/* Expiry moves every row to EXPIRED; the archive stays. */
	assert_int_equal(tg_runs_expire(R.r, T0 + 30 * DAY, NULL, &err), 0);
	memset(want.runs, 0, sizeof(want.runs));
	want.runs[TG_RUN_EXPIRED] = 5;
	expect_stats(&want);
}

/* ---- schema and garbage ---- */

static int
pragma_int(const char *path, const char *q)
{
	sqlite3 *db;
	sqlite3_stmt *s;
	int v = -1;

	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, q, -1, &s, NULL), SQLITE_OK);
	if (sqlite3_step(s) == SQLITE_ROW)
		v = sqlite3_column_type(s, 0) == SQLITE_TEXT ?
		    strcmp((const char *)sqlite3_column_text(s, 0), "wal") == 0 :
		    sqlite3_column_int(s, 0);
	sqlite3_finalize(s);
	sqlite3_close(db);
	return v;
}

static void
test_schema_version(void **state)
{
	struct tg_runs_opts o = { .path = R.db };
	struct tg_err err = { "" };

	tg_runs_close(R.r);
	R.r = NULL;
	assert_int_equal(pragma_int(R.db, "PRAGMA user_version"), 2);
	assert_int_equal(pragma_int(R.db, "PRAGMA journal_mode"), 1);
	/* Reopening an up-to-date registry changes nothing. */
	R.r = open_with(NULL);
	tg_runs_close(R.r);
	R.r = NULL;
	assert_int_equal(pragma_int(R.db, "PRAGMA user_version = 7"), -1);
	assert_null(tg_runs_open(&o, &err));
	assert_non_null(strstr(err.msg, "schema version 7 is newer"));
	assert_int_equal(pragma_int(R.db, "PRAGMA user_version = 2"), -1);
	R.r = open_with(NULL);
}

/* The next unhandled end: 1 with its id compared to want, or 0. */
static int
unhandled(const char *want, enum tg_run_status want_st)
{
	enum tg_run_status st;
	struct tg_err err = { "" };
	char *id;
	int rc = tg_runs_next_unhandled(R.r, &id, &st, &err);

	assert_int_not_equal(rc, -1);
	if (rc == 1) {
		assert_string_equal(id, want);
		assert_int_equal(st, want_st);
	}
	free(id);
	return rc;
}

static void
test_unhandled_ends(void **state)
{
	struct tg_err err = { "" };
	size_t n;

	add("a", T0);
	add("b", T0 + SEC);
	assert_int_equal(unhandled(NULL, 0), 0);	/* in progress: nothing ended */
	assert_int_equal(set("b", TG_RUN_FAILED, T0 + 5 * SEC, T0 + 6 * SEC), 1);
	assert_int_equal(set("a", TG_RUN_COMPLETED, T0 + 7 * SEC, T0 + 8 * SEC), 1);
	/* oldest end first, and kept across a reopen until handled */
	tg_runs_close(R.r);
	R.r = open_with(NULL);
	assert_int_equal(unhandled("b", TG_RUN_FAILED), 1);
	assert_int_equal(tg_runs_set_handled(R.r, "b", &err), 0);
	assert_int_equal(unhandled("a", TG_RUN_COMPLETED), 1);
	assert_int_equal(tg_runs_set_handled(R.r, "a", &err), 0);
	assert_int_equal(unhandled(NULL, 0), 0);
	/* a handled end that later expires is not handled again; an unfinished
	 * run the vendor deleted is */
	add("c", T0 + 2 * SEC);
	assert_int_equal(tg_runs_expire(R.r, T0 + 31 * DAY, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_int_equal(unhandled("c", TG_RUN_EXPIRED), 1);
	assert_int_equal(tg_runs_set_handled(R.r, "c", &err), 0);
	assert_int_equal(unhandled(NULL, 0), 0);
}

/* A version 1 registry: ends recorded before the upgrade count as handled,
 * runs still in progress are handled when they end. */
static void
test_upgrade_from_v1(void **state)
{
	sqlite3 *db;

	add("done", T0);
	add("running", T0 + SEC);
	assert_int_equal(set("done", TG_RUN_COMPLETED, T0 + 5 * SEC, T0 + 6 * SEC), 1);
	tg_runs_close(R.r);
	R.r = NULL;
	assert_int_equal(sqlite3_open(R.db, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "DROP INDEX runs_unhandled;"
	    " ALTER TABLE runs DROP COLUMN ended_handled; PRAGMA user_version = 1",
	    NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
	R.r = open_with(NULL);
	assert_int_equal(pragma_int(R.db, "PRAGMA user_version"), 2);
	assert_int_equal(unhandled(NULL, 0), 0);
	assert_int_equal(set("running", TG_RUN_FAILED, T0 + 9 * SEC, T0 + 9 * SEC), 1);
	assert_int_equal(unhandled("running", TG_RUN_FAILED), 1);
}

static void
test_garbage(void **state)
{
	static const char *const junk[] = { "", "'", "x' OR 1=1 --", "%", "\xff\xfe",
		"swp_", "IN_PROGRESS" };
	struct tg_runs_opts o = { 0 };
	struct tg_runs_query q = { 0 };
	struct tg_err err = { "" };
	struct tg_run run, *runs;
	char path[128];
	size_t i, n;
	FILE *f;

	add("real", T0);
	for (i = 0; i < TG_NELEM(junk); i++) {
		assert_int_equal(tg_runs_get(R.r, junk[i], &run, &err), TG_RUNS_NOT_FOUND);
		q = (struct tg_runs_query){ .case_id = junk[i], .api_key = junk[i] };
		assert_int_equal(tg_runs_list(R.r, &q, &runs, &n, NULL, &err), 0);
		assert_int_equal(n, 0);
		tg_runs_free(runs, n);
		assert_int_equal(tg_runs_status_parse(junk[i]), i == 6 ? 0 : -1);
	}
	assert_null(tg_runs_open(NULL, &err));
	assert_null(tg_runs_open(&o, &err));
	o.path = "/nonexistent-dir/x/runs.db";
	assert_null(tg_runs_open(&o, &err));
	snprintf(path, sizeof(path), "%s/not-a-db", R.dir);
	assert_non_null(f = fopen(path, "w"));
	for (i = 0; i < 200; i++)
		fputs("this is not a database file ", f);
	fclose(f);
	o.path = path;
	assert_null(tg_runs_open(&o, &err));
	tg_runs_close(NULL);
	tg_run_cleanup(NULL);
	tg_runs_free(NULL, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_names_and_schedule),
		cmocka_unit_test_setup_teardown(test_lifecycle_and_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_first_answer_terminal, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failure_text, setup, teardown),
		cmocka_unit_test_setup_teardown(test_check_failed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_due_ordering, setup, teardown),
		cmocka_unit_test_setup_teardown(test_list_filters, setup, teardown),
		cmocka_unit_test_setup_teardown(test_figures, setup, teardown),
		cmocka_unit_test_setup_teardown(test_archive_caps, setup, teardown),
		cmocka_unit_test_setup_teardown(test_expire_and_purge, setup, teardown),
		cmocka_unit_test_setup_teardown(test_stats, setup, teardown),
		cmocka_unit_test_setup_teardown(test_schema_version, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unhandled_ends, setup, teardown),
		cmocka_unit_test_setup_teardown(test_upgrade_from_v1, setup, teardown),
		cmocka_unit_test_setup_teardown(test_garbage, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
