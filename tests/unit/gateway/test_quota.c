/*
 * test_quota.c - the lease client (quota.h) against a fake store whose
 * answers the test gives: the local rules (rate, slots, day) with their
 * figures and waiters; batches sized to demand, renewal at low water,
 * units handed back after the hold; the deadline of a lease and the
 * fallback share while the store does not answer, then recovery; reload;
 * and a day leased from the real SQLite state, which survives a restart.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/event.h>

#include "tidegate/clock.h"
#include "tidegate/quota.h"
#include "tidegate/state.h"

#define S	1000000LL

/* The fake store: a pool of units; answers at once (sync) or when told. */
struct fake {
	int sync, fail;
	int64_t pool, instances;
	int takes, gives, cancels;
	int64_t last_n, given;
	tg_quota_store_cb cb;
	void *arg;
	int pending;
};

static struct fake F;

static void
answer(int rc)
{
	struct tg_quota_grant g = { 0 };

	g.granted = F.last_n < F.pool ? F.last_n : F.pool;
	if (rc == 0)
		F.pool -= g.granted;
	g.instances = F.instances;
	g.used = 1000 - F.pool;		/* one client: all it holds */
	F.pending = 0;
	F.cb(rc, &g, F.arg);
}

static void *
f_take(void *ctx, const struct tg_quota_def *d, int64_t day, int64_t n, int64_t now_ms,
    int64_t ttl_ms, tg_quota_store_cb cb, void *arg)
{
	F.takes++;
	F.last_n = n;
	F.cb = cb;
	F.arg = arg;
	F.pending = 1;
	if (F.sync) {
		answer(F.fail ? -1 : 0);
		return NULL;
	}
	return &F;
}

static void *
f_give(void *ctx, const struct tg_quota_def *d, int64_t day, int64_t n, int64_t now_ms,
    tg_quota_store_cb cb, void *arg)
{
	struct tg_quota_grant g = { 0 };

	F.gives++;
	F.given += n;
	F.pool += n;
	cb(0, &g, arg);
	return NULL;
}

static void
f_cancel(void *ctx, void *op)
{
	F.cancels++;
	F.pending = 0;
}

static const struct tg_quota_store STORE = { f_take, f_give, f_cancel, NULL, NULL };

/* Shares of a rate by demand: the fake gives FS.grant a second. */
struct fake_share {
	int n, withdrawn;
	double grant, demand;
	int64_t ttl_ms;
	tg_quota_store_cb cb;
	void *arg;
};
static struct fake_share FS;

static void
share_answer(double grant)
{
	struct tg_quota_grant g = { 0 };

	g.share = grant;
	g.sharers = 2;
	FS.cb(0, &g, FS.arg);
}

static void *
f_share(void *ctx, const struct tg_quota_def *d, double demand, int64_t now_ms,
    int64_t ttl_ms, tg_quota_store_cb cb, void *arg)
{
	FS.n++;
	FS.withdrawn += ttl_ms == 0;
	FS.demand = demand;
	FS.ttl_ms = ttl_ms;
	FS.cb = cb;
	FS.arg = arg;
	return &FS;
}

static const struct tg_quota_store SHARE_STORE = { f_take, f_give, f_cancel, NULL, f_share };

static struct event_base *base;

static int
setup(void **state)
{
	memset(&F, 0, sizeof(F));
	memset(&FS, 0, sizeof(FS));
	F.pool = 1000;
	base = event_base_new();
	return 0;
}

static int
teardown(void **state)
{
	event_base_free(base);
	return 0;
}

static void
run_events(void)
{
	event_base_loop(base, EVLOOP_NONBLOCK);
}

static struct tg_quota *
client(const struct tg_quota_store *st, int fleet, const struct tg_quota_def *d, size_t n)
{
	struct tg_quota_opts o = { 0 };
	struct tg_quota *q;
	struct tg_err err;

	o.fleet = fleet;
	o.hold_ms = 1000;
	o.timeout_ms = 500;
	q = tg_quota_new(base, st, &o);
	assert_int_equal(tg_quota_define(q, d, n, &err), 0);
	return q;
}

/* Not leased: a rate is the local bucket, with figures and a retry. */
static void
test_local_rate(void **state)
{
	struct tg_quota_def d = { "key:a:rate", TG_QUOTA_RATE, 10, 5, 0 };
	struct tg_quota *q = client(&STORE, 0, &d, 1);
	struct tg_quota_limit *l = tg_quota_find(q, "key:a:rate");
	struct tg_quota_verdict v;
	int64_t now = 100 * S;
	int i;

	for (i = 0; i < 5; i++)
		assert_int_equal(tg_quota_take(l, 1, now, &v), 0);
	assert_int_equal(v.quota, 5);
	assert_int_equal(v.window_s, 1);
	assert_int_equal(v.left, 0);
	assert_int_equal(v.reset_s, 1);
	assert_int_equal(tg_quota_take(l, 1, now, &v), -1);
	assert_int_equal(v.retry_ms, 101);
	assert_int_equal(v.pending, 0);
	assert_int_equal(tg_quota_take(l, 1, now + S / 10, &v), 0);
	tg_quota_give(l, 1, now + S / 10);
	assert_int_equal(tg_quota_take(l, 1, now + S / 10, NULL), 0);
	assert_int_equal(F.takes + F.gives, 0);	/* no store I/O at all */
	tg_quota_free(q);
}

static void
woken(struct tg_quota_waiter *w, void *arg)
{
	(*(int *)arg)++;
}

/* Slots: taken at start, given at end; a waiter is called on the give. */
static void
test_local_slots_waiter(void **state)
{
	struct tg_quota_def d = { "key:a:slots", TG_QUOTA_SLOTS, 0, 0, 2 };
	struct tg_quota *q = client(&STORE, 0, &d, 1);
	struct tg_quota_limit *l = tg_quota_find(q, "key:a:slots");
	struct tg_quota_waiter w, w2;
	struct tg_quota_verdict v;
	int called = 0;

	assert_int_equal(tg_quota_take(l, 1, 0, NULL), 0);
	assert_int_equal(tg_quota_take(l, 1, 0, &v), 0);
	assert_int_equal(v.left, 0);
	assert_int_equal(tg_quota_take(l, 1, 0, &v), -1);
	assert_int_equal(v.retry_ms, 1000);
	tg_quota_wait(l, &w, woken, &called);
	tg_quota_wait(l, &w2, woken, &called);
	tg_quota_wait_cancel(&w2);
	tg_quota_give(l, 1, 0);
	assert_int_equal(called, 1);
	assert_int_equal(tg_quota_take(l, 1, 0, NULL), 0);
	assert_int_equal(F.takes, 0);
	tg_quota_free(q);
}

/* A day without a store counts in memory; a given-back unit is there again. */
static void
test_local_day(void **state)
{
	struct tg_quota_def d = { "key:a:daily:export", TG_QUOTA_DAY, 0, 0, 3 };
	struct tg_quota *q = client(NULL, 0, &d, 1);
	struct tg_quota_limit *l = tg_quota_find(q, d.name);
	struct tg_quota_verdict v;
	int i;

	for (i = 0; i < 3; i++)
		assert_int_equal(tg_quota_take(l, 1, 0, NULL), 0);
	assert_int_equal(tg_quota_take(l, 1, 0, &v), -1);
	assert_int_equal(v.window_s, 86400);
	assert_true(v.retry_ms >= 1 && v.retry_ms <= 86400000);
	assert_int_equal(v.reset_s, (v.retry_ms + 999) / 1000);
	tg_quota_give(l, 1, 0);
	assert_int_equal(tg_quota_take(l, 1, 0, &v), 0);
	assert_int_equal(v.left, 0);
	tg_quota_free(q);
}

/* Leased: the first take finds no share (pending), the renewal asks for
 * a batch of 1, demand grows the batch, low water renews before empty. */
static void
test_lease_batches(void **state)
{
	struct tg_quota_def d = { "key:a:rate", TG_QUOTA_RATE, 1000, 1000, 0 };
	struct tg_quota *q = client(&STORE, 1, &d, 1);
	struct tg_quota_limit *l = tg_quota_find(q, d.name);
	struct tg_quota_verdict v;
	int64_t now = 10 * S;
	int i, got = 0;

	assert_int_equal(tg_quota_take(l, 1, now, &v), -1);
	assert_int_equal(v.pending, 1);
	run_events();
	assert_int_equal(F.takes, 1);
	assert_int_equal(F.last_n, 1);
	answer(0);
	assert_int_equal(tg_quota_limit_share(l), 1);
	assert_int_equal(tg_quota_take(l, 1, now, NULL), 0);
	/* 500 asks in 50 ms: 10000/s x 200 ms, capped by the burst */
	for (i = 0; i < 499; i++)
		tg_quota_take(l, 1, now, NULL);
	tg_quota_tick(q, tg_clock_mono_us() + 50000);
	run_events();
	assert_int_equal(F.takes, 2);
	assert_int_equal(F.last_n, 1000);
	answer(0);
	for (i = 0; i < 600; i++)
		got += tg_quota_take(l, 1, now, NULL) == 0;
	assert_int_equal(got, 600);
	run_events();	/* under half a batch left: renewed before running out */
	assert_int_equal(F.takes, 3);
	assert_int_equal(F.pending, 1);
	F.pool = 0;
	answer(0);	/* the fleet has none: refused without waiting */
	for (i = 0; i < 400; i++)
		tg_quota_take(l, 1, now, NULL);
	assert_int_equal(tg_quota_take(l, 1, now, &v), -1);
	assert_int_equal(v.pending, 0);
	tg_quota_free(q);
}

/* Units not used a hold after the last grant go back to the store. */
static void
test_hand_back_after_hold(void **state)
{
	struct tg_quota_def d = { "key:a:rate", TG_QUOTA_RATE, 100, 100, 0 };
	struct tg_quota *q;
	struct tg_quota_limit *l;
	int64_t t0 = tg_clock_mono_us();

	F.sync = 1;
	q = client(&STORE, 1, &d, 1);
	l = tg_quota_find(q, d.name);
	tg_quota_take(l, 1, 0, NULL);
	run_events();
	assert_int_equal(tg_quota_limit_share(l), 1);
	tg_quota_tick(q, t0 + 500000);
	assert_int_equal(F.gives, 0);
	tg_quota_tick(q, t0 + 1200000);
	assert_int_equal(F.gives, 1);
	assert_int_equal(F.given, 1);
	assert_int_equal(tg_quota_limit_share(l), 0);
	assert_int_equal(F.pool, 1000);
	tg_quota_free(q);
}

/* A lease unanswered past its deadline is cancelled: the fallback share
 * (limit / instances last seen) serves, and a later answer ends it. */
static void
test_deadline_fallback_recovery(void **state)
{
	struct tg_quota_def d = { "key:a:slots", TG_QUOTA_SLOTS, 0, 0, 10 };
	struct tg_quota *q = client(&STORE, 1, &d, 1);
	struct tg_quota_limit *l = tg_quota_find(q, d.name);
	int64_t t0 = tg_clock_mono_us();
	int i, got = 0;

	F.instances = 5;
	tg_quota_take(l, 1, 0, NULL);
	run_events();
	answer(0);	/* one slot held; 5 instances known */
	assert_int_equal(tg_quota_take(l, 1, 0, NULL), 0);
	run_events();	/* low water: the next lease, never answered */
	assert_int_equal(F.pending, 1);
	tg_quota_tick(q, t0 + 600000);
	assert_int_equal(F.cancels, 1);
	assert_int_equal(tg_quota_fallback(q), 1);
	for (i = 0; i < 10; i++)
		got += tg_quota_take(l, 1, 0, NULL) == 0;
	assert_int_equal(got, 2);	/* 10 / 5, the one in use counted */
	assert_int_equal(F.pending, 1);	/* the probe, one at a time */
	tg_quota_tick(q, t0 + 700000);
	assert_int_equal(F.takes, 3);
	answer(0);
	assert_int_equal(tg_quota_limit_fallback(l), 0);
	assert_int_equal(tg_quota_fallback(q), 0);
	tg_quota_free(q);
}

/* A store that errs: the whole limit when no instance count was seen. */
static void
test_error_fallback_whole_limit(void **state)
{
	struct tg_quota_def d = { "key:a:rate", TG_QUOTA_RATE, 10, 4, 0 };
	struct tg_quota *q;
	struct tg_quota_limit *l;
	struct tg_quota_verdict v;
	int i, got = 0;

	F.sync = 1;
	F.fail = 1;
	q = client(&STORE, 1, &d, 1);
	l = tg_quota_find(q, d.name);
	assert_int_equal(tg_quota_take(l, 1, 0, &v), -1);
	run_events();
	assert_int_equal(tg_quota_limit_fallback(l), 1);
	for (i = 0; i < 10; i++)
		got += tg_quota_take(l, 1, 50 * S, &v) == 0;
	assert_int_equal(got, 4);
	assert_int_equal(v.pending, 0);
	assert_int_equal(v.retry_ms, 101);
	tg_quota_free(q);
}

/* Units granted of n takes at now (the figures of the last in *v). */
static int
takes(struct tg_quota_limit *l, int n, int64_t now, struct tg_quota_verdict *v)
{
	int i, got = 0;

	for (i = 0; i < n; i++)
		got += tg_quota_take(l, 1, now, v) == 0;
	return got;
}

/* A fleet's rate shared by demand: no units leased; each period the
 * client reports its demand and runs the share it is given locally, the
 * burst in proportion; none given: nothing; a demand well above the one
 * reported asks again at once; an idle limit reports none once, then
 * costs nothing; a dropped limit withdraws its demand. */
static void
test_share_by_demand(void **state)
{
	struct tg_quota_def d = { "key:a:rate", TG_QUOTA_RATE, 100, 10, 0 };
	struct tg_quota *q = client(&SHARE_STORE, 1, &d, 1);
	struct tg_quota_limit *l = tg_quota_find(q, d.name);
	struct tg_quota_verdict v;
	struct tg_err err;
	int64_t t0 = tg_clock_mono_us();

	assert_int_equal(tg_quota_take(l, 1, t0, &v), -1);	/* no share yet */
	assert_int_equal(v.pending, 1);
	run_events();
	assert_int_equal(FS.n, 1);
	assert_int_equal(FS.ttl_ms, 3000);
	assert_true(FS.demand == 1.0);		/* one unit over a period */
	share_answer(100);			/* alone: the whole rate */
	assert_int_equal(takes(l, 20, t0, &v), 10);
	assert_int_equal(F.takes, 0);		/* no unit leased, ever */
	assert_true(tg_quota_limit_rate(l, t0) == 100);
	/* 280 asks in the first second: reported; half the rate given */
	takes(l, 260, t0 + 500000, NULL);
	tg_quota_tick(q, t0 + 1100000);
	assert_int_equal(FS.n, 2);
	assert_true(FS.demand == 280.0);
	share_answer(50);
	assert_int_equal(takes(l, 20, t0 + 1200000, &v), 5);	/* burst 10 x 1/2 */
	assert_int_equal(v.retry_ms, 21);			/* 50 a second */
	assert_int_equal(v.pending, 0);
	assert_int_equal(v.quota, 10);
	assert_int_equal(takes(l, 10, t0 + 1220000, NULL), 1);
	assert_int_equal(FS.n, 2);
	/* 400 asks in the next 0.4 s: a report at once, the take pending */
	takes(l, 400, t0 + 1500000, &v);
	assert_int_equal(v.pending, 1);
	run_events();
	assert_int_equal(FS.n, 3);
	share_answer(0);			/* the others hold it all */
	assert_int_equal(takes(l, 5, tg_clock_mono_us() + 500000, &v), 0);
	assert_true(v.retry_ms > 400 && v.retry_ms <= 501);	/* the next report */
	assert_true(tg_quota_limit_rate(l, tg_clock_mono_us()) < 0.01);
	/* a share after none, short of the demand: starts empty, then fills
	 * at its own rate (not at the crawl of "none") */
	tg_quota_tick(q, tg_clock_mono_us() + 1100000);
	assert_int_equal(FS.n, 4);
	share_answer(50);
	assert_int_equal(takes(l, 10, tg_clock_mono_us(), NULL), 0);
	assert_int_equal(takes(l, 10, tg_clock_mono_us() + 100000, NULL), 5);
	/* idle: one report of no demand, then none */
	tg_quota_tick(q, t0 + 2400000);
	assert_int_equal(FS.n, 5);
	share_answer(10);
	tg_quota_tick(q, t0 + 3500000);
	assert_int_equal(FS.n, 6);
	assert_true(FS.demand == 0.0);
	share_answer(10);
	tg_quota_tick(q, t0 + 4600000);
	tg_quota_tick(q, t0 + 5700000);
	assert_int_equal(FS.n, 6);
	assert_int_equal(FS.withdrawn, 0);
	assert_int_equal(tg_quota_define(q, NULL, 0, &err), 0);
	assert_int_equal(FS.n, 7);
	assert_int_equal(FS.withdrawn, 1);
	tg_quota_free(q);
}

/* A share's report that fails: the fallback share at once, then back. */
static void
test_share_fallback(void **state)
{
	struct tg_quota_def d = { "key:a:rate", TG_QUOTA_RATE, 100, 10, 0 };
	struct tg_quota *q = client(&SHARE_STORE, 1, &d, 1);
	struct tg_quota_limit *l = tg_quota_find(q, d.name);
	struct tg_quota_grant g = { 0 };
	int64_t t0 = tg_clock_mono_us();

	tg_quota_take(l, 1, t0, NULL);
	run_events();
	FS.cb(-1, &g, FS.arg);
	assert_int_equal(tg_quota_limit_fallback(l), 1);
	assert_int_equal(takes(l, 20, t0, NULL), 10);	/* the whole limit: none known */
	tg_quota_tick(q, t0 + 100000);			/* the probe */
	assert_int_equal(FS.n, 2);
	share_answer(100);
	assert_int_equal(tg_quota_limit_fallback(l), 0);
	tg_quota_free(q);
}

/* Reload: a limit redefined by name keeps its use; one removed is dropped
 * (its share handed back) and lives on while referenced; bad input fails. */
static void
test_reload(void **state)
{
	struct tg_quota_def d[2] = {
		{ "key:a:slots", TG_QUOTA_SLOTS, 0, 0, 2 },
		{ "key:b:daily:export", TG_QUOTA_DAY, 0, 0, 5 },
	};
	struct tg_quota *q;
	struct tg_quota_limit *a, *b;
	struct tg_quota_verdict v;
	struct tg_err err;

	F.sync = 1;
	q = client(&STORE, 0, d, 2);
	a = tg_quota_find(q, d[0].name);
	b = tg_quota_find(q, d[1].name);
	assert_int_equal(tg_quota_take(a, 2, 0, NULL), 0);
	tg_quota_take(b, 1, 0, NULL);
	run_events();
	assert_int_equal(tg_quota_take(b, 1, 0, NULL), 0);
	tg_quota_ref(b);
	d[0].limit = 3;
	assert_int_equal(tg_quota_define(q, d, 1, &err), 0);
	assert_ptr_equal(tg_quota_find(q, d[0].name), a);
	assert_null(tg_quota_find(q, d[1].name));
	assert_int_equal(F.pool + 1, 1000);	/* b's share back, its use kept */
	assert_int_equal(tg_quota_take(a, 1, 0, &v), 0);
	assert_int_equal(v.left, 0);
	assert_int_equal(tg_quota_take(a, 1, 0, NULL), -1);
	tg_quota_give(b, 1, 0);
	tg_quota_unref(b);
	d[0].limit = 0;
	assert_int_equal(tg_quota_define(q, d, 1, &err), -1);
	assert_non_null(strstr(err.msg, "key:a:slots"));
	d[0].limit = 2;
	d[1].name = d[0].name;
	assert_int_equal(tg_quota_define(q, d, 2, &err), -1);
	assert_non_null(strstr(err.msg, "twice"));
	tg_quota_free(q);
}

/* Take one unit, waiting (at most ~2 s) while a lease is under way. */
static int
take_waiting(struct tg_quota_limit *l)
{
	struct tg_quota_verdict v;
	int i;

	for (i = 0; i < 2000; i++) {
		struct timeval tv = { 0, 1000 };

		if (tg_quota_take(l, 1, tg_clock_mono_us(), &v) == 0)
			return 0;
		if (!v.pending)
			return -1;
		event_base_loopexit(base, &tv);
		event_base_loop(base, EVLOOP_ONCE);
	}
	return -1;
}

static struct tg_state *
sqlite_state(const char *dir)
{
	char path[128];
	struct tg_owners_opts wo = { .max_rows = 10 };
	struct tg_state_opts opts = { .owners = &wo };
	struct tg_err err;
	struct tg_state *st;

	snprintf(path, sizeof(path), "%s/owners.db", dir);
	wo.path = path;
	st = tg_state_open(base, &opts, &err);
	assert_non_null(st);
	return st;
}

/* A day leased from SQLite (one instance): its count is the file's, so a
 * restart neither forgets what was used nor loses what was handed back. */
static void
test_sqlite_day_survives_restart(void **state)
{
	struct tg_quota_def d = { "key:a:daily:export", TG_QUOTA_DAY, 0, 0, 3 };
	char dir[] = "/tmp/tg-quota-XXXXXX", cmd[64];
	struct tg_quota_store *store;
	struct tg_quota_verdict v;
	struct tg_quota_limit *l;
	struct tg_quota *q;
	struct tg_state *st;
	int i, got = 0;

	assert_non_null(mkdtemp(dir));
	st = sqlite_state(dir);
	store = tg_quota_store_state(st);
	q = client(store, 0, &d, 1);
	l = tg_quota_find(q, d.name);
	assert_int_equal(take_waiting(l), 0);
	tg_quota_peek(l, tg_clock_mono_us(), &v);
	assert_int_equal(v.left, 2);	/* a leased unit not taken is still there */
	assert_int_equal(take_waiting(l), 0);
	tg_quota_free(q);		/* a leased unit not taken goes back */
	for (i = 0; i < 50; i++)
		event_base_loop(base, EVLOOP_NONBLOCK), usleep(2000);
	tg_quota_store_state_free(store);
	tg_state_close(st);
	st = sqlite_state(dir);
	store = tg_quota_store_state(st);
	q = client(store, 0, &d, 1);
	l = tg_quota_find(q, d.name);
	for (i = 0; i < 3; i++)
		got += take_waiting(l) == 0;
	assert_int_equal(got, 1);
	assert_int_equal(tg_quota_limit_fallback(l), 0);
	tg_quota_free(q);
	tg_quota_store_state_free(store);
	tg_state_close(st);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	assert_int_equal(system(cmd), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_local_rate, setup, teardown),
		cmocka_unit_test_setup_teardown(test_local_slots_waiter, setup, teardown),
		cmocka_unit_test_setup_teardown(test_local_day, setup, teardown),
		cmocka_unit_test_setup_teardown(test_lease_batches, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hand_back_after_hold, setup, teardown),
		cmocka_unit_test_setup_teardown(test_deadline_fallback_recovery, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_error_fallback_whole_limit, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_share_by_demand, setup, teardown),
		cmocka_unit_test_setup_teardown(test_share_fallback, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reload, setup, teardown),
		cmocka_unit_test_setup_teardown(test_sqlite_day_survives_restart, setup,
		    teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
