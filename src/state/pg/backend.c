/*
 * backend.c - the PostgreSQL state backend's handle: open and close.
 *
 * This backend keeps everything a fleet shares: correlation ownership,
 * vendor token records, poll entries, the webhook outbox (payloads in
 * chunk rows, ../payload_rows.c), the run registry and sweeps, each domain
 * written once over its driver (pg_db.c).
 *
 * Open does not touch the network: it reads the URL and starts the pool,
 * whose connections are made on the loop (pg_conn.c), the first of them
 * migrating the schema before any operation is sent. A tidegate whose
 * database is down when it starts starts all the same, degraded as one
 * whose database went down (operations answer UNAVAILABLE, health says
 * why), and comes up when the database does.
 *
 * libpq's parameters: TCP keep-alives and tcp_user_timeout, so that a
 * connection to a peer gone silent (a partition, a host that froze) is
 * closed by the kernel even when nothing is asked; and the
 * application_name "tidegate/<instance>", so that pg_stat_activity tells
 * the instances of a fleet apart. The URL's own settings win over each.
 *
 * state.listen_url (default: state.url) is where LISTEN goes: with it, or
 * with state.pooler: transaction, one more connection, of its own.
 *
 * Only URLs (postgresql://, postgres://) reach here (state.c picks by
 * scheme). The passwords they may hold are kept aside to be scrubbed from
 * every message; libpq's own complaint about a URL it cannot parse is not
 * repeated, since it may quote the URL.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "pg.h"


/* libpq's parameters: defaults first, then the URL (dbname, expanded),
 * whose own settings override them; the last two values are owned. An
 * application_name of the URL (or PGAPPNAME) wins over the fallback. */
static const char *const keys[] = {
	"connect_timeout", "keepalives", "keepalives_idle", "keepalives_interval",
	"keepalives_count", "tcp_user_timeout", "fallback_application_name", "dbname", NULL,
};
#define NKEYS	(TG_NELEM(keys) - 1)

static const char *const *
params(const struct pg *pg, const char *url)
{
	static const char *const dflt[NKEYS - 2] = { "10", "1", "5", "2", "3", "10000" };
	const char **vals = tg_xcalloc(NKEYS + 1, sizeof(*vals));

	memcpy(vals, dflt, sizeof(dflt));
	vals[NKEYS - 2] = tg_xasprintf("tidegate/%s", pg->instance);
	vals[NKEYS - 1] = tg_xstrdup(url);
	return vals;
}

static void
params_free(const char *const *vals)
{
	if (vals != NULL) {
		free((char *)vals[NKEYS - 2]);
		free((char *)vals[NKEYS - 1]);
	}
	free((void *)vals);
}

/* The password url (the value of key) holds, kept in *out to scrub it,
 * or -1 with err when libpq cannot parse url. */
static int
secret(const char *key, const char *url, char **out, struct tg_err *err)
{
	PQconninfoOption *opts, *o;
	char *msg = NULL;

	if ((opts = PQconninfoParse(url, &msg)) == NULL) {
		PQfreemem(msg);
		tg_err_set(err, "%s: not a valid postgresql URL", key);
		return -1;
	}
	for (o = opts; o->keyword != NULL; o++)
		if (strcmp(o->keyword, "password") == 0 && o->val != NULL && *o->val != '\0')
			*out = tg_xstrdup(o->val);
	PQconninfoFree(opts);
	return 0;
}

static void
pg_free(struct pg *pg)
{
	params_free(pg->vals);
	params_free(pg->lvals);
	free(pg->secret);
	free(pg->lsecret);
	free(pg->instance);
	free(pg);
}

void *
tg_state_pg_open(struct event_base *base, const struct tg_state_opts *opts,
    const struct tg_db_list *stmts, struct tg_err *err)
{
	struct pg *pg;

	pg = tg_xcalloc(1, sizeof(*pg));
	pg->be = &tg_state_pg_backend;
	pg->base = base;
	pg->stmts = stmts;
	if (secret("state.url", opts->url, &pg->secret, err) != 0 || (opts->listen_url != NULL &&
	    secret("state.listen_url", opts->listen_url, &pg->lsecret, err) != 0)) {
		pg_free(pg);
		return NULL;
	}
	pg->instance = tg_xstrdup(opts->instance != NULL ? opts->instance : "");
	pg->keys = keys;
	pg->vals = params(pg, opts->url);
	pg->unnamed = opts->pooler == TG_STATE_POOLER_TRANSACTION;
	/* LISTEN on a connection of its own when it goes elsewhere, or when
	 * the pool's may not hold it (behind a transaction pooler). */
	pg->nconn = opts->listen_url != NULL || pg->unnamed ? PG_NCONN : PG_POOL;
	if (pg->nconn > PG_POOL) {
		pg->lvals = params(pg, opts->listen_url != NULL ? opts->listen_url : opts->url);
		if (pg->lsecret == NULL && pg->secret != NULL)
			pg->lsecret = tg_xstrdup(pg->secret);
	}
	pg->timeout_ms = opts->timeout_ms > 0 ? opts->timeout_ms : TG_STATE_TIMEOUT_MS;
	pg->owners = opts->owners != NULL;
	pg->outbox = opts->outbox != NULL;
	pg->runs = opts->runs != NULL;
	tg_state_pg_pool_start(pg);
	return pg;
}

void
tg_state_pg_close(void *impl)
{
	struct pg *pg = impl;

	tg_state_pg_pool_stop(pg);
	pg_free(pg);
}
