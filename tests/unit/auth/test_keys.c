/*
 * test_keys.c - gateway API keys: match and mismatch, service masks,
 * several keys, the keys remembered once matched (found again, never for
 * a near miss, an empty key or after cleanup), and the configuration
 * errors (bad hex, unknown service, no service, duplicate digest).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tidegate/crypto.h"
#include "tidegate/keys.h"

static void
digest_hex(const char *key, char out[65])
{
	uint8_t d[TG_SHA256_LEN];

	tg_sha256(key, strlen(key), d);
	tg_hex(d, sizeof(d), out);
}

static void
test_match(void **state)
{
	static const char *const svc[] = { "dex", "sim" };
	struct tg_keyring kr = { 0 };
	const struct tg_key *k;
	struct tg_err err;
	char hex[65];

	assert_null(tg_keyring_match(&kr, "demo-key"));
	digest_hex("demo-key", hex);
	assert_int_equal(tg_keyring_add(&kr, "demo", hex, svc, 2, &err), 0);
	k = tg_keyring_match(&kr, "demo-key");
	assert_non_null(k);
	assert_string_equal(k->name, "demo");
	assert_int_equal(k->services, TG_SVC_DEX | TG_SVC_SIM);
	assert_null(tg_keyring_match(&kr, "demo-keY"));
	assert_null(tg_keyring_match(&kr, "demo-key "));
	assert_null(tg_keyring_match(&kr, ""));
	assert_null(tg_keyring_match(&kr, NULL));
	tg_keyring_cleanup(&kr);
	assert_int_equal(kr.n, 0);
	assert_null(kr.keys);
}

static void
test_several_keys_and_masks(void **state)
{
	static const char *const dex[] = { "dex" }, *const sim[] = { "sim" },
	    *const all[] = { "admin", "dex", "sim", "dex" };
	struct tg_keyring kr = { 0 };
	char hex[65];
	size_t i;

	digest_hex("k-dex", hex);
	assert_int_equal(tg_keyring_add(&kr, "d", hex, dex, 1, NULL), 0);
	digest_hex("k-sim", hex);
	for (i = 0; i < strlen(hex); i++)	/* digests are accepted in upper case */
		if (hex[i] >= 'a' && hex[i] <= 'f')
			hex[i] -= 'a' - 'A';
	assert_int_equal(tg_keyring_add(&kr, "s", hex, sim, 1, NULL), 0);
	digest_hex("k-all", hex);
	assert_int_equal(tg_keyring_add(&kr, "a", hex, all, 4, NULL), 0);
	assert_int_equal(kr.n, 3);
	assert_string_equal(tg_keyring_match(&kr, "k-dex")->name, "d");
	assert_int_equal(tg_keyring_match(&kr, "k-dex")->services, TG_SVC_DEX);
	assert_string_equal(tg_keyring_match(&kr, "k-sim")->name, "s");
	assert_int_equal(tg_keyring_match(&kr, "k-sim")->services, TG_SVC_SIM);
	assert_string_equal(tg_keyring_match(&kr, "k-all")->name, "a");
	assert_int_equal(tg_keyring_match(&kr, "k-all")->services,
	    TG_SVC_DEX | TG_SVC_SIM | TG_SVC_ADMIN);
	assert_null(tg_keyring_match(&kr, "k-none"));
	tg_keyring_cleanup(&kr);
}

/* admin-read is its own service: the admin API's reads, never admin. */
static void
test_admin_read(void **state)
{
	static const char *const view[] = { "admin-read" }, *const bad[] = { "admin-write" };
	struct tg_keyring kr = { 0 };
	struct tg_err err = { "" };
	char hex[65];

	digest_hex("k-view", hex);
	assert_int_equal(tg_keyring_add(&kr, "v", hex, view, 1, NULL), 0);
	assert_int_equal(tg_keyring_match(&kr, "k-view")->services, TG_SVC_ADMIN_READ);
	assert_int_equal(TG_SVC_ADMIN_READ & (TG_SVC_DEX | TG_SVC_SIM | TG_SVC_ADMIN), 0);
	digest_hex("k-bad", hex);
	assert_int_equal(tg_keyring_add(&kr, "b", hex, bad, 1, &err), -1);
	assert_string_equal(err.msg, "unknown service \"admin-write\" (expected dex, sim, admin "
	    "or admin-read)");
	tg_keyring_cleanup(&kr);
}

static void
expect_add_error(struct tg_keyring *kr, const char *hex, const char *const *svc, size_t n,
    const char *msg)
{
	struct tg_err err = { "" };
	size_t before = kr->n;

	assert_int_equal(tg_keyring_add(kr, "k", hex, svc, n, &err), -1);
	assert_non_null(strstr(err.msg, msg));
	assert_int_equal(kr->n, before);
}

static void
test_errors(void **state)
{
	static const char *const dex[] = { "dex" }, *const bad[] = { "dex", "dexx" },
	    *const nul[] = { NULL };
	struct tg_keyring kr = { 0 };
	struct tg_err err;
	char hex[65], longer[67];

	digest_hex("x", hex);
	expect_add_error(&kr, NULL, dex, 1, "64 hex characters");
	expect_add_error(&kr, "", dex, 1, "64 hex characters");
	expect_add_error(&kr, hex + 1, dex, 1, "64 hex characters");
	memcpy(longer, hex, 64);
	memcpy(longer + 64, "0", 2);
	expect_add_error(&kr, longer, dex, 1, "64 hex characters");
	longer[64] = '\0';
	longer[10] = 'g';
	expect_add_error(&kr, longer, dex, 1, "64 hex characters");
	expect_add_error(&kr, hex, bad, 2, "unknown service \"dexx\"");
	expect_add_error(&kr, hex, nul, 1, "unknown service");
	expect_add_error(&kr, hex, NULL, 0, "no services");
	assert_int_equal(tg_keyring_add(&kr, NULL, hex, dex, 1, &err), -1);
	assert_int_equal(tg_keyring_add(&kr, "k", hex, dex, 1, &err), 0);
	expect_add_error(&kr, hex, dex, 1, "same digest as key \"k\"");
	tg_keyring_cleanup(&kr);
}

/* Matched keys are remembered (keys.c): each of many keys, more than the
 * table holds and so sharing its slots, is found again as itself; a near
 * miss of a remembered key, an empty key and a key too long to remember
 * get the same verdicts as the first time. */
static void
test_remembered(void **state)
{
	static const char *const svc[] = { "dex" };
	struct tg_keyring kr = { 0 };
	char key[300], name[16], hex[65];
	const struct tg_key *k;
	int i, round;

	for (i = 0; i < 150; i++) {
		snprintf(key, sizeof(key), "key-%03d-%s", i, i == 149 ? "x" : "");
		if (i == 149)
			memset(key + 9, 'x', 250), key[259] = '\0';
		snprintf(name, sizeof(name), "k%d", i);
		digest_hex(key, hex);
		assert_int_equal(tg_keyring_add(&kr, name, hex, svc, 1, NULL), 0);
	}
	for (round = 0; round < 3; round++)
		for (i = 0; i < 150; i++) {
			snprintf(key, sizeof(key), "key-%03d-%s", i, i == 149 ? "x" : "");
			if (i == 149)
				memset(key + 9, 'x', 250), key[259] = '\0';
			snprintf(name, sizeof(name), "k%d", i);
			assert_non_null(k = tg_keyring_match(&kr, key));
			assert_string_equal(k->name, name);
			key[0] ^= 1;	/* a near miss: same length, one bit */
			assert_null(tg_keyring_match(&kr, key));
			assert_null(tg_keyring_match(&kr, ""));
		}
	tg_keyring_cleanup(&kr);
	assert_null(tg_keyring_match(&kr, "key-000-"));
	assert_null(kr.seen);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_match),
		cmocka_unit_test(test_several_keys_and_masks),
		cmocka_unit_test(test_admin_read),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_remembered),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
