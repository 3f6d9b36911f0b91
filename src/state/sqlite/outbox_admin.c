/*
 * outbox_admin.c - what operators see and do with the outbox: list and read jobs
 * (and their JSON for the admin API), redeliver one job or every failure
 * since a time, purge finished jobs, and the counters behind /metrics.
 * Called by the gateway's admin listener and metrics endpoint.
 */
#include <stdlib.h>
#include <string.h>

#include "tidegate/clock.h"
#include "tidegate/json.h"
#include "tidegate/outbox.h"
#include "outbox_db.h"

#define LIST_LIMIT	100

void
tg_outbox_job_cleanup(struct tg_outbox_job *j)
{
	if (j == NULL)
		return;
	free(j->url);
	free(j->kind);
	free(j->correlation_id);
	free(j->service);
	free(j->api_key);
	free(j->secret_ref);
	free(j->last_error);
	memset(j, 0, sizeof(*j));
}

void
tg_outbox_jobs_free(struct tg_outbox_job *jobs, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		tg_outbox_job_cleanup(&jobs[i]);
	free(jobs);
}

static int64_t
col_ms(sqlite3_stmt *s, int col)
{
	return sqlite3_column_type(s, col) == SQLITE_NULL ? 0 : sqlite3_column_int64(s, col);
}

/* One row of JOB_COLS (outbox.c) into j. */
static void
row(sqlite3_stmt *s, struct tg_outbox_job *j)
{
	memset(j, 0, sizeof(*j));
	snprintf(j->id, sizeof(j->id), "%s", (const char *)sqlite3_column_text(s, 0));
	j->state = tg_outbox_state_parse((const char *)sqlite3_column_text(s, 1));
	j->url = tg_state_ob_col_str(s, 2);
	j->kind = tg_state_ob_col_str(s, 3);
	j->correlation_id = tg_state_ob_col_str(s, 4);
	j->service = tg_state_ob_col_str(s, 5);
	j->api_key = tg_state_ob_col_str(s, 6);
	j->secret_ref = tg_state_ob_col_str(s, 7);
	j->last_error = tg_state_ob_col_str(s, 8);
	j->attempts = sqlite3_column_int(s, 9);
	j->last_status = sqlite3_column_int(s, 10);
	j->size = sqlite3_column_type(s, 11) == SQLITE_NULL ? -1 : sqlite3_column_int64(s, 11);
	j->created_at = col_ms(s, 12);
	j->ready_at = col_ms(s, 13);
	j->next_at = col_ms(s, 14);
	j->first_attempt_at = col_ms(s, 15);
	j->last_attempt_at = col_ms(s, 16);
	j->done_at = col_ms(s, 17);
	j->leased = sqlite3_column_int(s, 18);
}

/* A lease counts as live until its expiry, judged at now_ms. */
static int
get_at(struct tg_outbox *ob, const char *id, int64_t now_ms, struct tg_outbox_job *job,
    struct tg_err *err)
{
	sqlite3_stmt *s = tg_state_ob_stmt(ob, S_GET);
	int rc;

	sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 9, now_ms);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		row(s, job);
		rc = 0;
	} else if (rc == SQLITE_DONE) {
		tg_err_set(err, "no webhook job %s", id);
		rc = TG_OUTBOX_NOT_FOUND;
	} else {
		tg_state_ob_sql_err(ob, err, "read");
		rc = -1;
	}
	sqlite3_reset(s);
	return rc;
}

int
tg_outbox_get(struct tg_outbox *ob, const char *id, struct tg_outbox_job *job,
    struct tg_err *err)
{
	return get_at(ob, id, tg_clock_now_ms(), job, err);
}

int
tg_outbox_list(struct tg_outbox *ob, const struct tg_outbox_query *q,
    struct tg_outbox_job **jobs, size_t *n, struct tg_err *err)
{
	sqlite3_stmt *s = tg_state_ob_stmt(ob, S_LIST);
	size_t cap = 0;
	int rc;

	*jobs = NULL;
	*n = 0;
	if (q->state >= 0 && q->state < TG_OUTBOX_NSTATES)
		sqlite3_bind_text(s, 1, tg_outbox_state_str(q->state), -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, q->since_ms);
	if (q->correlation_id != NULL)
		sqlite3_bind_text(s, 3, q->correlation_id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 4, (sqlite3_int64)(q->limit > 0 ? q->limit : LIST_LIMIT));
	sqlite3_bind_int64(s, 5, (sqlite3_int64)q->offset);
	sqlite3_bind_int64(s, 9, tg_clock_now_ms());
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (*n == cap) {
			cap = cap ? 2 * cap : 16;
			*jobs = tg_xrealloc(*jobs, cap * sizeof(**jobs));
		}
		row(s, &(*jobs)[(*n)++]);
	}
	sqlite3_reset(s);
	if (rc == SQLITE_DONE)
		return 0;
	tg_state_ob_sql_err(ob, err, "list");
	tg_outbox_jobs_free(*jobs, *n);
	*jobs = NULL;
	*n = 0;
	return -1;
}

int
tg_outbox_redeliver(struct tg_outbox *ob, const char *id, int64_t now_ms,
    struct tg_err *err)
{
	struct tg_outbox_job j;
	sqlite3_stmt *s;
	const char *why;
	int rc;

	if ((rc = get_at(ob, id, now_ms, &j, err)) != 0)
		return rc;
	why = tg_state_rules_refusal(j.state, j.leased, j.size >= 0);
	if (why != NULL) {
		tg_err_set(err, "webhook job %s is %s: %s", id, tg_outbox_state_str(j.state), why);
		rc = TG_OUTBOX_CONFLICT;
		goto done;
	}
	s = tg_state_ob_stmt(ob, S_REDELIVER);
	sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, now_ms);
	rc = tg_state_ob_step_done(ob, s, err);
done:
	tg_outbox_job_cleanup(&j);
	return rc;
}

int
tg_outbox_redeliver_since(struct tg_outbox *ob, int64_t since_ms, int64_t now_ms,
    size_t *n, struct tg_err *err)
{
	sqlite3_stmt *s = tg_state_ob_stmt(ob, S_REDELIVER_SINCE);

	*n = 0;
	sqlite3_bind_int64(s, 1, since_ms);
	sqlite3_bind_int64(s, 2, now_ms);
	if (tg_state_ob_step_done(ob, s, err) != 0)
		return -1;
	*n = (size_t)sqlite3_changes(ob->db);
	return 0;
}

/* The ids of finished jobs done before before_ms. */
static int
purge_ids(struct tg_outbox *ob, int64_t before_ms, struct tg_strlist *ids,
    struct tg_err *err)
{
	sqlite3_stmt *s = tg_state_ob_stmt(ob, S_PURGE_SEL);
	int rc;

	sqlite3_bind_int64(s, 1, before_ms);
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		ids->v = tg_xrealloc(ids->v, (ids->n + 1) * sizeof(*ids->v));
		ids->v[ids->n++] = tg_state_ob_col_str(s, 0);
	}
	sqlite3_reset(s);
	if (rc == SQLITE_DONE)
		return 0;
	tg_state_ob_sql_err(ob, err, "purge");
	return -1;
}

int
tg_outbox_purge(struct tg_outbox *ob, int64_t before_ms, size_t *n, struct tg_err *err)
{
	struct tg_strlist ids = { NULL, 0 };
	sqlite3_stmt *s;
	size_t i;
	int rc = -1;

	*n = 0;
	if (tg_state_ob_begin(ob, err) != 0)
		goto done;
	if (purge_ids(ob, before_ms, &ids, err) != 0)
		goto rollback;
	for (i = 0; i < ids.n; i++) {
		s = tg_state_ob_stmt(ob, S_DELETE);
		sqlite3_bind_text(s, 1, ids.v[i], -1, SQLITE_STATIC);
		if (tg_state_ob_step_done(ob, s, err) != 0)
			goto rollback;
	}
	if (tg_state_ob_commit(ob, err) != 0)
		goto done;
	for (i = 0; i < ids.n; i++)
		tg_state_ob_payload_remove(ob, ids.v[i]);
	if (ids.n > 0)
		tg_state_ob_held_forget(ob);	/* dead letters' data went with them */
	*n = ids.n;
	rc = 0;
	goto done;
rollback:
	tg_state_ob_rollback(ob);
done:
	for (i = 0; i < ids.n; i++)
		free(ids.v[i]);
	free(ids.v);
	return rc;
}

int
tg_outbox_get_stats(struct tg_outbox *ob, int64_t now_ms, struct tg_outbox_stats *st,
    struct tg_err *err)
{
	sqlite3_stmt *s = tg_state_ob_stmt(ob, S_DEPTH);
	int rc, i;

	*st = ob->ctr;
	memset(st->depth, 0, sizeof(st->depth));
	while ((rc = sqlite3_step(s)) == SQLITE_ROW)
		if ((i = tg_outbox_state_parse((const char *)sqlite3_column_text(s, 0))) >= 0)
			st->depth[i] = (uint64_t)sqlite3_column_int64(s, 1);
	sqlite3_reset(s);
	if (rc != SQLITE_DONE)
		goto fail;
	s = tg_state_ob_stmt(ob, S_LEASED);
	sqlite3_bind_int64(s, 1, now_ms);
	if (sqlite3_step(s) != SQLITE_ROW) {
		sqlite3_reset(s);
		goto fail;
	}
	st->leased = (uint64_t)sqlite3_column_int64(s, 0);
	sqlite3_reset(s);
	return 0;
fail:
	tg_state_ob_sql_err(ob, err, "stats");
	return -1;
}
