/*
 * tracker.c - the run tracker: checks the vendor status of in-progress
 * runs on the registry's schedule (tg_runs_next_due / tg_runs_due), one
 * run at a time, with the gateway's own token. A run that completes has
 * its results fetched once for the key figures (and archived when
 * runs.archive is set); a run that ends gets its webhook when the
 * submission named a callback (runs.c), and its sweep moves on. Every end
 * is handled this way, however it was seen (a check, a client's own GET,
 * expiry): the registry marks ends handled only afterwards
 * (tg_runs_next_unhandled), so a restart in between loses none. A second
 * timer expires runs past the vendor's retention and purges old ones.
 * The registry answers through the state seam: each step of a check goes
 * on from its callback (t->op), the schedule is read with t->kop, the
 * retention runs with t->rop; freeing the tracker cancels them.
 *
 * In a fleet (a shared state) one instance tracks: each batch of checks
 * and each retention pass first takes or renews the lead "lead:runs"
 * (LEAD_TTL_MS); an instance that does not get it looks again every
 * FOLLOW_MS, so a leader that dies is replaced within LEAD_TTL_MS +
 * FOLLOW_MS. A run added or an end seen on any instance kicks the others'
 * trackers through the seam's "runs" watch (runs_tracker_kick), so the
 * leader does not wait for its next look. With SQLite the lead is always
 * this instance's.
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
#include "tidegate/registry.h"
#include "runs_int.h"

#define IDLE_RECHECK_MS		60000		/* re-read the schedule at least this often */
#define LEAD_KEY		"lead:runs"	/* the fleet's tracker, sweeper resume, retention */
#define LEAD_TTL_MS		15000
#define FOLLOW_MS		5000		/* another instance leads: look again */
#define STATUS_MAX_BODY		(1024 * 1024)

enum { PHASE_STATUS, PHASE_RESULTS };

struct runs_tracker {
	struct gw *gw;
	struct event *timer;
	struct event *retention;	/* expiry and purge of the registry */
	struct gw_vcall *call;		/* the check under way */
	struct tg_state_op *op;		/* the check's registry step under way */
	struct tg_state_op *fop;	/* a completed run's figures being kept */
	struct tg_state_op *kop;	/* the schedule being read (kick) */
	struct tg_state_op *rop;	/* the retention under way */
	char *id;			/* the run being checked, or NULL */
	int phase;
	int notifying;			/* runs_notify of t->id under way */
	int pending;			/* a completed run's writes not answered yet */
	int rekick;			/* kicked while the schedule was read */
	int stuck;			/* the registry failed: slow down */
	enum tg_run_status st;		/* the status that ended t->id */
	size_t expired;			/* the retention's expiry count */
	int fleet;			/* the state is shared: lead first */
	struct tg_state_watch *watch;	/* the other instances' kicks */
};

static void start(struct runs_tracker *t);

static void
arm(struct runs_tracker *t, int64_t ms)
{
	struct timeval tv;

	if (ms < 0)
		ms = 0;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(t->timer, &tv);
}

/* A check, or the schedule's read, is under way: it kicks when it ends. */
static int
busy(const struct runs_tracker *t)
{
	return t->id != NULL || t->op != NULL;
}

static void kick_read(struct runs_tracker *t);
static void kick(struct runs_tracker *t);

static void
on_next_due(const struct tg_state_res *res, int64_t next, void *arg)
{
	struct runs_tracker *t = arg;
	int64_t now = tg_clock_now_ms();

	t->kop = NULL;
	if (t->rekick) {
		kick_read(t);
		return;
	}
	if (busy(t))
		return;
	if (res->rc != 0)
		next = INT64_MAX;
	arm(t, next == INT64_MAX || next - now > IDLE_RECHECK_MS ? IDLE_RECHECK_MS : next - now);
}

static void
on_kick_unhandled(const struct tg_state_res *res, const char *id, enum tg_run_status st,
    void *arg)
{
	struct runs_tracker *t = arg;
	struct tg_state_op *op;

	t->kop = NULL;
	if (t->rekick) {
		kick_read(t);
		return;
	}
	if (busy(t))
		return;
	if (res->rc == 0 && id != NULL) {
		arm(t, 0);		/* an end to handle first */
		return;
	}
	if ((op = tg_state_runs_next_due(t->gw->state, tg_clock_now_ms(), on_next_due, t)) != NULL)
		t->kop = op;
}

static void
kick_read(struct runs_tracker *t)
{
	struct tg_state_op *op;

	t->rekick = 0;
	if ((op = tg_state_runs_next_unhandled(t->gw->state, on_kick_unhandled, t)) != NULL)
		t->kop = op;
}

static void
on_told(const struct tg_state_res *res, void *arg)
{
	(void)res;	/* best effort: the leader looks on its own timer too */
}

void
runs_tracker_kick(struct runs_tracker *t)
{
	if (t != NULL && t->fleet)
		(void)tg_state_notify(t->gw->state, "runs", "kick", on_told, NULL);
	kick(t);
}

/* Another instance added a run or saw an end. */
static void
on_wake(const char *topic, const char *what, void *arg)
{
	kick(arg);
}

static void
kick(struct runs_tracker *t)
{
	if (t == NULL || busy(t) || t->gw->state == NULL)
		return;
	if (t->stuck) {
		arm(t, 1000);
		return;
	}
	if (t->kop != NULL) {
		t->rekick = 1;	/* read again when this read ends */
		return;
	}
	kick_read(t);
}

/* The check of t->id is over: on to the next due run. */
static void
end(struct runs_tracker *t)
{
	free(t->id);
	t->id = NULL;
	kick(t);
}

static void
on_handled(const struct tg_state_res *res, void *arg)
{
	struct runs_tracker *t = arg;

	t->op = NULL;
	t->stuck = res->rc != 0;
	if (t->stuck)
		tg_log(TG_LOG_ERROR, "run_handled_failed", TG_LS("simulationId", t->id),
		    TG_LS("error", res->err.msg));
	end(t);
}

/* The webhook of t->id is queued (or given up): mark its end handled. */
static void
on_notified(void *arg)
{
	struct runs_tracker *t = arg;
	struct tg_state_op *op;

	t->notifying = 0;
	if ((op = tg_state_runs_set_handled(t->gw->state, t->id, on_handled, t)) != NULL)
		t->op = op;
}

/* The end of t->id is handled: webhook, sweep, then the mark. */
static void
handled(struct runs_tracker *t)
{
	t->notifying = 1;
	runs_notify(t->gw, t->id, on_notified, t);
}

static void
on_check_failed(const struct tg_state_res *res, void *arg)
{
	struct runs_tracker *t = arg;

	t->op = NULL;
	if (res->rc != 0 && res->rc != TG_STATE_NOT_FOUND)
		tg_log(TG_LOG_ERROR, "run_check_record_failed", TG_LS("simulationId", t->id),
		    TG_LS("error", res->err.msg));
	end(t);
}

/* A check without a usable answer: recorded, then the check of t->id ends. */
static void
check_failed(struct runs_tracker *t, const char *why, int64_t ra)
{
	struct tg_state_op *op;

	tg_log(TG_LOG_WARN, "run_check_failed", TG_LS("simulationId", t->id),
	    TG_LS("error", why));
	op = tg_state_runs_check_failed(t->gw->state, t->id, why, ra, tg_clock_now_ms(),
	    on_check_failed, t);
	if (op != NULL)
		t->op = op;
}

/* The run became terminal: results of a completed run, then its webhook. */
static void
ended(struct runs_tracker *t, enum tg_run_status st)
{
	tg_log(TG_LOG_INFO, "run_ended", TG_LS("simulationId", t->id),
	    TG_LS("status", tg_runs_status_str(st)));
	if (st == TG_RUN_COMPLETED) {
		t->phase = PHASE_RESULTS;
		arm(t, 0);
		return;
	}
	handled(t);
}

static void
on_status_set(const struct tg_state_res *res, int64_t became, void *arg)
{
	struct runs_tracker *t = arg;

	t->op = NULL;
	if (res->rc != 0 && res->rc != TG_STATE_NOT_FOUND)
		tg_log(TG_LOG_ERROR, "run_status_record_failed", TG_LS("simulationId", t->id),
		    TG_LS("error", res->err.msg));
	if (res->rc == 0 && became == 1)
		ended(t, t->st);
	else
		end(t);
}

/* The vendor's status of t->id: recorded, then on (on_status_set). */
static void
got_status(struct runs_tracker *t, int status, const struct evkeyvalq *h, struct evbuffer *body)
{
	struct tg_state_op *op;
	yajl_val v = NULL;
	const char *s, *c;
	int64_t done = 0;
	char why[64];
	int st;

	if (status == 404) {
		st = TG_RUN_UNKNOWN;
	} else if (status != 200) {
		snprintf(why, sizeof(why), "the vendor answered HTTP %d", status);
		check_failed(t, why, status == 429 || status == 503 ? tg_http_retry_after_ms(h) : -1);
		return;
	} else {
		v = tg_json_parse((const char *)evbuffer_pullup(body, -1),
		    evbuffer_get_length(body), NULL);
		s = tg_json_get_str(v, "status");
		if (s == NULL || (st = tg_runs_status_parse(s)) < 0) {
			yajl_tree_free(v);
			check_failed(t, "the vendor's status answer could not be read", -1);
			return;
		}
		if ((c = tg_json_get_str(v, "completedAt")) != NULL)
			(void)tg_clock_parse_iso(c, &done);
		yajl_tree_free(v);
	}
	t->st = (enum tg_run_status)st;
	op = tg_state_runs_set_status(t->gw->state, t->id, t->st, done, tg_clock_now_ms(),
	    on_status_set, t);
	if (op != NULL)
		t->op = op;
}

/* One of the results' writes (or their issuing) is over: handled after the last. */
static void
results_step(struct runs_tracker *t)
{
	if (--t->pending == 0)
		handled(t);
}

static void
on_figures(const struct tg_state_res *res, void *arg)
{
	struct runs_tracker *t = arg;

	t->fop = NULL;
	if (res->rc != 0 && res->rc != TG_STATE_NOT_FOUND)
		tg_log(TG_LOG_WARN, "run_figures_failed", TG_LS("simulationId", t->id),
		    TG_LS("error", res->err.msg));
	results_step(t);
}

static void
on_archive(const struct tg_state_res *res, void *arg)
{
	struct runs_tracker *t = arg;

	t->op = NULL;
	if (res->rc != 0)
		tg_log(TG_LOG_WARN, "run_archive_failed", TG_LS("simulationId", t->id),
		    TG_LS("error", res->rc == TG_STATE_CONFLICT || res->rc == TG_STATE_NOT_FOUND ?
		    "the run cannot be archived" : res->err.msg));
	results_step(t);
}

/* The results of a completed t->id: its figures kept, then (runs.archive)
 * the body archived, both issued at once (answered in that order), then
 * its end handled once both are answered. */
static void
got_results(struct runs_tracker *t, int status, struct evbuffer *body)
{
	const struct runs_cfg *c = runs_cfg(t->gw->rt);
	struct tg_state_op *op;
	const char *data;
	size_t len;
	yajl_val v;

	t->pending = 1;		/* until both are issued */
	if (status != 200 || body == NULL) {
		tg_log(TG_LOG_WARN, "run_results_unavailable", TG_LS("simulationId", t->id),
		    TG_LI("status", status));
		results_step(t);
		return;
	}
	len = evbuffer_get_length(body);
	data = (const char *)evbuffer_pullup(body, -1);
	if ((v = tg_json_parse(data, len, NULL)) != NULL) {
		t->pending++;
		op = tg_state_runs_set_figures(t->gw->state, t->id, v, on_figures, t);
		if (op != NULL)
			t->fop = op;
		yajl_tree_free(v);
	}
	if (c->runs_archive) {
		t->pending++;
		op = tg_state_runs_archive(t->gw->state, t->id, data, len, tg_clock_now_ms(),
		    on_archive, t);
		if (op != NULL)
			t->op = op;
	}
	results_step(t);
}

static void
on_fetched(struct gw_vcall *c, const struct gw_vfetch *res, void *arg)
{
	struct runs_tracker *t = arg;
	enum tg_up_error err = res->err;
	char why[160];

	t->call = NULL;		/* freed after this returns */
	if (t->phase == PHASE_RESULTS) {
		got_results(t, err == TG_UP_OK ? res->status : 0, res->body);
	} else if (res->token_why != NULL) {
		snprintf(why, sizeof(why), "no vendor token: %s", res->token_why);
		check_failed(t, why, res->retry_after > 0 ? (int64_t)res->retry_after * 1000 : -1);
	} else if (err != TG_UP_OK) {
		snprintf(why, sizeof(why), "the vendor could not be reached: %s",
		    tg_up_error_str(err));
		check_failed(t, why, -1);
	} else {
		got_status(t, res->status, res->headers, res->body);
	}
}

static void
check_headers(struct gw_vcall *c, struct evkeyvalq *h, void *arg)
{
	evhttp_add_header(h, "Accept", "application/json");
}

/* GET the status (or the results) of t->id with the gateway's token. */
static void
start(struct runs_tracker *t)
{
	struct gw_runtime *rt = t->gw->rt;
	const struct gw_service *s = &rt->svc[GW_SIM];
	struct tg_route_match m;
	struct gw_vcall_req q;
	char *path, *uri;
	size_t max;

	memset(&m, 0, sizeof(m));
	snprintf(m.param_name[0], sizeof(m.param_name[0]), "id");
	snprintf(m.param[0], sizeof(m.param[0]), "%s", t->id);
	m.nparam = 1;
	path = tg_route_expand(s->cfg->routes[t->phase == PHASE_STATUS ? TG_OP_SIM_STATUS :
	    TG_OP_SIM_RESULTS], &m);
	uri = tg_xasprintf("%s%s", tg_upstream_base_path(s->api), path ? path : "/");
	max = t->phase == PHASE_STATUS ? STATUS_MAX_BODY : (size_t)runs_cfg(rt)->runs_archive_max;
	memset(&q, 0, sizeof(q));
	q.rt = rt;
	q.service = GW_SIM;
	q.method = EVHTTP_REQ_GET;
	q.uri = uri;
	t->call = gw_vcall_fetch(&q, max, check_headers, on_fetched, t);
	tg_metrics_inc(t->gw->metrics, "tidegate_run_checks_total", t->phase == PHASE_STATUS ?
	    "kind=\"status\"" : "kind=\"results\"", 1);
	free(uri);
	free(path);
}

static void
on_due(const struct tg_state_res *res, const struct tg_run *due, size_t n, int more,
    void *arg)
{
	struct runs_tracker *t = arg;

	t->op = NULL;
	if (res->rc != 0) {
		tg_log(TG_LOG_ERROR, "run_tracker_failed", TG_LS("error", res->err.msg));
		n = 0;
	}
	if (n == 0) {
		kick(t);
		return;
	}
	t->id = tg_xstrdup(due[0].simulation_id);
	t->phase = PHASE_STATUS;
	start(t);
}

/* The run that ended longest ago without being handled first, else the
 * run whose check is most overdue. */
static void
on_unhandled(const struct tg_state_res *res, const char *id, enum tg_run_status st,
    void *arg)
{
	struct runs_tracker *t = arg;
	struct tg_state_op *op;

	t->op = NULL;
	t->stuck = res->rc != 0 && res->rc != TG_STATE_NOT_FOUND;
	if (t->stuck)
		tg_log(TG_LOG_ERROR, "run_tracker_failed", TG_LS("error", res->err.msg));
	if (res->rc == 0 && id != NULL) {
		t->id = tg_xstrdup(id);
		ended(t, st);
		return;
	}
	if ((op = tg_state_runs_due(t->gw->state, tg_clock_now_ms(), 1, on_due, t)) != NULL)
		t->op = op;
}

/* Leading (or the state cannot say: the next step finds out): check. */
static void
on_led(const struct tg_state_res *res, int64_t n, void *arg)
{
	struct runs_tracker *t = arg;
	struct tg_state_op *op;

	t->op = NULL;
	if (res->rc == TG_STATE_OK && n == 0) {
		arm(t, FOLLOW_MS);	/* another instance tracks */
		return;
	}
	if ((op = tg_state_runs_next_unhandled(t->gw->state, on_unhandled, t)) != NULL)
		t->op = op;
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct runs_tracker *t = arg;
	struct tg_state_op *op;

	(void)fd;
	(void)what;
	if (t->gw->draining || t->op != NULL || t->fop != NULL || t->call != NULL ||
	    t->notifying || t->gw->state == NULL)
		return;			/* what is under way kicks when it ends */
	if (t->id != NULL) {		/* a completed run's results */
		start(t);
		return;
	}
	if ((op = runs_lead(t->gw, on_led, t)) != NULL)
		t->op = op;
}

struct tg_state_op *
runs_lead(struct gw *gw, tg_state_num_cb cb, void *arg)
{
	return tg_state_poll_lead(gw->state, LEAD_KEY, tg_clock_now_ms(), LEAD_TTL_MS, cb, arg);
}

static void
retention_again(struct runs_tracker *t)
{
	int64_t every = runs_cfg(t->gw->rt)->runs_retention_interval;
	struct timeval tv = { (time_t)(every / 1000), (suseconds_t)(every % 1000) * 1000 };

	evtimer_add(t->retention, &tv);
}

static void
on_purged(const struct tg_state_res *res, int64_t runs, int64_t sweeps, void *arg)
{
	struct runs_tracker *t = arg;

	t->rop = NULL;
	if (res->rc != 0)
		tg_log(TG_LOG_ERROR, "run_retention_failed", TG_LS("error", res->err.msg));
	else if (t->expired > 0 || runs > 0 || sweeps > 0)
		tg_log(TG_LOG_INFO, "run_retention", TG_LI("expired", t->expired),
		    TG_LI("purged_runs", runs), TG_LI("purged_sweeps", sweeps));
	if (t->expired > 0)
		kick(t);	/* their ends are handled like any other */
	retention_again(t);
}

static void
on_expired(const struct tg_state_res *res, int64_t n, void *arg)
{
	struct runs_tracker *t = arg;
	struct tg_state_op *op;

	t->rop = NULL;
	if (res->rc != 0) {
		tg_log(TG_LOG_ERROR, "run_retention_failed", TG_LS("error", res->err.msg));
		retention_again(t);
		return;
	}
	t->expired = (size_t)n;
	op = tg_state_runs_purge(t->gw->state, tg_clock_now_ms(), on_purged, t);
	if (op != NULL)
		t->rop = op;
}

/* Leading: expire and purge; else the leader does. */
static void
on_retention_led(const struct tg_state_res *res, int64_t n, void *arg)
{
	struct runs_tracker *t = arg;
	struct tg_state_op *op;

	t->rop = NULL;
	if (res->rc == TG_STATE_OK && n == 0) {
		retention_again(t);
		return;
	}
	t->expired = 0;
	op = tg_state_runs_expire(t->gw->state, tg_clock_now_ms(), on_expired, t);
	if (op != NULL)
		t->rop = op;
}

static void
on_retention(evutil_socket_t fd, short what, void *arg)
{
	struct runs_tracker *t = arg;
	struct tg_state_op *op;

	(void)fd;
	(void)what;
	if (t->gw->state == NULL)
		return;
	if ((op = runs_lead(t->gw, on_retention_led, t)) != NULL)
		t->rop = op;
}

struct runs_tracker *
runs_tracker_new(struct gw *gw)
{
	struct runs_tracker *t = tg_xcalloc(1, sizeof(*t));
	struct timeval tv = { 1, 0 };

	t->gw = gw;
	t->timer = evtimer_new(gw->base, on_timer, t);
	t->retention = evtimer_new(gw->base, on_retention, t);
	evtimer_add(t->retention, &tv);
	if (gw->state != NULL) {
		struct tg_state_health h;

		tg_state_health(gw->state, &h);
		t->fleet = h.shared;
		if (t->fleet)
			t->watch = tg_state_watch(gw->state, "runs", on_wake, t);
	}
	kick(t);
	return t;
}

void
runs_tracker_free(struct runs_tracker *t)
{
	if (t == NULL)
		return;
	gw_vcall_cancel(t->call);
	tg_state_cancel(t->op);
	tg_state_cancel(t->fop);
	tg_state_cancel(t->kop);
	tg_state_cancel(t->rop);
	if (t->fleet) {		/* another instance takes over at once */
		tg_state_unwatch(t->gw->state, t->watch);
		(void)tg_state_poll_release(t->gw->state, LEAD_KEY, on_told, NULL);
	}
	event_free(t->timer);
	event_free(t->retention);
	free(t->id);
	free(t);
}

/* ---- notification of a run that ended ---- */

/* The run that ended: its sweep moves on, its webhook is queued. */
static void
on_notify_run(const struct tg_state_res *res, const struct tg_run *runs, size_t n, int more,
    void *arg)
{
	struct runs_bg *b = arg;

	b->op = NULL;
	if (res->rc != 0 || n == 0) {
		if (res->rc != TG_STATE_NOT_FOUND)
			tg_log(TG_LOG_ERROR, "run_webhook_failed", TG_LS("simulationId", b->id),
			    TG_LS("error", res->err.msg));
		runs_notified(b);
		return;
	}
	if (runs[0].sweep_id != NULL)	/* a sweep's runs report through the sweep */
		runs_sweeper_run_ended(RUNS(b->gw)->sweeper, runs[0].sweep_id);
	if (runs_hook_run(b, &runs[0]) != 0)
		runs_notified(b);
}

/* Enqueue the webhook of a run that ended, when its submission named one
 * (the job, then its payload); a run of a sweep moves its sweep on instead. */
void
runs_notify(struct gw *gw, const char *id, void (*done)(void *arg), void *arg)
{
	struct runs_bg *b;

	if (gw->state == NULL) {
		if (done != NULL)
			done(arg);
		return;
	}
	b = runs_bg_new(gw, id);
	b->done = done;
	b->done_arg = arg;
	runs_bg_wait(b, tg_state_runs_get(gw->state, id, on_notify_run, b));
}

