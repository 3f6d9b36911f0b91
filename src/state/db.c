/*
 * db.c - what every domain and driver shares of db.h: a query's
 * parameters and its life when answered at once, and reading rows through
 * the driver that made them, lists of statements, and submitting to the
 * state's driver.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "db.h"
#include "seam.h"

void
tg_db_query_init(struct tg_db_q *q, const struct tg_db_stmt *stmt,
    void (*answer)(struct tg_db_q *q, const struct tg_db_rows *r))
{
	q->stmt = stmt;
	q->answer = answer;
}

static struct tg_db_param *
param(struct tg_db_q *q, enum tg_db_type type)
{
	struct tg_db_param *p = &q->par[q->npar++];

	memset(p, 0, sizeof(*p));
	p->type = type;
	return p;
}

void
tg_db_text(struct tg_db_q *q, const char *s)
{
	struct tg_db_param *p = param(q, s != NULL ? TG_DB_TEXT : TG_DB_NULL);

	if (s != NULL) {
		p->len = strlen(s);
		p->p = tg_xstrdup(s);
	}
}

void
tg_db_int(struct tg_db_q *q, int64_t n)
{
	param(q, TG_DB_INT)->i = n;
}

void
tg_db_time(struct tg_db_q *q, int64_t t)
{
	if (t != 0)
		tg_db_int(q, t);
	else
		param(q, TG_DB_NULL);
}

void
tg_db_bytes(struct tg_db_q *q, const void *data, size_t len)
{
	struct tg_db_param *p = param(q, TG_DB_BLOB);

	p->p = tg_xmalloc(len > 0 ? len : 1);
	if (len > 0)
		memcpy(p->p, data, len);
	p->len = len;
}

void
tg_db_params_free(struct tg_db_q *q)
{
	int i;

	for (i = 0; i < q->npar; i++)
		free(q->par[i].p);
	q->npar = 0;
}

void
tg_db_again(struct tg_db_q *q, const struct tg_db_stmt *stmt)
{
	tg_db_params_free(q);
	q->stmt = stmt;
	q->again = 1;
}

struct tg_state_op *
tg_db_fail(struct tg_db_q *q, int rc, const char *why)
{
	q->res.rc = rc;
	tg_err_set(&q->res.err, "%s", why);
	q->answer(q, NULL);
	if (q->cleanup != NULL)
		q->cleanup(q);
	tg_db_params_free(q);
	free(q);
	return NULL;
}

/* ---- operation records ---- */

void *
tg_db_op_new(size_t size, struct tg_state *st, const struct tg_db_stmt *stmt,
    void (*answer)(struct tg_db_q *q, const struct tg_db_rows *r), const char *id, void *arg)
{
	struct tg_db_op *o = tg_xcalloc(1, size);

	tg_db_query_init(&o->q, stmt, answer);
	o->q.cleanup = tg_db_op_cleanup;
	o->st = st;
	o->arg = arg;
	if (id != NULL) {
		o->id = tg_xstrdup(id);
		tg_db_text(&o->q, id);
	}
	return o;
}

void
tg_db_op_cleanup(struct tg_db_q *q)
{
	free(((struct tg_db_op *)q)->id);
}

void
tg_db_answer_done(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct tg_db_op *o = (struct tg_db_op *)q;

	(void)r;
	o->cb.done(&q->res, o->arg);
}

void
tg_db_answer_changes(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct tg_db_op *o = (struct tg_db_op *)q;

	o->cb.num(&q->res, r != NULL ? tg_db_changes(r) : 0, o->arg);
}

size_t
tg_db_page(struct tg_db_op *o, const struct tg_db_rows *r, size_t limit, int missing,
    const char *what, int *more)
{
	size_t n = r != NULL ? (size_t)tg_db_nrows(r) : 0;

	*more = limit > 0 && n > limit;
	if (*more)
		n = limit;
	if (r != NULL && n == 0 && missing) {
		o->q.res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&o->q.res.err, "no %s %s", what, o->id != NULL ? o->id : "");
	}
	return n;
}

/* ---- rows ---- */

int
tg_db_nrows(const struct tg_db_rows *r)
{
	return r->be->db->nrows(r);
}

const char *
tg_db_str(const struct tg_db_rows *r, int row, int col)
{
	size_t len;

	return r->be->db->cell(r, row, col, &len);
}

const void *
tg_db_blob(const struct tg_db_rows *r, int row, int col, size_t *len)
{
	const char *p = r->be->db->cell(r, row, col, len);

	if (p == NULL)
		*len = 0;
	return p;
}

int64_t
tg_db_i64(const struct tg_db_rows *r, int row, int col)
{
	return r->be->db->i64(r, row, col);
}

int
tg_db_isnull(const struct tg_db_rows *r, int row, int col)
{
	size_t len;

	return r->be->db->cell(r, row, col, &len) == NULL;
}

int64_t
tg_db_changes(const struct tg_db_rows *r)
{
	return r->be->db->changes(r);
}

char *
tg_db_strdup(const struct tg_db_rows *r, int row, int col)
{
	const char *s = tg_db_str(r, row, col);

	return s != NULL ? tg_xstrdup(s) : NULL;
}

/* ---- lists of statements ---- */

size_t
tg_db_list_count(const struct tg_db_list *l)
{
	size_t i, n = 0;

	for (i = 0; i < l->n; i++)
		n += l->t[i]->n;
	return n;
}

const struct tg_db_stmt *
tg_db_list_at(const struct tg_db_list *l, size_t i)
{
	size_t t;

	for (t = 0; t < l->n; t++) {
		if (i < l->t[t]->n)
			return &l->t[t]->s[i];
		i -= l->t[t]->n;
	}
	return NULL;
}

long
tg_db_list_index(const struct tg_db_list *l, const struct tg_db_stmt *s)
{
	size_t t, base = 0;

	for (t = 0; t < l->n; t++) {
		if ((uintptr_t)s >= (uintptr_t)l->t[t]->s &&
		    (uintptr_t)s < (uintptr_t)(l->t[t]->s + l->t[t]->n))
			return (long)(base + (size_t)(s - l->t[t]->s));
		base += l->t[t]->n;
	}
	return -1;
}

/* ---- submitting ---- */

struct tg_state_op *
tg_db_submit(struct tg_state *st, struct tg_db_q *q)
{
	if (q->replay && st->be->db->fleet)
		return tg_db_replay_submit(st, q);
	return st->be->db->submit(st->impl, q);
}

int
tg_db_fleet(const struct tg_state *st)
{
	return st->be->db->fleet;
}
