/*
 * sq_files.c - the payload store of the SQLite backend (../payload.h):
 * payload files in the payload directory beside the outbox's database,
 * "<id>.part" while a writer streams into it, "<id>.body" once committed
 * (fsync, rename, directory fsync, then the domain's statement makes the
 * job ready, on the writer thread in the same step), removed when the job
 * is delivered, gone or purged, and swept at open when no job needs them.
 * A payload of hundreds of MB never sits in memory: an append moves the
 * caller's evbuffer chains into its own buffer (no copy) and the writer
 * thread drains it into the file; the delivery maps the file per attempt.
 *
 * Every step that touches a file runs on the writer thread in FIFO order,
 * so appends and the commit after them arrive in the order given. A
 * writer given a quota checks each write there against the bytes the
 * outbox holds before it writes, so the disk never holds more: the
 * committed payloads of ready and dead jobs (summed from the database when
 * next needed after any change) and the payloads being written (the open
 * writers, kept here). One instance owns a SQLite outbox and only its
 * writer thread writes payloads, so the count is exact.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "tidegate/log.h"
#include "sq.h"
#include "../payload.h"
#include "../seam.h"

#define KEY(k)	((k) != NULL ? (k) : "")

/* A writer: its file is the writer thread's. */
struct fwriter {
	struct tg_state_payload h;
	TAILQ_ENTRY(fwriter) entry;	/* in files->writers while its file is open */
	struct sq *sq;
	char *part;
	int fd;				/* -1: none */
	int64_t written;		/* the writer thread's count */
};

struct sq_files {
	char *dir;
	TAILQ_HEAD(, fwriter) writers;	/* payloads being written */
	int held_valid;			/* the committed bytes below are summed */
	int64_t held_all;
	struct tg_map *held_by_key;	/* API key ("" for none) -> int64_t bytes */
};

static const struct tg_db_stmt job_state = { "files_state", TG_DB_OUTBOX, 0,
	"SELECT state FROM outbox_jobs WHERE id = $1", NULL };
/* Over the index of the jobs that hold bytes (outbox_schema.c, version 3),
 * not every job kept: the planner, without statistics, would take the
 * state index and read every dead job's row. */
static const struct tg_db_stmt held_sql = { "files_held", TG_DB_OUTBOX, 0,
	"SELECT coalesce(api_key, ''), sum(payload_size) FROM outbox_jobs"
	" INDEXED BY outbox_jobs_held"
	" WHERE state IN ('ready', 'dead') AND payload_size IS NOT NULL GROUP BY 1", NULL };

/* A statement of this file on c: its rows (the caller frees), or NULL. */
static struct sq_rows *
exec_on(struct sq_conn *c, const struct tg_db_stmt *s, const char *id, struct tg_err *err)
{
	struct tg_state_res res = { 0, { "" } };
	struct tg_db_q q;
	struct sq_rows *r;

	memset(&q, 0, sizeof(q));
	q.stmt = s;
	if (id != NULL)
		tg_db_text(&q, id);
	r = tg_state_sq_conn_exec(c, &q, &res);
	tg_db_params_free(&q);
	if (r == NULL && err != NULL)
		*err = res.err;
	return r;
}

/* The state of job id ("" for none), or NULL when SQLite failed. */
static char *
state_of(struct sq *sq, const char *id)
{
	struct sq_rows *r = exec_on(&sq->ob_w, &job_state, id, NULL);
	char *s = NULL;

	if (r != NULL)
		s = tg_xstrdup(r->nrow > 0 && r->cell[0].p != NULL ? r->cell[0].p : "");
	tg_state_sq_rows_free(r);
	return s;
}

static char *
body_path(const struct sq_files *f, const char *id)
{
	return tg_xasprintf("%s/%s.body", f->dir, id);
}

static void
body_remove(const struct sq_files *f, const char *id)
{
	char *p = body_path(f, id);

	if (unlink(p) != 0 && errno != ENOENT)
		tg_log(TG_LOG_WARN, "webhook_payload_unlink", TG_LS("webhook_id", id),
		    TG_LS("error", strerror(errno)));
	free(p);
}

/* ---- the bytes held (writer thread) ---- */

static int64_t
held_of(const struct sq_files *f, const char *key)
{
	const int64_t *n = tg_map_get(f->held_by_key, KEY(key));

	return n != NULL ? *n : 0;
}

static int
held_load(struct sq *sq, struct tg_err *err)
{
	struct sq_files *f = sq->files;
	struct sq_rows *r = exec_on(&sq->ob_w, &held_sql, NULL, err);
	int64_t *n;
	int i;

	if (r == NULL)
		return -1;
	tg_map_free(f->held_by_key);
	f->held_by_key = tg_map_new(free);
	f->held_all = 0;
	for (i = 0; i < r->nrow; i++) {
		n = tg_xmalloc(sizeof(*n));
		*n = r->cell[i * 2 + 1].i;
		tg_map_put(f->held_by_key, r->cell[i * 2].p != NULL ? r->cell[i * 2].p : "", n);
		f->held_all += *n;
	}
	tg_state_sq_rows_free(r);
	f->held_valid = 1;
	return 0;
}

/* Every job's bytes into *all, those of key's (NULL: none) into *mine. */
static int
usage_now(struct sq *sq, const char *key, int64_t *all, int64_t *mine, struct tg_err *err)
{
	struct sq_files *f = sq->files;
	struct fwriter *w;

	if (!f->held_valid && held_load(sq, err) != 0)
		return -1;
	*all = f->held_all;
	*mine = held_of(f, key);
	TAILQ_FOREACH(w, &f->writers, entry) {
		*all += w->written;
		if (strcmp(KEY(w->h.key), KEY(key)) == 0)
			*mine += w->written;
	}
	return 0;
}

/* 0 when n more bytes of w fit q; else res says why. */
static int
room(struct fwriter *w, const struct tg_outbox_quota *q, int64_t n, struct tg_state_res *res)
{
	int64_t all, mine;

	if (q->max_bytes <= 0 && q->key_max_bytes <= 0)
		return 0;
	res->rc = TG_STATE_ERROR;
	if (usage_now(w->sq, w->h.key, &all, &mine, &res->err) != 0)
		return -1;
	res->rc = TG_STATE_REFUSED;
	if (q->max_bytes > 0 && all + n > q->max_bytes)
		tg_err_set(&res->err, "webhook payloads would hold %lld bytes, over their cap of "
		    "%lld", (long long)(all + n), (long long)q->max_bytes);
	else if (q->key_max_bytes > 0 && mine + n > q->key_max_bytes)
		tg_err_set(&res->err, "the webhook payloads of the job's API key would hold %lld "
		    "bytes, over " TG_OUTBOX_QUOTA_KEY_WHY " of %lld", (long long)(mine + n),
		    (long long)q->key_max_bytes);
	else
		res->rc = TG_STATE_OK;
	return res->rc == TG_STATE_OK ? 0 : -1;
}

/* ---- writers ---- */

/* One operation on a writer: its typed callback and what it carries. */
struct fop {
	struct fwriter *w;
	tg_state_done_cb done;
	tg_state_payload_cb opened;
	tg_state_pair_cb pair;
	void *arg;
	struct evbuffer *buf;		/* an append's bytes */
	struct tg_outbox_quota q;	/* the writer's quota when it was asked */
	int64_t a, b;
	char *key;			/* usage's */
};

/* Close and remove w's file (writer thread, or the loop once it stopped). */
static void
writer_close(struct fwriter *w)
{
	if (w->fd < 0)
		return;
	close(w->fd);
	w->fd = -1;
	unlink(w->part);
	TAILQ_REMOVE(&w->sq->files->writers, w, entry);
}

static void
writer_free(struct fwriter *w)
{
	writer_close(w);
	tg_state_payload_head_free(&w->h);
	free(w->part);
	free(w);
}

static void
run_drop(void *arg)
{
	writer_free(arg);
}

static void
on_dropped(void *arg, int cancelled)
{
	if (cancelled)	/* the thread has stopped: nothing else uses the file now */
		writer_free(arg);
}

/* A writer nobody holds any more: freed on the writer thread, or here
 * once it has stopped. */
static void
writer_drop(struct fwriter *w)
{
	if (w == NULL)
		return;
	if (w->sq->closing || w->fd < 0)	/* no file: nothing of the thread's */
		writer_free(w);
	else
		tg_worker_submit(w->sq->w, run_drop, on_dropped, w);
}

static struct sq_op *
fop_new(struct sq *sq, sq_fn run, sq_fn answer, struct fop **out)
{
	struct sq_op *o = tg_state_sq_op_new(sq, SQ_OUTBOX, run, answer);

	o->in = *out = tg_xcalloc(1, sizeof(**out));
	return o;
}

static void
fop_free(struct sq_op *o)
{
	struct fop *f = o->in;

	if (f->buf != NULL)
		evbuffer_free(f->buf);
	free(f->key);
	free(f);
}

/* ---- open: the file is made by the first step that needs it ---- */

/* w's file open (writer thread): 0, or -1 with res set. */
static int
file_open(struct fwriter *w, struct tg_state_res *res)
{
	if (w->fd >= 0)
		return 0;
	if ((w->fd = open(w->part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
		res->rc = TG_STATE_ERROR;
		tg_err_set(&res->err, "cannot create %s: %s", w->part, strerror(errno));
		return -1;
	}
	TAILQ_INSERT_TAIL(&w->sq->files->writers, w, entry);
	return 0;
}

static void
files_open(struct tg_state *st, const char *id, const char *key, tg_state_payload_cb cb,
    void *arg)
{
	struct tg_state_res res = { TG_STATE_OK, { "" } };
	struct sq *sq = st->impl;
	struct fwriter *w = tg_xcalloc(1, sizeof(*w));

	tg_state_payload_head(&w->h, &tg_state_sq_files, st, id, key);
	w->sq = sq;
	w->fd = -1;
	w->part = tg_xasprintf("%s/%s.part", sq->files->dir, id);
	cb(&res, &w->h, arg);
}

/* ---- append ---- */

static void
run_append(struct sq_op *o)
{
	struct fop *f = o->in;
	struct fwriter *w = f->w;
	int n;

	if (file_open(w, &o->res) != 0 ||
	    room(w, &f->q, (int64_t)evbuffer_get_length(f->buf), &o->res) != 0)
		return;
	while (evbuffer_get_length(f->buf) > 0) {
		if ((n = evbuffer_write(f->buf, w->fd)) < 0) {
			if (errno == EINTR)
				continue;
			o->res.rc = TG_STATE_ERROR;
			tg_err_set(&o->res.err, "cannot write %s: %s", w->part, strerror(errno));
			return;
		}
		w->written += n;
	}
}

static void
answer_done(struct sq_op *o)
{
	struct fop *f = o->in;

	f->done(&o->res, f->arg);
}

static struct tg_state_op *
files_append(struct tg_state_payload *pw, struct evbuffer *buf, tg_state_done_cb cb,
    void *arg)
{
	struct fwriter *w = (struct fwriter *)pw;
	struct fop *f;
	struct sq_op *o = fop_new(w->sq, run_append, answer_done, &f);

	f->w = w;
	f->done = cb;
	f->arg = arg;
	f->q = w->h.q;
	f->buf = evbuffer_new();
	w->h.size += (int64_t)evbuffer_get_length(buf);
	evbuffer_add_buffer(f->buf, buf);
	o->keep = 1;
	o->cleanup = fop_free;
	return tg_state_sq_write(o);
}

/* ---- abort ---- */

static void
run_abort(struct sq_op *o)
{
	writer_close(((struct fop *)o->in)->w);
}

static void
answer_nothing(struct sq_op *o)
{
	(void)o;
}

static void
cleanup_writer(struct sq_op *o)
{
	writer_drop(((struct fop *)o->in)->w);
	fop_free(o);
}

static void
files_abort(struct tg_state_payload *pw)
{
	struct fwriter *w = (struct fwriter *)pw;
	struct fop *f;
	struct sq_op *o = fop_new(w->sq, run_abort, answer_nothing, &f);

	f->w = w;
	o->keep = 1;
	o->cleanup = cleanup_writer;
	(void)tg_state_sq_write(o);
}

/* ---- commit, set: the file in place, then the domain's statement ---- */

static int
fsync_dir(const char *dir)
{
	int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC), rc;

	if (fd < 0)
		return -1;
	rc = fsync(fd);
	close(fd);
	return rc;
}

/* fd's file (written as part) durable under job id's final name. */
static int
publish(struct sq_files *f, int fd, const char *part, const char *id, struct tg_state_res *res)
{
	char *final = body_path(f, id);
	int rc = -1;

	res->rc = TG_STATE_ERROR;
	if (fsync(fd) != 0)
		tg_err_set(&res->err, "cannot sync %s: %s", part, strerror(errno));
	else if (rename(part, final) != 0 || fsync_dir(f->dir) != 0)
		tg_err_set(&res->err, "cannot publish %s: %s", final, strerror(errno));
	else
		rc = res->rc = TG_STATE_OK;
	free(final);
	return rc;
}

/* Run the domain's query (o->in's) and keep the file only when its job
 * took it (the count in column col of the answer's first row). */
static void
run_query(struct sq_op *o, const char *id, int col)
{
	const struct sq_rows *r;

	tg_state_sq_db_run(o);
	r = o->p;
	if (o->res.rc != TG_STATE_OK || r == NULL || r->nrow < 1 || r->cell[col].i == 0)
		body_remove(o->sq->files, id);
	o->sq->files->held_valid = 0;
}

/* Bytes written to the fd directly count too: the file's own size. */
static void
run_commit(struct sq_op *o)
{
	struct tg_payload_commit *c = o->in;
	struct fwriter *w = (struct fwriter *)c->w;
	struct stat sb;

	if (file_open(w, &o->res) != 0)
		return;
	if (fstat(w->fd, &sb) == 0)
		w->written = sb.st_size;
	if (room(w, &w->h.q, 0, &o->res) != 0 ||
	    publish(w->sq->files, w->fd, w->part, w->h.id, &o->res) != 0) {
		writer_close(w);
		return;
	}
	c->q.par[2].i = w->written;	/* $3: the size */
	close(w->fd);
	w->fd = -1;
	TAILQ_REMOVE(&w->sq->files->writers, w, entry);
	run_query(o, w->h.id, 0);
}

static void
cleanup_commit(struct sq_op *o)
{
	struct tg_payload_commit *c = o->in;

	writer_drop((struct fwriter *)c->w);
	tg_state_sq_db_cleanup(o);
}

static struct tg_state_op *
files_commit(struct tg_payload_commit *c)
{
	struct fwriter *w = (struct fwriter *)c->w;
	struct sq_op *o = tg_state_sq_op_new(w->sq, SQ_OUTBOX, run_commit,
	    tg_state_sq_db_answer);

	o->in = c;
	o->keep = 1;
	o->cleanup = cleanup_commit;
	return tg_state_sq_write(o);
}

/* Write len bytes of data (borrowed) to fd: 0, or -1 with errno. */
static int
write_all(int fd, const char *data, size_t len)
{
	ssize_t n;

	while (len > 0) {
		if ((n = write(fd, data, len)) < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		data += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The bytes of the query's $3 as job $1's file, only while it waits (a
 * ready job's file is never overwritten); then the query. */
static void
run_set(struct sq_op *o)
{
	struct tg_db_q *q = o->in;
	const char *id = q->par[0].p;
	char *st = state_of(o->sq, id), *part = tg_xasprintf("%s/%s.part", o->sq->files->dir, id);
	int fd = -1;

	if (st != NULL && strcmp(st, "waiting") == 0) {
		fd = open(part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd < 0 || write_all(fd, q->par[2].p, q->par[2].len) != 0 ||
		    publish(o->sq->files, fd, part, id, &o->res) != 0) {
			o->res.rc = TG_STATE_ERROR;
			tg_err_set(&o->res.err, "cannot write %s: %s", part, strerror(errno));
			unlink(part);
		}
	}
	if (fd >= 0)
		close(fd);
	if (o->res.rc == TG_STATE_OK && fd >= 0)
		run_query(o, id, 1);
	else if (o->res.rc == TG_STATE_OK)
		tg_state_sq_db_run(o);	/* not waiting (or none): the answer says */
	free(st);
	free(part);
}

static struct tg_state_op *
files_set(struct tg_state *st, struct tg_db_q *q)
{
	struct sq_op *o = tg_state_sq_op_new(st->impl, SQ_OUTBOX, run_set,
	    tg_state_sq_db_answer);

	o->in = q;
	o->cleanup = tg_state_sq_db_cleanup;
	return tg_state_sq_write(o);
}

/* ---- usage, a lease's file, a payload no longer kept ---- */

static void
run_usage(struct sq_op *o)
{
	struct fop *f = o->in;

	if (usage_now(o->sq, f->key, &f->a, &f->b, &o->res.err) != 0)
		o->res.rc = TG_STATE_ERROR;
}

static void
answer_usage(struct sq_op *o)
{
	struct fop *f = o->in;
	int ok = o->res.rc == TG_STATE_OK;

	f->pair(&o->res, ok ? f->a : 0, ok ? f->b : 0, f->arg);
}

/* On the writer thread: the payloads being written are counted there. */
static struct tg_state_op *
files_usage(struct tg_state *st, const char *key, tg_state_pair_cb cb, void *arg)
{
	struct fop *f;
	struct sq_op *o = fop_new(st->impl, run_usage, answer_usage, &f);

	f->pair = cb;
	f->arg = arg;
	f->key = key != NULL ? tg_xstrdup(key) : NULL;
	o->cleanup = fop_free;
	return tg_state_sq_write(o);
}

static void
files_fetch(struct tg_state *st, struct tg_payload_fetch *f)
{
	f->l->payload_path = body_path(((struct sq *)st->impl)->files, f->l->id);
	f->hand(f);
}

struct gone {
	struct sq *sq;
	char id[TG_WEBHOOK_ID_LEN];
};

static void
run_gone(void *arg)
{
	struct gone *g = arg;

	body_remove(g->sq->files, g->id);
	g->sq->files->held_valid = 0;
}

static void
on_gone(void *arg, int cancelled)
{
	(void)cancelled;	/* a crash between leaves a file the next open sweeps */
	free(arg);
}

/* After the statement that said so: a crash in between leaves a file the
 * next open sweeps. */
static void
files_drop(struct tg_state *st, const char *id)
{
	struct gone *g = tg_xcalloc(1, sizeof(*g));

	g->sq = st->impl;
	snprintf(g->id, sizeof(g->id), "%s", id);
	tg_worker_submit(g->sq->w, run_gone, on_gone, g);
}

const struct tg_payload_store tg_state_sq_files = {
	.open = files_open,
	.append = files_append,
	.commit = files_commit,
	.abort = files_abort,
	.set = files_set,
	.usage = files_usage,
	.fetch = files_fetch,
	.drop = files_drop,
};

/* ---- open and close ---- */

static int
has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n > m && strcmp(s + n - m, suffix) == 0;
}

/* Whether the job of file name (a ".body") still needs it. */
static int
needed(struct sq *sq, const char *name)
{
	char id[TG_WEBHOOK_ID_LEN], *st;
	size_t n = strlen(name) - strlen(".body");
	int keep;

	if (n >= sizeof(id))
		return 0;
	memcpy(id, name, n);
	id[n] = '\0';
	if (n <= 4 || strncmp(id, "msg_", 4) != 0 || strspn(id + 4, "0123456789abcdef") != n - 4)
		return 1;	/* not one of ours: leave it */
	if ((st = state_of(sq, id)) == NULL)
		return 1;	/* unsure: keep it */
	keep = strcmp(st, "waiting") == 0 || strcmp(st, "ready") == 0 || strcmp(st, "dead") == 0;
	free(st);
	return keep;
}

/* Remove the files of the payload directory that no job needs. */
static int
sweep(struct sq *sq, struct tg_err *err)
{
	DIR *d = opendir(sq->files->dir);
	struct dirent *e;
	char *path;

	if (d == NULL) {
		tg_err_set(err, "outbox: cannot read %s: %s", sq->files->dir, strerror(errno));
		return -1;
	}
	while ((e = readdir(d)) != NULL) {
		if (!has_suffix(e->d_name, ".part") &&
		    !(has_suffix(e->d_name, ".body") && !needed(sq, e->d_name)))
			continue;
		path = tg_xasprintf("%s/%s", sq->files->dir, e->d_name);
		unlink(path);
		free(path);
	}
	closedir(d);
	return 0;
}

int
tg_state_sq_files_open(struct sq *sq, const struct tg_outbox_opts *o, struct tg_err *err)
{
	struct sq_files *f = tg_xcalloc(1, sizeof(*f));

	sq->files = f;
	TAILQ_INIT(&f->writers);
	f->dir = o->payload_dir != NULL ? tg_xstrdup(o->payload_dir) :
	    tg_xasprintf("%s.payloads", o->path);
	if (mkdir(f->dir, 0700) != 0 && errno != EEXIST) {
		tg_err_set(err, "outbox: cannot create %s: %s", f->dir, strerror(errno));
		return -1;
	}
	return sweep(sq, err);
}

void
tg_state_sq_files_close(struct sq *sq)
{
	struct sq_files *f = sq->files;

	if (f == NULL)
		return;
	tg_map_free(f->held_by_key);
	free(f->dir);
	free(f);
	sq->files = NULL;
}
