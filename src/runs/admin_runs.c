/*
 * admin_runs.c - the run registry on the admin listener (JSON), across
 * every key, for operators and the console (the simulation listener's
 * runs API shows a key its own runs only):
 *
 *   GET /runs?status=&sweepId=&limit=&offset=   runs, newest first
 *   GET /runs/sweeps?state=&limit=&offset=       sweeps, newest first
 *   GET /runs/sweeps/{id}                        one sweep's summary
 *
 * The bodies are the runs API's (tg_runs_page_json, tg_sweep_brief_json,
 * tg_sweep_json). A key with the admin service is asked for when keys
 * are configured (gw_admin_authorized). Each request is held (gw_held)
 * on a struct runs_bg until the registry answers; the feature's stop
 * cancels those left.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>

#include "tidegate/http.h"
#include "tidegate/json.h"
#include "runs_int.h"

#define ADMIN_LIST_MAX	1000

/* limit (1…1000, default 100) and offset of req's query; -1: refused. */
static int
paging(struct gw *gw, struct evhttp_request *req, size_t *limit, size_t *offset)
{
	static const char *const names[2] = { "limit", "offset" };
	size_t *out[2] = { limit, offset };
	char *s, *e;
	unsigned long long v;
	int i, bad = 0;

	*limit = 100;
	*offset = 0;
	for (i = 0; i < 2 && !bad; i++) {
		if ((s = tg_http_query(req, names[i])) == NULL)
			continue;
		v = strtoull(s, &e, 10);
		bad = *s < '0' || *s > '9' || *e != '\0' || (i == 0 ? v < 1 ||
		    v > ADMIN_LIST_MAX : v > 1000000);
		*out[i] = (size_t)v;
		free(s);
	}
	if (bad)
		gw_admin_reply_error(gw, req, 400, "BAD_REQUEST",
		    "limit is 1…1000 and offset 0…1000000");
	return bad ? -1 : 0;
}

/* The request b holds, ended: NULL when its client went. */
static struct evhttp_request *
take(struct runs_bg *b)
{
	struct evhttp_request *req = gw_held_take(b->held);

	b->held = NULL;
	b->op = NULL;
	return req;
}

/* As the runs API answers: the state away 503 with Retry-After; a list's
 * filter the registry refused (an unknown status) 400; a summary that
 * failed 503 (b->id: the sweep of a summary). */
static void
reply(struct runs_bg *b, const struct tg_state_res *res, yajl_gen g)
{
	struct evhttp_request *req = take(b);

	if (req == NULL) {
		;	/* the client went */
	} else if (res->rc == TG_STATE_UNAVAILABLE || res->rc == TG_STATE_UNKNOWN) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After",
		    STATE_RETRY_AFTER);
		gw_admin_reply_error(b->gw, req, 503, "STATE_UNAVAILABLE", res->err.msg);
	} else if (res->rc == TG_STATE_NOT_FOUND) {
		gw_admin_reply_error(b->gw, req, 404, "NOT_FOUND", "no such sweep");
	} else if (res->rc != 0) {
		gw_admin_reply_error(b->gw, req, b->id != NULL ? 503 : 400, b->id != NULL ?
		    "REGISTRY_UNAVAILABLE" : "BAD_REQUEST", res->err.msg);
	} else {
		tg_reply_json(req, 200, g);
	}
	runs_bg_free(b);
}

static void
on_runs(const struct tg_state_res *res, const struct tg_run *runs, size_t n, int more,
    void *arg)
{
	struct runs_bg *b = arg;
	struct tg_runs_query page = { .limit = b->limit, .offset = b->offset };
	yajl_gen g = tg_json_gen_new();

	if (res->rc == 0)
		tg_runs_page_json(g, runs, n, &page, more);
	reply(b, res, g);
	yajl_gen_free(g);
}

static void
on_sweeps(const struct tg_state_res *res, const struct tg_sweep *s, size_t n, int more,
    void *arg)
{
	struct runs_bg *b = arg;
	yajl_gen g = tg_json_gen_new();

	if (res->rc == 0)
		runs_sweeps_page_json(g, s, n, b->limit, b->offset, more);
	reply(b, res, g);
	yajl_gen_free(g);
}

static void
on_variants(const struct tg_state_res *res, const struct tg_sweep_variant *v, size_t n,
    void *arg)
{
	struct runs_bg *b = arg;
	yajl_gen g = tg_json_gen_new();

	if (res->rc == 0)
		tg_sweep_json(g, &b->sweep, v, n);
	reply(b, res, g);
	yajl_gen_free(g);
}

static void
on_sweep(const struct tg_state_res *res, const struct tg_sweep *s, size_t n, int more,
    void *arg)
{
	struct runs_bg *b = arg;
	struct tg_state_res none = { .rc = TG_STATE_NOT_FOUND };

	(void)more;
	b->op = NULL;
	if (res->rc != 0 || n == 0) {
		reply(b, res->rc != 0 ? res : &none, NULL);
		return;
	}
	runs_sweep_copy(&b->sweep, &s[0]);
	runs_bg_wait(b, tg_state_sweep_variants(b->gw->state, s[0].id, on_variants, b));
}

/* The query's strings are borrowed by the state call, which copies them. */
static void
list_runs(struct runs_bg *b, struct evhttp_request *req)
{
	struct tg_runs_query q;
	char *status = tg_http_query(req, "status"), *sweep = tg_http_query(req, "sweepId");

	memset(&q, 0, sizeof(q));
	q.status = status;
	q.sweep_id = sweep;
	q.limit = b->limit;
	q.offset = b->offset;
	runs_bg_wait(b, tg_state_runs_list(b->gw->state, &q, on_runs, b));
	free(status);
	free(sweep);
}

static void
list_sweeps(struct runs_bg *b, struct evhttp_request *req)
{
	char *state = tg_http_query(req, "state");

	runs_bg_wait(b, tg_state_sweep_list(b->gw->state, NULL, state, b->limit, b->offset,
	    on_sweeps, b));
	free(state);
}

void
runs_admin(struct gw *gw, struct evhttp_request *req, const char *path)
{
	const char *sweep = strncmp(path, "/runs/sweeps/", 13) == 0 ? path + 13 : NULL;
	struct runs_bg *b;
	size_t limit, offset;

	if (!gw_admin_authorized(gw, req))
		return;
	if (evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Allow", "GET");
		gw_admin_reply_error(gw, req, 405, NULL, "only GET here");
		return;
	}
	if ((strcmp(path, "/runs") != 0 && strcmp(path, "/runs/sweeps") != 0 &&
	    (sweep == NULL || *sweep == '\0' || strchr(sweep, '/') != NULL))) {
		gw_admin_reply_error(gw, req, 404, "NOT_FOUND", "no such admin endpoint");
		return;
	}
	limit = offset = 0;
	if (sweep == NULL && paging(gw, req, &limit, &offset) != 0)
		return;
	b = runs_bg_new(gw, sweep);
	b->held = gw_held_new(req);
	b->limit = limit;
	b->offset = offset;
	if (sweep != NULL)
		runs_bg_wait(b, tg_state_sweep_get(gw->state, sweep, on_sweep, b));
	else if (strcmp(path, "/runs") == 0)
		list_runs(b, req);
	else
		list_sweeps(b, req);
}
