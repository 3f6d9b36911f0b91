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

#include "tidegate/gateway.h"
#include "tidegate/registry.h"
#include "tidegate/runs.h"

struct runs_sweep_post;

/* The feature: created by tg_runs_register, freed by its stop callback. */
struct runs {
	struct gw *gw;
	struct tg_runs *reg;		/* the run registry (owned) */
	struct runs_tracker *tracker;
	struct runs_sweeper *sweeper;
};

/* One request's part in the feature (r->slot[id]), made on first use. */
struct runs_req {
	char *callback;			/* a submission's callback URL */
	struct runs_sweep_post *sweep;	/* a sweep being created (sweeps.c) */
	struct gw_vcall *call;		/* its base case being fetched */
};

/* feature.c */
/** The feature of gw (borrowed). */
struct runs *runs_ctx(const struct gw *gw);
#define RUNS(gw) runs_ctx(gw)
/** r's slot (borrowed; r owns it), made when absent. */
struct runs_req *runs_req_of(struct gw_req *r);
/** r's slot (borrowed), or NULL when the feature never used r. */
struct runs_req *runs_req_find(const struct gw_req *r);

/* runs.c */
/** The registry configured by c (borrowed), owned by the caller; NULL with err. */
struct tg_runs *runs_registry_open(const struct gw_config *c, struct tg_err *err);
/** A submission's callback URL checked (400 when refused): 0, or -1 replied. */
int runs_prepare(struct gw_req *r);
/** GET of an expired run's status or results: 410 (or the archive); -1 replied. */
int runs_gone(struct gw_req *r);
/** The held 201 of a submission (capture borrowed, NULL when it broke off):
 * record the run, then answer r. Always replies: 1. */
int runs_done(struct gw_req *r, enum tg_up_error err, struct evbuffer *capture);
/** The vendor answered 200 to a GET of run id's status: record it (all borrowed). */
void runs_status_seen(struct gw *gw, const char *id, const char *body, size_t len);
/** Run id (borrowed) ended: enqueue its webhook when its submission named a callback. */
void runs_notify(struct gw *gw, const char *id);
/** /metrics: the registry's counts as gauges. */
void runs_metrics(struct gw *gw, struct evbuffer *out);

/* runs_api.c */
#define RUNS_API_PREFIX "/tidegate/v1/"
/** The extension API on the simulation listener (never routed upstream). */
void runs_api(struct gw_req *r);
/** Query limit (1-1000) and offset of a list into *limit / *offset (left as
 * they are when absent): 0, or -1 with why. */
int runs_api_paging(struct gw_req *r, size_t *limit, size_t *offset, char *why, size_t n);

/* sweeps.c */
/** POST and GET /tidegate/v1/sweeps (rest "") and GET …/sweeps/{id} (rest
 * "/{id}", borrowed). */
void runs_sweeps_api(struct gw_req *r, const char *rest);
void runs_sweep_post_free(struct runs_sweep_post *sp);	/* takes ownership; NULL-safe */
/** Mark sweep id done if every variant has ended, then its webhook:
 * 1 when it became done now, 0 when not, -1 on a registry error. */
int runs_sweep_settle(struct gw *gw, const char *id);

/* sweeper.c */
/** The sweeper of gw (borrowed), owned by the caller. */
struct runs_sweeper *runs_sweeper_new(struct gw *gw);
void runs_sweeper_free(struct runs_sweeper *sw);	/* takes ownership; NULL-safe */
/** Submit what sweep id (borrowed) may submit now; NULL-safe. */
void runs_sweeper_kick(struct runs_sweeper *sw, const char *id);
/** A run of sweep id (borrowed) ended: settle the sweep, or submit into the free slot. */
void runs_sweeper_run_ended(struct runs_sweeper *sw, const char *id);
/** No submission in flight (drain may end). */
int runs_sweeper_idle(const struct runs_sweeper *sw);

/* tracker.c */
/** The tracker of gw (borrowed), owned by the caller. */
struct runs_tracker *runs_tracker_new(struct gw *gw);
void runs_tracker_free(struct runs_tracker *t);	/* takes ownership; NULL-safe */
/** Re-read the schedule and the unhandled ends (a run was added or ended); NULL-safe. */
void runs_tracker_kick(struct runs_tracker *t);

#endif
