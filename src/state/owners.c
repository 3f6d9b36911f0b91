/*
 * owners.c - correlation ownership, written once for every backend
 * (include/tidegate/state.h tg_state_owners_*): which gateway API key
 * created a data exchange job (family "export" or "import" and the
 * correlationId the vendor answered, folded by tg_state_job_key), so that
 * reads of the job by any other key can be refused. Bounded: a record
 * counts for keep_ms, and a key past max_rows records loses its own
 * oldest first, never another key's (owner_keys numbers each key's
 * records, so no key can push another's jobs out).
 */
#include <stdlib.h>
#include <string.h>

#include "tidegate/clock.h"
#include "db.h"
#include "job_key.h"
#include "seam.h"

enum { RECORD, LOOKUP, LOOKUP_LEAD, PRUNE, COUNT };

/* PostgreSQL records, numbers and evicts in one statement; SQLite runs
 * the same steps in one transaction. A re-recorded job takes a new id and
 * its key's next number (it becomes the newest); the key's counter row
 * serialises its records across a fleet; gaps left by re-records may keep
 * fewer. A prune removes the old records and each key's past max_rows (a
 * bound lowered since), and poll entries long stale (a fleet's; SQLite
 * has none). */
static const struct tg_db_stmt sql[] = {
	[RECORD] = { "owners_record", TG_DB_OWNERS, 1,
	    "WITH k AS (INSERT INTO owner_keys (api_key, seq) VALUES ($3, 1)"
	    " ON CONFLICT (api_key) DO UPDATE SET seq = owner_keys.seq + 1 RETURNING seq),"
	    " ins AS (INSERT INTO owners (family, correlation_id, api_key, created_at, key_seq)"
	    " SELECT $1::text, $2::text, $3::text, $4::bigint, seq FROM k"
	    " ON CONFLICT (family, correlation_id) DO UPDATE SET api_key = EXCLUDED.api_key,"
	    " created_at = EXCLUDED.created_at, key_seq = EXCLUDED.key_seq, id = DEFAULT)"
	    " DELETE FROM owners WHERE api_key = $3 AND key_seq <= (SELECT seq FROM k) - $5::bigint"
	    " AND NOT (family = $1 AND correlation_id = $2)",
	    "INSERT INTO owner_keys (api_key, seq) VALUES ($3, 1)"
	    " ON CONFLICT (api_key) DO UPDATE SET seq = seq + 1;"
	    " INSERT OR REPLACE INTO owners (family, correlation_id, api_key, created_at, key_seq)"
	    " VALUES ($1, $2, $3, $4, (SELECT seq FROM owner_keys WHERE api_key = $3));"
	    " DELETE FROM owners WHERE api_key = $3 AND key_seq <= (SELECT seq FROM owner_keys"
	    " WHERE api_key = $3) - $5 AND NOT (family = $1 AND correlation_id = $2)" },
	[LOOKUP] = { "owners_lookup", TG_DB_OWNERS, 0,
	    "SELECT api_key FROM owners WHERE family = $1 AND correlation_id = $2"
	    " AND created_at >= $3", NULL },
	/* A fleet's first poll: the lookup and shared.c's poll_lead (its rules
	 * and its lazy commit, as there) in one statement, the lead taken only
	 * when the caller may read the job (jobs.c's rule: $4 names the owner,
	 * or no key and no owner). SQLite (one instance) runs LOOKUP. */
	[LOOKUP_LEAD] = { "owners_lookup_lead", TG_DB_OWNERS, 1,
	    "WITH o AS (SELECT api_key FROM owners WHERE family = $1::text"
	    " AND correlation_id = $2::text AND created_at >= $3::bigint),"
	    " " TG_DB_LAZY ", l AS (" TG_DB_LEAD("$5", "$6", "$7", "$8",
	    "coalesce((SELECT api_key FROM o) = $4::text, $4::text IS NULL AND NOT EXISTS"
	    " (SELECT 1 FROM o)) AND") ") SELECT (SELECT api_key FROM o), EXISTS (SELECT 1 FROM l)",
	    NULL },
	[PRUNE] = { "owners_prune", TG_DB_OWNERS, 1,
	    "WITH stale AS (DELETE FROM poll_entries WHERE lead_until < $1 AND answer_until < $1)"
	    " DELETE FROM owners WHERE created_at < $1 OR id IN (SELECT o.id FROM owners o"
	    " JOIN owner_keys k ON o.api_key = k.api_key AND o.key_seq <= k.seq - $2)",
	    "DELETE FROM owners WHERE created_at < $1 OR id IN (SELECT o.id FROM owner_keys k"
	    " JOIN owners o ON o.api_key = k.api_key AND o.key_seq <= k.seq - $2)" },
	[COUNT] = { "owners_count", TG_DB_OWNERS, 0, "SELECT count(*) FROM owners", NULL },
};

const struct tg_db_table tg_state_owners_stmts = { sql, TG_NELEM(sql) };

static void
param_job(struct tg_db_op *o, const char *family, const char *cid)
{
	char *key = tg_state_job_key(cid != NULL ? cid : "");

	tg_db_text(&o->q, family);
	tg_db_text(&o->q, key);
	free(key);
}

struct tg_state_op *
tg_state_owners_record(struct tg_state *st, const char *family, const char *cid,
    const char *key, int64_t now_ms, tg_state_done_cb cb, void *arg)
{
	struct tg_db_op *o = tg_db_op_new(sizeof(*o), st, &sql[RECORD], tg_db_answer_done,
	    NULL, arg);

	o->cb.done = cb;
	o->q.replay = 1;		/* an upsert: sent again when lost */
	o->q.group = 3;			/* locks its key's counter row, then its rows */
	if (family == NULL || cid == NULL || *cid == '\0' || key == NULL)
		return tg_db_fail(&o->q, TG_STATE_ERROR,
		    "owners: a record needs family, correlationId and key");
	param_job(o, family, cid);
	tg_db_text(&o->q, key);
	tg_db_int(&o->q, now_ms);
	tg_db_int(&o->q, st->owners_max_rows);
	return tg_db_submit(st, &o->q);
}

static void
answer_lookup(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct tg_db_op *o = (struct tg_db_op *)q;
	const char *key = NULL;

	if (r != NULL && tg_db_nrows(r) > 0)
		key = tg_db_str(r, 0, 0);
	else if (r != NULL) {
		q->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&q->res.err, "no owner recorded for the job");
	}
	o->cb.str(&q->res, key, o->arg);
}

struct tg_state_op *
tg_state_owners_lookup(struct tg_state *st, const char *family, const char *cid,
    int64_t now_ms, tg_state_str_cb cb, void *arg)
{
	struct tg_db_op *o = tg_db_op_new(sizeof(*o), st, &sql[LOOKUP], answer_lookup, NULL, arg);

	o->cb.str = cb;
	param_job(o, family, cid);
	tg_db_int(&o->q, now_ms - st->owners_keep_ms);
	return tg_db_submit(st, &o->q);
}

struct lookup_lead {
	struct tg_db_op d;
	char *caller, *lead_key;	/* owned */
	int64_t ttl_ms;
};

static void
lookup_lead_cleanup(struct tg_db_q *q)
{
	struct lookup_lead *o = (struct lookup_lead *)q;

	free(o->caller);
	free(o->lead_key);
	tg_db_op_cleanup(q);
}

/* A fleet's rows carry led; one instance leads whatever the caller may read. */
static void
answer_lookup_lead(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct lookup_lead *o = (struct lookup_lead *)q;
	const char *key = r != NULL && tg_db_nrows(r) > 0 ? tg_db_str(r, 0, 0) : NULL;
	int led = 0;

	if (r != NULL && key == NULL) {
		q->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&q->res.err, "no owner recorded for the job");
	}
	if (r != NULL && tg_db_fleet(o->d.st))
		led = tg_db_nrows(r) > 0 && tg_db_i64(r, 0, 1) != 0;
	else if (r != NULL)
		led = key != NULL ? o->caller != NULL && strcmp(key, o->caller) == 0 :
		    o->caller == NULL;
	if (led && tg_db_fleet(o->d.st))
		tg_state_lead_held(o->d.st, o->lead_key, tg_clock_mono_ms() + o->ttl_ms);
	o->d.cb.owner_lead(&q->res, key, led, o->d.arg);
}

struct tg_state_op *
tg_state_owners_lookup_lead(struct tg_state *st, const char *family, const char *cid,
    int64_t now_ms, const char *caller_key, const char *lead_key, int64_t ttl_ms,
    tg_state_owner_lead_cb cb, void *arg)
{
	int fleet = tg_db_fleet(st);
	struct lookup_lead *o = tg_db_op_new(sizeof(*o), st, &sql[fleet ? LOOKUP_LEAD : LOOKUP],
	    answer_lookup_lead, NULL, arg);

	o->d.cb.owner_lead = cb;
	o->d.q.cleanup = lookup_lead_cleanup;
	o->caller = caller_key != NULL ? tg_xstrdup(caller_key) : NULL;
	o->lead_key = tg_xstrdup(lead_key != NULL ? lead_key : "");
	o->ttl_ms = ttl_ms;
	param_job(&o->d, family, cid);
	tg_db_int(&o->d.q, now_ms - st->owners_keep_ms);
	if (!fleet)
		return tg_db_submit(st, &o->d.q);
	tg_db_text(&o->d.q, caller_key);
	tg_db_text(&o->d.q, o->lead_key);
	tg_db_text(&o->d.q, st->instance);
	tg_db_int(&o->d.q, now_ms);
	tg_db_int(&o->d.q, now_ms + ttl_ms);
	return tg_db_submit(st, &o->d.q);
}

struct tg_state_op *
tg_state_owners_prune(struct tg_state *st, int64_t now_ms, tg_state_num_cb cb, void *arg)
{
	struct tg_db_op *o = tg_db_op_new(sizeof(*o), st, &sql[PRUNE], tg_db_answer_changes,
	    NULL, arg);

	o->cb.num = cb;
	tg_db_int(&o->q, now_ms - st->owners_keep_ms);
	tg_db_int(&o->q, st->owners_max_rows);
	return tg_db_submit(st, &o->q);
}

static void
answer_count(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct tg_db_op *o = (struct tg_db_op *)q;

	o->cb.num(&q->res, r != NULL ? tg_db_i64(r, 0, 0) : 0, o->arg);
}

struct tg_state_op *
tg_state_owners_count(struct tg_state *st, tg_state_num_cb cb, void *arg)
{
	struct tg_db_op *o = tg_db_op_new(sizeof(*o), st, &sql[COUNT], answer_count, NULL, arg);

	o->cb.num = cb;
	return tg_db_submit(st, &o->q);
}
