/*
 * gateway.h - the request core, as the entry point and the features see it.
 *
 * The core (src/gateway/) owns the process: listeners, the reloadable
 * runtime (services, upstreams, vendor token sources, API keys), the proxy
 * path of one request (route -> caller authentication -> request check ->
 * vendor token -> upstream -> relay), replies and the access log, the
 * admin listener and drain. It names no feature. A feature (src/jobs/,
 * src/webhook/, src/runs/) registers a struct gw_feature at start-up, by
 * role: the callbacks the core calls at each step of a request of the
 * canonical operations it serves, what it checks in their bodies, the
 * endpoints it serves itself, what it runs in the background, and its
 * configuration (its own key table: gateway_config.h), with a slot in
 * every request for its own state (h2o's handlers and configurators and
 * relayd's se_priv are the models). Features never call each other's code: they meet
 * through the core's observers (answers seen), through the APIs one offers
 * the others by name (feature_apis.h) and through the state seam.
 *
 * Structs here are the core's; features read their fields and write only
 * the ones marked "features may set".
 */
#ifndef TIDEGATE_GATEWAY_H
#define TIDEGATE_GATEWAY_H

#include <stdint.h>
#include <sys/queue.h>

#include <event2/http.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "tidegate/body_check.h"
#include "tidegate/frontdoor.h"
#include "tidegate/gateway_config.h"
#include "tidegate/ids.h"
#include "tidegate/keys.h"
#include "tidegate/metrics.h"
#include "tidegate/problems.h"
#include "tidegate/routes.h"
#include "tidegate/token.h"
#include "tidegate/upstream.h"

struct evbuffer;
struct evdns_base;
struct tg_case_store;
struct tg_state;
struct tg_quota;
struct tg_worker;

enum gw_listener { GW_DEX, GW_SIM, GW_ADMIN, GW_NLISTENERS };

/* Features a process may register; each has one slot per request. */
#define GW_MAX_FEATURES 8
/* APIs the features may offer each other (feature_apis.h). */
#define GW_MAX_APIS 8

struct gw_service {
	int index;			/* GW_DEX or GW_SIM */
	const char *name;		/* "dex", "sim" */
	unsigned mask;			/* TG_SVC_DEX / TG_SVC_SIM */
	const struct tg_service_routes *routes;
	const struct gw_service_cfg *cfg;
	struct tg_upstream *api;	/* vendor API (with fallback host) */
	struct tg_upstream *auth;	/* login endpoint's origin (may equal api) */
	struct tg_token_src *tokens;	/* NULL without configured credentials */
	struct gw_share *share;		/* its logins shared through the state seam */
	struct tg_login_cache *logins;	/* callers' own logins */
	struct gw_login_span *login_span;	/* its vendor login's CLIENT span while
						 * a traced caller waits (owned) */
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

struct gw_lctx {
	struct gw *gw;
	int listener;
	struct tg_frontdoor door;	/* the listener's front door (frontdoor.h) */
	struct tg_frontdoor_stats stats;	/* its counters, for /metrics */
	int retired;			/* its address changed on SIGHUP (listeners.c) */
};

struct gw_admin_req;
struct gw_feature;
struct gw_scrape;
struct gw_share;
struct gw_vcall;

struct gw_tls;
struct gw_otlp;
struct gw_retired;
struct gw_listener_kind;
struct gw_fleet_req;

struct gw {
	struct event_base *base;
	struct evdns_base *dns;
	char *config_path;
	struct gw_runtime *rt;
	struct evhttp *http[GW_NLISTENERS];
	struct evhttp_bound_socket *bound[GW_NLISTENERS];
	struct gw_tls *tls;		/* TLS of the listeners (tls_listen.c), owned */
	struct gw_otlp *otlp;		/* the span exporter (otlp.c), owned; NULL:
					 * tracing.otlp_url unset, no spans made */
	struct gw_lctx *lctx[GW_NLISTENERS];	/* owned, each listener's since its bind */
	struct gw_retired *retired;	/* listeners of addresses given up on SIGHUP,
					 * until their connections close (listeners.c) */
	struct event *retired_ev;
	const struct gw_listener_kind *lkinds;	/* static: what serves each listener */
	struct tg_metrics *metrics;
	size_t inflight;		/* client requests being handled */
	TAILQ_HEAD(, gw_req) reqs;	/* those requests, for the drain's deadline */
	TAILQ_HEAD(, gw_admin_req) admin_reqs;	/* admin requests to log (admin_log.c) */
	size_t unflushed;		/* replies handed to libevent, not yet written */
	int draining;
	int drain_cut;			/* drain_timeout passed: what was left was cut */
	struct event *sig[3], *drain_timer;
	/* SIGTERM with drain_delay: /readyz says draining while the listeners
	 * still serve, until delay_end_ms (monotonic), then the drain */
	int stopping;
	int64_t delay_end_ms;
	struct event *delay_timer;
	/* the last SIGHUP's outcome (the start counts as one, as Prometheus
	 * does): 1 loaded, 0 refused; when a configuration last loaded (Unix ms) */
	int reload_ok;
	int64_t reload_ok_at_ms;
	struct tg_quota *quota;		/* the quota engine's lease client (quota.h),
					 * made at start by the first feature that
					 * needs one and shared (owned by it); NULL:
					 * none. /readyz reports its fallback. */
	struct gw_runtime *dying;	/* released, freed from reap_ev */
	struct event *reap_ev;
	struct event *start_ev;		/* the features' start, on the loop's first turn */
	struct tg_case_store *cases;	/* partial cases served, kept across reloads */
	struct tg_worker *worker;	/* checks large bodies off the loop */
	struct tg_state *state;		/* durable and shared state (state.h), borrowed:
					 * the entry point opens and closes it */
	struct gw_fleet_req *fleet_reqs;	/* GET /fleet waiting on it (admin_fleet.c) */
	struct gw_budget *budget[2];	/* the vendor's budget per service (budget.c),
					 * owned, kept across reloads */
	/* registered features (feature.c), and their per-request roles
	 * resolved once (NULL: none), so a request costs what it did */
	const struct gw_feature *feat[GW_MAX_FEATURES];
	const struct gw_request_role *feat_req[GW_MAX_FEATURES];
	const struct gw_check_role *feat_chk[GW_MAX_FEATURES];
	const struct gw_endpoint_role *feat_ep[GW_MAX_FEATURES];	/* asked per request;
									 * never NULL */
	void *feat_ctx[GW_MAX_FEATURES];
	int feat_cfg[GW_MAX_FEATURES];	/* each one's settings in cfg.settings, -1 none */
	int nfeat;
	unsigned char by_op[TG_OP_COUNT][GW_MAX_FEATURES];	/* feature ids per op */
	unsigned char nby_op[TG_OP_COUNT];
	struct gw_api_entry {		/* offered by the features (feature.c) */
		const char *name;
		const void *api;
		void *ctx;
	} apis[GW_MAX_APIS];
	int napis;
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
	enum tg_op op;			/* m's operation, TG_OP_PASSTHROUGH when none */
	const char *method;
	char *path;			/* without query, normalised */
	char id[TG_UUID_LEN];
	char trace_id[33];		/* its W3C trace (trace.c): accepted or new */
	char span_id[17];		/* its SERVER span while tracing (spans.c), else "" */
	char parent_span_id[17];	/* the caller's span (valid traceparent), or "" */
	int sampled;			/* its trace's sampled flag (W3C): the caller's, else
					 * tracing.sample's draw; 1 while tracing is off */
	char client[64];		/* the peer's address (access log) */
	char *user_agent;		/* the client's User-Agent, or NULL (owned) */
	char *job;			/* the job its query names (its service's job_param:
					 * the access line's correlationId), or NULL (owned) */
	uint64_t request_bytes;		/* the body the client sent */
	int64_t up_t0, up_ms;		/* its own vendor call: start, response time ms
					 * (monotonic; -1: no call) */
	int fault;			/* the front door's refusal of its head: 0, or
					 * TG_HEAD_NOT_FOUND / _BODY_TOO_LARGE /
					 * _UNAVAILABLE under a
					 * feature's prefix (frontdoor.h) */
	enum gw_auth auth;
	const struct tg_key *key;
	struct tg_up_req *up;		/* a caller's own login (logins.c) */
	struct gw_vcall *call;		/* the vendor call relayed (vendor.c) */
	char *uri;			/* upstream path and query (features may set) */
	int status, upstream_status;
	int started, paused, client_gone;
	uint64_t bytes;
	int64_t t0, t0_us;		/* arrival: monotonic ms (access log), us (metrics) */
	const char *histogram;		/* the histogram its time goes to (features may
					 * set; static), NULL:
					 * tidegate_request_duration_seconds */
	const char *origin;		/* features may set */
	const char *retry;		/* why the vendor was asked again, or NULL
					 * (tg_up_req_why; static) */
	const char *error;		/* short reason for the access log (features may set) */
	struct gw_flush *flush;		/* reply handed over, not yet written */
	struct evbuffer *body;		/* normalised body sent instead of the client's
					 * (features may set: owned by r) */
	struct evbuffer *capture;	/* copy of the vendor's answer for on_done */
	const char *drop_query;		/* query parameter not to forward (features may set) */
	int held;			/* a feature holds the vendor's answer (GW_HEAD_HOLD) */
	struct evbuffer *vendor_error;	/* a relayed error answer, read up to
					 * GW_VENDOR_ERROR_MAX to be wrapped (owned) */
	struct gw_offload *offload;	/* its work on the worker thread (its body's
					 * check), cancelled when r ends */
	void *slot[GW_MAX_FEATURES];	/* each feature's state (gw_request_role.on_free) */
	int feat_next;			/* the next feature of the op to ask (feature.c) */
	int feat_done_next;		/* the next feature whose on_done runs (feature.c) */
	TAILQ_ENTRY(gw_req) inflight_next;	/* on gw->reqs */
};

/* What on_head asks of the core for the vendor's answer. */
enum gw_head {
	GW_HEAD_RELAY = 0,	/* relay it to the client */
	GW_HEAD_CAPTURE,	/* relay it and keep a copy for on_done */
	GW_HEAD_HOLD,		/* keep it whole, unsent: on_done answers the client */
};

/* An answer of the vendor that a feature saw (gw_answer_seen). */
struct gw_observed;
struct gw_answer {
	int service;			/* GW_DEX / GW_SIM */
	enum tg_op op;
	const char *job;		/* correlationId or run id (borrowed) */
	int status;
	const char *body;		/* borrowed for the call */
	size_t len;
	struct gw_observed *obs;	/* set by the core: gw_answer_hold */
};

/* An answer a feature holds for GET uri (feature_apis.h, jobs.answers),
 * borrowed until the loop runs again. */
struct gw_peek {
	int status;
	const char *body;
	size_t len;
	int terminal;
};

/*
 * A feature, by role (h2o splits its handlers, filters and loggers the
 * same way): what it does for each request of its operations, what it
 * checks in their bodies, the endpoints it serves itself, what it runs in
 * the background, and its configuration. Every role and every callback is
 * optional (NULL); ctx is what gw_feature_register was given (borrowed by
 * the core). Per-request callbacks run for requests of the feature's ops
 * in registration order, each with the request r (borrowed) whose slot[id]
 * the feature may fill. What one feature offers another is not here: it
 * is named (feature_apis.h).
 */

/* Per request (the core resolves it at registration: gw->feat_req). */
struct gw_request_role {
	const enum tg_op *ops;		/* operations served; terminated by TG_OP_COUNT */
	/* After the check: 0 to go on, -1 when the feature has replied or
	 * will reply (the request is then the feature's until it replies). */
	int (*on_request)(struct gw_req *r, void *ctx);
	/* The vendor's status line and headers came: what the core does with
	 * the answer (the highest ask of all features wins). */
	enum gw_head (*on_head)(struct gw_req *r, void *ctx, int status);
	/* The vendor exchange ended (err TG_UP_OK: whole). capture (borrowed)
	 * is the copy kept for CAPTURE or HOLD, or NULL. 1 when the feature
	 * has replied (only for a request it held). */
	int (*on_done)(struct gw_req *r, void *ctx, enum tg_up_error err,
	    struct evbuffer *capture);
	/* r ends: free slot (its own state, whichever role made it); r's
	 * fields are still valid. */
	void (*on_free)(struct gw_req *r, void *ctx, void *slot);
};

/* The request check of its operations: scan runs beside the body's check
 * (maybe on the worker thread: it reads only its argument, the body as the
 * check parsed it) when wants_scan says so; check then runs on the loop
 * with its result (takes ownership) and may add problems to the one 400. */
struct gw_check_role {
	int (*wants_scan)(const struct gw_req *r, void *ctx);
	void *(*scan)(const struct tg_check_body *b);
	void (*scan_free)(void *scan);
	void (*check)(struct gw_req *r, void *ctx, void *scan, struct tg_problems *p);
};

/* Endpoints of its own, never upstream. A path prefix claimed before
 * routing on listener; prefix_open: its requests carry no API key (the
 * path is their credential), so on_prefix_head says, on the head of one
 * that announces a body (method and the normalised path borrowed; length:
 * its Content-Length, -1 none), whether the body may be read: 0 or a
 * TG_HEAD_* fault, and it may lower *limit (borrowed; max_body when
 * called). on_prefix gets a refused head's stand-in too (r->fault). And a
 * path prefix on the admin listener with its handler. */
struct gw_endpoint_role {
	int prefix_listener;
	const char *prefix;
	int prefix_open;
	int (*on_prefix_head)(void *ctx, const char *method, const char *path, int64_t length,
	    uint64_t *limit);
	void (*on_prefix)(struct gw_req *r, void *ctx);
	const char *admin_prefix;
	void (*on_admin)(void *ctx, struct evhttp_request *req, const char *path);
};

/* In the background and in the process: start (the loop's first turn,
 * every feature registered, privileges dropped: the APIs it uses are
 * looked up here, and what it runs that may use them starts), answers
 * other features got (gw_answer_seen), scrape-time metrics into out
 * (borrowed; a part written later holds s: gw_scrape_hold /
 * gw_scrape_release), reload (old configuration borrowed), drain
 * (SIGTERM), idle (drain may end), stop (free ctx). */
struct gw_background_role {
	void (*start)(void *ctx);
	void (*on_answer)(void *ctx, const struct gw_answer *a);
	void (*metrics)(void *ctx, struct evbuffer *out, struct gw_scrape *s);
	void (*reload)(void *ctx, const struct gw_config *old);
	void (*drain)(void *ctx);
	int (*idle)(void *ctx);
	void (*stop)(void *ctx);
};

struct gw_feature {
	const char *name;
	/* Its configuration, defined before the configuration was loaded
	 * (gw_config_define); its settings: gw_feature_settings. */
	const struct gw_config_def *config;
	const struct gw_request_role *request;
	const struct gw_check_role *check;
	const struct gw_endpoint_role *endpoints;
	const struct gw_background_role *background;
};

/* ---- process (src/tidegate.c) ---- */

/** Start on base: runtime, signals; the features then register and
 * gw_start opens the listeners. Takes cfg; st (borrowed, may be NULL) is
 * the state seam the features use and must outlive gw. NULL with err. */
struct gw *gw_new(struct event_base *base, const char *config_path, struct gw_config *cfg,
    struct tg_state *st, struct tg_err *err);
/** Open the listeners once every feature is registered: 0, or -1 with err. */
int gw_start(struct gw *gw, struct tg_err *err);
/** Stop every feature (their stop callbacks) and free gw (takes ownership). */
void gw_free(struct gw *gw);
/**
 * Register feature f (borrowed, static) with its context ctx (borrowed;
 * f->stop frees it) before gw_start: its id (the index of its request
 * slot and of its settings), or -1 with err when GW_MAX_FEATURES are
 * registered or its configuration was not loaded (gw_config_define).
 */
int gw_feature_register(struct gw *gw, const struct gw_feature *f, void *ctx,
    struct tg_err *err);
/** The settings of feature id under rt (borrowed from rt's configuration:
 * the one a request or a reload sees), filled from the key table its
 * config names; NULL when it has none. */
const void *gw_feature_settings(const struct gw_runtime *rt, int id);
/** r's slot of feature id (borrowed; r owns it until the feature's
 * on_free), made zeroed, size bytes, when absent. */
void *gw_req_slot(struct gw_req *r, int id, size_t size);

/* ---- the runtime ---- */

/** Drop a reference to rt (borrowed until here; NULL-safe); freed from the
 * loop after the last. */
void gw_runtime_unref(struct gw_runtime *rt);
/** Stop the loop once draining and every reply has been written (gw borrowed). */
void gw_maybe_exit(struct gw *gw);

/* ---- observers ---- */

/**
 * Tell every feature with on_answer of a (borrowed). done(arg) runs once
 * every observer that held the answer (gw_answer_hold) has let it go:
 * before this returns when none held it (NULL is returned then), else
 * later, and the returned handle (owned by the core) lets the publisher
 * go away first: gw_observed_cancel. done may be NULL.
 */
struct gw_observed *gw_answer_seen(struct gw *gw, struct gw_answer *a,
    void (*done)(void *arg), void *arg);
/** The publisher is gone: done is never called (o borrowed; NULL-safe). */
void gw_observed_cancel(struct gw_observed *o);
/** In on_answer: keep the publisher of a (borrowed) from going on with the
 * answer (e.g. answering the clients it was fetched for) until the
 * returned handle is released (gw_answer_release, exactly once). */
struct gw_observed *gw_answer_hold(const struct gw_answer *a);
void gw_answer_release(struct gw_observed *o);

/* ---- admin requests answered later (held.c) ---- */

struct gw_held;
/** Hold req (borrowed) for an answer that comes later; the caller owns the
 * hold and ends it with gw_held_take. */
struct gw_held *gw_held_new(struct evhttp_request *req);
/** End the hold (takes h): req to answer now, or NULL when the client went. */
struct evhttp_request *gw_held_take(struct gw_held *h);
/** The admin request req (borrowed) was made with the API key named name
 * (borrowed; copied): its access line says so. Nothing for a request the
 * admin listener does not log. */
void gw_admin_set_key(struct gw *gw, struct evhttp_request *req, const char *name);
/* Who may use an admin API (gw_admin_auth). */
enum gw_admin_auth { GW_ADMIN_OK, GW_ADMIN_MISSING, GW_ADMIN_UNKNOWN, GW_ADMIN_FORBIDDEN };
/** The caller of an admin API under rt (borrowed), by its X-Api-Key or
 * bearer (borrowed; NULL when absent): the same verdict the front door
 * takes on the head; *key the key that matched (borrowed from rt), or NULL. */
enum gw_admin_auth gw_admin_auth(const struct gw_runtime *rt, const char *apikey,
    const char *bearer, const struct tg_key **key);
/** Whether the admin request req (borrowed) may use an admin API: 1, its
 * key named on its access line; 0 when it was answered 401 (no known key,
 * with WWW-Authenticate) or 403 (a key without the admin service). */
int gw_admin_authorized(struct gw *gw, struct evhttp_request *req);
/** Answer the admin request req (handed back to libevent) with the JSON
 * error body of status, code (borrowed; NULL: the status's) and msg
 * (borrowed), naming the request's id; its access line names code. */
void gw_admin_reply_error(struct gw *gw, struct evhttp_request *req, int status,
    const char *code, const char *msg);
/** A scrape part written later (s borrowed): the reply waits for the release. */
void gw_scrape_hold(struct gw_scrape *s);
void gw_scrape_release(struct gw_scrape *s);

/* ---- replies: each frees r ---- */

/* Owner tags of callers without an API key (tg_up_req_set_owner): key
 * names cannot start with '(' (config.c). The gateway's own calls go
 * untagged. */
#define GW_OWNER_CALLERS "(caller tokens)"	/* callers' own bearer tokens */
#define GW_OWNER_NO_KEY "(no key)"		/* loopback mode without keys */
/** The owner tag r's upstream requests count against (borrowed from r's
 * runtime): its API key's name, or one of the GW_OWNER_* buckets. */
const char *gw_req_owner(const struct gw_req *r);
/** Reply with b (borrowed, may be NULL) as the body; ctype borrowed. */
void gw_req_reply_buf(struct gw_req *r, int status, const char *ctype, struct evbuffer *b);
/** The most of a vendor's error answer read and relayed (vendor_error.c). */
#define GW_VENDOR_ERROR_MAX 8192
/** Reply with the vendor's answer b (borrowed, may be NULL; ctype
 * borrowed): as gw_req_reply_buf below status 400 and for the OAuth token
 * endpoint, else wrapped in the gateway's error body with the vendor's
 * status, message and (at most GW_VENDOR_ERROR_MAX bytes of) body. */
void gw_req_reply_vendor(struct gw_req *r, int status, const char *ctype,
    struct evbuffer *b);
/** Reply with what g generated (g stays the caller's). */
void gw_req_reply_json(struct gw_req *r, int status, yajl_gen g);
/** The JSON error body of DESIGN.md; code and msg borrowed. */
void gw_req_reply_error(struct gw_req *r, int status, const char *code, const char *msg);
/** 405 METHOD_NOT_ALLOWED with the Allow header RFC 9110 asks for: allow
 * (borrowed), the path's methods, "GET, POST". */
void gw_req_reply_405(struct gw_req *r, const char *allow);
/** 400 VALIDATION_FAILED listing p (borrowed). */
void gw_reply_problems(struct gw_req *r, struct tg_problems *p);
/** 503 UPSTREAM_BUSY with Retry-After; u borrowed, may be NULL. */
void gw_req_reply_busy(struct gw_req *r, const struct tg_up_req *u);
/** 502/504 for an upstream error err before any response; u borrowed (may
 * be NULL), what (borrowed) names the endpoint ("API"). */
void gw_req_reply_upstream(struct gw_req *r, const struct tg_up_req *u, enum tg_up_error err,
    const char *what);
/** No vendor token: 503 TOKEN_UNAVAILABLE (502 UPSTREAM_TLS_FAILED for a
 * refused certificate) with Retry-After; what and why borrowed. */
void gw_req_reply_token_error(struct gw_req *r, const char *what, const char *why,
    int retry_after);
/** The status, code (static) and message (into msg) of an upstream error
 * err of service svc (borrowed); detail (borrowed, may be NULL). For
 * callers that answer several requests at once. */
int gw_upstream_error(enum tg_up_error err, const char *detail, const char *svc,
    const char *what, char *msg, size_t len, const char **code);
/** The same for a failed vendor token of ts (borrowed, may be NULL). */
int gw_token_error(struct tg_token_src *ts, const char *what, const char *why, char *msg,
    size_t len, const char **code);
/** Start a streamed reply of status to r (borrowed until the end); the
 * body follows with evhttp_send_reply_chunk_with_cb. */
void gw_req_reply_start(struct gw_req *r, int status);
/** End the streamed reply of r (freed): abort resets the connection. */
void gw_req_reply_end(struct gw_req *r, int abort);

/* ---- calls to the vendor (vendor.c) ---- */

/*
 * One call of the gateway to a vendor service, for a client or for itself:
 * it holds a reference to rt, waits for the gateway's vendor token (unless
 * it brings a bearer or none), sends, and answers a 401 on the gateway's
 * token once by invalidating it and sending again (never shown to the
 * callbacks). No callback runs before gw_vcall_start returns.
 */
struct gw_vcall;
/** Note what the access log says of r's client (reply.c): address, User-Agent,
 * body size, correlationId; r borrowed. */
void gw_access_note(struct gw_req *r);

/* Who a vendor call is for (trace.c): the caller's request id, its W3C
 * trace (a trace id and tracestate) and its address chain for
 * X-Forwarded-For. Plain arrays, copied by assignment; "" when unknown. */
#define GW_TRACE_STATE_MAX 512
struct gw_trace {
	char rid[TG_UUID_LEN];		/* the caller's request id */
	char trace_id[33];		/* 32 lower-case hex digits */
	char span_id[17];		/* the caller's request's SERVER span while
					 * tracing: the parent of the call's CLIENT spans;
					 * "" none */
	char state[GW_TRACE_STATE_MAX];	/* the caller's tracestate, as sent */
	char forwarded[256];		/* X-Forwarded-For to send: chain + client */
	int unsampled;			/* the caller's trace is not sampled: -00 sent */
};
/** Fill t (borrowed) for the client request r (borrowed): its request id,
 * the trace of a valid incoming traceparent or a new random one, its
 * tracestate, the client address after any X-Forwarded-For. */
void gw_trace_of_req(struct gw_trace *t, const struct gw_req *r);
/** A new trace id (32 hex digits, random, never all zeros) into id (borrowed). */
void gw_trace_new_id(char id[33]);
/** "00-<trace_id>-<new span id>-01" into out (borrowed), "-00" when not
 * sampled: one per vendor call; span (borrowed, may be NULL) receives the
 * span id. */
void gw_trace_parent(const char *trace_id, int sampled, char out[56], char span[17]);
/** A new span id (16 hex digits, random, never all zeros) into span (borrowed). */
void gw_trace_new_span(char span[17]);
/** The User-Agent of the gateway's own calls, "tidegate/<version>" (static). */
const char *gw_user_agent(void);
/** Set out's (borrowed) X-Request-Id, traceparent (a new span),
 * tracestate and X-Forwarded-For from t (borrowed; NULL: a call of the
 * gateway's own, which starts a trace of its own), and User-Agent when
 * none is there. */
void gw_trace_headers(const struct gw_trace *t, struct evkeyvalq *out);
struct gw_vcall_req {
	struct gw_runtime *rt;		/* borrowed; the call holds a reference */
	int service;			/* GW_DEX / GW_SIM */
	enum evhttp_cmd_type method;
	const char *uri;		/* path and query with the base path (copied) */
	struct evbuffer *body;		/* borrowed until the call ends (replays resend it) */
	const char *bearer;		/* the caller's own token (copied): no gateway token */
	int no_token;			/* send without a token (add_headers brings one) */
	const char *owner;		/* pool owner tag (borrowed: static or rt's) */
	size_t replay_max;		/* a 401 is replayed for a body up to this size */
	const struct gw_trace *trace;	/* who the call is for (copied); NULL: the gateway */
	int token_endpoint;		/* to the service's login endpoint (sim: auth_url
					 * or token_url), not its API */
	int klass;			/* enum tg_up_class in the queue and the vendor's
					 * budget; 0: a login for token_endpoint, else
					 * a read for GET and HEAD, a submission otherwise */
};
struct gw_vcall_cbs {
	/* The answer, as tg_up_cbs: headers borrowed until on_done returns. */
	void (*on_head)(struct gw_vcall *c, int status, const struct evkeyvalq *h, void *arg);
	void (*on_body)(struct gw_vcall *c, struct evbuffer *buf, void *arg);
	/* The call is over (err TG_UP_OK: whole); the caller then cancels or
	 * drops it: gw_vcall_cancel frees it. */
	void (*on_done)(struct gw_vcall *c, enum tg_up_error err, void *arg);
	/* No vendor token came: why (borrowed) and a Retry-After in seconds. */
	void (*on_no_token)(struct gw_vcall *c, const char *why, int retry_after, void *arg);
	/* Headers of each attempt (out borrowed), before Authorization is set. */
	void (*add_headers)(struct gw_vcall *c, struct evkeyvalq *out, void *arg);
};
/** Start a streamed call: q and cbs borrowed (copied), arg borrowed. The
 * caller owns the call: gw_vcall_cancel, after on_done or instead of it. */
struct gw_vcall *gw_vcall_start(const struct gw_vcall_req *q, const struct gw_vcall_cbs *cbs,
    void *arg);
/** Stop the call (no callback after this) and free it; takes c; NULL-safe. */
void gw_vcall_cancel(struct gw_vcall *c);
/** Stop / resume reading the answer's body (the sink is full); c borrowed. */
void gw_vcall_pause(struct gw_vcall *c);
void gw_vcall_resume(struct gw_vcall *c);
/** The attempt in flight (borrowed; valid inside the callbacks): its
 * origin and failure detail (tg_up_req_origin, tg_up_req_detail). */
const struct tg_up_req *gw_vcall_upstream(const struct gw_vcall *c);

/* A whole answer (gw_vcall_fetch): everything borrowed for the callback. */
struct gw_vfetch {
	int status;			/* 0 when no answer came */
	const struct evkeyvalq *headers;
	struct evbuffer *body;		/* NULL on any error */
	enum tg_up_error err;		/* TG_UP_TOO_LARGE over max_body */
	const char *token_why;		/* no vendor token: why (err TG_UP_CONNECT) */
	int retry_after;		/* with token_why: seconds */
	const struct tg_up_req *u;	/* the attempt (detail, origin), or NULL */
};
typedef void (*gw_vfetch_cb)(struct gw_vcall *c, const struct gw_vfetch *res, void *arg);
/** The call with its body collected up to max_body: cb once, then the call
 * is freed (never cancel it after cb). q borrowed (copied), arg borrowed;
 * add_headers may be NULL. The caller owns the call until cb. */
struct gw_vcall *gw_vcall_fetch(const struct gw_vcall_req *q, size_t max_body,
    void (*add_headers)(struct gw_vcall *, struct evkeyvalq *, void *), gw_vfetch_cb cb,
    void *arg);

/* ---- the proxy path ---- */

/** Authenticate the caller of r (borrowed): 0, or -1 after replying 401/403. */
int gw_req_authenticate(struct gw_req *r);
/** Send r upstream (its vendor token first) and relay the answer. */
void gw_req_proxy(struct gw_req *r);
/** r (borrowed), taken by a feature's on_request (-1), goes on: the
 * features after that one, then the vendor. */
void gw_req_continue(struct gw_req *r);
/** r's held answer (borrowed), taken by a feature's on_done (1), goes on:
 * the on_done of the features after that one, then, when none replies,
 * the held answer as the vendor gave it. */
void gw_req_done_continue(struct gw_req *r);
/** Upstream path and query for r (borrowed; the string is malloc'd, the
 * caller owns it): route template, minus drop_query. */
char *gw_upstream_uri(struct gw_req *r);
/** Where r (borrowed) goes (borrowed from its runtime): the service's API,
 * or for a simulation token request the login endpoint (sim.auth_url or
 * sim.token_url). */
struct tg_upstream *gw_req_upstream(const struct gw_req *r);

#endif
