/*
 * sim.c - the emulator's simulation API, answered identically on the "sim"
 * and "design" hosts, which share this state: cases (list, get), runs
 * (submit, status, list, results) and their retention. server.c routes
 * here after checking the bearer token of the auth listener.
 *
 * A run's outcome is settled when it is submitted - validity, results and
 * the sim.failure_rate draw - and the clock reveals it: IN_PROGRESS until
 * submittedAt + sim.run_time, then COMPLETED or FAILED, deleted at
 * submittedAt + sim.retention. All of it is read from tg_clock_now_ms on
 * access, so advancing the test clock moves runs along. Only the results
 * summary is kept, never the submitted case, so memory stays bounded by
 * the number of runs within retention.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/crypto.h"
#include "tidegate/http.h"
#include "tidegate/ids.h"
#include "tidegate/json.h"
#include "tidegate/log.h"
#include "emu.h"
#include "emu_case.h"

enum { RUN_IN_PROGRESS, RUN_COMPLETED, RUN_FAILED };
static const char *const status_names[] = { "IN_PROGRESS", "COMPLETED", "FAILED" };

struct run {
	char id[TG_UUID_LEN];
	char *case_id;
	unsigned long long seq;		/* submission order, for the listing */
	int64_t submitted_ms, ends_ms, expires_ms;
	int failed;
	yajl_val results;		/* NULL when the run fails */
};

#define RUNS_DIR "runs"

/* Submission order across the process; one emulator per process, like server.c. */
static unsigned long long next_seq;

static void
run_free(void *p)
{
	struct run *r = p;

	if (r == NULL)
		return;
	yajl_tree_free(r->results);
	free(r->case_id);
	free(r);
}

static int
run_status(const struct run *r, int64_t now)
{
	if (now < r->ends_ms)
		return RUN_IN_PROGRESS;
	return r->failed ? RUN_FAILED : RUN_COMPLETED;
}

/* Collect first: deleting while walking the map could skip entries. */
static void
sweep(struct tg_emu *emu)
{
	int64_t now = tg_clock_now_ms();
	size_t pos = 0, n = 0, i;
	char (*gone)[TG_UUID_LEN] = NULL;
	const char *k;
	void *v;

	while (tg_map_next(emu->sims, &pos, &k, &v)) {
		if (now < ((struct run *)v)->expires_ms)
			continue;
		gone = tg_xrealloc(gone, (n + 1) * sizeof(*gone));
		memcpy(gone[n++], ((struct run *)v)->id, TG_UUID_LEN);
	}
	for (i = 0; i < n; i++) {
		tg_map_del(emu->sims, gone[i]);
		emu_store_del(emu, RUNS_DIR, gone[i]);
	}
	free(gone);
}

/* Deterministic from the id, so a run's fate does not depend on timing. */
static int
unlucky(const char *id, double rate)
{
	uint8_t h[TG_SHA256_LEN];
	uint64_t u = 0;
	int i;

	if (rate <= 0)
		return 0;
	tg_sha256(id, strlen(id), h);
	for (i = 0; i < 8; i++)
		u = u << 8 | h[i];
	return (double)u / 18446744073709551616.0 < rate;
}

static struct run *
run_new(struct tg_emu *emu, const char *case_id, yajl_val sub, yajl_val base)
{
	struct run *r = tg_xcalloc(1, sizeof(*r));
	struct tg_err err;

	tg_id_uuid4(r->id);
	r->case_id = tg_xstrdup(case_id);
	r->seq = ++next_seq;
	r->submitted_ms = tg_clock_now_ms();
	r->ends_ms = r->submitted_ms + emu->cfg->sim_run_time;
	r->expires_ms = r->submitted_ms + emu->cfg->sim_retention;
	if (emu_case_validate(sub, base, &err) != 0) {
		r->failed = 1;
	} else if (unlucky(r->id, emu->cfg->sim_failure_rate)) {
		r->failed = 1;
		tg_err_set(&err, "drawn by sim.failure_rate");
	} else {
		r->results = emu_results_compute(sub, emu_case_kind(base));
	}
	/* The API never says why a run fails; the emulator's log does. */
	if (r->failed)
		tg_log(TG_LOG_INFO, "simulation will fail", TG_LS("simulationId", r->id),
		    TG_LS("caseId", case_id), TG_LS("reason", err.msg));
	return r;
}

/* ---- data_dir: a run is its settled outcome; the case is not kept ---- */

static void
run_save(struct tg_emu *emu, const struct run *r)
{
	yajl_gen g;

	if (emu->cfg->data_dir == NULL)
		return;
	g = tg_json_gen_new();
	yajl_gen_map_open(g);
	tg_json_kv_str(g, "simulationId", r->id);
	tg_json_kv_str(g, "caseId", r->case_id);
	tg_json_kv_int(g, "seq", (long long)r->seq);
	tg_json_kv_int(g, "submittedMs", r->submitted_ms);
	tg_json_kv_int(g, "endsMs", r->ends_ms);
	tg_json_kv_int(g, "expiresMs", r->expires_ms);
	tg_json_kv_bool(g, "failed", r->failed);
	if (r->results != NULL) {
		tg_json_str(g, "results");
		tg_json_gen_val(g, r->results);
	}
	yajl_gen_map_close(g);
	emu_store_put(emu, RUNS_DIR, r->id, g);
	yajl_gen_free(g);
}

static int64_t
int_of(yajl_val doc, const char *key)
{
	yajl_val v = tg_json_get(doc, key);

	return v != NULL && YAJL_IS_INTEGER(v) ? YAJL_GET_INTEGER(v) : EMU_NO_TIME;
}

/* Takes ownership of doc; a file that does not hold a whole run is dropped. */
static void
on_run_loaded(struct tg_emu *emu, const char *name, yajl_val doc)
{
	const char *id = tg_json_get_str(doc, "simulationId"), *cid = tg_json_get_str(doc, "caseId");
	yajl_val res = tg_json_get(doc, "results"), failed = tg_json_get(doc, "failed");
	struct run *r;

	if (id == NULL || strcmp(id, name) != 0 || strlen(id) >= TG_UUID_LEN || cid == NULL ||
	    int_of(doc, "seq") < 0 || int_of(doc, "expiresMs") == EMU_NO_TIME ||
	    int_of(doc, "endsMs") == EMU_NO_TIME || int_of(doc, "submittedMs") == EMU_NO_TIME ||
	    !((failed != NULL && YAJL_IS_TRUE(failed)) || (res != NULL && YAJL_IS_OBJECT(res)))) {
		emu_store_del(emu, RUNS_DIR, name);
		yajl_tree_free(doc);
		return;
	}
	r = tg_xcalloc(1, sizeof(*r));
	snprintf(r->id, sizeof(r->id), "%s", id);
	r->case_id = tg_xstrdup(cid);
	r->seq = (unsigned long long)int_of(doc, "seq");
	r->submitted_ms = int_of(doc, "submittedMs");
	r->ends_ms = int_of(doc, "endsMs");
	r->expires_ms = int_of(doc, "expiresMs");
	r->failed = failed != NULL && YAJL_IS_TRUE(failed);
	if (!r->failed)
		r->results = emu_store_take(doc, "results");
	if (r->seq > next_seq)
		next_seq = r->seq;
	tg_map_put(emu->sims, r->id, r);
	yajl_tree_free(doc);
}

void
emu_sim_load(struct tg_emu *emu)
{
	size_t n = emu_store_load(emu, RUNS_DIR, on_run_loaded);

	sweep(emu);
	tg_log(TG_LOG_INFO, "data_dir_runs", TG_LI("loaded", (long long)n),
	    TG_LI("kept", (long long)tg_map_count(emu->sims)));
}

static void
gen_run(yajl_gen g, const struct run *r, int64_t now)
{
	char iso[TG_ISO_LEN];
	int st = run_status(r, now);

	yajl_gen_map_open(g);
	tg_json_kv_str(g, "simulationId", r->id);
	tg_json_kv_str(g, "caseId", r->case_id);
	tg_json_kv_str(g, "status", status_names[st]);
	tg_clock_iso(r->submitted_ms, iso);
	tg_json_kv_str(g, "submittedAt", iso);
	if (st != RUN_IN_PROGRESS) {
		tg_clock_iso(r->ends_ms, iso);
		tg_json_kv_str(g, "completedAt", iso);
	}
	tg_clock_iso(r->expires_ms, iso);
	tg_json_kv_str(g, "expiresAt", iso);
	yajl_gen_map_close(g);
}

static void
reply_run(struct evhttp_request *req, int status, const struct run *r)
{
	yajl_gen g = tg_json_gen_new();

	gen_run(g, r, tg_clock_now_ms());
	tg_reply_json(req, status, g);
	yajl_gen_free(g);
}

/* A run that exists and is within retention, or NULL after replying 404. */
static struct run *
find_run(struct tg_emu *emu, struct evhttp_request *req, const char *id)
{
	struct run *r;

	sweep(emu);
	if ((r = tg_map_get(emu->sims, id)) == NULL)
		emu_reply_error(req, 404, "no such simulation (unknown, or deleted after "
		    "the retention period)");
	return r;
}

void
emu_h_cases_list(struct tg_emu *emu, struct evhttp_request *req, const char *const *p)
{
	yajl_gen g = tg_json_gen_new();
	yajl_val c;
	size_t i;

	yajl_gen_array_open(g);
	for (i = 0; i < emu->ncases; i++) {
		c = tg_map_get(emu->cases, emu->case_ids[i]);
		yajl_gen_map_open(g);
		tg_json_kv_str(g, "caseId", emu->case_ids[i]);
		tg_json_kv_str(g, "name", tg_json_get_str(c, "name"));
		tg_json_kv_str(g, "type", emu_case_kind_name(emu_case_kind(c)));
		yajl_gen_map_close(g);
	}
	yajl_gen_array_close(g);
	tg_reply_json(req, 200, g);
	yajl_gen_free(g);
}

void
emu_h_case_get(struct tg_emu *emu, struct evhttp_request *req, const char *const *p)
{
	yajl_val c = tg_map_get(emu->cases, p[0]);
	yajl_gen g;

	if (c == NULL) {
		emu_reply_error(req, 404, "no such case");
		return;
	}
	g = tg_json_gen_new();
	tg_json_gen_val(g, c);
	tg_reply_json(req, 200, g);
	yajl_gen_free(g);
}

void
emu_h_sim_submit(struct tg_emu *emu, struct evhttp_request *req, const char *const *p)
{
	struct tg_err err;
	size_t len;
	char *body = tg_http_body(req, &len), loc[64];
	yajl_val v = tg_json_parse(body, len, &err), base;
	const char *cid;
	struct run *r;

	free(body);
	sweep(emu);
	if (v == NULL || !YAJL_IS_OBJECT(v)) {
		emu_reply_error(req, 400, v ? "body must be a JSON object: an edited partial case" :
		    err.msg);
		goto done;
	}
	if ((cid = tg_json_get_str(v, "caseId")) == NULL) {
		emu_reply_error(req, 400, "caseId (a string) is required");
		goto done;
	}
	if ((base = tg_map_get(emu->cases, cid)) == NULL) {
		emu_reply_error(req, 404, "no such case");
		goto done;
	}
	r = run_new(emu, cid, v, base);
	tg_map_put(emu->sims, r->id, r);
	run_save(emu, r);
	snprintf(loc, sizeof(loc), "/api/v1/simulations/%s", r->id);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Location", loc);
	reply_run(req, 201, r);
done:
	yajl_tree_free(v);
}

void
emu_h_sim_status(struct tg_emu *emu, struct evhttp_request *req, const char *const *p)
{
	struct run *r = find_run(emu, req, p[0]);

	if (r != NULL)
		reply_run(req, 200, r);
}

void
emu_h_sim_results(struct tg_emu *emu, struct evhttp_request *req, const char *const *p)
{
	struct run *r = find_run(emu, req, p[0]);
	yajl_val res;
	yajl_gen g;
	size_t i;

	if (r == NULL)
		return;
	switch (run_status(r, tg_clock_now_ms())) {
	case RUN_IN_PROGRESS:
		emu_reply_error(req, 409, "simulation is still in progress");
		return;
	case RUN_FAILED:
		emu_reply_error(req, 409, "simulation failed");
		return;
	}
	res = r->results;
	g = tg_json_gen_new();
	yajl_gen_map_open(g);
	tg_json_kv_str(g, "simulationId", r->id);
	tg_json_kv_str(g, "caseId", r->case_id);
	for (i = 0; res != NULL && i < res->u.object.len; i++) {
		tg_json_str(g, res->u.object.keys[i]);
		tg_json_gen_val(g, res->u.object.values[i]);
	}
	yajl_gen_map_close(g);
	tg_reply_json(req, 200, g);
	yajl_gen_free(g);
}

static int
by_seq(const void *a, const void *b)
{
	const struct run *x = *(const struct run *const *)a, *y = *(const struct run *const *)b;

	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Optional filters: ?caseId=...&status=IN_PROGRESS|COMPLETED|FAILED */
void
emu_h_sim_list(struct tg_emu *emu, struct evhttp_request *req, const char *const *p)
{
	char *cid = tg_http_query(req, "caseId"), *st = tg_http_query(req, "status");
	int64_t now = tg_clock_now_ms();
	struct run **runs = NULL;
	size_t pos = 0, n = 0, i;
	yajl_gen g = NULL;
	const char *k;
	void *v;

	sweep(emu);
	if (st != NULL && strcmp(st, "IN_PROGRESS") != 0 && strcmp(st, "COMPLETED") != 0 &&
	    strcmp(st, "FAILED") != 0) {
		emu_reply_error(req, 400, "status must be IN_PROGRESS, COMPLETED or FAILED");
		goto done;
	}
	runs = tg_xcalloc(tg_map_count(emu->sims), sizeof(*runs));
	while (tg_map_next(emu->sims, &pos, &k, &v)) {
		if ((cid == NULL || strcmp(cid, ((struct run *)v)->case_id) == 0) && (st == NULL ||
		    strcmp(st, status_names[run_status(v, now)]) == 0))
			runs[n++] = v;
	}
	qsort(runs, n, sizeof(*runs), by_seq);
	g = tg_json_gen_new();
	yajl_gen_array_open(g);
	for (i = 0; i < n; i++)
		gen_run(g, runs[i], now);
	yajl_gen_array_close(g);
	tg_reply_json(req, 200, g);
done:
	if (g != NULL)
		yajl_gen_free(g);
	free(runs);
	free(cid);
	free(st);
}

void
emu_sim_init(struct tg_emu *emu)
{
	emu->sims = tg_map_new(run_free);
	emu_cases_init(emu);
}

void
emu_sim_free(struct tg_emu *emu)
{
	tg_map_free(emu->sims);
	emu->sims = NULL;
	emu_cases_free(emu);
}
