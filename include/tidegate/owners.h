/*
 * owners.h - correlation ownership store: which gateway API key created a
 * data exchange job (family "export" or "import", and the correlationId
 * the vendor answered), so that reads of the job by any other key can be
 * refused. Durable (one SQLite file, WAL, synchronous=NORMAL) so that a
 * restart forgets nothing, and bounded: a row counts for keep_ms, and a
 * key past max_rows records loses its own oldest first, never another
 * key's (so that no key can push another's jobs out of the store).
 *
 * File: src/state/sqlite/owners.c, the SQLite backend's correlation
 * ownership. Only the backend calls it (features use the state seam,
 * tidegate/state.h: tg_state_owners_*): lookups on the loop's connection,
 * records and prunes on the writer thread. Each call blocks on SQLite.
 * Times are milliseconds since the epoch, passed in by the caller.
 *
 * Job ids are compared in a folded form, so that no spelling a vendor may
 * read as the same job escapes its owner: spaces and tabs around the id
 * dropped, ASCII case ignored, and a UUID written with or without hyphens,
 * braces or parentheses taken as its 32 hex digits.
 */
#ifndef TIDEGATE_OWNERS_H
#define TIDEGATE_OWNERS_H

#include <stddef.h>
#include <stdint.h>

#include "tidegate/util.h"

/** tg_owners_lookup: no live row names the job. */
#define TG_OWNERS_NONE 1

struct tg_owners;

struct tg_owners_opts {
	const char *path;	/* SQLite file, created if missing (borrowed) */
	int64_t keep_ms;	/* rows older than this no longer count; <= 0: 30 days */
	long long max_rows;	/* rows kept per API key at most; <= 0: 1,000,000 */
};

/** Open or create the table (opts and its path borrowed for the call); NULL
 * with err. The caller owns the store: tg_owners_close(). */
struct tg_owners *tg_owners_open(const struct tg_owners_opts *opts, struct tg_err *err);
/** Takes ownership of o: closes and frees it; NULL-safe. */
void tg_owners_close(struct tg_owners *o);
/**
 * Job cid of family was created by key (o borrowed; strings borrowed, copied), in one
 * transaction with the eviction of key's oldest records past max_rows (only key's).
 * 0, or -1 with err (nothing changed).
 */
int tg_owners_record(struct tg_owners *o, const char *family, const char *cid,
    const char *key, int64_t now_ms, struct tg_err *err);
/**
 * The key that created job cid of family (o, family and cid borrowed): 0 and
 * *key (malloc'd; the caller takes ownership: free()), TG_OWNERS_NONE when no
 * live row names it (*key NULL), -1 with err.
 */
int tg_owners_lookup(struct tg_owners *o, const char *family, const char *cid,
    int64_t now_ms, char **key, struct tg_err *err);
/** Remove rows older than keep_ms (and each key's past max_rows, when the
 * bound was lowered): the number removed, or -1 with err. o is borrowed. */
long long tg_owners_prune(struct tg_owners *o, int64_t now_ms, struct tg_err *err);
/** Rows in the table (borrowed handle). */
long long tg_owners_count(const struct tg_owners *o);

#endif
