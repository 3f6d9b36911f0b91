/*
 * test_sweep.c - sweeps: the request parser with every problem at once,
 * building the variants' cases (restricted merge patch and case rules,
 * all problems of all variants before anything is returned), and the
 * side-by-side summaries: column order, JSON, and CSV with RFC 4180
 * quoting. Garbage never crashes. The variant queue is the state seam's
 * (test_state.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include "tidegate/json.h"
#include "tidegate/registry.h"
#include "gen_tree.h"
#include "harness.h"

#define T0	1700000000000LL
#define SEC	1000LL
#define DAY	(86400LL * 1000)

static const char OM[] =
    "{'caseId': 'CASE-OM-T', 'name': 'Test O&M', 'currency': 'EUR',"
    " 'vesselList': [{'id': 'V-CTV-1', 'type': 'CTV', 'quantity': 2, 'dayRate': 3800}],"
    " 'personnelList': [{'id': 'P-WTG', 'role': 'WTG_TECHNICIAN', 'quantity': 12,"
    "  'dayRate': 620}],"
    " 'windFarms': [{'id': 'WF-NR', 'name': 'North Reef', 'infrastructureList': ["
    "  {'id': 'NR-WTG-01', 'type': 'WTG', 'fixable': ["
    "   {'id': 'NR-WTG-01-CM', 'fixableType': 'CORRECTIVE_MAINTENANCE',"
    "    'failureRatePerYear': 5}]},"
    "  {'id': 'NR-WTG-02', 'type': 'WTG', 'fixable': ["
    "   {'id': 'NR-WTG-02-CM', 'fixableType': 'CORRECTIVE_MAINTENANCE',"
    "    'failureRatePerYear': 4}]}]}]}";

static char *con_types[] = { "INSTALLATION_TASK", "COMMISSIONING_TASK" };
static char *om_types[] = { "CORRECTIVE_MAINTENANCE", "PREVENTIVE_MAINTENANCE",
	"SCHEDULED_SERVICE", "INSPECTION" };
static const struct tg_case_rules kinds = {
	{ con_types, 2 }, { om_types, 4 }, { NULL, 0 }, 0,
};

/* ---- helpers ---- */

/* Parse a request written with single quotes; expect these problems. */
static int
request(const char *src, struct tg_sweep_request *req, size_t max, const char *want)
{
	struct tg_problems p = { 0 };
	char *s = th_quotes(src), *got;
	int rc;

	rc = tg_sweep_request_parse(s, strlen(s), max, req, &p);
	got = th_problem_list(&p);
	if (strcmp(got, want) != 0)
		fail_msg("request %s\ngot:\n%swant:\n%s", src, got, want);
	assert_int_equal(rc, want[0] == '\0' ? 0 : -1);
	free(got);
	free(s);
	tg_problems_cleanup(&p);
	return rc;
}

static void
test_request_ok(void **state)
{
	struct tg_sweep_request req;

	request("{'baseCaseId': 'CASE-OM-1', 'concurrency': 2,"
	    " 'callbackUrl': 'https://hooks.example/s',"
	    " 'variants': [{'name': 'base', 'patch': {}},"
	    "  {'name': 'ctv-3', 'patch': {'vesselList': []}}]}", &req, 0, "");
	assert_string_equal(req.base_case_id, "CASE-OM-1");
	assert_string_equal(req.callback_url, "https://hooks.example/s");
	assert_int_equal(req.concurrency, 2);
	assert_int_equal(req.n, 2);
	assert_string_equal(req.names[1], "ctv-3");
	assert_true(YAJL_IS_OBJECT(req.patches[1]));
	tg_sweep_request_cleanup(&req);
	/* Optional members may be null or absent; "" is no callback. */
	request("{'baseCaseId': 'X', 'concurrency': null, 'callbackUrl': '',"
	    " 'variants': [{'name': '0.v_1-a', 'patch': null}]}", &req, 1, "");
	assert_null(req.callback_url);
	assert_int_equal(req.concurrency, 0);
	tg_sweep_request_cleanup(&req);
}

static void
test_request_problems(void **state)
{
	struct tg_sweep_request req;
	char name[66], *body;

	request("{'baseCaseId': 3, 'concurency': 2, 'callbackUrl': 5, 'variants': ["
	    " {'name': 'a b'}, 7, {'name': 'x', 'patch': {}, 'extra': 1},"
	    " {'name': 'x', 'patch': {}}], 'variants': []}", &req, 0,
	    "/variants duplicate\n"
	    "/concurency unknown_field\n"
	    "/baseCaseId type\n"
	    "/callbackUrl type\n"
	    "/variants/0/name name\n"
	    "/variants/0/patch required\n"
	    "/variants/1 type\n"
	    "/variants/2/extra unknown_field\n"
	    "/variants/3/name duplicate\n");
	assert_null(req.tree);
	request("{", &req, 0, " json\n");
	request("[]", &req, 0, " type\n");
	request("{}", &req, 0, "/baseCaseId required\n/variants required\n");
	request("{'baseCaseId': '', 'variants': []}", &req, 0,
	    "/baseCaseId type\n/variants range\n");
	request("{'baseCaseId': 'B', 'variants': {}}", &req, 0, "/variants type\n");
	request("{'baseCaseId': 'B', 'variants': [{'name': 'a', 'patch': {}},"
	    " {'name': 'b', 'patch': {}}, {'name': 'c', 'patch': {}}]}", &req, 2,
	    "/variants range\n");
	request("{'baseCaseId': 'B', 'concurrency': 0, 'variants': [{'name': 'a', 'patch': {}}]}",
	    &req, 0, "/concurrency range\n");
	request("{'baseCaseId': 'B', 'concurrency': 1.5, 'variants': [{'name': '-a',"
	    " 'patch': {}}]}", &req, 0, "/concurrency range\n/variants/0/name name\n");
	memset(name, 'a', 65);
	name[65] = '\0';
	body = tg_xasprintf("{'baseCaseId': 'B', 'concurrency': 65, 'variants': [{'name': '%s',"
	    " 'patch': {}}]}", name);
	request(body, &req, 0, "/concurrency range\n/variants/0/name name\n");
	free(body);
	name[64] = '\0';
	body = tg_xasprintf("{'baseCaseId': 'B', 'concurrency': 64, 'variants': [{'name': '%s',"
	    " 'patch': {}}]}", name);
	request(body, &req, 0, "");
	tg_sweep_request_cleanup(&req);
	free(body);
}

/* ---- building variants ---- */

static void
test_build_ok(void **state)
{
	struct tg_sweep_request req;
	struct tg_sweep_variant_new *v;
	struct tg_problems p = { 0 };
	yajl_val base = th_parse_quoted(OM), c;
	char sha[2][TG_RUNS_SHA_LEN];

	request("{'baseCaseId': 'CASE-OM-T', 'variants': [{'name': 'base', 'patch': {}},"
	    " {'name': 'ctv-3', 'patch': {'vesselList': [{'id': 'V-CTV-1', 'type': 'CTV',"
	    "  'quantity': 3, 'dayRate': 3800}]}},"
	    " {'name': 'rate-2', 'patch': {'windFarms': [{'infrastructureList': [{},"
	    "  {'fixable': [{'id': 'NR-WTG-02-CM', 'fixableType': 'CORRECTIVE_MAINTENANCE',"
	    "   'failureRatePerYear': 2}]}]}]}}]}", &req, 0, "");
	assert_int_equal(tg_sweep_build(&req, base, &kinds, &v, &p), 0);
	assert_int_equal(p.total, 0);
	assert_string_equal(v[1].name, "ctv-3");
	c = tg_json_parse(v[1].body, v[1].len, NULL);
	assert_int_equal(YAJL_GET_INTEGER(tg_json_ptr(c, "/vesselList/0/quantity")), 3);
	assert_string_equal(tg_json_get_str(c, "caseId"), "CASE-OM-T");
	yajl_tree_free(c);
	c = tg_json_parse(v[2].body, v[2].len, NULL);
	assert_int_equal(YAJL_GET_INTEGER(tg_json_ptr(c,
	    "/windFarms/0/infrastructureList/1/fixable/0/failureRatePerYear")), 2);
	yajl_tree_free(c);
	tg_runs_case_digest(v[0].body, v[0].len, sha[0]);
	tg_runs_case_digest(v[1].body, v[1].len, sha[1]);
	assert_string_not_equal(sha[0], sha[1]);
	tg_sweep_built_free(v, req.n);
	tg_sweep_request_cleanup(&req);
	yajl_tree_free(base);
}

static void
test_build_all_problems(void **state)
{
	struct tg_sweep_request req;
	struct tg_sweep_variant_new *v = (void *)1;
	struct tg_problems p = { 0 };
	yajl_val base = th_parse_quoted(OM);
	char *got;

	request("{'baseCaseId': 'CASE-OM-T', 'variants': ["
	    " {'name': 'renamed', 'patch': {'name': 'x', 'windFarms': [{}, {}]}},"
	    " {'name': 'typo', 'patch': {'windFarms': [{'infrastructureList': [{'fixable': ["
	    "  {'id': 'NR-WTG-01-CM', 'fixableType': 'CORECTIVE_MAINTENANCE',"
	    "   'failureRatePerYear': 5}]}, {}]}]}},"
	    " {'name': 'fine', 'patch': {}},"
	    " {'name': 'no-vessels', 'patch': {'vesselList': null}}]}", &req, 0, "");
	assert_int_equal(tg_sweep_build(&req, base, &kinds, &v, &p), -1);
	assert_null(v);
	got = th_problem_list(&p);
	assert_string_equal(got,
	    "/variants/0/patch/name not_editable\n"
	    "/variants/0/patch/windFarms not_editable\n"
	    "/variants/1/case/windFarms/0/infrastructureList/0/fixable/0/fixableType "
	    "unknown_type\n"
	    "/variants/3/case/vesselList structure\n");
	assert_non_null(strstr(p.v[2].message, "did you mean CORRECTIVE_MAINTENANCE"));
	free(got);
	tg_problems_cleanup(&p);
	/* A base that is no case. */
	yajl_tree_free(base);
	base = th_parse_quoted("[]");
	assert_int_equal(tg_sweep_build(&req, base, &kinds, &v, &p), -1);
	assert_string_equal(p.v[0].path, "/baseCaseId");
	tg_problems_cleanup(&p);
	tg_sweep_request_cleanup(&req);
	yajl_tree_free(base);
}

/* ---- the queue in the registry ---- */

static void
variant(struct tg_sweep_variant *v, const char *name, enum tg_variant_state st,
    enum tg_run_status rs, const char *figures)
{
	memset(v, 0, sizeof(*v));
	v->name = tg_xstrdup(name);
	v->state = st;
	v->run_status = rs;
	v->figures = figures != NULL ? th_parse_quoted(figures) : NULL;
	if (st == TG_VARIANT_SUBMITTED)
		v->simulation_id = tg_xasprintf("sim-%s", name);
}

static char *
csv(const struct tg_sweep_variant *v, size_t n)
{
	struct evbuffer *b = evbuffer_new();
	size_t len = evbuffer_get_length(b);
	char *s;

	tg_sweep_csv(b, v, n);
	len = evbuffer_get_length(b);
	s = tg_xstrndup((const char *)evbuffer_pullup(b, -1), len);
	evbuffer_free(b);
	return s;
}

static void
test_columns_and_csv(void **state)
{
	struct tg_sweep_variant v[4];
	const char **cols;
	size_t nc;
	char *got;

	variant(&v[0], "base", TG_VARIANT_SUBMITTED, TG_RUN_COMPLETED,
	    "{'zeta': 1, 'totalCost': 7266549, 'availability': 0.956643,"
	    " 'caseType': 'O&M', 'vesselUtilisation': {'CTV': 0.5}, 'downtimeHours': 2278.9}");
	variant(&v[1], "con, \"fast\"", TG_VARIANT_SUBMITTED, TG_RUN_COMPLETED,
	    "{'completionDays': 142.12, 'totalCost': 1e7, 'alpha': -0.0,"
	    " 'simulationPeriodDays': 365, 'vesselCost': 12}");
	variant(&v[2], "line\r\nbreak", TG_VARIANT_PENDING, TG_RUN_IN_PROGRESS, NULL);
	variant(&v[3], "odd", TG_VARIANT_SUBMITTED, TG_RUN_FAILED, "[1, 2]");
	tg_sweep_columns(v, 4, &cols, &nc);
	assert_int_equal(nc, 8);
	assert_string_equal(cols[0], "availability");
	assert_string_equal(cols[1], "downtimeHours");
	assert_string_equal(cols[2], "completionDays");
	assert_string_equal(cols[3], "totalCost");
	assert_string_equal(cols[4], "vesselCost");
	assert_string_equal(cols[5], "alpha");
	assert_string_equal(cols[6], "simulationPeriodDays");
	assert_string_equal(cols[7], "zeta");
	free(cols);
	got = csv(v, 4);
	assert_string_equal(got,
	    "variant,status,availability,downtimeHours,completionDays,totalCost,vesselCost,"
	    "alpha,simulationPeriodDays,zeta\r\n"
	    "base,COMPLETED,0.956643,2278.9,,7266549,,,,1\r\n"
	    "\"con, \"\"fast\"\"\",COMPLETED,,,142.12,1e7,12,-0.0,365,\r\n"
	    "\"line\r\nbreak\",PENDING,,,,,,,,\r\n"
	    "odd,FAILED,,,,,,,,\r\n");
	free(got);
	got = csv(v, 0);
	assert_string_equal(got, "variant,status\r\n");
	free(got);
	for (nc = 0; nc < 4; nc++) {
		free(v[nc].name);
		free(v[nc].simulation_id);
		yajl_tree_free(v[nc].figures);
	}
}

static void
test_summary_json(void **state)
{
	struct tg_sweep s = {
		.id = "swp_1", .base_case_id = "CASE-OM-1", .concurrency = 2,
		.state = TG_SWEEP_RUNNING, .created_at = T0, .nvariants = 3,
		.callback_url = "https://h.example/cb?secret=1",
	};
	struct tg_sweep_variant v[3];
	const unsigned char *buf;
	yajl_gen g = tg_json_gen_new();
	yajl_val t, f;
	size_t len, i;

	variant(&v[0], "base", TG_VARIANT_SUBMITTED, TG_RUN_COMPLETED,
	    "{'availability': 0.95, 'totalCost': 100, 'caseType': 'O&M'}");
	variant(&v[1], "more", TG_VARIANT_SUBMITTED, TG_RUN_COMPLETED,
	    "{'availability': 0.97, 'totalCost': 120}");
	variant(&v[2], "bad", TG_VARIANT_REJECTED, TG_RUN_IN_PROGRESS, NULL);
	v[2].error = tg_xstrdup("400: caseId unknown");
	tg_sweep_json(g, &s, v, 3);
	yajl_gen_get_buf(g, &buf, &len);
	t = tg_json_parse((const char *)buf, len, NULL);
	assert_non_null(t);
	assert_string_equal(tg_json_get_str(t, "sweepId"), "swp_1");
	assert_string_equal(tg_json_get_str(t, "state"), "running");
	assert_string_equal(tg_json_get_str(t, "callbackUrl"), "https://h.example/cb?…");
	assert_true(YAJL_IS_NULL(tg_json_get(t, "doneAt")));
	assert_int_equal(YAJL_GET_INTEGER(tg_json_ptr(t, "/counts/completed")), 2);
	assert_int_equal(YAJL_GET_INTEGER(tg_json_ptr(t, "/counts/rejected")), 1);
	assert_int_equal(YAJL_GET_INTEGER(tg_json_ptr(t, "/counts/pending")), 0);
	assert_string_equal(tg_json_ptr(t, "/columns/0")->u.string, "availability");
	assert_string_equal(tg_json_ptr(t, "/columns/1")->u.string, "totalCost");
	assert_null(tg_json_ptr(t, "/columns/2"));
	f = tg_json_ptr(t, "/variants/1/figures");
	assert_string_equal(tg_json_get(f, "availability")->u.number.r, "0.97");
	assert_string_equal(tg_json_ptr(t, "/variants/1/simulationId")->u.string, "sim-more");
	assert_string_equal(tg_json_ptr(t, "/variants/2/status")->u.string, "REJECTED");
	assert_string_equal(tg_json_ptr(t, "/variants/2/error")->u.string,
	    "400: caseId unknown");
	assert_int_equal(tg_json_ptr(t, "/variants/2/figures")->u.object.len, 0);
	yajl_tree_free(t);
	yajl_gen_free(g);
	/* The brief of a sweep list: the record and its number of variants. */
	g = tg_json_gen_new();
	tg_sweep_brief_json(g, &s);
	t = gen_tree(g);
	assert_non_null(t);
	assert_string_equal(tg_json_get_str(t, "sweepId"), "swp_1");
	assert_string_equal(tg_json_get_str(t, "state"), "running");
	assert_string_equal(tg_json_get_str(t, "createdAt"), "2023-11-14T22:13:20Z");
	assert_string_equal(tg_json_get_str(t, "callbackUrl"), "https://h.example/cb?…");
	assert_int_equal(YAJL_GET_INTEGER(tg_json_get(t, "variants")), 3);
	assert_null(tg_json_get(t, "counts"));
	yajl_tree_free(t);
	for (i = 0; i < 3; i++) {
		free(v[i].name);
		free(v[i].simulation_id);
		free(v[i].error);
		yajl_tree_free(v[i].figures);
	}
}

static void
test_garbage(void **state)
{
	static const char *const bodies[] = {
		"", "null", "1", "\"x\"", "[{}]", "{\"variants\": [null, [], {}, \"\"]}",
		"{\"baseCaseId\": {}, \"variants\": [{\"name\": null, \"patch\": 1}]}",
		"{\"baseCaseId\": \"B\", \"variants\": [{\"name\": \"\\u00e9\", \"patch\": []}]}",
		"{\"baseCaseId\": \"B\", \"variants\": [{\"name\": \"a\", \"patch\": []}]}",
		"{\"baseCaseId\": \"B\", \"variants\": [{\"name\": \"a\", \"patch\":"
		" {\"windFarms\": [[], 1, null]}}]}",
		"{\"baseCaseId\": \"B\", \"variants\": [{\"name\": \"a\", \"patch\": {}}]}",
	};
	yajl_val base = th_parse_quoted(OM);
	struct tg_sweep_variant_new *v;
	struct tg_sweep_request req;
	struct tg_problems p = { 0 };
	size_t i;

	for (i = 0; i < TG_NELEM(bodies); i++) {
		if (tg_sweep_request_parse(bodies[i], strlen(bodies[i]), 0, &req, &p) == 0) {
			if (tg_sweep_build(&req, base, &kinds, &v, &p) == 0)
				tg_sweep_built_free(v, req.n);
			tg_sweep_build(&req, NULL, &kinds, &v, &p);
			tg_sweep_request_cleanup(&req);
		}
		assert_true(p.n <= p.total);
		tg_problems_cleanup(&p);
	}
	tg_sweep_request_cleanup(NULL);
	tg_sweep_built_free(NULL, 0);
	tg_sweep_variants_free(NULL, 0);
	tg_sweep_claim_cleanup(NULL);
	tg_sweep_cleanup(NULL);
	yajl_tree_free(base);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_request_ok),
		cmocka_unit_test(test_request_problems),
		cmocka_unit_test(test_build_ok),
		cmocka_unit_test(test_build_all_problems),
		cmocka_unit_test(test_columns_and_csv),
		cmocka_unit_test(test_summary_json),
		cmocka_unit_test(test_garbage),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
