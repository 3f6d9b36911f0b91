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
 * The outbox, run registry and sweeps come in later versions.
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

static const char *const *const migrations[] = { v1 };

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
