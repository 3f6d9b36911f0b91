/*
 * poll.c - the poll multiplexer. Callers of the asynchronous APIs poll
 * (export readiness, import status/result/failed, simulation status and
 * results); the gateway turns N callers polling one job into one upstream
 * request per interval:
 *
 * - an entry per (service, caller identity, operation, job id);
 * - one upstream GET in flight per entry, shared by every waiting caller;
 * - terminal answers (an export that is ready, an import with processed ==
 *   total, a simulation completed or failed, its results) are cached and
 *   served without upstream calls; others are reused for an interval that
 *   grows as the job ages;
 * - the answers held count against one byte budget (poll.cache_max_bytes):
 *   to make room the least recently used answer no request waits on is
 *   evicted (its entry asks the vendor again when next polled), and an
 *   answer that still does not fit is served to its waiters and dropped;
 * - a final answer over poll.cache_max_body is spooled to a file once
 *   (spool.c) and every caller streams it from there, even while it is
 *   written; other answers that large are streamed by each caller;
 * - 429 + Retry-After from the vendor holds every caller of that entry back;
 * - `?wait=N` long-polls: the request is held until the job is terminal or N
 *   seconds pass, and all waiters wake on one upstream answer; on SIGTERM
 *   every long-poll is answered at once with the job's current state (the
 *   vendor's 202 and its Retry-After), and polls made while draining do
 *   not wait, so a drain never waits on a job.
 * - in a fleet (a state shared by several instances, tidegate/state.h) an
 *   entry's vendor poll is made by the instance that leads its key; it
 *   publishes the answer (terminal or not, up to poll.cache_max_body) for
 *   as long as it would reuse it itself and gives the lead up, and the
 *   other instances serve that answer: one upstream GET per job per
 *   interval for the fleet. An instance that finds the key led and no
 *   fresh answer waits for the leader's (FOLLOW_MS, or sooner: a publish
 *   wakes the others' entries through the seam's "poll" watch, so
 *   long-polls everywhere end on one answer). A leader that gets no
 *   answer worth sharing (an error, a 429 or 5xx, a spooled or streamed
 *   body) gives the lead up. When the state cannot answer, each instance
 *   polls for itself. With SQLite nothing of this runs.
 *
 * Called from feature.c for the pollable GET operations (after jobs.c has
 * read the job id and checked who may read it, maybe later:
 * jobs_poll_resume), and by the webhook payload
 * fetcher (gw_peek) before it polls the vendor itself; owns its
 * entries, which outlive the requests and are swept when idle.
 */
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/clock.h"
#include "tidegate/crypto.h"
#include "tidegate/http.h"
#include "tidegate/json.h"
#include "tidegate/log.h"
#include "tidegate/map.h"
#include "tidegate/state.h"
#include "jobs_int.h"

#define FOLLOW_MS	200	/* another instance fetches: look for its answer this often */

struct poll_answer {
	int status;
	char *ctype, *retry_after;
	char *body;
	size_t len;
	int64_t at;		/* monotonic ms; 0 when none */
	int terminal;
	int held;		/* counted in the budget, on the LRU list */
	struct jobs_spool *spool;	/* a final answer too large for memory (spool.c) */
};

struct poll_entry {
	char *key;
	struct jobs_poll *p;
	int service;		/* GW_DEX / GW_SIM: the runtime is looked up at fetch time */
	enum tg_op op;
	char *uri;		/* upstream path and query */
	char *bearer;		/* the caller's own token in caller-token mode, else NULL */
	char *job;		/* correlationId or simulation id */
	struct poll_answer ans;
	int64_t created, not_before, used;	/* monotonic ms */
	struct gw_vcall *call;	/* the fetch in flight (it holds the runtime) */
	struct tg_state_op *lead_op;	/* asking the state seam who polls (lead()) */
	int leading;		/* this instance leads the key in the fleet: publish or release */
	struct gw_observed *observed;	/* observers still hold the new answer */
	struct evbuffer *fbuf;	/* the answer in flight, up to cache_max_body */
	int f_status;
	int f_ra;		/* the fetch's Retry-After when every origin is out */
	const struct evkeyvalq *f_hdr;	/* borrowed from on_f_head to on_f_done */
	struct jobs_spool *writing;	/* the answer in flight, spooled */
	int passthrough;
	TAILQ_HEAD(, jobs_req) waiters;
	struct event *timer;	/* next poll for long-poll waiters */
	TAILQ_ENTRY(poll_entry) lru;	/* while ans.held */
};

struct jobs_poll {
	struct gw *gw;
	struct tg_map *entries;		/* key -> struct poll_entry */
	struct tg_map *imports_done;	/* correlationId -> (void *)1 */
	struct event *sweep;
	TAILQ_HEAD(, poll_entry) lru;	/* held answers, least recently used first */
	size_t bytes;			/* body bytes of the held answers */
	struct jobs_spool_stats spool;	/* spool files, all entries */
	struct tg_state *fleet;		/* gw->state when shared by a fleet, else NULL */
	struct tg_state_watch *watch;	/* the other instances' publishes */
};

static void fetch(struct poll_entry *e);
static void lead(struct poll_entry *e);

/* A fetch (or the question who makes it) is under way. */
static int
busy(const struct poll_entry *e)
{
	return e->call != NULL || e->lead_op != NULL || e->observed != NULL;
}

/* ---- answers ---- */

/* A held body is shared with the replies being written from it (by
 * reference, never copied per caller): freed when the answer and every
 * such reply have let go of it. */
struct body_ref {
	size_t refs;
	char data[];
};

static char *
body_new(size_t len)
{
	struct body_ref *b = tg_xmalloc(sizeof(*b) + len + 1);

	b->refs = 1;
	return b->data;
}

static struct body_ref *
body_of(char *data)
{
	return (struct body_ref *)(void *)(data - offsetof(struct body_ref, data));
}

static void
body_unref(char *data)
{
	if (data != NULL && --body_of(data)->refs == 0)
		free(body_of(data));
}

/* evbuffer_add_reference's cleanup: the reply's bytes are written or gone. */
static void
on_body_sent(const void *data, size_t len, void *arg)
{
	body_unref(arg);
}

static void
answer_clear(struct poll_answer *a)
{
	free(a->ctype);
	free(a->retry_after);
	body_unref(a->body);
	jobs_spool_unref(a->spool);
	memset(a, 0, sizeof(*a));
}

/* Forget e's answer, and its bytes when they were counted. */
static void
answer_drop(struct poll_entry *e)
{
	if (e->ans.held) {
		TAILQ_REMOVE(&e->p->lru, e, lru);
		e->p->bytes -= e->ans.len;
	}
	answer_clear(&e->ans);
}

/* e's answer was just used: the last to be evicted. */
static void
touch(struct poll_entry *e)
{
	if (!e->ans.held)
		return;
	TAILQ_REMOVE(&e->p->lru, e, lru);
	TAILQ_INSERT_TAIL(&e->p->lru, e, lru);
}

/*
 * Evict the least recently used answers no request waits on until need
 * more bytes fit in poll.cache_max_bytes: 1 when they fit. Answers with
 * waiters stay (a long-poll is answered from its entry's answer).
 */
static int
make_room(struct jobs_poll *p, size_t need)
{
	size_t max = (size_t)jobs_cfg(p->gw->rt)->poll_cache_max_bytes;
	struct poll_entry *e, *next;

	if (need > max)
		return 0;
	for (e = TAILQ_FIRST(&p->lru); e != NULL && p->bytes + need > max; e = next) {
		next = TAILQ_NEXT(e, lru);
		if (!TAILQ_EMPTY(&e->waiters))
			continue;
		answer_drop(e);
		tg_metrics_inc(p->gw->metrics, "tidegate_poll_cache_evictions_total", "", 1);
	}
	return p->bytes + need <= max;
}

/* Count e's answer in the budget, evicting others; 0 when it does not fit. */
static int
hold(struct poll_entry *e)
{
	if (!make_room(e->p, e->ans.len))
		return 0;
	e->ans.held = 1;
	e->p->bytes += e->ans.len;
	TAILQ_INSERT_TAIL(&e->p->lru, e, lru);
	return 1;
}

static int
json_int(yajl_val v, const char *k, long long *out)
{
	yajl_val x = tg_json_get(v, k);

	if (x == NULL || !YAJL_IS_INTEGER(x))
		return -1;
	*out = YAJL_GET_INTEGER(x);
	return 0;
}

/* Is this answer the job's last word? */
static int
is_terminal(struct poll_entry *e, int status, const char *body, size_t len)
{
	const char *st;
	long long total, processed;
	yajl_val v;
	int t = 0;

	switch (e->op) {
	case TG_OP_DEX_EXPORT_GET:
		return status == 200;
	case TG_OP_SIM_RESULTS:
		return status == 200;
	case TG_OP_DEX_IMPORT_RESULT:
	case TG_OP_DEX_IMPORT_FAILED:
		return status == 200 && tg_map_get(e->p->imports_done, e->job) != NULL;
	case TG_OP_DEX_IMPORT_STATUS:
	case TG_OP_SIM_STATUS:
		if (status != 200 || (v = tg_json_parse(body, len, NULL)) == NULL)
			return 0;
		if (e->op == TG_OP_SIM_STATUS) {
			st = tg_json_get_str(v, "status");
			t = st && (strcmp(st, "COMPLETED") == 0 || strcmp(st, "FAILED") == 0);
		} else if (json_int(v, "total", &total) == 0 &&
		    json_int(v, "processed", &processed) == 0) {
			t = processed >= total;
			if (t)
				tg_map_put(e->p->imports_done, e->job, (void *)1);
		}
		yajl_tree_free(v);
		return t;
	default:
		return 0;
	}
}

/* Non-terminal answers are reused for an interval that grows with age. */
static int64_t
interval(const struct poll_entry *e)
{
	const struct jobs_cfg *c = jobs_cfg(e->p->gw->rt);
	int64_t age = tg_clock_mono_ms() - e->created, iv = c->poll_interval;

	if (age > c->poll_backoff_after)
		iv += (age - c->poll_backoff_after) * c->poll_interval / c->poll_backoff_after;
	return iv < c->poll_max_interval ? iv : c->poll_max_interval;
}

/* An import's result or failed rows read before its status said it was
 * done: the status has said so since, so the rows read then are partial. */
static int
overtaken(const struct poll_entry *e)
{
	return (e->op == TG_OP_DEX_IMPORT_RESULT || e->op == TG_OP_DEX_IMPORT_FAILED) &&
	    !e->ans.terminal && tg_map_get(e->p->imports_done, e->job) != NULL;
}

static int
fresh(const struct poll_entry *e)
{
	if (e->ans.at == 0 || e->observed != NULL || overtaken(e))
		return 0;	/* none yet, not served before its observers have it, or
				 * partial rows of an import since done */
	return e->ans.terminal || tg_clock_mono_ms() - e->ans.at < interval(e) ||
	    tg_clock_mono_ms() < e->not_before;
}

/* ---- waiters ---- */

/* Waiters are the jobs_req slots of their requests. */
#define WAITER(r)	jobs_req_of(r)

static struct gw_req *
first_waiter(struct poll_entry *e)
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

static void
waiter_remove(struct gw_req *r)
{
	struct jobs_req *q = jobs_req_find(r);

	if (q != NULL)
		waiter_unlink(q);
}

static void
reply_answer(struct gw_req *r, const struct poll_answer *a, const char *how)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(r->req);
	struct evbuffer *b;
	char age[24];

	waiter_remove(r);
	if (a->spool != NULL) {
		jobs_spool_serve(a->spool, r, how);
		return;
	}
	b = evbuffer_new();
	if (a->len > 0) {
		body_of(a->body)->refs++;
		evbuffer_add_reference(b, a->body, a->len, on_body_sent, a->body);
	}
	snprintf(age, sizeof(age), "%lld", (long long)((tg_clock_mono_ms() - a->at) / 1000));
	evhttp_add_header(h, "Age", age);
	evhttp_add_header(h, "X-Tidegate-Poll", how);
	if (a->retry_after != NULL)
		evhttp_add_header(h, "Retry-After", a->retry_after);
	r->upstream_status = a->status;
	r->origin = how;
	gw_req_reply_buf(r, a->status, a->ctype ? a->ctype : "application/json", b);
	evbuffer_free(b);
}

/* An answer no wait changes: the vendor's refusal of the read itself (404
 * an unknown or expired id, 400, 401, 403, 410), not a job still running,
 * a vendor error or its 429 and 408, which a long-poll waits through. */
static int
settled(const struct poll_entry *e)
{
	int st = e->ans.status;

	return st >= 400 && st < 500 && st != 408 && st != 429;
}

/* An answer arrived: terminal and settled ones and plain polls are
 * answered; long-poll waiters on a running job keep waiting for the next. */
static void
wake(struct poll_entry *e)
{
	struct jobs_req *q, *next;

	for (q = TAILQ_FIRST(&e->waiters); q != NULL; q = next) {
		next = TAILQ_NEXT(q, next);
		if (e->ans.terminal || q->wait_until == 0 || e->passthrough || settled(e))
			reply_answer(q->r, &e->ans, q->wait_until ? "long-poll" : "fetched");
	}
}

static void
fail_waiters(struct poll_entry *e, int status, const char *code, const char *msg,
    int retry_after)
{
	struct gw_req *r;
	char ra[16];

	snprintf(ra, sizeof(ra), "%d", retry_after);
	while ((r = first_waiter(e)) != NULL) {
		waiter_remove(r);
		if (retry_after > 0)
			evhttp_add_header(evhttp_request_get_output_headers(r->req), "Retry-After",
			    ra);
		gw_req_reply_error(r, status, code, msg);
	}
}

/* The body is too large to share: every waiter streams its own copy. */
static void
proxy_waiters(struct poll_entry *e)
{
	struct gw_req *r;

	e->passthrough = 1;
	while ((r = first_waiter(e)) != NULL) {
		waiter_remove(r);
		gw_req_continue(r);
	}
}

static void
on_poll_timer(evutil_socket_t fd, short what, void *arg)
{
	struct poll_entry *e = arg;

	if (!TAILQ_EMPTY(&e->waiters) && !busy(e))
		lead(e);
}

static void
schedule(struct poll_entry *e)
{
	int64_t now = tg_clock_mono_ms(), at = e->ans.at + interval(e), ms;
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

/* ---- upstream ---- */

static int64_t
retry_after_ms(const char *ra)
{
	char *end;
	long v;

	if (ra == NULL)
		return 0;
	v = strtol(ra, &end, 10);
	return end != ra && *end == '\0' && v >= 0 && v < 86400 ? v * 1000 : 1000;
}

/* The fleet's part (the head of this file): best effort, a failure only
 * costs other instances a poll of their own. */
static void
on_shared_done(const struct tg_state_res *res, void *arg)
{
}

/* This instance's fetch of e ended without an answer to share. */
static void
unlead(struct poll_entry *e)
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
	int64_t ttl = e->ans.terminal ? jobs_cfg(e->p->gw->rt)->poll_terminal_ttl : interval(e);

	if (!e->leading || e->ans.status == 429 || e->ans.status >= 500)
		return;		/* unlead() gives the lead up */
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
	answer_drop(e);
	e->ans.status = status;
	e->ans.ctype = ct ? tg_xstrdup(ct) : NULL;
	e->ans.retry_after = ra ? tg_xstrdup(ra) : NULL;
	e->ans.body = body_new(len);
	evbuffer_copyout(body, e->ans.body, len);
	e->ans.body[len] = '\0';
	e->ans.len = len;
	e->ans.at = tg_clock_mono_ms();
	e->ans.terminal = is_terminal(e, status, e->ans.body, len);
	if (!shared)
		publish(e);
	(void)hold(e);
}

/* An answer the budget has no room for: every waiter gets it now (a
 * long-poll ends early with the current state), then it is dropped, so
 * the entry asks the vendor again when next polled. */
static void
serve_unkept(struct poll_entry *e)
{
	struct gw_req *r;

	while ((r = first_waiter(e)) != NULL)
		reply_answer(r, &e->ans, WAITER(r)->wait_until ? "long-poll" : "fetched");
	answer_clear(&e->ans);
	tg_metrics_inc(e->p->gw->metrics, "tidegate_poll_cache_unkept_total", "", 1);
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
		serve_unkept(e);
		return;
	}
	wake(e);
	schedule(e);
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
		proxy_waiters(e);
	} else if (err != TG_UP_OK) {
		status = gw_upstream_error(err, detail, e->service == GW_DEX ? "dex" : "sim", "API",
		    msg, sizeof(msg), &code);
		/* a queue deadline: sooner than queue_timeout is unlikely to fare better */
		fail_waiters(e, status, code, msg, err == TG_UP_BUSY ?
		    (int)((e->p->gw->rt->cfg.queue_timeout + 999) / 1000) :
		    err == TG_UP_DOWN ? e->f_ra : 0);
	} else {
		store(e, status, h, body, 0);
		answered(e);
	}
	unlead(e);
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
	while ((r = first_waiter(e)) != NULL) {
		waiter_remove(r);
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
	unlead(e);
	jobs_spool_unref(e->writing);	/* its readers are reset */
	e->writing = NULL;
	proxy_waiters(e);
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
	unlead(e);
	jobs_spool_end(s, err == TG_UP_OK);
	if (err != TG_UP_OK) {
		jobs_spool_unref(s);
		return;
	}
	answer_drop(e);
	e->ans.status = e->f_status;
	e->ans.spool = s;
	e->ans.at = tg_clock_mono_ms();
	e->ans.terminal = 1;
	(void)hold(e);		/* no bytes in memory: only its place on the LRU list */
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
	unlead(e);
	fail_waiters(e, status, code, msg, retry_after > 0 ? retry_after : 1);
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
	iv = interval(e);
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

static void
on_lead(const struct tg_state_res *res, int64_t n, void *arg)
{
	struct poll_entry *e = arg;
	struct tg_state_op *op;

	e->lead_op = NULL;
	if (res->rc != TG_STATE_OK || n == 1) {
		e->leading = res->rc == TG_STATE_OK;
		fetch(e);	/* this instance polls (or the state cannot say) */
		return;
	}
	op = tg_state_poll_fetch(e->p->fleet, e->key, tg_clock_now_ms(), on_shared, e);
	if (op != NULL)
		e->lead_op = op;
}

/* The vendor is to be asked for e: by this instance alone, or in a fleet
 * when it leads e's key, else the leader's answer is used. */
static void
lead(struct poll_entry *e)
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

/* Another instance published an answer for key (NULL: perhaps for any):
 * entries with callers waiting and not terminal yet take it now. */
static void
on_wake(const char *topic, const char *key, void *arg)
{
	struct jobs_poll *p = arg;
	struct poll_entry *e;
	const char *k;
	void *v;
	size_t pos = 0;

	if (key != NULL) {
		e = tg_map_get(p->entries, key);
		if (e != NULL && !TAILQ_EMPTY(&e->waiters) && !busy(e) && !e->ans.terminal)
			lead(e);
		return;
	}
	while (tg_map_next(p->entries, &pos, &k, &v)) {
		e = v;
		if (!TAILQ_EMPTY(&e->waiters) && !busy(e) && !e->ans.terminal)
			lead(e);
	}
}

/* ---- entries ---- */

static void
entry_free(void *arg)
{
	struct poll_entry *e = arg;

	gw_vcall_cancel(e->call);
	tg_state_cancel(e->lead_op);
	unlead(e);
	gw_observed_cancel(e->observed);
	jobs_spool_unref(e->writing);
	evbuffer_free(e->fbuf);
	answer_drop(e);
	event_free(e->timer);
	free(e->key);
	free(e->uri);
	if (e->bearer != NULL)
		explicit_bzero(e->bearer, strlen(e->bearer));
	free(e->bearer);
	free(e->job);
	free(e);
}

static int
idle(const struct poll_entry *e)
{
	return TAILQ_EMPTY(&e->waiters) && !busy(e);
}

/* Drop idle entries whose answer is stale for good (all: under pressure). */
static void
sweep(struct jobs_poll *p, int all)
{
	const struct jobs_cfg *c = jobs_cfg(p->gw->rt);
	int64_t now = tg_clock_mono_ms();
	struct poll_entry *e;
	const char *k;
	void *v;
	size_t pos = 0;
	char **dead = tg_xcalloc(tg_map_count(p->entries) + 1, sizeof(char *));
	size_t n = 0, i;

	while (tg_map_next(p->entries, &pos, &k, &v)) {
		e = v;
		if (idle(e) && (all || now - e->used > (e->ans.terminal ? c->poll_terminal_ttl :
		    5 * c->poll_max_interval)))
			dead[n++] = tg_xstrdup(k);
	}
	for (i = 0; i < n; i++) {
		tg_map_del(p->entries, dead[i]);
		free(dead[i]);
	}
	free(dead);
	(void)make_room(p, 0);	/* a reload may have lowered the budget */
}

static void
on_sweep(evutil_socket_t fd, short what, void *arg)
{
	sweep(arg, 0);
}

static struct poll_entry *
entry_get(struct jobs_poll *p, struct gw_req *r, const char *job, const char *identity)
{
	char *uri = r->uri != NULL ? tg_xstrdup(r->uri) : gw_upstream_uri(r), *key;
	struct poll_entry *e;

	key = tg_xasprintf("%s|%s|%s", r->svc->name, identity, uri);
	if ((e = tg_map_get(p->entries, key)) != NULL) {
		free(key);
		free(uri);
		return e;
	}
	if ((long long)tg_map_count(p->entries) >= jobs_cfg(r->rt)->poll_max_entries)
		sweep(p, 1);
	if ((long long)tg_map_count(p->entries) >= jobs_cfg(r->rt)->poll_max_entries) {
		free(key);
		free(uri);
		return NULL;	/* full of active jobs: this caller is proxied as is */
	}
	e = tg_xcalloc(1, sizeof(*e));
	e->key = key;
	e->p = p;
	e->service = r->svc->index;
	e->op = r->op;
	e->uri = uri;
	e->job = tg_xstrdup(job);
	e->bearer = r->auth == GW_AUTH_CALLER ? tg_xstrdup(tg_http_bearer(r->req)) : NULL;
	e->created = tg_clock_mono_ms();
	TAILQ_INIT(&e->waiters);
	e->timer = evtimer_new(p->gw->base, on_poll_timer, e);
	e->fbuf = evbuffer_new();
	tg_map_put(p->entries, key, e);
	return e;
}

/* The caller identity an answer may be shared within. */
static void
identity(struct gw_req *r, char out[33])
{
	uint8_t d[TG_SHA256_LEN];
	const char *b = tg_http_bearer(r->req);

	if (r->auth != GW_AUTH_CALLER || b == NULL) {
		snprintf(out, 33, "gateway");
		return;
	}
	tg_sha256(b, strlen(b), d);
	tg_hex(d, 16, out);
}

static void
on_wait_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct jobs_req *q = arg;
	struct poll_entry *e = q->poll;

	q->wait_until = 0;	/* from now on an ordinary poll */
	if (e->ans.at != 0 && !busy(e))
		reply_answer(q->r, &e->ans, "long-poll");
}

static void
add_waiter(struct poll_entry *e, struct gw_req *r, int64_t wait_ms)
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

static int
pollable(enum tg_op op)
{
	return op == TG_OP_DEX_EXPORT_GET || op == TG_OP_DEX_IMPORT_STATUS ||
	    op == TG_OP_DEX_IMPORT_RESULT || op == TG_OP_DEX_IMPORT_FAILED ||
	    op == TG_OP_SIM_STATUS || op == TG_OP_SIM_RESULTS;
}

static int64_t
wait_ms(struct gw_req *r)
{
	char *w = tg_http_query(r->req, "wait"), *end;
	double s = w ? strtod(w, &end) : 0;
	int64_t ms, margin, cap = jobs_cfg(r->rt)->poll_max_wait;

	if (w != NULL && (end == w || *end != '\0' || s < 0))
		s = 0;
	free(w);
	ms = (int64_t)(s * 1000);
	if (ms > cap)
		ms = cap;
	/* answer before a proxy whose timeout equals the wait gives up */
	margin = jobs_cfg(r->rt)->poll_wait_margin;
	return ms - (margin < ms / 4 ? margin : ms / 4);
}

static void
count(struct gw_req *r, const char *result)
{
	char labels[80];

	snprintf(labels, sizeof(labels), "service=\"%s\",result=\"%s\"", r->svc->name, result);
	tg_metrics_inc(r->gw->metrics, "tidegate_poll_requests_total", labels, 1);
}

/* Serve r's poll of job (taken; NULL: not one to multiplex) from p: 1 when
 * handled (replied or waiting), 0 to proxy. */
static int
poll_job(struct jobs_poll *p, struct gw_req *r, char *job)
{
	struct poll_entry *e;
	char id[33];
	int64_t wms;
	int rc = 1;

	if (job == NULL && r->svc->index == GW_SIM)
		job = tg_xstrdup(tg_route_param(&r->m, "id"));
	if (job != NULL && *job == '\0') {
		free(job);
		job = NULL;	/* the vendor explains what is missing */
	}
	if (p == NULL || job == NULL || evhttp_request_get_command(r->req) != EVHTTP_REQ_GET) {
		free(job);
		return 0;
	}
	r->drop_query = "wait";
	wms = p->gw->draining ? 0 : wait_ms(r);
	identity(r, id);
	if ((e = entry_get(p, r, job, id)) == NULL || e->passthrough) {
		count(r, "passthrough");
		rc = 0;
		goto done;
	}
	e->used = tg_clock_mono_ms();
	touch(e);
	if (e->writing != NULL) {
		count(r, "spool");	/* follows the spool being written */
		jobs_spool_serve(e->writing, r, "spool");
		goto done;
	}
	if (fresh(e) && (e->ans.terminal || wms == 0 || settled(e))) {
		count(r, "cached");
		reply_answer(r, &e->ans, "cached");
		goto done;
	}
	count(r, busy(e) ? "coalesced" : wms ? "long-poll" : "fetched");
	r->long_poll = wms > 0;
	add_waiter(e, r, wms);
	if (!busy(e)) {
		if (fresh(e))
			schedule(e);	/* long-poll on a recent answer: poll on time */
		else
			lead(e);
	}
done:
	free(job);
	return rc;
}

int
jobs_poll_handle(struct jobs_poll *p, struct gw_req *r)
{
	char *job;

	if (!pollable(r->op))
		return 0;
	if (jobs_owner_check(r, &job) != 0)
		return 1;	/* ambiguous, another key's job, or checked later */
	return poll_job(p, r, job);
}

void
jobs_poll_resume(struct gw_req *r, char *job)
{
	if (!poll_job(jobs_of(r)->poll, r, job))
		gw_req_continue(r);
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
		if (e->ans.at != 0 && !busy(e))
			reply_answer(q->r, &e->ans, "long-poll");
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

/* The key entry_get gives a gateway-token caller's poll of uri. */
int
jobs_poll_peek(struct jobs_poll *p, int service, const char *uri, struct gw_peek *out)
{
	struct poll_entry *e;
	char *key;

	if (p == NULL)
		return 0;
	key = tg_xasprintf("%s|gateway|%s", service == GW_DEX ? "dex" : "sim", uri);
	e = tg_map_get(p->entries, key);
	free(key);
	if (e == NULL || e->passthrough || !fresh(e) || e->ans.spool != NULL)
		return 0;	/* a spooled answer is streamed, never handed out whole */
	touch(e);
	out->status = e->ans.status;
	out->body = e->ans.body;
	out->len = e->ans.len;
	out->terminal = e->ans.terminal;
	return 1;
}

struct jobs_poll *
jobs_poll_new(struct gw *gw, const struct jobs_cfg *c)
{
	struct jobs_poll *p = tg_xcalloc(1, sizeof(*p));
	struct timeval tv = { 30, 0 };

	if (c->poll_terminal_ttl < 30000) {	/* spool files go soon after expiry */
		tv.tv_sec = c->poll_terminal_ttl / 1000;
		tv.tv_usec = (c->poll_terminal_ttl % 1000) * 1000;
	}
	if (c->poll_spool_max_bytes > 0)
		jobs_spool_dir_prepare(c->spool_dir_path);
	p->gw = gw;
	p->entries = tg_map_new(entry_free);
	p->imports_done = tg_map_new(NULL);
	TAILQ_INIT(&p->lru);
	p->sweep = event_new(gw->base, -1, EV_PERSIST, on_sweep, p);
	evtimer_add(p->sweep, &tv);
	if (gw->state != NULL) {
		struct tg_state_health h;

		tg_state_health(gw->state, &h);
		if (h.shared) {
			p->fleet = gw->state;
			p->watch = tg_state_watch(p->fleet, "poll", on_wake, p);
		}
	}
	return p;
}

void
jobs_poll_free(struct jobs_poll *p)
{
	if (p == NULL)
		return;
	event_free(p->sweep);
	if (p->fleet != NULL)
		tg_state_unwatch(p->fleet, p->watch);
	tg_map_free(p->entries);
	tg_map_free(p->imports_done);
	free(p);
}

void
jobs_poll_metrics(struct jobs_poll *p, struct evbuffer *out)
{
	struct gw *gw = p->gw;

	evbuffer_add_printf(out, "# HELP tidegate_poll_cache_bytes Body bytes of the answers "
	    "the poll multiplexer holds.\n# TYPE tidegate_poll_cache_bytes gauge\n"
	    "tidegate_poll_cache_bytes %zu\n", p->bytes);
	evbuffer_add_printf(out, "# HELP tidegate_poll_cache_max_bytes The budget of held "
	    "answers (poll.cache_max_bytes).\n# TYPE tidegate_poll_cache_max_bytes gauge\n"
	    "tidegate_poll_cache_max_bytes %lld\n",
	    (long long)jobs_cfg(gw->rt)->poll_cache_max_bytes);
	evbuffer_add_printf(out, "# HELP tidegate_poll_entries Jobs the poll multiplexer "
	    "tracks.\n# TYPE tidegate_poll_entries gauge\ntidegate_poll_entries %zu\n",
	    tg_map_count(p->entries));
	evbuffer_add_printf(out, "# HELP tidegate_poll_spool_bytes Bytes of the spool files "
	    "(final answers over poll.cache_max_body).\n# TYPE tidegate_poll_spool_bytes gauge\n"
	    "tidegate_poll_spool_bytes %lld\n# HELP tidegate_poll_spool_files Spool files open "
	    "(removed ones still read included).\n# TYPE tidegate_poll_spool_files gauge\n"
	    "tidegate_poll_spool_files %ld\n", (long long)p->spool.bytes, p->spool.files);
}
