/*
 * admin_webhooks.c - the webhook outbox on the admin listener (JSON):
 *
 *   GET  /webhooks?state=&since=&correlationId=&limit=&offset=   list
 *   GET  /webhooks/{id}                                           one job
 *   POST /webhooks/{id}/redeliver                                 again, from scratch
 *   POST /webhooks/redeliver?since=<ISO 8601>                     every failure since
 *
 * When API keys are configured these need a key with the admin service
 * (Authorization: Bearer or X-Api-Key): 401 without a known key, 403 for
 * a key without it. Called by admin.c; the outbox (struct wh_hooks) is
 * borrowed for each call.
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

#define LIST_MAX	1000

static int
authorized(struct gw *gw, struct evhttp_request *req)
{
	const char *apikey = tg_http_header(req, "X-Api-Key");
	const char *presented = apikey != NULL ? apikey : tg_http_bearer(req);
	const struct tg_key *k;

	if (gw->rt->keys.n == 0)
		return 1;	/* no keys: every listener is loopback-only */
	if (presented == NULL || (k = tg_keyring_match(&gw->rt->keys, presented)) == NULL) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
		    "Bearer");
		tg_reply_error(req, 401, "UNAUTHORIZED", presented != NULL ? "unknown API key" :
		    "an API key with the admin service is required (Authorization: Bearer <key> "
		    "or X-Api-Key)", NULL, 0);
		return 0;
	}
	if (!(k->services & TG_SVC_ADMIN)) {
		tg_reply_error(req, 403, "FORBIDDEN", "this API key may not use the admin API",
		    NULL, 0);
		return 0;
	}
	return 1;
}

/* An outbox call's result code as the HTTP answer; 1 when it replied. */
static int
reply_rc(struct evhttp_request *req, int rc, const struct tg_err *err)
{
	if (rc == TG_OUTBOX_NOT_FOUND)
		tg_reply_error(req, 404, "NOT_FOUND", err->msg, NULL, 0);
	else if (rc == TG_OUTBOX_CONFLICT)
		tg_reply_error(req, 409, "CONFLICT", err->msg, NULL, 0);
	else if (rc != 0)
		tg_reply_error(req, 500, "INTERNAL", "the webhook outbox could not be read",
		    NULL, 0);
	if (rc == -1)
		tg_log(TG_LOG_ERROR, "webhook_admin_failed", TG_LS("error", err->msg));
	return rc != 0;
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
list_query(struct evhttp_request *req, struct tg_outbox_query *q, char **cid)
{
	char *state = tg_http_query(req, "state");
	int present, rc = -1;

	memset(q, 0, sizeof(*q));
	q->state = -1;
	q->limit = 100;
	*cid = tg_http_query(req, "correlationId");
	if (state != NULL && *state != '\0' && (q->state = tg_outbox_state_parse(state)) < 0)
		tg_reply_error(req, 400, "BAD_REQUEST", "state: one of waiting, ready, delivered, "
		    "gone, dead", NULL, 0);
	else if (param_iso(req, "since", &q->since_ms, &present) != 0)
		tg_reply_error(req, 400, "BAD_REQUEST", "since: an ISO 8601 time, e.g. "
		    "2024-01-31T00:00:00Z", NULL, 0);
	else if (param_count(req, "limit", LIST_MAX, &q->limit) != 0 || q->limit == 0 ||
	    param_count(req, "offset", (size_t)1 << 31, &q->offset) != 0)
		tg_reply_error(req, 400, "BAD_REQUEST", "limit: 1 to 1000; offset: 0 or more",
		    NULL, 0);
	else
		rc = 0;
	q->correlation_id = *cid != NULL && **cid != '\0' ? *cid : NULL;
	free(state);
	return rc;
}

/* ---- handlers ---- */

static void
list(struct wh_hooks *h, struct evhttp_request *req)
{
	struct tg_outbox_query q;
	struct tg_outbox_job *jobs = NULL;
	struct tg_err err;
	yajl_gen g;
	size_t n = 0, i;
	char *cid = NULL;

	if (list_query(req, &q, &cid) != 0 || reply_rc(req, tg_outbox_list(h->ob, &q, &jobs, &n,
	    &err), &err))
		goto done;
	g = tg_json_gen_new();
	yajl_gen_map_open(g);
	tg_json_str(g, "webhooks");
	yajl_gen_array_open(g);
	for (i = 0; i < n; i++)
		tg_outbox_job_json(g, &jobs[i]);
	yajl_gen_array_close(g);
	tg_json_kv_int(g, "count", (long long)n);
	tg_json_kv_int(g, "limit", (long long)q.limit);
	tg_json_kv_int(g, "offset", (long long)q.offset);
	yajl_gen_map_close(g);
	tg_reply_json(req, 200, g);
	yajl_gen_free(g);
done:
	tg_outbox_jobs_free(jobs, n);
	free(cid);
}

static void
get_one(struct wh_hooks *h, struct evhttp_request *req, const char *id)
{
	struct tg_outbox_job j;
	struct tg_err err;
	yajl_gen g;

	memset(&j, 0, sizeof(j));
	if (reply_rc(req, tg_outbox_get(h->ob, id, &j, &err), &err))
		return;
	g = tg_json_gen_new();
	tg_outbox_job_json(g, &j);
	tg_reply_json(req, 200, g);
	yajl_gen_free(g);
	tg_outbox_job_cleanup(&j);
}

static void
redeliver_one(struct wh_hooks *h, struct evhttp_request *req, const char *id)
{
	struct tg_err err;

	if (reply_rc(req, tg_outbox_redeliver(h->ob, id, tg_clock_now_ms(), &err), &err))
		return;
	tg_log(TG_LOG_INFO, "webhook_redeliver", TG_LS("id", id));
	get_one(h, req, id);
}

static void
redeliver_since(struct wh_hooks *h, struct evhttp_request *req)
{
	struct tg_err err;
	int64_t since = 0;
	int present = 0;
	size_t n = 0;
	yajl_gen g;

	if (param_iso(req, "since", &since, &present) != 0 || !present) {
		tg_reply_error(req, 400, "BAD_REQUEST", "since: an ISO 8601 time is required, e.g. "
		    "2024-01-31T00:00:00Z", NULL, 0);
		return;
	}
	if (reply_rc(req, tg_outbox_redeliver_since(h->ob, since, tg_clock_now_ms(), &n, &err),
	    &err))
		return;
	tg_log(TG_LOG_INFO, "webhook_redeliver", TG_LI("jobs", n));
	g = tg_json_gen_new();
	yajl_gen_map_open(g);
	tg_json_kv_int(g, "redelivered", (long long)n);
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

	if (!authorized(h->gw, req))
		return;
	post = strcmp(rest, "redeliver") == 0 ||
	    (slash != NULL && strcmp(slash, "/redeliver") == 0);
	if (slash != NULL && !post) {
		tg_reply_error(req, 404, NULL, "no such admin endpoint", NULL, 0);
		return;
	}
	if (m != (post ? EVHTTP_REQ_POST : EVHTTP_REQ_GET)) {
		tg_reply_error(req, 405, NULL, post ? "use POST" : "use GET", NULL, 0);
		return;
	}
	n = slash != NULL ? (size_t)(slash - rest) : strlen(rest);
	if (n >= sizeof(id)) {
		tg_reply_error(req, 404, "NOT_FOUND", "no such webhook job", NULL, 0);
		return;
	}
	snprintf(id, sizeof(id), "%.*s", (int)n, rest);
	if (*rest == '\0')
		list(h, req);
	else if (strcmp(rest, "redeliver") == 0)
		redeliver_since(h, req);
	else if (slash != NULL)
		redeliver_one(h, req, id);
	else
		get_one(h, req, id);
}
