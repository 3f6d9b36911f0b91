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
 * gateway was down) or resumed; a timer retries waiting ones. In a fleet
 * the claims in the state make each variant go once whichever instance
 * asks; the resume of every sweep is the runs leader's (runs_lead), the
 * others retrying only the sweeps they hold back themselves.
 * SIGTERM starts no new submission and lets those in flight finish.
 * The registry answers through the state seam: a submission ends once its
 * outcome is recorded; claims, the running list and their callbacks are
 * cancelled when the sweeper is freed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
#define RESUME_MS	60000	/* a fleet's leader (maybe new) resumes sweeps this often */
#define WAIT_MAX_MS	300000

struct sub {				/* one submission in flight */
	struct runs_sweeper *sw;
	char *sweep_id;
	struct tg_sweep_claim c;
	struct gw_vcall *call;
	struct tg_state_op *op;		/* its outcome being recorded */
	int final;			/* unclaimed: rejected for good */
	int64_t retry_after_ms;		/* unclaimed: the vendor's wait */
	char *why;			/* unclaimed: why (owned) */
	int in_progress;		/* accepted: the run is in progress */
	char *sim_id;			/* accepted: its run (owned) */
	struct evbuffer *body;		/* borrowed by the call until it answers */
	LIST_ENTRY(sub) link;
};

struct hold {				/* a sweep waiting after a failed submission */
	int64_t until;			/* wall-clock ms */
	int fails;
	char why[256];			/* the last failure, for a claim given back */
};

struct claim {				/* a claim being asked for */
	struct runs_sweeper *sw;
	char *sweep_id;
	struct tg_state_op *op;
	LIST_ENTRY(claim) link;
};

struct runs_sweeper {
	struct gw *gw;
	struct event *timer;
	struct tg_map *holds;		/* sweep id -> struct hold */
	LIST_HEAD(, sub) subs;
	size_t nsubs;
	LIST_HEAD(, claim) claims;
	struct tg_state_op *op;		/* the lead asked, then the running sweeps listed */
	int leads;			/* this instance resumes every sweep (runs_lead) */
	int fleet;			/* the state is shared: look again every RESUME_MS */
	int64_t due;			/* the timer's expiry (monotonic ms) while pending */
};

static void submit(struct runs_sweeper *sw, const char *id);

static void
arm(struct runs_sweeper *sw, int64_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
	int64_t at = tg_clock_mono_ms() + ms;

	if (evtimer_pending(sw->timer, NULL) && sw->due <= at)
		return;		/* sooner already */
	sw->due = at;
	evtimer_add(sw->timer, &tv);
}

static void
sub_free(struct sub *s)
{
	struct runs_sweeper *sw = s->sw;

	LIST_REMOVE(s, link);
	sw->nsubs--;
	gw_vcall_cancel(s->call);
	tg_state_cancel(s->op);
	if (s->body != NULL)
		evbuffer_free(s->body);
	tg_sweep_claim_cleanup(&s->c);
	free(s->sim_id);
	free(s->sweep_id);
	free(s->why);
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

/* Whether sweep id waits after a failed submission. */
static struct hold *
held(const struct runs_sweeper *sw, const char *id)
{
	struct hold *h = tg_map_get(sw->holds, id);

	return h != NULL && h->until > tg_clock_now_ms() ? h : NULL;
}

static void
hold(struct runs_sweeper *sw, const char *id, int64_t retry_after_ms, const char *why)
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
	snprintf(h->why, sizeof(h->why), "%s", why != NULL ? why : "");
	arm(sw, WAIT_MIN_MS);
}

static void
on_unclaimed(const struct tg_state_res *res, void *arg)
{
	struct sub *s = arg;

	s->op = NULL;
	if (res->rc != 0)
		tg_log(TG_LOG_ERROR, "sweep_unclaim_failed", TG_LS("sweepId", s->sweep_id),
		    TG_LS("error", res->err.msg));
	if (s->final)
		runs_sweep_settle(s->sw->gw, s->sweep_id, 0);
	else
		hold(s->sw, s->sweep_id, s->retry_after_ms, s->why);
	sub_end(s);
}

/* The submission failed: the variant goes back (or is rejected), then s ends. */
static void
unclaim(struct sub *s, const char *why, int final, int64_t retry_after_ms)
{
	struct tg_state_op *op;

	tg_log(final ? TG_LOG_INFO : TG_LOG_WARN, final ? "sweep_variant_rejected" :
	    "sweep_submit_failed", TG_LS("sweepId", s->sweep_id), TG_LS("variant", s->c.name),
	    TG_LS("error", why));
	tg_metrics_inc(s->sw->gw->metrics, "tidegate_sweep_submissions_total",
	    final ? "result=\"rejected\"" : "result=\"failed\"", 1);
	s->final = final;
	s->retry_after_ms = retry_after_ms;
	s->why = tg_xstrdup(why);
	op = tg_state_sweep_unclaim(s->sw->gw->state, s->sweep_id, s->c.name, why, final,
	    tg_clock_now_ms(), on_unclaimed, s);
	if (op != NULL)
		s->op = op;
}

static int64_t
iso_member(yajl_val v, const char *name)
{
	const char *s = tg_json_get_str(v, name);
	int64_t ms;

	return s != NULL && tg_clock_parse_iso(s, &ms) == 0 ? ms : 0;
}

static void
on_submitted(const struct tg_state_res *res, void *arg)
{
	struct sub *s = arg;
	struct gw *gw = s->sw->gw;

	s->op = NULL;
	if (res->rc != 0) {
		tg_log(TG_LOG_ERROR, "sweep_record_failed", TG_LS("sweepId", s->sweep_id),
		    TG_LS("variant", s->c.name), TG_LS("simulationId", s->sim_id),
		    TG_LS("error", res->err.msg));
		sub_end(s);
		return;
	}
	tg_map_del(s->sw->holds, s->sweep_id);
	tg_metrics_inc(gw->metrics, "tidegate_sweep_submissions_total", "result=\"accepted\"",
	    1);
	tg_log(TG_LOG_INFO, "sweep_variant_submitted", TG_LS("sweepId", s->sweep_id),
	    TG_LS("variant", s->c.name), TG_LS("simulationId", s->sim_id));
	runs_tracker_kick(RUNS(gw)->tracker);
	if (!s->in_progress)
		runs_sweep_settle(gw, s->sweep_id, 0);
	sub_end(s);
}

/* The vendor accepted the case: record the run, then s ends. */
static void
accepted(struct sub *s, yajl_val ans, const char *origin)
{
	struct tg_state_op *op;
	struct tg_run_new n;
	const char *st;

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
	s->in_progress = n.status == TG_RUN_IN_PROGRESS;
	s->sim_id = tg_xstrdup(n.simulation_id);
	op = tg_state_sweep_submitted(s->sw->gw->state, s->sweep_id, s->c.name, &n,
	    tg_clock_now_ms(), on_submitted, s);
	if (op != NULL)
		s->op = op;
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

/* A 401 here came after the call's one replay with a fresh token. The
 * outcome is recorded next; s ends in its callback. */
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
	} else if (uerr != TG_UP_OK && res->u != NULL && tg_up_req_held_ms(res->u) > 0) {
		/* not sent: the vendor's pause (its Retry-After) holds the sweep too */
		snprintf(why, sizeof(why), "not sent: %s", tg_up_req_detail(res->u));
		unclaim(s, why, 0, tg_up_req_held_ms(res->u));
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

static void
claim_free(struct claim *k)
{
	LIST_REMOVE(k, link);
	tg_state_cancel(k->op);
	free(k->sweep_id);
	free(k);
}

static void ask_claim(struct claim *k);

static void
on_given_back(const struct tg_state_res *res, void *arg)
{
	struct claim *k = arg;

	k->op = NULL;
	if (res->rc != 0)
		tg_log(TG_LOG_ERROR, "sweep_unclaim_failed", TG_LS("sweepId", k->sweep_id),
		    TG_LS("error", res->err.msg));
	claim_free(k);
}

/* A claim that came back while its sweep waits (a submission failed
 * after it was asked for): pending again, with that failure's reason,
 * unsent; k asks for no more. Ends k. */
static void
give_back(struct claim *k, const struct tg_sweep_claim *c, const struct hold *h)
{
	struct tg_state_op *op = tg_state_sweep_unclaim(k->sw->gw->state, k->sweep_id, c->name,
	    h->why, 0, tg_clock_now_ms(), on_given_back, k);

	if (op != NULL)
		k->op = op;
}

/* A claim (borrowed; copied) starts its submission and the next is asked
 * for; none (or a failure) ends k, and so does a claim its sweep's wait
 * gives back. */
static void
on_claim(const struct tg_state_res *res, const struct tg_sweep_claim *c, void *arg)
{
	struct claim *k = arg;
	struct tg_sweep_claim own;
	struct hold *h;

	k->op = NULL;
	if (res->rc != 0 && res->rc != TG_STATE_NOT_FOUND)
		tg_log(TG_LOG_ERROR, "sweep_claim_failed", TG_LS("sweepId", k->sweep_id),
		    TG_LS("error", res->err.msg));
	if (res->rc != 0 || c == NULL || k->sw->gw->draining) {
		claim_free(k);
		return;
	}
	if ((h = held(k->sw, k->sweep_id)) != NULL) {
		give_back(k, c, h);
		return;
	}
	memset(&own, 0, sizeof(own));
	own.name = tg_xstrdup(c->name);
	own.body = tg_xmalloc(c->len > 0 ? c->len : 1);
	memcpy(own.body, c->body, c->len);
	own.len = c->len;
	memcpy(own.case_sha256, c->case_sha256, sizeof(own.case_sha256));
	own.api_key = c->api_key != NULL ? tg_xstrdup(c->api_key) : NULL;
	start(k->sw, k->sweep_id, &own);
	ask_claim(k);
}

static void
ask_claim(struct claim *k)
{
	struct tg_state_op *op = tg_state_sweep_claim(k->sw->gw->state, k->sweep_id,
	    tg_clock_now_ms(), on_claim, k);

	if (op != NULL)
		k->op = op;
}

/* Claim and start what sweep id may submit now, one claim after another. */
static void
submit(struct runs_sweeper *sw, const char *id)
{
	struct claim *k;

	if (sw->gw->draining || sw->gw->state == NULL)
		return;
	if (held(sw, id) != NULL)
		return;			/* the timer comes back for it */
	k = tg_xcalloc(1, sizeof(*k));
	k->sw = sw;
	k->sweep_id = tg_xstrdup(id);
	LIST_INSERT_HEAD(&sw->claims, k, link);
	ask_claim(k);
}

/* Every running sweep: resume after a start, retry those that waited.
 * Holds of sweeps no longer running are dropped. */
static void
on_running(const struct tg_state_res *res, const char *const *ids, size_t n, void *arg)
{
	struct runs_sweeper *sw = arg;
	struct tg_map *kept = tg_map_new(free);
	struct hold *h;
	size_t i;

	sw->op = NULL;
	if (res->rc != 0) {
		tg_log(TG_LOG_ERROR, "sweep_list_failed", TG_LS("error", res->err.msg));
		n = 0;
	}
	for (i = 0; i < n; i++)
		if ((h = tg_map_take(sw->holds, ids[i])) != NULL)
			tg_map_put(kept, ids[i], h);
	tg_map_free(sw->holds);
	sw->holds = kept;
	for (i = 0; i < n; i++)
		if (sw->leads || tg_map_get(sw->holds, ids[i]) != NULL)
			runs_sweeper_run_ended(sw, ids[i]);	/* settle, or submit */
	if (tg_map_count(sw->holds) > 0)
		arm(sw, WAIT_MIN_MS);
	else if (sw->fleet)
		arm(sw, RESUME_MS);
}

static void
on_led(const struct tg_state_res *res, int64_t n, void *arg)
{
	struct runs_sweeper *sw = arg;
	struct tg_state_op *op;

	sw->op = NULL;
	sw->leads = res->rc != TG_STATE_OK || n == 1;
	if ((op = tg_state_sweep_running(sw->gw->state, on_running, sw)) != NULL)
		sw->op = op;
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct runs_sweeper *sw = arg;
	struct tg_state_op *op;

	(void)fd;
	(void)what;
	if (sw->op != NULL || sw->gw->state == NULL)
		return;			/* the list under way re-arms */
	if ((op = runs_lead(sw->gw, on_led, sw)) != NULL)
		sw->op = op;
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
	if (sw != NULL)
		runs_sweep_settle(sw->gw, id, 1);	/* not done: submit into the free slot */
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
	LIST_INIT(&sw->claims);
	if (gw->state != NULL) {
		struct tg_state_health h;

		tg_state_health(gw->state, &h);
		sw->fleet = h.shared;
	}
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
	while (!LIST_EMPTY(&sw->claims))
		claim_free(LIST_FIRST(&sw->claims));
	tg_state_cancel(sw->op);
	event_free(sw->timer);
	tg_map_free(sw->holds);
	free(sw);
}

/* ---- a sweep whose every variant has ended ---- */

static void
on_done_variants(const struct tg_state_res *res, const struct tg_sweep_variant *v, size_t n,
    void *arg)
{
	struct runs_bg *b = arg;

	b->op = NULL;
	if (res->rc != 0) {
		tg_log(TG_LOG_ERROR, "sweep_read_failed", TG_LS("sweepId", b->id),
		    TG_LS("error", res->err.msg));
		runs_bg_free(b);
		return;
	}
	tg_log(TG_LOG_INFO, "sweep_done", TG_LS("sweepId", b->id), TG_LI("variants", n));
	if (b->sweep.callback_url == NULL || runs_hook_sweep(b, v, n) != 0)
		runs_bg_free(b);
}

static void
on_done_sweep(const struct tg_state_res *res, const struct tg_sweep *s, size_t n, int more,
    void *arg)
{
	struct runs_bg *b = arg;

	b->op = NULL;
	if (res->rc != 0 || n == 0) {
		tg_log(TG_LOG_ERROR, "sweep_read_failed", TG_LS("sweepId", b->id),
		    TG_LS("error", res->rc != 0 ? res->err.msg : "no such sweep"));
		runs_bg_free(b);
		return;
	}
	runs_sweep_copy(&b->sweep, &s[0]);
	runs_bg_wait(b, tg_state_sweep_variants(b->gw->state, b->id, on_done_variants, b));
}

static void
on_settled(const struct tg_state_res *res, int64_t done, void *arg)
{
	struct runs_bg *b = arg;
	struct gw *gw = b->gw;
	int submit;
	char *id;

	b->op = NULL;
	if (res->rc != 0)
		tg_log(TG_LOG_ERROR, "sweep_settle_failed", TG_LS("sweepId", b->id),
		    TG_LS("error", res->err.msg));
	if (res->rc == 0 && done == 1) {
		tg_metrics_inc(gw->metrics, "tidegate_sweeps_done_total", "", 1);
		runs_bg_wait(b, tg_state_sweep_get(gw->state, b->id, on_done_sweep, b));
		return;
	}
	submit = res->rc == 0 && b->then_submit;
	id = b->id;
	b->id = NULL;
	runs_bg_free(b);
	if (submit)
		runs_sweeper_kick(RUNS(gw)->sweeper, id);	/* a slot came free */
	free(id);
}

void
runs_sweep_settle(struct gw *gw, const char *id, int then_submit)
{
	struct runs_bg *b;

	if (gw->state == NULL)
		return;
	b = runs_bg_new(gw, id);
	b->then_submit = then_submit;
	runs_bg_wait(b, tg_state_sweep_settle(gw->state, id, tg_clock_now_ms(), on_settled, b));
}

