/*
 * pg_payload.c - webhook payloads in the PostgreSQL state backend
 * (include/tidegate/state.h, "payloads"): rows of outbox_payloads keyed
 * by job, writer token and chunk number, at most PG_CHUNK bytes each
 * (pg_schema.c).
 *
 * A writer gets a fresh token when opened. Each append drains the
 * caller's evbuffer into one statement that stores its bytes as one or
 * more chunk rows under that token, committed at once but read by nobody:
 * the job names no writer until the commit, one statement that makes the
 * job ready, names the token and size, and drops the rows of any other
 * writer (one aborted, or cut short by a crash). An abort deletes the
 * writer's rows; a purge deletes a job's rows with it. With one append in
 * flight, memory stays bounded by one append.
 *
 * A writer given a quota (tg_state_payload_limit) has each append store
 * its rows only while the rows held stay within it, summed in the same
 * statement: appends running at once on several connections (or
 * instances) may each pass the cap by one append, no more.
 *
 * A commit or abort issued while appends are still in flight waits for
 * them (the pool has several connections), so the size it records counts
 * them all; a commit after a failed append fails. Appends and the commit
 * run even when cancelled; only their callbacks are dropped.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "tidegate/ids.h"
#include "pg.h"

#define CB(cb)	((void (*)(void))(cb))

struct pg_payload {
	struct tg_state_payload pub;
	struct pg *pg;
	char id[TG_WEBHOOK_ID_LEN];
	char token[33];
	int n;			/* the next chunk number */
	int64_t size;		/* bytes appended */
	int inflight;		/* appends not answered yet */
	int failed;		/* an append failed: the commit fails */
	struct pg_op *last;	/* the commit or abort, waiting for the appends */
	struct tg_outbox_quota q;	/* zero: none */
};

/* Our ids only ("msg_" and hex). */
/* Column col of row i of r (borrowed) as a number; 0 for NULL. */
static int64_t
col_i64(const PGresult *r, int i, int col)
{
	return PQgetisnull(r, i, col) ? 0 : strtoll(PQgetvalue(r, i, col), NULL, 10);
}

static int
id_valid(const char *id)
{
	size_t n = id ? strlen(id) : 0;

	return n > 4 && n < TG_WEBHOOK_ID_LEN && strncmp(id, "msg_", 4) == 0 &&
	    strspn(id + 4, "0123456789abcdef") == n - 4;
}

/* ---- open ---- */

static void
answer_open(struct pg_op *o, const PGresult *r)
{
	struct pg_payload *w = NULL;

	if (r != NULL && PQntuples(r) == 0) {
		o->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&o->res.err, "no webhook job %s", o->val[0]);
	} else if (r != NULL && strcmp(PQgetvalue(r, 0, 0), "waiting") != 0) {
		o->res.rc = TG_STATE_CONFLICT;
		tg_err_set(&o->res.err, "webhook job %s is %s, not waiting for a payload",
		    o->val[0], PQgetvalue(r, 0, 0));
	} else if (r != NULL) {
		w = tg_xcalloc(1, sizeof(*w));
		w->pub.be = o->pg->be;
		w->pg = o->pg;
		snprintf(w->id, sizeof(w->id), "%s", o->val[0]);
		tg_id_hex(w->token, 16);
	}
	((tg_state_payload_cb)o->cb)(&o->res, w != NULL ? &w->pub : NULL, o->arg);
}

struct tg_state_op *
tg_state_pg_payload_open(void *impl, const char *id, tg_state_payload_cb cb, void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_OB_STATE, answer_open, CB(cb), arg);

	if (!id_valid(id)) {
		tg_state_pg_fail(o, TG_STATE_NOT_FOUND, "no webhook job (malformed id)");
		return NULL;
	}
	tg_state_pg_param_str(o, id);
	return tg_state_pg_submit(o, PG_OUTBOX);
}

/* ---- the writer's last step (commit or abort) waits for its appends ---- */

static struct tg_state_op *
run_last(struct pg_payload *w, struct pg_op *o)
{
	if (w->inflight > 0) {
		w->last = o;
		return &o->pub;
	}
	if (w->failed && o->stmt == PG_OB_COMMIT) {
		tg_state_pg_fail(o, TG_STATE_ERROR, "an append to the payload failed");
		return NULL;
	}
	return tg_state_pg_submit(o, PG_OUTBOX);
}

static void
writer_free(struct pg_op *o)
{
	free(o->p);
	o->p = NULL;
}

/* ---- append ---- */

static void
append_end(struct pg_op *o)
{
	struct pg_payload *w = o->p;
	struct pg_op *last;

	w->inflight--;
	if (o->res.rc != TG_STATE_OK)
		w->failed = 1;
	if (w->inflight == 0 && (last = w->last) != NULL) {
		w->last = NULL;
		(void)run_last(w, last);
	}
}

void
tg_state_pg_payload_limit(struct tg_state_payload *pw, const struct tg_outbox_quota *q)
{
	((struct pg_payload *)pw)->q = *q;
}

/* No row stored: over the cap (n1: the append's bytes, n2: the key's). */
static void
answer_append(struct pg_op *o, const PGresult *r)
{
	int64_t all, mine, max = strtoll(o->val[4], NULL, 10);

	if (r != NULL && PQntuples(r) == 1 && col_i64(r, 0, 0) == 0) {
		all = col_i64(r, 0, 1) + o->n1;
		mine = col_i64(r, 0, 2) + o->n1;
		o->res.rc = TG_STATE_REFUSED;
		if (max > 0 && all > max)
			tg_err_set(&o->res.err, "webhook payloads would hold %lld bytes, over their "
			    "cap of %lld", (long long)all, (long long)max);
		else
			tg_err_set(&o->res.err, "the webhook payloads of the job's API key would "
			    "hold %lld bytes, over " TG_OUTBOX_QUOTA_KEY_WHY " of %lld",
			    (long long)mine, (long long)o->n2);
	}
	((tg_state_done_cb)o->cb)(&o->res, o->arg);
}

struct tg_state_op *
tg_state_pg_payload_append(struct tg_state_payload *pw, struct evbuffer *buf,
    tg_state_done_cb cb, void *arg)
{
	struct pg_payload *w = (struct pg_payload *)pw;
	struct pg_op *o = tg_state_pg_op_new(w->pg, PG_OB_APPEND, answer_append, CB(cb), arg);
	size_t len = evbuffer_get_length(buf);

	tg_state_pg_param_str(o, w->id);
	tg_state_pg_param_str(o, w->token);
	tg_state_pg_param_i64(o, w->n);
	tg_state_pg_param_buf(o, buf, len);
	tg_state_pg_param_i64(o, w->q.max_bytes > 0 ? w->q.max_bytes : 0);
	tg_state_pg_param_i64(o, w->q.key_max_bytes > 0 ? w->q.key_max_bytes : 0);
	o->n1 = (int64_t)len;
	o->n2 = w->q.key_max_bytes;
	w->n += len > 0 ? (int)((len - 1) / PG_CHUNK + 1) : 1;
	w->size += (int64_t)len;
	w->inflight++;
	o->keep = 1;
	o->p = w;
	o->cleanup = append_end;
	return tg_state_pg_submit(o, PG_OUTBOX);
}

/* ---- commit, abort ---- */

static void
answer_commit(struct pg_op *o, const PGresult *r)
{
	if (r != NULL && PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "0") == 0) {
		o->res.rc = TG_STATE_CONFLICT;
		tg_err_set(&o->res.err, "webhook job %s is no longer waiting", o->val[0]);
	}
	((tg_state_done_cb)o->cb)(&o->res, o->arg);
}

struct tg_state_op *
tg_state_pg_payload_commit(struct tg_state_payload *pw, int64_t now_ms, tg_state_done_cb cb,
    void *arg)
{
	struct pg_payload *w = (struct pg_payload *)pw;
	struct pg *pg = w->pg;
	struct pg_op *o = tg_state_pg_op_new(pg, PG_OB_COMMIT, answer_commit, CB(cb), arg);

	tg_state_pg_param_str(o, w->id);
	tg_state_pg_param_str(o, w->token);
	tg_state_pg_param_i64(o, w->size);
	tg_state_pg_param_i64(o, now_ms);
	tg_state_pg_param_i64(o, now_ms + pg->rules.schedule[0]);
	o->keep = 1;
	o->p = w;
	o->cleanup = writer_free;
	return run_last(w, o);
}

static void
answer_nothing(struct pg_op *o, const PGresult *r)
{
}

void
tg_state_pg_payload_abort(struct tg_state_payload *pw)
{
	struct pg_payload *w = (struct pg_payload *)pw;
	struct pg_op *o;

	if (w == NULL)
		return;
	o = tg_state_pg_op_new(w->pg, PG_OB_DROP, answer_nothing, NULL, NULL);
	tg_state_pg_param_str(o, w->id);
	tg_state_pg_param_str(o, w->token);
	o->keep = 1;
	o->cancelled = 1;	/* nobody to answer */
	o->p = w;
	o->cleanup = writer_free;
	(void)run_last(w, o);
}

/* ---- a payload in memory: one statement ---- */

/* One row (state, changed): NOT_FOUND without it, CONFLICT when the job
 * was not waiting. */
static void
answer_set(struct pg_op *o, const PGresult *r)
{
	if (r != NULL && PQntuples(r) == 0) {
		o->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&o->res.err, "no webhook job %s", o->val[0]);
	} else if (r != NULL && strcmp(PQgetvalue(r, 0, 1), "0") == 0) {
		o->res.rc = TG_STATE_CONFLICT;
		tg_err_set(&o->res.err, "webhook job %s is %s, not waiting for a payload",
		    o->val[0], PQgetvalue(r, 0, 0));
	}
	((tg_state_done_cb)o->cb)(&o->res, o->arg);
}

struct tg_state_op *
tg_state_pg_payload_set(void *impl, const char *id, const void *data, size_t len,
    int64_t now_ms, tg_state_done_cb cb, void *arg)
{
	struct pg *pg = impl;
	struct pg_op *o = tg_state_pg_op_new(pg, PG_OB_SET, answer_set, CB(cb), arg);
	char token[33];

	if (!id_valid(id)) {
		tg_state_pg_fail(o, TG_STATE_NOT_FOUND, "no webhook job (malformed id)");
		return NULL;
	}
	tg_id_hex(token, 16);
	tg_state_pg_param_str(o, id);
	tg_state_pg_param_str(o, token);
	tg_state_pg_param_bin(o, data, len);
	tg_state_pg_param_i64(o, now_ms);
	tg_state_pg_param_i64(o, now_ms + pg->rules.schedule[0]);
	return tg_state_pg_submit(o, PG_OUTBOX);
}

/* ---- the bytes held ---- */

static void
answer_usage(struct pg_op *o, const PGresult *r)
{
	int ok = r != NULL && PQntuples(r) == 1;

	((tg_state_pair_cb)o->cb)(&o->res, ok ? col_i64(r, 0, 0) : 0,
	    ok ? col_i64(r, 0, 1) : 0, o->arg);
}

struct tg_state_op *
tg_state_pg_outbox_usage(void *impl, const char *api_key, tg_state_pair_cb cb, void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_OB_USAGE, answer_usage, CB(cb), arg);

	tg_state_pg_param_str(o, api_key);
	return tg_state_pg_submit(o, PG_OUTBOX);
}
