/*
 * admin_webhooks.c - the webhook outbox on the admin listener (JSON):
 *
 *   GET  /webhooks?state=&since=&correlationId=&limit=&offset=   list
 *   GET  /webhooks/{id}                                           one job
 *   POST /webhooks/{id}/redeliver                                 again, from scratch
 *   POST /webhooks/redeliver?since=<ISO 8601>                     every failure since
 *   GET  /webhooks/policy                                         the egress policy
 *
 * When API keys are configured these need a key with the admin service
 * (Authorization: Bearer or X-Api-Key): 401 without a known key, 403 for
 * a key without it (the key's name goes on the request's access line,
 * gw_admin_set_key). Errors are the core's admin error answers
 * (gw_admin_reply_error: the request's id, the code on its access line).
 * Called by admin.c; the feature (struct wh_hooks) is borrowed for each
 * call. Each request is held (gw_held_new) until the state seam answers;
 * the client may go meanwhile.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "tidegate/clock.h"
#include "tidegate/http.h"
#include "tidegate/json.h"
#include "tidegate/log.h"
#include "hooks_int.h"
#include "wh.h"

#define LIST_MAX	1000

/* ---- a request waiting on the seam ---- */

/* One admin request: held until the seam answers; its answer is built in
 * the callback (the results are borrowed there) and sent by then(a). */
struct wh_admin_op {
	TAILQ_ENTRY(wh_admin_op) entry;		/* h->admin */
	struct wh_hooks *h;
	struct gw_held *held;
	struct tg_state_op *op;
	void (*then)(struct wh_admin_op *a);
	int in_call, answered;
	int rc;				/* enum tg_state_rc */
	char err[256];
	int64_t n;			/* redeliver since: how many */
	char id[TG_WEBHOOK_ID_LEN];
	char rid[TG_UUID_LEN];		/* the admin request's id, for the log */
	struct tg_outbox_query q;	/* list: the filters … */
	char *cid;			/* … and the correlationId they borrow */
	yajl_gen g;			/* the answer's JSON, once built */
};

static struct wh_admin_op *
adm_new(struct wh_hooks *h, struct evhttp_request *req)
{
	struct wh_admin_op *a = tg_xcalloc(1, sizeof(*a));

	a->h = h;
	a->held = gw_held_new(req);
	snprintf(a->rid, sizeof(a->rid), "%s", tg_http_request_id(req) ? tg_http_request_id(req) :
	    "");
	TAILQ_INSERT_TAIL(&h->admin, a, entry);
	return a;
}

static void
adm_free(struct wh_admin_op *a)
{
	TAILQ_REMOVE(&a->h->admin, a, entry);
	tg_state_cancel(a->op);
	if (a->held != NULL)
		gw_held_take(a->held);
	if (a->g != NULL)
		yajl_gen_free(a->g);
	free(a->cid);
	free(a);
}

void
wh_admin_cancel(struct wh_hooks *h)
{
	while (!TAILQ_EMPTY(&h->admin))
		adm_free(TAILQ_FIRST(&h->admin));
}

static void
adm_begin(struct wh_admin_op *a, void (*then)(struct wh_admin_op *a))
{
	a->then = then;
	a->in_call = 1;
	a->answered = 0;
	if (a->g != NULL)
		yajl_gen_free(a->g);
	a->g = NULL;
}

/* After the call: keep op, or go on now when it answered during the call. */
static void
adm_end(struct wh_admin_op *a, struct tg_state_op *op)
{
	a->in_call = 0;
	if (a->answered)
		a->then(a);	/* may free a */
	else
		a->op = op;
}

static void
adm_settle(struct wh_admin_op *a, const struct tg_state_res *res)
{
	a->op = NULL;
	a->rc = res->rc;
	snprintf(a->err, sizeof(a->err), "%s", res->rc != TG_STATE_OK ? res->err.msg : "");
	if (a->in_call)
		a->answered = 1;
	else
		a->then(a);
}

/* The held request, taken back (NULL when the client went); a is freed. */
static struct evhttp_request *
adm_take(struct wh_admin_op *a)
{
	struct evhttp_request *req = gw_held_take(a->held);

	a->held = NULL;
	return req;
}

/* Answer a's failure, or its JSON; frees a. */
static void
adm_reply(struct wh_admin_op *a)
{
	struct evhttp_request *req = adm_take(a);

	if (a->rc == TG_STATE_ERROR || a->rc == TG_STATE_REFUSED)
		tg_log(TG_LOG_ERROR, "webhook_admin_failed", TG_LS("id", a->rid),
		    TG_LS("error", a->err));
	if (req == NULL)
		;	/* the client went: nothing to say */
	else if (a->rc == TG_STATE_NOT_FOUND)
		gw_admin_reply_error(a->h->gw, req, 404, "NOT_FOUND", a->err);
	else if (a->rc == TG_STATE_CONFLICT)
		gw_admin_reply_error(a->h->gw, req, 409, "CONFLICT", a->err);
	else if (tg_state_rc_down(a->rc)) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "5");
		gw_admin_reply_error(a->h->gw, req, 503, "WEBHOOK_UNAVAILABLE", a->err);
	} else if (a->rc != TG_STATE_OK)
		gw_admin_reply_error(a->h->gw, req, 500, "INTERNAL",
		    "the webhook outbox could not be read");
	else if (a->g == NULL)
		gw_admin_reply_error(a->h->gw, req, 404, "NOT_FOUND", "no such webhook job");
	else
		tg_reply_json(req, 200, a->g);
	adm_free(a);
}

/* ---- query parameters ---- */

static int
param_iso(struct evhttp_request *req, const char *name, int64_t *ms, int *present)
{
	char *v = tg_http_query(req, name);
	int rc = 0;

	*present = v != NULL && *v != '\0';
	if (*present && tg_clock_parse_iso(v, ms) != 0)
		rc = -1;
	free(v);
	return rc;
}

static int
param_count(struct evhttp_request *req, const char *name, size_t max, size_t *out)
{
	char *v = tg_http_query(req, name), *end;
	long long n;
	int rc = 0;

	if (v != NULL && *v != '\0') {
		n = strtoll(v, &end, 10);
		if (*end != '\0' || n < 0 || (unsigned long long)n > max)
			rc = -1;
		else
			*out = (size_t)n;
	}
	free(v);
	return rc;
}

/* The list's filters; replies 400 and returns -1 for a bad one. */
static int
list_query(struct gw *gw, struct evhttp_request *req, struct tg_outbox_query *q, char **cid)
{
	char *state = tg_http_query(req, "state");
	int present, rc = -1;

	memset(q, 0, sizeof(*q));
	q->state = -1;
	q->limit = 100;
	*cid = tg_http_query(req, "correlationId");
	if (state != NULL && *state != '\0' && (q->state = tg_outbox_state_parse(state)) < 0)
		gw_admin_reply_error(gw, req, 400, "BAD_REQUEST", "state: one of waiting, ready, "
		    "delivered, gone, dead");
	else if (param_iso(req, "since", &q->since_ms, &present) != 0)
		gw_admin_reply_error(gw, req, 400, "BAD_REQUEST", "since: an ISO 8601 time, e.g. "
		    "2024-01-31T00:00:00Z");
	else if (param_count(req, "limit", LIST_MAX, &q->limit) != 0 || q->limit == 0 ||
	    param_count(req, "offset", (size_t)1 << 31, &q->offset) != 0)
		gw_admin_reply_error(gw, req, 400, "BAD_REQUEST",
		    "limit: 1 to 1000; offset: 0 or more");
	else
		rc = 0;
	q->correlation_id = *cid != NULL && **cid != '\0' ? *cid : NULL;
	free(state);
	return rc;
}

/* ---- handlers ---- */

static void
on_list(const struct tg_state_res *res, const struct tg_outbox_job *jobs, size_t n, void *arg)
{
	struct wh_admin_op *a = arg;
	yajl_gen g;
	size_t i;

	if (res->rc == TG_STATE_OK) {
		g = a->g = tg_json_gen_new();
		yajl_gen_map_open(g);
		tg_json_str(g, "webhooks");
		yajl_gen_array_open(g);
		for (i = 0; i < n; i++)
			tg_outbox_job_json(g, &jobs[i]);
		yajl_gen_array_close(g);
		tg_json_kv_int(g, "count", (long long)n);
		tg_json_kv_int(g, "limit", (long long)a->q.limit);
		tg_json_kv_int(g, "offset", (long long)a->q.offset);
		yajl_gen_map_close(g);
	}
	adm_settle(a, res);
}

static void
list(struct wh_hooks *h, struct evhttp_request *req)
{
	struct tg_outbox_query q;
	struct wh_admin_op *a;
	char *cid = NULL;

	if (list_query(h->gw, req, &q, &cid) != 0) {
		free(cid);
		return;
	}
	a = adm_new(h, req);
	a->q = q;
	a->cid = cid;		/* q.correlation_id points into it */
	adm_begin(a, adm_reply);
	adm_end(a, tg_state_outbox_list(h->st, &a->q, on_list, a));
}

static void
on_job(const struct tg_state_res *res, const struct tg_outbox_job *jobs, size_t n, void *arg)
{
	struct wh_admin_op *a = arg;

	if (res->rc == TG_STATE_OK && n > 0) {
		a->g = tg_json_gen_new();
		tg_outbox_job_json(a->g, &jobs[0]);
	}
	adm_settle(a, res);
}

/* Answer with job a->id as it stands now. */
static void
get_job(struct wh_admin_op *a)
{
	adm_begin(a, adm_reply);
	adm_end(a, tg_state_outbox_get(a->h->st, a->id, on_job, a));
}

static void
get_one(struct wh_hooks *h, struct evhttp_request *req, const char *id)
{
	struct wh_admin_op *a = adm_new(h, req);

	snprintf(a->id, sizeof(a->id), "%s", id);
	get_job(a);
}

static void
on_done(const struct tg_state_res *res, void *arg)
{
	adm_settle(arg, res);
}

/* The job is due again: wake the worker (the seam announces nothing). */
static void
redelivered(struct wh_admin_op *a)
{
	if (a->rc != TG_STATE_OK) {
		adm_reply(a);
		return;
	}
	tg_log(TG_LOG_INFO, "webhook_redeliver", TG_LS("id", a->rid),
	    TG_LS("webhook_id", a->id));
	tg_webhook_kick(a->h->w);
	get_job(a);
}

static void
redeliver_one(struct wh_hooks *h, struct evhttp_request *req, const char *id)
{
	struct wh_admin_op *a = adm_new(h, req);

	snprintf(a->id, sizeof(a->id), "%s", id);
	adm_begin(a, redelivered);
	adm_end(a, tg_state_outbox_redeliver(h->st, id, tg_clock_now_ms(), on_done, a));
}

static void
on_count(const struct tg_state_res *res, int64_t n, void *arg)
{
	struct wh_admin_op *a = arg;

	a->n = n;
	adm_settle(a, res);
}

static void
redelivered_since(struct wh_admin_op *a)
{
	if (a->rc == TG_STATE_OK) {
		tg_log(TG_LOG_INFO, "webhook_redeliver", TG_LS("id", a->rid),
		    TG_LI("jobs", a->n));
		tg_webhook_kick(a->h->w);
		a->g = tg_json_gen_new();
		yajl_gen_map_open(a->g);
		tg_json_kv_int(a->g, "redelivered", (long long)a->n);
		yajl_gen_map_close(a->g);
	}
	adm_reply(a);
}

static void
redeliver_since(struct wh_hooks *h, struct evhttp_request *req)
{
	struct wh_admin_op *a;
	int64_t since = 0;
	int present = 0;

	if (param_iso(req, "since", &since, &present) != 0 || !present) {
		gw_admin_reply_error(h->gw, req, 400, "BAD_REQUEST", "since: an ISO 8601 time is "
		    "required, e.g. 2024-01-31T00:00:00Z");
		return;
	}
	a = adm_new(h, req);
	adm_begin(a, redelivered_since);
	adm_end(a, tg_state_outbox_redeliver_since(h->st, since, tg_clock_now_ms(), on_count,
	    a));
}

/* The egress policy in force (the running configuration's): where callbacks
 * may go. Read from the configuration, not the state, so it answers at once;
 * it carries no secret (webhooks.secret and the keys' are never read here). */
static void
policy(struct wh_hooks *h, struct evhttp_request *req)
{
	const struct wh_cfg *c = wh_cfg(h->gw->rt);
	yajl_gen g = tg_json_gen_new();
	size_t i;

	yajl_gen_map_open(g);
	tg_json_kv_str(g, "mode", c->wh_mode_str);
	tg_json_str(g, "schemes");
	yajl_gen_array_open(g);
	tg_json_str(g, "http");
	tg_json_str(g, "https");
	yajl_gen_array_close(g);
	tg_json_str(g, "ports");
	yajl_gen_map_open(g);
	tg_json_kv_int(g, "min", 1);
	tg_json_kv_int(g, "max", 65535);
	yajl_gen_map_close(g);
	tg_json_str(g, "allow");
	yajl_gen_array_open(g);
	for (i = 0; i < c->wh_allow.n; i++)
		tg_json_str(g, c->wh_allow.v[i]);
	yajl_gen_array_close(g);
	tg_json_str(g, "refused");
	wh_egress_refused_json(g);
	tg_json_kv_str(g, "caFile", c->wh_ca_file);
	yajl_gen_map_close(g);
	tg_reply_json(req, 200, g);
	yajl_gen_free(g);
}

/* path is "/webhooks" or below it. */
void
wh_admin(struct wh_hooks *h, struct evhttp_request *req, const char *path)
{
	enum evhttp_cmd_type m = evhttp_request_get_command(req);
	const char *rest = path[9] == '/' ? path + 10 : "";
	const char *slash = strchr(rest, '/');
	char id[TG_WEBHOOK_ID_LEN];
	size_t n;
	int post;

	if (!gw_admin_authorized(h->gw, req))
		return;
	post = strcmp(rest, "redeliver") == 0 ||
	    (slash != NULL && strcmp(slash, "/redeliver") == 0);
	if (slash != NULL && !post) {
		gw_admin_reply_error(h->gw, req, 404, NULL, "no such admin endpoint");
		return;
	}
	if (m != (post ? EVHTTP_REQ_POST : EVHTTP_REQ_GET)) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
		    post ? "POST" : "GET");
		gw_admin_reply_error(h->gw, req, 405, NULL, post ? "use POST" : "use GET");
		return;
	}
	n = slash != NULL ? (size_t)(slash - rest) : strlen(rest);
	if (n >= sizeof(id)) {
		gw_admin_reply_error(h->gw, req, 404, "NOT_FOUND", "no such webhook job");
		return;
	}
	snprintf(id, sizeof(id), "%.*s", (int)n, rest);
	if (*rest == '\0')
		list(h, req);
	else if (strcmp(rest, "policy") == 0)
		policy(h, req);
	else if (strcmp(rest, "redeliver") == 0)
		redeliver_since(h, req);
	else if (slash != NULL)
		redeliver_one(h, req, id);
	else
		get_one(h, req, id);
}
