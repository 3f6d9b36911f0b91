/*
 * errors.h - the JSON error body every gateway-made error uses:
 * {"statusCode", "error", "message", "requestId", "details": [{path, message}]}
 */
#ifndef TIDEGATE_ERRORS_H
#define TIDEGATE_ERRORS_H

#include <stddef.h>

struct evbuffer;

/**
 * One problem in a request, located by a JSON Pointer (borrowed strings);
 * code is a stable rule name (docs/validation.md), omitted when NULL.
 */
struct tg_detail {
	const char *path;
	const char *message;
	const char *code;
};

/**
 * Append the error body to out. Every pointer is borrowed (out is written,
 * the strings and details are read). request_id and details may be NULL/0;
 * details, when given, are written even if empty-array semantics matter
 * to the caller (n == 0 with d != NULL writes "details": []).
 */
void tg_error_body(struct evbuffer *out, int status, const char *code, const char *message,
    const char *request_id, const struct tg_detail *d, size_t n);
/** Stable code for a status: 400 BAD_REQUEST, 401 UNAUTHORIZED ... (a static
 * string: borrowed, never freed). */
const char *tg_error_code(int status);

#endif
