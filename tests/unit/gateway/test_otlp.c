/*
 * test_otlp.c - the OTLP/HTTP JSON encoding of exported spans
 * (src/gateway/otlp.c, gw_otlp_encode): the resource's service.name, the
 * scope, a SERVER span with its parent and attributes, a CLIENT span, ids
 * and times as strings, int attributes as strings, status ERROR only for
 * errors, empty attributes left out, and no span at all.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include "tidegate/json.h"
#include "gw.h"

/* The body encoded from n spans of v, parsed (the caller frees it). */
static yajl_val
encode(const struct gw_span *v, size_t n, const char *service)
{
	struct evbuffer *b = evbuffer_new();
	struct tg_err err;
	yajl_val root;
	size_t len;
	char *s;

	gw_otlp_encode(v, n, service, b);
	len = evbuffer_get_length(b);
	s = malloc(len + 1);
	evbuffer_remove(b, s, len);
	s[len] = '\0';
	root = tg_json_parse(s, len, &err);
	assert_non_null(root);
	free(s);
	evbuffer_free(b);
	return root;
}

/* The value of attribute key in the attributes array a, as a string. */
static const char *
attr(yajl_val a, const char *key)
{
	size_t i;

	for (i = 0; i < YAJL_GET_ARRAY(a)->len; i++) {
		yajl_val kv = YAJL_GET_ARRAY(a)->values[i];
		yajl_val v = tg_json_get(kv, "value");

		if (strcmp(tg_json_get_str(kv, "key"), key) != 0)
			continue;
		return tg_json_get_str(v, tg_json_get(v, "intValue") ? "intValue" : "stringValue");
	}
	return NULL;
}

static void
fill(struct gw_span *v)
{
	memset(v, 0, 2 * sizeof(*v));
	strcpy(v[0].trace_id, "4bf92f3577b34da6a3ce929d0e0e4736");
	strcpy(v[0].span_id, "1111111111111111");
	strcpy(v[0].parent_id, "00f067aa0ba902b7");
	v[0].kind = GW_SPAN_SERVER;
	v[0].service = "dex";
	v[0].op = "export_get";
	v[0].method = "GET";
	v[0].start_ns = INT64_C(1700000000123456789);
	v[0].end_ns = INT64_C(1700000000223456789);
	v[0].status = 503;
	v[0].error = 1;
	strcpy(v[0].path, "/public/export");
	strcpy(v[0].addr, "127.0.0.1");
	strcpy(v[0].rid, "req-1");
	v[0].served = "relayed";
	v[0].origin = "primary";
	strcpy(v[1].trace_id, v[0].trace_id);
	strcpy(v[1].span_id, "2222222222222222");
	strcpy(v[1].parent_id, v[0].span_id);
	v[1].kind = GW_SPAN_CLIENT;
	v[1].op = "GET";
	v[1].method = "GET";
	v[1].status = 200;
	strcpy(v[1].addr, "vendor.example:443");
	v[1].retry = "503";
}

static void
test_resource_and_scope(void **state)
{
	struct gw_span v[2];
	yajl_val root, rs, a;

	(void)state;
	fill(v);
	root = encode(v, 2, "tg \"quoted\"");
	rs = YAJL_GET_ARRAY(tg_json_get(root, "resourceSpans"))->values[0];
	a = tg_json_ptr(rs, "/resource/attributes");
	assert_string_equal(attr(a, "service.name"), "tg \"quoted\"");
	assert_string_equal(tg_json_get_str(tg_json_ptr(rs, "/scopeSpans/0/scope"), "name"),
	    "tidegate");
	assert_int_equal(YAJL_GET_ARRAY(tg_json_ptr(rs, "/scopeSpans/0/spans"))->len, 2);
	yajl_tree_free(root);
}

static void
test_server_span(void **state)
{
	struct gw_span v[2];
	yajl_val root, s, a;

	(void)state;
	fill(v);
	root = encode(v, 2, "tidegate");
	s = tg_json_ptr(root, "/resourceSpans/0/scopeSpans/0/spans/0");
	assert_string_equal(tg_json_get_str(s, "traceId"), "4bf92f3577b34da6a3ce929d0e0e4736");
	assert_string_equal(tg_json_get_str(s, "spanId"), "1111111111111111");
	assert_string_equal(tg_json_get_str(s, "parentSpanId"), "00f067aa0ba902b7");
	assert_string_equal(tg_json_get_str(s, "name"), "dex export_get");
	assert_int_equal(YAJL_GET_INTEGER(tg_json_get(s, "kind")), 2);
	assert_string_equal(tg_json_get_str(s, "startTimeUnixNano"), "1700000000123456789");
	assert_string_equal(tg_json_get_str(s, "endTimeUnixNano"), "1700000000223456789");
	assert_int_equal(YAJL_GET_INTEGER(tg_json_ptr(s, "/status/code")), 2);
	a = tg_json_get(s, "attributes");
	assert_string_equal(attr(a, "http.request.method"), "GET");
	assert_string_equal(attr(a, "url.path"), "/public/export");
	assert_string_equal(attr(a, "http.response.status_code"), "503");
	assert_non_null(tg_json_ptr(a, "/0/value/stringValue"));
	assert_string_equal(attr(a, "client.address"), "127.0.0.1");
	assert_string_equal(attr(a, "tidegate.request_id"), "req-1");
	assert_string_equal(attr(a, "tidegate.served"), "relayed");
	assert_string_equal(attr(a, "tidegate.origin"), "primary");
	assert_null(attr(a, "tidegate.key"));		/* "": left out */
	assert_null(attr(a, "server.address"));
	yajl_tree_free(root);
}

static void
test_client_span(void **state)
{
	struct gw_span v[2];
	yajl_val root, s, a;

	(void)state;
	fill(v);
	root = encode(v, 2, "tidegate");
	s = tg_json_ptr(root, "/resourceSpans/0/scopeSpans/0/spans/1");
	assert_string_equal(tg_json_get_str(s, "parentSpanId"), "1111111111111111");
	assert_string_equal(tg_json_get_str(s, "name"), "GET");
	assert_int_equal(YAJL_GET_INTEGER(tg_json_get(s, "kind")), 3);
	assert_null(tg_json_ptr(s, "/status/code"));	/* unset */
	a = tg_json_get(s, "attributes");
	assert_string_equal(attr(a, "server.address"), "vendor.example:443");
	assert_string_equal(attr(a, "tidegate.retry"), "503");
	assert_string_equal(attr(a, "http.response.status_code"), "200");
	assert_null(attr(a, "url.path"));
	yajl_tree_free(root);
}

static void
test_root_span_and_none(void **state)
{
	struct gw_span v[2];
	yajl_val root, s;

	(void)state;
	fill(v);
	v[0].parent_id[0] = '\0';
	v[0].status = 0;
	root = encode(v, 1, "tidegate");
	s = tg_json_ptr(root, "/resourceSpans/0/scopeSpans/0/spans/0");
	assert_null(tg_json_get(s, "parentSpanId"));	/* a root: no parent */
	assert_null(attr(tg_json_get(s, "attributes"), "http.response.status_code"));
	yajl_tree_free(root);
	root = encode(v, 0, "tidegate");
	assert_int_equal(YAJL_GET_ARRAY(tg_json_ptr(root,
	    "/resourceSpans/0/scopeSpans/0/spans"))->len, 0);
	yajl_tree_free(root);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_resource_and_scope),
		cmocka_unit_test(test_server_span),
		cmocka_unit_test(test_client_span),
		cmocka_unit_test(test_root_span_and_none),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
