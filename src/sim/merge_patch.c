/*
 * merge_patch.c - JSON Merge Patch (RFC 7396) on yajl trees, and the
 * restricted form a sweep variant uses: a patch may change vesselList,
 * personnelList and, inside windFarms, only the fixable lists of the
 * infrastructure entries. Called by sweep.c for every variant of a sweep
 * request, before anything is submitted.
 *
 * Merge patch replaces arrays wholesale, which would make every variant
 * that edits one fixable restate all wind farms. So windFarms and their
 * infrastructureList are addressed element by element instead: an array
 * as long as the base case's, each element an object patch of the entry
 * at the same index ({} leaves it alone). Everything else is RFC 7396.
 *
 * The trees built here use yajl's own layout and malloc, so the caller
 * frees them with yajl_tree_free like any parsed tree.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/json.h"
#include "tidegate/registry.h"

#define EDITABLE "a variant may change vesselList, personnelList and " \
	"windFarms[].infrastructureList[].fixable"

/* A JSON Pointer grown and cut back as the check descends. */
/* ---- building trees ---- */

static yajl_val
node(yajl_type t)
{
	yajl_val v = tg_xcalloc(1, sizeof(*v));

	v->type = t;
	return v;
}

static void
copy_into(yajl_val d, yajl_val v)
{
	size_t i, n;

	switch (v->type) {
	case yajl_t_string:
		d->u.string = tg_xstrdup(v->u.string);
		break;
	case yajl_t_number:
		d->u.number = v->u.number;
		d->u.number.r = tg_xstrdup(v->u.number.r);
		break;
	case yajl_t_object:
		n = d->u.object.len = v->u.object.len;
		d->u.object.keys = tg_xcalloc(n ? n : 1, sizeof(*d->u.object.keys));
		d->u.object.values = tg_xcalloc(n ? n : 1, sizeof(*d->u.object.values));
		for (i = 0; i < n; i++) {
			d->u.object.keys[i] = tg_xstrdup(v->u.object.keys[i]);
			d->u.object.values[i] = tg_merge_patch_copy(v->u.object.values[i]);
		}
		break;
	case yajl_t_array:
		n = d->u.array.len = v->u.array.len;
		d->u.array.values = tg_xcalloc(n ? n : 1, sizeof(*d->u.array.values));
		for (i = 0; i < n; i++)
			d->u.array.values[i] = tg_merge_patch_copy(v->u.array.values[i]);
		break;
	default:
		break;
	}
}

yajl_val
tg_merge_patch_copy(yajl_val v)
{
	yajl_val d;

	if (v == NULL)
		return NULL;
	d = node(v->type);
	copy_into(d, v);
	return d;
}

/* Remove every member named key (a target may name one twice). */
static void
obj_del(yajl_val o, const char *key)
{
	size_t i, j;

	for (i = 0, j = 0; i < o->u.object.len; i++) {
		if (strcmp(o->u.object.keys[i], key) == 0) {
			free((char *)o->u.object.keys[i]);
			yajl_tree_free(o->u.object.values[i]);
			continue;
		}
		o->u.object.keys[j] = o->u.object.keys[i];
		o->u.object.values[j++] = o->u.object.values[i];
	}
	o->u.object.len = j;
}

/* Set key to v (taken over), replacing the first member of that name. */
static void
obj_set(yajl_val o, const char *key, yajl_val v)
{
	size_t i, n = o->u.object.len;

	for (i = 0; i < n; i++) {
		if (strcmp(o->u.object.keys[i], key) == 0) {
			yajl_tree_free(o->u.object.values[i]);
			o->u.object.values[i] = v;
			return;
		}
	}
	o->u.object.keys = tg_xrealloc(o->u.object.keys, (n + 1) * sizeof(*o->u.object.keys));
	o->u.object.values = tg_xrealloc(o->u.object.values,
	    (n + 1) * sizeof(*o->u.object.values));
	o->u.object.keys[n] = tg_xstrdup(key);
	o->u.object.values[n] = v;
	o->u.object.len = n + 1;
}

/* ---- RFC 7396 ---- */

/* Apply the members of object patch to object o, in place. */
static void
merge_members(yajl_val o, yajl_val patch)
{
	const char *key;
	yajl_val pv;
	size_t i;

	for (i = 0; i < patch->u.object.len; i++) {
		key = patch->u.object.keys[i];
		pv = patch->u.object.values[i];
		if (pv == NULL || YAJL_IS_NULL(pv))
			obj_del(o, key);
		else
			obj_set(o, key, tg_merge_patch_rfc7396(tg_json_get(o, key), pv));
	}
}

yajl_val
tg_merge_patch_rfc7396(yajl_val target, yajl_val patch)
{
	yajl_val res;

	if (patch == NULL || !YAJL_IS_OBJECT(patch))
		return patch != NULL ? tg_merge_patch_copy(patch) : node(yajl_t_null);
	res = target != NULL && YAJL_IS_OBJECT(target) ? tg_merge_patch_copy(target) :
	    node(yajl_t_object);
	merge_members(res, patch);
	return res;
}

/* ---- the restriction ---- */

static const char *
type_name(yajl_val v)
{
	if (v == NULL || YAJL_IS_NULL(v))
		return "null";
	if (YAJL_IS_OBJECT(v))
		return "an object";
	if (YAJL_IS_ARRAY(v))
		return "an array";
	if (YAJL_IS_STRING(v))
		return "a string";
	if (YAJL_IS_NUMBER(v))
		return "a number";
	return "a boolean";
}

/* 1 when member i of o was named before it. */
static int
named_before(yajl_val o, size_t i)
{
	size_t j;

	for (j = 0; j < i; j++)
		if (strcmp(o->u.object.keys[j], o->u.object.keys[i]) == 0)
			return 1;
	return 0;
}

/*
 * Member i of element patch el: 1 when it is the allowed one, named
 * once so far; else its problem is reported. A name given twice would
 * make the variant depend on which copy is read, and its pointer
 * ambiguous.
 */
static int
member_ok(struct tg_problems *p, struct tg_json_path *pp, yajl_val el, size_t i,
    const char *allowed, const char *what)
{
	size_t mark;
	int dup = named_before(el, i);

	if (!dup && strcmp(el->u.object.keys[i], allowed) == 0)
		return 1;
	mark = tg_json_path_push_key(pp, el->u.object.keys[i]);
	if (dup)
		tg_problems_add(p, pp->buf, "duplicate", "'%.64s' given more than once",
		    el->u.object.keys[i]);
	else
		tg_problems_add(p, pp->buf, "not_editable", "not editable: in %s only %s may be "
		    "patched (%s)", what, allowed, EDITABLE);
	tg_json_path_pop(pp, mark);
	return 0;
}

/*
 * An element-wise list patch: pv must be an array as long as the target
 * list tv, of object patches. Returns 1 when the elements may be walked.
 */
static int
check_list(struct tg_problems *p, struct tg_json_path *pp, yajl_val tv, yajl_val pv,
    const char *name, const char *per)
{
	size_t tn = tv != NULL && YAJL_IS_ARRAY(tv) ? tv->u.array.len : 0, i, mark;

	if (pv == NULL || !YAJL_IS_ARRAY(pv)) {
		tg_problems_add(p, pp->buf, "not_editable", "%s cannot be replaced or removed "
		    "(%s given): give an array with one object patch per %s, {} for those left "
		    "unchanged", name, type_name(pv), per);
		return 0;
	}
	if (tv == NULL || !YAJL_IS_ARRAY(tv))
		tg_problems_add(p, pp->buf, "not_editable", "the base case has no %s array to "
		    "patch", name);
	else if (pv->u.array.len != tn)
		tg_problems_add(p, pp->buf, "not_editable", "%s must have %zu elements, one "
		    "object patch per %s of the base case ({} leaves one unchanged), not %zu",
		    name, tn, per, pv->u.array.len);
	for (i = 0; i < pv->u.array.len; i++) {
		if (YAJL_IS_OBJECT(pv->u.array.values[i]))
			continue;
		mark = tg_json_path_push_index(pp, i);
		tg_problems_add(p, pp->buf, "not_editable", "must be an object patch of %s %zu "
		    "({} leaves it unchanged), not %s", per, i, type_name(pv->u.array.values[i]));
		tg_json_path_pop(pp, mark);
	}
	return 1;
}

static yajl_val
list_at(yajl_val list, size_t i)
{
	return list != NULL && YAJL_IS_ARRAY(list) && i < list->u.array.len ?
	    list->u.array.values[i] : NULL;
}

static void
check_infras(struct tg_problems *p, struct tg_json_path *pp, yajl_val tinf, yajl_val pinf)
{
	size_t j, k, mark;
	yajl_val e;

	if (!check_list(p, pp, tinf, pinf, "infrastructureList", "infrastructure entry"))
		return;
	for (j = 0; j < pinf->u.array.len; j++) {
		if (!YAJL_IS_OBJECT(e = pinf->u.array.values[j]))
			continue;
		mark = tg_json_path_push_index(pp, j);
		for (k = 0; k < e->u.object.len; k++)
			(void)member_ok(p, pp, e, k, "fixable", "an infrastructure entry");
		tg_json_path_pop(pp, mark);
	}
}

static void
check_farm(struct tg_problems *p, struct tg_json_path *pp, yajl_val tfarm, yajl_val el)
{
	size_t i, mark;

	for (i = 0; i < el->u.object.len; i++) {
		if (!member_ok(p, pp, el, i, "infrastructureList", "a wind farm"))
			continue;
		mark = tg_json_path_push_key(pp, "infrastructureList");
		check_infras(p, pp, tg_json_get(tfarm, "infrastructureList"),
		    el->u.object.values[i]);
		tg_json_path_pop(pp, mark);
	}
}

static void
check_farms(struct tg_problems *p, struct tg_json_path *pp, yajl_val tfarms, yajl_val pv)
{
	size_t i, mark;
	yajl_val el;

	if (!check_list(p, pp, tfarms, pv, "windFarms", "wind farm"))
		return;
	for (i = 0; i < pv->u.array.len; i++) {
		if (!YAJL_IS_OBJECT(el = pv->u.array.values[i]))
			continue;
		mark = tg_json_path_push_index(pp, i);
		check_farm(p, pp, list_at(tfarms, i), el);
		tg_json_path_pop(pp, mark);
	}
}

static void
check_root(struct tg_problems *p, struct tg_json_path *pp, yajl_val target, yajl_val patch)
{
	const char *key;
	size_t i, mark;

	for (i = 0; i < patch->u.object.len; i++) {
		key = patch->u.object.keys[i];
		mark = tg_json_path_push_key(pp, key);
		if (named_before(patch, i))
			tg_problems_add(p, pp->buf, "duplicate", "'%.64s' given more than once", key);
		else if (strcmp(key, "windFarms") == 0)
			check_farms(p, pp, tg_json_get(target, "windFarms"),
			    patch->u.object.values[i]);
		else if (strcmp(key, "vesselList") != 0 && strcmp(key, "personnelList") != 0)
			tg_problems_add(p, pp->buf, "not_editable", "%s is not editable: %s", key,
			    EDITABLE);
		tg_json_path_pop(pp, mark);
	}
}

int
tg_merge_patch_check(yajl_val target, yajl_val patch, const char *at,
    struct tg_problems *p)
{
	struct tg_json_path pp;
	size_t before = p->total;

	tg_json_path_init(&pp, at != NULL ? at : "");
	if (target == NULL || !YAJL_IS_OBJECT(target))
		tg_problems_add(p, pp.buf, "not_editable", "the base case is not a JSON object");
	else if (patch == NULL || !YAJL_IS_OBJECT(patch))
		tg_problems_add(p, pp.buf, "not_editable", "a variant's patch must be a JSON "
		    "object (%s would replace the whole case): %s", type_name(patch), EDITABLE);
	else
		check_root(p, &pp, target, patch);
	tg_json_path_cleanup(&pp);
	return p->total == before ? 0 : -1;
}

/* ---- applying the restricted patch ---- */

/* Entry i of list (in res) patched with the object patch pel, in place. */
static void
patch_entry(yajl_val list, size_t i, yajl_val pel)
{
	yajl_val old = list->u.array.values[i];

	list->u.array.values[i] = tg_merge_patch_rfc7396(old, pel);
	yajl_tree_free(old);
}

static void
apply_farm(yajl_val farm, yajl_val el)
{
	yajl_val infl = tg_json_get(farm, "infrastructureList"), pinf;
	size_t i, j;

	for (i = 0; i < el->u.object.len; i++) {
		pinf = el->u.object.values[i];
		for (j = 0; j < pinf->u.array.len; j++)
			patch_entry(infl, j, pinf->u.array.values[j]);
	}
}

/* Checked first: every list below has the base's length and shape. */
static void
apply_checked(yajl_val res, yajl_val patch)
{
	yajl_val farms, pv;
	const char *key;
	size_t i, j;

	for (i = 0; i < patch->u.object.len; i++) {
		key = patch->u.object.keys[i];
		pv = patch->u.object.values[i];
		if (strcmp(key, "windFarms") != 0) {
			if (YAJL_IS_NULL(pv))
				obj_del(res, key);
			else
				obj_set(res, key, tg_merge_patch_rfc7396(tg_json_get(res, key), pv));
			continue;
		}
		farms = tg_json_get(res, "windFarms");
		for (j = 0; j < pv->u.array.len; j++)
			apply_farm(farms->u.array.values[j], pv->u.array.values[j]);
	}
}

int
tg_merge_patch_apply(yajl_val target, yajl_val patch, const char *at, yajl_val *result,
    struct tg_problems *p)
{
	*result = NULL;
	if (tg_merge_patch_check(target, patch, at, p) != 0)
		return -1;
	*result = tg_merge_patch_copy(target);
	apply_checked(*result, patch);
	return 0;
}
