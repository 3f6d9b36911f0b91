/*
 * payload.c - the webhook outbox's payloads, written once
 * (include/tidegate/state.h, "payloads"): a writer is opened for a job
 * that waits for its payload, its commit makes the job ready, due now,
 * and names the writer (a payload written in memory does all that at
 * once); what holds the bytes meanwhile is the backend's payload store
 * (payload.h), which runs the commit's statement once the bytes are where
 * a lease reads them. Appends and the commit run even when cancelled
 * (the payload stays whole); only their callbacks are dropped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/ids.h"
#include "outbox.h"
#include "payload.h"
#include "seam.h"

enum { STATE, COMMIT, SET };

/* Commit and set: the job ready, due $5, its payload named (writer $2,
 * $3 bytes); the payload rows of any other writer (one aborted, or cut
 * short by a crash) go. */
#define READY "state = 'ready', payload_token = $2, ready_at = $4, next_at = $5," \
	" last_error = NULL, lease_owner = NULL, lease_expires = NULL"

static const struct tg_db_stmt sql[] = {
	/* a write: with SQLite it queues behind the writes before it */
	[STATE] = { "ob_state", TG_DB_OUTBOX, 1,
	    "SELECT state, api_key FROM outbox_jobs WHERE id = $1", NULL },
	/* 1 when the job was waiting */
	[COMMIT] = { "ob_commit", TG_DB_OUTBOX, 1,
	    "WITH u AS (UPDATE outbox_jobs SET " READY ", payload_size = $3 WHERE id = $1"
	    " AND state = 'waiting' RETURNING id), d AS (DELETE FROM outbox_payloads"
	    " WHERE job_id IN (SELECT id FROM u) AND token <> $2) SELECT count(*) FROM u",
	    "UPDATE outbox_jobs SET " READY ", payload_size = $3 WHERE id = $1"
	    " AND state = 'waiting'; SELECT changes()" },
	/* (state, changed); no row: no such job. PostgreSQL stores the rows
	 * in the same statement, only while the job waits. */
	[SET] = { "ob_set", TG_DB_OUTBOX, 1,
	    "WITH cur AS (SELECT id, state FROM outbox_jobs WHERE id = $1 FOR UPDATE),"
	    " ins AS (INSERT INTO outbox_payloads (job_id, token, n, data)"
	    " SELECT $1::text, $2::text, i, substring($3::bytea from i * 1048576 + 1"
	    " for 1048576) FROM generate_series(0, greatest(length($3::bytea) - 1, 0)"
	    " / 1048576) i WHERE EXISTS (SELECT 1 FROM cur WHERE state = 'waiting')),"
	    " u AS (UPDATE outbox_jobs SET " READY ", payload_size = length($3::bytea)"
	    " WHERE id = $1 AND state = 'waiting' RETURNING id), d AS (DELETE FROM"
	    " outbox_payloads WHERE job_id IN (SELECT id FROM u) AND token <> $2::text)"
	    " SELECT cur.state, (SELECT count(*) FROM u) FROM cur",
	    "UPDATE outbox_jobs SET " READY ", payload_size = length($3) WHERE id = $1"
	    " AND state = 'waiting'; SELECT state, changes() FROM outbox_jobs WHERE id = $1" },
};

const struct tg_db_table tg_state_payload_stmts = { sql, TG_NELEM(sql) };

void
tg_state_payload_head(struct tg_state_payload *w, const struct tg_payload_store *ps,
    struct tg_state *st, const char *id, const char *key)
{
	w->ps = ps;
	w->st = st;
	snprintf(w->id, sizeof(w->id), "%s", id);
	w->key = key != NULL ? tg_xstrdup(key) : NULL;
}

void
tg_state_payload_head_free(struct tg_state_payload *w)
{
	free(w->key);
	w->key = NULL;
}

/* Our ids only ("msg_" and hex): they become file names. */
static int
id_valid(const char *id)
{
	size_t n = id != NULL ? strlen(id) : 0;

	return n > 4 && n < TG_WEBHOOK_ID_LEN && strncmp(id, "msg_", 4) == 0 &&
	    strspn(id + 4, "0123456789abcdef") == n - 4;
}

/* ---- open ---- */

static void
answer_open(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct tg_db_op *o = (struct tg_db_op *)q;
	const char *st;

	if (r != NULL && tg_db_nrows(r) == 0) {
		q->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&q->res.err, "no webhook job %s", o->id);
	} else if (r != NULL && strcmp((st = tg_db_str(r, 0, 0)), "waiting") != 0) {
		q->res.rc = TG_STATE_CONFLICT;
		tg_err_set(&q->res.err, "webhook job %s is %s, not waiting for a payload", o->id,
		    st);
	}
	if (r == NULL || q->res.rc != TG_STATE_OK) {
		o->cb.payload(&q->res, NULL, o->arg);
		return;
	}
	o->st->be->payloads->open(o->st, o->id, tg_db_str(r, 0, 1), o->cb.payload, o->arg);
}

struct tg_state_op *
tg_state_payload_open(struct tg_state *st, const char *id, tg_state_payload_cb cb, void *arg)
{
	struct tg_db_op *o = tg_db_op_new(sizeof(*o), st, &sql[STATE], answer_open,
	    id_valid(id) ? id : NULL, arg);

	o->cb.payload = cb;
	if (o->id == NULL)
		return tg_db_fail(&o->q, TG_STATE_NOT_FOUND, "no webhook job (malformed id)");
	return tg_db_submit(st, &o->q);
}

/* ---- append, limit, abort ---- */

struct tg_state_op *
tg_state_payload_append(struct tg_state_payload *w, struct evbuffer *buf,
    tg_state_done_cb cb, void *arg)
{
	return w->ps->append(w, buf, cb, arg);
}

void
tg_state_payload_limit(struct tg_state_payload *w, const struct tg_outbox_quota *q)
{
	w->q = *q;
}

void
tg_state_payload_abort(struct tg_state_payload *w)
{
	if (w != NULL)
		w->ps->abort(w);
}

/* ---- commit ---- */

static void
answer_commit(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct tg_payload_commit *c = (struct tg_payload_commit *)q;

	if (r != NULL && tg_db_i64(r, 0, 0) == 0) {
		q->res.rc = TG_STATE_CONFLICT;
		tg_err_set(&q->res.err, "webhook job %s is no longer waiting", c->w->id);
	}
	c->done(&q->res, c->arg);
}

struct tg_state_op *
tg_state_payload_commit(struct tg_state_payload *w, int64_t now_ms, tg_state_done_cb cb,
    void *arg)
{
	struct tg_payload_commit *c = tg_xcalloc(1, sizeof(*c));

	tg_db_query_init(&c->q, &sql[COMMIT], answer_commit);
	c->q.keep = 1;
	c->w = w;
	c->done = cb;
	c->arg = arg;
	tg_db_text(&c->q, w->id);
	tg_db_text(&c->q, w->token[0] != '\0' ? w->token : NULL);
	tg_db_int(&c->q, w->size);
	tg_db_int(&c->q, now_ms);
	tg_db_int(&c->q, now_ms + w->st->rules.schedule[0]);
	return w->ps->commit(c);
}

/* ---- a payload in memory ---- */

/* One row (state, changed): NOT_FOUND without it, CONFLICT when the job
 * was not waiting. */
static void
answer_set(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct tg_db_op *o = (struct tg_db_op *)q;

	if (r != NULL && tg_db_nrows(r) == 0) {
		q->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&q->res.err, "no webhook job %s", o->id);
	} else if (r != NULL && tg_db_i64(r, 0, 1) == 0) {
		q->res.rc = TG_STATE_CONFLICT;
		tg_err_set(&q->res.err, "webhook job %s is %s, not waiting for a payload", o->id,
		    tg_db_str(r, 0, 0));
	}
	o->cb.done(&q->res, o->arg);
}

struct tg_state_op *
tg_state_payload_set(struct tg_state *st, const char *id, const void *data, size_t len,
    int64_t now_ms, tg_state_done_cb cb, void *arg)
{
	struct tg_db_op *o = tg_db_op_new(sizeof(*o), st, &sql[SET], answer_set,
	    id_valid(id) ? id : NULL, arg);
	char token[33];

	o->cb.done = cb;
	if (o->id == NULL)
		return tg_db_fail(&o->q, TG_STATE_NOT_FOUND, "no webhook job (malformed id)");
	tg_id_hex(token, 16);
	tg_db_text(&o->q, token);
	tg_db_bytes(&o->q, data, len);
	tg_db_int(&o->q, now_ms);
	tg_db_int(&o->q, now_ms + st->rules.schedule[0]);
	return st->be->payloads->set(st, &o->q);
}

/* ---- the bytes held ---- */

struct tg_state_op *
tg_state_outbox_usage(struct tg_state *st, const char *api_key, tg_state_pair_cb cb, void *arg)
{
	return st->be->payloads->usage(st, api_key, cb, arg);
}
