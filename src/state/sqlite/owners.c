/*
 * owners.c - the correlation ownership store (include/tidegate/owners.h):
 * one SQLite table of (family, correlationId) -> API key, with the time
 * of the record for the age bound and an increasing id for oldest-first
 * pruning. The correlationId is stored in the folded form
 * tg_state_job_key() gives (src/state/job_key.c, shared with the
 * PostgreSQL backend), so every spelling a vendor might read as one id
 * finds the same row.
 * Called by the gateway's jobs.c; the only file with this SQL, so that it
 * can move behind the state seam as one piece.
 */
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "tidegate/owners.h"
#include "../job_key.h"

#define KEEP_MS		(30LL * 24 * 3600 * 1000)
#define MAX_ROWS	1000000

enum { S_INSERT, S_EXISTS, S_GET, S_PRUNE_AGE, S_PRUNE_OLDEST, S_COUNT, S_NSTMT };

static const char *const sql[S_NSTMT] = {
	[S_INSERT] = "INSERT OR REPLACE INTO owners (family, correlation_id, api_key, "
	    "created_at) VALUES (?1, ?2, ?3, ?4)",
	[S_EXISTS] = "SELECT 1 FROM owners WHERE family = ?1 AND correlation_id = ?2",
	[S_GET] = "SELECT api_key, created_at FROM owners WHERE family = ?1 AND "
	    "correlation_id = ?2",
	[S_PRUNE_AGE] = "DELETE FROM owners WHERE created_at < ?1",
	[S_PRUNE_OLDEST] = "DELETE FROM owners WHERE id IN "
	    "(SELECT id FROM owners ORDER BY id LIMIT ?1)",
	[S_COUNT] = "SELECT count(*) FROM owners",
};

/* AUTOINCREMENT: ids never go back, so the smallest id is the oldest record
 * even after the newest was deleted. */
static const char *const schema[] = {
	"CREATE TABLE IF NOT EXISTS owners ("
	" id INTEGER PRIMARY KEY AUTOINCREMENT,"
	" family TEXT NOT NULL,"
	" correlation_id TEXT NOT NULL,"
	" api_key TEXT NOT NULL,"
	" created_at INTEGER NOT NULL,"
	" UNIQUE (family, correlation_id))",
	"CREATE INDEX IF NOT EXISTS owners_created ON owners (created_at)",
	"PRAGMA user_version = 1",
};

struct tg_owners {
	sqlite3 *db;
	sqlite3_stmt *st[S_NSTMT];
	int64_t keep_ms;
	long long max_rows;
	long long count;	/* rows in the table, kept in step with every write */
};

static void
sql_err(struct tg_owners *o, struct tg_err *err, const char *what)
{
	tg_err_set(err, "owners %s: %s", what, sqlite3_errmsg(o->db));
}

static sqlite3_stmt *
stmt(struct tg_owners *o, int i)
{
	sqlite3_reset(o->st[i]);
	sqlite3_clear_bindings(o->st[i]);
	return o->st[i];
}

/* Step a statement that returns no row; 0 or -1 with err. Resets it. */
static int
step_done(struct tg_owners *o, sqlite3_stmt *s, struct tg_err *err)
{
	int rc = sqlite3_step(s);

	sqlite3_reset(s);
	if (rc == SQLITE_DONE)
		return 0;
	sql_err(o, err, "write");
	return -1;
}

static int
exec1(struct tg_owners *o, const char *q, struct tg_err *err)
{
	char *msg = NULL;

	if (sqlite3_exec(o->db, q, NULL, NULL, &msg) == SQLITE_OK)
		return 0;
	tg_err_set(err, "owners setup: %s", msg ? msg : sqlite3_errmsg(o->db));
	sqlite3_free(msg);
	return -1;
}

static int
db_setup(struct tg_owners *o, struct tg_err *err)
{
	sqlite3_stmt *s;
	size_t i;

	sqlite3_busy_timeout(o->db, 5000);
	if (exec1(o, "PRAGMA journal_mode = WAL", err) != 0 ||
	    exec1(o, "PRAGMA synchronous = NORMAL", err) != 0)
		return -1;
	for (i = 0; i < TG_NELEM(schema); i++)
		if (exec1(o, schema[i], err) != 0)
			return -1;
	for (i = 0; i < S_NSTMT; i++) {
		if (sqlite3_prepare_v3(o->db, sql[i], -1, SQLITE_PREPARE_PERSISTENT, &o->st[i],
		    NULL) != SQLITE_OK) {
			sql_err(o, err, "prepare");
			return -1;
		}
	}
	s = stmt(o, S_COUNT);
	if (sqlite3_step(s) != SQLITE_ROW) {
		sql_err(o, err, "count");
		return -1;
	}
	o->count = sqlite3_column_int64(s, 0);
	sqlite3_reset(s);
	return 0;
}

struct tg_owners *
tg_owners_open(const struct tg_owners_opts *opts, struct tg_err *err)
{
	struct tg_owners *o = tg_xcalloc(1, sizeof(*o));

	if (opts == NULL || opts->path == NULL || *opts->path == '\0') {
		tg_err_set(err, "owners: no database path");
		goto fail;
	}
	o->keep_ms = opts->keep_ms > 0 ? opts->keep_ms : KEEP_MS;
	o->max_rows = opts->max_rows > 0 ? opts->max_rows : MAX_ROWS;
	if (sqlite3_open_v2(opts->path, &o->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
	    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		tg_err_set(err, "owners: cannot open %s: %s", opts->path,
		    o->db ? sqlite3_errmsg(o->db) : "out of memory");
		goto fail;
	}
	if (db_setup(o, err) != 0)
		goto fail;
	return o;
fail:
	tg_owners_close(o);
	return NULL;
}

void
tg_owners_close(struct tg_owners *o)
{
	size_t i;

	if (o == NULL)
		return;
	for (i = 0; i < S_NSTMT; i++)
		sqlite3_finalize(o->st[i]);
	if (o->db != NULL)
		sqlite3_close(o->db);
	free(o);
}

static void
bind_job(sqlite3_stmt *s, const char *family, const char *cid)
{
	char *key = tg_state_job_key(cid);

	sqlite3_bind_text(s, 1, family, -1, SQLITE_TRANSIENT);
	sqlite3_bind_text(s, 2, key, -1, SQLITE_TRANSIENT);
	free(key);
}

/* 1 when the job has a row, 0 when not, -1 with err. */
static int
exists(struct tg_owners *o, const char *family, const char *cid, struct tg_err *err)
{
	sqlite3_stmt *s = stmt(o, S_EXISTS);
	int rc;

	bind_job(s, family, cid);
	rc = sqlite3_step(s);
	sqlite3_reset(s);
	if (rc == SQLITE_ROW || rc == SQLITE_DONE)
		return rc == SQLITE_ROW;
	sql_err(o, err, "read");
	return -1;
}

/* Delete the n oldest rows: 0 or -1 with err. */
static int
drop_oldest(struct tg_owners *o, long long n, struct tg_err *err)
{
	sqlite3_stmt *s = stmt(o, S_PRUNE_OLDEST);

	sqlite3_bind_int64(s, 1, n);
	if (step_done(o, s, err) != 0)
		return -1;
	o->count -= sqlite3_changes(o->db);
	return 0;
}

int
tg_owners_record(struct tg_owners *o, const char *family, const char *cid,
    const char *key, int64_t now_ms, struct tg_err *err)
{
	sqlite3_stmt *s;
	int known;

	if (family == NULL || cid == NULL || *cid == '\0' || key == NULL) {
		tg_err_set(err, "owners: a record needs family, correlationId and key");
		return -1;
	}
	if ((known = exists(o, family, cid, err)) < 0)
		return -1;
	s = stmt(o, S_INSERT);
	bind_job(s, family, cid);
	sqlite3_bind_text(s, 3, key, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(s, 4, now_ms);
	if (step_done(o, s, err) != 0)
		return -1;
	o->count += !known;
	return o->count > o->max_rows ? drop_oldest(o, o->count - o->max_rows, err) : 0;
}

int
tg_owners_lookup(struct tg_owners *o, const char *family, const char *cid,
    int64_t now_ms, char **key, struct tg_err *err)
{
	sqlite3_stmt *s = stmt(o, S_GET);
	int rc, out = TG_OWNERS_NONE;

	*key = NULL;
	bind_job(s, family, cid);
	rc = sqlite3_step(s);
	if (rc == SQLITE_ROW) {
		if (sqlite3_column_int64(s, 1) >= now_ms - o->keep_ms) {
			*key = tg_xstrdup((const char *)sqlite3_column_text(s, 0));
			out = 0;
		}
	} else if (rc != SQLITE_DONE) {
		sql_err(o, err, "read");
		out = -1;
	}
	sqlite3_reset(s);
	return out;
}

long long
tg_owners_prune(struct tg_owners *o, int64_t now_ms, struct tg_err *err)
{
	sqlite3_stmt *s = stmt(o, S_PRUNE_AGE);
	long long before = o->count;

	sqlite3_bind_int64(s, 1, now_ms - o->keep_ms);
	if (step_done(o, s, err) != 0)
		return -1;
	o->count -= sqlite3_changes(o->db);
	if (o->count > o->max_rows && drop_oldest(o, o->count - o->max_rows, err) != 0)
		return -1;
	return before - o->count;
}

long long
tg_owners_count(const struct tg_owners *o)
{
	return o->count;
}
