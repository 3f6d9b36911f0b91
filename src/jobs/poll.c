/*
 * poll.c - the poll multiplexer's entries. Callers of the asynchronous
 * APIs poll (export readiness, import status/result/failed, simulation
 * status and results); the gateway turns N callers polling one job into
 * one upstream request per interval:
 *
 * - an entry per (service, caller identity, operation, job id), made when
 *   a job is first polled and swept once idle and stale (all idle ones
 *   when poll.max_entries are in use);
 * - its answer, held within one byte budget (poll_cache.c);
 * - the callers waiting on it, long-polls among them (poll_wait.c);
 * - one upstream GET in flight per entry, shared by every waiting caller
 *   and, in a fleet, by every instance (poll_fetch.c).
 *
 * A request comes in through jobs_poll_handle (feature.c, once jobs.c has
 * read the job id and checked who may read it) or jobs_poll_resume (when
 * that check answered later); the webhook payload fetcher asks
 * jobs_poll_peek (gw_peek) before it polls the vendor itself. Polls made
 * while draining do not wait, so a drain never waits on a job. Owns its
 * entries, which outlive the requests.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "tidegate/clock.h"
#include "tidegate/crypto.h"
#include "tidegate/http.h"
#include "tidegate/map.h"
#include "tidegate/state.h"
#include "poll_int.h"

static void
entry_free(void *arg)
{
	struct poll_entry *e = arg;

	gw_vcall_cancel(e->call);
	tg_state_cancel(e->lead_op);
	jobs_poll_unlead(e);
	gw_observed_cancel(e->observed);
	jobs_spool_unref(e->writing);
	evbuffer_free(e->fbuf);
	jobs_answer_drop(e);
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
	return TAILQ_EMPTY(&e->waiters) && !poll_busy(e);
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
	(void)jobs_cache_make_room(p, 0);	/* a reload may have lowered the budget */
}

static void
on_sweep(evutil_socket_t fd, short what, void *arg)
{
	sweep(arg, 0);
}

/* The entry key of r's poll of uri (borrowed) by caller identity. */
static char *
entry_key(const struct gw_req *r, const char *identity, const char *uri)
{
	return tg_xasprintf("%s|%s|%s", r->svc->name, identity, uri);
}

static struct poll_entry *
entry_get(struct jobs_poll *p, struct gw_req *r, const char *job, const char *identity)
{
	char *uri = r->uri != NULL ? tg_xstrdup(r->uri) : gw_upstream_uri(r), *key;
	struct poll_entry *e;

	key = entry_key(r, identity, uri);
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
	e->timer = evtimer_new(p->gw->base, jobs_poll_on_timer, e);
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
	struct jobs_req *q = jobs_req_find(r);
	char id[33], *lead = q != NULL ? q->lead_key : NULL;	/* r may go on a reply */
	int led = q != NULL && q->led;
	struct poll_entry *e;
	int64_t wms;
	int rc = 1;

	if (q != NULL)
		q->lead_key = NULL;
	if (job == NULL && r->svc->index == GW_SIM)
		job = tg_xstrdup(tg_route_param(&r->m, "id"));
	if (job != NULL && *job == '\0') {
		free(job);
		job = NULL;	/* the vendor explains what is missing */
	}
	if (p == NULL || job == NULL || evhttp_request_get_command(r->req) != EVHTTP_REQ_GET) {
		jobs_poll_lead_drop(p, lead, led);
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
	jobs_answer_touch(e);
	if (e->writing != NULL) {
		count(r, "spool");	/* follows the spool being written */
		jobs_spool_serve(e->writing, r, "spool");
		goto done;
	}
	if (jobs_answer_fresh(e) && (e->ans.terminal || wms == 0 || jobs_answer_settled(e))) {
		count(r, "cached");
		jobs_waiter_reply(r, &e->ans, "cached");
		goto done;
	}
	count(r, poll_busy(e) ? "coalesced" : wms ? "long-poll" : "fetched");
	if (wms > 0)
		r->histogram = "tidegate_long_poll_duration_seconds";
	jobs_waiter_add(e, r, wms);
	if (!poll_busy(e)) {
		if (jobs_answer_fresh(e))
			jobs_poll_schedule(e);	/* long-poll on a recent answer: poll on time */
		else {
			jobs_poll_lead_as(e, lead, led);
			lead = NULL;
		}
	}
done:
	jobs_poll_lead_drop(p, lead, led);	/* a lead the lookup took, unused */
	free(job);
	return rc;
}

int
jobs_poll_shared(const struct jobs_poll *p)
{
	return p != NULL && p->fleet != NULL;
}

char *
jobs_poll_first_key(struct jobs_poll *p, struct gw_req *r, const char *uri)
{
	struct poll_entry *e;
	char id[33], *key;

	if (!jobs_poll_shared(p) || !pollable(r->op) ||
	    evhttp_request_get_command(r->req) != EVHTTP_REQ_GET)
		return NULL;
	identity(r, id);
	key = entry_key(r, id, uri);
	e = tg_map_get(p->entries, key);
	if (e == NULL || (idle(e) && !e->passthrough && e->writing == NULL &&
	    !jobs_answer_fresh(e)))
		return key;
	free(key);
	return NULL;
}

int
jobs_poll_handle(struct jobs_poll *p, struct gw_req *r, char *job)
{
	if (!pollable(r->op)) {
		free(job);
		return 0;
	}
	return poll_job(p, r, job);
}

void
jobs_poll_resume(struct gw_req *r, char *job)
{
	if (!poll_job(jobs_of(r)->poll, r, job))
		gw_req_continue(r);
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
	if (e == NULL || e->passthrough || !jobs_answer_fresh(e) || e->ans.spool != NULL)
		return 0;	/* a spooled answer is streamed, never handed out whole */
	jobs_answer_touch(e);
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
			p->watch = tg_state_watch(p->fleet, "poll", jobs_poll_on_wake, p);
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

/* Long-polls held now, and jobs not ended yet by family (export, import,
 * simulation): counted at scrape time (entries are few, a scrape is
 * rare), so that holding and waking a waiter costs nothing more. */
static const char *const families[3] = { "export", "import", "simulation" };

static void
walk(const struct jobs_poll *p, size_t *waiters, size_t in_flight[3])
{
	struct poll_entry *e;
	struct jobs_req *q;
	const char *k;
	void *v;
	size_t pos = 0;

	*waiters = in_flight[0] = in_flight[1] = in_flight[2] = 0;
	while (tg_map_next(p->entries, &pos, &k, &v)) {
		e = v;
		TAILQ_FOREACH(q, &e->waiters, next)
			(*waiters)++;
		if (!e->ans.terminal)
			in_flight[e->op == TG_OP_DEX_EXPORT_GET ? 0 : e->service == GW_SIM ? 2 : 1]++;
	}
}

static void
render_walk(const struct jobs_poll *p, struct evbuffer *out)
{
	size_t waiters, in_flight[3];
	int i;

	walk(p, &waiters, in_flight);
	evbuffer_add_printf(out, "# HELP tidegate_poll_waiters Long-polls (?wait=) held now for "
	    "a job's answer.\n# TYPE tidegate_poll_waiters gauge\ntidegate_poll_waiters %zu\n"
	    "# HELP tidegate_poll_in_flight Jobs the poll multiplexer tracks whose answer is not "
	    "final yet, by family.\n# TYPE tidegate_poll_in_flight gauge\n", waiters);
	for (i = 0; i < 3; i++)
		evbuffer_add_printf(out, "tidegate_poll_in_flight{family=\"%s\"} %zu\n",
		    families[i], in_flight[i]);
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
	render_walk(p, out);
	evbuffer_add_printf(out, "# HELP tidegate_poll_spool_bytes Bytes of the spool files "
	    "(final answers over poll.cache_max_body).\n# TYPE tidegate_poll_spool_bytes gauge\n"
	    "tidegate_poll_spool_bytes %lld\n# HELP tidegate_poll_spool_files Spool files open "
	    "(removed ones still read included).\n# TYPE tidegate_poll_spool_files gauge\n"
	    "tidegate_poll_spool_files %ld\n", (long long)p->spool.bytes, p->spool.files);
}
