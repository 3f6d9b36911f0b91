/*
 * export_check.c - checks the body of POST /export/<kind> against spec
 * tables E1-E7 before anything reaches the vendor, and rewrites it in the
 * vendor's spelling (projectID -> projectId, callbackURL -> callbackUrl,
 * status/statuses). Every problem is collected in one pass so a caller
 * fixes its request in one round trip. The gateway's export handlers call
 * tg_export_check; the route table calls tg_export_kind_known.
 *
 * Bodies are small, so this works on a yajl tree: one walk over the
 * members checks each value and generates the normalised body as it goes.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/http.h>

#include "tidegate/clock.h"
#include "tidegate/json.h"
#include "tidegate/dex.h"

#define MAX_MEMBERS	16	/* common members plus the longest table (E4) */
#define NCOMMON		3
#define CLIP		64	/* bytes of a caller's value echoed in a message */
#define ISO_EXAMPLE	"2024-01-31T00:00:00Z"

enum mtype {
	M_ID,		/* required non-empty string */
	M_URL,		/* absolute http(s) URL */
	M_DATE,		/* ISO 8601 timestamp with a zone */
	M_STRINGS,	/* array of strings */
	M_ENUMS,	/* array of strings from allowed */
};

/* Sent under the status spelling configured for work packages. */
#define MF_WP_FIELD	0x1

struct member {
	const char *name;		/* the spelling sent to the vendor */
	const char *alias;		/* another spelling accepted, or NULL */
	enum mtype type;
	const char *const *allowed;	/* M_ENUMS: NULL-terminated */
	unsigned flags;
};

struct kind {
	const char *name;
	struct member m[MAX_MEMBERS - NCOMMON];	/* ends at the first NULL name */
};

static const char *const act_statuses[] = { "PLANNED", "DISPATCHED", "COMPLETED", NULL };
static const char *const ts_statuses[] = { "DRAFT", "PENDING", "SIGNED", "REJECTED", NULL };
static const char *const wp_statuses[] = { "NONE", "PLANNED", "CONFIRMED", "FINISHED",
	"CANCELED", NULL };

/* Index 0 is projectId: the required-member check relies on it. The
 * work-orders and timesheets tables of the spec spell these projectID and
 * callbackURL; both spellings go out as the common one. */
static const struct member common[NCOMMON] = {
	{ "projectId", "projectID", M_ID, NULL, 0 },
	{ "callbackUrl", "callbackURL", M_URL, NULL, 0 },
	{ "changedSince", NULL, M_DATE, NULL, 0 },
};

static const struct kind kinds[] = {
	{ "activities", {		/* E1 */
		{ "workPackages", NULL, M_STRINGS, NULL, 0 },
		{ "workOrders", NULL, M_STRINGS, NULL, 0 },
		{ "sites", NULL, M_STRINGS, NULL, 0 },
		{ "assets", NULL, M_STRINGS, NULL, 0 },
		{ "names", NULL, M_STRINGS, NULL, 0 },
		{ "activities", NULL, M_STRINGS, NULL, 0 },
		{ "startDate", NULL, M_DATE, NULL, 0 },
		{ "endDate", NULL, M_DATE, NULL, 0 },
		{ "statuses", "status", M_ENUMS, act_statuses, 0 },
	} },
	{ "activity-categories", {	/* E2 */
		{ "activityCategories", NULL, M_STRINGS, NULL, 0 },
		{ "names", NULL, M_STRINGS, NULL, 0 },
		{ "workPackages", NULL, M_STRINGS, NULL, 0 },
	} },
	{ "personnel", {		/* E3 */
		{ "names", NULL, M_STRINGS, NULL, 0 },
		{ "emails", NULL, M_STRINGS, NULL, 0 },
		{ "roles", NULL, M_STRINGS, NULL, 0 },
		{ "departments", NULL, M_STRINGS, NULL, 0 },
		{ "teams", NULL, M_STRINGS, NULL, 0 },
		{ "workPackages", NULL, M_STRINGS, NULL, 0 },
	} },
	{ "timesheets", {		/* E4 */
		{ "timesheets", NULL, M_STRINGS, NULL, 0 },
		{ "names", NULL, M_STRINGS, NULL, 0 },
		{ "statuses", "status", M_ENUMS, ts_statuses, 0 },
		{ "dateFrom", NULL, M_DATE, NULL, 0 },
		{ "dateTo", NULL, M_DATE, NULL, 0 },
		{ "submittedBy", NULL, M_STRINGS, NULL, 0 },
		{ "approvedBy", NULL, M_STRINGS, NULL, 0 },
		{ "timeEntries", NULL, M_STRINGS, NULL, 0 },
		{ "activities", NULL, M_STRINGS, NULL, 0 },
		{ "workPackages", NULL, M_STRINGS, NULL, 0 },
		{ "personnel", NULL, M_STRINGS, NULL, 0 },
	} },
	{ "work-order-sequences", {	/* E5 */
		{ "workOrderSequences", NULL, M_STRINGS, NULL, 0 },
		{ "names", NULL, M_STRINGS, NULL, 0 },
	} },
	{ "work-orders", {		/* E6 */
		{ "workOrders", NULL, M_STRINGS, NULL, 0 },
		{ "names", NULL, M_STRINGS, NULL, 0 },
		{ "types", NULL, M_STRINGS, NULL, 0 },
		{ "priorities", NULL, M_STRINGS, NULL, 0 },
		{ "workPackages", NULL, M_STRINGS, NULL, 0 },
		{ "workOrderSequences", NULL, M_STRINGS, NULL, 0 },
	} },
	{ "work-packages", {		/* E7: the table says status, its example statuses */
		{ "workPackages", NULL, M_STRINGS, NULL, 0 },
		{ "names", NULL, M_STRINGS, NULL, 0 },
		{ "types", NULL, M_STRINGS, NULL, 0 },
		{ "status", "statuses", M_ENUMS, wp_statuses, MF_WP_FIELD },
		{ "countries", NULL, M_STRINGS, NULL, 0 },
		{ "assetTypes", NULL, M_STRINGS, NULL, 0 },
		{ "startDate", NULL, M_DATE, NULL, 0 },
		{ "endDate", NULL, M_DATE, NULL, 0 },
	} },
};

/* One check of one body. */
struct check {
	const struct tg_export_opts *o;
	struct tg_problems *p;
	yajl_gen g;
	yajl_gen g2;				/* the same without callbackUrl, or NULL */
	const char *callback;			/* the callbackUrl value sent, or NULL */
	const struct member *m[MAX_MEMBERS];	/* common, then the kind's */
	size_t nm;
	const char *given[MAX_MEMBERS];		/* caller's spelling of a non-null value */
	const char *nulled[MAX_MEMBERS];	/* caller's spelling of a null */
	const char *cand[2 * MAX_MEMBERS];	/* every accepted spelling, for hints */
	size_t ncand;
};

/* ---- messages ---- */

/* The JSON Pointer of a member (name NULL: the body), with an element
 * index when idx >= 0; on the stack unless the name is long. */
static char *
pointer(const char *name, long idx, char *buf, size_t size)
{
	size_t need = (name != NULL ? 2 * strlen(name) : 0) + 24;
	char *out = need <= size ? buf : tg_xmalloc(need), *o = out;

	if (name != NULL) {
		*o++ = '/';
		for (; *name != '\0'; name++) {
			if (*name == '~' || *name == '/') {
				*o++ = '~';
				*o++ = *name == '~' ? '0' : '1';
			} else {
				*o++ = *name;
			}
		}
	}
	if (idx >= 0)
		o += snprintf(o, 22, "/%ld", idx);
	*o = '\0';
	return out;
}

static void report(struct check *c, const char *name, long idx, const char *code,
    const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void
report(struct check *c, const char *name, long idx, const char *code, const char *fmt, ...)
{
	char pbuf[128], msg[512], *path;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	path = pointer(name, idx, pbuf, sizeof(pbuf));
	tg_problems_add(c->p, path, code, "%s", msg);
	if (path != pbuf)
		free(path);
}

/* A caller's value as echoed in a message: a megabyte of bad date must not
 * become a megabyte of message, and the cut must not split a UTF-8 sequence. */
static const char *
clip(const char *s, char buf[CLIP + 4])
{
	size_t n;

	if (strnlen(s, CLIP + 1) <= CLIP)
		return s;
	for (n = CLIP; n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80; n--)
		;
	memcpy(buf, s, n);
	memcpy(buf + n, "...", 4);
	return buf;
}

static const char *
jtype(yajl_val v)
{
	switch (v->type) {
	case yajl_t_string:
		return "a string";
	case yajl_t_number:
		return "a number";
	case yajl_t_object:
		return "an object";
	case yajl_t_array:
		return "an array";
	case yajl_t_true:
	case yajl_t_false:
		return "a boolean";
	default:
		return "null";
	}
}

/* "A, B, C" of a NULL-terminated list (short lists, fixed buffer). */
static const char *
join(const char *const *list, char *buf, size_t size)
{
	size_t i, n = 0;

	buf[0] = '\0';
	for (i = 0; list[i] != NULL && n < size; i++)
		n += (size_t)snprintf(buf + n, size - n, "%s%s", i == 0 ? "" : ", ", list[i]);
	return buf;
}

/* ---- values ---- */

static int
http_url(const char *s)
{
	struct evhttp_uri *u = evhttp_uri_parse_with_flags(s, 0);
	const char *scheme, *host;
	int ok;

	if (u == NULL)
		return 0;
	scheme = evhttp_uri_get_scheme(u);
	host = evhttp_uri_get_host(u);
	ok = scheme != NULL && (strcasecmp(scheme, "http") == 0 ||
	    strcasecmp(scheme, "https") == 0) && host != NULL && *host != '\0';
	evhttp_uri_free(u);
	return ok;
}

static void
check_strings(struct check *c, const struct member *m, const char *name, yajl_val v)
{
	char cbuf[CLIP + 4], set[128];
	yajl_val e;
	size_t i;

	if (!YAJL_IS_ARRAY(v)) {
		report(c, name, -1, "type", "%s must be an array of strings, not %s", name,
		    jtype(v));
		return;
	}
	for (i = 0; i < v->u.array.len; i++) {
		e = v->u.array.values[i];
		if (!YAJL_IS_STRING(e))
			report(c, name, (long)i, "type", "%s[%zu] must be a string, not %s",
			    name, i, jtype(e));
		else if (m->type == M_ENUMS && !tg_strv_contains(m->allowed, e->u.string))
			report(c, name, (long)i, "enum", "'%s' is not one of %s",
			    clip(e->u.string, cbuf), join(m->allowed, set, sizeof(set)));
	}
}

/* 0 when the member goes out as given; 1 when it is dropped as absent. */
static int
check_value(struct check *c, const struct member *m, const char *name, yajl_val v)
{
	char cbuf[CLIP + 4];
	int64_t ms;

	if (m->type == M_STRINGS || m->type == M_ENUMS) {
		check_strings(c, m, name, v);
		return 0;
	}
	if (!YAJL_IS_STRING(v)) {
		report(c, name, -1, "type", "%s must be a string%s, not %s", name,
		    m->type == M_DATE ? " (an ISO 8601 UTC timestamp, e.g. " ISO_EXAMPLE ")" :
		    m->type == M_URL ? " (an http:// or https:// URL)" : "", jtype(v));
		return 0;
	}
	switch (m->type) {
	case M_ID:
		if (*v->u.string == '\0')
			report(c, name, -1, "empty", "%s must not be empty", name);
		return 0;
	case M_URL:
		/* the vendor takes an empty callbackUrl as none, so legacy tools send it */
		if (*v->u.string == '\0')
			return 1;
		if (!http_url(v->u.string))
			report(c, name, -1, "url", "'%s' is not an absolute http:// or https:// "
			    "URL with a host", clip(v->u.string, cbuf));
		return 0;
	default:
		if (tg_clock_parse_iso(v->u.string, &ms) != 0)
			report(c, name, -1, "date", "'%s' is not an ISO 8601 UTC timestamp "
			    "(e.g. " ISO_EXAMPLE ")", clip(v->u.string, cbuf));
		return 0;
	}
}

/* ---- members ---- */

static const char *
wp_field(const struct tg_export_opts *o)
{
	if (o != NULL && o->wp_status_field != NULL && strcmp(o->wp_status_field, "statuses") == 0)
		return "statuses";
	return "status";
}

static void
check_init(struct check *c, const struct kind *k, const struct tg_export_opts *o,
    struct tg_problems *p)
{
	const struct member *m;
	size_t i;

	memset(c, 0, sizeof(*c));
	c->o = o;
	c->p = p;
	for (i = 0; i < NCOMMON; i++)
		c->m[c->nm++] = &common[i];
	for (m = k->m; m < k->m + TG_NELEM(k->m) && m->name != NULL; m++)
		c->m[c->nm++] = m;
	/* names first: on a tie the hint is the vendor's spelling */
	for (i = 0; i < c->nm; i++)
		c->cand[c->ncand++] = c->m[i]->name;
	for (i = 0; i < c->nm; i++)
		if (c->m[i]->alias != NULL)
			c->cand[c->ncand++] = c->m[i]->alias;
}

/* Index of the member spelt name, or -1. */
static int
member_find(const struct check *c, const char *name)
{
	size_t i;

	for (i = 0; i < c->nm; i++)
		if (strcmp(c->m[i]->name, name) == 0 ||
		    (c->m[i]->alias != NULL && strcmp(c->m[i]->alias, name) == 0))
			return (int)i;
	return -1;
}

/* The vendor ignores members it does not know, so a near miss of a filter
 * would silently widen the export: that is always a problem. */
static void
unknown(struct check *c, const char *name)
{
	const char *hint = tg_did_you_mean(name, c->cand, c->ncand);
	char cbuf[CLIP + 4];

	if (hint != NULL)
		report(c, name, -1, "unknown_field", "unknown field '%s' (did you mean '%s'?)",
		    clip(name, cbuf), hint);
	else if (c->o != NULL && c->o->strict)
		report(c, name, -1, "unknown_field", "unknown field '%s'", clip(name, cbuf));
}

/* 1 when the member goes out, 0 when it is dropped. */
static int
check_member(struct check *c, int i, const char *name, yajl_val v)
{
	const char *first = c->given[i];

	if (YAJL_IS_NULL(v)) {
		c->nulled[i] = name;
		return 0;
	}
	c->given[i] = name;
	if (first != NULL && strcmp(first, name) == 0)
		report(c, name, -1, "duplicate", "'%s' given more than once", name);
	else if (first != NULL)
		report(c, name, -1, "duplicate", "both '%s' and '%s' given; send one", first,
		    name);
	return !check_value(c, c->m[i], name, v);
}

static const char *
sent_name(const struct check *c, const struct member *m)
{
	return (m->flags & MF_WP_FIELD) ? wp_field(c->o) : m->name;
}

/* One member into the normalised body, and into the stripped one unless
 * it is the callbackUrl (whose value is kept aside). */
static void
emit(struct check *c, const char *name, yajl_val v)
{
	tg_json_str(c->g, name);
	tg_json_gen_val(c->g, v);
	if (strcmp(name, common[1].name) == 0 && YAJL_IS_STRING(v)) {
		c->callback = YAJL_GET_STRING(v);
		return;
	}
	if (c->g2 != NULL) {
		tg_json_str(c->g2, name);
		tg_json_gen_val(c->g2, v);
	}
}

static void
check_members(struct check *c, yajl_val body)
{
	const char *name;
	size_t j;
	int i;

	yajl_gen_map_open(c->g);
	if (c->g2 != NULL)
		yajl_gen_map_open(c->g2);
	for (j = 0; j < body->u.object.len; j++) {
		name = body->u.object.keys[j];
		if ((i = member_find(c, name)) < 0) {
			unknown(c, name);
			emit(c, name, body->u.object.values[j]);
		} else if (check_member(c, i, name, body->u.object.values[j])) {
			emit(c, sent_name(c, c->m[i]), body->u.object.values[j]);
		}
	}
	yajl_gen_map_close(c->g);
	if (c->g2 != NULL)
		yajl_gen_map_close(c->g2);
	if (c->given[0] == NULL)
		report(c, c->nulled[0] != NULL ? c->nulled[0] : common[0].name, -1, "required",
		    "%s is required", common[0].name);
}

/* ---- entry points ---- */

static const struct kind *
kind_find(const char *name)
{
	size_t i;

	for (i = 0; name != NULL && i < TG_NELEM(kinds); i++)
		if (strcmp(kinds[i].name, name) == 0)
			return &kinds[i];
	return NULL;
}

int
tg_export_kind_known(const char *kind)
{
	return kind_find(kind) != NULL;
}

/* The kinds' names, NULL-terminated, into names. */
static void
kind_names(const char *names[TG_NELEM(kinds) + 1])
{
	size_t i;

	for (i = 0; i < TG_NELEM(kinds); i++)
		names[i] = kinds[i].name;
	names[i] = NULL;
}

const char *
tg_export_kind_hint(const char *kind)
{
	const char *names[TG_NELEM(kinds) + 1];

	if (kind == NULL || kind_find(kind) != NULL)
		return NULL;
	kind_names(names);
	return tg_did_you_mean(kind, names, TG_NELEM(kinds));
}

static void
unknown_kind(struct check *c, const char *kind)
{
	const char *names[TG_NELEM(kinds) + 1], *hint = tg_export_kind_hint(kind);
	char cbuf[CLIP + 4], list[256];

	kind_names(names);
	report(c, NULL, -1, "unknown_kind", "unknown export kind '%s' (%s%s%sone of %s)",
	    clip(kind != NULL ? kind : "", cbuf), hint ? "did you mean '" : "",
	    hint ? hint : "", hint ? "'? " : "", join(names, list, sizeof(list)));
}

static void
take_output(yajl_gen g, char **out, size_t *outlen)
{
	const unsigned char *buf;
	size_t len;

	yajl_gen_get_buf(g, &buf, &len);
	*out = tg_xmalloc(len + 1);
	memcpy(*out, buf, len);
	(*out)[len] = '\0';
	*outlen = len;
}

void
tg_export_out_cleanup(struct tg_export_out *out)
{
	free(out->body);
	free(out->stripped);
	memset(out, 0, sizeof(*out));
}

int
tg_export_check_tree(const char *kind, yajl_val root, const struct tg_export_opts *o,
    int want_stripped, struct tg_export_out *out, struct tg_problems *p)
{
	const struct kind *k = kind_find(kind);
	size_t before = p->total;
	struct check c;

	memset(out, 0, sizeof(*out));
	memset(&c, 0, sizeof(c));
	c.p = p;
	if (k == NULL)
		unknown_kind(&c, kind);
	if (root != NULL && !YAJL_IS_OBJECT(root))
		report(&c, NULL, -1, "type", "body must be a JSON object, not %s", jtype(root));
	if (k == NULL || root == NULL || !YAJL_IS_OBJECT(root))
		return -1;
	check_init(&c, k, o, p);
	c.g = tg_json_gen_new();
	c.g2 = want_stripped ? tg_json_gen_new() : NULL;
	check_members(&c, root);
	if (p->total == before) {
		take_output(c.g, &out->body, &out->len);
		if (c.g2 != NULL)
			take_output(c.g2, &out->stripped, &out->stripped_len);
		out->callback = c.callback;
	}
	yajl_gen_free(c.g);
	if (c.g2 != NULL)
		yajl_gen_free(c.g2);
	return p->total == before ? 0 : -1;
}

int
tg_export_check(const char *kind, const char *body, size_t len,
    const struct tg_export_opts *o, char **out, size_t *outlen, struct tg_problems *p)
{
	struct tg_export_out eo;
	yajl_val root;
	struct tg_err err;
	int rc;

	*out = NULL;
	*outlen = 0;
	root = tg_json_parse(body != NULL ? body : "", body != NULL ? len : 0, &err);
	if (root == NULL) {
		if (kind_find(kind) == NULL)
			(void)tg_export_check_tree(kind, NULL, o, 0, &eo, p);
		tg_problems_add(p, "", "json", "%s", err.msg);
		return -1;
	}
	rc = tg_export_check_tree(kind, root, o, 0, &eo, p);
	*out = eo.body;
	*outlen = eo.len;
	yajl_tree_free(root);
	return rc;
}
