/*
 * wh.h - private contract between the files of src/webhook: the callback
 * URL parser shared by egress.c, deliver.c and job_json.c, one delivery attempt (deliver.c) and the worker
 * that runs them (worker.c). Unit tests include it for the pure helpers.
 */
#ifndef TG_WEBHOOK_WH_H
#define TG_WEBHOOK_WH_H

#include <sys/queue.h>

#include <yajl/yajl_gen.h>

#include "tidegate/state.h"
#include "tidegate/webhook.h"

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

/* The special-purpose ranges refused unless webhooks.allow names them, as
 * a JSON array of {cidr, range[, judgedBy]} written to g (borrowed). */
void wh_egress_refused_json(yajl_gen g);

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
/** Give lease l back without an outcome (takes ownership of l; w
 * borrowed): due again at once; w->releases holds it until the seam answers. */
void tg_webhook_lease_release(struct tg_webhook *w, struct tg_outbox_lease *l);
/** Forget the releases of w (borrowed) not answered yet (their callbacks
 * never run). */
void tg_webhook_releases_cancel(struct tg_webhook *w);
/** Renew the leases of w's attempts in flight. */
void tg_webhook_attempts_renew(struct tg_webhook *w, int64_t now_ms);

/* ---- worker.c ---- */

struct wh_release;
TAILQ_HEAD(wh_releaseq, wh_release);

struct tg_webhook {
	struct event_base *base;
	struct evdns_base *dns;
	struct tg_state *st;
	const struct tg_egress *pol;
	struct tg_webhook_opts opts;	/* ca_file, user_agent point at copies below */
	char *ca_file, *user_agent;
	struct tg_webhook_cbs cbs;
	void *arg;
	struct event *tick;		/* lease due jobs */
	struct event *renew;		/* keep leases of attempts in flight */
	struct event *drained_ev;
	struct tg_state_watch *watch;	/* the fleet's "outbox" wake-ups (NULL: one instance) */
	int64_t tick_max;		/* look at least this often (ms) */
	struct wh_attemptq attempts;
	struct wh_releaseq releases;	/* leases given back, not yet answered */
	struct tg_map *origins;		/* webhook id -> the request id that added it
					 * (malloc'd; in memory, bounded: deliver.c) */
	struct tg_map *hosts;		/* callback host -> attempts in flight to it
					 * (a count, not a pointer) */
	struct tg_state_op *lease_op;	/* the lease asked for */
	struct tg_state_op *due_op;	/* the next due time asked for */
	int leasing, asking;		/* those two are pending (their handle may be NULL) */
	int kicked;			/* the tick leases at once (else it asks next_due) */
	int missed;			/* the last lease found nothing due */
	int skipping;			/* … while some hosts held their share */
	size_t inflight;
	int draining;
	void (*on_drained)(void *);
	void *drained_arg;
};

/** An attempt is over and gone: look for more work, or report the drain. */
void tg_webhook_worker_attempt_over(struct tg_webhook *w);
/** An attempt to host (borrowed; lease.host) starts / ends: the share per
 * host counts it. */
void tg_webhook_host_take(struct tg_webhook *w, const char *host);
void tg_webhook_host_give(struct tg_webhook *w, const char *host);

#endif
