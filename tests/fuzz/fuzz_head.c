/*
 * fuzz_head.c - raw request head bytes through the strict parser of the
 * front door (head.h): no crash, no read past the input, and an accepted
 * head's fields lie inside it with the framing facts consistent.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/head.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = malloc(size + 1);	/* exact-size copy: ASan sees any overread */
	struct tg_head h;
	size_t i;

	if (size > 0)
		memcpy(buf, data, size);
	if (tg_head_parse(buf, size, &h) == TG_HEAD_OK) {
		if (h.chunked && h.length >= 0)
			abort();
		if (h.target < buf || h.target + h.tlen > buf + size)
			abort();
		for (i = 0; i < h.nfields; i++)
			if (h.f[i].value < buf || h.f[i].value + h.f[i].vlen > buf + size)
				abort();
	}
	free(buf);
	return 0;
}
