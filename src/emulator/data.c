/*
 * data.c - the seeded, deterministic data set of each project. Records are
 * computed from (seed, kind, index) on demand, so a million activities cost
 * no memory; imported activities live in a per-project overlay that
 * export.c consults before the generated record.
 */
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

long long
emu_data_activity_index(const struct emu_project *p, const char *id)
{
	char canon[32];
	const char *d;
	long long n;

	/* Generated ids are zero-padded, which parse_seq_id refuses: skip the
	 * padding here; the canonical comparison below rejects other spellings. */
	if (strncmp(id, "ACT-", 4) != 0)
		return -1;
	for (d = id + 4; *d == '0'; d++)
		;
	if ((n = parse_seq_id(d, "", p->cfg->activities)) < 0)
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

uint64_t emu_data_rand(const struct emu_project *p, int kind, long long i, int field);

uint64_t
emu_data_rand(const struct emu_project *p, int kind, long long i, int field)
{
	return mix((uint64_t)p->cfg->seed * 1000003ULL ^ mix(((uint64_t)kind << 56) ^
	    ((uint64_t)field << 40) ^ (uint64_t)i));
}

static const char *const act_status[] = { "PLANNED", "DISPATCHED", "COMPLETED" };
static const char *const teams[] = { "Alpha", "Bravo", "Charlie", "Delta" };

void
emu_data_activity(const struct emu_project *p, long long i, struct emu_activity *a)
{
	const struct tg_emu_project *c = p->cfg;
	long long site = (long long)(emu_data_rand(p, 1, i, 0) % (uint64_t)c->sites) + 1;
	int64_t day = 86400000LL;
	int64_t start = p->epoch_ms + (int64_t)(emu_data_rand(p, 1, i, 1) % 730) * day +
	    (int64_t)(6 + emu_data_rand(p, 1, i, 2) % 8) * 3600000LL;
	uint64_t r = emu_data_rand(p, 1, i, 3);
	char buf[64];

	memset(a, 0, sizeof(*a));
	snprintf(buf, sizeof(buf), "ACT-%06lld", i + 1);
	a->id = tg_xstrdup(buf);
	snprintf(buf, sizeof(buf), "S-%lld", site);
	a->site_id = tg_xstrdup(buf);
	if (c->assets_per_site > 0) {
		snprintf(buf, sizeof(buf), "A-%lld-%lld", site,
		    (long long)(r % (uint64_t)c->assets_per_site) + 1);
		a->asset_id = tg_xstrdup(buf);
	}
	snprintf(buf, sizeof(buf), "Activity %lld", i + 1);
	a->name = tg_xstrdup(buf);
	if (c->activity_categories > 0) {
		snprintf(buf, sizeof(buf), "CAT-%lld",
		    (long long)((r >> 8) % (uint64_t)c->activity_categories) + 1);
		a->category = tg_xstrdup(buf);
	}
	a->status = tg_xstrdup(act_status[(r >> 16) % 3]);
	a->type = tg_xstrdup((r >> 20) % 4 == 0 ? "NONE" : (r >> 20) % 4 == 1 ? "INSPECTION" :
	    (r >> 20) % 4 == 2 ? "MAINTENANCE" : "REPAIR");
	if (c->work_packages > 0 && (r >> 24) % 3 != 0) {
		snprintf(buf, sizeof(buf), "WP-%lld",
		    (long long)((r >> 28) % (uint64_t)c->work_packages) + 1);
		a->work_package_id = tg_xstrdup(buf);
	}
	if (c->work_orders > 0 && (r >> 32) % 2 == 0) {
		snprintf(buf, sizeof(buf), "WO-%lld",
		    (long long)((r >> 36) % (uint64_t)c->work_orders) + 1);
		a->work_order_id = tg_xstrdup(buf);
	}
	snprintf(buf, sizeof(buf), "Generated remark %lld", i + 1);
	a->external_remarks = tg_xstrdup(buf);
	a->start_ms = start;
	a->end_ms = start + (int64_t)(1 + (r >> 40) % 10) * 3600000LL;
	a->created_ms = start - 30 * day;
	a->updated_ms = a->created_ms + (int64_t)((r >> 44) % 20) * day;
	a->additional_client_work = (int)((r >> 50) & 1);
	a->teams.n = 1 + (r >> 52) % 2;
	a->teams.v = tg_xcalloc(a->teams.n, sizeof(char *));
	a->teams.v[0] = tg_xstrdup(teams[(r >> 54) % 4]);
	if (a->teams.n > 1)
		a->teams.v[1] = tg_xstrdup(teams[((r >> 54) + 1) % 4]);
	if (c->personnel > 0) {
		a->personnel_ids.n = 1;
		a->personnel_ids.v = tg_xcalloc(1, sizeof(char *));
		snprintf(buf, sizeof(buf), "PER-%lld",
		    (long long)((r >> 56) % (uint64_t)c->personnel) + 1);
		a->personnel_ids.v[0] = tg_xstrdup(buf);
	}
	a->nmanpower = a->teams.n;
	a->manpower = tg_xcalloc(a->nmanpower, sizeof(*a->manpower));
	a->manpower[0].team = tg_xstrdup(a->teams.v[0]);
	a->manpower[0].n = 1 + (long long)((r >> 58) % 4);
	if (a->nmanpower > 1) {
		a->manpower[1].team = tg_xstrdup(a->teams.v[1]);
		a->manpower[1].n = 2;
	}
}
