/*
 * fuzz_import_check.c - libFuzzer target for src/dex/import_check.c, the
 * streaming check of activity imports that reads request bodies straight
 * from the network.
 *
 * Input: the first byte selects the body kind (bit 0: JSON or multipart
 * with the fixed boundary below), the size of the pieces the body is cut
 * into (bits 1-6) and a part size limit (bit 7); the rest is the body. The
 * body is checked twice, as one chain and as pieces, and the two verdicts
 * must be identical: where chains end must never change a verdict.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "tidegate/dex.h"

#define CTYPE "multipart/form-data; boundary=fuzzbnd"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct verdict {
	int rc, too_large;
	struct tg_import_result res;
	struct tg_problems p;
};

static void
check(struct verdict *v, const uint8_t *data, size_t size, uint8_t sel, size_t piece)
{
	struct evbuffer *b = evbuffer_new();
	size_t off, n, max_part = (sel & 0x80) ? 64 : 0;
	uint32_t x = sel + (uint32_t)size;

	/* Piece sizes wander between 1 and 2 * piece so no cut pattern repeats. */
	for (off = 0; off < size; off += n) {
		x = x * 1103515245u + 12345u;
		n = piece == 0 ? size : 1 + (x >> 16) % (2 * piece);
		if (n > size - off)
			n = size - off;
		evbuffer_add_reference(b, data + off, n, NULL, NULL);
	}
	memset(v, 0, sizeof(*v));
	v->p.max = 20;
	if (sel & 1)
		v->rc = tg_import_check_multipart(b, CTYPE, max_part, &v->res, &v->p,
		    &v->too_large);
	else
		v->rc = tg_import_check_json(b, &v->res, &v->p);
	evbuffer_free(b);
}

static void
same(const struct verdict *a, const struct verdict *b)
{
	size_t i;

	if (a->rc != b->rc || a->too_large != b->too_large || a->res.rows != b->res.rows ||
	    a->res.bytes != b->res.bytes || a->p.total != b->p.total || a->p.n != b->p.n)
		abort();
	for (i = 0; i < a->p.n; i++) {
		if (strcmp(a->p.v[i].path, b->p.v[i].path) != 0 ||
		    strcmp(a->p.v[i].code, b->p.v[i].code) != 0 ||
		    strcmp(a->p.v[i].message, b->p.v[i].message) != 0) {
			fprintf(stderr, "verdicts differ at %zu: %s %s %s | %s %s %s\n", i,
			    a->p.v[i].path, a->p.v[i].code, a->p.v[i].message, b->p.v[i].path,
			    b->p.v[i].code, b->p.v[i].message);
			abort();
		}
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct verdict whole, pieces;
	uint8_t sel;

	if (size < 1)
		return 0;
	sel = data[0];
	check(&whole, data + 1, size - 1, sel, 0);
	check(&pieces, data + 1, size - 1, sel, 1 + ((sel >> 1) & 0x3f));
	if ((whole.rc == 0) != (whole.p.total == 0))
		abort();
	same(&whole, &pieces);
	tg_problems_cleanup(&whole.p);
	tg_problems_cleanup(&pieces.p);
	return 0;
}
