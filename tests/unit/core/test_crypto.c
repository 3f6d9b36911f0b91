/*
 * test_crypto.c - SHA-256 / HMAC-SHA256 against published vectors, base64
 * and base64url both ways, random identifiers' format.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tidegate/crypto.h"
#include "tidegate/ids.h"
#include "tidegate/util.h"

static void
test_sha256(void **state)
{
	uint8_t d[TG_SHA256_LEN];
	char hex[65];

	tg_sha256("abc", 3, d);
	tg_hex(d, sizeof(d), hex);
	assert_string_equal(hex,
	    "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

/* Every byte value's two digits (tg_hex reads them from a table). */
static void
test_hex_every_byte(void **state)
{
	uint8_t in[256];
	char out[513], want[3];
	size_t i;

	for (i = 0; i < sizeof(in); i++)
		in[i] = (uint8_t)i;
	tg_hex(in, sizeof(in), out);
	assert_int_equal(strlen(out), 512);
	for (i = 0; i < sizeof(in); i++) {
		snprintf(want, sizeof(want), "%02x", (unsigned)i);
		assert_memory_equal(out + 2 * i, want, 2);
	}
}

static void
test_hmac_rfc4231(void **state)
{
	uint8_t key[20], d[TG_SHA256_LEN];
	char hex[65];

	memset(key, 0x0b, sizeof(key));
	tg_hmac_sha256(key, sizeof(key), "Hi There", 8, d);
	tg_hex(d, sizeof(d), hex);
	assert_string_equal(hex,
	    "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
	tg_hmac_sha256("Jefe", 4, "what do ya want for nothing?", 28, d);
	tg_hex(d, sizeof(d), hex);
	assert_string_equal(hex,
	    "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
}

static void
test_base64(void **state)
{
	static const struct { const char *in, *std, *url; } v[] = {
		{ "", "", "" }, { "f", "Zg==", "Zg" }, { "fo", "Zm8=", "Zm8" },
		{ "foo", "Zm9v", "Zm9v" }, { "\xfb\xff", "+/8=", "-_8" },
	};
	uint8_t *dec;
	size_t i, n;
	char *s;

	for (i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
		s = tg_b64_encode(v[i].in, strlen(v[i].in));
		assert_string_equal(s, v[i].std);
		free(s);
		s = tg_b64url_encode(v[i].in, strlen(v[i].in));
		assert_string_equal(s, v[i].url);
		free(s);
		dec = tg_b64_decode(v[i].url, strlen(v[i].url), &n);
		assert_non_null(dec);
		assert_int_equal(n, strlen(v[i].in));
		assert_memory_equal(dec, v[i].in, n);
		free(dec);
		dec = tg_b64_decode(v[i].std, strlen(v[i].std), &n);
		assert_non_null(dec);
		assert_int_equal(n, strlen(v[i].in));
		free(dec);
	}
	assert_null(tg_b64_decode("a$b=", 4, &n));
	assert_null(tg_b64_decode("abcde", 5, &n));
}

static void
test_ids(void **state)
{
	char a[TG_UUID_LEN], b[TG_UUID_LEN], hex[33];
	size_t i;

	tg_id_uuid4(a);
	tg_id_uuid4(b);
	assert_int_equal(strlen(a), 36);
	assert_string_not_equal(a, b);
	assert_int_equal(a[14], '4');
	assert_true(strchr("89ab", a[19]) != NULL);
	for (i = 0; i < 36; i++)
		assert_true(i == 8 || i == 13 || i == 18 || i == 23 ? a[i] == '-' :
		    strchr("0123456789abcdef", a[i]) != NULL);
	tg_id_hex(hex, 16);
	assert_int_equal(strlen(hex), 32);
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp((const char *)a, (const char *)b);
}

/* Ids come from a pool refilled every 256: across refills each is well
 * formed and none repeats. */
static void
test_ids_pool(void **state)
{
	static char ids[1000][TG_UUID_LEN];
	size_t i, j;

	for (i = 0; i < 1000; i++) {
		tg_id_uuid4(ids[i]);
		assert_int_equal(strlen(ids[i]), 36);
		assert_int_equal(ids[i][14], '4');
		assert_non_null(strchr("89ab", ids[i][19]));
		for (j = 0; j < 36; j++)
			assert_true(j == 8 || j == 13 || j == 18 || j == 23 ? ids[i][j] == '-' :
			    strchr("0123456789abcdef", ids[i][j]) != NULL);
	}
	qsort(ids, 1000, TG_UUID_LEN, cmp_str);
	for (i = 1; i < 1000; i++)
		assert_string_not_equal(ids[i - 1], ids[i]);
}

static void
test_util(void **state)
{
	assert_int_equal(tg_str_distance("projectid", "projectId", 2), 1);
	assert_int_equal(tg_str_distance("startdate", "startDate", 2), 1);
	assert_int_equal(tg_str_distance("abc", "xyzw", 2), 3);
	assert_int_equal(tg_str_distance("", "ab", 2), 2);
	assert_true(tg_mem_equal_ct("abc", "abc", 3));
	assert_false(tg_mem_equal_ct("abc", "abd", 3));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sha256),
		cmocka_unit_test(test_hex_every_byte),
		cmocka_unit_test(test_hmac_rfc4231),
		cmocka_unit_test(test_base64),
		cmocka_unit_test(test_ids),
		cmocka_unit_test(test_ids_pool),
		cmocka_unit_test(test_util),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
