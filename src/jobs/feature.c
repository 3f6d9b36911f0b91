/*
 * feature.c - the jobs feature as the request core sees it: the
 * operations it serves, its callbacks (job reads answered by the poll
 * multiplexer, creations' answers held until their owner is recorded
 * through the state seam), its metrics, its drain (long-polls answered at once), and
 * each request's slot (struct jobs_req), freed when the request ends.
 */
#include <stdio.h>
#include <stdlib.h>

#include <event2/buffer.h>

#include "tidegate/feature_apis.h"
#include "tidegate/log.h"
#include "jobs_int.h"

static const enum tg_op ops[] = {
	TG_OP_DEX_EXPORT, TG_OP_DEX_IMPORT_JSON, TG_OP_DEX_IMPORT_FILE,	/* creations */
	TG_OP_DEX_EXPORT_GET, TG_OP_DEX_IMPORT_STATUS, TG_OP_DEX_IMPORT_RESULT,
	TG_OP_DEX_IMPORT_FAILED, TG_OP_SIM_STATUS, TG_OP_SIM_RESULTS,	/* reads */
	TG_OP_COUNT
};

static int
creates_job(enum tg_op op)
{
	return op == TG_OP_DEX_EXPORT || op == TG_OP_DEX_IMPORT_JSON ||
	    op == TG_OP_DEX_IMPORT_FILE;
}

static int
on_request(struct gw_req *r, void *ctx)
{
	struct jobs *j = ctx;
	char *job;

	if (creates_job(r->op))
		return 0;
	if (jobs_owner_check(r, &job) != 0)
		return -1;	/* ambiguous, another key's job, or checked later */
	return jobs_poll_handle(j->poll, r, job) ? -1 : 0;
}

/* A creation's answer names the job: held until its owner is recorded. */
static enum gw_head
on_head(struct gw_req *r, void *ctx, int status)
{
	return creates_job(r->op) && jobs_owner_holds(r, status) ? GW_HEAD_HOLD :
	    GW_HEAD_RELAY;
}

static int
on_done(struct gw_req *r, void *ctx, enum tg_up_error err, struct evbuffer *capture)
{
	return creates_job(r->op) && jobs_owner_record(r, err, capture);
}

static void
on_free(struct gw_req *r, void *ctx, void *slot)
{
	jobs_poll_forget(slot);
	jobs_owner_forget(slot);
	free(slot);
}

static int
peek(void *ctx, int service, const char *uri, struct gw_peek *out)
{
	struct jobs *j = ctx;

	return j->poll != NULL && jobs_poll_peek(j->poll, service, uri, out);
}

/* What the multiplexer offers other features (feature_apis.h). */
static const struct gw_jobs_answers answers = { .peek = peek };

static void
metrics(void *ctx, struct evbuffer *out, struct gw_scrape *s)
{
	struct jobs *j = ctx;

	if (j->poll != NULL)
		jobs_poll_metrics(j->poll, out);
	jobs_owners_metrics(j, out, s);
}

/* A drain does not wait on jobs: long-polls get the current state. */
static void
drain(void *ctx)
{
	struct jobs *j = ctx;

	jobs_poll_drain(j->poll);
}

static void
stop(void *ctx)
{
	struct jobs *j = ctx;

	jobs_poll_free(j->poll);
	jobs_owners_stop(j);
	free(j);
}

static const struct gw_request_role request = {
	.ops = ops,
	.on_request = on_request,
	.on_head = on_head,
	.on_done = on_done,
	.on_free = on_free,
};

static const struct gw_background_role background = {
	.metrics = metrics,
	.drain = drain,
	.stop = stop,
};

static const struct gw_feature feature = {
	.name = "jobs",
	.config = &tg_jobs_config,
	.request = &request,
	.background = &background,
};

/* Every series known in advance, at 0 from start (the long-poll latency of
 * each pollable operation is this feature's: it holds them). */
static void
touch_metrics(struct tg_metrics *m)
{
	static const char *const polls[] = {
#define P(s) "service=\"" s "\",result=\"cached\"", "service=\"" s "\",result=\"coalesced\"", \
	"service=\"" s "\",result=\"fetched\"", "service=\"" s "\",result=\"long-poll\"", \
	"service=\"" s "\",result=\"passthrough\"", "service=\"" s "\",result=\"spool\""
		P("dex"), P("sim"), NULL };
#undef P
	static const char *const services[] = { "service=\"dex\"", "service=\"sim\"", NULL };
	static const enum tg_op waits[] = { TG_OP_DEX_EXPORT_GET, TG_OP_DEX_IMPORT_STATUS,
		TG_OP_DEX_IMPORT_RESULT, TG_OP_DEX_IMPORT_FAILED, TG_OP_SIM_STATUS,
		TG_OP_SIM_RESULTS };
	static const char *const plain[] = { "tidegate_poll_cache_evictions_total",
		"tidegate_poll_cache_unkept_total", "tidegate_job_owner_refusals_total",
		"tidegate_job_owner_errors_total", "tidegate_poll_spooled_total", NULL };
	const char *const *p;
	char labels[96];
	size_t i;

	tg_metrics_touch_list(m, "tidegate_poll_requests_total", polls);
	tg_metrics_touch_list(m, "tidegate_poll_upstream_total", services);
	for (i = 0; i < sizeof(waits) / sizeof(waits[0]); i++) {
		snprintf(labels, sizeof(labels), "service=\"%s\",op=\"%s\"",
		    waits[i] < TG_OP_SIM_TOKEN ? "dex" : "sim", tg_op_name(waits[i]));
		tg_metrics_touch(m, "tidegate_long_poll_duration_seconds", labels);
	}
	for (p = plain; *p != NULL; p++)
		tg_metrics_touch(m, *p, "");
}

static void
declare_metrics(struct tg_metrics *m)
{
	tg_metrics_help(m, "tidegate_long_poll_duration_seconds", "histogram",
	    "Time from arrival to the last byte of requests held as long-polls (?wait=).");
	tg_metrics_help(m, "tidegate_poll_requests_total", "counter",
	    "Polls by how they were answered: cached, coalesced, fetched, long-poll, passthrough.");
	tg_metrics_help(m, "tidegate_poll_upstream_total", "counter",
	    "Upstream polls made by the multiplexer.");
	tg_metrics_help(m, "tidegate_poll_cache_evictions_total", "counter",
	    "Answers evicted (least recently used first) to keep poll.cache_max_bytes.");
	tg_metrics_help(m, "tidegate_poll_cache_unkept_total", "counter",
	    "Answers served to their waiting callers but not kept: larger than the room "
	    "eviction could make within poll.cache_max_bytes.");
	tg_metrics_help(m, "tidegate_job_owner_refusals_total", "counter",
	    "Reads of a job refused (404): another API key created it, or no record "
	    "proves that the caller's did.");
	tg_metrics_help(m, "tidegate_job_owner_errors_total", "counter",
	    "Job creations whose owner could not be recorded (answered 503, never served).");
	tg_metrics_help(m, "tidegate_poll_spooled_total", "counter",
	    "Answers too large for the poll cache, written to a spool file instead.");
	touch_metrics(m);
}

int
tg_jobs_register(struct gw *gw, struct tg_err *err)
{
	struct jobs *j = tg_xcalloc(1, sizeof(*j));
	const struct jobs_cfg *c = jobs_cfg_of(&gw->rt->cfg);
	int id;

	j->gw = gw;
	jobs_owners_start(j);
	if (c != NULL && c->poll_enabled)
		j->poll = jobs_poll_new(gw, c);
	if ((id = gw_feature_register(gw, &feature, j, err)) < 0) {
		stop(j);
		return -1;
	}
	if (gw_api_provide(gw, GW_API_JOBS_ANSWERS, &answers, j, err) != 0)
		return -1;	/* registered: its stop frees j */
	j->id = id;
	jobs_slot_set(id);
	declare_metrics(gw->metrics);
	return 0;
}
