/*
 * pg_pipe.c - lone operations of the PostgreSQL backend pipelined on one
 * connection (pg.h): which queued operations a connection at work takes
 * on, and their answers read back one by one.
 *
 * A connection that is given an operation that commits with no other
 * (a read, a lead taken, an answer published: not a write of a group,
 * pg_group.c) enters libpq's pipeline mode and sends it closed by a Sync
 * of its own; while it waits, the other such operations queued go after
 * it the same way, up to PG_PIPE_MAX in flight. Each Sync makes its
 * statement its own implicit transaction, as one by one: an error fails
 * that operation alone, and each caller hears once its Sync's answer has
 * come (committed), in the order sent, without waiting for the others.
 * Eight first polls then wait for one round trip of the server's, not
 * for eight queued behind two connections.
 *
 * What a pipeline does not take: a write that may join a group (it waits
 * for a connection of its own); any operation while such a write waits
 * and no group is in flight (the pipelines drain, so that a connection
 * comes free for it); any operation while a connection of the pool is
 * idle (it takes it and runs beside); any operation once the first in
 * flight was sent PG_PIPE_FRESH_US ago (a statement waiting on a lock
 * holds no more behind it: they wait for whichever connection frees
 * first); every operation behind a transaction pooler (state.pooler:
 * transaction), whose server connection may change at each Sync.
 *
 * A connection lost, or a deadline passed, with operations in flight:
 * each answers as one sent alone does (pg_op.c, pg_conn.c).
 */
#include "pg.h"

/* A write of a group queued, and no group in flight: pipelines drain. */
static int
group_waits(const struct pg *pg)
{
	const struct pg_op *o;

	if (tg_state_pg_group_held(pg))
		return 0;
	for (o = pg->head; o != NULL; o = o->next)
		if (tg_state_pg_groupable(o))
			return 1;
	return 0;
}

int
tg_state_pg_pipe_open(const struct pg *pg)
{
	int i;

	if (pg->unnamed || pg->head == NULL)
		return 0;
	for (i = 0; i < PG_POOL; i++)
		if (pg->conn[i].st == PG_IDLE)
			return 0;
	return !group_waits(pg);
}

struct pg_op *
tg_state_pg_pipe_take(struct pg *pg)
{
	struct pg_op **p, *o;

	for (p = &pg->head; (o = *p) != NULL && tg_state_pg_groupable(o); p = &o->next)
		;
	return o != NULL ? tg_state_pg_unlink(pg, p) : NULL;
}

int
tg_state_pg_pipe_alone(const struct pg *pg, const struct pg_op *o)
{
	return pg->unnamed || tg_state_pg_groupable(o);
}

int
tg_state_pg_pipe_read(struct pg_conn *k, PGresult **done)
{
	PGresult *r;
	int rc;

	*done = NULL;
	while (!PQisBusy(k->c)) {
		if ((r = PQgetResult(k->c)) == NULL) {
			if (k->psync)
				return 0;	/* its Sync's answer is still to come */
			k->psync = 1;	/* the statement's results are in */
			continue;
		}
		if ((rc = tg_state_pg_keep(k, r)) > 0) {
			*done = k->last;
			k->last = NULL;
			k->psync = 0;
		}
		if (rc != 0)
			return rc;
	}
	return 0;
}
