/*
 * hblock.c - a header block written in one pass (hblock.h): names and
 * values copied with memcpy into one growing buffer, checked for CR and LF
 * with strcspn as they are copied; no printf. The entry handed to libevent
 * is allocated with malloc, which is what libevent frees it with (tidegate
 * sets no event_set_mem_functions).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#include <event2/keyvalq_struct.h>

#include "tidegate/hblock.h"
#include "tidegate/util.h"

void
tg_hblock_init(struct tg_hblock *b)
{
	memset(b, 0, sizeof(*b));
}

static void
reserve(struct tg_hblock *b, size_t more)
{
	if (b->len + more + 1 <= b->cap)
		return;
	b->cap = b->cap == 0 ? 512 : b->cap * 2;
	while (b->len + more + 1 > b->cap)
		b->cap *= 2;
	b->buf = tg_xrealloc(b->buf, b->cap);
}

/* n bytes already measured, NUL-terminated: tg_xstrndup would measure
 * them again. */
static char *
copy(const char *s, size_t n)
{
	char *p = tg_xmalloc(n + 1);

	memcpy(p, s, n);
	p[n] = '\0';
	return p;
}

/* name (nl bytes) and value (n bytes), both checked. */
static void
append(struct tg_hblock *b, const char *name, size_t nl, const char *value, size_t n)
{
	char *p;

	if (b->key == NULL) {
		b->key = copy(name, nl);
		reserve(b, n);
		memcpy(b->buf, value, n);
		b->len = n;
		b->buf[b->len] = '\0';
		return;
	}
	reserve(b, nl + n + 4);
	p = b->buf + b->len;
	memcpy(p, "\r\n", 2);
	memcpy(p + 2, name, nl);
	memcpy(p + 2 + nl, ": ", 2);
	memcpy(p + 4 + nl, value, n);
	b->len += nl + n + 4;
	b->buf[b->len] = '\0';
}

static size_t
name_ok(const char *name)
{
	size_t nl = strcspn(name, "\r\n:");

	return name[nl] == '\0' ? nl : 0;
}

int
tg_hblock_addn(struct tg_hblock *b, const char *name, const char *value, size_t n)
{
	size_t nl = name_ok(name);

	if (nl == 0 || memchr(value, '\r', n) != NULL || memchr(value, '\n', n) != NULL)
		return -1;
	append(b, name, nl, value, n);
	return 0;
}

int
tg_hblock_add(struct tg_hblock *b, const char *name, const char *value)
{
	size_t nl = name_ok(name), n = strcspn(value, "\r\n");	/* checked and measured */

	if (nl == 0 || value[n] != '\0')
		return -1;
	append(b, name, nl, value, n);
	return 0;
}

size_t
tg_u64_dec(uint64_t v, char out[21])
{
	char tmp[20];
	size_t n = 0, i;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v != 0);
	for (i = 0; i < n; i++)
		out[i] = tmp[n - 1 - i];
	out[n] = '\0';
	return n;
}

int
tg_hblock_add_u64(struct tg_hblock *b, const char *name, uint64_t v)
{
	char num[21];

	return tg_hblock_addn(b, name, num, tg_u64_dec(v, num));
}

void
tg_hblock_attach(struct tg_hblock *b, struct evkeyvalq *h)
{
	struct evkeyval *kv;

	if (b->key == NULL)
		return;
	kv = tg_xmalloc(sizeof(*kv));
	kv->key = b->key;
	kv->value = b->buf;
	TAILQ_INSERT_TAIL(h, kv, next);
	tg_hblock_init(b);
}

void
tg_hblock_free(struct tg_hblock *b)
{
	free(b->key);
	free(b->buf);
	tg_hblock_init(b);
}

const char *
tg_header_find(const struct evkeyvalq *h, const char *name)
{
	const struct evkeyval *kv;
	int c = name[0] | 0x20;

	/* letters equal but for case are equal once 0x20 is set; other bytes
	 * only ever reach strcasecmp more often, never less */
	TAILQ_FOREACH(kv, h, next)
		if ((kv->key[0] | 0x20) == c && strcasecmp(kv->key, name) == 0)
			return kv->value;
	return NULL;
}

int
tg_header_add_prefixed(struct evkeyvalq *h, const char *name, const char *prefix,
    const char *value)
{
	size_t nl = name_ok(name), pl = strcspn(prefix, "\r\n"), n = strcspn(value, "\r\n");
	struct evkeyval *kv;

	if (nl == 0 || prefix[pl] != '\0' || value[n] != '\0')
		return -1;
	kv = tg_xmalloc(sizeof(*kv));
	kv->key = copy(name, nl);
	kv->value = tg_xmalloc(pl + n + 1);
	memcpy(kv->value, prefix, pl);
	memcpy(kv->value + pl, value, n);
	kv->value[pl + n] = '\0';
	TAILQ_INSERT_TAIL(h, kv, next);
	return 0;
}

int
tg_header_add(struct evkeyvalq *h, const char *name, const char *value)
{
	size_t nl = name_ok(name), n = strcspn(value, "\r\n");
	struct evkeyval *kv;

	if (nl == 0 || value[n] != '\0')
		return -1;
	kv = tg_xmalloc(sizeof(*kv));
	kv->key = copy(name, nl);
	kv->value = copy(value, n);
	TAILQ_INSERT_TAIL(h, kv, next);
	return 0;
}
