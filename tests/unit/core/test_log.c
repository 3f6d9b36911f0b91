/*
 * test_log.c - the JSON-lines logger (src/core/log.c): a value that is not
 * UTF-8 (a client's User-Agent of raw bytes) is written with U+FFFD for
 * each ill-formed sequence, one per maximal subpart as Python's "replace"
 * decodes it, so the line stays valid JSON; valid UTF-8 passes unchanged.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tidegate/log.h"
#include "tidegate/util.h"

#define R "\xef\xbf\xbd"	/* U+FFFD */

/* The line logged for value v: its "v" member as written. */
static char *
logged(const char *v)
{
	char *buf = NULL, *at, *end, *out;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	tg_log_init(f, TG_LOG_INFO);
	tg_log(TG_LOG_INFO, "t", TG_LS("v", v));
	fclose(f);
	tg_log_init(stderr, TG_LOG_OFF);
	at = strstr(buf, "\"v\":\"");
	assert_non_null(at);
	at += 5;
	end = strstr(at, "\"}\n");
	assert_non_null(end);
	out = tg_xstrndup(at, (size_t)(end - at));
	free(buf);
	return out;
}

static void
test_ill_formed_values(void **state)
{
	static const struct {
		const char *in, *want;
	} cases[] = {
		{ "plain ascii", "plain ascii" },
		{ "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80" },
		{ "\x80", R },
		{ "a\xff" "b", "a" R "b" },
		{ "Mozilla/5.0 \xe9t\xe9", "Mozilla/5.0 " R "t" R },	/* Latin-1 */
		{ "\xe2\x82", R },				/* cut short: one subpart */
		{ "\xe2\x82" "A", R "A" },
		{ "\xf0\x9f\x98", R },
		{ "\xed\xa0\x80", R R R },			/* a surrogate */
		{ "\xc0\xaf", R R },				/* overlong '/' */
		{ "\xe0\x80\xaf", R R R },			/* overlong, three bytes */
		{ "\xf4\x90\x80\x80", R R R R },		/* above U+10FFFF */
		{ "\xf5\x80", R R },
		{ "12345678\xc3\xa9" "9\xc3", "12345678\xc3\xa9" "9" R },
	};
	char *got;
	size_t i;

	for (i = 0; i < TG_NELEM(cases); i++) {
		got = logged(cases[i].in);
		if (strcmp(got, cases[i].want) != 0)
			fail_msg("case %zu: got '%s'", i, got);
		free(got);
	}
}

/* Every byte from 0x80 to 0xff, alone: as many U+FFFD, past the stack
 * buffer (the copy is then on the heap). */
static void
test_every_high_byte(void **state)
{
	char in[129], want[3 * 128 + 1], *got;
	int i;

	for (i = 0; i < 128; i++) {
		in[i] = (char)(0x80 + i);
		memcpy(want + 3 * i, R, 3);
	}
	in[128] = '\0';
	want[3 * 128] = '\0';
	got = logged(in);
	assert_string_equal(got, want);
	free(got);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ill_formed_values),
		cmocka_unit_test(test_every_high_byte),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
