/*
 * test_case_entries.c - the gateway's check of a case's editable entries
 * (src/sim/case_entries.c through tg_case_check) against the emulator's
 * validity rules (emu_case_validate, the vendor as the emulator models it):
 * for every seeded case, each member of a vessel, a personnel role, a
 * capacity, an operational limit and a fixable of each kind is removed or
 * set to each of a set of values, and the two must agree on every edit:
 * the gateway refuses exactly the cases whose runs the vendor would fail.
 * Then the problems themselves: paths, codes, every one listed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tidegate/json.h"
#include "tidegate/map.h"
#include "tidegate/sim.h"
#include "emu.h"
#include "emu_case.h"

static char *con_types[] = { "INSTALLATION_TASK", "COMMISSIONING_TASK" };
static char *om_types[] = { "CORRECTIVE_MAINTENANCE", "PREVENTIVE_MAINTENANCE",
	"SCHEDULED_SERVICE", "INSPECTION" };
static char *corrective_types[] = { "CORRECTIVE_MAINTENANCE" };

static const struct tg_case_rules rules = {
	{ con_types, 2 }, { om_types, 4 }, { corrective_types, 1 }, 1,
};

/* Members of each kind of entry named by either side's rules, and one
 * that nobody checks. */
static const char *const vessel_members[] = { "id", "type", "quantity", "dayRate",
	"mobilisationDays", "transitSpeedKn", "charterType", "capacities",
	"operationalLimits", "name", NULL };
static const char *const capacity_members[] = { "technicians", "cargoTonnes", "deckM2",
	NULL };
static const char *const limit_members[] = { "maxSignificantWaveHeightM", "maxWindSpeedMs",
	"maxCurrentKn", NULL };
static const char *const role_members[] = { "role", "quantity", "dayRate", "shiftHours",
	"id", NULL };
static const char *const fixable_members[] = { "id", "fixableType", "durationHours",
	"vesselType", "technicianRole", "techniciansRequired", "partsCost",
	"failureRatePerYear", "intervalDays", "name", NULL };

/* NULL: the member removed. */
static const char *const values[] = {
	NULL, "null", "true", "\"\"", "\"x\"", "-1", "-0.5", "0", "0.5", "1", "2.0", "7",
	"24", "24.5", "30", "30.5", "100", "100.5", "365", "366", "1000", "1000.5", "10000",
	"10001", "36500", "36501", "100000", "100001", "1000000", "1000001", "10000000",
	"10000001", "1e9", "1000000001", "1e10", "1e11", "1e400", "\"TIME_CHARTER\"",
	"\"SPOT\"", "\"BAREBOAT\"", "\"CORRECTIVE_MAINTENANCE\"", "\"INSPECTION\"",
	"\"INSTALLATION_TASK\"", "{}", "[]", "{\"technicians\": 2.5}", "[1]",
};

static struct tg_emu emu;

static int
setup(void **state)
{
	emu_cases_init(&emu);
	return 0;
}

static int
teardown(void **state)
{
	emu_cases_free(&emu);
	return 0;
}

/* A private copy of a seeded case, edited in place and put back. */
static yajl_val
copy_case(yajl_val base)
{
	yajl_gen g = tg_json_gen_new();
	const unsigned char *buf;
	yajl_val v;
	size_t len;

	tg_json_gen_val(g, base);
	yajl_gen_get_buf(g, &buf, &len);
	v = tg_json_parse((const char *)buf, len, NULL);
	yajl_gen_free(g);
	assert_non_null(v);
	return v;
}

/* One edit of object o: member k set to v (NULL: removed), undone by undo. */
struct edit {
	yajl_val o;
	size_t at;
	const char *key;
	yajl_val old;		/* the value replaced or removed; NULL: k was absent */
};

static void
apply(struct edit *e, yajl_val o, const char *k, yajl_val v)
{
	size_t n = o->u.object.len;

	e->o = o;
	e->old = NULL;
	for (e->at = 0; e->at < n && strcmp(o->u.object.keys[e->at], k) != 0; e->at++)
		;
	e->key = e->at < n ? o->u.object.keys[e->at] : k;
	e->old = e->at < n ? o->u.object.values[e->at] : NULL;
	if (e->old != NULL && v != NULL) {
		o->u.object.values[e->at] = v;
	} else if (e->old != NULL) {	/* removed: the last member takes its place */
		o->u.object.keys[e->at] = o->u.object.keys[n - 1];
		o->u.object.values[e->at] = o->u.object.values[n - 1];
		o->u.object.len--;
	} else if (v != NULL) {		/* added at the end */
		o->u.object.keys = realloc(o->u.object.keys, (n + 1) * sizeof(char *));
		o->u.object.values = realloc(o->u.object.values, (n + 1) * sizeof(yajl_val));
		o->u.object.keys[n] = k;
		o->u.object.values[n] = v;
		o->u.object.len++;
	}
}

static void
undo(struct edit *e, yajl_val v)
{
	yajl_val o = e->o;
	size_t n = o->u.object.len;

	if (e->old != NULL && v != NULL) {
		o->u.object.values[e->at] = e->old;
	} else if (e->old != NULL) {
		o->u.object.keys[n] = o->u.object.keys[e->at];
		o->u.object.values[n] = o->u.object.values[e->at];
		o->u.object.keys[e->at] = e->key;
		o->u.object.values[e->at] = e->old;
		o->u.object.len++;
	} else if (v != NULL) {
		o->u.object.len--;
	}
}

/* The two verdicts on one edit of sub (a copy of base, put back after);
 * the edit is printed when they differ. */
static int
agree(const char *id, yajl_val base, yajl_val sub, const char *ptr, const char *member,
    const char *value)
{
	yajl_val target = tg_json_ptr(sub, ptr), repl = NULL;
	struct tg_problems p = { 0 };
	struct tg_err err = { "" };
	struct edit e;
	int emu_ok, gw_ok;

	assert_non_null(target);
	if (value != NULL)
		assert_non_null(repl = tg_json_parse(value, strlen(value), NULL));
	apply(&e, target, member, repl);
	emu_ok = emu_case_validate(sub, base, &err) == 0;
	gw_ok = tg_case_check(sub, base, &rules, NULL, &p) == 0;
	undo(&e, repl);
	if (emu_ok != gw_ok)
		print_message("%s %s/%s = %s: emulator %s (%s), gateway %s (%s)\n", id, ptr,
		    member, value ? value : "(removed)", emu_ok ? "runs it" : "fails it",
		    err.msg, gw_ok ? "sends it" : "refuses it",
		    p.n ? p.v[0].message : "");
	tg_problems_cleanup(&p);
	yajl_tree_free(repl);
	return emu_ok == gw_ok;
}

static int
sweep_entry(const char *id, yajl_val base, yajl_val sub, const char *ptr,
    const char *const *members)
{
	size_t m, v;
	int bad = 0;

	for (m = 0; members[m] != NULL; m++)
		for (v = 0; v < sizeof(values) / sizeof(values[0]); v++)
			bad += !agree(id, base, sub, ptr, members[m], values[v]);
	return bad;
}

/* The entries of one case: its first vessel (and its nested objects),
 * its first role, and the first fixable of each type on its first asset. */
static int
sweep_case(const char *id, yajl_val base)
{
	static const struct { const char *ptr; const char *const *members; } entries[] = {
		{ "/vesselList/0", vessel_members },
		{ "/vesselList/0/capacities", capacity_members },
		{ "/vesselList/0/operationalLimits", limit_members },
		{ "/personnelList/0", role_members },
	};
	yajl_val fixes = tg_json_ptr(base, "/windFarms/0/infrastructureList/0/fixable");
	yajl_val sub = copy_case(base);
	const char *seen[8];
	char ptr[96];
	size_t i, j, nseen = 0;
	int bad = 0;

	for (i = 0; i < sizeof(entries) / sizeof(entries[0]); i++)
		if (tg_json_ptr(base, entries[i].ptr) != NULL)
			bad += sweep_entry(id, base, sub, entries[i].ptr, entries[i].members);
	for (i = 0; fixes != NULL && i < fixes->u.array.len && nseen < 8; i++) {
		const char *t = tg_json_get_str(fixes->u.array.values[i], "fixableType");

		for (j = 0; j < nseen && strcmp(seen[j], t) != 0; j++)
			;
		if (j < nseen)
			continue;
		seen[nseen++] = t;
		snprintf(ptr, sizeof(ptr), "/windFarms/0/infrastructureList/0/fixable/%zu", i);
		bad += sweep_entry(id, base, sub, ptr, fixable_members);
	}
	assert_true(nseen >= 2);
	yajl_tree_free(sub);
	return bad;
}

static void
test_agrees_with_the_emulator(void **state)
{
	size_t i;
	int bad = 0;

	assert_true(emu.ncases >= 3);
	for (i = 0; i < emu.ncases; i++)
		bad += sweep_case(emu.case_ids[i], tg_map_get(emu.cases, emu.case_ids[i]));
	assert_int_equal(bad, 0);
}

/* A fixable id given twice on one asset; the same id on another asset is fine. */
static void
test_duplicate_fixable_id(void **state)
{
	yajl_val base = tg_map_get(emu.cases, "CASE-OM-1"), sub = copy_case(base);
	const char *first = tg_json_get_str(tg_json_ptr(base,
	    "/windFarms/0/infrastructureList/0/fixable/0"), "id");
	char value[96];

	snprintf(value, sizeof(value), "\"%s\"", first);
	assert_true(agree("CASE-OM-1", base, sub, "/windFarms/0/infrastructureList/0/fixable/1",
	    "id", value));
	assert_true(agree("CASE-OM-1", base, sub, "/windFarms/0/infrastructureList/1/fixable/0",
	    "id", value));
	yajl_tree_free(sub);
}

/* Every problem listed, each at its member's pointer with its code. */
static void
test_problems(void **state)
{
	static const char doc[] = "{\"caseId\": \"C\", \"vesselList\": [{\"id\": \"V\","
	    " \"quantity\": 2.5, \"dayRate\": -1, \"charterType\": \"BAREBOAT\","
	    " \"capacities\": {\"technicians\": \"12\"}}], \"personnelList\": [{\"role\": \"R\","
	    " \"quantity\": 1, \"dayRate\": 1, \"shiftHours\": 0}], \"windFarms\": [{"
	    "\"infrastructureList\": [{\"fixable\": [{\"id\": \"F\", \"fixableType\":"
	    " \"PREVENTIVE_MAINTENANCE\", \"durationHours\": 1, \"vesselType\": \"CTV\","
	    " \"technicianRole\": \"T\", \"techniciansRequired\": 1}, {\"id\": \"F\","
	    " \"fixableType\": \"CORRECTIVE_MAINTENANCE\", \"durationHours\": 1,"
	    " \"vesselType\": \"CTV\", \"technicianRole\": \"T\", \"techniciansRequired\": 1,"
	    " \"failureRatePerYear\": 2}]}]}]}";
	static const struct { const char *path, *code; } want[] = {
		{ "/vesselList/0/type", "required" },
		{ "/vesselList/0/quantity", "type" },
		{ "/vesselList/0/dayRate", "range" },
		{ "/vesselList/0/charterType", "enum" },
		{ "/vesselList/0/capacities/technicians", "type" },
		{ "/personnelList/0/shiftHours", "range" },
		{ "/windFarms/0/infrastructureList/0/fixable/0/intervalDays", "required" },
		{ "/windFarms/0/infrastructureList/0/fixable/1/id", "duplicate_id" },
	};
	yajl_val c = tg_json_parse(doc, strlen(doc), NULL);
	struct tg_problems p = { 0 };
	struct tg_case_rules off = rules;
	size_t i;

	assert_non_null(c);
	assert_int_equal(tg_case_check(c, NULL, &rules, NULL, &p), -1);
	assert_int_equal(p.n, sizeof(want) / sizeof(want[0]));
	for (i = 0; i < p.n; i++) {
		assert_string_equal(p.v[i].path, want[i].path);
		assert_string_equal(p.v[i].code, want[i].code);
	}
	assert_string_equal(p.v[2].message, "must be at least 0 and at most 1000000000, not -1");
	tg_problems_cleanup(&p);
	off.entries = 0;	/* sim.check_entries: false */
	memset(&p, 0, sizeof(p));
	assert_int_equal(tg_case_check(c, NULL, &off, NULL, &p), 0);
	tg_problems_cleanup(&p);
	yajl_tree_free(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_agrees_with_the_emulator),
		cmocka_unit_test(test_duplicate_fixable_id),
		cmocka_unit_test(test_problems),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
