/*
 * feature.c - the runs feature as the request core sees it: the
 * operations it takes part in (submissions, run statuses and results),
 * its own API prefix on the simulation listener, the statuses other
 * features saw, its metrics and drain, and each request's slot (struct
 * runs_req), freed when the request ends.
 */
#include <stdlib.h>

#include <event2/buffer.h>

#include "tidegate/log.h"
#include "runs_int.h"

/* The slot index is the same for every gateway of the process: features
 * register in one fixed order (src/tidegate.c). */
static int slot_id = -1;

static const enum tg_op ops[] = {
	TG_OP_SIM_SUBMIT, TG_OP_SIM_STATUS, TG_OP_SIM_RESULTS, TG_OP_COUNT
};

struct runs *
runs_ctx(const struct gw *gw)
{
	return gw->feat_ctx[slot_id];
}

struct runs_req *
runs_req_find(const struct gw_req *r)
{
	return r->slot[slot_id];
}

struct runs_req *
runs_req_of(struct gw_req *r)
{
	if (r->slot[slot_id] == NULL)
		r->slot[slot_id] = tg_xcalloc(1, sizeof(struct runs_req));
	return r->slot[slot_id];
}

/* /tidegate/v1/…: the registry answers, never the vendor. */
static void
on_prefix(struct gw_req *r, void *ctx)
{
	if (gw_req_authenticate(r) == 0)
		runs_api(r);
}

static int
on_request(struct gw_req *r, void *ctx)
{
	return r->op == TG_OP_SIM_SUBMIT ? runs_prepare(r) : runs_gone(r);
}

/* A submission's 201 is held until the run is recorded; a status is kept. */
static enum gw_head
on_head(struct gw_req *r, void *ctx, int status)
{
	if (r->op == TG_OP_SIM_SUBMIT && status == 201)
		return GW_HEAD_HOLD;
	if (r->op == TG_OP_SIM_STATUS && status == 200)
		return GW_HEAD_CAPTURE;
	return GW_HEAD_RELAY;
}

static int
on_done(struct gw_req *r, void *ctx, enum tg_up_error err, struct evbuffer *capture)
{
	const char *id;

	if (r->op == TG_OP_SIM_SUBMIT)
		return r->held ? runs_done(r, err, capture) : 0;
	id = tg_route_param(&r->m, "id");
	if (r->op == TG_OP_SIM_STATUS && err == TG_UP_OK && capture != NULL && id != NULL)
		runs_status_seen(r->gw, id, (const char *)evbuffer_pullup(capture, -1),
		    evbuffer_get_length(capture));
	return 0;
}

static void
on_free(struct gw_req *r, void *ctx, void *slot)
{
	struct runs_req *q = slot;

	gw_vcall_cancel(q->call);
	free(q->callback);
	runs_sweep_post_free(q->sweep);
	free(q);
}

/* Statuses the poll multiplexer fetched for its callers. */
static void
on_answer(void *ctx, const struct gw_answer *a)
{
	struct runs *rn = ctx;

	if (a->op == TG_OP_SIM_STATUS && a->status == 200 && a->job != NULL)
		runs_status_seen(rn->gw, a->job, a->body, a->len);
}

static void
metrics(void *ctx, struct evbuffer *out, struct gw_scrape *s)
{
	runs_metrics(((struct runs *)ctx)->gw, out);
}

static int
idle(void *ctx)
{
	return runs_sweeper_idle(((struct runs *)ctx)->sweeper);
}

static void
stop(void *ctx)
{
	struct runs *rn = ctx;

	runs_tracker_free(rn->tracker);
	runs_sweeper_free(rn->sweeper);
	tg_runs_close(rn->reg);
	free(rn);
}

static const struct gw_feature feature = {
	.name = "runs",
	.ops = ops,
	.prefix_listener = GW_SIM,
	.prefix = RUNS_API_PREFIX,
	.on_prefix = on_prefix,
	.on_request = on_request,
	.on_head = on_head,
	.on_done = on_done,
	.on_free = on_free,
	.on_answer = on_answer,
	.metrics = metrics,
	.idle = idle,
	.stop = stop,
};

static void
declare_metrics(struct tg_metrics *m)
{
	tg_metrics_help(m, "tidegate_sweeps_created_total", "counter",
	    "Sweeps stored (every variant checked).");
	tg_metrics_help(m, "tidegate_sweeps_done_total", "counter",
	    "Sweeps whose every variant has ended.");
	tg_metrics_help(m, "tidegate_sweep_submissions_total", "counter",
	    "Submissions of sweep variants: accepted, rejected (4xx), failed (no verdict).");
}

int
tg_runs_register(struct gw *gw, struct tg_err *err)
{
	struct runs *rn = tg_xcalloc(1, sizeof(*rn));
	int id;

	rn->gw = gw;
	if ((rn->reg = runs_registry_open(&gw->rt->cfg, err)) == NULL) {
		free(rn);
		return -1;
	}
	if ((id = gw_feature_register(gw, &feature, rn, err)) < 0) {
		tg_runs_close(rn->reg);
		free(rn);
		return -1;
	}
	slot_id = id;
	declare_metrics(gw->metrics);
	gw->case_digest = 1;	/* submissions' SHA-256 from their check */
	rn->tracker = runs_tracker_new(gw);
	rn->sweeper = runs_sweeper_new(gw);
	return 0;
}
