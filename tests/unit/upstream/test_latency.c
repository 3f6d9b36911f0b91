/*
 * test_latency.c - the vendor latency histogram's buckets: a value on a
 * bound counts in that bound's bucket (Prometheus's le), one microsecond
 * more in the next, past the last bound in +Inf; the bounds read back in
 * seconds in increasing order.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tidegate/upstream.h"

static void
test_edges(void **state)
{
	int i;

	(void)state;
	assert_int_equal(tg_upstream_lat_bucket(0), 0);
	assert_int_equal(tg_upstream_lat_bucket(-5), 0);
	for (i = 0; i < TG_UP_LAT_NB; i++) {
		int64_t us = (int64_t)(tg_upstream_lat_le(i) * 1e6 + 0.5);

		assert_int_equal(tg_upstream_lat_bucket(us), i);
		assert_int_equal(tg_upstream_lat_bucket(us + 1), i + 1);
		if (i > 0)
			assert_true(tg_upstream_lat_le(i) > tg_upstream_lat_le(i - 1));
	}
	assert_int_equal(tg_upstream_lat_bucket(INT64_MAX), TG_UP_LAT_NB);
}

static void
test_bounds(void **state)
{
	(void)state;
	assert_true(tg_upstream_lat_le(0) == 0.001);
	assert_true(tg_upstream_lat_le(6) == 0.1);
	assert_true(tg_upstream_lat_le(7) == 0.25);
	assert_true(tg_upstream_lat_le(TG_UP_LAT_NB - 1) == 30);
	assert_true(tg_upstream_lat_le(TG_UP_LAT_NB) == 0);
	assert_true(tg_upstream_lat_le(-1) == 0);
	/* an emulator delay of 300 ms lands in (0.25, 0.5] */
	assert_int_equal(tg_upstream_lat_bucket(300000), 8);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_edges),
		cmocka_unit_test(test_bounds),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
