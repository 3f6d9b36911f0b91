/*
 * sweep_store.c - sweeps in the run registry: the sweep record, its
 * variants in request order with each patched case held until the vendor
 * accepts it, claims bounded by the sweep's concurrency, and the step to
 * "done" once every variant has ended. Called by the gateway's sweep
 * handler (create, read) and its submitter (claim, submitted, unclaim,
 * settle), which resumes the running sweeps after a restart.
 *
 * A variant's life: pending -> submitting (claimed) -> submitted (a run
 * row exists, the case is dropped) or rejected (the vendor refused it);
 * a failed submission without a verdict goes back to pending. A claim a
 * stopped process never finished is pending again at the next open.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/ids.h"
#include "tidegate/json.h"
#include "runs_db.h"
#include "../run_rules.h"

const char *
tg_sweep_state_str(enum tg_sweep_state s)
{
	return s == TG_SWEEP_DONE ? "done" : "running";
}

const char *
tg_sweep_variant_status(const struct tg_sweep_variant *v)
{
	switch (v->state) {
	case TG_VARIANT_PENDING:
		return "PENDING";
	case TG_VARIANT_SUBMITTING:
		return "SUBMITTING";
	case TG_VARIANT_REJECTED:
		return "REJECTED";
	default:
		return tg_runs_status_str(v->run_status);
	}
}

/* ---- create ---- */

static int
insert_variant(struct tg_runs *r, const char *id, size_t pos,
    const struct tg_sweep_variant_new *v, struct tg_err *err)
{
	sqlite3_stmt *s = tg_runs_stmt(r, S_SWV_INSERT);
	char sha[TG_RUNS_SHA_LEN];
	int rc;

	tg_runs_case_digest(v->body, v->len, sha);
	sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(s, 2, (int64_t)pos);
	sqlite3_bind_text(s, 3, v->name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_blob64(s, 4, v->len > 0 ? v->body : "", v->len, SQLITE_STATIC);
	sqlite3_bind_text(s, 5, sha, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(s);
	sqlite3_reset(s);
	if (rc == SQLITE_DONE)
		return 0;
	if (rc == SQLITE_CONSTRAINT)
		tg_err_set(err, "sweep variant name '%.64s' is given twice", v->name);
	else
		tg_runs_sql_err(r, err, "insert");
	return -1;
}

int
tg_runs_sweep_create(struct tg_runs *r, const struct tg_sweep_new *sw, int64_t now_ms,
    char id[TG_SWEEP_ID_LEN], struct tg_err *err)
{
	sqlite3_stmt *s;
	char hex[33];
	size_t i;

	if (tg_state_sweep_new_ok(sw, err) != 0)
		return -1;
	tg_id_hex(hex, 16);
	snprintf(id, TG_SWEEP_ID_LEN, "swp_%s", hex);
	if (tg_runs_begin(r, err) != 0)
		return -1;
	s = tg_runs_stmt(r, S_SW_INSERT);
	sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
	tg_runs_bind_str(s, 2, sw->api_key);
	tg_runs_bind_str(s, 3, sw->base_case_id);
	sqlite3_bind_int64(s, 4, now_ms);
	sqlite3_bind_int(s, 5, sw->concurrency > 0 ? sw->concurrency : TG_SWEEP_CONCURRENCY);
	tg_runs_bind_str(s, 6, sw->callback_url);
	sqlite3_bind_int64(s, 7, (int64_t)sw->nvariants);
	if (tg_runs_step_done(r, s, err) != 0)
		goto fail;
	for (i = 0; i < sw->nvariants; i++)
		if (insert_variant(r, id, i, &sw->variants[i], err) != 0)
			goto fail;
	return tg_runs_commit(r, err);
fail:
	tg_runs_rollback(r);
	return -1;
}

/* ---- read ---- */

void
tg_sweep_cleanup(struct tg_sweep *s)
{
	if (s == NULL)
		return;
	free(s->api_key);
	free(s->base_case_id);
	free(s->callback_url);
	memset(s, 0, sizeof(*s));
}

/* A row of S_SW_GET or S_SW_LIST into sw (a struct tg_sweep). */
static void
read_sweep(sqlite3_stmt *s, void *out)
{
	struct tg_sweep *sw = out;
	const char *state = (const char *)sqlite3_column_text(s, 5);
	const char *id = (const char *)sqlite3_column_text(s, 8);

	memset(sw, 0, sizeof(*sw));
	snprintf(sw->id, sizeof(sw->id), "%s", id ? id : "");
	sw->api_key = tg_runs_col_str(s, 0);
	sw->base_case_id = tg_runs_col_str(s, 1);
	sw->created_at = tg_runs_col_time(s, 2);
	sw->concurrency = sqlite3_column_int(s, 3);
	sw->callback_url = tg_runs_col_str(s, 4);
	sw->state = state && strcmp(state, "done") == 0 ? TG_SWEEP_DONE : TG_SWEEP_RUNNING;
	sw->nvariants = (size_t)sqlite3_column_int64(s, 6);
	sw->done_at = tg_runs_col_time(s, 7);
}

int
tg_runs_sweep_get(struct tg_runs *r, const char *id, struct tg_sweep *sw,
    struct tg_err *err)
{
	memset(sw, 0, sizeof(*sw));
	return tg_runs_get_row(r, S_SW_GET, id, "sweep", read_sweep, sw, err);
}

int
tg_runs_sweep_list(struct tg_runs *r, const char *api_key, const char *state, size_t limit,
    size_t offset, struct tg_sweep **out, size_t *n, int *more, struct tg_err *err)
{
	sqlite3_stmt *s;

	*out = NULL;
	*n = 0;
	if (tg_state_sweep_state_ok(state, err) != 0)
		return -1;
	limit = tg_state_sweeps_page(limit);
	s = tg_runs_stmt(r, S_SW_LIST);
	tg_runs_bind_str(s, 1, api_key);
	tg_runs_bind_str(s, 2, state);
	sqlite3_bind_int64(s, 3, (int64_t)limit + 1);	/* one past: more? */
	sqlite3_bind_int64(s, 4, offset < INT64_MAX ? (int64_t)offset : INT64_MAX);
	if (tg_runs_read_rows(r, s, sizeof(**out), read_sweep, (void **)out, n, err) != 0) {
		tg_sweeps_free(*out, *n);
		*out = NULL;
		*n = 0;
		return -1;
	}
	if (more != NULL)
		*more = *n > limit;
	if (*n > limit) {
		tg_sweep_cleanup(&(*out)[limit]);
		*n = limit;
	}
	return 0;
}

void
tg_sweeps_free(struct tg_sweep *s, size_t n)
{
	size_t i;

	for (i = 0; s != NULL && i < n; i++)
		tg_sweep_cleanup(&s[i]);
	free(s);
}

void
tg_sweep_variants_free(struct tg_sweep_variant *v, size_t n)
{
	size_t i;

	for (i = 0; v != NULL && i < n; i++) {
		free(v[i].name);
		free(v[i].simulation_id);
		free(v[i].error);
		free(v[i].failure);
		yajl_tree_free(v[i].figures);
	}
	free(v);
}

/* One row of S_SWV_LIST. */
static void
variant_from_row(sqlite3_stmt *s, void *out)
{
	struct tg_sweep_variant *v = out;
	const unsigned char *sha = sqlite3_column_text(s, 2);
	int st;

	memset(v, 0, sizeof(*v));
	v->name = tg_runs_col_str(s, 0);
	v->state = tg_state_variant_state_parse((const char *)sqlite3_column_text(s, 1));
	snprintf(v->case_sha256, sizeof(v->case_sha256), "%s", sha ? (const char *)sha : "");
	v->simulation_id = tg_runs_col_str(s, 3);
	v->error = tg_runs_col_str(s, 4);
	v->attempts = sqlite3_column_int(s, 5);
	v->submitted_at = tg_runs_col_time(s, 6);
	/* A run purged from the registry has long expired. */
	st = sqlite3_column_type(s, 7) == SQLITE_NULL ? TG_RUN_EXPIRED : tg_runs_col_status(s, 7);
	v->run_status = st < 0 ? TG_RUN_UNKNOWN : st;
	v->failure = tg_runs_col_str(s, 8);
	v->figures = tg_runs_col_json(s, 9);
}

int
tg_runs_sweep_variants(struct tg_runs *r, const char *id, struct tg_sweep_variant **v,
    size_t *n, struct tg_err *err)
{
	struct tg_sweep sw;
	sqlite3_stmt *s;
	int rc;

	*v = NULL;
	*n = 0;
	if ((rc = tg_runs_sweep_get(r, id, &sw, err)) != 0)
		return rc;
	tg_sweep_cleanup(&sw);
	s = tg_runs_stmt(r, S_SWV_LIST);
	sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
	if (tg_runs_read_rows(r, s, sizeof(**v), variant_from_row, (void **)v, n, err) == 0)
		return 0;
	tg_sweep_variants_free(*v, *n);
	*v = NULL;
	*n = 0;
	return -1;
}

/* The first column as a malloc'd string into *(char **)out. */
static void
read_id(sqlite3_stmt *s, void *out)
{
	*(char **)out = tg_runs_col_str(s, 0);
}

int
tg_runs_sweeps_running(struct tg_runs *r, char ***ids, size_t *n, struct tg_err *err)
{
	if (tg_runs_read_rows(r, tg_runs_stmt(r, S_SW_RUNNING), sizeof(**ids), read_id, (void **)ids,
	    n, err) == 0)
		return 0;
	tg_runs_ids_free(*ids, *n);
	*ids = NULL;
	*n = 0;
	return -1;
}

void
tg_runs_ids_free(char **ids, size_t n)
{
	size_t i;

	for (i = 0; ids != NULL && i < n; i++)
		free(ids[i]);
	free(ids);
}

/* ---- the submission queue ---- */

void
tg_sweep_claim_cleanup(struct tg_sweep_claim *c)
{
	if (c == NULL)
		return;
	free(c->name);
	free(c->body);
	free(c->api_key);
	memset(c, 0, sizeof(*c));
}

/* 1 when the sweep runs and has room for one more variant in flight. */
static int
has_room(struct tg_runs *r, const char *id, char **api_key, struct tg_err *err)
{
	sqlite3_stmt *s = tg_runs_stmt(r, S_SW_INFLIGHT);
	const char *state;
	int rc;

	sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		state = (const char *)sqlite3_column_text(s, 1);
		*api_key = tg_runs_col_str(s, 2);
		rc = (state == NULL || strcmp(state, "running") == 0) &&
		    sqlite3_column_int64(s, 3) < sqlite3_column_int64(s, 0);
	} else if (rc == SQLITE_DONE) {
		tg_err_set(err, "no sweep %s", id);
		rc = TG_RUNS_NOT_FOUND;
	} else {
		tg_runs_sql_err(r, err, "read");
		rc = -1;
	}
	sqlite3_reset(s);
	return rc;
}

/* The first pending variant into c; 1, 0 when none, -1. */
static int
take_next(struct tg_runs *r, const char *id, struct tg_sweep_claim *c, struct tg_err *err)
{
	sqlite3_stmt *s = tg_runs_stmt(r, S_SWV_NEXT), *u;
	const unsigned char *sha;
	int64_t pos;
	int rc;

	sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
	if ((rc = sqlite3_step(s)) != SQLITE_ROW) {
		sqlite3_reset(s);
		if (rc == SQLITE_DONE)
			return 0;
		tg_runs_sql_err(r, err, "read");
		return -1;
	}
	pos = sqlite3_column_int64(s, 0);
	c->name = tg_runs_col_str(s, 1);
	c->len = (size_t)sqlite3_column_bytes(s, 2);
	c->body = tg_xmalloc(c->len + 1);
	if (c->len > 0)
		memcpy(c->body, sqlite3_column_blob(s, 2), c->len);
	c->body[c->len] = '\0';
	sha = sqlite3_column_text(s, 3);
	snprintf(c->case_sha256, sizeof(c->case_sha256), "%s", sha ? (const char *)sha : "");
	sqlite3_reset(s);
	u = tg_runs_stmt(r, S_SWV_CLAIM);
	sqlite3_bind_text(u, 1, id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(u, 2, pos);
	return tg_runs_step_done(r, u, err) == 0 ? 1 : -1;
}

int
tg_runs_sweep_claim(struct tg_runs *r, const char *id, int64_t now_ms,
    struct tg_sweep_claim *c, struct tg_err *err)
{
	char *api_key = NULL;
	int rc;

	memset(c, 0, sizeof(*c));
	if (tg_runs_begin(r, err) != 0)
		return -1;
	rc = has_room(r, id, &api_key, err);
	if (rc == 1)
		rc = take_next(r, id, c, err);
	if (rc == 1) {
		c->api_key = api_key;
		api_key = NULL;
	}
	free(api_key);
	if (rc != 1) {
		tg_runs_rollback(r);
		tg_sweep_claim_cleanup(c);
		return rc;
	}
	if (tg_runs_commit(r, err) != 0) {
		tg_sweep_claim_cleanup(c);
		return -1;
	}
	return 1;
}

/* The state of variant name; a code when missing or not submitting. */
static int
expect_submitting(struct tg_runs *r, const char *id, const char *name, struct tg_err *err)
{
	sqlite3_stmt *s = tg_runs_stmt(r, S_SWV_STATE);
	int rc;

	sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(s, 2, name, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		rc = tg_state_variant_state_parse((const char *)sqlite3_column_text(s, 0));
		if (rc != TG_VARIANT_SUBMITTING) {
			tg_err_set(err, "sweep variant %.64s is %s, not submitting", name,
			    tg_state_variant_state_name(rc));
			rc = TG_RUNS_CONFLICT;
		} else {
			rc = 0;
		}
	} else if (rc == SQLITE_DONE) {
		tg_err_set(err, "no variant %.64s in sweep %s", name, id);
		rc = TG_RUNS_NOT_FOUND;
	} else {
		tg_runs_sql_err(r, err, "read");
		rc = -1;
	}
	sqlite3_reset(s);
	return rc;
}

int
tg_runs_sweep_submitted(struct tg_runs *r, const char *id, const char *name,
    const struct tg_run_new *run, int64_t now_ms, struct tg_err *err)
{
	sqlite3_stmt *s;
	int rc;

	if (tg_runs_begin(r, err) != 0)
		return -1;
	if ((rc = expect_submitting(r, id, name, err)) != 0 ||
	    (rc = tg_runs_insert(r, run, id, name, now_ms, err)) != 0)
		goto fail;
	s = tg_runs_stmt(r, S_SWV_SUBMITTED);
	sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(s, 2, name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(s, 3, run->simulation_id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(s, 4, run->submitted_at ? run->submitted_at : now_ms);
	if ((rc = tg_runs_step_done(r, s, err)) != 0)
		goto fail;
	return tg_runs_commit(r, err);
fail:
	tg_runs_rollback(r);
	return rc;
}

int
tg_runs_sweep_unclaim(struct tg_runs *r, const char *id, const char *name,
    const char *why, int final, int64_t now_ms, struct tg_err *err)
{
	sqlite3_stmt *s;
	int rc;

	if (tg_runs_begin(r, err) != 0)
		return -1;
	if ((rc = expect_submitting(r, id, name, err)) != 0)
		goto fail;
	s = tg_runs_stmt(r, S_SWV_UNCLAIM);
	sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(s, 2, name, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(s, 3, final ? "rejected" : "pending", -1, SQLITE_STATIC);
	tg_runs_bind_str(s, 4, tg_state_variant_unclaim_error(why));
	if ((rc = tg_runs_step_done(r, s, err)) != 0)
		goto fail;
	return tg_runs_commit(r, err);
fail:
	tg_runs_rollback(r);
	return rc;
}

int
tg_runs_sweep_settle(struct tg_runs *r, const char *id, int64_t now_ms,
    struct tg_err *err)
{
	sqlite3_stmt *s = tg_runs_stmt(r, S_SW_OPEN);
	const char *state;
	int rc, busy;

	sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(s);
	if (rc != SQLITE_ROW) {
		sqlite3_reset(s);
		if (rc != SQLITE_DONE) {
			tg_runs_sql_err(r, err, "read");
			return -1;
		}
		tg_err_set(err, "no sweep %s", id);
		return TG_RUNS_NOT_FOUND;
	}
	state = (const char *)sqlite3_column_text(s, 0);
	busy = (state != NULL && strcmp(state, "done") == 0) || sqlite3_column_int64(s, 1) > 0;
	sqlite3_reset(s);
	if (busy)
		return 0;
	s = tg_runs_stmt(r, S_SW_DONE);
	sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(s, 2, now_ms);
	if (tg_runs_step_done(r, s, err) != 0)
		return -1;
	return sqlite3_changes(r->db) > 0 ? 1 : 0;
}
