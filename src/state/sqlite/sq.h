/*
 * sq.h - private contract between the files of the SQLite state backend:
 * the backend's handle (two connections per store: one read on the loop,
 * one write on the writer thread), the operation record a domain's query
 * or a payload file's work becomes, and the machinery that answers it
 * (sq_op.c). The driver under the domains written once (sq_db.c,
 * sq_conn.c) and the payload files (sq_files.c) build operations on it.
 *
 * Threads: a read operation runs and answers on the loop before its call
 * returns, on the read connections. A write operation is queued on the
 * writer thread (src/core/worker.c, FIFO), runs there on the write
 * connections, and answers later on the loop. Only run touches the write
 * connections; answer and cleanup run on the loop.
 */
#ifndef TG_STATE_SQ_H
#define TG_STATE_SQ_H

#include <stdint.h>

#include "tidegate/map.h"
#include "tidegate/state.h"
#include "tidegate/worker.h"
#include "../backend.h"
#include "../db.h"

struct sq_op;
struct sq_files;
struct sqlite3;

/** One connection of the driver (sq_conn.c). */
struct sq_conn {
	struct sqlite3 *db;		/* NULL: not open */
	struct tg_map *prep;		/* statement name -> its prepared statements */
};

/** A store's schema: versions[v] (NULL-terminated) brings it from v to
 * v + 1; on_open (NULL: none) runs at each open of its writer. */
struct sq_schema {
	const char *name;
	int nversions;
	const char *const *const *versions;
	const char *on_open;
	/** Set up each connection before the migration (SQL functions); 0,
	 * or -1. NULL: nothing. */
	int (*setup)(struct sqlite3 *db);
};

/** Rows copied out of a statement (sq_conn.c). */
struct sq_cell {
	enum tg_db_type type;	/* NULL, INT, or BLOB (text and blobs) */
	int64_t i;		/* INT */
	char *p;		/* the bytes (an INT's text), NUL-terminated; NULL: NULL */
	size_t len;
};
struct sq_block;
/* A small result (a lookup's row) takes one allocation: its first cells
 * and bytes are inline; more go to the heap (cells) and to blocks that
 * never move (bytes). */
struct sq_rows {
	int nrow, ncol, cap;
	struct sq_cell *cell;	/* row-major: cell0, or on the heap */
	int64_t changes;
	struct sq_block *more;	/* bytes past small[] */
	size_t used;		/* of small[] */
	struct sq_cell cell0[8];
	char small[256];
};

/** What an operation needs configured. */
enum sq_domain { SQ_NONE, SQ_OUTBOX, SQ_RUNS, SQ_OWNERS };

struct sq {
	const struct tg_state_backend *be;	/* this backend's vtable (backend.c) */
	struct tg_worker *w;			/* the writer thread */
	struct sq_conn ob_r, ob_w;		/* the webhook outbox: read / write */
	struct sq_files *files;			/* its payload files (sq_files.c) */
	struct sq_conn own_r, own_w;		/* ownership: read / write */
	struct sq_conn runs_r, runs_w;		/* run registry and sweeps */
	int closing;				/* the writer thread is stopping */
};

typedef void (*sq_fn)(struct sq_op *o);

/** One operation; freed by the machinery after answer and cleanup. */
struct sq_op {
	struct tg_state_op pub;
	struct sq *sq;
	enum sq_domain dom;
	struct tg_job *job;		/* while queued */
	/* set by answer: o goes on with another step (its handle kept) */
	struct tg_state_op *(*next)(struct sq_op *o);
	int cancelled;			/* no callback */
	int keep;			/* runs even when cancelled (payload writes) */
	sq_fn run;			/* the work; sets res */
	sq_fn answer;			/* hands res and the results to in's caller */
	sq_fn cleanup;			/* frees what in / p hold; may be NULL */
	struct tg_state_res res;
	void *in;			/* what it runs: a domain's query, a file's work */
	void *p;			/* its result: rows (cleanup frees) */
};

/** Open a store's write connection w and read connection r (the
 * caller's; tg_state_sq_conn_close) on path (borrowed): the writer first,
 * migrating it to sc (static) and doing its work at open, then the reader;
 * synchronous=NORMAL (else FULL) when asked. 0, or -1 with err. */
int tg_state_sq_store_open(struct sq_conn *w, struct sq_conn *r, const char *path,
    const struct sq_schema *sc, int sync_normal, struct tg_err *err);
/** Close c (borrowed); a closed one is fine. */
void tg_state_sq_conn_close(struct sq_conn *c);
/** Run q (borrowed) on c (borrowed): its rows (the caller's:
 * tg_state_sq_rows_free), or NULL with res set. */
struct sq_rows *tg_state_sq_conn_exec(struct sq_conn *c, const struct tg_db_q *q,
    struct tg_state_res *res);
/** Takes ownership of r; NULL-safe. */
void tg_state_sq_rows_free(struct sq_rows *r);
/** The driver entries (sq_db.c). */
extern const struct tg_db_driver tg_state_sq_db;
/** The stores' schemas (owners_schema.c, runs_schema.c, outbox_schema.c). */
extern const struct sq_schema tg_state_sq_owners_schema, tg_state_sq_runs_schema,
    tg_state_sq_outbox_schema;
/** A driver query's steps for an operation of its own (sq_db.c; o->in is
 * the struct tg_db_q, taken): run it on its store's connection (rows in
 * o->p), answer it, free it. */
void tg_state_sq_db_run(struct sq_op *o);
void tg_state_sq_db_answer(struct sq_op *o);
void tg_state_sq_db_cleanup(struct sq_op *o);
/** The outbox's payload files (sq_files.c): the directory made and swept
 * of files no job needs (o borrowed; 0, or -1 with err), and freed. */
int tg_state_sq_files_open(struct sq *sq, const struct tg_outbox_opts *o, struct tg_err *err);
void tg_state_sq_files_close(struct sq *sq);

/** A new operation of sq for domain dom, run by run and answered by answer. */
struct sq_op *tg_state_sq_op_new(struct sq *sq, enum sq_domain dom, sq_fn run, sq_fn answer);
/** Run o now on the loop (a read), answer and free it: NULL. */
struct tg_state_op *tg_state_sq_read(struct sq_op *o);
/** Queue o on the writer thread: its handle, or NULL when answered at once. */
struct tg_state_op *tg_state_sq_write(struct sq_op *o);
/** The seam's check (state.h tg_state_check) for this backend, sq_check.c;
 * opts borrowed, out the caller's. */
int tg_state_sq_check(const struct tg_state_opts *opts, struct tg_state_problems *out);
/** The seam's cancel (state.h tg_state_cancel) for this backend; op borrowed. */
void tg_state_sq_cancel(struct tg_state_op *op);

#endif
