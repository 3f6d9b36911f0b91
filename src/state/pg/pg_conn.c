/*
 * pg_conn.c - the PostgreSQL backend's connections and the life of an
 * operation (pg.h), all on the loop and never blocking it.
 *
 * A connection is made with PQconnectStartParams and driven by
 * PQconnectPoll on libevent events on PQsocket (read or write, as it
 * asks; PG_CONNECT_MS at most), set non-blocking, then prepares every
 * statement (PQsendPrepare, one after the other) before it takes work;
 * the first connection then LISTENs for the fleet's wake-ups, and hands
 * what comes with every read to pg_wake.c.
 * An operation waits in the backend's FIFO for the first idle connection,
 * is sent with PQsendQueryPrepared (PQflush on write events while libpq
 * holds unsent bytes) and read with PQconsumeInput, PQisBusy and
 * PQgetResult on read events; an idle connection watches its socket too,
 * so a server that goes away is noticed before the next query (and a
 * wake-up is heard). The time from send to answer is counted (health).
 *
 * A connection that fails answers its operation UNAVAILABLE with libpq's
 * message (the password scrubbed, pg_err.c), and when it was the last one
 * up, every queued operation too; it then reconnects after a backoff
 * doubling from PG_BACKOFF_MIN to PG_BACKOFF_MAX ms. While no connection
 * is up a new operation answers UNAVAILABLE before its call returns.
 * A cancelled operation is never answered; once sent, its query still runs
 * (a payload write runs even when cancelled while queued). An operation
 * of several steps (a lease reading its payload's chunks) is queued again
 * by its answer with the next statement, its handle unchanged.
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

/* ---- operations ---- */

struct pg_op *
tg_state_pg_op_new(struct pg *pg, enum pg_stmt stmt, pg_answer_fn answer,
    void (*cb)(void), void *arg)
{
	struct pg_op *o = tg_xcalloc(1, sizeof(*o));

	o->pub.be = pg->be;
	o->pg = pg;
	o->stmt = stmt;
	o->answer = answer;
	o->cb = cb;
	o->arg = arg;
	return o;
}

void
tg_state_pg_param_str(struct pg_op *o, const char *s)
{
	o->val[o->nparams++] = s != NULL ? tg_xstrdup(s) : NULL;
}

void
tg_state_pg_param_i64(struct pg_op *o, int64_t n)
{
	char num[24];

	snprintf(num, sizeof(num), "%lld", (long long)n);
	tg_state_pg_param_str(o, num);
}

void
tg_state_pg_param_bin(struct pg_op *o, const void *data, size_t len)
{
	o->val[o->nparams] = tg_xmalloc(len > 0 ? len : 1);
	if (len > 0)
		memcpy(o->val[o->nparams], data, len);
	o->len[o->nparams] = (int)len;
	o->fmt[o->nparams++] = 1;
}

void
tg_state_pg_param_buf(struct pg_op *o, struct evbuffer *buf, size_t len)
{
	o->val[o->nparams] = tg_xmalloc(len > 0 ? len : 1);
	evbuffer_remove(buf, o->val[o->nparams], len);
	o->len[o->nparams] = (int)len;
	o->fmt[o->nparams++] = 1;
}

static void
params_free(struct pg_op *o)
{
	int i;

	for (i = 0; i < o->nparams; i++) {
		free(o->val[i]);
		o->val[i] = NULL;
		o->len[i] = 0;
		o->fmt[i] = 0;
	}
	o->nparams = 0;
}

void
tg_state_pg_op_reuse(struct pg_op *o, enum pg_stmt stmt)
{
	params_free(o);
	o->stmt = stmt;
	o->binary = 0;
	o->again = 1;
}

void
tg_state_pg_again(struct pg_op *o, enum pg_stmt stmt, pg_answer_fn answer)
{
	params_free(o);
	o->stmt = stmt;
	o->answer = answer;
	o->again = 1;
}

static void
op_free(struct pg_op *o)
{
	if (o->cleanup != NULL)
		o->cleanup(o);
	params_free(o);
	free(o->ctx);
	free(o);
}

/*
 * Answer o (r borrowed, NULL when o->res.rc != 0) unless cancelled; free
 * it, or, when its answer chose a next step (tg_state_pg_op_reuse,
 * tg_state_pg_again), queue it first, so that an operation's steps run
 * back to back.
 */
static void
finish(struct pg_op *o, const PGresult *r)
{
	struct pg *pg = o->pg;

	o->again = 0;
	if (!o->cancelled)
		o->answer(o, o->res.rc == TG_STATE_OK ? r : NULL);
	if (!o->again || o->cancelled) {
		op_free(o);
		return;
	}
	o->again = 0;
	o->conn = NULL;
	memset(&o->res, 0, sizeof(o->res));
	o->next = pg->head;
	if (pg->head == NULL)
		pg->tail = &o->next;
	pg->head = o;
	event_active(pg->kick, EV_TIMEOUT, 1);
}

struct tg_state_op *
tg_state_pg_answer_now(struct pg_op *o)
{
	o->answer(o, NULL);
	op_free(o);
	return NULL;
}

static void
fail_op(struct pg_op *o, int rc, const char *why)
{
	o->res.rc = rc;
	tg_err_set(&o->res.err, "%s", why);
	finish(o, NULL);
}

void
tg_state_pg_fail(struct pg_op *o, int rc, const char *why)
{
	fail_op(o, rc, why);
}

static int
nup(const struct pg *pg)
{
	int i, n = 0;

	for (i = 0; i < PG_POOL; i++)
		n += pg->conn[i].st >= PG_PREPARING;
	return n;
}

/* Every queued operation answers UNAVAILABLE with why. */
static void
fail_queue(struct pg *pg, const char *why)
{
	struct pg_op *o;

	while ((o = pg->head) != NULL) {
		pg->head = o->next;
		if (pg->head == NULL)
			pg->tail = &pg->head;
		fail_op(o, TG_STATE_UNAVAILABLE, why);
	}
}

struct tg_state_op *
tg_state_pg_submit(struct pg_op *o, enum pg_domain dom)
{
	struct pg *pg = o->pg;

	if (pg->closing) {
		fail_op(o, TG_STATE_UNAVAILABLE, "state: closing");
		return NULL;
	}
	if (dom == PG_OWNERS && !pg->owners) {
		fail_op(o, TG_STATE_UNAVAILABLE,
		    "state: no correlation ownership store is configured");
		return NULL;
	}
	if (dom == PG_OUTBOX && !pg->outbox) {
		fail_op(o, TG_STATE_UNAVAILABLE, "state: no webhook outbox is configured");
		return NULL;
	}
	if (dom == PG_RUNS && !pg->runs) {
		fail_op(o, TG_STATE_UNAVAILABLE, "state: no run registry is configured");
		return NULL;
	}
	if (nup(pg) == 0) {
		fail_op(o, TG_STATE_UNAVAILABLE, pg->down);
		return NULL;
	}
	*pg->tail = o;
	pg->tail = &o->next;
	event_active(pg->kick, EV_TIMEOUT, 1);
	return &o->pub;
}

/* The next step of o (its handle already given out). */
void
tg_state_pg_cancel(struct tg_state_op *op)
{
	struct pg_op *o = (struct pg_op *)op, **p;

	if (o->conn != NULL || o->keep) {	/* sent, or a payload write that still runs:
						 * its answer is dropped when it comes */
		o->cancelled = 1;
		return;
	}
	for (p = &o->pg->head; *p != NULL; p = &(*p)->next) {
		if (*p != o)
			continue;
		*p = o->next;
		if (o->pg->tail == &o->next)
			o->pg->tail = p;
		break;
	}
	op_free(o);
}

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

/* Down: answer what k held, close it, and try again after the backoff. */
static void
conn_fail(struct pg_conn *k, const char *msg)
{
	struct pg *pg = k->pg;
	struct timeval tv = { k->backoff_ms / 1000, (k->backoff_ms % 1000) * 1000 };
	struct tg_err e;
	struct pg_op *o = k->op;

	tg_state_pg_err(&e, "state: postgresql unavailable: ", msg, pg->secret);
	snprintf(pg->down, sizeof(pg->down), "%s", e.msg);
	tg_log(TG_LOG_WARN, "state_pg_down", TG_LS("why", e.msg),
	    TG_LI("retry_ms", k->backoff_ms));
	if (k->io != NULL)
		event_free(k->io);
	k->io = NULL;
	PQclear(k->last);
	k->last = NULL;
	PQfinish(k->c);
	k->c = NULL;
	k->op = NULL;
	k->st = PG_DOWN;
	evtimer_add(k->timer, &tv);
	k->backoff_ms = k->backoff_ms * 2 > PG_BACKOFF_MAX ? PG_BACKOFF_MAX : k->backoff_ms * 2;
	if (o != NULL)
		fail_op(o, TG_STATE_UNAVAILABLE, e.msg);
	if (nup(pg) == 0)
		fail_queue(pg, e.msg);
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

/* Prepare the next statement, or take work once all are. */
static void
prepare_next(struct pg_conn *k)
{
	if (k->nprep == PG_NSTMT && k->listener) {	/* then LISTEN (pg_wake.c) */
		if (!PQsendQuery(k->c, "LISTEN " PG_CHANNEL)) {
			conn_fail(k, PQerrorMessage(k->c));
			return;
		}
		flush(k);
		return;
	}
	if (k->nprep >= PG_NSTMT) {
		k->st = PG_IDLE;
		watch(k, EV_READ, 0);
		if (k->listener)
			tg_state_pg_listening(k);
		dispatch(k->pg);
		return;
	}
	if (!PQsendPrepare(k->c, tg_state_pg_stmt_name(k->nprep), tg_state_pg_sql(k->nprep), 0,
	    NULL)) {
		conn_fail(k, PQerrorMessage(k->c));
		return;
	}
	flush(k);
}

const char *
tg_state_pg_stmt_name(int i)
{
	static const char *const names[PG_NSTMT] = {
		"owners_record", "owners_lookup", "owners_prune", "owners_count", "token_get",
		"token_put", "token_invalidate", "poll_lead", "poll_publish", "poll_fetch",
		"poll_release", "notify",
		"ob_add", "ob_set_cid", "ob_abandon", "ob_lease", "ob_chunk", "ob_renew",
		"ob_release", "ob_complete", "ob_next_due", "ob_state", "ob_append", "ob_commit",
		"ob_drop", "ob_set", "ob_get", "ob_list", "ob_redeliver", "ob_redeliver_since",
		"ob_purge", "ob_stats", "ob_hold", "ob_adopt",
		"run_insert", "run_brief", "run_update", "run_count_check", "run_check_failed",
		"run_get", "run_due", "run_next_due", "run_list", "run_unhandled", "run_handled",
		"run_figures", "run_stats", "run_archive", "run_archived", "run_archive_usage",
		"run_expire", "run_purge", "sw_create", "sw_get", "sw_list", "sw_variants",
		"sw_claim", "sw_submitted", "sw_unclaim", "sw_settle", "sw_running",
		"run_many",
	};

	return names[i];
}

/* k is up (c connected and non-blocking): prepare, then work. */
static void
conn_up(struct pg_conn *k)
{
	evtimer_del(k->timer);
	k->backoff_ms = PG_BACKOFF_MIN;
	k->st = PG_PREPARING;
	k->nprep = 0;
	if (k->pg->down[0] != '\0')
		tg_log(TG_LOG_INFO, "state_pg_up", TG_LS("instance", k->pg->instance));
	prepare_next(k);
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

/* The backoff ran out (DOWN: connect) or a connection attempt took too
 * long (CONNECTING: give up). */
static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct pg_conn *k = arg;
	struct timeval tv = { PG_CONNECT_MS / 1000, 0 };

	if (k->st == PG_CONNECTING) {
		conn_fail(k, "connection attempt timed out");
		return;
	}
	k->c = PQconnectStartParams((const char *const *)k->pg->keys,
	    (const char *const *)k->pg->vals, 1);
	if (k->c == NULL || PQstatus(k->c) == CONNECTION_BAD) {
		conn_fail(k, k->c != NULL ? PQerrorMessage(k->c) : "out of memory");
		return;
	}
	tg_state_pg_quiet(k->pg, k->c);
	k->st = PG_CONNECTING;
	evtimer_add(k->timer, &tv);
	watch(k, EV_WRITE, 1);
}

/* A whole answer came for what k was doing (r: its last result, owned). */
static void
complete(struct pg_conn *k, PGresult *r)
{
	ExecStatusType s = PQresultStatus(r);
	const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
	struct pg_op *o = k->op;

	if (PQstatus(k->c) == CONNECTION_BAD || (r != NULL && s == PGRES_FATAL_ERROR &&
	    state != NULL && (!strncmp(state, "08", 2) || !strncmp(state, "57", 2)))) {
		conn_fail(k, PQerrorMessage(k->c));
	} else if (k->st == PG_PREPARING) {
		if (s != PGRES_COMMAND_OK)
			conn_fail(k, PQerrorMessage(k->c));
		else {
			k->nprep++;
			prepare_next(k);
		}
	} else if (o != NULL) {
		k->op = NULL;
		k->st = PG_IDLE;
		o->conn = NULL;
		tg_state_pg_lat(k->pg, tg_clock_mono_us() - o->sent_us);
		if (s == PGRES_COMMAND_OK || s == PGRES_TUPLES_OK)
			o->res.rc = TG_STATE_OK;
		else {
			/* A unique key taken (23505): the record exists already. */
			o->res.rc = state != NULL && !strcmp(state, "23505") ? TG_STATE_CONFLICT :
			    TG_STATE_ERROR;
			tg_state_pg_err(&o->res.err, "state: postgresql: ",
			    PQresultErrorMessage(r), k->pg->secret);
		}
		finish(o, r);
		dispatch(k->pg);
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
	if (k->st == PG_IDLE)
		return;
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

/* Hand queued operations to idle connections, oldest first. */
static void
dispatch(struct pg *pg)
{
	struct pg_conn *k;
	struct pg_op *o;
	int i;

	for (i = 0; i < PG_POOL && pg->head != NULL; i++) {
		k = &pg->conn[i];
		if (k->st != PG_IDLE)
			continue;
		o = pg->head;
		pg->head = o->next;
		if (pg->head == NULL)
			pg->tail = &pg->head;
		o->next = NULL;
		o->conn = k;
		o->sent_us = tg_clock_mono_us();
		k->op = o;
		k->st = PG_BUSY;
		if (!PQsendQueryPrepared(k->c, tg_state_pg_stmt_name(o->stmt), o->nparams,
		    (const char *const *)o->val, o->len, o->fmt, o->binary)) {
			conn_fail(k, PQerrorMessage(k->c));
			continue;
		}
		flush(k);
	}
}

static void
on_kick(evutil_socket_t fd, short what, void *arg)
{
	dispatch(arg);
}

void
tg_state_pg_pool_start(struct pg *pg, PGconn *first)
{
	struct timeval now = { 0, 0 };
	int i;

	pg->tail = &pg->head;
	pg->kick = event_new(pg->base, -1, 0, on_kick, pg);
	for (i = 0; i < PG_POOL; i++) {
		pg->conn[i].pg = pg;
		pg->conn[i].backoff_ms = PG_BACKOFF_MIN;
		pg->conn[i].timer = evtimer_new(pg->base, on_timer, &pg->conn[i]);
	}
	pg->conn[0].listener = 1;
	pg->conn[0].c = first;
	conn_up(&pg->conn[0]);
	for (i = 1; i < PG_POOL; i++)
		evtimer_add(pg->conn[i].timer, &now);
}

void
tg_state_pg_pool_stop(struct pg *pg)
{
	struct pg_conn *k;
	int i;

	pg->closing = 1;
	for (i = 0; i < PG_POOL; i++) {
		k = &pg->conn[i];
		if (k->op != NULL)
			fail_op(k->op, TG_STATE_UNAVAILABLE, "state: closing");
		k->op = NULL;
		if (k->io != NULL)
			event_free(k->io);
		if (k->timer != NULL)
			event_free(k->timer);
		PQclear(k->last);
		PQfinish(k->c);
		memset(k, 0, sizeof(*k));
	}
	fail_queue(pg, "state: closing");
	if (pg->kick != NULL)
		event_free(pg->kick);
	pg->kick = NULL;
}

/* ---- answers shared by several operations ---- */

void
tg_state_pg_answer_done(struct pg_op *o, const PGresult *r)
{
	((tg_state_done_cb)o->cb)(&o->res, o->arg);
}

void
tg_state_pg_answer_num(struct pg_op *o, const PGresult *r)
{
	int64_t n = r != NULL && PQntuples(r) > 0 ? strtoll(PQgetvalue(r, 0, 0), NULL, 10) : 0;

	((tg_state_num_cb)o->cb)(&o->res, n, o->arg);
}
