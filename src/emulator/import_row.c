/*
 * import_row.c - one row of an activity import; import.c calls it for each
 * row as the queue reaches it. A row is checked against the spec's part 2
 * fields (first failing check wins), then stored in the project overlay as
 * a new activity or over the current version of an existing one. The row
 * form renders a submitted row the way import results show it.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "tidegate/clock.h"
#include "tidegate/json.h"
#include "import.h"

enum kind { K_STR, K_DATE, K_STATUS, K_BOOL, K_LIST, K_MANPOWER };

#define F_REQUIRED	1
#define F_SITE		2	/* must name a site of the project */

struct field {
	const char *key;
	enum kind kind;
	int flags;
	size_t off;		/* of the member in struct emu_activity */
};

#define OFF(m) offsetof(struct emu_activity, m)

/*
 * In the order of the spec's table, which is the order of the checks. name
 * and type are not import fields, but exported records carry them and the
 * documented workflow re-imports edited exports, so they are kept.
 */
static const struct field fields[] = {
	{ "id", K_STR, F_REQUIRED, OFF(id) },
	{ "siteId", K_STR, F_REQUIRED | F_SITE, OFF(site_id) },
	{ "assetId", K_STR, 0, OFF(asset_id) },
	{ "startDate", K_DATE, 0, OFF(start_ms) },
	{ "endDate", K_DATE, 0, OFF(end_ms) },
	{ "activityCategory", K_STR, 0, OFF(category) },
	{ "status", K_STATUS, 0, OFF(status) },
	{ "workPackageId", K_STR, 0, OFF(work_package_id) },
	{ "additionalClientWork", K_BOOL, 0, OFF(additional_client_work) },
	{ "workOrderId", K_STR, 0, OFF(work_order_id) },
	{ "teams", K_LIST, 0, OFF(teams) },
	{ "personnelIds", K_LIST, 0, OFF(personnel_ids) },
	{ "manpower", K_MANPOWER, 0, 0 },
	{ "internalRemarks", K_STR, 0, OFF(internal_remarks) },
	{ "externalRemarks", K_STR, 0, OFF(external_remarks) },
	{ "name", K_STR, 0, OFF(name) },
	{ "type", K_STR, 0, OFF(type) },
};

const char *const emu_rowform_fields[EMU_ROWFORM_NFIELDS] = {
	"id", "siteId", "assetId", "subassemblyId", "componentId", "startDate", "startTime",
	"endDate", "endTime", "activityCategory", "type", "status", "workPackageId",
	"additionalClientWork", "voNumber", "voAgreedWith", "voSigned", "workOrderId", "teams",
	"personnelIds", "manpower", "internalRemarks", "externalRemarks", "dropOffTransportId",
	"pickupTransportId", "isLocked",
};

/* null and "" mean "no value", as "" does in the row form. */
static int
is_unset(yajl_val v)
{
	return v == NULL || YAJL_IS_NULL(v) || (YAJL_IS_STRING(v) && v->u.string[0] == '\0');
}

static const char *
type_name(yajl_val v)
{
	return YAJL_IS_ARRAY(v) ? "an array" : YAJL_IS_STRING(v) ? "a string" :
	    YAJL_IS_NUMBER(v) ? "a number" : YAJL_IS_NULL(v) ? "null" : "a boolean";
}

static int
is_status(const char *s)
{
	return strcmp(s, "PLANNED") == 0 || strcmp(s, "DISPATCHED") == 0 ||
	    strcmp(s, "COMPLETED") == 0;
}

/* yajl keeps duplicate keys; a team given twice has no single manpower. */
static const char *
manpower_problem(yajl_val v, const char **team)
{
	struct tg_map *seen;
	const char *problem = NULL;
	yajl_val n;
	size_t i;

	if (!YAJL_IS_OBJECT(v))
		return "must be an object of team names to integers";
	seen = tg_map_new(NULL);
	for (i = 0; i < v->u.object.len && problem == NULL; i++) {
		*team = v->u.object.keys[i];
		n = v->u.object.values[i];
		if (!YAJL_IS_INTEGER(n) || n->u.number.i < 0)
			problem = "must be a non-negative integer";
		else if (tg_map_get(seen, *team) != NULL)
			problem = "is given more than once";
		tg_map_put(seen, *team, (void *)1);
	}
	tg_map_free(seen);
	return problem;
}

static const char *
type_problem(const struct field *f, yajl_val v, const char **team)
{
	int64_t ms;
	size_t i;

	switch (f->kind) {
	case K_STR:
		return YAJL_IS_STRING(v) ? NULL : "must be a string";
	case K_DATE:
		return YAJL_IS_STRING(v) && tg_clock_parse_iso(v->u.string, &ms) == 0 ? NULL :
		    "must be an ISO 8601 UTC timestamp";
	case K_STATUS:
		return YAJL_IS_STRING(v) && is_status(v->u.string) ? NULL :
		    "must be one of PLANNED, DISPATCHED, COMPLETED";
	case K_BOOL:
		return YAJL_IS_TRUE(v) || YAJL_IS_FALSE(v) ? NULL : "must be a boolean";
	case K_LIST:
		for (i = 0; YAJL_IS_ARRAY(v) && i < v->u.array.len; i++)
			if (!YAJL_IS_STRING(v->u.array.values[i]))
				break;
		return YAJL_IS_ARRAY(v) && i == v->u.array.len ? NULL :
		    "must be an array of strings";
	default:
		return manpower_problem(v, team);
	}
}

/* The first problem of the row as a malloc'd message, or NULL. */
static char *
check_row(const struct emu_project *p, yajl_val row, size_t number)
{
	const struct field *f;
	const char *problem, *team;
	yajl_val v;
	size_t i;

	if (!YAJL_IS_OBJECT(row))
		return tg_xasprintf("Row %zu: must be a JSON object, not %s", number,
		    type_name(row));
	for (i = 0; i < TG_NELEM(fields); i++) {
		f = &fields[i];
		v = tg_json_get(row, f->key);
		if (is_unset(v)) {
			if (f->flags & F_REQUIRED)
				return tg_xasprintf("Row %zu: field '%s' is required", number,
				    f->key);
			continue;
		}
		team = NULL;
		if ((problem = type_problem(f, v, &team)) != NULL && team != NULL)
			return tg_xasprintf("Row %zu: field '%s' team '%s' %s", number, f->key,
			    team, problem);
		if (problem != NULL)
			return tg_xasprintf("Row %zu: field '%s' %s", number, f->key, problem);
		if ((f->flags & F_SITE) && !emu_data_site_exists(p, v->u.string))
			return tg_xasprintf("Row %zu: site '%s' does not exist in project '%s'",
			    number, v->u.string, p->cfg->id);
	}
	return NULL;
}

static void
set_list(struct tg_strlist *l, yajl_val v)
{
	size_t i;

	for (i = 0; i < l->n; i++)
		free(l->v[i]);
	free(l->v);
	l->v = NULL;
	l->n = v ? v->u.array.len : 0;
	if (l->n > 0)
		l->v = tg_xcalloc(l->n, sizeof(char *));
	for (i = 0; i < l->n; i++)
		l->v[i] = tg_xstrdup(v->u.array.values[i]->u.string);
}

static void
set_manpower(struct emu_activity *a, yajl_val v)
{
	size_t i;

	for (i = 0; i < a->nmanpower; i++)
		free(a->manpower[i].team);
	free(a->manpower);
	a->manpower = NULL;
	a->nmanpower = v ? v->u.object.len : 0;
	if (a->nmanpower > 0)
		a->manpower = tg_xcalloc(a->nmanpower, sizeof(*a->manpower));
	for (i = 0; i < a->nmanpower; i++) {
		a->manpower[i].team = tg_xstrdup(v->u.object.keys[i]);
		a->manpower[i].n = v->u.object.values[i]->u.number.i;
	}
}

/* Store a checked value; an unset one clears the field. */
static void
set_field(struct emu_activity *a, const struct field *f, yajl_val v)
{
	void *m = (char *)a + f->off;
	int unset = is_unset(v);

	switch (f->kind) {
	case K_STR:
	case K_STATUS:
		free(*(char **)m);
		*(char **)m = unset ? NULL : tg_xstrdup(v->u.string);
		break;
	case K_DATE:
		*(int64_t *)m = EMU_NO_TIME;
		if (!unset)
			(void)tg_clock_parse_iso(v->u.string, (int64_t *)m);
		break;
	case K_BOOL:
		*(int *)m = unset ? -1 : YAJL_IS_TRUE(v);
		break;
	case K_LIST:
		set_list(m, unset ? NULL : v);
		break;
	default:
		set_manpower(a, unset ? NULL : v);
		break;
	}
}

/* Fields the row leaves out keep their current values (a partial update). */
static enum emu_row_outcome
apply_row(struct emu_project *p, yajl_val row, int64_t now)
{
	struct emu_activity *a = tg_xcalloc(1, sizeof(*a));
	const char *id = tg_json_get_str(row, "id");
	enum emu_row_outcome outcome = EMU_ROW_UPDATED;
	yajl_val v;
	size_t i;

	if (emu_data_activity_get(p, id, a) != 0) {
		outcome = EMU_ROW_CREATED;
		a->id = tg_xstrdup(id);
		a->type = tg_xstrdup("NONE");
		a->start_ms = a->end_ms = EMU_NO_TIME;
		a->additional_client_work = -1;
		a->created_ms = now;
	}
	for (i = 0; i < TG_NELEM(fields); i++)
		if (strcmp(fields[i].key, "id") != 0 &&
		    (v = tg_json_get(row, fields[i].key)) != NULL)
			set_field(a, &fields[i], v);
	a->updated_ms = now;
	emu_data_activity_put(p, a);
	return outcome;
}

enum emu_row_outcome
emu_import_row(struct emu_project *p, yajl_val row, size_t number, int64_t now,
    char **message)
{
	if ((*message = check_row(p, row, number)) != NULL)
		return EMU_ROW_FAILED;
	return apply_row(p, row, now);
}

/* ---- row form ---- */

/* Flags read "true" or empty, as the spec says of additionalClientWork. */
static int
is_flag(const char *key)
{
	return strcmp(key, "additionalClientWork") == 0 || strcmp(key, "voSigned") == 0 ||
	    strcmp(key, "isLocked") == 0;
}

/*
 * Best-effort text of any value, so a row that failed for a wrong type
 * still shows what was sent: arrays comma-joined, objects as key:value
 * pairs (the manpower form). Deep nesting is cut off rather than recursed.
 */
static void
text(struct evbuffer *b, yajl_val v, int flag, int depth)
{
	size_t i;

	if (v == NULL || depth > 8)
		return;
	if (YAJL_IS_STRING(v))
		evbuffer_add(b, v->u.string, strlen(v->u.string));
	else if (YAJL_IS_NUMBER(v))
		evbuffer_add(b, v->u.number.r, strlen(v->u.number.r));
	else if (YAJL_IS_TRUE(v))
		evbuffer_add(b, "true", 4);
	else if (YAJL_IS_FALSE(v) && !flag)
		evbuffer_add(b, "false", 5);
	for (i = 0; YAJL_IS_ARRAY(v) && i < v->u.array.len; i++) {
		if (i > 0)
			evbuffer_add(b, ",", 1);
		text(b, v->u.array.values[i], flag, depth + 1);
	}
	for (i = 0; YAJL_IS_OBJECT(v) && i < v->u.object.len; i++) {
		evbuffer_add_printf(b, "%s%s:", i > 0 ? "," : "", v->u.object.keys[i]);
		text(b, v->u.object.values[i], flag, depth + 1);
	}
}

/* Day/month/year or hour:minute (UTC) of a timestamp field; what was sent
 * when it is not a timestamp (startTime/endTime then come from the row). */
static void
date_text(struct evbuffer *b, yajl_val row, const char *key, const char *time_key)
{
	yajl_val v = tg_json_get(row, key);
	int y, mo, d, h, mi, s;
	int64_t ms;

	if (v != NULL && YAJL_IS_STRING(v) && tg_clock_parse_iso(v->u.string, &ms) == 0) {
		tg_clock_civil(ms, &y, &mo, &d, &h, &mi, &s);
		if (time_key != NULL)
			evbuffer_add_printf(b, "%02d:%02d", h, mi);
		else
			evbuffer_add_printf(b, "%02d/%02d/%04d", d, mo, y);
		return;
	}
	text(b, time_key ? tg_json_get(row, time_key) : v, 0, 0);
}

char *
emu_rowform(yajl_val row)
{
	struct evbuffer *b = evbuffer_new();
	const char *k;
	size_t i, len;
	char *out;

	for (i = 0; i < EMU_ROWFORM_NFIELDS; i++) {
		k = emu_rowform_fields[i];
		if (strcmp(k, "startDate") == 0 || strcmp(k, "endDate") == 0)
			date_text(b, row, k, NULL);
		else if (strcmp(k, "startTime") == 0)
			date_text(b, row, "startDate", k);
		else if (strcmp(k, "endTime") == 0)
			date_text(b, row, "endDate", k);
		else
			text(b, tg_json_get(row, k), is_flag(k), 0);
		evbuffer_add(b, "", 1);
	}
	len = evbuffer_get_length(b);
	out = tg_xmalloc(len);
	evbuffer_remove(b, out, len);
	evbuffer_free(b);
	return out;
}

const char *
emu_rowform_field(const char *form, size_t i)
{
	while (i-- > 0)
		form += strlen(form) + 1;
	return form;
}
