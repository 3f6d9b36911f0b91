/*
 * problems.c - the list of problems a validator found in a request, and the
 * "did you mean" helper for near-miss field names. Used by every validator
 * (src/dex, src/sim) and turned into a 400 by the gateway.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "tidegate/problems.h"
#include "tidegate/util.h"

void
tg_problems_add(struct tg_problems *p, const char *path, const char *code, const char *fmt,
    ...)
{
	size_t max = p->max ? p->max : 1000;
	va_list ap;
	char *msg;

	p->total++;
	if (p->n >= max)
		return;
	if (p->n == p->cap) {
		p->cap = p->cap ? 2 * p->cap : 8;
		p->v = tg_xrealloc(p->v, p->cap * sizeof(*p->v));
	}
	va_start(ap, fmt);
	if (vasprintf(&msg, fmt, ap) < 0)
		msg = tg_xstrdup("(message unavailable)");
	va_end(ap);
	p->v[p->n].path = tg_xstrdup(path);
	p->v[p->n].message = msg;
	p->v[p->n].code = code;
	p->n++;
}

void
tg_problems_cleanup(struct tg_problems *p)
{
	size_t i;

	for (i = 0; i < p->n; i++) {
		free((char *)p->v[i].path);
		free((char *)p->v[i].message);
	}
	free(p->v);
	p->v = NULL;
	p->n = p->cap = p->total = 0;
}

const char *
tg_did_you_mean(const char *name, const char *const *candidates, size_t n)
{
	const char *best = NULL;
	int bestd = 3, d;
	size_t i;

	for (i = 0; i < n; i++) {
		if (strcasecmp(name, candidates[i]) == 0)
			return candidates[i];
		d = tg_str_distance(name, candidates[i], 2);
		if (d < bestd) {
			bestd = d;
			best = candidates[i];
		}
	}
	return best;
}
