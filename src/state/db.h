/*
 * db.h - the driver interface under the state's domains (private to
 * src/state/). A domain (owners.c, shared.c, …) writes each operation
 * once: a statement (struct tg_db_stmt: its PostgreSQL text and, where
 * the dialect differs, its SQLite text), parameters, and an answer that
 * reads the rows on the loop. A driver (sqlite/sq_db.c, pg/pg_db.c) runs
 * it: SQLite on the loop's read connection (a read: answered before the
 * call returns) or on the writer thread (a write: one transaction), and
 * PostgreSQL on its pool of libpq connections, on the loop. What differs
 * between the two databases lives in the driver or in a statement's pair
 * of texts, never in a second copy of a domain.
 *
 * Parameters are numbered $1, $2, … in both dialects (SQLite reads $N as
 * a named parameter; the driver binds it by number). A SQLite text may
 * hold several statements separated by ';': a write runs them in one
 * transaction, and the rows are those of the last statement that has
 * columns. PostgreSQL results come in binary: a domain reads cells only
 * through tg_db_str, tg_db_blob and tg_db_i64, which decode by type.
 */
#ifndef TG_STATE_DB_H
#define TG_STATE_DB_H

#include <stddef.h>
#include <stdint.h>

#include "tidegate/state.h"

#define TG_DB_MAXP	16	/* parameters of a statement at most */
#define TG_DB_CHANNEL	"tidegate"	/* a fleet's one wake-up channel */
/* PostgreSQL: a CTE that commits its statement without waiting for the
 * disk (shared.c says why), read by the statement as lazy.s. */
#define TG_DB_LAZY	"lazy AS (SELECT set_config('synchronous_commit', 'off', true) AS s)"
/*
 * PostgreSQL: the lead of poll key k (parameters as text: "$1", …) for
 * instance i until until, taken when free, run out or already i's, and
 * never while a published answer is fresh at now, and only when cond
 * (SQL ending in AND, or ""); reads TG_DB_LAZY; one row when taken
 * (shared.c's poll_lead, owners.c's owners_lookup_lead).
 */
#define TG_DB_LEAD(k, i, now, until, cond) \
	"INSERT INTO poll_entries (key, leader, lead_until) SELECT " k "::text, " i "::text, " \
	until "::bigint FROM lazy WHERE lazy.s IS NOT NULL AND " cond " NOT EXISTS (SELECT 1" \
	" FROM poll_entries WHERE key = " k "::text AND NOT coalesce((lead_until <= " now \
	"::bigint OR leader = " i "::text) AND answer_until <= " now "::bigint, false))" \
	" ON CONFLICT (key) DO UPDATE SET leader = EXCLUDED.leader," \
	" lead_until = EXCLUDED.lead_until WHERE (poll_entries.lead_until <= " now "::bigint" \
	" OR poll_entries.leader = " i "::text) AND poll_entries.answer_until <= " now \
	"::bigint RETURNING 1"

/** The store a statement needs configured (SQLite: its file). */
enum tg_db_store { TG_DB_ANY, TG_DB_OWNERS, TG_DB_OUTBOX, TG_DB_RUNS };

/** A statement, written once (static; domains own their tables). */
struct tg_db_stmt {
	const char *name;	/* unique: the prepared statement's name */
	enum tg_db_store store;
	int write;		/* SQLite: runs on the writer thread, in a transaction */
	const char *sql;	/* PostgreSQL */
	const char *lite;	/* SQLite; NULL: sql */
};

enum tg_db_type { TG_DB_NULL, TG_DB_INT, TG_DB_TEXT, TG_DB_BLOB };

/** One parameter (the value owned by its query). */
struct tg_db_param {
	enum tg_db_type type;
	int64_t i;
	char *p;		/* TEXT: NUL-terminated; BLOB: len bytes */
	size_t len;
};

struct tg_db_rows;

/**
 * One query of a domain operation. A domain embeds it first in its own
 * record (the typed callback beside it), fills it with tg_db_query_init
 * and the tg_db_* parameter calls, and hands it to tg_db_submit, which
 * takes ownership: the driver calls answer once on the loop (unless the
 * operation was cancelled), then cleanup (may be NULL) and free().
 */
struct tg_db_q {
	const struct tg_db_stmt *stmt;
	struct tg_db_param par[TG_DB_MAXP];
	int npar;
	/** r (borrowed) is NULL when res.rc != 0. May call tg_db_again. */
	void (*answer)(struct tg_db_q *q, const struct tg_db_rows *r);
	void (*cleanup)(struct tg_db_q *q);
	struct tg_state_res res;
	int keep;		/* runs even when cancelled while queued */
	int writes;		/* an operation that writes in a later step: each
				 * step runs as a write (SQLite: on the writer,
				 * answered later, reading what it wrote) */
	int again;		/* set by tg_db_again: run once more */
	int group;		/* N > 0: a write that may commit with others
				 * queued beside it (PostgreSQL, pg_group.c),
				 * its row locks taken in the order of parameter
				 * $N: a group runs its members sorted by
				 * statement, then by $N, so two groups lock in
				 * one order and never wait on each other in a
				 * ring; 0: alone (it locks rows $N does not
				 * name, or it must not wait for others) */
	int replay;		/* one statement keyed by an id chosen before it
				 * is sent, or an upsert: sent again when its
				 * outcome is unknown (replay.c); CONFLICT on a
				 * replay means the first send committed it */
};

/** The typed callback of an operation: the one member its answer calls. */
union tg_db_cb {
	tg_state_done_cb done;
	tg_state_num_cb num;
	tg_state_pair_cb pair;
	tg_state_str_cb str;
	tg_state_blob_cb blob;
	tg_state_strs_cb strs;
	tg_state_token_cb token;
	tg_state_answer_cb answer;
	tg_state_runs_cb runs;
	tg_state_unhandled_cb unhandled;
	tg_state_runs_stats_cb stats;
	tg_state_sweeps_cb sweeps;
	tg_state_variants_cb variants;
	tg_state_claim_cb claim;
	tg_state_jobs_cb jobs;
	tg_state_outbox_stats_cb outbox_stats;
	tg_state_payload_cb payload;
	tg_state_owner_lead_cb owner_lead;
};

/**
 * What an operation of a domain keeps: its query (first), the state, the
 * typed callback and the caller's arg, and the id of the record it names
 * (for messages; owned). A domain that keeps more embeds it first.
 */
struct tg_db_op {
	struct tg_db_q q;
	struct tg_state *st;
	union tg_db_cb cb;
	void *arg;
	char *id;
};

/** Rows of one statement (the driver's; borrowed by an answer). */
struct tg_db_rows {
	const struct tg_state_backend *be;
	const void *res;
};

/** The driver entries of a backend (in struct tg_state_backend). */
struct tg_db_driver {
	/** 1: instances share this database (a fleet); 0: one instance. */
	int fleet;
	/** Takes ownership of q: its handle, or NULL when answered already. */
	struct tg_state_op *(*submit)(void *impl, struct tg_db_q *q);
	int (*nrows)(const struct tg_db_rows *r);
	/** Cell (row, col): its bytes and length, NULL for SQL NULL. */
	const char *(*cell)(const struct tg_db_rows *r, int row, int col, size_t *len);
	int64_t (*i64)(const struct tg_db_rows *r, int row, int col);
	/** Rows the statement changed. */
	int64_t (*changes)(const struct tg_db_rows *r);
};

/** q (borrowed) runs stmt (static) and is answered by answer. */
void tg_db_query_init(struct tg_db_q *q, const struct tg_db_stmt *stmt,
    void (*answer)(struct tg_db_q *q, const struct tg_db_rows *r));
/** Parameters, in order: text (borrowed, copied; NULL: SQL NULL), a
 * number, bytes (borrowed, copied), len bytes drained from buf. */
void tg_db_text(struct tg_db_q *q, const char *s);
void tg_db_int(struct tg_db_q *q, int64_t n);
void tg_db_bytes(struct tg_db_q *q, const void *data, size_t len);
/** A time: t, or SQL NULL when t is 0. */
void tg_db_time(struct tg_db_q *q, int64_t t);
/** Free q's parameters (q borrowed). */
void tg_db_params_free(struct tg_db_q *q);
/** From q's answer: run stmt next, its parameters given again after
 * this call; the handle stays valid and the caller is not answered yet. */
void tg_db_again(struct tg_db_q *q, const struct tg_db_stmt *stmt);
/** Answer q (ownership taken) now with rc and why (borrowed): NULL. */
struct tg_state_op *tg_db_fail(struct tg_db_q *q, int rc, const char *why);

/**
 * A zeroed operation record of size bytes (at least a struct tg_db_op; the
 * caller owns it until tg_db_submit) running stmt (static), answered by
 * answer, for st and arg (borrowed); id (borrowed; NULL: none) is kept and
 * given as parameter $1. Its cleanup frees the id (a domain with more to
 * free sets its own and calls tg_db_op_cleanup).
 */
void *tg_db_op_new(size_t size, struct tg_state *st, const struct tg_db_stmt *stmt,
    void (*answer)(struct tg_db_q *q, const struct tg_db_rows *r), const char *id, void *arg);
void tg_db_op_cleanup(struct tg_db_q *q);
/** Answers of a struct tg_db_op: cb.done; cb.num with the rows changed. */
void tg_db_answer_done(struct tg_db_q *q, const struct tg_db_rows *r);
void tg_db_answer_changes(struct tg_db_q *q, const struct tg_db_rows *r);

/** The rows of r (borrowed; NULL: none) a page of at most limit (0: all)
 * reads; *more set when there are more. None with missing set: o's
 * result is NOT_FOUND, "no <what> <o->id>" (what borrowed). */
size_t tg_db_page(struct tg_db_op *o, const struct tg_db_rows *r, size_t limit, int missing,
    const char *what, int *more);

/** Submit q (ownership taken) to st's driver (st borrowed); a replay
 * query of a fleet through replay.c. */
struct tg_state_op *tg_db_submit(struct tg_state *st, struct tg_db_q *q);
/** replay.c: submit replay query q (ownership taken) to st (borrowed),
 * sent again while its outcome is unknown; and, once st's backend is
 * closed, answer the replays still waiting UNKNOWN. */
struct tg_state_op *tg_db_replay_submit(struct tg_state *st, struct tg_db_q *q);
void tg_db_replays_close(struct tg_state *st);
/** 1 when st's (borrowed) instances share its database. */
int tg_db_fleet(const struct tg_state *st);

/* Reading rows (r borrowed; what comes back is valid during the answer). */
int tg_db_nrows(const struct tg_db_rows *r);
/** Text of a cell, NUL-terminated; NULL for SQL NULL. */
const char *tg_db_str(const struct tg_db_rows *r, int row, int col);
/** Bytes of a cell and their length; NULL for SQL NULL (*len 0). */
const void *tg_db_blob(const struct tg_db_rows *r, int row, int col, size_t *len);
/** A cell as a number; 0 for SQL NULL. */
int64_t tg_db_i64(const struct tg_db_rows *r, int row, int col);
/** 1 when the cell is SQL NULL. */
int tg_db_isnull(const struct tg_db_rows *r, int row, int col);
int64_t tg_db_changes(const struct tg_db_rows *r);
/** A malloc'd copy of a cell's text (the caller frees), NULL for NULL. */
char *tg_db_strdup(const struct tg_db_rows *r, int row, int col);

/** A domain's statements (static). */
struct tg_db_table {
	const struct tg_db_stmt *s;
	size_t n;
};
extern const struct tg_db_table tg_state_owners_stmts, tg_state_shared_stmts,
    tg_state_runs_stmts, tg_state_runs_keep_stmts, tg_state_sweeps_stmts,
    tg_state_quota_stmts, tg_state_fleet_stmts;

/** Statements of several domains, in order (static). */
struct tg_db_list {
	const struct tg_db_table *const *t;
	size_t n;
};
/** Every domain's (stmts.c): state.c hands it to the backend's open; the
 * PostgreSQL driver prepares them all on each connection. */
extern const struct tg_db_list tg_state_db_stmts;
/** Statements in l (borrowed), the i-th, and the position of s (one of
 * l's; static) in l, or -1. */
size_t tg_db_list_count(const struct tg_db_list *l);
const struct tg_db_stmt *tg_db_list_at(const struct tg_db_list *l, size_t i);
long tg_db_list_index(const struct tg_db_list *l, const struct tg_db_stmt *s);

#endif
