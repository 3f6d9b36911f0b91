/*
 * owners.c - the correlation ownership store (include/tidegate/owners.h):
 * one SQLite table of (family, correlationId) -> API key, with the time
 * of the record for the age bound, and the key's own record number
 * (key_seq, from owner_keys: one counter per key) for the bound of
 * records per key: a key past max_rows loses its own oldest records,
 * never another key's, so no key can push another's jobs out of the
 * store. The correlationId is stored in the folded form tg_state_job_key()
 * gives (src/state/job_key.c, shared with the PostgreSQL backend), so
 * every spelling a vendor might read as one id finds the same row.
 * A record (counter, row, eviction) is one transaction.
 * Called by the SQLite state backend (sq_shared.c); the only file with
 * this SQL.
 */
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "tidegate/owners.h"
#include "../job_key.h"

#define KEEP_MS		(30LL * 24 * 3600 * 1000)
#define MAX_ROWS	1000000

enum { S_INSERT, S_EXISTS, S_GET, S_KEY_NEXT, S_KEY_EVICT, S_PRUNE_AGE, S_PRUNE_KEYS,
	S_COUNT, S_BEGIN, S_COMMIT, S_ROLLBACK, S_NSTMT };

static const char *const sql[S_NSTMT] = {
	[S_INSERT] = "INSERT OR REPLACE INTO owners (family, correlation_id, api_key, "
	    "created_at, key_seq) VALUES (?1, ?2, ?3, ?4, ?5)",
	[S_EXISTS] = "SELECT 1 FROM owners WHERE family = ?1 AND correlation_id = ?2",
	[S_GET] = "SELECT api_key, created_at FROM owners WHERE family = ?1 AND "
	    "correlation_id = ?2",
	[S_KEY_NEXT] = "INSERT INTO owner_keys (api_key, seq) VALUES (?1, 1) "
	    "ON CONFLICT (api_key) DO UPDATE SET seq = seq + 1 RETURNING seq",
	[S_KEY_EVICT] = "DELETE FROM owners WHERE api_key = ?1 AND key_seq <= ?2",
	[S_PRUNE_AGE] = "DELETE FROM owners WHERE created_at < ?1",
	/* per key, along its index: the cost is the keys and the rows removed */
	[S_PRUNE_KEYS] = "DELETE FROM owners WHERE id IN (SELECT o.id FROM owner_keys k "
	    "JOIN owners o ON o.api_key = k.api_key AND o.key_seq <= k.seq - ?1)",
	[S_COUNT] = "SELECT count(*) FROM owners",
	[S_BEGIN] = "BEGIN IMMEDIATE",
	[S_COMMIT] = "COMMIT",
	[S_ROLLBACK] = "ROLLBACK",
};

/* AUTOINCREMENT: ids never go back, so the smallest id is the oldest record
 * even after the newest was deleted. Version 1 had one bound for all keys
 * (the oldest rows of any key went first); version 2 numbers each key's
 * records, the existing ones in the order they were made. */
static const char *const schema_v1[] = {
	"CREATE TABLE IF NOT EXISTS owners ("
	" id INTEGER PRIMARY KEY AUTOINCREMENT,"
	" family TEXT NOT NULL,"
	" correlation_id TEXT NOT NULL,"
	" api_key TEXT NOT NULL,"
	" created_at INTEGER NOT NULL,"
	" UNIQUE (family, correlation_id))",
	"CREATE INDEX IF NOT EXISTS owners_created ON owners (created_at)",
};

static const char *const schema_v2[] = {
	"ALTER TABLE owners ADD COLUMN key_seq INTEGER NOT NULL DEFAULT 0",
	"CREATE TABLE owner_keys (api_key TEXT PRIMARY KEY, seq INTEGER NOT NULL)",
	"UPDATE owners SET key_seq = n.rn FROM (SELECT id, row_number() OVER "
	"(PARTITION BY api_key ORDER BY id) AS rn FROM owners) AS n WHERE owners.id = n.id",
	"INSERT INTO owner_keys (api_key, seq) SELECT api_key, max(key_seq) FROM owners "
	"GROUP BY api_key",
	"CREATE INDEX owners_key ON owners (api_key, key_seq)",
	"PRAGMA user_version = 2",
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
user_version(struct tg_owners *o, struct tg_err *err)
{
	sqlite3_stmt *s;
	int v = -1;

	if (sqlite3_prepare_v2(o->db, "PRAGMA user_version", -1, &s, NULL) != SQLITE_OK) {
		sql_err(o, err, "setup");
		return -1;
	}
	if (sqlite3_step(s) == SQLITE_ROW)
		v = sqlite3_column_int(s, 0);
	else
		sql_err(o, err, "setup");
	sqlite3_finalize(s);
	return v;
}

/* The tables at version 2, in one transaction (a file of version 1 keeps
 * its records, numbered per key). */
static int
migrate(struct tg_owners *o, struct tg_err *err)
{
	size_t i;
	int v;

	if (exec1(o, "BEGIN IMMEDIATE", err) != 0)
		return -1;
	for (i = 0; i < TG_NELEM(schema_v1); i++)
		if (exec1(o, schema_v1[i], err) != 0)
			goto fail;
	if ((v = user_version(o, err)) < 0)
		goto fail;
	for (i = 0; v < 2 && i < TG_NELEM(schema_v2); i++)
		if (exec1(o, schema_v2[i], err) != 0)
			goto fail;
	if (exec1(o, "COMMIT", err) == 0)
		return 0;
fail:
	(void)sqlite3_exec(o->db, "ROLLBACK", NULL, NULL, NULL);
	return -1;
}

static int
db_setup(struct tg_owners *o, struct tg_err *err)
{
	sqlite3_stmt *s;
	size_t i;

	sqlite3_busy_timeout(o->db, 5000);
	if (exec1(o, "PRAGMA journal_mode = WAL", err) != 0 ||
	    exec1(o, "PRAGMA synchronous = NORMAL", err) != 0 || migrate(o, err) != 0)
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

/* The next record number of key: >= 1, or -1 with err. */
static int64_t
key_next(struct tg_owners *o, const char *key, struct tg_err *err)
{
	sqlite3_stmt *s = stmt(o, S_KEY_NEXT);
	int64_t seq = -1;

	sqlite3_bind_text(s, 1, key, -1, SQLITE_TRANSIENT);
	if (sqlite3_step(s) == SQLITE_ROW)
		seq = sqlite3_column_int64(s, 0);
	else
		sql_err(o, err, "write");
	sqlite3_reset(s);
	return seq;
}

/* The row of job cid, numbered seq of key, then key's records past
 * max_rows dropped: how many, or -1 with err. */
static long long
insert_and_evict(struct tg_owners *o, const char *family, const char *cid, const char *key,
    int64_t now_ms, int64_t seq, struct tg_err *err)
{
	sqlite3_stmt *s = stmt(o, S_INSERT);

	bind_job(s, family, cid);
	sqlite3_bind_text(s, 3, key, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(s, 4, now_ms);
	sqlite3_bind_int64(s, 5, seq);
	if (step_done(o, s, err) != 0)
		return -1;
	if (seq <= o->max_rows)
		return 0;
	s = stmt(o, S_KEY_EVICT);
	sqlite3_bind_text(s, 1, key, -1, SQLITE_TRANSIENT);
	sqlite3_bind_int64(s, 2, seq - o->max_rows);
	if (step_done(o, s, err) != 0)
		return -1;
	return sqlite3_changes(o->db);
}

int
tg_owners_record(struct tg_owners *o, const char *family, const char *cid,
    const char *key, int64_t now_ms, struct tg_err *err)
{
	long long dropped = -1;
	int64_t seq;
	int known = -1;

	if (family == NULL || cid == NULL || *cid == '\0' || key == NULL) {
		tg_err_set(err, "owners: a record needs family, correlationId and key");
		return -1;
	}
	if (step_done(o, stmt(o, S_BEGIN), err) != 0)
		return -1;
	if ((known = exists(o, family, cid, err)) >= 0 &&
	    (seq = key_next(o, key, err)) > 0 &&
	    (dropped = insert_and_evict(o, family, cid, key, now_ms, seq, err)) >= 0 &&
	    step_done(o, stmt(o, S_COMMIT), err) == 0) {
		o->count += !known - dropped;
		return 0;
	}
	(void)step_done(o, stmt(o, S_ROLLBACK), NULL);
	return -1;
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
	s = stmt(o, S_PRUNE_KEYS);	/* a bound lowered since the records */
	sqlite3_bind_int64(s, 1, o->max_rows);
	if (step_done(o, s, err) != 0)
		return -1;
	o->count -= sqlite3_changes(o->db);
	return before - o->count;
}

long long
tg_owners_count(const struct tg_owners *o)
{
	return o->count;
}
