/*
 * test_http.c - tg_http_retry_after_s: both forms of a Retry-After
 * (delta-seconds; an HTTP date in its three forms, read against now), the
 * cap (a day's delay, digits past any integer), a date passed, and the
 * values that are neither.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>

#include "tidegate/http.h"

#define T0	784111777	/* Sun, 06 Nov 1994 08:49:37 GMT */

static void
test_seconds(void **state)
{
	assert_int_equal(tg_http_retry_after_s("5", T0, 60), 5);
	assert_int_equal(tg_http_retry_after_s("0", T0, 60), 0);
	assert_int_equal(tg_http_retry_after_s("60", T0, 60), 60);
	assert_int_equal(tg_http_retry_after_s("86400", T0, 60), 60);
	assert_int_equal(tg_http_retry_after_s("99999999999999999999999999", T0, 60), 60);
	assert_int_equal(tg_http_retry_after_s("007", T0, 60), 7);
}

static void
test_dates(void **state)
{
	assert_int_equal(tg_http_retry_after_s("Sun, 06 Nov 1994 08:49:37 GMT", T0 - 30, 60),
	    30);
	assert_int_equal(tg_http_retry_after_s("Sunday, 06-Nov-94 08:49:37 GMT", T0 - 30, 60),
	    30);
	assert_int_equal(tg_http_retry_after_s("Sun Nov  6 08:49:37 1994", T0 - 30, 60), 30);
	/* a day ahead is cut to the cap; a date passed is now */
	assert_int_equal(tg_http_retry_after_s("Sun, 06 Nov 1994 08:49:37 GMT", T0 - 86400,
	    60), 60);
	assert_int_equal(tg_http_retry_after_s("Sun, 06 Nov 1994 08:49:37 GMT", T0 + 10, 60),
	    0);
}

static void
test_neither(void **state)
{
	static const char *const bad[] = { "", "-1", "5s", " 5", "5 ", "1.5", "tomorrow",
		"Sun, 06 Nov 1994 08:49:37 CET", "Sun, 06 Nov 1994 08:49", "Sun, 32 Nov 1994 "
		"08:49:37 GMT", "Sun, 06 Nov 1994 08:49:37 GMT trailing" };
	size_t i;

	assert_int_equal(tg_http_retry_after_s(NULL, T0, 60), -1);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(tg_http_retry_after_s(bad[i], T0, 60), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seconds),
		cmocka_unit_test(test_dates),
		cmocka_unit_test(test_neither),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
