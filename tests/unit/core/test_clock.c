/*
 * test_clock.c - strict ISO 8601 parsing, formatting and the test offset.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tidegate/clock.h"

static void
test_parse_valid(void **state)
{
	int64_t ms;

	assert_int_equal(tg_clock_parse_iso("1970-01-01T00:00:00Z", &ms), 0);
	assert_int_equal(ms, 0);
	assert_int_equal(tg_clock_parse_iso("2024-02-29T12:30:00.250Z", &ms), 0);
	assert_int_equal(ms, 1709209800250LL);
	assert_int_equal(tg_clock_parse_iso("2024-02-29T14:30:00.25+02:00", &ms), 0);
	assert_int_equal(ms, 1709209800250LL);
	assert_int_equal(tg_clock_parse_iso("2024-02-29T12:30Z", &ms), 0);
	assert_int_equal(ms, 1709209800000LL);
	assert_int_equal(tg_clock_parse_iso("1969-12-31T23:59:59Z", &ms), 0);
	assert_int_equal(ms, -1000);
}

static void
test_parse_invalid(void **state)
{
	static const char *const bad[] = {
		"2024-13-01T00:00:00Z", "2024-02-30T00:00:00Z", "2023-02-29T00:00:00Z",
		"2024-01-01T00:00:00", "2024-01-01", "garbage", "", "2024-01-01T24:00:00Z",
		"2024-01-01T00:60:00Z", "2024-01-01T00:00:60Z", "2024-01-01T00:00:00.Z",
		"2024-01-01T00:00:00Zjunk", "2024-1-01T00:00:00Z", "2024-01-01 00:00:00Z",
		"2024-01-01T00:00:00+2:00", "2024-01-01T00:00:00+24:00",
	};
	int64_t ms;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (tg_clock_parse_iso(bad[i], &ms) == 0)
			fail_msg("accepted '%s'", bad[i]);
}

static void
test_format_roundtrip(void **state)
{
	char out[TG_ISO_LEN];
	int64_t ms, v[] = { 0, 1709209800250LL, 951782400000LL, -86400000LL, 4102444799999LL };
	size_t i;

	tg_clock_iso(1709209800250LL, out);
	assert_string_equal(out, "2024-02-29T12:30:00.250Z");
	tg_clock_iso(0, out);
	assert_string_equal(out, "1970-01-01T00:00:00Z");
	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		tg_clock_iso(v[i], out);
		assert_int_equal(tg_clock_parse_iso(out, &ms), 0);
		assert_int_equal(ms, v[i]);
	}
}

static void
test_advance(void **state)
{
	int64_t before = tg_clock_now_ms();

	tg_clock_advance_ms(31LL * 86400000);
	tg_clock_advance_ms(-5000);	/* ignored: time never goes back */
	assert_int_equal(tg_clock_offset_ms(), 31LL * 86400000);
	assert_true(tg_clock_now_ms() - before >= 31LL * 86400000);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_valid),
		cmocka_unit_test(test_parse_invalid),
		cmocka_unit_test(test_format_roundtrip),
		cmocka_unit_test(test_advance),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
