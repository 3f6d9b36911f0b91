/*
 * gw.h - private contract between the request core's files: what the core
 * shares beyond include/tidegate/gateway.h (the features' view): arrival
 * and the proxy path, reply tracking, request targets, the request check,
 * logins, the admin listener, and the feature dispatch.
 */
#ifndef TIDEGATE_GW_H
#define TIDEGATE_GW_H

#include <stdint.h>

#include <event2/http.h>
#include <openssl/ssl.h>

#include "tidegate/dex.h"
#include "tidegate/gateway.h"
#include "tidegate/sim.h"

/* runtime.c */
/** Build a runtime from cfg (takes *cfg, zeroed): services, upstreams,
 * token sources, keys; one reference, the caller's. NULL with err. */
struct gw_runtime *gw_runtime_new(struct gw *gw, struct gw_config *cfg, struct tg_err *err);
/** Free the released runtimes now (gw borrowed). */
void gw_runtime_reap(struct gw *gw);
/** gw->reap_ev's callback (arg: the struct gw, borrowed). */
void gw_runtime_on_reap(evutil_socket_t fd, short what, void *arg);

/* proxy.c */
void gw_on_request(struct evhttp_request *req, void *arg);

/* trace.c */
/** The ids of a client request req (borrowed) into id and trace_id
 * (borrowed): the client's X-Request-Id when valid
 * (tg_http_request_id_valid; cut to TG_UUID_LEN - 1 bytes) else a new
 * uuid4, and the trace of a valid traceparent else a new one. Returns
 * that traceparent's sampled flag (1 or 0), or -1 for a trace begun here. */
int gw_req_ids(struct evhttp_request *req, char id[TG_UUID_LEN], char trace_id[33]);
/** gw_trace_headers, and the new span id sent into span (borrowed; NULL:
 * not wanted): the CLIENT span of the attempt (vendor.c). */
void gw_trace_headers_span(const struct gw_trace *t, struct evkeyvalq *out, char span[17]);

/* relay.c */
/** The rest of r's way once the request check has passed it (inline or
 * later): the features of its operation, then the vendor. */
void gw_req_validated(struct gw_req *r);

/* vendor_error.c */
/** " (did you mean '<path>'?)" for r's path when a route path is near it
 * (tg_route_suggest), else "": into out (n bytes, borrowed). For a 404. */
void gw_path_hint(const struct gw_req *r, char *out, size_t n);

/* reply.c */
/* One access line (docs/configuration.md, Signals and logs): the fields
 * every listener's requests are logged with, null where a pointer is NULL
 * (upstream_ms: below 0). */
struct gw_access {
	const char *id, *trace_id, *client, *user_agent, *service, *op, *method, *path;
	const char *correlation_id;
	int status;
	uint64_t request_bytes, bytes;
	int64_t ms;
	const char *key, *origin, *served, *upstream_addr;
	int upstream_status;
	int64_t upstream_ms;
	const char *retry, *error;
};
/** Log the access line of a (borrowed). */
void gw_access_line(const struct gw_access *a);
/** What the access log says of req's (borrowed) client: its peer's
 * address into client (size bytes; "" unknown), its body's bytes into
 * *body, and its User-Agent (first 256 bytes) as the result, owned by the
 * caller (free()), or NULL. */
char *gw_access_client(struct evhttp_request *req, char *client, size_t size,
    uint64_t *body);
/** r ends (takes r): access log, metrics, features' slots, its call;
 * the reply's tracker owns the connection from here. */
void gw_req_finish(struct gw_req *r);
/** X-Request-Id (and Connection: close while draining) on r's reply. */
void gw_req_common_headers(struct gw_req *r);
/** Connection: close on r's reply while draining or on a retired listener. */
void gw_req_close_header(struct gw_req *r);
/** The front door's check (frontdoor.h) of a listener's heads with a body:
 * h borrowed, arg the listener's struct gw_lctx (borrowed); *limit (the
 * front door's) lowered to the caller's cap. */
int gw_head_check(const struct tg_head *h, void *arg, uint64_t *limit);
/** The bearer of an Authorization field f (borrowed; NULL: none), as
 * tg_http_bearer reads it: malloc'd, the caller's; NULL when none. */
char *gw_head_bearer(const struct tg_head_field *f);
/** The admin listener's check (admin_auth.c): as gw_head_check. */
int gw_admin_head_check(const struct tg_head *h, void *arg, uint64_t *limit);
/** The largest body of a caller svc (borrowed) cannot vouch for: its own
 * token's (caller_max_body), or a login's (login_max_body). */
uint64_t gw_body_cap(const struct gw_service *svc, int login);
/** The message of a 413 on svc (borrowed) under rt (borrowed): the caps
 * that apply and how to send more, into msg (size bytes, the caller's). */
void gw_body_cap_message(const struct gw_runtime *rt, const struct gw_service *svc, int login,
    char *msg, size_t size);
/** A normalised path (borrowed) naming the emulator's control API. */
int gw_path_reserved(const char *path);

/* feature.c: the registered features, called for r's operation. */
/** Features claiming r's path before routing: 1 when one took r. */
int gw_feat_prefix(struct gw_req *r);
/** The head of a request under an open prefix (no API key) on listener
 * (method, path and limit borrowed; length: its Content-Length, -1 none):
 * the feature's fault or 0 (*limit maybe lowered), or -1 when path is
 * under no open prefix. */
int gw_feat_prefix_head(struct gw *gw, int listener, const char *method, const char *path,
    int64_t length, uint64_t *limit);
/** on_request of r's operation's features: 0 to go on, -1 taken. */
int gw_feat_request(struct gw_req *r);
/** on_head: the highest ask of r's operation's features. */
enum gw_head gw_feat_head(struct gw_req *r, int status);
/** on_done of r's features, capture borrowed: 1 when one replied. */
int gw_feat_done(struct gw_req *r, enum tg_up_error err, struct evbuffer *capture);
/** r ends: on_free of every feature whose slot is set. */
void gw_feat_free(struct gw_req *r);
/** The admin listener: the feature whose admin prefix path (borrowed) is
 * under, its id and *op (its prefix without the slash, "webhooks";
 * borrowed, static), or -1. */
int gw_feat_admin_find(struct gw *gw, const char *path, const char **op);
/** Hand req (borrowed) to feature id's admin API. */
void gw_feat_admin(struct gw *gw, int id, struct evhttp_request *req, const char *path);
/** Reload, drain, idle and stop of every feature. */
/** gw->start_ev's callback (arg: the struct gw, borrowed): the loop's first
 * turn, every feature registered: their start callbacks, in order. */
void gw_feat_on_start(evutil_socket_t fd, short what, void *arg);
void gw_feat_reload(struct gw *gw, const struct gw_config *old);
void gw_feat_drain(struct gw *gw);
int gw_feat_idle(struct gw *gw);
void gw_feat_stop(struct gw *gw);
/** The check's scans: 1 when a feature of r's op wants one (scan_of is
 * then the feature's id); the scan's result is handed to gw_feat_check. */
int gw_feat_wants_scan(const struct gw_req *r, int *id);
void *gw_feat_scan(struct gw *gw, int id, const struct tg_check_body *b);
void gw_feat_scan_free(struct gw *gw, int id, void *scan);
/** check of every feature of r's op; scan (taken) goes to feature id (-1: none). */
void gw_feat_check(struct gw_req *r, int id, void *scan, struct tg_problems *p);

/* budget.c: the vendor's budget of each service and the fleet's pause. */
struct gw_budget;
struct gw_budget_stats {
	unsigned long long throttled;		/* vendor 429s seen */
	unsigned long long pauses_local;	/* pauses from a vendor answer here */
	unsigned long long pauses_remote;	/* pauses told by another instance */
	unsigned long long delayed;		/* calls held back by a pause */
	int64_t paused_ms;			/* the pause left now */
	long long inflight;			/* calls holding a concurrency slot */
};
/** gw->budget of s (both borrowed; made on first use) set from s's
 * budget.* keys and gating s's API upstream; what was used is kept. */
void gw_budget_attach(struct gw *gw, struct gw_service *s);
/** s (borrowed) is going away: its upstream no longer woken. */
void gw_budget_detach(struct gw *gw, struct gw_service *s);
/** Takes b; NULL-safe. After every upstream it gated is freed. */
void gw_budget_free(struct gw_budget *b);
/** A vendor's status with its headers h (borrowed): a 429 counted, a
 * Retry-After on a 429 or 503 a pause of the fleet (b borrowed). */
void gw_budget_seen(struct gw_budget *b, int status, const struct evkeyvalq *h);
/** b's counters into st (b may be NULL: zeros; both borrowed). */
void gw_budget_stats(const struct gw_budget *b, struct gw_budget_stats *st);

/* vendor.c: the services' token sources (the core's only use of the
 * token API besides the calls). */
/** The login endpoint's upstream and the token source of s (borrowed),
 * made with o (borrowed): 0, or -1 with err. */
int gw_vendor_init(struct gw *gw, struct gw_service *s, const struct tg_upstream_opts *o,
    struct tg_err *err);
void gw_vendor_cleanup(struct gw_service *s);
/** Log in ahead of the first request (a service without credentials: nothing). */
void gw_vendor_prefetch(struct gw_service *s);
/** s's login counters into st (zero without credentials). */
void gw_vendor_stats(const struct gw_service *s, struct tg_token_stats *st);
/** /readyz: s's token state in words (static) and *ready. */
const char *gw_vendor_state(struct gw_service *s, int *ready);

/* token_share.c */
/** The fleet's view of service's token (gw borrowed: its state seam; the
 * service name copied): fills out (its arg is the result) for
 * tg_token_set_share. Owned by the caller: gw_share_free, after the
 * token source. */
struct gw_share *gw_share_new(struct gw *gw, const char *service, int64_t login_timeout_ms,
    struct tg_token_share *out);
void gw_share_free(struct gw_share *s);	/* takes ownership; NULL-safe */

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
/** Write what waits for r's (borrowed) client now, on a plain socket: 1
 * when it all went, 0 when some is left to libevent's next write. */
int gw_flush_write(struct gw_req *r);

/* paths.c */
/**
 * Check and normalise r's request target into r->path (r borrowed): 0 to
 * go on; -1 when it has replied (400 BAD_REQUEST_TARGET, 404 for the
 * emulator's control API), which frees r.
 */
int gw_path_prepare(struct gw_req *r);

/* validate.c */
/**
 * Check (and normalise) the request of r's operation: 0 to proceed, -1 when
 * it has replied (400/413, or the verdict of a dry run) or when its body
 * went to the worker thread, which then replies or calls gw_req_validated.
 */
int gw_validate(struct gw_req *r);
/* Work of a request's on the worker thread (validate.c's check): when the
 * request ends first (gw_req_finish), cancel(o) makes sure it never
 * touches the request again. A hook, not a call, so that the end of a
 * request names none of the steps before it. */
struct gw_offload {
	void (*cancel)(struct gw_offload *o);
};
/** A served partial case, to diff later submissions against (takes body). */
void gw_case_served(struct gw_req *r, struct evbuffer *body);

/* held.c */
/** /metrics: the core's series (takes core), then each feature's part
 * (gw_background_role.metrics), replied to req (borrowed) once all are in. */
void gw_scrape(struct gw *gw, struct evhttp_request *req, struct evbuffer *core);

/* logins.c */
void gw_login_handle(struct gw_req *r);

/* listeners.c: the listeners, bound at start and rebound on SIGHUP. */
/** listen.<l> of c (borrowed). */
const char *gw_listen_addr(const struct gw_config *c, int l);
/* What serves a listener: its requests' handler and the check of its heads
 * (frontdoor.h), both called with the listener's struct gw_lctx. */
struct gw_listener_kind {
	void (*on_request)(struct evhttp_request *req, void *arg);
	int (*check)(const struct tg_head *h, void *arg, uint64_t *limit);
};
/** Bind the three listeners of gw->rt's configuration (TLS from it too),
 * served by kinds (borrowed, static: kept for rebinds): 0, or -1 with err
 * (a non-loopback address without API keys, a bind). */
int gw_listeners_bind(struct gw *gw, const struct gw_listener_kind *kinds,
    struct tg_err *err);
/** Listener l's front door from c (borrowed): at bind and on SIGHUP. */
void gw_listener_door(struct gw *gw, int l, const struct gw_config *c);
/** Stop http (borrowed) accepting: its bound sockets are closed. */
void gw_listener_close(struct evhttp *http);
/* The new listeners of a reload, bound before anything else changes. */
struct gw_rebind {
	struct evhttp *http[GW_NLISTENERS];	/* owned until commit or abort */
	int port[GW_NLISTENERS];
};
/** Bind each address of c (borrowed) that differs from the running one's
 * into rb (the caller's): 0, or -1 with err naming the address and the
 * error (nothing then is bound). */
int gw_rebind_prepare(struct gw *gw, const struct gw_config *c, struct gw_rebind *rb,
    struct tg_err *err);
/** The reload failed after prepare: rb's listeners closed. */
void gw_rebind_abort(struct gw_rebind *rb);
/** The reload is done (gw->rt is the new one): rb's listeners replace the
 * old, which stop accepting and are retired until their connections close. */
void gw_rebind_commit(struct gw *gw, struct gw_rebind *rb);
/* A listener whose address a SIGHUP changed, until its connections close. */
struct gw_retired {
	struct gw_retired *next;
	struct evhttp *http;		/* accepts no more */
	struct gw_lctx *lctx;		/* its connections' door and counters */
};
/** Listener l's counters into st (the caller's), its retired
 * predecessors' included. */
void gw_listener_stats(const struct gw *gw, int l, struct tg_frontdoor_stats *st);
/** Free every listener, retired ones included. */
void gw_listeners_free(struct gw *gw);

/* tls_listen.c: TLS on the listeners. The server context of c (borrowed),
 * owned by the caller, or NULL: none configured, or err. */
SSL_CTX *gw_tls_ctx_new(const struct gw_config *c, struct tg_err *err);
/** At bind: gw->tls from the configuration; -1 with err when its files
 * do not load. */
int gw_tls_start(struct gw *gw, struct tg_err *err);
/** On SIGHUP: the files of c (borrowed) again, or the old context kept. */
void gw_tls_reload(struct gw *gw, const struct gw_config *c);
/** Listener l's door (borrowed) makes TLS connections when c names l. */
void gw_tls_door(struct gw *gw, int l, const struct gw_config *c, struct tg_frontdoor *d);
/** 1 when listener l speaks TLS now. */
int gw_tls_on(const struct gw *gw, int l);

/* client_addr.c */
/** Listener l's front door d (borrowed) gets c's (borrowed; it must outlive
 * d's use: set again on reload) trusted proxies and PROXY protocol. */
void gw_client_door(int l, const struct gw_config *c, struct tg_frontdoor *d);
/** Why c (borrowed) may not be reloaded over gw's running listeners: a
 * listener that speaks TLS would stop, or client certificates would no
 * longer be asked for (static text), else NULL. */
const char *gw_tls_downgrade(const struct gw *gw, const struct gw_config *c);
void gw_tls_free(struct gw *gw);	/* gw->tls; NULL-safe */

/* otlp.c: spans exported over OTLP/HTTP JSON (tracing.*). A span is a
 * plain struct of fixed-size fields, copied into the exporter's queue;
 * static strings are borrowed for the process's life. */
enum gw_span_kind { GW_SPAN_SERVER = 2, GW_SPAN_CLIENT = 3 };	/* OTLP's numbers */
struct gw_span {
	char trace_id[33], span_id[17], parent_id[17];	/* parent_id "": a root */
	enum gw_span_kind kind;
	const char *service, *op;	/* name "<service> <op>" (service NULL: op) (static) */
	const char *method;		/* http.request.method (static) */
	int64_t start_ns, end_ns;	/* Unix time */
	int status;			/* http.response.status_code; 0: none */
	int error;			/* status ERROR */
	char path[256];			/* SERVER: url.path */
	char addr[128];			/* SERVER: client.address; CLIENT: server.address */
	char rid[TG_UUID_LEN];		/* SERVER: tidegate.request_id */
	char key[64];			/* SERVER: tidegate.key, "" none */
	const char *served, *origin;	/* SERVER: tidegate.served, .origin (static or NULL) */
	const char *retry;		/* CLIENT: tidegate.retry (static or NULL) */
};
/** The exporter of c's tracing.* (borrowed) for gw (borrowed: its loop,
 * resolver, metrics), owned by the caller (gw_otlp_free); NULL with err
 * when tracing.otlp_url is unset (err empty) or unusable. wake(gw) is
 * called when an export ends or is given up while gw drains (the drain's
 * gw_maybe_exit: the exporter names no caller). */
struct gw_otlp *gw_otlp_new(struct gw *gw, const struct gw_config *c,
    void (*wake)(struct gw *gw), struct tg_err *err);
/** Free o (takes ownership; NULL-safe): spans queued and an export in
 * flight are lost. Never from inside its upstream's callbacks. */
void gw_otlp_free(struct gw_otlp *o);
/** On SIGHUP: gw->otlp made again from c (borrowed) with wake (as
 * gw_otlp_new) when its tracing.* keys changed (spans queued under the
 * old keys are lost), or freed. */
void gw_otlp_reload(struct gw *gw, const struct gw_config *c, void (*wake)(struct gw *gw));
/** Queue a copy of s (borrowed), or drop it (counted) when the queue is
 * full; never blocks nor grows. o borrowed. */
void gw_otlp_add(struct gw_otlp *o, const struct gw_span *s);
/** Drain: 1 when nothing is queued nor in flight (o NULL: 1); else a
 * last export is started and o's wake is called when it ends. */
int gw_otlp_idle(struct gw_otlp *o);
/** The OTLP/HTTP JSON body (ExportTraceServiceRequest) of the n spans of
 * v (borrowed) under service.name service (borrowed), appended to out
 * (borrowed). Pure: no state. */
void gw_otlp_encode(const struct gw_span *v, size_t n, const char *service,
    struct evbuffer *out);

/* spans.c: the spans of client requests and of the vendor calls made for them. */
/** r (borrowed) arrived while tracing, with flag its caller's sampled flag
 * (gw_req_ids): whether it is sampled (the caller's flag, else drawn with
 * tracing.sample), its SERVER span id and its caller's span, both left
 * empty when it is not. */
void gw_span_arrive(struct gw_req *r, int flag);
/** r (borrowed) ends: its SERVER span to the exporter, with its access
 * line's origin and served (static, origin may be NULL). */
void gw_span_server(struct gw_req *r, const char *origin, const char *served);
/** host[:port] of s's (borrowed) vendor origin ("primary", "fallback";
 * borrowed) into out (len bytes; "" for none or NULL); login: of its
 * login endpoint (sim.token_url or sim.auth_url: one origin). */
void gw_origin_addr(const struct gw_service *s, const char *origin, int login, char *out,
    size_t len);
/** The CLIENT span of one attempt of a vendor call for t's request (t
 * borrowed, its span_id the parent), span (borrowed) the id its
 * traceparent carried, from t0_us (monotonic) until now, of service s
 * (borrowed), answered by origin (static, may be NULL) with status (0:
 * none; err not TG_UP_OK: ERROR), retry (static, may be NULL). */
struct gw_span_call {
	const struct gw_trace *t;
	const char *span;
	const struct gw_service *s;
	enum evhttp_cmd_type method;
	int64_t t0_us;
	int status;
	int failed;
	const char *origin, *retry;
	int login;			/* to the login endpoint (gw_origin_addr) */
};
void gw_span_client(struct gw *gw, const struct gw_span_call *c);
/* A vendor login's CLIENT span: the gateway's own (vendor.c) or a caller's
 * (logins.c), in the trace of the traced request it is made for. */
struct gw_login_span {
	struct gw *gw;			/* borrowed; NULL: no span for this login */
	struct gw_trace trace;
	char span[17];
	int64_t t0_us;
};
/** The login's trace headers into out (borrowed) for t (borrowed; NULL:
 * the gateway's own, a trace of its own), and its span opened in ls
 * (borrowed) when t's request is traced and gw (borrowed, may be NULL)
 * exports spans. */
void gw_login_span_begin(struct gw_login_span *ls, struct gw *gw, const struct gw_trace *t,
    struct evkeyvalq *out);
/** The login of ls (borrowed) ended, as tg_token_opts.login_end says (s,
 * origin borrowed): its span, if open, to the exporter. */
void gw_login_span_end(struct gw_login_span *ls, const struct gw_service *s, int status,
    int failed, const char *origin);

/* admin.c */
void gw_admin_on_request(struct evhttp_request *req, void *arg);
/** admin_auth.c: the op of a probe's path (path[0..len), borrowed):
 * "healthz", "readyz" or "metrics" (static), or NULL for any other path. */
const char *gw_admin_probe(const char *path, size_t len);
/* admin_scope.c */
/** Whether the admin request req (borrowed) may go to a feature's admin
 * API: 0 when it was answered 403 (a key with admin-read only, and a
 * method other than GET or HEAD); a GET of such a key is marked
 * X-Tidegate-Admin-Actions: none. */
int gw_admin_may_act(struct gw *gw, struct evhttp_request *req);
/* admin_console.c */
/** Answer a GET or HEAD of path (borrowed) with the console's file there
 * and return 1; 0 (nothing sent) when path is not one of its files. */
int gw_admin_console(struct evhttp_request *req, const char *path);
/** admin_fleet.c: GET /fleet (gw, req borrowed; req answered, now or once
 * the state has); drop the requests still waiting (at gw_free). */
void gw_admin_fleet(struct gw *gw, struct evhttp_request *req);
void gw_admin_fleet_cancel(struct gw *gw);
/* admin_log.c */
/**
 * An admin request req (borrowed) that passed tg_frontdoor_refusal: its
 * request id set on its answer (before any reply), and, unless access_log
 * is off (or access_log_probes, probe set), its access line once its
 * exchange ends, under op (borrowed, static).
 */
void gw_admin_begin(struct gw *gw, struct evhttp_request *req, const char *op, int probe);
/* admin_state.c: the state's series on /metrics (out borrowed), and its
 * member of /readyz (g borrowed): 1 when degraded (the reason given). */
void gw_admin_state_metrics(struct gw *gw, struct evbuffer *out);
int gw_admin_state_ready(struct gw *gw, yajl_gen g);
/* admin_origins.c: the vendor origins' series on /metrics (out borrowed)
 * and their member of /readyz (g borrowed). */
void gw_admin_origins_metrics(struct gw *gw, struct evbuffer *out);
/** The vendor budget's series (admin_budget.c) into out; both borrowed. */
void gw_admin_budget_metrics(struct gw *gw, struct evbuffer *out);
void gw_admin_origins_ready(struct gw *gw, yajl_gen g);
/** s's vendor as /readyz says it: "up" (a host answers; the token is held,
 * or callers bring theirs), "logging in", "login failing", "unreachable"
 * (no host answered its last call) (static). */
const char *gw_vendor_health(struct gw_service *s);
void gw_metrics_declare(struct tg_metrics *m);

#endif
