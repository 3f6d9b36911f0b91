/*
 * gw.h - private contract between the gateway's files: the long-lived
 * struct gw (listeners, metrics, lifecycle), the reloadable runtime built
 * from one configuration (services, upstreams, token sources, keys), and
 * struct gw_req, which owns one client request from arrival to the access
 * log line.
 */
#ifndef TIDEGATE_GW_H
#define TIDEGATE_GW_H

#include <stdint.h>
#include <sys/queue.h>

#include <event2/http.h>

#include "tidegate/dex.h"
#include "tidegate/frontdoor.h"
#include "tidegate/ids.h"
#include "tidegate/keys.h"
#include "tidegate/metrics.h"
#include "tidegate/problems.h"
#include "tidegate/routes.h"
#include "tidegate/sim.h"
#include "tidegate/token.h"
#include "tidegate/upstream.h"
#include "tidegate/webhook.h"
#include "config.h"

enum gw_listener { GW_DEX, GW_SIM, GW_ADMIN, GW_NLISTENERS };

struct gw_service {
	int index;			/* GW_DEX or GW_SIM */
	const char *name;		/* "dex", "sim" */
	unsigned mask;			/* TG_SVC_DEX / TG_SVC_SIM */
	const struct tg_service_routes *routes;
	const struct gw_service_cfg *cfg;
	struct tg_upstream *api;	/* vendor API (with fallback host) */
	struct tg_upstream *auth;	/* login endpoint's origin (may equal api) */
	struct tg_token_src *tokens;	/* NULL without configured credentials */
	struct tg_login_cache *logins;	/* callers' own logins */
};

/* Everything one configuration builds; a reload swaps it while requests
 * that started under the old one keep their reference until they end. */
struct gw_runtime {
	int refs;
	struct gw *gw;
	struct gw_runtime *next_dying;
	struct gw_config cfg;
	struct gw_service svc[2];
	struct tg_keyring keys;
};

/* Webhook delivery (hooks.c): created at start with struct gw and kept
 * across reloads; the outbox and the worker are not reloadable. */
struct gw_hooks {
	struct gw *gw;
	struct tg_outbox *ob;
	struct tg_webhook *w;
	struct tg_egress *pol;		/* built from the running configuration */
	struct tg_egress **retired;	/* earlier policies attempts may still read */
	size_t nretired;
	struct tg_map *fetches;		/* job id -> struct gw_fetch (hook_fetch.c) */
	struct event *purge;		/* retention of finished jobs */
	int drained;			/* SIGTERM: no delivery attempt left in flight */
};

struct gw_lctx {
	struct gw *gw;
	int listener;
	struct tg_frontdoor door;	/* the listener's front door (frontdoor.h) */
	struct tg_frontdoor_stats stats;	/* its counters, for /metrics */
};

struct gw {
	struct event_base *base;
	struct evdns_base *dns;
	char *config_path;
	struct gw_runtime *rt;
	struct evhttp *http[GW_NLISTENERS];
	struct evhttp_bound_socket *bound[GW_NLISTENERS];
	struct gw_lctx lctx[GW_NLISTENERS];
	struct tg_metrics *metrics;
	size_t inflight;		/* client requests being handled */
	size_t unflushed;		/* replies handed to libevent, not yet written */
	int draining;
	struct event *sig[3], *drain_timer;
	struct gw_runtime *dying;	/* released, freed from reap_ev */
	struct event *reap_ev;
	struct tg_case_store *cases;	/* partial cases served, kept across reloads */
	struct gw_poll *poll;		/* poll multiplexer (poll.c) */
	struct tg_owners *owners;	/* who created each job (jobs.c) */
	struct event *owners_prune;
	struct gw_hooks *hooks;		/* callbackUrl webhooks (hooks.c) */
	struct tg_runs *runs;		/* simulation run registry (runs.c) */
	struct gw_tracker *tracker;	/* status checks of in-progress runs (tracker.c) */
	struct gw_sweeper *sweeper;	/* submits the variants of sweeps (sweeper.c) */
	struct tg_worker *worker;	/* checks large bodies off the loop (validate.c) */
	int exit_code;
};

enum gw_auth { GW_AUTH_NONE, GW_AUTH_GATEWAY, GW_AUTH_CALLER };

struct gw_req {
	struct gw *gw;
	struct gw_runtime *rt;
	struct gw_service *svc;
	struct evhttp_request *req;	/* NULL once released to libevent */
	struct evhttp_connection *conn;
	struct tg_route_match m;
	const char *method;
	char *path;			/* without query, normalised (paths.c) */
	char id[TG_UUID_LEN];
	enum gw_auth auth;
	const struct tg_key *key;
	struct tg_up_req *up;
	struct tg_token_wait *tw;
	char *token;			/* vendor token injected (for 401 handling) */
	char *uri;			/* upstream path and query */
	int status, upstream_status;
	int replayed, started, paused, client_gone, retry_401;
	uint64_t bytes;
	int64_t t0;
	const char *origin;
	const char *error;		/* short reason for the access log */
	struct gw_flush *flush;		/* reply handed over, not yet written */
	struct evbuffer *body;		/* normalised body sent instead of the client's */
	struct evbuffer *capture;	/* copy of a served partial case (sim) */
	const char *drop_query;		/* query parameter not to forward (dryRun, wait) */
	struct poll_entry *poll;	/* waiting on a shared poll (poll.c) */
	struct gw_spool_rd *spool_rd;	/* reading a spooled answer (spool.c) */
	TAILQ_ENTRY(gw_req) poll_next;
	int64_t wait_until;		/* long-poll deadline (monotonic ms), 0: none */
	struct event *wait_timer;
	struct gw_hook *hook;		/* the export's callbackUrl (callbacks.c), owned */
	int held;			/* the vendor's 200 is captured, answered once the
					 * webhook job is durable */
	char *run_callback;		/* a submission's callback URL (runs.c) */
	struct gw_sweep_post *sweep;	/* a sweep being created (sweeps.c) */
	struct gw_check *check;		/* its body checked on the worker (validate.c) */
	char *case_id, *case_sha256;	/* of a checked submission, for the run registry */
	struct gw_hook_scan *hook_scan;	/* an export body as validation read it */
};

/* server.c */
void gw_runtime_unref(struct gw_runtime *rt);
/** Stop the loop once draining and every reply has been written. */
void gw_maybe_exit(struct gw *gw);
struct gw_runtime *gw_runtime_new(struct gw *gw, const struct gw_config *cfg,
    struct tg_err *err);

/* proxy.c */
/* Owner tags of callers without an API key (tg_up_req_set_owner): key
 * names cannot start with '(' (config.c). The gateway's own calls (its
 * vendor logins, shared polls, the tracker, webhook payload fetches, sweep
 * submissions) go untagged. */
#define GW_OWNER_CALLERS "(caller tokens)"	/* callers' own bearer tokens */
#define GW_OWNER_NO_KEY "(no key)"		/* loopback mode without keys */
void gw_on_request(struct evhttp_request *req, void *arg);
void gw_req_reply_error(struct gw_req *r, int status, const char *code, const char *msg);
/** The owner tag r's upstream requests count against (borrowed from r's
 * runtime): its API key's name, or one of the GW_OWNER_* buckets. */
const char *gw_req_owner(const struct gw_req *r);
/** Reply 503 UPSTREAM_BUSY with Retry-After to r (freed) whose upstream
 * request u (borrowed, may be NULL) ended with TG_UP_BUSY. */
void gw_req_reply_busy(struct gw_req *r, const struct tg_up_req *u);
/** Reply to r (freed) whose upstream request u (borrowed, may be NULL)
 * ended with err before any response: 502 UPSTREAM_TLS_FAILED naming the
 * certificate problem, 502 UPSTREAM_UNREACHABLE, 504 UPSTREAM_TIMEOUT or
 * 502 UPSTREAM_ERROR; what (borrowed) names the endpoint ("API"). */
void gw_req_reply_upstream(struct gw_req *r, const struct tg_up_req *u, enum tg_up_error err,
    const char *what);
/** Reply to r (freed) that got no vendor token: what (borrowed) and why
 * (borrowed, the token source's words) make the message; 502
 * UPSTREAM_TLS_FAILED when the login endpoint's certificate was refused,
 * else 503 TOKEN_UNAVAILABLE; Retry-After either way. */
void gw_req_reply_token_error(struct gw_req *r, const char *what, const char *why,
    int retry_after);
/** The status, code (static) and message (into msg) of an upstream error
 * err of service svc; detail (borrowed, may be NULL) is the request's
 * tg_up_req_detail. For callers that answer several requests at once. */
int gw_upstream_error(enum tg_up_error err, const char *detail, const char *svc,
    const char *what, char *msg, size_t len, const char **code);
/** The same for a failed vendor token of ts (borrowed, may be NULL). */
int gw_token_error(struct tg_token_src *ts, const char *what, const char *why, char *msg,
    size_t len, const char **code);
/** Authenticate the caller of r (borrowed): 0, or -1 after replying 401/403. */
int gw_req_authenticate(struct gw_req *r);
/** The front door's check (frontdoor.h) of a listener's heads with a body:
 * h borrowed, arg the listener's struct gw_lctx (borrowed). */
/** A normalised path (borrowed) naming the emulator's control API. */
int gw_path_reserved(const char *path);
int gw_head_check(const struct tg_head *h, void *arg);
void gw_req_reply_buf(struct gw_req *r, int status, const char *ctype, struct evbuffer *b);
/** Reply with what g generated (g stays the caller's); frees r. */
void gw_req_reply_json(struct gw_req *r, int status, yajl_gen g);
void gw_req_proxy(struct gw_req *r);
/** Start a streamed reply of status to r (borrowed; headers added before
 * are sent); the body follows with evhttp_send_reply_chunk_with_cb. */
void gw_req_reply_start(struct gw_req *r, int status);
/** End the streamed reply of r (freed): abort resets the connection, so a
 * truncated body never looks complete. */
void gw_req_reply_end(struct gw_req *r, int abort);
/** The rest of r's way once gw_validate has passed it (inline or later). */
void gw_req_validated(struct gw_req *r);
/** Upstream path and query for r (malloc'd): route template, minus drop_query. */
char *gw_upstream_uri(struct gw_req *r);

/* flush.c */
/**
 * The reply of r (borrowed) is being handed to libevent: count it until it
 * is written or its connection closes (drain waits for it), and reset a
 * client that takes none of it for client_send_timeout. Sets r->flush.
 */
void gw_flush_start(struct gw_req *r);
/** r ends: its reply's tracker (if any) takes over the connection's close
 * callback, which is cleared otherwise. */
void gw_flush_handover(struct gw_req *r);
/** r's connection closed while r lived: its tracker ends; 1 when the
 * tracker had reset the client for its send timeout. */
int gw_flush_closed(struct gw_req *r);

/* paths.c */
/**
 * Check and normalise r's request target into r->path (r borrowed): 0 to
 * go on; -1 when it has replied (400 BAD_REQUEST_TARGET, 404 for the
 * emulator's control API), which frees r.
 */
int gw_path_prepare(struct gw_req *r);

/* poll.c */
/** A cached poll answer, borrowed until the loop runs again. */
struct gw_poll_peek {
	int status;
	const char *body;
	size_t len;
	int terminal;
};
/** The multiplexer of gw (borrowed); c (borrowed) sets its sweep period and
 * spool directory, which a reload does not change. */
struct gw_poll *gw_poll_new(struct gw *gw, const struct gw_config *c);
void gw_poll_free(struct gw_poll *p);
/** Serve a pollable GET from the multiplexer: 1 when handled, 0 to proxy. */
int gw_poll_handle(struct gw_req *r);
/** r ends: stop waiting. */
void gw_poll_forget(struct gw_req *r);
/**
 * The multiplexer's answer to GET uri (upstream path and query) of
 * service, polled with the gateway's own token: 1 and *out when it holds
 * a fresh one (what it would serve a caller without asking the vendor).
 */
int gw_poll_peek(struct gw *gw, int service, const char *uri, struct gw_poll_peek *out);
/** /metrics: bytes of answers held (gauge) and the budget. */
void gw_poll_metrics(struct gw *gw, struct evbuffer *out);

/* spool.c */
/* Bytes and files of all spools at once (owned by the poll multiplexer). */
struct gw_spool_stats {
	int64_t bytes, max;
	long files;
};
/**
 * A new spool file in dir (borrowed) for a final answer of status and
 * ctype (copied): NULL with err when it cannot be created. st is borrowed
 * and must outlive the spool. The caller holds one reference.
 */
struct gw_spool *gw_spool_new(struct gw *gw, const char *dir, int status, const char *ctype,
    struct gw_spool_stats *st, struct tg_err *err);
/** Append buf's bytes (drained): 0, or -1 over st->max or on a write
 * error (the spool has failed then). */
int gw_spool_append(struct gw_spool *s, struct evbuffer *buf);
/** The answer is whole (ok) or never will be: readers finish or are reset. */
void gw_spool_end(struct gw_spool *s, int ok);
/** Drop a reference (NULL-safe): the file is removed at once, its bytes
 * freed when the last reader is done. An unfinished spool fails. */
void gw_spool_unref(struct gw_spool *s);
/** Stream the spool to r (borrowed until its reply ends), following it
 * while it is written; how is the X-Tidegate-Poll value (static). */
void gw_spool_serve(struct gw_spool *s, struct gw_req *r, const char *how);
/** r ends: stop reading. */
void gw_spool_forget(struct gw_req *r);
/** Create dir (0700) and remove spool files left by an earlier run. */
void gw_spool_dir_prepare(const char *dir);

/* jobs.c */
/** Open the owner store (poll.ownership_db) and its prune timer: 0, or -1
 * with err. c is borrowed. */
int gw_jobs_open(struct gw *gw, const struct gw_config *c, struct tg_err *err);
/** Close the owner store; safe when it was never opened. */
void gw_jobs_close(struct gw *gw);
/**
 * A read of a data exchange job (GET /export, /import/…): its one
 * correlationId into *job (malloc'd, the caller frees), ownership checked,
 * r->uri built from that value alone. 0 to go on (*job NULL for other
 * operations), -1 when it has replied (400 ambiguous or missing id, 404
 * another key's job, 503 store failure).
 */
int gw_job_id(struct gw_req *r, char **job);
/** The vendor answered a job creation for r's key: record the owner (takes body). */
void gw_job_created(struct gw_req *r, struct evbuffer *body);
/** /metrics: the owner records held (gauge). */
void gw_jobs_metrics(struct gw *gw, struct evbuffer *out);

/* validate.c */
/**
 * Check (and normalise) the request of r's operation: 0 to proceed, -1 when
 * it has replied (400/413, or the verdict of a dry run) or when its body
 * went to the worker thread, which then replies or calls gw_req_validated.
 */
int gw_validate(struct gw_req *r);
/** r ends: a check still running for it is cancelled (it never touches r). */
void gw_validate_forget(struct gw_req *r);
/** A served partial case, to diff later submissions against (takes body). */
void gw_case_served(struct gw_req *r, struct evbuffer *body);
/** Reply 400 VALIDATION_FAILED listing p (borrowed); frees r. */
void gw_reply_problems(struct gw_req *r, struct tg_problems *p);

/* hooks.c */
/** Open the outbox, start the worker, resume waiting jobs; NULL with err. */
struct gw_hooks *gw_hooks_new(struct gw *gw, struct tg_err *err);
/** Stop at once (leases released: due again at the next start); NULL-safe. */
void gw_hooks_free(struct gw_hooks *h);
/** After a reload: the new egress policy; old is the previous configuration. */
void gw_hooks_reload(struct gw *gw, const struct gw_config *old);
/** SIGTERM: stop polling, let attempts in flight end, then gw_maybe_exit. */
void gw_hooks_drain(struct gw *gw);
/** Scrape-time webhook series (queue depth by state, attempts in flight). */
void gw_hooks_metrics(struct gw *gw, struct evbuffer *out);

/* callbacks.c */
#define GW_RELAY_PREFIX "/__tidegate/callbacks/"
/** What the webhook code reads of an export body (gw_hook_scan). */
struct gw_hook_scan {
	char *raw_url;			/* the caller's callbackUrl (either spelling) or NULL */
	const char *raw_member;		/* its member name (static) */
	int sent;			/* the body sent was scanned: the fields below hold */
	char *url;			/* the callbackUrl of the body sent, or NULL */
	const char *member;
	char *stripped;			/* the body sent without its callbackUrl members */
	size_t stripped_len;
};
/**
 * Fill s (its strings owned) from the caller's body raw (NULL: skip) and the
 * body to be sent (NULL: skip), both borrowed. Reads nothing else: safe on
 * the worker thread.
 */
void gw_hook_scan(struct gw_hook_scan *s, const char *raw, size_t rawlen, const char *body,
    size_t bodylen);
/** Free a heap scan (takes ownership; NULL-safe). */
void gw_hook_scan_free(struct gw_hook_scan *s);
/** 1 when r is an export whose callbackUrl the gateway handles (a scan is wanted). */
int gw_hook_wanted(const struct gw_req *r);
/**
 * An export request with a callbackUrl (deliver, relay): egress and secret
 * checks (400), the URL taken out of r->body (relay: replaced by the
 * gateway's inbound endpoint, the job added first). Reads r->hook_scan
 * (and frees it) when validation made one, else parses the body. 0 to
 * proceed, -1 when it has replied.
 */
int gw_hook_prepare(struct gw_req *r);
/** The same checks as problems of a validated export (one 400 lists all);
 * the caller's URL from r->hook_scan when set, else parsed from the body. */
void gw_hook_check(struct gw_req *r, struct tg_problems *p);
/**
 * The vendor's exchange for a request with r->hook ended: a held 200 adds
 * the job and answers (1: replied); otherwise 0 and the proxy goes on.
 */
int gw_hook_done(struct gw_req *r, enum tg_up_error err);
void gw_hook_free(struct gw_hook *hk);
/** POST /__tidegate/callbacks/{id}: the vendor's delivery in relay mode. */
void gw_hook_relay(struct gw_req *r);

/* hook_fetch.c */
/**
 * Obtain the payload of waiting job id: poll the vendor's export cid
 * (NULL: only wait for a relay delivery), first after delay_ms; the job
 * is given up payload_timeout after created_ms (wall clock).
 */
void gw_fetch_start(struct gw_hooks *h, const char *id, const char *cid, int64_t created_ms,
    int64_t delay_ms);
/** Stop obtaining id's payload (it arrived another way). */
void gw_fetch_stop(struct gw_hooks *h, const char *id);
/** Map value destructor for h->fetches. */
void gw_fetch_free(void *f);

/* admin_webhooks.c */
/** /webhooks… on the admin listener: list, read, redeliver. */
void gw_admin_webhooks(struct gw *gw, struct evhttp_request *req, const char *path);

/* runs.c */
struct tg_runs *gw_runs_open(const struct gw_config *c, struct tg_err *err);
/** on_head of r: 1 when a 201 to POST /simulations is held for the registry. */
int gw_run_hold(struct gw_req *r, int status);
/** The held submission ended: record the run, then answer (1: replied). */
int gw_run_done(struct gw_req *r, enum tg_up_error err);
/** A submission's callback URL checked (400 when refused): 0, or -1 replied. */
int gw_run_prepare(struct gw_req *r);
/** GET of an expired run's status or results: 410 (or the archive); -1 replied. */
int gw_run_gone(struct gw_req *r);
/** The vendor answered 200 to a GET of run id's status: record it (borrowed). */
void gw_run_status_seen(struct gw *gw, const char *id, const char *body, size_t len);
/** The same for a client's GET proxied without the poll multiplexer (takes body). */
void gw_run_seen(struct gw_req *r, struct evbuffer *body);
/** Run id ended: enqueue its webhook when its submission named a callback. */
void gw_run_notify(struct gw *gw, const char *id);
/** Whose webhook secrets sign for API key name: its own, "global", or NULL. */
const char *gw_run_secret_ref(const struct gw_config *c, const char *key);
/** A callback URL given by r's caller: secret and egress checks, problems at
 * /callbackUrl. 0, or -1 with a problem added. */
int gw_callback_check(struct gw_req *r, const char *url, struct tg_problems *p);
/** /metrics: the registry's counts as gauges (nothing without a registry). */
void gw_runs_metrics(struct gw *gw, struct evbuffer *out);

/* runs_api.c */
#define GW_API_PREFIX "/tidegate/v1/"
/** The extension API on the simulation listener (never routed upstream). */
void gw_runs_api(struct gw_req *r);
/** Query limit (1-1000) and offset of a list into *limit / *offset (left as
 * they are when absent): 0, or -1 with why. */
int gw_api_paging(struct gw_req *r, size_t *limit, size_t *offset, char *why, size_t n);

/* sweeps.c */
/** POST and GET /tidegate/v1/sweeps (rest "") and GET …/sweeps/{id} (rest "/{id}"). */
void gw_sweeps_api(struct gw_req *r, const char *rest);
void gw_sweep_post_free(struct gw_sweep_post *sp);
/** Mark sweep id done if every variant has ended, then its webhook:
 * 1 when it became done now, 0 when not, -1 on a registry error. */
int gw_sweep_settle(struct gw *gw, const char *id);

/* sweeper.c */
struct gw_sweeper *gw_sweeper_new(struct gw *gw);
void gw_sweeper_free(struct gw_sweeper *sw);
/** Submit what sweep id may submit now; NULL-safe. */
void gw_sweeper_kick(struct gw_sweeper *sw, const char *id);
/** A run of sweep id ended: settle the sweep, or submit into the free slot. */
void gw_sweeper_run_ended(struct gw_sweeper *sw, const char *id);
/** No submission in flight (drain may end). */
int gw_sweeper_idle(const struct gw_sweeper *sw);

/* tracker.c */
struct gw_tracker *gw_tracker_new(struct gw *gw);
void gw_tracker_free(struct gw_tracker *t);
/** Re-read the schedule and the unhandled ends (a run was added or ended); NULL-safe. */
void gw_tracker_kick(struct gw_tracker *t);

/* logins.c */
void gw_login_handle(struct gw_req *r);

/* admin.c */
void gw_admin_on_request(struct evhttp_request *req, void *arg);
void gw_metrics_declare(struct tg_metrics *m);

#endif
