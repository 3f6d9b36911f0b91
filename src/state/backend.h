/*
 * backend.h - what a state backend provides to the seam (state.c): its
 * name, open and close, and one entry per operation of
 * include/tidegate/state.h with the same arguments, the backend's own
 * handle (impl) standing for struct tg_state. Private to src/state/: a
 * backend (sqlite/, pg/) fills a struct tg_state_backend and
 * is listed in state.c's table; callers never change.
 *
 * Operation handles begin with the backend that made them, so
 * tg_state_cancel reaches it.
 */
#ifndef TG_STATE_BACKEND_H
#define TG_STATE_BACKEND_H

#include "tidegate/state.h"
#include "db.h"

struct tg_state_backend;
struct tg_payload_store;

/** The head of every backend's operation handle. */
struct tg_state_op {
	const struct tg_state_backend *be;
};

struct tg_state_backend {
	const char *name;		/* "sqlite", … */
	const struct tg_db_driver *db;	/* the driver under the domains (db.h) */
	const struct tg_payload_store *payloads;	/* the outbox's bytes (payload.h) */
	/** The backend's handle (the caller, state.c, owns it: close), or NULL
	 * with err. base, opts and the domains' statements borrowed. */
	void *(*open)(struct event_base *base, const struct tg_state_opts *opts,
	    const struct tg_db_list *stmts, struct tg_err *err);
	/** tg_state_check's work for this backend (opts borrowed, out the
	 * caller's); NULL: nothing to check. */
	int (*check)(const struct tg_state_opts *opts, struct tg_state_problems *out);
	/** Takes ownership of impl. */
	void (*close)(void *impl);
	/** op borrowed; see tg_state_cancel. */
	void (*cancel)(struct tg_state_op *op);
	/* Operations: see include/tidegate/state.h; every pointer as there. */
	struct tg_state_op *(*runs_add)(void *impl, const struct tg_run_new *run, int64_t now_ms,
	    tg_state_done_cb cb, void *arg);
	struct tg_state_op *(*runs_set_status)(void *impl, const char *id,
	    enum tg_run_status status, int64_t completed_at, int64_t now_ms, tg_state_num_cb cb,
	    void *arg);
	struct tg_state_op *(*runs_check_failed)(void *impl, const char *id, const char *why,
	    int64_t retry_after_ms, int64_t now_ms, tg_state_done_cb cb, void *arg);
	struct tg_state_op *(*runs_due)(void *impl, int64_t now_ms, size_t max, tg_state_runs_cb cb,
	    void *arg);
	struct tg_state_op *(*runs_next_due)(void *impl, int64_t now_ms, tg_state_num_cb cb,
	    void *arg);
	struct tg_state_op *(*runs_next_unhandled)(void *impl, tg_state_unhandled_cb cb, void *arg);
	struct tg_state_op *(*runs_set_handled)(void *impl, const char *id, tg_state_done_cb cb,
	    void *arg);
	struct tg_state_op *(*runs_get)(void *impl, const char *id, tg_state_runs_cb cb, void *arg);
	struct tg_state_op *(*runs_list)(void *impl, const struct tg_runs_query *q,
	    tg_state_runs_cb cb, void *arg);
	/* ids_json: a JSON array of the ids (borrowed for the call) */
	struct tg_state_op *(*runs_get_many)(void *impl, const char *ids_json,
	    tg_state_runs_cb cb, void *arg);
	struct tg_state_op *(*runs_set_figures)(void *impl, const char *id, yajl_val results,
	    tg_state_done_cb cb, void *arg);
	struct tg_state_op *(*runs_stats)(void *impl, tg_state_runs_stats_cb cb, void *arg);
	struct tg_state_op *(*runs_archive)(void *impl, const char *id, const void *data,
	    size_t len, int64_t now_ms, tg_state_done_cb cb, void *arg);
	struct tg_state_op *(*runs_archived)(void *impl, const char *id, tg_state_blob_cb cb,
	    void *arg);
	struct tg_state_op *(*runs_archive_usage)(void *impl, tg_state_pair_cb cb, void *arg);
	struct tg_state_op *(*runs_expire)(void *impl, int64_t now_ms, tg_state_num_cb cb,
	    void *arg);
	struct tg_state_op *(*runs_purge)(void *impl, int64_t now_ms, tg_state_pair_cb cb,
	    void *arg);
	struct tg_state_op *(*sweep_create)(void *impl, const struct tg_sweep_new *s,
	    int64_t now_ms, tg_state_str_cb cb, void *arg);
	struct tg_state_op *(*sweep_get)(void *impl, const char *id, tg_state_sweeps_cb cb,
	    void *arg);
	struct tg_state_op *(*sweep_list)(void *impl, const char *api_key, const char *state,
	    size_t limit, size_t offset, tg_state_sweeps_cb cb, void *arg);
	struct tg_state_op *(*sweep_variants)(void *impl, const char *id, tg_state_variants_cb cb,
	    void *arg);
	struct tg_state_op *(*sweep_claim)(void *impl, const char *id, int64_t now_ms,
	    tg_state_claim_cb cb, void *arg);
	struct tg_state_op *(*sweep_submitted)(void *impl, const char *id, const char *name,
	    const struct tg_run_new *run, int64_t now_ms, tg_state_done_cb cb, void *arg);
	struct tg_state_op *(*sweep_unclaim)(void *impl, const char *id, const char *name,
	    const char *why, int final, int64_t now_ms, tg_state_done_cb cb, void *arg);
	struct tg_state_op *(*sweep_settle)(void *impl, const char *id, int64_t now_ms,
	    tg_state_num_cb cb, void *arg);
	struct tg_state_op *(*sweep_running)(void *impl, tg_state_strs_cb cb, void *arg);
	/** Deliver the other instances' wake-ups to wake(ctx, topic, what)
	 * from now on (state.c's dispatch; ctx borrowed, outlives impl);
	 * NULL: the backend has nobody to hear from. */
	void (*listen)(void *impl, void (*wake)(void *ctx, const char *topic, const char *what),
	    void *ctx);
	/** Fill h (borrowed; zeroed, backend name set) without I/O. */
	void (*health)(const void *impl, struct tg_state_health *h);
};

/** The SQLite backend (src/state/sqlite/backend.c). */
extern const struct tg_state_backend tg_state_sqlite_backend;
/** The PostgreSQL backend (src/state/pg/pg_vtable.c). */
extern const struct tg_state_backend tg_state_pg_backend;

#endif
