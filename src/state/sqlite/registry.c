/*
 * registry.c - the durable record of simulation runs: one SQLite database
 * in WAL mode (runs, sweeps, sweep variants), schema versioned with
 * PRAGMA user_version, every statement prepared once at open. The submit
 * handler records each accepted run before answering its client; the run
 * tracker takes the runs whose check is due and records what the vendor
 * said; the extension API lists and reads them; /metrics counts them.
 * retention.c and sweep_store.c use the same handle (runs_db.h).
 *
 * Durability: synchronous=FULL by default, so a recorded submission
 * survives power loss, not only a killed process; the price is one fsync
 * per write transaction, which the submit path pays once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/clock.h"
#include "tidegate/crypto.h"
#include "tidegate/json.h"
#include "runs_db.h"
#include "sq.h"
#include "../run_rules.h"



#define RUN_COLS "simulation_id, api_key, host, case_id, case_sha256, status," \
	" vendor_status, submitted_at, expires_at, status_at, completed_at, next_check_at," \
	" checks, validation, failure, last_error, callback_url, sweep_id, variant," \
	" archived, results_size, figures"

const char *const tg_runs_sql[S_COUNT] = {
	[S_BEGIN] = "BEGIN IMMEDIATE",
	[S_COMMIT] = "COMMIT",
	[S_ROLLBACK] = "ROLLBACK",
	[S_RUN_INSERT] = "INSERT INTO runs (simulation_id, api_key, host, case_id, case_sha256,"
	    " submitted_at, expires_at, status, vendor_status, status_at, completed_at,"
	    " next_check_at, validation, callback_url, sweep_id, variant)"
	    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
	[S_RUN_GET] = "SELECT " RUN_COLS " FROM runs WHERE simulation_id = ?1",
	[S_RUN_MANY] = "SELECT " RUN_COLS " FROM runs WHERE simulation_id IN"
	    " (SELECT value FROM json_each(?1))",
	[S_RUN_BRIEF] = "SELECT status, submitted_at, host, validation, checks"
	    " FROM runs WHERE simulation_id = ?1",
	[S_RUN_UPDATE] = "UPDATE runs SET status = ?2, vendor_status = coalesce(?3, vendor_status),"
	    " status_at = ?4, completed_at = coalesce(?5, completed_at), next_check_at = ?6,"
	    " checks = checks + 1, failure = coalesce(?7, failure), last_error = NULL"
	    " WHERE simulation_id = ?1",
	[S_RUN_COUNT_CHECK] = "UPDATE runs SET checks = checks + 1 WHERE simulation_id = ?1",
	[S_RUN_CHECK_FAILED] = "UPDATE runs SET checks = checks + 1, last_error = ?2,"
	    " next_check_at = CASE WHEN status = 'IN_PROGRESS' THEN ?3 ELSE next_check_at END"
	    " WHERE simulation_id = ?1",
	[S_RUN_DUE] = "SELECT " RUN_COLS " FROM runs WHERE status = 'IN_PROGRESS'"
	    " AND next_check_at IS NOT NULL AND next_check_at <= ?1 AND expires_at > ?1"
	    " ORDER BY next_check_at, submitted_at, simulation_id LIMIT ?2",
	[S_RUN_NEXT_DUE] = "SELECT min(next_check_at) FROM runs WHERE status = 'IN_PROGRESS'"
	    " AND next_check_at IS NOT NULL AND expires_at > ?1",
	[S_RUN_LIST] = "SELECT " RUN_COLS " FROM runs WHERE (?1 IS NULL OR status = ?1)"
	    " AND (?2 IS NULL OR case_id = ?2) AND (?3 IS NULL OR sweep_id = ?3)"
	    " AND (?4 IS NULL OR api_key = ?4) AND submitted_at >= ?5 AND submitted_at < ?6"
	    " ORDER BY submitted_at DESC, simulation_id LIMIT ?7 OFFSET ?8",
	[S_RUN_UNHANDLED] = "SELECT simulation_id, status FROM runs"
	    " WHERE ended_handled = 0 AND status != 'IN_PROGRESS'"
	    " ORDER BY status_at, simulation_id LIMIT 1",
	[S_RUN_HANDLED] = "UPDATE runs SET ended_handled = 1 WHERE simulation_id = ?1",
	[S_RUN_FIGURES] = "UPDATE runs SET figures = ?2 WHERE simulation_id = ?1",
	[S_STATS_RUNS] = "SELECT status, count(*), sum(archived), sum(archived * results_size)"
	    " FROM runs GROUP BY status",
	[S_STATS_SWEEPS] = "SELECT 'sweeps ' || state, count(*) FROM sweeps GROUP BY state"
	    " UNION ALL SELECT 'variants ' || state, count(*) FROM sweep_variants"
	    " WHERE state IN ('pending', 'submitting') GROUP BY state",
	[S_ARCH_INFO] = "SELECT status, vendor_status, results_size FROM runs"
	    " WHERE simulation_id = ?1",
	[S_ARCH_TOTAL] = "SELECT coalesce(sum(results_size), 0), count(*) FROM runs"
	    " WHERE archived = 1",
	[S_ARCH_SET] = "UPDATE runs SET archived = 1, results = ?2, results_size = ?3"
	    " WHERE simulation_id = ?1",
	[S_ARCH_GET] = "SELECT archived, results FROM runs WHERE simulation_id = ?1",
	[S_EXPIRE] = "UPDATE runs SET status = 'EXPIRED', status_at = ?1, next_check_at = NULL"
	    " WHERE expires_at <= ?1 AND status != 'EXPIRED'",
	[S_PURGE_RUNS] = "DELETE FROM runs WHERE (archived = 0 AND expires_at <= ?1 - ?2)"
	    " OR (archived = 1 AND expires_at <= ?1 - ?3)",
	[S_PURGE_SWEEPS] = "DELETE FROM sweeps WHERE state = 'done'"
	    " AND created_at <= ?1 - ?2 - ?3"
	    " AND NOT EXISTS (SELECT 1 FROM runs WHERE runs.sweep_id = sweeps.sweep_id)",
	[S_SW_INSERT] = "INSERT INTO sweeps (sweep_id, api_key, base_case_id, created_at,"
	    " concurrency, callback_url, state, variants)"
	    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'running', ?7)",
	[S_SWV_INSERT] = "INSERT INTO sweep_variants (sweep_id, position, name, state,"
	    " case_body, case_sha256) VALUES (?1, ?2, ?3, 'pending', ?4, ?5)",
	[S_SW_GET] = "SELECT api_key, base_case_id, created_at, concurrency, callback_url,"
	    " state, variants, done_at, sweep_id FROM sweeps WHERE sweep_id = ?1",
	[S_SW_LIST] = "SELECT api_key, base_case_id, created_at, concurrency, callback_url,"
	    " state, variants, done_at, sweep_id FROM sweeps"
	    " WHERE (?1 IS NULL OR api_key = ?1) AND (?2 IS NULL OR state = ?2)"
	    " ORDER BY created_at DESC, sweep_id LIMIT ?3 OFFSET ?4",
	[S_SWV_LIST] = "SELECT v.name, v.state, v.case_sha256, v.simulation_id, v.error,"
	    " v.attempts, v.submitted_at, r.status, r.failure, r.figures"
	    " FROM sweep_variants v LEFT JOIN runs r ON r.simulation_id = v.simulation_id"
	    " WHERE v.sweep_id = ?1 ORDER BY v.position",
	[S_SW_INFLIGHT] = "SELECT s.concurrency, s.state, s.api_key,"
	    " (SELECT count(*) FROM sweep_variants v WHERE v.sweep_id = ?1"
	    "  AND v.state = 'submitting')"
	    " + (SELECT count(*) FROM runs r WHERE r.sweep_id = ?1 AND r.status = 'IN_PROGRESS')"
	    " FROM sweeps s WHERE s.sweep_id = ?1",
	[S_SWV_NEXT] = "SELECT position, name, case_body, case_sha256 FROM sweep_variants"
	    " WHERE sweep_id = ?1 AND state = 'pending' ORDER BY position LIMIT 1",
	[S_SWV_CLAIM] = "UPDATE sweep_variants SET state = 'submitting', attempts = attempts + 1"
	    " WHERE sweep_id = ?1 AND position = ?2",
	[S_SWV_STATE] = "SELECT state FROM sweep_variants WHERE sweep_id = ?1 AND name = ?2",
	[S_SWV_SUBMITTED] = "UPDATE sweep_variants SET state = 'submitted', case_body = NULL,"
	    " simulation_id = ?3, submitted_at = ?4, error = NULL"
	    " WHERE sweep_id = ?1 AND name = ?2",
	[S_SWV_UNCLAIM] = "UPDATE sweep_variants SET state = ?3, error = ?4,"
	    " case_body = CASE WHEN ?3 = 'rejected' THEN NULL ELSE case_body END"
	    " WHERE sweep_id = ?1 AND name = ?2",
	[S_SW_OPEN] = "SELECT s.state,"
	    " (SELECT count(*) FROM sweep_variants v WHERE v.sweep_id = ?1"
	    "  AND v.state IN ('pending', 'submitting'))"
	    " + (SELECT count(*) FROM runs r WHERE r.sweep_id = ?1 AND r.status = 'IN_PROGRESS')"
	    " FROM sweeps s WHERE s.sweep_id = ?1",
	[S_SW_DONE] = "UPDATE sweeps SET state = 'done', done_at = ?2"
	    " WHERE sweep_id = ?1 AND state = 'running'",
	[S_SW_RUNNING] = "SELECT sweep_id FROM sweeps WHERE state = 'running'"
	    " ORDER BY created_at, sweep_id",
	[S_SWV_RECOVER] = "UPDATE sweep_variants SET state = 'pending'"
	    " WHERE state = 'submitting'",
};

static const char *const status_names[TG_RUN_NSTATUS] = {
	"IN_PROGRESS", "COMPLETED", "FAILED", "EXPIRED", "UNKNOWN",
};

const char *
tg_runs_status_str(enum tg_run_status s)
{
	return (unsigned)s < TG_RUN_NSTATUS ? status_names[s] : "UNKNOWN";
}

int
tg_runs_status_parse(const char *s)
{
	int i;

	for (i = 0; s != NULL && i < TG_RUN_NSTATUS; i++)
		if (strcmp(s, status_names[i]) == 0)
			return i;
	return -1;
}

int
tg_runs_status_terminal(enum tg_run_status s)
{
	return s != TG_RUN_IN_PROGRESS;
}

int64_t
tg_runs_check_delay(int checks)
{
	if (checks < 0)
		checks = 0;
	if (checks >= 8)
		return TG_RUNS_CHECK_MAX_MS;
	return (int64_t)TG_RUNS_CHECK_MIN_MS << checks;
}

void
tg_runs_case_digest(const void *body, size_t len, char out[TG_RUNS_SHA_LEN])
{
	uint8_t md[TG_SHA256_LEN];

	tg_sha256_oneshot(body, len, md);	/* also called off the loop (validate.c) */
	tg_hex(md, sizeof(md), out);
}

/* ---- shared helpers (runs_db.h) ---- */

void
tg_runs_sql_err(struct tg_runs *r, struct tg_err *err, const char *what)
{
	tg_err_set(err, "run registry %s: %s", what, sqlite3_errmsg(r->db));
}

sqlite3_stmt *
tg_runs_stmt(struct tg_runs *r, enum runs_stmt i)
{
	sqlite3_stmt *s = r->st[i];

	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return s;
}

int
tg_runs_step_done(struct tg_runs *r, sqlite3_stmt *s, struct tg_err *err)
{
	int rc = sqlite3_step(s);

	if (rc != SQLITE_DONE && rc != SQLITE_ROW)
		tg_runs_sql_err(r, err, "write");
	sqlite3_reset(s);
	return rc == SQLITE_DONE || rc == SQLITE_ROW ? 0 : -1;
}

int
tg_runs_begin(struct tg_runs *r, struct tg_err *err)
{
	return tg_runs_step_done(r, tg_runs_stmt(r, S_BEGIN), err);
}

int
tg_runs_commit(struct tg_runs *r, struct tg_err *err)
{
	if (tg_runs_step_done(r, tg_runs_stmt(r, S_COMMIT), err) == 0)
		return 0;
	tg_runs_rollback(r);
	return -1;
}

void
tg_runs_rollback(struct tg_runs *r)
{
	if (!sqlite3_get_autocommit(r->db))
		(void)tg_runs_step_done(r, tg_runs_stmt(r, S_ROLLBACK), NULL);
}

char *
tg_runs_col_str(sqlite3_stmt *s, int col)
{
	const unsigned char *t = sqlite3_column_text(s, col);

	return t != NULL ? tg_xstrdup((const char *)t) : NULL;
}

int64_t
tg_runs_col_time(sqlite3_stmt *s, int col)
{
	return sqlite3_column_type(s, col) == SQLITE_NULL ? 0 : sqlite3_column_int64(s, col);
}

int
tg_runs_col_status(sqlite3_stmt *s, int col)
{
	return tg_runs_status_parse((const char *)sqlite3_column_text(s, col));
}

yajl_val
tg_runs_col_json(sqlite3_stmt *s, int col)
{
	const char *t = (const char *)sqlite3_column_text(s, col);

	if (t == NULL)
		return NULL;
	return tg_json_parse(t, (size_t)sqlite3_column_bytes(s, col), NULL);
}

void
tg_runs_bind_str(sqlite3_stmt *s, int i, const char *v)
{
	if (v != NULL)
		sqlite3_bind_text(s, i, v, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(s, i);
}

void
tg_runs_bind_time(sqlite3_stmt *s, int i, int64_t t)
{
	if (t != 0)
		sqlite3_bind_int64(s, i, t);
	else
		sqlite3_bind_null(s, i);
}

/* ---- open / close ---- */

/* One statement that is not kept (pragmas, schema), still prepared. */
static int
exec1(struct tg_runs *r, const char *q, struct tg_err *err)
{
	sqlite3_stmt *s;
	int rc;

	if (sqlite3_prepare_v2(r->db, q, -1, &s, NULL) != SQLITE_OK) {
		tg_runs_sql_err(r, err, "setup");
		return -1;
	}
	while ((rc = sqlite3_step(s)) == SQLITE_ROW)
		;
	sqlite3_finalize(s);
	if (rc == SQLITE_DONE)
		return 0;
	tg_runs_sql_err(r, err, "setup");
	return -1;
}

static int
user_version(struct tg_runs *r, int *v, struct tg_err *err)
{
	sqlite3_stmt *s;
	int rc = -1;

	if (sqlite3_prepare_v2(r->db, "PRAGMA user_version", -1, &s, NULL) != SQLITE_OK) {
		tg_runs_sql_err(r, err, "setup");
		return -1;
	}
	if (sqlite3_step(s) == SQLITE_ROW) {
		*v = sqlite3_column_int(s, 0);
		rc = 0;
	} else {
		tg_runs_sql_err(r, err, "setup");
	}
	sqlite3_finalize(s);
	return rc;
}

int
tg_runs_schema_latest(void)
{
	return tg_state_sq_runs_schema.nversions;
}

/* Each version's statements and its user_version in one transaction. */
static int
migrate(struct tg_runs *r, struct tg_err *err)
{
	char pragma[48];
	size_t i, latest = (size_t)tg_state_sq_runs_schema.nversions;
	int v;

	if (user_version(r, &v, err) != 0)
		return -1;
	if (v < 0 || (size_t)v > latest) {
		tg_err_set(err, "run registry: schema version %d is newer than this tidegate's (%zu)",
		    v, latest);
		return -1;
	}
	for (; (size_t)v < latest; v++) {
		if (exec1(r, "BEGIN IMMEDIATE", err) != 0)
			return -1;
		for (i = 0; tg_state_sq_runs_schema.versions[v][i] != NULL; i++)
			if (exec1(r, tg_state_sq_runs_schema.versions[v][i], err) != 0)
				goto fail;
		snprintf(pragma, sizeof(pragma), "PRAGMA user_version = %d", v + 1);
		if (exec1(r, pragma, err) != 0 || exec1(r, "COMMIT", err) != 0)
			goto fail;
	}
	return 0;
fail:
	(void)exec1(r, "ROLLBACK", NULL);
	return -1;
}

static int
db_setup(struct tg_runs *r, int sync_normal, struct tg_err *err)
{
	size_t i;

	sqlite3_busy_timeout(r->db, 5000);
	if (exec1(r, "PRAGMA journal_mode = WAL", err) != 0 ||
	    exec1(r, sync_normal ? "PRAGMA synchronous = NORMAL" :
	    "PRAGMA synchronous = FULL", err) != 0 ||
	    exec1(r, "PRAGMA foreign_keys = ON", err) != 0 || migrate(r, err) != 0)
		return -1;
	for (i = 0; i < S_COUNT; i++) {
		if (sqlite3_prepare_v3(r->db, tg_runs_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
		    &r->st[i], NULL) != SQLITE_OK) {
			tg_runs_sql_err(r, err, "prepare");
			return -1;
		}
	}
	/* A claim that never heard back: the variant is submitted again. */
	return tg_runs_step_done(r, tg_runs_stmt(r, S_SWV_RECOVER), err);
}

struct tg_runs *
tg_runs_open(const struct tg_runs_opts *opts, struct tg_err *err)
{
	struct tg_runs *r = tg_xcalloc(1, sizeof(*r));
	struct tg_state_runs_limits lim;

	if (opts == NULL || opts->path == NULL || *opts->path == '\0') {
		tg_err_set(err, "run registry: no database path");
		goto fail;
	}
	tg_state_runs_limits(opts, &lim);
	r->retention_ms = lim.retention_ms;
	r->grace_ms = lim.grace_ms;
	r->archive_keep_ms = lim.archive_keep_ms;
	r->archive_max_run = lim.archive_max_run;
	r->archive_max_total = lim.archive_max_total;
	if (sqlite3_open_v2(opts->path, &r->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
	    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		tg_err_set(err, "run registry: cannot open %s: %s", opts->path,
		    r->db ? sqlite3_errmsg(r->db) : "out of memory");
		goto fail;
	}
	if (db_setup(r, opts->sync_normal, err) != 0)
		goto fail;
	return r;
fail:
	tg_runs_close(r);
	return NULL;
}

void
tg_runs_close(struct tg_runs *r)
{
	size_t i;

	if (r == NULL)
		return;
	for (i = 0; i < S_COUNT; i++)
		sqlite3_finalize(r->st[i]);
	if (r->db != NULL)
		sqlite3_close(r->db);
	free(r);
}

/* ---- recording ---- */

int
tg_runs_insert(struct tg_runs *r, const struct tg_run_new *run, const char *sweep_id,
    const char *variant, int64_t now_ms, struct tg_err *err)
{
	struct tg_state_run_row row;
	sqlite3_stmt *s;
	int rc;

	if (tg_state_run_new_ok(run, err) != 0)
		return -1;
	tg_state_run_row(run, sweep_id, r->retention_ms, now_ms, &row);
	s = tg_runs_stmt(r, S_RUN_INSERT);
	tg_runs_bind_str(s, 1, run->simulation_id);
	tg_runs_bind_str(s, 2, run->api_key);
	tg_runs_bind_str(s, 3, run->host);
	tg_runs_bind_str(s, 4, run->case_id);
	tg_runs_bind_str(s, 5, run->case_sha256);
	sqlite3_bind_int64(s, 6, row.submitted_at);
	sqlite3_bind_int64(s, 7, row.expires_at);
	tg_runs_bind_str(s, 8, row.status);
	tg_runs_bind_str(s, 9, row.vendor_status);
	sqlite3_bind_int64(s, 10, now_ms);
	tg_runs_bind_time(s, 11, row.completed_at);
	tg_runs_bind_time(s, 12, row.next_check_at);
	tg_runs_bind_str(s, 13, run->validation);
	tg_runs_bind_str(s, 14, row.callback_url);
	tg_runs_bind_str(s, 15, sweep_id);
	tg_runs_bind_str(s, 16, variant);
	rc = sqlite3_step(s);
	sqlite3_reset(s);
	if (rc == SQLITE_DONE)
		return 0;
	if (rc == SQLITE_CONSTRAINT) {
		tg_err_set(err, "simulation %s is already recorded", run->simulation_id);
		return TG_RUNS_CONFLICT;
	}
	tg_runs_sql_err(r, err, "insert");
	return -1;
}

int
tg_runs_add(struct tg_runs *r, const struct tg_run_new *run, int64_t now_ms,
    struct tg_err *err)
{
	/* Autocommit: the insert is its own durable transaction. */
	return tg_runs_insert(r, run, NULL, NULL, now_ms, err);
}

/* ---- status checks ---- */

/* What a status change needs to know of the run. */
struct brief {
	enum tg_run_status status;
	int64_t submitted_at;
	char *host, *validation;
	int checks;
};

static int
brief_get(struct tg_runs *r, const char *id, struct brief *b, struct tg_err *err)
{
	sqlite3_stmt *s = tg_runs_stmt(r, S_RUN_BRIEF);
	int rc, st;

	memset(b, 0, sizeof(*b));
	sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		st = tg_runs_col_status(s, 0);
		b->status = st < 0 ? TG_RUN_UNKNOWN : st;
		b->submitted_at = sqlite3_column_int64(s, 1);
		b->host = tg_runs_col_str(s, 2);
		b->validation = tg_runs_col_str(s, 3);
		b->checks = sqlite3_column_int(s, 4);
		rc = 0;
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

static void
brief_cleanup(struct brief *b)
{
	free(b->host);
	free(b->validation);
}

static int
apply_status(struct tg_runs *r, const char *id, const struct brief *b,
    enum tg_run_status st, int64_t completed_at, int64_t now_ms, struct tg_err *err)
{
	sqlite3_stmt *s = tg_runs_stmt(r, S_RUN_UPDATE);
	struct tg_state_run_change c;
	int rc;

	tg_state_run_change(st, completed_at, now_ms, b->submitted_at, b->host, b->validation,
	    b->checks, &c);
	sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
	tg_runs_bind_str(s, 2, c.status);
	tg_runs_bind_str(s, 3, c.vendor_status);
	sqlite3_bind_int64(s, 4, now_ms);
	tg_runs_bind_time(s, 5, c.completed_at);
	tg_runs_bind_time(s, 6, c.next_check_at);
	tg_runs_bind_str(s, 7, c.failure);
	rc = tg_runs_step_done(r, s, err);
	free(c.failure);
	if (rc != 0)
		return -1;
	return c.terminal ? 1 : 0;
}

static int
count_check(struct tg_runs *r, const char *id, struct tg_err *err)
{
	sqlite3_stmt *s = tg_runs_stmt(r, S_RUN_COUNT_CHECK);

	sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
	return tg_runs_step_done(r, s, err);
}

/* Commit when rc says the work is done (>= 0), else roll back; keeps rc. */
static int
finish(struct tg_runs *r, int rc, struct tg_err *err)
{
	if (rc < 0) {
		tg_runs_rollback(r);
		return rc;
	}
	return tg_runs_commit(r, err) == 0 ? rc : -1;
}

int
tg_runs_set_status(struct tg_runs *r, const char *id, enum tg_run_status st,
    int64_t completed_at, int64_t now_ms, struct tg_err *err)
{
	struct brief b = { 0 };
	int rc;

	if ((unsigned)st >= TG_RUN_NSTATUS) {
		tg_err_set(err, "run status %d is not a status", (int)st);
		return -1;
	}
	if (tg_runs_begin(r, err) != 0)
		return -1;
	if ((rc = brief_get(r, id, &b, err)) != 0)
		goto done;
	/* Terminal is final: a late or contradictory answer only counts. */
	if (tg_runs_status_terminal(b.status))
		rc = count_check(r, id, err);
	else
		rc = apply_status(r, id, &b, st, completed_at, now_ms, err);
done:
	brief_cleanup(&b);
	return finish(r, rc, err);
}

int
tg_runs_check_failed(struct tg_runs *r, const char *id, const char *why,
    int64_t retry_after_ms, int64_t now_ms, struct tg_err *err)
{
	struct brief b = { 0 };
	sqlite3_stmt *s;
	int64_t delay;
	int rc;

	if (tg_runs_begin(r, err) != 0)
		return -1;
	if ((rc = brief_get(r, id, &b, err)) != 0)
		goto done;
	delay = tg_state_run_retry_delay(b.checks, retry_after_ms);
	s = tg_runs_stmt(r, S_RUN_CHECK_FAILED);
	sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
	tg_runs_bind_str(s, 2, tg_state_run_check_error(why));
	sqlite3_bind_int64(s, 3, now_ms + delay);
	rc = tg_runs_step_done(r, s, err);
done:
	brief_cleanup(&b);
	return finish(r, rc, err);
}

/* ---- reading runs ---- */

void
tg_run_cleanup(struct tg_run *run)
{
	if (run == NULL)
		return;
	free(run->simulation_id);
	free(run->api_key);
	free(run->host);
	free(run->case_id);
	free(run->validation);
	free(run->failure);
	free(run->last_error);
	free(run->callback_url);
	free(run->sweep_id);
	free(run->variant);
	yajl_tree_free(run->figures);
	memset(run, 0, sizeof(*run));
}

void
tg_runs_free(struct tg_run *runs, size_t n)
{
	size_t i;

	for (i = 0; runs != NULL && i < n; i++)
		tg_run_cleanup(&runs[i]);
	free(runs);
}

/* One row of RUN_COLS. */
static void
run_from_row(sqlite3_stmt *s, struct tg_run *run)
{
	const unsigned char *sha = sqlite3_column_text(s, 4);
	int st = tg_runs_col_status(s, 5);

	memset(run, 0, sizeof(*run));
	run->simulation_id = tg_runs_col_str(s, 0);
	run->api_key = tg_runs_col_str(s, 1);
	run->host = tg_runs_col_str(s, 2);
	run->case_id = tg_runs_col_str(s, 3);
	snprintf(run->case_sha256, sizeof(run->case_sha256), "%s", sha ? (const char *)sha : "");
	run->status = st < 0 ? TG_RUN_UNKNOWN : st;
	run->vendor_status = tg_runs_col_status(s, 6);
	run->submitted_at = tg_runs_col_time(s, 7);
	run->expires_at = tg_runs_col_time(s, 8);
	run->status_at = tg_runs_col_time(s, 9);
	run->completed_at = tg_runs_col_time(s, 10);
	run->next_check_at = tg_runs_col_time(s, 11);
	run->checks = sqlite3_column_int(s, 12);
	run->validation = tg_runs_col_str(s, 13);
	run->failure = tg_runs_col_str(s, 14);
	run->last_error = tg_runs_col_str(s, 15);
	run->callback_url = tg_runs_col_str(s, 16);
	run->sweep_id = tg_runs_col_str(s, 17);
	run->variant = tg_runs_col_str(s, 18);
	run->archived = sqlite3_column_int(s, 19) != 0;
	run->results_size = sqlite3_column_int64(s, 20);
	run->figures = tg_runs_col_json(s, 21);
}

int
tg_runs_read_rows(struct tg_runs *r, sqlite3_stmt *s, size_t size,
    void (*read)(sqlite3_stmt *, void *), void **out, size_t *n, struct tg_err *err)
{
	size_t cap = 0;
	int rc;

	*out = NULL;
	*n = 0;
	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		if (*n == cap) {
			cap = cap ? 2 * cap : 16;
			*out = tg_xrealloc(*out, cap * size);
		}
		read(s, (char *)*out + (*n)++ * size);
	}
	sqlite3_reset(s);
	if (rc == SQLITE_DONE)
		return 0;
	tg_runs_sql_err(r, err, "read");
	return -1;
}

static void
read_run(sqlite3_stmt *s, void *run)
{
	run_from_row(s, run);
}

/* Every row s yields into *runs; resets s. */
static int
read_runs(struct tg_runs *r, sqlite3_stmt *s, struct tg_run **runs, size_t *n,
    struct tg_err *err)
{
	if (tg_runs_read_rows(r, s, sizeof(**runs), read_run, (void **)runs, n, err) == 0)
		return 0;
	tg_runs_free(*runs, *n);
	*runs = NULL;
	*n = 0;
	return -1;
}

int
tg_runs_get_row(struct tg_runs *r, enum runs_stmt st, const char *id, const char *what,
    void (*read)(sqlite3_stmt *, void *), void *out, struct tg_err *err)
{
	sqlite3_stmt *s = tg_runs_stmt(r, st);
	int rc;

	sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		read(s, out);
		rc = 0;
	} else if (rc == SQLITE_DONE) {
		tg_err_set(err, "no %s %s", what, id);
		rc = TG_RUNS_NOT_FOUND;
	} else {
		tg_runs_sql_err(r, err, "read");
		rc = -1;
	}
	sqlite3_reset(s);
	return rc;
}

int
tg_runs_get(struct tg_runs *r, const char *id, struct tg_run *run, struct tg_err *err)
{
	memset(run, 0, sizeof(*run));
	return tg_runs_get_row(r, S_RUN_GET, id, "simulation run", read_run, run, err);
}

int
tg_runs_get_many(struct tg_runs *r, const char *ids_json, struct tg_run **runs, size_t *n,
    struct tg_err *err)
{
	sqlite3_stmt *s = tg_runs_stmt(r, S_RUN_MANY);

	sqlite3_bind_text(s, 1, ids_json, -1, SQLITE_TRANSIENT);
	return read_runs(r, s, runs, n, err);
}

int
tg_runs_due(struct tg_runs *r, int64_t now_ms, size_t max, struct tg_run **runs,
    size_t *n, struct tg_err *err)
{
	sqlite3_stmt *s = tg_runs_stmt(r, S_RUN_DUE);

	sqlite3_bind_int64(s, 1, now_ms);
	sqlite3_bind_int64(s, 2, max > 0 && max < INT64_MAX ? (int64_t)max : INT64_MAX);
	return read_runs(r, s, runs, n, err);
}

int64_t
tg_runs_next_due(struct tg_runs *r, int64_t now_ms)
{
	sqlite3_stmt *s = tg_runs_stmt(r, S_RUN_NEXT_DUE);
	int64_t due = INT64_MAX;

	sqlite3_bind_int64(s, 1, now_ms);
	if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL)
		due = sqlite3_column_int64(s, 0);
	sqlite3_reset(s);
	return due;
}

int
tg_runs_next_unhandled(struct tg_runs *r, char **id, enum tg_run_status *st,
    struct tg_err *err)
{
	sqlite3_stmt *s = tg_runs_stmt(r, S_RUN_UNHANDLED);
	int rc;

	*id = NULL;
	if ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		*id = tg_runs_col_str(s, 0);
		rc = tg_runs_col_status(s, 1);
		*st = rc >= 0 ? (enum tg_run_status)rc : TG_RUN_UNKNOWN;
		sqlite3_reset(s);
		return *id != NULL ? 1 : 0;
	}
	sqlite3_reset(s);
	if (rc == SQLITE_DONE)
		return 0;
	tg_runs_sql_err(r, err, "unhandled runs");
	return -1;
}

int
tg_runs_set_handled(struct tg_runs *r, const char *id, struct tg_err *err)
{
	sqlite3_stmt *s = tg_runs_stmt(r, S_RUN_HANDLED);

	sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
	return tg_runs_step_done(r, s, err);
}

int
tg_runs_list(struct tg_runs *r, const struct tg_runs_query *q, struct tg_run **runs,
    size_t *n, int *more, struct tg_err *err)
{
	size_t limit = tg_state_runs_page(q->limit);
	sqlite3_stmt *s;

	*runs = NULL;
	*n = 0;
	if (tg_state_runs_status_ok(q->status, err) != 0)
		return -1;
	s = tg_runs_stmt(r, S_RUN_LIST);
	tg_runs_bind_str(s, 1, q->status);
	tg_runs_bind_str(s, 2, q->case_id);
	tg_runs_bind_str(s, 3, q->sweep_id);
	tg_runs_bind_str(s, 4, q->api_key);
	sqlite3_bind_int64(s, 5, q->from_ms);
	sqlite3_bind_int64(s, 6, q->to_ms > 0 ? q->to_ms : INT64_MAX);
	/* One row past the page tells whether there are more. */
	sqlite3_bind_int64(s, 7, (int64_t)limit + 1);
	sqlite3_bind_int64(s, 8, q->offset < INT64_MAX ? (int64_t)q->offset : INT64_MAX);
	if (read_runs(r, s, runs, n, err) != 0)
		return -1;
	if (more != NULL)
		*more = *n > limit;
	if (*n > limit) {
		tg_run_cleanup(&(*runs)[limit]);
		*n = limit;
	}
	return 0;
}

/* ---- key figures ---- */

int
tg_runs_set_figures(struct tg_runs *r, const char *id, yajl_val results,
    struct tg_err *err)
{
	char *fig = tg_state_run_figures(id, results, err);
	sqlite3_stmt *s;
	int rc;

	if (fig == NULL)
		return -1;
	s = tg_runs_stmt(r, S_RUN_FIGURES);
	sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(s, 2, fig, -1, SQLITE_TRANSIENT);
	rc = tg_runs_step_done(r, s, err);
	free(fig);
	if (rc == 0 && sqlite3_changes(r->db) == 0) {
		tg_err_set(err, "no simulation run %s", id);
		rc = TG_RUNS_NOT_FOUND;
	}
	return rc;
}

/* ---- counts ---- */

/* Rows by status and the archive, from one pass over runs. */
static int
stats_runs(struct tg_runs *r, struct tg_runs_stats *st, struct tg_err *err)
{
	sqlite3_stmt *s = tg_runs_stmt(r, S_STATS_RUNS);
	int rc, i;

	while ((rc = sqlite3_step(s)) == SQLITE_ROW) {
		if ((i = tg_runs_col_status(s, 0)) >= 0)
			st->runs[i] = (uint64_t)sqlite3_column_int64(s, 1);
		st->archived += (uint64_t)sqlite3_column_int64(s, 2);
		st->archived_bytes += (uint64_t)sqlite3_column_int64(s, 3);
	}
	sqlite3_reset(s);
	if (rc == SQLITE_DONE)
		return 0;
	tg_runs_sql_err(r, err, "read");
	return -1;
}

static int
stats_sweeps(struct tg_runs *r, struct tg_runs_stats *st, struct tg_err *err)
{
	sqlite3_stmt *s = tg_runs_stmt(r, S_STATS_SWEEPS);
	uint64_t *c;
	int rc;

	while ((rc = sqlite3_step(s)) == SQLITE_ROW)
		if ((c = tg_state_runs_stats_counter(st, (const char *)sqlite3_column_text(s, 0))) != NULL)
			*c = (uint64_t)sqlite3_column_int64(s, 1);
	sqlite3_reset(s);
	if (rc == SQLITE_DONE)
		return 0;
	tg_runs_sql_err(r, err, "read");
	return -1;
}

int
tg_runs_stats(struct tg_runs *r, struct tg_runs_stats *st, struct tg_err *err)
{
	memset(st, 0, sizeof(*st));
	if (stats_runs(r, st, err) != 0 || stats_sweeps(r, st, err) != 0)
		return -1;
	return 0;
}
