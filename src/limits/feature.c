/*
 * feature.c - the per-key limits feature as the request core sees it:
 * every operation of a key with limits takes a unit of its rate, a slot
 * of its concurrency and, for a job creation, a unit of its daily quota
 * from the quota engine (quota.h) before the vendor is asked (a creation
 * the vendor refuses gives its unit back); over any, 429 with the
 * gateway's error body,
 * Retry-After and the RateLimit fields (rate.h), which answers under the
 * limit carry too (limits.headers). While the instance's share is empty
 * only because its next lease is on the way (a fleet), the request waits
 * for it, at most WAIT_MS. The limits are (re)defined from the keys at
 * start and on every reload: a limit kept by name keeps its use.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <event2/http.h>
#include <event2/buffer.h>

#include "tidegate/clock.h"
#include "tidegate/feature_apis.h"
#include "tidegate/http.h"
#include "tidegate/json.h"
#include "tidegate/log.h"
#include "tidegate/rate.h"
#include "tidegate/state.h"
#include "limits_int.h"

#define WAIT_MS	250	/* the longest a request waits for a lease on its way */

/* Each kind: the limit's name after "key:<name>:", its field name, the
 * setting a refusal names, its error code. */
struct kind {
	const char *suffix, *field, *setting, *code;
};

static const struct kind BASE[LIM_N] = {
	[LIM_RATE] = { "rate", "rate", "keys[].limits.rate", "RATE_LIMITED" },
	[LIM_SLOTS] = { "concurrent", "concurrent", "keys[].limits.concurrent",
	    "CONCURRENCY_LIMITED" },
	[LIM_EXPORTS] = { "daily:export", "daily-exports", "keys[].limits.daily.exports",
	    "QUOTA_EXCEEDED" },
	[LIM_IMPORTS] = { "daily:import", "daily-imports", "keys[].limits.daily.imports",
	    "QUOTA_EXCEEDED" },
	[LIM_SIMS] = { "daily:simulation", "daily-simulations",
	    "keys[].limits.daily.simulations", "QUOTA_EXCEEDED" },
	[LIM_SWEEPS] = { "daily:sweep", "daily-sweeps", "keys[].limits.daily.sweeps",
	    "QUOTA_EXCEEDED" },
};

/* BASE, then each operation's rate (LIM_OP + op): "op:<op>:rate", field
 * "<op>-rate"; made at registration from the operations' names (an
 * operation without one has suffix NULL). */
static struct kind KIND[LIM_ALL];
static char op_text[TG_OP_COUNT][3][96];

/* One key's limits in the quota engine (references held), and its labels. */
struct lim_key {
	struct tg_quota_limit *lim[LIM_ALL];
	char *policy[LIM_ALL];	/* its RateLimit-Policy value (constant per limit) */
	char *name;		/* the key's, for messages */
	char *labels;		/* key="<name>" */
	int any;
	uint64_t admitted;	/* requests admitted under its limits (kept across
				 * reloads by name; counted here, not looked up) */
	uint64_t vendor_calls;	/* vendor answers to its requests */
	uint64_t created;	/* jobs it created (a creation answered 2xx) */
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

/* A request's slot: the concurrency unit and the creation it holds, or
 * its wait. */
struct lim_req {
	struct tg_quota_limit *slot;	/* referenced until given back */
	struct tg_quota_limit *rate;	/* limits.count vendor: the rate's unit, given
					 * back when no vendor call answered r */
	struct tg_quota_limit *op_rate;	/* and its operation's, likewise */
	int vendor;			/* a vendor call of r's own answered */
	struct tg_quota_limit *day;	/* a creation's unit, given back if refused */
	int day_back;			/* a sweep's: given back when r ends unless kept */
	void (*done)(struct gw_req *r);	/* a sweep's unit came after a wait */
	struct tg_quota_waiter w;
	struct event *deadline;
	struct tg_quota_limit *on;	/* the limit waited on (borrowed from w) */
	struct lim_key *k;		/* borrowed until a reload (key_again) */
	struct lim *l;
	struct gw_req *r;
};

static enum tg_op ops[TG_OP_COUNT + 1];

static void
keys_free(struct lim *l)
{
	size_t i, j;

	for (i = 0; i < l->nkeys; i++) {
		for (j = 0; j < LIM_ALL; j++) {
			if (l->keys[i].lim[j])
				tg_quota_unref(l->keys[i].lim[j]);
			free(l->keys[i].policy[j]);
		}
		free(l->keys[i].name);
		free(l->keys[i].labels);
	}
	free(l->keys);
	l->keys = NULL;
	l->nkeys = 0;
}

/* Key i's limit of kind j as c configures it: 0 and *d set, or -1: none. */
static int
def_of(const struct lim_key_cfg *c, int j, struct tg_quota_def *d)
{
	if (j == LIM_RATE && c->rate > 0)
		*d = (struct tg_quota_def){ NULL, TG_QUOTA_RATE, c->rate, c->burst, 0 };
	else if (j == LIM_SLOTS && c->concurrent > 0)
		*d = (struct tg_quota_def){ NULL, TG_QUOTA_SLOTS, 0, 0, c->concurrent };
	else if (j >= LIM_EXPORTS && j < LIM_N && c->daily[j - LIM_EXPORTS] > 0)
		*d = (struct tg_quota_def){ NULL, TG_QUOTA_DAY, 0, 0, c->daily[j - LIM_EXPORTS] };
	else if (j >= LIM_OP && c->op[j - LIM_OP].rate > 0)
		*d = (struct tg_quota_def){ NULL, TG_QUOTA_RATE, c->op[j - LIM_OP].rate,
		    c->op[j - LIM_OP].burst, 0 };
	else
		return -1;
	return 0;
}

/* The definitions of rt's keys' limits into d (room for LIM_ALL a key). */
static size_t
defs_of(const struct gw_runtime *rt, const struct lim_cfg *c, struct tg_quota_def *d,
    char (*names)[160])
{
	size_t i, n = 0;
	int j;

	for (i = 0; i < c->nkeys && i < rt->keys.n; i++)
		for (j = 0; j < LIM_ALL; j++)
			if (KIND[j].suffix && def_of(&c->keys[i], j, &d[n]) == 0) {
				snprintf(names[n], sizeof(names[n]), "key:%s:%s",
				    rt->keys.keys[i].name, KIND[j].suffix);
				d[n].name = names[n];
				n++;
			}
	return n;
}

/* key="<name>" with name escaped as the Prometheus text format wants (a
 * key's name is the operator's text: a quote must not end the label). */
static char *
label_of(const char *name)
{
	size_t n = strlen(name), i, o = 0;
	char *out = tg_xmalloc(2 * n + 8);

	memcpy(out, "key=\"", 5);
	o = 5;
	for (i = 0; i < n; i++) {
		if (name[i] == '\\' || name[i] == '"' || name[i] == '\n')
			out[o++] = '\\';
		out[o++] = name[i] == '\n' ? 'n' : name[i];
	}
	out[o++] = '"';
	out[o] = '\0';
	return out;
}

/* Point key k (named name) at its limits; its policy fields made once. */
static void
key_set(struct lim *l, struct lim_key *k, const char *name)
{
	struct tg_quota_verdict v;
	char ln[200], state[8];
	int j;

	k->name = tg_xstrdup(name);
	for (j = 0; j < LIM_ALL; j++) {
		if (KIND[j].suffix == NULL)
			continue;
		snprintf(ln, sizeof(ln), "key:%s:%s", name, KIND[j].suffix);
		if ((k->lim[j] = tg_quota_find(l->q, ln)) == NULL)
			continue;
		tg_quota_ref(k->lim[j]);
		k->any = 1;
		tg_quota_peek(k->lim[j], tg_clock_mono_us(), &v);
		tg_rate_fields(KIND[j].field, v.quota, v.window_s, 0, 0, ln, sizeof(ln), state,
		    sizeof(state));
		k->policy[j] = tg_xstrdup(ln);
	}
	k->labels = label_of(name);
}

/* The counts of the key named k->name among old[0..n-1] carried to k. */
static void
counts_of(const struct lim_key *old, size_t n, struct lim_key *k)
{
	size_t i;

	for (i = 0; i < n; i++)
		if (strcmp(old[i].name, k->name) == 0) {
			k->admitted = old[i].admitted;
			k->vendor_calls = old[i].vendor_calls;
			k->created = old[i].created;
			return;
		}
}

/* Define the limits of the current runtime's keys and point keys[] at them. */
static void
build(struct lim *l)
{
	const struct gw_runtime *rt = l->gw->rt;
	const struct lim_cfg *c = lim_cfg_of(&rt->cfg);
	size_t n = LIM_ALL * (c->nkeys + 1), i;
	struct tg_quota_def *d = tg_xcalloc(n, sizeof(*d));
	char (*names)[160] = tg_xcalloc(n, sizeof(*names));
	struct lim_key *keys;
	struct tg_err err;

	n = defs_of(rt, c, d, names);
	if (tg_quota_define(l->q, d, n, &err) != 0)
		tg_log(TG_LOG_ERROR, "limits_refused", TG_LS("error", err.msg));
	keys = tg_xcalloc(rt->keys.n + 1, sizeof(*keys));
	for (i = 0; i < rt->keys.n; i++) {
		key_set(l, &keys[i], rt->keys.keys[i].name);
		counts_of(l->keys, l->nkeys, &keys[i]);
	}
	keys_free(l);
	l->keys = keys;
	l->nkeys = rt->keys.n;
	l->built = rt;
	free(d);
	free(names);
}

/* Decimal digits of n (>= 0) at the end of buf (size 24): their start. */
static char *
digits(int64_t n, char *end)
{
	*--end = '\0';
	do {
		*--end = (char)('0' + n % 10);
		n /= 10;
	} while (n > 0);
	return end;
}

/* The RateLimit fields of v (k's limit of kind j) onto r's answer; no
 * printf: they go on every answer of a limited key. */
static void
add_fields(struct gw_req *r, const struct lim_key *k, int j, const struct tg_quota_verdict *v)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(r->req);
	char state[96], left[24], reset[24];
	const char *f = KIND[j].field, *ls = digits(v->left, left + sizeof(left)),
	    *rs = digits(v->reset_s, reset + sizeof(reset));
	size_t n = 0, fl = strlen(f), a = strlen(ls), b = strlen(rs);

	if (fl + a + b + 10 >= sizeof(state))
		return;
	state[n++] = '"';
	memcpy(state + n, f, fl);
	n += fl;
	memcpy(state + n, "\";r=", 4);
	n += 4;
	memcpy(state + n, ls, a);
	n += a;
	memcpy(state + n, ";t=", 3);
	n += 3;
	memcpy(state + n, rs, b + 1);
	evhttp_add_header(h, "RateLimit-Policy", k->policy[j]);
	evhttp_add_header(h, "RateLimit", state);
}

/* 429 for key k over its limit of kind j (v its figures). */
static void
refuse(struct lim *l, struct gw_req *r, struct lim_key *k, int j,
    const struct tg_quota_verdict *v)
{
	char msg[300], ra[24], lab[240];

	add_fields(r, k, j, v);
	snprintf(ra, sizeof(ra), "%lld", (long long)((v->retry_ms + 999) / 1000));
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "Retry-After", ra);
	snprintf(msg, sizeof(msg), "API key \"%s\" is over its %s limit (%s): retry after %s s",
	    k->name, KIND[j].field, KIND[j].setting, ra);
	snprintf(lab, sizeof(lab), "%s,limit=\"%s\"", k->labels, KIND[j].field);
	tg_metrics_inc(l->gw->metrics, "tidegate_key_limited_total", lab, 1);
	gw_req_reply_error(r, 429, KIND[j].code, msg);
}

/* KIND from BASE and the operations' names; -1 when a name of the config
 * table is not the route tables' (the table would take keys no route has). */
static int
kinds_make(struct tg_err *err)
{
	int o;

	memcpy(KIND, BASE, sizeof(BASE));
	for (o = 0; o < TG_OP_COUNT; o++) {
		const char *nm = lim_op_names[o];

		if (nm == NULL)
			continue;
		if (strcmp(nm, tg_op_name((enum tg_op)o)) != 0) {
			tg_err_set(err, "limits: operation %d is %s, not %s", o,
			    tg_op_name((enum tg_op)o), nm);
			return -1;
		}
		snprintf(op_text[o][0], sizeof(op_text[o][0]), "op:%s:rate", nm);
		snprintf(op_text[o][1], sizeof(op_text[o][1]), "%s-rate", nm);
		snprintf(op_text[o][2], sizeof(op_text[o][2]),
		    "keys[].limits.operations.%s.rate", nm);
		KIND[LIM_OP + o] = (struct kind){ op_text[o][0], op_text[o][1], op_text[o][2],
		    "RATE_LIMITED" };
	}
	return 0;
}

enum { ADMIT, REFUSED, WAIT };

static int take(struct lim *l, struct gw_req *r, struct lim_key *k, const int *kinds, int n,
    int may_wait, struct tg_quota_limit **on, struct tg_quota_verdict *v, int *first);

static int
key_index(const struct lim *l, const struct gw_req *r, size_t *i)
{
	if (r->key == NULL || r->rt != l->built)
		return -1;
	*i = (size_t)(r->key - r->rt->keys.keys);
	return *i < l->nkeys ? 0 : -1;
}

/* The daily quota a creation of op counts against, or -1. */
static int
creation(enum tg_op op)
{
	return op == TG_OP_DEX_EXPORT ? LIM_EXPORTS : op == TG_OP_DEX_IMPORT_JSON ||
	    op == TG_OP_DEX_IMPORT_FILE ? LIM_IMPORTS : op == TG_OP_SIM_SUBMIT ? LIM_SIMS : -1;
}

/* Give back the units of took[0..n-1] (kinds of k) taken at now. */
static void
give_back(struct lim_key *k, const int *took, int n, int64_t now)
{
	while (n-- > 0)
		tg_quota_give(k->lim[took[n]], 1, now);
}

/* Take a unit of each of k's limits of kinds[0..n-1] (-1 or absent: none)
 * for r: ADMIT with v[kind] and *first the one with the fewest left (the
 * first taken of those on a tie; -1: none), or REFUSED (replied; what was
 * taken given back) or WAIT (*on: the limit whose lease is on its way;
 * may_wait 0: refuse instead). */
static int
take(struct lim *l, struct gw_req *r, struct lim_key *k, const int *kinds, int n,
    int may_wait, struct tg_quota_limit **on, struct tg_quota_verdict *v, int *first)
{
	int64_t now = tg_clock_mono_us();
	int took[4], nt = 0, i;

	*first = -1;
	for (i = 0; i < n; i++) {
		int j = kinds[i];

		if (j < 0 || !k->lim[j])
			continue;
		if (tg_quota_take(k->lim[j], 1, now, &v[j]) < 0) {
			give_back(k, took, nt, now);
			*on = k->lim[j];
			if (v[j].pending && may_wait)
				return WAIT;
			refuse(l, r, k, j, &v[j]);
			return REFUSED;
		}
		took[nt++] = j;
		*first = *first < 0 || v[j].left < v[*first].left ? j : *first;
	}
	return ADMIT;
}

/* Keep what r holds until it ends: its slot, its creation's unit, and
 * (limits.count vendor) its rate's and its operation's rate's units. */
static void
hold(struct lim *l, struct gw_req *r, struct lim_key *k, int op, int day)
{
	struct lim_req *s;
	int vendor = lim_cfg_of(&r->rt->cfg)->count_vendor;
	struct tg_quota_limit *rate = vendor ? k->lim[LIM_RATE] : NULL,
	    *op_rate = vendor && op >= 0 ? k->lim[op] : NULL;

	if (!k->lim[LIM_SLOTS] && day < 0 && !rate && !op_rate)
		return;
	s = gw_req_slot(r, l->id, sizeof(*s));
	if (rate)
		s->rate = tg_quota_ref(rate);
	if (op_rate)
		s->op_rate = tg_quota_ref(op_rate);
	if (k->lim[LIM_SLOTS])
		s->slot = tg_quota_ref(k->lim[LIM_SLOTS]);
	if (day >= 0)
		s->day = tg_quota_ref(k->lim[day]);
}

/* Take k's units for r: its rate's, its operation's rate's, its slot and
 * its creation's; ADMIT, REFUSED (replied) or WAIT (*on: the limit whose
 * lease is on its way; may_wait 0: refuse instead). The fields under the
 * limits are those of the one with the fewest units left (the first
 * taken of those on a tie). */
static int
admit(struct lim *l, struct gw_req *r, struct lim_key *k, int may_wait,
    struct tg_quota_limit **on)
{
	struct tg_quota_verdict v[LIM_ALL];
	int op = r->op > 0 && r->op < TG_OP_COUNT ? LIM_OP + (int)r->op : -1;
	int kinds[4] = { LIM_RATE, op, LIM_SLOTS, creation(r->op) }, first, rc;

	if ((rc = take(l, r, k, kinds, 4, may_wait, on, v, &first)) != ADMIT)
		return rc;
	hold(l, r, k, op, kinds[3] >= 0 && k->lim[kinds[3]] ? kinds[3] : -1);
	if (first >= 0 && lim_cfg_of(&r->rt->cfg)->headers)
		add_fields(r, k, first, &v[first]);
	k->admitted++;
	return ADMIT;
}

/* A sweep's unit for r: ADMIT (taken, held until r ends unless kept, or
 * none to take), REFUSED (replied) or WAIT (*on), as admit. */
static int
sweep_admit(struct lim *l, struct gw_req *r, struct lim_key *k, int may_wait,
    struct tg_quota_limit **on)
{
	struct tg_quota_verdict v[LIM_ALL];
	int kinds[1] = { LIM_SWEEPS }, first, rc;
	struct lim_req *s;

	if (!k->lim[LIM_SWEEPS])
		return ADMIT;
	if ((rc = take(l, r, k, kinds, 1, may_wait, on, v, &first)) != ADMIT)
		return rc;
	s = gw_req_slot(r, l->id, sizeof(*s));
	s->day = tg_quota_ref(k->lim[LIM_SWEEPS]);
	s->day_back = 1;
	if (lim_cfg_of(&r->rt->cfg)->headers)
		add_fields(r, k, LIM_SWEEPS, &v[LIM_SWEEPS]);
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

/* After a wait: s->k again, from the keys as they are now; 0 when a
 * reload came meanwhile (the request then goes on unlimited: its key's
 * entry is gone, and the new limits were not the ones it waited for). */
static int
key_again(struct lim_req *s)
{
	size_t i;

	if (key_index(s->l, s->r, &i) != 0)
		return 0;
	s->k = &s->l->keys[i];
	return 1;
}

/* Units may be there: take again (no second wait) and go on, or refuse. */
static void
woken(struct tg_quota_waiter *w, void *arg)
{
	struct lim_req *s = arg;
	struct tg_quota_limit *on;

	(void)w;
	wait_end(s);
	if (s->done != NULL) {
		void (*done)(struct gw_req *) = s->done;

		s->done = NULL;
		if (!key_again(s) || sweep_admit(s->l, s->r, s->k, 0, &on) == ADMIT)
			done(s->r);
	} else if (!key_again(s) || admit(s->l, s->r, s->k, 0, &on) == ADMIT) {
		gw_req_continue(s->r);
	}
}

/* The kind of k's limit lm. */
static int
kind_of(const struct lim_key *k, const struct tg_quota_limit *lm)
{
	int j;

	for (j = 0; j < LIM_ALL && k->lim[j] != lm; j++)
		;
	return j < LIM_ALL ? j : LIM_RATE;
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
	if (!key_again(s)) {
		if (s->done != NULL)
			s->done(s->r);
		else
			gw_req_continue(s->r);
	} else {
		tg_quota_peek(on, tg_clock_mono_us(), &v);
		v.retry_ms = 1000;
		refuse(s->l, s->r, s->k, kind_of(s->k, on), &v);
	}
	tg_quota_unref(on);
}

/* r waits for on's lease, at most WAIT_MS; then done (a sweep's unit) or
 * the request goes on (done NULL). */
static void
wait_for(struct lim *l, struct gw_req *r, struct lim_key *k, struct tg_quota_limit *on,
    void (*done)(struct gw_req *))
{
	struct timeval tv = { 0, WAIT_MS * 1000 };
	struct lim_req *s = gw_req_slot(r, l->id, sizeof(*s));

	s->l = l;
	s->k = k;
	s->r = r;
	s->on = on;
	s->done = done;
	s->deadline = event_new(l->gw->base, -1, 0, deadline_cb, s);
	event_add(s->deadline, &tv);
	tg_quota_wait(on, &s->w, woken, s);
}

static int
on_request(struct gw_req *r, void *ctx)
{
	struct lim *l = ctx;
	struct tg_quota_limit *on = NULL;
	struct lim_key *k;
	size_t i;

	if (l->q == NULL || !lim_cfg_of(&r->rt->cfg)->any || key_index(l, r, &i) != 0)
		return 0;
	k = &l->keys[i];
	if (!k->any)
		return 0;
	switch (admit(l, r, k, 1, &on)) {
	case ADMIT:
		return 0;
	case REFUSED:
		return -1;
	}
	wait_for(l, r, k, on, NULL);
	return -1;
}

/* ---- the daily quota of sweeps, for the runs feature (limits.sweeps) ---- */

static int
sweeps_take(void *ctx, struct gw_req *r, void (*done)(struct gw_req *r))
{
	struct lim *l = ctx;
	struct tg_quota_limit *on = NULL;
	size_t i;

	if (l->q == NULL || key_index(l, r, &i) != 0 || !l->keys[i].lim[LIM_SWEEPS])
		return 0;
	switch (sweep_admit(l, r, &l->keys[i], 1, &on)) {
	case ADMIT:
		return 0;
	case REFUSED:
		return -1;
	}
	wait_for(l, r, &l->keys[i], on, done);
	return 1;
}

static void
sweeps_keep(void *ctx, struct gw_req *r)
{
	struct lim *l = ctx;
	struct lim_req *s = r->slot[l->id];
	size_t i;

	if (s == NULL || s->day == NULL || !s->day_back)
		return;
	s->day_back = 0;
	if (key_index(l, r, &i) == 0)
		l->keys[i].created++;
}

static const struct gw_limits_sweeps sweeps_api = {
	.take = sweeps_take,
	.keep = sweeps_keep,
};

/* The key's vendor calls and jobs counted; a creation the vendor refused
 * (not 2xx) does not count against the day. */
static enum gw_head
on_head(struct gw_req *r, void *ctx, int status)
{
	struct lim *l = ctx;
	struct lim_req *s = r->slot[l->id];
	int ok = status >= 200 && status <= 299;
	size_t i;

	if (key_index(l, r, &i) == 0) {
		l->keys[i].vendor_calls++;
		l->keys[i].created += ok && creation(r->op) >= 0;
	}
	if (s != NULL)
		s->vendor = 1;
	if (s != NULL && s->day != NULL && !ok) {
		tg_quota_give(s->day, 1, tg_clock_mono_us());
		tg_quota_unref(s->day);
		s->day = NULL;
	}
	return GW_HEAD_RELAY;
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
	if (s->day) {
		if (s->day_back)	/* a sweep not created */
			tg_quota_give(s->day, 1, tg_clock_mono_us());
		tg_quota_unref(s->day);
	}
	if (s->rate) {		/* limits.count vendor: answered without one */
		if (!s->vendor)
			tg_quota_give(s->rate, 1, tg_clock_mono_us());
		tg_quota_unref(s->rate);
	}
	if (s->op_rate) {
		if (!s->vendor)
			tg_quota_give(s->op_rate, 1, tg_clock_mono_us());
		tg_quota_unref(s->op_rate);
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
	o.exact_rates = c->exact_rates;
	o.share_ms = c->share_ms;
	o.timeout_ms = l->gw->state != NULL ? tg_state_timeout_ms(l->gw->state) : 0;
	l->q = tg_quota_new(l->gw->base, l->store, &o);
	if (l->gw->quota == NULL)
		l->gw->quota = l->q;
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

/* Per key: vendor calls and jobs created; per key with limits: requests
 * admitted and each limit's units left. */
static void
key_metrics(struct lim *l, struct evbuffer *out)
{
	struct tg_quota_verdict v;
	size_t i;
	int j;

	evbuffer_add_printf(out, "# HELP tidegate_key_admitted_total Requests of an API key "
	    "with limits admitted under them.\n# TYPE tidegate_key_admitted_total counter\n");
	for (i = 0; i < l->nkeys; i++)
		if (l->keys[i].any)
			evbuffer_add_printf(out, "tidegate_key_admitted_total{%s} %llu\n",
			    l->keys[i].labels, (unsigned long long)l->keys[i].admitted);
	evbuffer_add_printf(out, "# HELP tidegate_key_vendor_calls_total Vendor answers to an "
	    "API key's requests.\n# TYPE tidegate_key_vendor_calls_total counter\n"
	    "# HELP tidegate_key_jobs_created_total Jobs an API key created (exports, imports, "
	    "simulation runs answered 2xx, sweeps).\n# TYPE tidegate_key_jobs_created_total counter\n");
	for (i = 0; i < l->nkeys; i++)
		evbuffer_add_printf(out, "tidegate_key_vendor_calls_total{%s} %llu\n"
		    "tidegate_key_jobs_created_total{%s} %llu\n", l->keys[i].labels,
		    (unsigned long long)l->keys[i].vendor_calls, l->keys[i].labels,
		    (unsigned long long)l->keys[i].created);
	evbuffer_add_printf(out, "# HELP tidegate_key_quota_left Units of each limit of an API "
	    "key left, as this instance knows.\n# TYPE tidegate_key_quota_left gauge\n");
	for (i = 0; i < l->nkeys; i++)
		for (j = 0; j < LIM_ALL; j++)
			if (l->keys[i].lim[j]) {
				tg_quota_peek(l->keys[i].lim[j], tg_clock_mono_us(), &v);
				evbuffer_add_printf(out, "tidegate_key_quota_left{%s,limit=\"%s\"} "
				    "%lld\n", l->keys[i].labels, KIND[j].field, (long long)v.left);
			}
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
	evbuffer_add_printf(out, "# HELP tidegate_quota_fallbacks_total Times a limit went "
	    "onto a local fallback share (the fleet's bound may be passed by that share).\n"
	    "# TYPE tidegate_quota_fallbacks_total counter\ntidegate_quota_fallbacks_total %llu\n",
	    l->q != NULL ? tg_quota_fallbacks(l->q) : 0ULL);
	key_metrics(l, out);
}

static void
stop(void *ctx)
{
	struct lim *l = ctx;

	keys_free(l);
	if (l->gw->quota == l->q)
		l->gw->quota = NULL;
	tg_quota_free(l->q);
	tg_quota_store_state_free(l->store);
	free(l);
}


/* ---- the admin API: GET /limits ---- */

/* limit's definition and figures into g (a map). */
static void
limit_json(yajl_gen g, struct tg_quota_limit *lm)
{
	const struct tg_quota_def *d = tg_quota_limit_def(lm);
	struct tg_quota_verdict v;

	tg_quota_peek(lm, tg_clock_mono_us(), &v);
	yajl_gen_map_open(g);
	tg_json_kv_str(g, "name", d->name);
	tg_json_kv_str(g, "kind", tg_quota_kind_str(d->kind));
	if (d->kind == TG_QUOTA_RATE) {
		tg_json_str(g, "per_second");
		yajl_gen_double(g, d->per_second);
		tg_json_str(g, "instance_per_second");
		yajl_gen_double(g, tg_quota_limit_rate(lm, tg_clock_mono_us()));
	}
	tg_json_kv_int(g, "quota", v.quota);
	tg_json_kv_int(g, "window_s", v.window_s);
	tg_json_kv_int(g, "left", v.left);
	tg_json_kv_int(g, "reset_s", v.reset_s);
	tg_json_kv_bool(g, "local_share", tg_quota_limit_fallback(lm));
	yajl_gen_map_close(g);
}

/* Each key's limits, figures and admitted count. */
static void
limits_json(struct lim *l, yajl_gen g)
{
	size_t i;
	int j;

	yajl_gen_map_open(g);
	tg_json_kv_int(g, "fallback_limits", l->q != NULL ? tg_quota_fallback(l->q) : 0);
	tg_json_str(g, "keys");
	yajl_gen_array_open(g);
	for (i = 0; i < l->nkeys; i++) {
		yajl_gen_map_open(g);
		tg_json_kv_str(g, "key", l->keys[i].name);
		tg_json_kv_int(g, "admitted", (long long)l->keys[i].admitted);
		tg_json_str(g, "limits");
		yajl_gen_map_open(g);
		for (j = 0; j < LIM_ALL; j++)
			if (l->keys[i].lim[j]) {
				tg_json_str(g, KIND[j].field);
				limit_json(g, l->keys[i].lim[j]);
			}
		yajl_gen_map_close(g);
		yajl_gen_map_close(g);
	}
	yajl_gen_array_close(g);
	yajl_gen_map_close(g);
}

static void
on_admin(void *ctx, struct evhttp_request *req, const char *path)
{
	struct lim *l = ctx;
	const struct tg_key *k = NULL;
	enum gw_admin_auth v = gw_admin_auth(l->gw->rt, tg_http_header(req, "X-Api-Key"),
	    tg_http_bearer(req), &k);
	yajl_gen g;

	if (k != NULL)
		gw_admin_set_key(l->gw, req, k->name);
	if (v != GW_ADMIN_OK) {
		gw_admin_reply_error(l->gw, req, v == GW_ADMIN_FORBIDDEN ? 403 : 401, NULL,
		    "an API key with the admin service is required");
		return;
	}
	if (strcmp(path, "/limits") != 0 || evhttp_request_get_command(req) != EVHTTP_REQ_GET) {
		gw_admin_reply_error(l->gw, req, 404, "NOT_FOUND", "GET /limits only");
		return;
	}
	g = tg_json_gen_new();
	limits_json(l, g);
	tg_reply_json(req, 200, g);
	yajl_gen_free(g);
}

static const struct gw_endpoint_role endpoints = {
	.admin_prefix = "/limits",
	.on_admin = on_admin,
};

static const struct gw_request_role request = {
	.ops = ops,
	.on_request = on_request,
	.on_head = on_head,
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
	.endpoints = &endpoints,
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
	if (kinds_make(err) != 0) {
		free(l);
		return -1;
	}
	l->gw = gw;
	if ((l->id = gw_feature_register(gw, &feature, l, err)) < 0) {
		free(l);
		return -1;
	}
	if (gw_api_provide(gw, GW_API_LIMITS_SWEEPS, &sweeps_api, l, err) != 0)
		return -1;	/* registered: its stop frees l */
	tg_metrics_help(gw->metrics, "tidegate_key_limited_total", "counter",
	    "Requests of an API key refused with 429, by limit (rate, concurrent).");
	return 0;
}
