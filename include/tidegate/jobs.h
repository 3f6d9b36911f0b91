/*
 * jobs.h - the jobs feature (src/jobs/): the poll multiplexer with
 * long-poll and a spool for large final answers, and the correlation
 * ownership of data exchange jobs. It serves the job reads (GET /export,
 * /import/status|result|failed, simulation status and results) and
 * records who created each export and import. It publishes every status
 * answer it gets to the core's observers (gw_answer_seen) and offers its
 * fresh answers to other features (jobs.answers, feature_apis.h). Its
 * configuration (poll.*) is its own: tg_jobs_config.
 */
#ifndef TIDEGATE_JOBS_H
#define TIDEGATE_JOBS_H

struct gw;
struct gw_config;
struct gw_config_def;
struct tg_err;
struct tg_owners_opts;

/** The feature's keys (poll.*) and settings: gw_config_define it before
 * the first gw_config_load. */
extern const struct gw_config_def tg_jobs_config;

/** The ownership store's options from c (borrowed, loaded with
 * tg_jobs_config defined; o borrows from c): for the state seam's open
 * (tg_state_opts.owners). */
void tg_jobs_owners_opts(const struct gw_config *c, struct tg_owners_opts *o);

/** Register the feature with gw (borrowed), configured by gw's running
 * configuration; ownership is kept through gw's state seam (none without
 * one). 0, or -1 with err when no feature slot is left. gw owns the
 * feature from then on (freed by gw_free). */
int tg_jobs_register(struct gw *gw, struct tg_err *err);

#endif
