/*
 * pg_outbox.c - the webhook outbox's jobs and leases in the PostgreSQL
 * state backend (include/tidegate/state.h, "webhook outbox: jobs"), with
 * the semantics of sqlite/outbox.c and outbox_lease.c and the same rules
 * (../outbox_rules.c: schedule, jitter, Retry-After cap).
 *
 * A lease is held in the job's row (owner instance, token, expiry). Taking
 * one is a single UPDATE of the most overdue due job picked with FOR UPDATE
 * SKIP LOCKED, so several instances never take the same job, and a job
 * whose lease expired (its instance was killed) is due again. While a job
 * waits for its export data the same columns hold its fetch: the adding
 * instance's for the lease length, renewed by hold; adopt takes those
 * that ran out (their fetcher died) with FOR UPDATE SKIP LOCKED, so one
 * survivor polls each; the data's commit clears them.
 *
 * The delivery worker reads the payload from lease->payload_path. Here the
 * lease then reads the payload's chunk rows, one row (at most PG_CHUNK
 * bytes) per query, into an unlinked temporary file in the spool directory
 * (state opts: outbox payload_dir, else $TMPDIR, else /tmp) and hands its
 * descriptor as spool_fd and "/proc/self/fd/N" as payload_path: memory
 * stays bounded by one chunk, and the file goes when the lease is freed
 * (or the process dies). The writes go to the page cache on the loop.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "tidegate/ids.h"
#include "pg.h"

#define CB(cb)	((void (*)(void))(cb))

/* ---- add, set the correlationId, abandon ---- */

static void
answer_add(struct pg_op *o, const PGresult *r)
{
	((tg_state_str_cb)o->cb)(&o->res, r != NULL ? o->val[0] : NULL, o->arg);
}

struct tg_state_op *
tg_state_pg_outbox_add(void *impl, const struct tg_outbox_new *job, int64_t now_ms,
    tg_state_str_cb cb, void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_OB_ADD, answer_add, CB(cb), arg);
	char hex[33], id[TG_WEBHOOK_ID_LEN];

	if (job->url == NULL || job->secret_ref == NULL || job->kind == NULL) {
		tg_state_pg_fail(o, TG_STATE_ERROR, "webhook job needs url, secret_ref and kind");
		return NULL;
	}
	tg_id_hex(hex, 16);
	snprintf(id, sizeof(id), "msg_%s", hex);
	tg_state_pg_param_str(o, id);
	tg_state_pg_param_str(o, job->url);
	tg_state_pg_param_str(o, job->secret_ref);
	tg_state_pg_param_str(o, job->api_key);
	tg_state_pg_param_str(o, job->kind);
	tg_state_pg_param_str(o, job->correlation_id);
	tg_state_pg_param_str(o, job->service);
	tg_state_pg_param_str(o, job->content_type ? job->content_type : "application/json");
	tg_state_pg_param_i64(o, now_ms);
	tg_state_pg_param_str(o, ((struct pg *)impl)->instance);
	tg_state_pg_param_i64(o, now_ms + ((struct pg *)impl)->rules.lease_ms);
	return tg_state_pg_submit(o, PG_OUTBOX);
}

/* ---- the fetch of waiting jobs: held by one instance, adopted when its
 * hold runs out ---- */

struct tg_state_op *
tg_state_pg_outbox_hold(void *impl, const char *const *ids, size_t n, int64_t now_ms,
    tg_state_done_cb cb, void *arg)
{
	struct pg *pg = impl;
	struct pg_op *o = tg_state_pg_op_new(pg, PG_OB_HOLD, tg_state_pg_answer_done, CB(cb),
	    arg);
	struct evbuffer *b = evbuffer_new();
	size_t i;

	evbuffer_add(b, "{", 1);
	for (i = 0; i < n; i++)	/* ids are msg_<hex>: nothing to escape */
		evbuffer_add_printf(b, "%s\"%s\"", i ? "," : "", ids[i]);
	evbuffer_add(b, "}", 2);	/* with the NUL */
	tg_state_pg_param_str(o, (const char *)evbuffer_pullup(b, -1));
	evbuffer_free(b);
	tg_state_pg_param_str(o, pg->instance);
	tg_state_pg_param_i64(o, now_ms + pg->rules.lease_ms);
	return tg_state_pg_submit(o, PG_OUTBOX);
}

struct tg_state_op *
tg_state_pg_outbox_adopt(void *impl, int64_t now_ms, size_t max, tg_state_jobs_cb cb,
    void *arg)
{
	struct pg *pg = impl;
	struct pg_op *o = tg_state_pg_op_new(pg, PG_OB_ADOPT, tg_state_pg_answer_jobs, CB(cb),
	    arg);

	tg_state_pg_param_i64(o, now_ms);
	tg_state_pg_param_str(o, pg->instance);
	tg_state_pg_param_i64(o, now_ms + pg->rules.lease_ms);
	tg_state_pg_param_i64(o, (int64_t)max);
	return tg_state_pg_submit(o, PG_OUTBOX);
}

/* No row changed: NOT_FOUND. */
static void
answer_changed(struct pg_op *o, const PGresult *r)
{
	if (r != NULL && strcmp(PQcmdTuples((PGresult *)r), "0") == 0) {
		o->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&o->res.err, "no webhook job %s", o->val[0]);
	}
	((tg_state_done_cb)o->cb)(&o->res, o->arg);
}

struct tg_state_op *
tg_state_pg_outbox_set_cid(void *impl, const char *id, const char *cid, tg_state_done_cb cb,
    void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_OB_SET_CID, answer_changed, CB(cb), arg);

	tg_state_pg_param_str(o, id);
	tg_state_pg_param_str(o, cid);
	return tg_state_pg_submit(o, PG_OUTBOX);
}

/* One row (state, changed): NOT_FOUND without it, CONFLICT when nothing
 * changed because the job was not waiting. */
static void
answer_abandon(struct pg_op *o, const PGresult *r)
{
	if (r != NULL && PQntuples(r) == 0) {
		o->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&o->res.err, "no webhook job %s", o->val[0]);
	} else if (r != NULL && strcmp(PQgetvalue(r, 0, 1), "0") == 0) {
		o->res.rc = TG_STATE_CONFLICT;
		tg_err_set(&o->res.err, "webhook job %s is %s, not waiting", o->val[0],
		    PQgetvalue(r, 0, 0));
	} else if (r != NULL)
		o->pg->ctr.dead++;
	((tg_state_done_cb)o->cb)(&o->res, o->arg);
}

struct tg_state_op *
tg_state_pg_outbox_abandon(void *impl, const char *id, const char *reason, int64_t now_ms,
    tg_state_done_cb cb, void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_OB_ABANDON, answer_abandon, CB(cb), arg);

	tg_state_pg_param_str(o, id);
	tg_state_pg_param_str(o, reason != NULL ? reason : "abandoned");
	tg_state_pg_param_i64(o, now_ms);
	return tg_state_pg_submit(o, PG_OUTBOX);
}

struct tg_state_op *
tg_state_pg_outbox_note(void *impl, const char *id, const char *why, tg_state_done_cb cb,
    void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_OB_NOTE, tg_state_pg_answer_done, CB(cb),
	    arg);

	tg_state_pg_param_str(o, id);
	tg_state_pg_param_str(o, why);
	return tg_state_pg_submit(o, PG_OUTBOX);
}

/* ---- lease: the job, then its payload's chunks into the spool file ---- */

struct lease_read {
	struct tg_outbox_lease *l;
	char ptoken[33];	/* the payload's writer */
	int n;			/* the next chunk */
	int64_t got;		/* bytes spooled */
};

static void
lease_read_free(struct pg_op *o)
{
	struct lease_read *lr = o->p;

	if (lr != NULL)
		tg_outbox_lease_free(lr->l);
	free(lr);
	o->p = NULL;
}

static char *
col(const PGresult *r, int c)
{
	return PQgetisnull(r, 0, c) ? NULL : tg_xstrdup(PQgetvalue(r, 0, c));
}

/* The leased job's row into a new lease (taken by the caller). */
static struct tg_outbox_lease *
lease_from(struct pg_op *o, const PGresult *r)
{
	struct tg_outbox_lease *l = tg_xcalloc(1, sizeof(*l));

	snprintf(l->id, sizeof(l->id), "%s", PQgetvalue(r, 0, 0));
	snprintf(l->token, sizeof(l->token), "%s", o->val[2]);
	l->url = col(r, 1);
	l->secret_ref = col(r, 2);
	l->content_type = col(r, 3);
	l->kind = col(r, 4);
	l->correlation_id = col(r, 5);
	l->service = col(r, 6);
	l->api_key = col(r, 7);
	l->size = strtoll(PQgetvalue(r, 0, 8), NULL, 10);
	l->attempt = atoi(PQgetvalue(r, 0, 9));
	l->expires_at = strtoll(o->val[3], NULL, 10);
	l->first_delay_ms = strcmp(PQgetvalue(r, 0, 11), "t") == 0 ?
	    strtoll(o->val[0], NULL, 10) - strtoll(PQgetvalue(r, 0, 10), NULL, 10) : -1;
	l->host = tg_xstrdup(PQgetvalue(r, 0, 13));
	return l;
}

/* An unlinked file in the spool directory for l (borrowed): 0, or -1. */
static int
spool_open(const struct pg *pg, struct tg_outbox_lease *l)
{
	char *tpl = tg_xasprintf("%s/tidegate-payload-XXXXXX", pg->spool);
	int fd = mkostemp(tpl, O_CLOEXEC), hi;

	if (fd >= 0)
		unlink(tpl);
	free(tpl);
	if (fd >= 0 && fd < 3) {	/* spool_fd 0 means none */
		hi = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		close(fd);
		fd = hi;
	}
	if (fd < 0)
		return -1;
	l->spool_fd = fd;
	l->payload_path = tg_xasprintf("/proc/self/fd/%d", fd);
	return 0;
}

static void
lease_hand(struct pg_op *o)
{
	struct lease_read *lr = o->p;
	struct tg_outbox_lease *l = lr->l;

	lr->l = NULL;
	((tg_state_lease_cb)o->cb)(&o->res, l, o->arg);
}

/* Ask for chunk lr->n of the payload. */
static void
next_chunk(struct pg_op *o)
{
	struct lease_read *lr = o->p;

	tg_state_pg_op_reuse(o, PG_OB_CHUNK);
	tg_state_pg_param_str(o, lr->l->id);
	tg_state_pg_param_str(o, lr->ptoken);
	tg_state_pg_param_i64(o, lr->n);
	o->binary = 1;
}

/* Write all of data (borrowed) to fd: 0, or -1. */
static int
write_all(int fd, const char *data, size_t n)
{
	ssize_t w;

	while (n > 0) {
		if ((w = write(fd, data, n)) < 0)
			return -1;
		data += w;
		n -= (size_t)w;
	}
	return 0;
}

static void
answer_chunk(struct pg_op *o, const PGresult *r)
{
	struct lease_read *lr = o->p;

	if (r == NULL) {
		((tg_state_lease_cb)o->cb)(&o->res, NULL, o->arg);
		return;
	}
	if (PQntuples(r) != 1) {
		o->res.rc = TG_STATE_ERROR;
		tg_err_set(&o->res.err, "the payload of webhook job %s is incomplete", lr->l->id);
	} else if (write_all(lr->l->spool_fd, PQgetvalue(r, 0, 0),
	    (size_t)PQgetlength(r, 0, 0)) != 0) {
		o->res.rc = TG_STATE_ERROR;
		tg_err_set(&o->res.err, "cannot spool the payload of %s", lr->l->id);
	}
	if (o->res.rc != TG_STATE_OK) {
		((tg_state_lease_cb)o->cb)(&o->res, NULL, o->arg);
		return;
	}
	lr->got += PQgetlength(r, 0, 0);
	lr->n++;
	if (lr->got < lr->l->size)
		next_chunk(o);
	else
		lease_hand(o);
}

/* Count the attempt (as the SQLite backend does, when the lease is taken). */
static void
count_attempt(struct pg *pg, const struct tg_outbox_lease *l)
{
	pg->ctr.attempts++;
	if (l->first_delay_ms >= 0) {
		pg->ctr.first_delay_count++;
		pg->ctr.first_delay_sum_ms += l->first_delay_ms;
	}
}

static void
answer_lease(struct pg_op *o, const PGresult *r)
{
	struct lease_read *lr;

	if (r == NULL || PQntuples(r) == 0) {	/* failed, or nothing is due */
		((tg_state_lease_cb)o->cb)(&o->res, NULL, o->arg);
		return;
	}
	lr = tg_xcalloc(1, sizeof(*lr));
	o->p = lr;
	lr->l = lease_from(o, r);
	snprintf(lr->ptoken, sizeof(lr->ptoken), "%s", PQgetvalue(r, 0, 12));
	count_attempt(o->pg, lr->l);
	if (spool_open(o->pg, lr->l) != 0) {
		o->res.rc = TG_STATE_ERROR;
		tg_err_set(&o->res.err, "cannot create a spool file in %s", o->pg->spool);
		((tg_state_lease_cb)o->cb)(&o->res, NULL, o->arg);
		return;
	}
	o->answer = answer_chunk;
	if (lr->l->size > 0)
		next_chunk(o);
	else
		lease_hand(o);
}

struct tg_state_op *
tg_state_pg_outbox_lease(void *impl, int64_t now_ms, const struct tg_strlist *skip_hosts,
    tg_state_lease_cb cb, void *arg)
{
	struct pg *pg = impl;
	struct pg_op *o = tg_state_pg_op_new(pg, PG_OB_LEASE, answer_lease, CB(cb), arg);
	char token[33], *skip = tg_state_skip_join(skip_hosts);

	tg_id_hex(token, 16);
	tg_state_pg_param_i64(o, now_ms);
	tg_state_pg_param_str(o, pg->instance);
	tg_state_pg_param_str(o, token);
	tg_state_pg_param_i64(o, now_ms + pg->rules.lease_ms);
	tg_state_pg_param_str(o, skip);
	free(skip);
	o->cleanup = lease_read_free;
	return tg_state_pg_submit(o, PG_OUTBOX);
}

/* ---- renew, release, complete ---- */

static int
lease_lost(struct pg_op *o, const PGresult *r)
{
	if (r == NULL || strcmp(PQcmdTuples((PGresult *)r), "0") != 0)
		return 0;
	o->res.rc = TG_STATE_CONFLICT;
	tg_err_set(&o->res.err, "lease of %s was lost", o->val[0]);
	return 1;
}

static void
answer_renew(struct pg_op *o, const PGresult *r)
{
	lease_lost(o, r);
	((tg_state_num_cb)o->cb)(&o->res, o->res.rc == TG_STATE_OK ? o->n1 : 0, o->arg);
}

struct tg_state_op *
tg_state_pg_outbox_renew(void *impl, const struct tg_outbox_lease *l, int64_t now_ms,
    tg_state_num_cb cb, void *arg)
{
	struct pg *pg = impl;
	struct pg_op *o = tg_state_pg_op_new(pg, PG_OB_RENEW, answer_renew, CB(cb), arg);

	o->n1 = now_ms + pg->rules.lease_ms;
	tg_state_pg_param_str(o, l->id);
	tg_state_pg_param_str(o, l->token);
	tg_state_pg_param_i64(o, o->n1);
	return tg_state_pg_submit(o, PG_OUTBOX);
}

struct tg_state_op *
tg_state_pg_outbox_release(void *impl, const struct tg_outbox_lease *l, tg_state_done_cb cb,
    void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_OB_RELEASE, tg_state_pg_answer_done,
	    CB(cb), arg);

	tg_state_pg_param_str(o, l->id);
	tg_state_pg_param_str(o, l->token);
	return tg_state_pg_submit(o, PG_OUTBOX);
}

static void
answer_complete(struct pg_op *o, const PGresult *r)
{
	struct tg_outbox_stats *c = &o->pg->ctr;

	if (r != NULL && PQntuples(r) == 1 && strcmp(PQgetvalue(r, 0, 0), "0") == 0) {
		o->res.rc = TG_STATE_CONFLICT;
		tg_err_set(&o->res.err, "lease of %s was lost", o->val[0]);
	} else if (r != NULL) {
		switch ((enum tg_outbox_state)o->n1) {
		case TG_OUTBOX_DELIVERED: c->delivered++; break;
		case TG_OUTBOX_GONE: c->gone++; break;
		case TG_OUTBOX_DEAD: c->dead++; break;
		default: c->retries++; break;
		}
	}
	((tg_state_outcome_cb)o->cb)(&o->res, (enum tg_outbox_state)o->n1, o->n2, o->arg);
}

struct tg_state_op *
tg_state_pg_outbox_complete(void *impl, const struct tg_outbox_lease *l,
    const struct tg_outbox_result *r, int64_t now_ms, tg_state_outcome_cb cb, void *arg)
{
	struct pg *pg = impl;
	struct pg_op *o = tg_state_pg_op_new(pg, PG_OB_COMPLETE, answer_complete, CB(cb), arg);
	enum tg_outbox_state st = tg_state_rules_judge(&pg->rules, l->attempt, r, now_ms, &o->n2);

	o->n1 = st;
	tg_state_pg_param_str(o, l->id);
	tg_state_pg_param_str(o, l->token);
	tg_state_pg_param_str(o, tg_outbox_state_str(st));
	if (st == TG_OUTBOX_READY)
		tg_state_pg_param_i64(o, o->n2);
	else
		tg_state_pg_param_str(o, NULL);
	if (r->status > 0)
		tg_state_pg_param_i64(o, r->status);
	else
		tg_state_pg_param_str(o, NULL);
	tg_state_pg_param_str(o, r->error != NULL && *r->error != '\0' ? r->error : NULL);
	if (st != TG_OUTBOX_READY)
		tg_state_pg_param_i64(o, now_ms);
	else
		tg_state_pg_param_str(o, NULL);
	return tg_state_pg_submit(o, PG_OUTBOX);
}

/* ---- next due ---- */

static void
answer_next_due(struct pg_op *o, const PGresult *r)
{
	int64_t n = INT64_MAX;

	if (r != NULL && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0))
		n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	((tg_state_num_cb)o->cb)(&o->res, r != NULL ? n : 0, o->arg);
}

struct tg_state_op *
tg_state_pg_outbox_next_due(void *impl, tg_state_num_cb cb, void *arg)
{
	return tg_state_pg_submit(tg_state_pg_op_new(impl, PG_OB_NEXT_DUE, answer_next_due,
	    CB(cb), arg), PG_OUTBOX);
}
