/*
 * fuzz_merge_patch.c - libFuzzer target for JSON Merge Patch
 * (src/sim/merge_patch.c): RFC 7396 and the restricted form sweep
 * variants use.
 *
 * The input is two JSON documents, the target (a base case) and the
 * patch, split at the first NUL byte (or in half when there is none).
 * Beyond memory safety it asserts what callers rely on: neither input is
 * changed; applying a merge patch twice gives what applying it once gave;
 * the restricted form fails exactly when it reports problems, every
 * problem names a node of the patch under the given prefix, and a
 * variant that passes leaves every member of the case outside the
 * editable sections as it was. The second document is also read as a
 * sweep request and, when it is one, its variants are built on the
 * target (src/sim/sweep.c): each built case must be JSON.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/json.h"
#include "tidegate/registry.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define AT "/variants/0/patch"

static char *con_types[] = { "INSTALLATION_TASK", "COMMISSIONING_TASK" };
static char *om_types[] = { "CORRECTIVE_MAINTENANCE", "PREVENTIVE_MAINTENANCE",
	"SCHEDULED_SERVICE", "INSPECTION" };
static char *corrective_types[] = { "CORRECTIVE_MAINTENANCE" };
static const struct tg_case_rules kinds = {
	{ con_types, 2 }, { om_types, 4 }, { corrective_types, 1 }, 1,
};

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

static int
same(yajl_val a, yajl_val b)
{
	char *x = dump(a), *y = dump(b);
	int eq = strcmp(x, y) == 0;

	free(x);
	free(y);
	return eq;
}

static void gen_canon(yajl_gen, yajl_val);

/* Members by name, ties in their order: a patch naming a member twice
 * may leave the members of a result in another order the second time. */
static void
gen_canon_object(yajl_gen g, yajl_val v)
{
	size_t n = v->u.object.len, i, j, k, *ix = calloc(n ? n : 1, sizeof(*ix));

	if (ix == NULL)
		abort();
	for (i = 0; i < n; i++) {
		for (j = i; j > 0 && strcmp(v->u.object.keys[ix[j - 1]], v->u.object.keys[i]) > 0;
		    j--)
			ix[j] = ix[j - 1];
		ix[j] = i;
	}
	yajl_gen_map_open(g);
	for (k = 0; k < n; k++) {
		tg_json_str(g, v->u.object.keys[ix[k]]);
		gen_canon(g, v->u.object.values[ix[k]]);
	}
	yajl_gen_map_close(g);
	free(ix);
}

static void
gen_canon(yajl_gen g, yajl_val v)
{
	size_t i;

	if (v != NULL && YAJL_IS_OBJECT(v)) {
		gen_canon_object(g, v);
	} else if (v != NULL && YAJL_IS_ARRAY(v)) {
		yajl_gen_array_open(g);
		for (i = 0; i < v->u.array.len; i++)
			gen_canon(g, v->u.array.values[i]);
		yajl_gen_array_close(g);
	} else {
		tg_json_gen_val(g, v);
	}
}

static int
same_canon(yajl_val a, yajl_val b)
{
	yajl_gen ga = tg_json_gen_new(), gb = tg_json_gen_new();
	const unsigned char *x, *y;
	size_t nx, ny;
	int eq;

	gen_canon(ga, a);
	gen_canon(gb, b);
	yajl_gen_get_buf(ga, &x, &nx);
	yajl_gen_get_buf(gb, &y, &ny);
	eq = nx == ny && memcmp(x, y, nx) == 0;
	yajl_gen_free(ga);
	yajl_gen_free(gb);
	return eq;
}

/* RFC 7396 is idempotent: the second application changes nothing. */
static void
rfc(yajl_val t, yajl_val p)
{
	yajl_val once = tg_merge_patch_rfc7396(t, p), twice;

	if (once == NULL)
		abort();
	twice = tg_merge_patch_rfc7396(once, p);
	if (!same_canon(once, twice))
		abort();
	yajl_tree_free(once);
	yajl_tree_free(twice);
}

static int
editable(const char *key)
{
	return strcmp(key, "vesselList") == 0 || strcmp(key, "personnelList") == 0 ||
	    strcmp(key, "windFarms") == 0;
}

static void
restricted(yajl_val t, yajl_val p)
{
	struct tg_problems pr = { 0 };
	yajl_val res;
	size_t i, n = strlen(AT);
	int rc = tg_merge_patch_apply(t, p, AT, &res, &pr);

	if ((rc == 0) != (pr.total == 0) || (rc == 0) != (res != NULL) || pr.n > pr.total)
		abort();
	for (i = 0; i < pr.n; i++) {
		if (strncmp(pr.v[i].path, AT, n) != 0 || (strcmp(pr.v[i].code, "not_editable") != 0 &&
		    strcmp(pr.v[i].code, "duplicate") != 0))
			abort();
		if (strlen(pr.v[i].path) < 200 && tg_json_ptr(p, pr.v[i].path + n) == NULL)
			abort();
	}
	/* By name: with a member named twice, the first copy on both sides. */
	for (i = 0; rc == 0 && i < t->u.object.len; i++)
		if (!editable(t->u.object.keys[i]) &&
		    !same(tg_json_get(t, t->u.object.keys[i]),
		    tg_json_get(res, t->u.object.keys[i])))
			abort();
	yajl_tree_free(res);
	tg_problems_cleanup(&pr);
}

/* A target that is no object is no case: the restricted form refuses it. */
static void
not_a_case(yajl_val t, yajl_val p)
{
	struct tg_problems pr = { 0 };

	if (tg_merge_patch_check(t, p, NULL, &pr) == 0 || pr.n == 0 ||
	    strcmp(pr.v[0].path, "") != 0)
		abort();
	tg_problems_cleanup(&pr);
}

static void
unchanged(yajl_val v, const char *before)
{
	char *now = dump(v);

	if (strcmp(now, before) != 0)
		abort();
	free(now);
}

static void
sweep_request(const char *body, size_t len, yajl_val base)
{
	struct tg_sweep_variant_new *v;
	struct tg_sweep_request req;
	struct tg_problems pr = { 0 };
	yajl_val c;
	size_t i;

	if (tg_sweep_request_parse(body, len, 0, &req, &pr) == 0) {
		if (tg_sweep_build(&req, base, &kinds, &v, &pr) == 0) {
			for (i = 0; i < req.n; i++) {
				if ((c = tg_json_parse(v[i].body, v[i].len, NULL)) == NULL)
					abort();
				yajl_tree_free(c);
			}
			tg_sweep_built_free(v, req.n);
		}
		tg_sweep_request_cleanup(&req);
	}
	if (pr.n > pr.total)
		abort();
	tg_problems_cleanup(&pr);
}

static int
one_input(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data, *nul = memchr(data, '\0', size);
	size_t tlen = nul != NULL ? (size_t)(nul - buf) : size / 2;
	size_t poff = nul != NULL ? tlen + 1 : tlen;
	yajl_val t, p = NULL;
	char *t0 = NULL, *p0 = NULL;

	if ((t = tg_json_parse(buf, tlen, NULL)) == NULL)
		goto done;
	if ((p = tg_json_parse(buf + poff, size - poff, NULL)) == NULL)
		goto done;
	t0 = dump(t);
	p0 = dump(p);
	rfc(t, p);
	if (YAJL_IS_OBJECT(t))
		restricted(t, p);
	else
		not_a_case(t, p);
	unchanged(t, t0);
	unchanged(p, p0);
	sweep_request(buf + poff, size - poff, t);
	unchanged(t, t0);
done:
	free(t0);
	free(p0);
	yajl_tree_free(t);
	yajl_tree_free(p);
	return 0;
}

/* An empty input arrives as NULL (replay.c): split it as the empty string. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return one_input(data != NULL ? data : (const uint8_t *)"", size);
}
