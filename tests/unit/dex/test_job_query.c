/*
 * test_job_query.c - tg_route_query_one (src/dex/job_query.c): the one
 * correlationId of a poll's query string, decoded as a vendor decodes it,
 * and every query that could be read more than one way refused: repeats
 * in any spelling (case, percent-encoded names), empty values, broken
 * escapes, control characters, overlong values.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tidegate/dex.h"
#include "tidegate/util.h"

static const char *
one(const char *q)
{
	static char buf[512];
	struct tg_err why = { "" };
	char *v = NULL;

	if (tg_route_query_one(q, "correlationId", &v, &why) != 0) {
		assert_null(v);
		snprintf(buf, sizeof(buf), "refused: %s", why.msg);
		return buf;
	}
	snprintf(buf, sizeof(buf), "%s", v ? v : "(absent)");
	free(v);
	return buf;
}

static int
refused(const char *q)
{
	return strncmp(one(q), "refused: ", 9) == 0;
}

static void
test_one_value(void **state)
{
	assert_string_equal(one(NULL), "(absent)");
	assert_string_equal(one(""), "(absent)");
	assert_string_equal(one("wait=5"), "(absent)");
	assert_string_equal(one("correlationId=abc"), "abc");
	assert_string_equal(one("wait=5&correlationId=abc&x=1"), "abc");
	assert_string_equal(one("&&correlationId=abc&"), "abc");
	/* decoded as a vendor decodes it */
	assert_string_equal(one("correlationId=%61bc"), "abc");
	assert_string_equal(one("correlationId=a%2Fb%3d"), "a/b=");
	assert_string_equal(one("correlationId=a+b"), "a b");
	assert_string_equal(one("correlationId=a=b"), "a=b");
	assert_string_equal(one("correlationId=%C3%A9"), "\xc3\xa9");
	/* other spellings of the name a vendor may read as the parameter */
	assert_string_equal(one("correlationid=abc"), "abc");
	assert_string_equal(one("CORRELATIONID=abc"), "abc");
	assert_string_equal(one("%63orrelationId=abc"), "abc");
	/* names that are not it */
	assert_string_equal(one("correlationIds=abc"), "(absent)");
	assert_string_equal(one("xcorrelationId=abc"), "(absent)");
	assert_string_equal(one("correlation_id=abc"), "(absent)");
}

static void
test_ambiguous_refused(void **state)
{
	char big[400];

	assert_true(refused("correlationId=a&correlationId=b"));
	assert_true(refused("correlationId=a&correlationId=a"));
	assert_true(refused("correlationId=a&correlationid=b"));
	assert_true(refused("correlationId=a&CorrelationID=a"));
	assert_true(refused("correlationId=a&%63orrelationId=b"));
	assert_true(refused("correlationId=a&correlation%49d=b"));
	assert_true(refused("correlationId=&correlationId=b"));
	assert_true(refused("correlationId=a&correlationId"));
	assert_non_null(strstr(one("correlationId=a&correlationId=b"), "more than once"));
	/* empty */
	assert_true(refused("correlationId="));
	assert_true(refused("correlationId"));
	assert_non_null(strstr(one("correlationId="), "empty"));
	/* escapes a vendor could read either way, and bytes it cannot */
	assert_true(refused("correlationId=ab%"));
	assert_true(refused("correlationId=ab%4"));
	assert_true(refused("correlationId=ab%zz"));
	assert_true(refused("correlationId=ab%00cd"));
	assert_true(refused("correlationId=ab%0Acd"));
	assert_true(refused("correlationId=ab%7f"));
	assert_non_null(strstr(one("correlationId=ab%00cd"), "control character"));
	memset(big, 'a', sizeof(big));
	memcpy(big, "correlationId=", 14);
	big[sizeof(big) - 1] = '\0';
	assert_true(refused(big));
	big[14 + TG_ROUTE_PARAMLEN] = '\0';
	assert_int_equal(strlen(one(big)), TG_ROUTE_PARAMLEN);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_one_value),
		cmocka_unit_test(test_ambiguous_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
