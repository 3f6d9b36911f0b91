/*
 * test_export_check.c - unit tests of the export request checks
 * (src/dex/export_check.c): every member of tables E1-E7, the aliases and
 * their normalised output, each rule code with its exact path and message,
 * strict and lenient modes, nulls, the work-package status option, and
 * garbage bodies. Run by meson test (suite unit).
 *
 * Bodies are written with ' for " to stay readable; problems are compared
 * as one "path code: message" line each, in the order they were found.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tidegate/dex.h"
#include "harness.h"

static const struct tg_export_opts lax = { 0, NULL };
static const struct tg_export_opts strict = { 1, NULL };

static const char *const kinds[] = { "activities", "activity-categories", "personnel",
	"timesheets", "work-order-sequences", "work-orders", "work-packages" };

struct res {
	int rc;
	char *out;
	size_t outlen;
	size_t total;
	char list[8192];
};

static void
run_raw(struct res *r, const char *kind, const char *body, size_t len,
    const struct tg_export_opts *o)
{
	struct tg_problems p = { 0 };
	size_t i, n = 0;

	r->rc = tg_export_check(kind, body, len, o, &r->out, &r->outlen, &p);
	r->total = p.total;
	r->list[0] = '\0';
	for (i = 0; i < p.n && n < sizeof(r->list); i++)
		n += (size_t)snprintf(r->list + n, sizeof(r->list) - n, "%s %s: %s\n",
		    p.v[i].path, p.v[i].code, p.v[i].message);
	assert_int_equal(r->rc, p.total == 0 ? 0 : -1);
	if (r->rc != 0) {
		assert_null(r->out);
		assert_int_equal(r->outlen, 0);
	} else {
		assert_non_null(r->out);
		assert_int_equal(strlen(r->out), r->outlen);
	}
	tg_problems_cleanup(&p);
}

static void
run(struct res *r, const char *kind, const char *body, const struct tg_export_opts *o)
{
	char *b = th_quotes(body);

	run_raw(r, kind, b, strlen(b), o);
	free(b);
}

/* body passes (in both modes when o is NULL) and goes out as want. */
static void
expect_ok(const char *kind, const char *body, const struct tg_export_opts *o,
    const char *want)
{
	const struct tg_export_opts *modes[] = { o != NULL ? o : &lax, &strict };
	char *w = th_quotes(want);
	struct res r;
	size_t i;

	for (i = 0; i < (o != NULL ? 1 : 2); i++) {
		run(&r, kind, body, modes[i]);
		if (r.rc != 0)
			fail_msg("%s %s: unexpected problems:\n%s", kind, body, r.list);
		assert_string_equal(r.out, w);
		free(r.out);
	}
	free(w);
}

static void
expect_bad(const char *kind, const char *body, const struct tg_export_opts *o,
    const char *want)
{
	struct res r;

	run(&r, kind, body, o);
	if (r.rc == 0)
		fail_msg("%s %s: passed as %s", kind, body, r.out);
	assert_string_equal(r.list, want);
}

/* ---- kinds ---- */

static void
test_kinds_known(void **state)
{
	size_t i;

	for (i = 0; i < 7; i++)
		assert_true(tg_export_kind_known(kinds[i]));
	assert_false(tg_export_kind_known(NULL));
	assert_false(tg_export_kind_known(""));
	assert_false(tg_export_kind_known("activity"));
	assert_false(tg_export_kind_known("Activities"));
	assert_false(tg_export_kind_known("work_orders"));
	assert_false(tg_export_kind_known("activities/"));
}

static void
test_unknown_kind(void **state)
{
	const char *want = " unknown_kind: unknown export kind '%s' (one of activities, "
	    "activity-categories, personnel, timesheets, work-order-sequences, work-orders, "
	    "work-packages)\n";
	char buf[512];

	snprintf(buf, sizeof(buf), want, "orders");
	expect_bad("orders", "{'projectId':'P'}", &lax, buf);
	snprintf(buf, sizeof(buf), want, "");
	expect_bad(NULL, "{'projectId':'P'}", &lax, buf);
	/* the body is still checked as far as it can be without a kind */
	snprintf(buf, sizeof(buf), want, "x");
	strcat(buf, " type: body must be a JSON object, not an array\n");
	expect_bad("x", "[]", &lax, buf);
	/* a near miss names the kind it nearly is */
	expect_bad("activites", "{'projectId':'P'}", &lax, " unknown_kind: unknown export "
	    "kind 'activites' (did you mean 'activities'? one of activities, "
	    "activity-categories, personnel, timesheets, work-order-sequences, work-orders, "
	    "work-packages)\n");
}

static void
test_kind_hint(void **state)
{
	assert_string_equal(tg_export_kind_hint("activites"), "activities");
	assert_string_equal(tg_export_kind_hint("Work-Orders"), "work-orders");
	assert_string_equal(tg_export_kind_hint("timesheet"), "timesheets");
	assert_null(tg_export_kind_hint("activities"));	/* known: no hint */
	assert_null(tg_export_kind_hint("invoices"));
	assert_null(tg_export_kind_hint(NULL));
}

/* ---- valid bodies, one per kind, every member ---- */

static const struct {
	const char *kind, *body;
} full[] = {
	{ "activities", "{'projectId':'P-1','callbackUrl':'https://hooks.example/cb?x=1',"
	    "'changedSince':'2024-01-01T00:00:00Z','workPackages':['WP-1','WP-2'],"
	    "'workOrders':['WO-1'],'sites':['S-1'],'assets':['A-1'],'names':['Cable pull'],"
	    "'activities':['ACT-000001'],'startDate':'2024-01-01T00:00:00Z',"
	    "'endDate':'2024-02-01T12:30:00.250+02:00',"
	    "'statuses':['PLANNED','DISPATCHED','COMPLETED']}" },
	{ "activity-categories", "{'projectId':'P-1','callbackUrl':'http://127.0.0.1:9/x',"
	    "'changedSince':'2024-01-01T00:00Z','activityCategories':['AC-1'],"
	    "'names':['Survey'],'workPackages':[]}" },
	{ "personnel", "{'projectId':'P-1','changedSince':'2024-03-31T23:59:59-05:00',"
	    "'names':['Ann'],'emails':['ann@example.com'],'roles':['Rigger'],"
	    "'departments':['Ops'],'teams':['Team A'],'workPackages':['WP-1']}" },
	{ "timesheets", "{'projectId':'P-1','callbackUrl':'http://[::1]:8080/cb',"
	    "'changedSince':'2024-01-01T00:00:00Z','timesheets':['TS-1'],'names':['w1'],"
	    "'statuses':['DRAFT','PENDING','SIGNED','REJECTED'],"
	    "'dateFrom':'2024-01-01T00:00:00Z','dateTo':'2024-02-29T00:00:00Z',"
	    "'submittedBy':['PER-1'],'approvedBy':['PER-2'],'timeEntries':['TE-1'],"
	    "'activities':['ACT-1'],'workPackages':['WP-1'],'personnel':['PER-1']}" },
	{ "work-order-sequences", "{'projectId':'P-1','changedSince':'2024-01-01T00:00:00Z',"
	    "'workOrderSequences':['WOS-1'],'names':['Seq']}" },
	{ "work-orders", "{'projectId':'P-1','callbackUrl':'HTTPS://Hooks.Example:8443/p',"
	    "'changedSince':'2024-01-01T00:00:00Z','workOrders':['WO-1'],'names':['n'],"
	    "'types':['T'],'priorities':['HIGH'],'workPackages':['WP-1'],"
	    "'workOrderSequences':['WOS-1']}" },
	{ "work-packages", "{'projectId':'P-1','callbackUrl':'https://h.example/',"
	    "'changedSince':'2024-01-01T00:00:00Z','workPackages':['WP-1'],'names':['n'],"
	    "'types':['T'],'status':['NONE','PLANNED','CONFIRMED','FINISHED','CANCELED'],"
	    "'countries':['DK'],'assetTypes':['Turbine'],'startDate':'2024-01-01T00:00:00Z',"
	    "'endDate':'2024-12-31T00:00:00Z'}" },
};

static void
test_valid_bodies(void **state)
{
	size_t i;

	for (i = 0; i < sizeof(full) / sizeof(full[0]); i++)
		expect_ok(full[i].kind, full[i].body, NULL, full[i].body);
	/* the smallest body */
	for (i = 0; i < 7; i++)
		expect_ok(kinds[i], "{'projectId':'P'}", NULL, "{'projectId':'P'}");
	/* an empty filter list is passed on: it filters nothing */
	expect_ok("activities", "{'projectId':'P','statuses':[],'names':['']}", NULL,
	    "{'projectId':'P','statuses':[],'names':['']}");
	expect_ok("activities", " \n{ 'projectId' : 'P' } \n", NULL, "{'projectId':'P'}");
}

/* ---- aliases ---- */

static void
test_common_aliases(void **state)
{
	size_t i;

	for (i = 0; i < 7; i++) {
		expect_ok(kinds[i], "{'callbackURL':'http://h/cb','projectID':'P'}", NULL,
		    "{'callbackUrl':'http://h/cb','projectId':'P'}");
		expect_bad(kinds[i], "{'projectId':'P','projectID':'Q'}", &lax,
		    "/projectID duplicate: both 'projectId' and 'projectID' given; send one\n");
		expect_bad(kinds[i], "{'callbackURL':'http://a/','projectId':'P',"
		    "'callbackUrl':'http://b/'}", &lax,
		    "/callbackUrl duplicate: both 'callbackURL' and 'callbackUrl' given; "
		    "send one\n");
	}
}

static void
test_status_aliases(void **state)
{
	const struct tg_export_opts wp_s = { 0, "statuses" }, wp_1 = { 1, "status" };
	const struct tg_export_opts wp_odd = { 0, "state" }, wp_empty = { 0, "" };

	expect_ok("activities", "{'projectId':'P','status':['PLANNED']}", NULL,
	    "{'projectId':'P','statuses':['PLANNED']}");
	expect_ok("timesheets", "{'status':['SIGNED'],'projectId':'P'}", NULL,
	    "{'statuses':['SIGNED'],'projectId':'P'}");
	/* work packages: both spellings, sent as configured */
	expect_ok("work-packages", "{'projectId':'P','statuses':['NONE']}", NULL,
	    "{'projectId':'P','status':['NONE']}");
	expect_ok("work-packages", "{'projectId':'P','status':['NONE']}", &wp_1,
	    "{'projectId':'P','status':['NONE']}");
	expect_ok("work-packages", "{'projectId':'P','status':['NONE']}", &wp_s,
	    "{'projectId':'P','statuses':['NONE']}");
	expect_ok("work-packages", "{'projectId':'P','statuses':['NONE']}", &wp_s,
	    "{'projectId':'P','statuses':['NONE']}");
	/* anything but "statuses" is the table's name */
	expect_ok("work-packages", "{'projectId':'P','statuses':['NONE']}", &wp_odd,
	    "{'projectId':'P','status':['NONE']}");
	expect_ok("work-packages", "{'projectId':'P','statuses':['NONE']}", &wp_empty,
	    "{'projectId':'P','status':['NONE']}");
	/* the wp option leaves the other kinds alone */
	expect_ok("activities", "{'projectId':'P','status':['PLANNED']}", &wp_1,
	    "{'projectId':'P','statuses':['PLANNED']}");
	/* status means nothing to the kinds without one */
	expect_ok("personnel", "{'projectId':'P','status':['x']}", &lax,
	    "{'projectId':'P','status':['x']}");
	expect_bad("personnel", "{'projectId':'P','status':['x']}", &strict,
	    "/status unknown_field: unknown field 'status'\n");
}

static void
test_duplicates(void **state)
{
	expect_bad("activities", "{'projectId':'P','statuses':['PLANNED'],'status':['PLANNED']}",
	    &lax, "/status duplicate: both 'statuses' and 'status' given; send one\n");
	expect_bad("timesheets", "{'projectId':'P','status':[],'statuses':[]}",
	    &lax, "/statuses duplicate: both 'status' and 'statuses' given; send one\n");
	expect_bad("work-packages", "{'projectId':'P','status':['NONE'],'statuses':['NONE']}",
	    &lax, "/statuses duplicate: both 'status' and 'statuses' given; send one\n");
	expect_bad("work-orders", "{'projectId':'P','names':['a'],'names':['b']}", &lax,
	    "/names duplicate: 'names' given more than once\n");
	expect_bad("work-orders", "{'projectId':'P','projectId':'P'}", &lax,
	    "/projectId duplicate: 'projectId' given more than once\n");
	/* a null is absent, so it is not a second value */
	expect_ok("work-packages", "{'projectId':'P','status':null,'statuses':['NONE']}", NULL,
	    "{'projectId':'P','status':['NONE']}");
	expect_ok("activities", "{'projectID':null,'projectId':'P'}", NULL,
	    "{'projectId':'P'}");
	/* both values are still checked */
	expect_bad("activities", "{'projectId':'P','statuses':['X'],'status':['Y']}", &lax,
	    "/statuses/0 enum: 'X' is not one of PLANNED, DISPATCHED, COMPLETED\n"
	    "/status duplicate: both 'statuses' and 'status' given; send one\n"
	    "/status/0 enum: 'Y' is not one of PLANNED, DISPATCHED, COMPLETED\n");
}

/* ---- projectId and callbackUrl ---- */

static void
test_project_id(void **state)
{
	size_t i;

	for (i = 0; i < 7; i++) {
		expect_bad(kinds[i], "{}", &lax, "/projectId required: projectId is required\n");
		expect_bad(kinds[i], "{'projectId':''}", &lax,
		    "/projectId empty: projectId must not be empty\n");
	}
	expect_bad("activities", "{'projectId':null}", &lax,
	    "/projectId required: projectId is required\n");
	expect_bad("activities", "{'projectID':null}", &lax,
	    "/projectID required: projectId is required\n");
	expect_bad("activities", "{'projectID':''}", &lax,
	    "/projectID empty: projectID must not be empty\n");
	expect_bad("activities", "{'projectId':7}", &lax,
	    "/projectId type: projectId must be a string, not a number\n");
	expect_bad("activities", "{'projectID':['P']}", &lax,
	    "/projectID type: projectID must be a string, not an array\n");
	expect_bad("activities", "{'projectId':{}}", &lax,
	    "/projectId type: projectId must be a string, not an object\n");
	expect_bad("activities", "{'projectId':true}", &lax,
	    "/projectId type: projectId must be a string, not a boolean\n");
	/* a near miss does not stand in for the member */
	expect_bad("activities", "{'projectid':'P'}", &lax,
	    "/projectid unknown_field: unknown field 'projectid' (did you mean 'projectId'?)\n"
	    "/projectId required: projectId is required\n");
}

static void
test_callback_url(void **state)
{
	static const char *const good[] = { "http://h", "https://h.example/cb",
		"HTTP://H:1/x?y=z#f", "http://user@h:65535/", "http://[::1]/",
		"http://10.0.0.1:8080/a/b" };
	static const char *const bad[] = { "ftp://h/x", "http://", "http:///x", "h.example/cb",
		"//h/cb", "http:h", "https://exa mple.com/", "http://h:99999/", "mailto:a@b",
		"javascript:alert(1)", " http://h/" };
	char body[256], want[256];
	size_t i;

	for (i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		snprintf(body, sizeof(body), "{'projectId':'P','callbackUrl':'%s'}", good[i]);
		expect_ok("personnel", body, NULL, body);
	}
	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(body, sizeof(body), "{'projectId':'P','callbackURL':'%s'}", bad[i]);
		snprintf(want, sizeof(want), "/callbackURL url: '%s' is not an absolute "
		    "http:// or https:// URL with a host\n", bad[i]);
		expect_bad("timesheets", body, &lax, want);
	}
	expect_bad("activities", "{'projectId':'P','callbackUrl':1}", &lax,
	    "/callbackUrl type: callbackUrl must be a string (an http:// or https:// URL), "
	    "not a number\n");
	/* empty and null are both "no callback" */
	expect_ok("activities", "{'callbackUrl':'','projectId':'P'}", NULL,
	    "{'projectId':'P'}");
	expect_ok("activities", "{'callbackURL':null,'projectId':'P'}", NULL,
	    "{'projectId':'P'}");
}

/* ---- dates ---- */

static const struct {
	const char *kind, *member;
} dates[] = {
	{ "activities", "changedSince" }, { "activities", "startDate" },
	{ "activities", "endDate" }, { "activity-categories", "changedSince" },
	{ "personnel", "changedSince" }, { "timesheets", "changedSince" },
	{ "timesheets", "dateFrom" }, { "timesheets", "dateTo" },
	{ "work-order-sequences", "changedSince" }, { "work-orders", "changedSince" },
	{ "work-packages", "changedSince" }, { "work-packages", "startDate" },
	{ "work-packages", "endDate" },
};

static void
test_dates(void **state)
{
	static const char *const bad[] = { "2024-13-01", "2024-02-30T00:00:00Z",
		"2023-02-29T00:00:00Z", "2024-01-01T00:00:00", "2024-01-01", "yesterday", "",
		"2024-01-01 00:00:00Z", "2024-01-01T24:00:00Z", "1704067200" };
	char body[256], want[512];
	size_t i, j;

	for (i = 0; i < sizeof(dates) / sizeof(dates[0]); i++) {
		snprintf(body, sizeof(body), "{'projectId':'P','%s':'2024-02-29T10:00:00.5Z'}",
		    dates[i].member);
		expect_ok(dates[i].kind, body, NULL, body);
		snprintf(body, sizeof(body), "{'projectId':'P','%s':null}", dates[i].member);
		expect_ok(dates[i].kind, body, NULL, "{'projectId':'P'}");
		for (j = 0; j < sizeof(bad) / sizeof(bad[0]); j++) {
			snprintf(body, sizeof(body), "{'projectId':'P','%s':'%s'}",
			    dates[i].member, bad[j]);
			snprintf(want, sizeof(want), "/%s date: '%s' is not an ISO 8601 UTC "
			    "timestamp (e.g. 2024-01-31T00:00:00Z)\n", dates[i].member, bad[j]);
			expect_bad(dates[i].kind, body, &lax, want);
		}
		snprintf(body, sizeof(body), "{'projectId':'P','%s':1704067200}",
		    dates[i].member);
		snprintf(want, sizeof(want), "/%s type: %s must be a string (an ISO 8601 UTC "
		    "timestamp, e.g. 2024-01-31T00:00:00Z), not a number\n", dates[i].member,
		    dates[i].member);
		expect_bad(dates[i].kind, body, &lax, want);
	}
	/* dates of other kinds are unknown members here */
	expect_ok("personnel", "{'projectId':'P','dateFrom':'x'}", &lax,
	    "{'projectId':'P','dateFrom':'x'}");
	expect_ok("activities", "{'projectId':'P','dateTo':'x'}", &lax,
	    "{'projectId':'P','dateTo':'x'}");
}

/* ---- array filters ---- */

static const struct {
	const char *kind, *member;
} arrays[] = {
	{ "activities", "workPackages" }, { "activities", "workOrders" },
	{ "activities", "sites" }, { "activities", "assets" }, { "activities", "names" },
	{ "activities", "activities" }, { "activities", "statuses" },
	{ "activities", "status" },
	{ "activity-categories", "activityCategories" }, { "activity-categories", "names" },
	{ "activity-categories", "workPackages" },
	{ "personnel", "names" }, { "personnel", "emails" }, { "personnel", "roles" },
	{ "personnel", "departments" }, { "personnel", "teams" },
	{ "personnel", "workPackages" },
	{ "timesheets", "timesheets" }, { "timesheets", "names" },
	{ "timesheets", "statuses" }, { "timesheets", "status" },
	{ "timesheets", "submittedBy" }, { "timesheets", "approvedBy" },
	{ "timesheets", "timeEntries" }, { "timesheets", "activities" },
	{ "timesheets", "workPackages" }, { "timesheets", "personnel" },
	{ "work-order-sequences", "workOrderSequences" }, { "work-order-sequences", "names" },
	{ "work-orders", "workOrders" }, { "work-orders", "names" },
	{ "work-orders", "types" }, { "work-orders", "priorities" },
	{ "work-orders", "workPackages" }, { "work-orders", "workOrderSequences" },
	{ "work-packages", "workPackages" }, { "work-packages", "names" },
	{ "work-packages", "types" }, { "work-packages", "status" },
	{ "work-packages", "statuses" }, { "work-packages", "countries" },
	{ "work-packages", "assetTypes" },
};

static void
test_arrays(void **state)
{
	char body[256], want[1024];
	const char *m;
	size_t i;

	for (i = 0; i < sizeof(arrays) / sizeof(arrays[0]); i++) {
		m = arrays[i].member;
		snprintf(body, sizeof(body), "{'projectId':'P','%s':'WP-1'}", m);
		snprintf(want, sizeof(want), "/%s type: %s must be an array of strings, "
		    "not a string\n", m, m);
		expect_bad(arrays[i].kind, body, &lax, want);
		snprintf(body, sizeof(body), "{'projectId':'P','%s':{'a':'b'}}", m);
		snprintf(want, sizeof(want), "/%s type: %s must be an array of strings, "
		    "not an object\n", m, m);
		expect_bad(arrays[i].kind, body, &lax, want);
		snprintf(body, sizeof(body), "{'projectId':'P','%s':[1,null,[],{},false]}", m);
		snprintf(want, sizeof(want),
		    "/%s/0 type: %s[0] must be a string, not a number\n"
		    "/%s/1 type: %s[1] must be a string, not null\n"
		    "/%s/2 type: %s[2] must be a string, not an array\n"
		    "/%s/3 type: %s[3] must be a string, not an object\n"
		    "/%s/4 type: %s[4] must be a string, not a boolean\n",
		    m, m, m, m, m, m, m, m, m, m);
		expect_bad(arrays[i].kind, body, &lax, want);
		snprintf(body, sizeof(body), "{'projectId':'P','%s':null}", m);
		expect_ok(arrays[i].kind, body, NULL, "{'projectId':'P'}");
	}
	expect_bad("activities", "{'projectId':'P','workPackages':['WP-1','WP-2',3]}", &lax,
	    "/workPackages/2 type: workPackages[2] must be a string, not a number\n");
}

/* ---- enums ---- */

static void
test_enums(void **state)
{
	expect_bad("activities", "{'projectId':'P','statuses':['PLANNED','DONE','planned']}",
	    &lax,
	    "/statuses/1 enum: 'DONE' is not one of PLANNED, DISPATCHED, COMPLETED\n"
	    "/statuses/2 enum: 'planned' is not one of PLANNED, DISPATCHED, COMPLETED\n");
	expect_bad("activities", "{'projectId':'P','status':['DRAFT']}", &lax,
	    "/status/0 enum: 'DRAFT' is not one of PLANNED, DISPATCHED, COMPLETED\n");
	expect_bad("timesheets", "{'projectId':'P','statuses':['SIGNED','PLANNED',' DRAFT']}",
	    &lax,
	    "/statuses/1 enum: 'PLANNED' is not one of DRAFT, PENDING, SIGNED, REJECTED\n"
	    "/statuses/2 enum: ' DRAFT' is not one of DRAFT, PENDING, SIGNED, REJECTED\n");
	expect_bad("timesheets", "{'projectId':'P','status':['APPROVED']}", &lax,
	    "/status/0 enum: 'APPROVED' is not one of DRAFT, PENDING, SIGNED, REJECTED\n");
	expect_bad("work-packages", "{'projectId':'P','status':['CANCELLED']}", &lax,
	    "/status/0 enum: 'CANCELLED' is not one of NONE, PLANNED, CONFIRMED, FINISHED, "
	    "CANCELED\n");
	expect_bad("work-packages", "{'projectId':'P','statuses':['DISPATCHED',1]}", &lax,
	    "/statuses/0 enum: 'DISPATCHED' is not one of NONE, PLANNED, CONFIRMED, "
	    "FINISHED, CANCELED\n"
	    "/statuses/1 type: statuses[1] must be a string, not a number\n");
	/* other array filters take any string */
	expect_ok("work-orders", "{'projectId':'P','types':['DONE'],'priorities':['x']}", NULL,
	    "{'projectId':'P','types':['DONE'],'priorities':['x']}");
}

/* ---- unknown members ---- */

static void
test_unknown_members(void **state)
{
	expect_ok("activities", "{'x':{'a':[1,2.50,-0,1e400,true,null,'s']},'projectId':'P',"
	    "'y':null,'z':''}", &lax,
	    "{'x':{'a':[1,2.50,-0,1e400,true,null,'s']},'projectId':'P','y':null,'z':''}");
	expect_bad("activities", "{'x':1,'projectId':'P','y':null}", &strict,
	    "/x unknown_field: unknown field 'x'\n/y unknown_field: unknown field 'y'\n");
	/* members of another kind are unknown here */
	expect_bad("work-order-sequences", "{'projectId':'P','sites':['S-1']}", &strict,
	    "/sites unknown_field: unknown field 'sites'\n");
	expect_ok("work-order-sequences", "{'projectId':'P','sites':['S-1']}", &lax,
	    "{'projectId':'P','sites':['S-1']}");
	/* pointer escaping of odd names */
	expect_bad("activities", "{'projectId':'P','a/b~c':1,'':2}", &strict,
	    "/a~1b~0c unknown_field: unknown field 'a/b~c'\n/ unknown_field: unknown field ''\n");
}

static void
test_near_misses(void **state)
{
	static const struct {
		const char *kind, *name, *hint;
	} t[] = {
		{ "activities", "projectid", "projectId" },
		{ "activities", "PROJECTID", "projectId" },
		{ "activities", "project_id", "projectId" },
		{ "work-orders", "projectIds", "projectId" },
		{ "timesheets", "callbackurl", "callbackUrl" },
		{ "personnel", "callback_url", "callbackUrl" },
		{ "activities", "startdate", "startDate" },
		{ "activities", "statuse", "statuses" },
		{ "activities", "Statuses", "statuses" },
		{ "timesheets", "statuss", "statuses" },
		{ "work-packages", "Status", "status" },
		{ "work-packages", "state", "status" },
		{ "activities", "workPackage", "workPackages" },
		{ "activities", "site", "sites" },
		{ "activity-categories", "activitycategories", "activityCategories" },
		{ "personnel", "email", "emails" },
		{ "timesheets", "datefrom", "dateFrom" },
		{ "timesheets", "date_to", "dateTo" },
		{ "timesheets", "submitedBy", "submittedBy" },
		{ "work-order-sequences", "workOrderSequence", "workOrderSequences" },
		{ "work-orders", "priorites", "priorities" },
		{ "work-packages", "countrys", "countries" },
		{ "work-packages", "assettypes", "assetTypes" },
		{ "work-packages", "changedsince", "changedSince" },
	};
	char body[256], want[256];
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		snprintf(body, sizeof(body), "{'projectId':'P','%s':null}", t[i].name);
		snprintf(want, sizeof(want), "/%s unknown_field: unknown field '%s' (did you "
		    "mean '%s'?)\n", t[i].name, t[i].name, t[i].hint);
		expect_bad(t[i].kind, body, &lax, want);
		expect_bad(t[i].kind, body, &strict, want);
	}
	/* far from every member of the kind: kept when lenient */
	expect_ok("personnel", "{'projectId':'P','startdate':'x','statuse':1}", &lax,
	    "{'projectId':'P','startdate':'x','statuse':1}");
}

/* ---- several problems at once ---- */

static void
test_all_problems_collected(void **state)
{
	expect_bad("activities",
	    "{'projectID':'','callbackURL':'ftp://x','startdate':'2024-01-01T00:00:00Z',"
	    "'statuses':['PLANNED','DONE'],'endDate':'2024-13-01','sites':'S-1',"
	    "'workOrders':['WO-1',2],'extra':true,'changedSince':5}", &strict,
	    "/projectID empty: projectID must not be empty\n"
	    "/callbackURL url: 'ftp://x' is not an absolute http:// or https:// URL with a "
	    "host\n"
	    "/startdate unknown_field: unknown field 'startdate' (did you mean 'startDate'?)\n"
	    "/statuses/1 enum: 'DONE' is not one of PLANNED, DISPATCHED, COMPLETED\n"
	    "/endDate date: '2024-13-01' is not an ISO 8601 UTC timestamp (e.g. "
	    "2024-01-31T00:00:00Z)\n"
	    "/sites type: sites must be an array of strings, not a string\n"
	    "/workOrders/1 type: workOrders[1] must be a string, not a number\n"
	    "/extra unknown_field: unknown field 'extra'\n"
	    "/changedSince type: changedSince must be a string (an ISO 8601 UTC timestamp, "
	    "e.g. 2024-01-31T00:00:00Z), not a number\n");
	expect_bad("work-packages", "{'status':['DONE'],'statuses':['NONE'],'countries':[1]}",
	    &lax,
	    "/status/0 enum: 'DONE' is not one of NONE, PLANNED, CONFIRMED, FINISHED, "
	    "CANCELED\n"
	    "/statuses duplicate: both 'status' and 'statuses' given; send one\n"
	    "/countries/0 type: countries[0] must be a string, not a number\n"
	    "/projectId required: projectId is required\n");
}

/* ---- garbage ---- */

static void
test_not_an_object(void **state)
{
	struct res r;

	expect_bad("activities", "[{'projectId':'P'}]", &lax,
	    " type: body must be a JSON object, not an array\n");
	expect_bad("activities", "'projectId'", &lax,
	    " type: body must be a JSON object, not a string\n");
	expect_bad("activities", "42", &lax, " type: body must be a JSON object, not a number\n");
	expect_bad("activities", "null", &lax, " type: body must be a JSON object, not null\n");
	run(&r, "activities", "{'projectId':'P',}", &lax);
	assert_int_equal(r.rc, -1);
	assert_true(strncmp(r.list, " json: invalid JSON: ", 21) == 0);
	assert_ptr_equal(strchr(r.list, '\n'), r.list + strlen(r.list) - 1);
	run(&r, "activities", "", &lax);
	assert_true(strncmp(r.list, " json: invalid JSON", 19) == 0);
	run(&r, "activities", "{'projectId':'P'} {}", &lax);
	assert_true(strncmp(r.list, " json: invalid JSON", 19) == 0);
	run_raw(&r, "activities", NULL, 0, &lax);
	assert_true(strncmp(r.list, " json: invalid JSON", 19) == 0);
	run_raw(&r, "activities", "{\"projectId\":\"P\0\"}", 18, &lax);
	assert_string_equal(r.list, " json: body contains a NUL byte\n");
	/* invalid UTF-8 inside a string */
	run(&r, "activities", "{'projectId':'\xff'}", &lax);
	assert_true(strncmp(r.list, " json: invalid JSON", 19) == 0);
	/* a length shorter than the buffer is honoured */
	run_raw(&r, "activities", "{\"projectId\":\"P\"}garbage", 17, &lax);
	assert_int_equal(r.rc, 0);
	assert_string_equal(r.out, "{\"projectId\":\"P\"}");
	free(r.out);
}

static void
test_deep_nesting(void **state)
{
	size_t n = 100000, i;
	char *b = malloc(2 * n + 64), *o = b;
	struct res r;

	o += sprintf(o, "{\"projectId\":\"P\",\"x\":");
	for (i = 0; i < n; i++)
		*o++ = '[';
	for (i = 0; i < n; i++)
		*o++ = ']';
	*o++ = '}';
	run_raw(&r, "activities", b, (size_t)(o - b), &lax);
	assert_string_equal(r.list, " json: invalid JSON: nested deeper than 64 levels\n");
	/* 63 levels inside the body is the most there is room for */
	o = b + sprintf(b, "{\"projectId\":\"P\",\"x\":");
	for (i = 0; i < 63; i++)
		*o++ = '[';
	for (i = 0; i < 63; i++)
		*o++ = ']';
	*o++ = '}';
	run_raw(&r, "activities", b, (size_t)(o - b), &lax);
	assert_int_equal(r.rc, 0);
	assert_int_equal(r.outlen, (size_t)(o - b));
	assert_memory_equal(r.out, b, r.outlen);
	free(r.out);
	free(b);
}

static char *
repeat(const char *prefix, const char *unit, size_t n, const char *suffix)
{
	size_t pl = strlen(prefix), ul = strlen(unit), sl = strlen(suffix), i;
	char *b = malloc(pl + ul * n + sl + 1), *o = b;

	memcpy(o, prefix, pl);
	o += pl;
	for (i = 0; i < n; i++, o += ul)
		memcpy(o, unit, ul);
	memcpy(o, suffix, sl + 1);
	return b;
}

static void
test_huge_values(void **state)
{
	struct res r;
	char *b, want[256];

	/* a megabyte of project id is the vendor's business */
	b = repeat("{\"projectId\":\"", "P", 1 << 20, "\"}");
	run_raw(&r, "work-orders", b, strlen(b), &lax);
	assert_int_equal(r.rc, 0);
	assert_string_equal(r.out, b);
	free(r.out);
	free(b);
	/* echoed values are clipped, never in the middle of a UTF-8 sequence */
	b = repeat("{\"projectId\":\"P\",\"startDate\":\"x", "\xc3\xa9", 1 << 19, "\"}");
	run_raw(&r, "activities", b, strlen(b), &lax);
	free(b);
	b = repeat("/startDate date: 'x", "\xc3\xa9", 31,
	    "...' is not an ISO 8601 UTC timestamp (e.g. 2024-01-31T00:00:00Z)\n");
	assert_string_equal(r.list, b);
	free(b);
	/* a long unknown name: full pointer, clipped message */
	b = repeat("{\"projectId\":\"P\",\"", "k", 3000, "\":1}");
	run_raw(&r, "activities", b, strlen(b), &strict);
	free(b);
	assert_int_equal(r.rc, -1);
	b = repeat("/", "k", 3000, " unknown_field: unknown field '");
	assert_true(strncmp(r.list, b, strlen(b)) == 0);
	snprintf(want, sizeof(want), "%.64s...'\n", r.list + 1);
	assert_string_equal(r.list + strlen(b), want);
	free(b);
}

static void
test_large_arrays(void **state)
{
	const char *want = "/names/0 type: names[0] must be a string, not a number\n"
	    "/names/1 type: names[1] must be a string, not a number\n";
	struct res r;
	char *b;

	/*
	 * Thousands, not millions: yajl's tree grows arrays one element per
	 * realloc, which ASan turns into a copy each time.
	 */
	b = repeat("{\"projectId\":\"P\",\"statuses\":[", "\"PLANNED\",", 5000,
	    "\"COMPLETED\"]}");
	run_raw(&r, "activities", b, strlen(b), &lax);
	assert_int_equal(r.rc, 0);
	assert_string_equal(r.out, b);
	free(r.out);
	free(b);
	/* every bad element counted, the list capped */
	b = repeat("{\"projectId\":\"P\",\"names\":[", "1,", 5000, "2]}");
	run_raw(&r, "work-orders", b, strlen(b), &lax);
	assert_int_equal(r.rc, -1);
	assert_int_equal(r.total, 5001);
	assert_true(strncmp(r.list, want, strlen(want)) == 0);
	free(b);
}

/* ---- the problem list ---- */

static void
test_problem_list_shared(void **state)
{
	struct tg_problems p = { 0 };
	char *out;
	size_t len;

	/* problems from an earlier check do not fail this one */
	tg_problems_add(&p, "/x", "other", "earlier");
	assert_int_equal(tg_export_check("personnel", "{\"projectId\":\"P\"}", 17, NULL, &out,
	    &len, &p), 0);
	assert_string_equal(out, "{\"projectId\":\"P\"}");
	free(out);
	assert_int_equal(p.n, 1);
	assert_int_equal(tg_export_check("personnel", "{}", 2, NULL, &out, &len, &p), -1);
	assert_null(out);
	assert_int_equal(p.n, 2);
	assert_string_equal(p.v[1].path, "/projectId");
	assert_string_equal(p.v[1].code, "required");
	/* a small cap keeps the first problems, counts them all */
	tg_problems_cleanup(&p);
	p.max = 2;
	assert_int_equal(tg_export_check("work-orders", "{\"names\":[1,2,3]}", 17, NULL, &out,
	    &len, &p), -1);
	assert_int_equal(p.n, 2);
	assert_int_equal(p.total, 4);
	assert_string_equal(p.v[1].path, "/names/1");
	tg_problems_cleanup(&p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_kinds_known),
		cmocka_unit_test(test_unknown_kind),
		cmocka_unit_test(test_kind_hint),
		cmocka_unit_test(test_valid_bodies),
		cmocka_unit_test(test_common_aliases),
		cmocka_unit_test(test_status_aliases),
		cmocka_unit_test(test_duplicates),
		cmocka_unit_test(test_project_id),
		cmocka_unit_test(test_callback_url),
		cmocka_unit_test(test_dates),
		cmocka_unit_test(test_arrays),
		cmocka_unit_test(test_enums),
		cmocka_unit_test(test_unknown_members),
		cmocka_unit_test(test_near_misses),
		cmocka_unit_test(test_all_problems_collected),
		cmocka_unit_test(test_not_an_object),
		cmocka_unit_test(test_deep_nesting),
		cmocka_unit_test(test_huge_values),
		cmocka_unit_test(test_large_arrays),
		cmocka_unit_test(test_problem_list_shared),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
