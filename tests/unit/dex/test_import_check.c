/*
 * test_import_check.c - unit tests of src/dex/import_check.c: every rule of
 * an activity import with its path, code and message, both top-level
 * forms, syntax errors, bodies split into chains at every byte and at
 * random, multipart uploads, and the memory used by a 50 MB import.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include "tidegate/clock.h"
#include "tidegate/dex.h"

/* One run of a validator, flattened into text so runs can be compared. */
struct run {
	int rc;
	size_t rows, bytes, total;
	char *text;		/* "path|code|message\n" per stored problem */
	struct tg_problems p;
};

static void
run_free(struct run *r)
{
	tg_problems_cleanup(&r->p);
	free(r->text);
	memset(r, 0, sizeof(*r));
}

static void
render(struct run *r)
{
	struct evbuffer *b = evbuffer_new();
	size_t i, n;

	for (i = 0; i < r->p.n; i++)
		evbuffer_add_printf(b, "%s|%s|%s\n", r->p.v[i].path, r->p.v[i].code,
		    r->p.v[i].message);
	n = evbuffer_get_length(b);
	r->text = malloc(n + 1);
	evbuffer_remove(b, r->text, n);
	r->text[n] = '\0';
	r->total = r->p.total;
	evbuffer_free(b);
}

/* A body made of chains cut at the given offsets (ascending), unchanged. */
static struct evbuffer *
chains(const char *s, size_t len, const size_t *cuts, size_t ncuts)
{
	struct evbuffer *b = evbuffer_new();
	size_t i, from = 0, to;

	for (i = 0; i <= ncuts; i++) {
		to = i < ncuts && cuts[i] < len ? cuts[i] : len;
		if (to > from)
			evbuffer_add_reference(b, s + from, to - from, NULL, NULL);
		from = to;
	}
	return b;
}

static void
run_json_cut(struct run *r, const char *s, size_t len, const size_t *cuts, size_t ncuts)
{
	struct evbuffer *b = chains(s, len, cuts, ncuts);
	struct tg_import_result res = { 99, 99 };

	memset(r, 0, sizeof(*r));
	r->rc = tg_import_check_json(b, &res, &r->p);
	r->rows = res.rows;
	r->bytes = res.bytes;
	render(r);
	evbuffer_free(b);
}

static void
run_json(struct run *r, const char *s)
{
	run_json_cut(r, s, strlen(s), NULL, 0);
}

/* The body must give exactly these "path|code|message\n" lines. */
static void
expect(const char *body, const char *want)
{
	struct run r;

	run_json(&r, body);
	assert_string_equal(r.text, want);
	assert_int_equal(r.rc, want[0] == '\0' ? 0 : -1);
	run_free(&r);
}

/* A valid row with one field replaced by `field` ("name": value). */
static char *
row_with(const char *field)
{
	return tg_xasprintf("[{\"id\":\"A-1\",\"siteId\":\"S-1\",%s}]", field);
}

static void
expect_field(const char *field, const char *want)
{
	char *body = row_with(field);

	expect(body, want);
	free(body);
}

static const char full_row[] =
	"{\"id\":\"A-%d\",\"siteId\":\"S-1\",\"assetId\":\"T-07\","
	"\"startDate\":\"2024-05-01T08:00:00Z\",\"endDate\":\"2024-05-01T16:30:00.250+02:00\","
	"\"activityCategory\":\"Inspection\",\"status\":\"PLANNED\",\"workPackageId\":\"WP-3\","
	"\"additionalClientWork\":false,\"workOrderId\":\"WO-9\",\"teams\":[\"Alpha\",\"Beta\"],"
	"\"personnelIds\":[\"P-1\",\"P-2\"],\"manpower\":{\"Alpha\":3,\"Beta\":0},"
	"\"internalRemarks\":\"crane \\\"B\\\" booked\",\"externalRemarks\":\"\\u00e9t\\u00e9\"}";

/* ---- valid bodies ---- */

static void
test_valid_array(void **state)
{
	char body[4096];
	struct run r;
	int n;

	n = snprintf(body, sizeof(body), "[");
	n += snprintf(body + n, sizeof(body) - n, full_row, 1);
	n += snprintf(body + n, sizeof(body) - n, ",\n ");
	n += snprintf(body + n, sizeof(body) - n, full_row, 2);
	snprintf(body + n, sizeof(body) - n, "]");
	run_json(&r, body);
	assert_string_equal(r.text, "");
	assert_int_equal(r.rc, 0);
	assert_int_equal(r.rows, 2);
	assert_int_equal(r.bytes, strlen(body));
	run_free(&r);
	expect("[]", "");
	expect(" [ ] \n", "");
}

static void
test_valid_object(void **state)
{
	char body[2048];
	struct run r;

	snprintf(body, sizeof(body), full_row, 1);
	run_json(&r, body);
	assert_string_equal(r.text, "");
	assert_int_equal(r.rows, 1);
	run_free(&r);
	/* nulls are absent values; empty optional strings are unset */
	expect("{\"id\":\"A\",\"siteId\":\"S\",\"assetId\":null,\"teams\":null,\"manpower\":null,"
	    "\"status\":\"\",\"startDate\":\"\",\"additionalClientWork\":null}", "");
}

/* An edited export (spec part 2, GET /export records) must go back in. */
static void
test_export_record_reimport(void **state)
{
	expect("[{\"startDate\":\"2024-01-02T07:00:00.000Z\",\"endDate\":\"2024-01-02T15:00:00.000Z\","
	    "\"createdAt\":\"2023-12-01T10:00:00.000Z\",\"updatedAt\":\"2023-12-02T10:00:00.000Z\","
	    "\"teams\":[\"Alpha\"],\"name\":\"Blade inspection\",\"activityCategory\":\"C-1\","
	    "\"personnelIds\":[],\"status\":\"COMPLETED\",\"type\":\"NONE\",\"siteId\":\"S-1\","
	    "\"id\":\"A-1\",\"externalRemarks\":\"\",\"workPackageId\":\"WP-1\"}]", "");
	/* row-form names and other extras are not near misses either */
	expect_field("\"startTime\":\"08:00\",\"endTime\":\"09:00\",\"voNumber\":\"1\","
	    "\"isLocked\":\"\",\"subassemblyId\":\"x\",\"componentId\":\"y\",\"x\":1,"
	    "\"comments\":[{\"deep\":{\"er\":[1]}}]", "");
}

/* ---- the rules ---- */

static void
test_required(void **state)
{
	expect("[{\"siteId\":\"S\"},{\"id\":\"A\"},{}]",
	    "/0/id|required|field 'id' is required\n"
	    "/1/siteId|required|field 'siteId' is required\n"
	    "/2/id|required|field 'id' is required\n"
	    "/2/siteId|required|field 'siteId' is required\n");
	expect("[{\"id\":null,\"siteId\":null}]",
	    "/0/id|required|field 'id' is required\n"
	    "/0/siteId|required|field 'siteId' is required\n");
	expect("[{\"id\":\"\",\"siteId\":\"\"}]",
	    "/0/id|required|field 'id' must not be empty\n"
	    "/0/siteId|required|field 'siteId' must not be empty\n");
	expect("{\"id\":7,\"siteId\":[\"S\"]}",
	    "/id|type|field 'id' must be a string, not a number\n"
	    "/siteId|type|field 'siteId' must be a string, not an array\n");
}

static void
test_string_fields(void **state)
{
	static const char *const f[] = { "assetId", "activityCategory", "workPackageId",
	    "workOrderId", "internalRemarks", "externalRemarks" };
	static const char *const v[][2] = { { "1.5", "a number" }, { "true", "a boolean" },
	    { "{}", "an object" }, { "[\"x\"]", "an array" } };
	char field[128], want[256];
	size_t i, j;

	for (i = 0; i < TG_NELEM(f); i++) {
		for (j = 0; j < TG_NELEM(v); j++) {
			snprintf(field, sizeof(field), "\"%s\":%s", f[i], v[j][0]);
			snprintf(want, sizeof(want), "/0/%s|type|field '%s' must be a string, "
			    "not %s\n", f[i], f[i], v[j][1]);
			expect_field(field, want);
		}
		snprintf(field, sizeof(field), "\"%s\":\"\"", f[i]);
		expect_field(field, "");
	}
}

static void
test_dates(void **state)
{
	static const char *const ok[] = { "2024-05-01T08:00Z", "2024-05-01T08:00:00Z",
	    "2024-05-01T08:00:00.123456789Z", "2024-02-29T23:59:59-11:30", "2024-05-01t08:00z" };
	static const char *const bad[] = { "2024-05-01T08:00:00", "2024-02-30T08:00:00Z",
	    "2023-02-29T08:00Z", "2024-05-01", "01/05/2024", "2024-05-01T24:00Z",
	    "2024-05-01T08:00:00Z ", "2024-05-01T08:00:00+0200" };
	char field[128], want[512];
	size_t i;

	for (i = 0; i < TG_NELEM(ok); i++) {
		snprintf(field, sizeof(field), "\"startDate\":\"%s\",\"endDate\":\"%s\"", ok[i],
		    ok[i]);
		expect_field(field, "");
	}
	for (i = 0; i < TG_NELEM(bad); i++) {
		snprintf(field, sizeof(field), "\"endDate\":\"%s\"", bad[i]);
		snprintf(want, sizeof(want), "/0/endDate|date|field 'endDate' must be an ISO 8601 "
		    "timestamp with a time zone such as 2024-05-01T08:00:00Z, not '%s'\n", bad[i]);
		expect_field(field, want);
	}
	/* a NUL must not cut the text short of its bad tail */
	expect_field("\"startDate\":\"2024-05-01T08:00Z\\u0000x\"",
	    "/0/startDate|date|field 'startDate' must be an ISO 8601 timestamp with a time zone "
	    "such as 2024-05-01T08:00:00Z, not '2024-05-01T08:00Z'\n");
	expect_field("\"startDate\":20240501",
	    "/0/startDate|type|field 'startDate' must be a string, not a number\n");
	/* long values are quoted in part */
	expect_field("\"startDate\":\"2024-05-01T08:00:00Z0123456789012345678901234567890123456789"
	    "0123456789\"", "/0/startDate|date|field 'startDate' must be an ISO 8601 timestamp with "
	    "a time zone such as 2024-05-01T08:00:00Z, not '2024-05-01T08:00:00Z012345678901234567"
	    "89...'\n");
}

/*
 * Common timestamps take a fast path; on a grid of dates, times and
 * endings, valid or not, the verdict must be the strict parser's.
 */
static void
test_dates_agree_with_clock(void **state)
{
	static const char *const years[] = { "0000", "1900", "2000", "2023", "2024", "2100" };
	static const char *const times[] = { "00:00:00", "23:59:59", "24:00:00", "23:60:00",
	    "23:59:60", "08:00", "0a:00:00" };
	static const char *const ends[] = { "Z", ".000Z", ".123Z", "z", ".1Z", ".1234Z",
	    "+01:00", "", ".00aZ" };
	struct evbuffer *b = evbuffer_new();
	struct tg_problems p = { .max = 100000 };
	struct tg_import_result res;
	size_t y, t, e, rows = 0, nbad = 0, *bad = malloc(100000 * sizeof(*bad));
	char date[64], path[32];
	int mo, d;
	int64_t ms;

	evbuffer_add(b, "[", 1);
	for (y = 0; y < TG_NELEM(years); y++)
	for (mo = 0; mo <= 13; mo++)
	for (d = 0; d <= 32; d += (d >= 1 && d < 27) ? 9 : 1)
	for (t = 0; t < TG_NELEM(times); t++)
	for (e = 0; e < TG_NELEM(ends); e++, rows++) {
		snprintf(date, sizeof(date), "%s-%02d-%02dT%s%s", years[y], mo, d, times[t],
		    ends[e]);
		evbuffer_add_printf(b, "%s{\"id\":\"%zu\",\"siteId\":\"S\",\"startDate\":\"%s\"}",
		    rows ? "," : "", rows, date);
		if (tg_clock_parse_iso(date, &ms) != 0)
			bad[nbad++] = rows;
	}
	evbuffer_add(b, "]", 1);
	assert_int_equal(tg_import_check_json(b, &res, &p), -1);
	assert_int_equal(res.rows, rows);
	assert_int_equal(p.total, nbad);
	for (y = 0; y < nbad; y++) {
		snprintf(path, sizeof(path), "/%zu/startDate", bad[y]);
		assert_string_equal(p.v[y].path, path);
	}
	print_message("%zu timestamps, %zu refused by both\n", rows, nbad);
	tg_problems_cleanup(&p);
	evbuffer_free(b);
	free(bad);
}

static void
test_status(void **state)
{
	expect_field("\"status\":\"DONE\"",
	    "/0/status|enum|'DONE' is not one of PLANNED, DISPATCHED, COMPLETED\n");
	expect_field("\"status\":\"planned\"",
	    "/0/status|enum|'planned' is not one of PLANNED, DISPATCHED, COMPLETED\n");
	expect_field("\"status\":\"PLANNED \"",
	    "/0/status|enum|'PLANNED ' is not one of PLANNED, DISPATCHED, COMPLETED\n");
	expect_field("\"status\":1", "/0/status|type|field 'status' must be a string, not a number\n");
	expect_field("\"status\":\"DISPATCHED\"", "");
	expect_field("\"status\":\"COMPLETED\"", "");
	/* a multi-byte character is not cut in half in the excerpt */
	expect_field("\"status\":\"\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9"
	    "\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\\u00e9\"",
	    "/0/status|enum|'\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9"
	    "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9..."
	    "' is not one of PLANNED, DISPATCHED, COMPLETED\n");
}

static void
test_boolean(void **state)
{
	expect_field("\"additionalClientWork\":true", "");
	expect_field("\"additionalClientWork\":\"true\"",
	    "/0/additionalClientWork|type|field 'additionalClientWork' must be a boolean, "
	    "not a string\n");
	expect_field("\"additionalClientWork\":1",
	    "/0/additionalClientWork|type|field 'additionalClientWork' must be a boolean, "
	    "not a number\n");
}

static void
test_lists(void **state)
{
	expect("[{\"id\":\"A\",\"siteId\":\"S\",\"teams\":[\"A\",\"B\",3,null,[\"x\"],{\"y\":[]}],"
	    "\"personnelIds\":[true]}]",
	    "/0/teams/2|type|elements of 'teams' must be strings, not a number\n"
	    "/0/teams/3|type|elements of 'teams' must be strings, not null\n"
	    "/0/teams/4|type|elements of 'teams' must be strings, not an array\n"
	    "/0/teams/5|type|elements of 'teams' must be strings, not an object\n"
	    "/0/personnelIds/0|type|elements of 'personnelIds' must be strings, not a boolean\n");
	expect_field("\"teams\":\"Alpha\"",
	    "/0/teams|type|field 'teams' must be an array of strings, not a string\n");
	expect_field("\"personnelIds\":{\"0\":\"P\"}",
	    "/0/personnelIds|type|field 'personnelIds' must be an array of strings, not an object\n");
	expect_field("\"teams\":[],\"personnelIds\":[\"\"]", "");
}

static void
test_manpower(void **state)
{
	expect("[{},{},{},{\"id\":\"A\",\"siteId\":\"S\",\"manpower\":{\"Alpha\":-1,\"Beta\":2.5,"
	    "\"Gamma\":\"3\",\"Delta\":1e2,\"Eps\":2147483648,\"Zeta\":99999999999999999999999,"
	    "\"Eta\":null,\"Theta\":[1],\"Iota\":2147483647,\"Kappa\":-0,\"a/b~c\":-5}}]",
	    "/0/id|required|field 'id' is required\n/0/siteId|required|field 'siteId' is required\n"
	    "/1/id|required|field 'id' is required\n/1/siteId|required|field 'siteId' is required\n"
	    "/2/id|required|field 'id' is required\n/2/siteId|required|field 'siteId' is required\n"
	    "/3/manpower/Alpha|range|manpower of team 'Alpha' must be between 0 and 2147483647, "
	    "not -1\n"
	    "/3/manpower/Beta|type|manpower of team 'Beta' must be an integer, not a fraction\n"
	    "/3/manpower/Gamma|type|manpower of team 'Gamma' must be an integer, not a string\n"
	    "/3/manpower/Delta|type|manpower of team 'Delta' must be an integer, not a fraction\n"
	    "/3/manpower/Eps|range|manpower of team 'Eps' must be between 0 and 2147483647, "
	    "not 2147483648\n"
	    "/3/manpower/Zeta|range|manpower of team 'Zeta' must be between 0 and 2147483647, "
	    "not 99999999999999999999999\n"
	    "/3/manpower/Eta|type|manpower of team 'Eta' must be an integer, not null\n"
	    "/3/manpower/Theta|type|manpower of team 'Theta' must be an integer, not an array\n"
	    "/3/manpower/a~1b~0c|range|manpower of team 'a/b~c' must be between 0 and "
	    "2147483647, not -5\n");
	expect_field("\"manpower\":[{\"Alpha\":1}]",
	    "/0/manpower|type|field 'manpower' must be an object of team names to integers, "
	    "not an array\n");
	expect_field("\"manpower\":{\"Alpha\":1,\"Beta\":2,\"Alpha\":3}",
	    "/0/manpower/Alpha|duplicate|team 'Alpha' is given more than once in 'manpower'\n");
	expect_field("\"manpower\":{}", "");
	/* names too long to compare in place go to the hashed set */
	expect_field("\"manpower\":{\"A\":1,\"Team with a rather long name\":1,\"B\":1,"
	    "\"Team with a rather long name\":2,\"A\":3}",
	    "/0/manpower/Team with a rather long name|duplicate|team 'Team with a rather long "
	    "name' is given more than once in 'manpower'\n"
	    "/0/manpower/A|duplicate|team 'A' is given more than once in 'manpower'\n");
	/* the path names a long team in full, the message in part */
	expect_field("\"manpower\":{\"Txxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxz\":-1}",
	    "/0/manpower/Txxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxz|range|manpower "
	    "of team 'Txxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...' must be between 0 and "
	    "2147483647, not -1\n");
}

/* The team set is per manpower object and survives a large one. */
static void
test_manpower_sets(void **state)
{
	struct evbuffer *b = evbuffer_new();
	struct tg_problems p = { 0 };
	struct tg_import_result res;
	int i;

	evbuffer_add_printf(b, "[{\"id\":\"A\",\"siteId\":\"S\",\"manpower\":{");
	for (i = 0; i < 300; i++)
		evbuffer_add_printf(b, "%s\"T%d\":%d", i ? "," : "", i, i);
	evbuffer_add_printf(b, ",\"T7\":1}},{\"id\":\"B\",\"siteId\":\"S\",\"manpower\":"
	    "{\"T7\":1,\"T8\":2}},{\"id\":\"C\",\"siteId\":\"S\",\"manpower\":{\"T8\":1,\"T8\":2}}]");
	assert_int_equal(tg_import_check_json(b, &res, &p), -1);
	assert_int_equal(p.total, 2);
	assert_string_equal(p.v[0].path, "/0/manpower/T7");
	assert_string_equal(p.v[0].code, "duplicate");
	assert_string_equal(p.v[1].path, "/2/manpower/T8");
	assert_int_equal(res.rows, 3);
	tg_problems_cleanup(&p);
	evbuffer_free(b);
}

static void
test_duplicate_ids(void **state)
{
	expect("[{\"id\":\"A\",\"siteId\":\"S\"},{\"id\":\"B\",\"siteId\":\"S\"},"
	    "{\"id\":\"A\",\"siteId\":\"S\"},{\"siteId\":\"S\",\"id\":\"A\"},{\"id\":\"B\",\"siteId\":\"S\"}]",
	    "/2/id|duplicate_id|id 'A' is already used by the activity at index 0\n"
	    "/3/id|duplicate_id|id 'A' is already used by the activity at index 0\n"
	    "/4/id|duplicate_id|id 'B' is already used by the activity at index 1\n");
	/* the same member twice in one row is a duplicate field, not a duplicate id */
	expect("[{\"id\":\"A\",\"siteId\":\"S\",\"id\":\"A\",\"status\":\"PLANNED\",\"status\":\"X\"}]",
	    "/0/id|duplicate|field 'id' is given more than once\n"
	    "/0/status|duplicate|field 'status' is given more than once\n"
	    "/0/status|enum|'X' is not one of PLANNED, DISPATCHED, COMPLETED\n");
	/* an id that is not a string takes no part; escapes are decoded first */
	expect("[{\"id\":1,\"siteId\":\"S\"},{\"id\":\"\\u0041\",\"siteId\":\"S\"},"
	    "{\"id\":\"A\",\"siteId\":\"S\"}]",
	    "/0/id|type|field 'id' must be a string, not a number\n"
	    "/2/id|duplicate_id|id 'A' is already used by the activity at index 1\n");
}

static void
test_rows_not_objects(void **state)
{
	struct run r;

	run_json(&r, "[\"A\",1,null,true,[{\"id\":1}],{\"id\":\"A\",\"siteId\":\"S\"}]");
	assert_string_equal(r.text,
	    "/0|type|an activity must be an object, not a string\n"
	    "/1|type|an activity must be an object, not a number\n"
	    "/2|type|an activity must be an object, not null\n"
	    "/3|type|an activity must be an object, not a boolean\n"
	    "/4|type|an activity must be an object, not an array\n");
	assert_int_equal(r.rows, 6);
	run_free(&r);
}

static void
test_near_misses(void **state)
{
	expect("[{\"id\":\"A\",\"siteid\":\"S\",\"startdate\":\"x\",\"Status\":\"DONE\","
	    "\"teamss\":[],\"manPower\":{},\"workPackageID\":\"W\",\"assetid\":1,\"ID\":\"B\","
	    "\"personelIds\":[],\"extrnalRemark\":\"\",\"activityCategry\":\"\",\"sid\":1}]",
	    "/0/siteid|unknown_field|unknown field 'siteid' (did you mean 'siteId'?)\n"
	    "/0/startdate|unknown_field|unknown field 'startdate' (did you mean 'startDate'?)\n"
	    "/0/Status|unknown_field|unknown field 'Status' (did you mean 'status'?)\n"
	    "/0/teamss|unknown_field|unknown field 'teamss' (did you mean 'teams'?)\n"
	    "/0/manPower|unknown_field|unknown field 'manPower' (did you mean 'manpower'?)\n"
	    "/0/workPackageID|unknown_field|unknown field 'workPackageID' (did you mean "
	    "'workPackageId'?)\n"
	    "/0/assetid|unknown_field|unknown field 'assetid' (did you mean 'assetId'?)\n"
	    "/0/ID|unknown_field|unknown field 'ID' (did you mean 'id'?)\n"
	    "/0/personelIds|unknown_field|unknown field 'personelIds' (did you mean "
	    "'personnelIds'?)\n"
	    "/0/extrnalRemark|unknown_field|unknown field 'extrnalRemark' (did you mean "
	    "'externalRemarks'?)\n"
	    "/0/activityCategry|unknown_field|unknown field 'activityCategry' (did you mean "
	    "'activityCategory'?)\n"
	    "/0/sid|unknown_field|unknown field 'sid' (did you mean 'id'?)\n"
	    "/0/siteId|required|field 'siteId' is required\n");
	/* a near miss seen after harmless names is still found, with escaping */
	expect_field("\"name\":1,\"type\":2,\"createdAt\":3,\"a\":4,\"no\":5,\"siteId/\":6",
	    "/0/siteId~1|unknown_field|unknown field 'siteId/' (did you mean 'siteId'?)\n");
}

static void
test_many_problems(void **state)
{
	struct evbuffer *b = evbuffer_new();
	struct tg_problems p = { .max = 50 };
	struct tg_import_result res;
	int i;

	evbuffer_add(b, "[", 1);
	for (i = 0; i < 1000; i++)
		evbuffer_add_printf(b, "%s{\"id\":\"A\",\"status\":\"X\",\"teams\":[1]}",
		    i ? "," : "");
	evbuffer_add(b, "]", 1);
	assert_int_equal(tg_import_check_json(b, &res, &p), -1);
	/* row 0: enum, type, required; later rows duplicate_id before required */
	assert_int_equal(p.total, 3 + 999 * 4);
	assert_int_equal(p.n, 50);
	assert_string_equal(p.v[3].path, "/1/status");
	assert_string_equal(p.v[5].path, "/1/id");
	assert_string_equal(p.v[5].code, "duplicate_id");
	assert_string_equal(p.v[49].path, "/12/id");
	assert_int_equal(res.rows, 1000);
	tg_problems_cleanup(&p);
	evbuffer_free(b);
}

static void
test_top_level(void **state)
{
	struct run r;

	expect("", "|type|the body is empty: expected an array of activities or one activity "
	    "object\n");
	expect(" \r\n\t", "|type|the body is empty: expected an array of activities or one "
	    "activity object\n");
	expect("42", "|type|the body must be an array of activities or one activity object, "
	    "not a number\n");
	expect("\"x\"", "|type|the body must be an array of activities or one activity object, "
	    "not a string\n");
	expect("null", "|type|the body must be an array of activities or one activity object, "
	    "not null\n");
	expect("{\"siteId\":\"S\",\"teams\":[1]}",
	    "/teams/0|type|elements of 'teams' must be strings, not a number\n"
	    "/id|required|field 'id' is required\n");
	run_json(&r, "{\"id\":\"A\",\"siteId\":\"S\"}");
	assert_int_equal(r.rows, 1);
	run_free(&r);
}

static void
test_syntax_errors(void **state)
{
	struct run r;

	expect("[1,2", "/0|type|an activity must be an object, not a number\n"
	    "/1|type|an activity must be an object, not a number\n"
	    "|json|invalid JSON at byte offset 4: parse error: premature EOF\n");
	expect("[{\"id\":\"A\",}]",
	    "|json|invalid JSON at byte offset 12: parse error: invalid object key (must be a "
	    "string)\n");
	expect("[] x", "|json|invalid JSON at byte offset 4: parse error: trailing garbage\n");
	expect("[{\"id\":\"x\"  \"yy\"}]", "|json|invalid JSON at byte offset 10: parse error: "
	    "after key and value, inside map, I expect ',' or '}'\n");
	expect("[{\"id\":\"A\",\"siteId\":\"S\"}]]",
	    "|json|invalid JSON at byte offset 26: parse error: trailing garbage\n");
	expect("[tru]", "|json|invalid JSON at byte offset 4: lexical error: invalid string in "
	    "json text.\n");
	expect("[\"\xff\"]", "|json|invalid JSON at byte offset 3: lexical error: invalid bytes "
	    "in UTF8 string.\n");
	expect("[{\"id\":\"A\" /* c */}]", "|json|invalid JSON at byte offset 11: lexical error: "
	    "probable comment found in input text, comments are not enabled.\n");
	/* problems before the error are kept, nothing after it is looked at */
	run_json(&r, "[{\"id\":\"A\",\"siteId\":\"S\",\"status\":\"X\"},{\"id\" \"B\"},{\"status\":3}]");
	assert_string_equal(r.text, "/0/status|enum|'X' is not one of PLANNED, DISPATCHED, "
	    "COMPLETED\n|json|invalid JSON at byte offset 47: parse error: object key and value "
	    "must be separated by a colon (':')\n");
	assert_int_equal(r.rows, 2);
	assert_int_equal(r.bytes, 47);
	run_free(&r);
}

static void
test_depth(void **state)
{
	/* 8 levels are fine anywhere; the 9th ends the check */
	expect_field("\"x\":[[[[[{\"a\":1}]]]]]", "");
	expect("[{\"id\":\"A\",\"siteId\":\"S\",\"x\":[[[[[[[1]]]]]]]},{\"status\":1}]",
	    "/0/x|depth|JSON nesting is deeper than 8 levels\n");
	expect("[[[[[[[[[[[[[[[[[[[[[[[[[", "/0|type|an activity must be an object, not an array\n"
	    "/0|depth|JSON nesting is deeper than 8 levels\n");
	expect("{\"x\":{\"a\":{\"b\":{\"c\":{\"d\":{\"e\":{\"f\":{\"g\":{}}}}}}}}}",
	    "/x|depth|JSON nesting is deeper than 8 levels\n");
}

/* A token longer than 1 MiB ends the check, wherever the chains are cut. */
static void
test_too_long(void **state)
{
	size_t len = 3 + 1024 * 1024 + 100, i, cuts[300];
	char *s = malloc(len + 1);
	struct run a, b;

	memset(s, 'x', len);
	memcpy(s, "[\"", 2);
	memcpy(s + len - 2, "\"]", 2);
	s[len] = '\0';
	for (i = 0; i < TG_NELEM(cuts); i++)
		cuts[i] = 1 + i * 4096;
	run_json_cut(&a, s, len, NULL, 0);
	run_json_cut(&b, s, len, cuts, TG_NELEM(cuts));
	assert_string_equal(a.text, "|too_long|no JSON string or number ends within 1048576 "
	    "bytes after byte offset 0 (they are limited to that length)\n");
	assert_string_equal(a.text, b.text);
	assert_int_equal(a.bytes, b.bytes);
	run_free(&a);
	run_free(&b);
	/* just under the limit passes (it is a row that is not an object) */
	len = 1024 * 1024;
	memset(s, ' ', len);
	memcpy(s, "[\"", 2);
	memcpy(s + len - 3, "\"]", 2);
	s[len] = '\0';
	run_json_cut(&a, s, len, cuts, TG_NELEM(cuts));
	assert_string_equal(a.text, "/0|type|an activity must be an object, not a string\n");
	run_free(&a);
	free(s);
}

/* ---- chunking ---- */

static const char mixed[] =
	"[{\"id\":\"A-1\",\"siteId\":\"S-1\",\"startDate\":\"2024-05-01T08:00:00Z\",\"teams\":[\"x\",2],"
	"\"manpower\":{\"Alpha\":-12,\"Be\\/ta\":1.5e3},\"status\":\"DONE\",\"siteid\":\"\"},\n"
	"  7, {\"id\":\"A-1\",\"siteId\":\"\\u0053-2\",\"internalRemarks\":\"caf\\u00e9 \\\"q\\\"\","
	"\"name\":\"n\",\"x\":[[{\"y\":null}]],\"additionalClientWork\":true,\"endDate\":\"2024-02-30T"
	"00:00Z\"},{\"id\":\"A-2\",\"siteId\":\"S\",\"personnelIds\":[\"P\",{}],\"status\":\"PLANNED\"}]";

static const char broken[] =
	"[{\"id\":\"A-1\",\"siteId\":\"S-1\",\"status\":\"X\"},{\"id\":\"A-1\",\"teams\":[12345, tru]}]";

/* The verdict must not depend on where the body's chains end. */
static void
check_every_split(const char *body)
{
	size_t len = strlen(body), i, cut[2];
	struct run whole, part;

	run_json(&whole, body);
	for (i = 1; i < len; i++) {
		run_json_cut(&part, body, len, &i, 1);
		assert_string_equal(part.text, whole.text);
		assert_int_equal(part.rows, whole.rows);
		assert_int_equal(part.bytes, whole.bytes);
		assert_int_equal(part.total, whole.total);
		run_free(&part);
	}
	for (i = 1; i + 1 < len; i++) {	/* one-byte chains everywhere in turn */
		cut[0] = i;
		cut[1] = i + 1;
		run_json_cut(&part, body, len, cut, 2);
		assert_string_equal(part.text, whole.text);
		run_free(&part);
	}
	run_free(&whole);
}

static void
check_random_splits(const char *body, unsigned seed)
{
	size_t len = strlen(body), cuts[512], n, at;
	struct run whole, part;
	int round;

	run_json(&whole, body);
	for (round = 0; round < 200; round++) {
		for (n = 0, at = 0; n < TG_NELEM(cuts); n++) {
			seed = seed * 1103515245u + 12345u;
			at += 1 + (seed >> 16) % (round % 4 == 0 ? 3 : 17);
			if (at >= len)
				break;
			cuts[n] = at;
		}
		run_json_cut(&part, body, len, cuts, n);
		assert_string_equal(part.text, whole.text);
		assert_int_equal(part.rows, whole.rows);
		assert_int_equal(part.bytes, whole.bytes);
		run_free(&part);
	}
	run_free(&whole);
}

static void
test_chunking(void **state)
{
	struct run r;

	run_json(&r, mixed);
	assert_int_equal(r.total, 9);
	run_free(&r);
	check_every_split(mixed);
	check_every_split(broken);
	check_every_split("[1,2");
	check_every_split("[{\"id\":\"A\"}] x");
	check_every_split("{\"manpower\":{\"a\":-123456789012345678901234567890}}");
	check_every_split("[{\"id\":\"\xce\xbb\xff\"}]");
	check_every_split("[{\"id\":\"A\" /* c */}]");
	check_every_split("[{\"id\":\"A\",}]");
	check_every_split("[{\"id\":{}  4444444444,\"x\":1}]");
	check_every_split("[{\"id\":\"x\" \"yyyyyyyy\"}]");
	check_every_split("[-]");
	check_every_split("[1.e5]");
	check_every_split("   ");
	check_every_split(" 12 ");
	check_random_splits(mixed, 1);
	check_random_splits(broken, 2);
}

/* ---- multipart ---- */

#define BND "tg-bnd-7f3a"
#define CT "multipart/form-data; boundary=" BND

static void
run_mp_cut(struct run *r, const char *ctype, const char *s, size_t len, const size_t *cuts,
    size_t ncuts, size_t max_part, int *too_large)
{
	struct evbuffer *b = chains(s, len, cuts, ncuts);
	struct tg_import_result res = { 99, 99 };

	memset(r, 0, sizeof(*r));
	*too_large = -1;
	r->rc = tg_import_check_multipart(b, ctype, max_part, &res, &r->p, too_large);
	r->rows = res.rows;
	r->bytes = res.bytes;
	render(r);
	evbuffer_free(b);
}

static void
expect_mp(const char *ctype, const char *body, const char *want)
{
	struct run r;
	int tl;

	run_mp_cut(&r, ctype, body, strlen(body), NULL, 0, 0, &tl);
	assert_string_equal(r.text, want);
	assert_int_equal(r.rc, want[0] == '\0' ? 0 : -1);
	assert_int_equal(tl, 0);
	run_free(&r);
}

#define PART(name, data) \
	"--" BND "\r\nContent-Disposition: form-data; name=\"" name "\"; filename=\"a.json\"\r\n" \
	"Content-Type: application/json\r\n\r\n" data "\r\n"
#define CLOSE "--" BND "--\r\n"
#define GOOD_JSON "[{\"id\":\"A\",\"siteId\":\"S\"},{\"id\":\"B\",\"siteId\":\"S\",\"teams\":[\"\\r\\n--x\"]}]"

static const char upload[] = "preamble\r\n"
	"--" BND "\r\nContent-Disposition: form-data; name=\"projectId\"\r\n\r\nP-DEMO\r\n"
	PART("file", GOOD_JSON) CLOSE;

static void
test_multipart_valid(void **state)
{
	size_t len = strlen(upload), i;
	struct run r;
	int tl;

	run_mp_cut(&r, CT, upload, len, NULL, 0, 1 << 20, &tl);
	assert_string_equal(r.text, "");
	assert_int_equal(r.rc, 0);
	assert_int_equal(tl, 0);
	assert_int_equal(r.rows, 2);
	assert_int_equal(r.bytes, strlen(GOOD_JSON));
	run_free(&r);
	for (i = 1; i < len; i++) {	/* boundaries and JSON split across reads */
		run_mp_cut(&r, CT, upload, len, &i, 1, 1 << 20, &tl);
		assert_string_equal(r.text, "");
		assert_int_equal(r.rows, 2);
		run_free(&r);
	}
	expect_mp("multipart/form-data; boundary=\"" BND "\"; charset=utf-8", upload, "");
}

static void
test_multipart_problems_in_file(void **state)
{
	static const char body[] = PART("file", "[{\"id\":\"A\",\"siteId\":\"S\"},"
	    "{\"id\":\"A\",\"status\":\"DONE\",\"manpower\":{\"Alpha\":-1}}]") CLOSE;
	size_t len = strlen(body), i;
	struct run whole, part;
	int tl;

	run_mp_cut(&whole, CT, body, len, NULL, 0, 0, &tl);
	assert_string_equal(whole.text,
	    "/1/status|enum|'DONE' is not one of PLANNED, DISPATCHED, COMPLETED\n"
	    "/1/manpower/Alpha|range|manpower of team 'Alpha' must be between 0 and 2147483647, "
	    "not -1\n"
	    "/1/id|duplicate_id|id 'A' is already used by the activity at index 0\n"
	    "/1/siteId|required|field 'siteId' is required\n");
	for (i = 1; i < len; i++) {
		run_mp_cut(&part, CT, body, len, &i, 1, 0, &tl);
		assert_string_equal(part.text, whole.text);
		run_free(&part);
	}
	run_free(&whole);
	expect_mp(CT, PART("file", "[{\"id\":\"A\"") CLOSE,
	    "|json|invalid JSON at byte offset 10: parse error: premature EOF\n");
	expect_mp(CT, PART("file", "") CLOSE, "|type|the body is empty: expected an array of "
	    "activities or one activity object\n");
}

static void
test_multipart_form_errors(void **state)
{
	expect_mp(CT, PART("upload", GOOD_JSON) CLOSE, "/file|required|the form has no 'file' "
	    "part\n");
	expect_mp(CT, PART("file", GOOD_JSON) PART("file", "[]") CLOSE,
	    "/file|duplicate|the form has more than one 'file' part\n");
	expect_mp("application/json", upload,
	    "|multipart|Content-Type must be multipart/form-data\n");
	expect_mp(NULL, upload, "|multipart|Content-Type must be multipart/form-data\n");
	expect_mp("multipart/form-data", upload,
	    "|multipart|multipart/form-data Content-Type has no boundary parameter\n");
	expect_mp("multipart/form-data; boundary=other", upload,
	    "|multipart|no boundary line found in the body\n");
	/* truncated: what was read is reported, the JSON is not finished */
	expect_mp(CT, PART("file", "[{\"id\":\"A\",\"siteId\":\"S\",\"status\":\"X\"},{\"id\""),
	    "/0/status|enum|'X' is not one of PLANNED, DISPATCHED, COMPLETED\n"
	    "|multipart|body ends inside part 'file': missing closing boundary\n");
	expect_mp(CT, "--" BND "\r\nContent-Type: text/plain\r\n\r\nx\r\n" CLOSE,
	    "|multipart|part has no Content-Disposition header\n");
	expect_mp(CT, "", "|multipart|no boundary line found in the body\n");
}

static void
check_mp_splits(const char *body, size_t max_part, const char *want)
{
	size_t len = strlen(body), i;
	struct run r;
	int tl;

	for (i = 0; i < len; i++) {
		run_mp_cut(&r, CT, body, len, &i, i > 0, max_part, &tl);
		assert_string_equal(r.text, want);
		assert_int_equal(tl, 1);
		run_free(&r);
	}
}

static void
test_multipart_too_large(void **state)
{
	char want[128];
	struct run r;
	int tl;

	run_mp_cut(&r, CT, upload, strlen(upload), NULL, 0, strlen(GOOD_JSON) - 1, &tl);
	assert_int_equal(tl, 1);
	assert_int_equal(r.rc, -1);
	snprintf(want, sizeof(want), "|too_large|part 'file' is larger than the limit of %zu "
	    "bytes\n", strlen(GOOD_JSON) - 1);
	assert_string_equal(r.text, want);
	assert_int_equal(r.bytes, strlen(GOOD_JSON) - 1);
	run_free(&r);
	/* the limit holds for every part; what was checked does not depend on chains */
	check_mp_splits(PART("file", "[{\"status\":\"X\"},{\"id\":1},{\"id\":2}]") CLOSE, 30,
	    "/0/status|enum|'X' is not one of PLANNED, DISPATCHED, COMPLETED\n"
	    "/0/id|required|field 'id' is required\n/0/siteId|required|field 'siteId' is required\n"
	    "/1/id|type|field 'id' must be a string, not a number\n"
	    "/1/siteId|required|field 'siteId' is required\n"
	    "|too_large|part 'file' is larger than the limit of 30 bytes\n");
	check_mp_splits("--" BND "\r\nContent-Disposition: form-data; name=\"big\"\r\n\r\n"
	    "0123456789012345678901234567890123456789\r\n" PART("file", "[]") CLOSE, 30,
	    "|too_large|part 'big' is larger than the limit of 30 bytes\n");
	run_mp_cut(&r, CT, upload, strlen(upload), NULL, 0, strlen(GOOD_JSON), &tl);
	assert_int_equal(tl, 0);
	assert_int_equal(r.rc, 0);
	run_free(&r);
}

/* ---- memory ---- */

static long
peak_rss_kb(void)
{
	struct rusage ru;

	getrusage(RUSAGE_SELF, &ru);
	return ru.ru_maxrss;
}

static void
check_50mb(struct evbuffer *b, size_t rows, long limit_kb)
{
	struct tg_problems p = { 0 };
	struct tg_import_result res;
	long before, growth;

	before = peak_rss_kb();
	assert_int_equal(tg_import_check_json(b, &res, &p), 0);
	growth = peak_rss_kb() - before;
	print_message("%zu MB, %zu rows: peak RSS grew by %ld kB (limit %ld kB)\n",
	    res.bytes >> 20, res.rows, growth, limit_kb);
	assert_int_equal(res.rows, rows);
	assert_int_equal(res.bytes, evbuffer_get_length(b));
	assert_true(growth < limit_kb);
	tg_problems_cleanup(&p);
}

/*
 * 50 MB of activities: the id set is the only thing that grows (16-byte
 * slots at load <= 3/4, sized from the body once a megabyte has been read,
 * so the small tables before it hardly count); everything else must fit
 * in a couple of MB.
 */
static void
test_memory_50mb(void **state)
{
	struct evbuffer *b = evbuffer_new();
	size_t rows = 0, slots = 16;
	char row[1024];
	int n;

	evbuffer_add(b, "[", 1);
	while (evbuffer_get_length(b) < 50u << 20) {
		n = snprintf(row, sizeof(row), full_row, (int)rows);
		evbuffer_add(b, rows ? "," : "", rows ? 1 : 0);
		evbuffer_add(b, row, (size_t)n);
		rows++;
	}
	evbuffer_add(b, "]", 1);
	while (3 * slots < 4 * rows)
		slots *= 2;
	check_50mb(b, rows, (long)(slots * 16 * 9 / 8 / 1024) + 2048);	/* + ASan's shadow */
	evbuffer_free(b);

	/* without ids to remember, 50 MB are checked in constant memory */
	b = evbuffer_new();
	evbuffer_add_printf(b, "{\"id\":\"A\",\"siteId\":\"S\",\"extra\":[");
	for (rows = 0; evbuffer_get_length(b) < 50u << 20; rows++)
		evbuffer_add_printf(b, "%s{\"teams\":[\"Alpha\",\"Beta\"],\"n\":%zu}", rows ? "," : "",
		    rows);
	evbuffer_add(b, "]}", 2);
	check_50mb(b, 1, 2048);
	evbuffer_free(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_valid_array),
		cmocka_unit_test(test_valid_object),
		cmocka_unit_test(test_export_record_reimport),
		cmocka_unit_test(test_required),
		cmocka_unit_test(test_string_fields),
		cmocka_unit_test(test_dates),
		cmocka_unit_test(test_dates_agree_with_clock),
		cmocka_unit_test(test_status),
		cmocka_unit_test(test_boolean),
		cmocka_unit_test(test_lists),
		cmocka_unit_test(test_manpower),
		cmocka_unit_test(test_manpower_sets),
		cmocka_unit_test(test_duplicate_ids),
		cmocka_unit_test(test_rows_not_objects),
		cmocka_unit_test(test_near_misses),
		cmocka_unit_test(test_many_problems),
		cmocka_unit_test(test_top_level),
		cmocka_unit_test(test_syntax_errors),
		cmocka_unit_test(test_depth),
		cmocka_unit_test(test_too_long),
		cmocka_unit_test(test_chunking),
		cmocka_unit_test(test_multipart_valid),
		cmocka_unit_test(test_multipart_problems_in_file),
		cmocka_unit_test(test_multipart_form_errors),
		cmocka_unit_test(test_multipart_too_large),
		cmocka_unit_test(test_memory_50mb),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
