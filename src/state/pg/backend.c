/*
 * backend.c - the PostgreSQL state backend's handle: open and close.
 *
 * This backend keeps everything a fleet shares (issue 14): correlation
 * ownership, vendor token records and poll entries (pg_shared.c), the
 * webhook outbox (pg_outbox.c, pg_payload.c), the run registry (pg_runs.c)
 * and sweeps (pg_sweeps.c).
 *
 * Open blocks, once: it connects with PQconnectdbParams and migrates the
 * schema (pg_schema.c) synchronously, before the loop runs, as the SQLite
 * backend opens its files. A tidegate that cannot reach its database or
 * migrate it does not start; one that is running never blocks on it again:
 * the connection open made becomes the pool's first (non-blocking from
 * then on), the others connect on the loop (pg_conn.c).
 *
 * Only URLs (postgresql://, postgres://) reach here (state.c picks by
 * scheme). The password they may hold is kept aside to be scrubbed from
 * every message; libpq's own complaint about a URL it cannot parse is not
 * repeated, since it may quote the URL.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "pg.h"
#include "../run_rules.h"

#define KEEP_MS		(30LL * 24 * 3600 * 1000)
#define MAX_ROWS	1000000
#define NKEYS		4

/* libpq's parameters: defaults first, then the URL (dbname, expanded),
 * whose own settings override them. */
static void
params(struct pg *pg, const char *url)
{
	const char **keys = tg_xcalloc(NKEYS, sizeof(*keys));
	const char **vals = tg_xcalloc(NKEYS, sizeof(*vals));

	keys[0] = "connect_timeout";
	vals[0] = "10";
	keys[1] = "fallback_application_name";
	vals[1] = "tidegate";
	keys[2] = "dbname";
	vals[2] = tg_xstrdup(url);
	pg->keys = keys;
	pg->vals = vals;
}

/* The password url holds (kept to scrub it), or -1 with err when libpq
 * cannot parse url. */
static int
secret(struct pg *pg, const char *url, struct tg_err *err)
{
	PQconninfoOption *opts, *o;
	char *msg = NULL;

	if ((opts = PQconninfoParse(url, &msg)) == NULL) {
		PQfreemem(msg);
		tg_err_set(err, "state.url: not a valid postgresql URL");
		return -1;
	}
	for (o = opts; o->keyword != NULL; o++)
		if (strcmp(o->keyword, "password") == 0 && o->val != NULL && *o->val != '\0')
			pg->secret = tg_xstrdup(o->val);
	PQconninfoFree(opts);
	return 0;
}

static void
pg_free(struct pg *pg)
{
	if (pg->vals != NULL)
		free((char *)pg->vals[2]);
	free((void *)pg->keys);
	free((void *)pg->vals);
	free(pg->secret);
	free(pg->instance);
	free(pg->spool);
	tg_state_pg_wake_free(pg);
	tg_state_rules_free(&pg->rules);
	free(pg);
}

/* The instance's name: the configured one (state.instance), else host:pid. */
static void
name_instance(struct pg *pg, const char *configured)
{
	char host[256] = "", name[320];

	if (configured != NULL && *configured != '\0') {
		pg->instance = tg_xstrdup(configured);
		return;
	}
	if (gethostname(host, sizeof(host) - 1) != 0)
		snprintf(host, sizeof(host), "unknown");
	snprintf(name, sizeof(name), "%s:%ld", host, (long)getpid());
	pg->instance = tg_xstrdup(name);
}

/* The webhook outbox's rules, and where leased payloads are spooled: its
 * payload_dir, else $TMPDIR, else /tmp (pg_outbox.c). o borrowed; NULL:
 * no outbox. */
static void
outbox_opts(struct pg *pg, const struct tg_outbox_opts *o)
{
	const char *tmp = getenv("TMPDIR");

	if (o == NULL)
		return;
	pg->outbox = 1;
	tg_state_rules_init(&pg->rules, o);
	pg->spool = tg_xstrdup(o->payload_dir != NULL && *o->payload_dir != '\0' ?
	    o->payload_dir : tmp != NULL && *tmp != '\0' ? tmp : "/tmp");
}

/* The run registry's limits (its path is SQLite's only). */
static void
runs_opts(struct pg *pg, const struct tg_runs_opts *o)
{
	struct tg_state_runs_limits l;

	tg_state_runs_limits(o, &l);
	pg->runs = 1;
	pg->retention_ms = l.retention_ms;
	pg->grace_ms = l.grace_ms;
	pg->archive_keep_ms = l.archive_keep_ms;
	pg->archive_max_run = l.archive_max_run;
	pg->archive_max_total = l.archive_max_total;
}

/* Connect and migrate, blocking (see the head of this file). */
static PGconn *
first_conn(struct pg *pg, struct tg_err *err)
{
	PGconn *c = PQconnectdbParams(pg->keys, pg->vals, 1);

	if (c == NULL || PQstatus(c) != CONNECTION_OK) {
		tg_state_pg_err(err, "state: postgresql: cannot connect: ",
		    c != NULL ? PQerrorMessage(c) : "out of memory", pg->secret);
		PQfinish(c);
		return NULL;
	}
	tg_state_pg_quiet(pg, c);
	if (tg_state_pg_migrate(c, pg->secret, err) != 0 || (pg->runs &&
	    tg_state_pg_sweeps_recover(c, pg->instance, pg->secret, err) != 0)) {
		PQfinish(c);
		return NULL;
	}
	if (PQsetnonblocking(c, 1) != 0) {
		tg_err_set(err, "state: postgresql: cannot make the connection non-blocking");
		PQfinish(c);
		return NULL;
	}
	return c;
}

void *
tg_state_pg_open(struct event_base *base, const struct tg_state_opts *opts, struct tg_err *err)
{
	struct pg *pg;
	PGconn *c;

	pg = tg_xcalloc(1, sizeof(*pg));
	pg->be = &tg_state_pg_backend;
	pg->base = base;
	if (secret(pg, opts->url, err) != 0) {
		pg_free(pg);
		return NULL;
	}
	params(pg, opts->url);
	name_instance(pg, opts->instance);
	if (opts->owners != NULL) {
		pg->owners = 1;
		pg->keep_ms = opts->owners->keep_ms > 0 ? opts->owners->keep_ms : KEEP_MS;
		pg->max_rows = opts->owners->max_rows > 0 ? opts->owners->max_rows : MAX_ROWS;
	}
	outbox_opts(pg, opts->outbox);
	if (opts->runs != NULL)
		runs_opts(pg, opts->runs);
	if ((c = first_conn(pg, err)) == NULL) {
		pg_free(pg);
		return NULL;
	}
	tg_state_pg_pool_start(pg, c);
	return pg;
}

void
tg_state_pg_close(void *impl)
{
	struct pg *pg = impl;

	tg_state_pg_pool_stop(pg);
	pg_free(pg);
}
