/*
 * json.h - thin wrappers over yajl: parse to a tree, read it by key or
 * JSON Pointer, and generate into libevent buffers. All JSON in the
 * project goes through yajl; these helpers only remove boilerplate.
 */
#ifndef TIDEGATE_JSON_H
#define TIDEGATE_JSON_H

#include <stddef.h>

#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "tidegate/util.h"

struct evbuffer;

/** Deepest nesting tg_json_parse accepts (the trees are freed recursively). */
#define TG_JSON_MAX_DEPTH 64

/**
 * Parse len bytes (need not be NUL-terminated); refuses NUL bytes and
 * nesting deeper than TG_JSON_MAX_DEPTH. buf is borrowed (not kept); the
 * caller takes ownership of the tree: yajl_tree_free().
 */
yajl_val tg_json_parse(const char *buf, size_t len, struct tg_err *err);
/** Member of an object, or NULL; obj and key are borrowed, the result is
 * borrowed from obj's tree. */
yajl_val tg_json_get(yajl_val obj, const char *key);
/** Node at an RFC 6901 pointer ("" is the root), or NULL; root and pointer
 * are borrowed, the result is borrowed from root's tree. */
yajl_val tg_json_ptr(yajl_val root, const char *pointer);
/** String member or NULL; obj and key are borrowed, the result is borrowed
 * from obj's tree. */
const char *tg_json_get_str(yajl_val obj, const char *key);
/** Escape one reference token for a JSON Pointer ("~" -> "~0", "/" -> "~1").
 * token is borrowed; the caller takes ownership of the result (free()). */
char *tg_json_ptr_escape(const char *token);

/** A JSON Pointer built while a walk descends; buf is always NUL-terminated
 * and owned by the path: tg_json_path_cleanup(). */
struct tg_json_path {
	char *buf;
	size_t len, cap;
};

/** Start at pointer start ("" for the root); p and start are borrowed (start
 * is copied). */
void tg_json_path_init(struct tg_json_path *p, const char *start);
/** Append /key (escaped) or /index; return a mark for tg_json_path_pop. p
 * and key are borrowed (key is copied); p->buf may move. */
size_t tg_json_path_push_key(struct tg_json_path *p, const char *key);
size_t tg_json_path_push_index(struct tg_json_path *p, size_t i);
void tg_json_path_pop(struct tg_json_path *p, size_t mark);
/** Free what p owns (p itself is borrowed). */
void tg_json_path_cleanup(struct tg_json_path *p);

/** New generator (beautify off, no validation of UTF-8 input), owned by the
 * caller: yajl_gen_free(). */
yajl_gen tg_json_gen_new(void);
/* The writers below borrow g and their strings (yajl copies them);
 * tg_json_kv_str writes null for a NULL v. */
void tg_json_str(yajl_gen g, const char *s);
void tg_json_kv_str(yajl_gen g, const char *k, const char *v);
void tg_json_kv_int(yajl_gen g, const char *k, long long v);
void tg_json_kv_bool(yajl_gen g, const char *k, int v);
/** Write a parsed tree (or subtree) into g; g and v are borrowed. */
void tg_json_gen_val(yajl_gen g, yajl_val v);
/** Move everything generated so far into out (copied) and clear g's buffer;
 * g and out are borrowed. */
void tg_json_gen_flush(yajl_gen g, struct evbuffer *out);

#endif
