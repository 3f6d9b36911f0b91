/*
 * store.c - the emulator's data_dir: one small JSON file per job
 * (exports/, imports/, runs/) plus emulator.json (meta.c). Each file is
 * written whole to a temporary name, fsynced, renamed over the old one and
 * the directory fsynced, so a kill -9 or a power loss leaves the old file
 * or the new one, never a torn one. export.c, import.c, sim.c and meta.c
 * write a job when it is created or changes and remove it when it expires;
 * tg_emu_new loads everything back before the listeners open.
 *
 * Writes are synchronous on the event loop, by choice: a file is a few
 * hundred bytes (an export request, a run summary, the clock), except an
 * import, which holds its submitted rows and is bounded by max_body. A
 * failed write is logged and the job lives on in memory only.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tidegate/json.h"
#include "tidegate/log.h"
#include "emu.h"

#define SUFFIX ".json"

static const char *const subdirs[] = { "exports", "imports", "runs" };

/* "<data_dir>[/<dir>]/<name><ext>", malloc'd. */
static char *
path_of(const struct tg_emu *emu, const char *dir, const char *name, const char *ext)
{
	return tg_xasprintf("%s%s%s/%s%s", emu->cfg->data_dir, dir ? "/" : "", dir ? dir : "",
	    name, ext);
}

static int
make_dir(const char *path, struct tg_err *err)
{
	if (mkdir(path, 0700) == 0 || errno == EEXIST)
		return 0;
	tg_err_set(err, "data_dir: cannot create %s: %s", path, strerror(errno));
	return -1;
}

int
emu_store_open(struct tg_emu *emu, struct tg_err *err)
{
	char *p;
	size_t i;
	int rc;

	if (make_dir(emu->cfg->data_dir, err) != 0)
		return -1;
	for (i = 0; i < TG_NELEM(subdirs); i++) {
		p = tg_xasprintf("%s/%s", emu->cfg->data_dir, subdirs[i]);
		rc = make_dir(p, err);
		free(p);
		if (rc != 0)
			return -1;
	}
	if (access(emu->cfg->data_dir, W_OK) != 0) {
		tg_err_set(err, "data_dir: %s is not writable: %s", emu->cfg->data_dir,
		    strerror(errno));
		return -1;
	}
	return 0;
}

static int
write_all(int fd, const unsigned char *buf, size_t len)
{
	ssize_t n;

	while (len > 0) {
		n = write(fd, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* fsync the directory so that the rename itself is durable. */
static void
sync_dir(const char *file)
{
	char *dir = tg_xstrdup(file), *slash = strrchr(dir, '/');
	int fd;

	if (slash != NULL)
		*slash = '\0';
	if ((fd = open(slash != NULL ? dir : ".", O_RDONLY | O_DIRECTORY)) >= 0) {
		fsync(fd);
		close(fd);
	}
	free(dir);
}

int
emu_store_put(struct tg_emu *emu, const char *dir, const char *name, yajl_gen g)
{
	char *tmp = path_of(emu, dir, name, ".tmp"), *dst = path_of(emu, dir, name, SUFFIX);
	const unsigned char *buf;
	size_t len;
	int fd, rc = -1;

	yajl_gen_get_buf(g, &buf, &len);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd >= 0) {
		rc = write_all(fd, buf, len) == 0 && fsync(fd) == 0 ? 0 : -1;
		if (close(fd) != 0)
			rc = -1;
	}
	if (rc == 0 && (rc = rename(tmp, dst)) == 0)
		sync_dir(dst);
	if (rc != 0) {
		tg_log(TG_LOG_WARN, "data_dir_write_failed", TG_LS("file", dst),
		    TG_LS("reason", strerror(errno)));
		unlink(tmp);
	}
	free(tmp);
	free(dst);
	return rc;
}

void
emu_store_del(struct tg_emu *emu, const char *dir, const char *name)
{
	char *p;

	if (emu->cfg->data_dir == NULL)
		return;
	p = path_of(emu, dir, name, SUFFIX);
	if (unlink(p) != 0 && errno != ENOENT)
		tg_log(TG_LOG_WARN, "data_dir_remove_failed", TG_LS("file", p),
		    TG_LS("reason", strerror(errno)));
	free(p);
}

/* The whole file parsed, or NULL (absent, unreadable or not JSON: logged). */
static yajl_val
read_json(const char *path)
{
	struct tg_err err;
	struct stat st;
	yajl_val v = NULL;
	char *buf = NULL;
	FILE *f = fopen(path, "rb");

	if (f == NULL)
		return NULL;
	if (fstat(fileno(f), &st) == 0 && st.st_size >= 0) {
		buf = tg_xmalloc((size_t)st.st_size + 1);
		if (fread(buf, 1, (size_t)st.st_size, f) == (size_t)st.st_size)
			v = tg_json_parse(buf, (size_t)st.st_size, &err);
		else
			tg_err_set(&err, "short read");
		if (v == NULL)
			tg_log(TG_LOG_WARN, "data_dir_unreadable", TG_LS("file", path),
			    TG_LS("reason", err.msg));
	}
	fclose(f);
	free(buf);
	return v;
}

yajl_val
emu_store_get(struct tg_emu *emu, const char *dir, const char *name)
{
	char *p = path_of(emu, dir, name, SUFFIX);
	yajl_val v = read_json(p);

	free(p);
	return v;
}

/* Load one directory entry: a job file goes to cb, a leftover .tmp (a write
 * cut short) is removed. */
static size_t
load_entry(struct tg_emu *emu, const char *dir, const char *fname, emu_store_cb cb)
{
	size_t len = strlen(fname), n = 0;
	char *name, *p;
	yajl_val v;

	if (len > 4 && strcmp(fname + len - 4, ".tmp") == 0) {
		p = tg_xasprintf("%s/%s/%s", emu->cfg->data_dir, dir, fname);
		unlink(p);
		free(p);
	}
	if (len <= strlen(SUFFIX) || strcmp(fname + len - strlen(SUFFIX), SUFFIX) != 0)
		return 0;
	name = tg_xstrndup(fname, len - strlen(SUFFIX));
	if ((v = emu_store_get(emu, dir, name)) != NULL && YAJL_IS_OBJECT(v)) {
		cb(emu, name, v);
		n = 1;
	} else {
		yajl_tree_free(v);
	}
	free(name);
	return n;
}

size_t
emu_store_load(struct tg_emu *emu, const char *dir, emu_store_cb cb)
{
	char *p = tg_xasprintf("%s/%s", emu->cfg->data_dir, dir);
	DIR *d = opendir(p);
	struct dirent *e;
	size_t n = 0;

	while (d != NULL && (e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n += load_entry(emu, dir, e->d_name, cb);
	if (d != NULL)
		closedir(d);
	free(p);
	return n;
}

yajl_val
emu_store_take(yajl_val obj, const char *key)
{
	yajl_val v = NULL;
	size_t i;

	for (i = 0; YAJL_IS_OBJECT(obj) && i < obj->u.object.len; i++) {
		if (strcmp(obj->u.object.keys[i], key) == 0) {
			v = obj->u.object.values[i];
			obj->u.object.values[i] = NULL;	/* yajl_tree_free skips NULL */
			break;
		}
	}
	return v;
}
