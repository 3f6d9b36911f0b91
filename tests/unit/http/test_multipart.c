/*
 * test_multipart.c - unit tests of src/http/multipart.c: the boundary
 * parameter, parts and headers, every way of splitting a body across
 * feeds, and each malformed-input error.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tidegate/multipart.h"

/* Events of one parse, flattened into text so runs can be compared. */
struct trace {
	char buf[16384];
	size_t len;
	int abort_begin, abort_data, abort_end;	/* make that callback fail */
};

static void
put(struct trace *t, const char *s, size_t n)
{
	assert_true(t->len + n < sizeof(t->buf));
	memcpy(t->buf + t->len, s, n);
	t->len += n;
	t->buf[t->len] = '\0';
}

static int
on_begin(void *arg, const char *name, const char *filename, const char *ctype)
{
	struct trace *t = arg;
	char line[512];

	snprintf(line, sizeof(line), "[%s|%s|%s]", name, filename ? filename : "-",
	    ctype ? ctype : "-");
	put(t, line, strlen(line));
	return t->abort_begin;
}

static int
on_data(void *arg, const char *data, size_t len)
{
	struct trace *t = arg;

	assert_true(len > 0);
	put(t, data, len);
	return t->abort_data;
}

static int
on_end(void *arg)
{
	struct trace *t = arg;

	put(t, "[end]", 5);
	return t->abort_end;
}

static const struct tg_multipart_cbs cbs = { on_begin, on_data, on_end };

#define BND "XyZ-b0und4ry"

/* Near misses in the first part: the boundary without CRLF "--" before
 * it, "\r\n-- ", "\r\r\n" and a long prefix of the delimiter. */
static const char body[] =
	"This preamble is ignored.\r\n"
	"--" BND "\r\n"
	"Content-Disposition: form-data; name=\"comment\"\r\n"
	"\r\n"
	"line one\r\nline two -- " BND " \r\n-- not it\r\r\n--XyZ-b0unQ"
	"\r\n--" BND "  \t\r\n"
	"content-disposition: FORM-DATA; filename=\"a \\\"q\\\".json\"; NAME=file\r\n"
	"CONTENT-TYPE: application/json\r\n"
	"X-Other: ignored\r\n"
	"\r\n"
	"[{\"id\": \"ACT-1\"}]"
	"\r\n--" BND "\r\n"
	"Content-Disposition: form-data; name=\"empty\"\r\n"
	"\r\n"
	"\r\n--" BND "--\r\n"
	"epilogue, ignored\r\n--" BND "\r\nnot parsed";
static const size_t body_len = sizeof(body) - 1;
static const char expected[] =
	"[comment|-|-]line one\r\nline two -- " BND " \r\n-- not it\r\r\n--XyZ-b0unQ[end]"
	"[file|a \"q\".json|application/json][{\"id\": \"ACT-1\"}][end]"
	"[empty|-|-][end]";

/* Parse body cut at the given offsets; returns the parser's verdict. */
static int
parse_cuts(const char *b, size_t n, const size_t *cuts, size_t ncuts, struct trace *t,
    size_t max, struct tg_err *err, int *too_large)
{
	struct tg_multipart *mp = tg_multipart_new(BND, &cbs, t, max);
	size_t prev = 0, i;
	int rc = 0;

	for (i = 0; i <= ncuts && rc == 0; i++) {
		size_t end = i < ncuts ? cuts[i] : n;

		rc = tg_multipart_feed(mp, b + prev, end - prev, err);
		prev = end;
	}
	if (rc == 0)
		rc = tg_multipart_finish(mp, err);
	if (too_large != NULL)
		*too_large = tg_multipart_too_large(mp);
	tg_multipart_free(mp);
	return rc;
}

static int
parse(const char *b, struct trace *t, struct tg_err *err)
{
	return parse_cuts(b, strlen(b), NULL, 0, t, 0, err, NULL);
}

static void
test_whole_body(void **state)
{
	struct trace t = { .len = 0 };
	struct tg_err err;

	assert_int_equal(parse_cuts(body, body_len, NULL, 0, &t, 0, &err, NULL), 0);
	assert_string_equal(t.buf, expected);
}

static void
test_every_split_point(void **state)
{
	struct tg_err err;
	size_t i, j, cuts[2];

	for (i = 0; i <= body_len; i++) {
		struct trace t = { .len = 0 };

		cuts[0] = i;
		assert_int_equal(parse_cuts(body, body_len, cuts, 1, &t, 0, &err, NULL), 0);
		assert_string_equal(t.buf, expected);
	}
	/* Two cuts: every delimiter and CRLF can straddle three feeds. */
	for (i = 0; i <= body_len; i += 3) {
		for (j = i; j <= body_len; j++) {
			struct trace t = { .len = 0 };

			cuts[0] = i;
			cuts[1] = j;
			assert_int_equal(parse_cuts(body, body_len, cuts, 2, &t, 0, &err, NULL), 0);
			assert_string_equal(t.buf, expected);
		}
	}
}

static void
test_byte_by_byte(void **state)
{
	struct trace t = { .len = 0 };
	struct tg_multipart *mp;
	struct tg_err err;
	size_t i;

	mp = tg_multipart_new(BND, &cbs, &t, 0);
	for (i = 0; i < body_len; i++)
		assert_int_equal(tg_multipart_feed(mp, body + i, 1, &err), 0);
	assert_int_equal(tg_multipart_feed(mp, body, 0, &err), 0);
	assert_int_equal(tg_multipart_finish(mp, &err), 0);
	assert_string_equal(t.buf, expected);
	tg_multipart_free(mp);
}

/* Whatever the input, how it is cut must not change the outcome. */
static void
test_mutations_independent_of_cuts(void **state)
{
	static const char subst[] = { '\r', '\n', '-', ' ', ';', '"', 'x', '\0' };
	static char m[sizeof(body)];
	struct trace whole, bytes;
	struct tg_err e1, e2;
	size_t i, k, cuts[sizeof(body)];
	int r1, r2;

	for (i = 0; i < body_len; i++)
		cuts[i] = i;
	for (i = 0; i < body_len; i++) {
		for (k = 0; k < sizeof(subst); k++) {
			memcpy(m, body, body_len);
			m[i] = subst[k];
			whole = (struct trace){ .len = 0 };
			bytes = (struct trace){ .len = 0 };
			e1.msg[0] = e2.msg[0] = '\0';
			r1 = parse_cuts(m, body_len, NULL, 0, &whole, 0, &e1, NULL);
			r2 = parse_cuts(m, body_len, cuts + 1, body_len - 1, &bytes, 0, &e2, NULL);
			assert_int_equal(r1, r2);
			assert_string_equal(e1.msg, e2.msg);
			assert_int_equal(whole.len, bytes.len);
			assert_memory_equal(whole.buf, bytes.buf, whole.len);
		}
	}
}

static void
test_no_preamble_and_binary_data(void **state)
{
	static const char b[] = "--" BND "\r\nContent-Disposition: form-data; name=bin\r\n\r\n"
	    "a\0b\r\0\n\r\n-\r\n--" BND "--";
	static const char want[] = "[bin|-|-]a\0b\r\0\n\r\n-[end]";
	struct trace t = { .len = 0 };
	struct tg_err err;

	assert_int_equal(parse_cuts(b, sizeof(b) - 1, NULL, 0, &t, 0, &err, NULL), 0);
	assert_int_equal(t.len, sizeof(want) - 1);
	assert_memory_equal(t.buf, want, sizeof(want) - 1);
}

static void
test_folded_header_and_token_values(void **state)
{
	struct trace t = { .len = 0 };
	struct tg_err err;

	assert_int_equal(parse("--" BND "\r\nContent-Disposition: form-data;\r\n"
	    "\tname=file; filename=x.json;\r\n\r\n{}\r\n--" BND "--", &t, &err), 0);
	assert_string_equal(t.buf, "[file|x.json|-]{}[end]");
}

static void
expect_error(const char *b, const char *msg)
{
	struct trace t = { .len = 0 };
	struct tg_err err;

	err.msg[0] = '\0';
	assert_int_equal(parse(b, &t, &err), -1);
	if (strstr(err.msg, msg) == NULL)
		fail_msg("body %s: error '%s' lacks '%s'", b, err.msg, msg);
}

#define OPEN "--" BND "\r\n"
#define CD "Content-Disposition: form-data; name=\"f\"\r\n"

static void
test_malformed(void **state)
{
	expect_error("", "no boundary line found");
	expect_error("just text, no boundary", "no boundary line found");
	expect_error(OPEN CD "\r\ndata", "body ends inside part 'f': missing closing boundary");
	expect_error(OPEN CD "\r\ndata\r\n--" BND, "missing closing boundary");
	expect_error(OPEN CD "\r\ndata\r\n--" BND "-", "missing closing boundary");
	expect_error(OPEN CD "\r\ndata\r\n--" BND "\r\n", "inside the headers");
	expect_error(OPEN CD, "inside the headers");
	expect_error("--" BND "junk\r\n", "text after the boundary");
	expect_error("--" BND "-x", "text after the boundary");
	expect_error("--" BND " x\r\n", "text after the boundary");
	expect_error("--" BND "\rx", "CR without LF");
	expect_error(OPEN "\r\n\r\n--" BND "--", "no Content-Disposition");
	expect_error(OPEN "Content-Type: a/b\r\n\r\n\r\n--" BND "--", "no Content-Disposition");
	expect_error(OPEN "Content-Disposition form-data\r\n\r\n", "malformed part header line");
	expect_error(OPEN ": x\r\n\r\n", "malformed part header line");
	expect_error(OPEN "Bad Name: x\r\n\r\n", "malformed part header line");
	expect_error(OPEN " folded\r\n\r\n", "continuation line");
	expect_error(OPEN "Content-Disposition: attachment; name=f\r\n\r\n", "must be form-data");
	expect_error(OPEN "Content-Disposition: form-data\r\n\r\n", "no name parameter");
	expect_error(OPEN "Content-Disposition: form-data; filename=a\r\n\r\n", "no name");
	expect_error(OPEN "Content-Disposition: form-data; name=\"f\r\n\r\n", "unterminated");
	expect_error(OPEN "Content-Disposition: form-data; name=\"f\" x\r\n\r\n", "malformed");
	expect_error(OPEN "Content-Disposition: form-data; name\r\n\r\n", "malformed");
	expect_error(OPEN "Content-Disposition: form-data; name=\r\n\r\n", "malformed");
	expect_error(OPEN "Content-Disposition: form-data; name=a; name=b\r\n\r\n",
	    "duplicate name");
	expect_error(OPEN CD CD "\r\n", "duplicate Content-Disposition");
	expect_error(OPEN CD "Content-Type: a\r\ncontent-type: b\r\n\r\n", "duplicate Content-Type");
	expect_error(OPEN CD "\n\r\n", "must end with CRLF");
	expect_error(OPEN CD "X: a\rb\r\n\r\n", "must end with CRLF");
	expect_error(OPEN "Content-Disposition: form-data; name=\"a\x01\"\r\n\r\n", "control");
}

static void
test_nul_in_headers(void **state)
{
	static const char b[] = OPEN "X: a\0b\r\n\r\n";
	struct trace t = { .len = 0 };
	struct tg_err err;

	assert_int_equal(parse_cuts(b, sizeof(b) - 1, NULL, 0, &t, 0, &err, NULL), -1);
	assert_string_equal(err.msg, "NUL byte in part headers");
}

static void
test_header_block_limit(void **state)
{
	size_t n = TG_MULTIPART_MAX_HEADERS + 100, len;
	char *b = malloc(n + 200);
	struct trace t = { .len = 0 };
	struct tg_err err;

	len = (size_t)sprintf(b, OPEN CD "X-Pad: ");
	memset(b + len, 'a', n);
	len += n;
	memcpy(b + len, "\r\n\r\n", 5);
	assert_int_equal(parse(b, &t, &err), -1);
	assert_string_equal(err.msg, "part headers exceed 8192 bytes");
	/* A header block of exactly the limit is fine. */
	len = (size_t)sprintf(b, OPEN CD "X-Pad: ");
	n = TG_MULTIPART_MAX_HEADERS - (len - strlen(OPEN)) - 4;
	memset(b + len, 'a', n);
	sprintf(b + len + n, "\r\n\r\nv\r\n--" BND "--");
	t.len = 0;
	assert_int_equal(parse(b, &t, &err), 0);
	assert_string_equal(t.buf, "[f|-|-]v[end]");
	free(b);
}

static void
test_max_part_size(void **state)
{
	static const char b[] = OPEN CD "\r\n0123456789\r\n--" BND "--";
	struct trace t = { .len = 0 };
	struct tg_err err;
	size_t i, cut[1];
	int big;

	assert_int_equal(parse_cuts(b, sizeof(b) - 1, NULL, 0, &t, 10, &err, &big), 0);
	assert_int_equal(big, 0);
	for (i = 0; i <= sizeof(b) - 1; i++) {
		t.len = 0;
		t.buf[0] = '\0';
		cut[0] = i;
		assert_int_equal(parse_cuts(b, sizeof(b) - 1, cut, 1, &t, 9, &err, &big), -1);
		assert_int_equal(big, 1);
		assert_string_equal(err.msg, "part 'f' is larger than the size limit");
	}
}

static void
test_callback_abort_and_sticky_error(void **state)
{
	static const char b[] = OPEN CD "\r\nxy\r\n--" BND "--";
	struct trace t = { .len = 0 };
	struct tg_multipart *mp;
	struct tg_err err;

	t.abort_begin = 1;
	assert_int_equal(parse(b, &t, &err), -1);
	assert_string_equal(err.msg, "processing stopped at the start of part 'f'");
	t = (struct trace){ .abort_data = 1 };
	assert_int_equal(parse(b, &t, &err), -1);
	assert_string_equal(err.msg, "processing stopped in the data of part 'f'");
	t = (struct trace){ .abort_end = 1 };
	assert_int_equal(parse(b, &t, &err), -1);
	assert_string_equal(err.msg, "processing stopped at the end of part 'f'");
	/* Once failed, every call fails with the first reason. */
	t = (struct trace){ .len = 0 };
	mp = tg_multipart_new(BND, &cbs, &t, 0);
	assert_int_equal(tg_multipart_feed(mp, "--" BND "?", strlen(BND) + 3, &err), -1);
	assert_int_equal(tg_multipart_feed(mp, "\r\n", 2, &err), -1);
	assert_int_equal(tg_multipart_finish(mp, &err), -1);
	assert_string_equal(err.msg, "malformed boundary line: text after the boundary");
	tg_multipart_free(mp);
}

static void
test_no_callbacks_and_epilogue_feeds(void **state)
{
	static const struct tg_multipart_cbs none = { NULL, NULL, NULL };
	struct tg_multipart *mp = tg_multipart_new(BND, &none, NULL, 0);
	struct tg_err err;
	const char *b = OPEN CD "\r\nxy\r\n--" BND "--";

	assert_int_equal(tg_multipart_feed(mp, b, strlen(b), &err), 0);
	assert_int_equal(tg_multipart_feed(mp, "--" BND "garbage", 10, &err), 0);
	assert_int_equal(tg_multipart_finish(mp, &err), 0);
	assert_int_equal(tg_multipart_finish(mp, &err), 0);
	tg_multipart_free(mp);
	tg_multipart_free(NULL);
}

static void
test_invalid_boundary_parser(void **state)
{
	const char *bad[] = { "", "a\r\nb", "ends with space ", "tab\there",
	    "0123456789012345678901234567890123456789012345678901234567890123456789X" };
	struct tg_multipart *mp;
	struct tg_err err;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		mp = tg_multipart_new(bad[i], &cbs, NULL, 0);
		assert_int_equal(tg_multipart_feed(mp, "x", 1, &err), -1);
		assert_string_equal(err.msg, "invalid multipart boundary");
		assert_int_equal(tg_multipart_finish(mp, &err), -1);
		tg_multipart_free(mp);
	}
	mp = tg_multipart_new(NULL, &cbs, NULL, 0);
	assert_int_equal(tg_multipart_finish(mp, &err), -1);
	tg_multipart_free(mp);
}

static void
boundary_ok(const char *ct, const char *want)
{
	struct tg_err err;
	char *b = tg_multipart_boundary(ct, &err);

	if (b == NULL)
		fail_msg("'%s' refused: %s", ct, err.msg);
	assert_string_equal(b, want);
	free(b);
}

static void
boundary_bad(const char *ct, const char *msg)
{
	struct tg_err err;
	char *b = tg_multipart_boundary(ct, &err);

	if (b != NULL)
		fail_msg("'%s' accepted as '%s'", ct ? ct : "(null)", b);
	if (strstr(err.msg, msg) == NULL)
		fail_msg("'%s': error '%s' lacks '%s'", ct ? ct : "(null)", err.msg, msg);
}

static void
test_boundary_parameter(void **state)
{
	char ct[200];

	boundary_ok("multipart/form-data; boundary=abc", "abc");
	boundary_ok("Multipart/Form-Data;BOUNDARY=abc", "abc");
	boundary_ok("  multipart/form-data ; charset=utf-8 ;  boundary=\"a b:c\" ;", "a b:c");
	boundary_ok("multipart/form-data; boundary=\"q\\:x\"", "q:x");
	boundary_ok("multipart/form-data; boundary=----WebKitFormBoundary7MA4YWxk",
	    "----WebKitFormBoundary7MA4YWxk");
	boundary_ok("multipart/form-data; boundary=a/b=c?d", "a/b=c?d");
	snprintf(ct, sizeof(ct), "multipart/form-data; boundary=%070d", 7);
	boundary_ok(ct, ct + strlen("multipart/form-data; boundary="));
	snprintf(ct, sizeof(ct), "multipart/form-data; boundary=%071d", 7);
	boundary_bad(ct, "1 to 70 characters");
	boundary_bad(NULL, "must be multipart/form-data");
	boundary_bad("application/json", "must be multipart/form-data");
	boundary_bad("multipart/mixed; boundary=abc", "must be multipart/form-data");
	boundary_bad("multipart/form-data", "no boundary parameter");
	boundary_bad("multipart/form-data; charset=utf-8", "no boundary parameter");
	boundary_bad("multipart/form-data; boundary=\"\"", "1 to 70 characters");
	boundary_bad("multipart/form-data; boundary=", "malformed parameter");
	boundary_bad("multipart/form-data; boundary=\"abc", "unterminated");
	boundary_bad("multipart/form-data; boundary=\"abc \"", "must not end with a space");
	boundary_bad("multipart/form-data; boundary=a*b", "does not allow");
	boundary_bad("multipart/form-data; boundary=\"q\\\"x\"", "does not allow");
	boundary_bad("multipart/form-data; boundary=\"a\tb\"", "does not allow");
	boundary_bad("multipart/form-data; boundary=a; boundary=b", "duplicate boundary");
	boundary_bad("multipart/form-data boundary=a", "malformed parameter");
	boundary_bad("multipart/form-data; boundary=a b", "malformed parameter");
	boundary_bad("multipart/form-data; =a", "malformed parameter");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_whole_body),
		cmocka_unit_test(test_every_split_point),
		cmocka_unit_test(test_byte_by_byte),
		cmocka_unit_test(test_mutations_independent_of_cuts),
		cmocka_unit_test(test_no_preamble_and_binary_data),
		cmocka_unit_test(test_folded_header_and_token_values),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_nul_in_headers),
		cmocka_unit_test(test_header_block_limit),
		cmocka_unit_test(test_max_part_size),
		cmocka_unit_test(test_callback_abort_and_sticky_error),
		cmocka_unit_test(test_no_callbacks_and_epilogue_feeds),
		cmocka_unit_test(test_invalid_boundary_parser),
		cmocka_unit_test(test_boundary_parameter),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
