/*
 * uncertain.c - a simulation submission that was sent and got no answer
 * (a reset, a timeout, a malformed answer: the vendor may or may not have
 * made the run). It is never sent again (upstream.h: a POST fails over only
 * when nothing was sent). Instead, after RECONCILE_DELAY_MS, the vendor's
 * run list of the submitted case is read (GET simulation_list?caseId=, an
 * idempotent call that may use either host) and the caller's 502 says what
 * it shows: no run of the case submitted since this submission (it was not
 * made: submit again), or the runs that were (one may be this one: check
 * them; their ids also in X-Tidegate-Run-Candidates), or that the list
 * could not be read. The vendor's list cannot tell whose a run is (another
 * caller may have submitted the same case meanwhile), so no candidate is
 * recorded as this caller's run; those the registry records for another
 * key are not named (keyed.c: runs are per key). docs/simulations.md.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "tidegate/clock.h"
#include "tidegate/json.h"
#include "tidegate/log.h"
#include "runs_int.h"

#define RECONCILE_DELAY_MS	1000	/* a run being made when the answer was lost */
#define SKEW_MS			5000	/* the vendor's clock against ours */
#define LIST_MAX_BODY		(4 * 1024 * 1024)

static const char *
err_words(enum tg_up_error err)
{
	return err == TG_UP_TIMEOUT ? "no answer came in time" :
	    err == TG_UP_PROTOCOL ? "its answer was malformed" : "the connection was reset";
}

/* The ids of the runs in list (a JSON array of run records) submitted at
 * or after since (wall ms) into ids (borrowed from list; room for every
 * run). Returns their number, or -1 when list is not a run list. */
static int
candidates(yajl_val list, int64_t since, const char **ids)
{
	const char *id, *at;
	int64_t t;
	size_t i;
	int n = 0;

	if (!YAJL_IS_ARRAY(list))
		return -1;
	for (i = 0; i < list->u.array.len; i++) {
		id = tg_json_get_str(list->u.array.values[i], "simulationId");
		at = tg_json_get_str(list->u.array.values[i], "submittedAt");
		if (id == NULL || at == NULL || tg_clock_parse_iso(at, &t) != 0 || t < since)
			continue;
		ids[n++] = id;
	}
	return n;
}

static void
answer(struct gw_req *r, const char *what, int n, struct evbuffer *ids)
{
	struct runs_req *q = runs_req_of(r);
	char msg[1024];
	size_t len = evbuffer_get_length(ids);

	if (n > 0)
		evhttp_add_header(evhttp_request_get_output_headers(r->req),
		    "X-Tidegate-Run-Candidates", (const char *)evbuffer_pullup(ids, -1));
	if (n == 0)
		snprintf(msg, sizeof(msg), "the sim vendor API got the submission but %s; its run "
		    "list shows no run of case %s submitted since: the run was not made, "
		    "submit again", q->uncertain_why, q->case_id);
	else if (n > 0)
		snprintf(msg, sizeof(msg), "the sim vendor API got the submission but %s; its run "
		    "list shows %d run(s) of case %s submitted since (%.*s): one may be this "
		    "submission's, check them before submitting again", q->uncertain_why, n,
		    q->case_id, (int)(len > 600 ? 600 : len), evbuffer_pullup(ids, -1));
	else
		snprintf(msg, sizeof(msg), "the sim vendor API got the submission but %s: the run "
		    "may exist; its run list could not be read (%s): list the case's runs before "
		    "submitting again", q->uncertain_why, what);
	tg_log(TG_LOG_WARN, "run_submission_uncertain", TG_LS("id", r->id),
	    TG_LS("caseId", q->case_id), TG_LI("candidates", n < 0 ? -1 : n),
	    TG_LS("key", r->key ? r->key->name : NULL));
	gw_req_reply_error(r, 502, "UPSTREAM_ERROR", msg);
}

/* The candidates' records: those of another key are not r's, nor named. */
static void
on_keys(const struct tg_state_res *res, const struct tg_run *runs, size_t nruns, int more,
    void *arg)
{
	struct gw_req *r = arg;
	struct runs_req *q = runs_req_of(r);
	struct evbuffer *ids = evbuffer_new();
	yajl_val list = q->list;
	const char **c = tg_xcalloc(list->u.array.len + 1, sizeof(*c));
	int i, n = candidates(list, q->uncertain_since, c), kept = 0;
	size_t k;

	q->op = NULL;
	q->list = NULL;
	for (i = 0; i < n; i++) {
		for (k = 0; k < nruns && strcmp(runs[k].simulation_id, c[i]) != 0; k++)
			;
		if (res->rc != TG_STATE_OK || (k < nruns && !runs_visible(r, 1, runs[k].api_key)))
			continue;	/* not told apart: not named */
		evbuffer_add_printf(ids, "%s%s", kept++ ? "," : "", c[i]);
	}
	answer(r, res->rc == TG_STATE_OK ? "status 200" : "the run registry failed",
	    res->rc == TG_STATE_OK ? kept : -1, ids);
	evbuffer_free(ids);
	free(c);
	yajl_tree_free(list);
}

static void
on_list(struct gw_vcall *c, const struct gw_vfetch *res, void *arg)
{
	struct gw_req *r = arg;
	struct runs_req *q = runs_req_of(r);
	struct evbuffer *none = evbuffer_new();
	const char **ids;
	yajl_val v = NULL;
	char what[64];
	int n = -1;

	q->call = NULL;
	if (res->err == TG_UP_OK && res->status == 200 && res->body != NULL)
		v = tg_json_parse((const char *)evbuffer_pullup(res->body, -1),
		    evbuffer_get_length(res->body), NULL);
	if (YAJL_IS_ARRAY(v) && r->gw->state != NULL) {
		ids = tg_xcalloc(v->u.array.len + 1, sizeof(*ids));
		n = candidates(v, q->uncertain_since, ids);
		q->list = v;	/* read again by on_keys */
		runs_req_wait(r, tg_state_runs_get_many(r->gw->state, ids, (size_t)n, on_keys,
		    r));
		free(ids);
		evbuffer_free(none);
		return;
	}
	if (res->err != TG_UP_OK)
		snprintf(what, sizeof(what), "%s", tg_up_error_str(res->err));
	else
		snprintf(what, sizeof(what), "status %d", res->status);
	yajl_tree_free(v);
	answer(r, what, n, none);
	evbuffer_free(none);
}

static void
on_delay(evutil_socket_t fd, short what, void *arg)
{
	struct gw_req *r = arg;
	const struct gw_service *s = &r->rt->svc[GW_SIM];
	char *enc = evhttp_uriencode(runs_req_of(r)->case_id, -1, 0), *path, *uri;
	struct tg_route_match m;
	struct gw_vcall_req q;

	memset(&m, 0, sizeof(m));
	path = tg_route_expand(s->cfg->routes[TG_OP_SIM_LIST], &m);
	uri = tg_xasprintf("%s%s?caseId=%s", tg_upstream_base_path(s->api), path ? path : "/",
	    enc);
	memset(&q, 0, sizeof(q));
	q.rt = r->rt;
	q.service = GW_SIM;
	q.method = EVHTTP_REQ_GET;
	q.uri = uri;
	runs_req_of(r)->call = gw_vcall_fetch(&q, LIST_MAX_BODY, NULL, on_list, r);
	free(uri);
	free(path);
	free(enc);
}

int
runs_uncertain(struct gw_req *r, enum tg_up_error err)
{
	struct runs_req *q;
	struct timeval tv = { RECONCILE_DELAY_MS / 1000, (RECONCILE_DELAY_MS % 1000) * 1000 };

	if (r->op != TG_OP_SIM_SUBMIT || r->started ||
	    (err != TG_UP_RESET && err != TG_UP_TIMEOUT && err != TG_UP_PROTOCOL))
		return 0;
	q = runs_req_of(r);
	if (q->case_id == NULL)
		return 0;	/* not checked: no case to look for */
	q->uncertain_why = err_words(err);
	q->uncertain_since = tg_clock_now_ms() - (tg_clock_mono_ms() - r->t0) - SKEW_MS;
	q->timer = evtimer_new(r->gw->base, on_delay, r);
	evtimer_add(q->timer, &tv);
	return 1;
}
