/*
 * backend.c - the SQLite state backend's handle: open and close (two
 * connections per configured store: the loop reads on one, the writer
 * thread commits on the other) and its vtable for the seam
 * (src/state/state.c); the operation records are sq_op.c's.
 *
 * SQLite is used in multi-thread mode (SQLITE_OPEN_NOMUTEX): each
 * connection is used by one thread at a time. The write connections are
 * opened here on the loop before the writer thread exists and touched only
 * by it afterwards; the worker's queue lock orders the hand-over. The
 * library must be built thread-safe (sqlite3_threadsafe() != 0), checked
 * at open.
 */
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "sq.h"
#include "../payload.h"

static void
stores_close(struct sq *sq)
{
	tg_state_sq_conn_close(&sq->ob_r);
	tg_state_sq_conn_close(&sq->ob_w);
	tg_state_sq_files_close(sq);
	tg_state_sq_conn_close(&sq->runs_r);
	tg_state_sq_conn_close(&sq->runs_w);
	tg_state_sq_conn_close(&sq->own_r);
	tg_state_sq_conn_close(&sq->own_w);
}

/* The outbox: its connections (a commit fsynced unless sync_normal: it
 * survives power loss, not only a killed process) and payload files. */
static int
outbox_open(struct sq *sq, const struct tg_outbox_opts *o, struct tg_err *err)
{
	if (o->path == NULL || *o->path == '\0') {
		tg_err_set(err, "outbox: no database path");
		return -1;
	}
	if (tg_state_sq_store_open(&sq->ob_w, &sq->ob_r, o->path, &tg_state_sq_outbox_schema,
	    o->sync_normal, err) != 0)
		return -1;
	return tg_state_sq_files_open(sq, o, err);
}

static int
stores_open(struct sq *sq, const struct tg_state_opts *opts, struct tg_err *err)
{
	if (opts->outbox != NULL && outbox_open(sq, opts->outbox, err) != 0)
		return -1;
	if (opts->runs != NULL && tg_state_sq_store_open(&sq->runs_w, &sq->runs_r,
	    opts->runs->path, &tg_state_sq_runs_schema, opts->runs->sync_normal, err) != 0)
		return -1;
	if (opts->owners != NULL && tg_state_sq_store_open(&sq->own_w, &sq->own_r,
	    opts->owners->path, &tg_state_sq_owners_schema, 1, err) != 0)
		return -1;
	return 0;
}

static void *
sq_open(struct event_base *base, const struct tg_state_opts *opts,
    const struct tg_db_list *stmts, struct tg_err *err)
{
	struct sq *sq;

	(void)stmts;	/* prepared on first use, per connection */
	if (!sqlite3_threadsafe()) {
		tg_err_set(err, "state: this SQLite library is built without thread support");
		return NULL;
	}
	sq = tg_xcalloc(1, sizeof(*sq));
	sq->be = &tg_state_sqlite_backend;
	if ((sq->w = tg_worker_new(base, err)) == NULL || stores_open(sq, opts, err) != 0) {
		tg_worker_free(sq->w);
		stores_close(sq);
		free(sq);
		return NULL;
	}
	return sq;
}

/* The worker stops first (pending operations answer UNAVAILABLE), then
 * the connections close on the loop: nothing else uses them by then. */
static void
sq_close(void *impl)
{
	struct sq *sq = impl;

	sq->closing = 1;
	tg_worker_free(sq->w);
	stores_close(sq);
	free(sq);
}

const struct tg_state_backend tg_state_sqlite_backend = {
	.name = "sqlite",
	.db = &tg_state_sq_db,
	.payloads = &tg_state_sq_files,
	.open = sq_open,
	.close = sq_close,
	.check = tg_state_sq_check,
	.cancel = tg_state_sq_cancel,
};
