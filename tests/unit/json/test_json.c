/*
 * test_json.c - JSON Pointer access, pointer escaping, tree regeneration,
 * parse errors, and the JSON error body contract.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include "tidegate/errors.h"
#include "tidegate/json.h"

static const char doc[] =
    "{\"foo\":[\"bar\",\"baz\"],\"\":0,\"a/b\":1,\"m~n\":8,\"o\":{\"p\":[{\"q\":true}]}}";

static void
test_pointer(void **state)
{
	yajl_val v = tg_json_parse(doc, strlen(doc), NULL);

	assert_non_null(v);
	assert_ptr_equal(tg_json_ptr(v, ""), v);
	assert_string_equal(tg_json_ptr(v, "/foo/1")->u.string, "baz");
	assert_int_equal(YAJL_GET_INTEGER(tg_json_ptr(v, "/")), 0);
	assert_int_equal(YAJL_GET_INTEGER(tg_json_ptr(v, "/a~1b")), 1);
	assert_int_equal(YAJL_GET_INTEGER(tg_json_ptr(v, "/m~0n")), 8);
	assert_true(YAJL_IS_TRUE(tg_json_ptr(v, "/o/p/0/q")));
	assert_null(tg_json_ptr(v, "/foo/2"));
	assert_null(tg_json_ptr(v, "/foo/01"));
	assert_null(tg_json_ptr(v, "/foo/-"));
	assert_null(tg_json_ptr(v, "/nope/x"));
	assert_null(tg_json_ptr(v, "foo"));
	yajl_tree_free(v);
}

static void
test_escape(void **state)
{
	char *s = tg_json_ptr_escape("a/b~c");

	assert_string_equal(s, "a~1b~0c");
	free(s);
}

static void
test_regenerate(void **state)
{
	yajl_val v = tg_json_parse(doc, strlen(doc), NULL);
	yajl_gen g = tg_json_gen_new();
	struct evbuffer *b = evbuffer_new();
	char out[256];
	size_t n;

	tg_json_gen_val(g, v);
	tg_json_gen_flush(g, b);
	n = evbuffer_remove(b, out, sizeof(out) - 1);
	out[n] = '\0';
	assert_string_equal(out, doc);
	yajl_gen_free(g);
	evbuffer_free(b);
	yajl_tree_free(v);
}

static void
test_parse_errors(void **state)
{
	struct tg_err err;

	assert_null(tg_json_parse("{\"a\":", 5, &err));
	assert_true(strncmp(err.msg, "invalid JSON: ", 14) == 0);
	assert_null(strchr(err.msg, '\n'));
	assert_null(tg_json_parse(NULL, 0, &err));	/* an empty body */
	assert_string_equal(err.msg, "invalid JSON: the body is empty");
	assert_null(tg_json_parse("", 0, &err));
	assert_string_equal(err.msg, "invalid JSON: the body is empty");
	assert_null(tg_json_parse("\"a\0b\"", 5, &err));
	assert_string_equal(err.msg, "body contains a NUL byte");
	{
		static char deep[200001];

		memset(deep, '[', sizeof(deep) - 1);
		assert_null(tg_json_parse(deep, sizeof(deep) - 1, &err));
		assert_string_equal(err.msg, "invalid JSON: nested deeper than 64 levels");
		assert_null(tg_json_parse("{\"projectId\\u0000x\": 1}", 23, &err));
		assert_string_equal(err.msg, "invalid JSON: a string contains \\u0000");
		assert_null(tg_json_parse("[\"a\\u0000\"]", 11, &err));
		memset(deep, 0, sizeof(deep));
		memset(deep, '[', 64);
		memset(deep + 64, ']', 64);
		yajl_tree_free(tg_json_parse(deep, 128, &err));
	}
}

static void
test_error_body(void **state)
{
	struct evbuffer *b = evbuffer_new();
	struct tg_detail d[] = { { "/statuses/1", "'DONE' is not one of PLANNED", "enum" } };
	char out[512];
	size_t n;

	tg_error_body(b, 400, NULL, "2 problems \"quoted\"", "req-1", d, 1);
	n = evbuffer_remove(b, out, sizeof(out) - 1);
	out[n] = '\0';
	assert_string_equal(out, "{\"statusCode\":400,\"error\":\"BAD_REQUEST\","
	    "\"message\":\"2 problems \\\"quoted\\\"\",\"requestId\":\"req-1\","
	    "\"details\":[{\"path\":\"/statuses/1\",\"message\":\"'DONE' is not one of PLANNED\",\"code\":\"enum\"}]}");
	tg_error_body(b, 503, "TOKEN_UNAVAILABLE", "x", NULL, NULL, 0);
	n = evbuffer_remove(b, out, sizeof(out) - 1);
	out[n] = '\0';
	assert_string_equal(out,
	    "{\"statusCode\":503,\"error\":\"TOKEN_UNAVAILABLE\",\"message\":\"x\"}");
	evbuffer_free(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pointer),
		cmocka_unit_test(test_escape),
		cmocka_unit_test(test_regenerate),
		cmocka_unit_test(test_parse_errors),
		cmocka_unit_test(test_error_body),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
