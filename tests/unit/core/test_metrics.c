/*
 * test_metrics.c - Prometheus text rendering: counters, histogram buckets,
 * HELP/TYPE once per metric (a declared family without series too), stable
 * order, series at 0 before their first event, sub-millisecond buckets.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include "tidegate/metrics.h"

static char *
render(struct tg_metrics *m)
{
	struct evbuffer *b = evbuffer_new();
	size_t n;
	char *s;

	tg_metrics_render(m, b);
	n = evbuffer_get_length(b);
	s = malloc(n + 1);
	evbuffer_remove(b, s, n);
	s[n] = '\0';
	evbuffer_free(b);
	return s;
}

static void
test_counters(void **state)
{
	struct tg_metrics *m = tg_metrics_new();
	char *s;

	tg_metrics_help(m, "req_total", "counter", "Requests.");
	tg_metrics_inc(m, "req_total", "code=\"200\"", 1);
	tg_metrics_inc(m, "req_total", "code=\"200\"", 2);
	tg_metrics_inc(m, "req_total", "code=\"404\"", 1);
	tg_metrics_inc(m, "plain", "", 5);
	s = render(m);
	assert_string_equal(s, "plain 5\n"
	    "# HELP req_total Requests.\n# TYPE req_total counter\n"
	    "req_total{code=\"200\"} 3\nreq_total{code=\"404\"} 1\n");
	assert_true(tg_metrics_value(m, "req_total", "code=\"200\"") == 3);
	free(s);
	tg_metrics_free(m);
}

/* The series used last are found again without the map: more series than
 * it remembers, used in turn and again, each under its own name and labels
 * (names and labels that share a prefix kept apart). */
static void
test_recent_series(void **state)
{
	struct tg_metrics *m = tg_metrics_new();
	char labels[32];
	int round, i;

	for (round = 0; round < 3; round++)
		for (i = 0; i < 7; i++) {
			snprintf(labels, sizeof(labels), "code=\"%d\"", 200 + i);
			tg_metrics_inc(m, i % 2 ? "req_total" : "req_totals", labels, i + 1);
			tg_metrics_inc(m, "req_total", "code=\"2\"", 1);
		}
	for (i = 0; i < 7; i++) {
		snprintf(labels, sizeof(labels), "code=\"%d\"", 200 + i);
		assert_true(tg_metrics_value(m, i % 2 ? "req_total" : "req_totals", labels) ==
		    3 * (i + 1));
		assert_true(tg_metrics_value(m, i % 2 ? "req_totals" : "req_total", labels) == 0);
	}
	assert_true(tg_metrics_value(m, "req_total", "code=\"2\"") == 21);
	tg_metrics_free(m);
}

static void
test_histogram(void **state)
{
	struct tg_metrics *m = tg_metrics_new();
	char *s;

	tg_metrics_observe(m, "lat", "op=\"x\"", 0.003);
	tg_metrics_observe(m, "lat", "op=\"x\"", 2.0);
	s = render(m);
	assert_non_null(strstr(s, "lat_bucket{op=\"x\",le=\"0.001\"} 0\n"));
	assert_non_null(strstr(s, "lat_bucket{op=\"x\",le=\"0.005\"} 1\n"));
	assert_non_null(strstr(s, "lat_bucket{op=\"x\",le=\"2.5\"} 2\n"));
	assert_non_null(strstr(s, "lat_bucket{op=\"x\",le=\"+Inf\"} 2\n"));
	assert_non_null(strstr(s, "lat_sum{op=\"x\"} 2.003000\n"));
	assert_non_null(strstr(s, "lat_count{op=\"x\"} 2\n"));
	free(s);
	tg_metrics_free(m);
}

/* A value on a bound is in that bucket and every one above; one above the
 * last bound only in +Inf; NaN in none (the sum takes it); every bucket
 * cumulative though each observation is counted once. And a series asked
 * for by another pointer to the same name is the same series. */
static void
test_histogram_edges(void **state)
{
	struct tg_metrics *m = tg_metrics_new();
	char name[] = "lat", *s;

	tg_metrics_observe(m, "lat", "", 0.001);
	tg_metrics_observe(m, "lat", "", 0.0001);
	tg_metrics_observe(m, "lat", "", 61);
	tg_metrics_observe(m, "lat", "", -1);
	tg_metrics_observe(m, name, "", 0.0002);
	tg_metrics_observe(m, "lat", "", 0.0 / 0.0);
	s = render(m);
	assert_non_null(strstr(s, "lat_bucket{le=\"0.0001\"} 2\n"
	    "lat_bucket{le=\"0.00025\"} 3\nlat_bucket{le=\"0.0005\"} 3\n"
	    "lat_bucket{le=\"0.001\"} 4\n"));
	assert_non_null(strstr(s, "lat_bucket{le=\"60\"} 4\nlat_bucket{le=\"+Inf\"} 6\n"));
	assert_non_null(strstr(s, "lat_count 6\n"));
	free(s);
	tg_metrics_free(m);
}

static void
test_touch_and_declared(void **state)
{
	struct tg_metrics *m = tg_metrics_new();
	static const char *const both[] = { "r=\"a\"", "r=\"b\"", NULL };
	char *s;

	tg_metrics_help(m, "a_total", "counter", "A.");
	tg_metrics_help(m, "b_seconds", "histogram", "B.");
	tg_metrics_help(m, "c_total", "counter", "C.");
	tg_metrics_help(m, "d_total", "counter", "D.");
	tg_metrics_touch_list(m, "a_total", both);
	tg_metrics_touch(m, "b_seconds", "");
	tg_metrics_touch(m, "d_total", "");
	tg_metrics_observe(m, "b_seconds", "", 0.00015);
	s = render(m);
	assert_non_null(strstr(s, "# HELP a_total A.\n# TYPE a_total counter\n"
	    "a_total{r=\"a\"} 0\na_total{r=\"b\"} 0\n# HELP b_seconds B.\n"));
	assert_non_null(strstr(s, "b_seconds_bucket{le=\"0.0001\"} 0\n"
	    "b_seconds_bucket{le=\"0.00025\"} 1\n"));
	assert_non_null(strstr(s, "b_seconds_sum 0.000150\nb_seconds_count 1\n"
	    "# HELP c_total C.\n# TYPE c_total counter\n# HELP d_total D.\n"
	    "# TYPE d_total counter\nd_total 0\n"));
	free(s);
	tg_metrics_free(m);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counters),
		cmocka_unit_test(test_recent_series),
		cmocka_unit_test(test_histogram),
		cmocka_unit_test(test_histogram_edges),
		cmocka_unit_test(test_touch_and_declared),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
