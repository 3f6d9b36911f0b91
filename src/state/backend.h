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
