/*
 * export.c - the data exchange exports. POST /public/v1/export/<kind>
 * checks the filters of spec tables E1-E7 into a job under a new
 * correlationId; GET /public/export answers 202 until the job is ready,
 * then streams the matching records as one JSON array, export.chunk_records
 * at a time, generating a chunk only once the previous one was written, so
 * a million records never sit in memory. A job with a callbackUrl is also
 * POSTed there when it becomes ready. server.c routes here; tg_emu_free
 * calls emu_exports_free. With data_dir, a job is kept as its request and
 * times (store.c) and regenerated from them at start (emu_exports_load).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/http.h>

#include "tidegate/frontdoor.h"
#include "tidegate/http.h"
#include "tidegate/ids.h"
#include "tidegate/json.h"
#include "tidegate/log.h"
#include "emu.h"

/* A reply chunk scans at most this many times chunk_records candidates, so
 * a filter that matches little cannot hold the loop for a whole scan. */
#define SCAN_SLICE		16
#define CALLBACK_TIMEOUT_S	10
#define EXPORTS_DIR		"exports"

enum fop { F_SET, F_GE, F_LE };

/* A request member and the record field it narrows. */
struct fdef {
	const char *name;
	const char *field;
	enum fop op;
	const char *const *allowed;	/* F_SET enum, NULL-terminated; NULL: any string */
};

struct kind {
	const char *path;
	enum emu_kind k;
	const struct fdef *defs;
	size_t ndefs;
};

struct flt {
	const struct fdef *def;
	struct tg_map *set;	/* F_SET: the accepted values */
	int64_t t;		/* F_GE, F_LE */
};

/* A requested export; referenced by emu->exports and by its open streams. */
struct emu_export {
	char id[TG_UUID_LEN];
	int refs;
	struct tg_emu *emu;
	const struct kind *kind;
	const struct emu_project *p;
	int64_t ready_ms;
	struct flt *f;
	size_t nf;
	char *callback;
	int callback_sent;	/* the delivery was attempted (it is not repeated) */
	struct event *timer;	/* fires the callback delivery */
	yajl_val request;	/* the POSTed body, kept for data_dir */
};

/* A walk over the candidate records of a job. */
struct cursor {
	struct emu_export *job;
	long long i;		/* next generated record */
	size_t j;		/* next imported activity (p->new_ids) */
	struct emu_rec rec;
	struct emu_activity view;
	struct emu_activity_buf abuf;
};

/* An export on its way out: a reply to GET /export, or a callback POST. */
struct emu_stream {
	struct emu_stream *next;
	struct emu_export *job;
	int delivery;
	struct evhttp_request *req;	/* reply: the GET being answered */
	struct evhttp_connection *conn;	/* reply: the client's; delivery: ours */
	struct evdns_base *dns;		/* delivery */
	struct event *ev;		/* reply: resume a scan; delivery: reap */
	char *dest;			/* delivery: host:port, for the log */
	yajl_gen g;
	struct evbuffer *buf;
	struct cursor cur;
	long long records;
};

static const char *const act_statuses[] = { "PLANNED", "DISPATCHED", "COMPLETED", NULL };
static const char *const ts_statuses[] = { "DRAFT", "PENDING", "SIGNED", "REJECTED", NULL };
static const char *const wp_statuses[] = { "NONE", "PLANNED", "CONFIRMED", "FINISHED",
	"CANCELED", NULL };

static const struct fdef common[] = {
	{ "changedSince", "updatedAt", F_GE, NULL },
};

static const struct fdef e1[] = {
	{ "workPackages", "workPackageId", F_SET, NULL },
	{ "workOrders", "workOrderId", F_SET, NULL },
	{ "sites", "siteId", F_SET, NULL },
	{ "assets", "assetId", F_SET, NULL },
	{ "names", "name", F_SET, NULL },
	{ "activities", "id", F_SET, NULL },
	{ "startDate", "startDate", F_GE, NULL },
	{ "endDate", "endDate", F_GE, NULL },	/* sic: E1 says "ending on or after" */
	{ "statuses", "status", F_SET, act_statuses },
	{ "status", "status", F_SET, act_statuses },
};

static const struct fdef e2[] = {
	{ "activityCategories", "id", F_SET, NULL },
	{ "names", "name", F_SET, NULL },
	{ "workPackages", "workPackageIds", F_SET, NULL },
};

static const struct fdef e3[] = {
	{ "names", "name", F_SET, NULL },
	{ "emails", "email", F_SET, NULL },
	{ "roles", "role", F_SET, NULL },
	{ "departments", "department", F_SET, NULL },
	{ "teams", "teams", F_SET, NULL },
	{ "workPackages", "workPackageIds", F_SET, NULL },
};

static const struct fdef e4[] = {
	{ "timesheets", "id", F_SET, NULL },
	{ "names", "name", F_SET, NULL },
	{ "statuses", "status", F_SET, ts_statuses },
	{ "status", "status", F_SET, ts_statuses },
	{ "dateFrom", "createdAt", F_GE, NULL },
	{ "dateTo", "createdAt", F_LE, NULL },
	{ "submittedBy", "submittedBy", F_SET, NULL },
	{ "approvedBy", "approvedBy", F_SET, NULL },
	{ "timeEntries", "timeEntries", F_SET, NULL },
	{ "activities", "activityIds", F_SET, NULL },
	{ "workPackages", "workPackageIds", F_SET, NULL },
	{ "personnel", "personnelIds", F_SET, NULL },
};

static const struct fdef e5[] = {
	{ "workOrderSequences", "id", F_SET, NULL },
	{ "names", "name", F_SET, NULL },
};

static const struct fdef e6[] = {
	{ "workOrders", "id", F_SET, NULL },
	{ "names", "name", F_SET, NULL },
	{ "types", "type", F_SET, NULL },
	{ "priorities", "priority", F_SET, NULL },
	{ "workPackages", "workPackageId", F_SET, NULL },
	{ "workOrderSequences", "workOrderSequenceId", F_SET, NULL },
};

static const struct fdef e7[] = {
	{ "workPackages", "id", F_SET, NULL },
	{ "names", "name", F_SET, NULL },
	{ "types", "type", F_SET, NULL },
	{ "status", "status", F_SET, wp_statuses },
	{ "statuses", "status", F_SET, wp_statuses },
	{ "countries", "country", F_SET, NULL },
	{ "assetTypes", "assetType", F_SET, NULL },
	{ "startDate", "startDate", F_GE, NULL },
	{ "endDate", "endDate", F_LE, NULL },
};

static const struct kind kinds[] = {
	{ "activities", EMU_K_ACTIVITY, e1, TG_NELEM(e1) },
	{ "activity-categories", EMU_K_CATEGORY, e2, TG_NELEM(e2) },
	{ "personnel", EMU_K_PERSONNEL, e3, TG_NELEM(e3) },
	{ "timesheets", EMU_K_TIMESHEET, e4, TG_NELEM(e4) },
	{ "work-order-sequences", EMU_K_WOS, e5, TG_NELEM(e5) },
	{ "work-orders", EMU_K_WO, e6, TG_NELEM(e6) },
	{ "work-packages", EMU_K_WP, e7, TG_NELEM(e7) },
};

static char present;	/* value of set members: the map needs a non-NULL one */

static const struct timeval at_once = { 0, 0 };

/* ---- jobs ---- */

static struct emu_export *
job_new(struct tg_emu *emu, const struct kind *k)
{
	struct emu_export *job = tg_xcalloc(1, sizeof(*job));

	job->refs = 1;
	job->emu = emu;
	job->kind = k;
	tg_id_uuid4(job->id);
	return job;
}

static void
job_unref(struct emu_export *job)
{
	size_t i;

	if (job == NULL || --job->refs > 0)
		return;
	for (i = 0; i < job->nf; i++)
		tg_map_free(job->f[i].set);
	free(job->f);
	free(job->callback);
	yajl_tree_free(job->request);
	if (job->timer != NULL)
		event_free(job->timer);
	free(job);
}

static int
expired(const struct emu_export *job, int64_t now)
{
	return now >= job->ready_ms + job->emu->cfg->export_expiry;
}

/* Expired jobs are dropped here and on GET, so unread ones do not pile up. */
static void
sweep(struct tg_emu *emu, int64_t now)
{
	const char *k;
	void *v;
	size_t pos = 0;

	while (tg_map_next(emu->exports, &pos, &k, &v)) {
		if (expired(v, now)) {
			emu_store_del(emu, EXPORTS_DIR, k);
			tg_map_del(emu->exports, k);
			job_unref(v);
		}
	}
}

/* ---- request parsing ---- */

static void
enum_msg(char *msg, size_t len, const struct fdef *d, const char *bad)
{
	const char *const *a;
	size_t n;

	n = (size_t)snprintf(msg, len, "%s: '%.40s' is not one of", d->name, bad);
	for (a = d->allowed; *a != NULL && n < len; a++)
		n += (size_t)snprintf(msg + n, len - n, "%s %s", a == d->allowed ? "" : ",", *a);
}

static int
parse_set(const struct fdef *d, yajl_val v, struct flt *f, char *msg, size_t len)
{
	size_t i;

	if (!YAJL_IS_ARRAY(v))
		goto bad;
	for (i = 0; i < v->u.array.len; i++) {
		if (!YAJL_IS_STRING(v->u.array.values[i]))
			goto bad;
		if (d->allowed && !tg_strv_contains(d->allowed, v->u.array.values[i]->u.string)) {
			enum_msg(msg, len, d, v->u.array.values[i]->u.string);
			return -1;
		}
	}
	if (v->u.array.len == 0)
		return 0;	/* an empty list filters nothing */
	f->def = d;
	f->set = tg_map_new(NULL);
	for (i = 0; i < v->u.array.len; i++)
		tg_map_put(f->set, v->u.array.values[i]->u.string, &present);
	return 0;
bad:
	snprintf(msg, len, "%s must be an array of strings", d->name);
	return -1;
}

static int
parse_filters(struct emu_export *job, yajl_val body, const struct fdef *defs, size_t n,
    char *msg, size_t len)
{
	struct flt f;
	yajl_val v;
	size_t i;

	for (i = 0; i < n; i++) {
		v = tg_json_get(body, defs[i].name);
		if (v == NULL || YAJL_IS_NULL(v))
			continue;
		memset(&f, 0, sizeof(f));
		if (defs[i].op == F_SET) {
			if (parse_set(&defs[i], v, &f, msg, len) != 0)
				return -1;
		} else if (!YAJL_IS_STRING(v) || tg_clock_parse_iso(v->u.string, &f.t) != 0) {
			snprintf(msg, len, "%s must be an ISO 8601 timestamp with a time zone, "
			    "e.g. 2024-01-01T00:00:00Z", defs[i].name);
			return -1;
		} else {
			f.def = &defs[i];
		}
		if (f.def == NULL)
			continue;
		job->f = tg_xrealloc(job->f, (job->nf + 1) * sizeof(f));
		job->f[job->nf++] = f;
	}
	return 0;
}

/* A string member under either spelling; *bad when present but not a string. */
static const char *
member_str(yajl_val body, const char *name, const char *alt, int *bad)
{
	yajl_val v = tg_json_get(body, name);

	if (v == NULL || YAJL_IS_NULL(v))
		v = tg_json_get(body, alt);
	if (v == NULL || YAJL_IS_NULL(v))
		return NULL;
	if (!YAJL_IS_STRING(v)) {
		*bad = 1;
		return NULL;
	}
	return v->u.string;
}

static int
http_url(const char *s)
{
	struct evhttp_uri *u = evhttp_uri_parse(s);
	const char *scheme, *host;
	int ok;

	if (u == NULL)
		return 0;
	scheme = evhttp_uri_get_scheme(u);
	host = evhttp_uri_get_host(u);
	ok = scheme != NULL && strcasecmp(scheme, "http") == 0 && host != NULL && *host != '\0';
	evhttp_uri_free(u);
	return ok;
}

/* Fill job from the body; 0, or the status to answer with msg. */
static int
job_parse(struct tg_emu *emu, struct emu_export *job, yajl_val body, char *msg, size_t len)
{
	const char *pid, *cb;
	int bad = 0;

	pid = member_str(body, "projectId", "projectID", &bad);
	if (pid == NULL || *pid == '\0') {
		snprintf(msg, len, "projectId is required (a non-empty string)");
		return 400;
	}
	cb = member_str(body, "callbackUrl", "callbackURL", &bad);
	if (bad || (cb != NULL && *cb != '\0' && !http_url(cb))) {
		snprintf(msg, len, "callbackUrl must be an absolute http:// URL");
		return 400;
	}
	if (parse_filters(job, body, common, TG_NELEM(common), msg, len) != 0 ||
	    parse_filters(job, body, job->kind->defs, job->kind->ndefs, msg, len) != 0)
		return 400;
	if ((job->p = emu_project_find(emu, pid)) == NULL) {
		snprintf(msg, len, "unknown project '%.64s'", pid);
		return 404;
	}
	if (cb != NULL && *cb != '\0')
		job->callback = tg_xstrdup(cb);
	return 0;
}

/* ---- data_dir: the request and its times; the data is regenerated ---- */

static void
job_save(const struct emu_export *job)
{
	yajl_gen g;

	if (job->emu->cfg->data_dir == NULL)
		return;
	g = tg_json_gen_new();
	yajl_gen_map_open(g);
	tg_json_kv_str(g, "correlationId", job->id);
	tg_json_kv_str(g, "kind", job->kind->path);
	tg_json_kv_int(g, "readyMs", job->ready_ms);
	tg_json_kv_bool(g, "callbackSent", job->callback_sent);
	tg_json_str(g, "request");
	tg_json_gen_val(g, job->request);
	yajl_gen_map_close(g);
	emu_store_put(job->emu, EXPORTS_DIR, job->id, g);
	yajl_gen_free(g);
}

static const struct kind *kind_find(const char *path);
static void schedule(struct tg_emu *emu, struct emu_export *job, int64_t delay,
    int64_t ready_ms);

/* Takes ownership of doc. The request is checked again as when it came: a
 * project no longer configured drops the export, like an expired one. */
static void
on_export_loaded(struct tg_emu *emu, const char *name, yajl_val doc)
{
	const char *id = tg_json_get_str(doc, "correlationId");
	const struct kind *k = kind_find(tg_json_get_str(doc, "kind"));
	yajl_val ready = tg_json_get(doc, "readyMs"), req = tg_json_get(doc, "request");
	yajl_val sent = tg_json_get(doc, "callbackSent");
	int64_t now = tg_clock_now_ms(), real_delay;
	struct emu_export *job = NULL;
	char msg[256];

	if (id == NULL || strcmp(id, name) != 0 || strlen(id) >= TG_UUID_LEN || k == NULL ||
	    ready == NULL || !YAJL_IS_INTEGER(ready) || req == NULL || !YAJL_IS_OBJECT(req))
		goto drop;
	job = job_new(emu, k);
	snprintf(job->id, sizeof(job->id), "%s", id);
	job->callback_sent = sent != NULL && YAJL_IS_TRUE(sent);
	if (job_parse(emu, job, req, msg, sizeof(msg)) != 0)
		goto drop;
	job->ready_ms = YAJL_GET_INTEGER(ready);
	if (expired(job, now))
		goto drop;
	job->request = emu_store_take(doc, "request");
	/* the callback's timer runs in real time: what is left of it, at most the delay */
	real_delay = job->ready_ms - now < emu->cfg->export_delay ? job->ready_ms - now :
	    emu->cfg->export_delay;
	schedule(emu, job, real_delay, job->ready_ms);
	tg_map_put(emu->exports, job->id, job);
	yajl_tree_free(doc);
	return;
drop:
	emu_store_del(emu, EXPORTS_DIR, name);
	job_unref(job);
	yajl_tree_free(doc);
}

void
emu_exports_load(struct tg_emu *emu)
{
	size_t n = emu_store_load(emu, EXPORTS_DIR, on_export_loaded);

	tg_log(TG_LOG_INFO, "data_dir_exports", TG_LI("loaded", (long long)n),
	    TG_LI("kept", (long long)tg_map_count(emu->exports)));
}

/* ---- records ---- */

static int
field_has(const struct emu_field *fl, const struct tg_map *set)
{
	size_t k;

	switch (fl->type) {
	case EMU_F_STR:
		return fl->s != NULL && tg_map_get(set, fl->s) != NULL;
	case EMU_F_LIST:
		for (k = 0; k < fl->n; k++)
			if (tg_map_get(set, fl->v[k]) != NULL)
				return 1;
		return 0;
	case EMU_F_ENTRIES:
		for (k = 0; k < fl->n; k++)
			if (tg_map_get(set, fl->te[k].id) != NULL)
				return 1;
		return 0;
	default:
		return 0;
	}
}

/* A record without the field, or with an unset date, never matches. */
static int
holds(const struct flt *f, const struct emu_rec *r)
{
	const struct emu_field *fl = emu_rec_get(r, f->def->field);

	if (fl == NULL)
		return 0;
	switch (f->def->op) {
	case F_SET:
		return field_has(fl, f->set);
	case F_GE:
		return fl->t != EMU_NO_TIME && fl->t >= f->t;
	case F_LE:
		return fl->t != EMU_NO_TIME && fl->t <= f->t;
	}
	return 0;
}

static int
matches(const struct emu_export *job, const struct emu_rec *r)
{
	size_t i;

	for (i = 0; i < job->nf; i++)
		if (!holds(&job->f[i], r))
			return 0;
	return 1;
}

static void
rec_str(struct emu_rec *r, const char *key, const char *s, int hidden)
{
	struct emu_field *f = emu_rec_add(r, key, EMU_F_STR);

	f->s = s;
	f->hidden = hidden;
}

static void
rec_list(struct emu_rec *r, const char *key, const struct tg_strlist *l)
{
	struct emu_field *f = emu_rec_add(r, key, EMU_F_LIST);

	f->v = (const char *const *)l->v;
	f->n = l->n;
}

/* The export record of an activity (spec part 2), in the vendor's order;
 * assetId and workOrderId only serve the E1 filters. */
static void
activity_rec(struct emu_rec *r, const struct emu_activity *a)
{
	emu_rec_init(r);
	emu_rec_add(r, "startDate", EMU_F_TIME)->t = a->start_ms;
	emu_rec_add(r, "endDate", EMU_F_TIME)->t = a->end_ms;
	emu_rec_add(r, "createdAt", EMU_F_TIME)->t = a->created_ms;
	emu_rec_add(r, "updatedAt", EMU_F_TIME)->t = a->updated_ms;
	rec_list(r, "teams", &a->teams);
	rec_str(r, "name", a->name, 0);
	rec_str(r, "activityCategory", a->category, 0);
	rec_list(r, "personnelIds", &a->personnel_ids);
	rec_str(r, "status", a->status, 0);
	rec_str(r, "type", a->type != NULL ? a->type : "NONE", 0);
	rec_str(r, "siteId", a->site_id, 0);
	rec_str(r, "id", a->id, 0);
	rec_str(r, "externalRemarks", a->external_remarks, 0);
	if (a->work_package_id != NULL)
		rec_str(r, "workPackageId", a->work_package_id, 0);
	rec_str(r, "assetId", a->asset_id, 1);
	rec_str(r, "workOrderId", a->work_order_id, 1);
}

static void
gen_time(yajl_gen g, int64_t t)
{
	char iso[TG_ISO_LEN];

	if (t == EMU_NO_TIME) {
		yajl_gen_null(g);
		return;
	}
	tg_clock_iso(t, iso);
	tg_json_str(g, iso);
}

static void
gen_entries(yajl_gen g, const struct emu_field *fl)
{
	const struct emu_time_entry *e;
	size_t k;

	yajl_gen_array_open(g);
	for (k = 0; k < fl->n; k++) {
		e = &fl->te[k];
		yajl_gen_map_open(g);
		tg_json_kv_str(g, "id", e->id);
		tg_json_str(g, "date");
		gen_time(g, e->date_ms);
		tg_json_kv_int(g, "hours", e->hours);
		tg_json_kv_str(g, "activityId", e->activity_id);
		tg_json_kv_str(g, "workPackageId", e->work_package_id);
		tg_json_kv_str(g, "personnelId", e->personnel_id);
		yajl_gen_map_close(g);
	}
	yajl_gen_array_close(g);
}

static void
gen_rec(yajl_gen g, const struct emu_rec *r)
{
	const struct emu_field *f;
	size_t i, k;

	yajl_gen_map_open(g);
	for (i = 0; i < r->nf; i++) {
		if ((f = &r->f[i])->hidden)
			continue;
		tg_json_str(g, f->key);
		switch (f->type) {
		case EMU_F_STR:
			if (f->s == NULL)
				yajl_gen_null(g);
			else
				tg_json_str(g, f->s);
			break;
		case EMU_F_LIST:
			yajl_gen_array_open(g);
			for (k = 0; k < f->n; k++)
				tg_json_str(g, f->v[k]);
			yajl_gen_array_close(g);
			break;
		case EMU_F_TIME:
			gen_time(g, f->t);
			break;
		case EMU_F_INT:
			yajl_gen_integer(g, f->t);
			break;
		case EMU_F_ENTRIES:
			gen_entries(g, f);
			break;
		}
	}
	yajl_gen_map_close(g);
}

/* Next imported activity that is still in the overlay, or NULL. */
static const struct emu_activity *
next_imported(struct cursor *c)
{
	const struct emu_project *p = c->job->p;
	const struct emu_activity *a = NULL;

	while (a == NULL && c->j < p->nnew)
		a = tg_map_get(p->overlay, p->new_ids[c->j++]);
	return a;
}

/* Load the next candidate into c->rec; 0 when the walk is over. Generated
 * activities come first, each in its imported version when there is one,
 * then the imported activities with new ids. */
static int
cursor_next(struct cursor *c)
{
	const struct emu_project *p = c->job->p;
	const struct emu_activity *a = NULL;
	enum emu_kind k = c->job->kind->k;
	char id[32];

	if (k != EMU_K_ACTIVITY) {
		if (c->i >= emu_data_count(p, k))
			return 0;
		emu_data_record(p, k, c->i++, &c->rec);
		return 1;
	}
	if (c->i < p->cfg->activities) {
		if (tg_map_count(p->overlay) > 0) {
			snprintf(id, sizeof(id), "ACT-%06lld", c->i + 1);
			a = tg_map_get(p->overlay, id);
		}
		if (a == NULL) {
			emu_data_activity_view(p, c->i, &c->view, &c->abuf);
			a = &c->view;
		}
		c->i++;
	} else if ((a = next_imported(c)) == NULL) {
		return 0;
	}
	activity_rec(&c->rec, a);
	return 1;
}

/* Write up to max matching records, scanning at most budget candidates;
 * 1 when the walk is over. */
static int
cursor_emit(struct cursor *c, yajl_gen g, long long max, long long budget, long long *n)
{
	long long emitted = 0, scanned = 0;
	int done = 0;

	while (emitted < max && scanned < budget) {
		if (!cursor_next(c)) {
			done = 1;
			break;
		}
		scanned++;
		if (matches(c->job, &c->rec)) {
			gen_rec(g, &c->rec);
			emitted++;
		}
	}
	*n += emitted;
	return done;
}

/* ---- streams ---- */

static struct emu_stream *
stream_new(struct emu_export *job, int delivery)
{
	struct emu_stream *s = tg_xcalloc(1, sizeof(*s));

	s->job = job;
	job->refs++;
	s->delivery = delivery;
	s->g = tg_json_gen_new();
	s->buf = evbuffer_new();
	s->cur.job = job;
	s->next = job->emu->streams;
	job->emu->streams = s;
	yajl_gen_array_open(s->g);
	return s;
}

/* A reply stream's request and connection belong to libevent and are not
 * touched here; a delivery's connection is ours. */
static void
stream_free(struct emu_stream *s)
{
	struct emu_stream **pp;

	for (pp = &s->job->emu->streams; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == s) {
			*pp = s->next;
			break;
		}
	}
	if (s->delivery && s->conn != NULL)
		evhttp_connection_free(s->conn);
	if (s->dns != NULL)
		evdns_base_free(s->dns, 0);
	if (s->ev != NULL)
		event_free(s->ev);
	free(s->dest);
	yajl_gen_free(s->g);
	evbuffer_free(s->buf);
	job_unref(s->job);
	free(s);
}

static void
stream_finish(struct emu_stream *s)
{
	struct evhttp_request *req = s->req;

	tg_frontdoor_set_closecb(s->conn, NULL, NULL);
	evhttp_send_reply_chunk(req, s->buf);
	tg_log(TG_LOG_DEBUG, "export_streamed", TG_LS("correlationId", s->job->id),
	    TG_LI("records", s->records));
	stream_free(s);
	evhttp_send_reply_end(req);
}

static void on_chunk_written(struct evhttp_connection *conn, void *arg);

static void
stream_step(struct emu_stream *s)
{
	long long chunk = s->job->emu->cfg->export_chunk_records;
	int done = cursor_emit(&s->cur, s->g, chunk, chunk * SCAN_SLICE, &s->records);

	if (done)
		yajl_gen_array_close(s->g);
	tg_json_gen_flush(s->g, s->buf);
	if (done)
		stream_finish(s);
	else if (evbuffer_get_length(s->buf) == 0)
		evtimer_add(s->ev, &at_once);	/* an empty chunk would never call back */
	else
		evhttp_send_reply_chunk_with_cb(s->req, s->buf, on_chunk_written, s);
}

static void
on_chunk_written(struct evhttp_connection *conn, void *arg)
{
	stream_step(arg);
}

static void
on_resume(evutil_socket_t fd, short what, void *arg)
{
	stream_step(arg);
}

/* The client went away mid-stream, or the server is shutting down. On a
 * failed connection libevent detaches the unfinished reply and leaves it to
 * us; on evhttp_free the request is still attached and libevent frees it. */
static void
on_reply_close(struct evhttp_connection *conn, void *arg)
{
	struct emu_stream *s = arg;

	if (evhttp_request_get_connection(s->req) == NULL)
		evhttp_request_free(s->req);
	tg_log(TG_LOG_INFO, "export_stream_aborted", TG_LS("correlationId", s->job->id),
	    TG_LI("records", s->records));
	stream_free(s);
}

static void
stream_start(struct tg_emu *emu, struct evhttp_request *req, struct emu_export *job)
{
	struct emu_stream *s = stream_new(job, 0);

	s->req = req;
	s->conn = evhttp_request_get_connection(req);
	s->ev = evtimer_new(emu->base, on_resume, s);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
	    "application/json");
	evhttp_send_reply_start(req, 200, "OK");
	tg_frontdoor_set_closecb(s->conn, on_reply_close, s);
	stream_step(s);
}

/* ---- callback delivery ---- */

static void
on_reap(evutil_socket_t fd, short what, void *arg)
{
	stream_free(arg);
}

static void
on_delivered(struct evhttp_request *r, void *arg)
{
	struct emu_stream *s = arg;
	int code = r != NULL ? evhttp_request_get_response_code(r) : 0;
	int ok = code >= 200 && code < 300;

	tg_log(ok ? TG_LOG_INFO : TG_LOG_WARN, "export_callback",
	    TG_LS("correlationId", s->job->id), TG_LS("dest", s->dest),
	    TG_LS("outcome", ok ? "delivered" : code != 0 ? "rejected" : "failed"),
	    TG_LI("status", code), TG_LI("records", s->records));
	/* libevent still uses the connection after this returns */
	evtimer_add(s->ev, &at_once);
}

static void
add_headers(struct evhttp_request *r, const struct evhttp_uri *u, const char *id)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(r);
	char host[300];

	if (evhttp_uri_get_port(u) >= 0)
		snprintf(host, sizeof(host), "%s:%d", evhttp_uri_get_host(u),
		    evhttp_uri_get_port(u));
	else
		snprintf(host, sizeof(host), "%s", evhttp_uri_get_host(u));
	evhttp_add_header(h, "Host", host);
	evhttp_add_header(h, "Content-Type", "application/json");
	evhttp_add_header(h, "Connection", "close");
	evhttp_add_header(h, "X-Correlation-Id", id);
}

/* POST the body in s->buf to the job's callbackUrl, once; 0 when sent off. */
static int
delivery_send(struct emu_stream *s)
{
	struct event_base *base = s->job->emu->base;
	struct evhttp_uri *u = evhttp_uri_parse(s->job->callback);
	const char *path = evhttp_uri_get_path(u), *q = evhttp_uri_get_query(u);
	const char *host = evhttp_uri_get_host(u);
	int port = evhttp_uri_get_port(u) >= 0 ? evhttp_uri_get_port(u) : 80, rc = -1;
	struct evhttp_request *r;
	char *target, addr[256];

	/* the URI keeps an IPv6 literal's brackets; the resolver must not see them */
	snprintf(addr, sizeof(addr), "%.*s", host[0] == '[' ? (int)strlen(host) - 2 :
	    (int)strlen(host), host[0] == '[' ? host + 1 : host);
	target = tg_xasprintf("%s%s%s", path != NULL && *path ? path : "/", q ? "?" : "",
	    q ? q : "");
	s->dest = tg_xasprintf("%s:%d", host, port);
	s->dns = evdns_base_new(base, EVDNS_BASE_INITIALIZE_NAMESERVERS |
	    EVDNS_BASE_DISABLE_WHEN_INACTIVE);
	s->conn = evhttp_connection_base_new(base, s->dns, addr, (ev_uint16_t)port);
	if (s->conn == NULL)
		goto done;
	evhttp_connection_set_timeout(s->conn, CALLBACK_TIMEOUT_S);
	s->ev = evtimer_new(base, on_reap, s);
	r = evhttp_request_new(on_delivered, s);
	add_headers(r, u, s->job->id);
	evbuffer_add_buffer(evhttp_request_get_output_buffer(r), s->buf);
	rc = evhttp_make_request(s->conn, r, EVHTTP_REQ_POST, target);
done:
	if (rc != 0)
		tg_log(TG_LOG_WARN, "export_callback", TG_LS("correlationId", s->job->id),
		    TG_LS("dest", s->dest), TG_LS("outcome", "failed"), TG_LI("status", 0));
	evhttp_uri_free(u);
	free(target);
	return rc;
}

/* The export is ready: build the whole body (a POST is not streamed) and send it. */
static void
on_job_ready(evutil_socket_t fd, short what, void *arg)
{
	struct emu_export *job = arg;
	struct emu_stream *s = stream_new(job, 1);
	long long chunk = job->emu->cfg->export_chunk_records;

	while (!cursor_emit(&s->cur, s->g, chunk, chunk, &s->records))
		tg_json_gen_flush(s->g, s->buf);
	yajl_gen_array_close(s->g);
	tg_json_gen_flush(s->g, s->buf);
	job->callback_sent = 1;
	if (tg_map_get(job->emu->exports, job->id) == job)
		job_save(job);
	if (delivery_send(s) != 0)
		stream_free(s);
}

/* ---- handlers ---- */

static const struct kind *
kind_find(const char *path)
{
	size_t i;

	for (i = 0; path != NULL && i < TG_NELEM(kinds); i++)
		if (strcmp(kinds[i].path, path) == 0)
			return &kinds[i];
	return NULL;
}

static void
reply_created(struct evhttp_request *req, const struct emu_export *job)
{
	yajl_gen g = tg_json_gen_new();

	yajl_gen_map_open(g);
	tg_json_kv_str(g, "correlationId", job->id);
	yajl_gen_map_close(g);
	tg_reply_json(req, 200, g);
	yajl_gen_free(g);
}

/* Ready at ready_ms of the emulator clock; the callback (if any, and not
 * yet attempted) goes out after delay ms of real time. */
static void
schedule(struct tg_emu *emu, struct emu_export *job, int64_t delay, int64_t ready_ms)
{
	struct timeval tv;

	job->ready_ms = ready_ms;
	if (job->callback == NULL || job->callback_sent)
		return;
	delay = delay > 0 ? delay : 0;
	tv.tv_sec = delay / 1000;
	tv.tv_usec = (delay % 1000) * 1000;
	job->timer = evtimer_new(emu->base, on_job_ready, job);
	evtimer_add(job->timer, &tv);
}

void
emu_h_export_create(struct tg_emu *emu, struct evhttp_request *req, const char *const *p)
{
	const struct kind *k = kind_find(p[0]);
	struct emu_export *job = NULL;
	int64_t now = tg_clock_now_ms();
	yajl_val body = NULL;
	struct tg_err err;
	char msg[256];
	size_t len;
	char *raw;
	int status;

	if (k == NULL) {
		emu_reply_error(req, 404, "no such export kind");
		return;
	}
	raw = tg_http_body(req, &len);
	body = tg_json_parse(raw, len, &err);
	free(raw);
	if (body == NULL || !YAJL_IS_OBJECT(body)) {
		emu_reply_error(req, 400, body == NULL ? err.msg : "body must be a JSON object");
		goto done;
	}
	job = job_new(emu, k);
	if ((status = job_parse(emu, job, body, msg, sizeof(msg))) != 0) {
		emu_reply_error(req, status, msg);
		goto done;
	}
	sweep(emu, now);
	schedule(emu, job, emu->cfg->export_delay, now + emu->cfg->export_delay);
	tg_map_put(emu->exports, job->id, job);
	job->request = body;
	body = NULL;
	job_save(job);
	reply_created(req, job);
	job = NULL;
done:
	job_unref(job);
	yajl_tree_free(body);
}

static void
reply_pending(struct evhttp_request *req, const struct emu_export *job, int64_t now)
{
	yajl_gen g = tg_json_gen_new();
	char ra[24];

	snprintf(ra, sizeof(ra), "%lld", (long long)((job->ready_ms - now + 999) / 1000));
	evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", ra);
	yajl_gen_map_open(g);
	tg_json_kv_str(g, "correlationId", job->id);
	tg_json_kv_str(g, "status", "IN_PROGRESS");
	tg_json_kv_str(g, "message", "export is being prepared");
	yajl_gen_map_close(g);
	tg_reply_json(req, 202, g);
	yajl_gen_free(g);
}

void
emu_h_export_get(struct tg_emu *emu, struct evhttp_request *req, const char *const *p)
{
	char *cid = tg_http_query(req, "correlationId");
	int64_t now = tg_clock_now_ms();
	struct emu_export *job = NULL;

	if (cid == NULL || *cid == '\0') {
		emu_reply_error(req, 400, "correlationId is required");
		goto done;
	}
	job = tg_map_get(emu->exports, cid);
	if (job != NULL && expired(job, now)) {
		emu_store_del(emu, EXPORTS_DIR, cid);
		job_unref(tg_map_take(emu->exports, cid));
		job = NULL;
	}
	if (job == NULL)
		emu_reply_error(req, 404, "no export with this correlationId (unknown or expired)");
	else if (now < job->ready_ms)
		reply_pending(req, job, now);
	else
		stream_start(emu, req, job);
done:
	free(cid);
}

void
emu_exports_free(struct tg_emu *emu)
{
	const char *k;
	void *v;
	size_t pos = 0;

	/* evhttp_free ran first: reply streams were closed through on_reply_close */
	while (emu->streams != NULL)
		stream_free(emu->streams);
	while (tg_map_next(emu->exports, &pos, &k, &v))
		job_unref(v);
	tg_map_free(emu->exports);
}
