/*
 * outbox.c - the durable webhook outbox: one SQLite database in WAL mode
 * holding the jobs and the leases of attempts in flight, every statement
 * prepared once at open. Jobs are added (committed before the caller
 * answers its client), leased for an attempt, and completed with the
 * attempt's outcome, which applies the retry schedule. Called by the
 * gateway (add), the worker (lease, renew, complete) and outbox_admin.c.
 *
 * Durability: synchronous=FULL by default, so a commit is on disk (WAL
 * fsynced) when the call returns and survives power loss, not only a
 * killed process. A lease is a row with an expiry; a job whose lease has
 * expired is leasable again, which is what delivers the attempts of a
 * crashed process at least once.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tidegate/ids.h"
#include "tidegate/log.h"
#include "tidegate/outbox.h"
#include "outbox_db.h"

static const char *const schema[] = {
	"CREATE TABLE IF NOT EXISTS jobs ("
	" id TEXT PRIMARY KEY,"
	" url TEXT NOT NULL, secret_ref TEXT NOT NULL, api_key TEXT, kind TEXT NOT NULL,"
	" correlation_id TEXT, service TEXT, content_type TEXT NOT NULL,"
	" state TEXT NOT NULL CHECK (state IN"
	"  ('waiting', 'ready', 'delivered', 'gone', 'dead')),"
	" payload_size INTEGER, attempts INTEGER NOT NULL DEFAULT 0, next_at INTEGER,"
	" created_at INTEGER NOT NULL, ready_at INTEGER, first_attempt_at INTEGER,"
	" last_attempt_at INTEGER, last_status INTEGER, last_error TEXT, done_at INTEGER)",
	"CREATE INDEX IF NOT EXISTS jobs_due ON jobs (state, next_at)",
	"CREATE INDEX IF NOT EXISTS jobs_created ON jobs (created_at)",
	"CREATE TABLE IF NOT EXISTS leases ("
	" job_id TEXT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,"
	" token TEXT NOT NULL, attempt INTEGER NOT NULL, expires_at INTEGER NOT NULL)",
	/* keys made once per store: the relay key (sq_outbox_key.c) */
	"CREATE TABLE IF NOT EXISTS state_keys (name TEXT PRIMARY KEY, key BLOB NOT NULL)",
};

#define JOB_COLS "j.id, j.state, j.url, j.kind, j.correlation_id, j.service, j.api_key," \
	" j.secret_ref, j.last_error, j.attempts, j.last_status, j.payload_size, j.created_at," \
	" j.ready_at, j.next_at, j.first_attempt_at, j.last_attempt_at, j.done_at," \
	" (l.expires_at IS NOT NULL AND l.expires_at > ?9)"

static const char *const sql[S_COUNT] = {
	[S_BEGIN] = "BEGIN IMMEDIATE",
	[S_COMMIT] = "COMMIT",
	[S_ROLLBACK] = "ROLLBACK",
	[S_INSERT] = "INSERT INTO jobs (id, url, secret_ref, api_key, kind, correlation_id,"
	    " service, content_type, state, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?,"
	    " 'waiting', ?)",
	[S_STATE] = "SELECT state FROM jobs WHERE id = ?",
	[S_SET_READY] = "UPDATE jobs SET state = 'ready', payload_size = ?2, ready_at = ?3,"
	    " last_error = NULL,"
	    " next_at = ?4 WHERE id = ?1 AND state = 'waiting'",
	[S_PICK] = "SELECT j.id FROM jobs j LEFT JOIN leases l ON l.job_id = j.id"
	    " WHERE j.state = 'ready' AND j.next_at <= ?1"
	    " AND (l.job_id IS NULL OR l.expires_at <= ?1)"
	    " AND (?2 IS NULL OR instr(?2, char(10) || tg_url_host(j.url) || char(10)) = 0)"
	    " ORDER BY j.next_at, j.rowid LIMIT 1",
	[S_JOB_FOR_LEASE] = "SELECT url, secret_ref, content_type, kind, correlation_id,"
	    " service, api_key, payload_size, attempts, ready_at, first_attempt_at"
	    " FROM jobs WHERE id = ?",
	[S_COUNT_ATTEMPT] = "UPDATE jobs SET attempts = attempts + 1, last_attempt_at = ?2,"
	    " first_attempt_at = coalesce(first_attempt_at, ?2) WHERE id = ?1",
	[S_LEASE_PUT] = "INSERT OR REPLACE INTO leases (job_id, token, attempt, expires_at)"
	    " VALUES (?, ?, ?, ?)",
	[S_LEASE_TOKEN] = "SELECT token FROM leases WHERE job_id = ?",
	[S_LEASE_RENEW] = "UPDATE leases SET expires_at = ?3 WHERE job_id = ?1 AND token = ?2",
	[S_LEASE_DEL] = "DELETE FROM leases WHERE job_id = ?1 AND token = ?2",
	[S_FINISH] = "UPDATE jobs SET state = ?2, next_at = ?3, last_status = ?4,"
	    " last_error = ?5, done_at = ?6 WHERE id = ?1",
	[S_NEXT_DUE] = "SELECT min(max(j.next_at, coalesce(l.expires_at, 0))) FROM jobs j"
	    " LEFT JOIN leases l ON l.job_id = j.id WHERE j.state = 'ready'",
	[S_ABANDON] = "UPDATE jobs SET state = 'dead', last_error = ?2, done_at = ?3"
	    " WHERE id = ?1 AND state = 'waiting'",
	[S_GET] = "SELECT " JOB_COLS " FROM jobs j LEFT JOIN leases l ON l.job_id = j.id"
	    " WHERE j.id = ?1",
	[S_LIST] = "SELECT " JOB_COLS " FROM jobs j LEFT JOIN leases l ON l.job_id = j.id"
	    " WHERE (?1 IS NULL OR j.state = ?1) AND j.created_at >= ?2"
	    " AND (?3 IS NULL OR j.correlation_id = ?3)"
	    " ORDER BY j.created_at DESC, j.id LIMIT ?4 OFFSET ?5",
	[S_REDELIVER] = "UPDATE jobs SET state = 'ready', attempts = 0, next_at = ?2,"
	    " done_at = NULL WHERE id = ?1",
	[S_REDELIVER_SINCE] = "UPDATE jobs SET state = 'ready', attempts = 0, next_at = ?2,"
	    " done_at = NULL WHERE ((state = 'dead' AND payload_size IS NOT NULL"
	    " AND done_at >= ?1) OR (state = 'ready' AND attempts > 0"
	    " AND last_attempt_at >= ?1))"
	    " AND id NOT IN (SELECT job_id FROM leases WHERE expires_at > ?2)",
	[S_DEPTH] = "SELECT state, count(*) FROM jobs GROUP BY state",
	[S_LEASED] = "SELECT count(*) FROM leases WHERE expires_at > ?",
	[S_PURGE_SEL] = "SELECT id FROM jobs WHERE state IN ('delivered', 'gone', 'dead')"
	    " AND done_at < ?",
	[S_DELETE] = "DELETE FROM jobs WHERE id = ?",
	[S_FILE_JOB] = "SELECT state FROM jobs WHERE id = ?",
	[S_SET_CID] = "UPDATE jobs SET correlation_id = ?2 WHERE id = ?1",
	[S_HELD] = "SELECT coalesce(api_key, ''), sum(payload_size) FROM jobs"
	    " WHERE state IN ('ready', 'dead') AND payload_size IS NOT NULL GROUP BY 1",
	[S_JOB_KEY] = "SELECT api_key FROM jobs WHERE id = ?",
	[S_NOTE] = "UPDATE jobs SET last_error = ?2 WHERE id = ?1 AND state = 'waiting'",
};

static const char *const state_names[TG_OUTBOX_NSTATES] = {
	"waiting", "ready", "delivered", "gone", "dead",
};

const char *
tg_outbox_state_str(enum tg_outbox_state s)
{
	return (unsigned)s < TG_OUTBOX_NSTATES ? state_names[s] : "unknown";
}

int
tg_outbox_state_parse(const char *s)
{
	int i;

	for (i = 0; s != NULL && i < TG_OUTBOX_NSTATES; i++)
		if (strcmp(s, state_names[i]) == 0)
			return i;
	return -1;
}

void
tg_state_ob_sql_err(struct tg_outbox *ob, struct tg_err *err, const char *what)
{
	tg_err_set(err, "outbox %s: %s", what, sqlite3_errmsg(ob->db));
}

sqlite3_stmt *
tg_state_ob_stmt(struct tg_outbox *ob, enum wh_stmt i)
{
	sqlite3_stmt *s = ob->st[i];

	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return s;
}

int
tg_state_ob_step_done(struct tg_outbox *ob, sqlite3_stmt *s, struct tg_err *err)
{
	int rc = sqlite3_step(s);

	sqlite3_reset(s);
	if (rc == SQLITE_DONE || rc == SQLITE_ROW)
		return 0;
	tg_state_ob_sql_err(ob, err, "write");
	return -1;
}

int
tg_state_ob_begin(struct tg_outbox *ob, struct tg_err *err)
{
	return tg_state_ob_step_done(ob, tg_state_ob_stmt(ob, S_BEGIN), err);
}

int
tg_state_ob_commit(struct tg_outbox *ob, struct tg_err *err)
{
	if (tg_state_ob_step_done(ob, tg_state_ob_stmt(ob, S_COMMIT), err) == 0)
		return 0;
	tg_state_ob_rollback(ob);
	return -1;
}

void
tg_state_ob_rollback(struct tg_outbox *ob)
{
	if (!sqlite3_get_autocommit(ob->db))
		(void)tg_state_ob_step_done(ob, tg_state_ob_stmt(ob, S_ROLLBACK), NULL);
}

char *
tg_state_ob_col_str(sqlite3_stmt *s, int col)
{
	const unsigned char *t = sqlite3_column_text(s, col);

	return t != NULL ? tg_xstrdup((const char *)t) : NULL;
}

int
tg_state_ob_job_state(struct tg_outbox *ob, const char *id, struct tg_err *err)
{
	sqlite3_stmt *s = tg_state_ob_stmt(ob, S_STATE);
	int rc;

	sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW)
		rc = tg_outbox_state_parse((const char *)sqlite3_column_text(s, 0));
	else if (rc == SQLITE_DONE) {
		tg_err_set(err, "no webhook job %s", id);
		rc = TG_OUTBOX_NOT_FOUND;
	} else {
		tg_state_ob_sql_err(ob, err, "read");
		rc = -1;
	}
	sqlite3_reset(s);
	return rc;
}

/* ---- open / close ---- */

/* One statement that is not kept (pragmas, schema), still prepared. */
static int
exec1(struct tg_outbox *ob, const char *q, struct tg_err *err)
{
	sqlite3_stmt *s;
	int rc;

	if (sqlite3_prepare_v2(ob->db, q, -1, &s, NULL) != SQLITE_OK) {
		tg_state_ob_sql_err(ob, err, "setup");
		return -1;
	}
	while ((rc = sqlite3_step(s)) == SQLITE_ROW)
		;
	sqlite3_finalize(s);
	if (rc == SQLITE_DONE)
		return 0;
	tg_state_ob_sql_err(ob, err, "setup");
	return -1;
}

/* tg_url_host(url): the host the lease's skip list names (outbox_rules.c). */
static void
sql_url_host(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	char *h = tg_state_url_host((const char *)sqlite3_value_text(argv[0]));

	sqlite3_result_text(ctx, h, -1, free);
}

/* WAL lets readers (an operator's sqlite3 shell) run beside the writer and
 * makes each commit one append + fsync. */
static int
db_setup(struct tg_outbox *ob, int sync_normal, struct tg_err *err)
{
	size_t i;

	sqlite3_busy_timeout(ob->db, 5000);
	if (sqlite3_create_function(ob->db, "tg_url_host", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC,
	    NULL, sql_url_host, NULL, NULL) != SQLITE_OK) {
		tg_state_ob_sql_err(ob, err, "setup");
		return -1;
	}
	if (exec1(ob, "PRAGMA journal_mode = WAL", err) != 0 ||
	    exec1(ob, sync_normal ? "PRAGMA synchronous = NORMAL" :
	    "PRAGMA synchronous = FULL", err) != 0 ||
	    exec1(ob, "PRAGMA foreign_keys = ON", err) != 0)
		return -1;
	for (i = 0; i < TG_NELEM(schema); i++)
		if (exec1(ob, schema[i], err) != 0)
			return -1;
	if (exec1(ob, "PRAGMA user_version = 1", err) != 0)
		return -1;
	for (i = 0; i < S_COUNT; i++) {
		if (sqlite3_prepare_v3(ob->db, sql[i], -1, SQLITE_PREPARE_PERSISTENT, &ob->st[i],
		    NULL) != SQLITE_OK) {
			tg_state_ob_sql_err(ob, err, "prepare");
			return -1;
		}
	}
	return 0;
}

static void
opts_copy(struct tg_outbox *ob, const struct tg_outbox_opts *o)
{
	tg_state_rules_init(&ob->rules, o);
	ob->path = tg_xstrdup(o->path);
	ob->dir = o->payload_dir != NULL ? tg_xstrdup(o->payload_dir) :
	    tg_xasprintf("%s.payloads", o->path);
}

struct tg_outbox *
tg_outbox_open(const struct tg_outbox_opts *opts, struct tg_err *err)
{
	struct tg_outbox *ob = tg_xcalloc(1, sizeof(*ob));

	if (opts == NULL || opts->path == NULL || *opts->path == '\0') {
		tg_err_set(err, "outbox: no database path");
		goto fail;
	}
	opts_copy(ob, opts);
	TAILQ_INIT(&ob->writers);
	if (mkdir(ob->dir, 0700) != 0 && errno != EEXIST) {
		tg_err_set(err, "outbox: cannot create %s: %s", ob->dir, strerror(errno));
		goto fail;
	}
	if (sqlite3_open_v2(ob->path, &ob->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
	    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		tg_err_set(err, "outbox: cannot open %s: %s", ob->path,
		    ob->db ? sqlite3_errmsg(ob->db) : "out of memory");
		goto fail;
	}
	if (db_setup(ob, opts->sync_normal, err) != 0 || tg_state_ob_payload_sweep(ob, err) != 0)
		goto fail;
	return ob;
fail:
	tg_outbox_close(ob);
	return NULL;
}

void
tg_outbox_close(struct tg_outbox *ob)
{
	size_t i;

	if (ob == NULL)
		return;
	for (i = 0; i < S_COUNT; i++)
		sqlite3_finalize(ob->st[i]);
	if (ob->db != NULL)
		sqlite3_close(ob->db);
	tg_state_ob_held_free(ob);
	tg_state_rules_free(&ob->rules);
	free(ob->path);
	free(ob->dir);
	free(ob);
}

/* ---- jobs ---- */

static void
bind_opt(sqlite3_stmt *s, int i, const char *v)
{
	if (v != NULL)
		sqlite3_bind_text(s, i, v, -1, SQLITE_TRANSIENT);
	else
		sqlite3_bind_null(s, i);
}

int
tg_outbox_add(struct tg_outbox *ob, const struct tg_outbox_new *job, int64_t now_ms,
    char id[TG_WEBHOOK_ID_LEN], struct tg_err *err)
{
	sqlite3_stmt *s;
	char hex[33];

	if (job->url == NULL || job->secret_ref == NULL || job->kind == NULL) {
		tg_err_set(err, "webhook job needs url, secret_ref and kind");
		return -1;
	}
	tg_id_hex(hex, 16);
	snprintf(id, TG_WEBHOOK_ID_LEN, "msg_%s", hex);
	s = tg_state_ob_stmt(ob, S_INSERT);
	sqlite3_bind_text(s, 1, id, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(s, 2, job->url, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(s, 3, job->secret_ref, -1, SQLITE_TRANSIENT);
	bind_opt(s, 4, job->api_key);
	sqlite3_bind_text(s, 5, job->kind, -1, SQLITE_TRANSIENT);
	bind_opt(s, 6, job->correlation_id);
	bind_opt(s, 7, job->service);
	sqlite3_bind_text(s, 8, job->content_type ? job->content_type : "application/json", -1,
	    SQLITE_TRANSIENT);
	sqlite3_bind_int64(s, 9, now_ms);
	/* Autocommit: the insert is its own durable transaction. */
	return tg_state_ob_step_done(ob, s, err);
}

int
tg_outbox_set_correlation_id(struct tg_outbox *ob, const char *id, const char *cid,
    struct tg_err *err)
{
	sqlite3_stmt *s = tg_state_ob_stmt(ob, S_SET_CID);

	sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
	bind_opt(s, 2, cid);
	if (tg_state_ob_step_done(ob, s, err) != 0)
		return -1;
	if (sqlite3_changes(ob->db) != 1) {
		tg_err_set(err, "no webhook job %s", id);
		return TG_OUTBOX_NOT_FOUND;
	}
	return 0;
}

int
tg_outbox_abandon(struct tg_outbox *ob, const char *id, const char *reason, int64_t now_ms,
    struct tg_err *err)
{
	sqlite3_stmt *s;
	int rc = tg_state_ob_job_state(ob, id, err);

	if (rc < 0)
		return rc;
	if (rc != TG_OUTBOX_WAITING) {
		tg_err_set(err, "webhook job %s is %s, not waiting", id, tg_outbox_state_str(rc));
		return TG_OUTBOX_CONFLICT;
	}
	s = tg_state_ob_stmt(ob, S_ABANDON);
	sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
	bind_opt(s, 2, reason != NULL ? reason : "abandoned");
	sqlite3_bind_int64(s, 3, now_ms);
	if (tg_state_ob_step_done(ob, s, err) != 0)
		return -1;
	ob->ctr.dead++;
	return 0;
}

int
tg_outbox_note(struct tg_outbox *ob, const char *id, const char *why, struct tg_err *err)
{
	sqlite3_stmt *s = tg_state_ob_stmt(ob, S_NOTE);

	sqlite3_bind_text(s, 1, id, -1, SQLITE_STATIC);
	bind_opt(s, 2, why);
	return tg_state_ob_step_done(ob, s, err);
}

/* ---- the schedule ---- */

int64_t
tg_outbox_delay(const struct tg_outbox *ob, int failed, int64_t retry_after_ms)
{
	return tg_state_rules_delay(&ob->rules, failed, retry_after_ms);
}

int64_t
tg_outbox_next_due(struct tg_outbox *ob)
{
	sqlite3_stmt *s = tg_state_ob_stmt(ob, S_NEXT_DUE);
	int64_t due = INT64_MAX;

	if (sqlite3_step(s) == SQLITE_ROW && sqlite3_column_type(s, 0) != SQLITE_NULL)
		due = sqlite3_column_int64(s, 0);
	sqlite3_reset(s);
	return due;
}

int
tg_outbox_schedule_parse(const struct tg_strlist *list, int64_t **ms, size_t *n,
    struct tg_err *err)
{
	size_t i;

	*ms = NULL;
	*n = 0;
	if (list == NULL || list->n == 0) {
		tg_err_set(err, "webhook schedule is empty");
		return -1;
	}
	*ms = tg_xcalloc(list->n, sizeof(**ms));
	for (i = 0; i < list->n; i++) {
		if (tg_config_parse_duration(list->v[i], &(*ms)[i]) != 0 || (*ms)[i] < 0) {
			tg_err_set(err, "webhook schedule entry '%s' is not a duration", list->v[i]);
			free(*ms);
			*ms = NULL;
			return -1;
		}
	}
	*n = list->n;
	return 0;
}
