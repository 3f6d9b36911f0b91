/*
 * outbox_schema.c - the SQLite file of the webhook outbox (its jobs are
 * ../outbox.c's, written once for every backend; payloads are files,
 * sq_files.c): the schema and its migrations (sq_conn.c runs them), and
 * tg_url_host(url), the host a lease's skip list names
 * (tg_state_url_host), for the lease's SQL.
 *
 * Version 1 kept jobs in "jobs" and the lease of an attempt in flight in a
 * table of its own. Version 2 is the table PostgreSQL has, so that one
 * SQL serves both: outbox_jobs, the lease (owner, token, expiry) in the
 * job's row, seq the order jobs were added in; every job of version 1
 * moves over with its lease, in the order it was added. Version 3 adds
 * the index the payload bytes held are summed over.
 */
#include <stdlib.h>

#include <sqlite3.h>

#include "sq.h"
#include "../outbox_rules.h"

static const char *const v1[] = {
	"CREATE TABLE IF NOT EXISTS jobs ("
	" id TEXT PRIMARY KEY,"
	" url TEXT NOT NULL, secret_ref TEXT NOT NULL, api_key TEXT, kind TEXT NOT NULL,"
	" correlation_id TEXT, service TEXT, content_type TEXT NOT NULL,"
	" state TEXT NOT NULL CHECK (state IN"
	"  ('waiting', 'ready', 'delivered', 'gone', 'dead')),"
	" payload_size INTEGER, attempts INTEGER NOT NULL DEFAULT 0, next_at INTEGER,"
	" created_at INTEGER NOT NULL, ready_at INTEGER, first_attempt_at INTEGER,"
	" last_attempt_at INTEGER, last_status INTEGER, last_error TEXT, done_at INTEGER)",
	"CREATE TABLE IF NOT EXISTS leases ("
	" job_id TEXT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,"
	" token TEXT NOT NULL, attempt INTEGER NOT NULL, expires_at INTEGER NOT NULL)",
	"CREATE TABLE IF NOT EXISTS state_keys (name TEXT PRIMARY KEY, key BLOB NOT NULL)",
	NULL,
};

#define COLS "id, url, secret_ref, api_key, kind, correlation_id, service, content_type," \
	" state, payload_size, attempts, next_at, created_at, ready_at, first_attempt_at," \
	" last_attempt_at, last_status, last_error, done_at"

static const char *const v2[] = {
	"CREATE TABLE outbox_jobs ("
	" seq INTEGER PRIMARY KEY AUTOINCREMENT,"
	" id TEXT NOT NULL UNIQUE,"
	" url TEXT NOT NULL, secret_ref TEXT NOT NULL, api_key TEXT, kind TEXT NOT NULL,"
	" correlation_id TEXT, service TEXT, content_type TEXT NOT NULL,"
	" state TEXT NOT NULL CHECK (state IN"
	"  ('waiting', 'ready', 'delivered', 'gone', 'dead')),"
	" payload_token TEXT, payload_size INTEGER,"
	" attempts INTEGER NOT NULL DEFAULT 0, next_at INTEGER,"
	" created_at INTEGER NOT NULL, ready_at INTEGER, first_attempt_at INTEGER,"
	" last_attempt_at INTEGER, last_status INTEGER, last_error TEXT, done_at INTEGER,"
	" lease_owner TEXT, lease_token TEXT, lease_expires INTEGER)",
	"INSERT INTO outbox_jobs (" COLS ", lease_token, lease_expires)"
	" SELECT j.id, j.url, j.secret_ref, j.api_key, j.kind, j.correlation_id, j.service,"
	" j.content_type, j.state, j.payload_size, j.attempts, j.next_at, j.created_at,"
	" j.ready_at, j.first_attempt_at, j.last_attempt_at, j.last_status, j.last_error,"
	" j.done_at, l.token, l.expires_at FROM jobs j LEFT JOIN leases l ON l.job_id = j.id"
	" ORDER BY j.rowid",
	"DROP TABLE leases",
	"DROP TABLE jobs",
	"CREATE INDEX outbox_jobs_due ON outbox_jobs (state, next_at)",
	"CREATE INDEX outbox_jobs_created ON outbox_jobs (created_at)",
	NULL,
};

/* The payload bytes held (sq_files.c) summed from the jobs that hold
 * some, read from the index alone in key order, not from every job the
 * outbox has kept. */
static const char *const v3[] = {
	"CREATE INDEX outbox_jobs_held ON outbox_jobs (api_key, payload_size, state)"
	" WHERE state IN ('ready', 'dead') AND payload_size IS NOT NULL",
	NULL,
};

static const char *const *const versions[] = { v1, v2, v3 };

/* tg_url_host(url): the host a lease's skip list names (outbox_rules.c). */
static void
url_host(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
	char *h = tg_state_url_host((const char *)sqlite3_value_text(argv[0]));

	(void)argc;
	sqlite3_result_text(ctx, h, -1, free);
}

static int
setup(struct sqlite3 *db)
{
	return sqlite3_create_function(db, "tg_url_host", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC,
	    NULL, url_host, NULL, NULL) == SQLITE_OK ? 0 : -1;
}

const struct sq_schema tg_state_sq_outbox_schema = {
	.name = "outbox", .nversions = 3, .versions = versions, .setup = setup,
};
