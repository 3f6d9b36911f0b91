/*
 * hblock.h - a header block written in one pass: the lines of a request's
 * or an answer's head gathered into one buffer, then handed to libevent as
 * a single entry of an evkeyvalq, so that evhttp writes the block with one
 * formatted write instead of one printf, two strdups and a list walk per
 * header. libevent prints an entry as "key: value\r\n": the block's first
 * header is the entry's key and the rest follow inside its value, so the
 * bytes on the wire are those of the headers one by one.
 *
 * Only end-to-end headers go in a block. The ones libevent decides framing
 * by (Content-Length, Transfer-Encoding, Connection) and the ones it adds
 * when it does not find them (Date, Content-Type) stay entries of their own,
 * or the block's first header, where evhttp_find_header still sees them.
 */
#ifndef TIDEGATE_HBLOCK_H
#define TIDEGATE_HBLOCK_H

#include <stddef.h>
#include <stdint.h>

struct evkeyvalq;

struct tg_hblock {
	char *key;	/* the first header's name */
	char *buf;	/* its value, then "\r\nName: value" for each next one */
	size_t len, cap;
};

/** An empty block; nothing allocated until the first header (b borrowed). */
void tg_hblock_init(struct tg_hblock *b);
/**
 * Appends "name: value"; both borrowed. A name or value holding CR or LF
 * (a header of the sender's choosing) or an empty name is not added, as
 * evhttp_add_header refuses them. Returns 0, or -1 when refused.
 */
int tg_hblock_add(struct tg_hblock *b, const char *name, const char *value);
/** Appends a header whose value is n bytes (borrowed, checked as above). */
int tg_hblock_addn(struct tg_hblock *b, const char *name, const char *value, size_t n);
/** Appends "name: v" in decimal, without printf; name borrowed. */
int tg_hblock_add_u64(struct tg_hblock *b, const char *name, uint64_t v);
/** v in decimal into out, NUL-terminated, without printf; returns its length. */
size_t tg_u64_dec(uint64_t v, char out[21]);
/**
 * Moves the block to the end of h (borrowed) as one entry: h takes
 * ownership of its memory (freed by evhttp_clear_headers) and b is empty
 * again. An empty block adds nothing.
 */
void tg_hblock_attach(struct tg_hblock *b, struct evkeyvalq *h);
/** Frees a block that was not attached. */
void tg_hblock_free(struct tg_hblock *b);
/**
 * The value of the first header called name in h (both borrowed; the
 * result borrowed from h), or NULL: what evhttp_find_header gives, found
 * by first letter then glibc's strcasecmp instead of libevent's
 * byte-by-byte comparison of every name.
 */
const char *tg_header_find(const struct evkeyvalq *h, const char *name);
/**
 * Appends name: value to h (all borrowed; h owns the copies, freed by
 * evhttp_clear_headers), as evhttp_add_header does but with one check of
 * each string (no CR or LF at all, no ':' in the name, a name). Returns 0,
 * or -1 and adds nothing.
 */
int tg_header_add(struct evkeyvalq *h, const char *name, const char *value);
/**
 * Appends name: prefix followed by value ("Bearer " and a token) to h, all
 * borrowed, each string checked as tg_header_add checks a value: the value
 * is made in the entry's own copy, with no joined string in between.
 * Returns 0, or -1 and adds nothing.
 */
int tg_header_add_prefixed(struct evkeyvalq *h, const char *name, const char *prefix,
    const char *value);

#endif
