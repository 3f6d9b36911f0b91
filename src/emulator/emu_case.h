/*
 * emu_case.h - the simulation API's data model, shared by sim.c (the
 * endpoints and run registry), case.c (seeded partial cases, case kind,
 * validity of a submitted case) and results.c (the deterministic model
 * that turns a valid case into results). Tests link against it too.
 */
#ifndef TIDEGATE_EMU_CASE_H
#define TIDEGATE_EMU_CASE_H

#include <yajl/yajl_tree.h>

#include "tidegate/util.h"

struct tg_emu;

enum emu_case_kind {
	EMU_CASE_NONE = -1,		/* no fixables, or both kinds mixed */
	EMU_CASE_CONSTRUCTION = 0,
	EMU_CASE_OM = 1,
};

/* ---- case.c ---- */
/** Build the seeded cases into emu->cases and emu->case_ids. */
void emu_cases_init(struct tg_emu *emu);
void emu_cases_free(struct tg_emu *emu);
/**
 * Kind of a fixableType ("INSTALLATION_TASK" -> EMU_CASE_CONSTRUCTION),
 * EMU_CASE_NONE when unknown. *corrective (may be NULL) is set to 1 for
 * CORRECTIVE_MAINTENANCE, whose frequency is a failure rate.
 */
int emu_fixable_kind(const char *fixable_type, int *corrective);
/** Kind shared by every fixable of the case (borrowed tree). */
int emu_case_kind(yajl_val c);
/** "CONSTRUCTION" or "O&M" (the listing's type field). */
const char *emu_case_kind_name(int kind);
/**
 * 0 when sub is a valid edit of base: only the editable sections differ and
 * they are well formed for base's kind. Otherwise -1, the first problem in
 * err (for the log only: the API never tells why a run failed).
 */
int emu_case_validate(yajl_val sub, yajl_val base, struct tg_err *err);
/** Deep equality of two JSON values (key order ignored, 1 == 1.0). */
int emu_json_equal(yajl_val a, yajl_val b);

/* ---- results.c ---- */
/**
 * Results of a case that passed emu_case_validate, as a JSON object the
 * caller frees with yajl_tree_free. Pure: equal cases give equal results.
 */
yajl_val emu_results_compute(yajl_val c, int kind);

#endif
