/*
 * map.c - string-keyed open-addressing hash map (FNV-1a, linear probing,
 * backward-shift deletion so there are no tombstones).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/map.h"
#include "tidegate/util.h"

struct slot {
	char *key;
	void *value;
	uint32_t hash;
};

struct tg_map {
	struct slot *slots;
	size_t cap;		/* power of two */
	size_t count;
	tg_map_free_fn free_value;
};

static uint32_t
hash(const char *s)
{
	uint32_t h = 2166136261u;

	while (*s)
		h = (h ^ (unsigned char)*s++) * 16777619u;
	return h;
}

struct tg_map *
tg_map_new(tg_map_free_fn free_value)
{
	struct tg_map *m = tg_xcalloc(1, sizeof(*m));

	m->cap = 16;
	m->slots = tg_xcalloc(m->cap, sizeof(struct slot));
	m->free_value = free_value;
	return m;
}

void
tg_map_free(struct tg_map *m)
{
	size_t i;

	if (m == NULL)
		return;
	for (i = 0; i < m->cap; i++) {
		if (m->slots[i].key == NULL)
			continue;
		free(m->slots[i].key);
		if (m->free_value)
			m->free_value(m->slots[i].value);
	}
	free(m->slots);
	free(m);
}

static size_t
find(const struct tg_map *m, const char *key, uint32_t h)
{
	size_t i = h & (m->cap - 1);

	while (m->slots[i].key != NULL) {
		if (m->slots[i].hash == h && strcmp(m->slots[i].key, key) == 0)
			return i;
		i = (i + 1) & (m->cap - 1);
	}
	return i;
}

static void
grow(struct tg_map *m)
{
	struct slot *old = m->slots;
	size_t oldcap = m->cap, i, j;

	m->cap *= 2;
	m->slots = tg_xcalloc(m->cap, sizeof(struct slot));
	for (i = 0; i < oldcap; i++) {
		if (old[i].key == NULL)
			continue;
		j = old[i].hash & (m->cap - 1);
		while (m->slots[j].key != NULL)
			j = (j + 1) & (m->cap - 1);
		m->slots[j] = old[i];
	}
	free(old);
}

void *
tg_map_get(const struct tg_map *m, const char *key)
{
	size_t i = find(m, key, hash(key));

	return m->slots[i].key ? m->slots[i].value : NULL;
}

void
tg_map_put(struct tg_map *m, const char *key, void *value)
{
	uint32_t h = hash(key);
	size_t i;

	if ((m->count + 1) * 4 > m->cap * 3)
		grow(m);
	i = find(m, key, h);
	if (m->slots[i].key != NULL) {
		if (m->free_value && m->slots[i].value != value)
			m->free_value(m->slots[i].value);
		m->slots[i].value = value;
		return;
	}
	m->slots[i].key = tg_xstrdup(key);
	m->slots[i].value = value;
	m->slots[i].hash = h;
	m->count++;
}

/* Backward-shift: move later entries of the probe run into the hole. */
static void
remove_at(struct tg_map *m, size_t i)
{
	size_t j = i, k;

	free(m->slots[i].key);
	m->slots[i].key = NULL;
	m->count--;
	for (;;) {
		j = (j + 1) & (m->cap - 1);
		if (m->slots[j].key == NULL)
			return;
		k = m->slots[j].hash & (m->cap - 1);
		if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
			m->slots[i] = m->slots[j];
			m->slots[j].key = NULL;
			i = j;
		}
	}
}

void *
tg_map_take(struct tg_map *m, const char *key)
{
	size_t i = find(m, key, hash(key));
	void *v;

	if (m->slots[i].key == NULL)
		return NULL;
	v = m->slots[i].value;
	remove_at(m, i);
	return v;
}

int
tg_map_del(struct tg_map *m, const char *key)
{
	size_t i = find(m, key, hash(key));
	void *v;

	if (m->slots[i].key == NULL)
		return 0;
	v = m->slots[i].value;
	remove_at(m, i);
	if (m->free_value)
		m->free_value(v);
	return 1;
}

size_t
tg_map_count(const struct tg_map *m)
{
	return m->count;
}

int
tg_map_next(const struct tg_map *m, size_t *pos, const char **key, void **value)
{
	while (*pos < m->cap) {
		struct slot *s = &m->slots[(*pos)++];

		if (s->key != NULL) {
			*key = s->key;
			*value = s->value;
			return 1;
		}
	}
	return 0;
}
