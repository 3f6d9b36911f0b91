/*
 * sign.c - Standard Webhooks signatures: "whsec_" secrets, HMAC-SHA256 of
 * "id.timestamp.body" streamed through OpenSSL's EVP_MAC (a payload file
 * of hundreds of MB is hashed piecewise, never held in memory), the
 * "v1,<base64>" header with one signature per secret during a rotation,
 * and the receiver's check. Called by deliver.c for every attempt and by
 * tests and receivers through webhook.h.
 *
 * Secrets and signatures never reach an error message or a log line.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "tidegate/crypto.h"
#include "tidegate/webhook.h"

#define PREFIX		"whsec_"
#define SIG_B64_LEN	44	/* base64 of 32 bytes, padded */

struct tg_webhook_signer {
	EVP_MAC *mac;
	EVP_MAC_CTX **ctx;
	size_t n;
};

/* Standard base64, optional padding, nothing after the padding. */
static int
b64_shape_ok(const char *s, size_t n)
{
	size_t i, pad = 0;

	for (i = 0; i < n; i++) {
		if (s[i] == '=') {
			pad++;
			continue;
		}
		if (pad > 0 || !(isalnum((unsigned char)s[i]) || s[i] == '+' || s[i] == '/'))
			return 0;
	}
	return pad <= 2 && n > 0;
}

uint8_t *
tg_webhook_secret_decode(const char *secret, size_t *len, struct tg_err *err)
{
	const char *b64;
	uint8_t *key = NULL;
	size_t n;

	if (secret == NULL || strncmp(secret, PREFIX, strlen(PREFIX)) != 0) {
		tg_err_set(err, "webhook secret must start with \"%s\"", PREFIX);
		goto done;
	}
	b64 = secret + strlen(PREFIX);
	n = strlen(b64);
	if (!b64_shape_ok(b64, n) || (key = tg_b64_decode(b64, n, len)) == NULL) {
		tg_err_set(err, "webhook secret is not %s followed by base64", PREFIX);
		goto done;
	}
	if (*len < TG_WEBHOOK_KEY_MIN || *len > TG_WEBHOOK_KEY_MAX) {
		tg_err_set(err, "webhook secret decodes to %zu bytes, want %d to %d", *len,
		    TG_WEBHOOK_KEY_MIN, TG_WEBHOOK_KEY_MAX);
		OPENSSL_cleanse(key, *len);
		free(key);
		key = NULL;
	}
done:
	return key;
}

static int
id_ok(const char *id)
{
	return id != NULL && *id != '\0' && strchr(id, '.') == NULL;
}

static EVP_MAC_CTX *
hmac_new(EVP_MAC *mac, const uint8_t *key, size_t keylen)
{
	OSSL_PARAM params[2];
	EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(mac);

	params[0] = OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0);
	params[1] = OSSL_PARAM_construct_end();
	if (ctx != NULL && EVP_MAC_init(ctx, key, keylen, params) != 1) {
		EVP_MAC_CTX_free(ctx);
		ctx = NULL;
	}
	return ctx;
}

struct tg_webhook_signer *
tg_webhook_signer_new(const char *const *secrets, size_t nsecrets, const char *id, int64_t ts,
    struct tg_err *err)
{
	struct tg_webhook_signer *s = tg_xcalloc(1, sizeof(*s));
	char head[128];
	uint8_t *key;
	size_t i, klen;
	int n;

	if (nsecrets == 0 || !id_ok(id) || ts < 0) {
		tg_err_set(err, nsecrets == 0 ? "no webhook secret" :
		    "webhook id must be non-empty without '.', timestamp >= 0");
		goto fail;
	}
	n = snprintf(head, sizeof(head), "%s.%lld.", id, (long long)ts);
	if (n < 0 || (size_t)n >= sizeof(head)) {
		tg_err_set(err, "webhook id too long");
		goto fail;
	}
	if ((s->mac = EVP_MAC_fetch(NULL, "HMAC", NULL)) == NULL) {
		tg_err_set(err, "HMAC unavailable");
		goto fail;
	}
	s->ctx = tg_xcalloc(nsecrets, sizeof(*s->ctx));
	for (i = 0; i < nsecrets; i++, s->n++) {
		if ((key = tg_webhook_secret_decode(secrets[i], &klen, err)) == NULL)
			goto fail;
		s->ctx[i] = hmac_new(s->mac, key, klen);
		OPENSSL_cleanse(key, klen);
		free(key);
		if (s->ctx[i] == NULL) {
			tg_err_set(err, "HMAC setup failed");
			goto fail;
		}
	}
	tg_webhook_signer_update(s, head, (size_t)n);
	return s;
fail:
	tg_webhook_signer_free(s);
	return NULL;
}

void
tg_webhook_signer_update(struct tg_webhook_signer *s, const void *data, size_t n)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		EVP_MAC_update(s->ctx[i], data, n);
}

char *
tg_webhook_signer_final(struct tg_webhook_signer *s)
{
	uint8_t mac[TG_SHA256_LEN];
	char *out = tg_xmalloc(s->n * (SIG_B64_LEN + 4) + 1), *b64, *p = out;
	size_t i, len;

	*p = '\0';
	for (i = 0; i < s->n; i++) {
		len = sizeof(mac);
		if (EVP_MAC_final(s->ctx[i], mac, &len, sizeof(mac)) != 1)
			memset(mac, 0, sizeof(mac));	/* cannot happen once init passed */
		b64 = tg_b64_encode(mac, sizeof(mac));
		p += sprintf(p, "%sv1,%s", i > 0 ? " " : "", b64);
		free(b64);
	}
	OPENSSL_cleanse(mac, sizeof(mac));
	return out;
}

void
tg_webhook_signer_free(struct tg_webhook_signer *s)
{
	size_t i;

	if (s == NULL)
		return;
	for (i = 0; i < s->n; i++)
		EVP_MAC_CTX_free(s->ctx[i]);
	free(s->ctx);
	EVP_MAC_free(s->mac);
	free(s);
}

char *
tg_webhook_sign(const char *const *secrets, size_t nsecrets, const char *id, int64_t ts,
    const void *body, size_t len, struct tg_err *err)
{
	struct tg_webhook_signer *s = tg_webhook_signer_new(secrets, nsecrets, id, ts, err);
	char *sig = NULL;

	if (s == NULL)
		goto done;
	tg_webhook_signer_update(s, body, len);
	sig = tg_webhook_signer_final(s);
done:
	tg_webhook_signer_free(s);
	return sig;
}

/* "1614265330" and nothing else: no sign, spaces or leading zeros (the
 * signature covers the text as sent), fits in int64. */
static int
parse_ts(const char *ts, int64_t *out)
{
	size_t n = ts ? strlen(ts) : 0, i;

	if (n == 0 || n > 18 || (n > 1 && ts[0] == '0'))
		return -1;
	*out = 0;
	for (i = 0; i < n; i++) {
		if (!isdigit((unsigned char)ts[i]))
			return -1;
		*out = *out * 10 + (ts[i] - '0');
	}
	return 0;
}

/* 1 when one "v1,<b64>" entry of header equals expect (a "v1,…" string). */
static int
header_matches(const char *header, const char *expect)
{
	size_t elen = strlen(expect), n;
	const char *p = header;
	int found = 0;

	while (*p != '\0') {
		while (*p == ' ')
			p++;
		n = strcspn(p, " ");
		/* Every entry is compared, so timing says nothing about which matched. */
		if (n == elen && tg_mem_equal_ct(p, expect, elen))
			found = 1;
		p += n;
	}
	return found;
}

int
tg_webhook_verify(const char *secret, const char *id, const char *ts,
    const char *sig_header, const void *body, size_t len, int64_t now_s, int64_t tolerance_s,
    struct tg_err *err)
{
	const char *secrets[1] = { secret };
	char *expect = NULL;
	int64_t t;
	int rc = -1;

	if (sig_header == NULL || parse_ts(ts, &t) != 0) {
		tg_err_set(err, sig_header == NULL ? "no webhook-signature" :
		    "webhook-timestamp is not unix seconds");
		goto done;
	}
	if (tolerance_s > 0 && (t < now_s - tolerance_s || t > now_s + tolerance_s)) {
		tg_err_set(err, "webhook-timestamp outside the tolerance of %llds",
		    (long long)tolerance_s);
		goto done;
	}
	if ((expect = tg_webhook_sign(secrets, 1, id, t, body, len, err)) == NULL)
		goto done;
	if (!header_matches(sig_header, expect)) {
		tg_err_set(err, "no matching v1 signature");
		goto done;
	}
	rc = 0;
done:
	free(expect);
	return rc;
}
