/*
 * feature.c - the runs feature as the request core sees it: the
 * operations it takes part in (submissions, run statuses and results, the
 * run list filtered per key), the digest and caseId of a checked
 * submission read beside its check (its scan), its own API prefix on the
 * simulation listener, the statuses other
 * features saw, its metrics and drain, each request's slot (struct
 * runs_req), freed when the request ends (its state operation cancelled),
 * and the state operations tied to no request (struct runs_bg), cancelled
 * when the feature stops.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "tidegate/crypto.h"
#include "tidegate/json.h"
#include "tidegate/log.h"
#include "runs_int.h"

static const enum tg_op ops[] = {
	TG_OP_SIM_SUBMIT, TG_OP_SIM_STATUS, TG_OP_SIM_RESULTS, TG_OP_SIM_LIST, TG_OP_COUNT
};

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

/* A submission's 201 is held until the run is recorded, a status's 200
 * until the status is, the run list until it is filtered to the caller's. */
static enum gw_head
on_head(struct gw_req *r, void *ctx, int status)
{
	if (r->op == TG_OP_SIM_SUBMIT && status == 201)
		return GW_HEAD_HOLD;
	if (r->op == TG_OP_SIM_LIST)
		return runs_list_holds(r, status) ? GW_HEAD_HOLD : GW_HEAD_RELAY;
	if (r->op == TG_OP_SIM_STATUS && status == 200 && r->gw->state != NULL &&
	    evhttp_request_get_command(r->req) == EVHTTP_REQ_GET)
		return GW_HEAD_HOLD;
	return GW_HEAD_RELAY;
}

static int
on_done(struct gw_req *r, void *ctx, enum tg_up_error err, struct evbuffer *capture)
{
	if (!r->held)
		return err != TG_UP_OK ? runs_uncertain(r, err) : 0;
	if (r->op == TG_OP_SIM_SUBMIT)
		return runs_done(r, err, capture);
	if (r->op == TG_OP_SIM_LIST)
		return runs_list_done(r, err, capture);
	return r->op == TG_OP_SIM_STATUS ? runs_status_done(r, err, capture) : 0;
}

static void
on_free(struct gw_req *r, void *ctx, void *slot)
{
	struct runs_req *q = slot;

	tg_state_cancel(q->op);
	gw_vcall_cancel(q->call);
	if (q->timer != NULL)
		event_free(q->timer);
	free(q->callback);
	free(q->sim_id);
	free(q->case_id);
	yajl_tree_free(q->list);
	tg_sweep_cleanup(&q->sweep_rec);
	runs_sweep_post_free(q->sweep);
	free(q);
}

/* A submission's digest and caseId, read beside its check (maybe on the
 * worker thread: reads only b), so a large case is not parsed and hashed
 * again on the loop when its run is recorded (runs.c). */
struct case_scan {
	char sha[TG_RUNS_SHA_LEN];
	char *case_id;
};

static int
wants_scan(const struct gw_req *r, void *ctx)
{
	return r->op == TG_OP_SIM_SUBMIT;
}

static void *
scan(const struct tg_check_body *b)
{
	struct case_scan *s;
	uint8_t md[TG_SHA256_LEN];
	const char *id;

	if (!b->checked || b->sent == NULL)
		return NULL;
	s = tg_xcalloc(1, sizeof(*s));
	tg_sha256_oneshot(b->sent, b->sentlen, md);
	tg_hex(md, sizeof(md), s->sha);
	id = tg_json_get_str(b->tree, "caseId");
	s->case_id = id ? tg_xstrdup(id) : NULL;
	return s;
}

static void
scan_free(void *arg)
{
	struct case_scan *s = arg;

	free(s->case_id);
	free(s);
}

static void
check(struct gw_req *r, void *ctx, void *arg, struct tg_problems *p)
{
	struct case_scan *s = arg;
	struct runs_req *q;

	if (s == NULL)
		return;
	q = runs_req_of(r);
	memcpy(q->case_sha256, s->sha, sizeof(q->case_sha256));
	q->case_id = s->case_id;
	free(s);
}

/* Statuses the poll multiplexer fetched for its callers. */
static void
on_answer(void *ctx, const struct gw_answer *a)
{
	struct runs *rn = ctx;

	if (a->op == TG_OP_SIM_STATUS && a->status == 200 && a->job != NULL)
		runs_status_seen(rn->gw, a, a->job, a->body, a->len);
}

static void
metrics(void *ctx, struct evbuffer *out, struct gw_scrape *s)
{
	runs_metrics(((struct runs *)ctx)->gw, out, s);
}

/* Once every feature is registered: the webhook feature's API (it
 * registers after this one), then the tracker and the sweeper, which may
 * hand an ended run's webhook to it at once (a read of the state seam may
 * answer before it returns). */
static void
start(void *ctx)
{
	struct runs *rn = ctx;

	rn->callbacks = gw_api_get(rn->gw, GW_API_WEBHOOK_CALLBACKS, &rn->callbacks_ctx);
	rn->sweeps_quota = gw_api_get(rn->gw, GW_API_LIMITS_SWEEPS, &rn->sweeps_quota_ctx);
	rn->tracker = runs_tracker_new(rn->gw);
	rn->sweeper = runs_sweeper_new(rn->gw);
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
	struct runs_bg *b;

	runs_tracker_free(rn->tracker);
	runs_sweeper_free(rn->sweeper);
	while ((b = LIST_FIRST(&rn->bgs)) != NULL) {
		tg_state_cancel(b->op);
		if (b->scrape != NULL)
			gw_scrape_release(b->scrape);	/* without the registry's part */
		runs_bg_free(b);
	}
	free(rn);
}

static const struct gw_request_role request = {
	.ops = ops,
	.on_request = on_request,
	.on_head = on_head,
	.on_done = on_done,
	.on_free = on_free,
};

/* the submission's caseId and digest, read beside its check */
static const struct gw_check_role check_role = {
	.wants_scan = wants_scan,
	.scan = scan,
	.scan_free = scan_free,
	.check = check,
};

static void
on_admin(void *ctx, struct evhttp_request *req, const char *path)
{
	runs_admin(((struct runs *)ctx)->gw, req, path);
}

static const struct gw_endpoint_role endpoints = {
	.prefix_listener = GW_SIM,
	.prefix = RUNS_API_PREFIX,
	.on_prefix = on_prefix,
	.admin_prefix = "/runs",
	.on_admin = on_admin,
};

static const struct gw_background_role background = {
	.start = start,
	.on_answer = on_answer,
	.metrics = metrics,
	.idle = idle,
	.stop = stop,
};

static const struct gw_feature feature = {
	.name = "runs",
	.config = &tg_runs_config,
	.request = &request,
	.check = &check_role,
	.endpoints = &endpoints,
	.background = &background,
};

/* Its series are at 0 from start, every label known in advance. */
static void
declare_metrics(struct tg_metrics *m)
{
	static const char *const submissions[] = { "result=\"accepted\"",
		"result=\"rejected\"", "result=\"failed\"", NULL };
	static const char *const checks[] = { "kind=\"status\"", "kind=\"results\"", NULL };

	tg_metrics_help(m, "tidegate_sweeps_created_total", "counter",
	    "Sweeps stored (every variant checked).");
	tg_metrics_help(m, "tidegate_sweeps_done_total", "counter",
	    "Sweeps whose every variant has ended.");
	tg_metrics_help(m, "tidegate_sweep_submissions_total", "counter",
	    "Submissions of sweep variants: accepted, rejected (4xx), failed (no verdict).");
	tg_metrics_help(m, "tidegate_run_checks_total", "counter",
	    "Vendor calls of this instance's run tracker: status checks and results fetched.");
	tg_metrics_touch(m, "tidegate_sweeps_created_total", "");
	tg_metrics_touch(m, "tidegate_sweeps_done_total", "");
	tg_metrics_touch_list(m, "tidegate_sweep_submissions_total", submissions);
	tg_metrics_touch_list(m, "tidegate_run_checks_total", checks);
}

int
tg_runs_register(struct gw *gw, struct tg_err *err)
{
	struct runs *rn = tg_xcalloc(1, sizeof(*rn));
	int id;

	rn->gw = gw;
	LIST_INIT(&rn->bgs);
	if ((id = gw_feature_register(gw, &feature, rn, err)) < 0) {
		free(rn);
		return -1;
	}
	runs_slot_set(id);
	declare_metrics(gw->metrics);
	return 0;	/* the tracker and the sweeper begin at start */
}
