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
#define STATUS_MAX_BODY		(1024 * 1024)

enum { PHASE_STATUS, PHASE_RESULTS };

struct runs_tracker {
	struct gw *gw;
	struct event *timer;
	struct event *retention;	/* expiry and purge of the registry */
	struct gw_vcall *call;		/* the check under way */
	char *id;			/* the run being checked, or NULL */
	int phase;
	int stuck;			/* the registry failed: slow down */
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

void
runs_tracker_kick(struct runs_tracker *t)
{
	enum tg_run_status st;
	struct tg_err err;
	int64_t now, next;
	char *id;

	if (t == NULL || t->id != NULL)
		return;
	if (t->stuck) {
		arm(t, 1000);
		return;
	}
	if (tg_runs_next_unhandled(RUNS(t->gw)->reg, &id, &st, &err) == 1) {
		free(id);
		arm(t, 0);		/* an end to handle first */
		return;
	}
	now = tg_clock_now_ms();
	next = tg_runs_next_due(RUNS(t->gw)->reg, now);
	arm(t, next == INT64_MAX || next - now > IDLE_RECHECK_MS ? IDLE_RECHECK_MS : next - now);
}

/* The check of t->id is over: on to the next due run. */
static void
end(struct runs_tracker *t)
{
	free(t->id);
	t->id = NULL;
	runs_tracker_kick(t);
}

/* The end of t->id is handled: webhook, sweep, then the mark. */
static void
handled(struct runs_tracker *t)
{
	struct tg_err err;

	runs_notify(t->gw, t->id);
	t->stuck = tg_runs_set_handled(RUNS(t->gw)->reg, t->id, &err) != 0;
	if (t->stuck)
		tg_log(TG_LOG_ERROR, "run_handled_failed", TG_LS("simulationId", t->id),
		    TG_LS("error", err.msg));
	end(t);
}

static void
check_failed(struct runs_tracker *t, const char *why, int64_t ra)
{
	struct tg_err err;

	if (tg_runs_check_failed(RUNS(t->gw)->reg, t->id, why, ra, tg_clock_now_ms(), &err) == -1)
		tg_log(TG_LOG_ERROR, "run_check_record_failed", TG_LS("simulationId", t->id),
		    TG_LS("error", err.msg));
	tg_log(TG_LOG_WARN, "run_check_failed", TG_LS("simulationId", t->id),
	    TG_LS("error", why));
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
got_status(struct runs_tracker *t, int status, const struct evkeyvalq *h, struct evbuffer *body)
{
	yajl_val v = NULL;
	const char *s, *c;
	struct tg_err err;
	int64_t done = 0;
	char why[64];
	int st, rc;

	if (status == 404) {
		st = TG_RUN_UNKNOWN;
	} else if (status != 200) {
		snprintf(why, sizeof(why), "the vendor answered HTTP %d", status);
		check_failed(t, why, status == 429 || status == 503 ? tg_http_retry_after_ms(h) : -1);
		goto next;
	} else {
		v = tg_json_parse((const char *)evbuffer_pullup(body, -1),
		    evbuffer_get_length(body), NULL);
		s = tg_json_get_str(v, "status");
		if (s == NULL || (st = tg_runs_status_parse(s)) < 0) {
			check_failed(t, "the vendor's status answer could not be read", -1);
			goto next;
		}
		if ((c = tg_json_get_str(v, "completedAt")) != NULL)
			(void)tg_clock_parse_iso(c, &done);
	}
	rc = tg_runs_set_status(RUNS(t->gw)->reg, t->id, st, done, tg_clock_now_ms(), &err);
	if (rc == -1)
		tg_log(TG_LOG_ERROR, "run_status_record_failed", TG_LS("simulationId", t->id),
		    TG_LS("error", err.msg));
	yajl_tree_free(v);
	if (rc == 1) {
		ended(t, st);
		return;
	}
	end(t);
	return;
next:
	yajl_tree_free(v);
	end(t);
}

static void
got_results(struct runs_tracker *t, int status, struct evbuffer *body)
{
	const struct gw_config *c = &t->gw->rt->cfg;
	const char *data;
	struct tg_err err;
	size_t len;
	yajl_val v;
	int rc;

	if (status != 200 || body == NULL) {
		tg_log(TG_LOG_WARN, "run_results_unavailable", TG_LS("simulationId", t->id),
		    TG_LI("status", status));
		goto done;
	}
	len = evbuffer_get_length(body);
	data = (const char *)evbuffer_pullup(body, -1);
	if ((v = tg_json_parse(data, len, NULL)) != NULL &&
	    tg_runs_set_figures(RUNS(t->gw)->reg, t->id, v, &err) == -1)
		tg_log(TG_LOG_WARN, "run_figures_failed", TG_LS("simulationId", t->id),
		    TG_LS("error", err.msg));
	yajl_tree_free(v);
	if (c->runs_archive) {
		rc = tg_runs_archive(RUNS(t->gw)->reg, t->id, data, len, tg_clock_now_ms(), &err);
		if (rc != 0)
			tg_log(TG_LOG_WARN, "run_archive_failed", TG_LS("simulationId", t->id),
			    TG_LS("error", rc == -1 || rc == TG_RUNS_REFUSED ? err.msg :
			    "the run cannot be archived"));
	}
done:
	handled(t);
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
		end(t);
	} else if (err != TG_UP_OK) {
		snprintf(why, sizeof(why), "the vendor could not be reached: %s",
		    tg_up_error_str(err));
		check_failed(t, why, -1);
		end(t);
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
	max = t->phase == PHASE_STATUS ? STATUS_MAX_BODY : (size_t)rt->cfg.runs_archive_max;
	memset(&q, 0, sizeof(q));
	q.rt = rt;
	q.service = GW_SIM;
	q.method = EVHTTP_REQ_GET;
	q.uri = uri;
	t->call = gw_vcall_fetch(&q, max, check_headers, on_fetched, t);
	free(uri);
	free(path);
}

/* The run that ended longest ago without being handled: 1 when started. */
static int
take_ended(struct runs_tracker *t)
{
	enum tg_run_status st;
	struct tg_err err;
	char *id;
	int rc = tg_runs_next_unhandled(RUNS(t->gw)->reg, &id, &st, &err);

	t->stuck = rc == -1;
	if (rc == -1)
		tg_log(TG_LOG_ERROR, "run_tracker_failed", TG_LS("error", err.msg));
	if (rc != 1)
		return 0;
	t->id = id;
	ended(t, st);
	return 1;
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct runs_tracker *t = arg;
	struct tg_run *due = NULL;
	struct tg_err err;
	size_t n = 0;

	(void)fd;
	(void)what;
	if (t->gw->draining)
		return;
	if (t->id != NULL) {		/* a completed run's results */
		start(t);
		return;
	}
	if (take_ended(t))
		return;
	if (tg_runs_due(RUNS(t->gw)->reg, tg_clock_now_ms(), 1, &due, &n, &err) != 0) {
		tg_log(TG_LOG_ERROR, "run_tracker_failed", TG_LS("error", err.msg));
		n = 0;
	}
	if (n == 0) {
		tg_runs_free(due, n);
		runs_tracker_kick(t);
		return;
	}
	t->id = tg_xstrdup(due[0].simulation_id);
	t->phase = PHASE_STATUS;
	tg_runs_free(due, n);
	start(t);
}

static void
on_retention(evutil_socket_t fd, short what, void *arg)
{
	struct runs_tracker *t = arg;
	int64_t every = t->gw->rt->cfg.runs_retention_interval, now = tg_clock_now_ms();
	struct timeval tv = { (time_t)(every / 1000), (suseconds_t)(every % 1000) * 1000 };
	size_t expired = 0, runs = 0, sweeps = 0;
	struct tg_err err;

	(void)fd;
	(void)what;
	if (tg_runs_expire(RUNS(t->gw)->reg, now, &expired, &err) != 0 ||
	    tg_runs_purge(RUNS(t->gw)->reg, now, &runs, &sweeps, &err) != 0)
		tg_log(TG_LOG_ERROR, "run_retention_failed", TG_LS("error", err.msg));
	else if (expired > 0 || runs > 0 || sweeps > 0)
		tg_log(TG_LOG_INFO, "run_retention", TG_LI("expired", expired),
		    TG_LI("purged_runs", runs), TG_LI("purged_sweeps", sweeps));
	if (expired > 0)
		runs_tracker_kick(t);	/* their ends are handled like any other */
	evtimer_add(t->retention, &tv);
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
	runs_tracker_kick(t);
	return t;
}

void
runs_tracker_free(struct runs_tracker *t)
{
	if (t == NULL)
		return;
	gw_vcall_cancel(t->call);
	event_free(t->timer);
	event_free(t->retention);
	free(t->id);
	free(t);
}
