/*
 * test_rate.c - the GCRA arithmetic (rate.h): a burst, then the steady
 * rate; refill; units given back; clocks that jump; the header fields.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "tidegate/rate.h"

#define S	1000000LL	/* a second in µs */

static void
test_init_bounds(void **state)
{
	struct tg_rate r;

	assert_int_equal(tg_rate_init(&r, 10, 5), 0);
	assert_int_equal(r.interval_us, 100000);
	assert_int_equal(r.burst, 5);
	assert_int_equal(tg_rate_init(&r, 3, 1), 0);
	assert_int_equal(r.interval_us, 333333);
	assert_int_equal(tg_rate_init(&r, 0, 5), -1);
	assert_int_equal(tg_rate_init(&r, -1, 5), -1);
	assert_int_equal(tg_rate_init(&r, 2e6, 5), -1);
	assert_int_equal(tg_rate_init(&r, 10, 0), -1);
	assert_int_equal(tg_rate_init(&r, 0.0 / 0.0, 5), -1);
}

/* 10/s with a burst of 5: five at once, then one each 100 ms. */
static void
test_burst_then_rate(void **state)
{
	struct tg_rate r;
	int64_t tat = 0, now = 50 * S, i, got = 0;

	tg_rate_init(&r, 10, 5);
	assert_int_equal(tg_rate_left(&r, tat, now), 5);
	for (i = 0; i < 7; i++)
		got += tg_rate_take(&r, &tat, now, 1);
	assert_int_equal(got, 5);
	assert_int_equal(tg_rate_left(&r, tat, now), 0);
	assert_int_equal(tg_rate_wait(&r, tat, now), 100000);
	assert_int_equal(tg_rate_reset(&r, tat, now), 500000);
	assert_int_equal(tg_rate_take(&r, &tat, now + 99999, 1), 0);
	assert_int_equal(tg_rate_take(&r, &tat, now + 100000, 1), 1);
	assert_int_equal(tg_rate_take(&r, &tat, now + 100000, 1), 0);
	/* a second at full demand admits the rate, no more */
	for (got = 0, i = 1; i <= 1000; i++)
		got += tg_rate_take(&r, &tat, now + 100000 + i * 1000, 1);
	assert_int_equal(got, 10);
}

/* Refill stops at the burst, however long the pause. */
static void
test_refill_caps(void **state)
{
	struct tg_rate r;
	int64_t tat = 0, now = 10 * S;

	tg_rate_init(&r, 10, 5);
	assert_int_equal(tg_rate_take(&r, &tat, now, 5), 5);
	assert_int_equal(tg_rate_left(&r, tat, now + 200000), 2);
	assert_int_equal(tg_rate_left(&r, tat, now + 3600 * S), 5);
	assert_int_equal(tg_rate_take(&r, &tat, now + 3600 * S, 9), 5);
}

/* A batch asks for more than is there: it gets what is there. */
static void
test_take_batch(void **state)
{
	struct tg_rate r;
	int64_t tat = 0, now = S;

	tg_rate_init(&r, 100, 20);
	assert_int_equal(tg_rate_take(&r, &tat, now, 15), 15);
	assert_int_equal(tg_rate_take(&r, &tat, now, 15), 5);
	assert_int_equal(tg_rate_take(&r, &tat, now, 15), 0);
	assert_int_equal(tg_rate_take(&r, &tat, now + 50000, 15), 5);
	assert_int_equal(tg_rate_take(&r, &tat, now, 0), 0);
	assert_int_equal(tg_rate_take(&r, &tat, now, -3), 0);
}

/* Units given back are there again; never more than the burst. */
static void
test_give_back(void **state)
{
	struct tg_rate r;
	int64_t tat = 0, now = S;

	tg_rate_init(&r, 10, 5);
	assert_int_equal(tg_rate_take(&r, &tat, now, 5), 5);
	tg_rate_give(&r, &tat, now, 2);
	assert_int_equal(tg_rate_left(&r, tat, now), 2);
	tg_rate_give(&r, &tat, now, 1000000000000LL);
	assert_int_equal(tat, now);
	assert_int_equal(tg_rate_left(&r, tat, now), 5);
	tg_rate_give(&r, &tat, now, 3);
	assert_int_equal(tg_rate_left(&r, tat, now), 5);
	tg_rate_give(&r, &tat, now, 0);
	assert_int_equal(tat, now);
}

/* A clock that went back (or a TAT from a host whose clock runs ahead)
 * holds units back for one refill at most; one that jumps ahead fills the
 * bucket to its burst, no more. */
static void
test_clock_jumps(void **state)
{
	struct tg_rate r;
	int64_t tat, now = 100 * S;

	tg_rate_init(&r, 10, 5);
	tat = now + 3600 * S;
	assert_int_equal(tg_rate_left(&r, tat, now), 0);
	assert_int_equal(tg_rate_wait(&r, tat, now), 100000);
	assert_int_equal(tg_rate_reset(&r, tat, now), 500000);
	assert_int_equal(tg_rate_take(&r, &tat, now, 1), 0);	/* the read is kept */
	assert_int_equal(tat, now + 500000);
	assert_int_equal(tg_rate_take(&r, &tat, now + 100000, 1), 1);
	assert_int_equal(tat, now + 600000);
	tat = 0;
	assert_int_equal(tg_rate_take(&r, &tat, INT64_C(1) << 60, 10), 5);
}

/* Fields as the draft writes them; nothing negative. */
static void
test_fields(void **state)
{
	char p[64], s[64];

	tg_rate_fields("per-key", 100, 60, 42, 17, p, sizeof(p), s, sizeof(s));
	assert_string_equal(p, "\"per-key\";q=100;w=60");
	assert_string_equal(s, "\"per-key\";r=42;t=17");
	tg_rate_fields("d", 5, 0, -1, -4, p, sizeof(p), s, sizeof(s));
	assert_string_equal(p, "\"d\";q=5;w=1");
	assert_string_equal(s, "\"d\";r=0;t=0");
	tg_rate_fields("long-name", 123456, 86400, 1, 2, p, 8, s, 8);
	assert_string_equal(p, "\"long-n");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_init_bounds), cmocka_unit_test(test_burst_then_rate),
		cmocka_unit_test(test_refill_caps), cmocka_unit_test(test_take_batch),
		cmocka_unit_test(test_give_back), cmocka_unit_test(test_clock_jumps),
		cmocka_unit_test(test_fields),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
