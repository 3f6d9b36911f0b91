/*
 * outbox_admin.c - what operators see and do with the webhook outbox,
 * written once for every backend (include/tidegate/state.h, "admin"):
 * list, get and adopt jobs, redeliver one job or every failure since a time (the
 * refusals of outbox_rules.c), purge finished jobs (their payloads go
 * with them: chunk rows by the database, files by the store), and the
 * counters behind /metrics (depth and live leases from the database,
 * shared by a fleet; attempts and outcomes of this instance since it
 * opened, outbox.c's). A lease counts as live until its expiry, judged at
 * the caller's clock. Stats queue behind the writes they count (SQLite's
 * writer thread).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/clock.h"
#include "outbox.h"
#include "payload.h"
#include "seam.h"

#define LIST_LIMIT	100

/* A job's columns; then the time a lease is judged live at, and ", false)". */
#define JOB_COLS "id, state, url, kind, correlation_id, service, api_key," \
	" secret_ref, last_error, attempts, last_status, payload_size, created_at, ready_at," \
	" next_at, first_attempt_at, last_attempt_at, done_at," \
	" coalesce(state <> 'waiting' AND lease_expires > "

enum { GET, LIST, REDELIVER, REDELIVER_SINCE, PURGE, STATS, ADOPT };

#define REDELIVERED "state = 'ready', attempts = 0, next_at = $2, done_at = NULL," \
	" lease_owner = NULL, lease_token = NULL, lease_expires = NULL"
#define LEASED_AT(t) "coalesce(lease_expires > " t ", false)"

static const struct tg_db_stmt sql[] = {
	[GET] = { "ob_get", TG_DB_OUTBOX, 0,
	    "SELECT " JOB_COLS "$2, false) FROM outbox_jobs WHERE id = $1", NULL },
	[LIST] = { "ob_list", TG_DB_OUTBOX, 0,
	    "SELECT " JOB_COLS "$6, false) FROM outbox_jobs"
	    " WHERE (CAST($1 AS text) IS NULL OR state = CAST($1 AS text)) AND created_at >= $2"
	    " AND (CAST($3 AS text) IS NULL OR correlation_id = CAST($3 AS text))"
	    " ORDER BY created_at DESC, id LIMIT $4 OFFSET $5", NULL },
	/* (state, has a payload, leased, changed); no row: no such job */
	[REDELIVER] = { "ob_redeliver", TG_DB_OUTBOX, 1,
	    "WITH cur AS (SELECT state, payload_size IS NOT NULL AS has, " LEASED_AT("$2")
	    " AS leased FROM outbox_jobs WHERE id = $1 FOR UPDATE), u AS (UPDATE outbox_jobs"
	    " SET " REDELIVERED " WHERE id = $1 AND NOT " LEASED_AT("$2") " AND (state = 'ready'"
	    " OR (state = 'dead' AND payload_size IS NOT NULL)) RETURNING 1)"
	    " SELECT cur.state, cur.has, cur.leased, (SELECT count(*) FROM u) FROM cur",
	    "UPDATE outbox_jobs SET " REDELIVERED " WHERE id = $1 AND NOT " LEASED_AT("$2")
	    " AND (state = 'ready' OR (state = 'dead' AND payload_size IS NOT NULL));"
	    " SELECT state, payload_size IS NOT NULL, " LEASED_AT("$2") ", changes()"
	    " FROM outbox_jobs WHERE id = $1" },
	[REDELIVER_SINCE] = { "ob_redeliver_since", TG_DB_OUTBOX, 1,
	    "UPDATE outbox_jobs SET " REDELIVERED " WHERE ((state = 'dead'"
	    " AND payload_size IS NOT NULL AND done_at >= $1) OR (state = 'ready'"
	    " AND attempts > 0 AND last_attempt_at >= $1)) AND NOT " LEASED_AT("$2"), NULL },
	[PURGE] = { "ob_purge", TG_DB_OUTBOX, 1,
	    "DELETE FROM outbox_jobs WHERE state IN ('delivered', 'gone', 'dead')"
	    " AND done_at < $1 RETURNING id", NULL },
	[STATS] = { "ob_stats", TG_DB_OUTBOX, 1,
	    "SELECT state, count(*) FROM outbox_jobs GROUP BY state UNION ALL"
	    " SELECT 'leased', count(*) FROM outbox_jobs WHERE lease_expires > $1"
	    " AND state <> 'waiting'", NULL },
	/* a fleet's only (outbox.c holds the fetch of waiting jobs) */
	[ADOPT] = { "ob_adopt", TG_DB_OUTBOX, 1,
	    "WITH pick AS (SELECT id FROM outbox_jobs WHERE state = 'waiting'"
	    " AND coalesce(lease_expires, 0) <= $1 ORDER BY created_at, seq LIMIT $4"
	    " FOR UPDATE SKIP LOCKED) UPDATE outbox_jobs SET lease_owner = $2,"
	    " lease_expires = $3 WHERE id IN (SELECT id FROM pick) RETURNING "
	    JOB_COLS "$1, false)", NULL },
};

const struct tg_db_table tg_state_outbox_admin_stmts = { sql, TG_NELEM(sql) };

struct op {
	struct tg_db_op d;
	int get;		/* a get: no row is NOT_FOUND */
};

static struct op *
op_new(struct tg_state *st, int stmt, void (*answer)(struct tg_db_q *,
    const struct tg_db_rows *), const char *id, void *arg)
{
	return tg_db_op_new(sizeof(struct op), st, &sql[stmt], answer, id, arg);
}

/* ---- jobs ---- */

static int64_t
ms(const struct tg_db_rows *r, int i, int c)
{
	return tg_db_isnull(r, i, c) ? 0 : tg_db_i64(r, i, c);
}

/* Row i of JOB_COLS into j. */
static void
row(const struct tg_db_rows *r, int i, struct tg_outbox_job *j)
{
	memset(j, 0, sizeof(*j));
	snprintf(j->id, sizeof(j->id), "%s", tg_db_str(r, i, 0));
	j->state = tg_outbox_state_parse(tg_db_str(r, i, 1));
	j->url = tg_db_strdup(r, i, 2);
	j->kind = tg_db_strdup(r, i, 3);
	j->correlation_id = tg_db_strdup(r, i, 4);
	j->service = tg_db_strdup(r, i, 5);
	j->api_key = tg_db_strdup(r, i, 6);
	j->secret_ref = tg_db_strdup(r, i, 7);
	j->last_error = tg_db_strdup(r, i, 8);
	j->attempts = (int)tg_db_i64(r, i, 9);
	j->last_status = (int)tg_db_i64(r, i, 10);
	j->size = tg_db_isnull(r, i, 11) ? -1 : tg_db_i64(r, i, 11);
	j->created_at = ms(r, i, 12);
	j->ready_at = ms(r, i, 13);
	j->next_at = ms(r, i, 14);
	j->first_attempt_at = ms(r, i, 15);
	j->last_attempt_at = ms(r, i, 16);
	j->done_at = ms(r, i, 17);
	j->leased = tg_db_i64(r, i, 18) != 0;
}

static struct tg_outbox_job *
jobs_of(const struct tg_db_rows *r, size_t *n)
{
	struct tg_outbox_job *jobs = NULL;
	size_t i;

	*n = (size_t)tg_db_nrows(r);
	if (*n > 0)
		jobs = tg_xcalloc(*n, sizeof(*jobs));
	for (i = 0; i < *n; i++)
		row(r, (int)i, &jobs[i]);
	return jobs;
}

static void
answer_jobs(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;
	struct tg_outbox_job *jobs = NULL;
	size_t n = 0;

	if (r != NULL)
		jobs = jobs_of(r, &n);
	if (r != NULL && n == 0 && o->get) {
		q->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&q->res.err, "no webhook job %s", o->d.id);
	}
	o->d.cb.jobs(&q->res, jobs, n, o->d.arg);
	tg_outbox_jobs_free(jobs, n);
}

struct tg_state_op *
tg_state_outbox_list(struct tg_state *st, const struct tg_outbox_query *q,
    tg_state_jobs_cb cb, void *arg)
{
	struct op *o = op_new(st, LIST, answer_jobs, NULL, arg);

	o->d.cb.jobs = cb;
	tg_db_text(&o->d.q, q->state >= 0 && q->state < TG_OUTBOX_NSTATES ?
	    tg_outbox_state_str(q->state) : NULL);
	tg_db_int(&o->d.q, q->since_ms);
	tg_db_text(&o->d.q, q->correlation_id);
	tg_db_int(&o->d.q, (int64_t)(q->limit > 0 ? q->limit : LIST_LIMIT));
	tg_db_int(&o->d.q, (int64_t)q->offset);
	tg_db_int(&o->d.q, tg_clock_now_ms());
	return tg_db_submit(st, &o->d.q);
}

struct tg_state_op *
tg_state_outbox_get(struct tg_state *st, const char *id, tg_state_jobs_cb cb, void *arg)
{
	struct op *o = op_new(st, GET, answer_jobs, id, arg);

	o->d.cb.jobs = cb;
	o->get = 1;
	tg_db_int(&o->d.q, tg_clock_now_ms());
	return tg_db_submit(st, &o->d.q);
}

/* Waiting jobs whose fetch's hold ran out (their instance died) held by
 * this one now, oldest first; one instance holds its own already. */
struct tg_state_op *
tg_state_outbox_adopt(struct tg_state *st, int64_t now_ms, size_t max, tg_state_jobs_cb cb,
    void *arg)
{
	struct tg_state_res res = { TG_STATE_OK, { "" } };
	struct op *o;

	if (!tg_db_fleet(st)) {
		cb(&res, NULL, 0, arg);
		return NULL;
	}
	o = op_new(st, ADOPT, answer_jobs, NULL, arg);
	o->d.cb.jobs = cb;
	tg_db_int(&o->d.q, now_ms);
	tg_db_text(&o->d.q, st->instance);
	tg_db_int(&o->d.q, now_ms + st->rules.lease_ms);
	tg_db_int(&o->d.q, (int64_t)max);
	return tg_db_submit(st, &o->d.q);
}

/* ---- redelivery ---- */

/* One row (state, has a payload, leased, changed): NOT_FOUND without it,
 * CONFLICT with the refusal when nothing changed. */
static void
answer_redeliver(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;
	const char *why;
	int st;

	if (r != NULL && tg_db_nrows(r) == 0) {
		q->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&q->res.err, "no webhook job %s", o->d.id);
	} else if (r != NULL && tg_db_i64(r, 0, 3) == 0) {
		st = tg_outbox_state_parse(tg_db_str(r, 0, 0));
		why = tg_state_rules_refusal(st, tg_db_i64(r, 0, 2) != 0, tg_db_i64(r, 0, 1) != 0);
		q->res.rc = TG_STATE_CONFLICT;
		tg_err_set(&q->res.err, "webhook job %s is %s: %s", o->d.id,
		    tg_outbox_state_str(st), why != NULL ? why : "it changed meanwhile");
	}
	o->d.cb.done(&q->res, o->d.arg);
}

struct tg_state_op *
tg_state_outbox_redeliver(struct tg_state *st, const char *id, int64_t now_ms,
    tg_state_done_cb cb, void *arg)
{
	struct op *o = op_new(st, REDELIVER, answer_redeliver, id, arg);

	o->d.cb.done = cb;
	tg_db_int(&o->d.q, now_ms);
	return tg_db_submit(st, &o->d.q);
}

static void
answer_changes(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;

	o->d.cb.num(&q->res, r != NULL ? tg_db_changes(r) : 0, o->d.arg);
}

struct tg_state_op *
tg_state_outbox_redeliver_since(struct tg_state *st, int64_t since_ms, int64_t now_ms,
    tg_state_num_cb cb, void *arg)
{
	struct op *o = op_new(st, REDELIVER_SINCE, answer_changes, NULL, arg);

	o->d.cb.num = cb;
	tg_db_int(&o->d.q, since_ms);
	tg_db_int(&o->d.q, now_ms);
	return tg_db_submit(st, &o->d.q);
}

/* The jobs deleted: their payloads go too (files: the store's). */
static void
answer_purge(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;
	const struct tg_payload_store *ps = o->d.st->be->payloads;
	int i, n = r != NULL ? tg_db_nrows(r) : 0;

	for (i = 0; i < n && ps->drop != NULL; i++)
		ps->drop(o->d.st, tg_db_str(r, i, 0));
	o->d.cb.num(&q->res, n, o->d.arg);
}

struct tg_state_op *
tg_state_outbox_purge(struct tg_state *st, int64_t before_ms, tg_state_num_cb cb, void *arg)
{
	struct op *o = op_new(st, PURGE, answer_purge, NULL, arg);

	o->d.cb.num = cb;
	tg_db_int(&o->d.q, before_ms);
	return tg_db_submit(st, &o->d.q);
}

/* ---- counters ---- */

/* Rows (state or "leased", count) and this instance's counters. */
static void
answer_stats(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;
	struct tg_outbox_stats st = o->d.st->ctr;
	int i, s;

	memset(st.depth, 0, sizeof(st.depth));
	st.leased = 0;
	for (i = 0; r != NULL && i < tg_db_nrows(r); i++) {
		uint64_t n = (uint64_t)tg_db_i64(r, i, 1);

		if (strcmp(tg_db_str(r, i, 0), "leased") == 0)
			st.leased = n;
		else if ((s = tg_outbox_state_parse(tg_db_str(r, i, 0))) >= 0)
			st.depth[s] = n;
	}
	o->d.cb.outbox_stats(&q->res, r != NULL ? &st : NULL, o->d.arg);
}

struct tg_state_op *
tg_state_outbox_stats(struct tg_state *st, int64_t now_ms, tg_state_outbox_stats_cb cb,
    void *arg)
{
	struct op *o = op_new(st, STATS, answer_stats, NULL, arg);

	o->d.cb.outbox_stats = cb;
	tg_db_int(&o->d.q, now_ms);
	return tg_db_submit(st, &o->d.q);
}
