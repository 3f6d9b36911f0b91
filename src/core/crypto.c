/*
 * crypto.c - SHA-256, HMAC-SHA256 and base64 through OpenSSL. Used by
 * JWT signing (emulator), token cache keys, API key hashing and webhook
 * signatures.
 */
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/sha.h>

#include "tidegate/crypto.h"
#include "tidegate/util.h"

/* SHA-256 is hashed on every request (API keys): the algorithm is fetched
 * and a context made once, not per call as SHA256() does. Only the loop
 * thread may use these; the validation worker uses tg_sha256_oneshot. */
void
tg_sha256(const void *data, size_t n, uint8_t out[TG_SHA256_LEN])
{
	static EVP_MD *md;
	static EVP_MD_CTX *ctx;

	if (md == NULL)
		md = EVP_MD_fetch(NULL, "SHA256", NULL);
	if (ctx == NULL)
		ctx = EVP_MD_CTX_new();
	if (md == NULL || ctx == NULL || EVP_DigestInit_ex2(ctx, md, NULL) != 1 ||
	    EVP_DigestUpdate(ctx, data, n) != 1 || EVP_DigestFinal_ex(ctx, out, NULL) != 1)
		SHA256(data, n, out);	/* the slow way, should fetching fail */
}

void
tg_sha256_oneshot(const void *data, size_t n, uint8_t out[TG_SHA256_LEN])
{
	SHA256(data, n, out);
}

void
tg_hmac_sha256(const void *key, size_t keylen, const void *data, size_t n,
    uint8_t out[TG_SHA256_LEN])
{
	unsigned int len = TG_SHA256_LEN;

	HMAC(EVP_sha256(), key, (int)keylen, data, n, out, &len);
}

/* Every byte's two digits, looked up as one pair: request, trace and
 * span ids are drawn for every request. */
static const char pairs[513] =
	"000102030405060708090a0b0c0d0e0f"
	"101112131415161718191a1b1c1d1e1f"
	"202122232425262728292a2b2c2d2e2f"
	"303132333435363738393a3b3c3d3e3f"
	"404142434445464748494a4b4c4d4e4f"
	"505152535455565758595a5b5c5d5e5f"
	"606162636465666768696a6b6c6d6e6f"
	"707172737475767778797a7b7c7d7e7f"
	"808182838485868788898a8b8c8d8e8f"
	"909192939495969798999a9b9c9d9e9f"
	"a0a1a2a3a4a5a6a7a8a9aaabacadaeaf"
	"b0b1b2b3b4b5b6b7b8b9babbbcbdbebf"
	"c0c1c2c3c4c5c6c7c8c9cacbcccdcecf"
	"d0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
	"e0e1e2e3e4e5e6e7e8e9eaebecedeeef"
	"f0f1f2f3f4f5f6f7f8f9fafbfcfdfeff";

static uint64_t
pair(uint8_t b)
{
	uint16_t v;

	memcpy(&v, pairs + 2 * b, 2);
	return v;
}

void
tg_hex(const uint8_t *in, size_t n, char *out)
{
	size_t i = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
	uint64_t w;

	for (; n - i >= 4; i += 4) {	/* four bytes' digits in one store */
		w = pair(in[i]) | pair(in[i + 1]) << 16 | pair(in[i + 2]) << 32 |
		    pair(in[i + 3]) << 48;
		memcpy(out + 2 * i, &w, 8);
	}
#endif
	for (; i < n; i++)
		memcpy(out + 2 * i, pairs + 2 * in[i], 2);
	out[2 * n] = '\0';
}

char *
tg_b64_encode(const void *in, size_t n)
{
	char *out = tg_xmalloc(4 * ((n + 2) / 3) + 1);

	EVP_EncodeBlock((unsigned char *)out, in, (int)n);
	return out;
}

char *
tg_b64url_encode(const void *in, size_t n)
{
	char *out = tg_b64_encode(in, n), *p;
	size_t len;

	for (p = out; *p; p++) {
		if (*p == '+')
			*p = '-';
		else if (*p == '/')
			*p = '_';
	}
	len = strlen(out);
	while (len > 0 && out[len - 1] == '=')
		out[--len] = '\0';
	return out;
}

uint8_t *
tg_b64_decode(const char *in, size_t n, size_t *outlen)
{
	char *tmp = tg_xmalloc(n + 4);
	uint8_t *out;
	size_t i, len = 0, pad;
	int r;

	for (i = 0; i < n; i++) {
		char c = in[i];

		if (c == '-')
			c = '+';
		else if (c == '_')
			c = '/';
		else if (c == '=')
			break;
		if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
		    (c >= '0' && c <= '9') || c == '+' || c == '/')) {
			free(tmp);
			return NULL;
		}
		tmp[len++] = c;
	}
	if (len % 4 == 1) {
		free(tmp);
		return NULL;
	}
	pad = (4 - len % 4) % 4;
	for (i = 0; i < pad; i++)
		tmp[len++] = '=';
	out = tg_xmalloc(len / 4 * 3 + 1);
	r = EVP_DecodeBlock(out, (unsigned char *)tmp, (int)len);
	free(tmp);
	if (r < 0) {
		free(out);
		return NULL;
	}
	*outlen = (size_t)r - pad;
	out[*outlen] = '\0';
	return out;
}
