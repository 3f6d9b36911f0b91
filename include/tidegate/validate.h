/*
 * validate.h - request validation before anything reaches the vendor.
 *
 * Every validator collects ALL problems of a request into struct
 * tg_problems (JSON Pointer, message, stable rule code), so a caller fixes
 * its request in one round trip. The gateway turns a non-empty list into a
 * 400 with `details` (src/gateway/validate.c).
 *
 * - exports (src/dex/export_check.c): tree-based (bodies are small);
 *   checks tables E1-E7 and returns the body normalised to the vendor's
 *   spelling.
 * - activity imports (src/dex/import_check.c): streaming over yajl's event
 *   parser, so a 200 MB import is checked at parser speed in bounded memory;
 *   JSON bodies and multipart uploads.
 * - simulation cases (src/sim/case_check.c): structure, case type from the
 *   fixableTypes, and a diff against the partial case the gateway served.
 */
#ifndef TIDEGATE_VALIDATE_H
#define TIDEGATE_VALIDATE_H

#include <stddef.h>

#include <yajl/yajl_tree.h>

#include "tidegate/config.h"
#include "tidegate/errors.h"

struct evbuffer;

/* ---- problem list ---- */

struct tg_problems {
	struct tg_detail *v;	/* path, message and code are owned (malloc'd) */
	size_t n, cap;
	size_t max;		/* stop recording past this many (0: 1000) */
	size_t total;		/* problems found, recorded or not */
};

/** Record a problem (path is a JSON Pointer, copied; code a static string). */
void tg_problems_add(struct tg_problems *p, const char *path, const char *code,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void tg_problems_cleanup(struct tg_problems *p);
/** "did you mean" target for name among candidates (case-insensitive equality,
 * or edit distance <= 2), or NULL. */
const char *tg_did_you_mean(const char *name, const char *const *candidates, size_t n);

/* ---- data exchange: export requests (E1-E7) ---- */

struct tg_export_opts {
	int strict;			/* unknown members are problems (else kept) */
	const char *wp_status_field;	/* work packages: "status" (default) or "statuses" */
};

/**
 * Check the body of POST /export/<kind> and normalise it: projectID ->
 * projectId, callbackURL -> callbackUrl, status/statuses as configured.
 * Returns 0 with *out a malloc'd normalised JSON body (*outlen bytes), or -1
 * with problems recorded in p (an unknown kind is a problem at path "").
 */
int tg_export_check(const char *kind, const char *body, size_t len,
    const struct tg_export_opts *o, char **out, size_t *outlen, struct tg_problems *p);
/** 1 if kind is one of the seven export kinds. */
int tg_export_kind_known(const char *kind);

/* ---- data exchange: activity imports (streaming) ---- */

struct tg_import_result {
	size_t rows;		/* activities seen */
	size_t bytes;		/* JSON bytes checked */
};

/** Check a JSON body (an array of activities, or one object), chunk by chunk. */
int tg_import_check_json(struct evbuffer *body, struct tg_import_result *res,
    struct tg_problems *p);
/**
 * Check a multipart/form-data upload: its `file` part must hold the JSON.
 * Returns -1 with problems; *too_large is set when a part exceeded
 * max_part (the caller answers 413).
 */
int tg_import_check_multipart(struct evbuffer *body, const char *content_type,
    size_t max_part, struct tg_import_result *res, struct tg_problems *p, int *too_large);

/* ---- simulation: cases ---- */

struct tg_case_kinds {
	struct tg_strlist construction;	/* fixableTypes of Construction cases */
	struct tg_strlist om;		/* fixableTypes of O&M cases */
};

enum tg_case_type { TG_CASE_UNKNOWN, TG_CASE_CONSTRUCTION, TG_CASE_OM };

/**
 * Check a submitted case: structure of a partial case, one case type across
 * its fixables (each offending fixable named), and, when base (the partial
 * case the gateway served for this caseId) is given, no change outside
 * vesselList, personnelList and windFarms[].infrastructureList[].fixable,
 * no fixableType moved to the other kind. Returns 0 or -1 with problems;
 * *type receives the detected type.
 */
int tg_case_check(yajl_val submitted, yajl_val base, const struct tg_case_kinds *k,
    enum tg_case_type *type, struct tg_problems *p);

/** Partial cases the gateway served, by case id (bounded, oldest dropped). */
struct tg_case_store;
struct tg_case_store *tg_case_store_new(size_t max_cases);
void tg_case_store_free(struct tg_case_store *cs);
/** Remember a served case (takes ownership of tree). */
void tg_case_store_put(struct tg_case_store *cs, const char *case_id, yajl_val tree);
/** Borrowed tree, or NULL. */
yajl_val tg_case_store_get(struct tg_case_store *cs, const char *case_id);
/**
 * A served case held beyond the store's say (a check off the event loop):
 * the tree stays valid and unchanged until tg_case_ref_release, even if the
 * store drops or replaces the case. Touches the case as get does. NULL when
 * not stored. Taken and released on the loop thread only.
 */
struct tg_case_ref;
struct tg_case_ref *tg_case_store_ref(struct tg_case_store *cs, const char *case_id);
/** The held tree (borrowed while the reference is held; read it, never change it). */
yajl_val tg_case_ref_tree(const struct tg_case_ref *ref);
/** Release a reference (NULL-safe); the last one frees the tree. */
void tg_case_ref_release(struct tg_case_ref *ref);

#endif
