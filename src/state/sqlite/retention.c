/*
 * retention.c - what happens to runs as the vendor's 30-day retention runs
 * out: the 410 body for a run past expiry, the local archive of completed
 * runs' results (a BLOB per run in the registry, capped per run and in
 * total), marking runs EXPIRED, and purging rows and finished sweeps a
 * grace period later. Called by the gateway's status and results handlers
 * (410, archive reads), by the run tracker when a run completes (archive)
 * and by the retention sweeper timer (expire, purge).
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/clock.h"
#include "tidegate/json.h"
#include "runs_db.h"
#include "../run_rules.h"

int
tg_runs_expired(const struct tg_run *run, int64_t now_ms)
{
	return run->expires_at != 0 && run->expires_at <= now_ms;
}

/* ---- archive ---- */

/* The run's completion and its current archive size; 0 or a code. */
static int
archive_info(struct tg_runs *r, const char *id, int64_t *size, struct tg_err *err)
{
	sqlite3_stmt *s = tg_runs_stmt(r, S_ARCH_INFO);
	int rc, st, vst;

	sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		st = tg_runs_col_status(s, 0);
		vst = tg_runs_col_status(s, 1);
		*size = sqlite3_column_int64(s, 2);
		rc = 0;
		/* Expired while its results were fetched: still worth keeping. */
		if (st != TG_RUN_COMPLETED && vst != TG_RUN_COMPLETED) {
			tg_err_set(err, "simulation %s has not completed (%s)", id,
			    tg_runs_status_str(st < 0 ? TG_RUN_UNKNOWN : st));
			rc = TG_RUNS_CONFLICT;
		}
	} else if (rc == SQLITE_DONE) {
		tg_err_set(err, "no simulation run %s", id);
		rc = TG_RUNS_NOT_FOUND;
	} else {
		tg_runs_sql_err(r, err, "read");
		rc = -1;
	}
	sqlite3_reset(s);
	return rc;
}

int
tg_runs_archive_usage(struct tg_runs *r, int64_t *bytes, int64_t *runs, struct tg_err *err)
{
	sqlite3_stmt *s = tg_runs_stmt(r, S_ARCH_TOTAL);
	int rc = sqlite3_step(s);

	if (rc == SQLITE_ROW) {
		if (bytes != NULL)
			*bytes = sqlite3_column_int64(s, 0);
		if (runs != NULL)
			*runs = sqlite3_column_int64(s, 1);
	} else {
		tg_runs_sql_err(r, err, "read");
	}
	sqlite3_reset(s);
	return rc == SQLITE_ROW ? 0 : -1;
}

static int
within_caps(struct tg_runs *r, const char *id, size_t len, int64_t old, struct tg_err *err)
{
	int64_t used;

	if ((uint64_t)len <= (uint64_t)r->archive_max_run &&
	    tg_runs_archive_usage(r, &used, NULL, err) != 0)
		return -1;
	if ((uint64_t)len > (uint64_t)r->archive_max_run)
		used = 0;
	if (tg_state_archive_caps(id, len, old, used, r->archive_max_run, r->archive_max_total,
	    err) != 0)
		return TG_RUNS_REFUSED;
	return 0;
}

int
tg_runs_archive(struct tg_runs *r, const char *id, const void *results, size_t len,
    int64_t now_ms, struct tg_err *err)
{
	sqlite3_stmt *s;
	int64_t old = 0;
	int rc;

	if (results == NULL && len > 0) {
		tg_err_set(err, "no results to archive");
		return -1;
	}
	if (tg_runs_begin(r, err) != 0)
		return -1;
	if ((rc = archive_info(r, id, &old, err)) != 0 ||
	    (rc = within_caps(r, id, len, old, err)) != 0)
		goto done;
	s = tg_runs_stmt(r, S_ARCH_SET);
	sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_blob64(s, 2, len > 0 ? results : "", len, SQLITE_STATIC);
	sqlite3_bind_int64(s, 3, (int64_t)len);
	rc = tg_runs_step_done(r, s, err);
done:
	if (rc != 0) {
		tg_runs_rollback(r);
		return rc;
	}
	return tg_runs_commit(r, err);
}

int
tg_runs_archived(struct tg_runs *r, const char *id, void **data, size_t *len,
    struct tg_err *err)
{
	sqlite3_stmt *s = tg_runs_stmt(r, S_ARCH_GET);
	const void *blob;
	int rc;

	*data = NULL;
	*len = 0;
	sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW && sqlite3_column_int(s, 0) != 0 &&
	    sqlite3_column_type(s, 1) != SQLITE_NULL) {
		blob = sqlite3_column_blob(s, 1);
		*len = (size_t)sqlite3_column_bytes(s, 1);
		*data = tg_xmalloc(*len + 1);
		if (*len > 0)
			memcpy(*data, blob, *len);
		((char *)*data)[*len] = '\0';
		rc = 0;
	} else if (rc == SQLITE_ROW || rc == SQLITE_DONE) {
		tg_err_set(err, "no archived results for simulation %s", id);
		rc = TG_RUNS_NOT_FOUND;
	} else {
		tg_runs_sql_err(r, err, "read");
		rc = -1;
	}
	sqlite3_reset(s);
	return rc;
}

/* ---- expiry and purge ---- */

int
tg_runs_expire(struct tg_runs *r, int64_t now_ms, size_t *n, struct tg_err *err)
{
	sqlite3_stmt *s = tg_runs_stmt(r, S_EXPIRE);

	sqlite3_bind_int64(s, 1, now_ms);
	if (tg_runs_step_done(r, s, err) != 0)
		return -1;
	if (n != NULL)
		*n = (size_t)sqlite3_changes(r->db);
	return 0;
}

int
tg_runs_purge(struct tg_runs *r, int64_t now_ms, size_t *nruns, size_t *nsweeps,
    struct tg_err *err)
{
	sqlite3_stmt *s;
	size_t runs = 0, sweeps = 0;

	if (tg_runs_begin(r, err) != 0)
		return -1;
	s = tg_runs_stmt(r, S_PURGE_RUNS);
	sqlite3_bind_int64(s, 1, now_ms);
	sqlite3_bind_int64(s, 2, r->grace_ms);
	sqlite3_bind_int64(s, 3, r->archive_keep_ms);
	if (tg_runs_step_done(r, s, err) != 0)
		goto fail;
	runs = (size_t)sqlite3_changes(r->db);
	/* The sweep's variants go with it (ON DELETE CASCADE). */
	s = tg_runs_stmt(r, S_PURGE_SWEEPS);
	sqlite3_bind_int64(s, 1, now_ms);
	sqlite3_bind_int64(s, 2, r->retention_ms);
	sqlite3_bind_int64(s, 3, r->grace_ms);
	if (tg_runs_step_done(r, s, err) != 0)
		goto fail;
	sweeps = (size_t)sqlite3_changes(r->db);
	if (tg_runs_commit(r, err) != 0)
		return -1;
	if (nruns != NULL)
		*nruns = runs;
	if (nsweeps != NULL)
		*nsweeps = sweeps;
	return 0;
fail:
	tg_runs_rollback(r);
	return -1;
}
