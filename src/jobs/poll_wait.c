/*
 * poll_wait.c - the callers waiting on a poll entry and long-polls: a
 * plain poll waits for the entry's next answer; `?wait=N` holds the
 * request until the job is terminal or N seconds pass, and all waiters
 * wake on one upstream answer; an answer too large to share sends every
 * waiter to the vendor, one the budget cannot keep is served and dropped.
 * On SIGTERM every long-poll is answered at once with the job's current
 * state (the vendor's 202 and its Retry-After). Each waiter is its
 * request's jobs_req slot, on its entry's list.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/clock.h"
#include "tidegate/map.h"
#include "poll_int.h"

struct gw_req *
jobs_waiter_first(struct poll_entry *e)
{
	struct jobs_req *q = TAILQ_FIRST(&e->waiters);

	return q != NULL ? q->r : NULL;
}

static void
waiter_unlink(struct jobs_req *q)
{
	struct poll_entry *e = q->poll;

	if (e == NULL)
		return;
	TAILQ_REMOVE(&e->waiters, q, next);
	q->poll = NULL;
	if (q->wait_timer != NULL) {
		event_free(q->wait_timer);
		q->wait_timer = NULL;
	}
}

void
jobs_waiter_remove(struct gw_req *r)
{
	struct jobs_req *q = jobs_req_find(r);

	if (q != NULL)
		waiter_unlink(q);
}

void
jobs_waiter_reply(struct gw_req *r, const struct poll_answer *a, const char *how)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(r->req);
	struct evbuffer *b;
	char age[24];

	jobs_waiter_remove(r);
	if (a->spool != NULL) {
		jobs_spool_serve(a->spool, r, how);
		return;
	}
	b = evbuffer_new();
	jobs_answer_body_ref(a, b);
	snprintf(age, sizeof(age), "%lld", (long long)((tg_clock_mono_ms() - a->at) / 1000));
	evhttp_add_header(h, "Age", age);
	evhttp_add_header(h, "X-Tidegate-Poll", how);
	if (a->retry_after != NULL)
		evhttp_add_header(h, "Retry-After", a->retry_after);
	r->upstream_status = a->status;
	r->origin = how;
	gw_req_reply_vendor(r, a->status, a->ctype ? a->ctype : "application/json", b);
	evbuffer_free(b);
}

/* An answer arrived: terminal and settled ones and plain polls are
 * answered; long-poll waiters on a running job keep waiting for the next. */
void
jobs_waiters_wake(struct poll_entry *e)
{
	struct jobs_req *q, *next;

	for (q = TAILQ_FIRST(&e->waiters); q != NULL; q = next) {
		next = TAILQ_NEXT(q, next);
		if (e->ans.terminal || q->wait_until == 0 || e->passthrough ||
		    jobs_answer_settled(e))
			jobs_waiter_reply(q->r, &e->ans, q->wait_until ? "long-poll" : "fetched");
	}
}

void
jobs_waiters_fail(struct poll_entry *e, int status, const char *code, const char *msg,
    int retry_after)
{
	struct gw_req *r;
	char ra[16];

	snprintf(ra, sizeof(ra), "%d", retry_after);
	while ((r = jobs_waiter_first(e)) != NULL) {
		jobs_waiter_remove(r);
		if (retry_after > 0)
			evhttp_add_header(evhttp_request_get_output_headers(r->req), "Retry-After",
			    ra);
		gw_req_reply_error(r, status, code, msg);
	}
}

/* The body is too large to share: every waiter streams its own copy. */
void
jobs_waiters_proxy(struct poll_entry *e)
{
	struct gw_req *r;

	e->passthrough = 1;
	while ((r = jobs_waiter_first(e)) != NULL) {
		jobs_waiter_remove(r);
		gw_req_continue(r);
	}
}

/* An answer the budget has no room for: every waiter gets it now (a
 * long-poll ends early with the current state), then it is dropped, so
 * the entry asks the vendor again when next polled. */
void
jobs_waiters_serve_unkept(struct poll_entry *e)
{
	struct gw_req *r;

	while ((r = jobs_waiter_first(e)) != NULL)
		jobs_waiter_reply(r, &e->ans, WAITER(r)->wait_until ? "long-poll" : "fetched");
	jobs_answer_clear(&e->ans);
	tg_metrics_inc(e->p->gw->metrics, "tidegate_poll_cache_unkept_total", "", 1);
}

static void
on_wait_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct jobs_req *q = arg;
	struct poll_entry *e = q->poll;

	q->wait_until = 0;	/* from now on an ordinary poll */
	if (e->ans.at != 0 && !poll_busy(e))
		jobs_waiter_reply(q->r, &e->ans, "long-poll");
}

void
jobs_waiter_add(struct poll_entry *e, struct gw_req *r, int64_t wait_ms)
{
	struct jobs_req *q = WAITER(r);
	struct timeval tv;

	q->poll = e;
	TAILQ_INSERT_TAIL(&e->waiters, q, next);
	if (wait_ms <= 0)
		return;
	q->wait_until = tg_clock_mono_ms() + wait_ms;
	q->wait_timer = evtimer_new(e->p->gw->base, on_wait_deadline, q);
	tv.tv_sec = wait_ms / 1000;
	tv.tv_usec = (wait_ms % 1000) * 1000;
	evtimer_add(q->wait_timer, &tv);
}

void
jobs_poll_forget(struct jobs_req *q)
{
	waiter_unlink(q);
	jobs_spool_forget(q);
}

/* SIGTERM: e's long-polls become plain polls, answered now with its
 * answer, or by the fetch under way (or the fleet's answer followed). */
static void
drain_entry(struct poll_entry *e)
{
	struct jobs_req *q, *next;

	for (q = TAILQ_FIRST(&e->waiters); q != NULL; q = next) {
		next = TAILQ_NEXT(q, next);	/* q is freed when its request ends */
		if (q->wait_until == 0)
			continue;
		q->wait_until = 0;
		if (q->wait_timer != NULL) {
			event_free(q->wait_timer);
			q->wait_timer = NULL;
		}
		if (e->ans.at != 0 && !poll_busy(e))
			jobs_waiter_reply(q->r, &e->ans, "long-poll");
	}
}

void
jobs_poll_drain(struct jobs_poll *p)
{
	const char *k;
	void *v;
	size_t pos = 0;

	if (p == NULL)
		return;
	while (tg_map_next(p->entries, &pos, &k, &v))
		drain_entry(v);
}
