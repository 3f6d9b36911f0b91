/*
 * ids.c - random identifiers from OpenSSL's CSPRNG. UUIDs, made for every
 * request, come from a pool refilled 4 KiB at a time, so that one RAND_bytes
 * call (a DRBG round and a fork check) serves 256 of them; the bytes are
 * the same CSPRNG output, used once each. The process does not fork after
 * start, so a pool is never shared between processes. Also the W3C
 * traceparent parser, one for every module: the gateway continues a
 * caller's trace with it (trace.c), the token source and the upstream
 * client name the trace of what they sent in their log lines.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/rand.h>

#include "tidegate/crypto.h"
#include "tidegate/ids.h"

void
tg_id_random(void *buf, size_t n)
{
	if (RAND_bytes(buf, (int)n) != 1) {
		fputs("{\"level\":\"error\",\"event\":\"rand_failed\"}\n", stderr);
		abort();
	}
}

#define POOL_LEN	4096

void
tg_id_uuid4(char out[TG_UUID_LEN])
{
	static uint8_t pool[POOL_LEN];
	static size_t used = POOL_LEN;
	uint8_t b[16];
	char hex[33];

	if (used == POOL_LEN) {
		tg_id_random(pool, sizeof(pool));
		used = 0;
	}
	memcpy(b, pool + used, sizeof(b));
	explicit_bzero(pool + used, sizeof(b));
	used += sizeof(b);
	b[6] = (b[6] & 0x0f) | 0x40;
	b[8] = (b[8] & 0x3f) | 0x80;
	/* the 32 digits in one pass (tg_hex), then set out 8-4-4-4-12 */
	tg_hex(b, sizeof(b), hex);
	memcpy(out, hex, 8);
	out[8] = '-';
	memcpy(out + 9, hex + 8, 4);
	out[13] = '-';
	memcpy(out + 14, hex + 12, 4);
	out[18] = '-';
	memcpy(out + 19, hex + 16, 4);
	out[23] = '-';
	memcpy(out + 24, hex + 20, 13);		/* with its NUL */
}

void
tg_id_hex(char *out, size_t nbytes)
{
	uint8_t b[64];
	size_t done = 0, n;

	while (done < nbytes) {
		n = nbytes - done > sizeof(b) ? sizeof(b) : nbytes - done;
		tg_id_random(b, n);
		tg_hex(b, n, out + 2 * done);
		done += n;
	}
	out[2 * nbytes] = '\0';
}

int
tg_id_hex_ok(const char *s, size_t n)
{
	size_t i;
	int nonzero = 0;

	for (i = 0; i < n; i++) {
		if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
			return 0;
		nonzero |= s[i] != '0';
	}
	return nonzero;
}

/* version-trace_id-parent_id-flags: 2-32-16-2 lower-case hex digits; only
 * version 00 is known, so its length is exact. */
int
tg_id_trace_of(const char *tp, char id[33])
{
	id[0] = '\0';
	if (tp == NULL || strlen(tp) != 55 || strncmp(tp, "00-", 3) != 0 ||
	    tp[35] != '-' || tp[52] != '-')
		return 0;
	if (!tg_id_hex_ok(tp + 3, 32) || !tg_id_hex_ok(tp + 36, 16))
		return 0;
	if (!((tp[53] >= '0' && tp[53] <= '9') || (tp[53] >= 'a' && tp[53] <= 'f')) ||
	    !((tp[54] >= '0' && tp[54] <= '9') || (tp[54] >= 'a' && tp[54] <= 'f')))
		return 0;
	memcpy(id, tp + 3, 32);
	id[32] = '\0';
	return 1;
}
