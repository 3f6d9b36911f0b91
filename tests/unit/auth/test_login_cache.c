/*
 * test_login_cache.c - callers' login cache: hit, miss on another secret
 * or identity, expiry (and the entry dropped), the size bound with its
 * eviction order, a disabled cache, and the entries forgotten when the
 * vendor refuses their token or the gateway's own.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tidegate/clock.h"
#include "tidegate/token.h"

static void
test_hit_miss(void **state)
{
	struct tg_login_cache *lc = tg_login_cache_new(16);
	int64_t now = tg_clock_now_ms();

	assert_null(tg_login_cache_get(lc, "demo", "demo", now, NULL));
	tg_login_cache_put(lc, "demo", "demo", "{\"token\":\"t1\"}", NULL, now + 10000);
	assert_string_equal(tg_login_cache_get(lc, "demo", "demo", now, NULL), "{\"token\":\"t1\"}");
	assert_null(tg_login_cache_get(lc, "demo", "wrong", now, NULL));
	assert_null(tg_login_cache_get(lc, "other", "demo", now, NULL));
	assert_null(tg_login_cache_get(lc, "", "", now, NULL));

	/* the separator keeps identity and secret apart */
	tg_login_cache_put(lc, "a", "bc", "A", NULL, now + 10000);
	assert_null(tg_login_cache_get(lc, "ab", "c", now, NULL));
	assert_string_equal(tg_login_cache_get(lc, "a", "bc", now, NULL), "A");

	/* a newer login replaces the body */
	tg_login_cache_put(lc, "demo", "demo", "{\"token\":\"t2\"}", NULL, now + 20000);
	assert_string_equal(tg_login_cache_get(lc, "demo", "demo", now, NULL), "{\"token\":\"t2\"}");
	assert_int_equal(tg_login_cache_count(lc), 2);
	tg_login_cache_free(lc);
}

static void
test_expiry(void **state)
{
	struct tg_login_cache *lc = tg_login_cache_new(16);
	int64_t now = tg_clock_now_ms();

	tg_login_cache_put(lc, "demo", "demo", "B", NULL, now + 5000);
	assert_non_null(tg_login_cache_get(lc, "demo", "demo", now + 4999, NULL));
	assert_null(tg_login_cache_get(lc, "demo", "demo", now + 5000, NULL));
	assert_int_equal(tg_login_cache_count(lc), 0);	/* dropped, not only hidden */
	assert_null(tg_login_cache_get(lc, "demo", "demo", now, NULL));

	/* an already expired body is not stored */
	tg_login_cache_put(lc, "demo", "demo", "C", NULL, now - 1);
	assert_int_equal(tg_login_cache_count(lc), 0);
	tg_login_cache_free(lc);
}

static void
test_bound_closest_to_expiry(void **state)
{
	struct tg_login_cache *lc = tg_login_cache_new(3);
	int64_t now = tg_clock_now_ms();

	tg_login_cache_put(lc, "u1", "p", "1", NULL, now + 50000);
	tg_login_cache_put(lc, "u2", "p", "2", NULL, now + 10000);
	tg_login_cache_put(lc, "u3", "p", "3", NULL, now + 90000);
	tg_login_cache_put(lc, "u4", "p", "4", NULL, now + 70000);
	assert_int_equal(tg_login_cache_count(lc), 3);
	assert_null(tg_login_cache_get(lc, "u2", "p", now, NULL));
	assert_string_equal(tg_login_cache_get(lc, "u1", "p", now, NULL), "1");
	assert_string_equal(tg_login_cache_get(lc, "u3", "p", now, NULL), "3");
	assert_string_equal(tg_login_cache_get(lc, "u4", "p", now, NULL), "4");

	/* replacing a present key evicts nothing */
	tg_login_cache_put(lc, "u1", "p", "1b", NULL, now + 60000);
	assert_int_equal(tg_login_cache_count(lc), 3);
	assert_string_equal(tg_login_cache_get(lc, "u3", "p", now, NULL), "3");
	tg_login_cache_free(lc);
}

static void
test_bound_expired_first(void **state)
{
	struct tg_login_cache *lc = tg_login_cache_new(4);
	int64_t now = tg_clock_now_ms();
	int i;
	char id[8];

	tg_login_cache_put(lc, "a", "p", "a", NULL, now + 100);
	tg_login_cache_put(lc, "b", "p", "b", NULL, now + 150);
	tg_login_cache_put(lc, "c", "p", "c", NULL, now + 100000);
	tg_login_cache_put(lc, "d", "p", "d", NULL, now + 200000);
	tg_clock_advance_ms(200);
	now = tg_clock_now_ms();
	tg_login_cache_put(lc, "e", "p", "e", NULL, now + 300000);
	assert_int_equal(tg_login_cache_count(lc), 3);	/* both expired ones went */
	assert_non_null(tg_login_cache_get(lc, "c", "p", now, NULL));
	assert_non_null(tg_login_cache_get(lc, "d", "p", now, NULL));
	assert_non_null(tg_login_cache_get(lc, "e", "p", now, NULL));

	for (i = 0; i < 100; i++) {
		snprintf(id, sizeof(id), "x%d", i);
		tg_login_cache_put(lc, id, "p", id, NULL, now + 400000 + i);
		assert_true(tg_login_cache_count(lc) <= 4);
	}
	assert_non_null(tg_login_cache_get(lc, "x99", "p", now, NULL));
	tg_login_cache_free(lc);
}

static void
test_disabled(void **state)
{
	struct tg_login_cache *lc = tg_login_cache_new(0);
	int64_t now = tg_clock_now_ms();

	tg_login_cache_put(lc, "demo", "demo", "x", NULL, now + 10000);
	assert_null(tg_login_cache_get(lc, "demo", "demo", now, NULL));
	assert_int_equal(tg_login_cache_count(lc), 0);
	tg_login_cache_free(lc);
	tg_login_cache_free(NULL);
}

/* Two identities share a token (the vendor may hand the same one out);
 * dropping it forgets both, not a third; a refill carries the new token. */
static void
test_drop_token_and_clear(void **state)
{
	struct tg_login_cache *lc = tg_login_cache_new(16);
	int64_t now = tg_clock_now_ms();

	tg_login_cache_put(lc, "a", "p", "{\"token\":\"T1\"}", "T1", now + 10000);
	tg_login_cache_put(lc, "b", "p", "{\"token\":\"T1\"}", "T1", now + 10000);
	tg_login_cache_put(lc, "c", "p", "{\"token\":\"T2\"}", "T2", now + 10000);
	tg_login_cache_put(lc, "d", "p", "{}", NULL, now + 10000);
	assert_int_equal(tg_login_cache_drop_token(lc, "T9"), 0);
	assert_int_equal(tg_login_cache_drop_token(lc, ""), 0);
	assert_int_equal(tg_login_cache_drop_token(lc, NULL), 0);
	assert_int_equal(tg_login_cache_drop_token(lc, "T1"), 2);
	assert_null(tg_login_cache_get(lc, "a", "p", now, NULL));
	assert_null(tg_login_cache_get(lc, "b", "p", now, NULL));
	assert_non_null(tg_login_cache_get(lc, "c", "p", now, NULL));
	tg_login_cache_put(lc, "c", "p", "{\"token\":\"T3\"}", "T3", now + 10000);
	assert_int_equal(tg_login_cache_drop_token(lc, "T2"), 0);	/* replaced */
	assert_int_equal(tg_login_cache_count(lc), 2);
	tg_login_cache_clear(lc);
	assert_int_equal(tg_login_cache_count(lc), 0);
	assert_null(tg_login_cache_get(lc, "d", "p", now, NULL));
	tg_login_cache_clear(NULL);
	assert_int_equal(tg_login_cache_drop_token(NULL, "T1"), 0);
	tg_login_cache_free(lc);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hit_miss),
		cmocka_unit_test(test_expiry),
		cmocka_unit_test(test_bound_closest_to_expiry),
		cmocka_unit_test(test_bound_expired_first),
		cmocka_unit_test(test_disabled),
		cmocka_unit_test(test_drop_token_and_clear),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
