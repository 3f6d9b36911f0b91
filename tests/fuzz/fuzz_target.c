/*
 * fuzz_target.c - raw bytes as a request target through
 * tg_http_target_normalise. Aborts when an accepted target's normalised
 * path breaks what routing and the vendor request line rely on: begins
 * with '/', only request-target bytes, every '%' a two-digit uppercase
 * escape of a reserved or non-ASCII byte (never '/', '\' or a CTL), no
 * empty segment but a trailing one, no dot segment; and it is a fixed
 * point (normalising it again gives it back). Seeds: corpus/target.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/target.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int
hexup(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F');
}

static void
check_escape(const char *p)
{
	int v;

	if (!hexup(p[1]) || !hexup(p[2]))
		abort();
	v = (int)strtol((char[]){ p[1], p[2], '\0' }, NULL, 16);
	if (v == '/' || v == '\\' || v < 0x20 || v == 0x7f ||
	    (v >= 'a' && v <= 'z') || (v >= 'A' && v <= 'Z') || (v >= '0' && v <= '9') ||
	    v == '-' || v == '.' || v == '_' || v == '~')
		abort();
}

static void
check_path(const char *p)
{
	const char *seg = p, *e;
	size_t n;

	if (p[0] != '/')
		abort();
	for (; *p; p++) {
		if ((unsigned char)*p <= 0x20 || (unsigned char)*p >= 0x7f ||
		    strchr("\"<>\\^`{|}#[]?", *p) != NULL)
			abort();
		if (*p == '%')
			check_escape(p);
	}
	while (*seg == '/') {
		seg++;
		e = strchr(seg, '/');
		n = e ? (size_t)(e - seg) : strlen(seg);
		if ((n == 0 && e != NULL) || (n == 1 && seg[0] == '.') ||
		    (n == 2 && seg[0] == '.' && seg[1] == '.'))
			abort();
		seg += n;
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tg_target t, again;
	struct tg_err err;

	if (size > 16384)
		return 0;
	if (tg_http_target_normalise((const char *)data, size, &t, &err) != 0) {
		if (t.path != NULL || t.query != NULL || t.rule == NULL)
			abort();
		return 0;
	}
	check_path(t.path);
	if (tg_http_target_normalise(t.path, strlen(t.path), &again, &err) != 0 ||
	    strcmp(again.path, t.path) != 0)
		abort();
	tg_http_target_cleanup(&again);
	tg_http_target_cleanup(&t);
	return 0;
}
