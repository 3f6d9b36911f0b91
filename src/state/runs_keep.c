/*
 * runs_keep.c - what the run registry keeps and for how long, written
 * once for every backend (include/tidegate/state.h): its counts, the
 * archive of completed runs' results within its caps, expiry, and the
 * purge of runs and finished sweeps past their retention.
 *
 * An archive is one statement that counts the archive's bytes and stores
 * the results only within the caps: PostgreSQL calls
 * tidegate_run_archive, which holds an advisory lock while it counts, so
 * that instances together stay within the total; SQLite's one writer
 * runs the same in one transaction. A purge takes two steps: the runs
 * past their retention, then the finished sweeps with no run left.
 */
#include <stdlib.h>
#include <string.h>

#include "runs.h"
#include "seam.h"

enum { STATS, ARCHIVE, ARCHIVED, USAGE, EXPIRE, PURGE_RUNS, PURGE_SWEEPS };

#define SUM_BYTES(w) "CAST(coalesce(sum(results_size)" w ", 0) AS bigint)"

static const struct tg_db_stmt sql[] = {
	[STATS] = { "run_stats", TG_DB_RUNS, 0, "SELECT status, count(*), count(*) FILTER"
	    " (WHERE archived), " SUM_BYTES(" FILTER (WHERE archived)") " FROM runs GROUP BY"
	    " status UNION ALL SELECT 'sweeps ' || state, count(*), 0, 0 FROM sweeps GROUP BY"
	    " state UNION ALL SELECT 'variants ' || state, count(*), 0, 0 FROM sweep_variants"
	    " WHERE state IN ('pending', 'submitting') GROUP BY state", NULL },
	/* found, status, vendor status, the archive's bytes before, the
	 * run's own, stored */
	[ARCHIVE] = { "run_archive", TG_DB_RUNS, 1, "SELECT a_found::int, a_status, a_vendor,"
	    " a_used, a_old, a_stored::int FROM tidegate_run_archive($1, $2, $3, $4)",
	    "UPDATE runs SET archived = 1, results = $2, results_size = length($2) WHERE"
	    " simulation_id = $1 AND (status = 'COMPLETED' OR vendor_status IS 'COMPLETED') AND"
	    " length($2) <= $3 AND (SELECT coalesce(sum(results_size), 0) FROM runs WHERE"
	    " archived) - results_size + length($2) <= $4;"
	    " SELECT 1, status, vendor_status, (SELECT coalesce(sum(results_size), 0) FROM runs"
	    " WHERE archived), results_size, changes() FROM runs WHERE simulation_id = $1" },
	[ARCHIVED] = { "run_archived", TG_DB_RUNS, 0, "SELECT results FROM runs WHERE"
	    " simulation_id = $1 AND archived AND results IS NOT NULL", NULL },
	[USAGE] = { "run_archive_usage", TG_DB_RUNS, 0,
	    "SELECT " SUM_BYTES("") ", count(*) FROM runs WHERE archived", NULL },
	[EXPIRE] = { "run_expire", TG_DB_RUNS, 1, "UPDATE runs SET status = 'EXPIRED',"
	    " status_at = $1, next_check_at = NULL WHERE expires_at <= $1"
	    " AND status <> 'EXPIRED'", NULL },
	[PURGE_RUNS] = { "run_purge", TG_DB_RUNS, 1, "DELETE FROM runs WHERE (NOT archived AND"
	    " expires_at <= CAST($1 AS bigint) - CAST($2 AS bigint)) OR (archived AND"
	    " expires_at <= CAST($1 AS bigint) - CAST($3 AS bigint))", NULL },
	/* The sweep's variants go with it (ON DELETE CASCADE). */
	[PURGE_SWEEPS] = { "sweep_purge", TG_DB_RUNS, 1, "DELETE FROM sweeps WHERE state ="
	    " 'done' AND created_at <= CAST($1 AS bigint) - CAST($2 AS bigint) -"
	    " CAST($3 AS bigint) AND NOT EXISTS (SELECT 1 FROM runs WHERE"
	    " runs.sweep_id = sweeps.sweep_id)", NULL },
};

const struct tg_db_table tg_state_runs_keep_stmts = { sql, TG_NELEM(sql) };

struct op {
	struct tg_db_op d;
	size_t len;		/* an archive's bytes */
	int64_t n1, now_ms;	/* a purge's runs, and when */
};

static struct op *
op_new(struct tg_state *st, int stmt, void (*answer)(struct tg_db_q *,
    const struct tg_db_rows *), const char *id, void *arg)
{
	return tg_db_op_new(sizeof(struct op), st, &sql[stmt], answer, id, arg);
}

/* Rows: a status (its runs, archived, archived bytes) or a counter name. */
static void
answer_stats(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;
	struct tg_runs_stats st;
	uint64_t *c;
	int i, s;

	memset(&st, 0, sizeof(st));
	for (i = 0; r != NULL && i < tg_db_nrows(r); i++) {
		if ((s = tg_state_run_status_at(r, i, 0)) >= 0) {
			st.runs[s] = (uint64_t)tg_db_i64(r, i, 1);
			st.archived += (uint64_t)tg_db_i64(r, i, 2);
			st.archived_bytes += (uint64_t)tg_db_i64(r, i, 3);
		} else if ((c = tg_state_runs_stats_counter(&st, tg_db_str(r, i, 0))) != NULL) {
			*c = (uint64_t)tg_db_i64(r, i, 1);
		}
	}
	o->d.cb.stats(&q->res, r != NULL ? &st : NULL, o->d.arg);
}

struct tg_state_op *
tg_state_runs_stats(struct tg_state *st, tg_state_runs_stats_cb cb, void *arg)
{
	struct op *o = op_new(st, STATS, answer_stats, NULL, arg);

	o->d.cb.stats = cb;
	return tg_db_submit(st, &o->d.q);
}

/* ---- the archive ---- */

/* Why nothing was stored, when nothing was. */
static void
archive_refused(struct op *o, const struct tg_db_rows *r)
{
	const struct tg_state_runs_limits *l = &o->d.st->runs;
	int st = tg_state_run_status_at(r, 0, 1), vst = tg_state_run_status_at(r, 0, 2);
	struct tg_state_res *res = &o->d.q.res;

	if (st != TG_RUN_COMPLETED && vst != TG_RUN_COMPLETED) {
		res->rc = TG_STATE_CONFLICT;
		tg_err_set(&res->err, "simulation %s has not completed (%s)", o->d.id,
		    tg_runs_status_str(st < 0 ? TG_RUN_UNKNOWN : st));
	} else if (tg_state_archive_caps(o->d.id, o->len, tg_db_i64(r, 0, 4), tg_db_i64(r, 0, 3),
	    l->archive_max_run, l->archive_max_total, &res->err) != 0) {
		res->rc = TG_STATE_REFUSED;
	} else {
		res->rc = TG_STATE_ERROR;
		tg_err_set(&res->err, "results of %s were not archived", o->d.id);
	}
}

static void
answer_archive(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;

	if (r != NULL && (tg_db_nrows(r) == 0 || tg_db_i64(r, 0, 0) == 0)) {
		q->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&q->res.err, "no simulation run %s", o->d.id);
	} else if (r != NULL && tg_db_i64(r, 0, 5) == 0) {
		archive_refused(o, r);
	}
	o->d.cb.done(&q->res, o->d.arg);
}

struct tg_state_op *
tg_state_runs_archive(struct tg_state *st, const char *id, const void *data, size_t len,
    int64_t now_ms, tg_state_done_cb cb, void *arg)
{
	struct op *o = op_new(st, ARCHIVE, answer_archive, id, arg);

	(void)now_ms;
	o->d.cb.done = cb;
	o->len = len;
	if (data == NULL && len > 0)
		return tg_db_fail(&o->d.q, TG_STATE_ERROR, "no results to archive");
	if (len > INT32_MAX)
		return tg_db_fail(&o->d.q, TG_STATE_REFUSED, "results are too large to archive");
	tg_db_bytes(&o->d.q, data, len);
	tg_db_int(&o->d.q, st->runs.archive_max_run);
	tg_db_int(&o->d.q, st->runs.archive_max_total);
	return tg_db_submit(st, &o->d.q);
}

static void
answer_archived(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;
	const void *data;
	size_t len;

	if (r != NULL && tg_db_nrows(r) > 0) {
		data = tg_db_blob(r, 0, 0, &len);
		o->d.cb.blob(&q->res, data != NULL ? data : "", len, o->d.arg);
		return;
	}
	if (r != NULL) {
		q->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&q->res.err, "no archived results for simulation %s", o->d.id);
	}
	o->d.cb.blob(&q->res, NULL, 0, o->d.arg);
}

struct tg_state_op *
tg_state_runs_archived(struct tg_state *st, const char *id, tg_state_blob_cb cb, void *arg)
{
	struct op *o = op_new(st, ARCHIVED, answer_archived, id, arg);

	o->d.cb.blob = cb;
	return tg_db_submit(st, &o->d.q);
}

static void
answer_usage(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;
	int ok = r != NULL && tg_db_nrows(r) > 0;

	o->d.cb.pair(&q->res, ok ? tg_db_i64(r, 0, 0) : 0, ok ? tg_db_i64(r, 0, 1) : 0, o->d.arg);
}

struct tg_state_op *
tg_state_runs_archive_usage(struct tg_state *st, tg_state_pair_cb cb, void *arg)
{
	struct op *o = op_new(st, USAGE, answer_usage, NULL, arg);

	o->d.cb.pair = cb;
	return tg_db_submit(st, &o->d.q);
}

/* ---- expiry and purge ---- */

struct tg_state_op *
tg_state_runs_expire(struct tg_state *st, int64_t now_ms, tg_state_num_cb cb, void *arg)
{
	struct op *o = op_new(st, EXPIRE, tg_db_answer_changes, NULL, arg);

	o->d.cb.num = cb;
	tg_db_int(&o->d.q, now_ms);
	return tg_db_submit(st, &o->d.q);
}

static void
answer_purge(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;

	if (r != NULL && q->stmt == &sql[PURGE_RUNS]) {
		o->n1 = tg_db_changes(r);
		tg_db_again(q, &sql[PURGE_SWEEPS]);
		tg_db_int(q, o->now_ms);
		tg_db_int(q, o->d.st->runs.retention_ms);
		tg_db_int(q, o->d.st->runs.grace_ms);
		return;
	}
	o->d.cb.pair(&q->res, o->n1, r != NULL ? tg_db_changes(r) : 0, o->d.arg);
}

struct tg_state_op *
tg_state_runs_purge(struct tg_state *st, int64_t now_ms, tg_state_pair_cb cb, void *arg)
{
	struct op *o = op_new(st, PURGE_RUNS, answer_purge, NULL, arg);

	o->d.cb.pair = cb;
	o->now_ms = now_ms;
	tg_db_int(&o->d.q, now_ms);
	tg_db_int(&o->d.q, st->runs.grace_ms);
	tg_db_int(&o->d.q, st->runs.archive_keep_ms);
	return tg_db_submit(st, &o->d.q);
}
