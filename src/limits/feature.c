/*
 * feature.c - the per-key limits feature as the request core sees it:
 * every operation of a key with limits takes a unit of its rate and a
 * slot of its concurrency from the quota engine (quota.h) before the
 * vendor is asked; over either, 429 with the gateway's error body,
 * Retry-After and the RateLimit fields (rate.h), which answers under the
 * limit carry too (limits.headers). While the instance's share is empty
 * only because its next lease is on the way (a fleet), the request waits
 * for it, at most WAIT_MS. The limits are (re)defined from the keys at
 * start and on every reload: a limit kept by name keeps its use.
 */
#include <stdio.h>
#include <stdlib.h>

#include <event2/event.h>
#include <event2/http.h>
#include <event2/buffer.h>

#include "tidegate/clock.h"
#include "tidegate/log.h"
#include "tidegate/rate.h"
#include "tidegate/state.h"
#include "limits_int.h"

#define WAIT_MS	250	/* the longest a request waits for a lease on its way */

/* One key's limits in the quota engine (references held), and its labels. */
struct lim_key {
	struct tg_quota_limit *rate, *slots;
	char *name;		/* the key's, for messages */
	char *labels;		/* key="<name>" */
};

struct lim {
	struct gw *gw;
	int id;
	struct tg_quota *q;
	struct tg_quota_store *store;
	const struct gw_runtime *built;	/* whose keys keys[] follows */
	struct lim_key *keys;
	size_t nkeys;
};

/* A request's slot: the concurrency unit it holds, or its wait. */
struct lim_req {
	struct tg_quota_limit *slot;	/* referenced until given back */
	struct tg_quota_waiter w;
	struct event *deadline;
	struct tg_quota_limit *on;	/* the limit waited on (borrowed from w) */
	struct lim_key *k;
	struct lim *l;
	struct gw_req *r;
};

static enum tg_op ops[TG_OP_COUNT + 1];

static void
keys_free(struct lim *l)
{
	size_t i;

	for (i = 0; i < l->nkeys; i++) {
		if (l->keys[i].rate)
			tg_quota_unref(l->keys[i].rate);
		if (l->keys[i].slots)
			tg_quota_unref(l->keys[i].slots);
		free(l->keys[i].name);
		free(l->keys[i].labels);
	}
	free(l->keys);
	l->keys = NULL;
	l->nkeys = 0;
}

/* The definitions of rt's keys' limits into d (room for 2 a key). */
static size_t
defs_of(const struct gw_runtime *rt, const struct lim_cfg *c, struct tg_quota_def *d,
    char (*names)[160])
{
	size_t i, n = 0;

	for (i = 0; i < c->nkeys && i < rt->keys.n; i++) {
		if (c->keys[i].rate > 0) {
			snprintf(names[n], sizeof(names[n]), "key:%s:rate", rt->keys.keys[i].name);
			d[n] = (struct tg_quota_def){ names[n], TG_QUOTA_RATE, c->keys[i].rate,
			    c->keys[i].burst, 0 };
			n++;
		}
		if (c->keys[i].concurrent > 0) {
			snprintf(names[n], sizeof(names[n]), "key:%s:concurrent",
			    rt->keys.keys[i].name);
			d[n] = (struct tg_quota_def){ names[n], TG_QUOTA_SLOTS, 0, 0,
			    c->keys[i].concurrent };
			n++;
		}
	}
	return n;
}

/* Define the limits of the current runtime's keys and point keys[] at them. */
static void
build(struct lim *l)
{
	const struct gw_runtime *rt = l->gw->rt;
	const struct lim_cfg *c = lim_cfg_of(&rt->cfg);
	size_t n = 2 * (c->nkeys + 1), i;
	struct tg_quota_def *d = tg_xcalloc(n, sizeof(*d));
	char (*names)[160] = tg_xcalloc(n, sizeof(*names)), ln[200];
	struct tg_err err;

	n = defs_of(rt, c, d, names);
	if (tg_quota_define(l->q, d, n, &err) != 0)
		tg_log(TG_LOG_ERROR, "limits_refused", TG_LS("error", err.msg));
	keys_free(l);
	l->keys = tg_xcalloc(rt->keys.n + 1, sizeof(*l->keys));
	l->nkeys = rt->keys.n;
	for (i = 0; i < l->nkeys; i++) {
		struct lim_key *k = &l->keys[i];

		k->name = tg_xstrdup(rt->keys.keys[i].name);
		snprintf(ln, sizeof(ln), "key:%s:rate", k->name);
		if ((k->rate = tg_quota_find(l->q, ln)) != NULL)
			tg_quota_ref(k->rate);
		snprintf(ln, sizeof(ln), "key:%s:concurrent", k->name);
		if ((k->slots = tg_quota_find(l->q, ln)) != NULL)
			tg_quota_ref(k->slots);
		snprintf(ln, sizeof(ln), "key=\"%s\"", k->name);
		k->labels = tg_xstrdup(ln);
	}
	l->built = rt;
	free(d);
	free(names);
}

/* The RateLimit fields of v (of limit lm) onto r's answer. */
static void
add_fields(struct gw_req *r, const struct tg_quota_limit *lm, const struct tg_quota_verdict *v)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(r->req);
	const char *name = tg_quota_limit_def(lm)->kind == TG_QUOTA_RATE ? "rate" : "concurrent";
	char policy[128], state[128];

	tg_rate_fields(name, v->quota, v->window_s, v->left, v->reset_s, policy, sizeof(policy),
	    state, sizeof(state));
	evhttp_remove_header(h, "RateLimit-Policy");
	evhttp_remove_header(h, "RateLimit");
	evhttp_add_header(h, "RateLimit-Policy", policy);
	evhttp_add_header(h, "RateLimit", state);
}

/* 429 for key k over limit lm (v its figures). */
static void
refuse(struct lim *l, struct gw_req *r, struct lim_key *k, struct tg_quota_limit *lm,
    const struct tg_quota_verdict *v)
{
	int rate = tg_quota_limit_def(lm)->kind == TG_QUOTA_RATE;
	char msg[300], ra[24], lab[240];

	add_fields(r, lm, v);
	snprintf(ra, sizeof(ra), "%lld", (long long)((v->retry_ms + 999) / 1000));
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "Retry-After", ra);
	snprintf(msg, sizeof(msg), "API key \"%s\" is over its %s (%s): retry after %s s",
	    k->name, rate ? "rate limit" : "concurrency limit",
	    rate ? "keys[].limits.rate" : "keys[].limits.concurrent", ra);
	snprintf(lab, sizeof(lab), "%s,limit=\"%s\"", k->labels, rate ? "rate" : "concurrent");
	tg_metrics_inc(l->gw->metrics, "tidegate_key_limited_total", lab, 1);
	gw_req_reply_error(r, 429, rate ? "RATE_LIMITED" : "CONCURRENCY_LIMITED", msg);
}

enum { ADMIT, REFUSED, WAIT };

static int
key_index(const struct lim *l, const struct gw_req *r, size_t *i)
{
	if (r->key == NULL || r->rt != l->built)
		return -1;
	*i = (size_t)(r->key - r->rt->keys.keys);
	return *i < l->nkeys ? 0 : -1;
}

/* Take k's units for r: ADMIT, REFUSED (replied) or WAIT (*on: the limit
 * whose lease is on its way; may_wait 0: refuse instead). */
static int
admit(struct lim *l, struct gw_req *r, struct lim_key *k, int may_wait,
    struct tg_quota_limit **on)
{
	const struct lim_cfg *c = lim_cfg_of(&r->rt->cfg);
	int64_t now = tg_clock_mono_us();
	struct tg_quota_verdict v = { 0 }, vs = { 0 };
	struct lim_req *s;

	if (k->rate && tg_quota_take(k->rate, 1, now, &v) < 0) {
		*on = k->rate;
		if (v.pending && may_wait)
			return WAIT;
		refuse(l, r, k, k->rate, &v);
		return REFUSED;
	}
	if (k->slots && tg_quota_take(k->slots, 1, now, &vs) < 0) {
		if (k->rate)
			tg_quota_give(k->rate, 1, now);
		*on = k->slots;
		if (vs.pending && may_wait)
			return WAIT;
		refuse(l, r, k, k->slots, &vs);
		return REFUSED;
	}
	if (k->slots) {
		s = gw_req_slot(r, l->id, sizeof(*s));
		s->slot = tg_quota_ref(k->slots);
	}
	if (c->headers)
		add_fields(r, k->rate ? k->rate : k->slots, k->rate ? &v : &vs);
	tg_metrics_inc(l->gw->metrics, "tidegate_key_admitted_total", k->labels, 1);
	return ADMIT;
}

static void
wait_end(struct lim_req *s)
{
	tg_quota_wait_cancel(&s->w);
	if (s->deadline)
		event_free(s->deadline);
	s->deadline = NULL;
}

/* Units may be there: take again (no second wait) and go on, or refuse. */
static void
woken(struct tg_quota_waiter *w, void *arg)
{
	struct lim_req *s = arg;
	struct tg_quota_limit *on;

	(void)w;
	wait_end(s);
	if (admit(s->l, s->r, s->k, 0, &on) == ADMIT)
		gw_req_continue(s->r);
}

/* The lease did not come in time: refused, to be retried in a second. */
static void
deadline_cb(evutil_socket_t fd, short what, void *arg)
{
	struct lim_req *s = arg;
	struct tg_quota_limit *on = s->on;
	struct tg_quota_verdict v;

	(void)fd;
	(void)what;
	tg_quota_ref(on);
	wait_end(s);
	tg_quota_peek(on, tg_clock_mono_us(), &v);
	v.retry_ms = 1000;
	refuse(s->l, s->r, s->k, on, &v);
	tg_quota_unref(on);
}

static int
on_request(struct gw_req *r, void *ctx)
{
	struct lim *l = ctx;
	struct tg_quota_limit *on = NULL;
	struct timeval tv = { 0, WAIT_MS * 1000 };
	struct lim_key *k;
	struct lim_req *s;
	size_t i;

	if (l->q == NULL || !lim_cfg_of(&r->rt->cfg)->any || key_index(l, r, &i) != 0)
		return 0;
	k = &l->keys[i];
	if (!k->rate && !k->slots)
		return 0;
	switch (admit(l, r, k, 1, &on)) {
	case ADMIT:
		return 0;
	case REFUSED:
		return -1;
	}
	s = gw_req_slot(r, l->id, sizeof(*s));
	s->l = l;
	s->k = k;
	s->r = r;
	s->on = on;
	s->deadline = event_new(l->gw->base, -1, 0, deadline_cb, s);
	event_add(s->deadline, &tv);
	tg_quota_wait(on, &s->w, woken, s);
	return -1;
}

static void
on_free(struct gw_req *r, void *ctx, void *slot)
{
	struct lim_req *s = slot;

	wait_end(s);
	if (s->slot) {
		tg_quota_give(s->slot, 1, tg_clock_mono_us());
		tg_quota_unref(s->slot);
	}
	free(s);
}

static void
start(void *ctx)
{
	struct lim *l = ctx;
	const struct lim_cfg *c = lim_cfg_of(&l->gw->rt->cfg);
	struct tg_quota_opts o = { 0 };
	struct tg_state_health h = { 0 };

	if (l->gw->state != NULL) {
		tg_state_health(l->gw->state, &h);
		l->store = tg_quota_store_state(l->gw->state);
	}
	o.fleet = h.shared;
	o.lease_ms = c->lease_ms;
	o.hold_ms = c->hold_ms;
	o.timeout_ms = l->gw->state != NULL ? tg_state_timeout_ms(l->gw->state) : 0;
	l->q = tg_quota_new(l->gw->base, l->store, &o);
	build(l);
}

static void
reload(void *ctx, const struct gw_config *old)
{
	struct lim *l = ctx;

	(void)old;
	if (l->q != NULL)
		build(l);
}

static void
metrics(void *ctx, struct evbuffer *out, struct gw_scrape *sc)
{
	struct lim *l = ctx;

	(void)sc;
	evbuffer_add_printf(out, "# HELP tidegate_quota_fallback_limits Limits on a local "
	    "fallback share because the state database does not answer.\n"
	    "# TYPE tidegate_quota_fallback_limits gauge\ntidegate_quota_fallback_limits %d\n",
	    l->q != NULL ? tg_quota_fallback(l->q) : 0);
}

static void
stop(void *ctx)
{
	struct lim *l = ctx;

	keys_free(l);
	tg_quota_free(l->q);
	tg_quota_store_state_free(l->store);
	free(l);
}

static const struct gw_request_role request = {
	.ops = ops,
	.on_request = on_request,
	.on_free = on_free,
};

static const struct gw_background_role background = {
	.start = start,
	.metrics = metrics,
	.reload = reload,
	.stop = stop,
};

static const struct gw_feature feature = {
	.name = "limits",
	.config = &tg_limits_config,
	.request = &request,
	.background = &background,
};

int
tg_limits_register(struct gw *gw, struct tg_err *err)
{
	struct lim *l = tg_xcalloc(1, sizeof(*l));
	int i;

	for (i = 0; i < TG_OP_COUNT; i++)
		ops[i] = (enum tg_op)i;
	ops[TG_OP_COUNT] = TG_OP_COUNT;
	l->gw = gw;
	if ((l->id = gw_feature_register(gw, &feature, l, err)) < 0) {
		free(l);
		return -1;
	}
	tg_metrics_help(gw->metrics, "tidegate_key_admitted_total", "counter",
	    "Requests of an API key with limits admitted under them.");
	tg_metrics_help(gw->metrics, "tidegate_key_limited_total", "counter",
	    "Requests of an API key refused with 429, by limit (rate, concurrent).");
	return 0;
}
