/*
 * quota.c - the fleet's figures of the quota engine's limits, written once
 * for every backend (include/tidegate/state.h tg_state_quota_*): the
 * shares instances lease (src/gateway/quota*.c) come from here.
 *
 * A rate is one row with its TAT (rate.h's arithmetic in SQL): one
 * statement computes the grant and the new TAT from the old row in its SET
 * expressions, which all read the row as it was, so PostgreSQL's row lock
 * makes a take atomic with no read-modify-write between instances. A day
 * is one row per (limit, UTC day) counting what was used, taken the same
 * way. Slots are one row per (limit, instance) holding what that instance
 * leased until an expiry it renews: their sum is bounded, which needs the
 * limit serialised. PostgreSQL runs a function (the v_quota migration)
 * that locks the limit's row and then sums, each statement of it seeing
 * the commits before it; SQLite's single writer serialises its steps.
 * Expired rows (an instance that died) free themselves at the next take.
 * A day's first take on an instance also deletes the rows of the days
 * before yesterday (kept: yesterday's, for a lease asked for just before
 * midnight), in the same statement, so the table holds about two rows a
 * limit. A rate's shares (Google Doorman's proportional share): one row
 * per (limit, instance) with the demand it last reported, the share it
 * was given and when both stop counting. A report, under the limit's row
 * lock like slots, gives the instance its demand and an even part of
 * what the fleet does not ask for when the fleet asks for less than the
 * limit, the limit in proportion to demand when it asks for more, but
 * never more than the others' shares leave: the shares live at any time
 * add up to at most the limit (an instance's share grows as the others'
 * shrink at their own next reports). In thousandths of a unit a second,
 * in integers. Members: each instance's row with the time it counts until, so that an
 * instance cut off from the database knows how many share the limit. The
 * tables are in the owners file with SQLite (always open; a day's count
 * survives a restart there).
 */
#include "db.h"
#include "seam.h"

enum { RATE_TAKE, RATE_GIVE, DAY_TAKE, DAY_GIVE, SLOTS_TAKE, SLOTS_GIVE, MEMBERS, SHARE };

/* RATE: $1 name, $2 now (µs), $3 interval (µs), $4 burst, $5 n. */
#define PG_START	"LEAST(GREATEST(quota_rate.tat, $2::bigint), $2::bigint + $4::bigint * $3::bigint)"
#define PG_GRANT	"GREATEST(0, LEAST($5::bigint, ($2::bigint + $4::bigint * $3::bigint - " \
			PG_START ") / $3::bigint))"
#define LT_START	"min(max(quota_rate.tat, $2), $2 + $4 * $3)"
#define LT_GRANT	"max(0, min($5, ($2 + $4 * $3 - " LT_START ") / $3))"

static const struct tg_db_stmt sql[] = {
	[RATE_TAKE] = { "quota_rate_take", TG_DB_ANY, 1,
	    "INSERT INTO quota_rate (name, tat, granted) VALUES ($1, $2::bigint +"
	    " LEAST($5::bigint, $4::bigint) * $3::bigint, LEAST($5::bigint, $4::bigint))"
	    " ON CONFLICT (name) DO UPDATE SET granted = " PG_GRANT ","
	    " tat = " PG_START " + " PG_GRANT " * $3::bigint RETURNING granted, tat",
	    "INSERT INTO quota_rate (name, tat, granted) VALUES ($1, $2 + min($5, $4) * $3,"
	    " min($5, $4)) ON CONFLICT (name) DO UPDATE SET granted = " LT_GRANT ","
	    " tat = " LT_START " + " LT_GRANT " * $3 RETURNING granted, tat" },
	[RATE_GIVE] = { "quota_rate_give", TG_DB_ANY, 1,
	    "UPDATE quota_rate SET tat = GREATEST($2::bigint, " PG_START " - $5::bigint *"
	    " $3::bigint) WHERE name = $1",
	    "UPDATE quota_rate SET tat = max($2, " LT_START " - $5 * $3) WHERE name = $1" },
	/* DAY: $1 name, $2 day, $3 n, $4 limit; $5 1: prune the days before $2 - 1. */
	[DAY_TAKE] = { "quota_day_take", TG_DB_ANY, 1,
	    "WITH old AS (DELETE FROM quota_day WHERE $5::bigint = 1 AND day < $2::bigint - 1)"
	    " INSERT INTO quota_day (name, day, used, granted) VALUES ($1, $2,"
	    " LEAST($3::bigint, $4::bigint), LEAST($3::bigint, $4::bigint))"
	    " ON CONFLICT (name, day) DO UPDATE SET granted = GREATEST(0, LEAST($3::bigint,"
	    " $4::bigint - quota_day.used)), used = quota_day.used + GREATEST(0,"
	    " LEAST($3::bigint, $4::bigint - quota_day.used)) RETURNING granted, used",
	    "DELETE FROM quota_day WHERE $5 = 1 AND day < $2 - 1;"
	    " INSERT INTO quota_day (name, day, used, granted) VALUES ($1, $2, min($3, $4),"
	    " min($3, $4)) ON CONFLICT (name, day) DO UPDATE SET granted = max(0, min($3,"
	    " $4 - quota_day.used)), used = quota_day.used + max(0, min($3,"
	    " $4 - quota_day.used)) RETURNING granted, used" },
	[DAY_GIVE] = { "quota_day_give", TG_DB_ANY, 1,
	    "UPDATE quota_day SET used = GREATEST(0, used - $3::bigint) WHERE name = $1"
	    " AND day = $2",
	    "UPDATE quota_day SET used = max(0, used - $3) WHERE name = $1 AND day = $2" },
	/* SLOTS: $1 name, $2 instance, $3 n, $4 limit, $5 now (ms), $6 expiry. */
	[SLOTS_TAKE] = { "quota_slots_take", TG_DB_ANY, 1,
	    "SELECT granted, held FROM tidegate_quota_slots($1, $2, $3, $4, $5, $6)",
	    "DELETE FROM quota_slots WHERE name = $1 AND expires < $5;"
	    " INSERT INTO quota_slots (name, instance, held, granted, expires)"
	    " VALUES ($1, $2, 0, 0, $6) ON CONFLICT (name, instance) DO NOTHING;"
	    " UPDATE quota_slots SET granted = max(0, min($3, $4 - (SELECT sum(held) FROM"
	    " quota_slots WHERE name = $1))), held = held + max(0, min($3, $4 - (SELECT"
	    " sum(held) FROM quota_slots WHERE name = $1))), expires = $6 WHERE name = $1"
	    " AND instance = $2 RETURNING granted, held" },
	[SLOTS_GIVE] = { "quota_slots_give", TG_DB_ANY, 1,
	    "UPDATE quota_slots SET held = GREATEST(0, held - $3::bigint) WHERE name = $1"
	    " AND instance = $2",
	    "UPDATE quota_slots SET held = max(0, held - $3) WHERE name = $1 AND instance = $2" },
	/* $1 instance, $2 now (ms), $3 until. */
	[MEMBERS] = { "quota_members", TG_DB_ANY, 1,
	    "WITH up AS (INSERT INTO quota_members (instance, until) VALUES ($1, $3)"
	    " ON CONFLICT (instance) DO UPDATE SET until = EXCLUDED.until)"
	    " SELECT count(*) + 1 FROM quota_members WHERE until >= $2::bigint"
	    " AND instance <> $1",
	    "INSERT INTO quota_members (instance, until) VALUES ($1, $3)"
	    " ON CONFLICT (instance) DO UPDATE SET until = excluded.until;"
	    " SELECT count(*) FROM quota_members WHERE until >= $2" },

	/* $1 name, $2 instance, $3 demand, $4 now (ms), $5 expiry, $6 limit
	 * (demand and limit in thousandths of a unit a second). */
	[SHARE] = { "quota_share", TG_DB_ANY, 1,
	    "SELECT granted, sharers FROM tidegate_quota_share($1, $2, $3, $4, $5, $6)",
	    "DELETE FROM quota_share WHERE name = $1 AND expires < $4 - 60000;"
	    " INSERT INTO quota_share (name, instance, demand, granted, expires)"
	    " VALUES ($1, $2, $3, 0, $5) ON CONFLICT (name, instance) DO UPDATE"
	    " SET demand = excluded.demand, granted = 0, expires = excluded.expires;"
	    " WITH o AS (SELECT coalesce(sum(demand), 0) AS d, coalesce(sum(granted), 0) AS g,"
	    " count(*) AS n FROM quota_share WHERE name = $1 AND instance <> $2"
	    " AND expires >= $4) UPDATE quota_share SET granted = (SELECT CASE WHEN $5 <= $4"
	    " THEN 0 ELSE max(0, min(CASE WHEN o.d + $3 <= $6 THEN $3 + ($6 - o.d - $3)"
	    " / (o.n + 1) ELSE $6 * $3 / (o.d + $3) END, $6 - o.g)) END FROM o)"
	    " WHERE name = $1 AND instance = $2;"
	    " SELECT granted, (SELECT count(*) FROM quota_share WHERE name = $1"
	    " AND expires >= $4) FROM quota_share WHERE name = $1 AND instance = $2" },
};

const struct tg_db_table tg_state_quota_stmts = { sql, TG_NELEM(sql) };

static void
answer_pair(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct tg_db_op *o = (struct tg_db_op *)q;
	int ok = r != NULL && tg_db_nrows(r) > 0;

	o->cb.pair(&q->res, ok ? tg_db_i64(r, 0, 0) : 0, ok ? tg_db_i64(r, 0, 1) : 0, o->arg);
}

static void
answer_num(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct tg_db_op *o = (struct tg_db_op *)q;

	o->cb.num(&q->res, r != NULL && tg_db_nrows(r) > 0 ? tg_db_i64(r, 0, 0) : 0, o->arg);
}

/* An operation on the limit name (given as $1); NULL: refused at once. */
static struct tg_db_op *
op_new(struct tg_state *st, int which, const char *name, void *arg)
{
	return tg_db_op_new(sizeof(struct tg_db_op), st, &sql[which],
	    which == MEMBERS ? answer_num : which == RATE_GIVE || which == DAY_GIVE
	    || which == SLOTS_GIVE ? tg_db_answer_done : answer_pair, name, arg);
}

static struct tg_state_op *
submit(struct tg_db_op *o, const char *name, int64_t n)
{
	if (name == NULL || *name == '\0' || n < 0)
		return tg_db_fail(&o->q, TG_STATE_ERROR, "quota: a limit needs a name and n >= 0");
	return tg_db_submit(o->st, &o->q);
}

/* A rate's parameters after its name: $2 now, $3 interval, $4 burst, $5 n. */
static struct tg_state_op *
rate_submit(struct tg_db_op *o, const char *name, int64_t interval_us, int64_t burst,
    int64_t n, int64_t now_us)
{
	tg_db_int(&o->q, now_us);
	tg_db_int(&o->q, interval_us > 0 ? interval_us : 1);
	tg_db_int(&o->q, burst);
	tg_db_int(&o->q, n);
	return submit(o, name, n);
}

struct tg_state_op *
tg_state_quota_rate_take(struct tg_state *st, const char *name, int64_t interval_us,
    int64_t burst, int64_t n, int64_t now_us, tg_state_pair_cb cb, void *arg)
{
	struct tg_db_op *o = op_new(st, RATE_TAKE, name, arg);

	o->cb.pair = cb;
	return rate_submit(o, name, interval_us, burst, n, now_us);
}

struct tg_state_op *
tg_state_quota_rate_give(struct tg_state *st, const char *name, int64_t interval_us,
    int64_t burst, int64_t n, int64_t now_us, tg_state_done_cb cb, void *arg)
{
	struct tg_db_op *o = op_new(st, RATE_GIVE, name, arg);

	o->cb.done = cb;
	return rate_submit(o, name, interval_us, burst, n, now_us);
}

struct tg_state_op *
tg_state_quota_day_take(struct tg_state *st, const char *name, int64_t day, int64_t limit,
    int64_t n, tg_state_pair_cb cb, void *arg)
{
	struct tg_db_op *o = op_new(st, DAY_TAKE, name, arg);

	o->cb.pair = cb;
	tg_db_int(&o->q, day);
	tg_db_int(&o->q, n);
	tg_db_int(&o->q, limit);
	/* set when asked, not when answered: a prune lost to a failure waits
	 * for the next day's */
	tg_db_int(&o->q, day > st->quota_day_pruned);
	if (day > st->quota_day_pruned)
		st->quota_day_pruned = day;
	return submit(o, name, n);
}

struct tg_state_op *
tg_state_quota_day_give(struct tg_state *st, const char *name, int64_t day, int64_t n,
    tg_state_done_cb cb, void *arg)
{
	struct tg_db_op *o = op_new(st, DAY_GIVE, name, arg);

	o->cb.done = cb;
	tg_db_int(&o->q, day);
	tg_db_int(&o->q, n);
	return submit(o, name, n);
}

struct tg_state_op *
tg_state_quota_slots_take(struct tg_state *st, const char *name, int64_t limit, int64_t n,
    int64_t now_ms, int64_t expires_ms, tg_state_pair_cb cb, void *arg)
{
	struct tg_db_op *o = op_new(st, SLOTS_TAKE, name, arg);

	o->cb.pair = cb;
	tg_db_text(&o->q, st->instance);
	tg_db_int(&o->q, n);
	tg_db_int(&o->q, limit);
	tg_db_int(&o->q, now_ms);
	tg_db_int(&o->q, expires_ms);
	return submit(o, name, n);
}

struct tg_state_op *
tg_state_quota_slots_give(struct tg_state *st, const char *name, int64_t n,
    tg_state_done_cb cb, void *arg)
{
	struct tg_db_op *o = op_new(st, SLOTS_GIVE, name, arg);

	o->cb.done = cb;
	tg_db_text(&o->q, st->instance);
	tg_db_int(&o->q, n);
	return submit(o, name, n);
}

struct tg_state_op *
tg_state_quota_members(struct tg_state *st, int64_t now_ms, int64_t until_ms,
    tg_state_num_cb cb, void *arg)
{
	struct tg_db_op *o = op_new(st, MEMBERS, st->instance, arg);

	o->cb.num = cb;
	tg_db_int(&o->q, now_ms);
	tg_db_int(&o->q, until_ms);
	return submit(o, st->instance, 0);
}

struct tg_state_op *
tg_state_quota_share(struct tg_state *st, const char *name, int64_t demand, int64_t limit,
    int64_t now_ms, int64_t expires_ms, tg_state_pair_cb cb, void *arg)
{
	struct tg_db_op *o = op_new(st, SHARE, name, arg);

	o->cb.pair = cb;
	tg_db_text(&o->q, st->instance);
	tg_db_int(&o->q, demand);
	tg_db_int(&o->q, now_ms);
	tg_db_int(&o->q, expires_ms);
	tg_db_int(&o->q, limit);
	return submit(o, name, demand < 0 || limit < 1 ? -1 : demand);
}
