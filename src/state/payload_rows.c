/*
 * payload_rows.c - the payload store of a database that holds the bytes
 * itself (payload.h; PostgreSQL's): rows of outbox_payloads keyed by job,
 * writer token and chunk number, at most CHUNK bytes each, written over
 * db.h like the domain.
 *
 * A writer gets a fresh token when opened. Each append stores its bytes
 * as one or more chunk rows under that token in one statement, committed
 * at once but read by nobody: the job names no writer until the commit
 * (payload.c), one statement that makes the job ready, names the token
 * and size, and drops the rows of any other writer (one aborted, or cut
 * short by a crash). An abort deletes the writer's rows; a purge deletes
 * a job's rows with it (ON DELETE CASCADE), an outcome that keeps no
 * payload in its own statement (outbox.c).
 *
 * What the rows hold is kept as figures, a total and one per API key
 * (pg_schema.c: outbox_held, changed by triggers in the statement that
 * stores or drops rows), so that no request sums the rows. A writer given
 * a quota has each append lock and read the figures before it stores its
 * rows, only while they stay within it: appends of one figure racing on
 * several connections (or instances) take turns, and the second counts
 * the first's bytes. Without a cap an append takes no lock before its
 * rows.
 *
 * A commit or abort issued while appends are still in flight waits for
 * them (the pool has several connections), so the size it records counts
 * them all; a commit after a failed append fails. Meanwhile the commit's
 * handle is this store's own (cancelled: its callback is dropped once it
 * runs).
 *
 * A lease reads the payload's rows, one row a query, into an unlinked
 * temporary file in the spool directory (tg_outbox_opts.payload_dir,
 * else $TMPDIR, else /tmp) and hands its descriptor as spool_fd and
 * "/proc/self/fd/N" as payload_path: memory stays bounded by one chunk,
 * and the file goes when the lease is freed (or the process dies). The
 * writes go to the page cache on the loop. The instance keeps the last
 * TG_SPOOL_KEPT payloads it spooled whole (a descriptor of its own to
 * the unlinked file, keyed by job, writer and size): a later attempt of
 * the same job here reads its copy instead of every row again, and a
 * copy goes when its job is delivered or gone (drop), when a newer one
 * takes its place, or with the state.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "tidegate/ids.h"
#include "backend.h"
#include "outbox.h"
#include "payload.h"
#include "seam.h"

#define CHUNK	1048576		/* payload bytes per row at most (the SQL's too) */

enum { APPEND, DROP, CHUNK_GET, HELD };

/* The figures of the payload bytes held (pg_schema.c, outbox_held: every
 * row, committed, dead letters' and being written), $k's (NULL: no key)
 * beside the total. */
#define FIGURE(s, k) "coalesce((SELECT bytes FROM outbox_held WHERE scope = " s \
	" AND api_key = " k "), 0)"

static const struct tg_db_stmt sql[] = {
	/* Under a cap ($5 total, $6 the key's; 0: none) the figures' rows are
	 * taken first (locked, the total's before the key's, as the triggers
	 * do) and read as last committed: an append racing another of the
	 * same figure waits for its commit, then counts it. The rows go in
	 * only while the figures stay within the caps; the count says. */
	[APPEND] = { "pr_append", TG_DB_OUTBOX, 1,
	    "WITH lk AS (INSERT INTO outbox_held AS h (scope, api_key, bytes)"
	    " SELECT v.s, v.k, 0 FROM (VALUES (0, ''), (1, coalesce((SELECT api_key FROM"
	    " outbox_jobs WHERE id = $1), ''))) v (s, k) WHERE $5::bigint > 0 OR $6::bigint > 0"
	    " ORDER BY v.s ON CONFLICT (scope, api_key) DO UPDATE SET bytes = h.bytes"
	    " RETURNING h.scope, h.bytes),"
	    " held AS (SELECT coalesce(max(bytes) FILTER (WHERE scope = 0), 0) AS a,"
	    " coalesce(max(bytes) FILTER (WHERE scope = 1), 0) AS m FROM lk),"
	    " ins AS (INSERT INTO outbox_payloads (job_id, token, n, data)"
	    " SELECT $1::text, $2::text, $3::integer + i, substring($4::bytea from i * 1048576"
	    " + 1 for 1048576) FROM generate_series(0, greatest(length($4::bytea) - 1, 0)"
	    " / 1048576) i WHERE ($5::bigint = 0 OR (SELECT a FROM held)"
	    " + length($4::bytea) <= $5::bigint) AND ($6::bigint = 0 OR (SELECT m FROM held)"
	    " + length($4::bytea) <= $6::bigint) RETURNING 1)"
	    " SELECT (SELECT count(*) FROM ins), a, m FROM held", NULL },
	[DROP] = { "pr_drop", TG_DB_OUTBOX, 1,
	    "DELETE FROM outbox_payloads WHERE job_id = $1 AND token = $2", NULL },
	[CHUNK_GET] = { "pr_chunk", TG_DB_OUTBOX, 0,
	    "SELECT data FROM outbox_payloads WHERE job_id = $1 AND token = $2 AND n = $3", NULL },
	[HELD] = { "pr_held", TG_DB_OUTBOX, 0, "SELECT " FIGURE("0", "''") ", "
	    FIGURE("1", "coalesce($1::text, '')"), NULL },
};

const struct tg_db_table tg_state_payload_rows_stmts = { sql, TG_NELEM(sql) };

struct writer {
	struct tg_state_payload h;
	int n;			/* the next chunk number */
	int inflight;		/* appends not answered yet */
	int failed;		/* an append failed: the commit fails */
	struct tg_db_q *last;	/* the commit or abort, waiting for the appends */
	struct held *wait;	/* the waiting commit's handle */
};

/* The handle of a commit waiting for its writer's appends. */
struct held {
	struct tg_state_op pub;
	struct tg_state_op *op;	/* the commit's, once submitted */
	int cancelled;
};

static void
held_cancel(struct tg_state_op *op)
{
	struct held *h = (struct held *)op;

	if (h->op != NULL)
		h->op->be->cancel(h->op);	/* its driver's */
	else
		h->cancelled = 1;
}

static const struct tg_state_backend waiting = { .name = "payload rows",
	.cancel = held_cancel };

static void
rows_open(struct tg_state *st, const char *id, const char *key, tg_state_payload_cb cb,
    void *arg)
{
	struct tg_state_res res = { TG_STATE_OK, { "" } };
	struct writer *w = tg_xcalloc(1, sizeof(*w));

	tg_state_payload_head(&w->h, &tg_state_payload_rows, st, id, key);
	tg_id_hex(w->h.token, 16);
	cb(&res, &w->h, arg);
}

/* ---- the writer's last step (commit or abort) waits for its appends ---- */

static void
answer_nothing(struct tg_db_q *q, const struct tg_db_rows *r)
{
	(void)q;
	(void)r;
}

static struct tg_state_op *
run_last(struct writer *w, struct tg_db_q *q)
{
	struct held *h = w->wait;
	struct tg_state_op *op;

	if (w->inflight > 0) {
		w->last = q;
		return h != NULL ? &h->pub : NULL;
	}
	if (h != NULL && h->cancelled)
		q->answer = answer_nothing;	/* cancelled while it waited: it still runs */
	if (w->failed && q->stmt != &sql[DROP])
		return tg_db_fail(q, TG_STATE_ERROR, "an append to the payload failed");
	if ((op = tg_db_submit(w->h.st, q)) != NULL && h != NULL)
		h->op = op;
	return op;
}

static void
writer_free(struct writer *w)
{
	tg_state_payload_head_free(&w->h);
	free(w->wait);
	free(w);
}

static void
commit_free(struct tg_db_q *q)
{
	writer_free((struct writer *)((struct tg_payload_commit *)q)->w);
}

/* ---- append ---- */

struct append_op {
	struct tg_db_q q;
	struct writer *w;
	tg_state_done_cb cb;
	void *arg;
	int64_t len, max, key_max;
};

static void
append_end(struct tg_db_q *q)
{
	struct writer *w = ((struct append_op *)q)->w;
	struct tg_db_q *last;

	w->inflight--;
	if (q->res.rc != TG_STATE_OK)
		w->failed = 1;
	if (w->inflight == 0 && (last = w->last) != NULL) {
		w->last = NULL;
		(void)run_last(w, last);
	}
}

/* No row stored: over the cap. */
static void
answer_append(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct append_op *o = (struct append_op *)q;
	int64_t all, mine;

	if (r != NULL && tg_db_nrows(r) == 1 && tg_db_i64(r, 0, 0) == 0) {
		all = tg_db_i64(r, 0, 1) + o->len;
		mine = tg_db_i64(r, 0, 2) + o->len;
		q->res.rc = TG_STATE_REFUSED;
		if (o->max > 0 && all > o->max)
			tg_err_set(&q->res.err, "webhook payloads would hold %lld bytes, over their "
			    "cap of %lld", (long long)all, (long long)o->max);
		else
			tg_err_set(&q->res.err, "the webhook payloads of the job's API key would "
			    "hold %lld bytes, over " TG_OUTBOX_QUOTA_KEY_WHY " of %lld",
			    (long long)mine, (long long)o->key_max);
	}
	o->cb(&q->res, o->arg);
}

static struct tg_state_op *
rows_append(struct tg_state_payload *pw, struct evbuffer *buf, tg_state_done_cb cb, void *arg)
{
	struct writer *w = (struct writer *)pw;
	struct append_op *o = tg_xcalloc(1, sizeof(*o));
	size_t len = evbuffer_get_length(buf);

	tg_db_query_init(&o->q, &sql[APPEND], answer_append);
	o->q.keep = 1;
	o->q.cleanup = append_end;
	o->w = w;
	o->cb = cb;
	o->arg = arg;
	o->len = (int64_t)len;
	o->max = w->h.q.max_bytes > 0 ? w->h.q.max_bytes : 0;
	o->key_max = w->h.q.key_max_bytes > 0 ? w->h.q.key_max_bytes : 0;
	tg_db_text(&o->q, w->h.id);
	tg_db_text(&o->q, w->h.token);
	tg_db_int(&o->q, w->n);
	tg_db_bytes(&o->q, evbuffer_pullup(buf, -1), len);
	evbuffer_drain(buf, len);
	tg_db_int(&o->q, o->max);
	tg_db_int(&o->q, o->key_max);
	w->n += len > 0 ? (int)((len - 1) / CHUNK + 1) : 1;
	w->h.size += (int64_t)len;
	w->inflight++;
	return tg_db_submit(w->h.st, &o->q);
}

/* ---- commit, abort ---- */

static struct tg_state_op *
rows_commit(struct tg_payload_commit *c)
{
	struct writer *w = (struct writer *)c->w;

	c->q.cleanup = commit_free;
	if (w->inflight > 0) {
		w->wait = tg_xcalloc(1, sizeof(*w->wait));
		w->wait->pub.be = &waiting;
	}
	return run_last(w, &c->q);
}

struct drop_op {
	struct tg_db_q q;
	struct writer *w;
};

static void
drop_free(struct tg_db_q *q)
{
	writer_free(((struct drop_op *)q)->w);
}

static void
rows_abort(struct tg_state_payload *pw)
{
	struct writer *w = (struct writer *)pw;
	struct drop_op *o = tg_xcalloc(1, sizeof(*o));

	tg_db_query_init(&o->q, &sql[DROP], answer_nothing);
	o->q.keep = 1;
	o->q.cleanup = drop_free;
	o->w = w;
	tg_db_text(&o->q, w->h.id);
	tg_db_text(&o->q, w->h.token);
	(void)run_last(w, &o->q);	/* nobody to answer */
}

static struct tg_state_op *
rows_set(struct tg_state *st, struct tg_db_q *q)
{
	return tg_db_submit(st, q);	/* its statement stores the rows */
}

/* ---- the bytes held ---- */

struct usage_op {
	struct tg_db_q q;
	tg_state_pair_cb cb;
	void *arg;
};

static void
answer_usage(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct usage_op *o = (struct usage_op *)q;
	int ok = r != NULL && tg_db_nrows(r) == 1;

	o->cb(&q->res, ok ? tg_db_i64(r, 0, 0) : 0, ok ? tg_db_i64(r, 0, 1) : 0, o->arg);
}

static struct tg_state_op *
rows_usage(struct tg_state *st, const char *key, tg_state_pair_cb cb, void *arg)
{
	struct usage_op *o = tg_xcalloc(1, sizeof(*o));

	tg_db_query_init(&o->q, &sql[HELD], answer_usage);
	o->cb = cb;
	o->arg = arg;
	tg_db_text(&o->q, key);
	return tg_db_submit(st, &o->q);
}

/* ---- a lease's payload, spooled ---- */

/* An unlinked file in dir (borrowed) for l (borrowed): 0, or -1. */
static int
spool_open(const char *dir, struct tg_outbox_lease *l)
{
	char *tpl = tg_xasprintf("%s/tidegate-payload-XXXXXX", dir);
	int fd = mkostemp(tpl, O_CLOEXEC), hi;

	if (fd >= 0)
		unlink(tpl);
	free(tpl);
	if (fd >= 0 && fd < 3) {	/* spool_fd 0 means none */
		hi = fcntl(fd, F_DUPFD_CLOEXEC, 3);
		close(fd);
		fd = hi;
	}
	if (fd < 0)
		return -1;
	l->spool_fd = fd;
	l->payload_path = tg_xasprintf("/proc/self/fd/%d", fd);
	return 0;
}

/* Ask for chunk f->n of the payload. */
static void
next_chunk(struct tg_payload_fetch *f)
{
	tg_db_again(&f->q, &sql[CHUNK_GET]);
	tg_db_text(&f->q, f->l->id);
	tg_db_text(&f->q, f->ptoken);
	tg_db_int(&f->q, f->n);
}

/* Write all of data (borrowed) to fd: 0, or -1. */
static int
write_all(int fd, const char *data, size_t n)
{
	ssize_t w;

	while (n > 0) {
		if ((w = write(fd, data, n)) < 0)
			return -1;
		data += w;
		n -= (size_t)w;
	}
	return 0;
}

/* ---- copies kept for a later attempt ---- */

/* The kept copy of f's payload (same job, writer and size), or NULL. */
static struct tg_spool_kept *
kept_of(struct tg_state *st, const struct tg_payload_fetch *f)
{
	int i;

	for (i = 0; i < TG_SPOOL_KEPT; i++)
		if (st->kept[i].fd > 0 && strcmp(st->kept[i].id, f->l->id) == 0 &&
		    strcmp(st->kept[i].ptoken, f->ptoken) == 0 && st->kept[i].size == f->l->size)
			return &st->kept[i];
	return NULL;
}

static void
kept_forget(struct tg_spool_kept *k)
{
	if (k->fd > 0)
		close(k->fd);
	memset(k, 0, sizeof(*k));
}

/* f's payload, spooled whole, kept (a descriptor of its own) in place of
 * the copy used longest ago. */
static void
kept_add(struct tg_state *st, const struct tg_payload_fetch *f)
{
	struct tg_spool_kept *k = &st->kept[0];
	int i, fd = fcntl(f->l->spool_fd, F_DUPFD_CLOEXEC, 3);

	if (fd < 0)
		return;
	for (i = 1; i < TG_SPOOL_KEPT; i++)
		if (st->kept[i].used < k->used)
			k = &st->kept[i];
	kept_forget(k);
	snprintf(k->id, sizeof(k->id), "%s", f->l->id);
	snprintf(k->ptoken, sizeof(k->ptoken), "%s", f->ptoken);
	k->size = f->l->size;
	k->fd = fd;
	k->used = ++st->kept_uses;
}

/* A kept copy of f's payload handed to its lease: 0, or -1 (none). */
static int
kept_hand(struct tg_state *st, struct tg_payload_fetch *f)
{
	struct tg_spool_kept *k = kept_of(st, f);
	int fd;

	if (k == NULL || (fd = fcntl(k->fd, F_DUPFD_CLOEXEC, 3)) < 0)
		return -1;
	k->used = ++st->kept_uses;
	st->ctr.payload_reused++;
	f->l->spool_fd = fd;
	f->l->payload_path = tg_xasprintf("/proc/self/fd/%d", fd);
	f->got = f->l->size;
	f->hand(f);
	return 0;
}

static void
answer_chunk(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct tg_payload_fetch *f = (struct tg_payload_fetch *)q;
	const void *data = NULL;
	size_t len = 0;

	if (r != NULL && (tg_db_nrows(r) != 1 || (data = tg_db_blob(r, 0, 0, &len)) == NULL)) {
		q->res.rc = TG_STATE_ERROR;
		tg_err_set(&q->res.err, "the payload of webhook job %s is incomplete", f->l->id);
	} else if (r != NULL && write_all(f->l->spool_fd, data, len) != 0) {
		q->res.rc = TG_STATE_ERROR;
		tg_err_set(&q->res.err, "cannot spool the payload of %s", f->l->id);
	}
	if (r == NULL || q->res.rc != TG_STATE_OK) {
		f->hand(f);
		return;
	}
	f->got += (int64_t)len;
	f->n++;
	if (f->got < f->l->size) {
		next_chunk(f);
		return;
	}
	kept_add(f->st, f);
	f->hand(f);
}

static void
rows_drop(struct tg_state *st, const char *id)
{
	int i;

	for (i = 0; i < TG_SPOOL_KEPT; i++)
		if (st->kept[i].fd > 0 && strcmp(st->kept[i].id, id) == 0)
			kept_forget(&st->kept[i]);
}

static void
rows_fetch(struct tg_state *st, struct tg_payload_fetch *f)
{
	f->st = st;
	if (kept_hand(st, f) == 0)
		return;
	if (spool_open(st->spool, f->l) != 0) {
		f->q.res.rc = TG_STATE_ERROR;
		tg_err_set(&f->q.res.err, "cannot create a spool file in %s", st->spool);
		f->hand(f);
		return;
	}
	f->q.answer = answer_chunk;
	if (f->l->size > 0)
		next_chunk(f);
	else
		f->hand(f);
}

const struct tg_payload_store tg_state_payload_rows = {
	.open = rows_open,
	.append = rows_append,
	.commit = rows_commit,
	.abort = rows_abort,
	.set = rows_set,
	.usage = rows_usage,
	.fetch = rows_fetch,
	.drop = rows_drop,
};
