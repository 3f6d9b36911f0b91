/*
 * harness.h - what the unit tests share: the event loop run to a flag
 * with a deadline or for a while, temporary directories, JSON written
 * with single quotes, and problem lists as one line each. Linked as a
 * static library (tests/unit/harness/meson.build); every function fails
 * the calling cmocka test on a broken precondition.
 */
#ifndef TG_TEST_HARNESS_H
#define TG_TEST_HARNESS_H

#include <stddef.h>

#include <event2/event.h>
#include <yajl/yajl_tree.h>

#include "tidegate/problems.h"

/**
 * Run base's loop one batch of active events at a time until *n reaches
 * want or ms milliseconds have passed; it stops as soon as it is there.
 * n is borrowed (a callback sets it). Returns 1 when *n reached want, 0
 * at the deadline: the caller asserts what it needs.
 */
int th_run_until(struct event_base *base, const int *n, int want, int ms);

/** Run base's loop for ms milliseconds, whatever happens in them. */
void th_run_for(struct event_base *base, int ms);

/**
 * Make a fresh directory /tmp/<name>-XXXXXX into dir (size bytes, the
 * caller's buffer); the test fails if it cannot.
 */
void th_tmpdir(char *dir, size_t size, const char *name);

/** Remove dir and everything under it (borrowed); the test fails if not. */
void th_rmtree(const char *dir);

/** A copy of src with every ' turned into " (caller frees). */
char *th_quotes(const char *src);

/**
 * src written with ' for ", parsed (caller frees with yajl_tree_free);
 * the test fails, with the parser's message, if it is not JSON.
 */
yajl_val th_parse_quoted(const char *src);

/** The problems of p (borrowed), "path code\n" each, in order (caller frees). */
char *th_problem_list(const struct tg_problems *p);

#endif
