/*
 * test_proxy_proto.c - tg_http_proxy_parse: version 1 lines (TCP4, TCP6,
 * UNKNOWN) and version 2 headers (PROXY and LOCAL, IPv4 and IPv6, TLVs
 * skipped), every truncation of each at every byte boundary (more bytes
 * needed, never a verdict), the size limits, and garbage refused at its
 * first telling byte.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tidegate/proxy_proto.h"

static const unsigned char sig[12] = {
	0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A
};

/* A v2 header: cmd (0x20 LOCAL, 0x21 PROXY), fam, body of n bytes. */
static size_t
v2(unsigned char *out, unsigned cmd, unsigned fam, const unsigned char *body, size_t n)
{
	memcpy(out, sig, 12);
	out[12] = (unsigned char)cmd;
	out[13] = (unsigned char)fam;
	out[14] = (unsigned char)(n >> 8);
	out[15] = (unsigned char)(n & 0xFF);
	memcpy(out + 16, body, n);
	return 16 + n;
}

/* buf whole parses to its full length (with trailing bytes too), and
 * every shorter prefix asks for more. */
static void
whole_and_prefixes(const unsigned char *buf, size_t n, struct tg_proxy_hdr *h)
{
	unsigned char *copy = malloc(n + 5);
	size_t k;

	for (k = 0; k < n; k++) {
		memcpy(copy, buf, k);	/* exact: ASan sees an overread */
		assert_int_equal(tg_http_proxy_parse(copy, k, h), 0);
	}
	memcpy(copy, buf, n);
	memcpy(copy + n, "GET /", 5);
	assert_int_equal(tg_http_proxy_parse(copy, n + 5, h), (int)n);
	assert_int_equal(tg_http_proxy_parse(copy, n, h), (int)n);
	free(copy);
}

static void
v1_tcp4(void **state)
{
	const char *s = "PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\r\n";
	struct tg_proxy_hdr h;

	whole_and_prefixes((const unsigned char *)s, strlen(s), &h);
	assert_int_equal(h.version, 1);
	assert_int_equal(h.local, 0);
	assert_string_equal(h.src, "192.0.2.7");
}

static void
v1_tcp6(void **state)
{
	const char *s = "PROXY TCP6 2001:DB8:0:0::7 2001:db8::1 65535 0\r\n";
	struct tg_proxy_hdr h;

	whole_and_prefixes((const unsigned char *)s, strlen(s), &h);
	assert_int_equal(h.local, 0);
	assert_string_equal(h.src, "2001:db8::7");	/* one spelling per address */
}

static void
v1_unknown(void **state)
{
	const char *a = "PROXY UNKNOWN\r\n";
	const char *b = "PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535\r\n";
	struct tg_proxy_hdr h;

	whole_and_prefixes((const unsigned char *)a, strlen(a), &h);
	assert_int_equal(h.local, 1);
	assert_string_equal(h.src, "");
	whole_and_prefixes((const unsigned char *)b, strlen(b), &h);
	assert_int_equal(h.local, 1);
}

static void
v1_refused(void **state)
{
	static const char *const bad[] = {
		"PROXY TCP4 192.0.2.7 198.51.100.1 56324 443\n",	/* bare LF */
		"PROXY TCP4 192.0.2.7  198.51.100.1 56324 443\r\n",	/* two spaces */
		"PROXY TCP4 192.0.2.7 198.51.100.1 56324 443 \r\n",	/* trailing space */
		"PROXY TCP4 192.0.2.7 198.51.100.1 56324\r\n",		/* a port short */
		"PROXY TCP4 192.0.2.7 198.51.100.1 56324 443 1\r\n",	/* a field more */
		"PROXY TCP4 192.0.2.7 198.51.100.1 65536 443\r\n",	/* port range */
		"PROXY TCP4 192.0.2.7 198.51.100.1 -1 443\r\n",
		"PROXY TCP4 2001:db8::7 198.51.100.1 1 443\r\n",	/* family */
		"PROXY TCP6 192.0.2.7 2001:db8::1 1 443\r\n",
		"PROXY TCP4 192.0.2.256 198.51.100.1 1 443\r\n",
		"PROXY TCP4 192.0.2.7\r198.51.100.1 1 443\r\n",
		"PROXY UDP4 192.0.2.7 198.51.100.1 1 443\r\n",
		"PROXY UNKNOWNX\r\n",
		"PROXY\r\n",
		"PROXY \r\n",
		"PROXYTCP4 192.0.2.7 198.51.100.1 1 443\r\n",
		"proxy TCP4 192.0.2.7 198.51.100.1 1 443\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\n\r\n",
	};
	struct tg_proxy_hdr h;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (tg_http_proxy_parse((const unsigned char *)bad[i], strlen(bad[i]), &h) != -1)
			fail_msg("accepted: %s", bad[i]);
	}
}

static void
v1_oversize(void **state)
{
	unsigned char buf[200];
	struct tg_proxy_hdr h;

	memset(buf, 'x', sizeof(buf));
	memcpy(buf, "PROXY UNKNOWN ", 14);
	assert_int_equal(tg_http_proxy_parse(buf, TG_PROXY_V1_MAX - 1, &h), 0);
	assert_int_equal(tg_http_proxy_parse(buf, TG_PROXY_V1_MAX, &h), -1);
	memcpy(buf + TG_PROXY_V1_MAX - 2, "\r\n", 2);	/* 107 bytes in all: the limit */
	assert_int_equal(tg_http_proxy_parse(buf, TG_PROXY_V1_MAX, &h), TG_PROXY_V1_MAX);
	memcpy(buf + TG_PROXY_V1_MAX - 2, "xx\r\n", 4);	/* 109 */
	assert_int_equal(tg_http_proxy_parse(buf, TG_PROXY_V1_MAX + 2, &h), -1);
}

static void
v2_tcp4_tlvs(void **state)
{
	unsigned char body[12 + 3 + 5 + 3] = {
		192, 0, 2, 9, 198, 51, 100, 1, 0xDB, 0x04, 0x01, 0xBB,
		0x01, 0x00, 0x02, 'h', '2',			/* ALPN */
		0x05, 0x00, 0x03, 'a', 'b', 'c',		/* UNIQUE_ID */
	};
	unsigned char buf[64];
	struct tg_proxy_hdr h;
	size_t n = v2(buf, 0x21, 0x11, body, 12 + 5 + 6);

	whole_and_prefixes(buf, n, &h);
	assert_int_equal(h.version, 2);
	assert_int_equal(h.local, 0);
	assert_string_equal(h.src, "192.0.2.9");
}

static void
v2_tcp6(void **state)
{
	unsigned char body[36] = { 0x20, 0x01, 0x0d, 0xb8, [15] = 0x42, [16] = 0x20, [17] = 0x01 };
	unsigned char buf[64];
	struct tg_proxy_hdr h;
	size_t n = v2(buf, 0x21, 0x21, body, sizeof(body));

	whole_and_prefixes(buf, n, &h);
	assert_int_equal(h.local, 0);
	assert_string_equal(h.src, "2001:db8::42");
}

static void
v2_local_and_unspec(void **state)
{
	unsigned char body[12] = { 192, 0, 2, 9, 198, 51, 100, 1, 0, 1, 0, 2 };
	unsigned char buf[64];
	struct tg_proxy_hdr h;
	size_t n;

	n = v2(buf, 0x20, 0x11, body, sizeof(body));	/* LOCAL: a health check */
	whole_and_prefixes(buf, n, &h);
	assert_int_equal(h.local, 1);
	assert_string_equal(h.src, "");
	n = v2(buf, 0x20, 0x00, body, 0);
	whole_and_prefixes(buf, n, &h);
	assert_int_equal(h.local, 1);
	n = v2(buf, 0x21, 0x00, body, 0);		/* PROXY, UNSPEC */
	whole_and_prefixes(buf, n, &h);
	assert_int_equal(h.local, 1);
}

static void
v2_refused(void **state)
{
	unsigned char body[36] = { 0 };
	unsigned char buf[64];
	struct tg_proxy_hdr h;

	v2(buf, 0x22, 0x11, body, 12);			/* command 2 */
	assert_int_equal(tg_http_proxy_parse(buf, 13, &h), -1);
	v2(buf, 0x11, 0x11, body, 12);			/* version 1 in a v2 header */
	assert_int_equal(tg_http_proxy_parse(buf, 13, &h), -1);
	v2(buf, 0x21, 0x13, body, 12);			/* no such protocol */
	assert_int_equal(tg_http_proxy_parse(buf, 14, &h), -1);
	v2(buf, 0x21, 0x41, body, 12);			/* no such family */
	assert_int_equal(tg_http_proxy_parse(buf, 14, &h), -1);
	v2(buf, 0x21, 0x12, body, 12);			/* UDP on a stream listener */
	assert_int_equal(tg_http_proxy_parse(buf, 28, &h), -1);
	v2(buf, 0x21, 0x11, body, 11);			/* addresses cut short */
	assert_int_equal(tg_http_proxy_parse(buf, 16, &h), -1);
	v2(buf, 0x21, 0x21, body, 35);
	assert_int_equal(tg_http_proxy_parse(buf, 16, &h), -1);
	memcpy(buf, sig, 12);
	buf[5] = 0x0A;					/* signature broken */
	assert_int_equal(tg_http_proxy_parse(buf, 6, &h), -1);
}

static void
v2_oversize(void **state)
{
	unsigned char *buf = calloc(1, TG_PROXY_V2_MAX + 16);
	struct tg_proxy_hdr h;
	size_t n = TG_PROXY_V2_MAX - 16;

	buf[16] = 192;
	v2(buf, 0x21, 0x11, buf + 16, 0);
	buf[14] = (unsigned char)(n >> 8);
	buf[15] = (unsigned char)(n & 0xFF);
	assert_int_equal(tg_http_proxy_parse(buf, 16, &h), 0);
	assert_int_equal(tg_http_proxy_parse(buf, TG_PROXY_V2_MAX, &h), TG_PROXY_V2_MAX);
	n++;
	buf[14] = (unsigned char)(n >> 8);
	buf[15] = (unsigned char)(n & 0xFF);
	assert_int_equal(tg_http_proxy_parse(buf, 16, &h), -1);	/* refused on its length */
	free(buf);
}

static void
garbage(void **state)
{
	static const unsigned char bytes[] = { 0x16, 0x03, 0x01, 0x00 };	/* TLS hello */
	struct tg_proxy_hdr h;

	assert_int_equal(tg_http_proxy_parse(bytes, sizeof(bytes), &h), -1);
	assert_int_equal(tg_http_proxy_parse((const unsigned char *)"G", 1, &h), -1);
	assert_int_equal(tg_http_proxy_parse((const unsigned char *)"PROXI", 5, &h), -1);
	assert_int_equal(tg_http_proxy_parse((const unsigned char *)"\r\n\r\n\r", 5, &h), -1);
	assert_int_equal(tg_http_proxy_parse((const unsigned char *)"", 0, &h), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(v1_tcp4),
		cmocka_unit_test(v1_tcp6),
		cmocka_unit_test(v1_unknown),
		cmocka_unit_test(v1_refused),
		cmocka_unit_test(v1_oversize),
		cmocka_unit_test(v2_tcp4_tlvs),
		cmocka_unit_test(v2_tcp6),
		cmocka_unit_test(v2_local_and_unspec),
		cmocka_unit_test(v2_refused),
		cmocka_unit_test(v2_oversize),
		cmocka_unit_test(garbage),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
