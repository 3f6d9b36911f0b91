/*
 * runs_json.c - the run registry's records as the extension API and the
 * run webhooks show them: a run, a page of runs, a run's terminal event
 * and the 410 body of a run past the vendor's retention
 * (include/tidegate/registry.h). Called by the gateway's runs API, run
 * tracker and status handlers, and by sweep.c for its summaries.
 */
#include <stdlib.h>
#include <string.h>

#include "tidegate/clock.h"
#include "tidegate/json.h"
#include "tidegate/registry.h"
#include "runs_json.h"

char *
tg_runs_url_redact(const char *url)
{
	size_t n = strcspn(url, "?#");

	return url[n] == '?' ? tg_xasprintf("%.*s?…", (int)n, url) : tg_xstrndup(url, n);
}

void
tg_runs_kv_time(yajl_gen g, const char *k, int64_t ms)
{
	char iso[TG_ISO_LEN];

	tg_json_str(g, k);
	if (ms == 0) {
		yajl_gen_null(g);
		return;
	}
	tg_clock_iso(ms, iso);
	tg_json_str(g, iso);
}

void
tg_run_json(yajl_gen g, const struct tg_run *run)
{
	char *url = run->callback_url ? tg_runs_url_redact(run->callback_url) : NULL;

	yajl_gen_map_open(g);
	tg_json_kv_str(g, "simulationId", run->simulation_id);
	tg_json_kv_str(g, "caseId", run->case_id);
	tg_json_kv_str(g, "caseSha256", run->case_sha256);
	tg_json_kv_str(g, "host", run->host);
	tg_json_kv_str(g, "apiKey", run->api_key);
	tg_json_kv_str(g, "status", tg_runs_status_str(run->status));
	tg_json_kv_str(g, "vendorStatus", run->vendor_status >= 0 ?
	    tg_runs_status_str(run->vendor_status) : NULL);
	tg_runs_kv_time(g, "submittedAt", run->submitted_at);
	tg_runs_kv_time(g, "expiresAt", run->expires_at);
	tg_runs_kv_time(g, "statusAt", run->status_at);
	tg_runs_kv_time(g, "completedAt", run->completed_at);
	tg_runs_kv_time(g, "nextCheckAt", run->next_check_at);
	tg_json_kv_int(g, "checks", run->checks);
	tg_json_kv_str(g, "validation", run->validation);
	tg_json_kv_str(g, "failure", run->failure);
	tg_json_kv_str(g, "lastCheckError", run->last_error);
	tg_json_kv_str(g, "callbackUrl", url);
	tg_json_kv_str(g, "sweepId", run->sweep_id);
	tg_json_kv_str(g, "variant", run->variant);
	tg_json_kv_bool(g, "archived", run->archived);
	tg_json_kv_int(g, "resultsSize", run->results_size);
	tg_json_str(g, "figures");
	tg_json_gen_val(g, run->figures);
	yajl_gen_map_close(g);
	free(url);
}

void
tg_runs_page_json(yajl_gen g, const struct tg_run *runs, size_t n,
    const struct tg_runs_query *q, int more)
{
	size_t i;

	yajl_gen_map_open(g);
	tg_json_str(g, "runs");
	yajl_gen_array_open(g);
	for (i = 0; i < n; i++)
		tg_run_json(g, &runs[i]);
	yajl_gen_array_close(g);
	tg_json_kv_int(g, "limit", q->limit == 0 ? TG_RUNS_LIST_LIMIT : q->limit > TG_RUNS_LIST_MAX ?
	    TG_RUNS_LIST_MAX : (long long)q->limit);
	tg_json_kv_int(g, "offset", (long long)q->offset);
	tg_json_kv_bool(g, "more", more);
	yajl_gen_map_close(g);
}

void
tg_runs_event_json(yajl_gen g, const struct tg_run *run, int64_t now_ms)
{
	static const char *const types[TG_RUN_NSTATUS] = {
		"simulation.in_progress", "simulation.completed", "simulation.failed",
		"simulation.expired", "simulation.unknown",
	};

	yajl_gen_map_open(g);
	tg_json_kv_str(g, "type", types[(unsigned)run->status < TG_RUN_NSTATUS ?
	    run->status : TG_RUN_UNKNOWN]);
	tg_runs_kv_time(g, "timestamp", now_ms);
	tg_json_str(g, "data");
	tg_run_json(g, run);
	yajl_gen_map_close(g);
}

void
tg_runs_retention_message(yajl_gen g, const struct tg_run *run, const char *request_id)
{
	char sub[TG_ISO_LEN], exp[TG_ISO_LEN], *msg;
	int st = run->vendor_status >= 0 ? run->vendor_status : (int)run->status;

	tg_clock_iso(run->submitted_at, sub);
	tg_clock_iso(run->expires_at, exp);
	msg = tg_xasprintf("simulation %s was submitted at %s; the vendor deleted its status "
	    "and results when it expired at %s%s", run->simulation_id, sub, exp,
	    run->archived ? "; the gateway kept its results (archived)" : "");
	yajl_gen_map_open(g);
	tg_json_kv_int(g, "statusCode", 410);
	tg_json_kv_str(g, "error", "GONE");
	tg_json_kv_str(g, "message", msg);
	if (request_id != NULL)
		tg_json_kv_str(g, "requestId", request_id);
	tg_json_kv_str(g, "simulationId", run->simulation_id);
	tg_json_kv_str(g, "submittedAt", sub);
	tg_json_kv_str(g, "expiredAt", exp);
	tg_json_kv_str(g, "status", tg_runs_status_str(st));
	tg_json_kv_bool(g, "archived", run->archived);
	yajl_gen_map_close(g);
	free(msg);
}
