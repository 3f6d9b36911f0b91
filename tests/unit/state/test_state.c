/*
 * test_state.c - the state seam (include/tidegate/state.h) driven through
 * its asynchronous API on a real event base, once per backend of the
 * table below (each entry opens a fresh backend and closes it): outbox
 * add, lease and complete; a payload of several MB streamed in chunks;
 * redelivery; the NOT_FOUND, CONFLICT and UNAVAILABLE codes; runs add,
 * get, list, status and due; sweeps create, claim and settle; ownership
 * record, lookup and prune; token records; poll leadership; writes pending
 * at close (UNKNOWN for PostgreSQL's sent ones, never for SQLite); the relay key
 * (made once, the same on every handle, agreed on by handles asking at
 * once); cancel before
 * completion (never called back, nothing leaked under ASan); reads that
 * answer before their call returns and writes that answer later.
 *
 * Each case says which domains it needs and each backend which it has:
 * SQLite has them all; so has PostgreSQL (fleet mode): the run registry
 * and sweeps, the webhook outbox, the shared ones (ownership, tokens, poll
 * entries) and the fleet cases (two handles on one database: shared
 * records, leases that never take one job twice and expire to the other
 * handle, claims racing on a sweep; connections killed under it;
 * operations held past their deadline by a lock the test takes, a
 * backlog past it, a server frozen while idle behind a forwarder the test
 * stops, a server that accepts a connection and never answers, and a write
 * whose connection is killed while it waits: sent again, OK once the row is
 * in, UNKNOWN past the deadline). The
 * PostgreSQL entry runs when the environment names a server
 * (TG_TEST_PG_URL, or the PG* variables pg_virtualenv sets), each setup in
 * a schema of its own, and is skipped with a printed reason otherwise.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <cmocka.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <event2/buffer.h>
#include <event2/event.h>

#include "tidegate/clock.h"
#include "tidegate/json.h"
#include "tidegate/log.h"
#include "tidegate/state.h"

#define T0	1700000000000LL		/* a fixed "now" */
#define OWNERS_PER_KEY	3		/* poll.ownership_max of both backends here */
#define MB	(1024 * 1024)

static const int64_t sched[] = { 0 };	/* one attempt: a failure is a dead letter */

/* What a case needs and a backend has. */
enum {
	D_OUTBOX = 1,		/* webhook outbox and payloads */
	D_RUNS = 2,		/* run registry and sweeps */
	D_SHARED = 4,		/* ownership, tokens, poll entries */
	D_LOCAL = 8,		/* cases of the default backend only (open errors) */
	D_FLEET = 16,		/* shared by several handles: answers cached, leaders */
};

/* One backend under test: opens F.st on F.base, or fails the test.
 * absent: NULL when it can run here, else why not. */
struct backend {
	const char *name;
	int (*setup)(void);
	void (*teardown)(void);
	unsigned has;
	const char *(*absent)(void);
};

static struct {
	const struct backend *b;
	struct event_base *base;
	struct tg_state *st;
	char dir[64];
	char runs[96], outbox[96], owners[96];
	PGconn *side;			/* PostgreSQL: the test's own connection */
	char schema[64];
	char url[1024];
	int pooler;			/* the backend's state.pooler (TG_STATE_POOLER_*) */
	struct tg_outbox_opts oo;	/* a case's outbox (reopen); path "": the fixture's */
} F;

/* The outbox a backend opens: the fixture's one-attempt schedule, or the
 * case's (F.oo, reopen); path the SQLite file's. */
static struct tg_outbox_opts
outbox_opts(const char *path)
{
	struct tg_outbox_opts o = {
		.path = path, .schedule_ms = sched, .nschedule = TG_NELEM(sched),
		.jitter_pct = -1, .lease_ms = 60000, .sync_normal = 1,
	};

	if (F.oo.lease_ms != 0) {
		o = F.oo;
		o.path = path;
		o.sync_normal = 1;
	}
	return o;
}

/* SQL run on a SQLite file directly, as another program would. */
static void
sqlite_exec(const char *path, const char *sql)
{
	sqlite3 *db;

	assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, sql, NULL, NULL, NULL), SQLITE_OK);
	sqlite3_close(db);
}

/* The first cell of sql's answer on a SQLite file, as text. */
static const char *
sqlite_value(const char *path, const char *sql)
{
	static char out[64];
	sqlite3_stmt *s;
	sqlite3 *db;

	assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &s, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(s), SQLITE_ROW);
	snprintf(out, sizeof(out), "%s", (const char *)sqlite3_column_text(s, 0));
	sqlite3_finalize(s);
	sqlite3_close(db);
	return out;
}

/* The SQLite state on F's files (made by sqlite_setup) opened again. */
static int
sqlite_open(void)
{
	struct tg_runs_opts ro = {
		.path = F.runs, .sync_normal = 1, .archive_max_run = 64, .archive_max_total = 100,
	};
	struct tg_outbox_opts oo = outbox_opts(F.outbox);
	struct tg_owners_opts wo = { .path = F.owners, .max_rows = OWNERS_PER_KEY };
	struct tg_state_opts opts = { .url = NULL, .runs = &ro, .outbox = &oo, .owners = &wo };
	struct tg_err err;

	F.st = tg_state_open(F.base, &opts, &err);
	if (F.st == NULL)
		print_error("open: %s\n", err.msg);
	return F.st != NULL ? 0 : -1;
}

static int
sqlite_setup(void)
{
	snprintf(F.dir, sizeof(F.dir), "/tmp/tg-state-XXXXXX");
	if (mkdtemp(F.dir) == NULL)
		return -1;
	snprintf(F.runs, sizeof(F.runs), "%s/runs.db", F.dir);
	snprintf(F.outbox, sizeof(F.outbox), "%s/outbox.db", F.dir);
	snprintf(F.owners, sizeof(F.owners), "%s/owners.db", F.dir);
	return sqlite_open();
}

static void
sqlite_teardown(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf %s", F.dir);
	if (system(cmd) != 0)
		print_error("cannot remove %s\n", F.dir);
}

/* The server the environment names: a URL, or "postgresql://" when the
 * PG* variables say it all; NULL when none. */
static const char *
pg_base_url(void)
{
	if (getenv("TG_TEST_PG_URL") != NULL && *getenv("TG_TEST_PG_URL") != '\0')
		return getenv("TG_TEST_PG_URL");
	if (getenv("PGHOST") != NULL || getenv("PGPORT") != NULL || getenv("PGDATABASE") != NULL)
		return "postgresql://";
	return NULL;
}

static const char *
pg_skip(void)
{
	return pg_base_url() == NULL ? "no PostgreSQL named by TG_TEST_PG_URL or PGHOST/PGPORT/"
	    "PGDATABASE (run under pg_virtualenv -v 15)" : NULL;
}

/* Run q (the test's own constant SQL) on the side connection. */
static int
side_exec(const char *q)
{
	PGresult *r = PQexec(F.side, q);
	int ok = PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK;

	if (!ok)
		print_error("%s: %s\n", q, PQerrorMessage(F.side));
	PQclear(r);
	return ok ? 0 : -1;
}

/* The outbox as the SQLite entry has it (a second handle's). */
static const struct tg_outbox_opts pg_outbox = {
	.schedule_ms = sched, .nschedule = TG_NELEM(sched), .jitter_pct = -1, .lease_ms = 60000,
};

/* The PostgreSQL state on F's schema (made by pg_setup) opened again. */
static int
pg_open(void)
{
	struct tg_outbox_opts oo = outbox_opts(NULL);
	struct tg_owners_opts wo = { .max_rows = OWNERS_PER_KEY };
	struct tg_runs_opts ro = { .archive_max_run = 64, .archive_max_total = 100 };
	struct tg_state_opts opts = { .url = F.url, .owners = &wo, .outbox = &oo, .runs = &ro };
	struct tg_err err;

	if (F.pooler == TG_STATE_POOLER_TRANSACTION) {	/* every statement unnamed */
		opts.pooler = F.pooler;
		opts.listen_url = F.url;
	}
	F.st = tg_state_open(F.base, &opts, &err);
	if (F.st == NULL)
		print_error("open: %s\n", err.msg);
	return F.st != NULL ? 0 : -1;
}

/* A schema of its own for each case, named in the URL's options, and an
 * application_name to find the backend's connections by. */
static int
pg_setup(void)
{
	const char *base = pg_base_url();
	char q[128];

	F.side = PQconnectdb(base);
	if (PQstatus(F.side) != CONNECTION_OK) {
		print_error("connect: %s\n", PQerrorMessage(F.side));
		return -1;
	}
	snprintf(F.schema, sizeof(F.schema), "tg_test_%ld_%ld", (long)getpid(), random() % 100000);
	snprintf(q, sizeof(q), "CREATE SCHEMA %s", F.schema);
	if (side_exec(q) != 0)
		return -1;
	snprintf(F.url, sizeof(F.url), "%s%soptions=-csearch_path%%3D%s&application_name=%s",
	    base, strchr(base, '?') != NULL ? "&" : "?", F.schema, F.schema);
	return pg_open();
}

/* The same behind a transaction pooler (state.pooler): the cases run with
 * every statement unnamed, LISTEN on a connection of its own. */
static int
pg_pooler_setup(void)
{
	F.pooler = TG_STATE_POOLER_TRANSACTION;
	return pg_setup();
}

static void
pg_teardown(void)
{
	char q[128];

	side_exec("ALTER SYSTEM RESET synchronous_standby_names");	/* a case that failed */
	side_exec("SELECT pg_reload_conf()");

	snprintf(q, sizeof(q), "DROP SCHEMA %s CASCADE", F.schema);
	side_exec(q);
	PQfinish(F.side);
	F.side = NULL;
}

/* The table: a backend runs every case whose domains it has. */
static const struct backend backends[] = {
	{ "sqlite", sqlite_setup, sqlite_teardown, D_OUTBOX | D_RUNS | D_SHARED | D_LOCAL, NULL },
	{ "postgresql", pg_setup, pg_teardown, D_OUTBOX | D_RUNS | D_SHARED | D_FLEET,
	  pg_skip },
	{ "postgresql, state.pooler: transaction", pg_pooler_setup, pg_teardown,
	  D_OUTBOX | D_RUNS | D_SHARED, pg_skip },
};

static int
setup(void **state)
{
	const struct backend *b = *state;

	F.b = b;
	F.pooler = TG_STATE_POOLER_NONE;
	memset(&F.oo, 0, sizeof(F.oo));
	F.base = event_base_new();
	return F.base != NULL ? b->setup() : -1;
}

static int
teardown(void **state)
{
	const struct backend *b = *state;

	tg_state_close(F.st);
	F.st = NULL;
	event_base_loop(F.base, EVLOOP_NONBLOCK);
	b->teardown();
	event_base_free(F.base);
	return 0;
}

/* ---- waiting for one callback ---- */

struct wait {
	int called;
	struct tg_state_res res;
	int64_t n, n2;
	char *s;
	size_t count;
	int more;
	struct tg_outbox_lease *lease;
	struct tg_state_payload *w;
	void *p;			/* a copy of what the callback saw */
};

static void
wait_clear(struct wait *w)
{
	free(w->s);
	free(w->p);
	tg_outbox_lease_free(w->lease);
	memset(w, 0, sizeof(*w));
}

static void
got(struct wait *w, const struct tg_state_res *res)
{
	assert_int_equal(w->called, 0);	/* exactly once */
	w->called = 1;
	w->res = *res;
}

/* Run the loop until w was called back (at most ~10 s). */
static void
wait_for(struct wait *w)
{
	int i;

	for (i = 0; i < 10000 && !w->called; i++) {
		struct timeval tv = { 0, 1000 };

		event_base_loopexit(F.base, &tv);
		event_base_loop(F.base, EVLOOP_ONCE);
	}
	assert_int_equal(w->called, 1);
}

static void
on_done(const struct tg_state_res *res, void *arg)
{
	got(arg, res);
}

static void
on_num(const struct tg_state_res *res, int64_t n, void *arg)
{
	struct wait *w = arg;

	got(w, res);
	w->n = n;
}

static void
on_pair(const struct tg_state_res *res, int64_t a, int64_t b, void *arg)
{
	struct wait *w = arg;

	got(w, res);
	w->n = a;
	w->n2 = b;
}

static void
on_str(const struct tg_state_res *res, const char *s, void *arg)
{
	struct wait *w = arg;

	got(w, res);
	w->s = s != NULL ? strdup(s) : NULL;
}

/* Write operations answer later, reads at once: check either way. */
static void
expect_later(struct tg_state_op *op, struct wait *w)
{
	assert_non_null(op);
	assert_int_equal(w->called, 0);
	wait_for(w);
}

static void
expect_now(struct tg_state_op *op, struct wait *w)
{
	assert_null(op);
	assert_int_equal(w->called, 1);
}

/* A read: at once with SQLite, later with PostgreSQL. */
static void
expect_read(struct tg_state_op *op, struct wait *w)
{
	if (strcmp(F.b->name, "sqlite") == 0)
		expect_now(op, w);
	else
		expect_later(op, w);
}

/* An operation that may answer now or later (the backend decides). */
static void
settle(struct tg_state_op *op, struct wait *w)
{
	if (op != NULL)
		wait_for(w);
	assert_int_equal(w->called, 1);
}

/* ---- outbox ---- */

static void
on_lease(const struct tg_state_res *res, struct tg_outbox_lease *l, void *arg)
{
	struct wait *w = arg;

	got(w, res);
	w->lease = l;
}

static void
on_outcome(const struct tg_state_res *res, enum tg_outbox_state st, int64_t next, void *arg)
{
	struct wait *w = arg;

	got(w, res);
	w->n = st;
	w->n2 = next;
}

static void
on_jobs(const struct tg_state_res *res, const struct tg_outbox_job *jobs, size_t n, void *arg)
{
	struct wait *w = arg;

	got(w, res);
	w->count = n;
	if (n > 0) {
		w->n = jobs[0].state;
		w->n2 = jobs[0].attempts;
		w->s = jobs[0].correlation_id ? strdup(jobs[0].correlation_id) : NULL;
		w->p = jobs[0].last_error ? strdup(jobs[0].last_error) : NULL;
	}
}

static void
on_payload(const struct tg_state_res *res, struct tg_state_payload *p, void *arg)
{
	struct wait *w = arg;

	got(w, res);
	w->w = p;
}

/* A job added through the seam: its id into id. */
static void
add_job_at(const char *cid, char id[TG_WEBHOOK_ID_LEN], int64_t now)
{
	struct tg_outbox_new j = {
		.url = "https://hooks.example/in", .secret_ref = "main", .kind = "export",
		.correlation_id = cid,
	};
	struct wait w = { 0 };

	expect_later(tg_state_outbox_add(F.st, &j, now, on_str, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_non_null(w.s);
	assert_int_equal(strncmp(w.s, "msg_", 4), 0);
	snprintf(id, TG_WEBHOOK_ID_LEN, "%s", w.s);
	wait_clear(&w);
}

static void
add_job(const char *cid, char id[TG_WEBHOOK_ID_LEN])
{
	add_job_at(cid, id, T0);
}

static void
set_payload_at(const char *id, const char *body, int64_t now)
{
	struct wait w = { 0 };

	expect_later(tg_state_payload_set(F.st, id, body, strlen(body), now, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
}

static void
set_payload(const char *id, const char *body)
{
	set_payload_at(id, body, T0);
}

static struct tg_outbox_lease *
lease(int64_t now)
{
	struct wait w = { 0 };
	struct tg_outbox_lease *l;

	expect_later(tg_state_outbox_lease(F.st, now, NULL, on_lease, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	l = w.lease;
	w.lease = NULL;
	return l;
}

static void
test_outbox_flow(void **state)
{
	char id[TG_WEBHOOK_ID_LEN];
	struct tg_outbox_result ok = { 200, -1, "" };
	struct tg_outbox_lease *l;
	struct wait w = { 0 };

	add_job("corr-1", id);
	expect_read(tg_state_outbox_get(F.st, id, on_jobs, &w), &w);
	assert_int_equal(w.count, 1);
	assert_int_equal(w.n, TG_OUTBOX_WAITING);
	assert_string_equal(w.s, "corr-1");
	wait_clear(&w);
	expect_later(tg_state_outbox_set_cid(F.st, id, "corr-2", on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	set_payload(id, "{\"x\":1}");
	expect_read(tg_state_outbox_next_due(F.st, on_num, &w), &w);
	assert_true(w.n <= T0);
	wait_clear(&w);
	l = lease(T0 + 1);
	assert_non_null(l);
	assert_string_equal(l->id, id);
	assert_string_equal(l->correlation_id, "corr-2");
	assert_int_equal(l->attempt, 1);
	assert_int_equal(l->size, 7);
	expect_later(tg_state_outbox_renew(F.st, l, T0 + 2, on_num, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(w.n, T0 + 2 + 60000);
	wait_clear(&w);
	expect_later(tg_state_outbox_complete(F.st, l, &ok, T0 + 3, on_outcome, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(w.n, TG_OUTBOX_DELIVERED);
	wait_clear(&w);
	expect_later(tg_state_outbox_complete(F.st, l, &ok, T0 + 4, on_outcome, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_CONFLICT);	/* the lease is gone */
	wait_clear(&w);
	tg_outbox_lease_free(l);
	assert_null(lease(T0 + 5));			/* nothing else is due */
}

/* Jobs of the hosts a lease is told to skip wait, uncounted, while others
 * go; the lease names each job's host as the skip list does (lower case,
 * no user info, port or brackets), in SQL for PostgreSQL. */
static void
test_lease_skip(void **state)
{
	static const char *const urls[] = {
		"https://Hooks.Example:8443/in", "http://u:p@b.example:8080/y?x",
		"http://[FD00::1]:9/z", "https://c.example?q=1", "https://hooks.example/again",
	};
	static const char *const hosts[] = { "hooks.example", "b.example", "fd00::1",
		"c.example", "hooks.example" };
	char *skip_v[TG_NELEM(urls)];
	struct tg_strlist skip = { skip_v, 0 };
	char id[TG_NELEM(urls)][TG_WEBHOOK_ID_LEN];
	struct wait w = { 0 };
	size_t i;

	for (i = 0; i < TG_NELEM(urls); i++) {
		struct tg_outbox_new j = { .url = urls[i], .secret_ref = "main", .kind = "x" };

		expect_later(tg_state_outbox_add(F.st, &j, T0, on_str, &w), &w);
		snprintf(id[i], TG_WEBHOOK_ID_LEN, "%s", w.s);
		wait_clear(&w);
		set_payload(id[i], "{}");
	}
	for (i = 0; i < 4; i++) {	/* each host once: the fifth job's is skipped */
		expect_later(tg_state_outbox_lease(F.st, T0 + 1, &skip, on_lease, &w), &w);
		assert_int_equal(w.res.rc, TG_STATE_OK);
		assert_non_null(w.lease);
		assert_string_equal(w.lease->id, id[i]);
		assert_string_equal(w.lease->host, hosts[i]);
		skip_v[skip.n++] = (char *)hosts[i];
		wait_clear(&w);
	}
	expect_later(tg_state_outbox_lease(F.st, T0 + 1, &skip, on_lease, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_null(w.lease);
	wait_clear(&w);
	expect_later(tg_state_outbox_lease(F.st, T0 + 1, NULL, on_lease, &w), &w);
	assert_non_null(w.lease);
	assert_string_equal(w.lease->id, id[4]);
	assert_int_equal(w.lease->attempt, 1);		/* the skips counted nothing */
	assert_string_equal(w.lease->host, "hooks.example");
	wait_clear(&w);
}

/* A job of key (NULL: none) into id, its payload writer opened and limited
 * by q (NULL: none); the writer is returned. */
static struct tg_state_payload *
quota_writer(const char *key, const struct tg_outbox_quota *q, char id[TG_WEBHOOK_ID_LEN])
{
	struct tg_outbox_new j = { .url = "https://hooks.example/in", .secret_ref = "main",
		.kind = "export", .api_key = key };
	struct tg_state_payload *p;
	struct wait w = { 0 };

	expect_later(tg_state_outbox_add(F.st, &j, T0, on_str, &w), &w);
	snprintf(id, TG_WEBHOOK_ID_LEN, "%s", w.s);
	wait_clear(&w);
	expect_later(tg_state_payload_open(F.st, id, on_payload, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	p = w.w;
	if (q != NULL)
		tg_state_payload_limit(p, q);
	return p;
}

/* n bytes appended to p: the answer's code. */
static int
quota_append(struct tg_state_payload *p, size_t n, char *why, size_t whylen)
{
	static char bytes[256];
	struct evbuffer *b = evbuffer_new();
	struct wait w = { 0 };

	memset(bytes, 'q', sizeof(bytes));
	evbuffer_add(b, bytes, n);
	expect_later(tg_state_payload_append(p, b, on_done, &w), &w);
	assert_int_equal(evbuffer_get_length(b), 0);
	evbuffer_free(b);
	if (why != NULL)
		snprintf(why, whylen, "%s", w.res.err.msg);
	return w.res.rc;
}

static void
usage_is(const char *key, int64_t all, int64_t mine)
{
	struct wait w = { 0 };

	settle(tg_state_outbox_usage(F.st, key, on_pair, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(w.n, all);
	assert_int_equal(w.n2, mine);
}

/* The usage comes to (all, mine) within ~2 s: an abort answers nobody,
 * its drop may still be on another connection. */
static void
usage_comes(const char *key, int64_t all, int64_t mine)
{
	struct wait w = { 0 };
	int i;

	for (i = 0; i < 200; i++) {
		settle(tg_state_outbox_usage(F.st, key, on_pair, &w), &w);
		assert_int_equal(w.res.rc, TG_STATE_OK);
		if (w.n == all && w.n2 == mine)
			return;
		wait_clear(&w);
		w.called = 0;
		{
			struct timeval tv = { 0, 10000 };

			event_base_loopexit(F.base, &tv);
			event_base_loop(F.base, 0);
		}
	}
	fail_msg("usage of %s: %lld, %lld", key, (long long)w.n, (long long)w.n2);
}

/* The payload quota: a limited writer's append that would take the bytes
 * held (every job's, or its key's) over the cap stores nothing and is
 * refused; committed payloads count until delivered; a payload the
 * gateway makes itself (set) is never refused. */
static void
test_payload_quota(void **state)
{
	const struct tg_outbox_quota q = { 100, 60 };
	struct tg_outbox_result ok = { 200, -1, "" };
	char a[TG_WEBHOOK_ID_LEN], b[TG_WEBHOOK_ID_LEN], c[TG_WEBHOOK_ID_LEN], why[256];
	struct tg_state_payload *pa, *pb, *pc;
	struct tg_outbox_lease *l;
	struct wait w = { 0 };

	usage_is("k1", 0, 0);
	pa = quota_writer("k1", &q, a);
	assert_int_equal(quota_append(pa, 50, NULL, 0), TG_STATE_OK);
	usage_is("k1", 50, 50);
	usage_is(NULL, 50, 0);
	pc = quota_writer("k1", &q, c);			/* k1 would hold 70 of its 60 */
	assert_int_equal(quota_append(pc, 20, why, sizeof(why)), TG_STATE_REFUSED);
	assert_non_null(strstr(why, TG_OUTBOX_QUOTA_KEY_WHY " of 60"));
	tg_state_payload_abort(pc);			/* a refused writer is only aborted */
	pc = quota_writer("k1", &q, c);
	assert_int_equal(quota_append(pc, 10, NULL, 0), TG_STATE_OK);
	usage_is("k1", 60, 60);
	expect_later(tg_state_payload_commit(pa, T0, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	usage_is("k1", 60, 60);				/* committed: still held */
	l = lease(T0 + 1);
	assert_string_equal(l->id, a);
	expect_later(tg_state_outbox_complete(F.st, l, &ok, T0 + 2, on_outcome, &w), &w);
	assert_int_equal(w.n, TG_OUTBOX_DELIVERED);
	wait_clear(&w);
	tg_outbox_lease_free(l);
	usage_is("k1", 10, 10);				/* delivered: freed */
	expect_later(tg_state_payload_commit(pc, T0 + 3, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	pb = quota_writer("k2", &q, b);
	assert_int_equal(quota_append(pb, 60, NULL, 0), TG_STATE_OK);
	assert_int_equal(quota_append(pb, 40, why, sizeof(why)), TG_STATE_REFUSED);
	assert_non_null(strstr(why, "cap of 100"));
	usage_is("k2", 70, 60);
	tg_state_payload_abort(pb);
	add_job(NULL, b);				/* set: never refused */
	memset(why, 'x', 200);				/* 200 bytes, every one written */
	expect_later(tg_state_payload_set(F.st, b, why, 200, T0, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
}

static void
last_error_is(const char *id, const char *want)
{
	struct wait w = { 0 };

	expect_read(tg_state_outbox_get(F.st, id, on_jobs, &w), &w);
	assert_int_equal(w.count, 1);
	if (want == NULL)
		assert_null(w.p);
	else
		assert_string_equal(w.p, want);
	wait_clear(&w);
}

/* A waiting job says why it waits (its last error) until its payload is
 * committed; a note to a job no longer waiting changes nothing. */
static void
test_outbox_note(void **state)
{
	char id[TG_WEBHOOK_ID_LEN];
	struct wait w = { 0 };

	add_job("note", id);
	expect_later(tg_state_outbox_note(F.st, id, "waiting for room", on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	last_error_is(id, "waiting for room");
	set_payload(id, "{}");
	last_error_is(id, NULL);
	expect_later(tg_state_outbox_note(F.st, id, "late", on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	last_error_is(id, NULL);
}

/* Chunks of 64 KiB, one append in flight: the caller's buffer is empty
 * after every call, so nothing beyond one chunk is held. */
static void
stream(struct tg_state_payload *p, size_t total)
{
	static char chunk[64 * 1024];
	struct evbuffer *buf = evbuffer_new();
	size_t done = 0;

	while (done < total) {
		struct wait w = { 0 };

		memset(chunk, 'a' + (int)(done / sizeof(chunk)) % 26, sizeof(chunk));
		evbuffer_add(buf, chunk, sizeof(chunk));
		expect_later(tg_state_payload_append(p, buf, on_done, &w), &w);
		assert_int_equal(evbuffer_get_length(buf), 0);
		assert_int_equal(w.res.rc, TG_STATE_OK);
		done += sizeof(chunk);
	}
	evbuffer_free(buf);
}

/* The leased payload's file holds what stream() wrote (l borrowed). */
static void
check_streamed(const struct tg_outbox_lease *l)
{
	static char block[64 * 1024];
	FILE *f = fopen(l->payload_path, "rb");
	size_t i = 0;

	assert_non_null(f);
	while (fread(block, 1, sizeof(block), f) == sizeof(block)) {
		assert_int_equal(block[0], 'a' + (int)(i % 26));
		assert_int_equal(block[sizeof(block) - 1], 'a' + (int)(i % 26));
		i++;
	}
	fclose(f);
	assert_int_equal(i * sizeof(block), (size_t)l->size);
}

static void
test_payload_stream(void **state)
{
	char id[TG_WEBHOOK_ID_LEN];
	struct tg_outbox_lease *l;
	struct wait w = { 0 };
	struct stat sb;

	add_job(NULL, id);
	expect_later(tg_state_payload_open(F.st, id, on_payload, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_non_null(w.w);
	stream(w.w, 8 * MB);
	w.called = 0;
	expect_later(tg_state_payload_commit(w.w, T0, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	l = lease(T0 + 1);
	assert_non_null(l);
	assert_int_equal(l->size, 8 * MB);
	assert_int_equal(stat(l->payload_path, &sb), 0);
	assert_int_equal(sb.st_size, 8 * MB);
	check_streamed(l);
	tg_outbox_lease_free(l);
	/* an aborted writer leaves the job waiting */
	add_job(NULL, id);
	memset(&w, 0, sizeof(w));
	expect_later(tg_state_payload_open(F.st, id, on_payload, &w), &w);
	stream(w.w, 128 * 1024);
	tg_state_payload_abort(w.w);
	memset(&w, 0, sizeof(w));
	expect_read(tg_state_outbox_get(F.st, id, on_jobs, &w), &w);
	assert_int_equal(w.n, TG_OUTBOX_WAITING);
	wait_clear(&w);
}

/* PostgreSQL: job id's payload is n rows, the longest max bytes. */
static void
pg_check_chunks(const char *id, int n, int max)
{
	const char *vals[1] = { id };
	char q[192];
	PGresult *r;

	snprintf(q, sizeof(q), "SELECT count(*), max(length(data)) FROM %s.outbox_payloads"
	    " WHERE job_id = $1", F.schema);
	r = PQexecParams(F.side, q, 1, NULL, vals, NULL, NULL, 0);
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	assert_int_equal(atoi(PQgetvalue(r, 0, 0)), n);
	assert_int_equal(atoi(PQgetvalue(r, 0, 1)), max);
	PQclear(r);
}

/* Byte i of the big payload. */
static char
big_byte(size_t i)
{
	return (char)(i * 7 % 251);
}

/* One append larger than a chunk row (PostgreSQL cuts it into rows of
 * 1 MiB), a small one, and the commit issued before the small one is
 * answered: the payload is whole, in order, and its size counts both. */
static void
test_payload_big(void **state)
{
	size_t big = 5 * MB / 2, small = 100, i, n;
	char id[TG_WEBHOOK_ID_LEN], *data = malloc(big + small), *back = malloc(big + small);
	struct evbuffer *buf = evbuffer_new();
	struct wait w = { 0 }, a = { 0 }, c = { 0 };
	struct tg_outbox_lease *l;
	FILE *f;

	for (i = 0; i < big + small; i++)
		data[i] = big_byte(i);
	add_job(NULL, id);
	expect_later(tg_state_payload_open(F.st, id, on_payload, &w), &w);
	assert_non_null(w.w);
	evbuffer_add(buf, data, big);
	expect_later(tg_state_payload_append(w.w, buf, on_done, &a), &a);
	assert_int_equal(a.res.rc, TG_STATE_OK);
	memset(&a, 0, sizeof(a));
	evbuffer_add(buf, data + big, small);
	assert_non_null(tg_state_payload_append(w.w, buf, on_done, &a));
	assert_int_equal(evbuffer_get_length(buf), 0);
	assert_non_null(tg_state_payload_commit(w.w, T0, on_done, &c));
	wait_for(&a);
	wait_for(&c);
	assert_int_equal(a.res.rc, TG_STATE_OK);
	assert_int_equal(c.res.rc, TG_STATE_OK);
	if (F.side != NULL)
		pg_check_chunks(id, 4, 1048576);	/* 1 MiB, 1 MiB, 0.5 MiB, 100 bytes */
	l = lease(T0 + 1);
	assert_non_null(l);
	assert_int_equal(l->size, big + small);
	f = fopen(l->payload_path, "rb");
	assert_non_null(f);
	n = fread(back, 1, big + small + 1, f);
	fclose(f);
	assert_int_equal(n, big + small);
	assert_memory_equal(back, data, big + small);
	tg_outbox_lease_free(l);
	evbuffer_free(buf);
	free(data);
	free(back);
}

static void
test_redeliver(void **state)
{
	char id[TG_WEBHOOK_ID_LEN];
	struct tg_outbox_result bad = { 500, -1, "server error" };
	struct tg_outbox_lease *l;
	struct wait w = { 0 };

	add_job(NULL, id);
	set_payload(id, "{}");
	l = lease(T0 + 1);
	expect_later(tg_state_outbox_complete(F.st, l, &bad, T0 + 2, on_outcome, &w), &w);
	assert_int_equal(w.n, TG_OUTBOX_DEAD);	/* a one-entry schedule */
	wait_clear(&w);
	tg_outbox_lease_free(l);
	expect_later(tg_state_outbox_redeliver(F.st, id, T0 + 3, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	l = lease(T0 + 4);
	assert_non_null(l);
	assert_string_equal(l->id, id);
	assert_int_equal(l->attempt, 1);
	expect_later(tg_state_outbox_release(F.st, l, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	tg_outbox_lease_free(l);
	expect_later(tg_state_outbox_redeliver_since(F.st, T0, T0 + 5, on_num, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(w.n, 1);		/* ready again, its last attempt failed */
	wait_clear(&w);
}

static void
on_stats(const struct tg_state_res *res, const struct tg_outbox_stats *st, void *arg)
{
	struct wait *w = arg;

	got(w, res);
	w->n = (int64_t)st->depth[TG_OUTBOX_READY];
	w->n2 = (int64_t)st->attempts;
}

static void
test_outbox_admin(void **state)
{
	char a[TG_WEBHOOK_ID_LEN], b[TG_WEBHOOK_ID_LEN];
	struct tg_outbox_query q = { .state = -1 };
	struct tg_outbox_result ok = { 204, -1, "" };
	struct tg_outbox_lease *l;
	struct wait w = { 0 };

	add_job("one", a);
	add_job("two", b);
	set_payload(b, "{}");
	expect_read(tg_state_outbox_list(F.st, &q, on_jobs, &w), &w);
	assert_int_equal(w.count, 2);
	wait_clear(&w);
	expect_later(tg_state_outbox_stats(F.st, T0, on_stats, &w), &w);
	assert_int_equal(w.n, 1);
	wait_clear(&w);
	l = lease(T0 + 1);
	expect_later(tg_state_outbox_complete(F.st, l, &ok, T0 + 2, on_outcome, &w), &w);
	wait_clear(&w);
	tg_outbox_lease_free(l);
	expect_later(tg_state_outbox_abandon(F.st, a, "export failed", T0 + 3, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	expect_later(tg_state_outbox_purge(F.st, T0 + 10, on_num, &w), &w);
	assert_int_equal(w.n, 2);
	wait_clear(&w);
	expect_read(tg_state_outbox_list(F.st, &q, on_jobs, &w), &w);
	assert_int_equal(w.count, 0);
	wait_clear(&w);
}

static void
test_codes(void **state)
{
	char id[TG_WEBHOOK_ID_LEN];
	struct wait w = { 0 };

	expect_read(tg_state_outbox_get(F.st, "msg_nope", on_jobs, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
	assert_int_equal(w.count, 0);
	wait_clear(&w);
	expect_later(tg_state_outbox_set_cid(F.st, "msg_nope", "c", on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
	wait_clear(&w);
	expect_later(tg_state_outbox_redeliver(F.st, "msg_nope", T0, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
	wait_clear(&w);
	add_job(NULL, id);
	expect_later(tg_state_outbox_redeliver(F.st, id, T0, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_CONFLICT);	/* still waiting for its payload */
	assert_true(w.res.err.msg[0] != '\0');
	wait_clear(&w);
	set_payload(id, "{}");
	expect_later(tg_state_payload_open(F.st, id, on_payload, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_CONFLICT);	/* ready: no second payload */
	assert_null(w.w);
	wait_clear(&w);
}

/* ---- runs and sweeps ---- */

static void
on_runs(const struct tg_state_res *res, const struct tg_run *runs, size_t n, int more,
    void *arg)
{
	struct wait *w = arg;

	got(w, res);
	w->count = n;
	w->more = more;
	if (n > 0) {
		w->s = strdup(runs[0].simulation_id);
		w->n = runs[0].status;
		w->n2 = runs[0].checks;
	}
}

static void
add_run(const char *sim, int64_t submitted, int want)
{
	struct tg_run_new r = {
		.simulation_id = sim, .host = "primary", .case_id = "CASE-1",
		.case_sha256 = "00", .submitted_at = submitted,
	};
	struct wait w = { 0 };

	expect_later(tg_state_runs_add(F.st, &r, submitted, on_done, &w), &w);
	assert_int_equal(w.res.rc, want);
}

static void
test_runs(void **state)
{
	static const char *const many[] = { "sim-x", "sim-b", "sim-\"a", "sim-a'", "" };
	struct tg_runs_query q = { 0 };
	struct wait w = { 0 };

	add_run("sim-a", T0, TG_STATE_OK);
	add_run("sim-b", T0 + 1000, TG_STATE_OK);
	add_run("sim-a", T0, TG_STATE_CONFLICT);
	settle(tg_state_runs_get(F.st, "sim-a", on_runs, &w), &w);
	assert_int_equal(w.count, 1);
	assert_string_equal(w.s, "sim-a");
	assert_int_equal(w.n, TG_RUN_IN_PROGRESS);
	wait_clear(&w);
	settle(tg_state_runs_list(F.st, &q, on_runs, &w), &w);
	assert_int_equal(w.count, 2);
	assert_string_equal(w.s, "sim-b");	/* newest first */
	wait_clear(&w);
	/* a set of ids: the ones held, whatever their spelling as JSON */
	settle(tg_state_runs_get_many(F.st, many, TG_NELEM(many), on_runs, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(w.count, 1);
	assert_string_equal(w.s, "sim-b");
	wait_clear(&w);
	settle(tg_state_runs_get_many(F.st, many, 0, on_runs, &w), &w);
	assert_int_equal(w.count, 0);
	wait_clear(&w);
	settle(tg_state_runs_due(F.st, T0 + 60000, 10, on_runs, &w), &w);
	assert_int_equal(w.count, 2);
	wait_clear(&w);
	settle(tg_state_runs_next_due(F.st, T0, on_num, &w), &w);
	assert_int_equal(w.n, T0 + TG_RUNS_CHECK_MIN_MS);
	wait_clear(&w);
	expect_later(tg_state_runs_set_status(F.st, "sim-a", TG_RUN_COMPLETED, 0, T0 + 5000,
	    on_num, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(w.n, 1);		/* became terminal now */
	wait_clear(&w);
	expect_later(tg_state_runs_set_status(F.st, "sim-x", TG_RUN_COMPLETED, 0, T0, on_num,
	    &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
	wait_clear(&w);
	settle(tg_state_runs_get(F.st, "sim-a", on_runs, &w), &w);
	assert_int_equal(w.n, TG_RUN_COMPLETED);
	assert_int_equal(w.n2, 1);
	wait_clear(&w);
}

static void
on_unhandled(const struct tg_state_res *res, const char *id, enum tg_run_status st,
    void *arg)
{
	struct wait *w = arg;

	got(w, res);
	w->s = id != NULL ? strdup(id) : NULL;
	w->n = st;
}

static void
on_blob(const struct tg_state_res *res, const void *data, size_t len, void *arg)
{
	struct wait *w = arg;

	got(w, res);
	w->count = len;
	w->s = data != NULL ? strndup(data, len) : NULL;
}

/* ---- the relay key ---- */

static void
on_key(const struct tg_state_res *res, const void *data, size_t len, void *arg)
{
	struct wait *w = arg;

	got(w, res);
	w->count = len;
	if (data != NULL) {
		w->p = malloc(len);
		memcpy(w->p, data, len);
	}
}

/* s's relay key into out (TG_STATE_KEY_LEN bytes, borrowed). */
static void
key_of(struct tg_state *s, uint8_t *out)
{
	struct wait w = { 0 };

	expect_later(tg_state_outbox_key(s, on_key, &w), &w);	/* may write: later */
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(w.count, TG_STATE_KEY_LEN);
	memcpy(out, w.p, TG_STATE_KEY_LEN);
	wait_clear(&w);
}

/* Made once, random, the same on every call and every handle on the
 * store (another instance, a restart). */
static void
test_outbox_key(void **state)
{
	struct tg_outbox_opts oo = pg_outbox;
	struct tg_state_opts opts = { .url = F.url, .outbox = &oo };
	static const uint8_t zero[TG_STATE_KEY_LEN];
	uint8_t a[TG_STATE_KEY_LEN], b[TG_STATE_KEY_LEN], c[TG_STATE_KEY_LEN];
	struct tg_state *other;
	struct tg_err err;

	key_of(F.st, a);
	assert_memory_not_equal(a, zero, sizeof(a));
	key_of(F.st, b);
	assert_memory_equal(a, b, sizeof(a));
	if (strcmp(F.b->name, "sqlite") == 0) {
		oo.path = F.outbox;
		opts.url = NULL;
	}
	other = tg_state_open(F.base, &opts, &err);
	assert_non_null(other);
	key_of(other, c);
	assert_memory_equal(a, c, sizeof(a));
	tg_state_close(other);
}

/* ---- outbox: the schedule, leases, admin and SQLite's files ---- */

static const int64_t sched3[] = { 0, 100, 200 };

/* F.st closed ("kill -9": nothing completed or released) and opened
 * again with schedule sc (n entries; NULL: the default, jittered) and
 * leases of lease_ms. */
static void
reopen(const int64_t *sc, size_t n, int64_t lease_ms)
{
	F.oo = (struct tg_outbox_opts){ .schedule_ms = sc, .nschedule = n,
		.jitter_pct = sc != NULL ? -1 : 0, .lease_ms = lease_ms };
	tg_state_close(F.st);
	F.st = NULL;
	event_base_loop(F.base, EVLOOP_NONBLOCK);
	assert_int_equal(strcmp(F.b->name, "sqlite") == 0 ? sqlite_open() : pg_open(), 0);
}

static void
on_job(const struct tg_state_res *res, const struct tg_outbox_job *jobs, size_t n, void *arg)
{
	struct wait *w = arg;
	struct tg_outbox_job *j;

	got(w, res);
	w->count = n;
	if (n == 0)
		return;
	w->p = j = malloc(sizeof(*j));
	*j = jobs[0];
	j->url = j->kind = j->correlation_id = j->service = j->api_key = j->secret_ref = NULL;
	w->s = jobs[0].last_error != NULL ? strdup(jobs[0].last_error) : NULL;
}

/* Job id's numbers and state into *j (its last error: the wait's s, the
 * caller clears w). */
static void
get_job(const char *id, struct tg_outbox_job *j, struct wait *w)
{
	expect_read(tg_state_outbox_get(F.st, id, on_job, w), w);
	assert_int_equal(w->res.rc, TG_STATE_OK);
	*j = *(struct tg_outbox_job *)w->p;
}

static enum tg_outbox_state
complete_as(struct tg_outbox_lease *l, int status, int64_t ra, const char *error, int64_t now,
    int64_t *next)
{
	struct tg_outbox_result r = { status, ra, error };
	struct wait w = { 0 };

	expect_later(tg_state_outbox_complete(F.st, l, &r, now, on_outcome, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	if (next != NULL)
		*next = w.n2;
	tg_outbox_lease_free(l);
	return (enum tg_outbox_state)w.n;
}

static void
redeliver_refused(const char *id, int64_t now, const char *why)
{
	struct wait w = { 0 };

	expect_later(tg_state_outbox_redeliver(F.st, id, now, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_CONFLICT);
	assert_non_null(strstr(w.res.err.msg, why));
}

/* Every outcome: a retry on the schedule, 2xx delivered, 410 gone, 3xx,
 * 4xx and no answer failures until the job is dead with its last error;
 * Retry-After honoured on 429 and 5xx only; what cannot be redelivered. */
static void
test_outbox_outcomes(void **state)
{
	char id[TG_WEBHOOK_ID_LEN], gone[TG_WEBHOOK_ID_LEN], dead[TG_WEBHOOK_ID_LEN];
	static const int fails[] = { 301, 404 };
	struct tg_outbox_lease *l;
	struct tg_outbox_job j;
	struct wait w = { 0 };
	int64_t next, now = T0 + 1000;
	int i;

	reopen(sched3, TG_NELEM(sched3), 1000);
	add_job("c-1", id);
	assert_int_equal(strlen(id), 36);
	get_job(id, &j, &w);
	assert_int_equal(j.state, TG_OUTBOX_WAITING);
	assert_int_equal(j.size, -1);
	wait_clear(&w);
	assert_null(lease(T0 + 10000));			/* no payload, nothing to send */
	set_payload_at(id, "{\"a\":1}", T0 + 50);
	l = lease(T0 + 50);
	assert_string_equal(l->id, id);
	assert_int_equal(l->attempt, 1);
	assert_int_equal(l->size, 7);
	assert_int_equal(l->first_delay_ms, 0);
	assert_int_equal(l->expires_at, T0 + 1050);
	assert_string_equal(l->secret_ref, "main");
	assert_null(lease(T0 + 50));			/* held */
	assert_int_equal(complete_as(l, 500, -1, "boom", T0 + 60, &next), TG_OUTBOX_READY);
	assert_int_equal(next, T0 + 160);		/* schedule[1], no jitter */
	assert_null(lease(T0 + 159));
	l = lease(T0 + 160);
	assert_int_equal(l->attempt, 2);
	assert_int_equal(l->first_delay_ms, -1);
	assert_int_equal(complete_as(l, 204, -1, "", T0 + 170, NULL), TG_OUTBOX_DELIVERED);
	get_job(id, &j, &w);
	assert_int_equal(j.state, TG_OUTBOX_DELIVERED);
	assert_int_equal(j.attempts, 2);
	assert_int_equal(j.last_status, 204);
	assert_int_equal(j.done_at, T0 + 170);
	assert_int_equal(j.first_attempt_at, T0 + 50);
	assert_int_equal(j.ready_at, T0 + 50);
	wait_clear(&w);
	redeliver_refused(id, T0 + 300, "no longer kept");
	add_job("gone", gone);
	set_payload(gone, "{}");
	assert_int_equal(complete_as(lease(T0 + 200), 410, -1, "", T0 + 200, NULL), TG_OUTBOX_GONE);
	add_job("dead", dead);
	set_payload(dead, "{}");
	for (i = 0; i < 2; i++, now += 1000)
		assert_int_equal(complete_as(lease(now), fails[i], -1, "no", now, NULL),
		    TG_OUTBOX_READY);
	l = lease(now);
	assert_int_equal(l->attempt, 3);
	assert_int_equal(complete_as(l, 0, -1, "connection refused", now, NULL), TG_OUTBOX_DEAD);
	assert_null(lease(now + 100000));
	get_job(dead, &j, &w);
	assert_int_equal(j.state, TG_OUTBOX_DEAD);
	assert_int_equal(j.attempts, 3);
	assert_int_equal(j.last_status, 0);
	assert_string_equal(w.s, "connection refused");
	wait_clear(&w);
	add_job("ra", id);
	set_payload(id, "{}");
	assert_int_equal(complete_as(lease(T0 + 5000), 429, 5000, "", T0 + 5000, &next),
	    TG_OUTBOX_READY);
	assert_int_equal(next, T0 + 10000);
	assert_int_equal(complete_as(lease(T0 + 10000), 404, 5000, "", T0 + 10000, &next),
	    TG_OUTBOX_READY);
	assert_int_equal(next, T0 + 10200);
	l = lease(T0 + 10200);
	redeliver_refused(id, T0 + 10201, "in flight");
	tg_outbox_lease_free(l);
}

/* The default schedule: 5 s and up to 10 % more before the second
 * attempt; a Retry-After stretches a delay up to 24 h, no further. */
static void
test_outbox_default_schedule(void **state)
{
	char id[TG_WEBHOOK_ID_LEN];
	int64_t next;

	reopen(NULL, 0, 60000);
	add_job("def", id);
	set_payload(id, "{}");
	assert_int_equal(complete_as(lease(T0), 500, -1, "", T0, &next), TG_OUTBOX_READY);
	assert_in_range(next, T0 + 5000, T0 + 5500);
	assert_int_equal(complete_as(lease(next), 503, 30LL * 86400000, "", next, &next),
	    TG_OUTBOX_READY);
	assert_true(next > T0 + 86400000 && next <= T0 + 5500 + 86400000);
}

/* A process dies holding a lease: after reopening, the job waits for the
 * lease to expire and is then attempted again (at least once); the dead
 * process's lease can no longer record anything. A renewed lease holds
 * its job until the new expiry; a released one is due at once, its
 * interrupted attempt counted. */
static void
test_outbox_lease_expiry(void **state)
{
	struct tg_outbox_result ok = { 200, -1, "" };
	char id[TG_WEBHOOK_ID_LEN];
	struct tg_outbox_lease *l, *l2;
	struct wait w = { 0 };

	reopen(sched3, TG_NELEM(sched3), 1000);
	add_job("crash", id);
	set_payload(id, "{}");
	l = lease(T0);
	assert_int_equal(l->expires_at, T0 + 1000);
	reopen(sched3, TG_NELEM(sched3), 1000);
	assert_null(lease(T0 + 999));
	expect_read(tg_state_outbox_next_due(F.st, on_num, &w), &w);
	assert_int_equal(w.n, T0 + 1000);
	wait_clear(&w);
	l2 = lease(T0 + 1000);
	assert_string_equal(l2->id, id);
	assert_int_equal(l2->attempt, 2);
	expect_later(tg_state_outbox_complete(F.st, l, &ok, T0 + 1001, on_outcome, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_CONFLICT);
	assert_non_null(strstr(w.res.err.msg, "lost"));
	wait_clear(&w);
	expect_later(tg_state_outbox_renew(F.st, l, T0 + 1001, on_num, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_CONFLICT);
	wait_clear(&w);
	tg_outbox_lease_free(l);
	expect_later(tg_state_outbox_renew(F.st, l2, T0 + 1900, on_num, &w), &w);
	assert_int_equal(w.n, T0 + 2900);
	wait_clear(&w);
	assert_null(lease(T0 + 2500));
	expect_later(tg_state_outbox_release(F.st, l2, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	tg_outbox_lease_free(l2);
	l = lease(T0 + 2500);
	assert_int_equal(l->attempt, 3);
	assert_int_equal(complete_as(l, 200, -1, "", T0 + 2501, NULL), TG_OUTBOX_DELIVERED);
}

static void
on_list(const struct tg_state_res *res, const struct tg_outbox_job *jobs, size_t n, void *arg)
{
	struct wait *w = arg;
	char (*ids)[TG_WEBHOOK_ID_LEN];
	size_t i;

	got(w, res);
	w->count = n;
	w->p = ids = calloc(n + 1, sizeof(*ids));
	for (i = 0; i < n; i++) {
		memcpy(ids[i], jobs[i].id, sizeof(ids[i]));
		w->n = jobs[i].state;
	}
}

/* The ids q (borrowed) lists, newest first, into w->p; their number. */
static size_t
list_ids(const struct tg_outbox_query *q, struct wait *w)
{
	memset(w, 0, sizeof(*w));
	expect_read(tg_state_outbox_list(F.st, q, on_list, w), w);
	assert_int_equal(w->res.rc, TG_STATE_OK);
	return w->count;
}

static void
on_stats_all(const struct tg_state_res *res, const struct tg_outbox_stats *st, void *arg)
{
	struct wait *w = arg;

	got(w, res);
	w->p = malloc(sizeof(*st));
	memcpy(w->p, st, sizeof(*st));
}

static struct tg_outbox_stats
stats_at(int64_t now)
{
	struct tg_outbox_stats st;
	struct wait w = { 0 };

	expect_later(tg_state_outbox_stats(F.st, now, on_stats_all, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	st = *(struct tg_outbox_stats *)w.p;
	wait_clear(&w);
	return st;
}

static void
code_is(struct tg_state_op *op, struct wait *w, int rc)
{
	settle(op, w);
	assert_int_equal(w->res.rc, rc);
	wait_clear(w);
}

/* Lists by state, correlationId, time, page; the counters of stats; a
 * purge of finished jobs only; the codes of jobs that cannot take what is
 * asked. */
static void
test_outbox_list_and_stats(void **state)
{
	char first[TG_WEBHOOK_ID_LEN], b1[TG_WEBHOOK_ID_LEN], b2[TG_WEBHOOK_ID_LEN];
	struct tg_outbox_query q = { .state = -1 };
	struct tg_outbox_stats st;
	struct tg_outbox_lease *l;
	struct wait w;

	reopen(sched3, TG_NELEM(sched3), 1000);
	add_job_at("a", first, T0);
	add_job_at("b", b1, T0 + 1);
	set_payload(b1, "{}");
	add_job_at("b", b2, T0 + 2);
	set_payload(b2, "{}");
	assert_int_equal(list_ids(&q, &w), 3);
	assert_string_equal(((char (*)[TG_WEBHOOK_ID_LEN])w.p)[0], b2);	/* newest first */
	assert_string_equal(((char (*)[TG_WEBHOOK_ID_LEN])w.p)[2], first);
	wait_clear(&w);
	q = (struct tg_outbox_query){ .state = TG_OUTBOX_READY, .limit = 1, .offset = 1 };
	assert_int_equal(list_ids(&q, &w), 1);
	assert_string_equal(w.p, b1);
	wait_clear(&w);
	q = (struct tg_outbox_query){ .state = -1, .correlation_id = "a" };
	assert_int_equal(list_ids(&q, &w), 1);
	wait_clear(&w);
	q = (struct tg_outbox_query){ .state = -1, .since_ms = T0 + 2 };
	assert_int_equal(list_ids(&q, &w), 1);
	assert_string_equal(w.p, b2);
	wait_clear(&w);
	assert_int_equal(complete_as(lease(T0 + 40), 200, -1, "", T0 + 50, NULL),
	    TG_OUTBOX_DELIVERED);
	l = lease(T0 + 60);				/* b2's first attempt, in flight */
	st = stats_at(T0 + 70);
	assert_int_equal(st.depth[TG_OUTBOX_WAITING], 1);
	assert_int_equal(st.depth[TG_OUTBOX_READY], 1);
	assert_int_equal(st.depth[TG_OUTBOX_DELIVERED], 1);
	assert_int_equal(st.leased, 1);
	assert_int_equal(st.attempts, 2);
	assert_int_equal(st.delivered, 1);
	assert_int_equal(st.first_delay_count, 2);
	assert_int_equal(st.first_delay_sum_ms, 40 + 60);
	assert_int_equal(complete_as(l, 500, -1, "", T0 + 80, NULL), TG_OUTBOX_READY);
	st = stats_at(T0 + 90);
	assert_int_equal(st.retries, 1);
	assert_int_equal(st.leased, 0);
	memset(&w, 0, sizeof(w));
	expect_later(tg_state_outbox_purge(F.st, T0 + 51, on_num, &w), &w);
	assert_int_equal(w.n, 1);			/* finished jobs only */
	wait_clear(&w);
	code_is(tg_state_outbox_get(F.st, b1, on_jobs, &w), &w, TG_STATE_NOT_FOUND);
	st = stats_at(T0 + 90);
	assert_int_equal(st.depth[TG_OUTBOX_DELIVERED], 0);
	assert_int_equal(st.depth[TG_OUTBOX_READY] + st.depth[TG_OUTBOX_WAITING], 2);
	code_is(tg_state_outbox_abandon(F.st, first, "export failed", T0, on_done, &w), &w, 0);
	code_is(tg_state_outbox_abandon(F.st, first, "again", T0, on_done, &w), &w,
	    TG_STATE_CONFLICT);
	code_is(tg_state_outbox_abandon(F.st, "msg_ab", "x", T0, on_done, &w), &w,
	    TG_STATE_NOT_FOUND);
	redeliver_refused(first, T0, "abandoned");
	code_is(tg_state_payload_open(F.st, "msg_0000", on_payload, &w), &w, TG_STATE_NOT_FOUND);
	code_is(tg_state_payload_open(F.st, "../../etc/passwd", on_payload, &w), &w,
	    TG_STATE_NOT_FOUND);
}

/* PostgreSQL: the figures of the payload bytes held (the total's, and
 * each key's summed) match the rows; SQLite keeps none. */
static void
held_matches_rows(void)
{
	char q[512];
	PGresult *r;

	if (F.side == NULL)
		return;
	snprintf(q, sizeof(q), "SELECT (SELECT coalesce(sum(octet_length(data)), 0) FROM"
	    " %s.outbox_payloads) = (SELECT bytes FROM %s.outbox_held WHERE scope = 0),"
	    " (SELECT coalesce(sum(bytes), 0) FROM %s.outbox_held WHERE scope = 1) ="
	    " (SELECT bytes FROM %s.outbox_held WHERE scope = 0)", F.schema, F.schema,
	    F.schema, F.schema);
	r = PQexec(F.side, q);
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	assert_string_equal(PQgetvalue(r, 0, 0), "t");
	assert_string_equal(PQgetvalue(r, 0, 1), "t");
	PQclear(r);
}

/* A committed payload of key's (borrowed) into id. */
static void
commit_of(const char *key, const char *body, char id[TG_WEBHOOK_ID_LEN])
{
	struct tg_state_payload *p = quota_writer(key, NULL, id);
	struct wait w = { 0 };

	assert_int_equal(quota_append(p, strlen(body), NULL, 0), TG_STATE_OK);
	expect_later(tg_state_payload_commit(p, T0, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
}

/* The bytes held survive a restart, a dead letter keeps its bytes until
 * purged, and an append refused for them leaves its job waiting. */
static void
test_outbox_quota_count(void **state)
{
	const struct tg_outbox_quota q = { 20, 0 };
	char a[TG_WEBHOOK_ID_LEN], b[TG_WEBHOOK_ID_LEN], c[TG_WEBHOOK_ID_LEN];
	struct tg_state_payload *p;
	struct wait w = { 0 };

	commit_of("demo-key", "0123456", a);
	commit_of("demo-key", "6543210", b);
	usage_is("demo-key", 14, 14);
	usage_is(NULL, 14, 0);
	reopen(sched, TG_NELEM(sched), 60000);
	usage_is("demo-key", 14, 14);			/* summed from the database */
	p = quota_writer("demo-key", &q, c);
	assert_int_equal(quota_append(p, 7, NULL, 0), TG_STATE_REFUSED);
	tg_state_payload_abort(p);
	expect_read(tg_state_outbox_get(F.st, c, on_jobs, &w), &w);
	assert_int_equal(w.n, TG_OUTBOX_WAITING);
	wait_clear(&w);
	usage_is(NULL, 14, 0);
	assert_int_equal(complete_as(lease(T0 + 10), 200, -1, "", T0 + 11, NULL),
	    TG_OUTBOX_DELIVERED);
	usage_is("demo-key", 7, 7);			/* delivered: freed */
	assert_int_equal(complete_as(lease(T0 + 12), 500, -1, "", T0 + 12, NULL),
	    TG_OUTBOX_DEAD);
	usage_is("demo-key", 7, 7);			/* a dead letter keeps its data */
	expect_later(tg_state_outbox_purge(F.st, T0 + 100000, on_num, &w), &w);
	assert_int_equal(w.n, 2);
	wait_clear(&w);
	usage_is("demo-key", 0, 0);
	held_matches_rows();			/* the purge's cascade gave them back */
}

/* PostgreSQL: the side connection holds back every write of payload rows
 * (lock) or lets them go; SQLite: nothing. */
static void
side_payload_lock(int lock)
{
	char q[160];

	if (F.side == NULL)
		return;
	snprintf(q, sizeof(q), lock ? "BEGIN; LOCK TABLE %s.outbox_payloads IN SHARE MODE" :
	    "COMMIT", F.schema);
	assert_int_equal(side_exec(q), 0);
}

/* n bytes appended to a and m to b in one turn, held back until both are
 * at the server (two connections with PostgreSQL), so that they start
 * together: how many were refused, each answered once. */
static int
race_append(struct tg_state_payload *a, size_t n, struct tg_state_payload *b, size_t m)
{
	static char bytes[256];
	struct evbuffer *ba = evbuffer_new(), *bb = evbuffer_new();
	struct wait wa = { 0 }, wb = { 0 };
	struct tg_state_op *oa, *ob;
	int refused;

	memset(bytes, 'r', sizeof(bytes));
	evbuffer_add(ba, bytes, n);
	evbuffer_add(bb, bytes, m);
	side_payload_lock(1);
	oa = tg_state_payload_append(a, ba, on_done, &wa);
	ob = tg_state_payload_append(b, bb, on_done, &wb);
	{
		struct timeval tv = { 0, 200000 };	/* both sent, both waiting */

		event_base_loopexit(F.base, &tv);
		event_base_loop(F.base, 0);
	}
	side_payload_lock(0);
	settle(oa, &wa);
	settle(ob, &wb);
	evbuffer_free(ba);
	evbuffer_free(bb);
	assert_true(wa.res.rc == TG_STATE_OK || wa.res.rc == TG_STATE_REFUSED);
	assert_true(wb.res.rc == TG_STATE_OK || wb.res.rc == TG_STATE_REFUSED);
	refused = (wa.res.rc == TG_STATE_REFUSED) + (wb.res.rc == TG_STATE_REFUSED);
	return refused;
}

/* The cap holds exactly under racing appends: two of one key that would
 * each fit its cap alone but not together, then two of two keys under
 * the total's; one passes, one is refused. An abort gives its bytes back,
 * and the figures survive a reopen and match the rows. */
static void
test_payload_quota_race(void **state)
{
	const struct tg_outbox_quota q = { 100, 60 };
	char a[TG_WEBHOOK_ID_LEN], b[TG_WEBHOOK_ID_LEN], c[TG_WEBHOOK_ID_LEN];
	char d[TG_WEBHOOK_ID_LEN];
	struct tg_state_payload *pa, *pb, *pc, *pd;

	pa = quota_writer("k1", &q, a);
	pb = quota_writer("k1", &q, b);
	assert_int_equal(race_append(pa, 40, pb, 40), 1);	/* 80 of k1's 60 */
	usage_is("k1", 40, 40);
	held_matches_rows();
	pc = quota_writer("k2", &q, c);
	pd = quota_writer("k3", &q, d);
	assert_int_equal(race_append(pc, 35, pd, 35), 1);	/* 110 of the 100 */
	usage_is("k1", 75, 40);
	held_matches_rows();
	tg_state_payload_abort(pa);
	tg_state_payload_abort(pb);
	tg_state_payload_abort(pc);
	tg_state_payload_abort(pd);
	usage_comes("k1", 0, 0);			/* the aborts gave it back */
	usage_is("k2", 0, 0);
	held_matches_rows();
	commit_of("k2", "0123456789", a);
	commit_of(NULL, "01234", b);
	reopen(sched, TG_NELEM(sched), 60000);
	usage_is("k2", 15, 10);
	usage_is(NULL, 15, 5);
	held_matches_rows();
}

/* PostgreSQL: a database of schema version 7 (payload rows, no figures)
 * migrated by the next open counts its figures from the rows it holds. */
static void
test_payload_held_migration(void **state)
{
	char a[TG_WEBHOOK_ID_LEN], b[TG_WEBHOOK_ID_LEN], q[512];

	if (F.side == NULL)
		return;		/* SQLite's figure lives in memory */
	commit_of("k1", "0123456789", a);
	commit_of(NULL, "012", b);
	snprintf(q, sizeof(q), "SET search_path = %s; DROP TABLE outbox_held;"
	    " DROP FUNCTION tidegate_held_change CASCADE;"
	    " DROP FUNCTION tidegate_held_job_gone CASCADE; DROP INDEX outbox_jobs_pick;"
	    " DELETE FROM tidegate_schema WHERE version > 7; RESET search_path", F.schema);
	assert_int_equal(side_exec(q), 0);
	reopen(sched, TG_NELEM(sched), 60000);
	usage_is("k1", 13, 10);
	usage_is(NULL, 13, 3);
	held_matches_rows();
}

/* SQLite: the plan of sql on the outbox file, every line, ';' between.
 * The caller frees. */
static char *
sqlite_plan(const char *sql)
{
	char *all = tg_xstrdup(""), *next, *q = tg_xasprintf("EXPLAIN QUERY PLAN %s", sql);
	sqlite3_stmt *st;
	sqlite3 *db;

	assert_int_equal(sqlite3_open_v2(F.outbox, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, q, -1, &st, NULL), SQLITE_OK);
	while (sqlite3_step(st) == SQLITE_ROW) {
		next = tg_xasprintf("%s%s;", all, (const char *)sqlite3_column_text(st, 3));
		free(all);
		all = next;
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	free(q);
	return all;
}

/* The plan of a lease's pick (its order and condition, ../outbox.c) among
 * 3,000 ready jobs: every line, ';' between (PostgreSQL: its own schema;
 * SQLite: the outbox file). The caller frees. */
static char *
pick_plan(void)
{
	static const char pick[] = "SELECT id FROM %s.outbox_jobs WHERE state = 'ready'"
	    " AND next_at <= 5000 AND (lease_expires IS NULL OR lease_expires <= 5000)"
	    " ORDER BY next_at, seq LIMIT 1";
	char q[512], sel[384], *all = tg_xstrdup(""), *next;
	PGresult *r;
	int i;

	if (F.side != NULL) {
		snprintf(q, sizeof(q), "INSERT INTO %s.outbox_jobs (id, url, secret_ref, kind,"
		    " content_type, state, next_at, created_at) SELECT 'msg_p' || i,"
		    " 'https://h.example/', 'main', 'export', 'text/plain', 'ready', 1000 + i / 500,"
		    " 1000 FROM generate_series(1, 3000) i; ANALYZE %s.outbox_jobs", F.schema,
		    F.schema);
		assert_int_equal(side_exec(q), 0);
		snprintf(sel, sizeof(sel), pick, F.schema);
		snprintf(q, sizeof(q), "EXPLAIN (COSTS OFF) %s FOR UPDATE SKIP LOCKED", sel);
		r = PQexec(F.side, q);
		assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
		for (i = 0; i < PQntuples(r); i++, free(all), all = next)
			next = tg_xasprintf("%s%s;", all, PQgetvalue(r, i, 0));
		PQclear(r);
		return all;
	}
	free(all);
	snprintf(sel, sizeof(sel), pick, "main");
	return sqlite_plan(sel);
}

/* A lease's pick reads the ready jobs by an index in its order and stops
 * at the first it may take: no sort of every due job. (SQLite's
 * outbox_jobs_due has it: seq is the rowid, each entry's last column.) */
static void
test_lease_pick_plan(void **state)
{
	char *plan;

	usage_is(NULL, 0, 0);		/* the schema is there */
	plan = pick_plan();
	if ((F.side != NULL && strstr(plan, "outbox_jobs_pick") == NULL) ||
	    strstr(plan, "Sort") != NULL || strstr(plan, "TEMP B-TREE") != NULL)
		fail_msg("the lease's pick: %s", plan);
	free(plan);
}

/* SQLite: the payload bytes held are summed (sqlite/sq_files.c, the same
 * statement) from the index of the jobs that hold some, read alone, not
 * from every job kept. */
static void
test_held_sum_plan(void **state)
{
	char *plan;

	if (F.side != NULL)
		return;		/* PostgreSQL keeps figures (test_payload_quota_race) */
	usage_is(NULL, 0, 0);
	plan = sqlite_plan("SELECT coalesce(api_key, ''), sum(payload_size) FROM outbox_jobs"
	    " INDEXED BY outbox_jobs_held WHERE state IN ('ready', 'dead') AND payload_size IS NOT NULL GROUP BY 1");
	if (strstr(plan, "COVERING INDEX outbox_jobs_held") == NULL)
		fail_msg("the bytes held: %s", plan);
	free(plan);
}

static void
test_outbox_schedule_parse(void **state)
{
	char *good[] = { "0", "5s", "5m", "2h" }, *bad[] = { "5s", "soon" };
	struct tg_strlist g = { good, 4 }, b = { bad, 2 }, e = { NULL, 0 };
	struct tg_err err;
	int64_t *ms;
	size_t n;

	assert_int_equal(tg_outbox_schedule_parse(&g, &ms, &n, &err), 0);
	assert_int_equal(n, 4);
	assert_int_equal(ms[1], 5000);
	assert_int_equal(ms[2], 300000);
	assert_int_equal(ms[3], 7200000);
	free(ms);
	assert_int_equal(tg_outbox_schedule_parse(&b, &ms, &n, &err), -1);
	assert_non_null(strstr(err.msg, "soon"));
	assert_int_equal(tg_outbox_schedule_parse(&e, &ms, &n, &err), -1);
	assert_int_equal(tg_outbox_state_parse("dead"), TG_OUTBOX_DEAD);
	assert_int_equal(tg_outbox_state_parse("nope"), -1);
	assert_string_equal(tg_outbox_state_str(TG_OUTBOX_GONE), "gone");
}

/* SQLite: a payload file of the outbox's directory ("<id>.part",
 * "<id>.body"), name given, is there. */
static int
payload_file(const char *name, const char *suffix)
{
	char path[192];
	struct stat sb;

	snprintf(path, sizeof(path), "%s.payloads/%s%s", F.outbox, name, suffix);
	return stat(path, &sb) == 0;
}

static void
payload_touch(const char *name, const char *suffix)
{
	char path[192];
	FILE *f;

	snprintf(path, sizeof(path), "%s.payloads/%s%s", F.outbox, name, suffix);
	assert_non_null(f = fopen(path, "w"));
	fclose(f);
}

/* SQLite's payload files: a committed payload is "<id>.body" until its
 * job is delivered (a dead letter keeps it); jobs survive a restart, and
 * the open sweeps the files no job needs (an unfinished write, a job
 * unknown) and leaves the rest. */
static void
test_outbox_files(void **state)
{
	char wt[TG_WEBHOOK_ID_LEN], r[TG_WEBHOOK_ID_LEN], d[TG_WEBHOOK_ID_LEN];
	struct wait w = { 0 };

	add_job("w", wt);
	add_job("r", r);
	set_payload(r, "{}");
	assert_true(payload_file(r, ".body"));
	add_job("d", d);
	set_payload(d, "{}");
	assert_int_equal(complete_as(lease(T0), 200, -1, "", T0, NULL), TG_OUTBOX_DELIVERED);
	assert_int_equal(complete_as(lease(T0), 500, -1, "", T0, NULL), TG_OUTBOX_DEAD);
	usage_is(NULL, 2, 2);			/* after the removal, on the writer thread */
	assert_false(payload_file(r, ".body"));
	assert_true(payload_file(d, ".body"));
	payload_touch("msg_feedface", ".body");	/* no such job */
	payload_touch(wt, ".part");		/* a writer that died */
	payload_touch("notours", "");
	reopen(sched, TG_NELEM(sched), 60000);
	assert_false(payload_file(wt, ".part"));
	assert_false(payload_file("msg_feedface", ".body"));
	assert_true(payload_file(d, ".body"));
	assert_true(payload_file("notours", ""));
	expect_read(tg_state_outbox_get(F.st, r, on_jobs, &w), &w);
	assert_int_equal(w.n, TG_OUTBOX_DELIVERED);
	wait_clear(&w);
	set_payload(wt, "{}");			/* the waiting job takes its payload */
}

/* A version 1 file (jobs in "jobs", leases in their own table) with a job
 * in every state, a leased one among them, and a relay key: after the
 * migration every job is there in its state, the lease still holds its
 * job until its expiry, payloads and key are the same. */
static void
test_outbox_file_v1(void **state)
{
	static const char *const ids[] = { "msg_0a", "msg_0b", "msg_0c", "msg_0d", "msg_0e",
		"msg_0f", "msg_1a" };
	static const int states[] = { TG_OUTBOX_WAITING, TG_OUTBOX_READY, TG_OUTBOX_READY,
		TG_OUTBOX_DELIVERED, TG_OUTBOX_GONE, TG_OUTBOX_DEAD, TG_OUTBOX_DEAD };
	static const uint8_t key[TG_STATE_KEY_LEN] = { 7, 7, 7 };
	uint8_t back[TG_STATE_KEY_LEN];
	struct tg_outbox_lease *l;
	struct tg_outbox_job j;
	struct wait w = { 0 };
	char cmd[512];
	size_t i;

	tg_state_close(F.st);
	F.st = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf %s %s-wal %s-shm %s.payloads", F.outbox, F.outbox,
	    F.outbox, F.outbox);
	assert_int_equal(system(cmd), 0);
	sqlite_exec(F.outbox, "CREATE TABLE jobs (id TEXT PRIMARY KEY, url TEXT NOT NULL,"
	    " secret_ref TEXT NOT NULL, api_key TEXT, kind TEXT NOT NULL, correlation_id TEXT,"
	    " service TEXT, content_type TEXT NOT NULL, state TEXT NOT NULL CHECK (state IN"
	    " ('waiting', 'ready', 'delivered', 'gone', 'dead')), payload_size INTEGER,"
	    " attempts INTEGER NOT NULL DEFAULT 0, next_at INTEGER, created_at INTEGER NOT NULL,"
	    " ready_at INTEGER, first_attempt_at INTEGER, last_attempt_at INTEGER,"
	    " last_status INTEGER, last_error TEXT, done_at INTEGER);"
	    "CREATE TABLE leases (job_id TEXT PRIMARY KEY REFERENCES jobs (id) ON DELETE CASCADE,"
	    " token TEXT NOT NULL, attempt INTEGER NOT NULL, expires_at INTEGER NOT NULL);"
	    "CREATE TABLE state_keys (name TEXT PRIMARY KEY, key BLOB NOT NULL);"
	    "INSERT INTO jobs (id, url, secret_ref, kind, content_type, state, payload_size,"
	    " attempts, next_at, created_at, ready_at, last_status, last_error, done_at) VALUES"
	    " ('msg_0a', 'https://h.example/a', 'main', 'export', 'application/json', 'waiting',"
	    "  NULL, 0, NULL, 1700000000000, NULL, NULL, 'waiting for room', NULL),"
	    " ('msg_0b', 'https://h.example/b', 'main', 'export', 'application/json', 'ready',"
	    "  2, 0, 1700000000000, 1700000000001, 1700000000000, NULL, NULL, NULL),"
	    " ('msg_0c', 'https://h.example/c', 'main', 'export', 'application/json', 'ready',"
	    "  2, 1, 1699999999999, 1700000000002, 1699999999999, NULL, NULL, NULL),"
	    " ('msg_0d', 'https://h.example/d', 'main', 'export', 'application/json',"
	    "  'delivered', 2, 1, NULL, 1700000000003, 1, 200, NULL, 5),"
	    " ('msg_0e', 'https://h.example/e', 'main', 'export', 'application/json', 'gone',"
	    "  2, 1, NULL, 1700000000004, 1, 410, NULL, 5),"
	    " ('msg_0f', 'https://h.example/f', 'main', 'export', 'application/json', 'dead',"
	    "  2, 8, NULL, 1700000000005, 1, 500, 'server error', 5),"
	    " ('msg_1a', 'https://h.example/g', 'main', 'export', 'application/json', 'dead',"
	    "  NULL, 0, NULL, 1700000000006, NULL, NULL, 'export failed', 5);"
	    "INSERT INTO leases VALUES ('msg_0c', 'tok', 2, 4102444800000);"
	    "INSERT INTO state_keys VALUES ('relay', x'0707070000000000000000000000000000000000"
	    "000000000000000000000000');"
	    "PRAGMA user_version = 1");
	assert_int_equal(mkdir(strcat(strcpy(cmd, F.outbox), ".payloads"), 0700), 0);
	payload_touch("msg_0b", ".body");
	payload_touch("msg_0c", ".body");
	payload_touch("msg_0f", ".body");
	assert_int_equal(sqlite_open(), 0);
	assert_string_equal(sqlite_value(F.outbox, "PRAGMA user_version"), "3");
	for (i = 0; i < TG_NELEM(ids); i++) {
		get_job(ids[i], &j, &w);
		assert_int_equal(j.state, states[i]);
		assert_int_equal(j.leased, i == 2);
		wait_clear(&w);
	}
	l = lease(T0 + 500);			/* the leased job waits for its lease */
	assert_string_equal(l->id, "msg_0b");
	assert_int_equal(l->size, 2);
	tg_outbox_lease_free(l);
	assert_null(lease(T0 + 500));
	l = lease(4102444800000LL);		/* its expiry: taken over */
	assert_string_equal(l->id, "msg_0c");
	assert_int_equal(l->attempt, 2);
	assert_true(payload_file("msg_0c", ".body") && payload_file("msg_0f", ".body"));
	tg_outbox_lease_free(l);
	code_is(tg_state_outbox_redeliver(F.st, "msg_0f", T0, on_done, &w), &w, 0);
	redeliver_refused("msg_1a", T0, "abandoned");
	set_payload("msg_0a", "{}");
	key_of(F.st, back);
	assert_memory_equal(back, key, sizeof(key));
}

static void
test_run_end_and_archive(void **state)
{
	yajl_val fig = yajl_tree_parse("{\"cost\": 12.5, \"name\": \"x\"}", NULL, 0);
	struct wait w = { 0 };

	add_run("sim-c", T0, TG_STATE_OK);
	expect_later(tg_state_runs_set_status(F.st, "sim-c", TG_RUN_COMPLETED, 0, T0 + 1,
	    on_num, &w), &w);
	wait_clear(&w);
	settle(tg_state_runs_next_unhandled(F.st, on_unhandled, &w), &w);
	assert_string_equal(w.s, "sim-c");
	assert_int_equal(w.n, TG_RUN_COMPLETED);
	wait_clear(&w);
	expect_later(tg_state_runs_set_handled(F.st, "sim-c", on_done, &w), &w);
	wait_clear(&w);
	settle(tg_state_runs_next_unhandled(F.st, on_unhandled, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_null(w.s);
	wait_clear(&w);
	expect_later(tg_state_runs_set_figures(F.st, "sim-c", fig, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	yajl_tree_free(fig);
	expect_later(tg_state_runs_archive(F.st, "sim-c", "{\"r\":1}", 7, T0 + 2, on_done, &w),
	    &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	settle(tg_state_runs_archived(F.st, "sim-c", on_blob, &w), &w);
	assert_int_equal(w.count, 7);
	assert_string_equal(w.s, "{\"r\":1}");
	wait_clear(&w);
	settle(tg_state_runs_archive_usage(F.st, on_pair, &w), &w);
	assert_int_equal(w.n, 7);
	assert_int_equal(w.n2, 1);
	wait_clear(&w);
	expect_later(tg_state_runs_expire(F.st, T0 + 40LL * 86400000, on_num, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	expect_later(tg_state_runs_purge(F.st, T0 + 400LL * 86400000, on_pair, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(w.n, 1);
	wait_clear(&w);
}

static void
on_failure(const struct tg_state_res *res, const struct tg_run *runs, size_t n, int more,
    void *arg)
{
	struct wait *w = arg;

	got(w, res);
	w->count = n;
	if (n > 0) {
		w->s = runs[0].failure != NULL ? strdup(runs[0].failure) : NULL;
		w->n = runs[0].status;
		w->n2 = runs[0].checks;
	}
}

static void
on_runs_stats(const struct tg_state_res *res, const struct tg_runs_stats *st, void *arg)
{
	struct wait *w = arg;

	got(w, res);
	if (st != NULL) {
		w->n = (int64_t)(st->runs[TG_RUN_COMPLETED] * 100 + st->runs[TG_RUN_FAILED]);
		w->n2 = (int64_t)st->archived_bytes;
	}
}

/* Archive results of run sim (len bytes of 'x'); its code. */
static int
archive(const char *sim, size_t len)
{
	char buf[128];
	struct wait w = { 0 };

	memset(buf, 'x', sizeof(buf));
	expect_later(tg_state_runs_archive(F.st, sim, buf, len, T0, on_done, &w), &w);
	return w.res.rc;
}

static void
complete_run(const char *sim, enum tg_run_status st, int64_t now, int64_t want)
{
	struct wait w = { 0 };

	expect_later(tg_state_runs_set_status(F.st, sim, st, 0, now, on_num, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(w.n, want);
}

/* Failed checks, a FAILED run's text, a late answer after the end, the
 * archive's codes and caps (64 bytes a run, 100 in all), the counters. */
static void
test_run_checks_and_caps(void **state)
{
	struct tg_runs_query bad = { .status = "DONE" };
	struct wait w = { 0 };

	add_run("sim-f", T0, TG_STATE_OK);
	expect_later(tg_state_runs_check_failed(F.st, "sim-f", "timeout", 0, T0 + 1, on_done,
	    &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	expect_later(tg_state_runs_check_failed(F.st, "sim-n", NULL, 0, T0, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
	wait_clear(&w);
	complete_run("sim-f", TG_RUN_FAILED, T0 + 90000, 1);
	complete_run("sim-f", TG_RUN_COMPLETED, T0 + 91000, 0);	/* final: only counted */
	settle(tg_state_runs_get(F.st, "sim-f", on_failure, &w), &w);
	assert_int_equal(w.n, TG_RUN_FAILED);
	assert_int_equal(w.n2, 3);
	assert_non_null(strstr(w.s, "FAILED 1 min 30 s after submission"));
	wait_clear(&w);
	assert_int_equal(archive("sim-f", 10), TG_STATE_CONFLICT);
	assert_int_equal(archive("sim-n", 10), TG_STATE_NOT_FOUND);
	add_run("sim-g", T0, TG_STATE_OK);
	add_run("sim-h", T0, TG_STATE_OK);
	complete_run("sim-g", TG_RUN_COMPLETED, T0 + 1, 1);
	complete_run("sim-h", TG_RUN_COMPLETED, T0 + 1, 1);
	assert_int_equal(archive("sim-g", 65), TG_STATE_REFUSED);
	assert_int_equal(archive("sim-g", 60), TG_STATE_OK);
	assert_int_equal(archive("sim-h", 50), TG_STATE_REFUSED);
	assert_int_equal(archive("sim-g", 30), TG_STATE_OK);	/* the old gives way */
	assert_int_equal(archive("sim-h", 50), TG_STATE_OK);
	settle(tg_state_runs_archive_usage(F.st, on_pair, &w), &w);
	assert_int_equal(w.n, 80);
	assert_int_equal(w.n2, 2);
	wait_clear(&w);
	settle(tg_state_runs_stats(F.st, on_runs_stats, &w), &w);
	assert_int_equal(w.n, 201);
	assert_int_equal(w.n2, 80);
	wait_clear(&w);
	settle(tg_state_runs_list(F.st, &bad, on_runs, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_ERROR);
	wait_clear(&w);
}

static void
on_sweeps(const struct tg_state_res *res, const struct tg_sweep *s, size_t n, int more,
    void *arg)
{
	struct wait *w = arg;

	got(w, res);
	w->count = n;
	if (n > 0)
		w->n = (int64_t)s[0].nvariants;
}

static void
on_claim(const struct tg_state_res *res, const struct tg_sweep_claim *c, void *arg)
{
	struct wait *w = arg;

	got(w, res);
	w->s = c != NULL ? strdup(c->name) : NULL;
	w->count = c != NULL ? c->len : 0;
}

static void
on_variants(const struct tg_state_res *res, const struct tg_sweep_variant *v, size_t n,
    void *arg)
{
	struct wait *w = arg;
	size_t i;

	got(w, res);
	w->count = n;
	if (n > 0)
		w->n = v[0].state;
	for (i = 0; i < n; i++)
		w->n2 += v[i].state == TG_VARIANT_SUBMITTING;	/* claimed now */
}

static void
on_strs(const struct tg_state_res *res, const char *const *s, size_t n, void *arg)
{
	struct wait *w = arg;

	got(w, res);
	w->count = n;
	w->s = n > 0 ? strdup(s[0]) : NULL;
}

static char *
create_sweep(void)
{
	struct tg_sweep_variant_new v[] = {
		{ "a", "{\"case\":1}", 10 }, { "b", "{\"case\":2}", 10 },
	};
	struct tg_sweep_new s = {
		.base_case_id = "CASE-1", .concurrency = 1, .variants = v, .nvariants = 2,
	};
	struct wait w = { 0 };
	char *id;

	expect_later(tg_state_sweep_create(F.st, &s, T0, on_str, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(strncmp(w.s, "swp_", 4), 0);
	id = w.s;
	w.s = NULL;
	return id;
}

static void
test_sweeps(void **state)
{
	struct tg_run_new r = {
		.simulation_id = "sim-s1", .host = "primary", .case_id = "CASE-1",
		.case_sha256 = "00",
	};
	char *id = create_sweep();
	struct wait w = { 0 };

	settle(tg_state_sweep_get(F.st, id, on_sweeps, &w), &w);
	assert_int_equal(w.count, 1);
	assert_int_equal(w.n, 2);
	wait_clear(&w);
	settle(tg_state_sweep_list(F.st, NULL, "running", 0, 0, on_sweeps, &w), &w);
	assert_int_equal(w.count, 1);
	wait_clear(&w);
	expect_later(tg_state_sweep_claim(F.st, id, T0 + 1, on_claim, &w), &w);
	assert_string_equal(w.s, "a");
	assert_int_equal(w.count, 10);
	wait_clear(&w);
	expect_later(tg_state_sweep_claim(F.st, id, T0 + 2, on_claim, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_null(w.s);			/* concurrency 1: nothing more now */
	wait_clear(&w);
	expect_later(tg_state_sweep_submitted(F.st, id, "a", &r, T0 + 3, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	expect_later(tg_state_sweep_submitted(F.st, id, "a", &r, T0 + 3, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_CONFLICT);
	wait_clear(&w);
	expect_later(tg_state_runs_set_status(F.st, "sim-s1", TG_RUN_COMPLETED, 0, T0 + 4,
	    on_num, &w), &w);
	wait_clear(&w);
	expect_later(tg_state_sweep_claim(F.st, id, T0 + 5, on_claim, &w), &w);
	assert_string_equal(w.s, "b");
	wait_clear(&w);
	expect_later(tg_state_sweep_unclaim(F.st, id, "b", "refused", 1, T0 + 6, on_done, &w),
	    &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	settle(tg_state_sweep_variants(F.st, id, on_variants, &w), &w);
	assert_int_equal(w.count, 2);
	assert_int_equal(w.n, TG_VARIANT_SUBMITTED);
	wait_clear(&w);
	settle(tg_state_sweep_running(F.st, on_strs, &w), &w);
	assert_int_equal(w.count, 1);
	assert_string_equal(w.s, id);
	wait_clear(&w);
	expect_later(tg_state_sweep_settle(F.st, id, T0 + 7, on_num, &w), &w);
	assert_int_equal(w.n, 1);		/* done with this call */
	wait_clear(&w);
	settle(tg_state_sweep_running(F.st, on_strs, &w), &w);
	assert_int_equal(w.count, 0);
	wait_clear(&w);
	free(id);
}

/* The codes of sweeps that do not exist and of names that are not. */
static void
test_sweep_codes(void **state)
{
	char *id = create_sweep();
	struct wait w = { 0 };

	settle(tg_state_sweep_get(F.st, "swp_none", on_sweeps, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
	wait_clear(&w);
	settle(tg_state_sweep_variants(F.st, "swp_none", on_variants, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
	wait_clear(&w);
	settle(tg_state_sweep_list(F.st, NULL, "paused", 0, 0, on_sweeps, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_ERROR);
	wait_clear(&w);
	expect_later(tg_state_sweep_claim(F.st, "swp_none", T0, on_claim, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
	wait_clear(&w);
	expect_later(tg_state_sweep_unclaim(F.st, id, "zz", NULL, 0, T0, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
	wait_clear(&w);
	expect_later(tg_state_sweep_unclaim(F.st, id, "a", NULL, 0, T0, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_CONFLICT);	/* pending, not submitting */
	wait_clear(&w);
	expect_later(tg_state_sweep_settle(F.st, "swp_none", T0, on_num, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
	wait_clear(&w);
	expect_later(tg_state_sweep_settle(F.st, id, T0, on_num, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(w.n, 0);		/* variants still pending */
	wait_clear(&w);
	free(id);
}

/* ---- runs and sweeps in detail: every rule of the registry and the
 * queue, on each backend ---- */

#define SEC	1000LL
#define DAY	(86400LL * 1000)

static struct tg_err last_err;		/* the last helper's error, when it failed */

/* F's registry reopened: SQLite's files, or the same PostgreSQL schema
 * (the same instance name: its claims are given back). */
static void
reopen_registry(void)
{
	struct tg_runs_opts ro = { .archive_max_run = 64, .archive_max_total = 100 };
	struct tg_state_opts opts = { .url = F.url, .runs = &ro };
	struct tg_err err;

	tg_state_close(F.st);
	F.st = NULL;
	if (strcmp(F.b->name, "sqlite") == 0) {
		assert_int_equal(sqlite_open(), 0);
		return;
	}
	F.st = tg_state_open(F.base, &opts, &err);
	assert_non_null(F.st);
}

static char *
opt_dup(const char *s)
{
	return s != NULL ? tg_xstrdup(s) : NULL;
}

/* run (borrowed) copied into out (the caller's; tg_run_cleanup). */
static void
run_copy(const struct tg_run *run, struct tg_run *out)
{
	const unsigned char *buf;
	yajl_gen g;
	size_t len;

	*out = *run;
	out->simulation_id = opt_dup(run->simulation_id);
	out->api_key = opt_dup(run->api_key);
	out->host = opt_dup(run->host);
	out->case_id = opt_dup(run->case_id);
	out->validation = opt_dup(run->validation);
	out->failure = opt_dup(run->failure);
	out->last_error = opt_dup(run->last_error);
	out->callback_url = opt_dup(run->callback_url);
	out->sweep_id = opt_dup(run->sweep_id);
	out->variant = opt_dup(run->variant);
	out->figures = NULL;
	if (run->figures != NULL) {
		g = tg_json_gen_new();
		tg_json_gen_val(g, run->figures);
		yajl_gen_get_buf(g, &buf, &len);
		out->figures = tg_json_parse((const char *)buf, len, NULL);
		yajl_gen_free(g);
	}
}

struct run_got {
	struct wait w;
	struct tg_run *out;
};

static void
on_run_copy(const struct tg_state_res *res, const struct tg_run *runs, size_t n, int more,
    void *arg)
{
	struct run_got *g = arg;

	(void)more;
	got(&g->w, res);
	if (n == 1)
		run_copy(&runs[0], g->out);
}

/* Run id into run (tg_run_cleanup it); its code. */
static int
get_run(const char *id, struct tg_run *run)
{
	struct run_got g = { .out = run };

	memset(run, 0, sizeof(*run));
	settle(tg_state_runs_get(F.st, id, on_run_copy, &g), &g.w);
	last_err = g.w.res.err;
	return g.w.res.rc;
}

static void
run_get_ok(const char *id, struct tg_run *run)
{
	if (get_run(id, run) != TG_STATE_OK)
		fail_msg("get %s: %s", id, last_err.msg);
}

static void
runs_add_full(const char *id, const char *case_id, const char *key, int64_t sub,
    enum tg_run_status st)
{
	char sha[TG_RUNS_SHA_LEN];
	struct tg_run_new n = {
		.simulation_id = id, .api_key = key, .host = "primary", .case_id = case_id,
		.case_sha256 = sha, .submitted_at = sub, .status = st,
		.validation = "passed (diff checked)",
	};
	struct wait w = { 0 };

	tg_runs_case_digest(id, strlen(id), sha);
	expect_later(tg_state_runs_add(F.st, &n, sub, on_done, &w), &w);
	if (w.res.rc != TG_STATE_OK)
		fail_msg("add %s: %s", id, w.res.err.msg);
}

static void
runs_add_at(const char *id, int64_t sub)
{
	runs_add_full(id, "CASE-OM-1", "demo-key", sub, TG_RUN_IN_PROGRESS);
}

/* What a status check answered: 1 when the run ended with it, 0 when not,
 * or minus its code. */
static int
run_set(const char *id, enum tg_run_status st, int64_t done, int64_t now)
{
	struct wait w = { 0 };

	settle(tg_state_runs_set_status(F.st, id, st, done, now, on_num, &w), &w);
	last_err = w.res.err;
	return w.res.rc == TG_STATE_OK ? (int)w.n : -w.res.rc;
}

static int
check_failed(const char *id, const char *why, int64_t retry_after, int64_t now)
{
	struct wait w = { 0 };

	expect_later(tg_state_runs_check_failed(F.st, id, why, retry_after, now, on_done, &w),
	    &w);
	return w.res.rc;
}

/* item appended to *s (owned; "" at first), after a space unless first. */
static void
join(char **s, const char *item)
{
	char *t = tg_xasprintf("%s%s%s", *s, **s != '\0' ? " " : "", item);

	free(*s);
	*s = t;
}

/* The ids of the runs answered, joined by spaces, into w->s. */
static void
on_ids(const struct tg_state_res *res, const struct tg_run *runs, size_t n, int more,
    void *arg)
{
	struct wait *w = arg;
	size_t i;

	got(w, res);
	w->s = tg_xstrdup("");
	for (i = 0; i < n; i++)
		join(&w->s, runs[i].simulation_id);
	w->count = n;
	w->more = more;
}

static void
expect_list(const struct tg_runs_query *q, const char *want, int want_more)
{
	struct wait w = { 0 };

	settle(tg_state_runs_list(F.st, q, on_ids, &w), &w);
	if (w.res.rc != TG_STATE_OK)
		fail_msg("list: %s", w.res.err.msg);
	assert_string_equal(w.s, want);
	assert_int_equal(w.more, want_more);
	wait_clear(&w);
}

static void
expect_due(int64_t now, size_t max, const char *want)
{
	struct wait w = { 0 };

	settle(tg_state_runs_due(F.st, now, max, on_ids, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_string_equal(w.s, want);
	wait_clear(&w);
}

static int64_t
next_due(int64_t now)
{
	struct wait w = { 0 };

	settle(tg_state_runs_next_due(F.st, now, on_num, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	return w.n;
}

/* Recorded, checked, ended once, kept across a reopen; the codes of a
 * second record, a run missing a field, an unknown run and status. */
static void
test_run_lifecycle(void **state)
{
	struct tg_run_new n = {
		.simulation_id = "sim-1", .api_key = "team-a", .host = "primary",
		.case_id = "CASE-OM-1", .submitted_at = T0,
		.validation = "passed (diff checked)",
		.callback_url = "https://hooks.example/run?token=s3cret",
	};
	char sha[TG_RUNS_SHA_LEN];
	struct wait w = { 0 };
	struct tg_run run;

	tg_runs_case_digest("{}", 2, sha);
	n.case_sha256 = sha;
	expect_later(tg_state_runs_add(F.st, &n, T0 + 10, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	run_get_ok("sim-1", &run);
	assert_int_equal(run.status, TG_RUN_IN_PROGRESS);
	assert_int_equal(run.vendor_status, TG_RUN_IN_PROGRESS);
	assert_int_equal(run.submitted_at, T0);
	assert_int_equal(run.expires_at, T0 + 30 * DAY);
	assert_int_equal(run.status_at, T0 + 10);
	assert_int_equal(run.next_check_at, T0 + 2 * SEC);
	assert_int_equal(run.completed_at, 0);
	assert_int_equal(run.checks, 0);
	assert_string_equal(run.case_sha256, sha);
	assert_string_equal(run.case_id, "CASE-OM-1");
	assert_string_equal(run.host, "primary");
	assert_string_equal(run.callback_url, "https://hooks.example/run?token=s3cret");
	assert_null(run.sweep_id);
	assert_false(run.archived);
	tg_run_cleanup(&run);
	/* Still running: the next check waits twice as long. */
	assert_int_equal(run_set("sim-1", TG_RUN_IN_PROGRESS, 0, T0 + 2 * SEC), 0);
	run_get_ok("sim-1", &run);
	assert_int_equal(run.next_check_at, T0 + 6 * SEC);
	assert_int_equal(run.checks, 1);
	tg_run_cleanup(&run);
	/* Completed: 1 once, and the first terminal status stays. */
	assert_int_equal(run_set("sim-1", TG_RUN_COMPLETED, T0 + 5 * SEC, T0 + 6 * SEC), 1);
	assert_int_equal(run_set("sim-1", TG_RUN_FAILED, 0, T0 + 7 * SEC), 0);
	assert_int_equal(run_set("sim-1", TG_RUN_COMPLETED, 0, T0 + 8 * SEC), 0);
	reopen_registry();
	run_get_ok("sim-1", &run);
	assert_int_equal(run.status, TG_RUN_COMPLETED);
	assert_int_equal(run.vendor_status, TG_RUN_COMPLETED);
	assert_int_equal(run.completed_at, T0 + 5 * SEC);
	assert_int_equal(run.status_at, T0 + 6 * SEC);
	assert_int_equal(run.next_check_at, 0);
	assert_int_equal(run.checks, 4);
	assert_string_equal(run.api_key, "team-a");
	assert_string_equal(run.validation, "passed (diff checked)");
	assert_null(run.failure);
	tg_run_cleanup(&run);
	expect_later(tg_state_runs_add(F.st, &n, T0, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_CONFLICT);
	assert_string_equal(w.res.err.msg, "simulation sim-1 is already recorded");
	wait_clear(&w);
	n.simulation_id = "sim-2";
	n.host = NULL;
	settle(tg_state_runs_add(F.st, &n, T0, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_ERROR);
	wait_clear(&w);
	assert_int_equal(get_run("sim-2", &run), TG_STATE_NOT_FOUND);
	assert_int_equal(run_set("nope", TG_RUN_COMPLETED, 0, T0), -TG_STATE_NOT_FOUND);
	assert_string_equal(last_err.msg, "no simulation run nope");
	assert_int_equal(get_run("nope", &run), TG_STATE_NOT_FOUND);
	assert_string_equal(last_err.msg, "no simulation run nope");
	assert_int_equal(run_set("sim-1", TG_RUN_NSTATUS, 0, T0), -TG_STATE_ERROR);
}

/* A first answer that is already final; a 404 before expiry. */
static void
test_run_first_answer(void **state)
{
	struct tg_run run;

	runs_add_full("sim-done", "CASE-OM-1", NULL, T0, TG_RUN_COMPLETED);
	run_get_ok("sim-done", &run);
	assert_int_equal(run.status, TG_RUN_COMPLETED);
	assert_int_equal(run.vendor_status, TG_RUN_COMPLETED);
	assert_int_equal(run.next_check_at, 0);
	assert_int_equal(run.completed_at, T0);
	assert_null(run.api_key);
	tg_run_cleanup(&run);
	/* UNKNOWN: terminal, no vendor status of its own. */
	runs_add_at("sim-lost", T0);
	assert_int_equal(run_set("sim-lost", TG_RUN_UNKNOWN, 0, T0 + 2 * SEC), 1);
	run_get_ok("sim-lost", &run);
	assert_int_equal(run.status, TG_RUN_UNKNOWN);
	assert_int_equal(run.vendor_status, TG_RUN_IN_PROGRESS);
	assert_int_equal(run.completed_at, 0);
	assert_int_equal(run.next_check_at, 0);
	tg_run_cleanup(&run);
	expect_due(T0 + DAY, 0, "");
}

/* A FAILED run: how long it took, its host and its validation. */
static void
test_run_failure_text(void **state)
{
	struct tg_run_new n = {
		.simulation_id = "sim-f", .host = "fallback", .case_id = "CASE-CON-1",
		.case_sha256 = "00", .submitted_at = T0,
		.validation = "passed (diff skipped: base case not served)",
	};
	struct wait w = { 0 };
	struct tg_run run;

	expect_later(tg_state_runs_add(F.st, &n, T0, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(run_set("sim-f", TG_RUN_FAILED, T0 + 192 * SEC, T0 + 200 * SEC), 1);
	run_get_ok("sim-f", &run);
	assert_int_equal(run.status, TG_RUN_FAILED);
	assert_int_equal(run.vendor_status, TG_RUN_FAILED);
	assert_int_equal(run.completed_at, T0 + 192 * SEC);
	assert_string_equal(run.failure, "the vendor reported FAILED 3 min 12 s after "
	    "submission and gives no reason; host: fallback; gateway validation: passed (diff "
	    "skipped: base case not served)");
	tg_run_cleanup(&run);
}

/* Checks without an answer: the schedule, Retry-After up to an hour, the
 * error until an answer clears it, never a check after the end. */
static void
test_run_check_failed(void **state)
{
	struct tg_run run;

	runs_add_at("sim-c", T0);
	assert_int_equal(check_failed("sim-c", "upstream timeout", -1, T0 + 2 * SEC), 0);
	run_get_ok("sim-c", &run);
	assert_int_equal(run.checks, 1);
	assert_int_equal(run.next_check_at, T0 + 6 * SEC);
	assert_string_equal(run.last_error, "upstream timeout");
	assert_int_equal(run.status, TG_RUN_IN_PROGRESS);
	tg_run_cleanup(&run);
	assert_int_equal(check_failed("sim-c", "429", 60 * SEC, T0 + 6 * SEC), 0);
	run_get_ok("sim-c", &run);
	assert_int_equal(run.next_check_at, T0 + 66 * SEC);
	tg_run_cleanup(&run);
	assert_int_equal(check_failed("sim-c", NULL, DAY, T0 + 66 * SEC), 0);
	run_get_ok("sim-c", &run);
	assert_int_equal(run.next_check_at, T0 + 66 * SEC + 3600 * SEC);
	assert_string_equal(run.last_error, "no answer");
	tg_run_cleanup(&run);
	assert_int_equal(run_set("sim-c", TG_RUN_COMPLETED, 0, T0 + 4000 * SEC), 1);
	run_get_ok("sim-c", &run);
	assert_null(run.last_error);
	assert_int_equal(run.checks, 4);
	tg_run_cleanup(&run);
	assert_int_equal(check_failed("sim-c", "x", -1, T0 + 5000 * SEC), 0);
	run_get_ok("sim-c", &run);
	assert_int_equal(run.next_check_at, 0);
	assert_int_equal(run.status, TG_RUN_COMPLETED);
	assert_int_equal(run.checks, 5);
	tg_run_cleanup(&run);
	assert_int_equal(check_failed("nope", "x", -1, T0), TG_STATE_NOT_FOUND);
}

/* Due runs by next check, then submission, then id; never an ended or
 * expired one. */
static void
test_run_due_order(void **state)
{
	runs_add_at("a", T0);				/* due T0 + 2 s */
	runs_add_at("b", T0 - 1 * SEC);			/* due T0 + 1 s */
	runs_add_at("c", T0 + 500);			/* due T0 + 2.5 s */
	runs_add_at("d", T0);				/* due with a: by id */
	runs_add_full("done", "CASE-OM-1", NULL, T0 - 5 * SEC, TG_RUN_COMPLETED);
	runs_add_at("old", T0 - 31 * DAY);		/* past expiry, never marked */
	assert_int_equal(next_due(T0), T0 + 1 * SEC);
	expect_due(T0, 0, "");
	expect_due(T0 + 2 * SEC, 0, "b a d");
	expect_due(T0 + 3 * SEC, 1, "b");
	expect_due(T0 + 3 * SEC, 0, "b a d c");
	/* Checked runs move back in the queue. */
	assert_int_equal(run_set("b", TG_RUN_IN_PROGRESS, 0, T0 + 3 * SEC), 0);	/* T0 + 7 s */
	assert_int_equal(run_set("a", TG_RUN_COMPLETED, 0, T0 + 3 * SEC), 1);
	expect_due(T0 + 3 * SEC, 0, "d c");
	expect_due(T0 + 7 * SEC, 0, "d c b");
	assert_int_equal(run_set("c", TG_RUN_FAILED, 0, T0 + 3 * SEC), 1);
	assert_int_equal(run_set("d", TG_RUN_COMPLETED, 0, T0 + 3 * SEC), 1);
	assert_int_equal(next_due(T0 + 3 * SEC), T0 + 7 * SEC);
	assert_int_equal(run_set("b", TG_RUN_COMPLETED, 0, T0 + 7 * SEC), 1);
	assert_int_equal(next_due(T0 + 7 * SEC), INT64_MAX);
}

/* Every filter alone and together, a time window, pages; an unknown
 * status refused with the names it knows. */
static void
test_run_list_filters(void **state)
{
	struct tg_runs_query q = { 0 };
	struct wait w = { 0 };

	runs_add_full("r1", "CASE-OM-1", "team-a", T0 + 1 * SEC, TG_RUN_IN_PROGRESS);
	runs_add_full("r2", "CASE-OM-2", "team-a", T0 + 2 * SEC, TG_RUN_IN_PROGRESS);
	runs_add_full("r3", "CASE-OM-1", "team-b", T0 + 3 * SEC, TG_RUN_IN_PROGRESS);
	runs_add_full("r4", "CASE-CON-1", "team-b", T0 + 4 * SEC, TG_RUN_IN_PROGRESS);
	runs_add_full("r5", "CASE-OM-1", "team-a", T0 + 5 * SEC, TG_RUN_IN_PROGRESS);
	assert_int_equal(run_set("r3", TG_RUN_COMPLETED, 0, T0 + 10 * SEC), 1);
	assert_int_equal(run_set("r5", TG_RUN_FAILED, 0, T0 + 10 * SEC), 1);
	expect_list(&q, "r5 r4 r3 r2 r1", 0);
	q.status = "IN_PROGRESS";
	expect_list(&q, "r4 r2 r1", 0);
	q.case_id = "CASE-OM-1";
	expect_list(&q, "r1", 0);
	q.status = NULL;
	expect_list(&q, "r5 r3 r1", 0);
	q.api_key = "team-a";
	expect_list(&q, "r5 r1", 0);
	q = (struct tg_runs_query){ .from_ms = T0 + 2 * SEC, .to_ms = T0 + 4 * SEC };
	expect_list(&q, "r3 r2", 0);
	q = (struct tg_runs_query){ .sweep_id = "swp_none" };
	expect_list(&q, "", 0);
	q = (struct tg_runs_query){ .limit = 2 };
	expect_list(&q, "r5 r4", 1);
	q.offset = 2;
	expect_list(&q, "r3 r2", 1);
	q.offset = 4;
	expect_list(&q, "r1", 0);
	q.offset = 9;
	expect_list(&q, "", 0);
	q = (struct tg_runs_query){ .status = "COMPLETED", .limit = 5000 };
	expect_list(&q, "r3", 0);
	q = (struct tg_runs_query){ .status = "DONE" };
	settle(tg_state_runs_list(F.st, &q, on_ids, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_ERROR);
	assert_string_equal(w.res.err.msg, "unknown run status 'DONE' (IN_PROGRESS, COMPLETED, "
	    "FAILED, EXPIRED, UNKNOWN)");
	assert_int_equal(w.count, 0);
	wait_clear(&w);
}

/* Only the numbers of the results are kept; not an object: refused. */
static void
test_run_figures(void **state)
{
	static const char src[] = "{\"caseType\": \"O&M\", \"availability\": 0.956643,"
	    " \"totalCost\": 7266549, \"vesselUtilisation\": {\"CTV\": 0.5},"
	    " \"allTasksCompleted\": true}";
	yajl_val res = tg_json_parse(src, sizeof(src) - 1, NULL);
	struct wait w = { 0 };
	struct tg_run run;

	assert_non_null(res);
	runs_add_at("sim-x", T0);
	expect_later(tg_state_runs_set_figures(F.st, "sim-x", res, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	expect_later(tg_state_runs_set_figures(F.st, "nope", res, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
	wait_clear(&w);
	settle(tg_state_runs_set_figures(F.st, "sim-x", tg_json_get(res, "totalCost"), on_done,
	    &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_ERROR);
	assert_string_equal(w.res.err.msg, "results of sim-x are not a JSON object");
	wait_clear(&w);
	run_get_ok("sim-x", &run);
	assert_true(YAJL_IS_OBJECT(run.figures));
	assert_int_equal(run.figures->u.object.len, 2);
	assert_string_equal(tg_json_get(run.figures, "availability")->u.number.r, "0.956643");
	assert_int_equal(YAJL_GET_INTEGER(tg_json_get(run.figures, "totalCost")), 7266549);
	tg_run_cleanup(&run);
	yajl_tree_free(res);
}

static void
expect_archive(const char *id, const void *data, size_t len, int want, const char *msg)
{
	struct wait w = { 0 };

	settle(tg_state_runs_archive(F.st, id, data, len, T0, on_done, &w), &w);
	if (w.res.rc != want)
		fail_msg("archive %s (%zu bytes): %d, want %d: %s", id, len, w.res.rc, want,
		    w.res.err.msg);
	if (msg != NULL)
		assert_string_equal(w.res.err.msg, msg);
}

/* The archive's codes and caps with their texts (64 bytes a run, 100 in
 * all); a replacement counts only its difference. */
static void
test_run_archive_caps(void **state)
{
	char big[80];
	struct wait w = { 0 };
	struct tg_run run;

	memset(big, 'x', sizeof(big));
	runs_add_at("r1", T0);
	runs_add_at("r2", T0);
	runs_add_at("r3", T0);
	runs_add_at("r4", T0);
	assert_int_equal(run_set("r1", TG_RUN_COMPLETED, 0, T0 + 5 * SEC), 1);
	assert_int_equal(run_set("r2", TG_RUN_COMPLETED, 0, T0 + 5 * SEC), 1);
	assert_int_equal(run_set("r3", TG_RUN_COMPLETED, 0, T0 + 5 * SEC), 1);
	expect_archive("r4", big, 10, TG_STATE_CONFLICT,
	    "simulation r4 has not completed (IN_PROGRESS)");
	expect_archive("nope", big, 10, TG_STATE_NOT_FOUND, "no simulation run nope");
	expect_archive("r1", big, 65, TG_STATE_REFUSED,
	    "results of r1 are 65 bytes; the archive keeps at most 64 bytes per run");
	expect_archive("r1", big, 40, TG_STATE_OK, NULL);
	expect_archive("r2", big, 40, TG_STATE_OK, NULL);
	expect_archive("r3", big, 40, TG_STATE_REFUSED,
	    "archive full: 80 of 100 bytes used; results of r3 need 40 more");
	expect_archive("r1", "{\"a\":1}", 7, TG_STATE_OK, NULL);
	expect_archive("r3", big, 40, TG_STATE_OK, NULL);
	expect_archive("r2", big, 54, TG_STATE_REFUSED,		/* 7 + 54 + 40 */
	    "archive full: 87 of 100 bytes used; results of r2 need 54 more");
	expect_archive("r2", big, 53, TG_STATE_OK, NULL);	/* 100: the cap itself */
	settle(tg_state_runs_archive_usage(F.st, on_pair, &w), &w);
	assert_int_equal(w.n, 100);
	assert_int_equal(w.n2, 3);
	wait_clear(&w);
	settle(tg_state_runs_archived(F.st, "r1", on_blob, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(w.count, 7);
	assert_string_equal(w.s, "{\"a\":1}");
	wait_clear(&w);
	settle(tg_state_runs_archived(F.st, "r4", on_blob, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
	assert_null(w.s);
	wait_clear(&w);
	settle(tg_state_runs_archived(F.st, "nope", on_blob, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
	wait_clear(&w);
	run_get_ok("r1", &run);
	assert_true(run.archived);
	assert_int_equal(run.results_size, 7);
	tg_run_cleanup(&run);
	run_get_ok("r4", &run);
	assert_false(run.archived);
	assert_int_equal(run.results_size, 0);
	tg_run_cleanup(&run);
}

static void
expire(int64_t now, int64_t want)
{
	struct wait w = { 0 };

	expect_later(tg_state_runs_expire(F.st, now, on_num, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(w.n, want);
}

static void
purge(int64_t now, int64_t want_runs, int64_t want_sweeps)
{
	struct wait w = { 0 };

	expect_later(tg_state_runs_purge(F.st, now, on_pair, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(w.n, want_runs);
	assert_int_equal(w.n2, want_sweeps);
}

/* Expiry after 30 days (once), no answers after it; purge after 7 more,
 * archived runs after 90. */
static void
test_run_expire_purge(void **state)
{
	struct wait w = { 0 };
	struct tg_run run;

	runs_add_at("a", T0);
	runs_add_at("b", T0);
	runs_add_at("c", T0 + DAY);
	assert_int_equal(run_set("b", TG_RUN_COMPLETED, 0, T0 + 5 * SEC), 1);
	expect_archive("b", "{}", 2, TG_STATE_OK, NULL);
	expire(T0 + 30 * DAY - 1, 0);
	expire(T0 + 30 * DAY, 2);
	expire(T0 + 30 * DAY, 0);
	run_get_ok("a", &run);
	assert_int_equal(run.status, TG_RUN_EXPIRED);
	assert_int_equal(run.vendor_status, TG_RUN_IN_PROGRESS);
	assert_int_equal(run.status_at, T0 + 30 * DAY);
	assert_int_equal(run.next_check_at, 0);
	assert_true(tg_runs_expired(&run, T0 + 30 * DAY));
	assert_false(tg_runs_expired(&run, T0 + 30 * DAY - 1));
	tg_run_cleanup(&run);
	assert_int_equal(run_set("a", TG_RUN_COMPLETED, 0, T0 + 30 * DAY), 0);
	run_get_ok("b", &run);
	assert_int_equal(run.status, TG_RUN_EXPIRED);
	assert_int_equal(run.vendor_status, TG_RUN_COMPLETED);
	assert_true(run.archived);
	tg_run_cleanup(&run);
	expect_due(T0 + 30 * DAY, 0, "c");
	purge(T0 + 37 * DAY - 1, 0, 0);
	purge(T0 + 37 * DAY, 1, 0);
	assert_int_equal(get_run("a", &run), TG_STATE_NOT_FOUND);
	run_get_ok("c", &run);
	tg_run_cleanup(&run);
	purge(T0 + 38 * DAY, 1, 0);
	assert_int_equal(get_run("c", &run), TG_STATE_NOT_FOUND);
	settle(tg_state_runs_archived(F.st, "b", on_blob, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_string_equal(w.s, "{}");
	wait_clear(&w);
	purge(T0 + 120 * DAY - 1, 0, 0);
	purge(T0 + 120 * DAY, 1, 0);
	settle(tg_state_runs_archived(F.st, "b", on_blob, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
	wait_clear(&w);
	assert_int_equal(get_run("b", &run), TG_STATE_NOT_FOUND);
}

/* ---- sweeps in detail ---- */

static char *
sweep_new(const struct tg_sweep_new *s, int64_t now)
{
	struct wait w = { 0 };
	char *id;

	expect_later(tg_state_sweep_create(F.st, s, now, on_str, &w), &w);
	if (w.res.rc != TG_STATE_OK)
		fail_msg("create: %s", w.res.err.msg);
	id = w.s;
	w.s = NULL;
	return id;
}

/* A sweep of three variants, two at once, of key team-a. */
static char *
sweep_of_three(void)
{
	static const struct tg_sweep_variant_new v[] = {
		{ "base", "{\"caseId\":\"C\"}", 14 },
		{ "ctv-3", "{\"caseId\":\"C\",\"x\":3}", 20 },
		{ "ctv-4", "{\"caseId\":\"C\",\"x\":4}", 20 },
	};
	struct tg_sweep_new s = {
		.api_key = "team-a", .base_case_id = "C", .callback_url = "https://h.example/?k=1",
		.concurrency = 2, .variants = v, .nvariants = 3,
	};

	return sweep_new(&s, T0);
}

struct sweep_got {
	struct wait w;
	struct tg_sweep *out;
};

static void
on_sweep_copy(const struct tg_state_res *res, const struct tg_sweep *s, size_t n, int more,
    void *arg)
{
	struct sweep_got *g = arg;

	(void)more;
	got(&g->w, res);
	if (n != 1)
		return;
	*g->out = s[0];
	g->out->api_key = opt_dup(s[0].api_key);
	g->out->base_case_id = opt_dup(s[0].base_case_id);
	g->out->callback_url = opt_dup(s[0].callback_url);
}

/* Sweep id into sw (tg_sweep_cleanup it); its code. */
static int
get_sweep(const char *id, struct tg_sweep *sw)
{
	struct sweep_got g = { .out = sw };

	memset(sw, 0, sizeof(*sw));
	settle(tg_state_sweep_get(F.st, id, on_sweep_copy, &g), &g.w);
	return g.w.res.rc;
}

/* A claim: its name into w->s, its key into w->p, and in w->n whether its
 * body and digest agree. */
static void
on_claim_full(const struct tg_state_res *res, const struct tg_sweep_claim *c, void *arg)
{
	struct wait *w = arg;
	char sha[TG_RUNS_SHA_LEN];

	got(w, res);
	if (c == NULL)
		return;
	w->s = tg_xstrdup(c->name);
	w->p = opt_dup(c->api_key);
	tg_runs_case_digest(c->body, c->len, sha);
	w->n = strlen(c->body) == c->len && strcmp(sha, c->case_sha256) == 0;
}

/* Claim the next variant of sweep id: want (NULL: none may be now), of
 * key want_key. */
static void
expect_claim(const char *id, const char *want, const char *want_key)
{
	struct wait w = { 0 };

	expect_later(tg_state_sweep_claim(F.st, id, T0, on_claim_full, &w), &w);
	if (w.res.rc != TG_STATE_OK)
		fail_msg("claim %s: %s", want != NULL ? want : "nothing", w.res.err.msg);
	if (want == NULL) {
		assert_null(w.s);
	} else {
		assert_string_equal(w.s, want);
		assert_int_equal(w.n, 1);
		if (want_key != NULL)
			assert_string_equal(w.p, want_key);
		else
			assert_null(w.p);
	}
	wait_clear(&w);
}

static int
submitted_run(const char *id, const char *name, const struct tg_run_new *n)
{
	struct wait w = { 0 };

	expect_later(tg_state_sweep_submitted(F.st, id, name, n, T0, on_done, &w), &w);
	last_err = w.res.err;
	return w.res.rc;
}

/* The vendor accepted variant name of sweep id as run sim. */
static int
submitted(const char *id, const char *name, const char *sim)
{
	struct tg_run_new n = {
		.simulation_id = sim, .host = "primary", .case_id = "C",
		.case_sha256 = "00", .submitted_at = T0,
		.callback_url = "https://ignored.example/",
	};

	return submitted_run(id, name, &n);
}

static int
unclaim(const char *id, const char *name, const char *why, int final)
{
	struct wait w = { 0 };

	expect_later(tg_state_sweep_unclaim(F.st, id, name, why, final, T0, on_done, &w), &w);
	last_err = w.res.err;
	return w.res.rc;
}

/* 1 when sweep id became done with this call, 0 when not; or minus the
 * code. */
static int
settle_sweep(const char *id, int64_t now)
{
	struct wait w = { 0 };

	expect_later(tg_state_sweep_settle(F.st, id, now, on_num, &w), &w);
	return w.res.rc == TG_STATE_OK ? (int)w.n : -w.res.rc;
}

/* "name=STATUS/attempts[:error]" of every variant, joined by spaces. */
static void
on_statuses(const struct tg_state_res *res, const struct tg_sweep_variant *v, size_t n,
    void *arg)
{
	struct wait *w = arg;
	char *item;
	size_t i;

	got(w, res);
	w->s = tg_xstrdup("");
	for (i = 0; i < n; i++) {
		item = tg_xasprintf("%s=%s/%d%s%s", v[i].name, tg_sweep_variant_status(&v[i]),
		    v[i].attempts, v[i].error ? ":" : "", v[i].error ? v[i].error : "");
		join(&w->s, item);
		free(item);
	}
	w->count = n;
}

static void
expect_statuses(const char *id, const char *want)
{
	struct wait w = { 0 };

	settle(tg_state_sweep_variants(F.st, id, on_statuses, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_string_equal(w.s, want);
	wait_clear(&w);
}

/* The ids of the running sweeps, joined by spaces. */
static char *
running_ids(void)
{
	struct wait w = { 0 };
	char *s = tg_xstrdup(""), *t;

	settle(tg_state_sweep_running(F.st, on_strs, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_true(w.count <= 1);		/* on_strs keeps the first */
	if (w.count == 1) {
		t = tg_xstrdup(w.s);
		free(s);
		s = t;
	}
	wait_clear(&w);
	return s;
}

/* A sweep's queue from the first claim to done: two in flight at most, a
 * submission without an answer pending again, a claim interrupted by a
 * restart pending again, room made by a run that ends, a refusal for good,
 * done once when the last run ends. */
static void
test_sweep_queue(void **state)
{
	char *id = sweep_of_three(), *ids;
	struct tg_sweep sw;
	struct tg_run run;
	size_t i;

	assert_int_equal(strncmp(id, "swp_", 4), 0);
	assert_int_equal(strlen(id), 36);
	for (i = 4; i < 36; i++)
		assert_non_null(strchr("0123456789abcdef", id[i]));
	assert_int_equal(get_sweep(id, &sw), TG_STATE_OK);
	assert_string_equal(sw.id, id);
	assert_int_equal(sw.state, TG_SWEEP_RUNNING);
	assert_int_equal(sw.nvariants, 3);
	assert_int_equal(sw.concurrency, 2);
	assert_int_equal(sw.created_at, T0);
	assert_int_equal(sw.done_at, 0);
	assert_string_equal(sw.base_case_id, "C");
	assert_string_equal(sw.api_key, "team-a");
	assert_string_equal(sw.callback_url, "https://h.example/?k=1");
	tg_sweep_cleanup(&sw);
	expect_statuses(id, "base=PENDING/0 ctv-3=PENDING/0 ctv-4=PENDING/0");
	expect_claim(id, "base", "team-a");
	expect_claim(id, "ctv-3", "team-a");
	expect_claim(id, NULL, NULL);
	assert_int_equal(submitted(id, "base", "sim-0"), TG_STATE_OK);
	expect_claim(id, NULL, NULL);
	run_get_ok("sim-0", &run);
	assert_string_equal(run.sweep_id, id);
	assert_string_equal(run.variant, "base");
	assert_null(run.callback_url);
	assert_int_equal(run.status, TG_RUN_IN_PROGRESS);
	tg_run_cleanup(&run);
	assert_int_equal(unclaim(id, "ctv-3", "connection refused", 0), TG_STATE_OK);
	expect_statuses(id, "base=IN_PROGRESS/1 ctv-3=PENDING/1:connection refused "
	    "ctv-4=PENDING/0");
	expect_claim(id, "ctv-3", "team-a");
	expect_statuses(id, "base=IN_PROGRESS/1 ctv-3=SUBMITTING/2:connection refused "
	    "ctv-4=PENDING/0");
	reopen_registry();
	expect_statuses(id, "base=IN_PROGRESS/1 ctv-3=PENDING/2:connection refused "
	    "ctv-4=PENDING/0");
	ids = running_ids();
	assert_string_equal(ids, id);
	free(ids);
	expect_claim(id, "ctv-3", "team-a");
	assert_int_equal(run_set("sim-0", TG_RUN_COMPLETED, 0, T0 + SEC), 1);
	expect_claim(id, "ctv-4", "team-a");
	assert_int_equal(unclaim(id, "ctv-4", "400: bad case", 1), TG_STATE_OK);
	assert_int_equal(settle_sweep(id, T0 + SEC), 0);
	assert_int_equal(submitted(id, "ctv-3", "sim-1"), TG_STATE_OK);
	expect_claim(id, NULL, NULL);
	assert_int_equal(settle_sweep(id, T0 + SEC), 0);
	assert_int_equal(run_set("sim-1", TG_RUN_FAILED, 0, T0 + 9 * SEC), 1);
	assert_int_equal(settle_sweep(id, T0 + 9 * SEC), 1);
	assert_int_equal(settle_sweep(id, T0 + 10 * SEC), 0);
	expect_statuses(id, "base=COMPLETED/1 ctv-3=FAILED/3 ctv-4=REJECTED/1:400: bad case");
	assert_int_equal(get_sweep(id, &sw), TG_STATE_OK);
	assert_int_equal(sw.state, TG_SWEEP_DONE);
	assert_int_equal(sw.done_at, T0 + 9 * SEC);
	tg_sweep_cleanup(&sw);
	ids = running_ids();
	assert_string_equal(ids, "");
	free(ids);
	free(id);
}

static void
expect_create_error(const struct tg_sweep_new *s, const char *msg)
{
	struct wait w = { 0 };

	settle(tg_state_sweep_create(F.st, s, T0, on_str, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_ERROR);
	assert_string_equal(w.res.err.msg, msg);
	assert_null(w.s);
	wait_clear(&w);
}

/* Sweeps refused whole; steps out of order; a run id already recorded
 * leaves the variant claimed; unknown sweeps. */
static void
test_sweep_queue_errors(void **state)
{
	static const struct tg_sweep_variant_new v[] = { { "a", "{}", 2 }, { "a", "{}", 2 } };
	struct tg_sweep_new s = { .base_case_id = "C", .variants = v, .nvariants = 2 };
	struct tg_run_new rn = { .simulation_id = "s", .host = "h", .case_id = "C",
		.case_sha256 = "00" };
	struct wait w = { 0 };
	struct tg_sweep sw;
	struct tg_run run;
	char *id, *ids;

	expect_create_error(&s, "sweep variant name 'a' is given twice");
	s.nvariants = 0;
	expect_create_error(&s, "a sweep has 1 to 1000 variants, not 0");
	s.nvariants = 1;
	s.base_case_id = NULL;
	expect_create_error(&s, "a sweep needs a base case id");
	s.base_case_id = "C";
	s.concurrency = -1;
	expect_create_error(&s, "sweep concurrency -1 is below 1");
	ids = running_ids();
	assert_string_equal(ids, "");		/* nothing of a refused sweep remains */
	free(ids);
	s.concurrency = 0;
	id = sweep_new(&s, T0);
	assert_int_equal(get_sweep(id, &sw), TG_STATE_OK);
	assert_int_equal(sw.concurrency, TG_SWEEP_CONCURRENCY);
	assert_null(sw.api_key);
	assert_null(sw.callback_url);
	tg_sweep_cleanup(&sw);
	/* Steps out of order. */
	assert_int_equal(submitted_run(id, "a", &rn), TG_STATE_CONFLICT);
	assert_string_equal(last_err.msg, "sweep variant a is pending, not submitting");
	assert_int_equal(get_run("s", &run), TG_STATE_NOT_FOUND);	/* nor its run */
	assert_int_equal(unclaim(id, "a", "x", 0), TG_STATE_CONFLICT);
	expect_statuses(id, "a=PENDING/0");		/* untouched */
	assert_int_equal(submitted_run(id, "zz", &rn), TG_STATE_NOT_FOUND);
	ids = tg_xasprintf("no variant zz in sweep %s", id);
	assert_string_equal(last_err.msg, ids);
	free(ids);
	/* A run id the registry already holds: the variant stays claimed. */
	expect_claim(id, "a", NULL);
	expect_later(tg_state_runs_add(F.st, &rn, T0, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(submitted_run(id, "a", &rn), TG_STATE_CONFLICT);
	assert_string_equal(last_err.msg, "simulation s is already recorded");
	expect_statuses(id, "a=SUBMITTING/1");
	run_get_ok("s", &run);
	assert_null(run.sweep_id);
	tg_run_cleanup(&run);
	assert_int_equal(unclaim(id, "a", NULL, 0), TG_STATE_OK);
	expect_statuses(id, "a=PENDING/1:submission failed");
	/* Unknown sweeps. */
	wait_clear(&w);
	expect_later(tg_state_sweep_claim(F.st, "swp_x", T0, on_claim_full, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
	assert_string_equal(w.res.err.msg, "no sweep swp_x");
	wait_clear(&w);
	assert_int_equal(get_sweep("swp_x", &sw), TG_STATE_NOT_FOUND);
	settle(tg_state_sweep_variants(F.st, "swp_x", on_statuses, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
	wait_clear(&w);
	assert_int_equal(settle_sweep("swp_x", T0), -TG_STATE_NOT_FOUND);
	free(id);
}

/* The ids of the sweeps listed, joined by spaces; more. */
static void
on_sweep_ids(const struct tg_state_res *res, const struct tg_sweep *sw, size_t n, int more,
    void *arg)
{
	struct wait *w = arg;
	size_t i;

	got(w, res);
	w->s = tg_xstrdup("");
	for (i = 0; i < n; i++) {
		join(&w->s, sw[i].id);
		w->n += (int64_t)sw[i].nvariants;
	}
	w->count = n;
	w->more = more;
}

static void
expect_sweeps(const char *key, const char *st, size_t limit, size_t offset, const char *want,
    int want_more)
{
	struct wait w = { 0 };

	settle(tg_state_sweep_list(F.st, key, st, limit, offset, on_sweep_ids, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_string_equal(w.s, want);
	assert_int_equal(w.more, want_more);
	assert_int_equal(w.n, (int64_t)w.count);	/* one variant each */
	wait_clear(&w);
}

/* Sweeps listed per key and state, newest first, in pages. */
static void
test_sweep_list_pages(void **state)
{
	static const struct tg_sweep_variant_new v[] = { { "only", "{\"caseId\":\"C\"}", 14 } };
	struct tg_sweep_new s = { .api_key = "team-a", .base_case_id = "C", .variants = v,
		.nvariants = 1 };
	char *ids[3], *other, *want;
	struct wait w = { 0 };
	int i;

	for (i = 0; i < 3; i++)
		ids[i] = sweep_new(&s, T0 + i * SEC);
	s.api_key = "team-b";
	other = sweep_new(&s, T0 + 5 * SEC);
	want = tg_xasprintf("%s %s", ids[2], ids[1]);
	expect_sweeps("team-a", NULL, 2, 0, want, 1);
	free(want);
	expect_sweeps("team-a", NULL, 2, 2, ids[0], 0);
	expect_sweeps("team-a", "done", 0, 0, "", 0);
	want = tg_xasprintf("%s %s %s %s", other, ids[2], ids[1], ids[0]);
	expect_sweeps(NULL, "running", 0, 0, want, 0);
	free(want);
	expect_sweeps("x' OR 1=1 --", NULL, 0, 0, "", 0);
	settle(tg_state_sweep_list(F.st, "team-a", "finished", 0, 0, on_sweep_ids, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_ERROR);
	assert_string_equal(w.res.err.msg, "unknown sweep state 'finished' (running, done)");
	assert_int_equal(w.count, 0);
	wait_clear(&w);
	for (i = 0; i < 3; i++)
		free(ids[i]);
	free(other);
}

/* A done sweep goes with the purge of its last run, not before. */
static void
test_sweep_purge(void **state)
{
	static const struct tg_sweep_variant_new v[] = { { "a", "{}", 2 }, { "b", "{}", 2 } };
	struct tg_sweep_new s = { .base_case_id = "C", .variants = v, .nvariants = 2 };
	char *id = sweep_new(&s, T0);
	struct tg_sweep sw;
	struct wait w = { 0 };

	expect_claim(id, "a", NULL);
	assert_int_equal(submitted(id, "a", "sim-a"), TG_STATE_OK);
	expect_claim(id, "b", NULL);
	assert_int_equal(unclaim(id, "b", "refused", 1), TG_STATE_OK);
	assert_int_equal(settle_sweep(id, T0 + SEC), 0);	/* sim-a runs */
	expire(T0 + 30 * DAY, 1);
	assert_int_equal(settle_sweep(id, T0 + 30 * DAY), 1);
	purge(T0 + 37 * DAY - 1, 0, 0);
	purge(T0 + 37 * DAY, 1, 1);
	assert_int_equal(get_sweep(id, &sw), TG_STATE_NOT_FOUND);
	settle(tg_state_sweep_variants(F.st, id, on_statuses, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
	wait_clear(&w);
	free(id);
}

static void
on_stats_copy(const struct tg_state_res *res, const struct tg_runs_stats *st, void *arg)
{
	struct wait *w = arg;

	got(w, res);
	if (st != NULL) {
		w->p = tg_xmalloc(sizeof(*st));
		memcpy(w->p, st, sizeof(*st));
	}
}

static void
expect_stats(const struct tg_runs_stats *want)
{
	struct wait w = { 0 };
	const struct tg_runs_stats *st;
	int i;

	settle(tg_state_runs_stats(F.st, on_stats_copy, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	st = w.p;
	for (i = 0; i < TG_RUN_NSTATUS; i++)
		if (st->runs[i] != want->runs[i])
			fail_msg("runs %s: %llu, want %llu", tg_runs_status_str(i),
			    (unsigned long long)st->runs[i], (unsigned long long)want->runs[i]);
	assert_int_equal(st->archived, want->archived);
	assert_int_equal(st->archived_bytes, want->archived_bytes);
	assert_int_equal(st->sweeps_running, want->sweeps_running);
	assert_int_equal(st->sweeps_done, want->sweeps_done);
	assert_int_equal(st->variants_pending, want->variants_pending);
	assert_int_equal(st->variants_submitting, want->variants_submitting);
	wait_clear(&w);
}

/* Every counter behind the metrics, through runs, sweeps and expiry. */
static void
test_run_stats(void **state)
{
	static const struct tg_sweep_variant_new v[] = {
		{ "base", "{}", 2 }, { "ctv-3", "{\"x\":3}", 7 }, { "ctv-4", "{\"x\":4}", 7 },
	};
	struct tg_sweep_new sw = { .base_case_id = "C", .concurrency = 2, .variants = v,
		.nvariants = 3 };
	struct tg_runs_stats want = { .runs = { 0 } };
	char *a, *b;

	expect_stats(&want);
	runs_add_at("r1", T0);
	runs_add_at("r2", T0);
	runs_add_at("r3", T0);
	runs_add_at("r4", T0);
	assert_int_equal(run_set("r1", TG_RUN_COMPLETED, 0, T0 + 5 * SEC), 1);
	assert_int_equal(run_set("r2", TG_RUN_FAILED, 0, T0 + 5 * SEC), 1);
	assert_int_equal(run_set("r3", TG_RUN_UNKNOWN, 0, T0 + 5 * SEC), 1);
	expect_archive("r1", "{\"cost\":12}", 11, TG_STATE_OK, NULL);
	want.runs[TG_RUN_IN_PROGRESS] = 1;
	want.runs[TG_RUN_COMPLETED] = want.runs[TG_RUN_FAILED] = 1;
	want.runs[TG_RUN_UNKNOWN] = 1;
	want.archived = 1;
	want.archived_bytes = 11;
	expect_stats(&want);
	/* Sweep a: one variant submitted (a run), one submitting, one pending. */
	a = sweep_new(&sw, T0);
	want.sweeps_running = 1;
	want.variants_pending = 3;
	expect_stats(&want);
	expect_claim(a, "base", NULL);
	assert_int_equal(submitted(a, "base", "s1"), TG_STATE_OK);
	expect_claim(a, "ctv-3", NULL);
	want.runs[TG_RUN_IN_PROGRESS] = 2;
	want.variants_pending = 1;
	want.variants_submitting = 1;
	expect_stats(&want);
	/* Sweep b: its only variant rejected, so it is done. */
	sw.nvariants = 1;
	b = sweep_new(&sw, T0);
	expect_claim(b, "base", NULL);
	assert_int_equal(unclaim(b, "base", "400", 1), TG_STATE_OK);
	assert_int_equal(settle_sweep(b, T0), 1);
	want.sweeps_done = 1;
	expect_stats(&want);
	/* Expiry moves every row to EXPIRED; the archive stays. */
	expire(T0 + 30 * DAY, 5);
	memset(want.runs, 0, sizeof(want.runs));
	want.runs[TG_RUN_EXPIRED] = 5;
	expect_stats(&want);
	free(a);
	free(b);
}

/* The next end not handled (want NULL: none). */
static void
expect_unhandled(const char *want, enum tg_run_status want_st)
{
	struct wait w = { 0 };

	settle(tg_state_runs_next_unhandled(F.st, on_unhandled, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	if (want == NULL) {
		assert_null(w.s);
	} else {
		assert_string_equal(w.s, want);
		assert_int_equal(w.n, want_st);
	}
	wait_clear(&w);
}

static void
set_handled(const char *id)
{
	struct wait w = { 0 };

	expect_later(tg_state_runs_set_handled(F.st, id, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
}

/* Ends oldest first, kept across a reopen until handled; a handled end
 * that later expires is not handled again, an unfinished run that expires
 * is. */
static void
test_run_unhandled_ends(void **state)
{
	runs_add_at("a", T0);
	runs_add_at("b", T0 + SEC);
	expect_unhandled(NULL, 0);
	assert_int_equal(run_set("b", TG_RUN_FAILED, T0 + 5 * SEC, T0 + 6 * SEC), 1);
	assert_int_equal(run_set("a", TG_RUN_COMPLETED, T0 + 7 * SEC, T0 + 8 * SEC), 1);
	reopen_registry();
	expect_unhandled("b", TG_RUN_FAILED);
	set_handled("b");
	expect_unhandled("a", TG_RUN_COMPLETED);
	set_handled("a");
	expect_unhandled(NULL, 0);
	runs_add_at("c", T0 + 2 * SEC);
	expire(T0 + 31 * DAY, 3);
	expect_unhandled("c", TG_RUN_EXPIRED);
	set_handled("c");
	expect_unhandled(NULL, 0);
}

/* Ids and filters that are no run's: nothing found, nothing broken. */
static void
test_run_garbage(void **state)
{
	static const char *const junk[] = { "", "'", "x' OR 1=1 --", "%", "\xff\xfe", "swp_",
		"IN_PROGRESS", "sim-1\"; DROP TABLE runs; --" };
	struct tg_runs_query q;
	struct tg_sweep sw;
	struct tg_run run;
	size_t i;

	runs_add_at("real", T0);
	for (i = 0; i < TG_NELEM(junk); i++) {
		/* not UTF-8 ("\xff\xfe"): no row holds it on either database */
		assert_int_equal(get_run(junk[i], &run), TG_STATE_NOT_FOUND);
		assert_int_equal(run_set(junk[i], TG_RUN_COMPLETED, 0, T0), -TG_STATE_NOT_FOUND);
		q = (struct tg_runs_query){ .case_id = junk[i], .api_key = junk[i] };
		expect_list(&q, "", 0);
		q = (struct tg_runs_query){ .sweep_id = junk[i] };
		expect_list(&q, "", 0);
		assert_int_equal(get_sweep(junk[i], &sw), TG_STATE_NOT_FOUND);
		expect_sweeps(junk[i], NULL, 0, 0, "", 0);
	}
	q = (struct tg_runs_query){ 0 };
	expect_list(&q, "real", 0);
}

/* ---- the SQLite runs file ---- */

/* The file's version, its journal; a newer version refused and left as it
 * was; reopening an up-to-date file changes nothing. */
static void
test_runs_file_version(void **state)
{
	struct tg_runs_opts ro = { .path = F.runs };
	struct tg_state_opts opts = { .url = NULL, .runs = &ro };
	struct tg_err err;
	struct tg_run run;

	runs_add_at("kept", T0);
	tg_state_close(F.st);
	F.st = NULL;
	assert_string_equal(sqlite_value(F.runs, "PRAGMA user_version"), "3");
	assert_string_equal(sqlite_value(F.runs, "PRAGMA journal_mode"), "wal");
	assert_int_equal(sqlite_open(), 0);
	tg_state_close(F.st);
	F.st = NULL;
	assert_string_equal(sqlite_value(F.runs, "PRAGMA user_version"), "3");
	sqlite_exec(F.runs, "PRAGMA user_version = 7");
	assert_null(tg_state_open(F.base, &opts, &err));
	assert_non_null(strstr(err.msg, "runs schema version 7 is newer than this tidegate "
	    "knows (3)"));
	assert_string_equal(sqlite_value(F.runs, "PRAGMA user_version"), "7");
	sqlite_exec(F.runs, "PRAGMA user_version = 3");
	assert_int_equal(sqlite_open(), 0);
	run_get_ok("kept", &run);
	assert_int_equal(run.status, TG_RUN_IN_PROGRESS);
	tg_run_cleanup(&run);
}

/* A version 1 file: the ends recorded before the upgrade count as
 * handled, runs still in progress are handled when they end. */
static void
test_runs_file_v1(void **state)
{
	struct tg_run run;

	runs_add_at("done", T0);
	runs_add_at("running", T0 + SEC);
	assert_int_equal(run_set("done", TG_RUN_COMPLETED, T0 + 5 * SEC, T0 + 6 * SEC), 1);
	tg_state_close(F.st);
	F.st = NULL;
	sqlite_exec(F.runs, "DROP INDEX runs_unhandled; ALTER TABLE runs DROP COLUMN"
	    " ended_handled; ALTER TABLE sweep_variants DROP COLUMN claimed_by;"
	    " PRAGMA user_version = 1");
	assert_int_equal(sqlite_open(), 0);
	assert_string_equal(sqlite_value(F.runs, "PRAGMA user_version"), "3");
	expect_unhandled(NULL, 0);
	run_get_ok("done", &run);
	assert_int_equal(run.status, TG_RUN_COMPLETED);
	assert_int_equal(run.completed_at, T0 + 5 * SEC);
	tg_run_cleanup(&run);
	assert_int_equal(run_set("running", TG_RUN_FAILED, T0 + 9 * SEC, T0 + 9 * SEC), 1);
	expect_unhandled("running", TG_RUN_FAILED);
}

#define CLAIMED_BY_COLUMNS "SELECT count(*) FROM pragma_table_info('sweep_variants')" \
	" WHERE name = 'claimed_by'"

/* A version 2 file (claims named no instance) at version 3: its runs,
 * sweeps and variants kept, the claim it left submitting pending again,
 * and a claim on it names this instance. */
static void
test_runs_file_v2(void **state)
{
	char *id = sweep_of_three(), q[160];
	struct tg_sweep sw;
	struct tg_run run;

	expect_claim(id, "base", "team-a");
	assert_int_equal(submitted(id, "base", "sim-0"), TG_STATE_OK);
	expect_claim(id, "ctv-3", "team-a");
	runs_add_at("solo", T0);
	assert_int_equal(run_set("solo", TG_RUN_COMPLETED, 0, T0 + SEC), 1);
	expect_archive("solo", "{\"r\":1}", 7, TG_STATE_OK, NULL);
	tg_state_close(F.st);
	F.st = NULL;
	sqlite_exec(F.runs, "ALTER TABLE sweep_variants DROP COLUMN claimed_by;"
	    " PRAGMA user_version = 2");
	assert_string_equal(sqlite_value(F.runs, CLAIMED_BY_COLUMNS), "0");
	assert_int_equal(sqlite_open(), 0);
	assert_string_equal(sqlite_value(F.runs, "PRAGMA user_version"), "3");
	assert_string_equal(sqlite_value(F.runs, CLAIMED_BY_COLUMNS), "1");
	assert_int_equal(get_sweep(id, &sw), TG_STATE_OK);
	assert_int_equal(sw.state, TG_SWEEP_RUNNING);
	assert_int_equal(sw.nvariants, 3);
	assert_int_equal(sw.concurrency, 2);
	assert_string_equal(sw.api_key, "team-a");
	tg_sweep_cleanup(&sw);
	expect_statuses(id, "base=IN_PROGRESS/1 ctv-3=PENDING/1 ctv-4=PENDING/0");
	run_get_ok("sim-0", &run);
	assert_string_equal(run.sweep_id, id);
	assert_string_equal(run.variant, "base");
	tg_run_cleanup(&run);
	run_get_ok("solo", &run);
	assert_int_equal(run.status, TG_RUN_COMPLETED);
	assert_int_equal(run.results_size, 7);
	tg_run_cleanup(&run);
	expect_claim(id, "ctv-3", "team-a");
	snprintf(q, sizeof(q), "SELECT claimed_by IS NOT NULL AND claimed_by <> '' FROM"
	    " sweep_variants WHERE sweep_id = '%s' AND name = 'ctv-3'", id);
	assert_string_equal(sqlite_value(F.runs, q), "1");
	free(id);
}

/* Files that cannot be the registry's: refused at open, left as they were. */
static void
test_runs_file_garbage(void **state)
{
	struct tg_runs_opts ro = { 0 };
	struct tg_state_opts opts = { .url = NULL, .runs = &ro };
	char path[128];
	struct stat sb;
	struct tg_err err;
	FILE *f;
	int i;

	assert_null(tg_state_open(F.base, &opts, &err));
	assert_non_null(strstr(err.msg, "no database path for the runs store"));
	ro.path = "/nonexistent-dir/x/runs.db";
	assert_null(tg_state_open(F.base, &opts, &err));
	assert_non_null(strstr(err.msg, "cannot open /nonexistent-dir/x/runs.db"));
	snprintf(path, sizeof(path), "%s/not-a-db", F.dir);
	assert_non_null(f = fopen(path, "w"));
	for (i = 0; i < 200; i++)
		fputs("this is not a database file ", f);
	fclose(f);
	ro.path = path;
	assert_null(tg_state_open(F.base, &opts, &err));
	assert_non_null(strstr(err.msg, "not a database"));
	assert_int_equal(stat(path, &sb), 0);
	assert_int_equal(sb.st_size, 200 * 28);
}

/* ---- ownership, tokens, poll entries ---- */

static void
test_owners(void **state)
{
	struct wait w = { 0 };

	settle(tg_state_owners_record(F.st, "export", "ABC-1", "key-a", T0, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	settle(tg_state_owners_lookup(F.st, "export", "abc-1", T0 + 1, on_str, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_string_equal(w.s, "key-a");
	wait_clear(&w);
	settle(tg_state_owners_lookup(F.st, "export", " {0123456789ABCDEF0123456789abcdef} ",
	    T0 + 1, on_str, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
	wait_clear(&w);
	settle(tg_state_owners_record(F.st, "export", "01234567-89ab-cdef-0123-456789ABCDEF",
	    "key-b", T0, on_done, &w), &w);
	wait_clear(&w);
	settle(tg_state_owners_lookup(F.st, "export", " {0123456789ABCDEF0123456789abcdef} ",
	    T0 + 1, on_str, &w), &w);		/* the same UUID, spelled otherwise */
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_string_equal(w.s, "key-b");
	wait_clear(&w);
	settle(tg_state_owners_lookup(F.st, "import", "ABC-1", T0 + 1, on_str, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
	assert_null(w.s);
	wait_clear(&w);
	settle(tg_state_owners_lookup(F.st, "export", "ABC-1", T0 + 31LL * 86400000, on_str,
	    &w), &w);				/* too old to count */
	assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
	wait_clear(&w);
	settle(tg_state_owners_count(F.st, on_num, &w), &w);
	assert_int_equal(w.n, 2);
	wait_clear(&w);
	settle(tg_state_owners_prune(F.st, T0 + 31LL * 86400000, on_num, &w), &w);
	assert_int_equal(w.n, 2);
	wait_clear(&w);
	settle(tg_state_owners_count(F.st, on_num, &w), &w);
	assert_int_equal(w.n, 0);
	wait_clear(&w);
}

/* One key past its bound loses its own oldest records, never another key's. */
static void
test_owners_per_key(void **state)
{
	struct wait w = { 0 };
	char cid[16];
	int i;

	for (i = 0; i < 2; i++) {
		snprintf(cid, sizeof(cid), "A-%d", i);
		settle(tg_state_owners_record(F.st, "export", cid, "key-a", T0, on_done, &w), &w);
		assert_int_equal(w.res.rc, TG_STATE_OK);
		wait_clear(&w);
	}
	for (i = 0; i < 10; i++) {
		snprintf(cid, sizeof(cid), "B-%d", i);
		settle(tg_state_owners_record(F.st, "export", cid, "key-b", T0 + i, on_done, &w),
		    &w);
		assert_int_equal(w.res.rc, TG_STATE_OK);
		wait_clear(&w);
	}
	for (i = 0; i < 12; i++) {
		snprintf(cid, sizeof(cid), i < 2 ? "a-%d" : "b-%d", i < 2 ? i : i - 2);
		settle(tg_state_owners_lookup(F.st, "export", cid, T0 + 10, on_str, &w), &w);
		if (i - 2 >= 0 && i - 2 < 10 - OWNERS_PER_KEY) {
			assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
		} else {
			assert_int_equal(w.res.rc, TG_STATE_OK);	/* i < 2: key-a's kept */
			assert_string_equal(w.s, i < 2 ? "key-a" : "key-b");
		}
		wait_clear(&w);
	}
	settle(tg_state_owners_prune(F.st, T0 + 10, on_num, &w), &w);
	assert_int_equal(w.n, 0);		/* within every bound */
	wait_clear(&w);
	settle(tg_state_owners_count(F.st, on_num, &w), &w);
	assert_int_equal(w.n, 2 + OWNERS_PER_KEY);
	wait_clear(&w);
}

/* A record needs family, correlationId and key: refused, nothing kept. */
static void
test_owners_bad_inputs(void **state)
{
	struct wait w = { 0 };

	settle(tg_state_owners_record(F.st, "export", "", "key-a", T0, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_ERROR);
	assert_non_null(strstr(w.res.err.msg, "needs family, correlationId and key"));
	wait_clear(&w);
	settle(tg_state_owners_record(F.st, "export", NULL, "key-a", T0, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_ERROR);
	wait_clear(&w);
	settle(tg_state_owners_record(F.st, "export", "c", NULL, T0, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_ERROR);
	wait_clear(&w);
	settle(tg_state_owners_count(F.st, on_num, &w), &w);
	assert_int_equal(w.n, 0);
	wait_clear(&w);
}

/* The owner of cid at now, "" when none. */
static const char *
owner_of(const char *cid, int64_t now)
{
	static char key[64];
	struct wait w = { 0 };

	settle(tg_state_owners_lookup(F.st, "export", cid, now, on_str, &w), &w);
	snprintf(key, sizeof(key), "%s", w.res.rc == TG_STATE_OK ? w.s : "");
	wait_clear(&w);
	return key;
}

/* A SQLite file of version 1 (one bound for all keys) keeps its records,
 * each key's numbered in the order they were made, in WAL at version 2;
 * the records survive a reopen. */
static void
test_owners_file_v1(void **state)
{
	struct wait w = { 0 };
	char q[192];
	int i;

	tg_state_close(F.st);
	F.st = NULL;
	assert_int_equal(unlink(F.owners), 0);
	for (i = 0; i < 6; i++) {
		snprintf(q, sizeof(q), "INSERT INTO owners (family, correlation_id, api_key, "
		    "created_at) VALUES ('export', 'v-%d', '%s', %lld);", i, i % 2 ? "b" : "a",
		    (long long)(T0 + i));
		sqlite_exec(F.owners, i == 0 ? "CREATE TABLE owners (id INTEGER PRIMARY KEY "
		    "AUTOINCREMENT, family TEXT NOT NULL, correlation_id TEXT NOT NULL, api_key "
		    "TEXT NOT NULL, created_at INTEGER NOT NULL, UNIQUE (family, correlation_id)); "
		    "PRAGMA user_version = 1" : "SELECT 1");
		sqlite_exec(F.owners, q);
	}
	assert_int_equal(sqlite_open(), 0);
	settle(tg_state_owners_count(F.st, on_num, &w), &w);
	assert_int_equal(w.n, 6);
	wait_clear(&w);
	assert_string_equal(owner_of("v-1", T0 + 9), "b");
	/* a's fourth record (bound OWNERS_PER_KEY = 3): a's first goes, b's stay */
	settle(tg_state_owners_record(F.st, "export", "v-6", "a", T0 + 6, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	tg_state_close(F.st);
	assert_int_equal(sqlite_open(), 0);
	assert_string_equal(owner_of("v-0", T0 + 9), "");
	assert_string_equal(owner_of("v-2", T0 + 9), "a");
	assert_string_equal(owner_of("v-6", T0 + 9), "a");
	for (i = 1; i < 6; i += 2) {
		snprintf(q, sizeof(q), "v-%d", i);
		assert_string_equal(owner_of(q, T0 + 9), "b");
	}
	assert_string_equal(sqlite_value(F.owners, "PRAGMA journal_mode"), "wal");
	assert_string_equal(sqlite_value(F.owners, "PRAGMA user_version"), "4");
}

static void
on_token(const struct tg_state_res *res, const struct tg_state_token *t, void *arg)
{
	struct wait *w = arg;

	got(w, res);
	w->s = t != NULL ? strdup(t->token) : NULL;
	w->n = t != NULL ? t->expires_at : 0;
}

static void
token_call(struct tg_state_op *op, struct wait *w, int want)
{
	if (op != NULL)
		wait_for(w);
	assert_int_equal(w->res.rc, want);
}

static void
test_tokens(void **state)
{
	struct tg_state_token t1 = { "tok-1", T0 + 3600000 }, t2 = { "tok-2", T0 + 7200000 };
	struct wait w = { 0 };

	token_call(tg_state_token_get(F.st, "dex", on_token, &w), &w, TG_STATE_NOT_FOUND);
	wait_clear(&w);
	token_call(tg_state_token_put(F.st, "dex", &t1, on_done, &w), &w, TG_STATE_OK);
	wait_clear(&w);
	token_call(tg_state_token_get(F.st, "dex", on_token, &w), &w, TG_STATE_OK);
	assert_string_equal(w.s, "tok-1");
	assert_int_equal(w.n, T0 + 3600000);
	wait_clear(&w);
	token_call(tg_state_token_put(F.st, "dex", &t2, on_done, &w), &w, TG_STATE_OK);
	wait_clear(&w);
	token_call(tg_state_token_invalidate(F.st, "dex", "tok-1", on_done, &w), &w,
	    TG_STATE_NOT_FOUND);		/* a stale 401 keeps the new token */
	wait_clear(&w);
	token_call(tg_state_token_invalidate(F.st, "dex", "tok-2", on_done, &w), &w,
	    TG_STATE_OK);
	wait_clear(&w);
	token_call(tg_state_token_get(F.st, "dex", on_token, &w), &w, TG_STATE_NOT_FOUND);
	assert_null(w.s);
	wait_clear(&w);
}

static void
on_answer(const struct tg_state_res *res, const struct tg_state_answer *a, void *arg)
{
	struct wait *w = arg;

	got(w, res);
	w->n = a != NULL ? a->status : -1;
	if (a != NULL) {
		w->n2 = a->expires_at;
		w->count = a->len;
		w->p = malloc(a->len + 1);
		memcpy(w->p, a->body, a->len);
		((char *)w->p)[a->len] = '\0';
		w->s = a->content_type != NULL ? strdup(a->content_type) : NULL;
	}
}

static void
on_owner_lead(const struct tg_state_res *res, const char *owner, int led, void *arg)
{
	struct wait *w = arg;

	got(w, res);
	w->s = owner != NULL ? strdup(owner) : NULL;
	w->n = led;
}

/* PostgreSQL: key's poll entry row as "who|lead_until" (who: "other" for
 * gw-other, else "me"), or "" when none. */
static void
lead_row_is(const char *key, const char *want)
{
	char q[256];
	PGresult *r;

	if (F.side == NULL)
		return;
	snprintf(q, sizeof(q), "SELECT CASE leader WHEN 'gw-other' THEN 'other' ELSE 'me' END || '|' ||"
	    " lead_until FROM %s.poll_entries"
	    " WHERE key = '%s'", F.schema, key);
	r = PQexec(F.side, q);
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	assert_string_equal(PQntuples(r) > 0 ? PQgetvalue(r, 0, 0) : "", want);
	PQclear(r);
}

/* The owner and the lead of a first poll in one call: the owner, the
 * other key (no lead), no owner with and without a caller key, and a lead
 * held by another instance (PostgreSQL: the poll_entries row says who
 * leads). */
static void
test_owners_lookup_lead(void **state)
{
	struct tg_state_health h;
	struct wait w = { 0 };
	char until[256];
	int fleet;

	tg_state_health(F.st, &h);
	fleet = h.shared;
	settle(tg_state_owners_record(F.st, "export", "job-1", "key-a", T0, on_done, &w), &w);
	wait_clear(&w);
	settle(tg_state_owners_lookup_lead(F.st, "export", "job-1", T0 + 1, "key-b", "k1",
	    5000, on_owner_lead, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_string_equal(w.s, "key-a");
	assert_int_equal(w.n, 0);		/* another key's job: no lead */
	lead_row_is("k1", "");
	wait_clear(&w);
	settle(tg_state_owners_lookup_lead(F.st, "export", "job-1", T0 + 1, NULL, "k1",
	    5000, on_owner_lead, &w), &w);
	assert_string_equal(w.s, "key-a");
	assert_int_equal(w.n, 0);		/* no key, a keyed job */
	lead_row_is("k1", "");
	wait_clear(&w);
	settle(tg_state_owners_lookup_lead(F.st, "export", "job-1", T0 + 1, "key-a", "k1",
	    5000, on_owner_lead, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_string_equal(w.s, "key-a");
	assert_int_equal(w.n, 1);
	snprintf(until, sizeof(until), "me|%lld", (long long)(T0 + 5001));
	lead_row_is("k1", until);
	tg_state_health(F.st, &h);
	assert_int_equal(h.leases, fleet ? 1 : 0);
	wait_clear(&w);
	settle(tg_state_owners_lookup_lead(F.st, "export", "job-2", T0 + 1, "key-a", "k2",
	    5000, on_owner_lead, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
	assert_null(w.s);
	assert_int_equal(w.n, 0);		/* no record proves nothing for a key */
	lead_row_is("k2", "");
	wait_clear(&w);
	settle(tg_state_owners_lookup_lead(F.st, "export", "job-2", T0 + 1, NULL, "k2",
	    5000, on_owner_lead, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
	assert_int_equal(w.n, 1);		/* no key, no owner: the vendor judges */
	snprintf(until, sizeof(until), "me|%lld", (long long)(T0 + 5001));
	lead_row_is("k2", until);
	wait_clear(&w);
	if (F.side == NULL)
		return;
	snprintf(until, sizeof(until), "INSERT INTO %s.poll_entries (key, leader, lead_until)"
	    " VALUES ('k3', 'gw-other', %lld)", F.schema, (long long)(T0 + 9000));
	assert_int_equal(side_exec(until), 0);
	settle(tg_state_owners_lookup_lead(F.st, "export", "job-1", T0 + 2, "key-a", "k3",
	    5000, on_owner_lead, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_string_equal(w.s, "key-a");
	assert_int_equal(w.n, 0);		/* led elsewhere: the leader's answer is awaited */
	snprintf(until, sizeof(until), "other|%lld", (long long)(T0 + 9000));
	lead_row_is("k3", until);
	wait_clear(&w);
	token_call(tg_state_poll_release(F.st, "k1", on_done, &w), &w, TG_STATE_OK);
	tg_state_health(F.st, &h);
	assert_int_equal(h.leases, 1);		/* k2's */
	lead_row_is("k1", "me|0");
	wait_clear(&w);
}

/* One instance always leads and keeps nothing (SQLite); a fleet's leader
 * holds the key for its ttl (renewed when it asks again), its answer is
 * cached and gives the lead up, and nobody leads while it is fresh
 * (PostgreSQL). */
static void
test_poll(void **state)
{
	static const char body[] = "{\"a\":\"\0binary\"}";
	struct tg_state_answer a = { 200, "application/json", body, sizeof(body) - 1, 0 };
	struct tg_state_health h;
	struct wait w = { 0 };
	int fleet;

	tg_state_health(F.st, &h);
	fleet = h.shared;		/* a shared backend keeps the answer */

	token_call(tg_state_poll_lead(F.st, "dex/export/1", T0, 5000, on_num, &w), &w,
	    TG_STATE_OK);
	assert_int_equal(w.n, 1);
	wait_clear(&w);
	token_call(tg_state_poll_lead(F.st, "dex/export/1", T0 + 1, 5000, on_num, &w), &w,
	    TG_STATE_OK);
	assert_int_equal(w.n, 1);		/* its own: renewed */
	wait_clear(&w);
	token_call(tg_state_poll_publish(F.st, "dex/export/1", &a, T0, 5000, on_done, &w), &w,
	    TG_STATE_OK);
	wait_clear(&w);
	token_call(tg_state_poll_fetch(F.st, "dex/export/1", T0 + 10, on_answer, &w), &w,
	    fleet ? TG_STATE_OK : TG_STATE_NOT_FOUND);
	assert_int_equal(w.n, fleet ? 200 : -1);
	if (fleet) {
		assert_int_equal(w.count, sizeof(body) - 1);
		assert_memory_equal(w.p, body, sizeof(body) - 1);
		assert_string_equal(w.s, "application/json");
		assert_int_equal(w.n2, T0 + 5000);	/* fresh until */
	}
	wait_clear(&w);
	token_call(tg_state_poll_lead(F.st, "dex/export/1", T0 + 10, 5000, on_num, &w), &w,
	    TG_STATE_OK);
	assert_int_equal(w.n, fleet ? 0 : 1);	/* the answer is fresh: use it */
	wait_clear(&w);
	token_call(tg_state_poll_fetch(F.st, "dex/export/1", T0 + 5000, on_answer, &w), &w,
	    TG_STATE_NOT_FOUND);		/* expired */
	wait_clear(&w);
	token_call(tg_state_poll_lead(F.st, "dex/export/1", T0 + 5000, 5000, on_num, &w), &w,
	    TG_STATE_OK);
	assert_int_equal(w.n, 1);		/* free again */
	wait_clear(&w);
	token_call(tg_state_poll_release(F.st, "dex/export/1", on_done, &w), &w, TG_STATE_OK);
	wait_clear(&w);
	token_call(tg_state_notify(F.st, "poll", "dex/export/1", on_done, &w), &w, TG_STATE_OK);
	wait_clear(&w);
}

/* ---- cancel, close, open ---- */

static void
never(const struct tg_state_res *res, const char *s, void *arg)
{
	fail_msg("a cancelled operation was answered");
}

static void
never_payload(const struct tg_state_res *res, struct tg_state_payload *p, void *arg)
{
	fail_msg("a cancelled operation was answered");
}

static void
test_cancel(void **state)
{
	struct tg_outbox_new j = {
		.url = "https://hooks.example/in", .secret_ref = "main", .kind = "export",
	};
	char id[TG_WEBHOOK_ID_LEN], id2[TG_WEBHOOK_ID_LEN];
	struct tg_state_op *op;
	struct wait w = { 0 };
	int i;

	add_job(NULL, id);
	add_job(NULL, id2);
	for (i = 0; i < 4; i++) {
		op = tg_state_outbox_add(F.st, &j, T0, never, NULL);
		assert_non_null(op);
		tg_state_cancel(op);
	}
	op = tg_state_payload_open(F.st, id, never_payload, NULL);
	assert_non_null(op);
	tg_state_cancel(op);
	/* most likely run by now: the writer it opened is dropped, not leaked */
	op = tg_state_payload_open(F.st, id2, never_payload, NULL);
	usleep(100000);
	tg_state_cancel(op);
	/* FIFO: once this is answered, the cancelled ones are done with */
	expect_later(tg_state_outbox_purge(F.st, 0, on_num, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	expect_read(tg_state_outbox_get(F.st, id2, on_jobs, &w), &w);
	assert_int_equal(w.n, TG_OUTBOX_WAITING);
	wait_clear(&w);
	set_payload(id2, "{}");			/* a new writer replaces the dropped one */
}

#define PG_POOL_SIZE	2	/* the backend's connections (src/state/pg/pg.h) */
static void until_answers(struct tg_state *b);
static void until_locked(int n);
static void wait_ms(struct wait *w, int ms);
static void loop_ms(int ms);

/* Writes pending at close are answered then, once: with SQLite OK or
 * UNAVAILABLE (its writer runs a write to its end, or skips it), never
 * UNKNOWN; with PostgreSQL the three, sent as one group on one connection
 * (held on a lock the test takes), each UNKNOWN, with the id the job has
 * should it commit, as each would be alone. */
static void
test_close_pending(void **state)
{
	struct tg_outbox_new j = {
		.url = "https://hooks.example/in", .secret_ref = "main", .kind = "export",
	};
	struct wait w[3] = { { 0 } };
	int i, pg = strcmp(F.b->name, "postgresql") == 0, unknown = 0;
	char q[160];

	if (pg) {		/* two adds sent and held on a lock, one queued */
		until_answers(F.st);
		snprintf(q, sizeof(q), "BEGIN; LOCK TABLE %s.outbox_jobs IN SHARE MODE", F.schema);
		assert_int_equal(side_exec(q), 0);
	}
	for (i = 0; i < 3; i++)
		assert_non_null(tg_state_outbox_add(F.st, &j, T0, on_str, &w[i]));
	if (pg)
		until_locked(1);	/* one connection: the group */
	tg_state_close(F.st);
	F.st = NULL;
	for (i = 0; i < 3; i++) {
		assert_int_equal(w[i].called, 1);
		/* UNKNOWN: sent, may commit (PostgreSQL only), with the id it has */
		if (w[i].res.rc == TG_STATE_UNKNOWN) {
			unknown++;
			assert_non_null(w[i].s);
			assert_int_equal(strncmp(w[i].s, "msg_", 4), 0);
		} else
			assert_true(w[i].res.rc == TG_STATE_OK ||
			    w[i].res.rc == TG_STATE_UNAVAILABLE);
		wait_clear(&w[i]);
	}
	assert_int_equal(unknown, pg ? 3 : 0);
	if (pg)
		assert_int_equal(side_exec("ROLLBACK"), 0);
}

static void
never_done(const struct tg_state_res *res, void *arg)
{
	fail_msg("a cancelled operation was answered");
}

/* PostgreSQL: transaction ids assigned in the database so far (the
 * side connection's own included); SQLite: 0. */
static int64_t
xids_now(void)
{
	PGresult *r;
	int64_t n;

	if (F.side == NULL)
		return 0;
	r = PQexec(F.side, "SELECT txid_current()");
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	n = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
	PQclear(r);
	return n;
}

/*
 * Writes sent together commit together: eight owner records of eight keys
 * asked at once are one transaction with PostgreSQL (one transaction id,
 * one commit: group commit), each answered OK once it is durable; SQLite
 * the same answers. When one record of the group fails (text PostgreSQL
 * cannot hold), the group is rolled back and each runs alone: that one
 * answers ERROR and the seven others OK, each exactly once, all of them
 * recorded; as they would one by one.
 */
static void
test_group_commit(void **state)
{
	static const char *const keys[8] = { "k-h", "k-b", "k-g", "k-a", "k-f", "k-c",
		"k-e", "k-d" };
	struct wait w[8] = { { 0 } };
	int pg = F.side != NULL, round, i;
	int64_t x0;
	char cid[16];

	for (round = 0; round < 2; round++) {
		if (pg)
			until_answers(F.st);
		x0 = xids_now();
		for (i = 0; i < 8; i++) {
			snprintf(cid, sizeof(cid), round == 1 && i == 3 ? "g%d-\xff" : "g%d-%d",
			    round, i);
			assert_non_null(tg_state_owners_record(F.st, "export", cid, keys[i], T0,
			    on_done, &w[i]));
		}
		for (i = 0; i < 8; i++) {
			wait_ms(&w[i], 5000);
			assert_int_equal(w[i].called, 1);
			if (pg && round == 1 && i == 3)
				assert_int_equal(w[i].res.rc, TG_STATE_ERROR);
			else
				assert_int_equal(w[i].res.rc, TG_STATE_OK);
			wait_clear(&w[i]);
		}
		if (pg && round == 0)	/* the group's one, and the side's second look */
			assert_int_equal(xids_now() - x0, 2);
		for (i = 0; i < 8; i++) {
			if (round == 1 && i == 3)
				continue;
			snprintf(cid, sizeof(cid), "g%d-%d", round, i);
			assert_string_equal(owner_of(cid, T0 + 1), keys[i]);
		}
		loop_ms(20);
		for (i = 0; i < 8; i++)
			assert_int_equal(w[i].called, 0);	/* never answered twice */
	}
}

/* Cancelled writes are never answered; the query may still run. */
static void
test_cancel_shared(void **state)
{
	struct tg_state_op *op;
	struct wait w = { 0 };
	char cid[16];
	int i;

	for (i = 0; i < 4; i++) {
		snprintf(cid, sizeof(cid), "job-%d", i);
		op = tg_state_owners_record(F.st, "export", cid, "key-a", T0, never_done, NULL);
		assert_non_null(op);
		tg_state_cancel(op);
	}
	settle(tg_state_owners_count(F.st, on_num, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_true(w.n >= 0 && w.n <= 4);
	wait_clear(&w);
	settle(tg_state_token_get(F.st, "dex", on_token, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
	wait_clear(&w);
}

static void
test_close_pending_shared(void **state)
{
	struct wait w[3] = { { 0 } };
	int i;

	for (i = 0; i < 3; i++)
		assert_non_null(tg_state_owners_record(F.st, "export", "job", "key-a", T0, on_done,
		    &w[i]));
	tg_state_close(F.st);
	F.st = NULL;
	for (i = 0; i < 3; i++) {
		assert_int_equal(w[i].called, 1);
		assert_true(w[i].res.rc == TG_STATE_OK || w[i].res.rc == TG_STATE_UNAVAILABLE);
		wait_clear(&w[i]);
	}
}

/* Two handles on one database, as two instances of a fleet. */
static void
test_fleet_two_handles(void **state)
{
	struct tg_owners_opts wo = { 0 };
	struct tg_state_opts opts = { .url = F.url, .owners = &wo, .instance = "gw-b" };
	char q[160];
	struct tg_state_token t = { "tok-a", T0 + 3600000 };
	struct tg_state *b;
	struct tg_err err;
	struct wait w = { 0 };

	b = tg_state_open(F.base, &opts, &err);	/* the schema is there: no migration */
	assert_non_null(b);
	assert_string_equal(tg_state_backend_name(b), "postgresql");
	settle(tg_state_token_put(F.st, "dex", &t, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	settle(tg_state_token_get(b, "dex", on_token, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_string_equal(w.s, "tok-a");
	assert_int_equal(w.n, T0 + 3600000);
	wait_clear(&w);
	settle(tg_state_poll_lead(F.st, "dex/export/9", T0, 5000, on_num, &w), &w);
	assert_int_equal(w.n, 1);
	wait_clear(&w);
	/* A refused lead is a read: it neither waits for the row's lock (held
	 * here) nor takes one, so a follower's look costs no transaction id. */
	snprintf(q, sizeof(q), "SELECT 1 FROM %s.poll_entries WHERE key = 'dex/export/9'"
	    " FOR UPDATE", F.schema);
	assert_int_equal(side_exec("BEGIN"), 0);
	assert_int_equal(side_exec(q), 0);
	settle(tg_state_poll_lead(b, "dex/export/9", T0 + 4999, 5000, on_num, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(w.n, 0);		/* the other leads */
	assert_int_equal(side_exec("ROLLBACK"), 0);
	wait_clear(&w);
	settle(tg_state_poll_lead(b, "dex/export/9", T0 + 5000, 5000, on_num, &w), &w);
	assert_int_equal(w.n, 1);		/* its ttl passed */
	wait_clear(&w);
	settle(tg_state_poll_lead(F.st, "dex/export/9", T0 + 5001, 5000, on_num, &w), &w);
	assert_int_equal(w.n, 0);
	wait_clear(&w);
	settle(tg_state_poll_release(b, "dex/export/9", on_done, &w), &w);
	wait_clear(&w);
	settle(tg_state_poll_lead(F.st, "dex/export/9", T0 + 5002, 5000, on_num, &w), &w);
	assert_int_equal(w.n, 1);		/* given up */
	wait_clear(&w);
	settle(tg_state_owners_record(b, "export", "J-1", "key-b", T0, on_done, &w), &w);
	wait_clear(&w);
	settle(tg_state_owners_lookup(F.st, "export", "j-1", T0, on_str, &w), &w);
	assert_string_equal(w.s, "key-b");
	wait_clear(&w);
	settle(tg_state_token_invalidate(b, "dex", "tok-a", on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	settle(tg_state_token_get(F.st, "dex", on_token, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_NOT_FOUND);
	wait_clear(&w);
	tg_state_close(b);
}

struct heard {
	int n;
	char topic[16], what[64];
};

static void
on_heard(const char *topic, const char *what, void *arg)
{
	struct heard *h = arg;

	h->n++;
	snprintf(h->topic, sizeof(h->topic), "%s", topic);
	snprintf(h->what, sizeof(h->what), "%s", what != NULL ? what : "(null)");
}

/* Run the loop until h heard n wake-ups (at most ~10 s). */
static void
hear(struct heard *h, int n)
{
	int i;

	for (i = 0; i < 10000 && h->n < n; i++) {
		struct timeval tv = { 0, 1000 };

		event_base_loopexit(F.base, &tv);
		event_base_loop(F.base, EVLOOP_ONCE);
	}
	assert_int_equal(h->n, n);
}

/* Run the loop until st hears other instances (at most ~10 s). */
static void
listening(struct tg_state *st)
{
	struct tg_state_health h;
	int i;

	for (i = 0; i < 10000; i++) {
		struct timeval tv = { 0, 1000 };

		tg_state_health(st, &h);
		if (h.listening)
			return;
		event_base_loopexit(F.base, &tv);
		event_base_loop(F.base, EVLOOP_ONCE);
	}
	fail_msg("never listening");
}

/* Wake-ups: another handle's publish, token write and notify reach a
 * watch of their topic, not of another; a handle never hears itself;
 * health counts them and the leads held. */
static void
test_fleet_wakeups(void **state)
{
	struct tg_state_opts opts = { .url = F.url, .instance = "gw-b" };
	struct tg_state_answer a = { 202, "application/json", "{}", 2, 0 };
	struct tg_state_token tok = { "tok-1", T0 + 60000 };
	struct heard hp = { 0 }, hr = { 0 }, ht = { 0 };
	struct tg_state_watch *wp, *wr, *wt;
	struct tg_state_health h;
	struct tg_state *b;
	struct tg_err err;
	struct wait w = { 0 };

	b = tg_state_open(F.base, &opts, &err);
	assert_non_null(b);
	wp = tg_state_watch(F.st, "poll", on_heard, &hp);
	wr = tg_state_watch(F.st, "runs", on_heard, &hr);
	wt = tg_state_watch(F.st, "token", on_heard, &ht);
	listening(F.st);		/* its LISTEN is done: nothing sent before is heard */
	settle(tg_state_poll_lead(b, "dex/x", T0, 5000, on_num, &w), &w);
	wait_clear(&w);
	tg_state_health(b, &h);
	assert_int_equal(h.leases, 1);
	settle(tg_state_poll_publish(b, "dex/x", &a, T0, 5000, on_done, &w), &w);
	wait_clear(&w);
	hear(&hp, 1);
	assert_string_equal(hp.topic, "poll");
	assert_string_equal(hp.what, "dex/x");
	settle(tg_state_notify(b, "runs", "sim-1", on_done, &w), &w);
	wait_clear(&w);
	hear(&hr, 1);
	assert_string_equal(hr.what, "sim-1");
	settle(tg_state_notify(F.st, "runs", "mine", on_done, &w), &w);	/* not heard */
	wait_clear(&w);
	settle(tg_state_notify(b, "runs", "sim-2", on_done, &w), &w);
	wait_clear(&w);
	hear(&hr, 2);
	assert_string_equal(hr.what, "sim-2");	/* its own "mine" never came */
	settle(tg_state_token_put(b, "dex", &tok, on_done, &w), &w);	/* followers wake */
	wait_clear(&w);
	hear(&ht, 1);
	assert_string_equal(ht.topic, "token");
	assert_string_equal(ht.what, "dex");
	assert_int_equal(hp.n, 1);
	assert_int_equal(hr.n, 2);
	tg_state_health(F.st, &h);
	assert_string_equal(h.backend, "postgresql");
	assert_true(h.up && h.shared);
	assert_true(h.wakeups >= 4);	/* a test beside on the same server may add */
	assert_true(h.queries > 0);
	tg_state_health(b, &h);
	assert_int_equal(h.leases, 0);		/* published: given up */
	assert_int_equal(h.notifies, 4);
	tg_state_unwatch(F.st, wp);
	tg_state_unwatch(F.st, wr);
	tg_state_unwatch(F.st, wt);
	tg_state_close(b);
}

static void
on_adopted(const struct tg_state_res *res, const struct tg_outbox_job *jobs, size_t n,
    void *arg)
{
	struct wait *w = arg;

	got(w, res);
	w->count = n;
	if (n > 0)
		w->s = strdup(jobs[0].id);
}

/* Waiting jobs: the adding handle holds the fetch for the lease; the other
 * adopts it once that ran out (never both), a hold keeps it, and the
 * data's commit frees it for delivery by any handle at once. */
static void
test_fleet_adopt(void **state)
{
	struct tg_state_opts opts = { .url = F.url, .outbox = &pg_outbox, .instance = "gw-b" };
	const char *ids[1];
	char id[TG_WEBHOOK_ID_LEN];
	struct tg_outbox_lease *l;
	struct tg_state *b;
	struct tg_err err;
	struct wait w = { 0 };

	b = tg_state_open(F.base, &opts, &err);
	assert_non_null(b);
	add_job(NULL, id);			/* held by F.st until T0 + 60000 */
	ids[0] = id;
	settle(tg_state_outbox_adopt(b, T0 + 59999, 10, on_adopted, &w), &w);
	assert_int_equal(w.count, 0);
	wait_clear(&w);
	settle(tg_state_outbox_hold(F.st, ids, 1, T0 + 50000, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	settle(tg_state_outbox_adopt(b, T0 + 109999, 10, on_adopted, &w), &w);
	assert_int_equal(w.count, 0);		/* held again until T0 + 110000 */
	wait_clear(&w);
	settle(tg_state_outbox_adopt(b, T0 + 110000, 10, on_adopted, &w), &w);
	assert_int_equal(w.count, 1);		/* its fetcher is gone: b's now */
	assert_string_equal(w.s, id);
	wait_clear(&w);
	settle(tg_state_outbox_adopt(F.st, T0 + 110001, 10, on_adopted, &w), &w);
	assert_int_equal(w.count, 0);		/* b holds it */
	wait_clear(&w);
	set_payload(id, "{\"n\":1}");
	l = lease(T0 + 1);			/* the hold went with the wait */
	assert_non_null(l);
	assert_string_equal(l->id, id);
	tg_outbox_lease_free(l);
	tg_state_close(b);
}

/* Two handles lease at once, two leases each, three jobs due: three
 * leases of three jobs and one empty answer; a lease not renewed past its
 * expiry goes to the other handle, and its first holder has lost it. */
/* Two instances asking at once, on a store that holds no key yet, agree. */
static void
test_fleet_outbox_key(void **state)
{
	struct tg_state_opts opts = { .url = F.url, .outbox = &pg_outbox };
	struct wait w[4] = { { 0 } };
	struct tg_state *b;
	struct tg_err err;
	int i;

	b = tg_state_open(F.base, &opts, &err);
	assert_non_null(b);
	for (i = 0; i < 4; i++)
		assert_non_null(tg_state_outbox_key(i % 2 ? b : F.st, on_key, &w[i]));
	for (i = 0; i < 4; i++) {
		wait_for(&w[i]);
		assert_int_equal(w[i].res.rc, TG_STATE_OK);
		assert_int_equal(w[i].count, TG_STATE_KEY_LEN);
		assert_memory_equal(w[i].p, w[0].p, TG_STATE_KEY_LEN);
	}
	for (i = 0; i < 4; i++)
		wait_clear(&w[i]);
	tg_state_close(b);
}

static void
test_fleet_outbox(void **state)
{
	struct tg_state_opts opts = { .url = F.url, .outbox = &pg_outbox };
	struct tg_outbox_result ok = { 200, -1, "" };
	char id[3][TG_WEBHOOK_ID_LEN];
	struct wait w[4] = { { 0 } }, x = { 0 };
	struct tg_outbox_lease *mine = NULL, *other = NULL, *l;
	struct tg_state *b;
	struct tg_err err;
	int i, got = 0;

	b = tg_state_open(F.base, &opts, &err);
	assert_non_null(b);
	for (i = 0; i < 3; i++) {
		add_job(NULL, id[i]);
		set_payload(id[i], "{\"n\":1}");
	}
	for (i = 0; i < 4; i++)
		assert_non_null(tg_state_outbox_lease(i % 2 ? b : F.st, T0 + 1, NULL, on_lease, &w[i]));
	for (i = 0; i < 4; i++) {
		wait_for(&w[i]);
		assert_int_equal(w[i].res.rc, TG_STATE_OK);
		got += w[i].lease != NULL;
	}
	assert_int_equal(got, 3);
	for (i = 0; i < 4; i++) {
		if (w[i].lease != NULL && w[(i + 1) % 4].lease != NULL)
			assert_string_not_equal(w[i].lease->id, w[(i + 1) % 4].lease->id);
		if (w[i].lease != NULL && w[(i + 2) % 4].lease != NULL)
			assert_string_not_equal(w[i].lease->id, w[(i + 2) % 4].lease->id);
		if (w[i].lease != NULL && (i % 2) == 0 && mine == NULL)
			mine = w[i].lease;
		else if (w[i].lease != NULL && other == NULL)
			other = w[i].lease;
	}
	assert_non_null(mine);
	assert_non_null(other);
	/* every lease but mine renewed; mine runs out at T0 + 60001 */
	for (i = 0; i < 4; i++) {
		if (w[i].lease == NULL || w[i].lease == mine)
			continue;
		memset(&x, 0, sizeof(x));
		expect_later(tg_state_outbox_renew(i % 2 ? b : F.st, w[i].lease, T0 + 30000, on_num,
		    &x), &x);
		assert_int_equal(x.res.rc, TG_STATE_OK);
	}
	memset(&x, 0, sizeof(x));
	expect_later(tg_state_outbox_lease(b, T0 + 60000, NULL, on_lease, &x), &x);
	assert_null(x.lease);			/* not expired yet */
	memset(&x, 0, sizeof(x));
	expect_later(tg_state_outbox_lease(b, T0 + 60001, NULL, on_lease, &x), &x);
	assert_non_null(x.lease);
	assert_string_equal(x.lease->id, mine->id);
	assert_int_equal(x.lease->attempt, 2);
	l = x.lease;
	x.lease = NULL;
	memset(&x, 0, sizeof(x));
	expect_later(tg_state_outbox_complete(F.st, mine, &ok, T0 + 60002, on_outcome, &x), &x);
	assert_int_equal(x.res.rc, TG_STATE_CONFLICT);	/* taken over */
	memset(&x, 0, sizeof(x));
	expect_later(tg_state_outbox_complete(b, l, &ok, T0 + 60003, on_outcome, &x), &x);
	assert_int_equal(x.res.rc, TG_STATE_OK);
	assert_int_equal(x.n, TG_OUTBOX_DELIVERED);
	tg_outbox_lease_free(l);
	for (i = 0; i < 4; i++)
		wait_clear(&w[i]);
	tg_state_close(b);
}

/* Ask for a token until the answer's code is want (at most ~10 s); the
 * last answer stays in w. */
static void
until_rc(struct wait *w, int want)
{
	int i;

	for (i = 0; i < 1000; i++) {
		wait_clear(w);
		settle(tg_state_token_get(F.st, "dex", on_token, w), w);
		if (w->res.rc == want)
			return;
		usleep(10000);
		event_base_loop(F.base, EVLOOP_NONBLOCK);
	}
	fail_msg("no answer %s (last: %s)", tg_state_rc_str(want), w->res.err.msg);
}

/* Run the loop until the server counts n connections of the backend. */
static void
until_up(int n)
{
	const char *vals[1] = { F.schema };
	PGresult *r;
	int i, got_n = 0;

	for (i = 0; i < 1000 && got_n != n; i++) {
		event_base_loop(F.base, EVLOOP_NONBLOCK);
		usleep(10000);
		r = PQexecParams(F.side, "SELECT count(*) FROM pg_stat_activity "
		    "WHERE application_name = $1", 1, NULL, vals, NULL, NULL, 0);
		got_n = PQresultStatus(r) == PGRES_TUPLES_OK ? atoi(PQgetvalue(r, 0, 0)) : -1;
		PQclear(r);
	}
	assert_int_equal(got_n, n);
}

/* The server drops every connection of the backend: what is asked then
 * answers UNAVAILABLE, naming the cause and no secret; the backend
 * reconnects on its own. */
static void
test_fleet_connections_lost(void **state)
{
	const char *vals[1] = { F.schema };
	const char *pw = getenv("PGPASSWORD");
	PGresult *r;
	struct wait w = { 0 };

	until_up(PG_POOL_SIZE);
	r = PQexecParams(F.side, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
	    "WHERE application_name = $1", 1, NULL, vals, NULL, NULL, 0);
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	assert_true(PQntuples(r) >= 1);
	PQclear(r);
	until_rc(&w, TG_STATE_UNAVAILABLE);
	assert_non_null(strstr(w.res.err.msg, "postgresql"));
	if (pw != NULL && *pw != '\0')
		assert_null(strstr(w.res.err.msg, pw));
	until_rc(&w, TG_STATE_NOT_FOUND);	/* reconnected */
	wait_clear(&w);
}

/* A handle behind a transaction pooler (state.pooler, its statements
 * unnamed) LISTENs on a connection of its own (state.listen_url, here the
 * same server): one more connection than the pool, and wake-ups heard
 * both ways with a handle of the default kind; a third handle whose
 * listen URL is not a valid one is refused at open, naming the key. */
static void
test_fleet_listen_apart(void **state)
{
	struct tg_state_opts opts = { .url = F.url, .instance = "gw-b", .listen_url = F.url,
		.pooler = TG_STATE_POOLER_TRANSACTION };
	struct tg_state_opts bad = { .url = F.url, .listen_url = "postgresql://x:y%zz@h/d" };
	struct heard ha = { 0 }, hb = { 0 };
	struct tg_state_watch *wa, *wb;
	struct tg_state_health h;
	struct tg_state *b;
	struct tg_err err;
	struct wait w = { 0 };
	int i;

	assert_null(tg_state_open(F.base, &bad, &err));
	assert_string_equal(err.msg, "state.listen_url: not a valid postgresql URL");
	b = tg_state_open(F.base, &opts, &err);
	assert_non_null(b);
	wa = tg_state_watch(F.st, "runs", on_heard, &ha);
	wb = tg_state_watch(b, "runs", on_heard, &hb);
	listening(F.st);
	listening(b);
	until_up(2 * PG_POOL_SIZE + 1);
	for (i = 0; i < 500 && (tg_state_health(b, &h), h.conns_ready < PG_POOL_SIZE); i++) {
		usleep(10000);
		event_base_loop(F.base, EVLOOP_NONBLOCK);
	}
	assert_true(h.up && h.listening);
	assert_int_equal(h.conns_ready, PG_POOL_SIZE);	/* the listener takes no work */
	settle(tg_state_notify(b, "runs", "from-b", on_done, &w), &w);
	wait_clear(&w);
	hear(&ha, 1);
	assert_string_equal(ha.what, "from-b");
	settle(tg_state_notify(F.st, "runs", "from-a", on_done, &w), &w);
	wait_clear(&w);
	hear(&hb, 1);
	assert_string_equal(hb.what, "from-a");
	tg_state_unwatch(F.st, wa);
	tg_state_unwatch(b, wb);
	tg_state_close(b);
}

/* Claims on a sweep of concurrency 1 from two handles at once (two on
 * each, every connection busy), held up together before they change a
 * variant (a lock the test holds on the variants) until all have
 * started: one variant is claimed, not more. */
static void
test_fleet_claims(void **state)
{
	struct tg_runs_opts ro = { 0 };
	struct tg_state_opts opts = { .url = F.url, .runs = &ro };
	struct tg_state *b;
	struct tg_err err;
	struct wait w[4] = { { 0 } };
	char *id = create_sweep(), q[160];
	int i, got_n = 0;

	b = tg_state_open(F.base, &opts, &err);
	assert_non_null(b);
	until_up(2 * PG_POOL_SIZE);
	for (i = 0; i < 30; i++) {		/* every connection prepared */
		event_base_loop(F.base, EVLOOP_NONBLOCK);
		usleep(10000);
	}
	snprintf(q, sizeof(q), "BEGIN; LOCK TABLE %s.sweep_variants IN SHARE MODE", F.schema);
	assert_int_equal(side_exec(q), 0);
	for (i = 0; i < 4; i++)
		assert_non_null(tg_state_sweep_claim(i % 2 ? b : F.st, id, T0 + 1, on_claim,
		    &w[i]));
	for (i = 0; i < 30; i++) {		/* every claim sent and waiting */
		event_base_loop(F.base, EVLOOP_NONBLOCK);
		usleep(10000);
	}
	assert_int_equal(side_exec("COMMIT"), 0);
	for (i = 0; i < 4; i++) {
		wait_for(&w[i]);
		assert_int_equal(w[i].res.rc, TG_STATE_OK);
		got_n += w[i].s != NULL;
		wait_clear(&w[i]);
	}
	assert_int_equal(got_n, 1);
	settle(tg_state_sweep_variants(b, id, on_variants, &w[0]), &w[0]);
	assert_int_equal(w[0].count, 2);
	assert_int_equal(w[0].n, TG_VARIANT_SUBMITTING);
	assert_int_equal(w[0].n2, 1);			/* the other still pending */
	wait_clear(&w[0]);
	tg_state_close(b);
	free(id);
}

/* A claim an instance never finished is pending again when an instance of
 * the same name opens, not when another one does. */
static void
test_fleet_claim_recovery(void **state)
{
	struct tg_runs_opts ro = { 0 };
	struct tg_state_opts x = { .url = F.url, .runs = &ro, .instance = "inst-x" };
	struct tg_state_opts y = { .url = F.url, .runs = &ro, .instance = "inst-y" };
	struct tg_state *b;
	struct tg_err err;
	struct wait w = { 0 };
	char *id = create_sweep();
	int i;

	for (i = 0; i < 3; i++) {
		b = tg_state_open(F.base, i == 1 ? &y : &x, &err);
		assert_non_null(b);
		if (i == 0) {
			expect_later(tg_state_sweep_claim(b, id, T0, on_claim, &w), &w);
			assert_string_equal(w.s, "a");
			wait_clear(&w);
		}
		settle(tg_state_sweep_variants(b, id, on_variants, &w), &w);
		assert_int_equal(w.n, i < 2 ? TG_VARIANT_SUBMITTING : TG_VARIANT_PENDING);
		wait_clear(&w);
		tg_state_close(b);
	}
	free(id);
}

/* Run the loop until n of the backend's connections wait for a lock (at
 * most ~10 s); the side connection may be inside its transaction. */
static void
until_locked(int n)
{
	char q[192];
	PGresult *r;
	int i, waiting = 0;

	snprintf(q, sizeof(q), "SELECT count(*) FROM pg_stat_activity WHERE application_name ="
	    " '%s' AND wait_event_type = 'Lock'", F.schema);
	for (i = 0; i < 1000 && waiting < n; i++) {
		event_base_loop(F.base, EVLOOP_NONBLOCK);
		usleep(10000);
		assert_int_equal(side_exec("SELECT pg_stat_clear_snapshot()"), 0);
		r = PQexec(F.side, q);
		waiting = PQresultStatus(r) == PGRES_TUPLES_OK ? atoi(PQgetvalue(r, 0, 0)) : -1;
		PQclear(r);
	}
	assert_int_equal(waiting, n);
}

/* Two instances answer a check of one run at once (a lock the test takes
 * holds both updates until both have read the run): one ends it, the
 * other's answer is only counted. */
static void
test_fleet_status_race(void **state)
{
	struct tg_runs_opts ro = { 0 };
	struct tg_state_opts opts = { .url = F.url, .runs = &ro };
	struct tg_state_health ha, hb;
	struct tg_state *b;
	struct tg_err err;
	struct wait w[2] = { { 0 } };
	struct tg_run run;
	char q[160];
	int i;

	add_run("sim-r", T0, TG_STATE_OK);
	b = tg_state_open(F.base, &opts, &err);
	assert_non_null(b);
	for (i = 0; i < 1000; i++) {		/* every connection prepared */
		tg_state_health(F.st, &ha);
		tg_state_health(b, &hb);
		if (ha.conns_ready == PG_POOL_SIZE && hb.conns_ready == PG_POOL_SIZE)
			break;
		event_base_loop(F.base, EVLOOP_NONBLOCK);
		usleep(10000);
	}
	assert_int_equal(hb.conns_ready, PG_POOL_SIZE);
	snprintf(q, sizeof(q), "BEGIN; LOCK TABLE %s.runs IN SHARE MODE", F.schema);
	assert_int_equal(side_exec(q), 0);
	assert_non_null(tg_state_runs_set_status(F.st, "sim-r", TG_RUN_COMPLETED, 0, T0 + 5000,
	    on_num, &w[0]));
	assert_non_null(tg_state_runs_set_status(b, "sim-r", TG_RUN_FAILED, 0, T0 + 5000, on_num,
	    &w[1]));
	until_locked(2);			/* both read, both updates waiting */
	assert_int_equal(side_exec("COMMIT"), 0);
	for (i = 0; i < 2; i++) {
		wait_for(&w[i]);
		assert_int_equal(w[i].res.rc, TG_STATE_OK);
	}
	assert_int_equal(w[0].n + w[1].n, 1);
	run_get_ok("sim-r", &run);
	assert_int_equal(run.status, w[0].n == 1 ? TG_RUN_COMPLETED : TG_RUN_FAILED);
	assert_int_equal(run.vendor_status, run.status);
	assert_int_equal(run.checks, 2);
	assert_true((run.failure != NULL) == (run.status == TG_RUN_FAILED));
	tg_run_cleanup(&run);
	tg_state_close(b);
}

/* Run the loop until w was called back or ms passed. */
static void
wait_ms(struct wait *w, int ms)
{
	int64_t end = tg_clock_mono_ms() + ms;

	while (!w->called && tg_clock_mono_ms() < end) {
		struct timeval tv = { 0, 1000 };

		event_base_loopexit(F.base, &tv);
		event_base_loop(F.base, EVLOOP_ONCE);
	}
}

/* Ask b for a token until it answers NOT_FOUND (the server answers) with
 * every connection ready: one still preparing its statements would wait
 * on a lock the test takes next. */
static void
until_answers(struct tg_state *b)
{
	struct tg_state_health h;
	struct wait w = { 0 };
	int i;

	for (i = 0; i < 500; i++) {
		wait_clear(&w);
		settle(tg_state_token_get(b, "dex", on_token, &w), &w);
		tg_state_health(b, &h);
		if (w.res.rc == TG_STATE_NOT_FOUND && h.conns_ready == PG_POOL_SIZE)
			return;
		usleep(10000);
		event_base_loop(F.base, EVLOOP_NONBLOCK);
	}
	fail_msg("the server never answered (last: %s)", w.res.err.msg);
}

/*
 * A server that stops answering (a lock the test holds stands for a
 * frozen one): what was sent and what waits answer UNAVAILABLE, naming
 * the deadline, once it passes and not much later, each exactly once (a
 * cancelled one never); health is down with the same reason and a new
 * operation fails at once; once the server answers again everything
 * works, without reopening.
 */
static void
test_fleet_deadline(void **state)
{
	struct tg_owners_opts wo = { 0 };
	struct tg_state_opts opts = { .url = F.url, .owners = &wo, .timeout_ms = 400 };
	struct tg_state_health h;
	struct tg_state *b;
	struct tg_state_op *op;
	struct tg_err err;
	struct wait w[4] = { { 0 } };
	char q[160];
	int64_t t0, took;
	int i;

	b = tg_state_open(F.base, &opts, &err);
	assert_non_null(b);
	until_answers(b);
	snprintf(q, sizeof(q), "BEGIN; LOCK TABLE %s.vendor_tokens IN ACCESS EXCLUSIVE MODE",
	    F.schema);
	assert_int_equal(side_exec(q), 0);
	t0 = tg_clock_mono_ms();
	for (i = 0; i < 3; i++)		/* two sent (one per connection), one queued */
		assert_non_null(tg_state_token_get(b, "dex", on_token, &w[i]));
	for (i = 0; i < 20; i++)	/* sent and waiting on the lock */
		event_base_loop(F.base, EVLOOP_NONBLOCK);
	op = tg_state_token_get(b, "sim", on_token, &w[3]);
	assert_non_null(op);
	tg_state_cancel(op);
	wait_ms(&w[0], 3000);
	took = tg_clock_mono_ms() - t0;
	assert_true(took >= 400 && took < 1500);
	for (i = 0; i < 3; i++) {
		wait_ms(&w[i], 500);
		assert_int_equal(w[i].called, 1);
		assert_int_equal(w[i].res.rc, TG_STATE_UNAVAILABLE);
		assert_non_null(strstr(w[i].res.err.msg, "no answer within 400 ms"));
	}
	assert_true(tg_clock_mono_ms() - t0 < 1500);
	tg_state_health(b, &h);
	assert_false(h.up);
	assert_non_null(strstr(h.reason, "no answer within 400 ms"));
	for (i = 0; i < 3; i++)
		wait_clear(&w[i]);
	assert_null(tg_state_token_get(b, "dex", on_token, &w[0]));	/* at once */
	assert_int_equal(w[0].res.rc, TG_STATE_UNAVAILABLE);
	wait_clear(&w[0]);
	wait_ms(&w[3], 300);
	assert_int_equal(w[3].called, 0);	/* cancelled: never */
	assert_int_equal(side_exec("COMMIT"), 0);
	until_answers(b);
	for (i = 0; i < 300 && (tg_state_health(b, &h), !h.up); i++) {
		usleep(10000);
		event_base_loop(F.base, EVLOOP_NONBLOCK);
	}
	assert_true(h.up);
	tg_state_close(b);
}

/* Run the loop for ms. */
static void
loop_ms(int ms)
{
	struct wait none = { 0 };

	wait_ms(&none, ms);
}

/* Kill the connection of b whose query waits on a lock (the test holds
 * it): the first send of whatever write it carried is lost, sent. */
static void
kill_waiting(void)
{
	char q[200];
	PGresult *r;
	int i, n = 0;

	snprintf(q, sizeof(q), "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
	    "application_name = '%s' AND wait_event_type = 'Lock'", F.schema);
	for (i = 0; i < 1000 && n == 0; i++) {
		event_base_loop(F.base, EVLOOP_NONBLOCK);
		usleep(5000);
		assert_int_equal(side_exec("SELECT pg_stat_clear_snapshot()"), 0);
		r = PQexec(F.side, q);
		assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
		n = PQntuples(r);
		PQclear(r);
	}
	assert_int_equal(n, 1);
}

/* Rows of the outbox with id (the side connection, outside the lock). */
static int
outbox_rows(const char *id)
{
	const char *vals[1] = { id };
	char q[160];
	PGresult *r;
	int n;

	snprintf(q, sizeof(q), "SELECT count(*) FROM %s.outbox_jobs WHERE id = $1", F.schema);
	r = PQexecParams(F.side, q, 1, NULL, vals, NULL, NULL, 0);
	assert_int_equal(PQresultStatus(r), PGRES_TUPLES_OK);
	n = atoi(PQgetvalue(r, 0, 0));
	PQclear(r);
	return n;
}

/* A handle on F's database with opts (borrowed), the outbox locked by the
 * side connection (until its ROLLBACK). */
static struct tg_state *
open_locked(const struct tg_state_opts *opts)
{
	struct tg_state *b;
	struct tg_err err;
	char q[160];

	b = tg_state_open(F.base, opts, &err);
	assert_non_null(b);
	until_answers(F.st);		/* its statements prepared: none waits on the lock */
	until_answers(b);
	snprintf(q, sizeof(q), "BEGIN; LOCK TABLE %s.outbox_jobs IN SHARE MODE", F.schema);
	assert_int_equal(side_exec(q), 0);
	return b;
}

/* The same, and job j's add sent on it and killed while it waits on the
 * lock: its answer comes to w. */
static struct tg_state *
add_killed(const struct tg_state_opts *opts, const struct tg_outbox_new *j, struct wait *w)
{
	struct tg_state *b = open_locked(opts);

	assert_non_null(tg_state_outbox_add(b, j, T0, on_str, w));
	kill_waiting();
	return b;
}

/*
 * A write whose connection is lost after it was sent (killed while it
 * waits on a lock) has an unknown outcome: a job add is sent again on the
 * other connection, which waits on the lock in turn; the lock given up,
 * it commits and the add answers OK, once, with its id: the row exists,
 * once. A write the backend refused before sending (no outbox) is
 * UNAVAILABLE, never UNKNOWN.
 */
static void
test_fleet_write_replayed(void **state)
{
	struct tg_outbox_opts oo = pg_outbox;
	struct tg_owners_opts wo = { 0 };
	struct tg_state_opts opts = { .url = F.url, .outbox = &oo, .owners = &wo,
		.timeout_ms = 3000 };
	struct tg_outbox_new j = { "https://hooks.example/x", "default", "k1", "export", "c1",
		"dex", NULL };
	struct tg_state *b;
	struct tg_err err;
	struct wait w = { 0 };

	b = add_killed(&opts, &j, &w);
	until_locked(1);			/* the replay waits on the lock now */
	assert_int_equal(w.called, 0);
	assert_int_equal(side_exec("ROLLBACK"), 0);
	wait_ms(&w, 3000);
	assert_int_equal(w.called, 1);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_non_null(w.s);
	assert_int_equal(strncmp(w.s, "msg_", 4), 0);
	assert_int_equal(outbox_rows(w.s), 1);
	wait_clear(&w);
	tg_state_close(b);
	opts.outbox = NULL;
	b = tg_state_open(F.base, &opts, &err);
	assert_null(tg_state_outbox_add(b, &j, T0, on_str, &w));
	assert_int_equal(w.res.rc, TG_STATE_UNAVAILABLE);
	assert_true(tg_state_rc_down(TG_STATE_UNAVAILABLE) && tg_state_rc_down(TG_STATE_UNKNOWN));
	assert_false(tg_state_rc_down(TG_STATE_ERROR));
	assert_string_equal(tg_state_rc_str(TG_STATE_UNKNOWN), "outcome unknown");
	wait_clear(&w);
	tg_state_close(b);
}

/*
 * The same, the lock held past the deadline: the add answers UNKNOWN at
 * state.timeout after the loss (not sooner, once), naming the id the job
 * has if it was committed; and it may well be: the replay still waiting
 * on the lock commits once the lock is given up. Hence a caller told
 * UNKNOWN must never be told "it will not happen".
 */
static void
test_fleet_write_unknown(void **state)
{
	struct tg_outbox_opts oo = pg_outbox;
	struct tg_state_opts opts = { .url = F.url, .outbox = &oo, .timeout_ms = 1000 };
	struct tg_outbox_new j = { "https://hooks.example/x", "default", NULL, "export", "c2",
		"dex", NULL };
	struct tg_state *b;
	struct wait w = { 0 };
	int64_t t0, took;
	int i;

	b = add_killed(&opts, &j, &w);
	t0 = tg_clock_mono_ms();
	wait_ms(&w, 3000);
	took = tg_clock_mono_ms() - t0;
	assert_int_equal(w.called, 1);
	assert_int_equal(w.res.rc, TG_STATE_UNKNOWN);
	assert_non_null(strstr(w.res.err.msg, "outcome of a write is unknown"));
	assert_true(took >= 900 && took < 2500);
	assert_non_null(w.s);
	assert_int_equal(outbox_rows(w.s), 0);		/* not yet */
	assert_int_equal(side_exec("ROLLBACK"), 0);
	for (i = 0; i < 300 && outbox_rows(w.s) == 0; i++)
		loop_ms(10);
	assert_int_equal(outbox_rows(w.s), 1);		/* it was, after all */
	wait_clear(&w);
	tg_state_close(b);
}

/* The job the group cases add (a key, no correlation id yet). */
static const struct tg_outbox_new group_job = { "https://hooks.example/x", "default", "k1",
	"export", NULL, "dex", NULL };

/*
 * A group of five job adds sent together, its connection killed while it
 * waits on a lock (the outcome of its commit unknown): each is sent again
 * (replay.c), the replays wait on the lock in turn; once it is given up
 * every add answers OK exactly once, with its own id, and each job exists
 * once. With a deadline shorter than the lock, each would answer UNKNOWN
 * (test_fleet_write_unknown): the group changes no caller's answer.
 */
static void
test_fleet_group_unknown(void **state)
{
	struct tg_outbox_opts oo = pg_outbox;
	struct tg_state_opts opts = { .url = F.url, .outbox = &oo, .timeout_ms = 5000 };
	struct wait w[5] = { { 0 } };
	struct tg_state *b = open_locked(&opts);
	char *ids[5];
	int i, k;

	for (i = 0; i < 5; i++)		/* asked together: one group, one connection */
		assert_non_null(tg_state_outbox_add(b, &group_job, T0, on_str, &w[i]));
	until_locked(1);
	kill_waiting();			/* the group's commit is lost */
	loop_ms(600);			/* reconnected: each sent again, waiting */
	for (i = 0; i < 5; i++)
		assert_int_equal(w[i].called, 0);
	assert_int_equal(side_exec("ROLLBACK"), 0);
	for (i = 0; i < 5; i++) {
		wait_ms(&w[i], 5000);
		assert_int_equal(w[i].called, 1);
		assert_int_equal(w[i].res.rc, TG_STATE_OK);
		assert_non_null(w[i].s);
		ids[i] = w[i].s;
		assert_int_equal(outbox_rows(ids[i]), 1);
		for (k = 0; k < i; k++)
			assert_string_not_equal(ids[k], ids[i]);
	}
	loop_ms(50);
	for (i = 0; i < 5; i++) {
		assert_int_equal(w[i].called, 1);	/* once */
		wait_clear(&w[i]);
	}
	tg_state_close(b);
}

/*
 * One group in flight at a time: with a job add held on a lock (its
 * commit out), two more adds wait for it instead of taking the other
 * connection, which stays free: a read asked meanwhile is answered at
 * once. Once the lock is given up, the three commit and answer OK.
 */
static void
test_fleet_group_waits(void **state)
{
	struct tg_outbox_opts oo = pg_outbox;
	struct tg_state_opts opts = { .url = F.url, .outbox = &oo, .timeout_ms = 5000 };
	struct wait w[3] = { { 0 } }, x = { 0 };
	struct tg_state *b = open_locked(&opts);
	int i;

	assert_non_null(tg_state_outbox_add(b, &group_job, T0, on_str, &w[0]));
	until_locked(1);
	for (i = 1; i < 3; i++)
		assert_non_null(tg_state_outbox_add(b, &group_job, T0, on_str, &w[i]));
	assert_non_null(tg_state_token_get(b, "dex", on_token, &x));
	wait_ms(&x, 1000);
	assert_int_equal(x.called, 1);
	assert_int_equal(x.res.rc, TG_STATE_NOT_FOUND);
	wait_clear(&x);
	loop_ms(100);
	until_locked(1);		/* the two others were not sent */
	for (i = 0; i < 3; i++)
		assert_int_equal(w[i].called, 0);
	assert_int_equal(side_exec("ROLLBACK"), 0);
	for (i = 0; i < 3; i++) {
		wait_ms(&w[i], 3000);
		assert_int_equal(w[i].called, 1);
		assert_int_equal(w[i].res.rc, TG_STATE_OK);
		assert_int_equal(outbox_rows(w[i].s), 1);
		wait_clear(&w[i]);
	}
	tg_state_close(b);
}

/* Every commit that waits for a synchronous standby waits forever: one is
 * named that never comes (on: 1), or none (0). */
static void
standby_nobody(int on)
{
	assert_int_equal(side_exec(on ? "ALTER SYSTEM SET synchronous_standby_names = "
	    "'tg_nobody'" : "ALTER SYSTEM RESET synchronous_standby_names"), 0);
	assert_int_equal(side_exec("SELECT pg_reload_conf()"), 0);
	usleep(300000);			/* every backend has read it */
}

/*
 * A poll entry's lead and answer (what a first poll waits for) commit
 * without waiting for the disk, or a standby: with every durable commit
 * held (a synchronous standby that never comes), the lead, the published
 * answer and the release still answer at once, while an owner record (a
 * promise to a caller) waits for its commit.
 */
static void
test_fleet_lead_lazy(void **state)
{
	struct tg_owners_opts wo = { 0 };
	struct tg_state_opts opts = { .url = F.url, .owners = &wo, .timeout_ms = 3000 };
	struct tg_state_answer a = { 200, "application/json", "{}", 2, 0 };
	struct wait w = { 0 }, rec = { 0 };
	struct tg_state *b;
	struct tg_err err;

	b = tg_state_open(F.base, &opts, &err);
	assert_non_null(b);
	until_answers(b);
	standby_nobody(1);
	assert_non_null(tg_state_owners_record(b, "export", "held", "key-a", T0, on_done, &rec));
	assert_non_null(tg_state_poll_lead(b, "dex/export/lazy", T0, 5000, on_num, &w));
	wait_ms(&w, 1000);
	assert_int_equal(w.called, 1);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(w.n, 1);
	wait_clear(&w);
	assert_non_null(tg_state_poll_publish(b, "dex/export/lazy", &a, T0, 5000, on_done, &w));
	wait_ms(&w, 1000);
	assert_int_equal(w.called, 1);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	assert_non_null(tg_state_poll_release(b, "dex/export/lazy", on_done, &w));
	wait_ms(&w, 1000);
	assert_int_equal(w.called, 1);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	assert_int_equal(rec.called, 0);	/* still waiting for its commit */
	standby_nobody(0);
	wait_ms(&rec, 3000);
	assert_int_equal(rec.called, 1);
	assert_int_equal(rec.res.rc, TG_STATE_OK);
	wait_clear(&rec);
	tg_state_close(b);
}

/* A handle opened with opts, answering, and the side connection holding
 * its vendor tokens' table (the lock's SQL, "BEGIN; LOCK …", in lock). */
static struct tg_state *
open_tokens_locked(const struct tg_state_opts *opts, char *lock, size_t n)
{
	struct tg_state *b;
	struct tg_err err;

	b = tg_state_open(F.base, opts, &err);
	assert_non_null(b);
	until_answers(b);
	snprintf(lock, n, "BEGIN; LOCK TABLE %s.vendor_tokens IN ACCESS EXCLUSIVE MODE",
	    F.schema);
	assert_int_equal(side_exec(lock), 0);
	return b;
}

/*
 * A backlog, not a silent server: two operations held by a lock until the
 * deadline is half gone, three queued behind them (asked once the two
 * have waited past PG_PIPE_FRESH_US: not pipelined behind them); the lock
 * is given up and taken again at once, so the next three are sent and
 * held in turn. At the deadline the three sent late answer UNAVAILABLE
 * (the late answers are dropped when they come: exactly once), and
 * nothing else: health stays up, no connection is closed, a new
 * operation is answered by the server at once.
 */
static void
test_fleet_deadline_backlog(void **state)
{
	struct tg_owners_opts wo = { 0 };
	struct tg_state_opts opts = { .url = F.url, .owners = &wo, .timeout_ms = 600 };
	struct tg_state_health h;
	struct tg_state *b;
	struct wait w[5] = { { 0 } }, x = { 0 };
	char lock[160], relock[200];
	int64_t t0;
	int i;

	b = open_tokens_locked(&opts, lock, sizeof(lock));
	snprintf(relock, sizeof(relock), "COMMIT; %s", lock);
	t0 = tg_clock_mono_ms();
	for (i = 0; i < 5; i++) {
		if (i == 2)
			loop_ms(50);
		assert_non_null(tg_state_token_get(b, "dex", on_token, &w[i]));
	}
	loop_ms(250);
	assert_int_equal(side_exec(relock), 0);		/* the first two go, two more wait */
	wait_ms(&w[1], 200);
	assert_int_equal(w[0].res.rc, TG_STATE_NOT_FOUND);
	assert_int_equal(w[1].res.rc, TG_STATE_NOT_FOUND);
	for (i = 2; i < 5; i++) {
		wait_ms(&w[i], 1000);
		assert_int_equal(w[i].res.rc, TG_STATE_UNAVAILABLE);
		assert_non_null(strstr(w[i].res.err.msg, "no answer within 600 ms"));
	}
	assert_true(tg_clock_mono_ms() - t0 < 600 + 400);
	tg_state_health(b, &h);
	assert_true(h.up);				/* the server answers */
	assert_int_equal(side_exec("COMMIT"), 0);
	loop_ms(200);					/* the late answers: dropped */
	settle(tg_state_token_get(b, "dex", on_token, &x), &x);
	assert_int_equal(x.res.rc, TG_STATE_NOT_FOUND);
	tg_state_health(b, &h);
	assert_true(h.up);
	wait_clear(&x);
	for (i = 0; i < 5; i++)
		wait_clear(&w[i]);
	tg_state_close(b);
}

/*
 * Lone operations asked together (reads, and a lead that fails: text
 * PostgreSQL cannot hold) each answer once, with what each would alone:
 * the failure fails only its own. With PostgreSQL direct, those behind
 * the first on each connection go in its pipeline, each with its own Sync
 * (pg_pipe.c), instead of waiting for a free connection; behind a
 * transaction pooler and with SQLite nothing is pipelined. A cancelled
 * one in the middle is never answered.
 */
static void
test_pipeline(void **state)
{
	struct wait w[17] = { { 0 } };
	struct tg_state_health h0, h1;
	struct tg_state_op *cut = NULL;
	int pg = F.side != NULL, i;

	if (pg)
		until_answers(F.st);
	tg_state_health(F.st, &h0);
	for (i = 0; i < 17; i++) {
		if (i == 8)
			(void)tg_state_poll_lead(F.st, "dex/export/\xff", T0, 5000, on_num, &w[i]);
		else if (i == 12)
			cut = tg_state_token_get(F.st, "dex", on_token, &w[i]);
		else	/* SQLite: answered at once (NULL) */
			(void)tg_state_owners_lookup(F.st, "export", "no-such-job", T0, on_str,
			    &w[i]);
	}
	assert_true(cut != NULL || !pg);	/* SQLite reads answer at once */
	tg_state_cancel(cut);
	for (i = 0; i < 17; i++) {
		if (i == 12)
			continue;
		wait_ms(&w[i], 3000);
		assert_int_equal(w[i].called, 1);
		if (i != 8)
			assert_int_equal(w[i].res.rc, TG_STATE_NOT_FOUND);
		else if (pg)
			assert_int_equal(w[i].res.rc, TG_STATE_ERROR);
	}
	loop_ms(50);
	tg_state_health(F.st, &h1);
	for (i = 0; i < 17; i++) {
		assert_int_equal(w[i].called, i == 12 && cut != NULL ? 0 : 1);	/* once; never */
		wait_clear(&w[i]);
	}
	if (pg && F.pooler == TG_STATE_POOLER_NONE)
		assert_true(h1.pipelined - h0.pipelined >= 8);
	else
		assert_int_equal(h1.pipelined, 0);
}

/*
 * A connection lost with a pipeline in flight: a read held on a lock, four
 * more pipelined behind it; its backend is killed. Each of the five
 * answers UNAVAILABLE exactly once (a read lost), the read that went on
 * the other connection NOT_FOUND; once reconnected, reads answer again.
 */
static void
test_fleet_pipeline_lost(void **state)
{
	struct tg_owners_opts wo = { 0 };
	struct tg_state_opts opts = { .url = F.url, .owners = &wo, .timeout_ms = 3000 };
	struct wait w[6] = { { 0 } }, x = { 0 };
	struct tg_state *b;
	char lock[160];
	int i;

	b = open_tokens_locked(&opts, lock, sizeof(lock));
	assert_non_null(tg_state_token_get(b, "dex", on_token, &w[0]));	/* held */
	for (i = 1; i < 6; i++)		/* the first on the other connection, the rest behind */
		assert_non_null(tg_state_owners_lookup(b, "export", "no-such-job", T0, on_str,
		    &w[i]));
	wait_ms(&w[1], 1000);
	assert_int_equal(w[1].res.rc, TG_STATE_NOT_FOUND);
	loop_ms(100);
	for (i = 2; i < 6; i++)
		assert_int_equal(w[i].called, 0);	/* behind the held one */
	kill_waiting();
	for (i = 0; i < 6; i++) {
		if (i == 1)
			continue;
		wait_ms(&w[i], 2000);
		assert_int_equal(w[i].called, 1);
		assert_int_equal(w[i].res.rc, TG_STATE_UNAVAILABLE);
	}
	assert_int_equal(side_exec("ROLLBACK"), 0);
	loop_ms(100);
	for (i = 0; i < 6; i++) {
		assert_int_equal(w[i].called, 1);		/* once */
		wait_clear(&w[i]);
	}
	until_answers(b);
	settle(tg_state_owners_lookup(b, "export", "no-such-job", T0, on_str, &x), &x);
	assert_int_equal(x.res.rc, TG_STATE_NOT_FOUND);
	wait_clear(&x);
	tg_state_close(b);
}

/* A server that accepts connections and never says a word (nothing
 * listens beyond the backlog of a socket the test holds): an operation
 * asked while the first connection is being made waits for it, and
 * answers UNAVAILABLE at its deadline; health says why. */
static void
test_fleet_deadline_connecting(void **state)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	struct tg_state_opts opts = { .timeout_ms = 300 };
	struct tg_state_health h;
	struct tg_state *b;
	struct tg_err err;
	struct wait w = { 0 };
	char url[128];
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	int64_t t0;

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 8), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	snprintf(url, sizeof(url), "postgresql://tg:s3cret@127.0.0.1:%d/tidegate",
	    ntohs(sa.sin_port));
	opts.url = url;
	b = tg_state_open(F.base, &opts, &err);
	assert_non_null(b);
	t0 = tg_clock_mono_ms();
	assert_non_null(tg_state_token_get(b, "dex", on_token, &w));
	wait_ms(&w, 2000);
	assert_int_equal(w.called, 1);
	assert_true(tg_clock_mono_ms() - t0 >= 300 && tg_clock_mono_ms() - t0 < 1300);
	assert_int_equal(w.res.rc, TG_STATE_UNAVAILABLE);
	assert_non_null(strstr(w.res.err.msg, "no answer within 300 ms"));
	assert_null(strstr(w.res.err.msg, "s3cret"));
	tg_state_health(b, &h);
	assert_false(h.up);
	assert_non_null(strstr(h.reason, "postgresql"));
	assert_null(strstr(h.reason, "s3cret"));
	wait_clear(&w);
	tg_state_close(b);
	close(fd);
}

/* ---- a TCP forwarder to the server that can be frozen ---- */

/* Bytes go both ways between each accepted connection and the server
 * until frozen is set: then nothing moves (the sockets stay open, as with
 * a server whose processes are stopped) until it is cleared. */
static struct {
	int lfd, port, n;
	int fd[16][2];		/* accepted, towards the server */
	struct sockaddr_storage to;
	socklen_t tolen;
	volatile int frozen, stop;
	pthread_t th;
} X;

static void
fwd_accept(void)
{
	int c = accept(X.lfd, NULL, NULL), s;

	if (c < 0)
		return;
	s = socket(X.to.ss_family, SOCK_STREAM, 0);
	if (X.n == 16 || s < 0 || connect(s, (struct sockaddr *)&X.to, X.tolen) != 0) {
		close(c);
		if (s >= 0)
			close(s);
		return;
	}
	X.fd[X.n][0] = c;
	X.fd[X.n++][1] = s;
}

/* Move what came on pair i's side d to the other side; -1 when it closed. */
static int
fwd_move(int i, int d)
{
	char buf[16384];
	ssize_t r = read(X.fd[i][d], buf, sizeof(buf)), off = 0, w;

	if (r <= 0)
		return -1;
	while (off < r) {
		if ((w = write(X.fd[i][!d], buf + off, (size_t)(r - off))) <= 0)
			return -1;
		off += w;
	}
	return 0;
}

static void *
fwd_run(void *arg)
{
	struct pollfd p[33];
	int i, k;

	while (!X.stop) {
		p[0].fd = X.lfd;
		p[0].events = POLLIN;
		for (i = 0; i < X.n; i++) {
			for (k = 0; k < 2; k++) {
				p[1 + 2 * i + k].fd = X.fd[i][k];
				p[1 + 2 * i + k].events = X.frozen ? 0 : POLLIN;
			}
		}
		if (poll(p, 1 + 2 * (nfds_t)X.n, 20) <= 0)
			continue;
		for (i = 0; i < X.n && !X.frozen; i++)
			for (k = 0; k < 2; k++)
				if ((p[1 + 2 * i + k].revents & (POLLIN | POLLHUP)) &&
				    fwd_move(i, k) != 0) {
					close(X.fd[i][0]);
					close(X.fd[i][1]);
					X.fd[i][0] = X.fd[--X.n][0];
					X.fd[i][1] = X.fd[X.n][1];
					p[1 + 2 * i] = p[1 + 2 * X.n];
					p[2 + 2 * i] = p[2 + 2 * X.n];
					k = 2;
				}
		if (p[0].revents & POLLIN)
			fwd_accept();
	}
	return NULL;
}

/* Forward a loopback port to the server the side connection reached. */
static void
fwd_start(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct sockaddr_un *un = (struct sockaddr_un *)&X.to;
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	socklen_t len = sizeof(sa);
	const char *host = PQhost(F.side), *port = PQport(F.side);

	memset(&X, 0, sizeof(X));
	if (host[0] == '/') {
		un->sun_family = AF_UNIX;
		snprintf(un->sun_path, sizeof(un->sun_path), "%s/.s.PGSQL.%s", host, port);
		X.tolen = sizeof(*un);
	} else {		/* the address it connected to, of those host names */
		hints.ai_flags = AI_NUMERICHOST;
		assert_int_equal(getaddrinfo(PQhostaddr(F.side), port, &hints, &ai), 0);
		memcpy(&X.to, ai->ai_addr, ai->ai_addrlen);
		X.tolen = ai->ai_addrlen;
		freeaddrinfo(ai);
	}
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	X.lfd = socket(AF_INET, SOCK_STREAM, 0);
	assert_int_equal(bind(X.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(X.lfd, 16), 0);
	assert_int_equal(getsockname(X.lfd, (struct sockaddr *)&sa, &len), 0);
	X.port = ntohs(sa.sin_port);
	assert_int_equal(pthread_create(&X.th, NULL, fwd_run, NULL), 0);
}

static void
fwd_stop(void)
{
	int i;

	X.stop = 1;
	pthread_join(X.th, NULL);
	for (i = 0; i < X.n; i++) {
		close(X.fd[i][0]);
		close(X.fd[i][1]);
	}
	close(X.lfd);
}

/* A forwarder started, and a state opened with opts (borrowed) whose URL
 * *which (one of opts's) is the fixture's through it. */
static struct tg_state *
fwd_open(struct tg_state_opts *opts, const char **which)
{
	static char url[1200];
	struct tg_state *b;
	struct tg_err err;

	fwd_start();
	snprintf(url, sizeof(url), "%s&host=127.0.0.1&port=%d", F.url, X.port);
	*which = url;
	b = tg_state_open(F.base, opts, &err);
	assert_non_null(b);
	return b;
}

/* Run the loop until flag (a member of *h) is want or ms passed, h filled
 * from b's health as it goes; how long. */
static int64_t
until_flag(struct tg_state *b, const int *flag, int want, int ms, struct tg_state_health *h)
{
	int64_t t0 = tg_clock_mono_ms();

	for (tg_state_health(b, h); !*flag != !want && tg_clock_mono_ms() - t0 < ms;
	    tg_state_health(b, h)) {
		struct timeval tv = { 0, 5000 };

		event_base_loopexit(F.base, &tv);
		event_base_loop(F.base, EVLOOP_ONCE);
	}
	return tg_clock_mono_ms() - t0;
}

/* Until b's health is up (or down) or ms passed; how long. */
static int64_t
until_health(struct tg_state *b, int up, int ms, struct tg_state_health *h)
{
	return until_flag(b, &h->up, up, ms, h);
}

/*
 * The server freezes while nothing is asked (the forwarder stops moving
 * bytes; every socket stays open): health goes down within the idle time,
 * a tick and the ping's deadline, naming the deadline, and comes back up
 * once the server answers again.
 */
static void
test_fleet_frozen_idle(void **state)
{
	struct tg_owners_opts wo = { 0 };
	struct tg_state_opts opts = { .owners = &wo, .timeout_ms = 300 };
	struct tg_state_health h;
	struct tg_state *b = fwd_open(&opts, &opts.url);
	int64_t took;

	until_answers(b);
	until_health(b, 1, 2000, &h);
	assert_true(h.up);
	X.frozen = 1;
	took = until_health(b, 0, 3000, &h);
	assert_false(h.up);
	assert_true(took < 300 + 300 + 300 + 400);	/* idle, a tick, the deadline */
	assert_non_null(strstr(h.reason, "no answer within 300 ms"));
	X.frozen = 0;
	took = until_health(b, 1, 5000, &h);
	assert_true(h.up);
	until_answers(b);
	tg_state_close(b);
	fwd_stop();
}

/*
 * The listener of its own (state.listen_url) freezes while the pool's
 * server answers: its ping goes unanswered, so it is closed within the
 * silence, a tick and the ping's deadline (wake-ups are not heard
 * meanwhile, but health stays up: the pool works), and listens again
 * once its server answers.
 */
static void
test_fleet_listener_frozen(void **state)
{
	struct tg_owners_opts wo = { 0 };
	struct tg_state_opts opts = { .url = F.url, .owners = &wo, .timeout_ms = 300 };
	struct tg_state_health h;
	struct tg_state *b = fwd_open(&opts, &opts.listen_url);
	int64_t took;

	until_flag(b, &h.listening, 1, 5000, &h);
	assert_true(h.listening);
	X.frozen = 1;
	took = until_flag(b, &h.listening, 0, 3000, &h);
	assert_false(h.listening);
	assert_true(took < 300 + 300 + 300 + 400);	/* silent, a tick, the deadline */
	until_answers(b);
	tg_state_health(b, &h);
	assert_true(h.up);
	X.frozen = 0;
	until_flag(b, &h.listening, 1, 8000, &h);
	assert_true(h.listening);
	tg_state_close(b);
	fwd_stop();
}

static void
test_open_errors(void **state)
{
	struct tg_state_opts pg = { .url = "postgresql://tg:s3cret@127.0.0.1:1/tidegate" };
	struct tg_state_opts bad = { .url = "postgres://tg:s3cret@[::1/tidegate" };
	struct tg_state_opts odd = { .url = "redis://localhost" };
	struct tg_state_opts none = { .url = "" };
	struct tg_state_health h;
	struct tg_state *st;
	struct tg_err err;
	struct wait w = { 0 };

	st = tg_state_open(F.base, &pg, &err);		/* nothing listens there: */
	assert_non_null(st);				/* open all the same, degraded */
	tg_state_health(st, &h);
	assert_false(h.up);
	assert_non_null(tg_state_token_get(st, "dex", on_token, &w));	/* waits for it */
	wait_for(&w);
	assert_int_equal(w.res.rc, TG_STATE_UNAVAILABLE);
	assert_non_null(strstr(w.res.err.msg, "postgresql unavailable"));
	assert_null(strstr(w.res.err.msg, "s3cret"));
	wait_clear(&w);
	assert_null(tg_state_token_get(st, "dex", on_token, &w));	/* down: at once */
	assert_int_equal(w.res.rc, TG_STATE_UNAVAILABLE);
	wait_clear(&w);
	assert_null(tg_state_outbox_key(st, on_key, &w));	/* no outbox, down */
	assert_int_equal(w.res.rc, TG_STATE_UNAVAILABLE);
	assert_null(w.p);
	wait_clear(&w);
	tg_state_health(st, &h);
	assert_false(h.up);
	assert_non_null(strstr(h.reason, "postgresql unavailable"));
	assert_null(strstr(h.reason, "s3cret"));
	tg_state_close(st);
	assert_null(tg_state_open(F.base, &bad, &err));
	assert_non_null(strstr(err.msg, "postgresql URL"));
	assert_null(strstr(err.msg, "s3cret"));
	assert_null(tg_state_open(F.base, &odd, &err));
	assert_non_null(strstr(err.msg, "redis"));
	st = tg_state_open(F.base, &none, &err);	/* SQLite, nothing configured */
	assert_non_null(st);
	assert_string_equal(tg_state_backend_name(st), "sqlite");
	tg_state_health(st, &h);
	assert_string_equal(h.backend, "sqlite");
	assert_true(h.up && !h.shared);			/* one instance: nobody to wake */
	expect_now(tg_state_runs_get(st, "sim-a", on_runs, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_UNAVAILABLE);
	wait_clear(&w);
	assert_null(tg_state_outbox_add(st, &(struct tg_outbox_new){ 0 }, T0, on_str, &w));
	assert_int_equal(w.res.rc, TG_STATE_UNAVAILABLE);
	wait_clear(&w);
	assert_null(tg_state_outbox_key(st, on_key, &w));	/* no outbox */
	assert_int_equal(w.res.rc, TG_STATE_UNAVAILABLE);
	wait_clear(&w);
	tg_state_close(st);
	assert_string_equal(tg_state_rc_str(TG_STATE_CONFLICT), "conflict");
}

/* ---- quotas ---- */

#define Q_US	(T0 * 1000)	/* a fixed "now" in µs */

/* A rate of 10/s with a burst of 5: the grant and the TAT come from one
 * statement; units given back are there again, never more than a burst. */
static void
test_quota_rate(void **state)
{
	struct wait w = { 0 };

	settle(tg_state_quota_rate_take(F.st, "key:a:rate", 100000, 5, 3, Q_US, on_pair, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(w.n, 3);
	assert_int_equal(w.n2, Q_US + 300000);
	wait_clear(&w);
	settle(tg_state_quota_rate_take(F.st, "key:a:rate", 100000, 5, 5, Q_US, on_pair, &w), &w);
	assert_int_equal(w.n, 2);
	assert_int_equal(w.n2, Q_US + 500000);
	wait_clear(&w);
	settle(tg_state_quota_rate_take(F.st, "key:a:rate", 100000, 5, 1, Q_US + 99999, on_pair,
	    &w), &w);
	assert_int_equal(w.n, 0);
	wait_clear(&w);
	settle(tg_state_quota_rate_take(F.st, "key:a:rate", 100000, 5, 2, Q_US + 100000, on_pair,
	    &w), &w);
	assert_int_equal(w.n, 1);
	wait_clear(&w);
	settle(tg_state_quota_rate_give(F.st, "key:a:rate", 100000, 5, 9, Q_US + 100000, on_done,
	    &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	settle(tg_state_quota_rate_take(F.st, "key:a:rate", 100000, 5, 9, Q_US + 100000, on_pair,
	    &w), &w);
	assert_int_equal(w.n, 5);		/* full again, not more */
	wait_clear(&w);
	/* a clock far ahead of the row: a full burst, no more */
	settle(tg_state_quota_rate_take(F.st, "key:a:rate", 100000, 5, 9, Q_US + 3600000000LL,
	    on_pair, &w), &w);
	assert_int_equal(w.n, 5);
	wait_clear(&w);
	settle(tg_state_quota_rate_take(F.st, "", 100000, 5, 1, Q_US, on_pair, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_ERROR);
	wait_clear(&w);
}

/* A day's units: granted up to the limit, given back, a new day whole. */
static void
test_quota_day(void **state)
{
	struct wait w = { 0 };

	settle(tg_state_quota_day_take(F.st, "key:a:daily:export", 19000, 3, 2, on_pair, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(w.n, 2);
	assert_int_equal(w.n2, 2);
	wait_clear(&w);
	settle(tg_state_quota_day_take(F.st, "key:a:daily:export", 19000, 3, 2, on_pair, &w), &w);
	assert_int_equal(w.n, 1);
	assert_int_equal(w.n2, 3);
	wait_clear(&w);
	settle(tg_state_quota_day_give(F.st, "key:a:daily:export", 19000, 1, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	settle(tg_state_quota_day_take(F.st, "key:a:daily:export", 19000, 3, 5, on_pair, &w), &w);
	assert_int_equal(w.n, 1);
	assert_int_equal(w.n2, 3);
	wait_clear(&w);
	settle(tg_state_quota_day_take(F.st, "key:a:daily:export", 19001, 3, 5, on_pair, &w), &w);
	assert_int_equal(w.n, 3);
	wait_clear(&w);
}

/* A day's first take deletes the counts of the days before yesterday:
 * the day before yesterday's is whole again, yesterday's is kept. */
static void
test_quota_day_prune(void **state)
{
	static const int64_t days[] = { 19100, 19101, 19102 };
	struct wait w = { 0 };
	size_t i;

	for (i = 0; i < TG_NELEM(days); i++) {
		settle(tg_state_quota_day_take(F.st, "key:p:daily:export", days[i], 3, 3, on_pair,
		    &w), &w);
		assert_int_equal(w.res.rc, TG_STATE_OK);
		assert_int_equal(w.n, 3);
		wait_clear(&w);
	}
	/* 19102's first take pruned 19100 (before 19101) */
	settle(tg_state_quota_day_take(F.st, "key:p:daily:export", 19100, 3, 3, on_pair, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(w.n, 3);
	assert_int_equal(w.n2, 3);
	wait_clear(&w);
	settle(tg_state_quota_day_take(F.st, "key:p:daily:export", 19101, 3, 3, on_pair, &w), &w);
	assert_int_equal(w.n, 0);
	assert_int_equal(w.n2, 3);
	wait_clear(&w);
	settle(tg_state_quota_day_take(F.st, "key:p:daily:export", 19102, 3, 3, on_pair, &w), &w);
	assert_int_equal(w.n, 0);
	wait_clear(&w);
}

/* Slots: held up to the limit, given back, and a holding past its expiry
 * freed by the next take. */
static void
test_quota_slots(void **state)
{
	struct wait w = { 0 };

	settle(tg_state_quota_slots_take(F.st, "key:a:slots", 3, 2, T0, T0 + 4000, on_pair, &w),
	    &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(w.n, 2);
	assert_int_equal(w.n2, 2);
	wait_clear(&w);
	settle(tg_state_quota_slots_take(F.st, "key:a:slots", 3, 2, T0, T0 + 4000, on_pair, &w),
	    &w);
	assert_int_equal(w.n, 1);
	assert_int_equal(w.n2, 3);
	wait_clear(&w);
	settle(tg_state_quota_slots_give(F.st, "key:a:slots", 2, on_done, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	wait_clear(&w);
	settle(tg_state_quota_slots_take(F.st, "key:a:slots", 3, 0, T0, T0 + 4000, on_pair, &w),
	    &w);
	assert_int_equal(w.n, 0);		/* renewed only */
	assert_int_equal(w.n2, 1);
	wait_clear(&w);
	settle(tg_state_quota_slots_take(F.st, "key:a:slots", 3, 5, T0 + 4001, T0 + 8000, on_pair,
	    &w), &w);
	assert_int_equal(w.n, 3);		/* the expired holding freed */
	assert_int_equal(w.n2, 3);
	wait_clear(&w);
	settle(tg_state_quota_members(F.st, T0, T0 + 1000, on_num, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(w.n, 1);
	wait_clear(&w);
}

/* Ask for a share of name: w's n the share given, n2 the sharers. */
static void
share(struct tg_state *st, const char *name, int64_t demand, int64_t now, int64_t exp,
    struct wait *w)
{
	wait_clear(w);
	settle(tg_state_quota_share(st, name, demand, 200000, now, exp, on_pair, w), w);
	assert_int_equal(w->res.rc, TG_STATE_OK);
}

/* A rate's share, alone: the whole limit whether asked for more or less;
 * a withdrawal gets none; bad input refused. */
static void
test_quota_share(void **state)
{
	struct wait w = { 0 };

	share(F.st, "key:a:rate", 280000, T0, T0 + 3000, &w);
	assert_int_equal(w.n, 200000);
	assert_int_equal(w.n2, 1);
	share(F.st, "key:a:rate", 100000, T0 + 1000, T0 + 4000, &w);
	assert_int_equal(w.n, 200000);	/* its demand and all the spare */
	assert_int_equal(w.n2, 1);
	share(F.st, "key:a:rate", 0, T0 + 2000, T0 + 2000, &w);
	assert_int_equal(w.n, 0);
	wait_clear(&w);
	settle(tg_state_quota_share(F.st, "", 1, 200000, T0, T0 + 3000, on_pair, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_ERROR);
	wait_clear(&w);
	settle(tg_state_quota_share(F.st, "key:a:rate", -1, 200000, T0, T0 + 3000, on_pair, &w),
	    &w);
	assert_int_equal(w.res.rc, TG_STATE_ERROR);
	wait_clear(&w);
}

/* Two instances: shares by demand that never add up to more than the
 * limit (a newcomer gets what the others leave, then its part once they
 * shrink); one that lapses or withdraws leaves its share to the other. */
static void
fleet_share(struct tg_state *st0, struct tg_state *st1)
{
	struct wait w = { 0 };

	share(st1, "key:s:rate", 120000, T0, T0 + 3000, &w);
	assert_int_equal(w.n, 200000);
	share(st0, "key:s:rate", 280000, T0, T0 + 3000, &w);
	assert_int_equal(w.n, 0);		/* st1 holds it all */
	assert_int_equal(w.n2, 2);
	share(st1, "key:s:rate", 120000, T0 + 1000, T0 + 4000, &w);
	assert_int_equal(w.n, 60000);		/* 120 of 400 asked for */
	share(st0, "key:s:rate", 280000, T0 + 1000, T0 + 4000, &w);
	assert_int_equal(w.n, 140000);
	share(st0, "key:s:rate", 280000, T0 + 4001, T0 + 7000, &w);
	assert_int_equal(w.n, 200000);		/* st1's lapsed */
	assert_int_equal(w.n2, 1);
	share(st1, "key:s:rate", 50000, T0 + 4002, T0 + 7000, &w);
	assert_int_equal(w.n, 0);
	share(st1, "key:s:rate", 0, T0 + 4003, T0 + 4003, &w);
	share(st0, "key:s:rate", 20000, T0 + 4004, T0 + 7000, &w);
	assert_int_equal(w.n, 200000);		/* st1 withdrew */
	assert_int_equal(w.n2, 1);
	wait_clear(&w);
}

struct quota_sum {
	int answers, errors;
	int64_t granted;
};

static void
on_quota_sum(const struct tg_state_res *res, int64_t a, int64_t b, void *arg)
{
	struct quota_sum *q = arg;

	q->answers++;
	q->errors += res->rc != TG_STATE_OK;
	q->granted += a;
}

/* Run the loop until want answers came (at most ~10 s). */
static void
quota_settle(struct quota_sum *q, int want)
{
	int i;

	for (i = 0; i < 10000 && q->answers < want; i++) {
		struct timeval tv = { 0, 1000 };

		event_base_loopexit(F.base, &tv);
		event_base_loop(F.base, EVLOOP_ONCE);
	}
	assert_int_equal(q->answers, want);
	assert_int_equal(q->errors, 0);
}

/* Two handles (two instances) taking at once, 300 takes of 1 each of
 * each kind in flight together: the fleet never grants more than the limit, and grants
 * all of it. */
static void
test_fleet_quota(void **state)
{
	struct tg_owners_opts wo = { 0 };
	struct tg_state_opts opts = { .url = F.url, .owners = &wo, .instance = "gw-b" };
	struct quota_sum r = { 0 }, d = { 0 }, sl = { 0 };
	struct tg_state *st[2];
	char q[160];
	struct tg_err err;
	struct wait w = { 0 };
	int i;

	st[0] = F.st;
	st[1] = tg_state_open(F.base, &opts, &err);
	assert_non_null(st[1]);
	for (i = 0; i < 300; i++) {
		tg_state_quota_rate_take(st[i % 2], "vendor:dex:rate", 1000, 100, 1, Q_US,
		    on_quota_sum, &r);
		tg_state_quota_day_take(st[i % 2], "key:a:daily:export", 19000, 100, 1, on_quota_sum,
		    &d);
		tg_state_quota_slots_take(st[i % 2], "key:a:slots", 100, 1, T0, T0 + 4000,
		    on_quota_sum, &sl);
	}
	quota_settle(&r, 300);
	quota_settle(&d, 300);
	quota_settle(&sl, 300);
	assert_int_equal(r.granted, 100);
	assert_int_equal(d.granted, 100);
	assert_int_equal(sl.granted, 100);
	/* a take waits for the limit's row lock (held here by another
	 * transaction) before it sums: what makes the bound hold */
	snprintf(q, sizeof(q), "SELECT 1 FROM %s.quota_slot_limits WHERE name = 'key:a:slots'"
	    " FOR UPDATE", F.schema);
	assert_int_equal(side_exec("BEGIN"), 0);
	assert_int_equal(side_exec(q), 0);
	memset(&sl, 0, sizeof(sl));
	tg_state_quota_slots_take(st[1], "key:a:slots", 100, 1, T0 + 5000, T0 + 9000,
	    on_quota_sum, &sl);
	for (i = 0; i < 200; i++) {
		struct timeval tv = { 0, 1000 };

		event_base_loopexit(F.base, &tv);
		event_base_loop(F.base, EVLOOP_ONCE);
	}
	assert_int_equal(sl.answers, 0);
	assert_int_equal(side_exec("COMMIT"), 0);
	quota_settle(&sl, 1);
	assert_int_equal(sl.granted, 1);	/* the old holdings expired at T0 + 4000 */
	settle(tg_state_quota_members(st[1], T0, T0 + 1000, on_num, &w), &w);
	wait_clear(&w);
	settle(tg_state_quota_members(F.st, T0, T0 + 1000, on_num, &w), &w);
	assert_int_equal(w.n, 2);
	wait_clear(&w);
	fleet_share(F.st, st[1]);
	tg_state_close(st[1]);
}

/* The instances as one line each: "self" for the asking one, else its
 * name; then live until, the leads (',' between), all leads, leases, claims. */
static void
on_fleet(const struct tg_state_res *res, const struct tg_state_instance *v, size_t n,
    void *arg)
{
	struct wait *w = arg;
	char line[512], *all = tg_xstrdup("");
	size_t i, j, k;

	got(w, res);
	w->count = n;
	for (i = 0; i < n; i++) {
		k = (size_t)snprintf(line, sizeof(line), "%s|%lld|", v[i].self ? "self" : v[i].name,
		    (long long)v[i].live_until_ms);
		for (j = 0; j < v[i].nleads && k < sizeof(line); j++)
			k += (size_t)snprintf(line + k, sizeof(line) - k, "%s%s", j ? "," : "",
			    v[i].leads[j]);
		if (k < sizeof(line))
			snprintf(line + k, sizeof(line) - k, "|%lld|%lld|%lld\n",
			    (long long)v[i].lead_count, (long long)v[i].webhook_leases,
			    (long long)v[i].claims);
		w->s = tg_xasprintf("%s%s", all, line);
		free(all);
		all = w->s;
	}
	w->s = all;
}

#define S_T0_15	"1700000015000"	/* T0 + 15 s */

/* One instance (SQLite) knows only itself and records no leads or leases. */
static void
test_instances_one(void **state)
{
	struct wait w = { 0 };

	(void)state;
	settle(tg_state_fleet_list(F.st, T0, on_fleet, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(w.count, 1);
	assert_string_equal(w.s, "self|0||-1|-1|-1\n");
	wait_clear(&w);
}

/* Two instances of a fleet: each seen by what it holds in the state (a
 * quota membership, a lead, a webhook lease), from either handle; what ran
 * out is not counted, and an instance holding nothing live but its
 * membership still shows with the membership's end. */
static void
test_fleet_instances(void **state)
{
	struct tg_state_opts opts = { .url = F.url, .outbox = &pg_outbox, .instance = "gw-b" };
	struct tg_outbox_lease *l;
	char id[TG_WEBHOOK_ID_LEN];
	struct tg_state *b;
	struct tg_err err;
	struct wait w = { 0 };

	(void)state;
	b = tg_state_open(F.base, &opts, &err);
	assert_non_null(b);
	settle(tg_state_fleet_list(b, T0, on_fleet, &w), &w);
	assert_string_equal(w.s, "self|0||0|0|0\n");		/* nothing held yet: itself */
	wait_clear(&w);
	settle(tg_state_poll_lead(b, "lead:runs", T0, 5000, on_num, &w), &w);
	wait_clear(&w);
	settle(tg_state_poll_lead(b, "dex/export/7", T0, 1000, on_num, &w), &w);
	wait_clear(&w);
	settle(tg_state_quota_members(F.st, T0, T0 + 15000, on_num, &w), &w);
	wait_clear(&w);
	add_job(NULL, id);
	set_payload(id, "{\"n\":1}");
	l = lease(T0 + 1);
	assert_non_null(l);
	settle(tg_state_fleet_list(F.st, T0 + 2, on_fleet, &w), &w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
	assert_int_equal(w.count, 2);
	assert_true(strstr(w.s, "gw-b|0|dex/export/7,lead:runs|2|0|0\n") != NULL);
	assert_true(strstr(w.s, "self|" S_T0_15 "||0|1|0\n") != NULL);
	wait_clear(&w);
	/* the poll lead ran out at T0 + 1000; the other end the same seen from b */
	settle(tg_state_fleet_list(b, T0 + 1000, on_fleet, &w), &w);
	assert_int_equal(w.count, 2);
	assert_true(strstr(w.s, "self|0|lead:runs|1|0|0\n") != NULL);
	wait_clear(&w);
	/* b's lead over: b is gone from the list; the membership keeps F's */
	settle(tg_state_fleet_list(F.st, T0 + 5000, on_fleet, &w), &w);
	assert_int_equal(w.count, 1);
	assert_true(strncmp(w.s, "self|" S_T0_15 "||0|", 5 + strlen(S_T0_15) + 4) == 0);
	wait_clear(&w);
	tg_outbox_lease_free(l);
	tg_state_close(b);
}

#define T_(f, needs)	{ { #f, f, setup, teardown, NULL }, (needs) }

int
main(void)
{
	static const struct {
		struct CMUnitTest t;
		unsigned needs;
	} cases[] = {
		T_(test_outbox_flow, D_OUTBOX), T_(test_payload_stream, D_OUTBOX),
		T_(test_lease_skip, D_OUTBOX), T_(test_payload_quota, D_OUTBOX),
		T_(test_outbox_note, D_OUTBOX), T_(test_outbox_key, D_OUTBOX),
		T_(test_payload_big, D_OUTBOX),
		T_(test_redeliver, D_OUTBOX), T_(test_outbox_admin, D_OUTBOX),
		T_(test_codes, D_OUTBOX), T_(test_outbox_outcomes, D_OUTBOX),
		T_(test_outbox_default_schedule, D_OUTBOX), T_(test_outbox_lease_expiry, D_OUTBOX),
		T_(test_outbox_list_and_stats, D_OUTBOX), T_(test_outbox_quota_count, D_OUTBOX),
		T_(test_payload_quota_race, D_OUTBOX), T_(test_payload_held_migration, D_OUTBOX), T_(test_lease_pick_plan, D_OUTBOX),
		T_(test_held_sum_plan, D_OUTBOX),
		T_(test_outbox_schedule_parse, D_LOCAL), T_(test_outbox_files, D_LOCAL),
		T_(test_outbox_file_v1, D_LOCAL), T_(test_runs, D_RUNS),
		T_(test_run_end_and_archive, D_RUNS), T_(test_run_checks_and_caps, D_RUNS),
		T_(test_sweeps, D_RUNS), T_(test_sweep_codes, D_RUNS),
		T_(test_run_lifecycle, D_RUNS), T_(test_run_first_answer, D_RUNS),
		T_(test_run_failure_text, D_RUNS), T_(test_run_check_failed, D_RUNS),
		T_(test_run_due_order, D_RUNS), T_(test_run_list_filters, D_RUNS),
		T_(test_run_figures, D_RUNS), T_(test_run_archive_caps, D_RUNS),
		T_(test_run_expire_purge, D_RUNS), T_(test_run_stats, D_RUNS),
		T_(test_run_unhandled_ends, D_RUNS), T_(test_run_garbage, D_RUNS),
		T_(test_sweep_queue, D_RUNS), T_(test_sweep_queue_errors, D_RUNS),
		T_(test_sweep_list_pages, D_RUNS), T_(test_sweep_purge, D_RUNS),
		T_(test_runs_file_version, D_LOCAL), T_(test_runs_file_v1, D_LOCAL),
		T_(test_runs_file_v2, D_LOCAL), T_(test_runs_file_garbage, D_LOCAL),
		T_(test_owners, D_SHARED), T_(test_owners_per_key, D_SHARED),
		T_(test_owners_bad_inputs, D_SHARED), T_(test_owners_file_v1, D_LOCAL),
		T_(test_tokens, D_SHARED), T_(test_poll, D_SHARED),
		T_(test_owners_lookup_lead, D_SHARED),
		T_(test_cancel, D_OUTBOX), T_(test_cancel_shared, D_SHARED),
		T_(test_group_commit, D_SHARED), T_(test_fleet_group_unknown, D_FLEET),
		T_(test_fleet_lead_lazy, D_FLEET), T_(test_fleet_group_waits, D_FLEET),
		T_(test_pipeline, D_SHARED), T_(test_fleet_pipeline_lost, D_FLEET),
		T_(test_close_pending, D_OUTBOX), T_(test_close_pending_shared, D_SHARED),
		T_(test_fleet_two_handles, D_FLEET), T_(test_fleet_outbox, D_FLEET),
		T_(test_fleet_outbox_key, D_FLEET),
		T_(test_fleet_wakeups, D_FLEET), T_(test_fleet_adopt, D_FLEET),
		T_(test_fleet_connections_lost, D_FLEET), T_(test_fleet_listen_apart, D_FLEET),
		T_(test_fleet_write_replayed, D_FLEET), T_(test_fleet_write_unknown, D_FLEET),
		T_(test_fleet_claims, D_FLEET | D_RUNS), T_(test_fleet_claim_recovery, D_FLEET | D_RUNS),
		T_(test_fleet_status_race, D_FLEET | D_RUNS),
		T_(test_fleet_deadline, D_FLEET), T_(test_fleet_deadline_connecting, D_FLEET),
		T_(test_fleet_frozen_idle, D_FLEET), T_(test_fleet_listener_frozen, D_FLEET), T_(test_fleet_deadline_backlog, D_FLEET),
		T_(test_open_errors, D_LOCAL),
		T_(test_quota_rate, D_SHARED), T_(test_quota_day, D_SHARED),
		T_(test_quota_day_prune, D_SHARED),
		T_(test_quota_slots, D_SHARED), T_(test_quota_share, D_SHARED),
		T_(test_fleet_quota, D_FLEET),
		T_(test_instances_one, D_LOCAL), T_(test_fleet_instances, D_FLEET | D_OUTBOX),
	};
	struct CMUnitTest tests[TG_NELEM(cases)];
	const char *why;
	size_t b, i, n;
	int rc = 0;

	tg_log_init(stderr, getenv("TG_TEST_LOG") ? TG_LOG_DEBUG : TG_LOG_OFF);
	srandom((unsigned)getpid());
	for (b = 0; b < TG_NELEM(backends); b++) {
		if (backends[b].absent != NULL && (why = backends[b].absent()) != NULL) {
			printf("[  SKIPPED ] the %s backend: %s\n", backends[b].name, why);
			continue;
		}
		for (i = n = 0; i < TG_NELEM(cases); i++) {
			if ((cases[i].needs & ~backends[b].has) != 0)
				continue;
			tests[n] = cases[i].t;
			tests[n++].initial_state = (void *)&backends[b];
		}
		rc |= _cmocka_run_group_tests(backends[b].name, tests, n, NULL, NULL);
	}
	return rc;
}
