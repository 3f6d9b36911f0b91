/*
 * dex.h - the data exchange API's own knowledge: request checks before
 * anything reaches the vendor. Problems go into struct tg_problems
 * (problems.h).
 *
 * - exports (src/dex/export_check.c): tree-based (bodies are small);
 *   checks tables E1-E7 and returns the body normalised to the vendor's
 *   spelling.
 * - routes (src/dex/routes.c): the service's route table for the router,
 *   naming each route's request check (src/dex/checks.c, body_check.h).
 * - job reads (src/dex/job_query.c): the one correlationId of a query.
 * - activity imports (src/dex/import_check.c): streaming over yajl's event
 *   parser, so a 200 MB import is checked at parser speed in bounded memory;
 *   JSON bodies and multipart uploads.
 */
#ifndef TIDEGATE_DEX_H
#define TIDEGATE_DEX_H

#include <stddef.h>

#include <yajl/yajl_tree.h>

#include "tidegate/ops.h"
#include "tidegate/problems.h"
#include "tidegate/routes.h"

struct evbuffer;

/* ---- data exchange: routes ---- */

/** The request checks its route table names (src/dex/checks.c): an
 * export's body, an activity import's JSON body or upload; static. */
extern const struct tg_body_check tg_dex_export_check;
extern const struct tg_body_check tg_dex_import_json_check;
extern const struct tg_body_check tg_dex_import_file_check;
/** The data exchange service's routes (operations TG_OP_DEX_*) and prefixes;
 * static, borrowed. */
extern const struct tg_service_routes tg_dex_service_routes;

/**
 * The one value of query parameter name in the raw query string q (both
 * borrowed; q may be NULL), read as a vendor would: names and values
 * percent-decoded ('+' is a space), names compared without regard to case.
 * 0 with *out (the caller takes ownership: free(); NULL when the parameter is
 * absent), or -1 with why when the query could be read more than one way:
 * the parameter given twice in any spelling, empty, with a broken escape,
 * a control character (%00 included) or more than TG_ROUTE_PARAMLEN bytes.
 * Implemented in src/dex/job_query.c.
 */
int tg_route_query_one(const char *q, const char *name, char **out, struct tg_err *why);

/* ---- data exchange: export requests (E1-E7) ---- */

struct tg_export_opts {
	int strict;			/* unknown members are problems (else kept) */
	const char *wp_status_field;	/* work packages: "status" (default) or "statuses";
					 * borrowed */
};

/**
 * Check the body of POST /export/<kind> and normalise it: projectID ->
 * projectId, callbackURL -> callbackUrl, status/statuses as configured.
 * Returns 0 with *out the normalised JSON body (*outlen bytes, NUL-terminated;
 * the caller takes ownership: free()), or -1 (*out NULL) with problems
 * recorded in p (an unknown kind is a problem at path ""). kind, body, o and
 * p are borrowed; nothing is kept.
 */
int tg_export_check(const char *kind, const char *body, size_t len,
    const struct tg_export_opts *o, char **out, size_t *outlen, struct tg_problems *p);
/* A checked export body (tg_export_check_tree). */
struct tg_export_out {
	char *body;			/* the normalised body, NUL-terminated (owned) */
	size_t len;
	char *stripped;			/* the same without callbackUrl (owned), if asked */
	size_t stripped_len;
	const char *callback;		/* the callbackUrl sent: borrowed from the tree */
};
/**
 * tg_export_check on a body already parsed (root borrowed; NULL when it
 * was not JSON, whose problem the caller records), so that a body is
 * parsed once for everything that reads it. With want_stripped, out also
 * holds the normalised body without its callbackUrl and that URL's value.
 * 0 with out filled (free with tg_export_out_cleanup), or -1 with problems.
 */
int tg_export_check_tree(const char *kind, yajl_val root, const struct tg_export_opts *o,
    int want_stripped, struct tg_export_out *out, struct tg_problems *p);
/** Free what out holds (out itself is the caller's); NULL members are fine. */
void tg_export_out_cleanup(struct tg_export_out *out);
/** 1 if kind (borrowed) is one of the seven export kinds. */
int tg_export_kind_known(const char *kind);
/** The known kind an unknown kind (borrowed, may be NULL) nearly is (another
 * case, or at most two edits: "activites"), borrowed from the table; NULL
 * when kind is known or near none. */
const char *tg_export_kind_hint(const char *kind);

/* ---- data exchange: activity imports (streaming) ---- */

struct tg_import_result {
	size_t rows;		/* activities seen */
	size_t bytes;		/* JSON bytes checked */
};

/** Check a JSON body (an array of activities, or one object), chunk by chunk.
 * body, res and p are borrowed; body is read in place, not drained. */
int tg_import_check_json(struct evbuffer *body, struct tg_import_result *res,
    struct tg_problems *p);
/**
 * Check a multipart/form-data upload: its `file` part must hold the JSON.
 * Returns -1 with problems; *too_large is set when a part exceeded
 * max_part (the caller answers 413). All pointers are borrowed; body is read
 * in place, not drained.
 */
int tg_import_check_multipart(struct evbuffer *body, const char *content_type,
    size_t max_part, struct tg_import_result *res, struct tg_problems *p, int *too_large);

#endif
