/*
 * test_clock.c - strict ISO 8601 parsing, formatting, the test offset and
 * the clock read once per loop turn.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>
#include <time.h>

#include <event2/event.h>

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

/* libevent's cached time is CLOCK_MONOTONIC_COARSE's (no precise timer
 * asked for): a nap of two of its ticks and 3 ms is sure to move it. */
static void
nap(void)
{
	struct timespec res, ts = { 0, 3000000L };

	if (clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0)
		ts.tv_nsec += 2 * res.tv_nsec;
	nanosleep(&ts, NULL);
}

static const struct timeval now = { 0, 0 };

struct turns {
	int64_t first[2], again[2];
	int n;
	struct event *ev;
};

/* Two readings a nap apart in each of two turns of the loop. */
static void
on_turn(evutil_socket_t fd, short what, void *arg)
{
	struct turns *t = arg;
	struct event_base *base = event_get_base(t->ev);

	t->first[t->n] = tg_clock_turn_ms(base);
	nap();
	t->again[t->n] = tg_clock_turn_ms(base);
	if (++t->n < 2)		/* a timer runs in the loop's next pass */
		evtimer_add(t->ev, &now);
}

static void
test_turn_read_once_per_turn(void **state)
{
	struct event_base *base = event_base_new();
	struct turns t = { .n = 0 };
	int64_t a, b;

	/* outside the loop: the clock every time */
	a = tg_clock_turn_ms(base);
	nap();
	b = tg_clock_turn_ms(base);
	assert_true(b - a >= 2);
	t.ev = evtimer_new(base, on_turn, &t);
	evtimer_add(t.ev, &now);
	event_base_dispatch(base);
	assert_int_equal(t.n, 2);
	assert_true(t.first[0] >= b);
	assert_int_equal(t.again[0], t.first[0]);	/* one reading a turn */
	assert_int_equal(t.again[1], t.first[1]);
	assert_true(t.first[1] - t.first[0] >= 2);	/* read again in the next */
	event_free(t.ev);
	event_base_free(base);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_valid),
		cmocka_unit_test(test_parse_invalid),
		cmocka_unit_test(test_format_roundtrip),
		cmocka_unit_test(test_advance),
		cmocka_unit_test(test_turn_read_once_per_turn),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
