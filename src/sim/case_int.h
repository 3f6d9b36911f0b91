/*
 * case_int.h - what the case check's two files share (private to
 * src/sim): case_check.c (structure, kinds, the diff) and case_entries.c
 * (the members of the editable entries). Not for other modules.
 */
#ifndef TG_SIM_CASE_INT_H
#define TG_SIM_CASE_INT_H

#include <yajl/yajl_tree.h>

#include "tidegate/sim.h"

/** 1 when s (borrowed) is one of l's strings (borrowed). */
int tg_case_listed(const struct tg_strlist *l, const char *s);
/** The members of every vessel, personnel role and fixable of the case c
 * (borrowed, an object) by the rules of k (borrowed): problems into p
 * (borrowed). Entries that are not objects are left to the structure check. */
void tg_case_entries_check(yajl_val c, const struct tg_case_rules *k, struct tg_problems *p);

#endif
