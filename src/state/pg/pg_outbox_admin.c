/*
 * pg_outbox_admin.c - what operators see and do with the webhook outbox
 * in the PostgreSQL state backend (include/tidegate/state.h, "admin"),
 * with the semantics of sqlite/outbox_admin.c: list and get jobs,
 * redeliver one job or every failure since a time (the refusals of
 * ../outbox_rules.c), purge finished jobs (their payload rows go with
 * them), and the counters behind /metrics (depth and live leases from the
 * database, shared by the fleet; attempts and outcomes of this instance
 * since it opened). A lease counts as live until its expiry, judged at
 * the caller's clock.
 */
#include <stdlib.h>
#include <string.h>

#include "tidegate/clock.h"
#include "pg.h"

#define CB(cb)		((void (*)(void))(cb))
#define LIST_LIMIT	100

static char *
col(const PGresult *r, int i, int c)
{
	return PQgetisnull(r, i, c) ? NULL : tg_xstrdup(PQgetvalue(r, i, c));
}

static int64_t
col_ms(const PGresult *r, int i, int c)
{
	return PQgetisnull(r, i, c) ? 0 : strtoll(PQgetvalue(r, i, c), NULL, 10);
}

/* Row i of JOB_COLS (pg_schema.c) into j. */
static void
row(const PGresult *r, int i, struct tg_outbox_job *j)
{
	memset(j, 0, sizeof(*j));
	snprintf(j->id, sizeof(j->id), "%s", PQgetvalue(r, i, 0));
	j->state = tg_outbox_state_parse(PQgetvalue(r, i, 1));
	j->url = col(r, i, 2);
	j->kind = col(r, i, 3);
	j->correlation_id = col(r, i, 4);
	j->service = col(r, i, 5);
	j->api_key = col(r, i, 6);
	j->secret_ref = col(r, i, 7);
	j->last_error = col(r, i, 8);
	j->attempts = atoi(PQgetvalue(r, i, 9));
	j->last_status = (int)col_ms(r, i, 10);
	j->size = PQgetisnull(r, i, 11) ? -1 : strtoll(PQgetvalue(r, i, 11), NULL, 10);
	j->created_at = col_ms(r, i, 12);
	j->ready_at = col_ms(r, i, 13);
	j->next_at = col_ms(r, i, 14);
	j->first_attempt_at = col_ms(r, i, 15);
	j->last_attempt_at = col_ms(r, i, 16);
	j->done_at = col_ms(r, i, 17);
	j->leased = strcmp(PQgetvalue(r, i, 18), "t") == 0;
}

void
tg_state_pg_answer_jobs(struct pg_op *o, const PGresult *r)
{
	struct tg_outbox_job *jobs = NULL;
	size_t n = r != NULL ? (size_t)PQntuples(r) : 0, i;

	if (r != NULL && n == 0 && o->n1) {
		o->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&o->res.err, "no webhook job %s", o->val[0]);
	}
	if (n > 0)
		jobs = tg_xcalloc(n, sizeof(*jobs));
	for (i = 0; i < n; i++)
		row(r, (int)i, &jobs[i]);
	((tg_state_jobs_cb)o->cb)(&o->res, jobs, n, o->arg);
	tg_outbox_jobs_free(jobs, n);
}

struct tg_state_op *
tg_state_pg_outbox_list(void *impl, const struct tg_outbox_query *q, tg_state_jobs_cb cb,
    void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_OB_LIST, tg_state_pg_answer_jobs, CB(cb), arg);

	tg_state_pg_param_str(o, q->state >= 0 && q->state < TG_OUTBOX_NSTATES ?
	    tg_outbox_state_str(q->state) : NULL);
	tg_state_pg_param_i64(o, q->since_ms);
	tg_state_pg_param_str(o, q->correlation_id);
	tg_state_pg_param_i64(o, (int64_t)(q->limit > 0 ? q->limit : LIST_LIMIT));
	tg_state_pg_param_i64(o, (int64_t)q->offset);
	tg_state_pg_param_i64(o, tg_clock_now_ms());
	return tg_state_pg_submit(o, PG_OUTBOX);
}

struct tg_state_op *
tg_state_pg_outbox_get(void *impl, const char *id, tg_state_jobs_cb cb, void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_OB_GET, tg_state_pg_answer_jobs, CB(cb), arg);

	o->n1 = 1;
	tg_state_pg_param_str(o, id);
	tg_state_pg_param_i64(o, tg_clock_now_ms());
	return tg_state_pg_submit(o, PG_OUTBOX);
}

/* One row (state, has a payload, leased, changed): NOT_FOUND without it,
 * CONFLICT with the refusal when nothing changed. */
static void
answer_redeliver(struct pg_op *o, const PGresult *r)
{
	const char *why;
	int st;

	if (r != NULL && PQntuples(r) == 0) {
		o->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&o->res.err, "no webhook job %s", o->val[0]);
	} else if (r != NULL && strcmp(PQgetvalue(r, 0, 3), "0") == 0) {
		st = tg_outbox_state_parse(PQgetvalue(r, 0, 0));
		why = tg_state_rules_refusal(st, strcmp(PQgetvalue(r, 0, 2), "t") == 0,
		    strcmp(PQgetvalue(r, 0, 1), "t") == 0);
		o->res.rc = TG_STATE_CONFLICT;
		tg_err_set(&o->res.err, "webhook job %s is %s: %s", o->val[0],
		    tg_outbox_state_str(st), why != NULL ? why : "it changed meanwhile");
	}
	((tg_state_done_cb)o->cb)(&o->res, o->arg);
}

struct tg_state_op *
tg_state_pg_outbox_redeliver(void *impl, const char *id, int64_t now_ms, tg_state_done_cb cb,
    void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_OB_REDELIVER, answer_redeliver, CB(cb),
	    arg);

	tg_state_pg_param_str(o, id);
	tg_state_pg_param_i64(o, now_ms);
	return tg_state_pg_submit(o, PG_OUTBOX);
}

struct tg_state_op *
tg_state_pg_outbox_redeliver_since(void *impl, int64_t since_ms, int64_t now_ms,
    tg_state_num_cb cb, void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_OB_REDELIVER_SINCE, tg_state_pg_answer_num,
	    CB(cb), arg);

	tg_state_pg_param_i64(o, since_ms);
	tg_state_pg_param_i64(o, now_ms);
	return tg_state_pg_submit(o, PG_OUTBOX);
}

struct tg_state_op *
tg_state_pg_outbox_purge(void *impl, int64_t before_ms, tg_state_num_cb cb, void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_OB_PURGE, tg_state_pg_answer_num, CB(cb),
	    arg);

	tg_state_pg_param_i64(o, before_ms);
	return tg_state_pg_submit(o, PG_OUTBOX);
}

/* Rows (state or "leased", count) and this instance's counters. */
static void
answer_stats(struct pg_op *o, const PGresult *r)
{
	struct tg_outbox_stats st = o->pg->ctr;
	int i, s;

	memset(st.depth, 0, sizeof(st.depth));
	st.leased = 0;
	for (i = 0; r != NULL && i < PQntuples(r); i++) {
		uint64_t n = strtoull(PQgetvalue(r, i, 1), NULL, 10);

		if (strcmp(PQgetvalue(r, i, 0), "leased") == 0)
			st.leased = n;
		else if ((s = tg_outbox_state_parse(PQgetvalue(r, i, 0))) >= 0)
			st.depth[s] = n;
	}
	((tg_state_outbox_stats_cb)o->cb)(&o->res, r != NULL ? &st : NULL, o->arg);
}

struct tg_state_op *
tg_state_pg_outbox_stats(void *impl, int64_t now_ms, tg_state_outbox_stats_cb cb, void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_OB_STATS, answer_stats, CB(cb), arg);

	tg_state_pg_param_i64(o, now_ms);
	return tg_state_pg_submit(o, PG_OUTBOX);
}
