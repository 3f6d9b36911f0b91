/*
 * test_jwt.c - reading exp from a JWT payload: valid, absent, garbage,
 * and the base64 variants tokens arrive in (url-safe or standard, padded
 * or not, every length modulo 3).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tidegate/crypto.h"
#include "tidegate/token.h"
#include "tidegate/util.h"

/* header.payload.sig with payload encoded as given (url-safe or standard). */
static char *
jwt_with(const char *payload, int standard)
{
	char *h = tg_b64url_encode("{\"alg\":\"HS256\"}", 15);
	char *p = standard ? tg_b64_encode(payload, strlen(payload)) :
	    tg_b64url_encode(payload, strlen(payload));
	char *t = tg_xasprintf("%s.%s.c2ln", h, p);

	free(h);
	free(p);
	return t;
}

static int64_t
exp_of(const char *payload, int standard)
{
	char *t = jwt_with(payload, standard);
	int64_t e = tg_jwt_exp(t);

	free(t);
	return e;
}

static void
test_valid(void **state)
{
	assert_int_equal(exp_of("{\"sub\":\"demo\",\"exp\":1700000000}", 0), 1700000000);
	assert_int_equal(exp_of("{\"exp\":0}", 0), 0);
	/* fractional NumericDate (RFC 7519) is truncated */
	assert_int_equal(exp_of("{\"exp\":1700000000.75}", 0), 1700000000);
	/* the emulator's tokens and "alg none" tokens with an empty signature */
	assert_int_equal(tg_jwt_exp("eyJhbGciOiJub25lIn0.eyJleHAiOjQyfQ."), 42);
}

static void
test_no_exp(void **state)
{
	assert_int_equal(exp_of("{\"sub\":\"demo\"}", 0), -1);
	assert_int_equal(exp_of("{}", 0), -1);
	assert_int_equal(exp_of("{\"exp\":\"1700000000\"}", 0), -1);
	assert_int_equal(exp_of("{\"exp\":null}", 0), -1);
	assert_int_equal(exp_of("{\"exp\":-5}", 0), -1);
	assert_int_equal(exp_of("{\"exp\":1e300}", 0), -1);
	assert_int_equal(exp_of("{\"exp\":99999999999999999999999}", 0), -1);
	assert_int_equal(exp_of("{\"nested\":{\"exp\":5}}", 0), -1);
}

static void
test_garbage(void **state)
{
	assert_int_equal(tg_jwt_exp(NULL), -1);
	assert_int_equal(tg_jwt_exp(""), -1);
	assert_int_equal(tg_jwt_exp("garbage"), -1);
	assert_int_equal(tg_jwt_exp("a.eyJleHAiOjQyfQ"), -1);	/* no second dot */
	assert_int_equal(tg_jwt_exp("a..c"), -1);		/* empty payload */
	assert_int_equal(tg_jwt_exp("a.!!!!.c"), -1);		/* not base64 */
	assert_int_equal(tg_jwt_exp("a.e.c"), -1);		/* impossible length */
	assert_int_equal(exp_of("hello", 0), -1);		/* not JSON */
	assert_int_equal(exp_of("[{\"exp\":5}]", 0), -1);	/* not an object */
	assert_int_equal(exp_of("{\"exp\":5", 0), -1);		/* truncated */
}

/* Every payload length modulo 3, in both alphabets, padded and not. */
static void
test_padding_variants(void **state)
{
	char payload[128];
	int i, std;

	for (i = 0; i < 6; i++) {
		snprintf(payload, sizeof(payload), "{\"sub\":\"%.*s\",\"exp\":%d}", i,
		    ">>>???", 1000 + i);
		for (std = 0; std < 2; std++)
			assert_int_equal(exp_of(payload, std), 1000 + i);
	}
	/* padding left on a url-safe segment is accepted too */
	assert_int_equal(tg_jwt_exp("x.eyJleHAiOjQyfQ==.y"), 42);
	assert_int_equal(tg_jwt_exp("x.eyJleHAiOjQyMX0.y"), 421);
	assert_int_equal(tg_jwt_exp("x.eyJleHAiOjQyMX0=.y"), 421);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid),
		cmocka_unit_test(test_no_exp),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_padding_variants),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
