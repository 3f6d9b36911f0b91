/*
 * ids.c - random identifiers from OpenSSL's CSPRNG.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

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

void
tg_id_uuid4(char out[TG_UUID_LEN])
{
	uint8_t b[16];

	tg_id_random(b, sizeof(b));
	b[6] = (b[6] & 0x0f) | 0x40;
	b[8] = (b[8] & 0x3f) | 0x80;
	snprintf(out, TG_UUID_LEN,
	    "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
	    b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
	    b[12], b[13], b[14], b[15]);
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
