/*
 * payload.h - where the webhook outbox's payload bytes live (private to
 * src/state/): the one part of the outbox whose storage differs by
 * database. The domain (outbox.c, outbox_admin.c, payload.c) keeps the
 * jobs in SQL over db.h, written once; a payload store keeps the bytes:
 * files in the payload directory beside SQLite's database, written on its
 * writer thread (sqlite/sq_files.c), or chunk rows in PostgreSQL
 * (payload_rows.c, statements over db.h). A backend names its store
 * (struct tg_state_backend.payloads).
 *
 * The domain checks the job before a writer is opened and writes the
 * job's row itself; a store takes the domain's query for the steps that
 * must follow its bytes (a commit, a payload set in memory) and submits
 * it once the bytes are where a lease will read them.
 */
#ifndef TG_STATE_PAYLOAD_H
#define TG_STATE_PAYLOAD_H

#include <stdint.h>

#include "tidegate/state.h"
#include "db.h"

struct tg_payload_store;

/** A payload being written: a store's writer begins with this. */
struct tg_state_payload {
	const struct tg_payload_store *ps;
	struct tg_state *st;
	char id[TG_WEBHOOK_ID_LEN];
	char *key;			/* the job's API key (owned; NULL: none) */
	struct tg_outbox_quota q;	/* zero: no cap */
	char token[33];			/* the writer's rows (chunk rows); "": none */
	int64_t size;			/* bytes appended so far */
};

/** The domain's commit of a writer: its query ($1 job, $2 token, $3 size,
 * $4 now, $5 due) and the writer it ends. */
struct tg_payload_commit {
	struct tg_db_q q;
	struct tg_state_payload *w;
	tg_state_done_cb done;
	void *arg;
};

/** A lease reading its payload: the domain's lease query and what the
 * store needs to read the payload after it. */
struct tg_payload_fetch {
	struct tg_db_q q;
	struct tg_outbox_lease *l;	/* owned until handed over */
	char ptoken[33];		/* chunk rows: the committed writer's */
	int n;				/* chunk rows: the next one */
	int64_t got;			/* bytes read */
	struct tg_state *st;		/* chunk rows: the state (borrowed) */
	/** l's payload is readable (or q.res says why not): the domain
	 * answers. May be called from fetch itself. */
	void (*hand)(struct tg_payload_fetch *f);
};

struct tg_payload_store {
	/** A writer for waiting job id of key (the domain checked it; st, id
	 * and key borrowed, copied), handed to cb before this returns: its
	 * storage is made by its first append or its commit. */
	void (*open)(struct tg_state *st, const char *id, const char *key,
	    tg_state_payload_cb cb, void *arg);
	/** Append what buf holds (borrowed, drained now) to w (borrowed). */
	struct tg_state_op *(*append)(struct tg_state_payload *w, struct evbuffer *buf,
	    tg_state_done_cb cb, void *arg);
	/** Make c->w's bytes durable, then run c's query ($3 set to the bytes
	 * stored); takes ownership of c (and its writer). */
	struct tg_state_op *(*commit)(struct tg_payload_commit *c);
	/** Drop w's bytes; takes ownership of w. */
	void (*abort)(struct tg_state_payload *w);
	/** Store the bytes of q's $3 for the job of its $1 while it waits, then
	 * run q (the domain's set; ownership taken). */
	struct tg_state_op *(*set)(struct tg_state *st, struct tg_db_q *q);
	/** The payload bytes held (see tg_state_outbox_usage; st, key borrowed). */
	struct tg_state_op *(*usage)(struct tg_state *st, const char *key, tg_state_pair_cb cb,
	    void *arg);
	/** From the lease's answer (f borrowed, its lease filled in): make the
	 * payload readable at f->l->payload_path, then f->hand(f). */
	void (*fetch)(struct tg_state *st, struct tg_payload_fetch *f);
	/** The payload of job id (borrowed) is no longer kept (delivered, gone,
	 * purged); NULL: the statement that said so removed it. */
	void (*drop)(struct tg_state *st, const char *id);
};

/** Files beside SQLite's database (sqlite/sq_files.c). */
extern const struct tg_payload_store tg_state_sq_files;
/** Chunk rows in PostgreSQL (payload_rows.c). */
extern const struct tg_payload_store tg_state_payload_rows;

/** The writer's head (w borrowed) filled for job id of key (borrowed). */
void tg_state_payload_head(struct tg_state_payload *w, const struct tg_payload_store *ps,
    struct tg_state *st, const char *id, const char *key);
/** Free what the head of w (borrowed) holds. */
void tg_state_payload_head_free(struct tg_state_payload *w);

#endif
