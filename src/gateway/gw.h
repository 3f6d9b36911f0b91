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

#include "tidegate/emulator.h"
#include "tidegate/ids.h"
#include "tidegate/keys.h"
#include "tidegate/metrics.h"
#include "tidegate/routes.h"
#include "tidegate/token.h"
#include "tidegate/upstream.h"
#include "tidegate/validate.h"
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

struct gw_lctx {
	struct gw *gw;
	int listener;
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
	struct tg_emu_config emu_cfg;
	struct tg_emu *emu;
	size_t inflight;		/* client requests being handled */
	size_t unflushed;		/* replies handed to libevent, not yet written */
	int draining;
	struct event *sig[3], *drain_timer;
	struct gw_runtime *dying;	/* released, freed from reap_ev */
	struct event *reap_ev;
	struct tg_case_store *cases;	/* partial cases served, kept across reloads */
	struct gw_poll *poll;		/* poll multiplexer (poll.c) */
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
	char *path;			/* as the client sent it, without query */
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
	TAILQ_ENTRY(gw_req) poll_next;
	int64_t wait_until;		/* long-poll deadline (monotonic ms), 0: none */
	struct event *wait_timer;
};

/* server.c */
void gw_runtime_unref(struct gw_runtime *rt);
/** Stop the loop once draining and every reply has been written. */
void gw_maybe_exit(struct gw *gw);
struct gw_runtime *gw_runtime_new(struct gw *gw, const struct gw_config *cfg,
    struct tg_err *err);

/* proxy.c */
void gw_on_request(struct evhttp_request *req, void *arg);
void gw_req_reply_error(struct gw_req *r, int status, const char *code, const char *msg);
void gw_req_reply_buf(struct gw_req *r, int status, const char *ctype, struct evbuffer *b);
void gw_req_proxy(struct gw_req *r);
/** Upstream path and query for r (malloc'd): route template, minus drop_query. */
char *gw_upstream_uri(struct gw_req *r);

/* poll.c */
struct gw_poll *gw_poll_new(struct gw *gw);
void gw_poll_free(struct gw_poll *p);
/** Serve a pollable GET from the multiplexer: 1 when handled, 0 to proxy. */
int gw_poll_handle(struct gw_req *r);
/** r ends: stop waiting. */
void gw_poll_forget(struct gw_req *r);
/** The vendor answered a job creation for r's key (takes body). */
void gw_poll_created(struct gw_req *r, struct evbuffer *body);

/* validate.c */
/** Check (and normalise) the request of r's operation: 0 to proceed, -1 when
 * it has replied (400/413, or the verdict of a dry run). */
int gw_validate(struct gw_req *r);
/** A served partial case, to diff later submissions against (takes body). */
void gw_case_served(struct gw_req *r, struct evbuffer *body);

/* logins.c */
void gw_login_handle(struct gw_req *r);

/* admin.c */
void gw_admin_on_request(struct evhttp_request *req, void *arg);
void gw_metrics_declare(struct tg_metrics *m);

#endif
