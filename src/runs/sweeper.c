/*
 * sweeper.c - submits the variants of running sweeps. The registry decides
 * what may go (tg_runs_sweep_claim: request order, at most the sweep's
 * concurrency submitting or in progress); each claim is a POST of the
 * patched case to the vendor's submission route with the gateway's token.
 *   - 2xx with a simulationId: the variant becomes a tracked run (its
 *     status checks are tracker.c's); the sweep is kicked again when one
 *     of its runs ends (runs_sweeper_run_ended).
 *   - 4xx other than 401/408/429: the vendor refused the case; the variant
 *     is rejected for good.
 *   - no answer, 5xx, 401, 408, 429: no verdict; the variant is pending
 *     again and its sweep waits (2 s doubling to 5 min, or Retry-After)
 *     before the next claim.
 * At start every running sweep is settled (its runs may have ended while the
 * gateway was down) or resumed; a timer retries waiting ones.
 * SIGTERM starts no new submission and lets those in flight finish.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/clock.h"
#include "tidegate/http.h"
#include "tidegate/json.h"
#include "tidegate/log.h"
#include "tidegate/map.h"
#include "tidegate/registry.h"
#include "runs_int.h"

#define ANSWER_MAX_BODY	(1024 * 1024)
#define WAIT_MIN_MS	2000
#define WAIT_MAX_MS	300000

struct sub {				/* one submission in flight */
	struct runs_sweeper *sw;
	char *sweep_id;
	struct tg_sweep_claim c;
	struct gw_vcall *call;
	struct evbuffer *body;		/* borrowed by the call until it answers */
	LIST_ENTRY(sub) link;
};

struct hold {				/* a sweep waiting after a failed submission */
	int64_t until;			/* wall-clock ms */
	int fails;
};

struct runs_sweeper {
	struct gw *gw;
	struct event *timer;
	struct tg_map *holds;		/* sweep id -> struct hold */
	LIST_HEAD(, sub) subs;
	size_t nsubs;
};

static void submit(struct runs_sweeper *sw, const char *id);

static void
arm(struct runs_sweeper *sw, int64_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };

	if (!evtimer_pending(sw->timer, NULL))
		evtimer_add(sw->timer, &tv);
}

static void
sub_free(struct sub *s)
{
	struct runs_sweeper *sw = s->sw;

	LIST_REMOVE(s, link);
	sw->nsubs--;
	gw_vcall_cancel(s->call);
	if (s->body != NULL)
		evbuffer_free(s->body);
	tg_sweep_claim_cleanup(&s->c);
	free(s->sweep_id);
	free(s);
}

/* The submission is over: free it and go on with its sweep. */
static void
sub_end(struct sub *s)
{
	struct runs_sweeper *sw = s->sw;
	char *id = s->sweep_id;

	s->sweep_id = NULL;
	sub_free(s);
	if (sw->gw->draining)
		gw_maybe_exit(sw->gw);
	else
		submit(sw, id);
	free(id);
}

static void
hold(struct runs_sweeper *sw, const char *id, int64_t retry_after_ms)
{
	struct hold *h = tg_map_get(sw->holds, id);
	int64_t wait;

	if (h == NULL) {
		h = tg_xcalloc(1, sizeof(*h));
		tg_map_put(sw->holds, id, h);
	}
	wait = h->fails >= 8 ? WAIT_MAX_MS : (int64_t)WAIT_MIN_MS << h->fails;
	if (wait > WAIT_MAX_MS)
		wait = WAIT_MAX_MS;
	if (retry_after_ms > wait)
		wait = retry_after_ms;
	h->fails++;
	h->until = tg_clock_now_ms() + wait;
	arm(sw, WAIT_MIN_MS);
}

static void
unclaim(struct sub *s, const char *why, int final, int64_t retry_after_ms)
{
	struct tg_err err;

	tg_log(final ? TG_LOG_INFO : TG_LOG_WARN, final ? "sweep_variant_rejected" :
	    "sweep_submit_failed", TG_LS("sweepId", s->sweep_id), TG_LS("variant", s->c.name),
	    TG_LS("error", why));
	if (tg_runs_sweep_unclaim(RUNS(s->sw->gw)->reg, s->sweep_id, s->c.name, why, final,
	    tg_clock_now_ms(), &err) != 0)
		tg_log(TG_LOG_ERROR, "sweep_unclaim_failed", TG_LS("sweepId", s->sweep_id),
		    TG_LS("error", err.msg));
	tg_metrics_inc(s->sw->gw->metrics, "tidegate_sweep_submissions_total",
	    final ? "result=\"rejected\"" : "result=\"failed\"", 1);
	if (final)
		(void)runs_sweep_settle(s->sw->gw, s->sweep_id);
	else
		hold(s->sw, s->sweep_id, retry_after_ms);
}

static int64_t
iso_member(yajl_val v, const char *name)
{
	const char *s = tg_json_get_str(v, name);
	int64_t ms;

	return s != NULL && tg_clock_parse_iso(s, &ms) == 0 ? ms : 0;
}

/* The vendor accepted the case: record the run. */
static void
accepted(struct sub *s, yajl_val ans, const char *origin)
{
	struct gw *gw = s->sw->gw;
	struct tg_run_new n;
	struct tg_err err;
	const char *st;
	int rc;

	memset(&n, 0, sizeof(n));
	n.simulation_id = tg_json_get_str(ans, "simulationId");
	if (n.simulation_id == NULL || *n.simulation_id == '\0') {
		unclaim(s, "the vendor's answer carried no simulationId", 0, -1);
		return;
	}
	n.api_key = s->c.api_key;
	n.host = origin != NULL ? origin : "primary";
	n.case_id = tg_json_get_str(ans, "caseId");
	n.case_sha256 = s->c.case_sha256;
	n.submitted_at = iso_member(ans, "submittedAt");
	n.expires_at = iso_member(ans, "expiresAt");
	st = tg_json_get_str(ans, "status");
	n.status = st != NULL && tg_runs_status_parse(st) >= 0 ?
	    (enum tg_run_status)tg_runs_status_parse(st) : TG_RUN_IN_PROGRESS;
	n.validation = "passed (sweep variant: patch and case checked against the base case)";
	rc = tg_runs_sweep_submitted(RUNS(gw)->reg, s->sweep_id, s->c.name, &n, tg_clock_now_ms(),
	    &err);
	if (rc != 0) {
		tg_log(TG_LOG_ERROR, "sweep_record_failed", TG_LS("sweepId", s->sweep_id),
		    TG_LS("variant", s->c.name), TG_LS("simulationId", n.simulation_id),
		    TG_LS("error", err.msg));
		return;
	}
	tg_map_del(s->sw->holds, s->sweep_id);
	tg_metrics_inc(gw->metrics, "tidegate_sweep_submissions_total", "result=\"accepted\"",
	    1);
	tg_log(TG_LOG_INFO, "sweep_variant_submitted", TG_LS("sweepId", s->sweep_id),
	    TG_LS("variant", s->c.name), TG_LS("simulationId", n.simulation_id));
	runs_tracker_kick(RUNS(gw)->tracker);
	if (n.status != TG_RUN_IN_PROGRESS)
		(void)runs_sweep_settle(gw, s->sweep_id);
}

/* The vendor's message of a refusal, for the variant's error. */
static void
refusal(int status, struct evbuffer *body, char *out, size_t n)
{
	yajl_val v = tg_json_parse((const char *)evbuffer_pullup(body, -1),
	    evbuffer_get_length(body), NULL);
	const char *m = tg_json_get_str(v, "message");

	snprintf(out, n, "the vendor refused the case: HTTP %d%s%.300s", status,
	    m != NULL ? ": " : "", m != NULL ? m : "");
	yajl_tree_free(v);
}

/* A 401 here came after the call's one replay with a fresh token. */
static void
on_answer(struct gw_vcall *c, const struct gw_vfetch *res, void *arg)
{
	struct sub *s = arg;
	int status = res->status;
	const char *origin = status > 0 && res->u != NULL ? tg_up_req_origin(res->u) : NULL;
	struct evbuffer *body = res->body;
	enum tg_up_error uerr = res->err;
	char why[400];
	yajl_val ans;

	s->call = NULL;		/* freed after this returns */
	if (res->token_why != NULL) {
		snprintf(why, sizeof(why), "no vendor token: %s", res->token_why);
		unclaim(s, why, 0, res->retry_after > 0 ? (int64_t)res->retry_after * 1000 : -1);
	} else if (uerr != TG_UP_OK) {
		snprintf(why, sizeof(why), "no answer from the vendor: %s", tg_up_error_str(uerr));
		unclaim(s, why, 0, -1);
	} else if (status == 401 || status == 408 || status == 429 || status >= 500) {
		snprintf(why, sizeof(why), "the vendor answered HTTP %d", status);
		unclaim(s, why, 0, tg_http_retry_after_ms(res->headers));
	} else if (status >= 400) {
		refusal(status, body, why, sizeof(why));
		unclaim(s, why, 1, -1);
	} else if (status < 200 || status > 299 || (ans = tg_json_parse((const char *)
	    evbuffer_pullup(body, -1), evbuffer_get_length(body), NULL)) == NULL) {
		snprintf(why, sizeof(why), "the vendor's answer (HTTP %d) could not be read",
		    status);
		unclaim(s, why, 0, -1);
	} else {
		accepted(s, ans, origin);
		yajl_tree_free(ans);
	}
	sub_end(s);
}

static void
case_headers(struct gw_vcall *c, struct evkeyvalq *h, void *arg)
{
	evhttp_add_header(h, "Accept", "application/json");
	evhttp_add_header(h, "Content-Type", "application/json");
}

/* Start the submission of claim c of sweep id (takes c): POST the
 * variant's case with the gateway's token. */
static void
start(struct runs_sweeper *sw, const char *id, struct tg_sweep_claim *c)
{
	struct sub *s = tg_xcalloc(1, sizeof(*s));
	const struct gw_service *svc = &sw->gw->rt->svc[GW_SIM];
	struct tg_route_match m;
	struct gw_vcall_req q;
	char *path, *uri;

	s->sw = sw;
	s->sweep_id = tg_xstrdup(id);
	s->c = *c;
	LIST_INSERT_HEAD(&sw->subs, s, link);
	sw->nsubs++;
	tg_log(TG_LOG_INFO, "sweep_variant_claimed", TG_LS("sweepId", id),
	    TG_LS("variant", c->name));
	memset(&m, 0, sizeof(m));
	path = tg_route_expand(svc->cfg->routes[TG_OP_SIM_SUBMIT], &m);
	uri = tg_xasprintf("%s%s", tg_upstream_base_path(svc->api), path ? path : "/");
	s->body = evbuffer_new();
	evbuffer_add_reference(s->body, s->c.body, s->c.len, NULL, NULL);
	memset(&q, 0, sizeof(q));
	q.rt = sw->gw->rt;
	q.service = GW_SIM;
	q.method = EVHTTP_REQ_POST;
	q.uri = uri;
	q.body = s->body;
	q.replay_max = SIZE_MAX;	/* a refused token: nothing was created */
	s->call = gw_vcall_fetch(&q, ANSWER_MAX_BODY, case_headers, on_answer, s);
	free(uri);
	free(path);
}

/* Claim and start what sweep id may submit now. */
static void
submit(struct runs_sweeper *sw, const char *id)
{
	struct hold *h = tg_map_get(sw->holds, id);
	struct tg_sweep_claim c;
	struct tg_err err;
	int rc;

	if (sw->gw->draining || RUNS(sw->gw)->reg == NULL)
		return;
	if (h != NULL && h->until > tg_clock_now_ms())
		return;			/* the timer comes back for it */
	for (;;) {
		memset(&c, 0, sizeof(c));
		rc = tg_runs_sweep_claim(RUNS(sw->gw)->reg, id, tg_clock_now_ms(), &c, &err);
		if (rc != 1)
			break;
		start(sw, id, &c);
	}
	if (rc == -1)
		tg_log(TG_LOG_ERROR, "sweep_claim_failed", TG_LS("sweepId", id),
		    TG_LS("error", err.msg));
}

/* Every running sweep: resume after a start, retry those that waited.
 * Holds of sweeps no longer running are dropped. */
static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct runs_sweeper *sw = arg;
	struct tg_map *kept = tg_map_new(free);
	struct tg_err err;
	char **ids = NULL;
	size_t n = 0, i;
	struct hold *h;

	(void)fd;
	(void)what;
	if (tg_runs_sweeps_running(RUNS(sw->gw)->reg, &ids, &n, &err) != 0) {
		tg_log(TG_LOG_ERROR, "sweep_list_failed", TG_LS("error", err.msg));
		n = 0;
	}
	for (i = 0; i < n; i++)
		if ((h = tg_map_take(sw->holds, ids[i])) != NULL)
			tg_map_put(kept, ids[i], h);
	tg_map_free(sw->holds);
	sw->holds = kept;
	for (i = 0; i < n; i++)
		runs_sweeper_run_ended(sw, ids[i]);	/* settle, or submit */
	tg_runs_ids_free(ids, n);
	if (tg_map_count(sw->holds) > 0)
		arm(sw, WAIT_MIN_MS);
}

void
runs_sweeper_kick(struct runs_sweeper *sw, const char *id)
{
	if (sw != NULL)
		submit(sw, id);
}

void
runs_sweeper_run_ended(struct runs_sweeper *sw, const char *id)
{
	if (sw == NULL || runs_sweep_settle(sw->gw, id) != 0)
		return;
	submit(sw, id);		/* a slot came free */
}

int
runs_sweeper_idle(const struct runs_sweeper *sw)
{
	return sw == NULL || sw->nsubs == 0;
}

struct runs_sweeper *
runs_sweeper_new(struct gw *gw)
{
	struct runs_sweeper *sw = tg_xcalloc(1, sizeof(*sw));

	sw->gw = gw;
	sw->timer = evtimer_new(gw->base, on_timer, sw);
	sw->holds = tg_map_new(free);
	LIST_INIT(&sw->subs);
	arm(sw, 0);		/* resume the sweeps a stopped process left running */
	return sw;
}

void
runs_sweeper_free(struct runs_sweeper *sw)
{
	if (sw == NULL)
		return;
	while (!LIST_EMPTY(&sw->subs))
		sub_free(LIST_FIRST(&sw->subs));
	event_free(sw->timer);
	tg_map_free(sw->holds);
	free(sw);
}
