/*
 * util.c - allocation wrappers that abort, the error carrier, and small
 * string helpers. Called from everywhere.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/util.h"

void
tg_err_set(struct tg_err *err, const char *fmt, ...)
{
	va_list ap;

	if (err == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
	va_end(ap);
}

static void
oom(void)
{
	fputs("{\"level\":\"error\",\"event\":\"out_of_memory\"}\n", stderr);
	abort();
}

void *
tg_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (p == NULL)
		oom();
	return p;
}

void *
tg_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size ? size : 1);

	if (p == NULL)
		oom();
	return p;
}

void *
tg_xrealloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);

	if (q == NULL)
		oom();
	return q;
}

char *
tg_xstrdup(const char *s)
{
	return tg_xstrndup(s, strlen(s));
}

char *
tg_xstrndup(const char *s, size_t n)
{
	char *p = tg_xmalloc(n + 1);

	if (n > 0)	/* s may be NULL when n is 0 (an empty evbuffer's pullup) */
		memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

char *
tg_xasprintf(const char *fmt, ...)
{
	va_list ap;
	char *s;

	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		oom();
	va_end(ap);
	return s;
}

char *
tg_xconcat(const char *first, ...)
{
	const char *p;
	size_t n = 0, len;
	va_list ap;
	char *s;

	va_start(ap, first);
	for (p = first; p != NULL; p = va_arg(ap, const char *))
		n += strlen(p);
	va_end(ap);
	s = tg_xmalloc(n + 1);
	n = 0;
	va_start(ap, first);
	for (p = first; p != NULL; p = va_arg(ap, const char *)) {
		len = strlen(p);
		memcpy(s + n, p, len);
		n += len;
	}
	va_end(ap);
	s[n] = '\0';
	return s;
}

int
tg_strv_contains(const char *const *list, const char *s)
{
	for (; *list != NULL; list++)
		if (strcmp(*list, s) == 0)
			return 1;
	return 0;
}

int
tg_str_startswith(const char *s, const char *prefix)
{
	return strncmp(s, prefix, strlen(prefix)) == 0;
}

int
tg_str_distance(const char *a, const char *b, int cap)
{
	size_t la = strlen(a), lb = strlen(b), i, j;
	int row[64], best, prev, tmp, cost;

	if (la >= TG_NELEM(row) || lb >= TG_NELEM(row))
		return cap + 1;
	for (j = 0; j <= lb; j++)
		row[j] = (int)j;
	for (i = 1; i <= la; i++) {
		prev = row[0];
		row[0] = (int)i;
		best = row[0];
		for (j = 1; j <= lb; j++) {
			tmp = row[j];
			cost = a[i - 1] == b[j - 1] ? 0 : 1;
			row[j] = prev + cost;
			if (row[j - 1] + 1 < row[j])
				row[j] = row[j - 1] + 1;
			if (tmp + 1 < row[j])
				row[j] = tmp + 1;
			prev = tmp;
			if (row[j] < best)
				best = row[j];
		}
		if (best > cap)
			return cap + 1;
	}
	return row[lb] > cap ? cap + 1 : row[lb];
}

int
tg_mem_equal_ct(const void *a, const void *b, size_t n)
{
	const volatile unsigned char *x = a, *y = b;
	unsigned char acc = 0;
	size_t i;

	for (i = 0; i < n; i++)
		acc |= x[i] ^ y[i];
	return acc == 0;
}

int
tg_hexval(int c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}
