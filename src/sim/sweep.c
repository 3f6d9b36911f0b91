/*
 * sweep.c - the pure parts of a sweep: reading and checking a sweep
 * request, building every variant's case (restricted merge patch, then
 * the case rules) so that all problems are known before anything is
 * submitted, and the side-by-side summaries of the variants' key figures
 * as JSON and CSV. Called by the gateway's sweep handlers; the durable
 * side of a sweep is the state seam's (src/state/sweeps.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "tidegate/json.h"
#include "tidegate/map.h"
#include "tidegate/registry.h"
#include "tidegate/registry.h"
#include "runs_json.h"

#define NAME_MAX_LEN		64
#define CONCURRENCY_MAX		64
#define DEFAULT_MAX_VARIANTS	100

/*
 * Summary columns that come first, in this order: availability and
 * downtime (O&M), schedule (Construction), work done, then costs.
 */
static const char *const preferred[] = {
	"availability", "timeBasedAvailability", "energyBasedAvailability",
	"downtimeHours", "lostProductionMWh", "repairsCompleted",
	"scheduledTasksCompleted", "completionDays", "weatherDelayDays",
	"mobilisationDays", "installationTasksCompleted", "installationTasksTotal",
	"commissioningTasksCompleted", "commissioningTasksTotal",
	"totalCost", "vesselCost", "personnelCost", "partsCost",
};

static const char *const request_members[] = {
	"baseCaseId", "concurrency", "callbackUrl", "variants",
};

/* ---- the request ---- */

void
tg_sweep_request_cleanup(struct tg_sweep_request *req)
{
	if (req == NULL)
		return;
	yajl_tree_free(req->tree);
	free(req->names);
	free(req->patches);
	memset(req, 0, sizeof(*req));
}

static int
name_ok(const char *s)
{
	size_t i, n = strlen(s);

	if (n == 0 || n > NAME_MAX_LEN)
		return 0;
	for (i = 0; i < n; i++) {
		if ((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') ||
		    (s[i] >= '0' && s[i] <= '9'))
			continue;
		if (i == 0 || (s[i] != '.' && s[i] != '_' && s[i] != '-'))
			return 0;
	}
	return 1;
}

static int
one_of(const char *s, const char *const *list, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(s, list[i]) == 0)
			return 1;
	return 0;
}

static void
unknown_member(struct tg_problems *p, const char *at, const char *key,
    const char *const *known, size_t n)
{
	const char *hint = tg_did_you_mean(key, known, n);
	char *tok = tg_json_ptr_escape(key), *path = tg_xasprintf("%s/%s", at, tok);

	tg_problems_add(p, path, "unknown_field", "unknown field '%.64s'%s%s%s", key,
	    hint ? " (did you mean '" : "", hint ? hint : "", hint ? "'?)" : "");
	free(path);
	free(tok);
}

/* The first of a name's members; a later copy is a problem. */
static void
check_dups(yajl_val o, const char *at, struct tg_problems *p)
{
	size_t i, j;
	char *tok, *path;

	for (i = 0; i < o->u.object.len; i++) {
		for (j = 0; j < i; j++)
			if (strcmp(o->u.object.keys[i], o->u.object.keys[j]) == 0)
				break;
		if (j == i)
			continue;
		tok = tg_json_ptr_escape(o->u.object.keys[i]);
		path = tg_xasprintf("%s/%s", at, tok);
		tg_problems_add(p, path, "duplicate", "'%.64s' given more than once",
		    o->u.object.keys[i]);
		free(path);
		free(tok);
	}
}

static void
check_name(yajl_val name, size_t i, struct tg_sweep_request *req, struct tg_problems *p)
{
	char at[64];
	size_t j;

	snprintf(at, sizeof(at), "/variants/%zu/name", i);
	if (name == NULL || YAJL_IS_NULL(name)) {
		tg_problems_add(p, at, "required", "name is required");
		return;
	}
	if (!YAJL_IS_STRING(name) || !name_ok(name->u.string)) {
		tg_problems_add(p, at, "name", "a variant name is 1-%d letters, digits, '.', '_' "
		    "or '-', starting with a letter or digit", NAME_MAX_LEN);
		return;
	}
	for (j = 0; j < i; j++) {
		if (req->names[j] != NULL && strcmp(req->names[j], name->u.string) == 0) {
			tg_problems_add(p, at, "duplicate", "'%s' is also the name of variant %zu",
			    name->u.string, j);
			return;
		}
	}
	req->names[i] = name->u.string;
}

static void
check_variant(yajl_val v, size_t i, struct tg_sweep_request *req, struct tg_problems *p)
{
	static const char *const known[] = { "name", "patch" };
	char at[48], path[64];
	size_t k;

	snprintf(at, sizeof(at), "/variants/%zu", i);
	if (!YAJL_IS_OBJECT(v)) {
		tg_problems_add(p, at, "type", "a variant must be an object {name, patch}");
		return;
	}
	check_dups(v, at, p);
	for (k = 0; k < v->u.object.len; k++)
		if (!one_of(v->u.object.keys[k], known, TG_NELEM(known)))
			unknown_member(p, at, v->u.object.keys[k], known, TG_NELEM(known));
	check_name(tg_json_get(v, "name"), i, req, p);
	req->patches[i] = tg_json_get(v, "patch");
	if (req->patches[i] == NULL) {
		snprintf(path, sizeof(path), "%s/patch", at);
		tg_problems_add(p, path, "required", "patch is required ({} for the base case "
		    "unchanged)");
	}
}

static void
check_variants(yajl_val vs, size_t max, struct tg_sweep_request *req, struct tg_problems *p)
{
	size_t i;

	if (vs == NULL || YAJL_IS_NULL(vs)) {
		tg_problems_add(p, "/variants", "required", "variants is required");
		return;
	}
	if (!YAJL_IS_ARRAY(vs) || vs->u.array.len == 0 || vs->u.array.len > max) {
		tg_problems_add(p, "/variants", YAJL_IS_ARRAY(vs) ? "range" : "type",
		    "variants must be an array of 1 to %zu variants", max);
		return;
	}
	req->n = vs->u.array.len;
	req->names = tg_xcalloc(req->n, sizeof(*req->names));
	req->patches = tg_xcalloc(req->n, sizeof(*req->patches));
	for (i = 0; i < req->n; i++)
		check_variant(vs->u.array.values[i], i, req, p);
}

static void
check_scalars(yajl_val t, struct tg_sweep_request *req, struct tg_problems *p)
{
	yajl_val v;

	if ((v = tg_json_get(t, "baseCaseId")) == NULL || YAJL_IS_NULL(v))
		tg_problems_add(p, "/baseCaseId", "required", "baseCaseId is required");
	else if (!YAJL_IS_STRING(v) || v->u.string[0] == '\0')
		tg_problems_add(p, "/baseCaseId", "type", "baseCaseId must be a non-empty string");
	else
		req->base_case_id = v->u.string;
	v = tg_json_get(t, "concurrency");
	if (v != NULL && !YAJL_IS_NULL(v)) {
		if (!YAJL_IS_INTEGER(v) || YAJL_GET_INTEGER(v) < 1 ||
		    YAJL_GET_INTEGER(v) > CONCURRENCY_MAX)
			tg_problems_add(p, "/concurrency", "range", "concurrency must be an "
			    "integer from 1 to %d", CONCURRENCY_MAX);
		else
			req->concurrency = (int)YAJL_GET_INTEGER(v);
	}
	v = tg_json_get(t, "callbackUrl");
	if (v != NULL && !YAJL_IS_NULL(v) && !YAJL_IS_STRING(v))
		tg_problems_add(p, "/callbackUrl", "type", "callbackUrl must be a string (an "
		    "http:// or https:// URL)");
	else if (v != NULL && YAJL_IS_STRING(v) && v->u.string[0] != '\0')
		req->callback_url = v->u.string;
}

int
tg_sweep_request_parse(const char *body, size_t len, size_t max_variants,
    struct tg_sweep_request *req, struct tg_problems *p)
{
	size_t before = p->total, i, max = max_variants ? max_variants : DEFAULT_MAX_VARIANTS;
	struct tg_err err = { "" };
	yajl_val t;

	memset(req, 0, sizeof(*req));
	if (max > TG_SWEEP_MAX_VARIANTS)
		max = TG_SWEEP_MAX_VARIANTS;
	if ((t = req->tree = tg_json_parse(body, len, &err)) == NULL) {
		tg_problems_add(p, "", "json", "%s", err.msg);
		return -1;
	}
	if (!YAJL_IS_OBJECT(t)) {
		tg_problems_add(p, "", "type", "a sweep request must be a JSON object");
		goto done;
	}
	check_dups(t, "", p);
	for (i = 0; i < t->u.object.len; i++)
		if (!one_of(t->u.object.keys[i], request_members, TG_NELEM(request_members)))
			unknown_member(p, "", t->u.object.keys[i], request_members,
			    TG_NELEM(request_members));
	check_scalars(t, req, p);
	check_variants(tg_json_get(t, "variants"), max, req, p);
done:
	if (p->total == before)
		return 0;
	tg_sweep_request_cleanup(req);
	return -1;
}

/* ---- building the variants ---- */

void
tg_sweep_built_free(struct tg_sweep_variant_new *v, size_t n)
{
	size_t i;

	for (i = 0; v != NULL && i < n; i++) {
		free(v[i].name);
		free(v[i].body);
	}
	free(v);
}

/* Case problems of variant i, moved under /variants/i/case. */
static void
case_problems(yajl_val c, yajl_val base, const struct tg_case_rules *k, size_t i,
    struct tg_problems *p)
{
	struct tg_problems cp = { 0 };
	enum tg_case_type type;
	size_t j;
	char *at;

	cp.max = p->max;
	if (tg_case_check(c, base, k, &type, &cp) == 0)
		return;
	for (j = 0; j < cp.n; j++) {
		at = tg_xasprintf("/variants/%zu/case%s", i, cp.v[j].path);
		tg_problems_add(p, at, cp.v[j].code, "%s", cp.v[j].message);
		free(at);
	}
	/* Problems past cp's cap still count in p's total. */
	p->total += cp.total - cp.n;
	tg_problems_cleanup(&cp);
}

static void
serialise(yajl_val c, struct tg_sweep_variant_new *out)
{
	yajl_gen g = tg_json_gen_new();
	const unsigned char *buf;
	size_t len;

	tg_json_gen_val(g, c);
	yajl_gen_get_buf(g, &buf, &len);
	out->body = tg_xstrndup((const char *)buf, len);
	out->len = len;
	yajl_gen_free(g);
}

int
tg_sweep_build(const struct tg_sweep_request *req, yajl_val base,
    const struct tg_case_rules *k, struct tg_sweep_variant_new **out, struct tg_problems *p)
{
	struct tg_sweep_variant_new *v = tg_xcalloc(req->n ? req->n : 1, sizeof(*v));
	size_t before = p->total, i;
	yajl_val c;
	char at[48];

	*out = NULL;
	if (base == NULL || !YAJL_IS_OBJECT(base)) {
		tg_problems_add(p, "/baseCaseId", "structure", "the base case %.64s is not a "
		    "JSON object", req->base_case_id ? req->base_case_id : "");
		goto done;
	}
	for (i = 0; i < req->n; i++) {
		snprintf(at, sizeof(at), "/variants/%zu/patch", i);
		if (tg_merge_patch_apply(base, req->patches[i], at, &c, p) != 0)
			continue;
		case_problems(c, base, k, i, p);
		v[i].name = tg_xstrdup(req->names[i] ? req->names[i] : "");
		serialise(c, &v[i]);
		yajl_tree_free(c);
	}
done:
	if (p->total == before) {
		*out = v;
		return 0;
	}
	tg_sweep_built_free(v, req->n);
	return -1;
}

/* ---- summaries ---- */

static int
preferred_rank(const char *name)
{
	size_t i;

	for (i = 0; i < TG_NELEM(preferred); i++)
		if (strcmp(name, preferred[i]) == 0)
			return (int)i;
	return (int)TG_NELEM(preferred);
}

static int
column_cmp(const void *a, const void *b)
{
	const char *x = *(const char *const *)a, *y = *(const char *const *)b;
	int rx = preferred_rank(x), ry = preferred_rank(y);

	if (rx != ry)
		return rx < ry ? -1 : 1;
	return strcmp(x, y);
}

void
tg_sweep_columns(const struct tg_sweep_variant *v, size_t n, const char ***cols,
    size_t *ncols)
{
	struct tg_map *seen = tg_map_new(NULL);
	size_t i, j, cap = 0;
	yajl_val f;

	*cols = NULL;
	*ncols = 0;
	for (i = 0; i < n; i++) {
		if ((f = v[i].figures) == NULL || !YAJL_IS_OBJECT(f))
			continue;
		for (j = 0; j < f->u.object.len; j++) {
			if (!YAJL_IS_NUMBER(f->u.object.values[j]) ||
			    tg_map_get(seen, f->u.object.keys[j]) != NULL)
				continue;
			tg_map_put(seen, f->u.object.keys[j], (void *)f->u.object.keys[j]);
			if (*ncols == cap) {
				cap = cap ? 2 * cap : 32;
				*cols = tg_xrealloc(*cols, cap * sizeof(**cols));
			}
			(*cols)[(*ncols)++] = f->u.object.keys[j];
		}
	}
	if (*ncols > 1)
		qsort(*cols, *ncols, sizeof(**cols), column_cmp);
	tg_map_free(seen);
}

/* The number figures[col] when it is one, else NULL. */
static yajl_val
figure(const struct tg_sweep_variant *v, const char *col)
{
	yajl_val f = tg_json_get(v->figures, col);

	return f != NULL && YAJL_IS_NUMBER(f) ? f : NULL;
}

static void
gen_counts(yajl_gen g, const struct tg_sweep_variant *v, size_t n)
{
	static const char *const names[] = { "pending", "submitting", "inProgress",
		"completed", "failed", "expired", "unknown", "rejected" };
	long long c[TG_NELEM(names)] = { 0 };
	size_t i, k;

	for (i = 0; i < n; i++) {
		if (v[i].state == TG_VARIANT_PENDING || v[i].state == TG_VARIANT_SUBMITTING)
			k = v[i].state == TG_VARIANT_PENDING ? 0 : 1;
		else if (v[i].state == TG_VARIANT_REJECTED)
			k = 7;
		else
			k = 2 + ((unsigned)v[i].run_status < TG_RUN_NSTATUS ? v[i].run_status :
			    TG_RUN_UNKNOWN);
		c[k]++;
	}
	tg_json_str(g, "counts");
	yajl_gen_map_open(g);
	for (k = 0; k < TG_NELEM(names); k++)
		tg_json_kv_int(g, names[k], c[k]);
	yajl_gen_map_close(g);
}

static void
gen_variant(yajl_gen g, const struct tg_sweep_variant *v, const char **cols, size_t nc)
{
	yajl_val f;
	size_t j;

	yajl_gen_map_open(g);
	tg_json_kv_str(g, "name", v->name);
	tg_json_kv_str(g, "status", tg_sweep_variant_status(v));
	tg_json_kv_str(g, "simulationId", v->simulation_id);
	tg_runs_kv_time(g, "submittedAt", v->submitted_at);
	tg_json_kv_str(g, "error", v->error);
	tg_json_kv_str(g, "failure", v->failure);
	tg_json_str(g, "figures");
	yajl_gen_map_open(g);
	for (j = 0; j < nc; j++) {
		if ((f = figure(v, cols[j])) == NULL)
			continue;
		tg_json_str(g, cols[j]);
		tg_json_gen_val(g, f);
	}
	yajl_gen_map_close(g);
	yajl_gen_map_close(g);
}

/* The sweep's own members, inside an open map. */
static void
gen_record(yajl_gen g, const struct tg_sweep *s)
{
	char *url = s->callback_url ? tg_runs_url_redact(s->callback_url) : NULL;

	tg_json_kv_str(g, "sweepId", s->id);
	tg_json_kv_str(g, "baseCaseId", s->base_case_id);
	tg_json_kv_str(g, "state", tg_sweep_state_str(s->state));
	tg_runs_kv_time(g, "createdAt", s->created_at);
	tg_runs_kv_time(g, "doneAt", s->done_at);
	tg_json_kv_int(g, "concurrency", s->concurrency);
	tg_json_kv_str(g, "callbackUrl", url);
	free(url);
}

void
tg_sweep_brief_json(yajl_gen g, const struct tg_sweep *s)
{
	yajl_gen_map_open(g);
	gen_record(g, s);
	tg_json_kv_int(g, "variants", (long long)s->nvariants);
	yajl_gen_map_close(g);
}

void
tg_sweep_json(yajl_gen g, const struct tg_sweep *s, const struct tg_sweep_variant *v,
    size_t n)
{
	const char **cols;
	size_t nc, i;

	tg_sweep_columns(v, n, &cols, &nc);
	yajl_gen_map_open(g);
	gen_record(g, s);
	gen_counts(g, v, n);
	tg_json_str(g, "columns");
	yajl_gen_array_open(g);
	for (i = 0; i < nc; i++)
		tg_json_str(g, cols[i]);
	yajl_gen_array_close(g);
	tg_json_str(g, "variants");
	yajl_gen_array_open(g);
	for (i = 0; i < n; i++)
		gen_variant(g, &v[i], cols, nc);
	yajl_gen_array_close(g);
	yajl_gen_map_close(g);
	free(cols);
}

/* RFC 4180: quoted when it holds a comma, a quote, CR or LF. */
static void
csv_field(struct evbuffer *out, const char *s, int first)
{
	const char *q;

	if (!first)
		evbuffer_add(out, ",", 1);
	if (s == NULL)
		return;
	if (strpbrk(s, ",\"\r\n") == NULL) {
		evbuffer_add(out, s, strlen(s));
		return;
	}
	evbuffer_add(out, "\"", 1);
	for (; (q = strchr(s, '"')) != NULL; s = q + 1) {
		evbuffer_add(out, s, (size_t)(q - s));
		evbuffer_add(out, "\"\"", 2);
	}
	evbuffer_add(out, s, strlen(s));
	evbuffer_add(out, "\"", 1);
}

void
tg_sweep_csv(struct evbuffer *out, const struct tg_sweep_variant *v, size_t n)
{
	const char **cols;
	size_t nc, i, j;
	yajl_val f;

	tg_sweep_columns(v, n, &cols, &nc);
	csv_field(out, "variant", 1);
	csv_field(out, "status", 0);
	for (j = 0; j < nc; j++)
		csv_field(out, cols[j], 0);
	evbuffer_add(out, "\r\n", 2);
	for (i = 0; i < n; i++) {
		csv_field(out, v[i].name ? v[i].name : "", 1);
		csv_field(out, tg_sweep_variant_status(&v[i]), 0);
		for (j = 0; j < nc; j++) {
			f = figure(&v[i], cols[j]);
			/* The vendor's own digits: no locale, no rounding. */
			csv_field(out, f != NULL ? f->u.number.r : NULL, 0);
		}
		evbuffer_add(out, "\r\n", 2);
	}
	free(cols);
}
