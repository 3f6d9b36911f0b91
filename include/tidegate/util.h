/*
 * util.h - allocation that aborts on failure, the error carrier, and
 * small string helpers used by every module.
 */
#ifndef TIDEGATE_UTIL_H
#define TIDEGATE_UTIL_H

#include <stddef.h>
#include <stdint.h>

/** The reason a call failed; filled by the callee, owned by the caller. */
struct tg_err {
	char msg[256];
};

/** printf into err (borrowed, NULL-safe); fmt is borrowed. */
void tg_err_set(struct tg_err *err, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/**
 * Allocation that aborts the process on failure. The caller takes ownership
 * of the result; tg_xrealloc takes ownership of p; the strings copied by
 * tg_xstrdup and tg_xstrndup are borrowed.
 */
void *tg_xmalloc(size_t n);
void *tg_xcalloc(size_t n, size_t size);
void *tg_xrealloc(void *p, size_t n);
char *tg_xstrdup(const char *s);
char *tg_xstrndup(const char *s, size_t n);
/** asprintf that aborts on failure; the caller takes ownership of the result. */
char *tg_xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/** The strings (borrowed, a NULL ends the list) one after the other, without
 * printf (for a request's path); the caller takes ownership of the result. */
char *tg_xconcat(const char *first, ...) __attribute__((sentinel));

#define TG_NELEM(a) (sizeof(a) / sizeof((a)[0]))

/** 1 if s is one of the NULL-terminated list; both borrowed. */
int tg_strv_contains(const char *const *list, const char *s);
/** Case-sensitive prefix test; s and prefix are borrowed. */
int tg_str_startswith(const char *s, const char *prefix);
/** Levenshtein distance of a and b (borrowed), capped at cap+1 (for "did you mean"). */
int tg_str_distance(const char *a, const char *b, int cap);
/** Constant-time comparison of two equal-length buffers (borrowed); 1 when equal. */
int tg_mem_equal_ct(const void *a, const void *b, size_t n);

/** The value of hex digit c (either case), or -1. */
int tg_hexval(int c);

#endif
