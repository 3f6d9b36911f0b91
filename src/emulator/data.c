/*
 * data.c - the seeded, deterministic data set of each project. Records are
 * computed from (seed, kind, index) on demand, so a million activities cost
 * no memory; imported activities live in a per-project overlay that
 * export.c consults before the generated record. Every kind derives its
 * fields from emu_data_rand, and references stay within the configured
 * counts (WP-n, WO-n, PER-n, CAT-n, WOS-n, S-n), so ids agree across kinds.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emu.h"

void
emu_projects_init(struct tg_emu *emu)
{
	size_t i;

	emu->nprojects = emu->cfg->nprojects;
	emu->projects = tg_xcalloc(emu->nprojects, sizeof(*emu->projects));
	for (i = 0; i < emu->nprojects; i++) {
		emu->projects[i].cfg = &emu->cfg->projects[i];
		emu->projects[i].epoch_ms = tg_clock_days_from_civil(2024, 1, 1) * 86400000LL;
		emu->projects[i].overlay = tg_map_new(NULL);
	}
}

static void
free_activity(void *a)
{
	emu_activity_cleanup(a);
	free(a);
}

void
emu_projects_free(struct tg_emu *emu)
{
	size_t i, j;
	const char *k;
	void *v;

	for (i = 0; i < emu->nprojects; i++) {
		struct emu_project *p = &emu->projects[i];
		size_t pos = 0;

		while (tg_map_next(p->overlay, &pos, &k, &v))
			free_activity(v);
		tg_map_free(p->overlay);
		for (j = 0; j < p->nnew; j++)
			free(p->new_ids[j]);
		free(p->new_ids);
	}
	free(emu->projects);
}

struct emu_project *
emu_project_find(struct tg_emu *emu, const char *id)
{
	size_t i;

	for (i = 0; i < emu->nprojects; i++)
		if (strcmp(emu->projects[i].cfg->id, id) == 0)
			return &emu->projects[i];
	return NULL;
}

/* Parse "<prefix><n>" with n in 1..max; returns n or -1. */
static long long
parse_seq_id(const char *id, const char *prefix, long long max)
{
	size_t pl = strlen(prefix);
	long long n = 0;
	const char *p;

	if (strncmp(id, prefix, pl) != 0 || id[pl] == '\0' || id[pl] == '0')
		return -1;
	for (p = id + pl; *p; p++) {
		if (*p < '0' || *p > '9' || n > max)
			return -1;
		n = n * 10 + (*p - '0');
	}
	return n >= 1 && n <= max ? n : -1;
}

int
emu_data_site_exists(const struct emu_project *p, const char *site_id)
{
	return parse_seq_id(site_id, "S-", p->cfg->sites) > 0;
}

/* Generated ids are zero-padded ("ACT-000123"), which parse_seq_id refuses,
 * so the digits are read here and the canonical spelling checked after. */
long long
emu_data_activity_index(const struct emu_project *p, const char *id)
{
	long long n = 0, max = p->cfg->activities;
	char canon[32];
	const char *d;

	if (strncmp(id, "ACT-", 4) != 0 || id[4] == '\0')
		return -1;
	for (d = id + 4; *d != '\0'; d++) {
		if (*d < '0' || *d > '9' || n > max)
			return -1;
		n = n * 10 + (*d - '0');
	}
	if (n < 1 || n > max)
		return -1;
	snprintf(canon, sizeof(canon), "ACT-%06lld", n);
	return strcmp(canon, id) == 0 ? n - 1 : -1;
}

void
emu_activity_cleanup(struct emu_activity *a)
{
	char **strs[] = { &a->id, &a->site_id, &a->asset_id, &a->name, &a->category, &a->status,
		&a->type, &a->work_package_id, &a->work_order_id, &a->internal_remarks,
		&a->external_remarks };
	struct tg_strlist *lists[] = { &a->teams, &a->personnel_ids };
	size_t i, j;

	for (i = 0; i < TG_NELEM(strs); i++) {
		free(*strs[i]);
		*strs[i] = NULL;
	}
	for (i = 0; i < TG_NELEM(lists); i++) {
		for (j = 0; j < lists[i]->n; j++)
			free(lists[i]->v[j]);
		free(lists[i]->v);
		lists[i]->v = NULL;
		lists[i]->n = 0;
	}
	for (i = 0; i < a->nmanpower; i++)
		free(a->manpower[i].team);
	free(a->manpower);
	a->manpower = NULL;
	a->nmanpower = 0;
}

static char *
dup_or_null(const char *s)
{
	return s ? tg_xstrdup(s) : NULL;
}

static void
copy_list(struct tg_strlist *dst, const struct tg_strlist *src)
{
	size_t i;

	dst->n = src->n;
	dst->v = src->n ? tg_xcalloc(src->n, sizeof(char *)) : NULL;
	for (i = 0; i < src->n; i++)
		dst->v[i] = tg_xstrdup(src->v[i]);
}

void
emu_activity_copy(struct emu_activity *dst, const struct emu_activity *src)
{
	size_t i;

	*dst = *src;
	dst->id = dup_or_null(src->id);
	dst->site_id = dup_or_null(src->site_id);
	dst->asset_id = dup_or_null(src->asset_id);
	dst->name = dup_or_null(src->name);
	dst->category = dup_or_null(src->category);
	dst->status = dup_or_null(src->status);
	dst->type = dup_or_null(src->type);
	dst->work_package_id = dup_or_null(src->work_package_id);
	dst->work_order_id = dup_or_null(src->work_order_id);
	dst->internal_remarks = dup_or_null(src->internal_remarks);
	dst->external_remarks = dup_or_null(src->external_remarks);
	copy_list(&dst->teams, &src->teams);
	copy_list(&dst->personnel_ids, &src->personnel_ids);
	dst->manpower = src->nmanpower ? tg_xcalloc(src->nmanpower, sizeof(*dst->manpower)) :
	    NULL;
	for (i = 0; i < src->nmanpower; i++) {
		dst->manpower[i].team = tg_xstrdup(src->manpower[i].team);
		dst->manpower[i].n = src->manpower[i].n;
	}
}

int
emu_data_activity_get(const struct emu_project *p, const char *id, struct emu_activity *out)
{
	const struct emu_activity *a = tg_map_get(p->overlay, id);
	long long i;

	if (a != NULL) {
		emu_activity_copy(out, a);
		return 0;
	}
	if ((i = emu_data_activity_index(p, id)) < 0)
		return -1;
	emu_data_activity(p, i, out);
	return 0;
}

void
emu_data_activity_put(struct emu_project *p, struct emu_activity *a)
{
	struct emu_activity *old = tg_map_take(p->overlay, a->id);

	if (old != NULL) {
		free_activity(old);
	} else if (emu_data_activity_index(p, a->id) < 0) {
		p->new_ids = tg_xrealloc(p->new_ids, (p->nnew + 1) * sizeof(char *));
		p->new_ids[p->nnew++] = tg_xstrdup(a->id);
	}
	tg_map_put(p->overlay, a->id, a);
}

/* ---- generated records ---- */

/* splitmix64: a stateless, well-mixed hash of (seed, kind, index). */
static uint64_t
mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

uint64_t
emu_data_rand(const struct emu_project *p, int kind, long long i, int field)
{
	return mix((uint64_t)p->cfg->seed * 1000003ULL ^ mix(((uint64_t)kind << 56) ^
	    ((uint64_t)field << 40) ^ (uint64_t)i));
}

static const char *const act_status[] = { "PLANNED", "DISPATCHED", "COMPLETED" };
static const char *const act_type[] = { "NONE", "INSPECTION", "MAINTENANCE", "REPAIR" };
static const char *const teams[] = { "Alpha", "Bravo", "Charlie", "Delta" };

/* Work package of generated activity i, shared with timesheet entries. */
static const char *
act_wp(const struct emu_project *p, long long i, char buf[32])
{
	uint64_t r = emu_data_rand(p, EMU_K_ACTIVITY, i, 3);

	if (p->cfg->work_packages <= 0 || (r >> 24) % 3 == 0)
		return NULL;
	snprintf(buf, 32, "WP-%lld", (long long)((r >> 28) % (uint64_t)p->cfg->work_packages) + 1);
	return buf;
}

static void
act_refs(const struct emu_project *p, long long i, uint64_t r, struct emu_activity *a,
    struct emu_activity_buf *b)
{
	const struct tg_emu_project *c = p->cfg;

	if (c->activity_categories > 0) {
		snprintf(b->category, sizeof(b->category), "CAT-%lld",
		    (long long)((r >> 8) % (uint64_t)c->activity_categories) + 1);
		a->category = b->category;
	}
	a->work_package_id = (char *)act_wp(p, i, b->wp);
	if (c->work_orders > 0 && (r >> 32) % 2 == 0) {
		snprintf(b->wo, sizeof(b->wo), "WO-%lld",
		    (long long)((r >> 36) % (uint64_t)c->work_orders) + 1);
		a->work_order_id = b->wo;
	}
	if (c->personnel > 0) {
		snprintf(b->per, sizeof(b->per), "PER-%lld",
		    (long long)((r >> 56) % (uint64_t)c->personnel) + 1);
		b->per_ids[0] = b->per;
		a->personnel_ids.v = b->per_ids;
		a->personnel_ids.n = 1;
	}
}

static void
act_crew(uint64_t r, struct emu_activity *a, struct emu_activity_buf *b)
{
	size_t k;

	a->teams.n = 1 + (r >> 52) % 2;
	for (k = 0; k < a->teams.n; k++) {
		snprintf(b->team[k], sizeof(b->team[k]), "%s", teams[((r >> 54) + k) % 4]);
		b->teams[k] = b->team[k];
		b->mp[k].team = b->team[k];
		b->mp[k].n = k == 0 ? 1 + (long long)((r >> 58) % 4) : 2;
	}
	a->teams.v = b->teams;
	a->manpower = b->mp;
	a->nmanpower = a->teams.n;
}

void
emu_data_activity_view(const struct emu_project *p, long long i, struct emu_activity *a,
    struct emu_activity_buf *b)
{
	const struct tg_emu_project *c = p->cfg;
	const int k = EMU_K_ACTIVITY;
	long long site = (long long)(emu_data_rand(p, k, i, 0) % (uint64_t)c->sites) + 1;
	int64_t day = 86400000LL;
	int64_t start = p->epoch_ms + (int64_t)(emu_data_rand(p, k, i, 1) % 730) * day +
	    (int64_t)(6 + emu_data_rand(p, k, i, 2) % 8) * 3600000LL;
	uint64_t r = emu_data_rand(p, k, i, 3);

	memset(a, 0, sizeof(*a));
	snprintf(b->id, sizeof(b->id), "ACT-%06lld", i + 1);
	snprintf(b->site, sizeof(b->site), "S-%lld", site);
	snprintf(b->name, sizeof(b->name), "Activity %lld", i + 1);
	snprintf(b->status, sizeof(b->status), "%s", act_status[(r >> 16) % 3]);
	snprintf(b->type, sizeof(b->type), "%s", act_type[(r >> 20) % 4]);
	snprintf(b->remarks, sizeof(b->remarks), "Generated remark %lld", i + 1);
	a->id = b->id;
	a->site_id = b->site;
	a->name = b->name;
	a->status = b->status;
	a->type = b->type;
	a->external_remarks = b->remarks;
	if (c->assets_per_site > 0) {
		snprintf(b->asset, sizeof(b->asset), "A-%lld-%lld", site,
		    (long long)(r % (uint64_t)c->assets_per_site) + 1);
		a->asset_id = b->asset;
	}
	act_refs(p, i, r, a, b);
	a->start_ms = start;
	a->end_ms = start + (int64_t)(1 + (r >> 40) % 10) * 3600000LL;
	a->created_ms = start - 30 * day;
	a->updated_ms = a->created_ms + (int64_t)((r >> 44) % 20) * day;
	a->additional_client_work = (int)((r >> 50) & 1);
	act_crew(r, a, b);
}

void
emu_data_activity(const struct emu_project *p, long long i, struct emu_activity *a)
{
	struct emu_activity_buf b;
	struct emu_activity view;

	emu_data_activity_view(p, i, &view, &b);
	emu_activity_copy(a, &view);
}

/* ---- records of the other kinds ---- */

#define DAY_MS 86400000LL

void
emu_rec_init(struct emu_rec *r)
{
	r->nf = r->nvals = r->nte = r->used = 0;
}

struct emu_field *
emu_rec_add(struct emu_rec *r, const char *key, enum emu_ftype type)
{
	struct emu_field *f;

	if (r->nf == EMU_REC_MAXF)
		abort();	/* record shapes are fixed here; this is a coding error */
	f = &r->f[r->nf++];
	memset(f, 0, sizeof(*f));
	f->key = key;
	f->type = type;
	f->t = EMU_NO_TIME;
	return f;
}

const struct emu_field *
emu_rec_get(const struct emu_rec *r, const char *key)
{
	size_t i;

	for (i = 0; i < r->nf; i++)
		if (strcmp(r->f[i].key, key) == 0)
			return &r->f[i];
	return NULL;
}

static const char *
rec_fmt(struct emu_rec *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static const char *
rec_fmt(struct emu_rec *r, const char *fmt, ...)
{
	char *s = r->arena + r->used;
	size_t room = sizeof(r->arena) - r->used;
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(s, room, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= room)
		abort();	/* generated strings are short; this is a coding error */
	r->used += (size_t)n + 1;
	return s;
}

static void
rec_str(struct emu_rec *r, const char *key, const char *s)
{
	emu_rec_add(r, key, EMU_F_STR)->s = s;
}

static void
rec_time(struct emu_rec *r, const char *key, int64_t t)
{
	emu_rec_add(r, key, EMU_F_TIME)->t = t;
}

static struct emu_field *
rec_list(struct emu_rec *r, const char *key)
{
	struct emu_field *f = emu_rec_add(r, key, EMU_F_LIST);

	f->v = &r->vals[r->nvals];
	return f;
}

/* Append s to list f (the last list opened) unless it is NULL or present. */
static void
rec_push(struct emu_rec *r, struct emu_field *f, const char *s)
{
	size_t k;

	if (s == NULL)
		return;
	for (k = 0; k < f->n; k++)
		if (strcmp(f->v[k], s) == 0)
			return;
	if (r->nvals == EMU_REC_MAXV || f->v + f->n != &r->vals[r->nvals])
		abort();	/* coding error: full, or not the last list opened */
	r->vals[r->nvals++] = s;
	f->n++;
}

/* Name i of a word list, numbered once the list wraps so names stay unique. */
static const char *
rec_name(struct emu_rec *r, const char *const *words, size_t nwords, long long i)
{
	if ((size_t)i < nwords)
		return rec_fmt(r, "%s", words[i]);
	return rec_fmt(r, "%s %lld", words[(size_t)i % nwords], i / (long long)nwords + 1);
}

/* "PREFIX-n" for a reference to record (h % total) + 1, or NULL without records. */
static const char *
rec_ref(struct emu_rec *r, const char *prefix, long long total, uint64_t h)
{
	if (total <= 0)
		return NULL;
	return rec_fmt(r, "%s-%lld", prefix, (long long)(h % (uint64_t)total) + 1);
}

/* createdAt within the two generated years, updatedAt up to 60 days later. */
static void
rec_stamps(struct emu_rec *r, const struct emu_project *p, int kind, long long i)
{
	int64_t created = p->epoch_ms + (int64_t)(emu_data_rand(p, kind, i, 9) % 730) * DAY_MS +
	    (int64_t)(emu_data_rand(p, kind, i, 10) % 86400) * 1000;

	rec_time(r, "createdAt", created);
	rec_time(r, "updatedAt", created + (int64_t)(emu_data_rand(p, kind, i, 11) % 60) * DAY_MS);
}

/* Up to two distinct work packages. */
static void
rec_wps(struct emu_rec *r, const struct emu_project *p, uint64_t h)
{
	struct emu_field *f = rec_list(r, "workPackageIds");
	long long n = (long long)(h % 3), k;

	for (k = 0; k < n; k++)
		rec_push(r, f, rec_ref(r, "WP", p->cfg->work_packages, (h >> 8) + (uint64_t)k));
}

static const char *const cat_names[] = { "Inspection", "Preventive maintenance",
	"Corrective maintenance", "Cable survey", "Blade repair", "Crew transfer",
	"Commissioning", "Decommissioning" };

static void
gen_category(const struct emu_project *p, long long i, struct emu_rec *r)
{
	rec_str(r, "id", rec_fmt(r, "CAT-%lld", i + 1));
	rec_str(r, "name", rec_name(r, cat_names, TG_NELEM(cat_names), i));
	rec_wps(r, p, emu_data_rand(p, EMU_K_CATEGORY, i, 0));
	rec_stamps(r, p, EMU_K_CATEGORY, i);
}

static const char *const first_names[] = { "Anna", "Ben", "Clara", "David", "Emma", "Finn",
	"Greta", "Hugo" };
static const char *const last_names[] = { "Berg", "Carter", "Dahl", "Evans", "Fischer",
	"Gray", "Holm", "Jensen" };
static const char *const roles[] = { "Technician", "Supervisor", "Engineer", "Planner",
	"Vessel crew" };
static const char *const departments[] = { "Operations", "Maintenance", "Engineering",
	"Logistics" };

static void
gen_personnel(const struct emu_project *p, long long i, struct emu_rec *r)
{
	uint64_t h = emu_data_rand(p, EMU_K_PERSONNEL, i, 0);
	const char *first = first_names[i % 8], *last = last_names[(i / 8) % 8];
	struct emu_field *t;
	char suffix[24] = "";
	size_t k;

	if (i >= 64)
		snprintf(suffix, sizeof(suffix), "%lld", i + 1);
	rec_str(r, "id", rec_fmt(r, "PER-%lld", i + 1));
	rec_str(r, "name", rec_fmt(r, "%s %s%s%s", first, last, *suffix ? " " : "", suffix));
	rec_str(r, "email", rec_fmt(r, "%c%s.%c%s%s@crew.example", first[0] | 0x20, first + 1,
	    last[0] | 0x20, last + 1, suffix));
	rec_str(r, "role", roles[h % TG_NELEM(roles)]);
	rec_str(r, "department", departments[(h >> 8) % TG_NELEM(departments)]);
	t = rec_list(r, "teams");
	for (k = 0; k < 1 + (h >> 16) % 2; k++)
		rec_push(r, t, teams[((h >> 20) + k) % TG_NELEM(teams)]);
	rec_wps(r, p, emu_data_rand(p, EMU_K_PERSONNEL, i, 1));
	rec_stamps(r, p, EMU_K_PERSONNEL, i);
}

static const char *const ts_status[] = { "DRAFT", "PENDING", "SIGNED", "REJECTED" };

/* One to three entries on generated activities, in the days before the
 * sheet was created; the sheet's id lists are the union of its entries so
 * that filters by activity or work package agree with what is shown. */
static void
gen_entries(const struct emu_project *p, long long i, int64_t created, const char *owner,
    struct emu_rec *r)
{
	uint64_t h = emu_data_rand(p, EMU_K_TIMESHEET, i, 1);
	long long k, n = 1 + (long long)(h % 3), act;
	struct emu_time_entry *e;
	struct emu_field *f;
	char wp[32];

	for (k = 0; k < n; k++) {
		e = &r->te[r->nte++];
		memset(e, 0, sizeof(*e));
		e->id = rec_fmt(r, "TE-%lld-%lld", i + 1, k + 1);
		e->date_ms = created - created % DAY_MS - (n - k) * DAY_MS;
		e->hours = 1 + (long long)((h >> (8 + 4 * k)) % 10);
		e->personnel_id = owner;
		if (p->cfg->activities <= 0)
			continue;
		act = (long long)(emu_data_rand(p, EMU_K_TIMESHEET, i, 2 + (int)k) %
		    (uint64_t)p->cfg->activities);
		e->activity_id = rec_fmt(r, "ACT-%06lld", act + 1);
		if (act_wp(p, act, wp) != NULL)
			e->work_package_id = rec_fmt(r, "%s", wp);
	}
	f = emu_rec_add(r, "timeEntries", EMU_F_ENTRIES);
	f->te = r->te;
	f->n = r->nte;
	f = rec_list(r, "activityIds");
	for (k = 0; k < n; k++)
		rec_push(r, f, r->te[k].activity_id);
	f = rec_list(r, "workPackageIds");
	for (k = 0; k < n; k++)
		rec_push(r, f, r->te[k].work_package_id);
	rec_push(r, rec_list(r, "personnelIds"), owner);
}

static void
gen_timesheet(const struct emu_project *p, long long i, struct emu_rec *r)
{
	uint64_t h = emu_data_rand(p, EMU_K_TIMESHEET, i, 0);
	int st = (int)(h % TG_NELEM(ts_status));
	const char *owner = rec_ref(r, "PER", p->cfg->personnel, h >> 8);

	rec_str(r, "id", rec_fmt(r, "TS-%lld", i + 1));
	rec_str(r, "name", rec_fmt(r, "Timesheet %lld", i + 1));
	rec_str(r, "status", ts_status[st]);
	rec_str(r, "personnelId", owner);
	/* a DRAFT is not submitted yet; only SIGNED and REJECTED were reviewed */
	rec_str(r, "submittedBy", st == 0 ? NULL : owner);
	rec_str(r, "approvedBy", st >= 2 ? rec_ref(r, "PER", p->cfg->personnel, h >> 24) : NULL);
	rec_stamps(r, p, EMU_K_TIMESHEET, i);
	gen_entries(p, i, emu_rec_get(r, "createdAt")->t, owner, r);
}

static const char *const wos_names[] = { "Annual service", "Blade inspection campaign",
	"Cable repair campaign", "Retrofit programme" };

static void
gen_wos(const struct emu_project *p, long long i, struct emu_rec *r)
{
	rec_str(r, "id", rec_fmt(r, "WOS-%lld", i + 1));
	rec_str(r, "name", rec_name(r, wos_names, TG_NELEM(wos_names), i));
	rec_stamps(r, p, EMU_K_WOS, i);
}

static const char *const wo_types[] = { "CORRECTIVE", "PREVENTIVE", "INSPECTION",
	"MODIFICATION" };
static const char *const priorities[] = { "LOW", "MEDIUM", "HIGH", "CRITICAL" };

static void
gen_wo(const struct emu_project *p, long long i, struct emu_rec *r)
{
	uint64_t h = emu_data_rand(p, EMU_K_WO, i, 0);
	const struct tg_emu_project *c = p->cfg;

	rec_str(r, "id", rec_fmt(r, "WO-%lld", i + 1));
	rec_str(r, "name", rec_fmt(r, "Work order %lld", i + 1));
	rec_str(r, "type", wo_types[h % TG_NELEM(wo_types)]);
	rec_str(r, "priority", priorities[(h >> 8) % TG_NELEM(priorities)]);
	rec_str(r, "siteId", rec_ref(r, "S", c->sites, h >> 48));
	rec_str(r, "workPackageId", rec_ref(r, "WP", c->work_packages, h >> 16));
	/* a quarter of the orders stand alone, outside any sequence */
	rec_str(r, "workOrderSequenceId", (h >> 40) % 4 == 0 ? NULL :
	    rec_ref(r, "WOS", c->work_order_sequences, h >> 24));
	rec_stamps(r, p, EMU_K_WO, i);
}

static const char *const wp_types[] = { "CONSTRUCTION", "MAINTENANCE", "INSPECTION",
	"DECOMMISSIONING" };
static const char *const wp_status[] = { "NONE", "PLANNED", "CONFIRMED", "FINISHED",
	"CANCELED" };
static const char *const countries[] = { "DK", "DE", "GB", "NL", "BE", "FR", "TW", "US" };
static const char *const asset_types[] = { "Wind turbine", "Offshore substation",
	"Export cable", "Array cable", "Met mast" };

static void
gen_wp(const struct emu_project *p, long long i, struct emu_rec *r)
{
	uint64_t h = emu_data_rand(p, EMU_K_WP, i, 0), d = emu_data_rand(p, EMU_K_WP, i, 1);
	int64_t start = p->epoch_ms + (int64_t)(d % 700) * DAY_MS;
	int64_t created = start - (int64_t)(60 + (d >> 32) % 30) * DAY_MS;

	rec_str(r, "id", rec_fmt(r, "WP-%lld", i + 1));
	rec_str(r, "name", rec_fmt(r, "Work package %lld", i + 1));
	rec_str(r, "type", wp_types[h % TG_NELEM(wp_types)]);
	rec_str(r, "status", wp_status[(h >> 8) % TG_NELEM(wp_status)]);
	rec_str(r, "country", countries[(h >> 16) % TG_NELEM(countries)]);
	rec_str(r, "assetType", asset_types[(h >> 24) % TG_NELEM(asset_types)]);
	rec_time(r, "startDate", start);
	rec_time(r, "endDate", start + (int64_t)(1 + (d >> 16) % 90) * DAY_MS);
	rec_time(r, "createdAt", created);
	rec_time(r, "updatedAt", created + (int64_t)((d >> 40) % 60) * DAY_MS);
}

long long
emu_data_count(const struct emu_project *p, enum emu_kind k)
{
	const struct tg_emu_project *c = p->cfg;

	switch (k) {
	case EMU_K_ACTIVITY: return c->activities;
	case EMU_K_CATEGORY: return c->activity_categories;
	case EMU_K_PERSONNEL: return c->personnel;
	case EMU_K_TIMESHEET: return c->timesheets;
	case EMU_K_WOS: return c->work_order_sequences;
	case EMU_K_WO: return c->work_orders;
	case EMU_K_WP: return c->work_packages;
	}
	return 0;
}

void
emu_data_record(const struct emu_project *p, enum emu_kind k, long long i, struct emu_rec *r)
{
	emu_rec_init(r);
	switch (k) {
	case EMU_K_CATEGORY: gen_category(p, i, r); break;
	case EMU_K_PERSONNEL: gen_personnel(p, i, r); break;
	case EMU_K_TIMESHEET: gen_timesheet(p, i, r); break;
	case EMU_K_WOS: gen_wos(p, i, r); break;
	case EMU_K_WO: gen_wo(p, i, r); break;
	case EMU_K_WP: gen_wp(p, i, r); break;
	case EMU_K_ACTIVITY: abort();	/* activities go through emu_data_activity_view */
	}
}
