/*
 * fuzz_export_check.c - libFuzzer target for the export request checks
 * (src/dex/export_check.c). The input's first line is the export kind, the
 * rest the body; each input is checked in lenient and strict mode, and
 * every problem and output is freed so the leak checker sees the lot.
 * Seeds: tests/fuzz/corpus/export_check/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/dex.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* What every caller relies on, whatever the input. */
static void
check_once(const char *kind, const char *body, size_t len, int strict)
{
	struct tg_export_opts o = { strict, strict ? "statuses" : NULL };
	struct tg_problems p = { 0 };
	size_t outlen = 0, i;
	char *out = NULL;
	int rc;

	rc = tg_export_check(kind, body, len, &o, &out, &outlen, &p);
	if ((rc == 0) != (p.total == 0) || (rc == 0) != (out != NULL) ||
	    (out != NULL && strlen(out) != outlen) || p.n > p.total)
		abort();
	for (i = 0; i < p.n; i++)
		if (p.v[i].path == NULL || p.v[i].message == NULL || p.v[i].code == NULL ||
		    (p.v[i].path[0] != '\0' && p.v[i].path[0] != '/'))
			abort();
	free(out);
	tg_problems_cleanup(&p);
}

static int
one_input(const uint8_t *data, size_t size)
{
	const char *nl = memchr(data, '\n', size);
	size_t klen = nl != NULL ? (size_t)(nl - (const char *)data) : size;
	const char *body = nl != NULL ? nl + 1 : "";
	size_t blen = nl != NULL ? size - klen - 1 : 0;
	char *kind = malloc(klen + 1);

	memcpy(kind, data, klen);
	kind[klen] = '\0';
	check_once(kind, body, blen, 0);
	check_once(kind, body, blen, 1);
	free(kind);
	return 0;
}

/* An empty input arrives as NULL (replay.c): split it as the empty string. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return one_input(data != NULL ? data : (const uint8_t *)"", size);
}
