/*
 * pg_db.c - the PostgreSQL driver's entries of db.h: a domain's query
 * becomes one of pg_op.c's operations on the domain's prepared statement
 * (prepared on every connection with the rest, pg_conn.c), its
 * parameters handed over (numbers as text, bytes in binary), its results
 * asked in binary and read here by column type.
 */
#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg.h"

/* Type oids (pg_type.h, stable since 7.x). */
#define OID_BOOL	16
#define OID_INT8	20
#define OID_INT2	21
#define OID_INT4	23

static void
cleanup_q(struct pg_op *o)
{
	struct tg_db_q *q = o->p;

	if (q->cleanup != NULL)
		q->cleanup(q);
	tg_db_params_free(q);
	free(q);
}

/* q's parameters (taken: q keeps none) onto o. */
static void
params_move(struct pg_op *o, struct tg_db_q *q)
{
	struct tg_db_param *p;
	int i;

	for (i = 0; i < q->npar; i++) {
		p = &q->par[i];
		if (p->type == TG_DB_INT)
			tg_state_pg_param_i64(o, p->i);
		else if (p->type == TG_DB_NULL)
			tg_state_pg_param_str(o, NULL);
		else {
			o->val[o->nparams] = p->p;
			o->len[o->nparams] = (int)p->len;
			o->fmt[o->nparams++] = p->type == TG_DB_BLOB;
			p->p = NULL;
		}
	}
	tg_db_params_free(q);
}

static const enum pg_domain domains[] = {
	[TG_DB_ANY] = PG_ANY, [TG_DB_OWNERS] = PG_OWNERS, [TG_DB_OUTBOX] = PG_OUTBOX,
	[TG_DB_RUNS] = PG_RUNS,
};

static void
answer_q(struct pg_op *o, const PGresult *r)
{
	struct tg_db_q *q = o->p;
	struct tg_db_rows rows = { o->pg->be, r };

	q->res = o->res;
	q->again = 0;
	q->answer(q, r != NULL ? &rows : NULL);
	if (!q->again)
		return;
	tg_state_pg_again(o, tg_state_pg_stmt_index(o->pg, q->stmt), answer_q);
	o->binary = 1;
	o->lookup = !q->stmt->write;
	o->group = 0;	/* a later step runs alone */
	o->alone = 0;
	params_move(o, q);
}

static struct tg_state_op *
submit(void *impl, struct tg_db_q *q)
{
	struct pg_op *o = tg_state_pg_op_new(impl, tg_state_pg_stmt_index(impl, q->stmt),
	    answer_q);

	o->p = q;
	o->cleanup = cleanup_q;
	o->binary = 1;
	o->lookup = !q->stmt->write;
	o->keep = q->keep;
	o->group = q->group;
	params_move(o, q);
	return tg_state_pg_submit(o, domains[q->stmt->store]);
}

static int
nrows(const struct tg_db_rows *r)
{
	return PQntuples(r->res);
}

static const char *
cell(const struct tg_db_rows *r, int row, int col, size_t *len)
{
	const PGresult *res = r->res;

	*len = 0;
	if (row >= PQntuples(res) || col >= PQnfields(res) || PQgetisnull(res, row, col))
		return NULL;
	*len = (size_t)PQgetlength(res, row, col);
	return PQgetvalue(res, row, col);
}

static int64_t
be(const unsigned char *p, int n)
{
	uint64_t v = 0;
	int i;

	for (i = 0; i < n; i++)
		v = v << 8 | p[i];
	if (n < 8 && n > 0 && (p[0] & 0x80))	/* sign-extend */
		v |= ~(uint64_t)0 << (n * 8);
	return (int64_t)v;
}

/* Binary integers and booleans by their type; anything else as text. */
static int64_t
i64(const struct tg_db_rows *r, int row, int col)
{
	const PGresult *res = r->res;
	const unsigned char *p;
	size_t len;

	if ((p = (const unsigned char *)cell(r, row, col, &len)) == NULL)
		return 0;
	switch (PQftype(res, col)) {
	case OID_INT8:
	case OID_INT4:
	case OID_INT2:
	case OID_BOOL:
		return be(p, (int)len);
	default:
		return strtoll((const char *)p, NULL, 10);
	}
}

static int64_t
changes(const struct tg_db_rows *r)
{
	return strtoll(PQcmdTuples((PGresult *)r->res), NULL, 10);
}

const struct tg_db_driver tg_state_pg_db = {
	.fleet = 1,
	.submit = submit,
	.nrows = nrows,
	.cell = cell,
	.i64 = i64,
	.changes = changes,
};
