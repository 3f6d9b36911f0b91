/*
 * runs.c - the requests of the runs feature that go to the vendor: a POST
 * /simulations the vendor accepts (201) is held until the run is committed
 * to the registry (include/tidegate/registry.h), then answered, so that
 * every simulationId a client has seen is tracked; the statuses clients
 * see are recorded; GETs of a run the vendor has deleted are answered 410
 * (or from the archive); a run that ended with a callback URL gets its
 * webhook queued. Every registry and outbox operation goes through the
 * state seam (tidegate/state.h) and is answered in a callback, perhaps
 * before the call returns. Called by feature.c.
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
#include "tidegate/metrics.h"
#include "tidegate/registry.h"
#include "runs_int.h"

void
tg_runs_store_opts(const struct gw_config *g, struct tg_runs_opts *o)
{
	const struct runs_cfg *c = runs_cfg_of(g);

	memset(o, 0, sizeof(*o));
	o->path = c->runs_db_path;
	o->archive_max_run = c->runs_archive_max;
	o->archive_max_total = c->runs_archive_max_total;
	o->archive_keep_ms = c->runs_archive_keep;
	o->grace_ms = c->runs_grace > 0 ? c->runs_grace : 1;	/* 0 would mean the default */
	o->sync_normal = strcmp(c->runs_sync, "normal") == 0;
}

/* The gateway's verdict on the case, as X-Tidegate-Case-Diff told the client. */
static const char *
verdict(struct gw_req *r)
{
	const char *d = evhttp_find_header(evhttp_request_get_output_headers(r->req),
	    "X-Tidegate-Case-Diff");

	if (!r->svc->cfg->validate)
		return "not validated";
	if (d != NULL && strcmp(d, "checked") == 0)
		return "passed (diff checked)";
	return "passed (structural checks only)";
}

static int64_t
iso_member(yajl_val v, const char *name)
{
	const char *s = tg_json_get_str(v, name);
	int64_t ms;

	if (s == NULL || tg_clock_parse_iso(s, &ms) != 0)
		return 0;
	return ms;
}

/*
 * The case's id (the answer's, else the body's) and digest. A checked
 * submission has them from the feature's scan of its check (feature.c,
 * perhaps off the loop):
 * a large case is not parsed and hashed again on the loop. *cs is the
 * parsed body when it had to be read here.
 */
static void
sent_case(struct gw_req *r, yajl_val ans, struct tg_run_new *n, char *sha, yajl_val *cs)
{
	struct evbuffer *sent = r->body ? r->body : evhttp_request_get_input_buffer(r->req);
	struct runs_req *q = runs_req_of(r);
	const void *bytes;
	size_t len;

	n->case_id = tg_json_get_str(ans, "caseId");
	if (q->case_sha256[0] != '\0') {
		n->case_sha256 = q->case_sha256;
		if (n->case_id == NULL)
			n->case_id = q->case_id;
	} else {
		bytes = evbuffer_pullup(sent, -1);
		len = evbuffer_get_length(sent);
		*cs = tg_json_parse(bytes, len, NULL);
		if (n->case_id == NULL)
			n->case_id = tg_json_get_str(*cs, "caseId");
		tg_runs_case_digest(bytes, len, sha);
		n->case_sha256 = sha;
	}
	if (n->case_id == NULL)
		n->case_id = "";
}

/*
 * A run the registry could not record is seen by no key (keyed.c): a
 * keyed caller is answered 503 (1: r is gone), one without a key gets the
 * 201 with X-Tidegate-Run-Tracked: false (0), as the run is the vendor's
 * to show it.
 */
static int
untracked(struct gw_req *r, const char *id, const struct tg_state_res *res)
{
	char msg[400];

	if (r->key == NULL) {
		if (r->req != NULL)
			evhttp_add_header(evhttp_request_get_output_headers(r->req),
			    "X-Tidegate-Run-Tracked", "false");
		return 0;
	}
	if (res->rc == TG_STATE_UNKNOWN)	/* it may be recorded: never "not served" */
		snprintf(msg, sizeof(msg), "simulation %.64s was accepted by the vendor; whether "
		    "the run registry recorded it is unknown (the database was lost while it was "
		    "written and did not answer again in time): GET /api/v1/simulations/%.64s "
		    "with this key tells (404: not recorded, submit it again)", id, id);
	else
		snprintf(msg, sizeof(msg), "simulation %.64s was accepted by the vendor, but the "
		    "run registry could not record it (%.120s): it will not be served through "
		    "the gateway (submit it again later)", id, res->err.msg);
	if (r->req != NULL)
		evhttp_add_header(evhttp_request_get_output_headers(r->req), "Retry-After", "5");
	gw_req_reply_error(r, 503, "REGISTRY_UNAVAILABLE", msg);
	return 1;
}

/* The run is recorded (or not): answer the held 201. */
static void
on_recorded(const struct tg_state_res *res, void *arg)
{
	struct gw_req *r = arg;
	struct runs_req *q = runs_req_of(r);

	q->op = NULL;
	if (res->rc == 0 || res->rc == TG_STATE_CONFLICT) {	/* CONFLICT: the vendor
								 * repeated an id */
		runs_tracker_kick(RUNS(r->gw)->tracker);
		tg_log(TG_LOG_INFO, "run_recorded", TG_LS("id", r->id),
		    TG_LS("simulationId", q->sim_id), TG_LS("key", r->key ? r->key->name : NULL),
		    TG_LS("host", r->origin ? r->origin : "primary"));
	} else {
		tg_log(TG_LOG_ERROR, "run_record_failed", TG_LS("id", r->id),
		    TG_LS("error", res->err.msg));
		if (untracked(r, q->sim_id, res))
			return;
	}
	gw_req_reply_buf(r, 201, "application/json", r->capture);	/* frees r */
}

/* Record the run of the held answer, then answer r (from on_recorded);
 * -1 with err when there is nothing to record (r not answered). */
static int
record(struct gw_req *r, yajl_val ans, struct tg_err *err)
{
	char sha[TG_RUNS_SHA_LEN];
	struct tg_run_new n;
	yajl_val cs = NULL;
	const char *st;

	memset(&n, 0, sizeof(n));
	n.simulation_id = tg_json_get_str(ans, "simulationId");
	if (n.simulation_id == NULL || *n.simulation_id == '\0') {
		tg_err_set(err, "the vendor's answer carried no simulationId");
		return -1;
	}
	sent_case(r, ans, &n, sha, &cs);
	n.api_key = r->key ? r->key->name : NULL;
	n.host = r->origin ? r->origin : "primary";
	n.submitted_at = iso_member(ans, "submittedAt");
	n.expires_at = iso_member(ans, "expiresAt");
	st = tg_json_get_str(ans, "status");
	n.status = st && tg_runs_status_parse(st) >= 0 ?
	    (enum tg_run_status)tg_runs_status_parse(st) : TG_RUN_IN_PROGRESS;
	n.validation = verdict(r);
	n.callback_url = runs_req_of(r)->callback;
	free(runs_req_of(r)->sim_id);
	runs_req_of(r)->sim_id = tg_xstrdup(n.simulation_id);
	/* n's strings are copied by the call; r may be gone when it returns */
	runs_req_wait(r, tg_state_runs_add(r->gw->state, &n, tg_clock_now_ms(), on_recorded,
	    r));
	yajl_tree_free(cs);
	return 0;
}

int
runs_done(struct gw_req *r, enum tg_up_error uerr, struct evbuffer *capture)
{
	struct tg_err err;
	yajl_val ans;
	int rc;

	if (uerr != TG_UP_OK || capture == NULL) {
		gw_req_reply_error(r, 502, "UPSTREAM_ERROR", "the vendor's answer to the "
		    "submission broke off: the simulation may have been accepted, but it is "
		    "not tracked");
		return 1;
	}
	ans = tg_json_parse((const char *)evbuffer_pullup(capture, -1),
	    evbuffer_get_length(capture), NULL);
	/* record may answer (and free r) before it returns: r is not read after */
	if (r->gw->state == NULL) {
		tg_err_set(&err, "no run registry");
		rc = -1;
	} else {
		rc = record(r, ans, &err);
	}
	yajl_tree_free(ans);
	if (rc == 0)
		return 1;	/* answered when the run is recorded */
	tg_log(TG_LOG_ERROR, "run_record_failed", TG_LS("id", r->id), TG_LS("error", err.msg));
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "X-Tidegate-Run-Tracked",
	    "false");
	gw_req_reply_buf(r, 201, "application/json", capture);	/* frees r */
	return 1;
}

/* ---- statuses clients saw ---- */

/* The status and completedAt of a vendor's status answer: 0, or -1 when
 * it names no status the registry knows. */
static int
status_parse(const char *body, size_t len, enum tg_run_status *st, int64_t *done)
{
	yajl_val v = tg_json_parse(body, len, NULL);
	const char *s = tg_json_get_str(v, "status"), *c;
	int n = s != NULL ? tg_runs_status_parse(s) : -1;

	*done = 0;
	if (n >= 0 && (c = tg_json_get_str(v, "completedAt")) != NULL)
		(void)tg_clock_parse_iso(c, done);
	yajl_tree_free(v);
	*st = (enum tg_run_status)n;
	return n >= 0 ? 0 : -1;
}

/* A status is recorded (or not): the tracker handles an end. */
static void
status_recorded(struct gw *gw, const struct tg_state_res *res, int64_t ended, const char *id)
{
	if (res->rc != 0 && res->rc != TG_STATE_NOT_FOUND)
		tg_log(TG_LOG_ERROR, "run_status_record_failed", TG_LS("simulationId", id),
		    TG_LS("error", res->err.msg));
	else if (res->rc == 0 && ended == 1)
		runs_tracker_kick(RUNS(gw)->tracker);	/* the tracker handles the end */
}

static void
on_status_set(const struct tg_state_res *res, int64_t ended, void *arg)
{
	struct runs_bg *b = arg;

	b->op = NULL;
	status_recorded(b->gw, res, ended, b->id);
	runs_bg_free(b);
}

void
runs_status_seen(struct gw *gw, const struct gw_answer *a, const char *id, const char *body,
    size_t len)
{
	enum tg_run_status st;
	struct runs_bg *b;
	int64_t done;

	if (gw->state == NULL || status_parse(body, len, &st, &done) != 0)
		return;
	b = runs_bg_new(gw, id);
	if (a != NULL)
		b->obs = gw_answer_hold(a);	/* its clients wait until it is recorded */
	runs_bg_wait(b, tg_state_runs_set_status(gw->state, id, st, done, tg_clock_now_ms(),
	    on_status_set, b));
}

/* The held status answer is recorded: relayed as the vendor gave it. */
static void
on_status_held(const struct tg_state_res *res, int64_t ended, void *arg)
{
	struct gw_req *r = arg;

	runs_req_of(r)->op = NULL;
	status_recorded(r->gw, res, ended, tg_route_param(&r->m, "id"));
	gw_req_reply_buf(r, r->upstream_status, NULL, r->capture);	/* frees r */
}

int
runs_status_done(struct gw_req *r, enum tg_up_error uerr, struct evbuffer *capture)
{
	const char *id = tg_route_param(&r->m, "id");
	enum tg_run_status st;
	int64_t done;

	if (uerr != TG_UP_OK)
		return 0;		/* the core answers a broken answer */
	if (capture == NULL) {
		gw_req_reply_error(r, 502, "UPSTREAM_ERROR",
		    "the vendor's status answer was too large to keep");
		return 1;
	}
	if (id == NULL || status_parse((const char *)evbuffer_pullup(capture, -1),
	    evbuffer_get_length(capture), &st, &done) != 0) {
		gw_req_reply_buf(r, r->upstream_status, NULL, capture);	/* frees r */
		return 1;
	}
	runs_req_wait(r, tg_state_runs_set_status(r->gw->state, id, st, done,
	    tg_clock_now_ms(), on_status_held, r));
	return 1;
}

/* ---- completion webhooks ---- */

int
runs_prepare(struct gw_req *r)
{
	const char *hdr = tg_http_header(r->req, "X-Tidegate-Callback-Url");
	struct tg_problems p;
	char *url;

	if (r->gw->state == NULL || r->op != TG_OP_SIM_SUBMIT)
		return 0;
	url = hdr != NULL ? tg_xstrdup(hdr) : tg_http_query(r->req, "callbackUrl");
	if (url == NULL)
		return 0;
	if (r->drop_query == NULL)
		r->drop_query = "callbackUrl";
	memset(&p, 0, sizeof(p));
	p.max = 1;
	if (runs_callback_check(r, url, &p) != 0) {
		free(url);
		gw_reply_problems(r, &p);
		tg_problems_cleanup(&p);
		return -1;
	}
	runs_req_of(r)->callback = url;
	return 0;
}

/* ---- retention: runs the vendor has deleted ---- */

static void
on_archived(const struct tg_state_res *res, const void *data, size_t len, void *arg)
{
	struct gw_req *r = arg;
	struct evbuffer *b;

	runs_req_of(r)->op = NULL;
	if (res->rc != 0) {
		runs_reply_state(r, res, 503, "ARCHIVE_UNAVAILABLE",
		    "the archived results could not be read");
		return;
	}
	b = evbuffer_new();
	evbuffer_add(b, data, len);
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "X-Tidegate-Archived",
	    "true");
	gw_req_reply_buf(r, 200, "application/json", b);
	evbuffer_free(b);
}

static void
reply_gone(struct gw_req *r, const struct tg_run *run)
{
	yajl_gen g = tg_json_gen_new();

	tg_runs_retention_message(g, run, r->id);
	gw_req_reply_json(r, 410, g);
	yajl_gen_free(g);
}

/*
 * What the registry knows of the run r asks for: refuse a run r may not
 * see (keyed.c) or when the registry cannot say, go on to the vendor (not
 * expired, or a run of no key's the registry does not hold), or answer
 * 410 or from the archive. While runs_gone's call is under way q->verdict
 * takes the answer of its on_request hook; later the request goes on with
 * gw_req_continue.
 */
static void
on_gone_run(const struct tg_state_res *res, const struct tg_run *runs, size_t n, int more,
    void *arg)
{
	struct gw_req *r = arg;
	struct runs_req *q = runs_req_of(r);
	int *verdict = q->verdict, held = res->rc == TG_STATE_OK && n > 0;
	int known = res->rc == TG_STATE_OK || res->rc == TG_STATE_NOT_FOUND;

	q->op = NULL;
	q->verdict = NULL;
	if (known && runs_visible(r, held, held ? runs[0].api_key : NULL) &&
	    (!held || !tg_runs_expired(&runs[0], tg_clock_now_ms()))) {
		if (verdict != NULL)
			*verdict = 0;
		else
			gw_req_continue(r);
		return;
	}
	if (verdict != NULL)
		*verdict = -1;		/* the feature replies */
	if (!known)
		runs_reply_state(r, res, 503, "REGISTRY_UNAVAILABLE", "the run registry failed: "
		    "whose run this is cannot be told");
	else if (!runs_visible(r, held, held ? runs[0].api_key : NULL))
		gw_req_reply_error(r, 404, "NOT_FOUND", "no such simulation for this API key");
	else if (r->op == TG_OP_SIM_RESULTS && runs[0].archived)
		runs_req_wait(r, tg_state_runs_archived(r->gw->state, runs[0].simulation_id,
		    on_archived, r));
	else
		reply_gone(r, &runs[0]);
}

int
runs_gone(struct gw_req *r)
{
	enum tg_op op = r->op;
	const char *id = tg_route_param(&r->m, "id");
	struct tg_state_op *o;
	int verdict = 0;

	if (r->gw->state == NULL || id == NULL ||
	    (op != TG_OP_SIM_STATUS && op != TG_OP_SIM_RESULTS))
		return 0;
	runs_req_of(r)->verdict = &verdict;
	if ((o = tg_state_runs_get(r->gw->state, id, on_gone_run, r)) == NULL)
		return verdict;		/* answered at once (r is gone when -1) */
	runs_req_of(r)->verdict = NULL;
	runs_req_of(r)->op = o;
	return -1;			/* on_gone_run goes on or replies */
}

/* ---- metrics ---- */

static void
metrics_write(struct evbuffer *out, const struct tg_runs_stats *st)
{
	int i;

	evbuffer_add_printf(out, "# HELP tidegate_runs Simulation runs in the registry by "
	    "status.\n# TYPE tidegate_runs gauge\n");
	for (i = 0; i < TG_RUN_NSTATUS; i++)
		evbuffer_add_printf(out, "tidegate_runs{status=\"%s\"} %llu\n",
		    tg_runs_status_str((enum tg_run_status)i), (unsigned long long)st->runs[i]);
	evbuffer_add_printf(out, "# HELP tidegate_runs_archived Runs whose results the "
	    "registry keeps.\n# TYPE tidegate_runs_archived gauge\n"
	    "tidegate_runs_archived %llu\n"
	    "# HELP tidegate_runs_archived_bytes Bytes of the archived results.\n"
	    "# TYPE tidegate_runs_archived_bytes gauge\n"
	    "tidegate_runs_archived_bytes %llu\n",
	    (unsigned long long)st->archived, (unsigned long long)st->archived_bytes);
	evbuffer_add_printf(out, "# HELP tidegate_sweeps Sweeps by state.\n"
	    "# TYPE tidegate_sweeps gauge\n"
	    "tidegate_sweeps{state=\"running\"} %llu\ntidegate_sweeps{state=\"done\"} %llu\n",
	    (unsigned long long)st->sweeps_running, (unsigned long long)st->sweeps_done);
	evbuffer_add_printf(out, "# HELP tidegate_sweep_variants_unsubmitted Sweep variants "
	    "not submitted yet: pending, or being submitted.\n"
	    "# TYPE tidegate_sweep_variants_unsubmitted gauge\n"
	    "tidegate_sweep_variants_unsubmitted{state=\"pending\"} %llu\n"
	    "tidegate_sweep_variants_unsubmitted{state=\"submitting\"} %llu\n",
	    (unsigned long long)st->variants_pending,
	    (unsigned long long)st->variants_submitting);
}

static void
on_stats(const struct tg_state_res *res, const struct tg_runs_stats *st, void *arg)
{
	struct runs_bg *b = arg;
	struct gw_scrape *s = b->scrape;

	b->op = NULL;
	if (res->rc != 0)
		tg_log(TG_LOG_WARN, "runs_metrics_failed", TG_LS("error", res->err.msg));
	else
		metrics_write(b->out, st);
	runs_bg_free(b);
	gw_scrape_release(s);
}

void
runs_metrics(struct gw *gw, struct evbuffer *out, struct gw_scrape *s)
{
	struct runs_bg *b;

	if (gw->state == NULL)
		return;
	b = runs_bg_new(gw, NULL);
	b->scrape = s;
	b->out = out;
	gw_scrape_hold(s);
	runs_bg_wait(b, tg_state_runs_stats(gw->state, on_stats, b));
}
