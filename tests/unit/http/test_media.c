/*
 * test_media.c - tg_http_media_accepted: the Content-Type values a route's
 * declared types take (case, parameters, spaces, +json) and those they do
 * not (other types, prefixes, a bare "+json", subtypes of other types).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "tidegate/http.h"

static void
test_taken(void **state)
{
	static const char *const json[] = { "application/json", "APPLICATION/Json",
		"application/json; charset=utf-8", " application/json ;charset=UTF-8",
		"application/merge-patch+json", "application/vnd.x.y+JSON; v=2" };
	size_t i;

	for (i = 0; i < sizeof(json) / sizeof(json[0]); i++)
		assert_int_equal(tg_http_media_accepted("application/json", json[i]), 1);
	assert_int_equal(tg_http_media_accepted("multipart/form-data",
	    "multipart/form-data; boundary=x"), 1);
	assert_int_equal(tg_http_media_accepted("multipart/form-data, application/json",
	    "application/json"), 1);
	assert_int_equal(tg_http_media_accepted("application/json", NULL), 1);
	assert_int_equal(tg_http_media_accepted(NULL, "text/xml"), 1);
}

static void
test_refused(void **state)
{
	static const char *const other[] = { "text/xml", "application/x-www-form-urlencoded",
		"multipart/form-data; boundary=B", "application/jsonx", "application/js",
		"application/+json", "text/x+json", "", "application" };
	size_t i;

	for (i = 0; i < sizeof(other) / sizeof(other[0]); i++)
		assert_int_equal(tg_http_media_accepted("application/json", other[i]), 0);
	assert_int_equal(tg_http_media_accepted("multipart/form-data", "application/json"), 0);
	assert_int_equal(tg_http_media_accepted("multipart/form-data",
	    "multipart/form-data-x"), 0);
	assert_int_equal(tg_http_media_accepted("application/x-www-form-urlencoded",
	    "application/x-www-form-urlencoded+json"), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_taken),
		cmocka_unit_test(test_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
