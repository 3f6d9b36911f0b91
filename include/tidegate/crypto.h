/*
 * crypto.h - the digests and encodings the project needs, all through
 * OpenSSL: SHA-256, HMAC-SHA256, base64 and base64url.
 */
#ifndef TIDEGATE_CRYPTO_H
#define TIDEGATE_CRYPTO_H

#include <stddef.h>
#include <stdint.h>

#define TG_SHA256_LEN 32

/** SHA-256 with a context kept for the loop thread: the event loop only.
 * data and out are borrowed. */
void tg_sha256(const void *data, size_t n, uint8_t out[TG_SHA256_LEN]);
/** The same digest, safe on any thread (a context per call): for worker jobs.
 * data and out are borrowed. */
void tg_sha256_oneshot(const void *data, size_t n, uint8_t out[TG_SHA256_LEN]);
/** HMAC-SHA-256 of data under key into out; all three borrowed. */
void tg_hmac_sha256(const void *key, size_t keylen, const void *data, size_t n,
    uint8_t out[TG_SHA256_LEN]);
/** Lower-case hex of n bytes into out (2n+1 bytes); in and out are borrowed. */
void tg_hex(const uint8_t *in, size_t n, char *out);

/** Standard base64 with padding; in is borrowed; returns a malloc'd string (the
 * caller takes ownership). */
char *tg_b64_encode(const void *in, size_t n);
/** base64url without padding (JWT); in is borrowed; returns a malloc'd string (the
 * caller takes ownership). */
char *tg_b64url_encode(const void *in, size_t n);
/**
 * Decode base64 or base64url, padded or not. Returns a malloc'd buffer
 * (NUL-terminated for convenience; the caller takes ownership) and its
 * length in *outlen, or NULL. in and outlen are borrowed.
 */
uint8_t *tg_b64_decode(const char *in, size_t n, size_t *outlen);

#endif
