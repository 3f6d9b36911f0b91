/*
 * case_check.c - checks a simulation case before the gateway forwards it
 * to the vendor: the structure of a partial case, one case type
 * (Construction or O&M) across its fixables, and, against the partial case
 * the gateway served for the same caseId, no change outside vesselList,
 * personnelList and windFarms[].infrastructureList[].fixable; the
 * members of those entries are case_entries.c's.
 *
 * The vendor answers a bad case with a run that fails and no reason, so
 * every problem is listed here, with its JSON Pointer, before anything is
 * sent. Called by the simulation submit handler through tg_case_check.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/json.h"
#include "tidegate/map.h"
#include "tidegate/sim.h"
#include "case_int.h"

/* Base trees are walked quietly: their flaws are not the caller's. */
#define ADD(p, ...) do {					\
	if ((p) != NULL)					\
		tg_problems_add((p), __VA_ARGS__);		\
} while (0)

/* Longest structural path: three indices of 20 digits and fixed names. */
#define AT_LEN 160

struct fix {
	const char *type, *id;
	size_t farm, infra, idx;
	enum tg_case_type kind;
};

struct fixes {
	struct fix *v;
	size_t n, cap;
};

/* One pass over a tree's fixables; p is NULL for the base. */
struct walk {
	const struct tg_case_rules *k;
	struct tg_problems *p;
	struct fixes fx;
};

/* A JSON Pointer grown and cut back as the diff descends. */
enum level { L_ANY, L_ROOT, L_FARMS, L_FARM, L_INFRAS, L_INFRA, L_SKIP };

struct diff {
	struct tg_problems *p;
	struct tg_json_path path;
};

struct names {
	char *list[3];			/* by enum tg_case_type: "A, B" */
	const char **all;		/* every known type, for "did you mean" */
	size_t nall;
};

static const char *const kind_name[] = { "unknown", "Construction", "O&M" };
static const char *const kind_article[] = { "an unknown", "a Construction", "an O&M" };

int
tg_case_listed(const struct tg_strlist *l, const char *s)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		if (l->v[i] != NULL && strcmp(l->v[i], s) == 0)
			return 1;
	return 0;
}

/* A type listed in both sets counts as Construction: the config is at fault. */
static enum tg_case_type
kind_of(const struct tg_case_rules *k, const char *type)
{
	if (tg_case_listed(&k->construction, type))
		return TG_CASE_CONSTRUCTION;
	if (tg_case_listed(&k->om, type))
		return TG_CASE_OM;
	return TG_CASE_UNKNOWN;
}

/* ---- structure, and the fixables it yields ---- */

static void
fixes_push(struct fixes *fx, const struct fix *f)
{
	if (fx->n == fx->cap) {
		fx->cap = fx->cap ? 2 * fx->cap : 16;
		fx->v = tg_xrealloc(fx->v, fx->cap * sizeof(*fx->v));
	}
	fx->v[fx->n++] = *f;
}

/* obj[key] when it is an array; each element that is not an object is reported. */
static yajl_val
object_array(struct walk *w, yajl_val obj, const char *at, const char *key)
{
	char path[AT_LEN], el[AT_LEN + 24];
	yajl_val a = tg_json_get(obj, key);
	size_t i;

	snprintf(path, sizeof(path), "%s/%s", at, key);
	if (a == NULL || !YAJL_IS_ARRAY(a)) {
		ADD(w->p, path, "structure", "%smust be an array of objects",
		    a == NULL ? "missing; " : "");
		return NULL;
	}
	for (i = 0; i < a->u.array.len; i++) {
		if (YAJL_IS_OBJECT(a->u.array.values[i]))
			continue;
		snprintf(el, sizeof(el), "%s/%zu", path, i);
		ADD(w->p, el, "structure", "must be an object");
	}
	return a;
}

static void
check_fixable(struct walk *w, yajl_val fx, size_t i, size_t j, size_t n)
{
	yajl_val t = tg_json_get(fx, "fixableType"), id = tg_json_get(fx, "id");
	char at[AT_LEN], path[AT_LEN + 16];
	struct fix f;

	snprintf(at, sizeof(at), "/windFarms/%zu/infrastructureList/%zu/fixable/%zu", i, j, n);
	snprintf(path, sizeof(path), "%s/fixableType", at);
	if (t == NULL)
		ADD(w->p, path, "required", "is required");
	else if (!YAJL_IS_STRING(t))
		ADD(w->p, path, "type", "must be a string");
	snprintf(path, sizeof(path), "%s/id", at);
	if (id != NULL && !YAJL_IS_STRING(id))
		ADD(w->p, path, "type", "must be a string");
	if (t == NULL || !YAJL_IS_STRING(t))
		return;
	f.type = t->u.string;
	f.id = id != NULL && YAJL_IS_STRING(id) ? id->u.string : NULL;
	f.farm = i;
	f.infra = j;
	f.idx = n;
	f.kind = kind_of(w->k, f.type);
	fixes_push(&w->fx, &f);
}

static void
check_farm(struct walk *w, yajl_val farm, size_t i)
{
	yajl_val infras, infra, fix;
	char at[AT_LEN];
	size_t j, n;

	snprintf(at, sizeof(at), "/windFarms/%zu", i);
	if ((infras = object_array(w, farm, at, "infrastructureList")) == NULL)
		return;
	for (j = 0; j < infras->u.array.len; j++) {
		infra = infras->u.array.values[j];
		if (!YAJL_IS_OBJECT(infra))
			continue;
		snprintf(at, sizeof(at), "/windFarms/%zu/infrastructureList/%zu", i, j);
		if ((fix = object_array(w, infra, at, "fixable")) == NULL)
			continue;
		for (n = 0; n < fix->u.array.len; n++)
			if (YAJL_IS_OBJECT(fix->u.array.values[n]))
				check_fixable(w, fix->u.array.values[n], i, j, n);
	}
}

/* c is an object. */
static void
check_structure(struct walk *w, yajl_val c)
{
	yajl_val id = tg_json_get(c, "caseId"), farms;
	size_t i;

	if (id == NULL)
		ADD(w->p, "/caseId", "required", "is required");
	else if (!YAJL_IS_STRING(id) || id->u.string[0] == '\0')
		ADD(w->p, "/caseId", "type", "must be a non-empty string");
	object_array(w, c, "", "vesselList");
	object_array(w, c, "", "personnelList");
	if ((farms = object_array(w, c, "", "windFarms")) == NULL)
		return;
	if (farms->u.array.len == 0)
		ADD(w->p, "/windFarms", "structure", "must hold at least one wind farm");
	for (i = 0; i < farms->u.array.len; i++)
		if (YAJL_IS_OBJECT(farms->u.array.values[i]))
			check_farm(w, farms->u.array.values[i], i);
}

/* ---- case type ---- */

/* Majority kind; a tie goes to the kind of the first known fixable. */
static enum tg_case_type
majority(const struct fixes *fx)
{
	enum tg_case_type first = TG_CASE_UNKNOWN;
	size_t i, n[3] = { 0, 0, 0 };

	for (i = 0; i < fx->n; i++) {
		n[fx->v[i].kind]++;
		if (first == TG_CASE_UNKNOWN)
			first = fx->v[i].kind;
	}
	if (n[TG_CASE_CONSTRUCTION] != n[TG_CASE_OM])
		return n[TG_CASE_CONSTRUCTION] > n[TG_CASE_OM] ? TG_CASE_CONSTRUCTION :
		    TG_CASE_OM;
	return first;
}

static char *
join(const struct tg_strlist *l)
{
	size_t i, len = 1;
	char *s;

	for (i = 0; i < l->n; i++)
		len += strlen(l->v[i] ? l->v[i] : "") + 2;
	s = tg_xmalloc(len);
	s[0] = '\0';
	for (i = 0; i < l->n; i++) {
		if (i > 0)
			strcat(s, ", ");
		strcat(s, l->v[i] ? l->v[i] : "");
	}
	if (l->n == 0)
		strcpy(s, "none");
	return s;
}

static void
names_init(struct names *nm, const struct tg_case_rules *k)
{
	size_t i;

	nm->list[TG_CASE_UNKNOWN] = NULL;
	nm->list[TG_CASE_CONSTRUCTION] = join(&k->construction);
	nm->list[TG_CASE_OM] = join(&k->om);
	nm->all = tg_xcalloc(k->construction.n + k->om.n + 1, sizeof(*nm->all));
	nm->nall = 0;
	for (i = 0; i < k->construction.n; i++)
		if (k->construction.v[i] != NULL)
			nm->all[nm->nall++] = k->construction.v[i];
	for (i = 0; i < k->om.n; i++)
		if (k->om.v[i] != NULL)
			nm->all[nm->nall++] = k->om.v[i];
}

static void
names_cleanup(struct names *nm)
{
	free(nm->list[TG_CASE_CONSTRUCTION]);
	free(nm->list[TG_CASE_OM]);
	free(nm->all);
}

/* Base fixables by "farm/infra/id": ids are only unique within an asset. */
static struct tg_map *
index_base(const struct fixes *bf)
{
	struct tg_map *m = tg_map_new(NULL);
	size_t i;
	char *key;

	for (i = 0; i < bf->n; i++) {
		if (bf->v[i].id == NULL)
			continue;
		key = tg_xasprintf("%zu/%zu/%s", bf->v[i].farm, bf->v[i].infra, bf->v[i].id);
		if (tg_map_get(m, key) == NULL)
			tg_map_put(m, key, &bf->v[i]);
		free(key);
	}
	return m;
}

static const struct fix *
base_match(struct tg_map *m, const struct fix *f)
{
	const struct fix *b;
	char *key;

	if (m == NULL || f->id == NULL)
		return NULL;
	key = tg_xasprintf("%zu/%zu/%s", f->farm, f->infra, f->id);
	b = tg_map_get(m, key);
	free(key);
	return b;
}

/* One problem at most per fixable: unknown, moved between kinds, or mixed. */
static void
check_kind(struct tg_problems *p, const struct names *nm, const struct fix *f,
    const struct fix *b, enum tg_case_type type)
{
	const char *hint;
	char at[AT_LEN];

	snprintf(at, sizeof(at), "/windFarms/%zu/infrastructureList/%zu/fixable/%zu/fixableType",
	    f->farm, f->infra, f->idx);
	if (f->kind == TG_CASE_UNKNOWN) {
		hint = tg_did_you_mean(f->type, nm->all, nm->nall);
		tg_problems_add(p, at, "unknown_type",
		    "%s is not a known fixableType (Construction: %s; O&M: %s)%s%s%s", f->type,
		    nm->list[TG_CASE_CONSTRUCTION], nm->list[TG_CASE_OM],
		    hint ? "; did you mean " : "", hint ? hint : "", hint ? "?" : "");
	} else if (b != NULL && b->kind != TG_CASE_UNKNOWN && b->kind != f->kind) {
		tg_problems_add(p, at, "kind_changed",
		    "%s is %s type; fixable %s is %s (%s) in the case and may not change kind",
		    f->type, kind_article[f->kind], f->id, b->type, kind_name[b->kind]);
	} else if (type != TG_CASE_UNKNOWN && f->kind != type) {
		tg_problems_add(p, at, "mixed_kinds", "%s is %s type; this is %s case (%s)",
		    f->type, kind_article[f->kind], kind_article[type], nm->list[type]);
	}
}

static enum tg_case_type
check_kinds(const struct tg_case_rules *k, const struct fixes *sf, const struct fixes *bf,
    struct tg_problems *p)
{
	enum tg_case_type type = TG_CASE_UNKNOWN;
	struct tg_map *m = NULL;
	struct names nm;
	size_t i;

	names_init(&nm, k);
	if (bf != NULL) {
		type = majority(bf);
		m = index_base(bf);
	}
	if (type == TG_CASE_UNKNOWN)
		type = majority(sf);
	for (i = 0; i < sf->n; i++)
		check_kind(p, &nm, &sf->v[i], base_match(m, &sf->v[i]), type);
	tg_map_free(m);
	names_cleanup(&nm);
	return type;
}

/* ---- diff against the served case ---- */

/* Where a member or element sits: only the paths to the fixables are special. */
static enum level
child_level(enum level l, const char *key)
{
	if (key == NULL)
		return l == L_FARMS ? L_FARM : l == L_INFRAS ? L_INFRA : L_ANY;
	switch (l) {
	case L_ROOT:
		if (strcmp(key, "vesselList") == 0 || strcmp(key, "personnelList") == 0)
			return L_SKIP;
		return strcmp(key, "windFarms") == 0 ? L_FARMS : L_ANY;
	case L_FARM:
		return strcmp(key, "infrastructureList") == 0 ? L_INFRAS : L_ANY;
	case L_INFRA:
		return strcmp(key, "fixable") == 0 ? L_SKIP : L_ANY;
	default:
		return L_ANY;
	}
}

/* 2 and 2.0 are equal; numbers neither side can read compare as written. */
static int
num_equal(yajl_val a, yajl_val b)
{
	if (YAJL_IS_INTEGER(a) && YAJL_IS_INTEGER(b))
		return a->u.number.i == b->u.number.i;
	if (YAJL_IS_DOUBLE(a) && YAJL_IS_DOUBLE(b))
		return a->u.number.d == b->u.number.d;
	return strcmp(a->u.number.r, b->u.number.r) == 0;
}

/* The served value, short, for "changed" messages. */
static void
changed(struct diff *d, yajl_val b)
{
	const char *what;

	switch (b->type) {
	case yajl_t_string:
		tg_problems_add(d->p, d->path.buf, "not_editable",
		    "changed; the case has \"%.40s%s\"", b->u.string,
		    strlen(b->u.string) > 40 ? "..." : "");
		return;
	case yajl_t_number:
		tg_problems_add(d->p, d->path.buf, "not_editable", "changed; the case has %.40s",
		    b->u.number.r);
		return;
	case yajl_t_object:
		what = "an object";
		break;
	case yajl_t_array:
		what = "an array";
		break;
	case yajl_t_true:
		what = "true";
		break;
	case yajl_t_false:
		what = "false";
		break;
	default:
		what = "null";
		break;
	}
	tg_problems_add(d->p, d->path.buf, "not_editable", "changed; the case has %s", what);
}

static void diff_val(struct diff *, yajl_val, yajl_val, enum level, int);

static void
diff_obj(struct diff *d, yajl_val a, yajl_val b, enum level l, int depth)
{
	enum level cl;
	yajl_val bv;
	size_t i, mark;

	for (i = 0; i < a->u.object.len; i++) {
		if ((cl = child_level(l, a->u.object.keys[i])) == L_SKIP)
			continue;
		mark = tg_json_path_push_key(&d->path, a->u.object.keys[i]);
		if ((bv = tg_json_get(b, a->u.object.keys[i])) == NULL)
			tg_problems_add(d->p, d->path.buf, "not_editable", "added");
		else
			diff_val(d, a->u.object.values[i], bv, cl, depth + 1);
		tg_json_path_pop(&d->path, mark);
	}
	for (i = 0; i < b->u.object.len; i++) {
		if (child_level(l, b->u.object.keys[i]) == L_SKIP ||
		    tg_json_get(a, b->u.object.keys[i]) != NULL)
			continue;
		mark = tg_json_path_push_key(&d->path, b->u.object.keys[i]);
		tg_problems_add(d->p, d->path.buf, "not_editable", "removed");
		tg_json_path_pop(&d->path, mark);
	}
}

/* Element-wise by index: an insertion shows as changes from there on. */
static void
diff_arr(struct diff *d, yajl_val a, yajl_val b, enum level l, int depth)
{
	size_t i, mark, na = a->u.array.len, nb = b->u.array.len;

	for (i = 0; i < na || i < nb; i++) {
		mark = tg_json_path_push_index(&d->path, i);
		if (i >= nb)
			tg_problems_add(d->p, d->path.buf, "not_editable", "added");
		else if (i >= na)
			tg_problems_add(d->p, d->path.buf, "not_editable", "removed");
		else
			diff_val(d, a->u.array.values[i], b->u.array.values[i],
			    child_level(l, NULL), depth + 1);
		tg_json_path_pop(&d->path, mark);
	}
}

/*
 * depth bounds the recursion whatever the trees: tg_json_parse never gives
 * deeper ones, so a difference below the bound is reported, not searched.
 */
static void
diff_val(struct diff *d, yajl_val a, yajl_val b, enum level l, int depth)
{
	if (a->type != b->type) {
		changed(d, b);
		return;
	}
	switch (a->type) {
	case yajl_t_object:
	case yajl_t_array:
		if (depth > TG_JSON_MAX_DEPTH)
			tg_problems_add(d->p, d->path.buf, "not_editable",
			    "nested too deeply to compare with the case");
		else if (a->type == yajl_t_object)
			diff_obj(d, a, b, l, depth);
		else
			diff_arr(d, a, b, l, depth);
		break;
	case yajl_t_string:
		if (strcmp(a->u.string, b->u.string) != 0)
			changed(d, b);
		break;
	case yajl_t_number:
		if (!num_equal(a, b))
			changed(d, b);
		break;
	default:
		break;
	}
}

/* ---- member names given twice ---- */

/* Small objects are scanned pairwise; large ones through a map. */
static int
seen_before(yajl_val o, size_t i, struct tg_map **seen)
{
	size_t j;

	if (o->u.object.len <= 32) {
		for (j = 0; j < i; j++)
			if (strcmp(o->u.object.keys[j], o->u.object.keys[i]) == 0)
				return 1;
		return 0;
	}
	if (*seen == NULL)
		*seen = tg_map_new(NULL);
	if (tg_map_get(*seen, o->u.object.keys[i]) != NULL)
		return 1;
	tg_map_put(*seen, o->u.object.keys[i], o);
	return 0;
}

static void find_dups(struct diff *, yajl_val, int);

static void
find_dups_obj(struct diff *d, yajl_val o, int depth)
{
	struct tg_map *seen = NULL;
	size_t i, mark;

	for (i = 0; i < o->u.object.len; i++) {
		if (seen_before(o, i, &seen)) {
			mark = tg_json_path_push_key(&d->path, o->u.object.keys[i]);
			tg_problems_add(d->p, d->path.buf, "structure",
			    "duplicate member name; each member may appear once");
			tg_json_path_pop(&d->path, mark);
		} else if (YAJL_IS_OBJECT(o->u.object.values[i]) ||
		    YAJL_IS_ARRAY(o->u.object.values[i])) {
			mark = tg_json_path_push_key(&d->path, o->u.object.keys[i]);
			find_dups(d, o->u.object.values[i], depth + 1);
			tg_json_path_pop(&d->path, mark);
		}
	}
	tg_map_free(seen);
}

/*
 * A name given twice makes a pointer ambiguous, and lets the gateway check
 * one value while the vendor, reading the other, runs another case.
 */
static void
find_dups(struct diff *d, yajl_val v, int depth)
{
	size_t i, mark;

	if (depth > TG_JSON_MAX_DEPTH)
		return;
	if (YAJL_IS_OBJECT(v)) {
		find_dups_obj(d, v, depth);
		return;
	}
	for (i = 0; YAJL_IS_ARRAY(v) && i < v->u.array.len; i++) {
		if (!YAJL_IS_OBJECT(v->u.array.values[i]) && !YAJL_IS_ARRAY(v->u.array.values[i]))
			continue;
		mark = tg_json_path_push_index(&d->path, i);
		find_dups(d, v->u.array.values[i], depth + 1);
		tg_json_path_pop(&d->path, mark);
	}
}

/* ---- entry point ---- */

int
tg_case_check(yajl_val submitted, yajl_val base, const struct tg_case_rules *k,
    enum tg_case_type *type, struct tg_problems *p)
{
	struct walk sw = { k, p, { NULL, 0, 0 } }, bw = { k, NULL, { NULL, 0, 0 } };
	struct diff d = { p, { NULL, 0, 0 } };
	enum tg_case_type t = TG_CASE_UNKNOWN;
	size_t before = p->total;

	/* A base that is not a case was never served: judge the submission alone. */
	if (base != NULL && !YAJL_IS_OBJECT(base))
		base = NULL;
	if (submitted == NULL || !YAJL_IS_OBJECT(submitted)) {
		tg_problems_add(p, "", "structure", "a case must be a JSON object");
		goto done;
	}
	tg_json_path_init(&d.path, "");
	find_dups(&d, submitted, 0);
	check_structure(&sw, submitted);
	if (base != NULL)
		check_structure(&bw, base);
	t = check_kinds(k, &sw.fx, base != NULL ? &bw.fx : NULL, p);
	if (k->entries)
		tg_case_entries_check(submitted, k, p);
	if (base != NULL)
		diff_val(&d, submitted, base, L_ROOT, 0);
done:
	free(sw.fx.v);
	free(bw.fx.v);
	tg_json_path_cleanup(&d.path);
	if (type != NULL)
		*type = t;
	return p->total == before ? 0 : -1;
}
