/*
 * feature.c - the webhook feature as the request core sees it: exports
 * with a callbackUrl (their body scanned beside the request check, the
 * URL checked and taken out, the vendor's 200 held until the job is
 * durable), the relay endpoint the vendor delivers to, callback URL checks
 * and signing secrets for other features (webhook.callbacks,
 * feature_apis.h), the admin API under /webhooks,
 * metrics, reload, drain, and each request's slot (struct wh_req) with
 * the seam operation it waits on.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>

#include "tidegate/log.h"
#include "hooks_int.h"

/* The slot index is the same for every gateway of the process: features
 * register in one fixed order (src/tidegate.c). */
static int slot_id = -1;

static const enum tg_op ops[] = { TG_OP_DEX_EXPORT, TG_OP_COUNT };

struct wh_hooks *
wh_ctx(const struct gw *gw)
{
	return gw->feat_ctx[slot_id];
}

struct wh_req *
wh_req_find(const struct gw_req *r)
{
	return r->slot[slot_id];
}

struct wh_req *
wh_req_of(struct gw_req *r)
{
	return gw_req_slot(r, slot_id, sizeof(struct wh_req));
}

/* ---- a request's seam operations ---- */

void
wh_req_begin(struct gw_req *r, void (*then)(struct gw_req *r))
{
	struct wh_req *q = wh_req_of(r);

	q->then = then;
	q->in_call = 1;
	q->answered = 0;
	q->rc = TG_STATE_ERROR;
	q->err[0] = q->str[0] = '\0';
	q->state = -1;
}

void
wh_req_end(struct gw_req *r, struct tg_state_op *op)
{
	struct wh_req *q = wh_req_find(r);

	q->in_call = 0;
	if (q->answered) {
		q->answered = 0;
		q->then(r);	/* may free r */
	} else {
		q->op = op;
	}
}

/* The answer is in q: go on now, or once the call has returned. */
static void
settle(struct gw_req *r, const struct tg_state_res *res)
{
	struct wh_req *q = wh_req_find(r);

	q->op = NULL;
	q->rc = res->rc;
	snprintf(q->err, sizeof(q->err), "%s", res->rc != TG_STATE_OK ? res->err.msg : "");
	if (q->in_call)
		q->answered = 1;
	else
		q->then(r);
}

void
wh_req_on_done(const struct tg_state_res *res, void *arg)
{
	settle(arg, res);
}

void
wh_req_on_str(const struct tg_state_res *res, const char *s, void *arg)
{
	struct wh_req *q = wh_req_find(arg);

	snprintf(q->str, sizeof(q->str), "%s", s != NULL ? s : "");
	settle(arg, res);
}

void
wh_req_on_jobs(const struct tg_state_res *res, const struct tg_outbox_job *jobs, size_t n,
    void *arg)
{
	wh_req_find(arg)->state = res->rc == TG_STATE_OK && n > 0 ? (int)jobs[0].state : -1;
	settle(arg, res);
}

void
wh_req_on_payload(const struct tg_state_res *res, struct tg_state_payload *w, void *arg)
{
	wh_req_find(arg)->w = w;
	settle(arg, res);
}

void
wh_req_on_pair(const struct tg_state_res *res, int64_t all, int64_t mine, void *arg)
{
	struct wh_req *q = wh_req_find(arg);

	q->used[0] = all;
	q->used[1] = mine;
	settle(arg, res);
}

void
wh_reply_unavailable(struct gw_req *r, const char *msg, const char *why)
{
	char text[640];

	snprintf(text, sizeof(text), "%s%s%s%s", msg, why != NULL && *why ? " (" : "",
	    why != NULL ? why : "", why != NULL && *why ? ")" : "");
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "Retry-After", "5");
	gw_req_reply_error(r, 503, "WEBHOOK_UNAVAILABLE", text);
}

/* ---- the core's callbacks ---- */

static int
on_prefix_head(void *ctx, const char *method, const char *path, int64_t length,
    uint64_t *limit)
{
	return wh_hook_relay_head(ctx, method, path, length, limit);
}

static void
on_prefix(struct gw_req *r, void *ctx)
{
	wh_hook_relay(r);	/* the vendor calls: no API key, never upstream */
}

static int
wants_scan(const struct gw_req *r, void *ctx)
{
	return wh_hook_wanted(r);
}

static void *
scan(const struct tg_check_body *b)
{
	struct wh_scan *s = tg_xmalloc(sizeof(*s));

	wh_scan_fill(s, b);
	return s;
}

static void
scan_free(void *s)
{
	wh_scan_free(s);
}

static void
check(struct gw_req *r, void *ctx, void *s, struct tg_problems *p)
{
	if (s != NULL) {
		wh_scan_free(wh_req_of(r)->scan);
		wh_req_of(r)->scan = s;		/* read again by wh_hook_prepare */
	}
	wh_hook_check(r, p);
}

static int
on_request(struct gw_req *r, void *ctx)
{
	return wh_hook_prepare(r);
}

static enum gw_head
on_head(struct gw_req *r, void *ctx, int status)
{
	struct wh_req *q = wh_req_find(r);

	/* answered by wh_hook_done once the job is durable */
	return status == 200 && q != NULL && q->hook != NULL ? GW_HEAD_HOLD : GW_HEAD_RELAY;
}

static int
on_done(struct gw_req *r, void *ctx, enum tg_up_error err, struct evbuffer *capture)
{
	struct wh_req *q = wh_req_find(r);

	return q != NULL && q->hook != NULL && wh_hook_done(r, err);
}

static void
on_free(struct gw_req *r, void *ctx, void *slot)
{
	struct wh_req *q = slot;

	tg_state_cancel(q->op);
	if (q->add != NULL)
		wh_add_orphan(q->add);
	tg_state_payload_abort(q->w);
	wh_scan_free(q->scan);
	wh_hook_free(q->hook);
	free(q);
}

/* A callback URL another feature was given: a secret to sign with, and
 * the egress policy's consent. */
static int
callback_check(void *ctx, const struct gw_req *r, const char *url, const char *key,
    struct tg_problems *p)
{
	struct wh_hooks *h = ctx;
	struct tg_err why;

	if (wh_secret_ref(r->rt, key) == NULL) {
		tg_problems_add(p, "/callbackUrl", "no_secret", "no webhook signing secret is "
		    "configured for this API key (webhooks.secret or keys[].webhook_secret)");
		return -1;
	}
	if (tg_egress_check_url(h->pol, url, &why) != 0) {
		tg_metrics_inc(r->gw->metrics, "tidegate_webhook_egress_refusals_total",
		    "stage=\"request\"", 1);
		tg_problems_add(p, "/callbackUrl", "egress", "%s", why.msg);
		return -1;
	}
	return 0;
}

static const char *
secret_ref(void *ctx, const struct gw_runtime *rt, const char *key)
{
	return wh_secret_ref(rt, key);
}

static void
kick(void *ctx)
{
	struct wh_hooks *h = ctx;

	if (h->w != NULL)
		tg_webhook_kick(h->w);
}

/* What the feature offers other features (feature_apis.h). */
static const struct gw_webhook_callbacks callbacks = {
	.check = callback_check,
	.secret_ref = secret_ref,
	.kick = kick,
};

/* The jobs feature registers before this one, but a start is where every
 * feature is known. */
static void
start(void *ctx)
{
	struct wh_hooks *h = ctx;

	h->answers = gw_api_get(h->gw, GW_API_JOBS_ANSWERS, &h->answers_ctx);
}

static void
on_admin(void *ctx, struct evhttp_request *req, const char *path)
{
	wh_admin(ctx, req, path);
}

static void
metrics(void *ctx, struct evbuffer *out, struct gw_scrape *s)
{
	wh_hooks_metrics(ctx, out, s);
}

static void
reload(void *ctx, const struct gw_config *old)
{
	wh_hooks_reload(ctx, old);
}

static void
drain(void *ctx)
{
	wh_hooks_drain(ctx);
}

static int
idle(void *ctx)
{
	return ((struct wh_hooks *)ctx)->drained;
}

static void
stop(void *ctx)
{
	wh_hooks_free(ctx);
}

static const struct gw_request_role request = {
	.ops = ops,
	.on_request = on_request,
	.on_head = on_head,
	.on_done = on_done,
	.on_free = on_free,
};

static const struct gw_check_role checks = {
	.wants_scan = wants_scan,
	.scan = scan,
	.scan_free = scan_free,
	.check = check,
};

static const struct gw_endpoint_role endpoints = {
	.prefix_listener = GW_DEX,
	.prefix = WH_RELAY_PREFIX,
	.prefix_open = 1,
	.on_prefix_head = on_prefix_head,
	.on_prefix = on_prefix,
	.admin_prefix = "/webhooks",
	.on_admin = on_admin,
};

static const struct gw_background_role background = {
	.start = start,
	.metrics = metrics,
	.reload = reload,
	.drain = drain,
	.idle = idle,
	.stop = stop,
};

static const struct gw_feature feature = {
	.name = "webhook",
	.config = &tg_webhook_config,
	.request = &request,
	.check = &checks,
	.endpoints = &endpoints,
	.background = &background,
};

/* Every series known in advance, at 0 from start. */
static void
touch_metrics(struct tg_metrics *m)
{
	static const char *const attempts[] = { "result=\"delivered\"", "result=\"retry\"",
		"result=\"gone\"", "result=\"dead\"", NULL };
	static const char *const dead[] = { "reason=\"exhausted\"", "reason=\"abandoned\"",
		NULL };
	static const char *const stages[] = { "stage=\"request\"", "stage=\"attempt\"",
		NULL };
	static const char *const polls[] = { "result=\"ready\"", "result=\"pending\"",
		"result=\"cached\"", "result=\"failed\"", "result=\"abandoned\"", NULL };
	static const char *const quota[] = { "stage=\"request\"", "stage=\"store\"", NULL };

	tg_metrics_touch_list(m, "tidegate_webhook_attempts_total", attempts);
	tg_metrics_touch_list(m, "tidegate_webhook_dead_letters_total", dead);
	tg_metrics_touch_list(m, "tidegate_webhook_egress_refusals_total", stages);
	tg_metrics_touch_list(m, "tidegate_webhook_payload_polls_total", polls);
	tg_metrics_touch_list(m, "tidegate_webhook_quota_refusals_total", quota);
	tg_metrics_touch(m, "tidegate_webhook_relay_deliveries_total", "");
	tg_metrics_touch(m, "tidegate_webhook_first_attempt_seconds", "");
	tg_metrics_touch(m, "tidegate_webhook_attempt_duration_seconds", "");
}

static void
declare_metrics(struct tg_metrics *m)
{
	tg_metrics_help(m, "tidegate_webhook_attempts_total", "counter",
	    "Webhook delivery attempts by result: delivered, retry, gone (410), dead (last).");
	tg_metrics_help(m, "tidegate_webhook_dead_letters_total", "counter",
	    "Webhook jobs given up: schedule exhausted, or abandoned before their data came.");
	tg_metrics_help(m, "tidegate_webhook_first_attempt_seconds", "histogram",
	    "Time from a webhook's data being ready to its first attempt.");
	tg_metrics_help(m, "tidegate_webhook_attempt_duration_seconds", "histogram",
	    "Duration of one delivery attempt, DNS to answer.");
	tg_metrics_help(m, "tidegate_webhook_egress_refusals_total", "counter",
	    "Callback URLs refused by the egress policy, at request time or at an attempt.");
	tg_metrics_help(m, "tidegate_webhook_payload_polls_total", "counter",
	    "Polls for webhook export data: ready, pending, cached, failed, abandoned.");
	tg_metrics_help(m, "tidegate_webhook_relay_deliveries_total", "counter",
	    "Export data the vendor delivered to the relay endpoint.");
	tg_metrics_help(m, "tidegate_webhook_quota_refusals_total", "counter",
	    "Webhook payloads refused by webhooks.payload_max_bytes or a key's share: a "
	    "callbackUrl at request time, or export data at its store.");
	touch_metrics(m);
}

int
tg_webhook_register(struct gw *gw, struct tg_err *err)
{
	struct wh_hooks *h = wh_hooks_new(gw);
	int id;

	if ((id = gw_feature_register(gw, &feature, h, err)) < 0) {
		wh_hooks_free(h);
		return -1;
	}
	slot_id = id;
	wh_cfg_bind(id);	/* its settings are reached by it: before its start */
	if (gw_api_provide(gw, GW_API_WEBHOOK_CALLBACKS, &callbacks, h, err) != 0 ||
	    wh_hooks_start(h, err) != 0)
		return -1;	/* registered: its stop frees h */
	declare_metrics(gw->metrics);
	return 0;
}
