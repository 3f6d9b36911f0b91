/*
 * test_case_check.c - the simulation case validator (src/sim/case_check.c)
 * and the store of served cases (src/sim/case_store.c): structure, case
 * type from the fixableTypes, the diff against the served case with exact
 * JSON Pointers, and that garbage never crashes either.
 *
 * Cases are written with single quotes for legibility (turned into double
 * quotes before parsing); variants are made by replacing one unique
 * substring of a case, so each test shows just the edit it is about.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tidegate/json.h"
#include "tidegate/sim.h"
#include "harness.h"

static const char CON[] =
    "{'caseId': 'CASE-CON-T', 'name': 'Test construction', 'currency': 'EUR',"
    " 'startDate': '2026-03-01T00:00:00Z',"
    " 'weather': {'dataset': 'HINDCAST', 'meanSignificantWaveHeightM': 1.6},"
    " 'ports': [{'id': 'PORT-ESB', 'name': 'Esbjerg'}],"
    " 'vesselList': ["
    "  {'id': 'V-HLV-1', 'type': 'HLV', 'quantity': 1, 'dayRate': 220000},"
    "  {'id': 'V-CTV-1', 'type': 'CTV', 'quantity': 2, 'dayRate': 3500}],"
    " 'personnelList': [{'id': 'P-INST', 'role': 'INSTALLATION_TECHNICIAN', 'quantity': 12,"
    "  'dayRate': 800}],"
    " 'windFarms': [{'id': 'WF-SS', 'name': 'Silver Sands', 'portId': 'PORT-ESB',"
    "  'distanceToPortKm': 60, 'infrastructureList': ["
    "   {'id': 'SS-WTG-01', 'type': 'WTG', 'ratedPowerMW': 8, 'fixable': ["
    "    {'id': 'SS-WTG-01-MP', 'fixableType': 'INSTALLATION_TASK', 'durationHours': 30},"
    "    {'id': 'SS-WTG-01-WTG', 'fixableType': 'INSTALLATION_TASK', 'durationHours': 36},"
    "    {'id': 'SS-WTG-01-COM', 'fixableType': 'COMMISSIONING_TASK', 'durationHours': 72}]},"
    "   {'id': 'SS-WTG-02', 'type': 'WTG', 'ratedPowerMW': 8.5, 'fixable': ["
    "    {'id': 'SS-WTG-02-MP', 'fixableType': 'INSTALLATION_TASK', 'durationHours': 31},"
    "    {'id': 'SS-WTG-02-COM', 'fixableType': 'COMMISSIONING_TASK', 'durationHours': 73}]}"
    "  ]}]}";

static const char OM[] =
    "{'caseId': 'CASE-OM-T', 'name': 'Test O&M', 'currency': 'EUR',"
    " 'weather': {'meanSignificantWaveHeightM': 1.4, 'capacityFactor': 0.45},"
    " 'vesselList': ["
    "  {'id': 'V-CTV-1', 'type': 'CTV', 'quantity': 2, 'dayRate': 3800},"
    "  {'id': 'V-JUV-1', 'type': 'JACK_UP', 'quantity': 1, 'dayRate': 140000}],"
    " 'personnelList': ["
    "  {'id': 'P-WTG', 'role': 'WTG_TECHNICIAN', 'quantity': 12, 'dayRate': 620},"
    "  {'id': 'P-HV', 'role': 'HV_TECHNICIAN', 'quantity': 2, 'dayRate': 850}],"
    " 'windFarms': [{'id': 'WF-NR', 'name': 'North Reef', 'distanceToPortKm': 45,"
    "  'infrastructureList': ["
    "   {'id': 'NR-WTG-01', 'type': 'WTG', 'model': 'V164-8.0', 'fixable': ["
    "    {'id': 'NR-WTG-01-CM', 'fixableType': 'CORRECTIVE_MAINTENANCE',"
    "     'failureRatePerYear': 5},"
    "    {'id': 'NR-WTG-01-PM', 'fixableType': 'PREVENTIVE_MAINTENANCE', 'intervalDays': 365}]},"
    "   {'id': 'NR-WTG-02', 'type': 'WTG', 'model': 'V164-8.0', 'fixable': ["
    "    {'id': 'NR-WTG-02-CM', 'fixableType': 'CORRECTIVE_MAINTENANCE',"
    "     'failureRatePerYear': 4},"
    "    {'id': 'NR-WTG-02-INSP', 'fixableType': 'INSPECTION', 'intervalDays': 180}]}"
    "  ]}]}";

#define FX(i, j, n) "/windFarms/" #i "/infrastructureList/" #j "/fixable/" #n
#define FXT(i, j, n) FX(i, j, n) "/fixableType"

static char *con_types[] = { "INSTALLATION_TASK", "COMMISSIONING_TASK" };
static char *om_types[] = { "CORRECTIVE_MAINTENANCE", "PREVENTIVE_MAINTENANCE",
	"SCHEDULED_SERVICE", "INSPECTION" };
static const struct tg_case_rules kinds = {
	{ con_types, 2 }, { om_types, 4 }, { NULL, 0 }, 0,
};

struct want {
	const char *path, *code;
};

/* ---- helpers ---- */

/* src with the one occurrence of from replaced by to (malloc'd). */
static char *
edit(const char *src, const char *from, const char *to)
{
	const char *at = strstr(src, from);
	char *out;

	if (at == NULL || strstr(at + 1, from) != NULL)
		fail_msg("edit: \"%s\" must occur exactly once", from);
	out = tg_xasprintf("%.*s%s%s", (int)(at - src), src, to, at + strlen(from));
	return out;
}

/* Check sub (and base, when not NULL); problems are left in p. */
static int
check(const char *sub, const char *base, enum tg_case_type *type, struct tg_problems *p)
{
	yajl_val s = th_parse_quoted(sub), b = base ? th_parse_quoted(base) : NULL;
	int rc;

	rc = tg_case_check(s, b, &kinds, type, p);
	yajl_tree_free(s);
	yajl_tree_free(b);
	return rc;
}

static void
dump(const struct tg_problems *p)
{
	size_t i;

	for (i = 0; i < p->n; i++)
		print_message("  %s  %s  %s\n", p->v[i].path, p->v[i].code, p->v[i].message);
}

/* p holds exactly the wanted problems, in any order. */
static void
expect(const struct tg_problems *p, const struct want *w, size_t n)
{
	char used[64] = { 0 };
	size_t i, j;

	assert_true(n <= sizeof(used));
	if (p->total != n || p->n != n) {
		dump(p);
		fail_msg("%zu problems, want %zu", p->total, n);
	}
	for (i = 0; i < n; i++) {
		for (j = 0; j < p->n; j++)
			if (!used[j] && strcmp(p->v[j].path, w[i].path) == 0 &&
			    strcmp(p->v[j].code, w[i].code) == 0)
				break;
		if (j == p->n) {
			dump(p);
			fail_msg("missing %s %s", w[i].path, w[i].code);
		}
		used[j] = 1;
	}
}

#define EXPECT(p, ...) do {						\
	const struct want w_[] = { __VA_ARGS__ };			\
	expect((p), w_, TG_NELEM(w_));					\
} while (0)

/* The message of the only problem at path. */
static const char *
message_at(const struct tg_problems *p, const char *path)
{
	size_t i;

	for (i = 0; i < p->n; i++)
		if (strcmp(p->v[i].path, path) == 0)
			return p->v[i].message;
	dump(p);
	fail_msg("no problem at %s", path);
	return NULL;
}

/* One edit of base, checked against base: the problems it must give. */
static void
expect_edit(const char *base, const char *from, const char *to, const struct want *w,
    size_t n)
{
	struct tg_problems p = { 0 };
	enum tg_case_type t;
	char *sub = edit(base, from, to);

	(void)check(sub, base, &t, &p);
	expect(&p, w, n);
	tg_problems_cleanup(&p);
	free(sub);
}

#define EXPECT_EDIT(base, from, to, ...) do {				\
	const struct want w_[] = { __VA_ARGS__ };			\
	expect_edit((base), (from), (to), w_, TG_NELEM(w_));		\
} while (0)

static void
expect_ok_edit(const char *base, const char *from, const char *to)
{
	struct tg_problems p = { 0 };
	enum tg_case_type t = TG_CASE_UNKNOWN;
	char *sub = edit(base, from, to);

	if (check(sub, base, &t, &p) != 0) {
		dump(&p);
		fail_msg("edit %s -> %s refused", from, to);
	}
	assert_int_equal(t, base == CON ? TG_CASE_CONSTRUCTION : TG_CASE_OM);
	tg_problems_cleanup(&p);
	free(sub);
}

/* ---- valid cases ---- */

static void
test_unchanged(void **state)
{
	struct tg_problems p = { 0 };
	enum tg_case_type t = TG_CASE_UNKNOWN;

	assert_int_equal(check(CON, CON, &t, &p), 0);
	assert_int_equal(t, TG_CASE_CONSTRUCTION);
	assert_int_equal(check(CON, NULL, &t, &p), 0);
	assert_int_equal(t, TG_CASE_CONSTRUCTION);
	assert_int_equal(check(OM, OM, &t, &p), 0);
	assert_int_equal(t, TG_CASE_OM);
	assert_int_equal(check(OM, NULL, &t, &p), 0);
	assert_int_equal(t, TG_CASE_OM);
	assert_int_equal(p.total, 0);
	tg_problems_cleanup(&p);
}

static void
test_editable_sections(void **state)
{
	/* vessels: add, remove, quantity, emptied */
	expect_ok_edit(CON, "'quantity': 2", "'quantity': 4");
	expect_ok_edit(CON, "{'id': 'V-CTV-1', 'type': 'CTV', 'quantity': 2, 'dayRate': 3500}",
	    "{'id': 'V-CTV-1', 'type': 'CTV', 'quantity': 2, 'dayRate': 3500},"
	    " {'id': 'V-CTV-2', 'type': 'CTV', 'quantity': 1, 'dayRate': 3600, 'new': true}");
	expect_ok_edit(OM, "{'id': 'V-CTV-1', 'type': 'CTV', 'quantity': 2, 'dayRate': 3800},",
	    "");
	expect_ok_edit(OM, "'vesselList': [  {'id': 'V-CTV-1', 'type': 'CTV', 'quantity': 2,"
	    " 'dayRate': 3800},  {'id': 'V-JUV-1', 'type': 'JACK_UP', 'quantity': 1,"
	    " 'dayRate': 140000}]", "'vesselList': []");
	/* personnel */
	expect_ok_edit(OM, "'quantity': 12", "'quantity': 18");
	expect_ok_edit(OM, "{'id': 'P-HV', 'role': 'HV_TECHNICIAN', 'quantity': 2, 'dayRate': 850}",
	    "{'id': 'P-HV', 'role': 'HV_TECHNICIAN', 'quantity': 2, 'dayRate': 850},"
	    " {'id': 'P-BLADE', 'role': 'BLADE_TECHNICIAN', 'quantity': 4, 'dayRate': 700}");
	/* fixables: changed members, added and removed of the right kind */
	expect_ok_edit(CON, "'durationHours': 36", "'durationHours': 40, 'partsCost': 900");
	expect_ok_edit(CON,
	    "{'id': 'SS-WTG-01-WTG', 'fixableType': 'INSTALLATION_TASK', 'durationHours': 36},",
	    "");
	expect_ok_edit(CON, "'durationHours': 73}", "'durationHours': 73},"
	    " {'id': 'SS-WTG-02-TP', 'fixableType': 'INSTALLATION_TASK', 'durationHours': 18}");
	expect_ok_edit(OM, "'intervalDays': 365", "'intervalDays': 180");
	expect_ok_edit(OM, "'intervalDays': 180}", "'intervalDays': 180},"
	    " {'id': 'NR-WTG-02-SVC', 'fixableType': 'SCHEDULED_SERVICE', 'intervalDays': 365}");
	/* a fixable may move between O&M types */
	expect_ok_edit(OM, "'PREVENTIVE_MAINTENANCE'", "'SCHEDULED_SERVICE'");
}

/* 2 and 2.0 are the same number; members may come in any order. */
static void
test_numbers_and_key_order(void **state)
{
	expect_ok_edit(CON, "'distanceToPortKm': 60", "'distanceToPortKm': 60.0");
	expect_ok_edit(CON, "'distanceToPortKm': 60", "'distanceToPortKm': 6e1");
	expect_ok_edit(CON, "'ratedPowerMW': 8.5", "'ratedPowerMW': 8.50");
	expect_ok_edit(OM, "'capacityFactor': 0.45", "'capacityFactor': 4.5E-1");
	expect_ok_edit(CON, "'weather': {'dataset': 'HINDCAST', 'meanSignificantWaveHeightM': 1.6}",
	    "'weather': {'meanSignificantWaveHeightM': 1.6, 'dataset': 'HINDCAST'}");
	expect_ok_edit(OM, "{'id': 'WF-NR', 'name': 'North Reef', 'distanceToPortKm': 45,",
	    "{'distanceToPortKm': 45.0, 'name': 'North Reef', 'id': 'WF-NR',");
	expect_ok_edit(OM, "{'id': 'NR-WTG-02', 'type': 'WTG', 'model': 'V164-8.0', 'fixable': [",
	    "{'model': 'V164-8.0', 'type': 'WTG', 'id': 'NR-WTG-02', 'fixable': [");
}

/* ---- structure ---- */

static void
expect_sub(const char *sub, const struct want *w, size_t n)
{
	struct tg_problems p = { 0 };
	enum tg_case_type t;

	assert_int_equal(check(sub, NULL, &t, &p), n ? -1 : 0);
	expect(&p, w, n);
	tg_problems_cleanup(&p);
}

/* One edit of CON, checked alone (no base): the problems it must give. */
#define EXPECT_CON(from, to, ...) do {					\
	const struct want w_[] = { __VA_ARGS__ };			\
	char *s_ = edit(CON, (from), (to));				\
	expect_sub(s_, w_, TG_NELEM(w_));				\
	free(s_);							\
} while (0)

static void
test_structure_root(void **state)
{
	static const struct want root[] = { { "", "structure" } };

	expect_sub("[]", root, 1);
	expect_sub("'CASE-CON-T'", root, 1);
	expect_sub("null", root, 1);
	expect_sub("{}", (const struct want[]){ { "/caseId", "required" },
	    { "/vesselList", "structure" }, { "/personnelList", "structure" },
	    { "/windFarms", "structure" } }, 4);
	EXPECT_CON("'caseId': 'CASE-CON-T', ", "", { "/caseId", "required" });
	EXPECT_CON("'caseId': 'CASE-CON-T'", "'caseId': 7", { "/caseId", "type" });
	EXPECT_CON("'caseId': 'CASE-CON-T'", "'caseId': ''", { "/caseId", "type" });
	EXPECT_CON("'caseId': 'CASE-CON-T'", "'caseId': ['CASE-CON-T']", { "/caseId", "type" });
}

static void
test_structure_lists(void **state)
{
	EXPECT_CON("'vesselList': [", "'vesselList': {}, 'v': [", { "/vesselList", "structure" });
	EXPECT_CON("'vesselList': [", "'vessels': [", { "/vesselList", "structure" });
	EXPECT_CON("'vesselList': [", "'vesselList': [3, null, ",
	    { "/vesselList/0", "structure" }, { "/vesselList/1", "structure" });
	EXPECT_CON("'personnelList': [", "'personnelList': 'P-INST', 'x': [",
	    { "/personnelList", "structure" });
	EXPECT_CON("'personnelList': [", "'personnelList': [[], ",
	    { "/personnelList/0", "structure" });
}

static void
test_structure_farms(void **state)
{
	struct tg_problems p = { 0 };
	enum tg_case_type t;

	EXPECT_CON("'windFarms': [", "'windFarms': {}, 'x': [", { "/windFarms", "structure" });
	EXPECT_CON("'windFarms': [", "'farms': [", { "/windFarms", "structure" });
	EXPECT_CON("'windFarms': [", "'windFarms': [true, ", { "/windFarms/0", "structure" });
	expect_sub("{'caseId': 'C', 'vesselList': [], 'personnelList': [], 'windFarms': []}",
	    (const struct want[]){ { "/windFarms", "structure" } }, 1);
	EXPECT_CON("'infrastructureList': [", "'infrastructure': [",
	    { "/windFarms/0/infrastructureList", "structure" });
	EXPECT_CON("'infrastructureList': [", "'infrastructureList': 5, 'x': [",
	    { "/windFarms/0/infrastructureList", "structure" });
	EXPECT_CON("'infrastructureList': [", "'infrastructureList': ['SS-WTG-00', ",
	    { "/windFarms/0/infrastructureList/0", "structure" });
	/* a case without fixables has no type */
	assert_int_equal(check("{'caseId': 'C', 'vesselList': [], 'personnelList': [],"
	    " 'windFarms': [{'infrastructureList': []}]}", NULL, &t, &p), 0);
	assert_int_equal(t, TG_CASE_UNKNOWN);
	tg_problems_cleanup(&p);
}

static void
test_structure_fixables(void **state)
{
	char *s;

	EXPECT_CON("'ratedPowerMW': 8, 'fixable': [", "'ratedPowerMW': 8, 'fixables': [",
	    { "/windFarms/0/infrastructureList/0/fixable", "structure" });
	EXPECT_CON("'ratedPowerMW': 8.5, 'fixable': [",
	    "'ratedPowerMW': 8.5, 'fixable': 'none', 'a': [",
	    { "/windFarms/0/infrastructureList/1/fixable", "structure" });
	EXPECT_CON("'ratedPowerMW': 8.5, 'fixable': [", "'ratedPowerMW': 8.5, 'fixable': [1, ",
	    { FX(0, 1, 0), "structure" });
	EXPECT_CON("'fixableType': 'COMMISSIONING_TASK', 'durationHours': 72",
	    "'durationHours': 72", { FXT(0, 0, 2), "required" });
	EXPECT_CON("'fixableType': 'COMMISSIONING_TASK', 'durationHours': 72",
	    "'fixableType': 3, 'durationHours': 72", { FXT(0, 0, 2), "type" });
	EXPECT_CON("'fixableType': 'COMMISSIONING_TASK', 'durationHours': 72",
	    "'fixableType': null, 'durationHours': 72", { FXT(0, 0, 2), "type" });
	EXPECT_CON("'id': 'SS-WTG-02-MP'", "'id': 12", { FX(0, 1, 0) "/id", "type" });
	/* id is optional */
	s = edit(CON, "'id': 'SS-WTG-02-MP', ", "");
	expect_sub(s, NULL, 0);
	free(s);
}

/* ---- case type ---- */

/* One farm, two assets with the given fixables (JSON text, may be empty). */
static char *
mini(const char *fx0, const char *fx1)
{
	return tg_xasprintf("{'caseId': 'M', 'vesselList': [], 'personnelList': [],"
	    " 'windFarms': [{'id': 'WF', 'infrastructureList': [{'id': 'A', 'fixable': [%s]},"
	    " {'id': 'B', 'fixable': [%s]}]}]}", fx0, fx1);
}

/* Type and problems of sub, checked against base (NULL: alone). */
static enum tg_case_type
expect_type(const char *sub, const char *base, const struct want *w, size_t n)
{
	struct tg_problems p = { 0 };
	enum tg_case_type t = TG_CASE_UNKNOWN;

	assert_int_equal(check(sub, base, &t, &p), n ? -1 : 0);
	expect(&p, w, n);
	tg_problems_cleanup(&p);
	return t;
}

#define WANTS(...) (const struct want[]){ __VA_ARGS__ },		\
	sizeof((const struct want[]){ __VA_ARGS__ }) / sizeof(struct want)
#define TYPE_OF(sub, base, ...) expect_type((sub), (base), WANTS(__VA_ARGS__))

static void
test_unknown_type(void **state)
{
	struct tg_problems p = { 0 };
	enum tg_case_type t;
	char *s = edit(CON, "'COMMISSIONING_TASK', 'durationHours': 72",
	    "'COMISSIONING_TASK', 'durationHours': 72");

	assert_int_equal(check(s, CON, &t, &p), -1);
	EXPECT(&p, { FXT(0, 0, 2), "unknown_type" });
	assert_string_equal(message_at(&p, FXT(0, 0, 2)), "COMISSIONING_TASK is not a known "
	    "fixableType (Construction: INSTALLATION_TASK, COMMISSIONING_TASK; O&M: "
	    "CORRECTIVE_MAINTENANCE, PREVENTIVE_MAINTENANCE, SCHEDULED_SERVICE, INSPECTION); "
	    "did you mean COMMISSIONING_TASK?");
	assert_int_equal(t, TG_CASE_CONSTRUCTION);
	tg_problems_cleanup(&p);
	free(s);
	/* unknown ones do not count toward the type; no hint when nothing is close */
	s = mini("{'fixableType': 'REPAINT'}, {'fixableType': 'INSPECTION'}", "");
	assert_int_equal(TYPE_OF(s, NULL, { FXT(0, 0, 0), "unknown_type" }), TG_CASE_OM);
	assert_int_equal(check(s, NULL, &t, &p), -1);
	assert_null(strstr(message_at(&p, FXT(0, 0, 0)), "did you mean"));
	tg_problems_cleanup(&p);
	free(s);
}

static void
test_mixed_without_base(void **state)
{
	struct tg_problems p = { 0 };
	enum tg_case_type t;
	char *s = edit(CON, "'INSTALLATION_TASK', 'durationHours': 36",
	    "'CORRECTIVE_MAINTENANCE', 'durationHours': 36");

	assert_int_equal(check(s, NULL, &t, &p), -1);
	assert_int_equal(t, TG_CASE_CONSTRUCTION);
	EXPECT(&p, { FXT(0, 0, 1), "mixed_kinds" });
	assert_string_equal(message_at(&p, FXT(0, 0, 1)), "CORRECTIVE_MAINTENANCE is an O&M "
	    "type; this is a Construction case (INSTALLATION_TASK, COMMISSIONING_TASK)");
	tg_problems_cleanup(&p);
	free(s);
	s = edit(OM, "'INSPECTION'", "'INSTALLATION_TASK'");
	assert_int_equal(check(s, NULL, &t, &p), -1);
	assert_int_equal(t, TG_CASE_OM);
	assert_string_equal(message_at(&p, FXT(0, 1, 1)), "INSTALLATION_TASK is a Construction "
	    "type; this is an O&M case (CORRECTIVE_MAINTENANCE, PREVENTIVE_MAINTENANCE, "
	    "SCHEDULED_SERVICE, INSPECTION)");
	tg_problems_cleanup(&p);
	free(s);
	/* majority wins, whatever comes first */
	s = mini("{'fixableType': 'INSTALLATION_TASK'}, {'fixableType': 'INSPECTION'}",
	    "{'fixableType': 'SCHEDULED_SERVICE'}");
	assert_int_equal(TYPE_OF(s, NULL, { FXT(0, 0, 0), "mixed_kinds" }), TG_CASE_OM);
	free(s);
	/* a tie goes to the first fixable's kind (of a known type) */
	s = mini("{'fixableType': 'INSPECTION'}", "{'fixableType': 'INSTALLATION_TASK'}");
	assert_int_equal(TYPE_OF(s, NULL, { FXT(0, 1, 0), "mixed_kinds" }), TG_CASE_OM);
	free(s);
	s = mini("{'fixableType': 'X'}, {'fixableType': 'COMMISSIONING_TASK'}",
	    "{'fixableType': 'INSPECTION'}");
	assert_int_equal(TYPE_OF(s, NULL, { FXT(0, 0, 0), "unknown_type" },
	    { FXT(0, 1, 0), "mixed_kinds" }), TG_CASE_CONSTRUCTION);
	free(s);
}

/* With the served case, its type rules even when the submission is mostly the other kind. */
static void
test_mixed_with_base(void **state)
{
	char *b = mini("{'id': 'a', 'fixableType': 'INSTALLATION_TASK'}", "");
	char *s = mini("{'id': 'a', 'fixableType': 'INSTALLATION_TASK'}",
	    "{'id': 'b', 'fixableType': 'INSPECTION'}, {'id': 'c', 'fixableType': 'INSPECTION'},"
	    " {'fixableType': 'CORRECTIVE_MAINTENANCE'}");

	assert_int_equal(TYPE_OF(s, NULL, { FXT(0, 0, 0), "mixed_kinds" }), TG_CASE_OM);
	assert_int_equal(TYPE_OF(s, b, { FXT(0, 1, 0), "mixed_kinds" },
	    { FXT(0, 1, 1), "mixed_kinds" }, { FXT(0, 1, 2), "mixed_kinds" }),
	    TG_CASE_CONSTRUCTION);
	free(s);
	/* every O&M fixable added to a construction case is named */
	s = edit(CON, "'durationHours': 73}", "'durationHours': 73},"
	    " {'id': 'N1', 'fixableType': 'INSPECTION'},"
	    " {'id': 'N2', 'fixableType': 'INSPECTION'}");
	assert_int_equal(TYPE_OF(s, CON, { FXT(0, 1, 2), "mixed_kinds" },
	    { FXT(0, 1, 3), "mixed_kinds" }), TG_CASE_CONSTRUCTION);
	free(s);
	free(b);
}

static void
test_kind_changed(void **state)
{
	struct tg_problems p = { 0 };
	enum tg_case_type t;
	char *s = edit(OM, "'PREVENTIVE_MAINTENANCE'", "'INSTALLATION_TASK'"), *s2;

	assert_int_equal(check(s, OM, &t, &p), -1);
	assert_int_equal(t, TG_CASE_OM);
	EXPECT(&p, { FXT(0, 0, 1), "kind_changed" });
	assert_string_equal(message_at(&p, FXT(0, 0, 1)), "INSTALLATION_TASK is a Construction "
	    "type; fixable NR-WTG-01-PM is PREVENTIVE_MAINTENANCE (O&M) in the case and may not "
	    "change kind");
	tg_problems_cleanup(&p);
	/* without the served case it is only a mixed case */
	TYPE_OF(s, NULL, { FXT(0, 0, 1), "mixed_kinds" });
	free(s);
	/* matched by id, wherever the fixable now sits in its asset */
	s = edit(OM, "{'id': 'NR-WTG-01-CM', 'fixableType': 'CORRECTIVE_MAINTENANCE',",
	    "{'id': 'NR-WTG-01-PM', 'fixableType': 'COMMISSIONING_TASK'}, {'id': 'NR-WTG-01-CM',"
	    " 'fixableType': 'CORRECTIVE_MAINTENANCE',");
	s2 = edit(s, "{'id': 'NR-WTG-01-PM', 'fixableType': 'PREVENTIVE_MAINTENANCE',"
	    " 'intervalDays': 365}", "{'id': 'X'}");
	TYPE_OF(s2, OM, { FXT(0, 0, 0), "kind_changed" }, { FXT(0, 0, 2), "required" });
	free(s);
	free(s2);
	/* the same id on another asset is not the same fixable */
	s = edit(OM, "'intervalDays': 180}", "'intervalDays': 180},"
	    " {'id': 'NR-WTG-01-PM', 'fixableType': 'COMMISSIONING_TASK'}");
	TYPE_OF(s, OM, { FXT(0, 1, 2), "mixed_kinds" });
	free(s);
	/* all of them moved: the served case's type stays, each is named */
	s = edit(OM, "'CORRECTIVE_MAINTENANCE',     'failureRatePerYear': 5",
	    "'INSTALLATION_TASK',     'failureRatePerYear': 5");
	s2 = edit(s, "'CORRECTIVE_MAINTENANCE',     'failureRatePerYear': 4",
	    "'INSTALLATION_TASK',     'failureRatePerYear': 4");
	free(s);
	s = edit(s2, "'PREVENTIVE_MAINTENANCE'", "'COMMISSIONING_TASK'");
	free(s2);
	s2 = edit(s, "'INSPECTION'", "'COMMISSIONING_TASK'");
	assert_int_equal(TYPE_OF(s2, OM, { FXT(0, 0, 0), "kind_changed" },
	    { FXT(0, 0, 1), "kind_changed" }, { FXT(0, 1, 0), "kind_changed" },
	    { FXT(0, 1, 1), "kind_changed" }), TG_CASE_OM);
	assert_int_equal(expect_type(s2, NULL, NULL, 0), TG_CASE_CONSTRUCTION);
	free(s);
	free(s2);
}

/* ---- diff against the served case ---- */

static void
test_not_editable_top(void **state)
{
	struct tg_problems p = { 0 };
	enum tg_case_type t;
	char *s;

	EXPECT_EDIT(CON, "'name': 'Test construction'", "'name': 'Other'",
	    { "/name", "not_editable" });
	EXPECT_EDIT(CON, "'caseId': 'CASE-CON-T'", "'caseId': 'CASE-OM-T'",
	    { "/caseId", "not_editable" });
	EXPECT_EDIT(CON, "'currency': 'EUR', ", "'currency': 'EUR', 'extra': 1, ",
	    { "/extra", "not_editable" });
	EXPECT_EDIT(CON, "'currency': 'EUR', ", "", { "/currency", "not_editable" });
	EXPECT_EDIT(CON, "'meanSignificantWaveHeightM': 1.6", "'meanSignificantWaveHeightM': 1.7",
	    { "/weather/meanSignificantWaveHeightM", "not_editable" });
	EXPECT_EDIT(CON, "'name': 'Esbjerg'}]", "'name': 'Esbjerg'}, {'id': 'PORT-2'}]",
	    { "/ports/1", "not_editable" });
	EXPECT_EDIT(CON, "'ports': [{'id': 'PORT-ESB', 'name': 'Esbjerg'}]", "'ports': []",
	    { "/ports/0", "not_editable" });
	EXPECT_EDIT(CON, "'currency': 'EUR', ", "'currency': 'EUR', 'a/b~c': {}, ",
	    { "/a~1b~0c", "not_editable" });
	/* a list renamed: the new member is not editable, the list is missing */
	EXPECT_EDIT(OM, "'personnelList': [", "'staff': [",
	    { "/staff", "not_editable" }, { "/personnelList", "structure" });
	/* messages: what was added or removed, or what the case has */
	s = edit(CON, "'currency': 'EUR', ", "'extra': 1, ");
	assert_int_equal(check(s, CON, &t, &p), -1);
	assert_string_equal(message_at(&p, "/extra"), "added");
	assert_string_equal(message_at(&p, "/currency"), "removed");
	tg_problems_cleanup(&p);
	free(s);
	s = edit(CON, "'name': 'Test construction'", "'name': ['Test construction']");
	assert_int_equal(check(s, CON, &t, &p), -1);
	assert_string_equal(message_at(&p, "/name"), "changed; the case has \"Test construction\"");
	tg_problems_cleanup(&p);
	free(s);
}

static void
test_not_editable_numbers(void **state)
{
	struct tg_problems p = { 0 };
	enum tg_case_type t;
	char *s;

	EXPECT_EDIT(CON, "'distanceToPortKm': 60", "'distanceToPortKm': 60.5",
	    { "/windFarms/0/distanceToPortKm", "not_editable" });
	EXPECT_EDIT(CON, "'distanceToPortKm': 60", "'distanceToPortKm': '60'",
	    { "/windFarms/0/distanceToPortKm", "not_editable" });
	EXPECT_EDIT(CON, "'distanceToPortKm': 60", "'distanceToPortKm': null",
	    { "/windFarms/0/distanceToPortKm", "not_editable" });
	EXPECT_EDIT(CON, "'distanceToPortKm': 60", "'distanceToPortKm': 600000000000000000000",
	    { "/windFarms/0/distanceToPortKm", "not_editable" });
	s = edit(CON, "'distanceToPortKm': 60", "'distanceToPortKm': 61");
	assert_int_equal(check(s, CON, &t, &p), -1);
	assert_string_equal(message_at(&p, "/windFarms/0/distanceToPortKm"),
	    "changed; the case has 60");
	tg_problems_cleanup(&p);
	free(s);
}

static void
test_not_editable_farms(void **state)
{
	/* wind farm entry */
	EXPECT_EDIT(CON, "'name': 'Silver Sands'", "'name': 'Gold Sands'",
	    { "/windFarms/0/name", "not_editable" });
	EXPECT_EDIT(CON, "'portId': 'PORT-ESB',", "'portId': 'PORT-ESB', 'owner': 'X',",
	    { "/windFarms/0/owner", "not_editable" });
	EXPECT_EDIT(CON, "'portId': 'PORT-ESB',", "",
	    { "/windFarms/0/portId", "not_editable" });
	EXPECT_EDIT(CON, "73}]}  ]}]}", "73}]}  ]}, {'id': 'WF-2', 'infrastructureList': []}]}",
	    { "/windFarms/1", "not_editable" });
	EXPECT_EDIT(OM, "'windFarms': [{", "'windFarms': [{'id': 'WF-0', 'infrastructureList': []},"
	    " {", { "/windFarms/0/id", "not_editable" }, { "/windFarms/0/name", "not_editable" },
	    { "/windFarms/0/distanceToPortKm", "not_editable" },
	    { "/windFarms/0/infrastructureList/0", "not_editable" },
	    { "/windFarms/0/infrastructureList/1", "not_editable" },
	    { "/windFarms/1", "not_editable" });
	/* infrastructure entry */
	EXPECT_EDIT(CON, "'ratedPowerMW': 8.5", "'ratedPowerMW': 9",
	    { "/windFarms/0/infrastructureList/1/ratedPowerMW", "not_editable" });
	EXPECT_EDIT(CON, "'type': 'WTG', 'ratedPowerMW': 8.5", "'ratedPowerMW': 8.5",
	    { "/windFarms/0/infrastructureList/1/type", "not_editable" });
	EXPECT_EDIT(OM, "{'id': 'NR-WTG-02', 'type': 'WTG',", "{'id': 'NR-WTG-02', 'type': 'WTG',"
	    " 'depth': 30,", { "/windFarms/0/infrastructureList/1/depth", "not_editable" });
	EXPECT_EDIT(CON, "73}]}  ]}]}", "73}]}, {'id': 'SS-WTG-03', 'fixable': []}  ]}]}",
	    { "/windFarms/0/infrastructureList/2", "not_editable" });
	EXPECT_EDIT(CON, ",   {'id': 'SS-WTG-02', 'type': 'WTG', 'ratedPowerMW': 8.5, 'fixable': ["
	    "    {'id': 'SS-WTG-02-MP', 'fixableType': 'INSTALLATION_TASK', 'durationHours': 31},"
	    "    {'id': 'SS-WTG-02-COM', 'fixableType': 'COMMISSIONING_TASK',"
	    " 'durationHours': 73}]}",
	    "", { "/windFarms/0/infrastructureList/1", "not_editable" });
}

/* Assets are compared by position: two that trade places (or ids) differ. */
static void
test_not_editable_order(void **state)
{
	char *a = edit(OM, "{'id': 'NR-WTG-01', 'type': 'WTG', 'model': 'V164-8.0',",
	    "{'id': 'NR-WTG-02', 'type': 'WTG', 'model': 'V164-8.0',");
	char *b = edit(a, "{'id': 'NR-WTG-02', 'type': 'WTG', 'model': 'V164-8.0', 'fixable': [    "
	    "{'id': 'NR-WTG-02-CM'", "{'id': 'NR-WTG-01', 'type': 'WTG', 'model': 'V164-8.0', "
	    "'fixable': [    {'id': 'NR-WTG-02-CM'");

	TYPE_OF(b, OM, { "/windFarms/0/infrastructureList/0/id", "not_editable" },
	    { "/windFarms/0/infrastructureList/1/id", "not_editable" });
	free(a);
	free(b);
}

/* Everything wrong at once, each with its own pointer. */
static void
test_many_problems(void **state)
{
	static const char *const edits[][2] = {
		{ "'name': 'Test construction'", "'name': 'X'" },
		{ "'currency': 'EUR', ", "'extra': true, " },
		{ "'vesselList': [", "'vesselList': [7, " },
		{ "'personnelList': [", "'personnelList': 'none', 'p': [" },
		{ "'fixableType': 'INSTALLATION_TASK', 'durationHours': 30",
		  "'durationHours': 30" },
		{ "'INSTALLATION_TASK', 'durationHours': 36",
		  "'SCHEDULED_SERVICE', 'durationHours': 36" },
		{ "'COMMISSIONING_TASK', 'durationHours': 72", "'PAINTING', 'durationHours': 72" },
		{ "'id': 'SS-WTG-02-MP'", "'id': false" },
		{ "'ratedPowerMW': 8.5", "'ratedPowerMW': 8.6" },
		{ "'distanceToPortKm': 60", "'distanceToPortKm': 60.0" },
		{ "73}]}  ]}]}", "73}, {'id': 'N', 'fixableType': 'INSPECTION'}]}  ]}, {}]}" },
	};
	struct tg_problems p = { 0 };
	enum tg_case_type t;
	char *s = tg_xstrdup(CON), *n;
	size_t i;

	for (i = 0; i < TG_NELEM(edits); i++) {
		n = edit(s, edits[i][0], edits[i][1]);
		free(s);
		s = n;
	}
	assert_int_equal(check(s, CON, &t, &p), -1);
	assert_int_equal(t, TG_CASE_CONSTRUCTION);
	EXPECT(&p, { "/name", "not_editable" }, { "/extra", "not_editable" },
	    { "/currency", "not_editable" }, { "/p", "not_editable" },
	    { "/vesselList/0", "structure" }, { "/personnelList", "structure" },
	    { FXT(0, 0, 0), "required" }, { FXT(0, 0, 1), "kind_changed" },
	    { FXT(0, 0, 2), "unknown_type" }, { FX(0, 1, 0) "/id", "type" },
	    { FXT(0, 1, 2), "mixed_kinds" },
	    { "/windFarms/0/infrastructureList/1/ratedPowerMW", "not_editable" },
	    { "/windFarms/1/infrastructureList", "structure" },
	    { "/windFarms/1", "not_editable" });
	tg_problems_cleanup(&p);
	/* storage is capped, the count is not */
	p.max = 3;
	assert_int_equal(check(s, CON, &t, &p), -1);
	assert_int_equal(p.n, 3);
	assert_int_equal(p.total, 14);
	tg_problems_cleanup(&p);
	free(s);
}

/* A difference 60 levels down is found and named by its full pointer. */
static void
test_deep(void **state)
{
	struct tg_problems p = { 0 };
	enum tg_case_type t;
	char *s, *b, *nest = tg_xstrdup("1"), *n, want[300] = "/deep";
	int i;

	for (i = 0; i < 60; i++) {
		n = tg_xasprintf("{'a~': %s}", nest);
		free(nest);
		nest = n;
		strcat(want, "/a~0");
	}
	s = edit(CON, "'currency': 'EUR', ", "'currency': 'EUR', 'deep': ");
	b = edit(s, "'deep': ", "'deep': X, ");
	free(s);
	n = edit(b, "X", nest);
	s = edit(n, "{'a~': 1}", "{'a~': 2}");
	assert_int_equal(check(s, n, &t, &p), -1);
	EXPECT(&p, { want, "not_editable" });
	tg_problems_cleanup(&p);
	free(s);
	free(n);
	free(b);
	free(nest);
}

/* A member given twice is a problem wherever it is: the vendor may read the other one. */
static void
test_duplicate_members(void **state)
{
	char *s, *big = tg_xstrdup(""), *n;
	int i;

	EXPECT_CON("'windFarms': [", "'windFarms': [], 'windFarms': [",
	    { "/windFarms", "structure" }, { "/windFarms", "structure" });
	EXPECT_CON("'quantity': 2,", "'quantity': 2, 'quantity': 20,",
	    { "/vesselList/1/quantity", "structure" });
	EXPECT_CON("'id': 'SS-WTG-02-MP',", "'id': 'SS-WTG-02-MP', 'id': 'SS-WTG-02-MP',",
	    { FX(0, 1, 0) "/id", "structure" });
	/* the second copy of a list is diffed too, so a hidden edit still shows */
	EXPECT_EDIT(CON, "'ratedPowerMW': 8, ", "'ratedPowerMW': 8, 'ratedPowerMW': 9, ",
	    { "/windFarms/0/infrastructureList/0/ratedPowerMW", "structure" },
	    { "/windFarms/0/infrastructureList/0/ratedPowerMW", "not_editable" });
	/* many members: found through a map, not pairwise */
	for (i = 0; i < 40; i++) {
		n = tg_xasprintf("%s'k%d': %d, ", big, i % 39, i);
		free(big);
		big = n;
	}
	n = tg_xasprintf("'weather': {%s", big);
	s = edit(CON, "'weather': {", n);
	expect_sub(s, (const struct want[]){ { "/weather/k0", "structure" } }, 1);
	free(s);
	free(n);
	free(big);
}

/* ---- the store of served cases ---- */

static void
test_store(void **state)
{
	struct tg_case_store *cs = tg_case_store_new(2);
	yajl_val a = th_parse_quoted("{'v': 1}"), b = th_parse_quoted("{'v': 2}"), c = th_parse_quoted("{'v': 3}"), a2;

	assert_null(tg_case_store_get(cs, "A"));
	tg_case_store_put(cs, "A", a);
	tg_case_store_put(cs, "B", b);
	assert_ptr_equal(tg_case_store_get(cs, "A"), a);	/* A is now the most recent */
	tg_case_store_put(cs, "C", c);				/* drops B */
	assert_null(tg_case_store_get(cs, "B"));
	assert_ptr_equal(tg_case_store_get(cs, "A"), a);
	assert_ptr_equal(tg_case_store_get(cs, "C"), c);
	/* replacing frees the old tree (the leak checker watches) and counts as a use */
	a2 = th_parse_quoted("{'v': 4}");
	tg_case_store_put(cs, "A", a2);
	tg_case_store_put(cs, "A", a2);				/* same tree: kept */
	assert_ptr_equal(tg_case_store_get(cs, "A"), a2);
	tg_case_store_put(cs, "D", th_parse_quoted("{'v': 5}"));		/* drops C */
	assert_null(tg_case_store_get(cs, "C"));
	assert_non_null(tg_case_store_get(cs, "D"));
	/* NULL forgets */
	tg_case_store_put(cs, "A", NULL);
	assert_null(tg_case_store_get(cs, "A"));
	tg_case_store_put(cs, NULL, th_parse_quoted("[]"));		/* freed, not kept */
	assert_null(tg_case_store_get(cs, NULL));
	tg_case_store_free(cs);
	tg_case_store_free(NULL);
	assert_null(tg_case_store_get(NULL, "A"));
	/* max 0 takes the default, larger than any test needs */
	cs = tg_case_store_new(0);
	tg_case_store_put(cs, "A", th_parse_quoted("{}"));
	tg_case_store_put(cs, "B", th_parse_quoted("{}"));
	assert_non_null(tg_case_store_get(cs, "A"));
	tg_case_store_free(cs);
}

/* A reference outlives the store's entry: dropped, replaced or the store
 * freed, the tree stays (ASan would report a use after free) until the last
 * holder lets go (the leak checker would report it never freed). */
static void
test_store_refs(void **state)
{
	struct tg_case_store *cs = tg_case_store_new(1);
	yajl_val a = th_parse_quoted("{'v': 1}"), b = th_parse_quoted("{'v': 2}");
	struct tg_case_ref *r1, *r2, *r3;

	assert_null(tg_case_store_ref(cs, "A"));
	assert_null(tg_case_ref_tree(NULL));
	tg_case_store_put(cs, "A", a);
	r1 = tg_case_store_ref(cs, "A");
	r2 = tg_case_store_ref(cs, "A");
	assert_ptr_equal(tg_case_ref_tree(r1), a);
	assert_ptr_equal(r1, r2);
	tg_case_store_put(cs, "B", b);				/* drops A */
	assert_null(tg_case_store_get(cs, "A"));
	assert_int_equal(tg_json_get(tg_case_ref_tree(r1), "v")->u.number.i, 1);
	tg_case_ref_release(r1);
	assert_int_equal(tg_json_get(tg_case_ref_tree(r2), "v")->u.number.i, 1);
	tg_case_ref_release(r2);				/* frees a */
	r3 = tg_case_store_ref(cs, "B");
	tg_case_store_put(cs, "B", th_parse_quoted("{'v': 3}"));		/* replaced */
	assert_int_equal(tg_json_get(tg_case_ref_tree(r3), "v")->u.number.i, 2);
	r1 = tg_case_store_ref(cs, "B");
	tg_case_store_free(cs);
	assert_int_equal(tg_json_get(tg_case_ref_tree(r1), "v")->u.number.i, 3);
	tg_case_ref_release(r3);
	tg_case_ref_release(r1);
	tg_case_ref_release(NULL);
}

/* ---- garbage ---- */

static void
test_garbage(void **state)
{
	static const char *const docs[] = {
		"null", "true", "0", "-1.5e300", "'s'", "[]", "{}", "[[[[{}]]]]", "[null, {}]",
		"{'caseId': null, 'vesselList': null, 'personnelList': null, 'windFarms': null}",
		"{'caseId': {}, 'vesselList': {}, 'personnelList': 'x', 'windFarms': 'x'}",
		"{'caseId': 'C', 'vesselList': [[]], 'personnelList': [1], 'windFarms': [1, [],"
		" {}, {'infrastructureList': 1}, {'infrastructureList': [1, [], {},"
		" {'fixable': {}}, {'fixable': [1, [], {}, {'fixableType': 1, 'id': {}},"
		" {'fixableType': [], 'id': []}, {'fixableType': '', 'id': ''},"
		" {'fixableType': 'INSPECTION', 'id': 'a'},"
		" {'fixableType': 'INSPECTION', 'id': 'a'},"
		" {'fixableType': 'INSTALLATION_TASK', 'id': 'a'}]}]}]}",
		"{'windFarms': {'infrastructureList': {'fixable': {'fixableType': 'X'}}}}",
		"{'windFarms': [{'infrastructureList': [{'fixable': [{'fixableType': 'INSPECTION',"
		" 'id': 'a'}, {'fixableType': 'INSTALLATION_TASK', 'id': 'a'}]}]}]}",
		"{'': {'': ['', {'': null}]}, '~/': 1, 'caseId': '\\u0001'}",
		"{'caseId': 'C', 'caseId': 'C', 'windFarms': [],"
		" 'windFarms': {'a': 1, 'a': [{}, {}]}}",
		CON, OM,
	};
	struct tg_problems p = { 0 };
	enum tg_case_type t;
	size_t i, j;
	int rc;

	for (i = 0; i < TG_NELEM(docs); i++) {
		for (j = 0; j <= TG_NELEM(docs); j++) {
			rc = check(docs[i], j < TG_NELEM(docs) ? docs[j] : NULL, &t, &p);
			assert_int_equal(rc, p.total ? -1 : 0);
			assert_true(t == TG_CASE_UNKNOWN || t == TG_CASE_CONSTRUCTION ||
			    t == TG_CASE_OM);
			tg_problems_cleanup(&p);
		}
	}
	assert_int_equal(tg_case_check(NULL, NULL, &kinds, NULL, &p), -1);
	EXPECT(&p, { "", "structure" });
	tg_problems_cleanup(&p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unchanged),
		cmocka_unit_test(test_editable_sections),
		cmocka_unit_test(test_numbers_and_key_order),
		cmocka_unit_test(test_structure_root),
		cmocka_unit_test(test_structure_lists),
		cmocka_unit_test(test_structure_farms),
		cmocka_unit_test(test_structure_fixables),
		cmocka_unit_test(test_unknown_type),
		cmocka_unit_test(test_mixed_without_base),
		cmocka_unit_test(test_mixed_with_base),
		cmocka_unit_test(test_kind_changed),
		cmocka_unit_test(test_not_editable_top),
		cmocka_unit_test(test_not_editable_numbers),
		cmocka_unit_test(test_not_editable_farms),
		cmocka_unit_test(test_not_editable_order),
		cmocka_unit_test(test_many_problems),
		cmocka_unit_test(test_deep),
		cmocka_unit_test(test_duplicate_members),
		cmocka_unit_test(test_store),
		cmocka_unit_test(test_store_refs),
		cmocka_unit_test(test_garbage),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
