/*
 * registry.h - the simulation workflow's durable state and its pure helpers:
 * the run registry (every accepted POST /simulations, tracked until
 * terminal, expired after the vendor's 30-day retention, archived results),
 * sweeps of case variants (a queue of patched cases that survives a
 * restart), JSON Merge Patch restricted to the editable sections of a case,
 * and the side-by-side summaries of a sweep (JSON and CSV).
 *
 * Files: the records are the state seam's (tidegate/run_records.h,
 * included here); src/sim/runs_json.c (runs as JSON, the 410 body),
 * src/sim/merge_patch.c, src/sim/sweep.c (sweep requests, summaries).
 * The registry itself is the state seam's: the runs feature (src/runs/)
 * reaches it through tidegate/state.h. Times are
 * milliseconds since the epoch, passed in by the caller (tg_clock_now_ms()
 * in the gateway, fixed values in tests); 0 means "none" in every time
 * field.
 *
 * Ownership: the struct tg_runs *r, ids, names and other const char *
 * arguments, queries and yajl_gen g arguments are borrowed for the call
 * only (strings are copied into the database); what a call hands back is
 * said at the call.
 */
#ifndef TIDEGATE_REGISTRY_H
#define TIDEGATE_REGISTRY_H

#include <stddef.h>
#include <stdint.h>

#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "tidegate/util.h"
#include "tidegate/run_records.h"
#include "tidegate/sim.h"

struct evbuffer;

/* ---- presenters (src/sim/runs_json.c) ---- */

/**
 * A page of runs (n of them, listed for q; more: further runs match) as
 * the extension API's body into g:
 * {"runs": [run…], "limit": n, "offset": n, "more": bool}. All borrowed.
 */
void tg_runs_page_json(yajl_gen g, const struct tg_run *runs, size_t n,
    const struct tg_runs_query *q, int more);

/**
 * A run as JSON into g: simulationId, caseId, caseSha256, host, apiKey,
 * status, vendorStatus, submittedAt, expiresAt, statusAt, completedAt,
 * nextCheckAt (ISO 8601 or null), checks, validation, failure,
 * lastCheckError, callbackUrl (query redacted), sweepId, variant,
 * archived, resultsSize, figures. g and run are borrowed.
 */
void tg_run_json(yajl_gen g, const struct tg_run *run);

/**
 * The webhook payload of a run that became terminal:
 * {"type": "simulation.completed" | "simulation.failed" | …,
 *  "timestamp": ISO(now), "data": run}. g and run are borrowed.
 */
void tg_runs_event_json(yajl_gen g, const struct tg_run *run, int64_t now_ms);

/**
 * The 410 body for a run past expiry into g: statusCode, error ("GONE"),
 * message (saying when it was submitted and when it expired), requestId
 * (when not NULL), simulationId, submittedAt, expiredAt, status (the last
 * vendor status) and archived. g, run and request_id are borrowed.
 */
void tg_runs_retention_message(yajl_gen g, const struct tg_run *run, const char *request_id);

/* ---- JSON Merge Patch, restricted to a case's editable sections (merge_patch.c) ---- */

/**
 * RFC 7396 MergePatch(target, patch) without restriction: a new tree
 * (yajl_tree_free it); target and patch are borrowed and unchanged
 * (target may be NULL). Objects merge recursively, null members delete,
 * anything else replaces; a member given twice in the patch applies in
 * order. Never NULL.
 */
yajl_val tg_merge_patch_rfc7396(yajl_val target, yajl_val patch);
/**
 * Check that patch touches only what a variant may edit, relative to the
 * base case target (docs/simulations.md):
 *   - the patch is an object with members vesselList, personnelList and
 *     windFarms only; the first two merge as RFC 7396 says (an array
 *     replaces the list);
 *   - windFarms, when given, is an array with one element per wind farm of
 *     target, each an object patch whose only member is infrastructureList
 *     ({} leaves a farm alone), itself an array with one element per entry
 *     of that farm, each an object patch whose only member is fixable
 *     (merged as RFC 7396 says).
 * Every breach is a problem (code not_editable; a member named twice at
 * these levels: duplicate) at its JSON Pointer into the patch, prefixed
 * with at (borrowed, e.g. "/variants/2/patch"; NULL or "" for none).
 * 0 or -1.
 */
int tg_merge_patch_check(yajl_val target, yajl_val patch, const char *at,
    struct tg_problems *p);
/**
 * tg_merge_patch_check, then apply: 0 with *result a new tree (caller
 * frees; the windFarms arrays merged element by element as described
 * above, everything else pure RFC 7396), or -1 with problems and *result
 * NULL. target, patch and at borrowed; nothing of them is kept.
 */
int tg_merge_patch_apply(yajl_val target, yajl_val patch, const char *at, yajl_val *result,
    struct tg_problems *p);
/** A deep copy of v (borrowed; NULL for NULL); the caller takes ownership:
 * yajl_tree_free. */
yajl_val tg_merge_patch_copy(yajl_val v);

/* ---- sweep requests and summaries (sweep.c) ---- */

/** A parsed POST sweep body; owns tree and the names and patches arrays,
 * whose elements (like the strings) point into tree: tg_sweep_request_cleanup. */
struct tg_sweep_request {
	yajl_val tree;
	const char *base_case_id;
	const char *callback_url;	/* NULL when absent, null or "" */
	int concurrency;		/* 0 when absent */
	size_t n;
	const char **names;		/* n variant names */
	yajl_val *patches;		/* n patches */
};
/**
 * Parse and check a sweep request:
 *   {"baseCaseId": "CASE-OM-1", "concurrency": 2, "callbackUrl": "https://…",
 *    "variants": [{"name": "base", "patch": {}}, …]}
 * (names: 1-64 of [A-Za-z0-9._-], starting with a letter or digit, unique;
 * 1…max_variants variants; concurrency 1-64). Every problem into p with
 * its pointer; 0 or -1 (req then holds nothing). body and p borrowed; req
 * is the caller's, owning what it holds on 0. The
 * callback URL is only type-checked: apply the egress policy after.
 */
int tg_sweep_request_parse(const char *body, size_t len, size_t max_variants,
    struct tg_sweep_request *req, struct tg_problems *p);
/** Free what req owns (req itself is borrowed); NULL-safe. */
void tg_sweep_request_cleanup(struct tg_sweep_request *req);
/**
 * Apply every variant's patch to base (the partial case fetched for
 * base_case_id, borrowed) and check each result with tg_case_check
 * against base. All problems of all variants are collected (patch
 * problems at /variants/i/patch…, case problems at /variants/i/case…)
 * before anything is returned: 0 with *out (the caller takes ownership:
 * tg_sweep_built_free) holding req->n serialised cases, or -1 with problems
 * and *out NULL. req, k and p are borrowed.
 */
int tg_sweep_build(const struct tg_sweep_request *req, yajl_val base,
    const struct tg_case_rules *k, struct tg_sweep_variant_new **out, struct tg_problems *p);
/** Takes ownership of v[0..n) and frees the strings and the array; NULL-safe. */
void tg_sweep_built_free(struct tg_sweep_variant_new *v, size_t n);

/**
 * Summary columns: the numeric top-level members of the variants'
 * figures, preferred ones first in a fixed order (docs/simulations.md),
 * then the rest in byte order. *cols is a malloc'd array of names
 * borrowed from the figures (valid while v is); the caller takes ownership
 * of the array only: free(*cols). v is borrowed.
 */
void tg_sweep_columns(const struct tg_sweep_variant *v, size_t n, const char ***cols,
    size_t *ncols);
/**
 * The sweep as JSON into g: sweepId, baseCaseId, state, createdAt, doneAt,
 * concurrency, callbackUrl (query redacted), counts by variant status,
 * columns, and variants [{name, status, simulationId, error, failure,
 * figures: {column: number}}] side by side. All borrowed.
 */
void tg_sweep_json(yajl_gen g, const struct tg_sweep *s, const struct tg_sweep_variant *v,
    size_t n);
/** A sweep's own record as JSON (for lists): sweepId, baseCaseId, state,
 * createdAt, doneAt, concurrency, callbackUrl (query redacted), variants
 * (their number). g and s are borrowed. */
void tg_sweep_brief_json(yajl_gen g, const struct tg_sweep *s);
/**
 * The same as CSV (RFC 4180: CRLF, fields quoted when needed) appended
 * to out: a header row "variant,status,<columns…>" and one row per
 * variant; figures as the vendor wrote them (locale-free), empty when
 * absent. out and v are borrowed.
 */
void tg_sweep_csv(struct evbuffer *out, const struct tg_sweep_variant *v, size_t n);

#endif
