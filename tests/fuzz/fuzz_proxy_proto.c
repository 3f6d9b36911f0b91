/*
 * fuzz_proxy_proto.c - raw bytes through the PROXY protocol parser
 * (proxy_proto.h): no crash, no read past the input, a length within the
 * input and the limits, an address that is one; and a verdict that only
 * grows with the input (a prefix asks for more, or fails as the whole).
 */
#include <arpa/inet.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/proxy_proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	unsigned char *buf = malloc(size + 1);	/* exact-size copy: ASan sees any overread */
	struct tg_proxy_hdr h, p;
	unsigned char bin[16];
	int n, m;

	if (size > 0)
		memcpy(buf, data, size);
	n = tg_http_proxy_parse(buf, size, &h);
	if (n > (int)size || n > TG_PROXY_V2_MAX)
		abort();
	if (n > 0 && !h.local && inet_pton(AF_INET, h.src, bin) != 1 &&
	    inet_pton(AF_INET6, h.src, bin) != 1)
		abort();
	if (size > 0) {
		m = tg_http_proxy_parse(buf, size - 1, &p);
		if ((n == -1 && m > 0) || (n == 0 && m != 0) || (n > 0 && m > 0 && m != n))
			abort();
	}
	free(buf);
	return 0;
}
