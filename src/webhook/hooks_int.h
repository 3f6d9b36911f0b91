/*
 * hooks_int.h - private contract between the webhook feature's files, the
 * part above the request core: the callbackUrl of export requests
 * (callbacks.c), the payload fetcher (hook_fetch.c), the outbox and
 * worker's lifecycle (hooks.c), the admin API (admin_webhooks.c), and the
 * registration with the core (feature.c), which owns each request's
 * struct wh_req slot. The delivery library below them (worker, signing,
 * egress) is include/tidegate/webhook.h; the outbox is reached only
 * through the state seam (gw->state, include/tidegate/state.h), whose
 * answers come later or at once: every caller here works both ways.
 */
#ifndef TIDEGATE_HOOKS_INT_H
#define TIDEGATE_HOOKS_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "tidegate/feature_apis.h"
#include "tidegate/gateway.h"
#include "tidegate/state.h"
#include "tidegate/webhook.h"

struct wh_admin_op;
TAILQ_HEAD(wh_adminq, wh_admin_op);
struct wh_add;
TAILQ_HEAD(wh_addq, wh_add);

enum wh_mode { WH_DELIVER, WH_FORWARD, WH_RELAY };

/* keys[i]'s webhook part (keys[].webhook_secret), beside the core's keys[i]. */
struct wh_key_cfg {
	char *webhook_secret;	/* as configured: whsec_ lines, current first */
	struct tg_strlist wh_secrets;	/* not a key: webhook_secret split into lines */
};

/* The feature's settings (config.c: webhooks.*), one per configuration loaded. */
struct wh_cfg {
	char *wh_mode_str, *wh_db, *wh_public_url, *wh_ca_file;
	struct tg_strlist wh_schedule, wh_allow;
	char *wh_secret;
	int64_t wh_attempt_timeout, wh_lease, wh_poll_interval, wh_payload_timeout;
	int64_t wh_max_payload, wh_retention;
	long long wh_max_inflight;
	int64_t wh_attempt_deadline;	/* webhooks.attempt_deadline */
	long long wh_max_inflight_per_host;
	int64_t wh_payload_max_bytes;	/* webhooks.payload_max_bytes */
	double wh_payload_key_share;
	struct wh_key_cfg *keys;	/* as many as the core's keys */
	size_t nkeys;
	/* derived by its check (not keys) */
	enum wh_mode wh_mode;
	char *wh_db_path;		/* wh_db resolved against the file's directory */
	int64_t *wh_schedule_ms;
	size_t wh_nschedule;
	struct tg_strlist wh_secrets;	/* wh_secret split into lines, current first */
};

/* The feature: created at registration with struct gw and kept across
 * reloads; the worker is not reloadable. */
struct wh_hooks {
	struct gw *gw;
	struct tg_state *st;		/* gw->state (borrowed) */
	struct tg_webhook *w;
	struct tg_egress *pol;		/* built from the running configuration */
	struct tg_egress **retired;	/* earlier policies attempts may still read */
	size_t nretired;
	struct tg_map *fetches;		/* job id -> struct wh_fetch (hook_fetch.c) */
	struct event *purge;		/* retention of finished jobs */
	struct tg_state_op *purge_op;	/* a purge asked for */
	int purging;
	struct event *resume_ev;	/* the next page of waiting jobs to resume */
	struct tg_state_op *resume_op;
	size_t resume_offset, resumed;
	int resuming;
	int fleet;			/* the state is shared: waiting jobs are adopted */
	int resumed_all;		/* one instance: every waiting job is in fetches */
	struct event *adopt_ev;		/* hold and adopt (adopt.c) */
	struct tg_state_op *adopt_op, *hold_op;
	struct wh_adminq admin;		/* admin requests waiting on the seam */
	struct wh_addq adds;		/* jobs being added (callbacks.c) */
	size_t quota_waits;		/* fetchers waiting for room under the cap … */
	struct tg_map *quota_key_waits;	/* … or their key's share (key -> a count) */
	int drained;			/* SIGTERM: no delivery attempt left in flight */
	/* the state's relay key (relay_key.c): relay URLs carry its MAC */
	uint8_t relay_key[TG_WEBHOOK_RELAY_KEY_LEN];
	int relay_key_ok;		/* loaded: relay ids can be checked */
	struct event *key_ev;		/* the next try to load it */
	unsigned key_tries;		/* failed tries (the first is logged) */
	struct tg_state_op *key_op;
	/* the jobs feature's answers (feature_apis.h), looked up at start;
	 * NULL: no jobs feature, export data is always fetched */
	const struct gw_jobs_answers *answers;
	void *answers_ctx;
};

/* The callbackUrl of one request. */
struct wh_hook {
	char *url;			/* as the caller gave it */
	const char *secret_ref;		/* "global" or the key's name (r->rt keeps it) */
	char id[TG_WEBHOOK_ID_LEN];	/* relay: the job added before the vendor call */
	char *cid;			/* the vendor's correlationId, once it answered */
};

/* What the webhook code reads of an export body (wh_scan_fill). */
struct wh_scan {
	char *raw_url;			/* the caller's callbackUrl (either spelling) or NULL */
	const char *raw_member;		/* its member name (static) */
	int sent;			/* the body sent was scanned: the fields below hold */
	char *url;			/* the callbackUrl of the body sent, or NULL */
	const char *member;
	char *stripped;			/* the body sent without its callbackUrl members */
	size_t stripped_len;
};

/* One request's part in the feature (r->slot[id]), made on first use. A
 * seam operation of the request answers into the fields below, then its
 * continuation then(r) runs (once the call has returned, when the answer
 * came at once). */
struct wh_req {
	struct wh_scan *scan;		/* the body as the request check read it */
	struct wh_hook *hook;		/* its callbackUrl, once accepted */
	struct tg_state_op *op;		/* the operation in flight (on_free cancels it) */
	struct wh_add *add;		/* a job being added (on_free leaves it to finish) */
	struct tg_state_payload *w;	/* relay: the payload being written (on_free aborts) */
	void (*then)(struct gw_req *r);
	int in_call, answered;
	int rc;				/* the answer: enum tg_state_rc … */
	char err[256];			/* … why … */
	char str[TG_WEBHOOK_ID_LEN];	/* … a job id (add) … */
	int state;			/* … a job's state (get), or -1 */
	int64_t used[2];		/* … the payload bytes held: all, the key's (usage) */
	int64_t bytes;			/* relay: the delivery's size */
	char relay[TG_WEBHOOK_ID_LEN];	/* relay: the job its URL names */
};

/* config.c */
/** The feature's settings in c (borrowed from c), before a gateway runs. */
const struct wh_cfg *wh_cfg_of(const struct gw_config *c);
/** The webhook secrets of API key name under rt ("global": webhooks.secret;
 * borrowed from rt); NULL when none. */
const struct tg_strlist *wh_secrets(const struct gw_runtime *rt, const char *name);
/** Whose webhook secrets sign for API key (borrowed, may be NULL) under
 * rt: its own, "global", or NULL when none is configured (borrowed). */
const char *wh_secret_ref(const struct gw_runtime *rt, const char *key);

/** The feature's id with the core (gw_feature_register), for wh_cfg. */
void wh_cfg_bind(int id);
/** The feature's settings under rt (borrowed from rt): what a request or
 * a reload sees. */
const struct wh_cfg *wh_cfg(const struct gw_runtime *rt);

/* feature.c */
/** The feature of gw (borrowed). */
struct wh_hooks *wh_ctx(const struct gw *gw);
#define WH(gw) wh_ctx(gw)
/** r's slot (borrowed; r owns it), made when absent. */
struct wh_req *wh_req_of(struct gw_req *r);
/** r's slot (borrowed), or NULL when the feature never used r. */
struct wh_req *wh_req_find(const struct gw_req *r);
/** r's accepted callback (borrowed), or NULL. */
#define HOOK(r) (wh_req_find(r)->hook)
/** Before a seam call for r (borrowed): its answer goes to then(r). */
void wh_req_begin(struct gw_req *r, void (*then)(struct gw_req *r));
/** After it: op (borrowed, the seam's) kept for on_free, or then(r) now
 * when the answer came during the call (r may be gone after this). */
void wh_req_end(struct gw_req *r, struct tg_state_op *op);
/* Callbacks for wh_req_begin/end: res and results borrowed (copied into
 * the slot); w taken (the slot owns it); arg is the struct gw_req. */
void wh_req_on_done(const struct tg_state_res *res, void *arg);
void wh_req_on_str(const struct tg_state_res *res, const char *s, void *arg);
void wh_req_on_jobs(const struct tg_state_res *res, const struct tg_outbox_job *jobs, size_t n,
    void *arg);
void wh_req_on_payload(const struct tg_state_res *res, struct tg_state_payload *w, void *arg);
void wh_req_on_pair(const struct tg_state_res *res, int64_t all, int64_t mine, void *arg);
/** 503 WEBHOOK_UNAVAILABLE with Retry-After: msg, then the state's cause
 * why (both borrowed; why may be NULL or ""); frees r. */
void wh_reply_unavailable(struct gw_req *r, const char *msg, const char *why);


/* hooks.c */
/** The feature's context for gw (borrowed), not started (owned by the
 * caller: wh_hooks_free). */
struct wh_hooks *wh_hooks_new(struct gw *gw);
/** Open the outbox, start the worker, resume waiting jobs (h borrowed,
 * registered): 0, or -1 with err (wh_hooks_free frees what was started). */
int wh_hooks_start(struct wh_hooks *h, struct tg_err *err);
/** Stop at once (leases released: due again at the next start); takes h; NULL-safe. */
void wh_hooks_free(struct wh_hooks *h);
/** After a reload: the new egress policy; old (borrowed) is the previous
 * configuration (its settings: wh_cfg_of). */
void wh_hooks_reload(struct wh_hooks *h, const struct gw_config *old);
/** SIGTERM: stop polling, let attempts in flight end, then gw_maybe_exit. */
void wh_hooks_drain(struct wh_hooks *h);
/** Scrape-time webhook series (queue depth by state, attempts in flight)
 * into out, written when the seam answers (s held until then). */
void wh_hooks_metrics(struct wh_hooks *h, struct evbuffer *out, struct gw_scrape *s);

/* callbacks.c */
#define WH_RELAY_PREFIX "/__tidegate/callbacks/"
/**
 * Fill s (its strings owned) from the body as the request check parsed it
 * (b borrowed): nothing is parsed again. Reads nothing else: safe on the
 * worker thread.
 */
void wh_scan_fill(struct wh_scan *s, const struct tg_check_body *b);
/** Free a heap scan (takes ownership; NULL-safe). */
void wh_scan_free(struct wh_scan *s);
/** 1 when r (borrowed) is an export whose callbackUrl the gateway handles. */
int wh_hook_wanted(const struct gw_req *r);
/**
 * An export request with a callbackUrl (deliver, relay): egress and secret
 * checks (400), the URL taken out of r->body (relay: replaced by the
 * gateway's inbound endpoint, the job added first). Reads the slot's scan
 * when the check made one, else parses the body. 0 to proceed, -1 when it
 * has replied.
 */
int wh_hook_prepare(struct gw_req *r);
/** The same checks as problems of a checked export (one 400 lists all);
 * the caller's URL from the slot's scan when set, else parsed from the body. */
void wh_hook_check(struct gw_req *r, struct tg_problems *p);
/**
 * The vendor's exchange for a request with a hook ended: a held 200 adds
 * the job and answers (1: replied); otherwise 0 and the proxy goes on.
 */
int wh_hook_done(struct gw_req *r, enum tg_up_error err);
void wh_hook_free(struct wh_hook *hk);	/* takes ownership; NULL-safe */
/** POST /__tidegate/callbacks/{id}: the vendor's delivery in relay mode. */
void wh_hook_relay(struct gw_req *r);
/** A relay delivery's body when its job waits for none (bytes): enough for
 * the job's state to answer a repeat, nothing to hold for a stranger. */
#define WH_RELAY_IDLE_BODY 4096
/**
 * Its head, before the body is read (gw_endpoint_role.on_prefix_head; all
 * borrowed): 404 for an id that is not a job id, or that no job waiting
 * here has while this instance knows every waiting job (one instance) and
 * the body is chunked or larger than WH_RELAY_IDLE_BODY; the body capped at
 * webhooks.max_payload, or at WH_RELAY_IDLE_BODY when no job waits for it.
 */
int wh_hook_relay_head(struct wh_hooks *h, const char *method, const char *path,
    int64_t length, uint64_t *limit);
/** The request of a (borrowed) ends while its job is being added: the add
 * finishes without it (the job still gets its fetcher, or is given up in
 * relay mode). */
void wh_add_orphan(struct wh_add *a);
/** Teardown: forget the adds of h (borrowed) not answered yet. */
void wh_adds_cancel(struct wh_hooks *h);

/* adopt.c */
/** In a fleet: hold the fetches of h (borrowed) and adopt the waiting jobs
 * of dead instances, from now on; stop: no more (NULL-safe parts). */
void wh_adopt_start(struct wh_hooks *h);
void wh_adopt_stop(struct wh_hooks *h);

/* hook_fetch.c */
/**
 * Obtain the payload of waiting job id of API key key (borrowed; NULL:
 * none): poll the vendor's export cid (borrowed; NULL: only wait for a
 * relay delivery), first after delay_ms; the job is given up
 * payload_timeout after created_ms (wall clock).
 */
void wh_fetch_start(struct wh_hooks *h, const char *id, const char *key, const char *cid,
    int64_t created_ms, int64_t delay_ms);
/** The relay delivery of job id (borrowed) was refused by the quota (why
 * borrowed): its fetcher counts as waiting for room, the job says why. */
void wh_fetch_quota(struct wh_hooks *h, const char *id, const char *why);
/** Export data waits for room in the quota (this instance's fetchers):
 * for the cap of all (*all) or for key's share (*mine; key borrowed). */
void wh_quota_waits(const struct wh_hooks *h, const char *key, size_t *all, size_t *mine);
/** Stop obtaining id's payload (it arrived another way). */
void wh_fetch_stop(struct wh_hooks *h, const char *id);
/** Give waiting job id (borrowed) up with reason (borrowed): its payload
 * will never come (the export failed). Dead once the seam has written it. */
void wh_fetch_give_up(struct wh_hooks *h, const char *id, const char *reason);
/** 1 when job id (borrowed) waits here for its export data (h borrowed). */
int wh_fetch_waiting(const struct wh_hooks *h, const char *id);
/** Map value destructor for h->fetches (takes ownership). */
void wh_fetch_free(void *f);
/** The payload quota of c (borrowed): webhooks.payload_max_bytes and one
 * key's share of it, into q. */
void wh_quota_of(const struct wh_cfg *c, struct tg_outbox_quota *q);
/** Payload data refused by the quota (stage "request" or "store"; why and
 * id borrowed, id may be NULL): counted and logged. gw borrowed. */
void wh_quota_refused(struct gw *gw, const char *stage, const char *id, const char *why);

/* admin_webhooks.c */
/** /webhooks… on the admin listener: list, read, redeliver (all borrowed);
 * answered when the seam answers. */
void wh_admin(struct wh_hooks *h, struct evhttp_request *req, const char *path);
/* relay_key.c */
/** Load the state's relay key into h (borrowed), trying again every
 * second until it comes (a fleet's database may be down at start). */
void wh_relay_key_start(struct wh_hooks *h);
/** Stop loading it and forget it (h borrowed). */
void wh_relay_key_stop(struct wh_hooks *h);
/** The relay URL segment naming job id (borrowed) into out (borrowed):
 * 0, or -1 while the key is not loaded. */
int wh_relay_seg(const struct wh_hooks *h, const char *id, char out[TG_WEBHOOK_RELAY_SEG_LEN]);
/** How a relay URL's segment seg (borrowed) stands with h (borrowed). */
enum wh_relay_id {
	WH_RELAY_GENUINE,	/* its MAC is the key's: id holds the job */
	WH_RELAY_BARE,		/* a bare job id (made before URLs carried a MAC) */
	WH_RELAY_FORGED,	/* another shape, or a MAC not the key's */
	WH_RELAY_NO_KEY		/* the key is not loaded yet: cannot tell */
};
/** Which of enum wh_relay_id seg is; id (borrowed) gets the job id of a
 * genuine or bare one, else "". */
enum wh_relay_id wh_relay_check(const struct wh_hooks *h, const char *seg,
    char id[TG_WEBHOOK_ID_LEN]);

/** Forget the admin requests still waiting (teardown); h borrowed. */
void wh_admin_cancel(struct wh_hooks *h);

#endif
