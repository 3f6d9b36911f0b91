/*
 * target.h - the request target of an HTTP/1.1 request line checked and
 * normalised (RFC 9112 section 3.2, RFC 3986 sections 2, 5.2.4 and 6.2.2)
 * before anything routes on it or copies it toward a vendor. A pure
 * function of its input bytes: the gateway calls it for every request on
 * its service listeners; unit tests and a fuzz target call it directly.
 */
#ifndef TIDEGATE_TARGET_H
#define TIDEGATE_TARGET_H

#include <stddef.h>

#include "tidegate/util.h"

/** A normalised origin-form target. */
struct tg_target {
	char *path;	/* normalised absolute path, begins with '/' (owned) */
	char *query;	/* after the first '?', as sent; NULL when absent (owned) */
	const char *rule;	/* on refusal: stable rule name ("char", "form", "percent",
				 * "encoded", "dot_params"); static, borrowed */
};

/**
 * Check the raw request target raw[0..len) (borrowed; may contain any byte)
 * and normalise its path: percent-encoded unreserved characters decoded,
 * other percent-encodings uppercased, empty segments ("//") merged, dot
 * segments (also percent-encoded ones) removed. Refused (-1, err and
 * t->rule set, nothing allocated): a target that is not origin-form ("*",
 * absolute-form, relative), a byte not allowed in a request-target (CTL,
 * space, non-ASCII, "<>\^`{|}#[]), a malformed percent-encoding in the
 * path, an encoded '/', '\' or CTL in the path, a dot segment with
 * parameters ("..;x"). t is the caller's (borrowed, filled either way);
 * on 0 it owns what it holds: tg_http_target_cleanup().
 */
int tg_http_target_normalise(const char *raw, size_t len, struct tg_target *t,
    struct tg_err *err);
/** Free what t owns (t itself is borrowed); NULL-safe. */
void tg_http_target_cleanup(struct tg_target *t);

#endif
