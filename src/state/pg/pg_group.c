/*
 * pg_group.c - group commit of the PostgreSQL backend's writes (pg.h):
 * which queued writes go together, and their results read back (the step
 * of reading a pipeline's results is pg_pipe.c's too).
 *
 * A connection that comes free while writes a domain marked for it
 * (db.h: struct tg_db_q's group) wait in the FIFO takes them all
 * (PG_GROUP_MAX at most) and pg_conn.c sends them in one libpq pipeline
 * closed by one Sync: the server runs them as one implicit transaction
 * and commits them with one WAL flush when the Sync comes, where one by
 * one each would wait for a round trip and a flush of its own. That is
 * what lets many connections' creations through a pool of 2.
 *
 * One group is in flight at a time: writes that come while its commit
 * is out wait for it and go together when it returns, and the other
 * connection stays free for reads and lone writes (a first poll's
 * ownership read and lead never queue behind a flush).
 *
 * Members run sorted by statement, then by the parameter that names the
 * rows they lock, so two groups (of two connections or two instances)
 * take their locks in one order and never wait on each other in a ring.
 *
 * Each caller hears only once the Sync's answer has come (the commit is
 * durable). When any statement of the group fails (a conflict, an error,
 * a deadlock with a single write), the server rolled the whole
 * transaction back and nothing of it was committed: every member goes
 * back to the head of the FIFO in its order, with its deadline, marked to
 * run alone, and gets the answer it would have had one by one. When the
 * connection is lost (or a deadline passes) while the group is in flight,
 * every member answers as a write sent does one by one: TG_STATE_UNKNOWN,
 * which replay.c makes known.
 */
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* a runs before b in a group: by statement, then by its lock order. */
static int
before(const struct pg_op *a, const struct pg_op *b)
{
	const char *x = a->val[a->group - 1], *y = b->val[b->group - 1];

	if (a->stmt != b->stmt)
		return a->stmt < b->stmt;
	if (x == NULL || y == NULL)
		return x == NULL && y != NULL;
	return strcmp(x, y) < 0;
}

/* The group of first (chained on next; first borrowed), sorted: its new
 * first. */
static struct pg_op *
group_sort(struct pg_op *first)
{
	struct pg_op *sorted = NULL, *o, *next, **at;

	for (o = first; o != NULL; o = next) {
		next = o->next;
		for (at = &sorted; *at != NULL && !before(o, *at); at = &(*at)->next)
			;
		o->next = *at;
		*at = o;
	}
	return sorted;
}

int
tg_state_pg_groupable(const struct pg_op *o)
{
	return o->group > 0 && !o->alone && !o->cancelled && o->group <= o->nparams;
}

struct pg_op *
tg_state_pg_unlink(struct pg *pg, struct pg_op **p)
{
	struct pg_op *o = *p;

	*p = o->next;
	if (pg->tail == &o->next)
		pg->tail = p;
	o->next = NULL;
	return o;
}

int
tg_state_pg_group_held(const struct pg *pg)
{
	int i;

	for (i = 0; i < PG_POOL; i++)
		if (pg->conn[i].st == PG_BUSY && pg->conn[i].op != NULL &&
		    tg_state_pg_groupable(pg->conn[i].op))
			return 1;
	return 0;
}

struct pg_op *
tg_state_pg_group_next(struct pg *pg)
{
	struct pg_op **p, *o;
	int held = tg_state_pg_group_held(pg);

	for (p = &pg->head; (o = *p) != NULL && held && tg_state_pg_groupable(o); p = &o->next)
		;
	return o != NULL ? tg_state_pg_unlink(pg, p) : NULL;
}

int
tg_state_pg_group_take(struct pg *pg, struct pg_op *first)
{
	struct pg_op **p = &pg->head, *o, *last = first;
	int n = 1;

	if (!tg_state_pg_groupable(first))
		return 1;
	while ((o = *p) != NULL && n < PG_GROUP_MAX) {
		if (!tg_state_pg_groupable(o)) {
			p = &o->next;
			continue;
		}
		tg_state_pg_unlink(pg, p);	/* out of the FIFO, onto the group */
		o->conn = first->conn;
		o->sent_us = first->sent_us;
		last->next = o;
		last = o;
		n++;
	}
	if (n > 1)
		first->conn->op = group_sort(first);
	return n;
}

int
tg_state_pg_group_ok(const struct pg_op *first)
{
	const struct pg_op *o;
	ExecStatusType st;

	for (o = first; o != NULL; o = o->next) {
		st = o->gres != NULL ? PQresultStatus(o->gres) : PGRES_FATAL_ERROR;
		if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
			return 0;
	}
	return 1;
}

void
tg_state_pg_group_requeue(struct pg *pg, struct pg_op *first)
{
	struct pg_op *o, *next, **at = &pg->head, *rest = pg->head;

	for (o = first; o != NULL; o = next) {
		next = o->next;
		PQclear(o->gres);
		o->gres = NULL;
		o->alone = 1;
		o->sent = 0;
		o->conn = NULL;
		memset(&o->res, 0, sizeof(o->res));
		*at = o;
		at = &o->next;
	}
	*at = rest;
	if (rest == NULL)
		pg->tail = at;
}

int
tg_state_pg_keep(struct pg_conn *k, PGresult *r)
{
	if (PQresultStatus(r) == PGRES_PIPELINE_SYNC) {
		PQclear(r);
		return 1;
	}
	if (tg_state_pg_gone(r) || PQstatus(k->c) == CONNECTION_BAD) {
		PQclear(r);
		return -1;
	}
	PQclear(k->last);
	k->last = r;
	return 0;
}

int
tg_state_pg_group_read(struct pg_conn *k)
{
	PGresult *r;
	int rc;

	while (!PQisBusy(k->c)) {
		if ((r = PQgetResult(k->c)) == NULL) {
			if (k->gcur == NULL)
				return 0;	/* the Sync's answer is still to come */
			k->gcur->gres = k->last;	/* this member's last result */
			k->last = NULL;
			k->gcur = k->gcur->next;
			continue;
		}
		if ((rc = tg_state_pg_keep(k, r)) != 0)
			return rc;
	}
	return 0;
}
