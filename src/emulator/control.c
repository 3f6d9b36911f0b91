/*
 * control.c - the emulator's control API for tests and benchmarks, served
 * under /__emulator/ on every listener and never counted or faulted:
 * call counters, fault injection, token revocation and the test clock.
 * Revocations and clock moves are saved to data_dir (meta.c); counters and
 * faults are not kept across a restart.
 */
#include <stdlib.h>
#include <string.h>

#include "tidegate/http.h"
#include "tidegate/json.h"
#include "emu.h"

void
emu_faults_clear(struct tg_emu *emu)
{
	size_t i;

	for (i = 0; i < emu->nfaults; i++) {
		free(emu->faults[i].method);
		free(emu->faults[i].path);
	}
	free(emu->faults);
	emu->faults = NULL;
	emu->nfaults = 0;
}

static void
gen_counts(yajl_gen g, const struct tg_map *m)
{
	const char *k;
	void *v;
	size_t pos = 0;

	yajl_gen_map_open(g);
	while (tg_map_next(m, &pos, &k, &v))
		tg_json_kv_int(g, k, *(long long *)v);
	yajl_gen_map_close(g);
}

static void
stats(struct tg_emu *emu, struct evhttp_request *req)
{
	yajl_gen g = tg_json_gen_new();
	int l;

	yajl_gen_map_open(g);
	tg_json_str(g, "calls");
	gen_counts(g, emu->calls);
	tg_json_str(g, "byListener");
	yajl_gen_map_open(g);
	for (l = 0; l < EMU_NLISTENERS; l++) {
		tg_json_str(g, emu_listener_name(l));
		gen_counts(g, emu->calls_by[l]);
	}
	yajl_gen_map_close(g);
	tg_json_kv_int(g, "exports", (long long)tg_map_count(emu->exports));
	tg_json_kv_int(g, "imports", (long long)tg_map_count(emu->imports));
	tg_json_kv_int(g, "simulations", (long long)tg_map_count(emu->sims));
	yajl_gen_map_close(g);
	tg_reply_json(req, 200, g);
	yajl_gen_free(g);
}

static void
stats_reset(struct tg_emu *emu)
{
	int l;

	tg_map_free(emu->calls);
	emu->calls = tg_map_new(free);
	for (l = 0; l < EMU_NLISTENERS; l++) {
		tg_map_free(emu->calls_by[l]);
		emu->calls_by[l] = tg_map_new(free);
	}
}

static void
ok(struct evhttp_request *req)
{
	yajl_gen g = tg_json_gen_new();

	yajl_gen_map_open(g);
	tg_json_kv_bool(g, "ok", 1);
	yajl_gen_map_close(g);
	tg_reply_json(req, 200, g);
	yajl_gen_free(g);
}

static int
num(yajl_val rule, const char *key, double def, double lo, double hi, double *out)
{
	yajl_val v = tg_json_get(rule, key);

	*out = def;
	if (v == NULL)
		return 0;
	if (!YAJL_IS_NUMBER(v) || YAJL_GET_DOUBLE(v) < lo || YAJL_GET_DOUBLE(v) > hi)
		return -1;
	*out = YAJL_GET_DOUBLE(v);
	return 0;
}

static int
listener_of(const char *name)
{
	int l;

	for (l = 0; l < EMU_NLISTENERS; l++)
		if (strcmp(emu_listener_name(l), name) == 0)
			return l;
	return -2;
}

/* Parse one rule object into f; returns an error message or NULL. */
static const char *
parse_rule(yajl_val r, struct emu_fault *f)
{
	const char *m = tg_json_get_str(r, "method"), *p = tg_json_get_str(r, "path");
	const char *l = tg_json_get_str(r, "listener");
	double lat, rate, st, ra, cnt;
	yajl_val reset = tg_json_get(r, "reset");

	if (!YAJL_IS_OBJECT(r))
		return "each rule must be an object";
	if (num(r, "latencyMs", 0, 0, 600000, &lat) || num(r, "rate", 1, 0, 1, &rate) ||
	    num(r, "status", 0, 0, 599, &st) || num(r, "retryAfter", 0, 0, 86400, &ra) ||
	    num(r, "count", -1, -1, 1e12, &cnt))
		return "latencyMs 0..600000, rate 0..1, status 0..599, retryAfter 0..86400, "
		    "count >= -1 must be numbers";
	if (st != 0 && st < 100)
		return "status must be an HTTP status";
	if (reset != NULL && !YAJL_IS_TRUE(reset) && !YAJL_IS_FALSE(reset))
		return "reset must be a boolean";
	memset(f, 0, sizeof(*f));
	f->listener = l ? listener_of(l) : -1;
	if (f->listener == -2)
		return "listener must be dex, sim, design or auth";
	f->method = m ? tg_xstrdup(m) : NULL;
	f->path = p ? tg_xstrdup(p) : NULL;
	f->latency_ms = (int64_t)lat;
	f->rate = rate;
	f->status = (int)st;
	f->retry_after = (int)ra;
	f->reset = reset != NULL && YAJL_IS_TRUE(reset);
	f->remaining = (long long)cnt;
	return NULL;
}

static void
faults_add(struct tg_emu *emu, struct evhttp_request *req)
{
	struct tg_err err;
	size_t len, i, n;
	char *body = tg_http_body(req, &len);
	yajl_val v = tg_json_parse(body, len, &err), rules, *items;
	const char *msg = NULL;
	struct emu_fault f;

	free(body);
	if (v == NULL) {
		emu_reply_error(req, 400, err.msg);
		return;
	}
	rules = tg_json_get(v, "rules");
	if (rules != NULL && YAJL_IS_ARRAY(rules)) {
		items = rules->u.array.values;
		n = rules->u.array.len;
	} else {
		items = &v;
		n = 1;
	}
	for (i = 0; i < n && msg == NULL; i++) {
		msg = parse_rule(items[i], &f);
		if (msg != NULL)
			break;
		emu->faults = tg_xrealloc(emu->faults, (emu->nfaults + 1) * sizeof(f));
		emu->faults[emu->nfaults++] = f;
	}
	yajl_tree_free(v);
	if (msg != NULL)
		emu_reply_error(req, 400, msg);
	else
		ok(req);
}

static void
clock_reply(struct evhttp_request *req)
{
	char iso[TG_ISO_LEN];
	yajl_gen g = tg_json_gen_new();

	tg_clock_iso(tg_clock_now_ms(), iso);
	yajl_gen_map_open(g);
	tg_json_kv_str(g, "now", iso);
	tg_json_kv_int(g, "offsetMs", tg_clock_offset_ms());
	yajl_gen_map_close(g);
	tg_reply_json(req, 200, g);
	yajl_gen_free(g);
}

/* {"advance": "31d"} or {"advanceSeconds": 2678400} */
static void
clock_advance(struct evhttp_request *req)
{
	struct tg_err err;
	size_t len;
	char *body = tg_http_body(req, &len);
	yajl_val v = tg_json_parse(body, len, &err), secs;
	const char *adv;
	int64_t ms = -1;

	free(body);
	adv = tg_json_get_str(v, "advance");
	secs = tg_json_get(v, "advanceSeconds");
	if (adv != NULL) {
		if (tg_config_parse_duration(adv, &ms))
			ms = -1;
	} else if (secs != NULL && YAJL_IS_NUMBER(secs) && YAJL_GET_DOUBLE(secs) >= 0) {
		ms = (int64_t)(YAJL_GET_DOUBLE(secs) * 1000);
	}
	yajl_tree_free(v);
	if (ms < 0) {
		emu_reply_error(req, 400,
		    "give {\"advance\": \"31d\"} or {\"advanceSeconds\": N} (N >= 0)");
		return;
	}
	tg_clock_advance_ms(ms);
	clock_reply(req);
}

void
emu_control(struct tg_emu *emu, struct evhttp_request *req, const char *path)
{
	const char *m = tg_http_method(req);
	int get = strcmp(m, "GET") == 0, post = strcmp(m, "POST") == 0;
	int del = strcmp(m, "DELETE") == 0;

	path += strlen("/__emulator");
	if (strcmp(path, "/health") == 0 && get) {
		ok(req);
	} else if (strcmp(path, "/stats") == 0 && get) {
		stats(emu, req);
	} else if (strcmp(path, "/stats") == 0 && del) {
		stats_reset(emu);
		ok(req);
	} else if (strcmp(path, "/faults") == 0 && post) {
		faults_add(emu, req);
	} else if (strcmp(path, "/faults") == 0 && del) {
		emu_faults_clear(emu);
		ok(req);
	} else if (strcmp(path, "/revoke") == 0 && post) {
		emu->token_gen++;
		emu_meta_save(emu);
		ok(req);
	} else if (strcmp(path, "/clock") == 0 && get) {
		clock_reply(req);
	} else if (strcmp(path, "/clock") == 0 && post) {
		clock_advance(req);
		emu_meta_save(emu);
	} else if (strcmp(path, "/reset") == 0 && post) {
		stats_reset(emu);
		emu_faults_clear(emu);
		ok(req);
	} else {
		emu_reply_error(req, 404, "no such control endpoint");
	}
}
