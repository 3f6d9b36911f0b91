/*
 * outbox_lease.c - attempts under lease: taking the most overdue job (an expired
 * lease is taken over), renewing and releasing, and completing an attempt
 * with its outcome, which decides delivered / gone / dead or the next
 * attempt time from the schedule and Retry-After. Called by the worker
 * (deliver.c, worker.c) and by tests driving the outbox without a loop.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tidegate/ids.h"
#include "tidegate/log.h"
#include "tidegate/outbox.h"
#include "outbox_db.h"

void
tg_outbox_lease_free(struct tg_outbox_lease *l)
{
	if (l == NULL)
		return;
	free(l->url);
	free(l->secret_ref);
	free(l->content_type);
	free(l->kind);
	free(l->correlation_id);
	free(l->service);
	free(l->api_key);
	free(l->payload_path);
	free(l->host);
	if (l->spool_fd > 0)
		close(l->spool_fd);
	free(l);
}

/* The job's fields into l; its first attempt's delay when this is one. */
static int
load(struct tg_outbox *ob, struct tg_outbox_lease *l, int64_t now_ms, struct tg_err *err)
{
	sqlite3_stmt *s = tg_state_ob_stmt(ob, S_JOB_FOR_LEASE);
	int rc = -1;

	sqlite3_bind_text(s, 1, l->id, -1, SQLITE_STATIC);
	if (sqlite3_step(s) != SQLITE_ROW) {
		tg_state_ob_sql_err(ob, err, "lease");
		goto done;
	}
	l->url = tg_state_ob_col_str(s, 0);
	l->secret_ref = tg_state_ob_col_str(s, 1);
	l->content_type = tg_state_ob_col_str(s, 2);
	l->kind = tg_state_ob_col_str(s, 3);
	l->correlation_id = tg_state_ob_col_str(s, 4);
	l->service = tg_state_ob_col_str(s, 5);
	l->api_key = tg_state_ob_col_str(s, 6);
	l->size = sqlite3_column_int64(s, 7);
	l->attempt = sqlite3_column_int(s, 8) + 1;
	l->first_delay_ms = sqlite3_column_type(s, 10) == SQLITE_NULL ?
	    now_ms - sqlite3_column_int64(s, 9) : -1;
	l->host = tg_state_url_host(l->url);
	rc = 0;
done:
	sqlite3_reset(s);
	return rc;
}

static int
take(struct tg_outbox *ob, struct tg_outbox_lease *l, int64_t now_ms, struct tg_err *err)
{
	sqlite3_stmt *s;

	if (load(ob, l, now_ms, err) != 0)
		return -1;
	s = tg_state_ob_stmt(ob, S_COUNT_ATTEMPT);
	sqlite3_bind_text(s, 1, l->id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, now_ms);
	if (tg_state_ob_step_done(ob, s, err) != 0)
		return -1;
	tg_id_hex(l->token, 16);
	l->expires_at = now_ms + ob->rules.lease_ms;
	s = tg_state_ob_stmt(ob, S_LEASE_PUT);
	sqlite3_bind_text(s, 1, l->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, l->token, -1, SQLITE_STATIC);
	sqlite3_bind_int(s, 3, l->attempt);
	sqlite3_bind_int64(s, 4, l->expires_at);
	return tg_state_ob_step_done(ob, s, err);
}

/* The id of the most overdue leasable job not to a host of skip into id:
 * 1, 0 (none) or -1. */
static int
pick(struct tg_outbox *ob, int64_t now_ms, const char *skip, char id[TG_WEBHOOK_ID_LEN],
    struct tg_err *err)
{
	sqlite3_stmt *s = tg_state_ob_stmt(ob, S_PICK);
	int rc;

	sqlite3_bind_int64(s, 1, now_ms);
	if (skip != NULL)
		sqlite3_bind_text(s, 2, skip, -1, SQLITE_STATIC);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		snprintf(id, TG_WEBHOOK_ID_LEN, "%s", (const char *)sqlite3_column_text(s, 0));
		rc = 1;
	} else if (rc == SQLITE_DONE)
		rc = 0;
	else {
		tg_state_ob_sql_err(ob, err, "lease");
		rc = -1;
	}
	sqlite3_reset(s);
	return rc;
}

int
tg_outbox_lease(struct tg_outbox *ob, int64_t now_ms, const struct tg_strlist *skip_hosts,
    struct tg_outbox_lease **out, struct tg_err *err)
{
	char *skip = tg_state_skip_join(skip_hosts);
	int rc = tg_outbox_lease_joined(ob, now_ms, skip, out, err);

	free(skip);
	return rc;
}

int
tg_outbox_lease_joined(struct tg_outbox *ob, int64_t now_ms, const char *skip,
    struct tg_outbox_lease **out, struct tg_err *err)
{
	struct tg_outbox_lease *l = tg_xcalloc(1, sizeof(*l));
	int rc;

	*out = NULL;
	if (tg_state_ob_begin(ob, err) != 0) {
		rc = -1;
		goto done;
	}
	if ((rc = pick(ob, now_ms, skip, l->id, err)) != 1) {
		tg_state_ob_rollback(ob);
		goto done;
	}
	if (take(ob, l, now_ms, err) != 0 || tg_state_ob_commit(ob, err) != 0) {
		tg_state_ob_rollback(ob);
		rc = -1;
		goto done;
	}
	l->payload_path = tg_state_ob_payload_path(ob, l->id);
	ob->ctr.attempts++;
	if (l->first_delay_ms >= 0) {
		ob->ctr.first_delay_count++;
		ob->ctr.first_delay_sum_ms += l->first_delay_ms;
	}
	*out = l;
	l = NULL;
done:
	tg_outbox_lease_free(l);
	return rc;
}

int
tg_outbox_lease_renew(struct tg_outbox *ob, struct tg_outbox_lease *l, int64_t now_ms,
    struct tg_err *err)
{
	sqlite3_stmt *s = tg_state_ob_stmt(ob, S_LEASE_RENEW);

	sqlite3_bind_text(s, 1, l->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, l->token, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 3, now_ms + ob->rules.lease_ms);
	if (tg_state_ob_step_done(ob, s, err) != 0)
		return -1;
	if (sqlite3_changes(ob->db) != 1) {
		tg_err_set(err, "lease of %s was lost", l->id);
		return -1;
	}
	l->expires_at = now_ms + ob->rules.lease_ms;
	return 0;
}

int
tg_outbox_lease_release(struct tg_outbox *ob, const struct tg_outbox_lease *l,
    struct tg_err *err)
{
	sqlite3_stmt *s = tg_state_ob_stmt(ob, S_LEASE_DEL);

	sqlite3_bind_text(s, 1, l->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, l->token, -1, SQLITE_STATIC);
	return tg_state_ob_step_done(ob, s, err);
}

/* 0 when l still holds its job's lease. */
static int
lease_held(struct tg_outbox *ob, const struct tg_outbox_lease *l, struct tg_err *err)
{
	sqlite3_stmt *s = tg_state_ob_stmt(ob, S_LEASE_TOKEN);
	int rc = -1;

	sqlite3_bind_text(s, 1, l->id, -1, SQLITE_STATIC);
	if (sqlite3_step(s) == SQLITE_ROW &&
	    strcmp((const char *)sqlite3_column_text(s, 0), l->token) == 0)
		rc = 0;
	else
		tg_err_set(err, "lease of %s was lost", l->id);
	sqlite3_reset(s);
	return rc;
}

static int
finish(struct tg_outbox *ob, const struct tg_outbox_lease *l,
    const struct tg_outbox_result *res, enum tg_outbox_state st, int64_t next_at,
    int64_t now_ms, struct tg_err *err)
{
	sqlite3_stmt *s = tg_state_ob_stmt(ob, S_FINISH);

	sqlite3_bind_text(s, 1, l->id, -1, SQLITE_STATIC);
	sqlite3_bind_text(s, 2, tg_outbox_state_str(st), -1, SQLITE_STATIC);
	if (st == TG_OUTBOX_READY)
		sqlite3_bind_int64(s, 3, next_at);
	if (res->status > 0)
		sqlite3_bind_int(s, 4, res->status);
	if (res->error != NULL && *res->error != '\0')
		sqlite3_bind_text(s, 5, res->error, -1, SQLITE_STATIC);
	if (st != TG_OUTBOX_READY)
		sqlite3_bind_int64(s, 6, now_ms);
	if (tg_state_ob_step_done(ob, s, err) != 0)
		return -1;
	return tg_outbox_lease_release(ob, l, err);
}

static void
count(struct tg_outbox *ob, enum tg_outbox_state st)
{
	switch (st) {
	case TG_OUTBOX_DELIVERED: ob->ctr.delivered++; break;
	case TG_OUTBOX_GONE: ob->ctr.gone++; break;
	case TG_OUTBOX_DEAD: ob->ctr.dead++; break;
	case TG_OUTBOX_READY: ob->ctr.retries++; break;
	default: break;
	}
}

int
tg_outbox_complete(struct tg_outbox *ob, const struct tg_outbox_lease *l,
    const struct tg_outbox_result *res, int64_t now_ms, enum tg_outbox_state *state,
    int64_t *next_at, struct tg_err *err)
{
	enum tg_outbox_state st;
	int64_t next;

	if (tg_state_ob_begin(ob, err) != 0)
		return -1;
	st = tg_state_rules_judge(&ob->rules, l->attempt, res, now_ms, &next);
	if (lease_held(ob, l, err) != 0 || finish(ob, l, res, st, next, now_ms, err) != 0 ||
	    tg_state_ob_commit(ob, err) != 0) {
		tg_state_ob_rollback(ob);
		return -1;
	}
	/* After the commit: a crash in between leaves a file the next open sweeps. */
	if (st == TG_OUTBOX_DELIVERED || st == TG_OUTBOX_GONE) {
		tg_state_ob_payload_remove(ob, l->id);
		tg_state_ob_held_add(ob, l->api_key, -l->size);
	}
	count(ob, st);
	if (state != NULL)
		*state = st;
	if (next_at != NULL)
		*next_at = next;
	return 0;
}
