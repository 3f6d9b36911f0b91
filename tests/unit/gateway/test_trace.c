/*
 * test_trace.c - W3C Trace Context in the gateway (src/gateway/trace.c):
 * which traceparent values are continued and which refused, the child
 * traceparent of each vendor call (same trace, a new span every time),
 * and the headers put on a call with and without a caller.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <cmocka.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/gateway.h"

static void
test_parse(void **state)
{
	static const char *const bad[] = {
		NULL, "", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
		"00-00000000000000000000000000000000-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
		"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
		"01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-",
		"00_4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e473x-00f067aa0ba902b7-01",
		"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-0g",
	};
	char id[33];
	size_t i;

	(void)state;
	assert_int_equal(tg_id_trace_of("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
	    id), 1);
	assert_string_equal(id, "4bf92f3577b34da6a3ce929d0e0e4736");
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(tg_id_trace_of(bad[i], id), 0);
}

static void
test_parent_new_span(void **state)
{
	char id[33], a[56], b[56], sa[17], sb[17], back[33];

	(void)state;
	gw_trace_new_id(id);
	assert_int_equal(strlen(id), 32);
	gw_trace_parent(id, 1, a, sa);
	gw_trace_parent(id, 0, b, sb);
	assert_int_equal(tg_id_trace_of(a, back), 1);
	assert_string_equal(back, id);
	assert_string_not_equal(sa, sb);
	assert_memory_equal(a + 36, sa, 16);
	assert_string_equal(a + 52, "-01");
	assert_string_equal(b + 52, "-00");	/* not sampled: the flag says so */
}

static void
test_headers(void **state)
{
	struct evkeyvalq h;
	struct gw_trace t;
	char back[33];

	(void)state;
	memset(&t, 0, sizeof(t));
	snprintf(t.rid, sizeof(t.rid), "req-1");
	snprintf(t.trace_id, sizeof(t.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
	snprintf(t.state, sizeof(t.state), "a=1");
	snprintf(t.forwarded, sizeof(t.forwarded), "10.0.0.1, 127.0.0.1");
	TAILQ_INIT(&h);
	evhttp_add_header(&h, "X-Request-Id", "spoofed");
	gw_trace_headers(&t, &h);
	assert_string_equal(evhttp_find_header(&h, "X-Request-Id"), "req-1");
	assert_int_equal(tg_id_trace_of(evhttp_find_header(&h, "traceparent"), back), 1);
	assert_string_equal(back, t.trace_id);
	assert_string_equal(evhttp_find_header(&h, "tracestate"), "a=1");
	assert_string_equal(evhttp_find_header(&h, "X-Forwarded-For"), "10.0.0.1, 127.0.0.1");
	assert_memory_equal(evhttp_find_header(&h, "User-Agent"), "tidegate/", 9);
	assert_string_equal(evhttp_find_header(&h, "traceparent") + 52, "-01");
	evhttp_clear_headers(&h);
	t.unsampled = 1;			/* the caller's trace is not sampled */
	gw_trace_headers(&t, &h);
	assert_string_equal(evhttp_find_header(&h, "traceparent") + 52, "-00");
	evhttp_clear_headers(&h);
	gw_trace_headers(NULL, &h);		/* the gateway's own call */
	assert_int_equal(tg_id_trace_of(evhttp_find_header(&h, "traceparent"), back), 1);
	assert_string_equal(evhttp_find_header(&h, "traceparent") + 52, "-01");
	assert_null(evhttp_find_header(&h, "X-Request-Id"));
	assert_null(evhttp_find_header(&h, "X-Forwarded-For"));
	evhttp_clear_headers(&h);
}

/* The client's copies of the names the call sets, in any case and given
 * twice, are all replaced; its User-Agent and other headers are kept. */
static size_t
count(const struct evkeyvalq *h, const char *name)
{
	const struct evkeyval *kv;
	size_t n = 0;

	TAILQ_FOREACH(kv, h, next)
		n += strcasecmp(kv->key, name) == 0;
	return n;
}

static void
test_headers_replace_the_clients(void **state)
{
	static const char *const names[] = { "traceparent", "tracestate", "X-Request-Id",
		"X-Forwarded-For", "User-Agent" };
	struct evkeyvalq h;
	struct gw_trace t;
	char back[33];
	size_t i;

	(void)state;
	memset(&t, 0, sizeof(t));
	snprintf(t.rid, sizeof(t.rid), "req-2");
	snprintf(t.trace_id, sizeof(t.trace_id), "4bf92f3577b34da6a3ce929d0e0e4736");
	snprintf(t.forwarded, sizeof(t.forwarded), "127.0.0.1");
	TAILQ_INIT(&h);
	evhttp_add_header(&h, "Accept", "application/json");
	evhttp_add_header(&h, "TRACEPARENT", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01");
	evhttp_add_header(&h, "traceparent", "bogus");
	evhttp_add_header(&h, "Tracestate", "old=1");
	evhttp_add_header(&h, "x-request-id", "spoofed");
	evhttp_add_header(&h, "X-Forwarded-For", "1.2.3.4");
	evhttp_add_header(&h, "User-Agent", "legacy-tool/1.0");
	evhttp_add_header(&h, "Trailer", "x");
	gw_trace_headers(&t, &h);
	for (i = 0; i < 4; i++)
		assert_int_equal(count(&h, names[i]), i == 1 ? 0 : 1);	/* no tracestate: t has none */
	assert_int_equal(tg_id_trace_of(evhttp_find_header(&h, "traceparent"), back), 1);
	assert_string_equal(back, t.trace_id);
	assert_string_equal(evhttp_find_header(&h, "X-Request-Id"), "req-2");
	assert_string_equal(evhttp_find_header(&h, "X-Forwarded-For"), "127.0.0.1");
	assert_string_equal(evhttp_find_header(&h, "User-Agent"), "legacy-tool/1.0");
	assert_int_equal(count(&h, "User-Agent"), 1);
	assert_string_equal(evhttp_find_header(&h, "Accept"), "application/json");
	assert_string_equal(evhttp_find_header(&h, "Trailer"), "x");
	evhttp_clear_headers(&h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse),
		cmocka_unit_test(test_parent_new_span),
		cmocka_unit_test(test_headers),
		cmocka_unit_test(test_headers_replace_the_clients),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
