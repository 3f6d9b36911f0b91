/*
 * test_merge_patch.c - JSON Merge Patch (src/sim/merge_patch.c): every
 * example of RFC 7396 (section 3 and appendix A), inputs left unchanged,
 * and the restricted form of sweep variants: what may be patched, how
 * windFarms and infrastructureList are addressed element by element, and
 * each breach reported with its exact JSON Pointer. Garbage never crashes.
 *
 * JSON is written with single quotes for legibility (turned into double
 * quotes before parsing). Results are compared as JSON values: member
 * order does not count.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tidegate/json.h"
#include "tidegate/registry.h"
#include "harness.h"

static const char BASE[] =
    "{'caseId': 'CASE-OM-T', 'name': 'Two farms', 'currency': 'EUR',"
    " 'vesselList': [{'id': 'V-CTV-1', 'type': 'CTV', 'quantity': 2, 'dayRate': 3800}],"
    " 'personnelList': [{'id': 'P-WTG', 'role': 'WTG_TECHNICIAN', 'quantity': 12,"
    "  'dayRate': 620}],"
    " 'windFarms': ["
    "  {'id': 'WF-A', 'name': 'A', 'infrastructureList': ["
    "   {'id': 'A-01', 'type': 'WTG', 'fixable': [{'id': 'A-01-CM',"
    "    'fixableType': 'CORRECTIVE_MAINTENANCE', 'failureRatePerYear': 5}]},"
    "   {'id': 'A-02', 'type': 'WTG', 'fixable': [{'id': 'A-02-CM',"
    "    'fixableType': 'CORRECTIVE_MAINTENANCE', 'failureRatePerYear': 4}]}]},"
    "  {'id': 'WF-B', 'name': 'B', 'infrastructureList': ["
    "   {'id': 'B-01', 'type': 'OSS', 'fixable': []}]}]}";

/* ---- helpers ---- */

static char *
dump(yajl_val v)
{
	yajl_gen g = tg_json_gen_new();
	const unsigned char *buf;
	size_t len;
	char *s;

	tg_json_gen_val(g, v);
	yajl_gen_get_buf(g, &buf, &len);
	s = tg_xstrndup((const char *)buf, len);
	yajl_gen_free(g);
	return s;
}

static int json_equal(yajl_val, yajl_val);

static int
object_equal(yajl_val a, yajl_val b)
{
	size_t i;

	if (a->u.object.len != b->u.object.len)
		return 0;
	for (i = 0; i < a->u.object.len; i++) {
		yajl_val bv = tg_json_get(b, a->u.object.keys[i]);

		if (bv == NULL || !json_equal(a->u.object.values[i], bv))
			return 0;
	}
	return 1;
}

static int
json_equal(yajl_val a, yajl_val b)
{
	size_t i;

	if (a->type != b->type)
		return 0;
	switch (a->type) {
	case yajl_t_string:
		return strcmp(a->u.string, b->u.string) == 0;
	case yajl_t_number:
		return strcmp(a->u.number.r, b->u.number.r) == 0;
	case yajl_t_object:
		return object_equal(a, b);
	case yajl_t_array:
		if (a->u.array.len != b->u.array.len)
			return 0;
		for (i = 0; i < a->u.array.len; i++)
			if (!json_equal(a->u.array.values[i], b->u.array.values[i]))
				return 0;
		return 1;
	default:
		return 1;
	}
}

static void
assert_json(yajl_val got, const char *want_src)
{
	yajl_val want = th_parse_quoted(want_src);
	char *g, *w;

	if (!json_equal(got, want)) {
		g = dump(got);
		w = dump(want);
		fail_msg("got %s\nwant %s", g, w);
	}
	yajl_tree_free(want);
}

/* Apply patch to BASE restricted; expect these problems ("" for none). */
static void
expect_problems(const char *patch_src, const char *at, const char *want)
{
	yajl_val base = th_parse_quoted(BASE), patch = th_parse_quoted(patch_src), res = (yajl_val)1;
	struct tg_problems p = { 0 };
	char *got;
	int rc;

	rc = tg_merge_patch_apply(base, patch, at, &res, &p);
	got = th_problem_list(&p);
	if (strcmp(got, want) != 0)
		fail_msg("patch %s\ngot:\n%swant:\n%s", patch_src, got, want);
	assert_int_equal(rc, want[0] == '\0' ? 0 : -1);
	if (rc != 0)
		assert_null(res);
	free(got);
	yajl_tree_free(res);
	tg_problems_cleanup(&p);
	yajl_tree_free(base);
	yajl_tree_free(patch);
}

/* ---- RFC 7396 ---- */

static void
test_rfc_appendix_a(void **state)
{
	static const char *const cases[][3] = {
		{ "{'a':'b'}", "{'a':'c'}", "{'a':'c'}" },
		{ "{'a':'b'}", "{'b':'c'}", "{'a':'b','b':'c'}" },
		{ "{'a':'b'}", "{'a':null}", "{}" },
		{ "{'a':'b','b':'c'}", "{'a':null}", "{'b':'c'}" },
		{ "{'a':['b']}", "{'a':'c'}", "{'a':'c'}" },
		{ "{'a':'c'}", "{'a':['b']}", "{'a':['b']}" },
		{ "{'a':{'b':'c'}}", "{'a':{'b':'d','c':null}}", "{'a':{'b':'d'}}" },
		{ "{'a':[{'b':'c'}]}", "{'a':[1]}", "{'a':[1]}" },
		{ "['a','b']", "['c','d']", "['c','d']" },
		{ "{'a':'b'}", "['c']", "['c']" },
		{ "{'a':'foo'}", "null", "null" },
		{ "{'a':'foo'}", "'bar'", "'bar'" },
		{ "{'e':null}", "{'a':1}", "{'e':null,'a':1}" },
		{ "[1,2]", "{'a':'b','c':null}", "{'a':'b'}" },
		{ "{}", "{'a':{'bb':{'ccc':null}}}", "{'a':{'bb':{}}}" },
	};
	yajl_val t, p, r;
	size_t i;

	for (i = 0; i < TG_NELEM(cases); i++) {
		t = th_parse_quoted(cases[i][0]);
		p = th_parse_quoted(cases[i][1]);
		r = tg_merge_patch_rfc7396(t, p);
		assert_json(r, cases[i][2]);
		yajl_tree_free(r);
		yajl_tree_free(t);
		yajl_tree_free(p);
	}
}

static void
test_rfc_section3_example(void **state)
{
	yajl_val t = th_parse_quoted("{'title': 'Goodbye!', 'author': {'givenName': 'John',"
	    " 'familyName': 'Doe'}, 'tags': ['example', 'sample'],"
	    " 'content': 'This will be unchanged'}");
	yajl_val p = th_parse_quoted("{'title': 'Hello!', 'phoneNumber': '+01-123-456-7890',"
	    " 'author': {'familyName': null}, 'tags': ['example']}");
	yajl_val r = tg_merge_patch_rfc7396(t, p);
	char *s = dump(r);

	assert_json(r, "{'title': 'Hello!', 'author': {'givenName': 'John'},"
	    " 'tags': ['example'], 'content': 'This will be unchanged',"
	    " 'phoneNumber': '+01-123-456-7890'}");
	/* Members keep the target's order; new ones follow. */
	assert_string_equal(s, "{\"title\":\"Hello!\",\"author\":{\"givenName\":\"John\"},"
	    "\"tags\":[\"example\"],\"content\":\"This will be unchanged\","
	    "\"phoneNumber\":\"+01-123-456-7890\"}");
	free(s);
	yajl_tree_free(r);
	yajl_tree_free(t);
	yajl_tree_free(p);
}

static void
test_rfc_edges(void **state)
{
	yajl_val t = th_parse_quoted("{'a': 1, 'a': 2, 'n': 1.50}"), p, r;

	/* No target: the patch applies to nothing. */
	p = th_parse_quoted("{'x': {'y': null, 'z': true}}");
	r = tg_merge_patch_rfc7396(NULL, p);
	assert_json(r, "{'x': {'z': true}}");
	yajl_tree_free(r);
	yajl_tree_free(p);
	/* A name the target gives twice is removed whole; numbers keep their digits. */
	p = th_parse_quoted("{'a': null}");
	r = tg_merge_patch_rfc7396(t, p);
	assert_json(r, "{'n': 1.50}");
	yajl_tree_free(r);
	yajl_tree_free(p);
	/* A name the patch gives twice applies in order. */
	p = th_parse_quoted("{'b': 1, 'b': {'c': 2}}");
	r = tg_merge_patch_rfc7396(t, p);
	assert_json(tg_json_get(r, "b"), "{'c': 2}");
	yajl_tree_free(r);
	yajl_tree_free(p);
	yajl_tree_free(t);
}

static void
test_inputs_unchanged(void **state)
{
	yajl_val t = th_parse_quoted(BASE), p = th_parse_quoted("{'vesselList': [], 'personnelList': null,"
	    " 'windFarms': [{'infrastructureList': [{'fixable': null}, {}]}, {}]}"), r, c;
	char *t0 = dump(t), *p0 = dump(p), *t1, *p1;
	struct tg_problems pr = { 0 };

	r = tg_merge_patch_rfc7396(t, p);
	yajl_tree_free(r);
	assert_int_equal(tg_merge_patch_apply(t, p, NULL, &r, &pr), 0);
	yajl_tree_free(r);
	c = tg_merge_patch_copy(t);
	assert_true(json_equal(c, t));
	assert_null(tg_merge_patch_copy(NULL));
	t1 = dump(t);
	p1 = dump(p);
	assert_string_equal(t0, t1);
	assert_string_equal(p0, p1);
	free(t0);
	free(t1);
	free(p0);
	free(p1);
	yajl_tree_free(c);
	yajl_tree_free(t);
	yajl_tree_free(p);
}

/* ---- the restricted form ---- */

static void
test_restricted_lists(void **state)
{
	yajl_val base = th_parse_quoted(BASE), patch, res, want;
	struct tg_problems p = { 0 };

	patch = th_parse_quoted("{'vesselList': [{'id': 'V-CTV-1', 'type': 'CTV', 'quantity': 3,"
	    " 'dayRate': 3800}], 'personnelList': [{'id': 'P-WTG', 'role': 'WTG_TECHNICIAN',"
	    " 'quantity': 14, 'dayRate': 620}]}");
	assert_int_equal(tg_merge_patch_apply(base, patch, NULL, &res, &p), 0);
	assert_int_equal(p.total, 0);
	assert_int_equal(YAJL_GET_INTEGER(tg_json_ptr(res, "/vesselList/0/quantity")), 3);
	assert_int_equal(YAJL_GET_INTEGER(tg_json_ptr(res, "/personnelList/0/quantity")), 14);
	/* Everything else is the base case, untouched. */
	want = tg_merge_patch_copy(base);
	assert_true(json_equal(tg_json_get(res, "windFarms"), tg_json_get(want, "windFarms")));
	assert_string_equal(tg_json_get_str(res, "name"), "Two farms");
	yajl_tree_free(want);
	yajl_tree_free(res);
	yajl_tree_free(patch);
	/* An empty patch is the base case. */
	patch = th_parse_quoted("{}");
	assert_int_equal(tg_merge_patch_apply(base, patch, NULL, &res, &p), 0);
	assert_true(json_equal(res, base));
	yajl_tree_free(res);
	yajl_tree_free(patch);
	yajl_tree_free(base);
}

static void
test_restricted_fixable(void **state)
{
	yajl_val base = th_parse_quoted(BASE), patch, res;
	struct tg_problems p = { 0 };

	patch = th_parse_quoted("{'windFarms': [{'infrastructureList': [{}, {'fixable': [{'id': 'A-02-CM',"
	    " 'fixableType': 'CORRECTIVE_MAINTENANCE', 'failureRatePerYear': 2}]}]},"
	    " {'infrastructureList': [{'fixable': null}]}]}");
	assert_int_equal(tg_merge_patch_apply(base, patch, "/variants/0/patch", &res, &p), 0);
	assert_int_equal(p.total, 0);
	/* The one fixable changed; its neighbours and the farms' other members did not. */
	assert_json(tg_json_ptr(res, "/windFarms/0/infrastructureList/1/fixable"),
	    "[{'id': 'A-02-CM', 'fixableType': 'CORRECTIVE_MAINTENANCE',"
	    " 'failureRatePerYear': 2}]");
	assert_json(tg_json_ptr(res, "/windFarms/0/infrastructureList/0"),
	    "{'id': 'A-01', 'type': 'WTG', 'fixable': [{'id': 'A-01-CM',"
	    " 'fixableType': 'CORRECTIVE_MAINTENANCE', 'failureRatePerYear': 5}]}");
	assert_string_equal(tg_json_get_str(tg_json_ptr(res, "/windFarms/0"), "name"), "A");
	assert_string_equal(tg_json_get_str(tg_json_ptr(res, "/windFarms/0/infrastructureList/1"),
	    "type"), "WTG");
	/* null deletes, as everywhere in a merge patch (the case rules then object). */
	assert_json(tg_json_ptr(res, "/windFarms/1/infrastructureList/0"),
	    "{'id': 'B-01', 'type': 'OSS'}");
	yajl_tree_free(res);
	yajl_tree_free(patch);
	yajl_tree_free(base);
}

static void
test_not_editable_paths(void **state)
{
	expect_problems("{'name': 'x', 'vesselList': [],"
	    " 'windFarms': [{'name': 'y', 'infrastructureList': [{'fixable': [], 'type': 'X'},"
	    " {'id': 'A-9'}]}, {}], 'ports~/x': []}", "/variants/1/patch",
	    "/variants/1/patch/name not_editable\n"
	    "/variants/1/patch/windFarms/0/name not_editable\n"
	    "/variants/1/patch/windFarms/0/infrastructureList/0/type not_editable\n"
	    "/variants/1/patch/windFarms/0/infrastructureList/1/id not_editable\n"
	    "/variants/1/patch/ports~0~1x not_editable\n");
	expect_problems("{'caseId': 'CASE-OM-2'}", NULL, "/caseId not_editable\n");
	/* A name given twice is ambiguous: the second copy is not looked into. */
	expect_problems("{'vesselList': [], 'vesselList': null, 'windFarms': [{}, {}],"
	    " 'windFarms': [{'infrastructureList': [{'fixable': [], 'fixable': null,"
	    " 'x': 1}]}, {'infrastructureList': [{}], 'infrastructureList': []}]}", NULL,
	    "/vesselList duplicate\n/windFarms duplicate\n");
	expect_problems("{'windFarms': [{'infrastructureList': [{'fixable': [], 'fixable': null},"
	    " {}]}, {'infrastructureList': [{}], 'infrastructureList': []}]}", NULL,
	    "/windFarms/0/infrastructureList/0/fixable duplicate\n"
	    "/windFarms/1/infrastructureList duplicate\n");
}

static void
test_wind_farm_shapes(void **state)
{
	/* Replacing or removing the farms, or a wrong length. */
	expect_problems("{'windFarms': null}", "", "/windFarms not_editable\n");
	expect_problems("{'windFarms': {'0': {}}}", "", "/windFarms not_editable\n");
	expect_problems("{'windFarms': [{}]}", "", "/windFarms not_editable\n");
	expect_problems("{'windFarms': [{}, {}, {}]}", "", "/windFarms not_editable\n");
	/* Elements must be object patches. */
	expect_problems("{'windFarms': [1, null]}", "",
	    "/windFarms/0 not_editable\n/windFarms/1 not_editable\n");
	/* The same rules one level down. */
	expect_problems("{'windFarms': [{'infrastructureList': null}, {}]}", "",
	    "/windFarms/0/infrastructureList not_editable\n");
	expect_problems("{'windFarms': [{'infrastructureList': [{}]}, {}]}", "",
	    "/windFarms/0/infrastructureList not_editable\n");
	expect_problems("{'windFarms': [{}, {'infrastructureList': ['x']}]}", "",
	    "/windFarms/1/infrastructureList/0 not_editable\n");
	/* Every problem at once. */
	expect_problems("{'windFarms': [{'infrastructureList': [[], {'fixable': 1, 'x': 2}]},"
	    " {'id': 'B'}], 'weather': {}}", "",
	    "/windFarms/0/infrastructureList/0 not_editable\n"
	    "/windFarms/0/infrastructureList/1/x not_editable\n"
	    "/windFarms/1/id not_editable\n"
	    "/weather not_editable\n");
}

static void
test_patch_not_object(void **state)
{
	expect_problems("[]", "/variants/0/patch", "/variants/0/patch not_editable\n");
	expect_problems("null", NULL, " not_editable\n");
	expect_problems("'vesselList'", NULL, " not_editable\n");
}

static void
test_base_not_case(void **state)
{
	yajl_val base = th_parse_quoted("[1]"), patch = th_parse_quoted("{}"), res;
	struct tg_problems p = { 0 };

	assert_int_equal(tg_merge_patch_apply(base, patch, "/x", &res, &p), -1);
	assert_null(res);
	assert_string_equal(p.v[0].path, "/x");
	tg_problems_cleanup(&p);
	assert_int_equal(tg_merge_patch_apply(NULL, patch, NULL, &res, &p), -1);
	tg_problems_cleanup(&p);
	yajl_tree_free(base);
	/* A base without wind farms cannot have them patched. */
	base = th_parse_quoted("{'windFarms': 3}");
	yajl_tree_free(patch);
	patch = th_parse_quoted("{'windFarms': [{}]}");
	assert_int_equal(tg_merge_patch_apply(base, patch, NULL, &res, &p), -1);
	assert_string_equal(p.v[0].path, "/windFarms");
	assert_non_null(strstr(p.v[0].message, "no windFarms array"));
	tg_problems_cleanup(&p);
	yajl_tree_free(base);
	yajl_tree_free(patch);
}

/* ---- garbage ---- */

static void
test_garbage(void **state)
{
	static const char *const docs[] = {
		"null", "true", "0", "-1.5e300", "''", "[]", "{}", "[[[[[]]]]]",
		"{'windFarms': []}", "{'windFarms': [[]]}", "{'windFarms': [{'infrastructureList': 1}]}",
		"{'windFarms': [{'infrastructureList': [null]}]}",
		"{'windFarms': [{'infrastructureList': [{'fixable': {'a': null}}]}]}",
		"{'vesselList': {'a': {'b': null}}, 'windFarms': [{}]}",
		"{'a': {'a': {'a': {'a': {'a': {'a': null}}}}}}", "{'': null, '~': 1, '/': []}",
		BASE,
	};
	struct tg_problems p = { 0 };
	yajl_val t, q, r;
	size_t i, j;

	for (i = 0; i < TG_NELEM(docs); i++) {
		for (j = 0; j < TG_NELEM(docs); j++) {
			t = th_parse_quoted(docs[i]);
			q = th_parse_quoted(docs[j]);
			r = tg_merge_patch_rfc7396(t, q);
			assert_non_null(r);
			yajl_tree_free(r);
			if (tg_merge_patch_apply(t, q, "/p", &r, &p) == 0)
				assert_non_null(r);
			else
				assert_true(p.total > 0 && r == NULL);
			yajl_tree_free(r);
			tg_problems_cleanup(&p);
			yajl_tree_free(t);
			yajl_tree_free(q);
		}
	}
}

static void
test_deep(void **state)
{
	char buf[8 * TG_JSON_MAX_DEPTH];
	yajl_val t, r;
	size_t i, n = 0;

	/* The deepest tree the parser gives, merged onto itself member by member. */
	for (i = 0; i < TG_JSON_MAX_DEPTH - 1; i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "{\"a\":");
	n += (size_t)snprintf(buf + n, sizeof(buf) - n, "{}");
	for (i = 0; i < TG_JSON_MAX_DEPTH - 1; i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "}");
	t = tg_json_parse(buf, n, NULL);
	assert_non_null(t);
	r = tg_merge_patch_rfc7396(t, t);
	assert_true(json_equal(r, t));
	yajl_tree_free(r);
	yajl_tree_free(t);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_rfc_appendix_a),
		cmocka_unit_test(test_rfc_section3_example),
		cmocka_unit_test(test_rfc_edges),
		cmocka_unit_test(test_inputs_unchanged),
		cmocka_unit_test(test_restricted_lists),
		cmocka_unit_test(test_restricted_fixable),
		cmocka_unit_test(test_not_editable_paths),
		cmocka_unit_test(test_wind_farm_shapes),
		cmocka_unit_test(test_patch_not_object),
		cmocka_unit_test(test_base_not_case),
		cmocka_unit_test(test_garbage),
		cmocka_unit_test(test_deep),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
