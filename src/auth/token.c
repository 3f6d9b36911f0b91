/*
 * token.c - the gateway's own vendor credentials (struct tg_token_src).
 *
 * Called by the data exchange and simulation services before each
 * upstream call (tg_token_get), by their 401 handling
 * (tg_token_invalidate), and by start-up and readiness (tg_token_prefetch).
 * Logins go out through tg_upstream_fetch on the login upstream, with
 * the trace context opts.login_headers gives them: the caller's whose
 * get started the login, or one of its own (prefetch, refresh). Its log
 * lines name the account, and the triggering request's id and trace id.
 *
 * The state is read from the fields rather than stored:
 *   empty    no usable token, no login, no backoff: the next get logs in
 *   valid    token and now < expires_at: gets are answered at once
 *   login    a login is in flight: gets without a valid token queue
 *            behind it, so any number of them cost one login
 *   backoff  the last login failed and its window has not passed: gets
 *            without a valid token fail at once with Retry-After
 * "valid" and "login" overlap during a background refresh: the old token
 * is served until the new one arrives or the old one expires.
 *
 * Expiry is wall time (tg_clock_now_ms, which tests advance); the refresh
 * and login timeout are event timers; the backoff window is monotonic so
 * a wall-clock step cannot stretch it.
 */
#include <sys/queue.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/clock.h"
#include "tidegate/crypto.h"
#include "tidegate/ids.h"
#include "tidegate/json.h"
#include "tidegate/log.h"
#include "tidegate/token.h"
#include "tidegate/upstream.h"

#define LOGIN_MAX_BODY		(64 * 1024)
#define BACKOFF_FIRST_MS	1000
#define BACKOFF_MAX_MS		30000
#define WHY_LEN			480

struct tg_token_wait {
	TAILQ_ENTRY(tg_token_wait) entry;
	struct tg_token_src *ts;
	unsigned long long seq;
	tg_token_cb cb;
	void *arg;
};
TAILQ_HEAD(waitq, tg_token_wait);

/* Lets a callback free the source while a loop over waiters is running. */
struct guard {
	int alive;
	struct guard *up;
};

struct tg_token_src {
	struct event_base *base;
	struct tg_upstream *up;
	struct tg_token_opts o;		/* the strings are owned copies */
	char *token;
	int64_t expires_at_ms;		/* wall clock */
	struct event *refresh_ev;
	struct event *timeout_ev;
	struct tg_up_req *login;	/* in flight, or NULL */
	int login_pending;		/* set from send until the reply is handled */
	struct evbuffer *login_body;	/* borrowed by the upstream until it answers */
	struct waitq waiters;
	unsigned long long next_seq;
	unsigned long long answered_end;	/* waiters below this seq were answered */
	int64_t backoff_ms;		/* length of the current window, 0 when healthy */
	int64_t retry_at_mono;		/* end of the window */
	char last_why[WHY_LEN];
	int last_err;			/* enum tg_up_error of the last failed login */
	struct guard *guards;
	struct tg_token_stats st;
	struct tg_token_share share;	/* a fleet's view; fetch NULL: none */
	int sharing;			/* share.fetch under way */
	int64_t want_after_ms;		/* what it asked for: a token expiring after */
	int64_t life_ms;		/* the last token's life when it came */
	struct evkeyvalq login_hdrs;	/* the next login's trace context, until sent */
	char trig_rid[129];		/* the current login's trigger: X-Request-Id, */
	char trig_trace[33];		/* trace id (the login's own when nobody waited) */
};

/* Who the current login is for, in its log lines (request_id null: nobody waited). */
#define TRIGGER(ts) \
	TG_LS("request_id", (ts)->trig_rid[0] != '\0' ? (ts)->trig_rid : NULL), \
	TG_LS("trace_id", (ts)->trig_trace[0] != '\0' ? (ts)->trig_trace : NULL)

static int start_login(struct tg_token_src *);

static const char *
flow_name(const struct tg_token_src *ts)
{
	return ts->o.flow == TG_FLOW_PASSWORD ? "password" : "client_credentials";
}

static int
token_valid(const struct tg_token_src *ts)
{
	return ts->token != NULL && tg_clock_now_ms() < ts->expires_at_ms;
}

static int64_t
backoff_left_ms(const struct tg_token_src *ts)
{
	int64_t left;

	if (ts->backoff_ms == 0)
		return 0;
	left = ts->retry_at_mono - tg_clock_mono_ms();
	return left > 0 ? left : 0;
}

/* Whole seconds, rounded up so a client never retries inside the window. */
static int
retry_after(const struct tg_token_src *ts)
{
	int64_t s = (backoff_left_ms(ts) + 999) / 1000;

	if (s < ts->o.retry_after_s)
		s = ts->o.retry_after_s;
	return s < 1 ? 1 : (int)s;
}

static void
drop_token(struct tg_token_src *ts)
{
	if (ts->token != NULL) {
		explicit_bzero(ts->token, strlen(ts->token));
		free(ts->token);
	}
	ts->token = NULL;
	ts->expires_at_ms = 0;
}

struct tg_token_src *
tg_token_src_new(struct event_base *base, struct tg_upstream *login,
    const struct tg_token_opts *opts)
{
	struct tg_token_src *ts = tg_xcalloc(1, sizeof(*ts));

	ts->base = base;
	ts->up = login;
	ts->o = *opts;
	ts->o.path = tg_xstrdup(opts->path);
	ts->o.url = tg_xstrdup(opts->url != NULL ? opts->url : opts->path);
	ts->o.id = tg_xstrdup(opts->id);
	ts->o.secret = tg_xstrdup(opts->secret);
	ts->o.scope = opts->scope != NULL ? tg_xstrdup(opts->scope) : NULL;
	ts->o.audience = opts->audience != NULL ? tg_xstrdup(opts->audience) : NULL;
	TAILQ_INIT(&ts->waiters);
	TAILQ_INIT(&ts->login_hdrs);
	return ts;
}

static void
free_waiters(struct tg_token_src *ts)
{
	struct tg_token_wait *w;

	while ((w = TAILQ_FIRST(&ts->waiters)) != NULL) {
		TAILQ_REMOVE(&ts->waiters, w, entry);
		free(w);
	}
}

void
tg_token_src_free(struct tg_token_src *ts)
{
	struct guard *g;

	if (ts == NULL)
		return;
	for (g = ts->guards; g != NULL; g = g->up)
		g->alive = 0;
	if (ts->sharing && ts->share.cancel != NULL)
		ts->share.cancel(ts->share.arg);
	if (ts->login != NULL)
		tg_up_req_cancel(ts->login);
	if (ts->login_body != NULL)
		evbuffer_free(ts->login_body);
	if (ts->refresh_ev != NULL)
		event_free(ts->refresh_ev);
	if (ts->timeout_ev != NULL)
		event_free(ts->timeout_ev);
	free_waiters(ts);
	evhttp_clear_headers(&ts->login_hdrs);	/* trace context only: no secret */
	drop_token(ts);
	explicit_bzero((char *)ts->o.secret, strlen(ts->o.secret));
	free((char *)ts->o.secret);
	free((char *)ts->o.id);
	free((char *)ts->o.path);
	free((char *)ts->o.url);
	free((char *)ts->o.scope);
	free((char *)ts->o.audience);
	free(ts);
}

/*
 * Answer the waiters queued before this point with one outcome. Waiters
 * that callbacks queue meanwhile wait for the next login. token and why
 * are copied first because a callback may invalidate or free the source.
 */
static void
answer_waiters(struct tg_token_src *ts, const char *token, const char *why, int ra)
{
	unsigned long long end = ts->next_seq;
	char *tok = token ? tg_xstrdup(token) : NULL, *msg = why ? tg_xstrdup(why) : NULL;
	struct guard g = { 1, ts->guards };
	struct tg_token_wait *w;
	tg_token_cb cb;
	void *arg;

	ts->answered_end = end;
	ts->guards = &g;
	while (g.alive && (w = TAILQ_FIRST(&ts->waiters)) != NULL && w->seq < end) {
		TAILQ_REMOVE(&ts->waiters, w, entry);
		cb = w->cb;
		arg = w->arg;
		free(w);
		cb(tok, msg, ra, arg);
	}
	if (g.alive)
		ts->guards = g.up;
	if (tok != NULL) {
		explicit_bzero(tok, strlen(tok));
		free(tok);
	}
	free(msg);
}

struct tg_token_wait *
tg_token_get(struct tg_token_src *ts, tg_token_cb cb, void *arg)
{
	struct tg_token_wait *w;
	unsigned long long seq;
	char why[WHY_LEN + 40];
	int ra;

	if (token_valid(ts)) {
		cb(ts->token, NULL, 0, arg);
		return NULL;
	}
	drop_token(ts);
	if (!ts->login_pending && backoff_left_ms(ts) > 0) {
		ra = retry_after(ts);
		snprintf(why, sizeof(why), "%s; next attempt in %d s", ts->last_why, ra);
		cb(NULL, why, ra, arg);
		return NULL;
	}
	w = tg_xcalloc(1, sizeof(*w));
	w->ts = ts;
	w->seq = seq = ts->next_seq++;
	w->cb = cb;
	w->arg = arg;
	TAILQ_INSERT_TAIL(&ts->waiters, w, entry);
	if (!ts->login_pending && start_login(ts) < 0)
		return NULL;
	/* A login that completed before the send returned has answered w. */
	return ts->answered_end > seq ? NULL : w;
}

void
tg_token_wait_cancel(struct tg_token_wait *w)
{
	if (w == NULL)
		return;
	/* The login goes on: its token will serve the next caller. */
	TAILQ_REMOVE(&w->ts->waiters, w, entry);
	free(w);
}

void
tg_token_set_share(struct tg_token_src *ts, const struct tg_token_share *sh)
{
	ts->share = *sh;
}

void
tg_token_invalidate(struct tg_token_src *ts, const char *token, const char *request_id,
    const char *trace_id)
{
	if (token == NULL || ts->token == NULL || strcmp(token, ts->token) != 0)
		return;
	if (ts->share.invalidate != NULL)	/* fleet-wide: the next login is one */
		ts->share.invalidate(ts->share.arg, token);
	drop_token(ts);
	if (ts->refresh_ev != NULL)
		evtimer_del(ts->refresh_ev);
	ts->st.invalidations++;
	tg_log(TG_LOG_INFO, "token_invalidated", TG_LS("account", ts->o.id),
	    TG_LS("flow", flow_name(ts)), TG_LS("request_id", request_id),
	    TG_LS("trace_id", trace_id));
}

int
tg_token_last_error(const struct tg_token_src *ts)
{
	return ts->st.failing ? ts->last_err : TG_UP_OK;
}

const char *
tg_token_peek(const struct tg_token_src *ts)
{
	return token_valid(ts) ? ts->token : NULL;
}

void
tg_token_prefetch(struct tg_token_src *ts)
{
	if (token_valid(ts) || ts->login_pending || backoff_left_ms(ts) > 0)
		return;
	(void)start_login(ts);
}

void
tg_token_get_stats(const struct tg_token_src *ts, struct tg_token_stats *st)
{
	*st = ts->st;
	st->expires_at_ms = ts->token != NULL ? ts->expires_at_ms : 0;
}

/* ---- login ---- */

static void
password_body(const struct tg_token_src *ts, struct evbuffer *out)
{
	yajl_gen g = tg_json_gen_new();

	yajl_gen_map_open(g);
	tg_json_kv_str(g, "username", ts->o.id);
	tg_json_kv_str(g, "password", ts->o.secret);
	yajl_gen_map_close(g);
	tg_json_gen_flush(g, out);
	yajl_gen_free(g);
}

/* %20 rather than '+' for spaces: libevent's form parser keeps '+' as is. */
static void
add_param(struct evbuffer *out, const char *name, const char *value)
{
	char *v = evhttp_uriencode(value, -1, 0);

	if (v == NULL)
		abort();
	evbuffer_add_printf(out, "&%s=%s", name, v);
	explicit_bzero(v, strlen(v));
	free(v);
}

static void
client_credentials_body(const struct tg_token_src *ts, struct evbuffer *out)
{
	evbuffer_add_printf(out, "grant_type=client_credentials");
	if (!ts->o.client_basic) {
		add_param(out, "client_id", ts->o.id);
		add_param(out, "client_secret", ts->o.secret);
	}
	if (ts->o.scope != NULL)
		add_param(out, "scope", ts->o.scope);
	if (ts->o.audience != NULL)
		add_param(out, "audience", ts->o.audience);
}

/* RFC 6749 2.3.1 wants id and secret form-urlencoded (Appendix B: the
 * HTML form serialisation, space as '+') before they are joined with ':',
 * so a ':' in the id survives the Basic scheme. */
static void
form_encode(struct evbuffer *out, const char *s)
{
	static const char hex[] = "0123456789ABCDEF";
	unsigned char c;

	for (; (c = (unsigned char)*s) != '\0'; s++) {
		if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
		    c == '*' || c == '-' || c == '.' || c == '_')
			evbuffer_add(out, s, 1);
		else if (c == ' ')
			evbuffer_add(out, "+", 1);
		else
			evbuffer_add_printf(out, "%%%c%c", hex[c >> 4], hex[c & 15]);
	}
}

static void
add_basic_auth(const struct tg_token_src *ts, struct evkeyvalq *hdrs)
{
	struct evbuffer *b = evbuffer_new();
	size_t n;
	char *raw, *b64, *val;

	form_encode(b, ts->o.id);
	evbuffer_add(b, ":", 1);
	form_encode(b, ts->o.secret);
	n = evbuffer_get_length(b);
	raw = (char *)evbuffer_pullup(b, -1);
	b64 = tg_b64_encode(raw, n);
	val = tg_xasprintf("Basic %s", b64);
	evhttp_add_header(hdrs, "Authorization", val);
	explicit_bzero(raw, n);
	explicit_bzero(b64, strlen(b64));
	explicit_bzero(val, strlen(val));
	free(b64);
	free(val);
	evbuffer_free(b);
}

static void on_login_done(int, const struct evkeyvalq *, struct evbuffer *, enum tg_up_error,
    void *);
static void on_login_timeout(evutil_socket_t, short, void *);
static void login_failed(struct tg_token_src *, int, int, const char *);

/* The request is over (answered or cancelled): nothing reads the body now. */
/* The login request this instance sent ended: the hook hears it first. */
static void
login_ended(struct tg_token_src *ts, int status, int failed, const char *origin)
{
	if (ts->o.login_end != NULL)
		ts->o.login_end(ts->o.login_headers_arg, status, failed, origin);
}

static void
end_login(struct tg_token_src *ts)
{
	ts->login = NULL;
	ts->login_pending = 0;
	if (ts->login_body != NULL)
		evbuffer_free(ts->login_body);
	ts->login_body = NULL;
	if (ts->timeout_ev != NULL)
		evtimer_del(ts->timeout_ev);
}

static void
login_request(struct tg_token_src *ts, struct evkeyvalq *hdrs)
{
	ts->login_body = evbuffer_new();
	if (ts->o.flow == TG_FLOW_PASSWORD) {
		password_body(ts, ts->login_body);
		evhttp_add_header(hdrs, "Content-Type", "application/json");
	} else {
		client_credentials_body(ts, ts->login_body);
		evhttp_add_header(hdrs, "Content-Type", "application/x-www-form-urlencoded");
		if (ts->o.client_basic)
			add_basic_auth(ts, hdrs);
	}
	evhttp_add_header(hdrs, "Accept", "application/json");
}

/* The upstream has copied them; the Basic credentials go no further. */
static void
wipe_headers(struct evkeyvalq *hdrs)
{
	struct evkeyval *h;

	TAILQ_FOREACH(h, hdrs, next)
		explicit_bzero(h->value, strlen(h->value));
	evhttp_clear_headers(hdrs);
}

/* The login's timer: ms (<= 0: none) from now. */
static void
arm_login_timeout(struct tg_token_src *ts, int64_t ms)
{
	struct timeval tv;

	if (ms <= 0)
		return;
	if (ts->timeout_ev == NULL)
		ts->timeout_ev = evtimer_new(ts->base, on_login_timeout, ts);
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(ts->timeout_ev, &tv);
}

static void login_succeeded(struct tg_token_src *, const char *, int64_t, int);
static int send_login(struct tg_token_src *);
static int token_ok(const char *);

/*
 * The expiry a token of another instance must pass to be worth taking: a
 * newer one than this source holds, and one it would not refresh at once:
 * past the refresh lead (with its jitter, and a second); for tokens that
 * live shorter than that lead (refreshed at half their life, see
 * schedule_refresh), past half the life of the last one (a second at
 * least before any came). So a fleet of such tokens logs in once per half
 * life: the others take the leader's new token at their own refresh, and
 * never the one they hold again.
 */
static int64_t
want_after_ms(const struct tg_token_src *ts)
{
	int64_t lead = ts->o.refresh_before_ms + ts->o.jitter_ms + 1000;
	int64_t half = ts->life_ms / 2 > 1000 ? ts->life_ms / 2 : 1000;
	int64_t after = tg_clock_now_ms() + (half < lead ? half : lead);

	return ts->token != NULL && ts->expires_at_ms > after ? ts->expires_at_ms : after;
}

/* The fleet answered: another instance's token, or log in here. */
static void
on_shared(void *arg, const char *token, int64_t expires_at_ms)
{
	struct tg_token_src *ts = arg;
	int64_t life = expires_at_ms - tg_clock_now_ms();

	ts->sharing = 0;
	if (token != NULL && token_ok(token) && expires_at_ms > ts->want_after_ms) {
		if (ts->timeout_ev != NULL)
			evtimer_del(ts->timeout_ev);
		ts->login_pending = 0;
		login_succeeded(ts, token, life, 1);
		return;
	}
	ts->login_pending = 0;
	(void)send_login(ts);
}

/*
 * The login's trace context from the hook, for the first waiter (whose get
 * started it) or for nobody (a trace of the login's own, no request id);
 * the request id and trace id are kept for the log lines: the headers are
 * wiped once sent.
 */
static void
begin_trace(struct tg_token_src *ts)
{
	struct tg_token_wait *w = TAILQ_FIRST(&ts->waiters);
	const char *rid;

	evhttp_clear_headers(&ts->login_hdrs);
	ts->trig_rid[0] = ts->trig_trace[0] = '\0';
	if (ts->o.login_headers == NULL)
		return;
	ts->o.login_headers(ts->o.login_headers_arg, w != NULL ? w->arg : NULL, &ts->login_hdrs);
	rid = evhttp_find_header(&ts->login_hdrs, "X-Request-Id");
	if (rid != NULL && strlen(rid) < sizeof(ts->trig_rid))
		memcpy(ts->trig_rid, rid, strlen(rid) + 1);
	(void)tg_id_trace_of(evhttp_find_header(&ts->login_hdrs, "traceparent"), ts->trig_trace);
}

/*
 * A login: with a fleet (share.fetch) first the token another instance
 * holds or is getting, answered from the loop; else (or then) one login
 * request of this instance. -1 when the source was freed meanwhile.
 */
static int
start_login(struct tg_token_src *ts)
{
	begin_trace(ts);
	if (ts->share.fetch == NULL)
		return send_login(ts);
	ts->login_pending = 1;
	ts->sharing = 1;
	ts->want_after_ms = want_after_ms(ts);
	arm_login_timeout(ts, ts->share.wait_ms > 0 ? ts->share.wait_ms : ts->o.login_timeout_ms);
	ts->share.fetch(ts->share.arg, ts->want_after_ms, on_shared, ts);
	return 0;
}

/*
 * Send one login. The upstream answers from the loop, but should it answer
 * (or refuse) before returning, the outcome is already handled here and a
 * waiter's callback may have freed the source: then -1.
 */
static int
send_login(struct tg_token_src *ts)
{
	struct guard g = { 1, ts->guards };
	struct evkeyvalq hdrs;
	struct tg_up_req *r;

	TAILQ_INIT(&hdrs);
	TAILQ_CONCAT(&hdrs, &ts->login_hdrs, next);	/* hdrs outlives a freed ts */
	login_request(ts, &hdrs);
	ts->st.logins++;
	ts->login_pending = 1;
	ts->guards = &g;
	r = tg_upstream_fetch(ts->up, EVHTTP_REQ_POST, ts->o.path, &hdrs, ts->login_body,
	    LOGIN_MAX_BODY, on_login_done, ts);
	wipe_headers(&hdrs);
	if (g.alive && ts->login_pending && r == NULL) {
		login_ended(ts, 0, 1, NULL);
		end_login(ts);
		login_failed(ts, 0, TG_UP_CONNECT, "the vendor login request could not be sent");
	}
	if (!g.alive)
		return -1;
	ts->guards = g.up;
	if (ts->login_pending) {
		ts->login = r;
		arm_login_timeout(ts, ts->o.login_timeout_ms);
	}
	return 0;
}


static void on_refresh(evutil_socket_t, short, void *);

static void
arm_refresh(struct tg_token_src *ts, int64_t delay_ms)
{
	struct timeval tv;

	if (ts->refresh_ev == NULL)
		ts->refresh_ev = evtimer_new(ts->base, on_refresh, ts);
	if (delay_ms < 0)
		delay_ms = 0;
	tv.tv_sec = delay_ms / 1000;
	tv.tv_usec = (delay_ms % 1000) * 1000;
	evtimer_add(ts->refresh_ev, &tv);
}

/*
 * Refresh refresh_before plus up to jitter ahead of expiry, the jitter
 * keeping several gateways from logging in at the same instant. A token
 * that lives shorter than that lead is refreshed at half its life instead,
 * so it is neither refreshed at once in a loop nor allowed to lapse.
 */
static void
schedule_refresh(struct tg_token_src *ts, int64_t lifetime_ms)
{
	uint64_t r = 0;
	int64_t lead = ts->o.refresh_before_ms;

	if (ts->o.jitter_ms > 0) {
		tg_id_random(&r, sizeof(r));
		lead += (int64_t)(r % ((uint64_t)ts->o.jitter_ms + 1));
	}
	arm_refresh(ts, lead < lifetime_ms ? lifetime_ms - lead : lifetime_ms / 2);
}

static void
on_refresh(evutil_socket_t fd, short what, void *arg)
{
	struct tg_token_src *ts = arg;
	int64_t left = backoff_left_ms(ts);

	if (ts->login_pending)
		return;
	if (left > 0) {
		arm_refresh(ts, left);
		return;
	}
	(void)start_login(ts);
}

/* A token: this instance's login (published to the fleet) or another's. */
static void
login_succeeded(struct tg_token_src *ts, const char *token, int64_t lifetime_ms, int shared)
{
	drop_token(ts);
	ts->token = tg_xstrdup(token);
	ts->expires_at_ms = tg_clock_now_ms() + lifetime_ms;
	ts->life_ms = lifetime_ms;
	ts->backoff_ms = 0;
	ts->st.failing = 0;
	ts->last_why[0] = '\0';
	schedule_refresh(ts, lifetime_ms);
	tg_log(TG_LOG_INFO, shared ? "token_shared" : "token_login_ok",
	    TG_LS("account", ts->o.id), TG_LS("flow", flow_name(ts)),
	    TG_LI("expires_in", lifetime_ms / 1000), TRIGGER(ts));
	if (!shared && ts->share.publish != NULL)
		ts->share.publish(ts->share.arg, ts->token, ts->expires_at_ms);
	answer_waiters(ts, ts->token, NULL, 0);
}

/*
 * Open (or double) the backoff window and fail every waiter. A token that
 * is still valid keeps being served; its refresh is retried when the
 * window closes.
 */
static void
login_failed(struct tg_token_src *ts, int status, int uperr, const char *why)
{
	int ra;

	if (ts->backoff_ms == 0)
		ts->backoff_ms = BACKOFF_FIRST_MS;
	else if ((ts->backoff_ms *= 2) > BACKOFF_MAX_MS)
		ts->backoff_ms = BACKOFF_MAX_MS;
	ts->retry_at_mono = tg_clock_mono_ms() + ts->backoff_ms;
	ts->st.login_failures++;
	ts->st.failing = 1;
	ts->last_err = uperr;
	snprintf(ts->last_why, sizeof(ts->last_why), "%s", why);
	ra = retry_after(ts);
	tg_log(TG_LOG_WARN, "token_login_failed", TG_LS("account", ts->o.id),
	    TG_LS("flow", flow_name(ts)), TG_LS("url", ts->o.url), TG_LI("status", status),
	    TG_LS("error", why), TG_LI("retry_after", ra), TRIGGER(ts));
	if (token_valid(ts))
		arm_refresh(ts, ts->backoff_ms);
	answer_waiters(ts, NULL, why, ra);
}

/* The token goes into an Authorization header: printable ASCII only. */
static int
token_ok(const char *t)
{
	if (t == NULL || *t == '\0')
		return 0;
	for (; *t != '\0'; t++)
		if ((unsigned char)*t < 0x21 || (unsigned char)*t > 0x7e)
			return 0;
	return 1;
}

/* expires_in as RFC 6749 has it (a number); a numeric string is tolerated. */
static int64_t
expires_in_ms(yajl_val v)
{
	long long n = -1;
	char *end;

	if (v != NULL && YAJL_IS_INTEGER(v))
		n = v->u.number.i;
	else if (v != NULL && YAJL_IS_STRING(v) && v->u.string[0] != '\0') {
		n = strtoll(v->u.string, &end, 10);
		if (*end != '\0')
			n = -1;
	}
	return n > 0 && n < INT64_MAX / 1000 ? (int64_t)n * 1000 : -1;
}

/*
 * A JWT exp already in the past means the vendor's clock is behind ours:
 * the vendor still accepts the token, so trust the default lifetime (a 401
 * would invalidate it) rather than logging in on every request.
 */
static int64_t
jwt_lifetime_ms(const struct tg_token_src *ts, const char *token)
{
	int64_t exp = tg_jwt_exp(token), life;

	if (exp < 0 || exp > INT64_MAX / 1000)
		return ts->o.default_lifetime_ms;
	life = exp * 1000 - tg_clock_now_ms();
	if (life <= 0) {
		tg_log(TG_LOG_WARN, "token_exp_in_past", TG_LS("account", ts->o.id),
		    TG_LI("exp", exp), TRIGGER(ts));
		return ts->o.default_lifetime_ms;
	}
	return life;
}

/* Returns the token (borrowed from root) and its lifetime, or NULL with why. */
static const char *
parse_reply(struct tg_token_src *ts, struct evbuffer *body, yajl_val *root,
    int64_t *lifetime_ms, char *why, size_t whylen)
{
	const char *tok;
	size_t len = body ? evbuffer_get_length(body) : 0;

	*root = len ? tg_json_parse((const char *)evbuffer_pullup(body, -1), len, NULL) : NULL;
	if (*root == NULL || !YAJL_IS_OBJECT(*root)) {
		snprintf(why, whylen, "the vendor login reply is not a JSON object");
		return NULL;
	}
	tok = tg_json_get_str(*root, ts->o.flow == TG_FLOW_PASSWORD ? "token" : "access_token");
	if (!token_ok(tok)) {
		snprintf(why, whylen, "the vendor login reply has no usable %s",
		    ts->o.flow == TG_FLOW_PASSWORD ? "token" : "access_token");
		return NULL;
	}
	if (ts->o.flow == TG_FLOW_PASSWORD)
		*lifetime_ms = jwt_lifetime_ms(ts, tok);
	else if ((*lifetime_ms = expires_in_ms(tg_json_get(*root, "expires_in"))) < 0)
		*lifetime_ms = ts->o.default_lifetime_ms;
	return tok;
}

/* An OAuth error code ("invalid_client") helps the operator and is not secret. */
static void
refusal_why(const struct tg_token_src *ts, struct evbuffer *body, int status, char *why,
    size_t whylen)
{
	size_t len = body ? evbuffer_get_length(body) : 0;
	yajl_val root = len ? tg_json_parse((const char *)evbuffer_pullup(body, -1), len, NULL)
	    : NULL;
	const char *code = tg_json_get_str(root, "error");

	if (code != NULL && (strlen(code) > 40 || strspn(code, "abcdefghijklmnopqrstuvwxyz_") !=
	    strlen(code)))
		code = NULL;
	snprintf(why, whylen, "%s (HTTP %d from POST %s%s%s)",
	    status == 401 || status == 403 ? "the vendor rejected the configured credentials" :
	    "the vendor login failed", status, ts->o.url, code ? ", " : "", code ? code : "");
	yajl_tree_free(root);
}

/* detail (the upstream's words: host, port, certificate check) is borrowed
 * from the request, which lives until on_login_done returns. */
static void
unreached_why(const struct tg_token_src *ts, enum tg_up_error err, const char *detail,
    char *why, size_t whylen)
{
	if (detail == NULL || detail[0] == '\0')
		detail = tg_up_error_str(err);
	if (err == TG_UP_TLS)
		snprintf(why, whylen, "the vendor login endpoint %s failed TLS verification: %s",
		    ts->o.url, detail);
	else
		snprintf(why, whylen, "the vendor login endpoint %s could not be reached (%s: %s)",
		    ts->o.url, tg_up_error_str(err), detail);
}

static void
on_login_done(int status, const struct evkeyvalq *headers, struct evbuffer *body,
    enum tg_up_error err, void *arg)
{
	struct tg_token_src *ts = arg;
	/* Read before end_login forgets the request (still alive until we return). */
	const char *detail = ts->login != NULL ? tg_up_req_detail(ts->login) : NULL;
	char why[WHY_LEN];
	const char *tok = NULL;
	yajl_val root = NULL;
	int64_t life = 0;

	login_ended(ts, status, err != TG_UP_OK,
	    ts->login != NULL ? tg_up_req_origin(ts->login) : NULL);
	end_login(ts);
	if (err != TG_UP_OK)
		unreached_why(ts, err, detail, why, sizeof(why));
	else if (status < 200 || status > 299)
		refusal_why(ts, body, status, why, sizeof(why));
	else
		tok = parse_reply(ts, body, &root, &life, why, sizeof(why));
	if (tok != NULL)
		login_succeeded(ts, tok, life, 0);
	else
		login_failed(ts, err != TG_UP_OK ? 0 : status, err, why);
	yajl_tree_free(root);
}

/*
 * The timer of the login under way: while the fleet is asked (another
 * instance may be logging in), its answer came too late: stop waiting and
 * log in here, with the vendor's own timer; else the vendor did not
 * answer the login request this instance sent.
 */
static void
on_login_timeout(evutil_socket_t fd, short what, void *arg)
{
	struct tg_token_src *ts = arg;
	char why[WHY_LEN];

	if (ts->sharing) {
		if (ts->share.cancel != NULL)
			ts->share.cancel(ts->share.arg);
		ts->sharing = 0;
		ts->login_pending = 0;
		tg_log(TG_LOG_WARN, "token_share_timeout", TG_LS("account", ts->o.id),
		    TG_LS("flow", flow_name(ts)), TRIGGER(ts));
		(void)send_login(ts);
		return;
	}
	if (ts->login != NULL) {
		tg_up_req_cancel(ts->login);
		login_ended(ts, 0, 1, NULL);
	}
	end_login(ts);
	snprintf(why, sizeof(why), "the vendor login at %s did not answer within %lld ms",
	    ts->o.url, (long long)ts->o.login_timeout_ms);
	login_failed(ts, 0, TG_UP_TIMEOUT, why);
}
