/*
 * runs_api.c - the gateway's extension API on the simulation listener,
 * answered from the run registry (never routed upstream):
 *   GET /tidegate/v1/runs?status=&caseId=&sweepId=&from=&to=&limit=&offset=
 *   GET /tidegate/v1/runs/{id}
 * and hands /tidegate/v1/sweeps… to sweeps.c. The registry answers
 * through the state seam, in a callback that replies.
 * A gateway API key is required; a key sees only its own runs.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "tidegate/clock.h"
#include "tidegate/http.h"
#include "tidegate/json.h"
#include "tidegate/registry.h"
#include "runs_int.h"

#define RUNS_PATH	RUNS_API_PREFIX "runs"
#define SWEEPS_PATH	RUNS_API_PREFIX "sweeps"

/* Query parameters into q; the strings are kept in s[] (caller frees). */
static int
parse_query(struct gw_req *r, struct tg_runs_query *q, char *s[5], char *why, size_t n)
{
	static const char *const names[5] = { "status", "caseId", "sweepId", "from", "to" };
	int i;

	for (i = 0; i < 5; i++)
		s[i] = tg_http_query(r->req, names[i]);
	q->status = s[0];
	q->case_id = s[1];
	q->sweep_id = s[2];
	for (i = 3; i < 5; i++)
		if (s[i] != NULL && tg_clock_parse_iso(s[i], i == 3 ? &q->from_ms :
		    &q->to_ms) != 0) {
			snprintf(why, n, "%s: not an ISO 8601 timestamp", names[i]);
			return -1;
		}
	return runs_api_paging(r, &q->limit, &q->offset, why, n);
}

static void
on_list(const struct tg_state_res *res, const struct tg_run *runs, size_t n, int more,
    void *arg)
{
	struct gw_req *r = arg;
	struct runs_req *q = runs_req_of(r);
	struct tg_runs_query page = { .limit = q->limit, .offset = q->offset };
	yajl_gen g;

	q->op = NULL;
	if (res->rc != 0) {
		runs_reply_state(r, res, 400, "BAD_REQUEST", res->err.msg);
		return;
	}
	g = tg_json_gen_new();
	tg_runs_page_json(g, runs, n, &page, more);
	gw_req_reply_json(r, 200, g);
	yajl_gen_free(g);
}

static void
list_runs(struct gw_req *r)
{
	struct tg_runs_query q;
	char *s[5], why[128];
	int i;

	memset(&q, 0, sizeof(q));
	if (parse_query(r, &q, s, why, sizeof(why)) != 0) {
		gw_req_reply_error(r, 400, "BAD_REQUEST", why);
		goto done;
	}
	q.api_key = r->key->name;
	runs_req_of(r)->limit = q.limit;
	runs_req_of(r)->offset = q.offset;
	/* q's strings are s[], freed below: the call copies what it keeps */
	runs_req_wait(r, tg_state_runs_list(r->gw->state, &q, on_list, r));
done:
	for (i = 0; i < 5; i++)
		free(s[i]);
}

static void
on_run(const struct tg_state_res *res, const struct tg_run *runs, size_t n, int more,
    void *arg)
{
	struct gw_req *r = arg;
	yajl_gen g;

	runs_req_of(r)->op = NULL;
	if (res->rc != 0 && res->rc != TG_STATE_NOT_FOUND) {
		runs_reply_state(r, res, 503, "REGISTRY_UNAVAILABLE", "the run registry failed");
	} else if (res->rc != 0 || n == 0 || runs[0].api_key == NULL ||
	    strcmp(runs[0].api_key, r->key->name) != 0) {
		gw_req_reply_error(r, 404, "NOT_FOUND", "no such run");
	} else {
		g = tg_json_gen_new();
		tg_run_json(g, &runs[0]);
		gw_req_reply_json(r, 200, g);
		yajl_gen_free(g);
	}
}

static void
get_run(struct gw_req *r, const char *id)
{
	runs_req_wait(r, tg_state_runs_get(r->gw->state, id, on_run, r));
}

void
runs_api(struct gw_req *r)
{
	const char *p = r->path;
	size_t n = strlen(RUNS_PATH);

	if (r->key == NULL) {
		gw_req_reply_error(r, 401, "UNAUTHORIZED", "a gateway API key is required");
		return;
	}
	if (r->gw->state != NULL && strncmp(p, SWEEPS_PATH, strlen(SWEEPS_PATH)) == 0 &&
	    (p[strlen(SWEEPS_PATH)] == '\0' || p[strlen(SWEEPS_PATH)] == '/')) {
		runs_sweeps_api(r, p + strlen(SWEEPS_PATH));
		return;
	}
	if (r->gw->state == NULL || strncmp(p, RUNS_PATH, n) != 0 ||
	    (p[n] != '\0' && (p[n] != '/' || p[n + 1] == '\0' || strchr(p + n + 1, '/')))) {
		gw_req_reply_error(r, 404, "NOT_FOUND", "no such endpoint");
		return;
	}
	if (evhttp_request_get_command(r->req) != EVHTTP_REQ_GET) {
		gw_req_reply_405(r, "GET");
		return;
	}
	if (p[n] == '\0')
		list_runs(r);
	else
		get_run(r, p + n + 1);
}
