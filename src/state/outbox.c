/*
 * outbox.c - the webhook outbox's jobs, written once for every backend
 * (include/tidegate/state.h, "webhook outbox: jobs"): add, name the
 * correlationId, abandon, note, lease, renew, release, complete, the next
 * due time, and a waiting job's fetch held by one instance (hold, adopt).
 * The rules (schedule, jitter, Retry-After cap, outcomes) are
 * outbox_rules.c's; the payload's bytes are the backend's payload store's
 * (payload.h).
 *
 * A lease is held in the job's row (owner instance, token, expiry): a job
 * whose lease expired (its process died) is due again, which delivers the
 * attempts of a crash at least once. PostgreSQL takes one with a single
 * UPDATE of the most overdue due job picked FOR UPDATE SKIP LOCKED, so
 * that several instances never take the same job; SQLite (one writer)
 * reads the pick and counts the attempt in one transaction. While a job
 * waits for its export data the same columns hold its fetch: the adding
 * instance's for the lease length, renewed by hold; adopt takes those
 * that ran out (their fetcher died) with FOR UPDATE SKIP LOCKED, so one
 * survivor polls each (outbox_admin.c, which reads jobs); the data's
 * commit clears them. One instance (a
 * driver that is no fleet) always holds its own: hold and adopt answer
 * at once.
 *
 * The counters of stats (attempts, outcomes) are this instance's, kept
 * here on the loop as answers come.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include <event2/buffer.h>

#include "tidegate/ids.h"
#include "outbox.h"
#include "payload.h"
#include "seam.h"

enum { ADD, SET_CID, ABANDON, NOTE, LEASE, RENEW, RELEASE, COMPLETE, NEXT_DUE, HOLD };

/* The host of callback URL u as tg_state_url_host (outbox_rules.c) has
 * it: after the scheme and any user info, without brackets or port,
 * lower case; '' when there is none. SQLite calls that function itself. */
#define URL_HOST(u) "lower(coalesce(substring(" u " from" \
	" '^[^:/?#]+://(?:[^/?#]*@)?\\[([^]/?#]*)\\]'), substring(" u " from" \
	" '^[^:/?#]+://(?:[^/?#]*@)?([^/:?#]*)'), ''))"
/* SQLite: the most overdue due job not to a host of $5 (each between
 * newlines), not leased. */
#define PICK "(SELECT seq FROM outbox_jobs WHERE state = 'ready' AND next_at <= $1" \
	" AND (lease_expires IS NULL OR lease_expires <= $1) AND ($5 IS NULL OR" \
	" instr($5, char(10) || tg_url_host(url) || char(10)) = 0)" \
	" ORDER BY next_at, seq LIMIT 1)"
/* dead with its reason, its fetch no longer held */
#define ABANDONED "state = 'dead', last_error = $2, done_at = $3, lease_owner = NULL," \
	" lease_expires = NULL"
#define LEASED "id, url, secret_ref, content_type, kind, correlation_id, service, api_key," \
	" payload_size, attempts"

static const struct tg_db_stmt sql[] = {
	/* a waiting job's lease columns hold its fetch (hold, adopt) */
	[ADD] = { "ob_add", TG_DB_OUTBOX, 1,
	    "INSERT INTO outbox_jobs (id, url, secret_ref, api_key, kind, correlation_id,"
	    " service, content_type, state, created_at, lease_owner, lease_expires)"
	    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'waiting', $9, $10, $11)", NULL },
	[SET_CID] = { "ob_set_cid", TG_DB_OUTBOX, 1,
	    "UPDATE outbox_jobs SET correlation_id = $2 WHERE id = $1", NULL },
	/* (state, changed); no row: no such job */
	[ABANDON] = { "ob_abandon", TG_DB_OUTBOX, 1,
	    "WITH cur AS (SELECT state FROM outbox_jobs WHERE id = $1 FOR UPDATE),"
	    " u AS (UPDATE outbox_jobs SET " ABANDONED " WHERE id = $1 AND state = 'waiting'"
	    " RETURNING 1)"
	    " SELECT cur.state, (SELECT count(*) FROM u) FROM cur",
	    "UPDATE outbox_jobs SET " ABANDONED " WHERE id = $1 AND state = 'waiting';"
	    " SELECT state, changes() FROM outbox_jobs WHERE id = $1" },
	[NOTE] = { "ob_note", TG_DB_OUTBOX, 1,
	    "UPDATE outbox_jobs SET last_error = $2 WHERE id = $1 AND state = 'waiting'", NULL },
	/* The job (LEASED, its attempt counted), its ready time, whether this
	 * is its first attempt, its payload's writer. $5: hosts at their
	 * share, each between newlines (or NULL). */
	[LEASE] = { "ob_lease", TG_DB_OUTBOX, 1,
	    "WITH pick AS (SELECT id, first_attempt_at IS NULL AS first"
	    " FROM outbox_jobs WHERE state = 'ready' AND next_at <= $1"
	    " AND (lease_expires IS NULL OR lease_expires <= $1)"
	    " AND position(chr(10) || " URL_HOST("url") " || chr(10) in coalesce($5::text, ''))"
	    " = 0 ORDER BY next_at, seq LIMIT 1 FOR UPDATE SKIP LOCKED)"
	    " UPDATE outbox_jobs j SET attempts = j.attempts + 1, last_attempt_at = $1,"
	    " first_attempt_at = coalesce(j.first_attempt_at, $1), lease_owner = $2,"
	    " lease_token = $3, lease_expires = $4 FROM pick WHERE j.id = pick.id"
	    " RETURNING j.id, j.url, j.secret_ref, j.content_type, j.kind, j.correlation_id,"
	    " j.service, j.api_key, j.payload_size, j.attempts, j.ready_at, pick.first,"
	    " j.payload_token",
	    "SELECT " LEASED " + 1, ready_at, first_attempt_at IS NULL, payload_token"
	    " FROM outbox_jobs WHERE seq = " PICK ";"
	    " UPDATE outbox_jobs SET attempts = attempts + 1, last_attempt_at = $1,"
	    " first_attempt_at = coalesce(first_attempt_at, $1), lease_owner = $2,"
	    " lease_token = $3, lease_expires = $4 WHERE seq = " PICK },
	[RENEW] = { "ob_renew", TG_DB_OUTBOX, 1,
	    "UPDATE outbox_jobs SET lease_expires = $3 WHERE id = $1 AND lease_token = $2", NULL },
	[RELEASE] = { "ob_release", TG_DB_OUTBOX, 1,
	    "UPDATE outbox_jobs SET lease_owner = NULL, lease_token = NULL,"
	    " lease_expires = NULL WHERE id = $1 AND lease_token = $2", NULL },
	/* 1 when the lease still held the job; a payload delivered or gone
	 * goes with the outcome (chunk rows here, files by the store) */
	[COMPLETE] = { "ob_complete", TG_DB_OUTBOX, 1,
	    "WITH u AS (UPDATE outbox_jobs SET state = $3, next_at = $4,"
	    " last_status = $5, last_error = $6, done_at = $7, lease_owner = NULL,"
	    " lease_token = NULL, lease_expires = NULL WHERE id = $1 AND lease_token = $2"
	    " RETURNING id, state), d AS (DELETE FROM outbox_payloads WHERE job_id IN"
	    " (SELECT id FROM u WHERE state IN ('delivered', 'gone')))"
	    " SELECT count(*) FROM u",
	    "UPDATE outbox_jobs SET state = $3, next_at = $4, last_status = $5,"
	    " last_error = $6, done_at = $7, lease_owner = NULL, lease_token = NULL,"
	    " lease_expires = NULL WHERE id = $1 AND lease_token = $2; SELECT changes()" },
	[NEXT_DUE] = { "ob_next_due", TG_DB_OUTBOX, 0,
	    "SELECT min(greatest(next_at, coalesce(lease_expires, 0)))"
	    " FROM outbox_jobs WHERE state = 'ready'",
	    "SELECT min(max(next_at, coalesce(lease_expires, 0)))"
	    " FROM outbox_jobs WHERE state = 'ready'" },
	/* a fleet's only */
	[HOLD] = { "ob_hold", TG_DB_OUTBOX, 1,
	    "UPDATE outbox_jobs SET lease_owner = $2, lease_expires = $3"
	    " WHERE id = ANY($1::text[]) AND state = 'waiting'", NULL },
};

const struct tg_db_table tg_state_outbox_stmts = { sql, TG_NELEM(sql) };

struct op {
	struct tg_payload_fetch f;	/* f.q first: the query */
	struct tg_state *st;
	tg_state_done_cb done;
	tg_state_num_cb num;
	tg_state_str_cb str;
	tg_state_lease_cb lease;
	tg_state_outcome_cb outcome;
	void *arg;
	char id[TG_WEBHOOK_ID_LEN];
	char token[33];			/* a lease's */
	int64_t n1, n2;
};

static void
op_cleanup(struct tg_db_q *q)
{
	tg_outbox_lease_free(((struct op *)q)->f.l);
}

static struct op *
op_new(struct tg_state *st, int stmt, void (*answer)(struct tg_db_q *,
    const struct tg_db_rows *), const char *id, void *arg)
{
	struct op *o = tg_xcalloc(1, sizeof(*o));

	tg_db_query_init(&o->f.q, &sql[stmt], answer);
	o->f.q.cleanup = op_cleanup;
	o->st = st;
	o->arg = arg;
	if (id != NULL) {
		snprintf(o->id, sizeof(o->id), "%s", id);
		tg_db_text(&o->f.q, id);
	}
	return o;
}

static void
answer_done(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;

	(void)r;
	o->done(&q->res, o->arg);
}

static struct tg_state_op *
done_now(tg_state_done_cb cb, void *arg)
{
	struct tg_state_res res = { TG_STATE_OK, { "" } };

	cb(&res, arg);
	return NULL;
}

/* ---- add, set the correlationId, abandon, note ---- */

static void
answer_add(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;

	(void)r;	/* OK without rows: a replay found it committed (replay.c) */
	o->str(&q->res, q->res.rc == TG_STATE_OK || q->res.rc == TG_STATE_UNKNOWN ? o->id :
	    NULL, o->arg);
}

struct tg_state_op *
tg_state_outbox_add(struct tg_state *st, const struct tg_outbox_new *job, int64_t now_ms,
    tg_state_str_cb cb, void *arg)
{
	struct op *o = op_new(st, ADD, answer_add, NULL, arg);
	char hex[33];

	o->str = cb;
	if (!st->outbox)	/* as the driver would answer */
		return tg_db_fail(&o->f.q, TG_STATE_UNAVAILABLE,
		    "state: no webhook outbox is configured");
	if (job->url == NULL || job->secret_ref == NULL || job->kind == NULL)
		return tg_db_fail(&o->f.q, TG_STATE_ERROR,
		    "webhook job needs url, secret_ref and kind");
	tg_id_hex(hex, 16);
	snprintf(o->id, sizeof(o->id), "msg_%s", hex);
	o->f.q.replay = 1;		/* keyed by that id: sent again when lost */
	o->f.q.group = 1;		/* a new row: its id */
	tg_db_text(&o->f.q, o->id);
	tg_db_text(&o->f.q, job->url);
	tg_db_text(&o->f.q, job->secret_ref);
	tg_db_text(&o->f.q, job->api_key);
	tg_db_text(&o->f.q, job->kind);
	tg_db_text(&o->f.q, job->correlation_id);
	tg_db_text(&o->f.q, job->service);
	tg_db_text(&o->f.q, job->content_type != NULL ? job->content_type : "application/json");
	tg_db_int(&o->f.q, now_ms);
	tg_db_text(&o->f.q, st->instance);
	tg_db_int(&o->f.q, now_ms + st->rules.lease_ms);
	return tg_db_submit(st, &o->f.q);
}

/* No row changed: NOT_FOUND. */
static void
answer_changed(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;

	if (r != NULL && tg_db_changes(r) == 0) {
		q->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&q->res.err, "no webhook job %s", o->id);
	}
	o->done(&q->res, o->arg);
}

struct tg_state_op *
tg_state_outbox_set_cid(struct tg_state *st, const char *id, const char *cid,
    tg_state_done_cb cb, void *arg)
{
	struct op *o = op_new(st, SET_CID, answer_changed, id, arg);

	o->done = cb;
	o->f.q.group = 1;		/* one row: its id */
	tg_db_text(&o->f.q, cid);
	return tg_db_submit(st, &o->f.q);
}

/* One row (state, changed): NOT_FOUND without it, CONFLICT when nothing
 * changed because the job was not waiting. */
static void
answer_abandon(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;

	if (r != NULL && tg_db_nrows(r) == 0) {
		q->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&q->res.err, "no webhook job %s", o->id);
	} else if (r != NULL && tg_db_i64(r, 0, 1) == 0) {
		q->res.rc = TG_STATE_CONFLICT;
		tg_err_set(&q->res.err, "webhook job %s is %s, not waiting", o->id,
		    tg_db_str(r, 0, 0));
	} else if (r != NULL)
		o->st->ctr.dead++;
	o->done(&q->res, o->arg);
}

struct tg_state_op *
tg_state_outbox_abandon(struct tg_state *st, const char *id, const char *reason,
    int64_t now_ms, tg_state_done_cb cb, void *arg)
{
	struct op *o = op_new(st, ABANDON, answer_abandon, id, arg);

	o->done = cb;
	tg_db_text(&o->f.q, reason != NULL ? reason : "abandoned");
	tg_db_int(&o->f.q, now_ms);
	return tg_db_submit(st, &o->f.q);
}

struct tg_state_op *
tg_state_outbox_note(struct tg_state *st, const char *id, const char *why, tg_state_done_cb cb,
    void *arg)
{
	struct op *o = op_new(st, NOTE, answer_done, id, arg);

	o->done = cb;
	tg_db_text(&o->f.q, why);
	return tg_db_submit(st, &o->f.q);
}

/* ---- the fetch of waiting jobs: held by one instance, adopted when its
 * hold runs out ---- */

struct tg_state_op *
tg_state_outbox_hold(struct tg_state *st, const char *const *ids, size_t n, int64_t now_ms,
    tg_state_done_cb cb, void *arg)
{
	struct op *o;
	struct evbuffer *b;
	size_t i;

	if (!tg_db_fleet(st))
		return done_now(cb, arg);
	o = op_new(st, HOLD, answer_done, NULL, arg);
	o->done = cb;
	b = evbuffer_new();
	evbuffer_add(b, "{", 1);
	for (i = 0; i < n; i++)	/* ids are msg_<hex>: nothing to escape */
		evbuffer_add_printf(b, "%s\"%s\"", i ? "," : "", ids[i]);
	evbuffer_add(b, "}", 2);	/* with the NUL */
	tg_db_text(&o->f.q, (const char *)evbuffer_pullup(b, -1));
	evbuffer_free(b);
	tg_db_text(&o->f.q, st->instance);
	tg_db_int(&o->f.q, now_ms + st->rules.lease_ms);
	return tg_db_submit(st, &o->f.q);
}

/* ---- lease: the job, then its payload made readable by the store ---- */

/* The payload is readable, or res says why not: the lease to the caller. */
static void
lease_hand(struct tg_payload_fetch *f)
{
	struct op *o = (struct op *)f;
	struct tg_outbox_lease *l = f->q.res.rc == TG_STATE_OK ? f->l : NULL;

	if (l != NULL)
		f->l = NULL;
	o->lease(&f->q.res, l, o->arg);
}

/* The leased job's row into a new lease (f->l), its attempt counted. */
static void
lease_from(struct op *o, const struct tg_db_rows *r)
{
	struct tg_outbox_lease *l = tg_xcalloc(1, sizeof(*l));
	struct tg_outbox_stats *c = &o->st->ctr;

	snprintf(l->id, sizeof(l->id), "%s", tg_db_str(r, 0, 0));
	memcpy(l->token, o->token, sizeof(l->token));
	l->url = tg_db_strdup(r, 0, 1);
	l->secret_ref = tg_db_strdup(r, 0, 2);
	l->content_type = tg_db_strdup(r, 0, 3);
	l->kind = tg_db_strdup(r, 0, 4);
	l->correlation_id = tg_db_strdup(r, 0, 5);
	l->service = tg_db_strdup(r, 0, 6);
	l->api_key = tg_db_strdup(r, 0, 7);
	l->size = tg_db_i64(r, 0, 8);
	l->attempt = (int)tg_db_i64(r, 0, 9);
	l->expires_at = o->n2;
	l->first_delay_ms = tg_db_i64(r, 0, 11) ? o->n1 - tg_db_i64(r, 0, 10) : -1;
	l->host = tg_state_url_host(l->url);
	snprintf(o->f.ptoken, sizeof(o->f.ptoken), "%s",
	    tg_db_isnull(r, 0, 12) ? "" : tg_db_str(r, 0, 12));
	o->f.l = l;
	c->attempts++;
	if (l->first_delay_ms >= 0) {
		c->first_delay_count++;
		c->first_delay_sum_ms += l->first_delay_ms;
	}
}

static void
answer_lease(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;

	if (r == NULL || tg_db_nrows(r) == 0) {	/* failed, or nothing is due */
		o->lease(&q->res, NULL, o->arg);
		return;
	}
	lease_from(o, r);
	o->f.hand = lease_hand;
	o->st->be->payloads->fetch(o->st, &o->f);
}

struct tg_state_op *
tg_state_outbox_lease(struct tg_state *st, int64_t now_ms, const struct tg_strlist *skip_hosts,
    tg_state_lease_cb cb, void *arg)
{
	struct op *o = op_new(st, LEASE, answer_lease, NULL, arg);
	char *skip = tg_state_skip_join(skip_hosts);

	o->lease = cb;
	o->n1 = now_ms;
	o->n2 = now_ms + st->rules.lease_ms;
	tg_id_hex(o->token, 16);
	tg_db_int(&o->f.q, now_ms);
	tg_db_text(&o->f.q, st->instance);
	tg_db_text(&o->f.q, o->token);
	tg_db_int(&o->f.q, o->n2);
	tg_db_text(&o->f.q, skip);
	free(skip);
	return tg_db_submit(st, &o->f.q);
}

/* ---- renew, release, complete ---- */

static int
lease_lost(struct op *o, int lost)
{
	if (!lost || o->f.q.res.rc != TG_STATE_OK)
		return 0;
	o->f.q.res.rc = TG_STATE_CONFLICT;
	tg_err_set(&o->f.q.res.err, "lease of %s was lost", o->id);
	return 1;
}

static void
answer_renew(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;

	lease_lost(o, r != NULL && tg_db_changes(r) == 0);
	o->num(&q->res, q->res.rc == TG_STATE_OK ? o->n1 : 0, o->arg);
}

/* Statement stmt on lease l (borrowed): its job and token first. */
static struct op *
lease_op(struct tg_state *st, int stmt, void (*answer)(struct tg_db_q *,
    const struct tg_db_rows *), const struct tg_outbox_lease *l, void *arg)
{
	struct op *o = op_new(st, stmt, answer, l->id, arg);

	tg_db_text(&o->f.q, l->token);
	return o;
}

struct tg_state_op *
tg_state_outbox_renew(struct tg_state *st, const struct tg_outbox_lease *l, int64_t now_ms,
    tg_state_num_cb cb, void *arg)
{
	struct op *o = lease_op(st, RENEW, answer_renew, l, arg);

	o->num = cb;
	o->n1 = now_ms + st->rules.lease_ms;
	tg_db_int(&o->f.q, o->n1);
	return tg_db_submit(st, &o->f.q);
}

struct tg_state_op *
tg_state_outbox_release(struct tg_state *st, const struct tg_outbox_lease *l,
    tg_state_done_cb cb, void *arg)
{
	struct op *o = lease_op(st, RELEASE, answer_done, l, arg);

	o->done = cb;
	return tg_db_submit(st, &o->f.q);
}

static void
answer_complete(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;
	struct tg_outbox_stats *c = &o->st->ctr;
	enum tg_outbox_state st = (enum tg_outbox_state)o->n1;

	if (!lease_lost(o, r != NULL && tg_db_i64(r, 0, 0) == 0) && r != NULL) {
		switch (st) {
		case TG_OUTBOX_DELIVERED: c->delivered++; break;
		case TG_OUTBOX_GONE: c->gone++; break;
		case TG_OUTBOX_DEAD: c->dead++; break;
		default: c->retries++; break;
		}
		if ((st == TG_OUTBOX_DELIVERED || st == TG_OUTBOX_GONE) &&
		    o->st->be->payloads->drop != NULL)
			o->st->be->payloads->drop(o->st, o->id);
	}
	o->outcome(&q->res, st, o->n2, o->arg);
}

struct tg_state_op *
tg_state_outbox_complete(struct tg_state *st, const struct tg_outbox_lease *l,
    const struct tg_outbox_result *r, int64_t now_ms, tg_state_outcome_cb cb, void *arg)
{
	struct op *o = lease_op(st, COMPLETE, answer_complete, l, arg);
	enum tg_outbox_state s = tg_state_rules_judge(&st->rules, l->attempt, r, now_ms, &o->n2);

	o->outcome = cb;
	o->n1 = s;
	tg_db_text(&o->f.q, tg_outbox_state_str(s));
	tg_db_time(&o->f.q, s == TG_OUTBOX_READY ? o->n2 : 0);
	tg_db_time(&o->f.q, r->status > 0 ? r->status : 0);
	tg_db_text(&o->f.q, r->error != NULL && *r->error != '\0' ? r->error : NULL);
	tg_db_time(&o->f.q, s != TG_OUTBOX_READY ? now_ms : 0);
	return tg_db_submit(st, &o->f.q);
}

/* ---- next due ---- */

static void
answer_next_due(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;
	int64_t n = INT64_MAX;

	if (r != NULL && tg_db_nrows(r) > 0 && !tg_db_isnull(r, 0, 0))
		n = tg_db_i64(r, 0, 0);
	o->num(&q->res, r != NULL ? n : 0, o->arg);
}

struct tg_state_op *
tg_state_outbox_next_due(struct tg_state *st, tg_state_num_cb cb, void *arg)
{
	struct op *o = op_new(st, NEXT_DUE, answer_next_due, NULL, arg);

	o->num = cb;
	return tg_db_submit(st, &o->f.q);
}

/* ---- the domain's share of the state ---- */

void
tg_state_outbox_init(struct tg_state *st, const struct tg_outbox_opts *o)
{
	const char *tmp = getenv("TMPDIR");

	st->outbox = o != NULL;
	tg_state_rules_init(&st->rules, o);
	st->spool = tg_xstrdup(o != NULL && o->payload_dir != NULL && *o->payload_dir != '\0' ?
	    o->payload_dir : tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
}

void
tg_state_outbox_free(struct tg_state *st)
{
	int i;

	tg_state_rules_free(&st->rules);
	free(st->spool);
	for (i = 0; i < TG_SPOOL_KEPT; i++)
		if (st->kept[i].fd > 0)
			close(st->kept[i].fd);
}
