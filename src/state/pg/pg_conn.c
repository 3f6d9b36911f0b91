/*
 * pg_conn.c - the PostgreSQL backend's connections (pg.h), all on the
 * loop and never blocking it.
 *
 * A connection is made with PQconnectStartParams and driven by
 * PQconnectPoll on libevent events on PQsocket (read or write, as it
 * asks), set non-blocking. One that will prepare statements or LISTEN
 * first checks that no pooler stands between it and the server (its
 * backend pid against the server's, conn_up). The first one made in the
 * backend's life then migrates the schema (pg_schema.c's commands, as
 * simple queries in one transaction, under the migration's lock) while
 * any other made meanwhile waits; then each prepares every statement
 * (PQsendPrepare, one after the other) before it takes work, but for
 * state.pooler: transaction, where statements go unnamed and a
 * connection holds no session state. The connection that LISTENs for the
 * fleet's wake-ups (the pool's first, or with state.listen_url one of its
 * own, which does nothing else, needs no schema and is pinged by the
 * probe) hands what comes with every read to pg_wake.c. All that, from
 * the connect on, has PG_CONNECT_MS (a server that accepts a connection
 * and then says nothing is given up too).
 * An operation waits in the backend's FIFO (pg_op.c) for the first idle
 * connection of the pool, is sent with PQsendQueryPrepared, or
 * PQsendQueryParams with the same text when unnamed (PQflush on write events
 * while libpq holds unsent bytes) and read with PQconsumeInput, PQisBusy
 * and PQgetResult on read events; an idle connection watches its socket
 * too, so a server that goes away is noticed before the next query (and a
 * wake-up is heard). The time from send to answer is counted (health).
 *
 * A connection that fails answers its operation UNAVAILABLE with libpq's
 * message (UNKNOWN for a write libpq took: it may have committed) (the password scrubbed, pg_err.c), and when it was the last one
 * up, every queued operation too; it then reconnects after a backoff
 * doubling from PG_BACKOFF_MIN to PG_BACKOFF_MAX ms. An operation past
 * its deadline closes its connection the same way (pg_op.c).
 *
 * A host name in state.url is resolved by libpq inside PQconnectStart,
 * which may block on DNS: name the server by address (or hostaddr=) when
 * reconnects must not stall the loop. A callback must not close the
 * backend it is answered by.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "tidegate/clock.h"
#include "tidegate/log.h"
#include "pg.h"

static void on_io(evutil_socket_t fd, short what, void *arg);
static void dispatch(struct pg *pg);
static void group_step(struct pg_conn *k);
static void migrate(struct pg_conn *k);

/* ---- connections ---- */

/* Wait on k's socket for what (EV_READ and/or EV_WRITE); again when the
 * socket may have changed (while connecting). */
static void
watch(struct pg_conn *k, short what, int again)
{
	if (k->io != NULL && k->what == what && !again)
		return;
	if (k->io != NULL)
		event_free(k->io);
	k->io = event_new(k->pg->base, PQsocket(k->c), what | EV_PERSIST, on_io, k);
	k->what = what;
	event_add(k->io, NULL);
}

/* Every op k has in flight, one or a group, answers as a write lost does
 * (tg_state_pg_lost_rc), with why (borrowed). */
static void
fail_ops(struct pg_conn *k, const char *why)
{
	struct pg_op *o = k->op, *next;

	k->op = NULL;
	k->gcur = NULL;
	k->ngroup = 0;
	k->npipe = 0;
	k->psync = 0;
	for (; o != NULL; o = next) {
		next = o->next;
		o->next = NULL;
		PQclear(o->gres);
		o->gres = NULL;
		tg_state_pg_fail(o, tg_state_pg_lost_rc(o), why);
	}
}

/* Down: answer what k held, close it, and try again after the backoff. */
void
tg_state_pg_conn_drop(struct pg_conn *k, const char *why)
{
	struct pg *pg = k->pg;
	struct timeval tv = { k->backoff_ms / 1000, (k->backoff_ms % 1000) * 1000 };
	struct pg_op *o = k->op;
	int i, was_up = k->st >= PG_IDLE && !k->only_listen;

	if (!k->only_listen)	/* the listener's own trouble is not the pool's */
		snprintf(pg->down, sizeof(pg->down), "%s", why);
	tg_log(TG_LOG_WARN, "state_pg_down", TG_LS("why", why),
	    TG_LI("retry_ms", k->backoff_ms), TG_LS("instance", pg->instance),
	    TG_LS("connection", k->only_listen ? "listen" : "pool"));
	if (k->io != NULL)
		event_free(k->io);
	k->io = NULL;
	PQclear(k->last);
	k->last = NULL;
	PQfinish(k->c);
	k->c = NULL;
	if (k->st == PG_MIGRATING)
		pg->schema = PG_SCHEMA_NONE;
	k->st = PG_DOWN;
	evtimer_add(k->timer, &tv);
	k->backoff_ms = k->backoff_ms * 2 > PG_BACKOFF_MAX ? PG_BACKOFF_MAX : k->backoff_ms * 2;
	for (i = 0; i < PG_POOL && pg->schema == PG_SCHEMA_NONE; i++)
		if (pg->conn[i].st == PG_WAITING)
			migrate(&pg->conn[i]);	/* the migration passes to a waiting one */
	if (was_up)
		tg_state_pg_unsure(pg, PG_LOST);
	if (o != NULL)
		fail_ops(k, why);
	if (tg_state_pg_nup(pg) == 0 && !k->only_listen)
		tg_state_pg_fail_queue(pg, why);
}

/* Down for libpq's reason msg (borrowed; scrubbed of the password). */
static void
conn_fail(struct pg_conn *k, const char *msg)
{
	struct tg_err e;

	tg_state_pg_err(&e, "state: postgresql unavailable: ", msg, k->secret);
	tg_state_pg_conn_drop(k, e.msg);
}

int
tg_state_pg_nup(const struct pg *pg)
{
	int i, n = 0;

	for (i = 0; i < PG_POOL; i++)
		n += pg->conn[i].st >= PG_WAITING;
	return n;
}

void
tg_state_pg_kick(struct pg *pg)
{
	event_active(pg->kick, EV_TIMEOUT, 1);
}

/* Flush what libpq holds; wait for read, and for write while some is left. */
static int
flush(struct pg_conn *k)
{
	int rc = PQflush(k->c);

	if (rc < 0) {
		conn_fail(k, PQerrorMessage(k->c));
		return -1;
	}
	watch(k, rc == 1 ? EV_READ | EV_WRITE : EV_READ, 0);
	return 0;
}

/* k is ready: the server has answered all it was asked to set up. */
static void
ready(struct pg_conn *k)
{
	k->st = PG_IDLE;
	k->heard_ms = tg_clock_mono_ms();
	evtimer_del(k->timer);
	watch(k, EV_READ, 0);
	tg_state_pg_answered(k->pg);
	if (k->listener)
		tg_state_pg_listening(k);
	dispatch(k->pg);
}

/* Prepare the next statement, or take work once all are. */
static void
prepare_next(struct pg_conn *k)
{
	int n = tg_state_pg_conn_nstmt(k);

	if (k->nprep == n && k->listener) {	/* then LISTEN (pg_wake.c) */
		if (!PQsendQuery(k->c, "LISTEN " PG_CHANNEL)) {
			conn_fail(k, PQerrorMessage(k->c));
			return;
		}
		flush(k);
		return;
	}
	if (k->nprep >= n) {
		ready(k);
		return;
	}
	if (!PQsendPrepare(k->c, tg_state_pg_stmt_name(k->pg, k->nprep), tg_state_pg_sql(k->pg, k->nprep), 0,
	    NULL)) {
		conn_fail(k, PQerrorMessage(k->c));
		return;
	}
	flush(k);
}

static void
prepare(struct pg_conn *k)
{
	k->st = PG_PREPARING;
	k->nprep = 0;
	prepare_next(k);
}

const char *
tg_state_pg_stmt_name(const struct pg *pg, int i)
{
	return tg_db_list_at(pg->stmts, (size_t)i)->name;
}

int
tg_state_pg_nstmt(const struct pg *pg)
{
	return (int)tg_db_list_count(pg->stmts);
}

int
tg_state_pg_conn_nstmt(const struct pg_conn *k)
{
	return k->only_listen || k->pg->unnamed ? 0 : tg_state_pg_nstmt(k->pg);
}

int
tg_state_pg_stmt_index(const struct pg *pg, const struct tg_db_stmt *s)
{
	return (int)tg_db_list_index(pg->stmts, s);
}

/* ---- the migration: once per open, by the first connection made ---- */

/* Commands of the migration go as one simple query each (several
 * statements, no parameters). */
static void
migrate_send(struct pg_conn *k, const char *sql)
{
	if (!PQsendQuery(k->c, sql)) {
		conn_fail(k, PQerrorMessage(k->c));
		return;
	}
	flush(k);
}

static void
migrate(struct pg_conn *k)
{
	k->pg->schema = PG_SCHEMA_MIGRATING;
	k->st = PG_MIGRATING;
	k->mstep = 0;
	migrate_send(k, tg_state_pg_schema_begin());
}

/* The rest after the schema's version (r borrowed): what is missing, this
 * instance's claims given back (the run registry's), and COMMIT. */
static void
migrate_rest(struct pg_conn *k, const PGresult *r)
{
	struct pg *pg = k->pg;
	struct tg_err err;
	char *lit = NULL, *sql;

	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		conn_fail(k, r != NULL ? PQresultErrorMessage(r) : PQerrorMessage(k->c));
		return;
	}
	if (pg->runs && (lit = PQescapeLiteral(k->c, pg->instance, strlen(pg->instance))) == NULL) {
		conn_fail(k, PQerrorMessage(k->c));
		return;
	}
	sql = tg_state_pg_schema_rest(atoi(PQgetvalue(r, 0, 0)), lit, &err);
	PQfreemem(lit);
	if (sql == NULL) {
		tg_state_pg_conn_drop(k, err.msg);
		return;
	}
	migrate_send(k, sql);
	free(sql);
}

/* The answer (r borrowed) to k's last migration command. */
static void
migrate_step(struct pg_conn *k, const PGresult *r)
{
	struct pg *pg = k->pg;
	int i;

	if (k->mstep++ == 0) {
		migrate_rest(k, r);
		return;
	}
	if (PQresultStatus(r) != PGRES_COMMAND_OK) {
		conn_fail(k, r != NULL ? PQresultErrorMessage(r) : PQerrorMessage(k->c));
		return;
	}
	pg->schema = PG_SCHEMA_DONE;
	tg_log(TG_LOG_DEBUG, "state_pg_migrated", TG_LS("instance", pg->instance));
	for (i = 0; i < PG_POOL; i++)
		if (pg->conn[i].st == PG_WAITING)
			prepare(&pg->conn[i]);
	prepare(k);
}

/* k is connected and direct where it must be: migrate (or wait for the
 * connection that does), prepare, then work; the listener of its own
 * only LISTENs. */
static void
conn_direct(struct pg_conn *k)
{
	k->backoff_ms = PG_BACKOFF_MIN;
	if (k->pg->down[0] != '\0')
		tg_log(TG_LOG_INFO, "state_pg_up", TG_LS("instance", k->pg->instance),
		    TG_LS("connection", k->only_listen ? "listen" : "pool"));
	if (k->pg->schema == PG_SCHEMA_DONE || k->only_listen)
		prepare(k);
	else if (k->pg->schema == PG_SCHEMA_MIGRATING) {
		k->st = PG_WAITING;
		watch(k, EV_READ, 0);
	} else
		migrate(k);
}

/*
 * A pooler answers for the server: the backend key it gives the client is
 * its own (PgBouncer's is random), not the server process's. Prepared
 * statements and LISTEN are the server connection's, which a transaction
 * pooler hands to someone else after each transaction: they must not go
 * through one. So k asks the server's pid first when it prepares
 * (state.pooler none) or LISTENs.
 */
static void
conn_up(struct pg_conn *k)
{
	if (!k->listener && k->pg->unnamed) {
		conn_direct(k);
		return;
	}
	k->st = PG_CHECKING;
	if (!PQsendQueryParams(k->c, "SELECT pg_backend_pid()", 0, NULL, NULL, NULL, NULL, 0)) {
		conn_fail(k, PQerrorMessage(k->c));
		return;
	}
	flush(k);
}

/* The server's pid (r borrowed) against the one the connection was given. */
static void
check_step(struct pg_conn *k, const PGresult *r)
{
	if (PQresultStatus(r) != PGRES_TUPLES_OK || PQntuples(r) != 1) {
		conn_fail(k, r != NULL ? PQresultErrorMessage(r) : PQerrorMessage(k->c));
		return;
	}
	if (atoi(PQgetvalue(r, 0, 0)) == PQbackendPID(k->c)) {
		conn_direct(k);
		return;
	}
	if (k->only_listen || k->pg->unnamed)
		tg_state_pg_conn_drop(k, "state: postgresql: state.listen_url leads through a "
		    "connection pooler (its backend is not the server's): LISTEN needs a direct "
		    "connection to the server (docs/fleet.md)");
	else
		tg_state_pg_conn_drop(k, "state: postgresql: state.url leads through a connection "
		    "pooler (its backend is not the server's), where prepared statements and LISTEN "
		    "do not hold: set state.pooler: transaction and state.listen_url to a direct "
		    "connection (docs/fleet.md)");
}

static void
connect_step(struct pg_conn *k)
{
	switch (PQconnectPoll(k->c)) {
	case PGRES_POLLING_READING:
		watch(k, EV_READ, 1);
		break;
	case PGRES_POLLING_WRITING:
		watch(k, EV_WRITE, 1);
		break;
	case PGRES_POLLING_OK:
		if (PQsetnonblocking(k->c, 1) != 0) {
			conn_fail(k, PQerrorMessage(k->c));
			break;
		}
		conn_up(k);
		break;
	default:
		conn_fail(k, PQerrorMessage(k->c));
		break;
	}
}

/*
 * The backoff ran out (DOWN: connect) or a connection took too long to
 * become ready (connect, migrate, prepare: give up). PQconnectPoll does
 * not keep connect_timeout: this timer does, and a server that accepts
 * the connection and then says nothing is given up too.
 */
static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct pg_conn *k = arg;
	struct timeval tv = { PG_CONNECT_MS / 1000, 0 };

	if (k->st != PG_DOWN) {
		conn_fail(k, "connection attempt timed out");
		return;
	}
	k->c = PQconnectStartParams((const char *const *)k->pg->keys,
	    (const char *const *)k->vals, 1);
	if (k->c == NULL || PQstatus(k->c) == CONNECTION_BAD) {
		conn_fail(k, k->c != NULL ? PQerrorMessage(k->c) : "out of memory");
		return;
	}
	tg_state_pg_quiet(k);
	k->st = PG_CONNECTING;
	evtimer_add(k->timer, &tv);
	watch(k, EV_WRITE, 1);
}

/* o's whole answer (r borrowed) came on k (o taken off it). */
static void
op_answer(struct pg_conn *k, struct pg_op *o, const PGresult *r)
{
	ExecStatusType s = PQresultStatus(r);
	const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);

	o->conn = NULL;
	o->next = NULL;
	tg_state_pg_lat(k->pg, tg_clock_mono_us() - o->sent_us);
	tg_state_pg_answered(k->pg);
	/* A read of text the database cannot hold (22021: not UTF-8) finds
	 * what any row holds of it: nothing (an error result has no rows). */
	if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK ||
	    (o->lookup && state != NULL && strcmp(state, "22021") == 0))
		o->res.rc = TG_STATE_OK;
	else {
		/* A unique key taken (23505): the record exists already. */
		o->res.rc = state != NULL && !strcmp(state, "23505") ? TG_STATE_CONFLICT :
		    TG_STATE_ERROR;
		tg_state_pg_err(&o->res.err, "state: postgresql: ", PQresultErrorMessage(r),
		    k->pg->secret);
	}
	tg_state_pg_finish(o, r);
}

/* The whole answer (r borrowed) of the operation k sent alone came. */
static void
answered(struct pg_conn *k, const PGresult *r)
{
	struct pg_op *o = k->op;

	k->op = NULL;
	k->st = PG_IDLE;
	op_answer(k, o, r);
	dispatch(k->pg);
}

/* Read k's pipeline: each op whose Sync came is answered, in order; once
 * none is left in flight, k leaves pipeline mode and is idle. */
static void
pipe_step(struct pg_conn *k)
{
	struct pg *pg = k->pg;
	struct pg_op *o;
	PGresult *r;
	int rc, out = 1;

	while (k->npipe > 0 && (rc = tg_state_pg_pipe_read(k, &r)) != 0) {
		if (rc < 0) {
			conn_fail(k, PQerrorMessage(k->c));
			return;
		}
		o = k->op;
		k->op = o->next;
		if (--k->npipe == 0) {
			k->st = PG_IDLE;
			out = PQexitPipelineMode(k->c);
		}
		op_answer(k, o, r);	/* its Sync came: committed */
		PQclear(r);
		if (!out) {
			conn_fail(k, PQerrorMessage(k->c));
			return;
		}
	}
	dispatch(pg);
}

/* A whole answer came for what k was doing (r: its last result, owned). */
static void
complete(struct pg_conn *k, PGresult *r)
{
	ExecStatusType s = PQresultStatus(r);

	if (PQstatus(k->c) == CONNECTION_BAD || tg_state_pg_gone(r)) {
		conn_fail(k, PQerrorMessage(k->c));
	} else if (k->st == PG_CHECKING) {
		check_step(k, r);
	} else if (k->st == PG_MIGRATING) {
		migrate_step(k, r);
	} else if (k->st == PG_PREPARING) {
		if (s != PGRES_COMMAND_OK)
			conn_fail(k, PQerrorMessage(k->c));
		else {
			k->nprep++;
			prepare_next(k);
		}
	} else if (k->op != NULL) {
		answered(k, r);
	} else if (k->only_listen && k->st == PG_BUSY) {
		k->st = PG_IDLE;	/* its ping answered */
	}
	PQclear(r);
}

/* Read what came; complete the command once its last result is in. */
static void
read_step(struct pg_conn *k)
{
	PGresult *r;

	if (!PQconsumeInput(k->c) || PQstatus(k->c) == CONNECTION_BAD) {
		conn_fail(k, PQerrorMessage(k->c));
		return;
	}
	if (k->listener)
		tg_state_pg_notifies(k);
	if (k->only_listen)
		k->heard_ms = tg_clock_mono_ms();
	if (k->st == PG_IDLE || k->st == PG_WAITING)
		return;
	if (k->ngroup > 0) {
		group_step(k);
		return;
	}
	if (k->npipe > 0) {
		pipe_step(k);
		return;
	}
	while (!PQisBusy(k->c)) {
		if ((r = PQgetResult(k->c)) == NULL) {
			r = k->last;
			k->last = NULL;
			complete(k, r);
			return;
		}
		PQclear(k->last);
		k->last = r;
	}
}

static void
on_io(evutil_socket_t fd, short what, void *arg)
{
	struct pg_conn *k = arg;

	if (k->st == PG_CONNECTING) {
		connect_step(k);
		return;
	}
	if ((what & EV_WRITE) && flush(k) != 0)
		return;
	if (what & EV_READ)
		read_step(k);
}

/* The Sync of k's group was answered: each member is answered (all
 * committed) or runs again alone (rolled back: pg_group.c). */
static void
group_done(struct pg_conn *k)
{
	struct pg_op *first = k->op, *o, *next;
	PGresult *r;

	if (!PQexitPipelineMode(k->c)) {
		conn_fail(k, PQerrorMessage(k->c));
		return;
	}
	k->op = NULL;
	k->gcur = NULL;
	k->ngroup = 0;
	k->st = PG_IDLE;
	tg_state_pg_answered(k->pg);
	for (o = first; o != NULL; o = o->next)
		tg_state_pg_lat(k->pg, tg_clock_mono_us() - o->sent_us);
	if (!tg_state_pg_group_ok(first)) {
		tg_state_pg_group_requeue(k->pg, first);
		return;
	}
	for (o = first; o != NULL; o = next) {
		next = o->next;
		o->next = NULL;
		o->conn = NULL;
		o->res.rc = TG_STATE_OK;
		r = o->gres;	/* held here: o may be gone, or queued again */
		o->gres = NULL;
		tg_state_pg_finish(o, r);
		PQclear(r);
	}
}

/* Read k's group; once its Sync came, answer it and go on. */
static void
group_step(struct pg_conn *k)
{
	struct pg *pg = k->pg;
	int rc = tg_state_pg_group_read(k);

	if (rc < 0)
		conn_fail(k, PQerrorMessage(k->c));
	else if (rc > 0) {
		group_done(k);
		dispatch(pg);
	}
}

static int send_op(struct pg_conn *k, const struct pg_op *o);

/* Send k's group (k->op's chain) in one pipeline closed by one Sync:
 * libpq's 1 when it took it all. */
static int
send_group(struct pg_conn *k)
{
	struct pg_op *o;

	if (!PQenterPipelineMode(k->c))
		return 0;
	for (o = k->op; o != NULL; o = o->next) {
		if (!send_op(k, o))
			return 0;
		o->sent = 1;
	}
	k->gcur = k->op;
	return PQpipelineSync(k->c);
}

/* Send o on k: its prepared statement, or the same text unnamed (no
 * server types given, as PQsendPrepare was not: the server infers the
 * same), or the probe's ping. */
static int
send_op(struct pg_conn *k, const struct pg_op *o)
{
	if (o->stmt == PG_PING)
		return PQsendQueryParams(k->c, "SELECT 1", 0, NULL, NULL, NULL, NULL, 0);
	if (k->pg->unnamed)
		return PQsendQueryParams(k->c, tg_state_pg_sql(k->pg, o->stmt), o->nparams, NULL,
		    (const char *const *)o->val, o->len, o->fmt, o->binary);
	return PQsendQueryPrepared(k->c, tg_state_pg_stmt_name(k->pg, o->stmt), o->nparams,
	    (const char *const *)o->val, o->len, o->fmt, o->binary);
}

/* Send o (taken) on k in k's pipeline, closed by a Sync of its own
 * (pg_pipe.c), entering pipeline mode for the first: 0 when libpq
 * refused (k is dropped, o answers as lost). */
static int
pipe_send(struct pg_conn *k, struct pg_op *o)
{
	o->conn = k;
	o->sent_us = tg_clock_mono_us();
	if (k->npipe == 0) {
		k->op = o;
		k->st = PG_BUSY;
		k->psync = 0;
	} else
		*k->ptail = o;
	k->ptail = &o->next;
	if (k->npipe++ > 0)
		k->pg->pipelined++;
	if ((k->npipe == 1 && !PQenterPipelineMode(k->c)) || !send_op(k, o) ||
	    !PQpipelineSync(k->c)) {
		conn_fail(k, PQerrorMessage(k->c));
		return 0;
	}
	o->sent = 1;
	return 1;
}

/* Send o (taken) on idle k: a write with the others of its group, or
 * alone, or as the first of a pipeline. */
static void
start(struct pg_conn *k, struct pg_op *o)
{
	if (!tg_state_pg_pipe_alone(k->pg, o)) {
		if (pipe_send(k, o))
			flush(k);
		return;
	}
	o->conn = k;
	o->sent_us = tg_clock_mono_us();
	k->op = o;
	k->st = PG_BUSY;
	k->ngroup = tg_state_pg_group_take(k->pg, o);
	if (k->ngroup == 1)
		k->ngroup = 0;	/* alone: no pipeline */
	if (!(k->ngroup > 0 ? send_group(k) : send_op(k, o))) {
		conn_fail(k, PQerrorMessage(k->c));
		return;
	}
	o->sent = 1;
	flush(k);
}

/* Hand queued operations to idle connections, oldest first (a write
 * takes the other writes queued with it, pg_group.c); then what is left
 * to the pipelines of connections at work (pg_pipe.c). */
static void
dispatch(struct pg *pg)
{
	struct pg_conn *k;
	struct pg_op *o;
	int64_t now = tg_clock_mono_us();
	int i, n, open;

	for (i = 0; i < PG_POOL && pg->head != NULL; i++) {
		k = &pg->conn[i];
		if (k->st == PG_IDLE && (o = tg_state_pg_group_next(pg)) != NULL)
			start(k, o);
	}
	open = tg_state_pg_pipe_open(pg);
	for (i = 0; open && i < PG_POOL && pg->head != NULL; i++) {
		k = &pg->conn[i];
		for (n = 0; k->st == PG_BUSY && k->npipe > 0 && k->npipe < PG_PIPE_MAX &&
		    now - k->op->sent_us < PG_PIPE_FRESH_US &&
		    (o = tg_state_pg_pipe_take(pg)) != NULL; n++)
			if (!pipe_send(k, o))
				break;
		if (n > 0 && k->st == PG_BUSY)
			flush(k);
	}
}

void
tg_state_pg_listener_ping(struct pg_conn *k)
{
	int64_t now = tg_clock_mono_ms(), t = k->pg->timeout_ms;
	char why[96];

	if (k->st == PG_BUSY && now - k->ping_ms >= t) {
		snprintf(why, sizeof(why), "listener: no answer within %lld ms (state.timeout)",
		    (long long)t);
		conn_fail(k, why);
		return;
	}
	if (k->st != PG_IDLE || now - k->heard_ms < t)
		return;
	if (!PQsendQueryParams(k->c, "SELECT 1", 0, NULL, NULL, NULL, NULL, 0)) {
		conn_fail(k, PQerrorMessage(k->c));
		return;
	}
	k->st = PG_BUSY;
	k->ping_ms = now;
	flush(k);
}

static void
on_kick(evutil_socket_t fd, short what, void *arg)
{
	dispatch(arg);
}

void
tg_state_pg_pool_start(struct pg *pg)
{
	struct timeval now = { 0, 0 };
	int i;

	pg->tail = &pg->head;
	pg->kick = event_new(pg->base, -1, 0, on_kick, pg);
	tg_state_pg_deadlines_start(pg);
	for (i = 0; i < pg->nconn; i++) {
		pg->conn[i].pg = pg;
		pg->conn[i].vals = pg->vals;
		pg->conn[i].secret = pg->secret;
		pg->conn[i].backoff_ms = PG_BACKOFF_MIN;
		pg->conn[i].timer = evtimer_new(pg->base, on_timer, &pg->conn[i]);
		evtimer_add(pg->conn[i].timer, &now);
	}
	pg->lconn = &pg->conn[0];	/* the pool's first, or one of its own */
	if (pg->nconn > PG_POOL) {
		pg->lconn = &pg->conn[PG_POOL];
		pg->lconn->only_listen = 1;
		pg->lconn->vals = pg->lvals;
		pg->lconn->secret = pg->lsecret;
	}
	pg->lconn->listener = 1;
	tg_state_pg_probe_start(pg);
}

void
tg_state_pg_pool_stop(struct pg *pg)
{
	struct pg_conn *k;
	int i;

	pg->closing = 1;
	tg_state_pg_probe_stop(pg);
	for (i = 0; i < pg->nconn; i++) {
		k = &pg->conn[i];
		fail_ops(k, "state: closing");
		if (k->io != NULL)
			event_free(k->io);
		if (k->timer != NULL)
			event_free(k->timer);
		PQclear(k->last);
		PQfinish(k->c);
		memset(k, 0, sizeof(*k));
	}
	tg_state_pg_fail_queue(pg, "state: closing");
	tg_state_pg_deadlines_stop(pg);
	if (pg->kick != NULL)
		event_free(pg->kick);
	pg->kick = NULL;
}
