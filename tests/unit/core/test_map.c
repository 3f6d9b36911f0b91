/*
 * test_map.c - the string hash map: growth, replacement, deletion with
 * backward shift (every remaining key still found), iteration.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tidegate/map.h"
#include "tidegate/util.h"

static void
test_put_get_grow(void **state)
{
	struct tg_map *m = tg_map_new(free);
	char key[32];
	int i;

	for (i = 0; i < 5000; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		tg_map_put(m, key, tg_xasprintf("v%d", i));
	}
	assert_int_equal(tg_map_count(m), 5000);
	for (i = 0; i < 5000; i++) {
		snprintf(key, sizeof(key), "k%d", i);
		char *v = tg_map_get(m, key);
		assert_non_null(v);
		assert_int_equal(atoi(v + 1), i);
	}
	assert_null(tg_map_get(m, "missing"));
	tg_map_put(m, "k1", tg_xstrdup("replaced"));
	assert_string_equal(tg_map_get(m, "k1"), "replaced");
	assert_int_equal(tg_map_count(m), 5000);
	tg_map_free(m);
}

static void
test_delete(void **state)
{
	struct tg_map *m = tg_map_new(free);
	char key[32];
	char *v;
	int i;

	for (i = 0; i < 1000; i++) {
		snprintf(key, sizeof(key), "%d", i);
		tg_map_put(m, key, tg_xstrdup(key));
	}
	for (i = 0; i < 1000; i += 2) {
		snprintf(key, sizeof(key), "%d", i);
		assert_int_equal(tg_map_del(m, key), 1);
		assert_int_equal(tg_map_del(m, key), 0);
	}
	for (i = 0; i < 1000; i++) {
		snprintf(key, sizeof(key), "%d", i);
		if (i % 2)
			assert_string_equal(tg_map_get(m, key), key);
		else
			assert_null(tg_map_get(m, key));
	}
	v = tg_map_take(m, "1");
	assert_string_equal(v, "1");
	free(v);
	assert_int_equal(tg_map_count(m), 499);
	tg_map_free(m);
}

static void
test_iterate(void **state)
{
	struct tg_map *m = tg_map_new(NULL);
	const char *k;
	void *v;
	size_t pos = 0, n = 0;
	long sum = 0;

	tg_map_put(m, "a", (void *)1);
	tg_map_put(m, "b", (void *)2);
	tg_map_put(m, "c", (void *)3);
	while (tg_map_next(m, &pos, &k, &v)) {
		n++;
		sum += (long)v;
	}
	assert_int_equal(n, 3);
	assert_int_equal(sum, 6);
	tg_map_free(m);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_put_get_grow),
		cmocka_unit_test(test_delete),
		cmocka_unit_test(test_iterate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
