/*
 * runs_db.h - private contract between the files of the run registry:
 * the SQLite handle and its prepared statements (registry.c), and the
 * helpers retention.c and sweep_store.c share with it. Not for other
 * modules: they call include/tidegate/runs_store.h (or the state seam).
 */
#ifndef TG_SIM_RUNS_DB_H
#define TG_SIM_RUNS_DB_H

#include <sqlite3.h>

#include "tidegate/runs_store.h"

enum runs_stmt {
	S_BEGIN, S_COMMIT, S_ROLLBACK,
	/* runs (registry.c) */
	S_RUN_INSERT, S_RUN_GET, S_RUN_BRIEF, S_RUN_UPDATE, S_RUN_COUNT_CHECK,
	S_RUN_CHECK_FAILED, S_RUN_DUE, S_RUN_NEXT_DUE, S_RUN_LIST, S_RUN_FIGURES, S_RUN_MANY,
	S_RUN_UNHANDLED, S_RUN_HANDLED,
	S_STATS_RUNS, S_STATS_SWEEPS,
	/* retention.c */
	S_ARCH_INFO, S_ARCH_TOTAL, S_ARCH_SET, S_ARCH_GET, S_EXPIRE, S_PURGE_RUNS,
	S_PURGE_SWEEPS,
	/* sweep_store.c */
	S_SW_INSERT, S_SWV_INSERT, S_SW_GET, S_SWV_LIST, S_SW_INFLIGHT, S_SWV_NEXT,
	S_SWV_CLAIM, S_SWV_STATE, S_SWV_SUBMITTED, S_SWV_UNCLAIM, S_SW_OPEN, S_SW_DONE,
	S_SW_RUNNING, S_SWV_RECOVER, S_SW_LIST,
	S_COUNT
};

struct tg_runs {
	sqlite3 *db;
	sqlite3_stmt *st[S_COUNT];
	int64_t retention_ms, grace_ms, archive_keep_ms;
	int64_t archive_max_run, archive_max_total;
};

/** The newest schema version (PRAGMA user_version) this registry knows. */
int tg_runs_schema_latest(void);

/** The SQL text of statement i (prepared once at open). */
extern const char *const tg_runs_sql[S_COUNT];

/** The prepared statement i, reset and unbound, ready for binds. */
sqlite3_stmt *tg_runs_stmt(struct tg_runs *r, enum runs_stmt i);
/** Step a statement expected to finish; 0 or -1 with err. Resets it. */
int tg_runs_step_done(struct tg_runs *r, sqlite3_stmt *s, struct tg_err *err);
/** BEGIN IMMEDIATE / COMMIT (rolls back when it fails) / ROLLBACK if open. */
int tg_runs_begin(struct tg_runs *r, struct tg_err *err);
int tg_runs_commit(struct tg_runs *r, struct tg_err *err);
void tg_runs_rollback(struct tg_runs *r);
void tg_runs_sql_err(struct tg_runs *r, struct tg_err *err, const char *what);

/**
 * The row of statement st whose first parameter is id, read into out by
 * read: 0, TG_RUNS_NOT_FOUND (err: "no <what> <id>") or -1 with err.
 */
int tg_runs_get_row(struct tg_runs *r, enum runs_stmt st, const char *id, const char *what,
    void (*read)(sqlite3_stmt *, void *), void *out, struct tg_err *err);
/**
 * Every row s yields, each read by read into a new element of size bytes
 * of the array *out (malloc'd) with *n elements; resets s. -1 with err on a
 * database error, *out then holding the *n rows read (the caller frees).
 */
int tg_runs_read_rows(struct tg_runs *r, sqlite3_stmt *s, size_t size,
    void (*read)(sqlite3_stmt *, void *), void **out, size_t *n, struct tg_err *err);
/** Text column (copied) or NULL. */
char *tg_runs_col_str(sqlite3_stmt *s, int col);
/** Integer column; 0 for NULL. */
int64_t tg_runs_col_time(sqlite3_stmt *s, int col);
/** A status name column as its enum, or -1 (NULL, unknown). */
int tg_runs_col_status(sqlite3_stmt *s, int col);
/** Parse a stored figures column (NULL when absent or unreadable). */
yajl_val tg_runs_col_json(sqlite3_stmt *s, int col);
/** Bind text or NULL (copied); a time, 0 binding NULL. */
void tg_runs_bind_str(sqlite3_stmt *s, int i, const char *v);
void tg_runs_bind_time(sqlite3_stmt *s, int i, int64_t t);

/**
 * Insert a run (registry.c), with the sweep it belongs to (NULLs when
 * none); part of the caller's transaction if one is open.
 * TG_RUNS_CONFLICT for a known id, -1 with err.
 */
int tg_runs_insert(struct tg_runs *r, const struct tg_run_new *run, const char *sweep_id,
    const char *variant, int64_t now_ms, struct tg_err *err);

#endif
