/*
 * test_sign.c - Standard Webhooks signing: the spec's published
 * vector, streaming equals one-shot, key rotation (one signature per
 * secret), the receiver's check (wrong secret, altered body, id or
 * timestamp, tolerance), and malformed "whsec_" secrets.
 *
 * With --emit it prints signed samples as JSON lines instead, for the
 * independent Python verifier (tests/integration/test_webhook_sign.py).
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
#include "tidegate/log.h"
#include "tidegate/webhook.h"

#define V_SECRET	"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define V_ID		"msg_p5jXN8AQM9LWM0D4loKWxJek"
#define V_TS		1614265330
#define V_BODY		"{\"test\": 2432232314}"
#define V_SIG		"v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
#define OTHER_SECRET	"whsec_c2VjcmV0LW51bWJlci10d28tZm9yLXJvdGF0aW9u"

static char *
sign1(const char *secret, const char *id, int64_t ts, const char *body)
{
	const char *s[1] = { secret };
	struct tg_err err;
	char *sig = tg_webhook_sign(s, 1, id, ts, body, strlen(body), &err);

	if (sig == NULL)
		fail_msg("sign: %s", err.msg);
	return sig;
}

static void
test_published_vector(void **state)
{
	char *sig = sign1(V_SECRET, V_ID, V_TS, V_BODY);

	assert_string_equal(sig, V_SIG);
	free(sig);
}

static void
test_streaming(void **state)
{
	const char *s[1] = { V_SECRET };
	struct tg_webhook_signer *sg;
	struct tg_err err;
	const char *body = V_BODY;
	char *sig;
	size_t i;

	sg = tg_webhook_signer_new(s, 1, V_ID, V_TS, &err);
	assert_non_null(sg);
	for (i = 0; body[i] != '\0'; i++)
		tg_webhook_signer_update(sg, body + i, 1);
	sig = tg_webhook_signer_final(sg);
	assert_string_equal(sig, V_SIG);
	free(sig);
	tg_webhook_signer_free(sg);
}

static void
test_rotation(void **state)
{
	const char *s[2] = { OTHER_SECRET, V_SECRET };
	struct tg_err err;
	char *sig, *first;

	sig = tg_webhook_sign(s, 2, V_ID, V_TS, V_BODY, strlen(V_BODY), &err);
	assert_non_null(sig);
	first = sign1(OTHER_SECRET, V_ID, V_TS, V_BODY);
	/* "v1,<new> v1,<old>": the current secret first, then the old one. */
	assert_int_equal(strncmp(sig, first, strlen(first)), 0);
	assert_int_equal(sig[strlen(first)], ' ');
	assert_string_equal(sig + strlen(first) + 1, V_SIG);
	assert_int_equal(tg_webhook_verify(V_SECRET, V_ID, "1614265330", sig, V_BODY,
	    strlen(V_BODY), 0, 0, &err), 0);
	assert_int_equal(tg_webhook_verify(OTHER_SECRET, V_ID, "1614265330", sig, V_BODY,
	    strlen(V_BODY), 0, 0, &err), 0);
	free(first);
	free(sig);
}

static int
verify(const char *secret, const char *id, const char *ts, const char *hdr, const char *body,
    int64_t now, int64_t tol)
{
	struct tg_err err;

	return tg_webhook_verify(secret, id, ts, hdr, body, strlen(body), now, tol, &err);
}

static void
test_verify(void **state)
{
	const char *ts = "1614265330", *b = V_BODY;

	assert_int_equal(verify(V_SECRET, V_ID, ts, V_SIG, b, 0, 0), 0);
	assert_int_equal(verify(OTHER_SECRET, V_ID, ts, V_SIG, b, 0, 0), -1);
	assert_int_equal(verify(V_SECRET, V_ID, ts, V_SIG, "{\"test\": 2432232315}", 0, 0), -1);
	assert_int_equal(verify(V_SECRET, "msg_p5jXN8AQM9LWM0D4loKWxJeK", ts, V_SIG, b, 0, 0), -1);
	assert_int_equal(verify(V_SECRET, V_ID, "1614265331", V_SIG, b, 0, 0), -1);
	/* Other schemes and unknown entries are skipped, not fatal. */
	assert_int_equal(verify(V_SECRET, V_ID, ts, "v1a,AAAA " V_SIG " v2,zz", b, 0, 0), 0);
	assert_int_equal(verify(V_SECRET, V_ID, ts, "v1,AAAA", b, 0, 0), -1);
	assert_int_equal(verify(V_SECRET, V_ID, ts, "", b, 0, 0), -1);
	assert_int_equal(verify(V_SECRET, V_ID, "01614265330", V_SIG, b, 0, 0), -1);
	assert_int_equal(verify(V_SECRET, V_ID, "16142653x0", V_SIG, b, 0, 0), -1);
	assert_int_equal(verify(V_SECRET, V_ID, "-1", V_SIG, b, 0, 0), -1);
	/* Replay window: five minutes either way. */
	assert_int_equal(verify(V_SECRET, V_ID, ts, V_SIG, b, V_TS + 300, 300), 0);
	assert_int_equal(verify(V_SECRET, V_ID, ts, V_SIG, b, V_TS + 301, 300), -1);
	assert_int_equal(verify(V_SECRET, V_ID, ts, V_SIG, b, V_TS - 301, 300), -1);
}

static void
malformed(const char *secret)
{
	struct tg_err err = { "" };
	uint8_t *key;
	size_t len;
	const char *b64 = secret != NULL && strlen(secret) > 6 ? secret + 6 : NULL;

	key = tg_webhook_secret_decode(secret, &len, &err);
	if (key != NULL)
		fail_msg("accepted a malformed secret");
	assert_true(err.msg[0] != '\0');
	/* The reason never repeats the secret. */
	if (b64 != NULL && strlen(b64) >= 4)
		assert_null(strstr(err.msg, b64));
}

static void
test_malformed_secrets(void **state)
{
	const char *s[1];
	struct tg_err err;
	uint8_t *key;
	size_t len;

	malformed(NULL);
	malformed("");
	malformed("whsec_");
	malformed("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
	malformed("whsk_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
	malformed("whsec_MfKQ9r8GKYqrTwjUPD8I!PZIo2LaLaSw");
	malformed("whsec_MfKQ9r8GKYqrTwjU=D8ILPZIo2LaLaSw");
	malformed("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw===");
	malformed("whsec_c2hvcnQta2V5");			/* 9 bytes: too short */
	key = tg_webhook_secret_decode(V_SECRET, &len, &err);
	assert_non_null(key);
	assert_int_equal(len, 24);
	free(key);
	s[0] = "whsec_nope";
	assert_null(tg_webhook_sign(s, 1, V_ID, V_TS, "x", 1, &err));
	assert_null(tg_webhook_sign(s, 0, V_ID, V_TS, "x", 1, &err));
	s[0] = V_SECRET;
	assert_null(tg_webhook_sign(s, 1, "msg.1", V_TS, "x", 1, &err));
	assert_null(tg_webhook_sign(s, 1, "", V_TS, "x", 1, &err));
}

/* ---- --emit: samples for the Python verifier ---- */

static void
emit_one(const char *const *secrets, size_t n, const uint8_t *body, size_t len)
{
	char id[40], hex[33], *sig, *b64;
	struct tg_err err;
	size_t i;
	int64_t ts = 1700000000 + (int64_t)len;

	tg_id_hex(hex, 16);
	snprintf(id, sizeof(id), "msg_%s", hex);
	sig = tg_webhook_sign(secrets, n, id, ts, body, len, &err);
	b64 = tg_b64_encode(body, len);
	printf("{\"secrets\": [");
	for (i = 0; i < n; i++)
		printf("%s\"%s\"", i ? ", " : "", secrets[i]);
	printf("], \"id\": \"%s\", \"timestamp\": \"%lld\", \"signature\": \"%s\","
	    " \"body\": \"%s\"}\n", id, (long long)ts, sig, b64);
	free(sig);
	free(b64);
}

/* Relay URL segments: the one made under a key passes under it alone;
 * every other shape, a MAC of another key, a byte changed anywhere, or
 * upper-case hex is refused. */
static void
test_relay_mac(void **state)
{
	uint8_t key[TG_WEBHOOK_RELAY_KEY_LEN], other[TG_WEBHOOK_RELAY_KEY_LEN];
	const char *wid = "msg_0123456789abcdef0123456789abcdef";
	char seg[TG_WEBHOOK_RELAY_SEG_LEN], bad[TG_WEBHOOK_RELAY_SEG_LEN + 8];
	char id[TG_WEBHOOK_ID_LEN];
	size_t i;

	(void)state;
	memset(key, 7, sizeof(key));
	memset(other, 8, sizeof(other));
	tg_webhook_relay_seg(key, wid, seg);
	assert_int_equal(strlen(seg), TG_WEBHOOK_RELAY_SEG_LEN - 1);
	assert_memory_equal(seg, wid, strlen(wid));
	assert_int_equal(seg[strlen(wid)], '.');
	assert_int_equal(tg_webhook_relay_check(key, seg, id), 0);
	assert_string_equal(id, wid);
	assert_int_equal(tg_webhook_relay_check(other, seg, id), -1);
	assert_string_equal(id, "");
	for (i = 0; i < strlen(seg); i++) {	/* any byte changed */
		strcpy(bad, seg);
		bad[i] = bad[i] == 'a' ? 'b' : 'a';
		assert_int_equal(tg_webhook_relay_check(key, bad, id), -1);
	}
	snprintf(bad, sizeof(bad), "%s0", seg);		/* longer */
	assert_int_equal(tg_webhook_relay_check(key, bad, id), -1);
	snprintf(bad, sizeof(bad), "%.*s", (int)strlen(seg) - 1, seg);	/* shorter */
	assert_int_equal(tg_webhook_relay_check(key, bad, id), -1);
	for (i = strlen(wid) + 1; seg[i] != '\0'; i++)		/* upper-case hex */
		bad[i] = (char)(seg[i] >= 'a' ? seg[i] - 32 : seg[i]);
	memcpy(bad, seg, strlen(wid) + 1);
	bad[strlen(seg)] = '\0';
	if (strcmp(bad, seg) != 0)
		assert_int_equal(tg_webhook_relay_check(key, bad, id), -1);
	assert_int_equal(tg_webhook_relay_check(key, wid, id), -1);	/* bare */
	assert_int_equal(tg_webhook_relay_check(key, "", id), -1);
	assert_true(tg_webhook_relay_bare(wid));
	assert_false(tg_webhook_relay_bare(seg));
	assert_false(tg_webhook_relay_bare("msg_0123456789ABCDEF0123456789abcdef"));
	tg_webhook_relay_seg(other, wid, bad);		/* another key, another MAC */
	assert_string_not_equal(bad, seg);
}

static int
emit(void)
{
	static uint8_t body[70000];
	char *keys[3], *b64;
	uint8_t raw[32];
	size_t i, lens[] = { 0, 1, 20, 63, 64, 65, 1000, sizeof(body) };

	for (i = 0; i < 3; i++) {
		tg_id_random(raw, sizeof(raw));
		b64 = tg_b64_encode(raw, sizeof(raw));
		keys[i] = tg_xasprintf("whsec_%s", b64);
		free(b64);
	}
	tg_id_random(body, sizeof(body));
	emit_one((const char *const []){ V_SECRET }, 1, (const uint8_t *)V_BODY, strlen(V_BODY));
	for (i = 0; i < TG_NELEM(lens); i++)
		emit_one((const char *const *)keys, 1 + i % 3, body, lens[i]);
	for (i = 0; i < 3; i++)
		free(keys[i]);
	return 0;
}

int
main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_published_vector),
		cmocka_unit_test(test_streaming),
		cmocka_unit_test(test_rotation),
		cmocka_unit_test(test_verify),
		cmocka_unit_test(test_malformed_secrets),
		cmocka_unit_test(test_relay_mac),
	};

	if (argc > 1 && strcmp(argv[1], "--emit") == 0)
		return emit();
	tg_log_init(stderr, TG_LOG_OFF);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
