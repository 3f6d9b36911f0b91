/*
 * outbox_payload.c - payload files beside the database: "<id>.part" while the
 * gateway streams an export into it, "<id>.body" once committed (fsync,
 * rename, directory fsync, then the job turns ready in SQLite), removed
 * when the job is delivered, gone or purged, and swept at open when no
 * job needs them. Called by the gateway (writer API), lease.c, admin.c
 * and outbox.c.
 *
 * A payload of hundreds of MB never sits in memory: the writer drains the
 * gateway's buffers into the file and the delivery maps it per attempt.
 * A writer given a quota checks each write against the bytes the outbox
 * holds (outbox_quota.c) before it writes, so the disk never holds more.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "tidegate/log.h"
#include "tidegate/outbox.h"
#include "outbox_db.h"

char *
tg_state_ob_payload_path(const struct tg_outbox *ob, const char *id)
{
	return tg_xasprintf("%s/%s.body", ob->dir, id);
}

void
tg_state_ob_payload_remove(const struct tg_outbox *ob, const char *id)
{
	char *p = tg_state_ob_payload_path(ob, id);

	if (unlink(p) != 0 && errno != ENOENT)
		tg_log(TG_LOG_WARN, "webhook_payload_unlink", TG_LS("webhook_id", id),
		    TG_LS("error", strerror(errno)));
	free(p);
}

/* Our ids only ("msg_" and hex): they become file names. */
static int
id_valid(const char *id)
{
	size_t n = id ? strlen(id) : 0;

	return n > 4 && n < TG_WEBHOOK_ID_LEN && strncmp(id, "msg_", 4) == 0 &&
	    strspn(id + 4, "0123456789abcdef") == n - 4;
}

struct tg_outbox_payload *
tg_outbox_payload_open(struct tg_outbox *ob, const char *id, int *rc, struct tg_err *err)
{
	struct tg_outbox_payload *p = NULL;
	int st = id_valid(id) ? tg_state_ob_job_state(ob, id, err) : TG_OUTBOX_NOT_FOUND;

	if (st == TG_OUTBOX_NOT_FOUND)
		tg_err_set(err, "no webhook job %s", id_valid(id) ? id : "(malformed id)");
	else if (st >= 0 && st != TG_OUTBOX_WAITING) {
		tg_err_set(err, "webhook job %s is %s, not waiting for a payload", id,
		    tg_outbox_state_str(st));
		st = TG_OUTBOX_CONFLICT;
	}
	if (st != TG_OUTBOX_WAITING)
		goto done;
	p = tg_xcalloc(1, sizeof(*p));
	p->ob = ob;
	snprintf(p->id, sizeof(p->id), "%s", id);
	p->part = tg_xasprintf("%s/%s.part", ob->dir, id);
	if ((p->fd = open(p->part, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600)) < 0) {
		tg_err_set(err, "cannot create %s: %s", p->part, strerror(errno));
		free(p->part);
		free(p);
		p = NULL;
		st = -1;
	} else {
		p->key = tg_state_ob_job_key(ob, id);
		TAILQ_INSERT_TAIL(&ob->writers, p, entry);
	}
done:
	if (rc != NULL)
		*rc = p != NULL ? 0 : st;
	return p;
}

void
tg_outbox_payload_limit(struct tg_outbox_payload *p, const struct tg_outbox_quota *q)
{
	p->q = *q;
}

int
tg_outbox_payload_fd(const struct tg_outbox_payload *p)
{
	return p->fd;
}

int
tg_outbox_payload_append(struct tg_outbox_payload *p, const void *data, size_t n,
    struct tg_err *err)
{
	const char *c = data;
	ssize_t w;
	int rc;

	if ((rc = tg_state_ob_room(p, (int64_t)n, err)) != 0)
		return rc;
	while (n > 0) {
		if ((w = write(p->fd, c, n)) < 0) {
			if (errno == EINTR)
				continue;
			tg_err_set(err, "cannot write %s: %s", p->part, strerror(errno));
			return -1;
		}
		c += w;
		n -= (size_t)w;
		p->size += w;
	}
	return 0;
}

int
tg_outbox_payload_write(struct tg_outbox_payload *p, struct evbuffer *buf, struct tg_err *err)
{
	int w;

	if ((w = tg_state_ob_room(p, (int64_t)evbuffer_get_length(buf), err)) != 0)
		return w;
	while (evbuffer_get_length(buf) > 0) {
		if ((w = evbuffer_write(buf, p->fd)) < 0) {
			if (errno == EINTR)
				continue;
			tg_err_set(err, "cannot write %s: %s", p->part, strerror(errno));
			return -1;
		}
		p->size += w;
	}
	return 0;
}

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

/* The file durable under its final name: fsync, rename, fsync the directory. */
static int
publish(struct tg_outbox_payload *p, struct tg_err *err)
{
	char *final = tg_state_ob_payload_path(p->ob, p->id);
	struct stat st;
	int rc = -1;

	/* The file's own size: the caller may have written to the fd directly. */
	if (fstat(p->fd, &st) == 0)
		p->size = st.st_size;
	if (fsync(p->fd) != 0 || close(p->fd) != 0) {
		p->fd = -1;
		tg_err_set(err, "cannot sync %s: %s", p->part, strerror(errno));
		goto done;
	}
	p->fd = -1;
	if (rename(p->part, final) != 0 || fsync_dir(p->ob->dir) != 0) {
		tg_err_set(err, "cannot publish %s: %s", final, strerror(errno));
		goto done;
	}
	rc = 0;
done:
	free(final);
	return rc;
}

static int
mark_ready(struct tg_outbox_payload *p, int64_t now_ms, struct tg_err *err)
{
	struct tg_outbox *ob = p->ob;
	sqlite3_stmt *s = tg_state_ob_stmt(ob, S_SET_READY);

	sqlite3_bind_text(s, 1, p->id, -1, SQLITE_STATIC);
	sqlite3_bind_int64(s, 2, p->size);
	sqlite3_bind_int64(s, 3, now_ms);
	sqlite3_bind_int64(s, 4, now_ms + ob->rules.schedule[0]);
	if (tg_state_ob_step_done(ob, s, err) != 0)
		return -1;
	if (sqlite3_changes(ob->db) != 1) {
		tg_err_set(err, "webhook job %s is no longer waiting", p->id);
		return TG_OUTBOX_CONFLICT;
	}
	return 0;
}

static void
payload_free(struct tg_outbox_payload *p)
{
	if (p->fd >= 0)
		close(p->fd);
	unlink(p->part);
	TAILQ_REMOVE(&p->ob->writers, p, entry);
	free(p->key);
	free(p->part);
	free(p);
}

/* Bytes written to the fd directly count too: the file's own size. */
static int
fits(struct tg_outbox_payload *p, struct tg_err *err)
{
	struct stat st;

	if (fstat(p->fd, &st) == 0)
		p->size = st.st_size;
	return tg_state_ob_room(p, 0, err);
}

int
tg_outbox_payload_commit(struct tg_outbox_payload *p, int64_t now_ms, struct tg_err *err)
{
	struct tg_outbox *ob = p->ob;
	int rc;

	if ((rc = fits(p, err)) == 0 && (rc = publish(p, err)) == 0 &&
	    (rc = mark_ready(p, now_ms, err)) != 0)
		tg_state_ob_payload_remove(ob, p->id);
	if (rc == 0)
		tg_state_ob_held_add(ob, p->key, p->size);
	payload_free(p);
	return rc;
}

void
tg_outbox_payload_abort(struct tg_outbox_payload *p)
{
	if (p != NULL)
		payload_free(p);
}

int
tg_outbox_payload_set(struct tg_outbox *ob, const char *id, const void *data, size_t n,
    int64_t now_ms, struct tg_err *err)
{
	struct tg_outbox_payload *p;
	int rc;

	if ((p = tg_outbox_payload_open(ob, id, &rc, err)) == NULL)
		return rc;
	if (tg_outbox_payload_append(p, data, n, err) != 0) {
		tg_outbox_payload_abort(p);
		return -1;
	}
	return tg_outbox_payload_commit(p, now_ms, err);
}

/* Whether the job of a ".body" file still needs it. */
static int
needed(struct tg_outbox *ob, const char *name)
{
	char id[TG_WEBHOOK_ID_LEN];
	size_t n = strlen(name) - strlen(".body");
	int st;

	if (n >= sizeof(id))
		return 0;
	memcpy(id, name, n);
	id[n] = '\0';
	if (!id_valid(id))
		return 1;	/* not one of ours: leave it */
	st = tg_state_ob_job_state(ob, id, NULL);
	return st == TG_OUTBOX_WAITING || st == TG_OUTBOX_READY || st == TG_OUTBOX_DEAD ||
	    st == -1;
}

static int
has_suffix(const char *s, const char *suffix)
{
	size_t n = strlen(s), m = strlen(suffix);

	return n > m && strcmp(s + n - m, suffix) == 0;
}

int
tg_state_ob_payload_sweep(struct tg_outbox *ob, struct tg_err *err)
{
	DIR *d = opendir(ob->dir);
	struct dirent *e;
	char *path;

	if (d == NULL) {
		tg_err_set(err, "outbox: cannot read %s: %s", ob->dir, strerror(errno));
		return -1;
	}
	while ((e = readdir(d)) != NULL) {
		if (!has_suffix(e->d_name, ".part") &&
		    !(has_suffix(e->d_name, ".body") && !needed(ob, e->d_name)))
			continue;
		path = tg_xasprintf("%s/%s", ob->dir, e->d_name);
		unlink(path);
		free(path);
	}
	closedir(d);
	return 0;
}
