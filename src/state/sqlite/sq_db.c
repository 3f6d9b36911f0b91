/*
 * sq_db.c - the SQLite driver's entries of db.h: a domain's query becomes
 * one of sq_op.c's operations, run on the store's read connection on the
 * loop (answered before the call returns) or on its write connection on
 * the writer thread (answered later on the loop), its rows copied out
 * by sq_conn.c and read here. One instance only: nothing is shared.
 */
#include <stdlib.h>
#include <string.h>

#include "sq.h"

/* The connection of store s for a write or a read; a store-less
 * statement uses ownership's file. */
static struct sq_conn *
conn_for(struct sq *sq, enum tg_db_store s, int write)
{
	if (s == TG_DB_RUNS)
		return write ? &sq->runs_w : &sq->runs_r;
	if (s == TG_DB_OUTBOX)
		return write ? &sq->ob_w : &sq->ob_r;
	return write ? &sq->own_w : &sq->own_r;
}

void
tg_state_sq_db_run(struct sq_op *o)
{
	struct tg_db_q *q = o->in;

	tg_state_sq_rows_free(o->p);
	o->p = tg_state_sq_conn_exec(conn_for(o->sq, q->stmt->store, q->stmt->write ||
	    q->writes), q, &o->res);
}

static struct tg_state_op *go(struct sq_op *o);

void
tg_state_sq_db_answer(struct sq_op *o)
{
	struct tg_db_q *q = o->in;
	struct tg_db_rows r = { o->sq->be, o->p };

	q->res = o->res;
	q->again = 0;
	q->answer(q, o->res.rc == 0 ? &r : NULL);
	if (q->again) {
		memset(&o->res, 0, sizeof(o->res));
		o->next = go;
	}
}

void
tg_state_sq_db_cleanup(struct sq_op *o)
{
	struct tg_db_q *q = o->in;

	tg_state_sq_rows_free(o->p);
	if (q->cleanup != NULL)
		q->cleanup(q);
	tg_db_params_free(q);
	free(q);
}

static struct tg_state_op *
go(struct sq_op *o)
{
	const struct tg_db_q *q = o->in;
	static const enum sq_domain dom[] = {
		[TG_DB_ANY] = SQ_OWNERS, [TG_DB_OWNERS] = SQ_OWNERS,
		[TG_DB_OUTBOX] = SQ_OUTBOX, [TG_DB_RUNS] = SQ_RUNS,
	};

	o->dom = dom[q->stmt->store];
	o->keep = q->keep;
	return q->stmt->write || q->writes ? tg_state_sq_write(o) : tg_state_sq_read(o);
}

static struct tg_state_op *
submit(void *impl, struct tg_db_q *q)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_NONE, tg_state_sq_db_run,
	    tg_state_sq_db_answer);

	o->in = q;
	o->cleanup = tg_state_sq_db_cleanup;
	return go(o);
}

static const struct sq_cell *
cell_at(const struct tg_db_rows *r, int row, int col)
{
	const struct sq_rows *s = r->res;

	if (s == NULL || row < 0 || row >= s->nrow || col < 0 || col >= s->ncol)
		return NULL;
	return &s->cell[row * s->ncol + col];
}

static int
nrows(const struct tg_db_rows *r)
{
	const struct sq_rows *s = r->res;

	return s != NULL ? s->nrow : 0;
}

static const char *
cell(const struct tg_db_rows *r, int row, int col, size_t *len)
{
	const struct sq_cell *c = cell_at(r, row, col);

	*len = c != NULL ? c->len : 0;
	return c != NULL ? c->p : NULL;
}

static int64_t
i64(const struct tg_db_rows *r, int row, int col)
{
	const struct sq_cell *c = cell_at(r, row, col);

	if (c == NULL || c->type == TG_DB_NULL)
		return 0;
	return c->type == TG_DB_INT ? c->i : strtoll(c->p, NULL, 10);
}

static int64_t
changes(const struct tg_db_rows *r)
{
	const struct sq_rows *s = r->res;

	return s != NULL ? s->changes : 0;
}

const struct tg_db_driver tg_state_sq_db = {
	.fleet = 0,
	.submit = submit,
	.nrows = nrows,
	.cell = cell,
	.i64 = i64,
	.changes = changes,
};
