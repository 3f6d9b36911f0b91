/*
 * test_hblock.c - the header block (hblock.h): the bytes libevent writes
 * for it ("key: value\r\n") are those of its headers one by one; a name or
 * value with CR or LF, or an empty name, is refused; a block grows past its
 * first buffer; an empty block adds nothing; evhttp_clear_headers frees an
 * attached block; numbers written without printf; the header search and
 * add.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/queue.h>

#include <cmocka.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/hblock.h"

/* What evhttp_make_header writes for the entries of h. */
static void
wire(const struct evkeyvalq *h, char *out, size_t len)
{
	const struct evkeyval *kv;
	size_t n = 0;

	out[0] = '\0';
	TAILQ_FOREACH(kv, h, next)
		n += (size_t)snprintf(out + n, len - n, "%s: %s\r\n", kv->key, kv->value);
}

static void
test_lines(void **state)
{
	struct evkeyvalq h;
	struct tg_hblock b;
	char out[256];

	TAILQ_INIT(&h);
	evhttp_add_header(&h, "Content-Length", "12");
	tg_hblock_init(&b);
	assert_int_equal(tg_hblock_add(&b, "Host", "api.example:8080"), 0);
	assert_int_equal(tg_hblock_add(&b, "Accept", "*/*"), 0);
	assert_int_equal(tg_hblock_add(&b, "X-Empty", ""), 0);
	assert_int_equal(tg_hblock_addn(&b, "X-Cut", "abcdef", 3), 0);
	tg_hblock_attach(&b, &h);
	assert_null(b.key);
	wire(&h, out, sizeof(out));
	assert_string_equal(out, "Content-Length: 12\r\nHost: api.example:8080\r\n"
	    "Accept: */*\r\nX-Empty: \r\nX-Cut: abc\r\n");
	/* libevent finds the block's first header by its name */
	assert_string_equal(evhttp_find_header(&h, "host"), "api.example:8080\r\n"
	    "Accept: */*\r\nX-Empty: \r\nX-Cut: abc");
	evhttp_clear_headers(&h);
}

static void
test_refused(void **state)
{
	struct evkeyvalq h;
	struct tg_hblock b;
	char out[256];

	TAILQ_INIT(&h);
	tg_hblock_init(&b);
	assert_int_equal(tg_hblock_add(&b, "X-Evil", "a\r\nX-Injected: 1"), -1);
	assert_int_equal(tg_hblock_add(&b, "X-Evil", "a\nb"), -1);
	assert_int_equal(tg_hblock_add(&b, "X-Evil\r\nX-Injected", "1"), -1);
	assert_int_equal(tg_hblock_add(&b, "X-Evil: 1\r\nX", "1"), -1);
	assert_int_equal(tg_hblock_add(&b, "", "1"), -1);
	assert_int_equal(tg_hblock_addn(&b, "X-Evil", "ab\r", 3), -1);
	assert_null(b.key);
	tg_hblock_attach(&b, &h);	/* empty: nothing */
	assert_true(TAILQ_EMPTY(&h));
	assert_int_equal(tg_hblock_add(&b, "X-Good", "1"), 0);
	assert_int_equal(tg_hblock_add(&b, "X-Evil", "\r"), -1);
	tg_hblock_attach(&b, &h);
	wire(&h, out, sizeof(out));
	assert_string_equal(out, "X-Good: 1\r\n");
	evhttp_clear_headers(&h);
	tg_hblock_add(&b, "X-Unused", "1");
	tg_hblock_free(&b);	/* not attached: freed here */
	assert_null(b.key);
}

/* Past its first buffer: 100 headers of 40-byte values, all in order. */
static void
test_grows(void **state)
{
	static char out[16384], want[16384];
	struct evkeyvalq h;
	struct tg_hblock b;
	char name[16], value[41];
	size_t n = 0;
	int i;

	TAILQ_INIT(&h);
	tg_hblock_init(&b);
	for (i = 0; i < 100; i++) {
		snprintf(name, sizeof(name), "X-H%d", i);
		memset(value, 'a' + i % 26, 40);
		value[40] = '\0';
		assert_int_equal(tg_hblock_add(&b, name, value), 0);
		n += (size_t)snprintf(want + n, sizeof(want) - n, "%s: %s\r\n", name, value);
	}
	tg_hblock_attach(&b, &h);
	wire(&h, out, sizeof(out));
	assert_string_equal(out, want);
	evhttp_clear_headers(&h);
}

/* Numbers without printf: the edges of uint64_t, and as a header. */
static void
test_numbers(void **state)
{
	struct evkeyvalq h;
	struct tg_hblock b;
	char num[21], out[128];

	assert_int_equal(tg_u64_dec(0, num), 1);
	assert_string_equal(num, "0");
	assert_int_equal(tg_u64_dec(10, num), 2);
	assert_string_equal(num, "10");
	assert_int_equal(tg_u64_dec(18446744073709551615ULL, num), 20);
	assert_string_equal(num, "18446744073709551615");
	TAILQ_INIT(&h);
	tg_hblock_init(&b);
	assert_int_equal(tg_hblock_add_u64(&b, "Content-Length", 262144), 0);
	assert_int_equal(tg_hblock_add(&b, "Host", "h"), 0);
	tg_hblock_attach(&b, &h);
	wire(&h, out, sizeof(out));
	assert_string_equal(out, "Content-Length: 262144\r\nHost: h\r\n");
	evhttp_clear_headers(&h);
}

/* The first header of a name, in any case; a name that only shares its
 * initial is another; NULL when none. */
static void
test_find(void **state)
{
	struct evkeyvalq h;

	TAILQ_INIT(&h);
	assert_null(tg_header_find(&h, "Date"));
	evhttp_add_header(&h, "Content-Type", "a");
	evhttp_add_header(&h, "content-length", "1");
	evhttp_add_header(&h, "Content-Length", "2");
	evhttp_add_header(&h, "X-1", "x");
	assert_string_equal(tg_header_find(&h, "CONTENT-LENGTH"), "1");
	assert_string_equal(tg_header_find(&h, "content-type"), "a");
	assert_string_equal(tg_header_find(&h, "x-1"), "x");
	assert_null(tg_header_find(&h, "Content"));
	assert_null(tg_header_find(&h, "Content-Lengths"));
	assert_null(tg_header_find(&h, "Y-1"));
	evhttp_clear_headers(&h);
}

/* A header added as evhttp_add_header would, refused with CR, LF or a
 * colon in its name, freed by evhttp_clear_headers. */
static void
test_add(void **state)
{
	struct evkeyvalq h;
	char out[128];

	TAILQ_INIT(&h);
	assert_int_equal(tg_header_add(&h, "A", "1"), 0);
	assert_int_equal(tg_header_add(&h, "B", ""), 0);
	assert_int_equal(tg_header_add(&h, "C", "x\r\nInjected: 1"), -1);
	assert_int_equal(tg_header_add(&h, "C", "x\r"), -1);
	assert_int_equal(tg_header_add(&h, "C: 1\r\nD", "x"), -1);
	assert_int_equal(tg_header_add(&h, "", "x"), -1);
	wire(&h, out, sizeof(out));
	assert_string_equal(out, "A: 1\r\nB: \r\n");
	assert_string_equal(tg_header_find(&h, "b"), "");
	evhttp_clear_headers(&h);
}

/* "Bearer " and a token as one value, each part refused with CR or LF
 * (a token from a vendor's answer is the sender's choosing). */
static void
test_add_prefixed(void **state)
{
	struct evkeyvalq h;
	char out[128];

	TAILQ_INIT(&h);
	assert_int_equal(tg_header_add_prefixed(&h, "Authorization", "Bearer ", "t0k"), 0);
	assert_int_equal(tg_header_add_prefixed(&h, "X", "", ""), 0);
	assert_int_equal(tg_header_add_prefixed(&h, "Y", "Bearer ", "t\r\nInjected: 1"), -1);
	assert_int_equal(tg_header_add_prefixed(&h, "Y", "a\n", "t"), -1);
	assert_int_equal(tg_header_add_prefixed(&h, "Y:", "Bearer ", "t"), -1);
	wire(&h, out, sizeof(out));
	assert_string_equal(out, "Authorization: Bearer t0k\r\nX: \r\n");
	evhttp_clear_headers(&h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_lines),
		cmocka_unit_test(test_refused),
		cmocka_unit_test(test_grows),
		cmocka_unit_test(test_numbers),
		cmocka_unit_test(test_find),
		cmocka_unit_test(test_add),
		cmocka_unit_test(test_add_prefixed),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
