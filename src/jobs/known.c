/*
 * known.c - the owners this instance has seen lately: jobs it recorded
 * (created through it) and owners the state answered. When the state
 * cannot answer (a fleet's PostgreSQL restarting) the owner check of a job
 * seen here still has its answer, so callers keep polling the jobs they
 * created; a job never seen here gets 503 as before. At most KNOWN_MAX
 * entries, the oldest going first; nothing here is ever more permissive
 * than the state (the state's answer, when it comes, wins).
 */
#include <stdio.h>
#include <stdlib.h>

#include "tidegate/map.h"
#include "jobs_int.h"

#define KNOWN_MAX	8192

struct jobs_known {
	struct tg_map *owner;		/* "<family>|<job>" -> the key's name */
	char *ring[KNOWN_MAX];		/* the same keys, oldest at pos */
	size_t pos;
};

static char *
known_key(const char *fam, const char *job)
{
	return tg_xasprintf("%s|%s", fam, job);
}

void
jobs_known_put(struct jobs *j, const char *fam, const char *job, const char *owner)
{
	struct jobs_known *k = j->known;
	char *key;

	if (fam == NULL || job == NULL || owner == NULL)
		return;
	if (k == NULL) {
		k = j->known = tg_xcalloc(1, sizeof(*k));
		k->owner = tg_map_new(free);
	}
	key = known_key(fam, job);
	if (tg_map_get(k->owner, key) == NULL) {
		if (k->ring[k->pos] != NULL) {
			(void)tg_map_del(k->owner, k->ring[k->pos]);
			free(k->ring[k->pos]);
		}
		k->ring[k->pos] = tg_xstrdup(key);
		k->pos = (k->pos + 1) % KNOWN_MAX;
	}
	tg_map_put(k->owner, key, tg_xstrdup(owner));
	free(key);
}

const char *
jobs_known_get(const struct jobs *j, const char *fam, const char *job)
{
	char *key;
	const char *owner;

	if (j->known == NULL || fam == NULL || job == NULL)
		return NULL;
	key = known_key(fam, job);
	owner = tg_map_get(j->known->owner, key);
	free(key);
	return owner;
}

void
jobs_known_free(struct jobs *j)
{
	size_t i;

	if (j->known == NULL)
		return;
	for (i = 0; i < KNOWN_MAX; i++)
		free(j->known->ring[i]);
	tg_map_free(j->known->owner);
	free(j->known);
	j->known = NULL;
}
