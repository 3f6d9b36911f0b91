/*
 * hooks.c - the webhooks of the runs feature, queued through the state
 * seam (the outbox job, then its payload on the id it got): a run that
 * ended with a callback URL (the tracker's notification) and a sweep whose
 * every variant has ended (the sweeper's settle). The webhook feature's
 * worker delivers them, told at once once a payload is committed.
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
#include "runs_int.h"

/* ---- the run webhook ---- */

/* The notification is over: tell the one waiting, then forget it. */
void
runs_notified(struct runs_bg *b)
{
	void (*done)(void *) = b->done;
	void *arg = b->done_arg;

	runs_bg_free(b);
	if (done != NULL)
		done(arg);
}

static void
on_hook_payload(const struct tg_state_res *res, void *arg)
{
	struct runs_bg *b = arg;

	b->op = NULL;
	if (res->rc != 0)
		tg_log(TG_LOG_ERROR, "run_webhook_failed", TG_LS("simulationId", b->id),
		    TG_LS("error", res->err.msg));
	else
		runs_webhook_kick(b->gw);
	runs_notified(b);
}

/* The job is stored, waiting: its payload next. */
static void
on_hook_added(const struct tg_state_res *res, const char *wid, void *arg)
{
	struct runs_bg *b = arg;

	b->op = NULL;
	if (res->rc != 0) {
		tg_log(TG_LOG_ERROR, "run_webhook_failed", TG_LS("simulationId", b->id),
		    TG_LS("error", res->err.msg));
		runs_notified(b);
		return;
	}
	tg_log(TG_LOG_INFO, "run_webhook_added", TG_LS("webhook_id", wid),
	    TG_LS("simulationId", b->id), TG_LS("key", b->key));
	runs_bg_wait(b, tg_state_payload_set(b->gw->state, wid, b->data, b->len,
	    tg_clock_now_ms(), on_hook_payload, b));
}

int
runs_hook_run(struct runs_bg *b, const struct tg_run *run)
{
	struct gw *gw = b->gw;
	struct tg_outbox_new j;
	const unsigned char *buf;
	yajl_gen g;
	int64_t now = tg_clock_now_ms();

	if (run->callback_url == NULL)
		return -1;
	memset(&j, 0, sizeof(j));
	j.url = run->callback_url;
	j.secret_ref = runs_secret_ref(gw, run->api_key);
	j.api_key = run->api_key;
	j.kind = "simulation";
	j.correlation_id = run->simulation_id;
	j.service = "sim";
	if (j.secret_ref == NULL) {
		tg_log(TG_LOG_WARN, "run_webhook_skipped", TG_LS("simulationId", b->id),
		    TG_LS("error", "no webhook signing secret"));
		return -1;
	}
	g = tg_json_gen_new();
	tg_runs_event_json(g, run, now);
	yajl_gen_get_buf(g, &buf, &b->len);
	b->data = tg_xmalloc(b->len > 0 ? b->len : 1);
	memcpy(b->data, buf, b->len);
	yajl_gen_free(g);
	b->key = run->api_key != NULL ? tg_xstrdup(run->api_key) : NULL;
	runs_bg_wait(b, tg_state_outbox_add(gw->state, &j, now, on_hook_added, b));
	return 0;
}

/* ---- the sweep webhook ---- */

static void
on_sweep_payload(const struct tg_state_res *res, void *arg)
{
	struct runs_bg *b = arg;

	b->op = NULL;
	if (res->rc != 0)
		tg_log(TG_LOG_ERROR, "sweep_webhook_failed", TG_LS("sweepId", b->id),
		    TG_LS("error", res->err.msg));
	else
		runs_webhook_kick(b->gw);
	runs_bg_free(b);
}

/* The job is stored, waiting: its payload next. */
static void
on_sweep_added(const struct tg_state_res *res, const char *wid, void *arg)
{
	struct runs_bg *b = arg;

	b->op = NULL;
	if (res->rc != 0) {
		tg_log(TG_LOG_ERROR, "sweep_webhook_failed", TG_LS("sweepId", b->id),
		    TG_LS("error", res->err.msg));
		runs_bg_free(b);
		return;
	}
	tg_log(TG_LOG_INFO, "sweep_webhook_added", TG_LS("webhook_id", wid),
	    TG_LS("sweepId", b->id), TG_LS("key", b->sweep.api_key));
	runs_bg_wait(b, tg_state_payload_set(b->gw->state, wid, b->data, b->len,
	    tg_clock_now_ms(), on_sweep_payload, b));
}

int
runs_hook_sweep(struct runs_bg *b, const struct tg_sweep_variant *v, size_t n)
{
	const struct tg_sweep *s = &b->sweep;
	struct gw *gw = b->gw;
	const unsigned char *buf;
	struct tg_outbox_new j;
	char ts[TG_ISO_LEN];
	yajl_gen g;
	int64_t now = tg_clock_now_ms();

	memset(&j, 0, sizeof(j));
	j.url = s->callback_url;
	j.secret_ref = runs_secret_ref(gw, s->api_key);
	j.api_key = s->api_key;
	j.kind = "sweep";
	j.correlation_id = s->id;
	j.service = "sim";
	if (j.secret_ref == NULL) {
		tg_log(TG_LOG_WARN, "sweep_webhook_skipped", TG_LS("sweepId", s->id),
		    TG_LS("error", "no webhook signing secret"));
		return -1;
	}
	tg_clock_iso(now, ts);
	g = tg_json_gen_new();
	yajl_gen_map_open(g);
	tg_json_kv_str(g, "type", "sweep.done");
	tg_json_kv_str(g, "timestamp", ts);
	tg_json_str(g, "data");
	tg_sweep_json(g, s, v, n);
	yajl_gen_map_close(g);
	yajl_gen_get_buf(g, &buf, &b->len);
	b->data = tg_xmalloc(b->len > 0 ? b->len : 1);
	memcpy(b->data, buf, b->len);
	yajl_gen_free(g);
	runs_bg_wait(b, tg_state_outbox_add(gw->state, &j, now, on_sweep_added, b));
	return 0;
}

