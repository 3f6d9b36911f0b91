/*
 * backend.h - what a state backend provides to the seam (state.c): its
 * name, open and close, and one entry per operation of
 * include/tidegate/state.h with the same arguments, the backend's own
 * handle (impl) standing for struct tg_state. Private to src/state/: a
 * backend (sqlite/, pg/) fills a struct tg_state_backend and
 * is listed in state.c's table; callers never change.
 *
 * Operation handles and payload writers begin with the backend that made
 * them, so tg_state_cancel and the payload calls reach it.
 */
#ifndef TG_STATE_BACKEND_H
#define TG_STATE_BACKEND_H

#include "tidegate/state.h"
#include "db.h"

struct tg_state_backend;

/** The head of every backend's operation handle. */
struct tg_state_op {
	const struct tg_state_backend *be;
};

/** The head of every backend's payload writer. */
struct tg_state_payload {
	const struct tg_state_backend *be;
};

struct tg_state_backend {
	const char *name;		/* "sqlite", … */
	const struct tg_db_driver *db;	/* the driver under the domains (db.h) */
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
	struct tg_state_op *(*outbox_add)(void *impl, const struct tg_outbox_new *job,
	    int64_t now_ms, tg_state_str_cb cb, void *arg);
	struct tg_state_op *(*outbox_set_cid)(void *impl, const char *id, const char *cid,
	    tg_state_done_cb cb, void *arg);
	struct tg_state_op *(*outbox_abandon)(void *impl, const char *id, const char *reason,
	    int64_t now_ms, tg_state_done_cb cb, void *arg);
	struct tg_state_op *(*outbox_lease)(void *impl, int64_t now_ms,
	    const struct tg_strlist *skip_hosts, tg_state_lease_cb cb, void *arg);
	struct tg_state_op *(*outbox_renew)(void *impl, const struct tg_outbox_lease *l,
	    int64_t now_ms, tg_state_num_cb cb, void *arg);
	struct tg_state_op *(*outbox_release)(void *impl, const struct tg_outbox_lease *l,
	    tg_state_done_cb cb, void *arg);
	struct tg_state_op *(*outbox_complete)(void *impl, const struct tg_outbox_lease *l,
	    const struct tg_outbox_result *r, int64_t now_ms, tg_state_outcome_cb cb, void *arg);
	struct tg_state_op *(*outbox_next_due)(void *impl, tg_state_num_cb cb, void *arg);
	struct tg_state_op *(*payload_open)(void *impl, const char *id, tg_state_payload_cb cb,
	    void *arg);
	struct tg_state_op *(*payload_append)(struct tg_state_payload *w, struct evbuffer *buf,
	    tg_state_done_cb cb, void *arg);
	struct tg_state_op *(*payload_commit)(struct tg_state_payload *w, int64_t now_ms,
	    tg_state_done_cb cb, void *arg);
	void (*payload_abort)(struct tg_state_payload *w);
	struct tg_state_op *(*payload_set)(void *impl, const char *id, const void *data, size_t len,
	    int64_t now_ms, tg_state_done_cb cb, void *arg);
	struct tg_state_op *(*outbox_list)(void *impl, const struct tg_outbox_query *q,
	    tg_state_jobs_cb cb, void *arg);
	struct tg_state_op *(*outbox_get)(void *impl, const char *id, tg_state_jobs_cb cb,
	    void *arg);
	struct tg_state_op *(*outbox_redeliver)(void *impl, const char *id, int64_t now_ms,
	    tg_state_done_cb cb, void *arg);
	struct tg_state_op *(*outbox_redeliver_since)(void *impl, int64_t since_ms, int64_t now_ms,
	    tg_state_num_cb cb, void *arg);
	struct tg_state_op *(*outbox_purge)(void *impl, int64_t before_ms, tg_state_num_cb cb,
	    void *arg);
	struct tg_state_op *(*outbox_stats)(void *impl, int64_t now_ms, tg_state_outbox_stats_cb cb,
	    void *arg);
	struct tg_state_op *(*outbox_key)(void *impl, tg_state_blob_cb cb, void *arg);
	struct tg_state_op *(*outbox_hold)(void *impl, const char *const *ids, size_t n,
	    int64_t now_ms, tg_state_done_cb cb, void *arg);
	struct tg_state_op *(*outbox_adopt)(void *impl, int64_t now_ms, size_t max,
	    tg_state_jobs_cb cb, void *arg);
	/** Deliver the other instances' wake-ups to wake(ctx, topic, what)
	 * from now on (state.c's dispatch; ctx borrowed, outlives impl);
	 * NULL: the backend has nobody to hear from. */
	void (*listen)(void *impl, void (*wake)(void *ctx, const char *topic, const char *what),
	    void *ctx);
	/** Fill h (borrowed; zeroed, backend name set) without I/O. */
	void (*health)(const void *impl, struct tg_state_health *h);
	void (*payload_limit)(struct tg_state_payload *w, const struct tg_outbox_quota *q);
	struct tg_state_op *(*outbox_usage)(void *impl, const char *api_key, tg_state_pair_cb cb,
	    void *arg);
	struct tg_state_op *(*outbox_note)(void *impl, const char *id, const char *why,
	    tg_state_done_cb cb, void *arg);
};

/** The SQLite backend (src/state/sqlite/backend.c). */
extern const struct tg_state_backend tg_state_sqlite_backend;
/** The PostgreSQL backend (src/state/pg/pg_vtable.c). */
extern const struct tg_state_backend tg_state_pg_backend;

#endif
