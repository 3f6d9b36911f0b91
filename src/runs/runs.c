/*
 * runs.c - the requests of the runs feature that go to the vendor: a POST
 * /simulations the vendor accepts (201) is held until the run is committed
 * to the registry (include/tidegate/registry.h), then answered, so that
 * every simulationId a client has seen is tracked; the statuses clients
 * see are recorded; GETs of a run the vendor has deleted are answered 410
 * (or from the archive); a run that ended with a callback URL gets its
 * webhook queued. Called by feature.c.
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
#include "tidegate/outbox.h"
#include "runs_int.h"

void
tg_runs_store_opts(const struct gw_config *c, struct tg_runs_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->path = c->runs_db_path;
	o->archive_max_run = c->runs_archive_max;
	o->archive_max_total = c->runs_archive_max_total;
	o->archive_keep_ms = c->runs_archive_keep;
	o->grace_ms = c->runs_grace > 0 ? c->runs_grace : 1;	/* 0 would mean the default */
	o->sync_normal = strcmp(c->runs_sync, "normal") == 0;
}

struct tg_runs *
runs_registry_open(const struct gw_config *c, struct tg_err *err)
{
	struct tg_runs_opts o;
	struct tg_runs *runs;

	tg_runs_store_opts(c, &o);
	if ((runs = tg_runs_open(&o, err)) != NULL)
		tg_log(TG_LOG_INFO, "runs_open", TG_LS("db", c->runs_db_path),
		    TG_LI("archive", c->runs_archive));
	return runs;
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
 * submission has them from its check (validate.c, perhaps off the loop):
 * a large case is not parsed and hashed again on the loop. *cs is the
 * parsed body when it had to be read here.
 */
static void
sent_case(struct gw_req *r, yajl_val ans, struct tg_run_new *n, char *sha, yajl_val *cs)
{
	struct evbuffer *sent = r->body ? r->body : evhttp_request_get_input_buffer(r->req);
	const void *bytes;
	size_t len;

	n->case_id = tg_json_get_str(ans, "caseId");
	if (r->case_sha256 != NULL) {
		n->case_sha256 = r->case_sha256;
		if (n->case_id == NULL)
			n->case_id = r->case_id;
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

/* Record the run of the held answer; 0, or -1 with err. */
static int
record(struct gw_req *r, yajl_val ans, struct tg_err *err)
{
	char sha[TG_RUNS_SHA_LEN];
	struct tg_run_new n;
	yajl_val cs = NULL;
	const char *st;
	int rc = -1;

	memset(&n, 0, sizeof(n));
	n.simulation_id = tg_json_get_str(ans, "simulationId");
	if (n.simulation_id == NULL || *n.simulation_id == '\0') {
		tg_err_set(err, "the vendor's answer carried no simulationId");
		goto done;
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
	n.callback_url = runs_req_find(r) != NULL ? runs_req_find(r)->callback : NULL;
	rc = tg_runs_add(RUNS(r->gw)->reg, &n, tg_clock_now_ms(), err);
	if (rc == TG_RUNS_CONFLICT)
		rc = 0;		/* already recorded: the vendor repeated an id */
	if (rc == 0)
		runs_tracker_kick(RUNS(r->gw)->tracker);
	if (rc == 0)
		tg_log(TG_LOG_INFO, "run_recorded", TG_LS("id", r->id),
		    TG_LS("simulationId", n.simulation_id), TG_LS("key", n.api_key),
		    TG_LS("host", n.host));
done:
	yajl_tree_free(cs);
	return rc;
}

int
runs_done(struct gw_req *r, enum tg_up_error uerr, struct evbuffer *capture)
{
	struct tg_err err;
	yajl_val ans;

	if (uerr != TG_UP_OK || capture == NULL) {
		gw_req_reply_error(r, 502, "UPSTREAM_ERROR", "the vendor's answer to the "
		    "submission broke off: the simulation may have been accepted, but it is "
		    "not tracked");
		return 1;
	}
	ans = tg_json_parse((const char *)evbuffer_pullup(capture, -1),
	    evbuffer_get_length(capture), NULL);
	if (record(r, ans, &err) != 0) {
		tg_log(TG_LOG_ERROR, "run_record_failed", TG_LS("id", r->id),
		    TG_LS("error", err.msg));
		evhttp_add_header(evhttp_request_get_output_headers(r->req),
		    "X-Tidegate-Run-Tracked", "false");
	}
	yajl_tree_free(ans);
	gw_req_reply_buf(r, 201, "application/json", capture);	/* frees r */
	return 1;
}

/* ---- statuses clients saw ---- */

void
runs_status_seen(struct gw *gw, const char *id, const char *body, size_t len)
{
	yajl_val v;
	const char *s, *c;
	struct tg_err err;
	int64_t done = 0;
	int st, rc;

	if (RUNS(gw)->reg == NULL || (v = tg_json_parse(body, len, NULL)) == NULL)
		return;
	s = tg_json_get_str(v, "status");
	if (s == NULL || (st = tg_runs_status_parse(s)) < 0)
		goto done;
	if ((c = tg_json_get_str(v, "completedAt")) != NULL)
		(void)tg_clock_parse_iso(c, &done);
	rc = tg_runs_set_status(RUNS(gw)->reg, id, st, done, tg_clock_now_ms(), &err);
	if (rc == -1)
		tg_log(TG_LOG_ERROR, "run_status_record_failed", TG_LS("simulationId", id),
		    TG_LS("error", err.msg));
	else if (rc == 1)
		runs_tracker_kick(RUNS(gw)->tracker);	/* the tracker handles the end */
done:
	yajl_tree_free(v);
}


/* ---- completion webhooks ---- */

int
runs_prepare(struct gw_req *r)
{
	const char *hdr = tg_http_header(r->req, "X-Tidegate-Callback-Url");
	struct tg_problems p;
	char *url;

	if (RUNS(r->gw)->reg == NULL || r->op != TG_OP_SIM_SUBMIT)
		return 0;
	url = hdr != NULL ? tg_xstrdup(hdr) : tg_http_query(r->req, "callbackUrl");
	if (url == NULL)
		return 0;
	if (r->drop_query == NULL)
		r->drop_query = "callbackUrl";
	memset(&p, 0, sizeof(p));
	p.max = 1;
	if (gw_callback_check(r, url, r->key ? r->key->name : NULL, &p) != 0) {
		free(url);
		gw_reply_problems(r, &p);
		tg_problems_cleanup(&p);
		return -1;
	}
	runs_req_of(r)->callback = url;
	return 0;
}

/* Enqueue the webhook of a run that ended, when its submission named one;
 * a run of a sweep moves its sweep on instead. */
void
runs_notify(struct gw *gw, const char *id)
{
	struct tg_outbox_new j;
	char wid[TG_WEBHOOK_ID_LEN];
	const unsigned char *buf;
	struct tg_run run;
	struct tg_err err;
	yajl_gen g = NULL;
	size_t len;
	int64_t now = tg_clock_now_ms();

	memset(&run, 0, sizeof(run));
	if (tg_runs_get(RUNS(gw)->reg, id, &run, &err) != 0)
		goto done;
	if (run.sweep_id != NULL)	/* a sweep's runs report through the sweep */
		runs_sweeper_run_ended(RUNS(gw)->sweeper, run.sweep_id);
	if (gw->outbox == NULL || run.callback_url == NULL)
		goto done;
	memset(&j, 0, sizeof(j));
	j.url = run.callback_url;
	j.secret_ref = gw_config_wh_secret_ref(&gw->rt->cfg, run.api_key);
	j.api_key = run.api_key;
	j.kind = "simulation";
	j.correlation_id = run.simulation_id;
	j.service = "sim";
	if (j.secret_ref == NULL) {
		tg_log(TG_LOG_WARN, "run_webhook_skipped", TG_LS("simulationId", id),
		    TG_LS("error", "no webhook signing secret"));
		goto done;
	}
	g = tg_json_gen_new();
	tg_runs_event_json(g, &run, now);
	yajl_gen_get_buf(g, &buf, &len);
	if (tg_outbox_add(gw->outbox, &j, now, wid, &err) != 0 ||
	    tg_outbox_payload_set(gw->outbox, wid, buf, len, now, &err) != 0) {
		tg_log(TG_LOG_ERROR, "run_webhook_failed", TG_LS("simulationId", id),
		    TG_LS("error", err.msg));
		goto done;
	}
	tg_log(TG_LOG_INFO, "run_webhook_added", TG_LS("id", wid), TG_LS("simulationId", id),
	    TG_LS("key", run.api_key));
done:
	if (g != NULL)
		yajl_gen_free(g);
	tg_run_cleanup(&run);
}

/* ---- retention: runs the vendor has deleted ---- */

static void
reply_archived(struct gw_req *r, const struct tg_run *run)
{
	struct evbuffer *b;
	struct tg_err err;
	size_t len;
	void *data;

	if (tg_runs_archived(RUNS(r->gw)->reg, run->simulation_id, &data, &len, &err) != 0) {
		gw_req_reply_error(r, 503, "ARCHIVE_UNAVAILABLE",
		    "the archived results could not be read");
		return;
	}
	b = evbuffer_new();
	evbuffer_add(b, data, len);
	free(data);
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

int
runs_gone(struct gw_req *r)
{
	enum tg_op op = r->op;
	const char *id = tg_route_param(&r->m, "id");
	struct tg_run run;
	struct tg_err err;
	int rc = 0;

	if (RUNS(r->gw)->reg == NULL || id == NULL ||
	    (op != TG_OP_SIM_STATUS && op != TG_OP_SIM_RESULTS))
		return 0;
	memset(&run, 0, sizeof(run));
	if (tg_runs_get(RUNS(r->gw)->reg, id, &run, &err) != 0 ||
	    !tg_runs_expired(&run, tg_clock_now_ms()))
		goto done;
	rc = -1;
	if (op == TG_OP_SIM_RESULTS && run.archived)
		reply_archived(r, &run);
	else
		reply_gone(r, &run);
done:
	tg_run_cleanup(&run);
	return rc;
}

void
runs_metrics(struct gw *gw, struct evbuffer *out)
{
	struct tg_runs_stats st;
	struct tg_err err;
	int i;

	if (RUNS(gw)->reg == NULL)
		return;
	if (tg_runs_stats(RUNS(gw)->reg, &st, &err) != 0) {
		tg_log(TG_LOG_WARN, "runs_metrics_failed", TG_LS("error", err.msg));
		return;
	}
	evbuffer_add_printf(out, "# HELP tidegate_runs Simulation runs in the registry by "
	    "status.\n# TYPE tidegate_runs gauge\n");
	for (i = 0; i < TG_RUN_NSTATUS; i++)
		evbuffer_add_printf(out, "tidegate_runs{status=\"%s\"} %llu\n",
		    tg_runs_status_str((enum tg_run_status)i), (unsigned long long)st.runs[i]);
	evbuffer_add_printf(out, "# HELP tidegate_runs_archived Runs whose results the "
	    "registry keeps.\n# TYPE tidegate_runs_archived gauge\n"
	    "tidegate_runs_archived %llu\n"
	    "# HELP tidegate_runs_archived_bytes Bytes of the archived results.\n"
	    "# TYPE tidegate_runs_archived_bytes gauge\n"
	    "tidegate_runs_archived_bytes %llu\n",
	    (unsigned long long)st.archived, (unsigned long long)st.archived_bytes);
	evbuffer_add_printf(out, "# HELP tidegate_sweeps Sweeps by state.\n"
	    "# TYPE tidegate_sweeps gauge\n"
	    "tidegate_sweeps{state=\"running\"} %llu\ntidegate_sweeps{state=\"done\"} %llu\n",
	    (unsigned long long)st.sweeps_running, (unsigned long long)st.sweeps_done);
	evbuffer_add_printf(out, "# HELP tidegate_sweep_variants_unsubmitted Sweep variants "
	    "not submitted yet: pending, or being submitted.\n"
	    "# TYPE tidegate_sweep_variants_unsubmitted gauge\n"
	    "tidegate_sweep_variants_unsubmitted{state=\"pending\"} %llu\n"
	    "tidegate_sweep_variants_unsubmitted{state=\"submitting\"} %llu\n",
	    (unsigned long long)st.variants_pending, (unsigned long long)st.variants_submitting);
}
