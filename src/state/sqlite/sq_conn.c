/*
 * sq_conn.c - one SQLite connection of the driver (sq.h): opened on a
 * file with the store's pragmas and migrated to its schema (struct
 * sq_schema: version n brings the file from n - 1 to n, PRAGMA
 * user_version holds the version), its statements prepared once per
 * connection on first use, and a query of db.h executed on it with its
 * rows copied out (the thread that runs it may not be the one that reads
 * them).
 *
 * A statement's SQLite text may be several statements: each is prepared
 * and bound by its parameters' names ($N is parameter N), all run in one
 * transaction when there are several or the statement writes.
 */
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "sq.h"

#define SQ_SCRIPT	8	/* statements of one SQLite text at most */

/* A statement's prepared parts, and for each the parameter of the query
 * its i-th placeholder ($N) takes, read from the names once. */
struct sq_prep {
	int n;
	sqlite3_stmt *s[SQ_SCRIPT];
	int np[SQ_SCRIPT];
	unsigned char par[SQ_SCRIPT][TG_DB_MAXP];	/* N, 0: none */
};

static void
prep_free(void *v)
{
	struct sq_prep *p = v;
	int i;

	for (i = 0; i < p->n; i++)
		sqlite3_finalize(p->s[i]);
	free(p);
}

static int
exec1(sqlite3 *db, const char *q, struct tg_err *err)
{
	char *msg = NULL;

	if (sqlite3_exec(db, q, NULL, NULL, &msg) == SQLITE_OK)
		return 0;
	tg_err_set(err, "state setup: %s", msg != NULL ? msg : sqlite3_errmsg(db));
	sqlite3_free(msg);
	return -1;
}

static int
user_version(sqlite3 *db, struct tg_err *err)
{
	sqlite3_stmt *s;
	int v = -1;

	if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL) != SQLITE_OK) {
		tg_err_set(err, "state setup: %s", sqlite3_errmsg(db));
		return -1;
	}
	if (sqlite3_step(s) == SQLITE_ROW)
		v = sqlite3_column_int(s, 0);
	sqlite3_finalize(s);
	return v;
}

/* The file at the schema's last version, and the store's work at open,
 * in one transaction. */
static int
migrate(sqlite3 *db, const struct sq_schema *sc, struct tg_err *err)
{
	char pragma[48];
	int v, i;

	if (exec1(db, "BEGIN IMMEDIATE", err) != 0)
		return -1;
	if ((v = user_version(db, err)) < 0)
		goto fail;
	if (v > sc->nversions) {
		tg_err_set(err, "state: %s schema version %d is newer than this tidegate knows "
		    "(%d)", sc->name, v, sc->nversions);
		goto fail;
	}
	for (; v < sc->nversions; v++) {
		for (i = 0; sc->versions[v][i] != NULL; i++)
			if (exec1(db, sc->versions[v][i], err) != 0)
				goto fail;
		snprintf(pragma, sizeof(pragma), "PRAGMA user_version = %d", v + 1);
		if (exec1(db, pragma, err) != 0)
			goto fail;
	}
	if ((sc->on_open == NULL || exec1(db, sc->on_open, err) == 0) &&
	    exec1(db, "COMMIT", err) == 0)
		return 0;
fail:
	(void)sqlite3_exec(db, "ROLLBACK", NULL, NULL, NULL);
	return -1;
}

/* Open c on path; the writer migrates (and does the store's work at
 * open), the reader finds the schema in place. */
static int
conn_open(struct sq_conn *c, const char *path, const struct sq_schema *sc, int sync_normal,
    int writer, struct tg_err *err)
{
	memset(c, 0, sizeof(*c));
	if (path == NULL || *path == '\0') {
		tg_err_set(err, "state: no database path for the %s store", sc->name);
		return -1;
	}
	if (sqlite3_open_v2(path, &c->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE |
	    SQLITE_OPEN_NOMUTEX, NULL) != SQLITE_OK) {
		tg_err_set(err, "state: cannot open %s: %s", path,
		    c->db != NULL ? sqlite3_errmsg(c->db) : "out of memory");
		tg_state_sq_conn_close(c);
		return -1;
	}
	sqlite3_busy_timeout(c->db, 5000);
	if (sc->setup != NULL && sc->setup(c->db) != 0) {
		tg_err_set(err, "state setup: %s", sqlite3_errmsg(c->db));
		tg_state_sq_conn_close(c);
		return -1;
	}
	if (exec1(c->db, "PRAGMA journal_mode = WAL", err) != 0 ||
	    exec1(c->db, sync_normal ? "PRAGMA synchronous = NORMAL" :
	    "PRAGMA synchronous = FULL", err) != 0 ||
	    exec1(c->db, "PRAGMA foreign_keys = ON", err) != 0 ||
	    (writer && migrate(c->db, sc, err) != 0)) {
		tg_state_sq_conn_close(c);
		return -1;
	}
	c->prep = tg_map_new(prep_free);
	return 0;
}

int
tg_state_sq_store_open(struct sq_conn *w, struct sq_conn *r, const char *path,
    const struct sq_schema *sc, int sync_normal, struct tg_err *err)
{
	return conn_open(w, path, sc, sync_normal, 1, err) != 0 ||
	    conn_open(r, path, sc, sync_normal, 0, err) != 0 ? -1 : 0;
}

void
tg_state_sq_conn_close(struct sq_conn *c)
{
	tg_map_free(c->prep);
	if (c->db != NULL)
		sqlite3_close(c->db);
	memset(c, 0, sizeof(*c));
}

/* The query parameter each placeholder of statement k of p takes. */
static void
map_params(struct sq_prep *p, int k)
{
	const char *name;
	int i, n = sqlite3_bind_parameter_count(p->s[k]);

	p->np[k] = n < TG_DB_MAXP ? n : TG_DB_MAXP;
	for (i = 0; i < p->np[k]; i++) {
		name = sqlite3_bind_parameter_name(p->s[k], i + 1);
		n = name != NULL ? atoi(name + 1) : 0;
		p->par[k][i] = (unsigned char)(n >= 1 && n <= TG_DB_MAXP ? n : 0);
	}
}

/* The prepared statements of st on c (prepared now the first time), or
 * NULL with err. */
static struct sq_prep *
prepared(struct sq_conn *c, const struct tg_db_stmt *st, struct tg_err *err)
{
	struct sq_prep *p = tg_map_get(c->prep, st->name);
	const char *sql = st->lite != NULL ? st->lite : st->sql, *tail = sql;

	if (p != NULL)
		return p;
	p = tg_xcalloc(1, sizeof(*p));
	while (*tail != '\0' && p->n < SQ_SCRIPT) {
		if (sqlite3_prepare_v3(c->db, tail, -1, SQLITE_PREPARE_PERSISTENT, &p->s[p->n],
		    &tail) != SQLITE_OK) {
			tg_err_set(err, "state: %s: %s", st->name, sqlite3_errmsg(c->db));
			prep_free(p);
			return NULL;
		}
		if (p->s[p->n] != NULL)
			map_params(p, p->n++);
	}
	tg_map_put(c->prep, st->name, p);
	return p;
}

/* Bind q's parameters to statement k of pr, as its names ($N) say. */
static void
bind(const struct sq_prep *pr, int k, const struct tg_db_q *q)
{
	const struct tg_db_param *p;
	sqlite3_stmt *s = pr->s[k];
	int i, n;

	for (i = 1; i <= pr->np[k]; i++) {
		if ((n = pr->par[k][i - 1]) < 1 || n > q->npar)
			continue;
		p = &q->par[n - 1];
		if (p->type == TG_DB_INT)
			sqlite3_bind_int64(s, i, p->i);
		else if (p->type == TG_DB_TEXT)
			sqlite3_bind_text(s, i, p->p, (int)p->len, SQLITE_STATIC);
		else if (p->type == TG_DB_BLOB)
			sqlite3_bind_blob(s, i, p->len > 0 ? p->p : "", (int)p->len, SQLITE_STATIC);
		else
			sqlite3_bind_null(s, i);
	}
}

struct sq_block {
	struct sq_block *next;
	char data[];
};

void
tg_state_sq_rows_free(struct sq_rows *r)
{
	struct sq_block *b;

	if (r == NULL)
		return;
	while ((b = r->more) != NULL) {
		r->more = b->next;
		free(b);
	}
	if (r->cell != r->cell0)
		free(r->cell);
	free(r);
}

static struct sq_rows *
rows_new(int ncol)
{
	struct sq_rows *r = tg_xcalloc(1, sizeof(*r));

	r->ncol = ncol;
	r->cell = r->cell0;
	r->cap = (int)TG_NELEM(r->cell0);
	return r;
}

/* n bytes of r's that stay where they are until r is freed. */
static char *
rows_bytes(struct sq_rows *r, size_t n)
{
	struct sq_block *b;

	if (n <= sizeof(r->small) - r->used) {
		r->used += n;
		return r->small + r->used - n;
	}
	b = tg_xmalloc(sizeof(*b) + n);
	b->next = r->more;
	r->more = b;
	return b->data;
}

/* Room in r for one more row. */
static void
rows_grow(struct sq_rows *r)
{
	int cap;

	if ((r->nrow + 1) * r->ncol <= r->cap)
		return;
	cap = r->cap * 2 > (r->nrow + 1) * r->ncol ? r->cap * 2 : (r->nrow + 1) * r->ncol;
	if (r->cell == r->cell0) {
		r->cell = tg_xmalloc((size_t)cap * sizeof(*r->cell));
		memcpy(r->cell, r->cell0, sizeof(r->cell0));
	} else
		r->cell = tg_xrealloc(r->cell, (size_t)cap * sizeof(*r->cell));
	r->cap = cap;
}

/* The current row of s appended to r. */
static void
row_copy(struct sq_rows *r, sqlite3_stmt *s)
{
	struct sq_cell *c;
	const void *v;
	int i;

	rows_grow(r);
	for (i = 0; i < r->ncol; i++) {
		c = &r->cell[r->nrow * r->ncol + i];
		memset(c, 0, sizeof(*c));
		switch (sqlite3_column_type(s, i)) {
		case SQLITE_NULL:
			c->type = TG_DB_NULL;
			continue;
		case SQLITE_INTEGER:	/* its number, and its text as for the others */
			c->type = TG_DB_INT;
			c->i = sqlite3_column_int64(s, i);
			/* FALLTHROUGH */
		default:	/* text, blob, real: their bytes */
			if (c->type != TG_DB_INT)
				c->type = TG_DB_BLOB;
			v = c->type == TG_DB_INT ? (const void *)sqlite3_column_text(s, i) :
			    sqlite3_column_blob(s, i);
			c->len = (size_t)sqlite3_column_bytes(s, i);
			c->p = rows_bytes(r, c->len + 1);
			if (c->len > 0)
				memcpy(c->p, v, c->len);
			c->p[c->len] = '\0';
		}
	}
	r->nrow++;
}

/* Run s to its end; rows into *out when it has columns. SQLite's code. */
static int
run1(const struct sq_prep *pr, int k, const struct tg_db_q *q, struct sq_rows **out)
{
	sqlite3_stmt *s = pr->s[k];
	int rc;

	bind(pr, k, q);
	if (sqlite3_column_count(s) > 0) {
		tg_state_sq_rows_free(*out);
		*out = rows_new(sqlite3_column_count(s));
	}
	while ((rc = sqlite3_step(s)) == SQLITE_ROW)
		if (sqlite3_column_count(s) > 0)
			row_copy(*out, s);
	sqlite3_reset(s);
	sqlite3_clear_bindings(s);
	return rc;
}

static void
fail(struct sq_conn *c, const struct tg_db_q *q, int rc, struct tg_state_res *res)
{
	res->rc = (rc & 0xff) == SQLITE_CONSTRAINT ? TG_STATE_CONFLICT : TG_STATE_ERROR;
	tg_err_set(&res->err, "state: %s: %s", q->stmt->name, sqlite3_errmsg(c->db));
}

struct sq_rows *
tg_state_sq_conn_exec(struct sq_conn *c, const struct tg_db_q *q, struct tg_state_res *res)
{
	struct sq_prep *p = prepared(c, q->stmt, &res->err);
	struct sq_rows *rows = NULL;
	int i, rc = SQLITE_DONE, tx;

	if (p == NULL) {
		res->rc = TG_STATE_ERROR;
		return NULL;
	}
	tx = q->stmt->write || p->n > 1;
	if (tx && sqlite3_exec(c->db, q->stmt->write ? "BEGIN IMMEDIATE" : "BEGIN", NULL, NULL,
	    NULL) != SQLITE_OK) {
		fail(c, q, SQLITE_ERROR, res);
		return NULL;
	}
	for (i = 0; i < p->n && rc == SQLITE_DONE; i++)
		rc = run1(p, i, q, &rows);
	if (rc == SQLITE_DONE && (!tx || sqlite3_exec(c->db, "COMMIT", NULL, NULL, NULL) ==
	    SQLITE_OK)) {
		if (rows == NULL)
			rows = rows_new(0);
		rows->changes = sqlite3_changes64(c->db);
		res->rc = TG_STATE_OK;
		return rows;
	}
	fail(c, q, rc == SQLITE_DONE ? SQLITE_ERROR : rc, res);
	if (tx)
		(void)sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
	tg_state_sq_rows_free(rows);
	return NULL;
}
