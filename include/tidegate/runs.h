/*
 * runs.h - the runs feature (src/runs/): the simulation run registry's
 * requests (submissions held until recorded, statuses seen, runs past the
 * vendor's retention answered 410 or from the archive, completion
 * webhooks), the run tracker, the sweeper, retention, and the runs and
 * sweeps API under /tidegate/v1/ on the simulation listener. It learns of
 * statuses other features fetched through the core's observers
 * (gw_answer_seen).
 */
#ifndef TIDEGATE_RUNS_H
#define TIDEGATE_RUNS_H

struct gw;
struct gw_config;
struct gw_config_def;
struct tg_err;
struct tg_runs_opts;

/** The feature's keys (runs.*) and settings: gw_config_define it before
 * the first gw_config_load. */
extern const struct gw_config_def tg_runs_config;

/** The run registry's store options from c (borrowed, loaded with
 * tg_runs_config defined; o's strings borrow from c): for the state
 * seam's open (tg_state_opts.runs). */
void tg_runs_store_opts(const struct gw_config *c, struct tg_runs_opts *o);

/** Register the feature with gw (borrowed), configured by gw's running
 * configuration; the registry is reached through gw's state seam. 0, or
 * -1 with err when no feature slot is left. gw owns the feature from then
 * on (freed by gw_free). */
int tg_runs_register(struct gw *gw, struct tg_err *err);

#endif
