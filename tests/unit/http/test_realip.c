/*
 * test_realip.c - trusted proxies (realip.h): CIDR blocks of both families
 * parsed, refused with a reason (not an address, prefix range, host bits
 * set), matched (prefix edges, IPv4-mapped IPv6), and the X-Forwarded-For
 * walk: from the right past trusted proxies, all trusted (the leftmost),
 * a malformed entry (the last good one stays), spaces and empty elements.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tidegate/realip.h"

static void
set_of(struct tg_cidrs *s, const char *const *blocks)
{
	struct tg_err err;

	for (; *blocks != NULL; blocks++)
		if (tg_http_cidrs_add(s, *blocks, &err) != 0)
			fail_msg("%s: %s", *blocks, err.msg);
}

static void
blocks_parse_and_match(void **state)
{
	static const char *const blocks[] = { "10.0.0.0/8", "192.0.2.7", "172.16.0.0/12",
		"2001:db8:a::/48", "::1", "198.51.100.128/25", NULL };
	struct tg_cidrs s = { 0 };

	set_of(&s, blocks);
	assert_int_equal(s.n, 6);
	assert_true(tg_http_cidrs_match(&s, "10.255.255.255"));
	assert_true(tg_http_cidrs_match(&s, "10.0.0.0"));
	assert_false(tg_http_cidrs_match(&s, "11.0.0.0"));
	assert_false(tg_http_cidrs_match(&s, "9.255.255.255"));
	assert_true(tg_http_cidrs_match(&s, "192.0.2.7"));
	assert_false(tg_http_cidrs_match(&s, "192.0.2.8"));
	assert_true(tg_http_cidrs_match(&s, "172.31.0.1"));
	assert_false(tg_http_cidrs_match(&s, "172.32.0.1"));
	assert_true(tg_http_cidrs_match(&s, "198.51.100.128"));
	assert_false(tg_http_cidrs_match(&s, "198.51.100.127"));
	assert_true(tg_http_cidrs_match(&s, "2001:db8:a:ffff::1"));
	assert_false(tg_http_cidrs_match(&s, "2001:db8:b::1"));
	assert_true(tg_http_cidrs_match(&s, "::1"));
	assert_false(tg_http_cidrs_match(&s, "::2"));
	assert_true(tg_http_cidrs_match(&s, "::ffff:10.1.2.3"));	/* mapped */
	assert_false(tg_http_cidrs_match(&s, "::ffff:11.1.2.3"));
	assert_false(tg_http_cidrs_match(&s, "127.0.0.1"));
	assert_false(tg_http_cidrs_match(&s, "not-an-address"));
	assert_false(tg_http_cidrs_match(&s, ""));
	tg_http_cidrs_cleanup(&s);
	assert_int_equal(s.n, 0);
	assert_false(tg_http_cidrs_match(&s, "10.0.0.1"));
	assert_false(tg_http_cidrs_match(NULL, "10.0.0.1"));
}

static void
whole_range(void **state)
{
	static const char *const blocks[] = { "0.0.0.0/0", NULL };
	struct tg_cidrs s = { 0 };

	set_of(&s, blocks);
	assert_true(tg_http_cidrs_match(&s, "203.0.113.1"));
	assert_false(tg_http_cidrs_match(&s, "2001:db8::1"));	/* families apart */
	tg_http_cidrs_cleanup(&s);
}

static void
blocks_refused(void **state)
{
	static const struct { const char *in, *why; } bad[] = {
		{ "10.0.0.0/33", "prefix length" },
		{ "::/129", "prefix length" },
		{ "10.0.0.0/", "prefix length" },
		{ "10.0.0.0/8x", "prefix length" },
		{ "10.0.0.0/-1", "prefix length" },
		{ "10.0.0.1/8", "did you mean '10.0.0.0/8'" },
		{ "2001:db8::1/32", "did you mean '2001:db8::/32'" },
		{ "10.0.0", "not an IPv4 or IPv6 address" },
		{ "localhost", "not an IPv4 or IPv6 address" },
		{ "", "expected an address" },
		{ "10.0.0.0 /8", "not an IPv4" },
	};
	struct tg_cidrs s = { 0 };
	struct tg_err err;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err.msg[0] = '\0';
		assert_int_equal(tg_http_cidrs_add(&s, bad[i].in, &err), -1);
		if (strstr(err.msg, bad[i].why) == NULL)
			fail_msg("%s: %s", bad[i].in, err.msg);
	}
	assert_int_equal(s.n, 0);
}

/* The walk of one value from the peer's address. */
static const char *
walk(const struct tg_cidrs *s, const char *peer, const char *value, int *more)
{
	static char addr[48];

	strcpy(addr, peer);
	*more = tg_http_realip_xff(s, value, strlen(value), addr, sizeof(addr));
	return addr;
}

static void
xff_walk(void **state)
{
	static const char *const blocks[] = { "10.0.0.0/8", "2001:db8::/32", NULL };
	struct tg_cidrs s = { 0 };
	int more;

	set_of(&s, blocks);
	assert_string_equal(walk(&s, "10.0.0.1", "203.0.113.5", &more), "203.0.113.5");
	assert_int_equal(more, 0);
	/* past trusted proxies, from the right; what lies left of the client is
	 * the client's own claim, never read */
	assert_string_equal(walk(&s, "10.0.0.1", "1.1.1.1, 203.0.113.5, 10.9.9.9, 10.0.0.2",
	    &more), "203.0.113.5");
	assert_string_equal(walk(&s, "10.0.0.1", "garbage, 203.0.113.5", &more), "203.0.113.5");
	/* every entry trusted: the leftmost, and an earlier field may go on */
	assert_string_equal(walk(&s, "10.0.0.1", "10.1.1.1,10.2.2.2", &more), "10.1.1.1");
	assert_int_equal(more, 1);
	/* a malformed entry stops the walk at the last good one */
	assert_string_equal(walk(&s, "10.0.0.1", "203.0.113.5, unknown", &more), "10.0.0.1");
	assert_int_equal(more, 0);
	assert_string_equal(walk(&s, "10.0.0.1", "203.0.113.5, bogus, 10.3.3.3", &more),
	    "10.3.3.3");
	assert_string_equal(walk(&s, "10.0.0.1", "203.0.113.5:4711", &more), "10.0.0.1");
	assert_string_equal(walk(&s, "10.0.0.1", "[2001:db8::9]", &more), "10.0.0.1");
	assert_string_equal(walk(&s, "10.0.0.1",
	    "1111:2222:3333:4444:5555:6666:7777:8888:9999:aaaa:bbbb:cccc", &more), "10.0.0.1");
	/* IPv6, spaces, tabs and empty list elements; one spelling per address */
	assert_string_equal(walk(&s, "10.0.0.1", " 2001:DB8:0::7 ,\t, ", &more), "2001:db8::7");
	assert_int_equal(more, 1);
	assert_string_equal(walk(&s, "10.0.0.1", "2001:0db9::7,, 2001:db8::7", &more),
	    "2001:db9::7");
	assert_int_equal(more, 0);
	assert_string_equal(walk(&s, "10.0.0.1", "", &more), "10.0.0.1");
	assert_int_equal(more, 1);
	tg_http_cidrs_cleanup(&s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(blocks_parse_and_match),
		cmocka_unit_test(whole_range),
		cmocka_unit_test(blocks_refused),
		cmocka_unit_test(xff_walk),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
