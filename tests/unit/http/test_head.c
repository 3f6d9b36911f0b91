/*
 * test_head.c - the strict request head parser (head.h): what it accepts,
 * what each smuggling or malformed head is refused with, and the fields it
 * hands on.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tidegate/head.h"

static int
parse(const char *s, struct tg_head *h)
{
	return tg_head_parse(s, strlen(s), h);
}

static void
test_accepts(void **state)
{
	struct tg_head h;
	const struct tg_head_field *f;

	assert_int_equal(parse("POST /a?b=1 HTTP/1.1\r\nHost: x\r\nContent-Length: 12\r\n"
	    "Authorization:  Bearer k \r\n\r\n", &h), TG_HEAD_OK);
	assert_int_equal(h.mlen, 4);
	assert_memory_equal(h.method, "POST", 4);
	assert_int_equal(h.tlen, 6);
	assert_int_equal(h.minor, 1);
	assert_int_equal(h.length, 12);
	assert_int_equal(h.chunked, 0);
	f = tg_head_get(&h, "authorization");
	assert_non_null(f);
	assert_int_equal(f->vlen, 8);	/* surrounding whitespace trimmed */
	assert_memory_equal(f->value, "Bearer k", 8);
	assert_int_equal(parse("GET / HTTP/1.0\r\n\r\n", &h), TG_HEAD_OK);	/* no Host in 1.0 */
	assert_int_equal(h.length, -1);
	assert_int_equal(parse("PUT /x HTTP/1.1\r\nhost: x\r\ntransfer-encoding: Chunked\r\n"
	    "X-Empty:\r\n\r\n", &h), TG_HEAD_OK);
	assert_int_equal(h.chunked, 1);
	assert_int_equal(parse("GET / HTTP/1.1\r\nHost: x\r\nX-Utf8: caf\xc3\xa9\r\n\r\n", &h),
	    TG_HEAD_OK);	/* obs-text in values is allowed */
}

static void
test_refuses(void **state)
{
	static const struct { const char *head; int fault; } cases[] = {
		{ "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 22\r\nContent-Length: 5\r\n\r\n",
		  TG_HEAD_DUP_LENGTH },
		{ "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n",
		  TG_HEAD_DUP_LENGTH },
		{ "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: +5\r\n\r\n", TG_HEAD_BAD_LENGTH },
		{ "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n\r\n", TG_HEAD_BAD_LENGTH },
		{ "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 1234567890123456789\r\n\r\n",
		  TG_HEAD_BAD_LENGTH },
		{ "GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding : chunked\r\n\r\n",
		  TG_HEAD_BAD_NAME },
		{ "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n"
		  "\r\n", TG_HEAD_LENGTH_AND_TE },
		{ "GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
		  TG_HEAD_BAD_TE },
		{ "GET / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
		  "Transfer-Encoding: chunked\r\n\r\n", TG_HEAD_BAD_TE },
		{ "GET / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", TG_HEAD_BAD_TE },
		{ "GET / HTTP/1.1\r\nHost: x\r\nX-A: 1\r\n folded\r\n\r\n", TG_HEAD_OBS_FOLD },
		{ "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x01z\r\n\r\n", TG_HEAD_BAD_VALUE },
		{ "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\x7fz\r\n\r\n", TG_HEAD_BAD_VALUE },
		{ "GET / HTTP/1.1\r\nHost: x\r\nX-A: a\rz\r\n\r\n", TG_HEAD_BAD_EOL },
		{ "GET /a\rX-Injected:1 HTTP/1.1\r\nHost: x\r\n\r\n", TG_HEAD_BAD_EOL },
		{ "GET / HTTP/1.1\nHost: x\r\n\r\n", TG_HEAD_BAD_EOL },
		{ "GET /a b HTTP/1.1\r\nHost: x\r\n\r\n", TG_HEAD_BAD_LINE },
		{ "GET  / HTTP/1.1\r\nHost: x\r\n\r\n", TG_HEAD_BAD_LINE },
		{ "GET /\x01 HTTP/1.1\r\nHost: x\r\n\r\n", TG_HEAD_BAD_LINE },
		{ "GET /\xc3\xa9 HTTP/1.1\r\nHost: x\r\n\r\n", TG_HEAD_BAD_LINE },
		{ "G(T / HTTP/1.1\r\nHost: x\r\n\r\n", TG_HEAD_BAD_LINE },
		{ "BREW / HTTP/1.1\r\nHost: x\r\n\r\n", TG_HEAD_BAD_METHOD },
		{ "GET / HTTP/2.0\r\nHost: x\r\n\r\n", TG_HEAD_BAD_VERSION },
		{ "GET / HTTP/1.1 \r\nHost: x\r\n\r\n", TG_HEAD_BAD_LINE },
		{ "GET / HTTP/1.11\r\nHost: x\r\n\r\n", TG_HEAD_BAD_LINE },
		{ "GET / HTTP/1.1\rHost: x\r\n\r\n", TG_HEAD_BAD_EOL },
		{ "GET / http/1.1\r\nHost: x\r\n\r\n", TG_HEAD_BAD_LINE },
		{ "GET / HTTP/1.1\r\nHost: x\r\nX-Ab\x01d: 1\r\n\r\n", TG_HEAD_BAD_NAME },
		{ "GET / HTTP/1.1\r\nHost: x\r\nX-Abcdefg(: 1\r\n\r\n", TG_HEAD_BAD_NAME },
		{ "GET / HTTP/1.1\r\n\r\n", TG_HEAD_NO_HOST },
		{ "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", TG_HEAD_NO_HOST },
		{ "GET / HTTP/1.1\r\nHost: x\r\n: novalue\r\n\r\n", TG_HEAD_BAD_NAME },
		{ "GET / HTTP/1.1\r\nHost: x\r\nNoColon\r\n\r\n", TG_HEAD_BAD_NAME },
		{ "GET / HTTP/1.1\r\nHost: x\r\nTidegate-Refusal: 1\r\n\r\n", TG_HEAD_RESERVED },
	};
	struct tg_head h;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int got = parse(cases[i].head, &h);

		if (got != cases[i].fault)
			fail_msg("case %zu: got %d, want %d", i, got, cases[i].fault);
		assert_true(tg_head_fault_status(got) >= 400);
		assert_non_null(tg_head_fault_message(got));
	}
}

/* A head cut anywhere in its request line or a field name asks for more
 * bytes, never a fault (the version is read whole or byte by byte). */
static void
test_incomplete_line(void **state)
{
	static const char full[] = "GET /a HTTP/1.1\r\nHost: x\r\nAccept-Encoding: identity\r\n\r\n";
	struct tg_head h;
	size_t n, hlen = 0;
	char *buf;

	for (n = 1; n < sizeof(full) - 1; n++) {
		buf = malloc(n);	/* its own allocation: ASan sees a read past n */
		memcpy(buf, full, n);
		if (tg_head_scan(buf, n, &h, &hlen) != TG_HEAD_INCOMPLETE)
			fail_msg("cut at %zu", n);
		free(buf);
	}
	assert_int_equal(tg_head_scan(full, sizeof(full) - 1, &h, &hlen), TG_HEAD_OK);
	assert_int_equal(hlen, sizeof(full) - 1);
	assert_int_equal(h.minor, 1);
}

/* A byte at every place of a value or a target up to three words long:
 * the word-at-a-time scans stop at the first byte that ends or breaks
 * them, wherever it falls in its word (a tab and obs-text go on). */
static void
test_every_place(void **state)
{
	static const struct { unsigned char b; int value_ok, target_ok; } bytes[] = {
		{ 0x01, 0, 0 }, { 0x1f, 0, 0 }, { 0x7f, 0, 0 }, { '\t', 1, 0 }, { ' ', 1, 0 },
		{ 0x80, 1, 0 }, { 0xff, 1, 0 }, { '~', 1, 1 }, { 0x21, 1, 1 },
	};
	char head[160];
	struct tg_head h;
	size_t len, at, i, n;
	int rc;

	for (i = 0; i < sizeof(bytes) / sizeof(bytes[0]); i++) {
		for (len = 1; len <= 24; len++) {
			for (at = 0; at < len; at++) {
				char v[25];

				memset(v, 'v', len);
				v[at] = (char)bytes[i].b;
				v[len] = '\0';
				n = (size_t)snprintf(head, sizeof(head), "GET / HTTP/1.1\r\nHost: x\r\n"
				    "A: z%sz\r\n\r\n", v);
				rc = tg_head_parse(head, n, &h);
				if ((rc == TG_HEAD_OK) != bytes[i].value_ok ||
				    (rc == TG_HEAD_OK && h.f[1].vlen != len + 2))
					fail_msg("value 0x%02x at %zu of %zu: %d", bytes[i].b, at, len, rc);
				n = (size_t)snprintf(head, sizeof(head), "GET /%s HTTP/1.1\r\nHost: x"
				    "\r\n\r\n", v);
				rc = tg_head_parse(head, n, &h);
				if ((rc == TG_HEAD_OK) != bytes[i].target_ok ||
				    (rc == TG_HEAD_OK && h.tlen != len + 1))
					fail_msg("target 0x%02x at %zu of %zu: %d", bytes[i].b, at, len, rc);
			}
		}
	}
}

/* The one table of methods and bodies: evhttp reads no body after HEAD,
 * so a HEAD may not announce one; the others may. */
static void
test_method_bodies(void **state)
{
	struct tg_head h;

	assert_int_equal(parse("HEAD / HTTP/1.1\r\nHost: x\r\nContent-Length: 39\r\n\r\n", &h),
	    TG_HEAD_BODY_NOT_ALLOWED);
	assert_int_equal(parse("HEAD / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
	    "\r\n", &h), TG_HEAD_BODY_NOT_ALLOWED);
	assert_int_equal(parse("HEAD / HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", &h),
	    TG_HEAD_OK);
	assert_int_equal(h.no_body, 1);
	assert_int_equal(tg_head_fault_status(TG_HEAD_BODY_NOT_ALLOWED), 400);
	assert_int_equal(parse("GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n", &h),
	    TG_HEAD_OK);
	assert_int_equal(h.no_body, 0);
	assert_int_equal(parse("DELETE / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n", &h),
	    TG_HEAD_OK);
	assert_int_equal(parse("OPTIONS / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
	    "\r\n", &h), TG_HEAD_OK);
	assert_int_equal(parse("TRACE / HTTP/1.1\r\nHost: x\r\n\r\n", &h), TG_HEAD_BAD_METHOD);
	assert_int_equal(parse("CONNECT a:1 HTTP/1.1\r\nHost: x\r\n\r\n", &h),
	    TG_HEAD_BAD_METHOD);
}

/* Host is an RFC 3986 host[:port]; Expect is 100-continue or nothing. */
static void
test_host_and_expect(void **state)
{
	static const char *const good[] = {
		"x", "example.com", "a-b.c_d~e", "127.0.0.1:8080", "[::1]", "[::1]:443",
		"[v1.fe80::a+b]", "%41b", "sub!$&'()*+,;=", "", "x:",
	};
	static const char *const bad[] = {
		"a b", "a/b", "a@b", "a?b", "a#b", "\"x\"", "a:b", "a:123456", "[::1", "[zz]",
		"[::1]x", "%4", "%zz", "a\\b", "<x>", "caf\xc3\xa9", "[v.x]", "[v1.]",
	};
	char buf[256];
	struct tg_head h;
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", good[i]);
		if (parse(buf, &h) != TG_HEAD_OK)
			fail_msg("Host %s refused", good[i]);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(buf, sizeof(buf), "GET / HTTP/1.1\r\nHost: %s\r\n\r\n", bad[i]);
		if (parse(buf, &h) != TG_HEAD_BAD_HOST)
			fail_msg("Host %s accepted", bad[i]);
	}
	assert_int_equal(parse("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-Continue\r\n\r\n", &h),
	    TG_HEAD_OK);
	assert_int_equal(parse("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-continue, x\r\n\r\n",
	    &h), TG_HEAD_BAD_EXPECT);
	assert_int_equal(parse("GET / HTTP/1.1\r\nHost: x\r\nExpect: x\r\n\r\n", &h),
	    TG_HEAD_BAD_EXPECT);
	assert_int_equal(tg_head_fault_status(TG_HEAD_BAD_EXPECT), 417);
	assert_int_equal(parse("GET / HTTP/1.0\r\nExpect: x\r\n\r\n", &h), TG_HEAD_OK);
}

/* A tab in the whitespace before a value is marked (evhttp would keep it
 * in the value); spaces alone, or a tab after the value, are not. */
static void
test_tab_before_value(void **state)
{
	struct tg_head h;

	assert_int_equal(parse("GET / HTTP/1.1\r\nHost: x\r\nA: b \t\r\n\r\n", &h), TG_HEAD_OK);
	assert_int_equal(h.tab, 0);
	assert_int_equal(parse("GET / HTTP/1.1\r\nHost: x\r\nA: \tb\r\n\r\n", &h), TG_HEAD_OK);
	assert_int_equal(h.tab, 1);
	assert_memory_equal(h.f[1].value, "b", h.f[1].vlen);
	assert_int_equal(parse("GET / HTTP/1.1\r\nHost:\tx\r\n\r\n", &h), TG_HEAD_OK);
	assert_int_equal(h.tab, 1);
}

static int
chunk(const char *line, uint64_t *size)
{
	return tg_head_chunk_size(line, strlen(line), size);
}

/* Chunk-size lines: sizes in any case with any leading zeros, extensions
 * checked and ignored (RFC 9112 section 7.1.1); what evhttp's strtoll would
 * read otherwise ("0x5", " 5", "+5", "-1") is refused. */
static void
test_chunk_size_lines(void **state)
{
	static const char *const bad[] = {
		"\r\n", "0x5\r\n", " 5\r\n", "+5\r\n", "-1\r\n", "5 \r\nx", "5\n", "5\r\r\n",
		"5;\r\n", "5;=b\r\n", "5;a=\r\n", "5;a=b c\r\n", "5;a=\"b\r\n", "5;a=\"\x01\"\r\n",
		"5;a=\"b\\\"\r\n", "5,a\r\n", "5;a b\r\n", "10000000000000000\r\n",
		"g\r\n", "5\x00\r\n",
	};
	uint64_t n = 0;
	size_t i;

	assert_int_equal(chunk("16;a=b\r\n", &n), 0);
	assert_int_equal(n, 0x16);
	assert_int_equal(chunk("00000000000000000000aBc\r\n", &n), 0);
	assert_int_equal(n, 0xabc);
	assert_int_equal(chunk("0\r\n", &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(chunk("fffffffffffffff\r\n", &n), 0);	/* 15 digits */
	assert_int_equal(n, 0xfffffffffffffffULL);
	assert_int_equal(chunk("5 ; a = \"q \\\" ;\" ;b;c=d\t\r\n", &n), 0);
	assert_int_equal(n, 5);
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (chunk(bad[i], &n) == 0)
			fail_msg("case %zu accepted", i);
}

static void
test_trailer_lines(void **state)
{
	assert_true(tg_head_field_line_ok("X-Sum: 12\r\n", 11));
	assert_true(tg_head_field_line_ok("X-Empty:\r\n", 10));
	assert_false(tg_head_field_line_ok(" folded\r\n", 9));
	assert_false(tg_head_field_line_ok("X-A : b\r\n", 9));
	assert_false(tg_head_field_line_ok("NoColon\r\n", 9));
	assert_false(tg_head_field_line_ok("X-A: \x01\r\n", 8));
	assert_false(tg_head_field_line_ok("X-A: b\r\nY: c\r\n", 15));	/* one line only */
}

/* A request target is visible ASCII wherever the bad byte falls (the
 * target is read eight bytes at a time: every offset of a word). */
static void
test_target_bytes_at_every_offset(void **state)
{
	static const unsigned char bad[] = { 0x00, 0x01, 0x09, 0x1f, 0x20, 0x7f, 0x80, 0xff };
	static const char tail[] = " HTTP/1.1\r\nHost: x\r\n\r\n";
	char buf[128];
	struct tg_head h;
	size_t i, at, n = 4 + 33 + sizeof(tail) - 1;

	memcpy(buf, "GET /", 5);
	memset(buf + 5, 'a', 32);
	memcpy(buf + 37, tail, sizeof(tail) - 1);
	assert_int_equal(tg_head_parse(buf, n, &h), TG_HEAD_OK);
	assert_int_equal(h.tlen, 33);
	for (at = 5; at < 37; at++) {
		for (i = 0; i < sizeof(bad); i++) {
			buf[at] = (char)bad[i];
			if (tg_head_parse(buf, n, &h) == TG_HEAD_OK)
				fail_msg("byte 0x%02x at %zu accepted", bad[i], at);
		}
		buf[at] = '~';
		assert_int_equal(tg_head_parse(buf, n, &h), TG_HEAD_OK);
	}
}

static void
test_too_many_fields(void **state)
{
	static char buf[TG_HEAD_MAX_FIELDS * 8 + 64];
	struct tg_head h;
	size_t n = 0, i;

	n += (size_t)sprintf(buf, "GET / HTTP/1.1\r\n");
	for (i = 0; i <= TG_HEAD_MAX_FIELDS; i++)
		n += (size_t)sprintf(buf + n, "A: b\r\n");
	n += (size_t)sprintf(buf + n, "\r\n");
	assert_int_equal(tg_head_parse(buf, n, &h), TG_HEAD_TOO_LARGE);
	assert_int_equal(tg_head_fault_status(TG_HEAD_TOO_LARGE), 431);
}

static void
test_statuses(void **state)
{
	assert_int_equal(tg_head_fault_status(TG_HEAD_KEY_MISSING), 401);
	assert_int_equal(tg_head_fault_status(TG_HEAD_BODY_TOO_LARGE), 413);
	assert_int_equal(tg_head_fault_status(TG_HEAD_BAD_METHOD), 501);
	assert_int_equal(tg_head_fault_status(TG_HEAD_BAD_VERSION), 505);
	assert_int_equal(tg_head_fault_status(TG_HEAD_TIMEOUT), 408);
	assert_int_equal(tg_head_fault_status(-1), 400);
	assert_int_equal(tg_head_fault_status(TG_HEAD_NFAULTS), 400);
	assert_string_equal(tg_head_fault_code(TG_HEAD_DUP_LENGTH), "BAD_REQUEST");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_accepts),
		cmocka_unit_test(test_refuses),
		cmocka_unit_test(test_method_bodies),
		cmocka_unit_test(test_incomplete_line),
		cmocka_unit_test(test_every_place),
		cmocka_unit_test(test_host_and_expect),
		cmocka_unit_test(test_tab_before_value),
		cmocka_unit_test(test_target_bytes_at_every_offset),
		cmocka_unit_test(test_chunk_size_lines),
		cmocka_unit_test(test_trailer_lines),
		cmocka_unit_test(test_too_many_fields),
		cmocka_unit_test(test_statuses),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
