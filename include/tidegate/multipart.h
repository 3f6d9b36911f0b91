/*
 * multipart.h - incremental multipart/form-data parser (RFC 7578). Bytes
 * are fed as they arrive, in pieces of any size (a boundary may be split
 * across feeds); part headers and data are reported through callbacks.
 */
#ifndef TIDEGATE_MULTIPART_H
#define TIDEGATE_MULTIPART_H

#include <stddef.h>

#include "tidegate/util.h"

struct tg_multipart;

/** Largest header block of one part, final empty line included. */
#define TG_MULTIPART_MAX_HEADERS 8192

struct tg_multipart_cbs {
	/* A part starts: name and filename from Content-Disposition (filename may
	 * be NULL), content type or NULL; all borrowed for the call only.
	 * Return non-zero to abort. */
	int (*on_part_begin)(void *arg, const char *name, const char *filename,
	    const char *content_type);
	/* data is borrowed for the call only. */
	int (*on_part_data)(void *arg, const char *data, size_t len);
	/* Only for parts whose closing delimiter was seen. */
	int (*on_part_end)(void *arg);
};

/**
 * Boundary parameter of a multipart/form-data Content-Type, or NULL with err.
 * content_type is borrowed; the caller takes ownership of the result (free()).
 */
char *tg_multipart_boundary(const char *content_type, struct tg_err *err);
/**
 * New parser, owned by the caller: tg_multipart_free(). boundary is borrowed
 * (copied); cbs and arg are borrowed and must outlive the parser.
 * max_part_size 0 means unlimited.
 * An invalid boundary (RFC 2046: 1..70 bchars) gives a parser whose first
 * feed or finish fails.
 */
struct tg_multipart *tg_multipart_new(const char *boundary, const struct tg_multipart_cbs *cbs,
    void *arg, size_t max_part_size);
/**
 * Feed bytes: 0, or -1 with err (malformed, part too large, aborted by a
 * callback). mp and data are borrowed; data is not kept after the call.
 */
int tg_multipart_feed(struct tg_multipart *mp, const char *data, size_t len,
    struct tg_err *err);
/** End of input: 0 if the closing boundary was seen, else -1 with err. mp is borrowed. */
int tg_multipart_finish(struct tg_multipart *mp, struct tg_err *err);
/** 1 if a part exceeded max_part_size (so the caller can answer 413); mp is borrowed. */
int tg_multipart_too_large(const struct tg_multipart *mp);
/** Takes ownership of mp and frees it; NULL-safe. */
void tg_multipart_free(struct tg_multipart *mp);

#endif
