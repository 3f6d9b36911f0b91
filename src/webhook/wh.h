/*
 * wh.h - private contract between the files of src/webhook: the outbox's
 * SQLite handle and prepared statements (outbox.c), payload files
 * (payload.c), admin queries (admin.c), the callback URL parser shared by
 * egress.c and deliver.c, one delivery attempt (deliver.c) and the worker
 * that runs them (worker.c). Unit tests include it for the pure helpers.
 */
#ifndef TG_WEBHOOK_WH_H
#define TG_WEBHOOK_WH_H

#include <sys/queue.h>

#include <sqlite3.h>

#include "tidegate/webhook.h"

/* ---- outbox.c ---- */

enum wh_stmt {
	S_BEGIN, S_COMMIT, S_ROLLBACK,
	S_INSERT, S_STATE, S_SET_READY, S_PICK, S_JOB_FOR_LEASE, S_COUNT_ATTEMPT,
	S_LEASE_PUT, S_LEASE_TOKEN, S_LEASE_RENEW, S_LEASE_DEL, S_FINISH, S_NEXT_DUE,
	S_ABANDON, S_GET, S_LIST, S_REDELIVER, S_REDELIVER_SINCE, S_DEPTH, S_LEASED,
	S_PURGE_SEL, S_DELETE, S_FILE_JOB, S_SET_CID,
	S_COUNT
};

struct tg_outbox {
	sqlite3 *db;
	sqlite3_stmt *st[S_COUNT];
	char *path, *dir;
	int64_t *schedule;
	size_t nschedule;
	int jitter_pct;
	int64_t retry_after_max_ms, lease_ms;
	struct tg_outbox_stats ctr;	/* counters since open (depth unused) */
	void (*notify)(void *arg);	/* a job became due (the worker) */
	void *notify_arg;
};

/** The prepared statement i, reset and unbound, ready for binds. */
sqlite3_stmt *tg_webhook_stmt(struct tg_outbox *ob, enum wh_stmt i);
/** Step a statement expected to finish (no rows); 0 or -1 with err. */
int tg_webhook_step_done(struct tg_outbox *ob, sqlite3_stmt *s, struct tg_err *err);
/** BEGIN IMMEDIATE / COMMIT / ROLLBACK; 0 or -1 with err. */
int tg_webhook_begin(struct tg_outbox *ob, struct tg_err *err);
int tg_webhook_commit(struct tg_outbox *ob, struct tg_err *err);
void tg_webhook_rollback(struct tg_outbox *ob);
void tg_webhook_sql_err(struct tg_outbox *ob, struct tg_err *err, const char *what);
/** Text column or NULL, copied. */
char *tg_webhook_col_str(sqlite3_stmt *s, int col);
/** The job's state, or TG_OUTBOX_NOT_FOUND / -1. */
int tg_webhook_job_state(struct tg_outbox *ob, const char *id, struct tg_err *err);
void tg_webhook_notify(struct tg_outbox *ob);
/** Called by the worker: fn(arg) whenever a job becomes due. */
void tg_webhook_outbox_set_notify(struct tg_outbox *ob, void (*fn)(void *), void *arg);

/* ---- payload.c ---- */

/** "<dir>/<id>.body" (malloc'd). */
char *tg_webhook_payload_path(const struct tg_outbox *ob, const char *id);
/** Remove the payload file of id (missing is fine). */
void tg_webhook_payload_remove(const struct tg_outbox *ob, const char *id);
/** Remove files of the payload directory that no job needs. */
int tg_webhook_payload_sweep(struct tg_outbox *ob, struct tg_err *err);

/* ---- egress.c: callback URLs ---- */

struct wh_url {
	char *scheme;		/* "http" or "https", lower case */
	char *host;		/* without IPv6 brackets */
	int port;		/* explicit or the scheme's */
	char *origin;		/* "scheme://host[:port]" for tg_upstream_new */
	char *target;		/* "/path?query" for the request line */
};
/** Parse a callback URL (shape only, no policy); -1 with why. */
int tg_webhook_url_parse(const char *url, struct wh_url *u, struct tg_err *why);
void tg_webhook_url_cleanup(struct wh_url *u);
/** The host part of the URL check: a literal's range, or a name's shape; -1 with why. */
int tg_webhook_check_host(const struct tg_egress *p, const char *host, struct tg_err *why);
/** The URL with any query replaced by "?…" for logs and listings (malloc'd). */
char *tg_webhook_url_redact(const char *url);

/* ---- deliver.c ---- */

/** Retry-After (delta seconds or HTTP-date) in ms from now_ms; -1 when absent/invalid. */
int64_t tg_webhook_retry_after_parse(const char *v, int64_t now_ms);

struct wh_attempt;
TAILQ_HEAD(wh_attemptq, wh_attempt);

/**
 * Start an attempt for lease l (taken over) and put it on w's list; when
 * it is over (outcome recorded) it leaves the list and calls
 * tg_webhook_worker_attempt_over, from the loop.
 */
struct wh_attempt *tg_webhook_attempt_start(struct tg_webhook *w, struct tg_outbox_lease *l);
/** Drop every attempt of w without an outcome, releasing the leases (teardown). */
void tg_webhook_attempts_abandon(struct tg_webhook *w);
/** Renew the leases of w's attempts in flight. */
void tg_webhook_attempts_renew(struct tg_webhook *w, int64_t now_ms);

/* ---- worker.c ---- */

struct tg_webhook {
	struct event_base *base;
	struct evdns_base *dns;
	struct tg_outbox *ob;
	const struct tg_egress *pol;
	struct tg_webhook_opts opts;	/* ca_file, user_agent point at copies below */
	char *ca_file, *user_agent;
	struct tg_webhook_cbs cbs;
	void *arg;
	struct event *tick;		/* lease due jobs */
	struct event *renew;		/* keep leases of attempts in flight */
	struct event *drained_ev;
	struct wh_attemptq attempts;
	size_t inflight;
	int draining;
	void (*on_drained)(void *);
	void *drained_arg;
};

/** An attempt is over and gone: look for more work, or report the drain. */
void tg_webhook_worker_attempt_over(struct tg_webhook *w);

#endif
