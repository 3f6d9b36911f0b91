/*
 * test_case.c - the simulation model below the HTTP layer: seeded
 * cases and their kinds, deep equality, the validity rules of a submitted
 * case, and that results are deterministic and monotone in resources.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tidegate/json.h"
#include "emu.h"
#include "emu_case.h"

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

static yajl_val
parse(const char *s)
{
	yajl_val v = tg_json_parse(s, strlen(s), NULL);

	assert_non_null(v);
	return v;
}

/* A private copy of a seeded case, to edit in place. */
static yajl_val
copy_case(const char *id)
{
	yajl_gen g = tg_json_gen_new();
	const unsigned char *buf;
	yajl_val v;
	size_t len;

	tg_json_gen_val(g, tg_map_get(emu.cases, id));
	yajl_gen_get_buf(g, &buf, &len);
	v = tg_json_parse((const char *)buf, len, NULL);
	yajl_gen_free(g);
	assert_non_null(v);
	return v;
}

static void
set_num(yajl_val root, const char *ptr, double d)
{
	yajl_val n = tg_json_ptr(root, ptr);

	assert_non_null(n);
	assert_true(YAJL_IS_NUMBER(n));
	n->u.number.d = d;
	n->u.number.i = (long long)d;
	n->u.number.flags = YAJL_NUMBER_DOUBLE_VALID |
	    (d == (long long)d ? YAJL_NUMBER_INT_VALID : 0);
}

static void
set_str(yajl_val root, const char *ptr, const char *s)
{
	yajl_val n = tg_json_ptr(root, ptr);

	assert_non_null(n);
	assert_true(YAJL_IS_STRING(n));
	free(n->u.string);
	n->u.string = strdup(s);
}

static double
result(yajl_val c, const char *key)
{
	yajl_val r = emu_results_compute(c, emu_case_kind(c)), v = tg_json_get(r, key);
	double d;

	assert_non_null(v);
	d = YAJL_GET_DOUBLE(v);
	yajl_tree_free(r);
	return d;
}

static void
test_seeded_cases(void **state)
{
	struct tg_err err;
	size_t i;

	assert_int_equal(emu.ncases, 3);
	assert_int_equal(emu_case_kind(tg_map_get(emu.cases, "CASE-CON-1")),
	    EMU_CASE_CONSTRUCTION);
	assert_int_equal(emu_case_kind(tg_map_get(emu.cases, "CASE-OM-1")), EMU_CASE_OM);
	assert_int_equal(emu_case_kind(tg_map_get(emu.cases, "CASE-OM-2")), EMU_CASE_OM);
	for (i = 0; i < emu.ncases; i++) {
		yajl_val c = tg_map_get(emu.cases, emu.case_ids[i]);

		assert_int_equal(emu_case_validate(c, c, &err), 0);
		assert_null(tg_json_get(c, "type"));
	}
	assert_int_equal(emu_fixable_kind("INSPECTION", NULL), EMU_CASE_OM);
	assert_int_equal(emu_fixable_kind("COMMISSIONING_TASK", NULL), EMU_CASE_CONSTRUCTION);
	assert_int_equal(emu_fixable_kind("REPAIR", NULL), EMU_CASE_NONE);
	assert_int_equal(emu_fixable_kind(NULL, NULL), EMU_CASE_NONE);
}

static void
test_json_equal(void **state)
{
	yajl_val a = parse("{\"a\": [1, 2.5, {\"x\": null}], \"b\": true}");
	yajl_val b = parse("{\"b\": true, \"a\": [1.0, 2.5, {\"x\": null}]}");
	yajl_val c = parse("{\"b\": true, \"a\": [1, 2.5, {\"x\": 0}]}");
	yajl_val d = parse("{\"b\": true, \"a\": [1, 2.5, {\"x\": null}], \"c\": 1}");

	assert_true(emu_json_equal(a, b));
	assert_false(emu_json_equal(a, c));
	assert_false(emu_json_equal(a, d));
	assert_false(emu_json_equal(d, a));
	yajl_tree_free(a);
	yajl_tree_free(b);
	yajl_tree_free(c);
	yajl_tree_free(d);
}

static void
test_invalid_edits(void **state)
{
	static const char *const fx = "/windFarms/0/infrastructureList/0/fixable/0";
	yajl_val base = tg_map_get(emu.cases, "CASE-OM-1"), c;
	struct tg_err err;
	char p[128];

	assert_int_equal(emu_case_validate(tg_map_get(emu.cases, "CASE-OM-2"), base, &err), -1);
	c = copy_case("CASE-OM-1");
	set_num(c, "/vesselList/0/quantity", 3);
	set_num(c, "/personnelList/0/quantity", 0);
	set_num(c, "/windFarms/0/infrastructureList/1/fixable/0/durationHours", 9.5);
	assert_int_equal(emu_case_validate(c, base, &err), 0);
	set_num(c, "/vesselList/0/quantity", 2.5);
	assert_int_equal(emu_case_validate(c, base, &err), -1);
	assert_string_equal(err.msg, "/vesselList/0/quantity: must be an integer in [0, 10000]");
	set_num(c, "/vesselList/0/quantity", 2);
	snprintf(p, sizeof(p), "%s/fixableType", fx);
	set_str(c, p, "COMMISSIONING_TASK");
	assert_int_equal(emu_case_validate(c, base, &err), -1);
	assert_non_null(strstr(err.msg, "not an O&M parameter"));
	set_str(c, p, "INSPECTION");
	snprintf(p, sizeof(p), "%s/intervalDays", fx);
	assert_int_equal(emu_case_validate(c, base, &err), -1);	/* needs an interval */
	assert_non_null(strstr(err.msg, p));
	yajl_tree_free(c);
	c = copy_case("CASE-OM-1");
	set_num(c, "/windFarms/0/distanceToPortKm", 46);
	assert_int_equal(emu_case_validate(c, base, &err), -1);
	assert_string_equal(err.msg, "/windFarms/0/distanceToPortKm: not editable, differs from "
	    "the case");
	yajl_tree_free(c);
}

static void
test_om_monotone(void **state)
{
	yajl_val c = copy_case("CASE-OM-1");
	double a0 = result(c, "availability"), a1, a2, a3;

	assert_true(a0 > 0.5 && a0 < 1);
	assert_true(result(c, "availability") == a0);	/* deterministic */
	set_num(c, "/vesselList/0/quantity", 3);
	a1 = result(c, "availability");
	set_num(c, "/personnelList/0/quantity", 40);
	a2 = result(c, "availability");
	set_num(c, "/vesselList/0/operationalLimits/maxSignificantWaveHeightM", 2.5);
	a3 = result(c, "availability");
	assert_true(a1 >= a0 && a2 >= a1 && a3 > a2);
	assert_true(result(c, "energyBasedAvailability") <= a3);
	set_num(c, "/vesselList/0/quantity", 0);
	assert_true(result(c, "availability") < a0);
	yajl_tree_free(c);
}

static void
test_construction_monotone(void **state)
{
	yajl_val c = copy_case("CASE-CON-1");
	double d0 = result(c, "completionDays"), d1, d2;

	assert_true(d0 > 0 && d0 < 365);
	assert_true(result(c, "weatherDelayDays") > 0);
	set_num(c, "/vesselList/0/quantity", 2);
	d1 = result(c, "completionDays");
	set_num(c, "/personnelList/0/quantity", 40);
	d2 = result(c, "completionDays");
	assert_true(d1 <= d0 && d2 < d1);
	set_num(c, "/personnelList/2/quantity", 1);	/* fewer than commissioning needs */
	assert_true(result(c, "completionDays") == 365);
	assert_true(result(c, "commissioningTasksCompleted") == 0);
	assert_true(result(c, "installationTasksCompleted") == 34);
	yajl_tree_free(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_seeded_cases),
		cmocka_unit_test(test_json_equal),
		cmocka_unit_test(test_invalid_edits),
		cmocka_unit_test(test_om_monotone),
		cmocka_unit_test(test_construction_monotone),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
