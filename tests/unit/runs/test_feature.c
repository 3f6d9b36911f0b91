/*
 * test_feature.c - the runs feature over a real state seam (SQLite
 * files in a temporary directory) and a gateway that never listens: a run
 * that ended with a callback URL, recorded before the feature starts, is
 * handled by the tracker on its own: its webhook job is stored, then its
 * payload (the job is ready), then the end is marked handled, the
 * webhook feature's API (registered after the feature, as the entry point
 * does) reached once every feature is there. A run that ended without one,
 * or with no feature to deliver webhooks, is marked handled with no job.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "tidegate/clock.h"
#include "tidegate/config.h"
#include "tidegate/feature_apis.h"
#include "tidegate/gateway.h"
#include "tidegate/gateway_config.h"
#include "tidegate/runs.h"
#include "tidegate/state.h"
#include "feature.h"
#include "harness.h"

#define DEADLINE_MS	15000

struct fx {
	struct th_gw_dir d;
	char outbox[128];	/* the webhook outbox the runs feature adds to */
	struct event_base *base;
	struct gw_config cfg;
	struct tg_state *st;
	struct gw *gw;
};

/* What a callback answered; done once it did. */
struct got {
	int done, rc;
	int64_t n;
	char id[128];
	size_t njobs;
	int state;
	char kind[32], cid[128];
};

static void
on_done(const struct tg_state_res *res, void *arg)
{
	struct got *g = arg;

	g->rc = res->rc;
	g->done = 1;
}

static void
on_num(const struct tg_state_res *res, int64_t n, void *arg)
{
	struct got *g = arg;

	g->rc = res->rc;
	g->n = n;
	g->done = 1;
}

static void
on_unhandled(const struct tg_state_res *res, const char *id, enum tg_run_status st,
    void *arg)
{
	struct got *g = arg;

	g->rc = res->rc;
	snprintf(g->id, sizeof(g->id), "%s", id != NULL ? id : "");
	g->done = 1;
}

static void
on_jobs(const struct tg_state_res *res, const struct tg_outbox_job *jobs, size_t n,
    void *arg)
{
	struct got *g = arg;

	g->rc = res->rc;
	g->njobs = n;
	if (n > 0) {
		g->state = (int)jobs[0].state;
		snprintf(g->kind, sizeof(g->kind), "%s", jobs[0].kind ? jobs[0].kind : "");
		snprintf(g->cid, sizeof(g->cid), "%s",
		    jobs[0].correlation_id ? jobs[0].correlation_id : "");
	}
	g->done = 1;
}

/* Run the loop until g is answered (or the deadline passes). */
static void
wait_for(struct fx *f, struct got *g)
{
	assert_true(th_run_until(f->base, &g->done, 1, DEADLINE_MS));
}

/* The configuration: a sim key, vendors unreachable, the run registry in
 * the temporary directory. */
static const char config_yaml[] =
	"listen:\n  dex: 127.0.0.1:0\n  sim: 127.0.0.1:0\n  admin: 127.0.0.1:0\n"
	"log_level: error\n"
	"dex:\n  url: http://127.0.0.1:9\n  username: u\n  password: p\n"
	"sim:\n  url: http://127.0.0.1:9\n  auth_url: http://127.0.0.1:9\n"
	"  client_id: c\n  client_secret: s\n"
	"keys:\n  - name: k1\n    sha256: "
	"c48a01f49fd0f2cc404bc3cbbc80e91457a3d41bb429a695243de4c61794155c\n"
	"    services: [sim]\n"
	"runs:\n  db: runs.db\n  sync: normal\n";

static int
setup(void **state)
{
	struct fx *f = calloc(1, sizeof(*f));
	struct tg_runs_opts ro;
	struct tg_outbox_opts oo;
	struct tg_state_opts so;
	struct tg_err err;

	/* only the feature's keys */
	th_gw_config(&f->d, "tg_runs_feature", &tg_runs_config, config_yaml, &f->cfg);
	f->base = event_base_new();
	tg_runs_store_opts(&f->cfg, &ro);
	memset(&oo, 0, sizeof(oo));
	snprintf(f->outbox, sizeof(f->outbox), "%s/outbox.db", f->d.dir);
	oo.path = f->outbox;
	memset(&so, 0, sizeof(so));
	so.runs = &ro;
	so.outbox = &oo;
	f->st = tg_state_open(f->base, &so, &err);
	assert_non_null(f->st);
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fx *f = *state;

	gw_free(f->gw);
	tg_state_close(f->st);
	gw_config_free(&f->cfg);
	event_base_free(f->base);
	th_rmtree(f->d.dir);
	free(f);
	return 0;
}

/* A run as a submission records it, then the status that ended it. */
static void
ended_run(struct fx *f, const char *id, const char *callback)
{
	struct tg_run_new n;
	struct got g;
	int64_t now = tg_clock_now_ms();

	memset(&n, 0, sizeof(n));
	n.simulation_id = id;
	n.api_key = "k1";
	n.host = "primary";
	n.case_id = "CASE-1";
	n.case_sha256 = "0000000000000000000000000000000000000000000000000000000000000000";
	n.callback_url = callback;
	memset(&g, 0, sizeof(g));
	(void)tg_state_runs_add(f->st, &n, now, on_done, &g);
	wait_for(f, &g);
	assert_int_equal(g.rc, 0);
	memset(&g, 0, sizeof(g));
	(void)tg_state_runs_set_status(f->st, id, TG_RUN_FAILED, now, now, on_num, &g);
	wait_for(f, &g);
	assert_int_equal(g.rc, 0);
	assert_int_equal(g.n, 1);	/* terminal with this call: an end to handle */
}

/* The webhook feature's API as the runs feature uses it: every key signs
 * with the global secret. */
static int
stub_check(void *ctx, const struct gw_req *r, const char *url, const char *key,
    struct tg_problems *p)
{
	return 0;
}

static const char *
stub_secret_ref(void *ctx, const struct gw_runtime *rt, const char *key)
{
	return "global";
}

static int kicks;	/* the worker told a job is due */

static void
stub_kick(void *ctx)
{
	kicks++;
}

static const struct gw_webhook_callbacks stub_callbacks = {
	.check = stub_check,
	.secret_ref = stub_secret_ref,
	.kick = stub_kick,
};

/* The feature, with the webhook feature's API registered after it (as the
 * entry point orders them) when callbacks is set. */
static void
start_feature(struct fx *f, int callbacks)
{
	struct tg_err err;

	f->gw = gw_new(f->base, f->d.path, &f->cfg, f->st, &err);
	assert_non_null(f->gw);
	assert_int_equal(tg_runs_register(f->gw, &err), 0);
	if (callbacks)
		assert_int_equal(gw_api_provide(f->gw, GW_API_WEBHOOK_CALLBACKS,
		    &stub_callbacks, NULL, &err), 0);
}

/* Loop until no end is left unhandled. */
static void
wait_handled(struct fx *f)
{
	int64_t end = tg_clock_now_ms() + DEADLINE_MS;
	struct got g;

	for (;;) {
		memset(&g, 0, sizeof(g));
		(void)tg_state_runs_next_unhandled(f->st, on_unhandled, &g);
		wait_for(f, &g);
		assert_int_equal(g.rc, 0);
		if (g.id[0] == '\0')
			return;
		assert_true(tg_clock_now_ms() < end);
		event_base_loop(f->base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
		usleep(10000);
	}
}

static void
list_jobs(struct fx *f, struct got *g)
{
	struct tg_outbox_query q;

	memset(&q, 0, sizeof(q));
	q.state = -1;
	memset(g, 0, sizeof(*g));
	(void)tg_state_outbox_list(f->st, &q, on_jobs, g);
	wait_for(f, g);
	assert_int_equal(g->rc, 0);
}

static void
test_run_webhook_enqueued(void **state)
{
	struct fx *f = *state;
	struct tg_err err;
	struct got g;
	void *ctx = &g;

	kicks = 0;
	ended_run(f, "sim-hook", "https://receiver.example/hook");
	start_feature(f, 1);
	/* one provider per name; a lookup names its context */
	assert_int_equal(gw_api_provide(f->gw, GW_API_WEBHOOK_CALLBACKS, &stub_callbacks,
	    NULL, &err), -1);
	assert_ptr_equal(gw_api_get(f->gw, GW_API_WEBHOOK_CALLBACKS, &ctx), &stub_callbacks);
	assert_null(ctx);
	wait_handled(f);
	list_jobs(f, &g);
	assert_int_equal(g.njobs, 1);
	assert_string_equal(g.kind, "simulation");
	assert_string_equal(g.cid, "sim-hook");
	assert_int_equal(g.state, TG_OUTBOX_READY);	/* the payload came after the job */
	assert_int_equal(kicks, 1);	/* and the worker was told: it need not wait its timer */
}

static void
test_run_without_callback(void **state)
{
	struct fx *f = *state;
	struct got g;

	ended_run(f, "sim-quiet", NULL);
	start_feature(f, 1);
	wait_handled(f);
	list_jobs(f, &g);
	assert_int_equal(g.njobs, 0);
}

/* No feature delivers webhooks: the end is handled, no job is stored. */
static void
test_run_webhook_without_webhooks(void **state)
{
	struct fx *f = *state;
	struct got g;

	ended_run(f, "sim-alone", "https://receiver.example/hook");
	start_feature(f, 0);
	assert_null(gw_api_get(f->gw, GW_API_WEBHOOK_CALLBACKS, NULL));
	wait_handled(f);
	list_jobs(f, &g);
	assert_int_equal(g.njobs, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_run_webhook_enqueued, setup, teardown),
		cmocka_unit_test_setup_teardown(test_run_without_callback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_run_webhook_without_webhooks, setup,
		    teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
