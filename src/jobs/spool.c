/*
 * spool.c - a final poll answer too large to hold in memory (an export
 * over poll.cache_max_body), written once to a file in poll.spool_dir and
 * streamed from there to every caller of its poll entry, as nginx's
 * proxy_cache_lock serves waiters from one temporary file.
 *
 * Called by poll.c: it creates the spool when a shared fetch outgrows
 * poll.cache_max_body, appends the vendor's bytes as they arrive, ends it,
 * and hands callers to jobs_spool_serve (also while the file is still being
 * written: a reader that catches up waits for the next append).
 * jobs_spool_forget drops a request's reader when the request ends.
 *
 * Writes and reads run on the event loop: each append writes the piece the
 * vendor connection just delivered (tens of KB, into the page cache, no
 * fsync), and each reader reads one SPOOL_CHUNK with pread only when its
 * client has taken the previous one (the evhttp write callback), so memory
 * is one chunk per reader whatever the file's size. The file is removed
 * when its poll entry drops it (expiry, eviction, any error); the bytes
 * go when the last reader closes its copy of the descriptor.
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
#include <event2/event.h>
#include <event2/http.h>

#include "tidegate/clock.h"
#include "tidegate/ids.h"
#include "tidegate/log.h"
#include "jobs_int.h"

#define SPOOL_CHUNK (64 * 1024)
#define SPOOL_PREFIX "tg-spool-"

struct jobs_spool_rd {
	struct jobs_spool *s;
	struct gw_req *r;
	int64_t off;
	int sending;		/* a chunk is with the client: wait for its drain */
	struct event *ev;	/* pump: from the loop, never inside a callback */
	TAILQ_ENTRY(jobs_spool_rd) next;
};

struct jobs_spool {
	struct gw *gw;
	struct jobs_spool_stats *st;
	char *path;		/* NULL once removed */
	int fd;
	int refs;		/* the entry's, plus one per reader */
	int status, done, failed;
	char *ctype;
	int64_t size;
	TAILQ_HEAD(, jobs_spool_rd) readers;
};

static void
spool_remove(struct jobs_spool *s)
{
	if (s->path == NULL)
		return;
	(void)unlink(s->path);
	free(s->path);
	s->path = NULL;
}

struct jobs_spool *
jobs_spool_new(struct gw *gw, const char *dir, int status, const char *ctype,
    struct jobs_spool_stats *st, struct tg_err *err)
{
	struct jobs_spool *s = tg_xcalloc(1, sizeof(*s));
	char id[TG_UUID_LEN];

	tg_id_uuid4(id);
	s->path = tg_xasprintf("%s/" SPOOL_PREFIX "%s", dir, id);
	s->fd = open(s->path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (s->fd < 0) {
		tg_err_set(err, "spool file in %s: %s", dir, strerror(errno));
		free(s->path);
		free(s);
		return NULL;
	}
	s->gw = gw;
	s->st = st;
	s->refs = 1;
	s->status = status;
	s->ctype = tg_xstrdup(ctype ? ctype : "application/json");
	TAILQ_INIT(&s->readers);
	st->files++;
	return s;
}

static void
spool_free(struct jobs_spool *s)
{
	spool_remove(s);
	close(s->fd);
	s->st->bytes -= s->size;
	s->st->files--;
	free(s->ctype);
	free(s);
}

static void
wake_readers(struct jobs_spool *s)
{
	struct jobs_spool_rd *rd;

	TAILQ_FOREACH(rd, &s->readers, next)
		if (!rd->sending || s->failed)
			event_active(rd->ev, EV_TIMEOUT, 0);
}

static void
spool_fail(struct jobs_spool *s, const char *why)
{
	if (s->failed)
		return;
	s->failed = 1;
	tg_log(TG_LOG_WARN, "spool_failed", TG_LS("reason", why), TG_LI("bytes", s->size));
	spool_remove(s);
	wake_readers(s);
}

int
jobs_spool_append(struct jobs_spool *s, struct evbuffer *buf)
{
	size_t len = evbuffer_get_length(buf);
	int n;

	if (s->failed)
		return -1;
	if (s->st->bytes + (int64_t)len > s->st->max) {
		evbuffer_drain(buf, len);
		spool_fail(s, "poll.spool_max_bytes reached");
		return -1;
	}
	while (evbuffer_get_length(buf) > 0) {
		n = evbuffer_write(buf, s->fd);
		if (n <= 0 && errno != EINTR) {
			evbuffer_drain(buf, evbuffer_get_length(buf));
			spool_fail(s, strerror(errno));
			return -1;
		}
		if (n > 0) {
			s->size += n;
			s->st->bytes += n;
		}
	}
	wake_readers(s);
	return 0;
}

void
jobs_spool_end(struct jobs_spool *s, int ok)
{
	if (!ok) {
		spool_fail(s, "the vendor's answer was cut short");
		return;
	}
	s->done = 1;
	wake_readers(s);
}

static void
spool_unref(struct jobs_spool *s)
{
	if (--s->refs == 0)
		spool_free(s);
}

void
jobs_spool_unref(struct jobs_spool *s)
{
	if (s == NULL)
		return;
	spool_remove(s);
	if (!s->done)
		spool_fail(s, "dropped before it was whole");
	spool_unref(s);
}

static void
reader_free(struct jobs_spool_rd *rd)
{
	struct jobs_spool *s = rd->s;

	TAILQ_REMOVE(&s->readers, rd, next);
	jobs_req_of(rd->r)->spool_rd = NULL;
	event_free(rd->ev);
	free(rd);
	spool_unref(s);
}

void
jobs_spool_forget(struct jobs_req *q)
{
	if (q->spool_rd != NULL)
		reader_free(q->spool_rd);
}

static void
on_client_drained(struct evhttp_connection *conn, void *arg)
{
	struct jobs_spool_rd *rd = arg;

	rd->sending = 0;
	event_active(rd->ev, EV_TIMEOUT, 0);
}

/* Send the next chunk, wait for more bytes, or end the reply. */
static void
on_pump(evutil_socket_t fd, short what, void *arg)
{
	struct jobs_spool_rd *rd = arg;
	struct jobs_spool *s = rd->s;
	struct gw_req *r = rd->r;
	int64_t avail = s->size - rd->off;
	struct evbuffer *b;
	struct evbuffer_iovec v;
	ssize_t n;
	int failed;

	if (r->req == NULL)
		return;		/* the client went; finish() forgets the reader */
	if (s->failed || (avail == 0 && s->done)) {
		failed = s->failed;
		reader_free(rd);	/* may free s */
		gw_req_reply_end(r, failed);
		return;
	}
	if (avail == 0 || rd->sending)
		return;		/* caught up with the writer, or the client is busy */
	b = evbuffer_new();
	if (evbuffer_reserve_space(b, SPOOL_CHUNK, &v, 1) < 1)
		abort();
	n = pread(s->fd, v.iov_base, avail < SPOOL_CHUNK ? (size_t)avail : SPOOL_CHUNK,
	    rd->off);
	if (n <= 0) {
		evbuffer_free(b);
		spool_fail(s, n < 0 ? strerror(errno) : "spool file shorter than written");
		return;
	}
	v.iov_len = (size_t)n;
	evbuffer_commit_space(b, &v, 1);
	rd->off += n;
	r->bytes += (uint64_t)n;
	rd->sending = 1;
	evhttp_send_reply_chunk_with_cb(r->req, b, on_client_drained, rd);
	evbuffer_free(b);
}

void
jobs_spool_serve(struct jobs_spool *s, struct gw_req *r, const char *how)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(r->req);
	struct jobs_spool_rd *rd = tg_xcalloc(1, sizeof(*rd));
	char len[24];

	rd->s = s;
	rd->r = r;
	rd->ev = event_new(s->gw->base, -1, 0, on_pump, rd);
	s->refs++;
	TAILQ_INSERT_TAIL(&s->readers, rd, next);
	jobs_req_of(r)->spool_rd = rd;
	evhttp_add_header(h, "Content-Type", s->ctype);
	evhttp_add_header(h, "X-Tidegate-Poll", how);
	if (s->done) {
		snprintf(len, sizeof(len), "%lld", (long long)s->size);
		evhttp_add_header(h, "Content-Length", len);
	}
	r->upstream_status = s->status;
	r->origin = how;
	gw_req_reply_start(r, s->status);
	event_active(rd->ev, EV_TIMEOUT, 0);
}

void
jobs_spool_dir_prepare(const char *dir)
{
	struct dirent *d;
	DIR *dp;
	char *p;
	int n = 0;

	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		tg_log(TG_LOG_WARN, "spool_dir", TG_LS("dir", dir), TG_LS("error", strerror(errno)));
	if ((dp = opendir(dir)) == NULL)
		return;
	while ((d = readdir(dp)) != NULL) {
		if (strncmp(d->d_name, SPOOL_PREFIX, strlen(SPOOL_PREFIX)) != 0)
			continue;
		p = tg_xasprintf("%s/%s", dir, d->d_name);
		n += unlink(p) == 0;
		free(p);
	}
	closedir(dp);
	if (n > 0)
		tg_log(TG_LOG_INFO, "spool_leftovers_removed", TG_LS("dir", dir), TG_LI("files", n));
}
