/*
 * runs_int.h - private contract between the runs feature's files: the
 * requests it takes part in (runs.c), the run tracker (tracker.c), the
 * sweeper (sweeper.c), the runs and sweeps API (runs_api.c, sweeps.c) and
 * the registration with the request core (feature.c), which owns struct
 * runs and each request's struct runs_req slot.
 */
#ifndef TIDEGATE_RUNS_INT_H
#define TIDEGATE_RUNS_INT_H

#include <stddef.h>
#include <sys/queue.h>

#include "tidegate/feature_apis.h"
#include "tidegate/gateway.h"
#include "tidegate/registry.h"
#include "tidegate/runs.h"
#include "tidegate/state.h"

struct runs_sweep_post;

/*
 * A state operation of the feature tied to no request (a status a client
 * saw, a webhook being queued, a sweep settling, a scrape's counters):
 * listed in struct runs so that stop cancels what is still under way.
 * Its callbacks set op to NULL first and end with runs_bg_free or the
 * next operation of the chain.
 */
struct runs_bg {
	LIST_ENTRY(runs_bg) link;
	struct gw *gw;			/* borrowed */
	struct tg_state_op *op;		/* the operation under way (borrowed), or NULL */
	char *id;			/* the run or sweep it is about (owned) */
	char *key;			/* its API key for the logs (owned), or NULL */
	unsigned char *data;		/* a webhook payload (owned), or NULL */
	size_t len;
	enum tg_run_status status;	/* a status seen */
	int then_submit;		/* a settle: submit into the free slot after */
	struct tg_sweep sweep;		/* a settle: the sweep read (owns its strings) */
	struct gw_observed *obs;	/* a status another feature fetched: its
					 * publisher waits until it is recorded */
	void (*done)(void *arg);	/* a notification: called once when over */
	void *done_arg;
	struct gw_scrape *scrape;	/* a scrape part (borrowed until released) */
	struct gw_held *held;		/* an admin request (admin_runs.c), or NULL */
	size_t limit, offset;		/* its list's page */
	struct evbuffer *out;		/* borrowed from the scrape */
};

/* The feature: created by tg_runs_register, freed by its stop callback. */
struct runs {
	struct gw *gw;
	struct runs_tracker *tracker;
	struct runs_sweeper *sweeper;
	LIST_HEAD(, runs_bg) bgs;	/* operations tied to no request */
	/* the webhook feature's callback URLs (feature_apis.h), looked up at
	 * start; NULL: no webhook feature, no callbackUrl is accepted */
	const struct gw_webhook_callbacks *callbacks;
	void *callbacks_ctx;
	/* the limits feature's daily quota of sweeps, looked up at start;
	 * NULL: no limits feature, sweeps are not counted */
	const struct gw_limits_sweeps *sweeps_quota;
	void *sweeps_quota_ctx;
};

/* One request's part in the feature (r->slot[id]), made on first use. */
struct runs_req {
	char *callback;			/* a submission's callback URL */
	struct runs_sweep_post *sweep;	/* a sweep being created (sweeps.c) */
	struct gw_vcall *call;		/* its base case being fetched */
	struct tg_state_op *op;		/* the state operation r waits on (borrowed) */
	int *verdict;			/* on_request's answer while its read runs at
					 * once (borrowed from its frame), or NULL */
	char *sim_id;			/* the run being recorded (owned) */
	struct tg_sweep sweep_rec;	/* a summary: the sweep read (owns its strings) */
	int status;			/* a summary's HTTP status */
	size_t limit, offset;		/* a list's page */
	/* a submission sent without an answer (uncertain.c) */
	struct event *timer;		/* the wait before the run list is read */
	const char *uncertain_why;	/* static */
	int64_t uncertain_since;	/* wall ms: runs submitted since may be its */
	yajl_val list;			/* the vendor's run list, while its runs' keys
					 * are read (keyed.c) */
	/* a checked submission, as the feature's scan of its check read it */
	char *case_id;			/* its caseId, or NULL (owned) */
	char case_sha256[TG_RUNS_SHA_LEN];	/* its body's SHA-256; "": not scanned */
};

/* config.c */
/* The feature's settings (runs.*), one per configuration loaded. */
struct runs_cfg {
	char *runs_db;
	int runs_archive;
	int64_t runs_archive_max, runs_archive_max_total, runs_archive_keep, runs_grace;
	int64_t runs_retention_interval;
	char *runs_sync;
	long long runs_sweep_max_variants, runs_sweep_concurrency;
	char *runs_db_path;	/* not a key: runs_db resolved against the file's directory */
};
/** The feature's settings in c (borrowed from c), before a gateway runs. */
const struct runs_cfg *runs_cfg_of(const struct gw_config *c);

/* slot.c */
/** The feature's settings under rt (borrowed from rt): what a request or
 * a reload sees. */
const struct runs_cfg *runs_cfg(const struct gw_runtime *rt);
/** The request slot the core gave the feature (gw_feature_register). */
void runs_slot_set(int id);
/** The feature of gw (borrowed). */
struct runs *runs_ctx(const struct gw *gw);
#define RUNS(gw) runs_ctx(gw)
/** r's slot (borrowed; r owns it), made when absent. */
struct runs_req *runs_req_of(struct gw_req *r);
/** A callbackUrl (borrowed) r's caller (borrowed) gave: checked by the
 * webhook feature (webhook.callbacks). 0, or -1 with a problem in p
 * (also when no feature delivers webhooks). */
int runs_callback_check(const struct gw_req *r, const char *url, struct tg_problems *p);
/** Whose webhook secrets sign for API key (borrowed, may be NULL) under
 * gw's running configuration (borrowed), or NULL: none, or no webhook
 * feature. */
const char *runs_secret_ref(struct gw *gw, const char *key);
/** A webhook this feature queued is due: the webhook feature's worker
 * looks now (nothing without one). gw borrowed. */
void runs_webhook_kick(struct gw *gw);

/** A background operation about id (both borrowed; id copied, may be
 * NULL), listed in gw's feature until runs_bg_free. */
struct runs_bg *runs_bg_new(struct gw *gw, const char *id);
/** b (borrowed) now waits on op (borrowed); op NULL (answered at once):
 * nothing, b is not touched. */
void runs_bg_wait(struct runs_bg *b, struct tg_state_op *op);
void runs_bg_free(struct runs_bg *b);	/* takes ownership; NULL-safe */
/** r (borrowed) now waits on op (borrowed); op NULL: nothing, r is not touched. */
void runs_req_wait(struct gw_req *r, struct tg_state_op *op);
/** Answer r (borrowed; freed by the reply) for a failed operation (res
 * borrowed): 503 with Retry-After naming the cause when the state is
 * unavailable, else status with code and msg (borrowed). */
void runs_reply_state(struct gw_req *r, const struct tg_state_res *res, int status,
    const char *code, const char *msg);
/** Query limit (1-1000) and offset of a list into *limit / *offset (left as
 * they are when absent; r borrowed): 0, or -1 with why (the caller's buffer). */
int runs_api_paging(struct gw_req *r, size_t *limit, size_t *offset, char *why, size_t n);
/** Copy sweep record s (borrowed) into d (the caller's; it owns the strings). */
void runs_sweep_copy(struct tg_sweep *d, const struct tg_sweep *s);

/* hooks.c */
/** The notification of b (takes b) is over: b is freed, then its done. */
void runs_notified(struct runs_bg *b);
/** Queue the webhook of run (borrowed) with b (taken when 0 is returned:
 * b ends with runs_notified): 0, or -1 when the run has none (b untouched). */
int runs_hook_run(struct runs_bg *b, const struct tg_run *run);
/** Queue the webhook of b's sweep with its variants v (borrowed; b taken
 * when 0 is returned): 0, or -1 when it is skipped (b untouched). */
int runs_hook_sweep(struct runs_bg *b, const struct tg_sweep_variant *v, size_t n);

/* runs.c */
/** A submission's callback URL checked (400 when refused): 0, or -1 replied. */
int runs_prepare(struct gw_req *r);
/** GET of an expired run's status or results: 410 (or the archive); -1 replied. */
int runs_gone(struct gw_req *r);
/** The held 201 of a submission (capture borrowed, NULL when it broke off):
 * record the run, then answer r. Always replies: 1. */
int runs_done(struct gw_req *r, enum tg_up_error err, struct evbuffer *capture);
/** The held 200 of a GET of a run's status (capture borrowed, NULL when
 * over the core's cap): record the status, then relay it. 0 when the core
 * answers (the exchange broke off), else 1: replied, or will reply. */
int runs_status_done(struct gw_req *r, enum tg_up_error err, struct evbuffer *capture);
/** The vendor answered 200 to a GET of run id's status: record it (all
 * borrowed). a, when another feature published the answer (may be NULL),
 * is held until the status is recorded (gw_answer_hold). */
void runs_status_seen(struct gw *gw, const struct gw_answer *a, const char *id,
    const char *body, size_t len);
/** /metrics: the registry's counts as gauges into out (borrowed), perhaps
 * later: s (borrowed) is held until then. */
void runs_metrics(struct gw *gw, struct evbuffer *out, struct gw_scrape *s);

/* Retry-After (seconds) of a 503 while the state cannot answer. */
#define STATE_RETRY_AFTER	"5"

/* admin_runs.c */
/* GET /runs… on the admin listener: req and path borrowed; answered once. */
void runs_admin(struct gw *gw, struct evhttp_request *req, const char *path);

/* runs_api.c */
#define RUNS_API_PREFIX "/tidegate/v1/"
/** The extension API on the simulation listener (never routed upstream). */
void runs_api(struct gw_req *r);
/* sweeps.c */
/** POST and GET /tidegate/v1/sweeps (rest "") and GET …/sweeps/{id} (rest
 * "/{id}", borrowed). */
void runs_sweeps_api(struct gw_req *r, const char *rest);
/* A page of sweeps (s[0..n), borrowed) as the lists' body into g:
 * {"sweeps": [brief…], "limit", "offset", "more"}. */
void runs_sweeps_page_json(yajl_gen g, const struct tg_sweep *s, size_t n, size_t limit,
    size_t offset, int more);
void runs_sweep_post_free(struct runs_sweep_post *sp);	/* takes ownership; NULL-safe */
/* sweeper.c */
/** Mark sweep id (borrowed) done if every variant has ended, then its
 * webhook; when it is not done yet and then_submit, submit into the free
 * slot (runs_sweeper_kick). Answered later. */
void runs_sweep_settle(struct gw *gw, const char *id, int then_submit);
/** The sweeper of gw (borrowed), owned by the caller. */
struct runs_sweeper *runs_sweeper_new(struct gw *gw);
void runs_sweeper_free(struct runs_sweeper *sw);	/* takes ownership; NULL-safe */
/** Submit what sweep id (borrowed) may submit now; NULL-safe. */
void runs_sweeper_kick(struct runs_sweeper *sw, const char *id);
/** A run of sweep id (borrowed) ended: settle the sweep, or submit into the free slot. */
void runs_sweeper_run_ended(struct runs_sweeper *sw, const char *id);
/** No submission in flight (drain may end). */
int runs_sweeper_idle(const struct runs_sweeper *sw);

/* uncertain.c */
/** r's submission was sent and got no answer (err): 1 when r will be
 * answered later with what the vendor's run list shows, 0 when it is not
 * such a submission. */
int runs_uncertain(struct gw_req *r, enum tg_up_error err);

/* keyed.c */
/** Whether r (borrowed) may see a run: held, whether the registry holds it;
 * key (borrowed), the key it was submitted with, or NULL. A keyed caller
 * sees only its key's runs; one without a key those of no key. */
int runs_visible(const struct gw_req *r, int held, const char *key);
/** The vendor's status for GET /simulations (r borrowed): 1 to hold it. */
int runs_list_holds(const struct gw_req *r, int status);
/** The held run list (capture borrowed; NULL when over the core's cap):
 * answered filtered to r's runs, later. 0 when the exchange broke off (the
 * core answers), else 1. */
int runs_list_done(struct gw_req *r, enum tg_up_error err, struct evbuffer *capture);

/* tracker.c */
/** The tracker of gw (borrowed), owned by the caller. */
struct runs_tracker *runs_tracker_new(struct gw *gw);
void runs_tracker_free(struct runs_tracker *t);	/* takes ownership; NULL-safe */
/** Re-read the schedule and the unhandled ends (a run was added or ended),
 * here and, in a fleet, on the other instances; NULL-safe. */
void runs_tracker_kick(struct runs_tracker *t);
/** Take or renew the fleet's runs lead for this instance (gw borrowed):
 * cb's n 1 when it leads (always with SQLite). Owned by the seam. */
struct tg_state_op *runs_lead(struct gw *gw, tg_state_num_cb cb, void *arg);
/** Run id (borrowed) ended: enqueue its webhook when its submission named
 * a callback; done(arg) (arg borrowed) once that is durable or given up,
 * never when the feature stops first. */
void runs_notify(struct gw *gw, const char *id, void (*done)(void *arg), void *arg);

#endif
