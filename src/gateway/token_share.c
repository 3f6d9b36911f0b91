/*
 * token_share.c - the vendor tokens of a fleet: what a service's token
 * source (src/auth/token.c) asks before it logs in, and tells after, kept
 * through the state seam (token records, and a lease on "login:<service>"
 * so that one instance of the fleet logs in while the others wait for its
 * token). A token the vendor refused is never taken from the record
 * again, whatever order the fleet's writes land in. With SQLite the
 * records are this instance's memory and it always leads: it logs in
 * exactly as a lone gateway. Used by vendor.c, which hands these
 * callbacks to the source (tg_token_set_share).
 *
 * A follower looks again until the record holds a token the source wants
 * (one expiring after what it asked: a newer login than its own) or the
 * lead is free; every look is a state operation with its deadline, and a
 * state that cannot answer makes this instance log in itself. It looks
 * when the leader's write wakes it (topic "token", watched only while it
 * follows), when wake-ups may have been lost, and on a timer for a lead
 * that runs out (a leader whose login failed or that died): FOLLOW_MS,
 * doubling after each look up to FOLLOW_MAX_MS, so that a fleet waiting
 * for a slow or failing login does not poll the database four times a
 * second per instance. The source waits for all that at most wait_ms: the
 * leader's lead, and the deadlines of the looks after it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "tidegate/clock.h"
#include "tidegate/state.h"
#include "gw.h"

#define FOLLOW_MS	250		/* a follower's first look again for the leader's token, */
#define FOLLOW_MAX_MS	2000		/* doubling up to this */
#define WAKE_TOPIC	"token"

struct gw_share {
	struct tg_state *st;
	char service[8];
	char lead_key[24];		/* "login:<service>" */
	int64_t lead_ttl_ms;		/* the leader's login may take this long */
	struct event *ev;		/* the next look (deferred, or after follow_ms) */
	struct tg_state_op *op;
	struct tg_state_watch *watch;	/* the leader's write, while following */
	int64_t follow_ms;		/* the timer's next wait */
	int woken;			/* a wake-up came while a look was under way */
	int64_t fresh_until;
	void (*answer)(void *ts, const char *token, int64_t expires_at_ms);
	void *ts;
	char *refused;			/* the token the vendor refused last: never taken
					 * from the record again (its invalidation may
					 * still be on its way) */
};

static void look(evutil_socket_t fd, short what, void *arg);

static void
finish(struct gw_share *s, const char *token, int64_t expires_at)
{
	void (*answer)(void *, const char *, int64_t) = s->answer;

	s->answer = NULL;
	tg_state_unwatch(s->st, s->watch);
	s->watch = NULL;
	if (answer != NULL)
		answer(s->ts, token, expires_at);
}

/* Lead: log in here. Follow: look for the leader's token again when woken,
 * or after follow_ms (doubled for the next time). */
static void
on_led(const struct tg_state_res *res, int64_t lead, void *arg)
{
	struct gw_share *s = arg;
	struct timeval tv = { s->follow_ms / 1000, s->follow_ms % 1000 * 1000 };

	s->op = NULL;
	if (res->rc != 0 || lead == 1) {
		finish(s, NULL, 0);	/* leader, or no fleet to ask: this instance logs in */
		return;
	}
	if (s->woken) {
		s->woken = 0;
		event_active(s->ev, EV_TIMEOUT, 0);
		return;
	}
	evtimer_add(s->ev, &tv);
	if ((s->follow_ms *= 2) > FOLLOW_MAX_MS)
		s->follow_ms = FOLLOW_MAX_MS;
}

/* The leader wrote a token (what: its service), or wake-ups were lost. */
static void
on_wake(const char *topic, const char *what, void *arg)
{
	struct gw_share *s = arg;

	(void)topic;
	if (s->answer == NULL || (what != NULL && strcmp(what, s->service) != 0))
		return;
	if (s->op != NULL) {
		s->woken = 1;	/* the look under way may have missed it */
		return;
	}
	evtimer_del(s->ev);
	event_active(s->ev, EV_TIMEOUT, 0);
}

static void
on_record(const struct tg_state_res *res, const struct tg_state_token *t, void *arg)
{
	struct gw_share *s = arg;

	s->op = NULL;
	if (res->rc == 0 && t != NULL && t->token != NULL && t->expires_at > s->fresh_until &&
	    (s->refused == NULL || strcmp(t->token, s->refused) != 0)) {
		finish(s, t->token, t->expires_at);
		return;
	}
	s->op = tg_state_poll_lead(s->st, s->lead_key, tg_clock_now_ms(), s->lead_ttl_ms,
	    on_led, s);
}

static void
look(evutil_socket_t fd, short what, void *arg)
{
	struct gw_share *s = arg;

	s->op = tg_state_token_get(s->st, s->service, on_record, s);
}

/* Answered from the loop, never inside: the first look is an event. */
static void
share_fetch(void *arg, int64_t fresh_until_ms,
    void (*answer)(void *ts, const char *token, int64_t expires_at_ms), void *ts)
{
	struct gw_share *s = arg;

	s->fresh_until = fresh_until_ms;
	s->answer = answer;
	s->ts = ts;
	s->follow_ms = FOLLOW_MS;
	s->woken = 0;
	if (s->watch == NULL)	/* before the first look: a write after it wakes */
		s->watch = tg_state_watch(s->st, WAKE_TOPIC, on_wake, s);
	event_active(s->ev, EV_TIMEOUT, 0);
}

static void
share_cancel(void *arg)
{
	struct gw_share *s = arg;

	tg_state_cancel(s->op);
	s->op = NULL;
	evtimer_del(s->ev);
	s->answer = NULL;
	tg_state_unwatch(s->st, s->watch);
	s->watch = NULL;
}

static void
on_written(const struct tg_state_res *res, void *arg)
{
	(void)res;	/* best effort: the next login of the fleet writes again */
}

static void
share_publish(void *arg, const char *token, int64_t expires_at_ms)
{
	struct gw_share *s = arg;
	struct tg_state_token t = { token, expires_at_ms };

	(void)tg_state_token_put(s->st, s->service, &t, on_written, NULL);
}

static void
share_invalidate(void *arg, const char *token)
{
	struct gw_share *s = arg;

	if (token != NULL) {
		free(s->refused);
		s->refused = tg_xstrdup(token);
	}
	(void)tg_state_token_invalidate(s->st, s->service, token, on_written, NULL);
}

struct gw_share *
gw_share_new(struct gw *gw, const char *service, int64_t login_timeout_ms,
    struct tg_token_share *out)
{
	struct gw_share *s = tg_xcalloc(1, sizeof(*s));

	s->st = gw->state;
	snprintf(s->service, sizeof(s->service), "%s", service);
	snprintf(s->lead_key, sizeof(s->lead_key), "login:%s", service);
	s->lead_ttl_ms = login_timeout_ms > 0 ? login_timeout_ms : 10000;
	s->ev = evtimer_new(gw->base, look, s);
	out->fetch = share_fetch;
	out->cancel = share_cancel;
	out->publish = share_publish;
	out->invalidate = share_invalidate;
	out->arg = s;
	/* A follower waits for the leader's lead to run out at most, asking
	 * twice (a record, a lead) after it: then it leads itself. */
	out->wait_ms = s->lead_ttl_ms + 2 * tg_state_timeout_ms(s->st) + FOLLOW_MAX_MS + 1000;
	return s;
}

void
gw_share_free(struct gw_share *s)
{
	if (s == NULL)
		return;
	share_cancel(s);
	event_free(s->ev);
	if (s->refused != NULL)
		explicit_bzero(s->refused, strlen(s->refused));
	free(s->refused);
	free(s);
}
