/*
 * pg.h - private contract between the files of the PostgreSQL state
 * backend: the backend's handle (a small pool of libpq connections driven
 * by libevent on the loop, a FIFO of operations waiting for a free
 * connection, and, with state.listen_url or behind a transaction pooler,
 * one more connection that only LISTENs), the operation record a domain's
 * query becomes, and the domains' statements it prepares (or, behind a
 * pooler, runs unnamed).
 *
 * Files: backend.c (open, close), pg_op.c (an operation's life: queued,
 * answered once, cancelled, or failed at its deadline), pg_conn.c
 * (connections: connect, migrate, prepare, send, read, fail and
 * reconnect), pg_group.c (writes committed together), pg_pipe.c (lone
 * operations pipelined on a connection at work), pg_schema.c (the
 * schema's migrations and the statements' SQL), pg_err.c (errors without
 * secrets), pg_db.c (the driver entries
 * under the domains written once), pg_wake.c (LISTEN/NOTIFY wake-ups,
 * health and the probe that keeps it true), pg_vtable.c (the vtable).
 *
 * Threads: the loop's only. Nothing here blocks: open only parses the URL;
 * connecting, migrating and everything after run on the loop.
 */
#ifndef TG_STATE_PG_H
#define TG_STATE_PG_H

#include <sys/queue.h>

#include <stdint.h>

#include <libpq-fe.h>

#include "tidegate/map.h"
#include "tidegate/state.h"
#include "../backend.h"
#include "../db.h"

#define PG_POOL		2	/* statement connections per backend */
#define PG_NCONN	(PG_POOL + 1)	/* and one that only LISTENs (state.listen_url) */
#define PG_MAXP		16	/* parameters of a statement at most */
#define PG_BACKOFF_MIN	100	/* ms before the first reconnect */
#define PG_BACKOFF_MAX	5000	/* ms between reconnects at most */
#define PG_CONNECT_MS	10000	/* a connection attempt (connect to ready) gives up after */
#define PG_GROUP_MAX	64	/* writes committed together at most (pg_group.c) */
#define PG_PIPE_MAX	16	/* lone ops in flight on a connection at most (pg_pipe.c) */
#define PG_PIPE_FRESH_US 5000	/* a pipeline whose first op was sent longer ago takes no more */
#define PG_PING		(-1)	/* the probe's statement (pg_wake.c): not prepared */

/** What an operation needs configured. */
enum pg_domain { PG_ANY, PG_OWNERS, PG_OUTBOX, PG_RUNS };

/* Connected from WAITING on (another connection migrates the schema
 * meanwhile); takes work from IDLE on. CHECKING: asking the server
 * whether a pooler stands between (pg_conn.c). */
enum pg_conn_state {
	PG_DOWN, PG_CONNECTING, PG_CHECKING, PG_WAITING, PG_MIGRATING, PG_PREPARING, PG_IDLE,
	PG_BUSY
};

/* The schema, migrated once per open by the first connection made. */
enum pg_schema_state { PG_SCHEMA_NONE, PG_SCHEMA_MIGRATING, PG_SCHEMA_DONE };

/* What health is unsure of until the server answers again (pg_wake.c). */
enum pg_unsure { PG_SURE, PG_LOST, PG_TIMED_OUT };

struct pg;
struct pg_op;

/** Reads result r (borrowed; NULL when o->res.rc != 0) and calls the
 * operation's callback. */
typedef void (*pg_answer_fn)(struct pg_op *o, const PGresult *r);

/** One connection of the pool. */
struct pg_conn {
	struct pg *pg;
	PGconn *c;			/* NULL while down */
	struct event *io;		/* on PQsocket; what it waits for: */
	short what;
	struct event *timer;		/* reconnect backoff, connect timeout */
	enum pg_conn_state st;
	int mstep;			/* MIGRATING: commands of the migration sent */
	int nprep;			/* statements prepared so far */
	int backoff_ms;
	struct pg_op *op;		/* in flight (BUSY); a group's first, the
					 * others chained on next (pg_group.c) */
	int ngroup;			/* ops of the group in flight (0: one op) */
	int npipe;			/* lone ops pipelined in flight, each with
					 * its Sync (pg_pipe.c; 0: not pipelined) */
	struct pg_op **ptail;		/* where the next one chains (npipe > 0) */
	int psync;			/* the first one's results are in: its
					 * Sync's answer is next */
	struct pg_op *gcur;		/* the group's member being read */
	PGresult *last;			/* its result so far */
	int listener;			/* LISTENs for the wake-ups (pg_wake.c) */
	int only_listen;		/* and does nothing else (state.listen_url) */
	const char *const *vals;	/* its libpq values (pg's, borrowed) */
	const char *secret;		/* its URL's password (pg's, borrowed) */
	int64_t heard_ms;		/* only_listen: the server last sent (mono) */
	int64_t ping_ms;		/* only_listen: its ping sent at (BUSY) */
};

struct pg {
	const struct tg_state_backend *be;	/* this backend's vtable */
	struct event_base *base;
	const struct tg_db_list *stmts;		/* the domains' (borrowed) */
	const char *const *keys;		/* connection parameters (libpq's */
	const char *const *vals;		/* keyword/value arrays; owned) */
	char *secret;				/* the password: never in err or logs */
	const char *const *lvals;		/* state.listen_url's values (owned) */
	char *lsecret;				/* and its password; NULL: none */
	int unnamed;				/* statements unnamed, no session state
						 * (state.pooler: transaction) */
	struct pg_conn *lconn;			/* the one that LISTENs */
	int nconn;				/* connections in conn[]: PG_POOL, or
						 * PG_NCONN with one only LISTENing */
	char *instance;				/* state.instance, else hostname:pid */
	struct pg_conn conn[PG_NCONN];
	struct pg_op *head, **tail;		/* waiting for a connection */
	struct event *kick;			/* dispatch on the next loop turn */
	char down[256];				/* why the last connection failed, or
						 * the last operation timed out */
	int64_t timeout_ms;			/* every operation's deadline */
	TAILQ_HEAD(pg_live, pg_op) live;	/* ops not done, by deadline */
	struct event *deadline_ev;		/* at the first one's deadline */
	enum pg_schema_state schema;
	enum pg_unsure unsure;			/* health down until an answer */
	int64_t answered_ms;			/* the server's last answer (mono) */
	struct pg_op *ping;			/* the probe in flight (pg_wake.c) */
	struct event *probe_ev;
	int owners;				/* ownership configured */
	int outbox;				/* the webhook outbox configured */
	int runs;				/* run registry and sweeps configured */
	int closing;
	/* wake-ups and health (pg_wake.c) */
	void (*wake)(void *ctx, const char *topic, const char *what);
	void *wake_ctx;
	int heard;			/* the listener has listened before */
	unsigned long long queries, lat[TG_STATE_LAT_BUCKETS + 1];
	double lat_sum;
	unsigned long long wakeups;
	unsigned long long pipelined;	/* ops sent behind others (pg_pipe.c) */
};

/** One operation; freed by pg_conn.c once answered or cancelled. */
struct pg_op {
	struct tg_state_op pub;
	struct pg *pg;
	struct pg_op *next;		/* in the FIFO */
	TAILQ_ENTRY(pg_op) lived;	/* in pg->live while submitted */
	int in_live;
	int64_t deadline_ms;		/* monotonic; each step gets its own */
	struct pg_conn *conn;		/* in flight on it; NULL while queued */
	int stmt;			/* a domain statement's index, or PG_PING */
	int nparams;
	char *val[PG_MAXP];		/* parameter values (owned; NULL: SQL NULL) */
	int len[PG_MAXP];
	int fmt[PG_MAXP];		/* 0 text, 1 binary */
	int binary;			/* results in binary */
	int lookup;			/* a read: text the database cannot hold
					 * (not UTF-8) matches no row */
	int cancelled;
	int keep;			/* runs even when cancelled (payload writes) */
	int again;			/* set by answer: queued again for its next step */
	int group;			/* may commit with others, locking in the
					 * order of parameter $group (db.h); 0: not */
	int alone;			/* its group was rolled back: runs alone */
	PGresult *gres;			/* in a group: its result, held until the
					 * commit's answer (owned) */
	void (*cleanup)(struct pg_op *o);	/* frees p when the op goes; may be NULL */
	void *p;			/* what it runs: a domain's query (cleanup frees it) */
	int64_t sent_us;		/* when it was sent (monotonic µs) */
	int sent;			/* libpq took it: a write may commit */
	pg_answer_fn answer;		/* hands res and the rows to p's caller */
	struct tg_state_res res;
};

/* ---- pg_op.c ---- */

/** A new operation of pg running statement stmt, answered by answer. The
 * caller owns it until tg_state_pg_submit. */
struct pg_op *tg_state_pg_op_new(struct pg *pg, int stmt, pg_answer_fn answer);
/** Parameters, in order: a string (borrowed, copied; NULL: SQL NULL), a
 * number. o borrowed. */
void tg_state_pg_param_str(struct pg_op *o, const char *s);
void tg_state_pg_param_i64(struct pg_op *o, int64_t n);
/** Answer o (ownership taken) now with rc and why (borrowed). */
void tg_state_pg_fail(struct pg_op *o, int rc, const char *why);
/** What o (borrowed), whose connection is lost or given up, answers: a
 * write sent may have committed (TG_STATE_UNKNOWN), anything else
 * TG_STATE_UNAVAILABLE. */
int tg_state_pg_lost_rc(const struct pg_op *o);
/**
 * From o's answer (o borrowed): run stmt next as a step of the same
 * operation, answered by answer; the parameters are dropped for the
 * caller to give again, the handle stays valid, cb is not called yet.
 */
void tg_state_pg_again(struct pg_op *o, int stmt, pg_answer_fn answer);
/**
 * Takes ownership of o: queued for the first free connection (its
 * handle), or answered at once UNAVAILABLE (NULL) when the backend is
 * closing, dom is not configured, no connection is up after one failed
 * (none made yet: it waits for the first), or an operation timed out and
 * the server has not answered since.
 */
struct tg_state_op *tg_state_pg_submit(struct pg_op *o, enum pg_domain dom);
/** Queue o (ownership taken) with its deadline, whatever health says
 * (the probe's ping, pg_wake.c). */
void tg_state_pg_enqueue(struct pg_op *o);
/** The seam's cancel for this backend (op borrowed). */
void tg_state_pg_cancel(struct tg_state_op *op);
/** The answer to o (taken; r borrowed, NULL when o->res.rc != 0) came:
 * its callback unless cancelled, then freed or queued for its next step. */
void tg_state_pg_finish(struct pg_op *o, const PGresult *r);
/** Every queued operation of pg (borrowed) answers UNAVAILABLE with why. */
void tg_state_pg_fail_queue(struct pg *pg, const char *why);
/** The deadlines of pg's (borrowed) operations: start (before any
 * operation) and stop (after the last one went). */
void tg_state_pg_deadlines_start(struct pg *pg);
void tg_state_pg_deadlines_stop(struct pg *pg);

/* ---- pg_conn.c ---- */

/** Start the pool (pg borrowed): every connection is made on the loop,
 * the first one made migrates the schema before any operation is sent. */
void tg_state_pg_pool_start(struct pg *pg);
/** Stop the pool (pg borrowed): every operation not answered yet answers
 * UNAVAILABLE now, every connection closes. */
void tg_state_pg_pool_stop(struct pg *pg);
/** Connections of pg (borrowed) made (from WAITING on). */
int tg_state_pg_nup(const struct pg *pg);
/** Hand queued operations of pg (borrowed) to connections on the next
 * loop turn. */
void tg_state_pg_kick(struct pg *pg);
/** k (borrowed) is broken: close it, answer its operation and, when it
 * was the last one up, every queued one UNAVAILABLE with why (borrowed,
 * shown as is), and connect again after the backoff. */
void tg_state_pg_conn_drop(struct pg_conn *k, const char *why);
/** The name of prepared statement i, the i-th of the domains' (db.h;
 * static, borrowed). */
const char *tg_state_pg_stmt_name(const struct pg *pg, int i);
/** Statements every connection of pg (borrowed) prepares. */
int tg_state_pg_nstmt(const struct pg *pg);
/** Statements k (borrowed) prepares: none when it only LISTENs, or when
 * statements go unnamed (state.pooler: transaction). */
int tg_state_pg_conn_nstmt(const struct pg_conn *k);
/** The prepared statement of a domain's s (static). */
int tg_state_pg_stmt_index(const struct pg *pg, const struct tg_db_stmt *s);
/** The listener of its own k (borrowed) is pinged (SELECT 1) once its
 * server said nothing for state.timeout, and closed when a ping goes
 * unanswered that long: the probe's (pg_wake.c) for the pool's. */
void tg_state_pg_listener_ping(struct pg_conn *k);
/** The driver entries (pg_db.c). */
extern const struct tg_db_driver tg_state_pg_db;

/* ---- pg_pipe.c ---- */

/** 1 when connections of pg (borrowed) at work may pipeline more of its
 * FIFO: not while a connection is idle, while a write of a group waits
 * with no group in flight, or behind a transaction pooler. Asked once per
 * dispatch: taking lone ops changes none of it. */
int tg_state_pg_pipe_open(const struct pg *pg);
/** The oldest op of pg's (borrowed) FIFO that is not a write of a group,
 * taken out of it, or NULL. */
struct pg_op *tg_state_pg_pipe_take(struct pg *pg);
/** 1: o (borrowed), given to an idle connection, is sent alone, outside
 * a pipeline (a write of a group, or behind a transaction pooler). */
int tg_state_pg_pipe_alone(const struct pg *pg, const struct pg_op *o);
/** Read k's (borrowed) pipeline: 1 once the first op's Sync came, with
 * *done its last result (owned; NULL: none), 0 until then, -1 when the
 * connection is gone. */
int tg_state_pg_pipe_read(struct pg_conn *k, PGresult **done);

/* ---- pg_group.c ---- */

/** The next op of pg's (borrowed) FIFO for an idle connection, taken out
 * of it, or NULL: the oldest, but for a write that may join a group while
 * a group's (or such a write's) commit is in flight: it waits for it. */
struct pg_op *tg_state_pg_group_next(struct pg *pg);
/** The op at *p of pg's FIFO (both borrowed) taken out of it: returned,
 * its next cleared, the FIFO's tail kept. */
struct pg_op *tg_state_pg_unlink(struct pg *pg, struct pg_op **p);
/** A group's commit (or a write of a group sent alone) is in flight on a
 * connection of pg (borrowed). */
int tg_state_pg_group_held(const struct pg *pg);
/** o (borrowed) is a write that may commit with others (db.h's group). */
int tg_state_pg_groupable(const struct pg_op *o);
/** first (taken from pg's FIFO, on its connection; borrowed) is a write:
 * chain on it (next) the other writes queued that may commit with it;
 * the ops of the group, first included. */
int tg_state_pg_group_take(struct pg *pg, struct pg_op *first);
/** 1 when every member of the group of first (chained on next; borrowed)
 * succeeded: the Sync committed them all; 0: rolled back. */
int tg_state_pg_group_ok(const struct pg_op *first);
/** The group of first (taken; rolled back) back at the head of pg's
 * (borrowed) FIFO in its order, each member to run alone, deadlines kept. */
void tg_state_pg_group_requeue(struct pg *pg, struct pg_op *first);
/** One result r (taken) read from k's (borrowed) pipeline (a group's or pg_pipe.c's): 1 it was a
 * Sync's answer (freed), -1 the connection is gone (freed), 0 kept as
 * k->last (the one before freed). */
int tg_state_pg_keep(struct pg_conn *k, PGresult *r);
/** Read k's (borrowed) group's results onto its members: 1 once the
 * Sync's came, 0 while more is to come, -1 when the connection is gone. */
int tg_state_pg_group_read(struct pg_conn *k);

/* ---- pg_wake.c ---- */

#define PG_CHANNEL	TG_DB_CHANNEL	/* the one NOTIFY channel of a fleet */

/** An operation of pg (borrowed) was answered by the server after us µs. */
void tg_state_pg_lat(struct pg *pg, int64_t us);
/** The wake-ups that came on k (borrowed) go to the seam's watches. */
void tg_state_pg_notifies(struct pg_conn *k);
/** k (borrowed) listens again: after the first time, wake-ups may have
 * been lost meanwhile; every watch hears a NULL one. */
void tg_state_pg_listening(struct pg_conn *k);
/** k's (borrowed) server notices go to the debug log. */
void tg_state_pg_quiet(struct pg_conn *k);
/** Health of pg (borrowed) is down (why in pg->down) until the server
 * answers again: a connection was lost, or an operation timed out (then
 * new operations fail at once meanwhile); a ping is sent at once. */
void tg_state_pg_unsure(struct pg *pg, enum pg_unsure u);
/** The server answered on pg (borrowed): health is up again. */
void tg_state_pg_answered(struct pg *pg);
/** The probe of pg (borrowed): a ping when nothing was answered for a
 * while, or health is unsure; start once the pool is, stop before it. */
void tg_state_pg_probe_start(struct pg *pg);
void tg_state_pg_probe_stop(struct pg *pg);
void tg_state_pg_listen(void *impl, void (*wake)(void *ctx, const char *topic,
    const char *what), void *ctx);
void tg_state_pg_health(const void *impl, struct tg_state_health *h);

/* ---- pg_schema.c ---- */

/** The SQL of prepared statement i of pg (static, borrowed). */
const char *tg_state_pg_sql(const struct pg *pg, int i);
/** The migration's first command (static, borrowed): it begins the
 * migration's transaction, takes its lock and answers the schema's
 * version. */
const char *tg_state_pg_schema_begin(void);
/**
 * The rest of the migration once the schema is at version have: what is
 * missing, the claims of the instance whose name is the SQL literal
 * recover (borrowed; NULL: none) pending again, and COMMIT (the caller
 * frees it); NULL with err when have is newer than this tidegate knows.
 */
char *tg_state_pg_schema_rest(int have, const char *recover, struct tg_err *err);

/* ---- pg_err.c ---- */

/** err = prefix + msg (borrowed) on one line, every occurrence of secret
 * (borrowed; NULL or "": none) replaced by "***". */
void tg_state_pg_err(struct tg_err *err, const char *prefix, const char *msg,
    const char *secret);
/** r (borrowed; NULL: none) says the connection is gone or going: a
 * connection exception (08) or an operator intervention (57). */
int tg_state_pg_gone(const PGresult *r);

/* ---- backend.c ---- */

/** The seam's open and close for this backend (backend.h). */
void *tg_state_pg_open(struct event_base *base, const struct tg_state_opts *opts,
    const struct tg_db_list *stmts, struct tg_err *err);
void tg_state_pg_close(void *impl);

/* ---- pg_check.c ---- */

/** The seam's check for this backend (backend.h); opts borrowed, out the
 * caller's. */
int tg_state_pg_check(const struct tg_state_opts *opts, struct tg_state_problems *out);

#endif
