/*
 * fuzz_multipart.c - the incremental multipart/form-data parser. The first
 * byte chooses how the rest is cut into feeds, so boundaries and CRLFs land
 * across reads; the verdict must not depend on the cut (checked by feeding
 * the same input whole).
 */
#include <stdint.h>
#include <stdlib.h>

#include "tidegate/multipart.h"

static int
on_begin(void *arg, const char *name, const char *filename, const char *ctype)
{
	(*(size_t *)arg)++;
	return 0;
}

static int
on_data(void *arg, const char *data, size_t len)
{
	return 0;
}

static int
on_end(void *arg)
{
	return 0;
}

static int
parse(const uint8_t *data, size_t size, size_t step, size_t *parts)
{
	static const struct tg_multipart_cbs cbs = { on_begin, on_data, on_end };
	struct tg_multipart *mp = tg_multipart_new("XyZzY", &cbs, parts, 4096);
	struct tg_err err;
	size_t off = 0, n;
	int rc = 0;

	while (off < size && rc == 0) {
		n = size - off < step ? size - off : step;
		rc = tg_multipart_feed(mp, (const char *)data + off, n, &err);
		off += n;
	}
	if (rc == 0)
		rc = tg_multipart_finish(mp, &err);
	tg_multipart_free(mp);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t step, whole_parts = 0, cut_parts = 0;
	int whole, cut;

	if (size < 1)
		return 0;
	step = (size_t)data[0] % 17 + 1;
	whole = parse(data + 1, size - 1, size, &whole_parts);
	cut = parse(data + 1, size - 1, step, &cut_parts);
	if (whole != cut || whole_parts != cut_parts)
		abort();	/* the verdict depended on how the input was cut */
	return 0;
}
