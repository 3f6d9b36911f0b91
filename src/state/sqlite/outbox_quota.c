/*
 * outbox_quota.c - the webhook payload bytes a SQLite outbox holds, for
 * its quota (tg_outbox_quota): the committed payloads of ready and dead
 * jobs, summed from the database when first needed and then kept in step
 * by the commits and outcomes on this connection (a purge sums again),
 * plus the payloads being written. One instance owns a SQLite outbox and
 * only its writer's connection writes payloads, so the count is exact
 * there. Called by outbox_payload.c (each write and commit),
 * outbox_lease.c (outcomes), outbox_admin.c (purge) and the backend's
 * usage operation.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/outbox.h"
#include "outbox_db.h"

#define KEY(k)	((k) != NULL ? (k) : "")

static int64_t
held_of(const struct tg_outbox *ob, const char *key)
{
	const int64_t *n = tg_map_get(ob->held.by_key, KEY(key));

	return n != NULL ? *n : 0;
}

static void
held_put(struct tg_outbox *ob, const char *key, int64_t bytes)
{
	int64_t *n = tg_xmalloc(sizeof(*n));

	*n = bytes;
	tg_map_put(ob->held.by_key, KEY(key), n);
}

static int
held_load(struct tg_outbox *ob, struct tg_err *err)
{
	sqlite3_stmt *s = tg_state_ob_stmt(ob, S_HELD);
	int rc;

	tg_map_free(ob->held.by_key);
	ob->held.by_key = tg_map_new(free);
	ob->held.all = 0;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		held_put(ob, (const char *)sqlite3_column_text(s, 0), sqlite3_column_int64(s, 1));
		ob->held.all += sqlite3_column_int64(s, 1);
	}
	sqlite3_reset(s);
	if (rc != SQLITE_DONE) {
		tg_state_ob_sql_err(ob, err, "usage");
		return -1;
	}
	ob->held.valid = 1;
	return 0;
}

void
tg_state_ob_held_add(struct tg_outbox *ob, const char *key, int64_t delta)
{
	if (!ob->held.valid)
		return;		/* summed afresh when needed */
	ob->held.all += delta;
	held_put(ob, key, held_of(ob, key) + delta);
}

void
tg_state_ob_held_forget(struct tg_outbox *ob)
{
	ob->held.valid = 0;
}

void
tg_state_ob_held_free(struct tg_outbox *ob)
{
	tg_map_free(ob->held.by_key);
	ob->held.by_key = NULL;
	ob->held.valid = 0;
}

static int
same_key(const char *a, const char *b)
{
	return strcmp(KEY(a), KEY(b)) == 0;
}

int
tg_outbox_usage(struct tg_outbox *ob, const char *api_key, int64_t *all, int64_t *mine,
    struct tg_err *err)
{
	struct tg_outbox_payload *p;

	if (!ob->held.valid && held_load(ob, err) != 0)
		return -1;
	*all = ob->held.all;
	*mine = held_of(ob, api_key);
	TAILQ_FOREACH(p, &ob->writers, entry) {
		*all += p->size;
		if (same_key(p->key, api_key))
			*mine += p->size;
	}
	return 0;
}

int
tg_state_ob_room(struct tg_outbox_payload *p, int64_t n, struct tg_err *err)
{
	int64_t all, mine;

	if (p->q.max_bytes <= 0 && p->q.key_max_bytes <= 0)
		return 0;
	if (tg_outbox_usage(p->ob, p->key, &all, &mine, err) != 0)
		return -1;
	if (p->q.max_bytes > 0 && all + n > p->q.max_bytes) {
		tg_err_set(err, "webhook payloads would hold %lld bytes, over their cap of %lld",
		    (long long)(all + n), (long long)p->q.max_bytes);
		return TG_OUTBOX_OVER_QUOTA;
	}
	if (p->q.key_max_bytes > 0 && mine + n > p->q.key_max_bytes) {
		tg_err_set(err, "the webhook payloads of the job's API key would hold %lld bytes, "
		    "over " TG_OUTBOX_QUOTA_KEY_WHY " of %lld", (long long)(mine + n),
		    (long long)p->q.key_max_bytes);
		return TG_OUTBOX_OVER_QUOTA;
	}
	return 0;
}

char *
tg_state_ob_job_key(struct tg_outbox *ob, const char *id)
{
	sqlite3_stmt *s = tg_state_ob_stmt(ob, S_JOB_KEY);
	char *key = NULL;

	sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
	if (sqlite3_step(s) == SQLITE_ROW)
		key = tg_state_ob_col_str(s, 0);
	sqlite3_reset(s);
	return key;
}
