/*
 * sq_check.c - the SQLite backend's check (tg_state_check, state.h): what
 * its open would refuse, found without writing a byte, so that tidegate -t
 * refuses what the start refuses and the start refuses it before anything
 * is created. Each store's directory must be writable (the open creates
 * the file, its journal and the payload directory there), and a file that
 * exists must be a regular file the process may read and write that opens
 * read-only and passes SQLite's quick_check (every page read: a damaged
 * header, a truncated file or a garbage page) with a schema version this
 * tidegate knows. Access is judged with the effective ids, which the
 * start has already made the configured account's.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <sqlite3.h>

#include "sq.h"

/* A directory the open creates files in: missing is a problem unless
 * may_miss (the payload directory, which the open makes). */
static int
check_dir(const char *dir, int may_miss, struct tg_err *err)
{
	struct stat st;

	if (stat(dir, &st) != 0 && errno == ENOENT && may_miss)
		return 0;
	if (stat(dir, &st) != 0)
		tg_err_set(err, "directory %s %s", dir, errno == ENOENT ? "does not exist" :
		    strerror(errno));
	else if (!S_ISDIR(st.st_mode))
		tg_err_set(err, "%s is not a directory", dir);
	else if (faccessat(AT_FDCWD, dir, W_OK | X_OK, AT_EACCESS) != 0)
		tg_err_set(err, "directory %s is not writable: %s", dir, strerror(errno));
	else
		return 0;
	return -1;
}

/* 1: the file is there to be read, 0: missing (the open creates it), -1
 * with err. */
static int
check_file(const char *path, struct tg_err *err)
{
	struct stat st;

	if (stat(path, &st) != 0 && errno == ENOENT)
		return 0;
	if (stat(path, &st) != 0)
		tg_err_set(err, "%s: %s", path, strerror(errno));
	else if (!S_ISREG(st.st_mode))
		tg_err_set(err, "%s is not a regular file", path);
	else if (faccessat(AT_FDCWD, path, R_OK | W_OK, AT_EACCESS) != 0)
		tg_err_set(err, "%s is not writable: %s", path, strerror(errno));
	else
		return 1;
	return -1;
}

/* The first line of quick_check's report, or of the error that stopped
 * it; then the schema version against latest (0: not versioned). */
static int
check_content(const char *path, int latest, struct tg_err *err)
{
	sqlite3_stmt *s = NULL;
	sqlite3 *db = NULL;
	const char *text;
	int rc = -1, v;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY | SQLITE_OPEN_NOMUTEX,
	    NULL) != SQLITE_OK)
		goto sqlerr;
	sqlite3_busy_timeout(db, 5000);
	if (sqlite3_prepare_v2(db, "PRAGMA quick_check(1)", -1, &s, NULL) != SQLITE_OK ||
	    sqlite3_step(s) != SQLITE_ROW)
		goto sqlerr;
	text = (const char *)sqlite3_column_text(s, 0);
	if (text != NULL && strncmp(text, "*** in database ", 16) == 0 && strchr(text, '\n'))
		text = strchr(text, '\n') + 1;		/* which schema: always "main" */
	if (text == NULL || strcmp(text, "ok") != 0) {
		tg_err_set(err, "%s is damaged (SQLite's quick_check: %.*s)", path,
		    text ? (int)strcspn(text, "\n") : 0, text ? text : "");
		goto done;
	}
	sqlite3_finalize(s);
	if (sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL) != SQLITE_OK ||
	    sqlite3_step(s) != SQLITE_ROW)
		goto sqlerr;
	if ((v = sqlite3_column_int(s, 0)) > latest && latest > 0) {
		tg_err_set(err, "%s: schema version %d is newer than this tidegate's (%d)", path,
		    v, latest);
		goto done;
	}
	rc = 0;
	goto done;
sqlerr:
	tg_err_set(err, "%s: %s", path, db != NULL ? sqlite3_errmsg(db) : "out of memory");
done:
	sqlite3_finalize(s);
	sqlite3_close(db);
	return rc;
}

/* One store: its file's directory, the file, the payload directory (the
 * outbox's; NULL for the others). */
static void
check_store(const char *path, const char *payloads, int latest, enum tg_state_part part,
    struct tg_state_problems *out)
{
	const char *slash = strrchr(path, '/');
	struct tg_err *err = &out->err[part];
	char *dir;
	int there;

	dir = slash == NULL ? tg_xstrdup(".") : slash == path ? tg_xstrdup("/") :
	    tg_xstrndup(path, (size_t)(slash - path));
	if (check_dir(dir, 0, err) != 0 || (there = check_file(path, err)) < 0 ||
	    (payloads != NULL && check_dir(payloads, 1, err) != 0) ||
	    (there && check_content(path, latest, err) != 0))
		out->bad[part] = 1;
	free(dir);
}

int
tg_state_sq_check(const struct tg_state_opts *opts, struct tg_state_problems *out)
{
	char *payloads;
	int i;

	if (opts->outbox != NULL && opts->outbox->path != NULL) {
		payloads = opts->outbox->payload_dir != NULL ?
		    tg_xstrdup(opts->outbox->payload_dir) :
		    tg_xasprintf("%s.payloads", opts->outbox->path);
		check_store(opts->outbox->path, payloads, tg_state_sq_outbox_schema.nversions,
		    TG_STATE_PART_OUTBOX, out);
		free(payloads);
	}
	if (opts->runs != NULL && opts->runs->path != NULL)
		check_store(opts->runs->path, NULL, tg_state_sq_runs_schema.nversions,
		    TG_STATE_PART_RUNS, out);
	if (opts->owners != NULL && opts->owners->path != NULL)
		check_store(opts->owners->path, NULL, tg_state_sq_owners_schema.nversions,
		    TG_STATE_PART_OWNERS, out);
	for (i = 0; i < TG_STATE_NPARTS; i++)
		if (out->bad[i])
			return -1;
	return 0;
}
