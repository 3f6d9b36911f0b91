/*
 * case_entries.c - the members of the entries a caller may edit in a
 * case: every vessel of vesselList, every role of personnelList and every
 * fixable of windFarms[].infrastructureList[].fixable. The vendor runs a
 * case whose entries break these rules and reports the run failed, with
 * no reason; checked here, a sweep's variant or a submission is refused
 * with every problem named before anything is sent. The rules are one
 * table per kind of entry (docs/validation.md lists them; tidegate-emulator
 * applies the same ones, and a unit test compares the two verdicts).
 * Called by tg_case_check (case_check.c) when the rules say entries.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "tidegate/json.h"
#include "tidegate/map.h"
#include "case_int.h"

enum { M_REQ = 1, M_INT = 2, M_OPEN = 4 };	/* required, integral, > lo */
enum mtype { T_STR, T_NUM, T_OBJ, T_ENUM };

struct rule {
	const char *name;
	enum mtype t;
	int flags;
	double lo, hi;
	const char *const *choices;	/* T_ENUM: NULL-terminated */
	const struct rule *sub;		/* T_OBJ: its members' rules */
};

static const char *const charters[] = { "TIME_CHARTER", "SPOT", NULL };

static const struct rule capacities[] = {
	{ "technicians", T_NUM, M_INT, 0, 1e4, NULL, NULL },
	{ "cargoTonnes", T_NUM, 0, 0, 1e6, NULL, NULL },
	{ NULL, T_STR, 0, 0, 0, NULL, NULL },
};

static const struct rule limits[] = {
	{ "maxSignificantWaveHeightM", T_NUM, M_OPEN, 0, 30, NULL, NULL },
	{ "maxWindSpeedMs", T_NUM, M_OPEN, 0, 100, NULL, NULL },
	{ NULL, T_STR, 0, 0, 0, NULL, NULL },
};

static const struct rule vessel[] = {
	{ "id", T_STR, M_REQ, 0, 0, NULL, NULL },
	{ "type", T_STR, M_REQ, 0, 0, NULL, NULL },
	{ "quantity", T_NUM, M_REQ | M_INT, 0, 1e4, NULL, NULL },
	{ "dayRate", T_NUM, M_REQ, 0, 1e9, NULL, NULL },
	{ "mobilisationDays", T_NUM, 0, 0, 365, NULL, NULL },
	{ "transitSpeedKn", T_NUM, M_OPEN, 0, 100, NULL, NULL },
	{ "charterType", T_ENUM, 0, 0, 0, charters, NULL },
	{ "capacities", T_OBJ, 0, 0, 0, NULL, capacities },
	{ "operationalLimits", T_OBJ, 0, 0, 0, NULL, limits },
	{ NULL, T_STR, 0, 0, 0, NULL, NULL },
};

static const struct rule role[] = {
	{ "role", T_STR, M_REQ, 0, 0, NULL, NULL },
	{ "quantity", T_NUM, M_REQ | M_INT, 0, 1e5, NULL, NULL },
	{ "dayRate", T_NUM, M_REQ, 0, 1e7, NULL, NULL },
	{ "shiftHours", T_NUM, M_OPEN, 0, 24, NULL, NULL },
	{ NULL, T_STR, 0, 0, 0, NULL, NULL },
};

static const struct rule fixable[] = {
	{ "id", T_STR, M_REQ, 0, 0, NULL, NULL },
	{ "durationHours", T_NUM, M_REQ, 0, 1e5, NULL, NULL },
	{ "vesselType", T_STR, M_REQ, 0, 0, NULL, NULL },
	{ "technicianRole", T_STR, M_REQ, 0, 0, NULL, NULL },
	{ "techniciansRequired", T_NUM, M_REQ | M_INT, 0, 1e4, NULL, NULL },
	{ "partsCost", T_NUM, 0, 0, 1e10, NULL, NULL },
	{ NULL, T_STR, 0, 0, 0, NULL, NULL },
};

/* An O&M fixable is timed by a failure rate (corrective types) or an interval. */
static const struct rule corrective[] = {
	{ "failureRatePerYear", T_NUM, M_REQ, 0, 1000, NULL, NULL },
	{ NULL, T_STR, 0, 0, 0, NULL, NULL },
};

static const struct rule planned[] = {
	{ "intervalDays", T_NUM, M_REQ | M_OPEN, 0, 36500, NULL, NULL },
	{ NULL, T_STR, 0, 0, 0, NULL, NULL },
};

static void check_members(const struct rule *rules, yajl_val o, struct tg_json_path *at,
    struct tg_problems *p);

static void
check_number(const struct rule *r, yajl_val v, const char *at, struct tg_problems *p)
{
	double d = YAJL_GET_DOUBLE(v);

	if ((r->flags & M_INT) && (!isfinite(d) || d != floor(d))) {
		tg_problems_add(p, at, "type", "must be an integer, not %.40s", v->u.number.r);
		return;
	}
	if (isfinite(d) && d >= r->lo && d <= r->hi && !((r->flags & M_OPEN) && d <= r->lo))
		return;
	tg_problems_add(p, at, "range", "must be %s %.15g and at most %.15g, not %.40s",
	    (r->flags & M_OPEN) ? "more than" : "at least", r->lo, r->hi, v->u.number.r);
}

static void
check_enum(const struct rule *r, yajl_val v, const char *at, struct tg_problems *p)
{
	const char *const *c;

	for (c = r->choices; YAJL_IS_STRING(v) && *c != NULL; c++)
		if (strcmp(v->u.string, *c) == 0)
			return;
	tg_problems_add(p, at, "enum", "must be one of %s, %s", r->choices[0], r->choices[1]);
}

/* One member v (may be NULL: absent) of an entry, at path at. */
static void
check_member(const struct rule *r, yajl_val v, struct tg_json_path *at, struct tg_problems *p)
{
	if (v == NULL) {
		if (r->flags & M_REQ)
			tg_problems_add(p, at->buf, "required", "is required");
		return;
	}
	switch (r->t) {
	case T_STR:
		if (!YAJL_IS_STRING(v) || v->u.string[0] == '\0')
			tg_problems_add(p, at->buf, "type", "must be a non-empty string");
		break;
	case T_NUM:
		if (!YAJL_IS_DOUBLE(v))
			tg_problems_add(p, at->buf, "type", "must be a number");
		else
			check_number(r, v, at->buf, p);
		break;
	case T_ENUM:
		check_enum(r, v, at->buf, p);
		break;
	case T_OBJ:
		if (!YAJL_IS_OBJECT(v))
			tg_problems_add(p, at->buf, "type", "must be an object");
		else
			check_members(r->sub, v, at, p);
		break;
	}
}

static void
check_members(const struct rule *rules, yajl_val o, struct tg_json_path *at,
    struct tg_problems *p)
{
	const struct rule *r;
	size_t mark;

	for (r = rules; r->name != NULL; r++) {
		mark = tg_json_path_push_key(at, r->name);
		check_member(r, tg_json_get(o, r->name), at, p);
		tg_json_path_pop(at, mark);
	}
}

/* vesselList or personnelList: the entries that are objects (the others
 * are structure problems, reported by case_check.c). */
static void
check_list(yajl_val c, const char *name, const struct rule *rules, struct tg_problems *p)
{
	yajl_val l = tg_json_get(c, name);
	struct tg_json_path at;
	size_t i, mark;

	if (l == NULL || !YAJL_IS_ARRAY(l))
		return;
	tg_json_path_init(&at, "");
	tg_json_path_push_key(&at, name);
	for (i = 0; i < l->u.array.len; i++) {
		if (!YAJL_IS_OBJECT(l->u.array.values[i]))
			continue;
		mark = tg_json_path_push_index(&at, i);
		check_members(rules, l->u.array.values[i], &at, p);
		tg_json_path_pop(&at, mark);
	}
	tg_json_path_cleanup(&at);
}

/* One fixable: the common members, the timing of its kind, an id not used
 * before on the same asset (ids maps the asset's ids seen so far). */
static void
check_fixable(const struct tg_case_rules *k, yajl_val fx, struct tg_map *ids,
    struct tg_json_path *at, struct tg_problems *p)
{
	const char *type = tg_json_get_str(fx, "fixableType"), *id = tg_json_get_str(fx, "id");
	size_t mark;

	check_members(fixable, fx, at, p);
	if (type != NULL && tg_case_listed(&k->om, type) && !tg_case_listed(&k->construction,
	    type))
		check_members(tg_case_listed(&k->corrective, type) ? corrective : planned, fx, at,
		    p);
	if (id == NULL || id[0] == '\0')
		return;
	if (tg_map_get(ids, id) != NULL) {
		mark = tg_json_path_push_key(at, "id");
		tg_problems_add(p, at->buf, "duplicate_id", "fixable id '%.64s' is used twice "
		    "on this asset", id);
		tg_json_path_pop(at, mark);
	} else {
		tg_map_put(ids, id, fx);
	}
}

static void
check_asset(const struct tg_case_rules *k, yajl_val fixes, struct tg_json_path *at,
    struct tg_problems *p)
{
	struct tg_map *ids = tg_map_new(NULL);
	size_t n, mark;

	for (n = 0; n < fixes->u.array.len; n++) {
		if (!YAJL_IS_OBJECT(fixes->u.array.values[n]))
			continue;
		mark = tg_json_path_push_index(at, n);
		check_fixable(k, fixes->u.array.values[n], ids, at, p);
		tg_json_path_pop(at, mark);
	}
	tg_map_free(ids);
}

static void
check_farm(const struct tg_case_rules *k, yajl_val farm, size_t i, struct tg_problems *p)
{
	yajl_val infras = tg_json_get(farm, "infrastructureList"), fixes;
	struct tg_json_path at;
	size_t j;

	if (infras == NULL || !YAJL_IS_ARRAY(infras))
		return;
	for (j = 0; j < infras->u.array.len; j++) {
		fixes = tg_json_get(infras->u.array.values[j], "fixable");
		if (fixes == NULL || !YAJL_IS_ARRAY(fixes))
			continue;
		tg_json_path_init(&at, "/windFarms");
		tg_json_path_push_index(&at, i);
		tg_json_path_push_key(&at, "infrastructureList");
		tg_json_path_push_index(&at, j);
		tg_json_path_push_key(&at, "fixable");
		check_asset(k, fixes, &at, p);
		tg_json_path_cleanup(&at);
	}
}

void
tg_case_entries_check(yajl_val c, const struct tg_case_rules *k, struct tg_problems *p)
{
	yajl_val farms = tg_json_get(c, "windFarms");
	size_t i;

	check_list(c, "vesselList", vessel, p);
	check_list(c, "personnelList", role, p);
	for (i = 0; farms != NULL && YAJL_IS_ARRAY(farms) && i < farms->u.array.len; i++)
		if (YAJL_IS_OBJECT(farms->u.array.values[i]))
			check_farm(k, farms->u.array.values[i], i, p);
}
