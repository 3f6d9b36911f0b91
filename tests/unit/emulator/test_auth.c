/*
 * test_auth.c - the emulator's HS256 tokens: verify, tamper, expiry
 * against the advanced clock, revocation generation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "emu.h"

static void
test_sign_verify(void **state)
{
	int64_t now = tg_clock_now_ms() / 1000;
	char *t = emu_jwt_sign("k1", "demo", now, now + 60, 3);

	assert_int_equal(emu_jwt_verify("k1", t, 3), 0);
	assert_int_equal(emu_jwt_verify("k1", t, 2), 0);
	assert_int_equal(emu_jwt_verify("k1", t, 4), -1);	/* revoked */
	assert_int_equal(emu_jwt_verify("k2", t, 0), -1);	/* other key */
	t[strlen(t) - 2] ^= 1;
	assert_int_equal(emu_jwt_verify("k1", t, 0), -1);	/* tampered */
	free(t);
	assert_int_equal(emu_jwt_verify("k1", "a.b", 0), -1);
	assert_int_equal(emu_jwt_verify("k1", "a.b.c.d", 0), -1);
	assert_int_equal(emu_jwt_verify("k1", "", 0), -1);
}

static void
test_expiry(void **state)
{
	int64_t now = tg_clock_now_ms() / 1000;
	char *t = emu_jwt_sign("k", "demo", now, now + 60, 0);

	assert_int_equal(emu_jwt_verify("k", t, 0), 0);
	tg_clock_advance_ms(61000);
	assert_int_equal(emu_jwt_verify("k", t, 0), -1);
	free(t);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sign_verify),
		cmocka_unit_test(test_expiry),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
