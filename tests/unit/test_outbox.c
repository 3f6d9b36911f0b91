/*
 * test_outbox.c - the SQLite outbox without an event loop: add, payload
 * files (written, committed, aborted, swept), leases (taken, renewed,
 * released, expired and taken over after a simulated crash), outcomes
 * and the retry schedule with jitter and Retry-After, dead letters,
 * redelivery of one job and of every failure since a time, listing and
 * its JSON, counters, purge, and persistence across close and reopen.
 * Times are passed in explicitly; nothing sleeps.
 */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>

#include "tidegate/clock.h"
#include "tidegate/json.h"
#include "tidegate/log.h"
#include "tidegate/webhook.h"

#define T0	1700000000000LL		/* a fixed "now" */

static const int64_t sched[] = { 0, 100, 200 };

static struct {
	char dir[64];
	char db[96];
	struct tg_outbox *ob;
} O;

static struct tg_outbox *
open_ob(int jitter, int64_t lease_ms)
{
	struct tg_outbox_opts o = {
		.path = O.db, .schedule_ms = sched, .nschedule = TG_NELEM(sched),
		.jitter_pct = jitter, .lease_ms = lease_ms,
	};
	struct tg_err err;
	struct tg_outbox *ob = tg_outbox_open(&o, &err);

	if (ob == NULL)
		fail_msg("open: %s", err.msg);
	return ob;
}

static int
setup(void **state)
{
	snprintf(O.dir, sizeof(O.dir), "/tmp/tg-outbox-XXXXXX");
	if (mkdtemp(O.dir) == NULL)
		return -1;
	snprintf(O.db, sizeof(O.db), "%s/wh.db", O.dir);
	O.ob = open_ob(-1, 1000);
	return 0;
}

static int
teardown(void **state)
{
	char cmd[128];

	tg_outbox_close(O.ob);
	O.ob = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", O.dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void
add(const char *corr, char id[TG_WEBHOOK_ID_LEN], int64_t now)
{
	struct tg_outbox_new j = {
		.url = "https://hooks.example.com/in?token=s3cret", .secret_ref = "main",
		.api_key = "demo-key", .kind = "export", .correlation_id = corr,
		.service = "dex",
	};
	struct tg_err err;

	if (tg_outbox_add(O.ob, &j, now, id, &err) != 0)
		fail_msg("add: %s", err.msg);
}

static void
add_ready(const char *corr, char id[TG_WEBHOOK_ID_LEN], int64_t now)
{
	struct tg_err err;

	add(corr, id, now);
	if (tg_outbox_payload_set(O.ob, id, "{\"a\":1}", 7, now, &err) != 0)
		fail_msg("payload: %s", err.msg);
}

static struct tg_outbox_lease *
lease(int64_t now)
{
	struct tg_outbox_lease *l;
	struct tg_err err;
	int rc = tg_outbox_lease(O.ob, now, NULL, &l, &err);

	if (rc < 0)
		fail_msg("lease: %s", err.msg);
	return rc == 1 ? l : NULL;
}

static enum tg_outbox_state
complete(struct tg_outbox_lease *l, int status, int64_t ra, int64_t now, int64_t *next)
{
	struct tg_outbox_result res = { status, ra, status ? "" : "connection refused" };
	enum tg_outbox_state st;
	struct tg_err err;

	if (tg_outbox_complete(O.ob, l, &res, now, &st, next, &err) != 0)
		fail_msg("complete: %s", err.msg);
	return st;
}

static void
get(const char *id, struct tg_outbox_job *j)
{
	struct tg_err err;

	if (tg_outbox_get(O.ob, id, j, &err) != 0)
		fail_msg("get: %s", err.msg);
}

static int
file_exists(const char *id, const char *suffix)
{
	char path[160];
	struct stat st;

	snprintf(path, sizeof(path), "%s.payloads/%s%s", O.db, id, suffix);
	return stat(path, &st) == 0;
}

static void
test_lifecycle(void **state)
{
	char id[TG_WEBHOOK_ID_LEN];
	struct tg_outbox_lease *l;
	struct tg_outbox_job j;
	int64_t next;

	add("c-1", id, T0);
	assert_int_equal(strncmp(id, "msg_", 4), 0);
	assert_int_equal(strlen(id), 36);
	get(id, &j);
	assert_int_equal(j.state, TG_OUTBOX_WAITING);
	assert_int_equal(j.size, -1);
	tg_outbox_job_cleanup(&j);
	assert_null(lease(T0 + 10000));		/* no payload, nothing to send */
	assert_int_equal(tg_outbox_payload_set(O.ob, id, "{\"a\":1}", 7, T0 + 50, NULL), 0);
	assert_true(file_exists(id, ".body"));
	l = lease(T0 + 50);
	assert_non_null(l);
	assert_string_equal(l->id, id);
	assert_int_equal(l->attempt, 1);
	assert_int_equal(l->size, 7);
	assert_int_equal(l->first_delay_ms, 0);
	assert_string_equal(l->secret_ref, "main");
	assert_null(lease(T0 + 50));		/* held */
	assert_int_equal(complete(l, 500, -1, T0 + 60, &next), TG_OUTBOX_READY);
	assert_int_equal(next, T0 + 160);	/* schedule[1] = 100 ms, no jitter */
	tg_outbox_lease_free(l);
	assert_null(lease(T0 + 159));
	l = lease(T0 + 160);
	assert_int_equal(l->attempt, 2);
	assert_int_equal(l->first_delay_ms, -1);
	assert_int_equal(complete(l, 204, -1, T0 + 170, NULL), TG_OUTBOX_DELIVERED);
	tg_outbox_lease_free(l);
	assert_false(file_exists(id, ".body"));
	get(id, &j);
	assert_int_equal(j.state, TG_OUTBOX_DELIVERED);
	assert_int_equal(j.attempts, 2);
	assert_int_equal(j.last_status, 204);
	assert_int_equal(j.done_at, T0 + 170);
	assert_int_equal(j.first_attempt_at, T0 + 50);
	tg_outbox_job_cleanup(&j);
}

/* Every status class: 2xx delivered, 410 gone, 3xx and 4xx and 5xx
 * failures; after the last attempt the job is dead and keeps its payload. */
static void
test_outcomes_and_dead_letter(void **state)
{
	char id[TG_WEBHOOK_ID_LEN];
	struct tg_outbox_lease *l;
	struct tg_outbox_job j;
	int64_t now = T0;
	const int fails[] = { 301, 404 };
	int i;

	add_ready("gone", id, now);
	l = lease(now);
	assert_int_equal(complete(l, 410, -1, now, NULL), TG_OUTBOX_GONE);
	tg_outbox_lease_free(l);
	assert_false(file_exists(id, ".body"));
	add_ready("dead", id, now);
	for (i = 0; i < 2; i++) {
		l = lease(now);
		assert_non_null(l);
		assert_int_equal(complete(l, fails[i], -1, now, NULL), TG_OUTBOX_READY);
		tg_outbox_lease_free(l);
		now += 1000;
	}
	l = lease(now);
	assert_int_equal(l->attempt, 3);
	assert_int_equal(complete(l, 0, -1, now, NULL), TG_OUTBOX_DEAD);
	tg_outbox_lease_free(l);
	assert_true(file_exists(id, ".body"));
	assert_null(lease(now + 100000));
	get(id, &j);
	assert_int_equal(j.state, TG_OUTBOX_DEAD);
	assert_int_equal(j.attempts, 3);
	assert_int_equal(j.last_status, 0);
	assert_string_equal(j.last_error, "connection refused");
	tg_outbox_job_cleanup(&j);
}

static void
test_schedule(void **state)
{
	struct tg_outbox_opts o = { .path = O.db };
	struct tg_outbox *def;
	char id[TG_WEBHOOK_ID_LEN];
	struct tg_outbox_lease *l;
	int64_t d, next;
	int i;

	tg_outbox_close(O.ob);
	def = tg_outbox_open(&o, NULL);
	/* Default: 0, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h; +0..10 % jitter. */
	for (i = 0; i < 50; i++) {
		d = tg_outbox_delay(def, 1, -1);
		assert_true(d >= 5000 && d <= 5500);
		d = tg_outbox_delay(def, 7, -1);
		assert_true(d >= 36000000 && d <= 39600000);
	}
	assert_int_equal(tg_outbox_delay(def, 8, -1), -1);
	assert_int_equal(tg_outbox_delay(def, 0, -1), -1);
	/* Retry-After: the later of it and the schedule, capped at 24 h. */
	assert_int_equal(tg_outbox_delay(def, 1, 60000), 60000);
	d = tg_outbox_delay(def, 2, 1000);
	assert_true(d >= 300000 && d <= 330000);
	assert_int_equal(tg_outbox_delay(def, 1, 30LL * 86400000), 86400000);
	tg_outbox_close(def);
	O.ob = open_ob(-1, 1000);
	/* Honoured on 429 and 5xx only. */
	add_ready("ra", id, T0);
	l = lease(T0);
	assert_int_equal(complete(l, 429, 5000, T0, &next), TG_OUTBOX_READY);
	assert_int_equal(next, T0 + 5000);
	tg_outbox_lease_free(l);
	l = lease(T0 + 5000);
	assert_int_equal(complete(l, 404, 5000, T0 + 5000, &next), TG_OUTBOX_READY);
	assert_int_equal(next, T0 + 5200);
	tg_outbox_lease_free(l);
}

static void
test_schedule_parse(void **state)
{
	char *good[] = { "0", "5s", "5m", "2h" }, *bad[] = { "5s", "soon" };
	struct tg_strlist g = { good, 4 }, b = { bad, 2 }, e = { NULL, 0 };
	struct tg_err err;
	int64_t *ms;
	size_t n;

	assert_int_equal(tg_outbox_schedule_parse(&g, &ms, &n, &err), 0);
	assert_int_equal(n, 4);
	assert_int_equal(ms[0], 0);
	assert_int_equal(ms[1], 5000);
	assert_int_equal(ms[2], 300000);
	assert_int_equal(ms[3], 7200000);
	free(ms);
	assert_int_equal(tg_outbox_schedule_parse(&b, &ms, &n, &err), -1);
	assert_non_null(strstr(err.msg, "soon"));
	assert_int_equal(tg_outbox_schedule_parse(&e, &ms, &n, &err), -1);
}

/* A process dies holding a lease: after reopening, the job waits for the
 * lease to expire and is then attempted again (at least once); the dead
 * process's lease can no longer record anything. */
static void
test_crash_lease_expiry(void **state)
{
	char id[TG_WEBHOOK_ID_LEN];
	struct tg_outbox_lease *l, *l2;
	struct tg_outbox_result res = { 200, -1, "" };
	struct tg_err err;

	add_ready("crash", id, T0);
	l = lease(T0);
	assert_int_equal(l->expires_at, T0 + 1000);
	tg_outbox_close(O.ob);			/* "kill -9": no complete, no release */
	O.ob = open_ob(-1, 1000);
	assert_null(lease(T0 + 999));
	assert_int_equal(tg_outbox_next_due(O.ob), T0 + 1000);
	l2 = lease(T0 + 1000);
	assert_non_null(l2);
	assert_string_equal(l2->id, id);
	assert_int_equal(l2->attempt, 2);
	assert_int_equal(tg_outbox_complete(O.ob, l, &res, T0 + 1001, NULL, NULL, &err), -1);
	assert_non_null(strstr(err.msg, "lost"));
	assert_int_equal(tg_outbox_lease_renew(O.ob, l, T0 + 1001, &err), -1);
	assert_int_equal(complete(l2, 200, -1, T0 + 1002, NULL), TG_OUTBOX_DELIVERED);
	tg_outbox_lease_free(l);
	tg_outbox_lease_free(l2);
}

static void
test_renew_release(void **state)
{
	char id[TG_WEBHOOK_ID_LEN];
	struct tg_outbox_lease *l;
	struct tg_err err;

	add_ready("renew", id, T0);
	l = lease(T0);
	assert_int_equal(tg_outbox_lease_renew(O.ob, l, T0 + 900, &err), 0);
	assert_int_equal(l->expires_at, T0 + 1900);
	assert_null(lease(T0 + 1500));
	assert_int_equal(tg_outbox_lease_release(O.ob, l, &err), 0);
	tg_outbox_lease_free(l);
	l = lease(T0 + 1500);
	assert_non_null(l);
	assert_int_equal(l->attempt, 2);	/* the interrupted attempt counts */
	tg_outbox_lease_free(l);
}

/* A lease passes over the jobs of the hosts it is told to skip (their
 * share is in flight) without counting an attempt for them, and names
 * each job's host as the skip list does: lower case, no user info, port
 * or brackets. */
static void
test_lease_skips_hosts(void **state)
{
	static const char *const urls[] = {
		"https://Hooks.Example:8443/in", "https://hooks.example/again",
		"http://u:p@b.example:8080/y?x", "http://[FD00::1]:9/z",
	};
	static const char *const hosts[] = { "hooks.example", "hooks.example", "b.example",
		"fd00::1" };
	char id[4][TG_WEBHOOK_ID_LEN], *skip_v[] = { "hooks.example", "fd00::1" };
	struct tg_strlist skip = { skip_v, 2 };
	struct tg_outbox_lease *l, *l2;
	struct tg_outbox_job j;
	struct tg_err err;
	size_t i;

	for (i = 0; i < TG_NELEM(urls); i++) {
		struct tg_outbox_new n = { .url = urls[i], .secret_ref = "main", .kind = "export" };

		assert_int_equal(tg_outbox_add(O.ob, &n, T0 + (int64_t)i, id[i], &err), 0);
		assert_int_equal(tg_outbox_payload_set(O.ob, id[i], "{}", 2, T0 + (int64_t)i, &err),
		    0);
	}
	assert_int_equal(tg_outbox_lease(O.ob, T0 + 10, &skip, &l, &err), 1);
	assert_string_equal(l->id, id[2]);		/* the oldest not skipped */
	assert_string_equal(l->host, "b.example");
	assert_int_equal(tg_outbox_lease(O.ob, T0 + 10, &skip, &l2, &err), 0);
	get(id[0], &j);
	assert_int_equal(j.attempts, 0);		/* passed over, not attempted */
	assert_int_equal(j.state, TG_OUTBOX_READY);
	tg_outbox_job_cleanup(&j);
	tg_outbox_lease_free(l);
	for (i = 0; i < TG_NELEM(urls); i++) {
		if (i == 2)
			continue;
		l = lease(T0 + 10);
		assert_non_null(l);
		assert_string_equal(l->id, id[i]);
		assert_string_equal(l->host, hosts[i]);
		tg_outbox_lease_free(l);
	}
}

static void
usage_is(const char *key, int64_t all, int64_t mine)
{
	int64_t a, m;
	struct tg_err err;

	assert_int_equal(tg_outbox_usage(O.ob, key, &a, &m, &err), 0);
	assert_int_equal(a, all);
	assert_int_equal(m, mine);
}

/* The bytes held: summed from the database at open, kept in step by
 * commits and deliveries, summed again after a purge; a dead letter keeps
 * its bytes; a commit of bytes written to the fd directly is checked too
 * (the job stays waiting, nothing is kept). */
static void
test_payload_quota_count(void **state)
{
	const struct tg_outbox_quota q = { 20, 0 };
	char a[TG_WEBHOOK_ID_LEN], b[TG_WEBHOOK_ID_LEN], c[TG_WEBHOOK_ID_LEN];
	struct tg_outbox_payload *p;
	struct tg_outbox_lease *l;
	struct tg_outbox_job j;
	struct tg_err err;
	size_t n;
	int rc;

	add_ready("a", a, T0);
	add_ready("b", b, T0 + 1);
	usage_is("demo-key", 14, 14);
	usage_is(NULL, 14, 0);
	tg_outbox_close(O.ob);
	O.ob = open_ob(-1, 1000);
	usage_is("demo-key", 14, 14);			/* summed from the database */
	add("c", c, T0);
	p = tg_outbox_payload_open(O.ob, c, &rc, &err);
	tg_outbox_payload_limit(p, &q);
	assert_int_equal(write(tg_outbox_payload_fd(p), "0123456", 7), 7);
	assert_int_equal(tg_outbox_payload_commit(p, T0, &err), TG_OUTBOX_OVER_QUOTA);
	assert_non_null(strstr(err.msg, "cap of 20"));
	get(c, &j);
	assert_int_equal(j.state, TG_OUTBOX_WAITING);
	tg_outbox_job_cleanup(&j);
	assert_false(file_exists(c, ".part") || file_exists(c, ".body"));
	usage_is(NULL, 14, 0);
	l = lease(T0 + 10);
	assert_int_equal(complete(l, 200, -1, T0 + 11, NULL), TG_OUTBOX_DELIVERED);
	tg_outbox_lease_free(l);
	usage_is("demo-key", 7, 7);			/* delivered: freed */
	for (n = 1; (l = lease(T0 + 1000 * (int64_t)n)) != NULL; n++) {	/* b fails: dead */
		rc = complete(l, 500, -1, T0 + 1000 * (int64_t)n, NULL);
		tg_outbox_lease_free(l);
	}
	assert_int_equal(rc, TG_OUTBOX_DEAD);
	get(b, &j);
	assert_int_equal(j.state, TG_OUTBOX_DEAD);
	tg_outbox_job_cleanup(&j);
	usage_is("demo-key", 7, 7);			/* a dead letter keeps its data */
	assert_int_equal(tg_outbox_purge(O.ob, T0 + 100000, &n, &err), 0);
	usage_is("demo-key", 0, 0);
}

static void
test_payload_writer(void **state)
{
	char id[TG_WEBHOOK_ID_LEN], path[160], chunk[4096];
	struct tg_outbox_payload *p;
	struct evbuffer *b = evbuffer_new();
	struct tg_outbox_job j;
	struct tg_err err;
	struct stat st;
	int i, rc;

	add("w", id, T0);
	p = tg_outbox_payload_open(O.ob, id, &rc, &err);
	assert_non_null(p);
	assert_true(file_exists(id, ".part"));
	tg_outbox_payload_abort(p);
	assert_false(file_exists(id, ".part"));
	p = tg_outbox_payload_open(O.ob, id, &rc, &err);
	memset(chunk, 'x', sizeof(chunk));
	for (i = 0; i < 256; i++) {
		evbuffer_add(b, chunk, sizeof(chunk));
		assert_int_equal(tg_outbox_payload_write(p, b, &err), 0);
		assert_int_equal(evbuffer_get_length(b), 0);
	}
	assert_true(write(tg_outbox_payload_fd(p), "!", 1) == 1);
	assert_int_equal(tg_outbox_payload_append(p, "?", 1, &err), 0);
	assert_null(lease(T0 + 10));		/* still waiting */
	assert_int_equal(tg_outbox_payload_commit(p, T0 + 10, &err), 0);
	snprintf(path, sizeof(path), "%s.payloads/%s.body", O.db, id);
	assert_int_equal(stat(path, &st), 0);
	get(id, &j);
	assert_int_equal(j.state, TG_OUTBOX_READY);
	assert_int_equal(j.size, 256 * 4096 + 2);
	assert_int_equal(st.st_size, j.size);
	assert_int_equal(j.ready_at, T0 + 10);
	tg_outbox_job_cleanup(&j);
	/* Only waiting jobs take a payload. */
	assert_null(tg_outbox_payload_open(O.ob, id, &rc, &err));
	assert_int_equal(rc, TG_OUTBOX_CONFLICT);
	assert_null(tg_outbox_payload_open(O.ob, "msg_0000", &rc, &err));
	assert_int_equal(rc, TG_OUTBOX_NOT_FOUND);
	assert_null(tg_outbox_payload_open(O.ob, "../../etc/passwd", &rc, &err));
	assert_int_equal(rc, TG_OUTBOX_NOT_FOUND);
	/* An export that failed: its job is abandoned. */
	add("never", id, T0);
	assert_int_equal(tg_outbox_abandon(O.ob, id, "export failed", T0 + 5, &err), 0);
	assert_int_equal(tg_outbox_abandon(O.ob, id, "again", T0 + 5, &err), TG_OUTBOX_CONFLICT);
	assert_int_equal(tg_outbox_redeliver(O.ob, id, T0 + 6, &err), TG_OUTBOX_CONFLICT);
	assert_int_equal(tg_outbox_abandon(O.ob, "msg_ab", "x", T0, &err), TG_OUTBOX_NOT_FOUND);
	evbuffer_free(b);
}

static void
test_redeliver(void **state)
{
	char dead1[TG_WEBHOOK_ID_LEN], dead2[TG_WEBHOOK_ID_LEN], retry[TG_WEBHOOK_ID_LEN];
	char done[TG_WEBHOOK_ID_LEN], waiting[TG_WEBHOOK_ID_LEN];
	struct tg_outbox_lease *l;
	struct tg_outbox_job j;
	struct tg_err err;
	size_t n;
	int i;

	/* Two jobs dead at T0+3000 and T0+13000, one retrying, one delivered. */
	add_ready("d1", dead1, T0);
	for (i = 0; i < 3; i++) {
		l = lease(T0 + 1000 * (i + 1));
		complete(l, 503, -1, T0 + 1000 * (i + 1), NULL);
		tg_outbox_lease_free(l);
	}
	add_ready("d2", dead2, T0 + 10000);
	for (i = 0; i < 3; i++) {
		l = lease(T0 + 11000 + 1000 * i);
		complete(l, 503, -1, T0 + 11000 + 1000 * i, NULL);
		tg_outbox_lease_free(l);
	}
	add_ready("r", retry, T0 + 20000);
	l = lease(T0 + 20000);
	complete(l, 500, -1, T0 + 20000, NULL);
	tg_outbox_lease_free(l);
	add_ready("ok", done, T0 + 20000);
	l = lease(T0 + 20000);
	complete(l, 200, -1, T0 + 20000, NULL);
	tg_outbox_lease_free(l);
	add("w", waiting, T0);
	assert_int_equal(tg_outbox_redeliver(O.ob, done, T0 + 30000, &err), TG_OUTBOX_CONFLICT);
	assert_non_null(strstr(err.msg, "no longer kept"));
	assert_int_equal(tg_outbox_redeliver(O.ob, waiting, T0 + 30000, &err),
	    TG_OUTBOX_CONFLICT);
	assert_int_equal(tg_outbox_redeliver(O.ob, "msg_00", T0, &err), TG_OUTBOX_NOT_FOUND);
	assert_int_equal(tg_outbox_redeliver_since(O.ob, T0 + 12000, T0 + 30000, &n, &err), 0);
	assert_int_equal(n, 2);			/* dead2 and the retrying one */
	get(dead2, &j);
	assert_int_equal(j.state, TG_OUTBOX_READY);
	assert_int_equal(j.attempts, 0);
	assert_int_equal(j.next_at, T0 + 30000);
	assert_int_equal(j.done_at, 0);
	tg_outbox_job_cleanup(&j);
	get(dead1, &j);
	assert_int_equal(j.state, TG_OUTBOX_DEAD);
	tg_outbox_job_cleanup(&j);
	assert_int_equal(tg_outbox_redeliver(O.ob, dead1, T0 + 30000, &err), 0);
	l = lease(T0 + 30000);
	assert_string_equal(l->id, dead1);
	assert_int_equal(l->attempt, 1);
	/* Leased: neither redelivered nor listed as failed. */
	assert_int_equal(tg_outbox_redeliver(O.ob, dead1, T0 + 30001, &err), TG_OUTBOX_CONFLICT);
	assert_non_null(strstr(err.msg, "in flight"));
	tg_outbox_lease_free(l);
}

static void
test_list_and_json(void **state)
{
	struct tg_outbox_query q = { .state = -1 };
	char id[TG_WEBHOOK_ID_LEN], first[TG_WEBHOOK_ID_LEN];
	struct tg_outbox_job *jobs;
	const unsigned char *out;
	struct tg_err err;
	yajl_val v;
	yajl_gen g;
	size_t n, len;

	add("a", first, T0);
	add_ready("b", id, T0 + 1);
	add_ready("b", id, T0 + 2);
	assert_int_equal(tg_outbox_list(O.ob, &q, &jobs, &n, &err), 0);
	assert_int_equal(n, 3);
	assert_string_equal(jobs[0].id, id);		/* newest first */
	assert_string_equal(jobs[2].id, first);
	tg_outbox_jobs_free(jobs, n);
	q.state = TG_OUTBOX_READY;
	q.limit = 1;
	q.offset = 1;
	assert_int_equal(tg_outbox_list(O.ob, &q, &jobs, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(jobs[0].state, TG_OUTBOX_READY);
	tg_outbox_jobs_free(jobs, n);
	q = (struct tg_outbox_query){ .state = -1, .correlation_id = "a" };
	assert_int_equal(tg_outbox_list(O.ob, &q, &jobs, &n, &err), 0);
	assert_int_equal(n, 1);
	q = (struct tg_outbox_query){ .state = -1, .since_ms = T0 + 2 };
	tg_outbox_jobs_free(jobs, n);
	assert_int_equal(tg_outbox_list(O.ob, &q, &jobs, &n, &err), 0);
	assert_int_equal(n, 1);
	g = tg_json_gen_new();
	tg_outbox_job_json(g, &jobs[0]);
	yajl_gen_get_buf(g, &out, &len);
	v = tg_json_parse((const char *)out, len, &err);
	assert_non_null(v);
	assert_string_equal(tg_json_get_str(v, "id"), id);
	assert_string_equal(tg_json_get_str(v, "state"), "ready");
	assert_string_equal(tg_json_get_str(v, "url"), "https://hooks.example.com/in?…");
	assert_null(strstr((const char *)out, "s3cret"));
	assert_null(strstr((const char *)out, "main"));	/* the secret's name stays inside */
	assert_string_equal(tg_json_get_str(v, "createdAt"), "2023-11-14T22:13:20.002Z");
	assert_true(YAJL_IS_NULL(tg_json_get(v, "firstAttemptAt")));
	assert_int_equal(YAJL_GET_INTEGER(tg_json_get(v, "size")), 7);
	yajl_tree_free(v);
	yajl_gen_free(g);
	tg_outbox_jobs_free(jobs, n);
}

static void
test_stats_and_purge(void **state)
{
	char a[TG_WEBHOOK_ID_LEN], b[TG_WEBHOOK_ID_LEN], c[TG_WEBHOOK_ID_LEN];
	struct tg_outbox_lease *l;
	struct tg_outbox_stats st;
	struct tg_err err;
	size_t n;

	add("w", c, T0);
	add_ready("a", a, T0);
	add_ready("b", b, T0);
	l = lease(T0 + 40);
	complete(l, 200, -1, T0 + 50, NULL);
	tg_outbox_lease_free(l);
	l = lease(T0 + 60);		/* b's first attempt, still in flight */
	assert_int_equal(tg_outbox_get_stats(O.ob, T0 + 70, &st, &err), 0);
	assert_int_equal(st.depth[TG_OUTBOX_WAITING], 1);
	assert_int_equal(st.depth[TG_OUTBOX_READY], 1);
	assert_int_equal(st.depth[TG_OUTBOX_DELIVERED], 1);
	assert_int_equal(st.leased, 1);
	assert_int_equal(st.attempts, 2);
	assert_int_equal(st.delivered, 1);
	assert_int_equal(st.first_delay_count, 2);
	assert_int_equal(st.first_delay_sum_ms, 40 + 60);
	complete(l, 500, -1, T0 + 80, NULL);
	tg_outbox_lease_free(l);
	assert_int_equal(tg_outbox_get_stats(O.ob, T0 + 90, &st, &err), 0);
	assert_int_equal(st.retries, 1);
	assert_int_equal(st.leased, 0);
	/* Purge takes finished jobs only. */
	assert_int_equal(tg_outbox_purge(O.ob, T0 + 51, &n, &err), 0);
	assert_int_equal(n, 1);
	assert_int_equal(tg_outbox_get(O.ob, a, &(struct tg_outbox_job){ 0 }, &err),
	    TG_OUTBOX_NOT_FOUND);
	assert_int_equal(tg_outbox_get_stats(O.ob, T0 + 90, &st, &err), 0);
	assert_int_equal(st.depth[TG_OUTBOX_DELIVERED], 0);
	assert_int_equal(st.depth[TG_OUTBOX_READY] + st.depth[TG_OUTBOX_WAITING], 2);
}

static void
touch(const char *name)
{
	char path[160];
	int fd;

	snprintf(path, sizeof(path), "%s.payloads/%s", O.db, name);
	fd = open(path, O_WRONLY | O_CREAT, 0600);
	assert_true(fd >= 0);
	close(fd);
}

/* Jobs survive close and reopen; the sweep keeps the payloads jobs still
 * need and removes the rest (unfinished writes, orphans). */
static void
test_persistence(void **state)
{
	char w[TG_WEBHOOK_ID_LEN], r[TG_WEBHOOK_ID_LEN], d[TG_WEBHOOK_ID_LEN];
	struct tg_outbox_payload *p;
	struct tg_outbox_lease *l;
	struct tg_outbox_job j;
	struct tg_err err;
	int status;
	pid_t pid;

	add("w", w, T0);
	add_ready("r", r, T0);
	add_ready("d", d, T0);
	l = lease(T0);
	assert_string_equal(l->id, r);
	complete(l, 200, -1, T0, NULL);
	tg_outbox_lease_free(l);
	l = lease(T0);
	assert_string_equal(l->id, d);
	complete(l, 500, -1, T0, NULL);
	tg_outbox_lease_free(l);
	touch("msg_feedface.body");		/* no such job */
	touch(r);				/* not ours: left alone */
	tg_outbox_close(O.ob);
	/* Another process dies while it writes the waiting job's payload. */
	if ((pid = fork()) == 0) {
		O.ob = open_ob(-1, 1000);
		p = tg_outbox_payload_open(O.ob, w, NULL, &err);
		_exit(p != NULL && tg_outbox_payload_append(p, "half", 4, &err) == 0 ? 0 : 1);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_int_equal(status, 0);
	assert_true(file_exists(w, ".part"));
	O.ob = open_ob(-1, 1000);
	assert_false(file_exists(w, ".part"));
	assert_false(file_exists("msg_feedface", ".body"));
	assert_true(file_exists(d, ".body"));
	assert_true(file_exists(r, ""));
	get(w, &j);
	assert_int_equal(j.state, TG_OUTBOX_WAITING);
	tg_outbox_job_cleanup(&j);
	get(r, &j);
	assert_int_equal(j.state, TG_OUTBOX_DELIVERED);
	tg_outbox_job_cleanup(&j);
	get(d, &j);
	assert_int_equal(j.state, TG_OUTBOX_READY);
	assert_int_equal(j.attempts, 1);
	assert_int_equal(j.last_status, 500);
	assert_int_equal(j.next_at, T0 + 100);
	tg_outbox_job_cleanup(&j);
	/* The waiting job takes its payload after the restart. */
	assert_int_equal(tg_outbox_payload_set(O.ob, w, "{}", 2, T0 + 5, &err), 0);
}

static void
test_open_errors(void **state)
{
	struct tg_outbox_opts o = { .path = NULL };
	struct tg_err err;

	assert_null(tg_outbox_open(&o, &err));
	o.path = "/nonexistent-dir/x/wh.db";
	assert_null(tg_outbox_open(&o, &err));
	assert_non_null(strstr(err.msg, "cannot"));
	assert_int_equal(tg_outbox_state_parse("dead"), TG_OUTBOX_DEAD);
	assert_int_equal(tg_outbox_state_parse("nope"), -1);
	assert_string_equal(tg_outbox_state_str(TG_OUTBOX_GONE), "gone");
}

#define T_(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		T_(test_lifecycle),
		T_(test_outcomes_and_dead_letter),
		T_(test_schedule),
		T_(test_schedule_parse),
		T_(test_crash_lease_expiry),
		T_(test_renew_release),
		T_(test_lease_skips_hosts),
		T_(test_payload_quota_count),
		T_(test_payload_writer),
		T_(test_redeliver),
		T_(test_list_and_json),
		T_(test_stats_and_purge),
		T_(test_persistence),
		T_(test_open_errors),
	};

	tg_log_init(stderr, getenv("TG_TEST_LOG") ? TG_LOG_DEBUG : TG_LOG_OFF);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
