/*
 * test_import_row.c - unit tests of src/emulator/import_row.c: the
 * checks and failure messages of import rows, create versus update, and
 * the all-strings row form.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tidegate/clock.h"
#include "tidegate/json.h"
#include "import.h"

static struct tg_emu_project pcfg = { .id = "P-T", .seed = 1, .sites = 3, .activities = 10 };

static int
setup(void **state)
{
	struct emu_project *p = calloc(1, sizeof(*p));

	p->cfg = &pcfg;
	p->epoch_ms = tg_clock_days_from_civil(2024, 1, 1) * 86400000LL;
	p->overlay = tg_map_new(NULL);
	*state = p;
	return 0;
}

static int
teardown(void **state)
{
	struct emu_project *p = *state;
	const char *k;
	void *v;
	size_t pos = 0, i;

	while (tg_map_next(p->overlay, &pos, &k, &v)) {
		emu_activity_cleanup(v);
		free(v);
	}
	tg_map_free(p->overlay);
	for (i = 0; i < p->nnew; i++)
		free(p->new_ids[i]);
	free(p->new_ids);
	free(p);
	return 0;
}

static yajl_val
parse(const char *json)
{
	struct tg_err err;
	yajl_val v = tg_json_parse(json, strlen(json), &err);

	if (v == NULL)
		fail_msg("bad test JSON %s: %s", json, err.msg);
	return v;
}

/* Import one row; returns the outcome and checks the message. */
static enum emu_row_outcome
import(struct emu_project *p, const char *json, size_t number, const char *want_msg)
{
	yajl_val row = parse(json);
	char *msg = (char *)"unset";
	enum emu_row_outcome o = emu_import_row(p, row, number, 1000, &msg);

	if (want_msg == NULL && msg != NULL)
		fail_msg("%s: unexpected failure '%s'", json, msg);
	if (want_msg != NULL)
		assert_string_equal(msg, want_msg);
	assert_int_equal(o == EMU_ROW_FAILED, want_msg != NULL);
	free(msg);
	yajl_tree_free(row);
	return o;
}

static void
test_generated_index(void **state)
{
	struct emu_project *p = *state;

	assert_int_equal(emu_data_activity_index(p, "ACT-000001"), 0);
	assert_int_equal(emu_data_activity_index(p, "ACT-000010"), 9);
	assert_int_equal(emu_data_activity_index(p, "ACT-000011"), -1);
	assert_int_equal(emu_data_activity_index(p, "ACT-000000"), -1);
	assert_int_equal(emu_data_activity_index(p, "ACT-1"), -1);
	assert_int_equal(emu_data_activity_index(p, "ACT-0000001"), -1);
	assert_int_equal(emu_data_activity_index(p, "ACT-"), -1);
	assert_int_equal(emu_data_activity_index(p, "X-000001"), -1);
}

static void
test_failures(void **state)
{
	struct emu_project *p = *state;

	import(p, "5", 1, "Row 1: must be a JSON object, not a number");
	import(p, "[]", 2, "Row 2: must be a JSON object, not an array");
	import(p, "{}", 3, "Row 3: field 'id' is required");
	import(p, "{\"id\": \"\", \"siteId\": \"S-1\"}", 3, "Row 3: field 'id' is required");
	import(p, "{\"id\": 7, \"siteId\": \"S-1\"}", 4, "Row 4: field 'id' must be a string");
	import(p, "{\"id\": \"A\", \"siteId\": null}", 5, "Row 5: field 'siteId' is required");
	import(p, "{\"id\": \"A\", \"siteId\": \"S-4\"}", 6,
	    "Row 6: site 'S-4' does not exist in project 'P-T'");
	import(p, "{\"id\": \"A\", \"siteId\": \"S-01\"}", 6,
	    "Row 6: site 'S-01' does not exist in project 'P-T'");
	import(p, "{\"id\": \"A\", \"siteId\": \"S-1\", \"assetId\": 1}", 7,
	    "Row 7: field 'assetId' must be a string");
	import(p, "{\"id\": \"A\", \"siteId\": \"S-1\", \"startDate\": \"2024-02-30T00:00:00Z\"}",
	    8, "Row 8: field 'startDate' must be an ISO 8601 UTC timestamp");
	import(p, "{\"id\": \"A\", \"siteId\": \"S-1\", \"endDate\": \"2024-02-03\"}", 8,
	    "Row 8: field 'endDate' must be an ISO 8601 UTC timestamp");
	import(p, "{\"id\": \"A\", \"siteId\": \"S-1\", \"status\": \"planned\"}", 9,
	    "Row 9: field 'status' must be one of PLANNED, DISPATCHED, COMPLETED");
	import(p, "{\"id\": \"A\", \"siteId\": \"S-1\", \"additionalClientWork\": \"true\"}", 10,
	    "Row 10: field 'additionalClientWork' must be a boolean");
	import(p, "{\"id\": \"A\", \"siteId\": \"S-1\", \"teams\": \"Alpha\"}", 11,
	    "Row 11: field 'teams' must be an array of strings");
	import(p, "{\"id\": \"A\", \"siteId\": \"S-1\", \"personnelIds\": [\"P\", 2]}", 12,
	    "Row 12: field 'personnelIds' must be an array of strings");
	import(p, "{\"id\": \"A\", \"siteId\": \"S-1\", \"manpower\": [1]}", 13,
	    "Row 13: field 'manpower' must be an object of team names to integers");
	import(p, "{\"id\": \"A\", \"siteId\": \"S-1\", \"manpower\": {\"Alpha\": -1}}", 14,
	    "Row 14: field 'manpower' team 'Alpha' must be a non-negative integer");
	import(p, "{\"id\": \"A\", \"siteId\": \"S-1\", \"manpower\": {\"Alpha\": 1.5}}", 14,
	    "Row 14: field 'manpower' team 'Alpha' must be a non-negative integer");
	import(p, "{\"id\": \"A\", \"siteId\": \"S-1\", \"manpower\": {\"A\": 1, \"A\": 2}}", 14,
	    "Row 14: field 'manpower' team 'A' is given more than once");
	import(p, "{\"id\": \"A\", \"siteId\": \"S-1\", \"externalRemarks\": {}}", 15,
	    "Row 15: field 'externalRemarks' must be a string");
	import(p, "{\"id\": \"A\", \"siteId\": \"S-1\", \"type\": false}", 16,
	    "Row 16: field 'type' must be a string");
	/* the first failing check in the spec's field order wins */
	import(p, "{\"status\": 1, \"id\": \"A\", \"siteId\": \"S-9\"}", 17,
	    "Row 17: site 'S-9' does not exist in project 'P-T'");
	assert_int_equal(tg_map_count(p->overlay), 0);
	assert_int_equal(p->nnew, 0);
}

static void
test_create_then_update(void **state)
{
	struct emu_project *p = *state;
	struct emu_activity a;

	assert_int_equal(import(p, "{\"id\": \"NEW-1\", \"siteId\": \"S-2\", \"teams\": [\"A\", "
	    "\"B\"], \"manpower\": {\"A\": 2, \"B\": 0}, \"status\": \"PLANNED\", \"startDate\": "
	    "\"2024-03-05T07:08:09.5+01:00\", \"additionalClientWork\": false, "
	    "\"createdAt\": \"ignored\", \"voNumber\": \"ignored\"}", 1, NULL), EMU_ROW_CREATED);
	assert_int_equal(emu_data_activity_get(p, "NEW-1", &a), 0);
	assert_string_equal(a.site_id, "S-2");
	assert_string_equal(a.status, "PLANNED");
	assert_string_equal(a.type, "NONE");
	assert_null(a.name);
	assert_int_equal(a.teams.n, 2);
	assert_string_equal(a.teams.v[1], "B");
	assert_int_equal(a.nmanpower, 2);
	assert_int_equal(a.manpower[0].n, 2);
	assert_int_equal(a.start_ms, (tg_clock_days_from_civil(2024, 3, 5) * 86400 + 6 * 3600 +
	    8 * 60 + 9) * 1000 + 500);
	assert_true(a.end_ms == EMU_NO_TIME);
	assert_int_equal(a.additional_client_work, 0);
	assert_int_equal(a.created_ms, 1000);
	emu_activity_cleanup(&a);
	/* Absent fields stay, null and "" clear, given fields replace. */
	assert_int_equal(import(p, "{\"id\": \"NEW-1\", \"siteId\": \"S-3\", \"teams\": null, "
	    "\"status\": \"\", \"externalRemarks\": \"x\"}", 2, NULL), EMU_ROW_UPDATED);
	assert_int_equal(emu_data_activity_get(p, "NEW-1", &a), 0);
	assert_string_equal(a.site_id, "S-3");
	assert_null(a.status);
	assert_int_equal(a.teams.n, 0);
	assert_int_equal(a.nmanpower, 2);
	assert_string_equal(a.external_remarks, "x");
	assert_int_equal(a.created_ms, 1000);
	emu_activity_cleanup(&a);
	assert_int_equal(p->nnew, 1);
	assert_string_equal(p->new_ids[0], "NEW-1");
}

static void
test_generated_activity_is_updated(void **state)
{
	struct emu_project *p = *state;
	struct emu_activity before, after;

	emu_data_activity(p, 2, &before);
	assert_int_equal(import(p, "{\"id\": \"ACT-000003\", \"siteId\": \"S-1\", "
	    "\"internalRemarks\": \"checked\"}", 1, NULL), EMU_ROW_UPDATED);
	assert_int_equal(emu_data_activity_get(p, "ACT-000003", &after), 0);
	assert_string_equal(after.name, before.name);
	assert_string_equal(after.type, before.type);
	assert_string_equal(after.internal_remarks, "checked");
	assert_string_equal(after.site_id, "S-1");
	assert_int_equal(after.created_ms, before.created_ms);
	assert_int_equal(after.updated_ms, 1000);
	assert_int_equal(p->nnew, 0);
	emu_activity_cleanup(&before);
	emu_activity_cleanup(&after);
}

static void
expect_form(const char *json, const char *const *want)
{
	yajl_val row = parse(json);
	char *form = emu_rowform(row);
	size_t i;

	for (i = 0; i < EMU_ROWFORM_NFIELDS; i++)
		if (strcmp(emu_rowform_field(form, i), want[i]) != 0)
			fail_msg("%s: %s is '%s', want '%s'", json, emu_rowform_fields[i],
			    emu_rowform_field(form, i), want[i]);
	free(form);
	yajl_tree_free(row);
}

static void
test_rowform(void **state)
{
	static const char *const full[EMU_ROWFORM_NFIELDS] = {
		"ACT-9", "S-1", "A-1", "SUB", "", "05/03/2024", "07:08", "01/01/2025", "00:00",
		"CAT-1", "REPAIR", "DISPATCHED", "WP-1", "true", "VO-7", "", "", "WO-1",
		"Alpha,Bravo", "PER-1,PER-2", "Alpha:2,Bravo:1", "in", "ex", "", "", "",
	};
	static const char *const wrong[EMU_ROWFORM_NFIELDS] = {
		"12", "", "false", "", "", "2024-13-01T00:00:00Z", "7h", "", "", "a:1,b:x",
		"", "planned", "", "yes", "1.50", "", "", "", "Alpha,3,true,false,k:v", "", "[1]:",
		"", "", "", "", "",
	};
	const char *all_empty[EMU_ROWFORM_NFIELDS];
	size_t i;

	expect_form("{\"id\": \"ACT-9\", \"siteId\": \"S-1\", \"assetId\": \"A-1\", "
	    "\"subassemblyId\": \"SUB\", \"startDate\": \"2024-03-05T07:08:59Z\", \"endDate\": "
	    "\"2025-01-01T01:00:00+01:00\", \"activityCategory\": \"CAT-1\", \"type\": "
	    "\"REPAIR\", \"status\": \"DISPATCHED\", \"workPackageId\": \"WP-1\", "
	    "\"additionalClientWork\": true, \"voNumber\": \"VO-7\", \"voSigned\": false, "
	    "\"workOrderId\": \"WO-1\", \"teams\": [\"Alpha\", \"Bravo\"], \"personnelIds\": "
	    "[\"PER-1\", \"PER-2\"], \"manpower\": {\"Alpha\": 2, \"Bravo\": 1}, "
	    "\"internalRemarks\": \"in\", \"externalRemarks\": \"ex\", \"isLocked\": null, "
	    "\"startTime\": \"ignored: startDate gives the time\"}", full);
	/* wrong types come out as best-effort text */
	expect_form("{\"id\": 12, \"assetId\": false, \"startDate\": \"2024-13-01T00:00:00Z\", "
	    "\"startTime\": \"7h\", \"activityCategory\": {\"a\": 1, \"b\": \"x\"}, "
	    "\"status\": \"planned\", \"additionalClientWork\": \"yes\", \"voNumber\": 1.50, "
	    "\"teams\": [\"Alpha\", 3, true, false, {\"k\": \"v\"}], \"manpower\": "
	    "{\"[1]\": [[[[[[[[[[[1]]]]]]]]]]]}}", wrong);
	for (i = 0; i < EMU_ROWFORM_NFIELDS; i++)
		all_empty[i] = "";
	expect_form("[1, 2]", all_empty);
	expect_form("\"text\"", all_empty);
	expect_form("{}", all_empty);
	assert_string_equal(emu_rowform_fields[0], "id");
	assert_string_equal(emu_rowform_fields[EMU_ROWFORM_NFIELDS - 1], "isLocked");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_generated_index, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failures, setup, teardown),
		cmocka_unit_test_setup_teardown(test_create_then_update, setup, teardown),
		cmocka_unit_test_setup_teardown(test_generated_activity_is_updated, setup,
		    teardown),
		cmocka_unit_test(test_rowform),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
