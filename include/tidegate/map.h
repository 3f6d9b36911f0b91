/*
 * map.h - a string-keyed hash map (open addressing, linear probing).
 * Used for correlation ids, tokens, counters. Keys are copied; values
 * are borrowed unless a free function is given.
 */
#ifndef TIDEGATE_MAP_H
#define TIDEGATE_MAP_H

#include <stddef.h>

struct tg_map;
typedef void (*tg_map_free_fn)(void *value);

/** New map, owned by the caller; free_value (may be NULL) is called on values
 * the map drops. */
struct tg_map *tg_map_new(tg_map_free_fn free_value);
/** Takes ownership of m: frees it and, through free_value, every value. */
void tg_map_free(struct tg_map *m);
/** Borrowed value, or NULL; m and key are borrowed. */
void *tg_map_get(const struct tg_map *m, const char *key);
/** Insert or replace (the old value is freed). Takes ownership of value; key
 * is borrowed (copied). */
void tg_map_put(struct tg_map *m, const char *key, void *value);
/** Remove and free the value; returns 1 if it was present. key is borrowed. */
int tg_map_del(struct tg_map *m, const char *key);
/** Remove and return the value without freeing it (NULL if absent): the caller
 * takes ownership of it. key is borrowed. */
void *tg_map_take(struct tg_map *m, const char *key);
/** Number of entries; m is borrowed. */
size_t tg_map_count(const struct tg_map *m);
/**
 * Iterate: start with *pos = 0; returns 1 and sets key/value while entries
 * remain. The map must not be modified during the walk except through
 * tg_map_del of the current key. key and value are borrowed from the map.
 */
int tg_map_next(const struct tg_map *m, size_t *pos, const char **key, void **value);

#endif
