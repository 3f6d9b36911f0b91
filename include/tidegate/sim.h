/*
 * sim.h - the simulation API's own knowledge: the check of a submitted
 * case (src/sim/case_check.c: structure, case type from the fixableTypes,
 * and a diff against the partial case the gateway served) and the store of
 * served cases (src/sim/case_store.c). Problems go into struct tg_problems
 * (problems.h). The route table is src/sim/routes.c; the submission's
 * request check, which it names, src/sim/submit_check.c.
 */
#ifndef TIDEGATE_SIM_H
#define TIDEGATE_SIM_H

#include <stddef.h>

#include <yajl/yajl_tree.h>

#include "tidegate/config.h"
#include "tidegate/ops.h"
#include "tidegate/problems.h"
#include "tidegate/routes.h"

/* ---- simulation: routes ---- */

/** The check of a submission its route table names (src/sim/submit_check.c);
 * static. */
extern const struct tg_body_check tg_sim_submit_check;
/** The simulation service's routes (operations TG_OP_SIM_*) and prefixes;
 * static, borrowed. */
extern const struct tg_service_routes tg_sim_service_routes;

/* ---- simulation: cases ---- */

/* What a case is checked against: part of the simulation service's
 * configuration (sim.construction_types, sim.om_types,
 * sim.corrective_types, sim.check_entries), which owns the lists. */
struct tg_case_rules {
	struct tg_strlist construction;	/* fixableTypes of Construction cases */
	struct tg_strlist om;		/* fixableTypes of O&M cases */
	struct tg_strlist corrective;	/* O&M types timed by a failure rate */
	int entries;			/* check the editable entries' members */
};

enum tg_case_type { TG_CASE_UNKNOWN, TG_CASE_CONSTRUCTION, TG_CASE_OM };

/**
 * Check a submitted case: structure of a partial case, one case type across
 * its fixables (each offending fixable named), and, when base (the partial
 * case the gateway served for this caseId) is given, no change outside
 * vesselList, personnelList and windFarms[].infrastructureList[].fixable,
 * no fixableType moved to the other kind; with k->entries, the members of
 * every vessel, personnel role and fixable (case_entries.c). Returns 0 or
 * -1 with problems;
 * *type receives the detected type. submitted, base, k, type and p are
 * borrowed; nothing is kept.
 */
int tg_case_check(yajl_val submitted, yajl_val base, const struct tg_case_rules *k,
    enum tg_case_type *type, struct tg_problems *p);

/** Partial cases the gateway served, by case id (bounded, oldest dropped). */
struct tg_case_store;
/** New store, owned by the caller: tg_case_store_free(). max_cases 0: 256. */
struct tg_case_store *tg_case_store_new(size_t max_cases);
/** Takes ownership of cs: frees it and its trees (those still referenced
 * live on until released); NULL-safe. */
void tg_case_store_free(struct tg_case_store *cs);
/** Remember a served case: takes ownership of tree (freed at once when cs or
 * case_id is NULL; a NULL tree forgets the case). cs and case_id are borrowed
 * (case_id is copied). */
void tg_case_store_put(struct tg_case_store *cs, const char *case_id, yajl_val tree);
/** The stored tree, or NULL; cs and case_id are borrowed, the tree is
 * borrowed until the next put (any case) or tg_case_store_free. */
yajl_val tg_case_store_get(struct tg_case_store *cs, const char *case_id);
/**
 * A served case held beyond the store's say (a check off the event loop):
 * the tree stays valid and unchanged until tg_case_ref_release, even if the
 * store drops or replaces the case. Touches the case as get does. NULL when
 * not stored; cs and case_id are borrowed. The caller owns the reference:
 * tg_case_ref_release(). Taken and released on the loop thread only.
 */
struct tg_case_ref;
struct tg_case_ref *tg_case_store_ref(struct tg_case_store *cs, const char *case_id);
/** The held tree (borrowed while the reference is held; read it, never change it). */
yajl_val tg_case_ref_tree(const struct tg_case_ref *ref);
/** Takes ownership of ref and releases it (NULL-safe); the last one frees the tree. */
void tg_case_ref_release(struct tg_case_ref *ref);

#endif
