/*
 * poll_fetch.c - the poll multiplexer's one upstream GET per entry,
 * shared by every waiting caller: the answer is kept (poll_cache.c) and
 * its waiters answered (poll_wait.c) once the observers have it; a final
 * answer over poll.cache_max_body is spooled to a file once (spool.c) and
 * every caller streams it from there, even while it is written; other
 * answers that large are streamed by each caller; 429 + Retry-After from
 * the vendor holds every caller of that entry back.
 *
 * In a fleet (a state shared by several instances, tidegate/state.h) an
 * entry's vendor poll is made by the instance that leads its key; it
 * publishes the answer (terminal or not, up to poll.cache_max_body) for as
 * long as it would reuse it itself and gives the lead up, and the other
 * instances serve that answer: one upstream GET per job per interval for
 * the fleet. An instance that finds the key led and no fresh answer waits
 * for the leader's (FOLLOW_MS, or sooner: a publish wakes the others'
 * entries through the seam's "poll" watch, so long-polls everywhere end on
 * one answer). A leader that gets no answer worth sharing (an error, a 429
 * or 5xx, a spooled or streamed body) gives the lead up. When the state
 * cannot answer, each instance polls for itself. With SQLite nothing of
 * this runs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/clock.h"
#include "tidegate/http.h"
#include "tidegate/log.h"
#include "tidegate/map.h"
#include "tidegate/state.h"
#include "poll_int.h"

#define FOLLOW_MS	200	/* another instance fetches: look for its answer this often */

static void fetch(struct poll_entry *e);

/* The vendor's Retry-After: 0 without one, a second when it is not a
 * number of seconds under a day. */
static int64_t
retry_after_ms(const char *ra)
{
	int64_t ms = tg_http_retry_after_value_ms(ra);

	return ra == NULL ? 0 : ms >= 0 ? ms : 1000;
}

/* The fleet's part (the head of this file): best effort, a failure only
 * costs other instances a poll of their own. */
static void
on_shared_done(const struct tg_state_res *res, void *arg)
{
}

/* This instance's fetch of e ended without an answer to share. */
void
jobs_poll_unlead(struct poll_entry *e)
{
	if (!e->leading)
		return;
	e->leading = 0;
	(void)tg_state_poll_release(e->p->fleet, e->key, on_shared_done, NULL);
}

/* This instance's answer, offered to the other instances for as long as
 * it reuses it itself; the lead goes with it. */
static void
publish(struct poll_entry *e)
{
	struct tg_state_answer a = { e->ans.status, e->ans.ctype, e->ans.body, e->ans.len, 0 };
	int64_t ttl = e->ans.terminal ? jobs_cfg(e->p->gw->rt)->poll_terminal_ttl : jobs_poll_interval(e);

	if (!e->leading || e->ans.status == 429 || e->ans.status >= 500)
		return;		/* jobs_poll_unlead() gives the lead up */
	e->leading = 0;
	(void)tg_state_poll_publish(e->p->fleet, e->key, &a, tg_clock_now_ms(), ttl,
	    on_shared_done, NULL);
}

/* Keep the vendor's answer (shared: another instance's, not published again). */
static void
store(struct poll_entry *e, int status, const struct evkeyvalq *h, struct evbuffer *body,
    int shared)
{
	const char *ra = h ? evhttp_find_header(h, "Retry-After") : NULL;
	const char *ct = h ? evhttp_find_header(h, "Content-Type") : NULL;
	size_t len = body ? evbuffer_get_length(body) : 0;

	if (status == 429 || status == 503)
		e->not_before = tg_clock_mono_ms() + retry_after_ms(ra);
	if (status == 429 && e->ans.at != 0 && e->ans.status != 429)
		return;		/* keep serving the last real state */
	jobs_answer_drop(e);
	e->ans.status = status;
	e->ans.ctype = ct ? tg_xstrdup(ct) : NULL;
	e->ans.retry_after = ra ? tg_xstrdup(ra) : NULL;
	e->ans.body = jobs_answer_body_new(len);
	evbuffer_copyout(body, e->ans.body, len);
	e->ans.body[len] = '\0';
	e->ans.len = len;
	e->ans.at = tg_clock_mono_ms();
	e->ans.terminal = jobs_answer_terminal(e, status, e->ans.body, len);
	if (!shared)
		publish(e);
	(void)jobs_answer_hold(e);
}

/* The fetch is over (its last callback runs: freeing it there is safe). */
static void
fetch_done(struct poll_entry *e)
{
	gw_vcall_cancel(e->call);
	e->call = NULL;
}

/* A new answer is the entry's: its waiters are answered. */
static void
serve(struct poll_entry *e)
{
	if (e->ans.at != 0 && !e->ans.held) {
		jobs_waiters_serve_unkept(e);
		return;
	}
	jobs_waiters_wake(e);
	jobs_poll_schedule(e);
}

static void
on_observed(void *arg)
{
	struct poll_entry *e = arg;

	e->observed = NULL;
	serve(e);
}

/* Observers (the run registry records statuses) have the answer before
 * any caller does; then the waiters are answered. */
static void
answered(struct poll_entry *e)
{
	struct gw_answer a = { e->service, e->op, e->job, e->ans.status, e->ans.body,
		e->ans.len, NULL };

	if (e->job == NULL || e->ans.at == 0) {
		serve(e);
		return;
	}
	e->observed = gw_answer_seen(e->p->gw, &a, on_observed, e);
}

static void
on_fetched(struct poll_entry *e, int status, const struct evkeyvalq *h,
    struct evbuffer *body, enum tg_up_error err, const char *detail)
{
	const char *code;
	char msg[400];

	tg_metrics_inc(e->p->gw->metrics, "tidegate_poll_upstream_total",
	    e->service == GW_DEX ? "service=\"dex\"" : "service=\"sim\"", 1);
	fetch_done(e);
	if (err == TG_UP_TOO_LARGE) {
		jobs_waiters_proxy(e);
	} else if (err != TG_UP_OK) {
		status = gw_upstream_error(err, detail, e->service == GW_DEX ? "dex" : "sim", "API",
		    msg, sizeof(msg), &code);
		/* a queue deadline: sooner than queue_timeout is unlikely to fare better */
		jobs_waiters_fail(e, status, code, msg, err == TG_UP_BUSY ?
		    (int)((e->p->gw->rt->cfg.queue_timeout + 999) / 1000) :
		    err == TG_UP_DOWN ? e->f_ra : 0);
	} else {
		store(e, status, h, body, 0);
		answered(e);
	}
	jobs_poll_unlead(e);
}

/* ---- the shared fetch, streamed: kept in memory up to cache_max_body,
 * then spooled (a final answer) or abandoned to pass-through ---- */

static void
on_f_head(struct gw_vcall *c, int status, const struct evkeyvalq *h, void *arg)
{
	struct poll_entry *e = arg;

	e->f_status = status;
	e->f_hdr = h;
}

/* A final answer by its status alone, so it can be spooled before it is whole. */
static int
spoolable(const struct poll_entry *e)
{
	if (e->f_status != 200 || jobs_cfg(e->p->gw->rt)->poll_spool_max_bytes <= 0)
		return 0;
	if (e->op == TG_OP_DEX_EXPORT_GET || e->op == TG_OP_SIM_RESULTS)
		return 1;
	return (e->op == TG_OP_DEX_IMPORT_RESULT || e->op == TG_OP_DEX_IMPORT_FAILED) &&
	    tg_map_get(e->p->imports_done, e->job) != NULL;
}

/* Every caller waiting on e follows the spool from now on. */
static int
spool_start(struct poll_entry *e)
{
	const struct jobs_cfg *c = jobs_cfg(e->p->gw->rt);
	const char *ct = e->f_hdr ? evhttp_find_header(e->f_hdr, "Content-Type") : NULL;
	struct gw_req *r;
	struct tg_err err;

	e->p->spool.max = c->poll_spool_max_bytes;
	e->writing = jobs_spool_new(e->p->gw, c->spool_dir_path, e->f_status, ct, &e->p->spool,
	    &err);
	if (e->writing == NULL) {
		tg_log(TG_LOG_WARN, "spool_failed", TG_LS("reason", err.msg));
		return -1;
	}
	tg_metrics_inc(e->p->gw->metrics, "tidegate_poll_spooled_total", "", 1);
	if (jobs_spool_append(e->writing, e->fbuf) != 0)
		return -1;
	while ((r = jobs_waiter_first(e)) != NULL) {
		jobs_waiter_remove(r);
		jobs_spool_serve(e->writing, r, WAITER(r)->wait_until ? "long-poll" : "spool");
	}
	return 0;
}

/* The answer cannot be shared: every caller streams its own copy. */
static void
give_up(struct poll_entry *e)
{
	gw_vcall_cancel(e->call);
	e->call = NULL;
	jobs_poll_unlead(e);
	jobs_spool_unref(e->writing);	/* its readers are reset */
	e->writing = NULL;
	jobs_waiters_proxy(e);
}

static void
on_f_body(struct gw_vcall *c, struct evbuffer *buf, void *arg)
{
	struct poll_entry *e = arg;
	size_t max = (size_t)jobs_cfg(e->p->gw->rt)->poll_cache_max_body;

	if (e->writing != NULL) {
		if (jobs_spool_append(e->writing, buf) != 0)
			give_up(e);
		return;
	}
	if (evbuffer_get_length(e->fbuf) + evbuffer_get_length(buf) <= max) {
		evbuffer_add_buffer(e->fbuf, buf);
		return;
	}
	evbuffer_add_buffer(e->fbuf, buf);
	if (!spoolable(e) || spool_start(e) != 0)
		give_up(e);
}

/* The spooled answer is whole: it is the entry's answer now. */
static void
spool_done(struct poll_entry *e, enum tg_up_error err)
{
	struct jobs_spool *s = e->writing;

	tg_metrics_inc(e->p->gw->metrics, "tidegate_poll_upstream_total",
	    e->service == GW_DEX ? "service=\"dex\"" : "service=\"sim\"", 1);
	e->writing = NULL;
	fetch_done(e);
	jobs_poll_unlead(e);
	jobs_spool_end(s, err == TG_UP_OK);
	if (err != TG_UP_OK) {
		jobs_spool_unref(s);
		return;
	}
	jobs_answer_drop(e);
	e->ans.status = e->f_status;
	e->ans.spool = s;
	e->ans.at = tg_clock_mono_ms();
	e->ans.terminal = 1;
	(void)jobs_answer_hold(e);	/* no bytes in memory: only its place on the LRU list */
}

static void
on_f_done(struct gw_vcall *c, enum tg_up_error err, void *arg)
{
	struct poll_entry *e = arg;
	const struct tg_up_req *u = gw_vcall_upstream(c);

	if (e->writing != NULL) {
		spool_done(e, err);
		return;
	}
	e->f_ra = u != NULL ? tg_up_req_retry_after(u) : 0;
	on_fetched(e, e->f_status, err == TG_UP_OK ? e->f_hdr : NULL,
	    err == TG_UP_OK ? e->fbuf : NULL, err, u != NULL ? tg_up_req_detail(u) : NULL);
	evbuffer_drain(e->fbuf, evbuffer_get_length(e->fbuf));
}

static void
on_f_no_token(struct gw_vcall *c, const char *why, int retry_after, void *arg)
{
	struct poll_entry *e = arg;
	const char *code;
	char what[48], msg[640];
	int status;

	snprintf(what, sizeof(what), "could not obtain a %s vendor token",
	    e->service == GW_DEX ? "dex" : "sim");
	status = gw_token_error(e->p->gw->rt->svc[e->service].tokens, what, why, msg,
	    sizeof(msg), &code);
	fetch_done(e);
	jobs_poll_unlead(e);
	jobs_waiters_fail(e, status, code, msg, retry_after > 0 ? retry_after : 1);
}

static void
f_headers(struct gw_vcall *c, struct evkeyvalq *h, void *arg)
{
	struct poll_entry *e = arg;

	evhttp_add_header(h, "Accept", "application/json");
	e->f_status = 0;	/* a new attempt (a 401 replayed) starts afresh */
	e->f_hdr = NULL;
	evbuffer_drain(e->fbuf, evbuffer_get_length(e->fbuf));
}

static const struct gw_vcall_cbs fetch_cbs = { on_f_head, on_f_body, on_f_done,
	on_f_no_token, f_headers };

/* One GET for every caller of e, with the gateway's token (or the caller's
 * own, in caller-token mode), on behalf of the first caller still waiting:
 * its request id and trace go upstream (trace.c). */
static void
fetch(struct poll_entry *e)
{
	struct gw_vcall_req q;
	struct jobs_req *first = TAILQ_FIRST(&e->waiters);
	struct gw_trace t;

	memset(&q, 0, sizeof(q));
	if (first != NULL && first->r != NULL) {
		gw_trace_of_req(&t, first->r);
		q.trace = &t;
	}
	q.rt = e->p->gw->rt;
	q.service = e->service;
	q.method = EVHTTP_REQ_GET;
	q.uri = e->uri;
	q.bearer = e->bearer;
	q.klass = TG_UP_CLASS_POLL;	/* first in the vendor's budget */
	e->call = gw_vcall_start(&q, &fetch_cbs, e);
}

/* A shared answer is fresh until a->expires_at: e reuses it that long. */
static void
keep_shared(struct poll_entry *e, const struct tg_state_answer *a)
{
	struct evkeyvalq h;
	struct evbuffer *b;
	int64_t left = a->expires_at - tg_clock_now_ms(), iv;

	TAILQ_INIT(&h);
	if (a->content_type != NULL)
		evhttp_add_header(&h, "Content-Type", a->content_type);
	b = evbuffer_new();
	evbuffer_add(b, a->body, a->len);
	store(e, a->status, &h, b, 1);
	evbuffer_free(b);
	evhttp_clear_headers(&h);
	iv = jobs_poll_interval(e);
	if (!e->ans.terminal && e->ans.at != 0 && left < iv)
		e->ans.at -= iv - (left > 0 ? left : 0);
}

/* Another instance's answer for e; none yet: its leader is fetching,
 * look again soon (or when its publish wakes e). */
static void
on_shared(const struct tg_state_res *res, const struct tg_state_answer *a, void *arg)
{
	struct poll_entry *e = arg;
	struct timeval tv = { 0, FOLLOW_MS * 1000 };

	e->lead_op = NULL;
	if (res->rc == TG_STATE_NOT_FOUND) {
		evtimer_add(e->timer, &tv);
		return;
	}
	if (res->rc != TG_STATE_OK || a == NULL) {
		fetch(e);	/* the state cannot say: poll for this instance */
		return;
	}
	keep_shared(e, a);
	answered(e);
}

/* The fleet said whether this instance leads e's key (led): poll, or
 * follow the leader's answer. */
static void
led_known(struct poll_entry *e, int led)
{
	struct tg_state_op *op;

	if (led) {
		e->leading = 1;
		fetch(e);
		return;
	}
	op = tg_state_poll_fetch(e->p->fleet, e->key, tg_clock_now_ms(), on_shared, e);
	if (op != NULL)
		e->lead_op = op;
}

static void
on_lead(const struct tg_state_res *res, int64_t n, void *arg)
{
	struct poll_entry *e = arg;

	e->lead_op = NULL;
	if (res->rc != TG_STATE_OK) {
		fetch(e);	/* the state cannot say: this instance polls */
		return;
	}
	led_known(e, n == 1);
}

/* The vendor is to be asked for e: by this instance alone, or in a fleet
 * when it leads e's key, else the leader's answer is used. */
void
jobs_poll_lead(struct poll_entry *e)
{
	struct tg_state_op *op;

	if (e->p->fleet == NULL) {
		fetch(e);
		return;
	}
	op = tg_state_poll_lead(e->p->fleet, e->key, tg_clock_now_ms(),
	    jobs_cfg(e->p->gw->rt)->poll_max_interval, on_lead, e);
	if (op != NULL)
		e->lead_op = op;	/* answered later */
}

/* A first poll: its owner lookup asked for the lead already (jobs.c). */
void
jobs_poll_lead_as(struct poll_entry *e, char *key, int led)
{
	if (e->p->fleet == NULL || key == NULL || strcmp(key, e->key) != 0) {
		jobs_poll_lead_drop(e->p, key, led);
		jobs_poll_lead(e);
		return;
	}
	free(key);
	led_known(e, led);
}

void
jobs_poll_lead_drop(struct jobs_poll *p, char *key, int led)
{
	struct poll_entry *e;

	if (key == NULL)
		return;
	e = p != NULL ? tg_map_get(p->entries, key) : NULL;
	if (led && p != NULL && p->fleet != NULL && (e == NULL || !poll_busy(e)))
		(void)tg_state_poll_release(p->fleet, key, on_shared_done, NULL);
	free(key);
}

/* Another instance published an answer for key (NULL: perhaps for any):
 * entries with callers waiting and not terminal yet take it now. */
void
jobs_poll_on_wake(const char *topic, const char *key, void *arg)
{
	struct jobs_poll *p = arg;
	struct poll_entry *e;
	const char *k;
	void *v;
	size_t pos = 0;

	if (key != NULL) {
		e = tg_map_get(p->entries, key);
		if (e != NULL && !TAILQ_EMPTY(&e->waiters) && !poll_busy(e) && !e->ans.terminal)
			jobs_poll_lead(e);
		return;
	}
	while (tg_map_next(p->entries, &pos, &k, &v)) {
		e = v;
		if (!TAILQ_EMPTY(&e->waiters) && !poll_busy(e) && !e->ans.terminal)
			jobs_poll_lead(e);
	}
}

void
jobs_poll_on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct poll_entry *e = arg;

	if (!TAILQ_EMPTY(&e->waiters) && !poll_busy(e))
		jobs_poll_lead(e);
}

void
jobs_poll_schedule(struct poll_entry *e)
{
	int64_t now = tg_clock_mono_ms(), at = e->ans.at + jobs_poll_interval(e), ms;
	struct timeval tv;

	if (TAILQ_EMPTY(&e->waiters) || e->ans.terminal)
		return;
	if (at < e->not_before)
		at = e->not_before;
	ms = at > now ? at - now : 0;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(e->timer, &tv);
}
