/*
 * pg_shared.c - what a fleet shares, in the PostgreSQL state backend
 * (include/tidegate/state.h): correlation ownership (the semantics of
 * sqlite/owners.c, the job id folded by tg_state_job_key), vendor token
 * records (service, token, expiry and the instance that wrote it; an
 * invalidation removes the record only while it still holds the refused
 * token) and poll entries (leadership of a key taken when free, run out
 * or already this instance's, and never while a published answer is
 * fresh; an answer published gives the lead up and wakes the other
 * instances, and is cached until its expiry). Every operation is
 * one prepared statement with parameters (pg_schema.c), answered later.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/clock.h"
#include "pg.h"
#include "../job_key.h"

#define CB(cb)	((void (*)(void))(cb))

/* ---- correlation ownership ---- */

static void
param_job(struct pg_op *o, const char *family, const char *cid)
{
	char *key = tg_state_job_key(cid != NULL ? cid : "");

	tg_state_pg_param_str(o, family);
	tg_state_pg_param_str(o, key);
	free(key);
}

struct tg_state_op *
tg_state_pg_owners_record(void *impl, const char *family, const char *cid, const char *key,
    int64_t now_ms, tg_state_done_cb cb, void *arg)
{
	struct pg *pg = impl;
	struct pg_op *o = tg_state_pg_op_new(pg, PG_OWNERS_RECORD, tg_state_pg_answer_done,
	    CB(cb), arg);

	if (family == NULL || cid == NULL || *cid == '\0' || key == NULL) {
		o->res.rc = TG_STATE_ERROR;
		tg_err_set(&o->res.err, "owners: a record needs family, correlationId and key");
		o->answer(o, NULL);
		free(o);
		return NULL;
	}
	param_job(o, family, cid);
	tg_state_pg_param_str(o, key);
	tg_state_pg_param_i64(o, now_ms);
	tg_state_pg_param_i64(o, pg->max_rows);
	return tg_state_pg_submit(o, PG_OWNERS);
}

static void
answer_lookup(struct pg_op *o, const PGresult *r)
{
	const char *key = NULL;

	if (r != NULL && PQntuples(r) > 0)
		key = PQgetvalue(r, 0, 0);
	else if (r != NULL) {
		o->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&o->res.err, "no owner recorded for %s %s", o->val[0], o->val[1]);
	}
	((tg_state_str_cb)o->cb)(&o->res, key, o->arg);
}

struct tg_state_op *
tg_state_pg_owners_lookup(void *impl, const char *family, const char *cid, int64_t now_ms,
    tg_state_str_cb cb, void *arg)
{
	struct pg *pg = impl;
	struct pg_op *o = tg_state_pg_op_new(pg, PG_OWNERS_LOOKUP, answer_lookup, CB(cb), arg);

	param_job(o, family, cid);
	tg_state_pg_param_i64(o, now_ms - pg->keep_ms);
	return tg_state_pg_submit(o, PG_OWNERS);
}

struct tg_state_op *
tg_state_pg_owners_prune(void *impl, int64_t now_ms, tg_state_num_cb cb, void *arg)
{
	struct pg *pg = impl;
	struct pg_op *o = tg_state_pg_op_new(pg, PG_OWNERS_PRUNE, tg_state_pg_answer_num,
	    CB(cb), arg);

	tg_state_pg_param_i64(o, now_ms - pg->keep_ms);
	tg_state_pg_param_i64(o, pg->max_rows);
	return tg_state_pg_submit(o, PG_OWNERS);
}

struct tg_state_op *
tg_state_pg_owners_count(void *impl, tg_state_num_cb cb, void *arg)
{
	return tg_state_pg_submit(tg_state_pg_op_new(impl, PG_OWNERS_COUNT,
	    tg_state_pg_answer_num, CB(cb), arg), PG_OWNERS);
}

/* ---- vendor token records ---- */

static void
answer_token(struct pg_op *o, const PGresult *r)
{
	struct tg_state_token t = { NULL, 0 };

	if (r != NULL && PQntuples(r) > 0) {
		t.token = PQgetvalue(r, 0, 0);
		t.expires_at = strtoll(PQgetvalue(r, 0, 1), NULL, 10);
	} else if (r != NULL) {
		o->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&o->res.err, "no token held for %s", o->val[0]);
	}
	((tg_state_token_cb)o->cb)(&o->res, t.token != NULL ? &t : NULL, o->arg);
}

struct tg_state_op *
tg_state_pg_token_get(void *impl, const char *service, tg_state_token_cb cb, void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_TOKEN_GET, answer_token, CB(cb), arg);

	tg_state_pg_param_str(o, service);
	return tg_state_pg_submit(o, PG_ANY);
}

struct tg_state_op *
tg_state_pg_token_put(void *impl, const char *service, const struct tg_state_token *t,
    tg_state_done_cb cb, void *arg)
{
	struct pg *pg = impl;
	struct pg_op *o = tg_state_pg_op_new(pg, PG_TOKEN_PUT, tg_state_pg_answer_done, CB(cb),
	    arg);

	tg_state_pg_param_str(o, service);
	tg_state_pg_param_str(o, t->token != NULL ? t->token : "");
	tg_state_pg_param_i64(o, t->expires_at);
	tg_state_pg_param_str(o, pg->instance);
	return tg_state_pg_submit(o, PG_ANY);
}

static void
answer_invalidate(struct pg_op *o, const PGresult *r)
{
	if (r != NULL && strcmp(PQcmdTuples((PGresult *)r), "0") == 0) {
		o->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&o->res.err, "%s holds no such token", o->val[0]);
	}
	((tg_state_done_cb)o->cb)(&o->res, o->arg);
}

struct tg_state_op *
tg_state_pg_token_invalidate(void *impl, const char *service, const char *token,
    tg_state_done_cb cb, void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_TOKEN_INVALIDATE, answer_invalidate,
	    CB(cb), arg);

	tg_state_pg_param_str(o, service);
	tg_state_pg_param_str(o, token);
	return tg_state_pg_submit(o, PG_ANY);
}

/* ---- poll entries ---- */

/* n: 1 when this instance now leads the key (a row came back), else 0;
 * a lead taken is remembered until its ttl (health's leases). */
static void
answer_lead(struct pg_op *o, const PGresult *r)
{
	int led = r != NULL && PQntuples(r) > 0;

	if (led)
		tg_state_pg_lead_held(o->pg, o->val[0], tg_clock_mono_ms() + o->n1);
	((tg_state_num_cb)o->cb)(&o->res, led, o->arg);
}

struct tg_state_op *
tg_state_pg_poll_lead(void *impl, const char *key, int64_t now_ms, int64_t ttl_ms,
    tg_state_num_cb cb, void *arg)
{
	struct pg *pg = impl;
	struct pg_op *o = tg_state_pg_op_new(pg, PG_POLL_LEAD, answer_lead, CB(cb), arg);

	tg_state_pg_param_str(o, key);
	tg_state_pg_param_str(o, pg->instance);
	tg_state_pg_param_i64(o, now_ms);
	tg_state_pg_param_i64(o, now_ms + ttl_ms);
	o->n1 = ttl_ms;
	return tg_state_pg_submit(o, PG_ANY);
}

struct tg_state_op *
tg_state_pg_poll_release(void *impl, const char *key, tg_state_done_cb cb, void *arg)
{
	struct pg *pg = impl;
	struct pg_op *o = tg_state_pg_op_new(pg, PG_POLL_RELEASE, tg_state_pg_answer_done,
	    CB(cb), arg);

	tg_state_pg_lead_held(pg, key, 0);
	tg_state_pg_param_str(o, key);
	tg_state_pg_param_str(o, pg->instance);
	return tg_state_pg_submit(o, PG_ANY);
}

struct tg_state_op *
tg_state_pg_poll_publish(void *impl, const char *key, const struct tg_state_answer *a,
    int64_t now_ms, int64_t ttl_ms, tg_state_done_cb cb, void *arg)
{
	struct pg *pg = impl;
	struct pg_op *o = tg_state_pg_op_new(pg, PG_POLL_PUBLISH, tg_state_pg_answer_done,
	    CB(cb), arg);

	tg_state_pg_lead_held(pg, key, 0);
	tg_state_pg_param_str(o, key);
	tg_state_pg_param_i64(o, a->status);
	tg_state_pg_param_str(o, a->content_type);
	tg_state_pg_param_bin(o, a->body, a->body != NULL ? a->len : 0);
	tg_state_pg_param_i64(o, now_ms + ttl_ms);
	tg_state_pg_param_str(o, pg->instance);
	pg->notifies++;
	return tg_state_pg_submit(o, PG_ANY);
}

static int64_t
be64(const char *p)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < 8; i++)
		v = v << 8 | (unsigned char)p[i];
	return (int64_t)v;
}

/* Binary results: status an int4 in network order, content_type text
 * bytes, body bytea bytes, answer_until an int8. */
static void
answer_fetch(struct pg_op *o, const PGresult *r)
{
	struct tg_state_answer a = { 0, NULL, NULL, 0, 0 };
	uint32_t st;

	if (r != NULL && PQntuples(r) > 0 && PQgetlength(r, 0, 0) == 4 &&
	    PQgetlength(r, 0, 3) == 8) {
		memcpy(&st, PQgetvalue(r, 0, 0), 4);
		a.status = (int)ntohl(st);
		a.content_type = PQgetisnull(r, 0, 1) ? NULL : PQgetvalue(r, 0, 1);
		a.body = PQgetvalue(r, 0, 2);
		a.len = (size_t)PQgetlength(r, 0, 2);
		a.expires_at = be64(PQgetvalue(r, 0, 3));
		((tg_state_answer_cb)o->cb)(&o->res, &a, o->arg);
		return;
	}
	if (r != NULL) {
		o->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&o->res.err, "no answer published for %s", o->val[0]);
	}
	((tg_state_answer_cb)o->cb)(&o->res, NULL, o->arg);
}

struct tg_state_op *
tg_state_pg_poll_fetch(void *impl, const char *key, int64_t now_ms, tg_state_answer_cb cb,
    void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_POLL_FETCH, answer_fetch, CB(cb), arg);

	tg_state_pg_param_str(o, key);
	tg_state_pg_param_i64(o, now_ms);
	o->binary = 1;
	return tg_state_pg_submit(o, PG_ANY);
}
