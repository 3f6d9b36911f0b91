/*
 * pg_wake.c - what the PostgreSQL backend hears across a fleet, and what
 * it says of itself (include/tidegate/state.h: watch, health).
 *
 * Wake-ups: one channel, PG_CHANNEL (sent by shared.c), whose payload is
 * "<topic>\n<instance>\n<what>". Connection 0 of the pool LISTENs on it
 * once its statements are prepared (pg_conn.c) and keeps working as the
 * others; with state.listen_url (or behind a transaction pooler, where a
 * server connection's LISTEN would be whoever's holds it next) a
 * connection of its own, straight to the server, does and nothing else;
 * what PQconsumeInput brings in is handed here, and every
 * other instance's wake-up goes to the seam's watches (state.c). One made
 * by this instance is dropped: it knows already. When the listener
 * connects again, wake-ups sent meanwhile are lost: every watch then
 * hears one without a "what", to look for itself.
 *
 * Health: whether a connection is up and the server answers, and why
 * not; the number and latency (from send to answer) of the server's
 * answers and the wake-ups heard (those sent and the leads held are the
 * seam's, shared.c). Health is down from a connection lost or an operation timed
 * out (pg_op.c) until the server answers again; a server that froze with
 * its sockets open is noticed by the probe even when nothing is asked: a
 * ping (SELECT 1, with the deadline of any operation) once nothing was
 * answered for state.timeout, and at once while health is unsure. A
 * listener of its own is not the pool's health: it is pinged the same way
 * on its own connection (pg_conn.c) and made again when silent, while
 * `listening` says it is not heard from.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "tidegate/clock.h"
#include "tidegate/log.h"
#include "pg.h"

/* The query latency buckets' upper bounds, seconds. */
static const double lat_le[TG_STATE_LAT_BUCKETS] = {
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.01, 0.05, 0.25,
};

void
tg_state_pg_lat(struct pg *pg, int64_t us)
{
	double s = (double)us / 1e6;
	int i;

	for (i = 0; i < TG_STATE_LAT_BUCKETS && s > lat_le[i]; i++)
		;
	pg->lat[i]++;
	pg->lat_sum += s;
	pg->queries++;
}

/* One notification: "<topic>\n<instance>\n<what>" (n borrowed). */
static void
heard(struct pg *pg, const PGnotify *n)
{
	char *p = tg_xstrdup(n->extra != NULL ? n->extra : ""), *from, *what;

	if ((from = strchr(p, '\n')) == NULL || (what = strchr(from + 1, '\n')) == NULL) {
		free(p);
		return;		/* not one of ours */
	}
	*from++ = '\0';
	*what++ = '\0';
	if (strcmp(from, pg->instance) != 0 && pg->wake != NULL) {
		pg->wakeups++;
		pg->wake(pg->wake_ctx, p, what);
	}
	free(p);
}

void
tg_state_pg_notifies(struct pg_conn *k)
{
	PGnotify *n;

	while (k->c != NULL && (n = PQnotifies(k->c)) != NULL) {
		if (strcmp(n->relname, PG_CHANNEL) == 0)
			heard(k->pg, n);
		PQfreemem(n);
	}
}

void
tg_state_pg_listening(struct pg_conn *k)
{
	struct pg *pg = k->pg;

	if (pg->heard && pg->wake != NULL) {
		tg_log(TG_LOG_INFO, "state_pg_listening_again", TG_LS("instance", pg->instance));
		pg->wake(pg->wake_ctx, NULL, NULL);
	}
	pg->heard = 1;
}

void
tg_state_pg_listen(void *impl, void (*wake)(void *ctx, const char *topic, const char *what),
    void *ctx)
{
	struct pg *pg = impl;

	pg->wake = wake;
	pg->wake_ctx = ctx;
}

/* A server's NOTICE (e.g. "relation … already exists, skipping" while
 * migrating): a debug log line, never stderr outside the JSON log. */
static void
on_notice(void *arg, const char *msg)
{
	const struct pg_conn *k = arg;
	struct tg_err e;

	tg_state_pg_err(&e, "", msg, k->secret);
	tg_log(TG_LOG_DEBUG, "state_pg_notice", TG_LS("message", e.msg));
}

void
tg_state_pg_quiet(struct pg_conn *k)
{
	if (k->c != NULL)
		(void)PQsetNoticeProcessor(k->c, on_notice, k);
}

/* ---- health ---- */

void
tg_state_pg_unsure(struct pg *pg, enum pg_unsure u)
{
	struct timeval now = { 0, 0 };

	if (u > pg->unsure)
		pg->unsure = u;
	if (pg->probe_ev != NULL && !pg->closing)
		evtimer_add(pg->probe_ev, &now);	/* ask the connections left */
}

void
tg_state_pg_answered(struct pg *pg)
{
	pg->answered_ms = tg_clock_mono_ms();
	if (pg->unsure == PG_SURE)
		return;
	pg->unsure = PG_SURE;
	tg_log(TG_LOG_INFO, "state_pg_answering", TG_LS("instance", pg->instance));
}

static void
on_ping(struct pg_op *o, const PGresult *r)
{
	o->pg->ping = NULL;
}

/* The probe's next tick: in a second, or state.timeout when shorter. */
static void
probe_arm(struct pg *pg)
{
	int64_t tick = pg->timeout_ms < 1000 ? pg->timeout_ms : 1000;
	struct timeval tv = { tick / 1000, (tick % 1000) * 1000 };

	evtimer_add(pg->probe_ev, &tv);
}

/* Every tick: a ping when health is unsure or nothing was answered for
 * state.timeout, on a connection made (while none is, their reconnects
 * tell). */
static void
on_probe(evutil_socket_t fd, short what, void *arg)
{
	struct pg *pg = arg;
	int i, made = 0;

	for (i = 0; i < PG_POOL; i++)
		made |= pg->conn[i].st >= PG_IDLE;
	if (pg->ping == NULL && made && (pg->unsure != PG_SURE ||
	    tg_clock_mono_ms() - pg->answered_ms >= pg->timeout_ms)) {
		pg->ping = tg_state_pg_op_new(pg, 0, on_ping);
		pg->ping->stmt = PG_PING;
		tg_state_pg_enqueue(pg->ping);
	}
	if (pg->nconn > PG_POOL && pg->lconn->st >= PG_IDLE)
		tg_state_pg_listener_ping(pg->lconn);
	probe_arm(pg);
}

void
tg_state_pg_probe_start(struct pg *pg)
{
	pg->probe_ev = evtimer_new(pg->base, on_probe, pg);
	probe_arm(pg);
}

void
tg_state_pg_probe_stop(struct pg *pg)
{
	if (pg->probe_ev != NULL)
		event_free(pg->probe_ev);
	pg->probe_ev = NULL;
}

void
tg_state_pg_health(const void *impl, struct tg_state_health *h)
{
	const struct pg *pg = impl;
	int i;

	h->up = 0;
	for (i = 0; i < PG_POOL; i++)
		h->conns_ready += pg->conn[i].st >= PG_IDLE;
	h->up = h->conns_ready > 0;
	if (pg->unsure != PG_SURE)
		h->up = 0;
	if (!h->up)
		snprintf(h->reason, sizeof(h->reason), "%s", pg->down[0] != '\0' ? pg->down :
		    "state: postgresql: connecting");
	h->shared = 1;
	h->listening = pg->lconn != NULL && pg->lconn->st >= PG_IDLE &&
	    pg->lconn->nprep > tg_state_pg_conn_nstmt(pg->lconn);
	h->queries = pg->queries;
	memcpy(h->lat_le, lat_le, sizeof(h->lat_le));
	memcpy(h->lat, pg->lat, sizeof(h->lat));
	h->lat_sum = pg->lat_sum;
	h->wakeups = pg->wakeups;
	h->pipelined = pg->pipelined;
}
