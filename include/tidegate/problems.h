/*
 * problems.h - the list of problems a request check found.
 *
 * Every validator collects ALL problems of a request into struct
 * tg_problems (JSON Pointer, message, stable rule code), so a caller fixes
 * its request in one round trip. The gateway turns a non-empty list into a
 * 400 with `details` (src/gateway/validate.c). Implemented in
 * src/core/problems.c; the checks themselves are per API (dex.h, sim.h).
 */
#ifndef TIDEGATE_PROBLEMS_H
#define TIDEGATE_PROBLEMS_H

#include <stddef.h>

#include "tidegate/errors.h"
#include "tidegate/util.h"

struct tg_problems {
	struct tg_detail *v;	/* path and message owned (malloc'd); code borrowed */
	size_t n, cap;
	size_t max;		/* stop recording past this many (0: 1000) */
	size_t total;		/* problems found, recorded or not */
};

/** Record a problem (path is a JSON Pointer, borrowed and copied; code a static
 * string, borrowed; fmt borrowed). p is borrowed. */
void tg_problems_add(struct tg_problems *p, const char *path, const char *code,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/** Free what p owns (the details and their strings); p itself is borrowed. */
void tg_problems_cleanup(struct tg_problems *p);
/** "did you mean" target for name among candidates (case-insensitive equality,
 * or edit distance <= 2), or NULL. Everything is borrowed; the result points
 * into candidates. */
const char *tg_did_you_mean(const char *name, const char *const *candidates, size_t n);

#endif
