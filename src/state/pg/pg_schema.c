/*
 * pg_schema.c - the PostgreSQL backend's schema and SQL: the migrations
 * (version n brings the schema from n - 1 to n; tidegate_schema holds the
 * versions applied) and the statements every connection prepares.
 *
 * Migrations run at open, on the connection open made synchronously,
 * inside one transaction holding pg_advisory_xact_lock(MIGRATE_LOCK): of
 * several instances starting together one migrates, the others wait for
 * its commit and then find nothing left to do. Values always travel as
 * parameters; the SQL below is constant.
 *
 * Version 1 holds what a fleet shares first: correlation ownership (as
 * sqlite/owners.c, the job id folded by tg_state_job_key), vendor token
 * records, and poll entries (leadership and the cached terminal answer).
 *
 * Version 2 holds the webhook outbox (as sqlite/outbox.c): outbox_jobs,
 * one row a job with its lease (owner instance, token, expiry) in the row,
 * and outbox_payloads, a job's payload in rows of at most PG_CHUNK bytes
 * keyed by job, writer token and chunk number. A writer's rows are
 * written as it appends, each append its own transaction, yet nobody reads
 * them before the commit names the writer's token in the job (in the same
 * statement that makes it ready and drops any other writer's rows). The
 * run registry and sweeps come in later versions.
 */
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* "tidegate" in ASCII: the advisory lock every instance migrates under. */
#define MIGRATE_LOCK	"8388346167643173989"

static const char *const v1[] = {
	"CREATE TABLE owners ("
	" id bigserial PRIMARY KEY,"
	" family text NOT NULL,"
	" correlation_id text NOT NULL,"
	" api_key text NOT NULL,"
	" created_at bigint NOT NULL,"
	" UNIQUE (family, correlation_id))",
	"CREATE INDEX owners_created ON owners (created_at)",
	"CREATE TABLE vendor_tokens ("
	" service text PRIMARY KEY,"
	" token text NOT NULL,"
	" expires_at bigint NOT NULL,"
	" instance text NOT NULL,"
	" written_at timestamptz NOT NULL DEFAULT now())",
	"CREATE TABLE poll_entries ("
	" key text PRIMARY KEY,"
	" leader text,"
	" lead_until bigint NOT NULL DEFAULT 0,"
	" status integer,"
	" content_type text,"
	" body bytea,"
	" answer_until bigint NOT NULL DEFAULT 0)",
	NULL,
};

static const char *const v2[] = {
	"CREATE TABLE outbox_jobs ("
	" seq bigserial,"
	" id text PRIMARY KEY,"
	" url text NOT NULL, secret_ref text NOT NULL, api_key text, kind text NOT NULL,"
	" correlation_id text, service text, content_type text NOT NULL,"
	" state text NOT NULL CHECK (state IN"
	"  ('waiting', 'ready', 'delivered', 'gone', 'dead')),"
	" payload_token text, payload_size bigint,"
	" attempts integer NOT NULL DEFAULT 0, next_at bigint,"
	" created_at bigint NOT NULL, ready_at bigint, first_attempt_at bigint,"
	" last_attempt_at bigint, last_status integer, last_error text, done_at bigint,"
	" lease_owner text, lease_token text, lease_expires bigint)",
	"CREATE INDEX outbox_jobs_due ON outbox_jobs (state, next_at)",
	"CREATE INDEX outbox_jobs_created ON outbox_jobs (created_at)",
	"CREATE TABLE outbox_payloads ("
	" job_id text NOT NULL REFERENCES outbox_jobs (id) ON DELETE CASCADE,"
	" token text NOT NULL,"
	" n integer NOT NULL,"
	" data bytea NOT NULL,"
	" PRIMARY KEY (job_id, token, n))",
	NULL,
};

static const char *const *const migrations[] = { v1, v2 };

#define JOB_COLS "id, state, url, kind, correlation_id, service, api_key, secret_ref," \
	" last_error, attempts, last_status, payload_size, created_at, ready_at, next_at," \
	" first_attempt_at, last_attempt_at, done_at, coalesce(lease_expires > "
/* A payload's bytes $p cut into rows of PG_CHUNK (1 MiB) bytes, numbered from $n. */
#define CHUNKS(n, p) "SELECT $1::text, $2::text, " n " + i, substring(" p " from i * 1048576 + 1" \
	" for 1048576) FROM generate_series(0, greatest(length(" p ") - 1, 0) / 1048576) i"
#define REDELIVERED "state = 'ready', attempts = 0, next_at = $2, done_at = NULL," \
	" lease_owner = NULL, lease_token = NULL, lease_expires = NULL"

/*
 * owners: a re-recorded job takes a new id (it becomes the newest, as
 * SQLite's INSERT OR REPLACE does). record keeps the ids within max_rows
 * of the newest (at most max_rows rows; gaps left by re-records may make
 * it fewer); prune removes the old ones, then the oldest past max_rows.
 */
static const char *const sql[PG_NSTMT] = {
	[PG_OWNERS_RECORD] = "WITH ins AS (INSERT INTO owners (family, correlation_id, api_key,"
	    " created_at) VALUES ($1, $2, $3, $4) ON CONFLICT (family, correlation_id) DO UPDATE"
	    " SET api_key = EXCLUDED.api_key, created_at = EXCLUDED.created_at, id = DEFAULT"
	    " RETURNING id) DELETE FROM owners WHERE id <= (SELECT id FROM ins) - $5::bigint",
	[PG_OWNERS_LOOKUP] = "SELECT api_key FROM owners WHERE family = $1 AND"
	    " correlation_id = $2 AND created_at >= $3",
	[PG_OWNERS_PRUNE] = "WITH old AS (DELETE FROM owners WHERE created_at < $1 RETURNING id),"
	    " extra AS (DELETE FROM owners WHERE id IN (SELECT id FROM owners WHERE"
	    " created_at >= $1 ORDER BY id DESC OFFSET $2) RETURNING id)"
	    " SELECT (SELECT count(*) FROM old) + (SELECT count(*) FROM extra)",
	[PG_OWNERS_COUNT] = "SELECT count(*) FROM owners",
	[PG_TOKEN_GET] = "SELECT token, expires_at FROM vendor_tokens WHERE service = $1",
	[PG_TOKEN_PUT] = "INSERT INTO vendor_tokens (service, token, expires_at, instance)"
	    " VALUES ($1, $2, $3, $4) ON CONFLICT (service) DO UPDATE SET token = EXCLUDED.token,"
	    " expires_at = EXCLUDED.expires_at, instance = EXCLUDED.instance, written_at = now()",
	[PG_TOKEN_INVALIDATE] = "DELETE FROM vendor_tokens WHERE service = $1 AND"
	    " ($2::text IS NULL OR token = $2::text)",
	[PG_POLL_LEAD] = "INSERT INTO poll_entries (key, leader, lead_until) VALUES ($1, $2, $4)"
	    " ON CONFLICT (key) DO UPDATE SET leader = EXCLUDED.leader,"
	    " lead_until = EXCLUDED.lead_until WHERE poll_entries.lead_until <= $3::bigint"
	    " RETURNING 1",
	[PG_POLL_PUBLISH] = "INSERT INTO poll_entries (key, status, content_type, body,"
	    " answer_until) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (key) DO UPDATE SET"
	    " status = EXCLUDED.status, content_type = EXCLUDED.content_type,"
	    " body = EXCLUDED.body, answer_until = EXCLUDED.answer_until",
	[PG_POLL_FETCH] = "SELECT status, content_type, body FROM poll_entries WHERE key = $1"
	    " AND status IS NOT NULL AND answer_until > $2",
	[PG_OB_ADD] = "INSERT INTO outbox_jobs (id, url, secret_ref, api_key, kind,"
	    " correlation_id, service, content_type, state, created_at)"
	    " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 'waiting', $9)",
	[PG_OB_SET_CID] = "UPDATE outbox_jobs SET correlation_id = $2 WHERE id = $1",
	[PG_OB_ABANDON] = "WITH cur AS (SELECT state FROM outbox_jobs WHERE id = $1 FOR UPDATE),"
	    " u AS (UPDATE outbox_jobs SET state = 'dead', last_error = $2, done_at = $3"
	    " WHERE id = $1 AND state = 'waiting' RETURNING 1)"
	    " SELECT cur.state, (SELECT count(*) FROM u) FROM cur",
	/* Several instances never take one job: the row is locked, others skip it. */
	[PG_OB_LEASE] = "WITH pick AS (SELECT id, first_attempt_at IS NULL AS first"
	    " FROM outbox_jobs WHERE state = 'ready' AND next_at <= $1"
	    " AND (lease_expires IS NULL OR lease_expires <= $1)"
	    " ORDER BY next_at, seq LIMIT 1 FOR UPDATE SKIP LOCKED)"
	    " UPDATE outbox_jobs j SET attempts = j.attempts + 1, last_attempt_at = $1,"
	    " first_attempt_at = coalesce(j.first_attempt_at, $1), lease_owner = $2,"
	    " lease_token = $3, lease_expires = $4 FROM pick WHERE j.id = pick.id"
	    " RETURNING j.id, j.url, j.secret_ref, j.content_type, j.kind, j.correlation_id,"
	    " j.service, j.api_key, j.payload_size, j.attempts, j.ready_at, pick.first,"
	    " j.payload_token",
	[PG_OB_CHUNK] = "SELECT data FROM outbox_payloads WHERE job_id = $1 AND token = $2"
	    " AND n = $3",
	[PG_OB_RENEW] = "UPDATE outbox_jobs SET lease_expires = $3 WHERE id = $1"
	    " AND lease_token = $2",
	[PG_OB_RELEASE] = "UPDATE outbox_jobs SET lease_owner = NULL, lease_token = NULL,"
	    " lease_expires = NULL WHERE id = $1 AND lease_token = $2",
	[PG_OB_COMPLETE] = "WITH u AS (UPDATE outbox_jobs SET state = $3, next_at = $4,"
	    " last_status = $5, last_error = $6, done_at = $7, lease_owner = NULL,"
	    " lease_token = NULL, lease_expires = NULL WHERE id = $1 AND lease_token = $2"
	    " RETURNING id, state), d AS (DELETE FROM outbox_payloads WHERE job_id IN"
	    " (SELECT id FROM u WHERE state IN ('delivered', 'gone')))"
	    " SELECT count(*) FROM u",
	[PG_OB_NEXT_DUE] = "SELECT min(greatest(next_at, coalesce(lease_expires, 0)))"
	    " FROM outbox_jobs WHERE state = 'ready'",
	[PG_OB_STATE] = "SELECT state FROM outbox_jobs WHERE id = $1",
	[PG_OB_APPEND] = "INSERT INTO outbox_payloads (job_id, token, n, data) "
	    CHUNKS("$3::integer", "$4::bytea"),
	[PG_OB_COMMIT] = "WITH u AS (UPDATE outbox_jobs SET state = 'ready', payload_token = $2,"
	    " payload_size = $3, ready_at = $4, next_at = $5 WHERE id = $1"
	    " AND state = 'waiting' RETURNING id), d AS (DELETE FROM outbox_payloads"
	    " WHERE job_id IN (SELECT id FROM u) AND token <> $2) SELECT count(*) FROM u",
	[PG_OB_DROP] = "DELETE FROM outbox_payloads WHERE job_id = $1 AND token = $2",
	[PG_OB_SET] = "WITH cur AS (SELECT id, state FROM outbox_jobs WHERE id = $1 FOR UPDATE),"
	    " ins AS (INSERT INTO outbox_payloads (job_id, token, n, data) "
	    CHUNKS("0", "$3::bytea") " WHERE EXISTS (SELECT 1 FROM cur WHERE state = 'waiting')),"
	    " u AS (UPDATE outbox_jobs SET state = 'ready', payload_token = $2::text,"
	    " payload_size = length($3::bytea), ready_at = $4, next_at = $5 WHERE id = $1"
	    " AND state = 'waiting' RETURNING id), d AS (DELETE FROM outbox_payloads WHERE"
	    " job_id IN (SELECT id FROM u) AND token <> $2::text)"
	    " SELECT cur.state, (SELECT count(*) FROM u) FROM cur",
	[PG_OB_GET] = "SELECT " JOB_COLS "$2, false) FROM outbox_jobs WHERE id = $1",
	[PG_OB_LIST] = "SELECT " JOB_COLS "$6, false) FROM outbox_jobs"
	    " WHERE ($1::text IS NULL OR state = $1::text) AND created_at >= $2"
	    " AND ($3::text IS NULL OR correlation_id = $3::text)"
	    " ORDER BY created_at DESC, id LIMIT $4 OFFSET $5",
	[PG_OB_REDELIVER] = "WITH cur AS (SELECT state, payload_size IS NOT NULL AS has,"
	    " coalesce(lease_expires > $2, false) AS leased FROM outbox_jobs WHERE id = $1"
	    " FOR UPDATE), u AS (UPDATE outbox_jobs SET " REDELIVERED " WHERE id = $1"
	    " AND NOT coalesce(lease_expires > $2, false) AND (state = 'ready' OR"
	    " (state = 'dead' AND payload_size IS NOT NULL)) RETURNING 1)"
	    " SELECT cur.state, cur.has, cur.leased, (SELECT count(*) FROM u) FROM cur",
	[PG_OB_REDELIVER_SINCE] = "WITH u AS (UPDATE outbox_jobs SET " REDELIVERED
	    " WHERE ((state = 'dead' AND payload_size IS NOT NULL AND done_at >= $1)"
	    " OR (state = 'ready' AND attempts > 0 AND last_attempt_at >= $1))"
	    " AND NOT coalesce(lease_expires > $2, false) RETURNING 1) SELECT count(*) FROM u",
	[PG_OB_PURGE] = "WITH d AS (DELETE FROM outbox_jobs WHERE state IN ('delivered', 'gone',"
	    " 'dead') AND done_at < $1 RETURNING 1) SELECT count(*) FROM d",
	[PG_OB_STATS] = "SELECT state, count(*) FROM outbox_jobs GROUP BY state UNION ALL"
	    " SELECT 'leased', count(*) FROM outbox_jobs WHERE lease_expires > $1",
};

const char *
tg_state_pg_sql(int i)
{
	return sql[i];
}

/* Run q (constant SQL) on c: 0, or -1 with err. */
static int
run(PGconn *c, const char *q, const char *secret, struct tg_err *err)
{
	PGresult *r = PQexec(c, q);
	int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;

	if (!ok)
		tg_state_pg_err(err, "state: postgresql schema: ", PQerrorMessage(c), secret);
	PQclear(r);
	return ok ? 0 : -1;
}

/* The highest version applied (0: none), or -1 with err. */
static int
version(PGconn *c, const char *secret, struct tg_err *err)
{
	PGresult *r = PQexec(c, "SELECT coalesce(max(version), 0) FROM tidegate_schema");
	int v = -1;

	if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
		v = atoi(PQgetvalue(r, 0, 0));
	else
		tg_state_pg_err(err, "state: postgresql schema: ", PQerrorMessage(c), secret);
	PQclear(r);
	return v;
}

/* Apply migration v (1-based) and record it: 0, or -1 with err. */
static int
apply(PGconn *c, int v, const char *secret, struct tg_err *err)
{
	const char *const *q = migrations[v - 1];
	char num[16];
	const char *vals[1] = { num };
	PGresult *r;
	int ok;

	for (; *q != NULL; q++)
		if (run(c, *q, secret, err) != 0)
			return -1;
	snprintf(num, sizeof(num), "%d", v);
	r = PQexecParams(c, "INSERT INTO tidegate_schema (version) VALUES ($1)", 1, NULL,
	    vals, NULL, NULL, 0);
	ok = PQresultStatus(r) == PGRES_COMMAND_OK;
	if (!ok)
		tg_state_pg_err(err, "state: postgresql schema: ", PQerrorMessage(c), secret);
	PQclear(r);
	return ok ? 0 : -1;
}

int
tg_state_pg_migrate(PGconn *c, const char *secret, struct tg_err *err)
{
	int v, have = (int)TG_NELEM(migrations);

	if (run(c, "BEGIN", secret, err) != 0)
		return -1;
	if (run(c, "SELECT pg_advisory_xact_lock(" MIGRATE_LOCK ")", secret, err) != 0 ||
	    run(c, "CREATE TABLE IF NOT EXISTS tidegate_schema (version integer NOT NULL)",
	    secret, err) != 0 || (v = version(c, secret, err)) < 0)
		goto fail;
	if (v > have) {
		tg_err_set(err, "state: postgresql schema version %d is newer than this "
		    "tidegate knows (%d)", v, have);
		goto fail;
	}
	for (v++; v <= have; v++)
		if (apply(c, v, secret, err) != 0)
			goto fail;
	return run(c, "COMMIT", secret, err);
fail:
	PQclear(PQexec(c, "ROLLBACK"));
	return -1;
}
