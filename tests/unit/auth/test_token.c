/*
 * test_token.c - the vendor token source: both login flows on the wire,
 * single-flight, cached gets, refresh ahead of expiry (and at half-life),
 * 401 invalidation, failure backoff, login timeout, cancel and free with
 * work pending, the trace context hook (the first waiter's, or nobody's)
 * and the log lines naming the account and the login's trigger, and that
 * no secret or token reaches the log.
 *
 * The upstream client is a fake defined here: it records each login and
 * leaves it pending until the test answers it.
 */
#include <sys/queue.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/clock.h"
#include "tidegate/crypto.h"
#include "tidegate/json.h"
#include "tidegate/log.h"
#include "tidegate/token.h"
#include "tidegate/upstream.h"

#define SECRET_MARK	"SECRET"	/* in every secret and token the tests use */
#define PASSWORD	"pw-" SECRET_MARK "-\"q\""
#define CC_SECRET	"s3cr=t+/%~." SECRET_MARK

/* ---- fake upstream ---- */

struct tg_up_req {
	TAILQ_ENTRY(tg_up_req) entry;
	tg_up_fetch_cb cb;
	void *arg;
};

static struct {
	TAILQ_HEAD(, tg_up_req) pending;
	int calls, cancels;
	const char *sync_body;		/* answer 200 with it before returning */
	int refuse;			/* return NULL without a callback */
	enum evhttp_cmd_type method;
	char *uri, *ctype, *body, *authz, *rid, *tp;
} fake;

static char *logbuf;
static size_t loglen;
static FILE *logfp;
static int jwt_serial;

static char *
header_dup(const struct evkeyvalq *headers, const char *name)
{
	const char *v = evhttp_find_header(headers, name);

	return v != NULL ? strdup(v) : NULL;
}

struct tg_up_req *
tg_upstream_fetch(struct tg_upstream *u, enum evhttp_cmd_type method, const char *uri,
    const struct evkeyvalq *headers, struct evbuffer *body, size_t max_body,
    tg_up_fetch_cb cb, void *arg)
{
	struct tg_up_req *r = calloc(1, sizeof(*r));
	const char *ct = evhttp_find_header(headers, "Content-Type");
	size_t n = evbuffer_get_length(body);

	fake.calls++;
	fake.method = method;
	free(fake.uri);
	free(fake.ctype);
	free(fake.body);
	free(fake.authz);
	free(fake.rid);
	free(fake.tp);
	fake.authz = header_dup(headers, "Authorization");
	fake.rid = header_dup(headers, "X-Request-Id");
	fake.tp = header_dup(headers, "traceparent");
	fake.uri = strdup(uri);
	fake.ctype = strdup(ct ? ct : "");
	fake.body = n ? strndup((const char *)evbuffer_pullup(body, -1), n) : strdup("");
	r->cb = cb;
	r->arg = arg;
	if (fake.refuse) {
		free(r);
		return NULL;
	}
	if (fake.sync_body != NULL) {
		struct evbuffer *b = evbuffer_new();

		evbuffer_add(b, fake.sync_body, strlen(fake.sync_body));
		cb(200, NULL, b, TG_UP_OK, arg);
		evbuffer_free(b);
		free(r);
		return (struct tg_up_req *)&fake;	/* finished: never used */
	}
	TAILQ_INSERT_TAIL(&fake.pending, r, entry);
	return r;
}

void
tg_up_req_cancel(struct tg_up_req *r)
{
	fake.cancels++;
	TAILQ_REMOVE(&fake.pending, r, entry);
	free(r);
}

const char *
tg_up_error_str(enum tg_up_error err)
{
	return err == TG_UP_CONNECT ? "connect" : err == TG_UP_TLS ? "tls" : "upstream error";
}

/* Every fake login is answered by the primary host. */
const char *
tg_up_req_origin(const struct tg_up_req *r)
{
	return "primary";
}

/* What the real upstream says about a failed login request. */
static const char *fake_detail = "";

const char *
tg_up_req_detail(const struct tg_up_req *r)
{
	return fake_detail;
}

static void
fake_clear(void)
{
	struct tg_up_req *r;

	while ((r = TAILQ_FIRST(&fake.pending)) != NULL) {
		TAILQ_REMOVE(&fake.pending, r, entry);
		free(r);
	}
	free(fake.uri);
	free(fake.ctype);
	free(fake.body);
	free(fake.authz);
	free(fake.rid);
	free(fake.tp);
	memset(&fake, 0, sizeof(fake));
	TAILQ_INIT(&fake.pending);
}

/* Each test starts with nothing left pending by the one before. */
static void
fake_reset(void)
{
	assert_true(TAILQ_EMPTY(&fake.pending));
	fake_clear();
}

/* Answer the oldest pending login. */
static void
fake_reply(int status, const char *body, enum tg_up_error err)
{
	struct tg_up_req *r = TAILQ_FIRST(&fake.pending);
	struct evbuffer *b = evbuffer_new();

	assert_non_null(r);
	TAILQ_REMOVE(&fake.pending, r, entry);
	if (body != NULL)
		evbuffer_add(b, body, strlen(body));
	r->cb(status, NULL, err == TG_UP_OK ? b : NULL, err, r->arg);
	free(r);
	evbuffer_free(b);
}

/* ---- helpers ---- */

/* A JWT with exp (omitted when < 0); the signature is never checked. */
static char *
make_jwt(long long exp)
{
	char payload[128], *h, *p, *jwt;

	if (exp >= 0)
		snprintf(payload, sizeof(payload), "{\"sub\":\"demo\",\"exp\":%lld,\"n\":%d}",
		    exp, ++jwt_serial);
	else
		snprintf(payload, sizeof(payload), "{\"sub\":\"demo\",\"n\":%d}", ++jwt_serial);
	h = tg_b64url_encode("{\"alg\":\"HS256\"}", 15);
	p = tg_b64url_encode(payload, strlen(payload));
	jwt = tg_xasprintf("%s.%s.sig-" SECRET_MARK, h, p);
	free(h);
	free(p);
	return jwt;
}

/* A password-flow reply body holding a fresh JWT; *jwt gets a copy. */
static char *
jwt_reply(long long exp, char **jwt)
{
	char *t = make_jwt(exp), *body = tg_xasprintf("{\"token\":\"%s\"}", t);

	if (jwt != NULL)
		*jwt = t;
	else
		free(t);
	return body;
}

static void
reply_jwt(long long exp, char **jwt)
{
	char *body = jwt_reply(exp, jwt);

	fake_reply(200, body, TG_UP_OK);
	free(body);
}

static long long
now_s(void)
{
	return tg_clock_now_ms() / 1000;
}

static struct tg_token_opts
password_opts(void)
{
	struct tg_token_opts o = {
		.flow = TG_FLOW_PASSWORD, .path = "/public/v1/authenticate", .id = "demo",
		.secret = PASSWORD, .refresh_before_ms = 60000, .jitter_ms = 0,
		.default_lifetime_ms = 600000, .login_timeout_ms = 5000, .retry_after_s = 0,
	};

	return o;
}

static struct tg_token_opts
cc_opts(void)
{
	struct tg_token_opts o = password_opts();

	o.flow = TG_FLOW_CLIENT_CREDENTIALS;
	o.path = "/api/oauth2/token";
	o.url = "https://auth.example:8443/api/oauth2/token";
	o.id = "cli ent&x";
	o.secret = CC_SECRET;
	return o;
}

struct got {
	int calls;
	char token[512];
	char why[256];
	int retry_after;
};

static void
on_token(const char *token, const char *why, int ra, void *arg)
{
	struct got *g = arg;

	g->calls++;
	snprintf(g->token, sizeof(g->token), "%s", token ? token : "");
	snprintf(g->why, sizeof(g->why), "%s", why ? why : "");
	g->retry_after = ra;
	if (token == NULL) {
		assert_non_null(why);
		assert_true(ra >= 1);
	}
}

static void
on_token_never(const char *token, const char *why, int ra, void *arg)
{
	fail_msg("callback after cancel or free");
}

/* A waiter the source's free leaves unanswered (free_waiters drops it). */
static void
on_token_never_until_free(const char *token, const char *why, int ra, void *arg)
{
	fail_msg("a waiter answered although the fleet was never answered");
}

static void
run_loop(struct event_base *base, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

/* The last log line of event (parsed; the caller frees it), or NULL. */
static yajl_val
last_event(const char *event)
{
	char want[96];
	const char *p, *hit = NULL, *start, *end;

	fflush(logfp);
	snprintf(want, sizeof(want), "\"event\":\"%s\"", event);
	for (p = logbuf; p != NULL && (p = strstr(p, want)) != NULL; p++)
		hit = p;
	if (hit == NULL)
		return NULL;
	for (start = hit; start > logbuf && start[-1] != '\n'; start--)
		;
	end = strchr(hit, '\n');
	return tg_json_parse(start, end != NULL ? (size_t)(end - start) : strlen(start), NULL);
}

/* The last event's field key: its string, "null" for a JSON null, NULL
 * when absent. */
static void
assert_field(const char *event, const char *key, const char *want)
{
	yajl_val ev = last_event(event), v;

	assert_non_null(ev);
	v = tg_json_get(ev, key);
	if (want == NULL)
		assert_null(v);
	else if (strcmp(want, "null") == 0)
		assert_true(v != NULL && YAJL_IS_NULL(v));
	else
		assert_string_equal(YAJL_IS_STRING(v) ? v->u.string : "(not a string)", want);
	yajl_tree_free(ev);
}

#define CALLER_TRACE	"4bf92f3577b34da6a3ce929d0e0e4736"
#define CALLER_TP	"00-" CALLER_TRACE "-00f067aa0ba902b7-01"
#define OWN_TP		"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"

/* The trace context hook: what it was last called with. */
static struct {
	int calls;
	void *waiter;
} hook;

/* As the gateway's: a waiter's request id and trace, or a trace of the
 * login's own and no request id. */
static void
trace_hook(void *hook_arg, void *waiter, struct evkeyvalq *out)
{
	assert_ptr_equal(hook_arg, &hook);
	hook.calls++;
	hook.waiter = waiter;
	evhttp_add_header(out, "traceparent", waiter != NULL ? CALLER_TP : OWN_TP);
	if (waiter != NULL)
		evhttp_add_header(out, "X-Request-Id", "req-cold");
	evhttp_add_header(out, "User-Agent", "tidegate/test");
}

/* ---- tests ---- */

static void
test_password_login_and_cached_get(void **state)
{
	struct event_base *base = event_base_new();
	struct tg_token_opts o = password_opts();
	struct tg_token_src *ts;
	struct tg_token_stats st;
	struct got g1 = { 0 }, g2 = { 0 };
	yajl_val req;
	char *jwt;
	long long exp = now_s() + 3600;

	fake_reset();
	ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);
	assert_null(tg_token_peek(ts));
	assert_non_null(tg_token_get(ts, on_token, &g1));
	assert_int_equal(fake.calls, 1);
	assert_int_equal(fake.method, EVHTTP_REQ_POST);
	assert_string_equal(fake.uri, "/public/v1/authenticate");
	assert_string_equal(fake.ctype, "application/json");
	req = tg_json_parse(fake.body, strlen(fake.body), NULL);
	assert_non_null(req);
	assert_string_equal(tg_json_get_str(req, "username"), "demo");
	assert_string_equal(tg_json_get_str(req, "password"), PASSWORD);
	assert_int_equal(req->u.object.len, 2);
	yajl_tree_free(req);
	assert_int_equal(g1.calls, 0);

	reply_jwt(exp, &jwt);
	assert_int_equal(g1.calls, 1);
	assert_string_equal(g1.token, jwt);
	assert_string_equal(tg_token_peek(ts), jwt);
	tg_token_get_stats(ts, &st);
	assert_int_equal(st.expires_at_ms, exp * 1000);
	assert_int_equal(st.logins, 1);
	assert_int_equal(st.failing, 0);

	/* cached: answered before get returns, nothing sent */
	assert_null(tg_token_get(ts, on_token, &g2));
	assert_int_equal(g2.calls, 1);
	assert_string_equal(g2.token, jwt);
	assert_int_equal(fake.calls, 1);
	tg_token_src_free(ts);
	free(jwt);
	event_base_free(base);
}

static void
test_jwt_without_exp_uses_default(void **state)
{
	struct event_base *base = event_base_new();
	struct tg_token_opts o = password_opts();
	struct tg_token_src *ts;
	struct tg_token_stats st;
	struct got g = { 0 };
	int64_t before = tg_clock_now_ms();

	fake_reset();
	ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);
	tg_token_prefetch(ts);
	assert_int_equal(fake.calls, 1);
	tg_token_prefetch(ts);		/* in flight: no second login */
	assert_int_equal(fake.calls, 1);
	reply_jwt(-1, NULL);
	tg_token_get_stats(ts, &st);
	assert_true(st.expires_at_ms >= before + 600000);
	assert_true(st.expires_at_ms <= tg_clock_now_ms() + 600000);
	assert_null(tg_token_get(ts, on_token, &g));
	assert_int_equal(g.calls, 1);
	tg_token_src_free(ts);
	event_base_free(base);
}

struct shared {
	int calls, mismatches;
	const char *expect;
};

static void
on_shared(const char *token, const char *why, int ra, void *arg)
{
	struct shared *s = arg;

	s->calls++;
	if (token == NULL || s->expect == NULL || strcmp(token, s->expect) != 0)
		s->mismatches++;
}

static void
test_single_flight_1000(void **state)
{
	struct event_base *base = event_base_new();
	struct tg_token_opts o = password_opts();
	struct tg_token_src *ts;
	struct shared s = { 0 };
	char *jwt;
	int i;

	fake_reset();
	ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);
	for (i = 0; i < 1000; i++)
		assert_non_null(tg_token_get(ts, on_shared, &s));
	assert_int_equal(fake.calls, 1);
	assert_int_equal(s.calls, 0);
	s.expect = jwt = make_jwt(now_s() + 3600);
	{
		char *body = tg_xasprintf("{\"token\":\"%s\"}", jwt);

		fake_reply(200, body, TG_UP_OK);
		free(body);
	}
	assert_int_equal(s.calls, 1000);
	assert_int_equal(s.mismatches, 0);
	for (i = 0; i < 1000; i++)
		assert_null(tg_token_get(ts, on_shared, &s));
	assert_int_equal(s.calls, 2000);
	assert_int_equal(s.mismatches, 0);
	assert_int_equal(fake.calls, 1);
	tg_token_src_free(ts);
	free(jwt);
	event_base_free(base);
}

/* exp = now + 3 s, refresh 2 s ahead: a second login within 1.5 s. */
static void
test_refresh_before_expiry(void **state)
{
	struct event_base *base = event_base_new();
	struct tg_token_opts o = password_opts();
	struct tg_token_src *ts;
	struct got g = { 0 }, g2 = { 0 };
	char *jwt1, *jwt2;

	o.refresh_before_ms = 2000;
	fake_reset();
	ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);
	tg_token_get(ts, on_token, &g);
	reply_jwt(now_s() + 3, &jwt1);
	assert_string_equal(g.token, jwt1);
	run_loop(base, 1500);
	assert_int_equal(fake.calls, 2);

	/* while the refresh is in flight the old token is still served */
	assert_string_equal(tg_token_peek(ts), jwt1);
	assert_null(tg_token_get(ts, on_token, &g2));
	assert_string_equal(g2.token, jwt1);
	reply_jwt(now_s() + 3600, &jwt2);
	assert_string_equal(tg_token_peek(ts), jwt2);
	tg_token_src_free(ts);
	free(jwt1);
	free(jwt2);
	event_base_free(base);
}

/* A 2 s token with refresh_before 60 s is refreshed at half-life. */
static void
test_refresh_half_life(void **state)
{
	struct event_base *base = event_base_new();
	struct tg_token_opts o = cc_opts();
	struct tg_token_src *ts;
	struct tg_token_stats st;
	struct got g = { 0 };

	fake_reset();
	ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);
	tg_token_get(ts, on_token, &g);
	fake_reply(200, "{\"access_token\":\"AT-" SECRET_MARK "-1\",\"expires_in\":2}", TG_UP_OK);
	assert_string_equal(g.token, "AT-" SECRET_MARK "-1");
	run_loop(base, 700);
	assert_int_equal(fake.calls, 1);
	run_loop(base, 800);
	assert_int_equal(fake.calls, 2);

	/* the refresh fails: the old token stays in use until it expires */
	fake_reply(503, "{}", TG_UP_OK);
	assert_string_equal(tg_token_peek(ts), "AT-" SECRET_MARK "-1");
	tg_token_get_stats(ts, &st);
	assert_int_equal(st.failing, 1);
	assert_int_equal(st.login_failures, 1);
	tg_token_src_free(ts);		/* refresh retry timer pending */
	event_base_free(base);
}

static void
test_invalidate_current_and_stale(void **state)
{
	struct event_base *base = event_base_new();
	struct tg_token_opts o = password_opts();
	struct tg_token_src *ts;
	struct tg_token_stats st;
	struct got g[5];
	char *jwt1, *jwt2;
	int i;

	memset(g, 0, sizeof(g));
	fake_reset();
	ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);
	tg_token_prefetch(ts);
	reply_jwt(now_s() + 3600, &jwt1);

	tg_token_invalidate(ts, "some-other-token", NULL, NULL);
	assert_string_equal(tg_token_peek(ts), jwt1);

	/* five requests carried jwt1 and all got 401: one re-login */
	for (i = 0; i < 5; i++) {
		tg_token_invalidate(ts, jwt1, NULL, NULL);
		tg_token_get(ts, on_token, &g[i]);
	}
	assert_int_equal(fake.calls, 2);
	tg_token_get_stats(ts, &st);
	assert_int_equal(st.invalidations, 1);
	assert_null(tg_token_peek(ts));
	reply_jwt(now_s() + 3600, &jwt2);
	for (i = 0; i < 5; i++)
		assert_string_equal(g[i].token, jwt2);

	/* a late 401 for the replaced token changes nothing */
	tg_token_invalidate(ts, jwt1, NULL, NULL);
	assert_string_equal(tg_token_peek(ts), jwt2);
	tg_token_get_stats(ts, &st);
	assert_int_equal(st.invalidations, 1);
	tg_token_src_free(ts);
	free(jwt1);
	free(jwt2);
	event_base_free(base);
}

static void
test_failure_backoff(void **state)
{
	struct event_base *base = event_base_new();
	struct tg_token_opts o = password_opts();
	struct tg_token_src *ts;
	struct got g[3], f = { 0 };
	int i;

	memset(g, 0, sizeof(g));
	fake_reset();
	ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);
	for (i = 0; i < 3; i++)
		tg_token_get(ts, on_token, &g[i]);
	fake_reply(503, "{\"message\":\"down\"}", TG_UP_OK);
	for (i = 0; i < 3; i++) {
		assert_int_equal(g[i].calls, 1);
		assert_string_equal(g[i].token, "");
		assert_non_null(strstr(g[i].why, "HTTP 503"));
		assert_null(strstr(g[i].why, SECRET_MARK));
		assert_int_equal(g[i].retry_after, 1);
	}

	/* inside the 1 s window: fail at once, no login */
	assert_null(tg_token_get(ts, on_token, &f));
	assert_int_equal(f.calls, 1);
	assert_int_equal(f.retry_after, 1);
	assert_non_null(strstr(f.why, "HTTP 503"));
	assert_int_equal(fake.calls, 1);

	/* after it: one new login, whose failure doubles the window */
	usleep(1100 * 1000);
	assert_non_null(tg_token_get(ts, on_token, &f));
	assert_int_equal(fake.calls, 2);
	fake_reply(500, NULL, TG_UP_OK);
	assert_int_equal(f.retry_after, 2);
	assert_null(tg_token_get(ts, on_token, &f));
	assert_int_equal(f.retry_after, 2);
	assert_int_equal(fake.calls, 2);

	/* a success resets it: the next failure is back to 1 s */
	usleep(2100 * 1000);
	tg_token_prefetch(ts);
	assert_int_equal(fake.calls, 3);
	reply_jwt(now_s() + 3600, NULL);
	tg_token_invalidate(ts, tg_token_peek(ts), NULL, NULL);
	tg_token_get(ts, on_token, &f);
	assert_int_equal(fake.calls, 4);
	fake_reply(502, "", TG_UP_OK);
	assert_int_equal(f.retry_after, 1);
	tg_token_src_free(ts);
	event_base_free(base);
}

static void
test_transport_error_and_floor(void **state)
{
	struct event_base *base = event_base_new();
	struct tg_token_opts o = cc_opts();
	struct tg_token_src *ts;
	struct got g = { 0 };

	o.retry_after_s = 5;
	fake_reset();
	ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);
	tg_token_get(ts, on_token, &g);
	fake_detail = "cannot connect to auth.example:8443";
	fake_reply(0, NULL, TG_UP_CONNECT);
	fake_detail = "";
	assert_int_equal(g.calls, 1);
	assert_string_equal(g.why, "the vendor login endpoint "
	    "https://auth.example:8443/api/oauth2/token could not be reached (connect: "
	    "cannot connect to auth.example:8443)");
	assert_int_equal(g.retry_after, 5);
	assert_int_equal(tg_token_last_error(ts), TG_UP_CONNECT);
	tg_token_src_free(ts);
	event_base_free(base);
}

/* A refused certificate is told apart from an unreachable host, with the
 * upstream's reason, and forgotten once a login succeeds. */
static void
test_tls_failure_named(void **state)
{
	struct event_base *base = event_base_new();
	struct tg_token_opts o = cc_opts();
	struct tg_token_src *ts;
	struct got g = { 0 }, g2 = { 0 };

	fake_reset();
	ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);
	assert_int_equal(tg_token_last_error(ts), TG_UP_OK);
	tg_token_get(ts, on_token, &g);
	fake_detail = "TLS with auth.example:8443: certificate verify failed: "
	    "Hostname mismatch";
	fake_reply(0, NULL, TG_UP_TLS);
	fake_detail = "";
	assert_int_equal(g.calls, 1);
	assert_string_equal(g.why, "the vendor login endpoint "
	    "https://auth.example:8443/api/oauth2/token failed TLS verification: TLS with "
	    "auth.example:8443: certificate verify failed: Hostname mismatch");
	assert_int_equal(tg_token_last_error(ts), TG_UP_TLS);
	assert_null(strstr(g.why, SECRET_MARK));
	fflush(logfp);
	assert_non_null(strstr(logbuf, "\"url\":\"https://auth.example:8443/api/oauth2/token\""));
	usleep(1100 * 1000);	/* the first backoff window */
	tg_token_get(ts, on_token, &g2);
	fake_reply(200, "{\"access_token\":\"tok\",\"expires_in\":60}", TG_UP_OK);
	assert_string_equal(g2.token, "tok");
	assert_int_equal(tg_token_last_error(ts), TG_UP_OK);
	tg_token_src_free(ts);
	event_base_free(base);
}

static void
expect_bad_reply(const struct tg_token_opts *o, int status, const char *body, const char *why)
{
	struct event_base *base = event_base_new();
	struct tg_token_src *ts;
	struct got g = { 0 };

	fake_reset();
	ts = tg_token_src_new(base, (struct tg_upstream *)&fake, o);
	tg_token_get(ts, on_token, &g);
	fake_reply(status, body, TG_UP_OK);
	assert_int_equal(g.calls, 1);
	assert_string_equal(g.token, "");
	assert_string_equal(g.why, why);
	assert_null(tg_token_peek(ts));
	tg_token_src_free(ts);
	event_base_free(base);
}

static void
test_malformed_and_refused(void **state)
{
	struct tg_token_opts p = password_opts(), c = cc_opts();

	expect_bad_reply(&p, 200, "not json", "the vendor login reply is not a JSON object");
	expect_bad_reply(&p, 200, "", "the vendor login reply is not a JSON object");
	expect_bad_reply(&p, 200, "[1]", "the vendor login reply is not a JSON object");
	expect_bad_reply(&p, 200, "{\"token\":5}", "the vendor login reply has no usable token");
	expect_bad_reply(&p, 200, "{\"token\":\"a b\"}",
	    "the vendor login reply has no usable token");
	expect_bad_reply(&c, 200, "{\"token\":\"x\"}",
	    "the vendor login reply has no usable access_token");
	expect_bad_reply(&p, 401, "{\"statusCode\":401}",
	    "the vendor rejected the configured credentials (HTTP 401 from POST "
	    "/public/v1/authenticate)");
	expect_bad_reply(&c, 401, "{\"error\":\"invalid_client\"}",
	    "the vendor rejected the configured credentials (HTTP 401 from POST "
	    "https://auth.example:8443/api/oauth2/token, invalid_client)");
	expect_bad_reply(&c, 400, "{\"error\":\"Bad \\\"stuff\\\"\"}",
	    "the vendor login failed (HTTP 400 from POST "
	    "https://auth.example:8443/api/oauth2/token)");
	expect_bad_reply(&c, 404, "<html>Not Found</html>",
	    "the vendor login failed (HTTP 404 from POST "
	    "https://auth.example:8443/api/oauth2/token)");
}

static void
test_login_timeout(void **state)
{
	struct event_base *base = event_base_new();
	struct tg_token_opts o = password_opts();
	struct tg_token_src *ts;
	struct tg_token_stats st;
	struct got g = { 0 };

	o.login_timeout_ms = 200;
	fake_reset();
	ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);
	assert_non_null(tg_token_get(ts, on_token, &g));
	run_loop(base, 400);
	assert_int_equal(g.calls, 1);
	assert_string_equal(g.why,
	    "the vendor login at /public/v1/authenticate did not answer within 200 ms");
	assert_int_equal(tg_token_last_error(ts), TG_UP_TIMEOUT);
	assert_int_equal(fake.cancels, 1);
	assert_true(TAILQ_EMPTY(&fake.pending));
	tg_token_get_stats(ts, &st);
	assert_int_equal(st.login_failures, 1);
	assert_int_equal(st.failing, 1);
	tg_token_src_free(ts);
	event_base_free(base);
}

/* client_secret_basic: RFC 6749 2.3.1 form-urlencodes id and secret
 * (space as '+', ':' escaped) before base64; scope and audience ride in
 * the body, which then carries no credentials. */
static void
test_client_secret_basic_scope_audience(void **state)
{
	struct event_base *base = event_base_new();
	struct tg_token_opts o = cc_opts();
	struct tg_token_src *ts;
	struct got g = { 0 };
	size_t n;
	char *raw;

	o.id = "app id:1";
	o.secret = "p@ss w:rd~" SECRET_MARK;
	o.scope = "api://x/.default openid";
	o.audience = "https://api.example/";
	o.client_basic = 1;
	fake_reset();
	ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);
	tg_token_get(ts, on_token, &g);
	assert_string_equal(fake.body, "grant_type=client_credentials"
	    "&scope=api%3A%2F%2Fx%2F.default%20openid&audience=https%3A%2F%2Fapi.example%2F");
	assert_non_null(fake.authz);
	assert_memory_equal(fake.authz, "Basic ", 6);
	raw = (char *)tg_b64_decode(fake.authz + 6, strlen(fake.authz + 6), &n);
	assert_non_null(raw);
	assert_int_equal(n, strlen("app+id%3A1:p%40ss+w%3Ard%7E" SECRET_MARK));
	assert_memory_equal(raw, "app+id%3A1:p%40ss+w%3Ard%7E" SECRET_MARK, n);
	free(raw);
	fake_reply(200, "{\"access_token\":\"tok\",\"expires_in\":60}", TG_UP_OK);
	assert_string_equal(g.token, "tok");
	tg_token_src_free(ts);

	/* client_secret_post (the default) sends no Authorization header */
	o.client_basic = 0;
	o.scope = o.audience = NULL;
	ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);
	tg_token_get(ts, on_token, &g);
	assert_null(fake.authz);
	assert_string_equal(fake.body, "grant_type=client_credentials"
	    "&client_id=app%20id%3A1&client_secret=p%40ss%20w%3Ard~" SECRET_MARK);
	fake_reply(200, "{\"access_token\":\"tok\",\"expires_in\":60}", TG_UP_OK);
	tg_token_src_free(ts);
	event_base_free(base);
}

static void
test_client_credentials_request(void **state)
{
	struct event_base *base = event_base_new();
	struct tg_token_opts o = cc_opts();
	struct tg_token_src *ts;
	struct tg_token_stats st;
	struct evkeyvalq form;
	struct got g = { 0 };
	int64_t before = tg_clock_now_ms();

	fake_reset();
	ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);
	tg_token_get(ts, on_token, &g);
	assert_int_equal(fake.method, EVHTTP_REQ_POST);
	assert_string_equal(fake.uri, "/api/oauth2/token");
	assert_string_equal(fake.ctype, "application/x-www-form-urlencoded");
	assert_string_equal(fake.body, "grant_type=client_credentials"
	    "&client_id=cli%20ent%26x&client_secret=s3cr%3Dt%2B%2F%25~." SECRET_MARK);
	TAILQ_INIT(&form);
	assert_int_equal(evhttp_parse_query_str(fake.body, &form), 0);
	assert_string_equal(evhttp_find_header(&form, "client_id"), "cli ent&x");
	assert_string_equal(evhttp_find_header(&form, "client_secret"), CC_SECRET);
	evhttp_clear_headers(&form);

	fake_reply(200, "{\"access_token\":\"AT-" SECRET_MARK "-2\",\"token_type\":\"Bearer\","
	    "\"expires_in\":120}", TG_UP_OK);
	assert_string_equal(g.token, "AT-" SECRET_MARK "-2");
	tg_token_get_stats(ts, &st);
	assert_true(st.expires_at_ms >= before + 120000);
	assert_true(st.expires_at_ms <= tg_clock_now_ms() + 120000);

	/* no expires_in: the default lifetime */
	tg_token_invalidate(ts, "AT-" SECRET_MARK "-2", NULL, NULL);
	tg_token_prefetch(ts);
	before = tg_clock_now_ms();
	fake_reply(200, "{\"access_token\":\"AT-" SECRET_MARK "-3\"}", TG_UP_OK);
	tg_token_get_stats(ts, &st);
	assert_true(st.expires_at_ms >= before + 600000);
	assert_true(st.expires_at_ms <= tg_clock_now_ms() + 600000);
	tg_token_src_free(ts);
	event_base_free(base);
}

static void
test_cancel_and_free_pending(void **state)
{
	struct event_base *base = event_base_new();
	struct tg_token_opts o = password_opts();
	struct tg_token_src *ts;
	struct tg_token_wait *w;
	struct got g1 = { 0 }, g3 = { 0 };

	fake_reset();
	ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);
	tg_token_get(ts, on_token, &g1);
	w = tg_token_get(ts, on_token_never, NULL);
	tg_token_get(ts, on_token, &g3);
	tg_token_wait_cancel(w);
	reply_jwt(now_s() + 3600, NULL);
	assert_int_equal(g1.calls, 1);
	assert_int_equal(g3.calls, 1);

	/* free with a login, waiters and timers pending: no callback, no leak */
	tg_token_invalidate(ts, tg_token_peek(ts), NULL, NULL);
	tg_token_get(ts, on_token_never, NULL);
	tg_token_get(ts, on_token_never, NULL);
	assert_int_equal(fake.calls, 2);
	tg_token_src_free(ts);
	assert_int_equal(fake.cancels, 1);
	run_loop(base, 10);
	event_base_free(base);
}

struct freer {
	struct tg_token_src *ts;
	int calls;
};

static void
on_token_free_src(const char *token, const char *why, int ra, void *arg)
{
	struct freer *f = arg;

	f->calls++;
	tg_token_src_free(f->ts);
}

/* The gateway may tear a source down from a waiter's callback (reload). */
static void
test_free_from_callback(void **state)
{
	struct event_base *base = event_base_new();
	struct tg_token_opts o = password_opts();
	struct freer f = { 0 };

	fake_reset();
	f.ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);
	tg_token_get(f.ts, on_token_free_src, &f);
	tg_token_get(f.ts, on_token_never, NULL);
	reply_jwt(now_s() + 3600, NULL);
	assert_int_equal(f.calls, 1);
	event_base_free(base);
}

/* A waiter that gets a refused token and asks again waits for a new login. */
struct again {
	struct tg_token_src *ts;
	struct got g;
	int calls;
};

static void
on_token_again(const char *token, const char *why, int ra, void *arg)
{
	struct again *a = arg;

	if (a->calls++ == 0) {
		tg_token_invalidate(a->ts, token, NULL, NULL);
		assert_non_null(tg_token_get(a->ts, on_token, &a->g));
	}
}

static void
test_reentrant_invalidate(void **state)
{
	struct event_base *base = event_base_new();
	struct tg_token_opts o = password_opts();
	struct again a = { 0 };
	struct got g = { 0 };
	char *jwt1, *jwt2;

	fake_reset();
	a.ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);
	tg_token_get(a.ts, on_token_again, &a);
	tg_token_get(a.ts, on_token, &g);
	reply_jwt(now_s() + 3600, &jwt1);
	assert_string_equal(g.token, jwt1);	/* answered by the first login */
	assert_int_equal(a.g.calls, 0);
	assert_int_equal(fake.calls, 2);
	reply_jwt(now_s() + 3600, &jwt2);
	assert_string_equal(a.g.token, jwt2);
	tg_token_src_free(a.ts);
	free(jwt1);
	free(jwt2);
	event_base_free(base);
}

/* An upstream that answers or refuses before fetch returns. */
static void
test_sync_completion(void **state)
{
	struct event_base *base = event_base_new();
	struct tg_token_opts o = cc_opts();
	struct tg_token_src *ts;
	struct freer f = { 0 };
	struct got g = { 0 }, g2 = { 0 };

	fake_reset();
	ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);
	fake.sync_body = "{\"access_token\":\"AT-" SECRET_MARK "-9\",\"expires_in\":60}";
	assert_null(tg_token_get(ts, on_token, &g));
	assert_string_equal(g.token, "AT-" SECRET_MARK "-9");
	assert_null(tg_token_get(ts, on_token, &g2));
	assert_int_equal(g2.calls, 1);
	assert_int_equal(fake.calls, 1);
	tg_token_src_free(ts);

	fake.sync_body = NULL;
	fake.refuse = 1;
	memset(&g, 0, sizeof(g));
	ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);
	assert_null(tg_token_get(ts, on_token, &g));
	assert_int_equal(g.calls, 1);
	assert_string_equal(g.why, "the vendor login request could not be sent");
	tg_token_src_free(ts);

	/* the only waiter frees the source from inside the send */
	fake.refuse = 0;
	fake.sync_body = "{\"access_token\":\"AT-" SECRET_MARK "-10\"}";
	f.ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);
	assert_null(tg_token_get(f.ts, on_token_free_src, &f));
	assert_int_equal(f.calls, 1);
	fake.sync_body = NULL;
	event_base_free(base);
}

/* Expiry follows the process clock, which tests advance. */
static void
test_clock_advance_expires(void **state)
{
	struct event_base *base = event_base_new();
	struct tg_token_opts o = password_opts();
	struct tg_token_src *ts;
	struct got g = { 0 };

	fake_reset();
	ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);
	tg_token_prefetch(ts);
	reply_jwt(now_s() + 3600, NULL);
	assert_non_null(tg_token_peek(ts));
	tg_clock_advance_ms(3601 * 1000);
	assert_null(tg_token_peek(ts));
	assert_non_null(tg_token_get(ts, on_token, &g));
	assert_int_equal(fake.calls, 2);
	reply_jwt(now_s() + 3600, NULL);
	assert_int_equal(g.calls, 1);
	tg_token_src_free(ts);
	event_base_free(base);
}

/* ---- a fleet's view (tg_token_set_share) ---- */

static struct {
	int fetches, cancels, publishes, invalidations;
	int64_t fresh_until, published_exp;
	char published[512], invalidated[512];
	void (*answer)(void *, const char *, int64_t);
	void *ts;
} sh;

static void
sh_fetch(void *arg, int64_t fresh_until_ms, void (*answer)(void *, const char *, int64_t),
    void *ts)
{
	sh.fetches++;
	sh.fresh_until = fresh_until_ms;
	sh.answer = answer;
	sh.ts = ts;
}

static void
sh_cancel(void *arg)
{
	sh.cancels++;
	sh.answer = NULL;
}

static void
sh_publish(void *arg, const char *token, int64_t exp)
{
	sh.publishes++;
	snprintf(sh.published, sizeof(sh.published), "%s", token);
	sh.published_exp = exp;
}

static void
sh_invalidate(void *arg, const char *token)
{
	sh.invalidations++;
	snprintf(sh.invalidated, sizeof(sh.invalidated), "%s", token);
}

/* The login_end hook's calls (test_login_end_hook). */
static struct {
	int calls, status, failed, waiter_calls;
	const char *origin;
	struct got *g;
} ended;

static void
end_hook(void *hook_arg, int status, int failed, const char *origin)
{
	assert_ptr_equal(hook_arg, &hook);
	ended.calls++;
	ended.status = status;
	ended.failed = failed;
	ended.origin = origin;
	ended.waiter_calls = ended.g != NULL ? ended.g->calls : -1;
}

static struct tg_token_src *
shared_src_opts(struct event_base *base, struct tg_token_opts o)
{
	struct tg_token_share s = { sh_fetch, sh_cancel, sh_publish, sh_invalidate, NULL, 0 };
	struct tg_token_src *ts;

	o.login_headers = trace_hook;
	o.login_end = end_hook;
	o.login_headers_arg = &hook;
	ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);

	memset(&sh, 0, sizeof(sh));
	tg_token_set_share(ts, &s);
	return ts;
}

static struct tg_token_src *
shared_src(struct event_base *base)
{
	return shared_src_opts(base, password_opts());
}

/* Another instance's fresh token is taken: no login of this one. */
static void
test_share_takes_fleet_token(void **state)
{
	struct event_base *base = event_base_new();
	struct tg_token_src *ts;
	struct tg_token_stats st;
	struct got g = { 0 };
	char *jwt = make_jwt(now_s() + 3600);

	fake_reset();
	ts = shared_src(base);
	assert_non_null(tg_token_get(ts, on_token, &g));
	assert_int_equal(sh.fetches, 1);
	assert_int_equal(fake.calls, 0);		/* nothing sent while the fleet is asked */
	assert_true(sh.fresh_until >= tg_clock_now_ms() + 1000);	/* none held yet: */
	assert_true(sh.fresh_until < tg_clock_now_ms() + 2000);	/* any with a second left */
	sh.answer(sh.ts, jwt, (now_s() + 3600) * 1000);
	assert_int_equal(g.calls, 1);
	assert_string_equal(g.token, jwt);
	assert_field("token_shared", "request_id", "req-cold");	/* the get that asked */
	assert_field("token_shared", "trace_id", CALLER_TRACE);
	assert_int_equal(fake.calls, 0);
	tg_token_get_stats(ts, &st);
	assert_int_equal(st.logins, 0);
	assert_int_equal(sh.publishes, 0);		/* not published back */
	tg_token_invalidate(ts, jwt, NULL, NULL);	/* a 401: dropped fleet-wide */
	assert_int_equal(sh.invalidations, 1);
	assert_string_equal(sh.invalidated, jwt);
	free(jwt);
	tg_token_src_free(ts);
	event_base_free(base);
}

/* No fleet token (or one too close to expiry): this instance logs in and
 * publishes; once it knows tokens live long, it asks for one past the
 * refresh lead; the source freed while the fleet is asked cancels the ask. */
static void
test_share_logs_in_and_publishes(void **state)
{
	struct event_base *base = event_base_new();
	struct tg_token_src *ts;
	struct got g = { 0 };
	char *jwt = make_jwt(now_s() + 1), *mine;

	fake_reset();
	ts = shared_src(base);
	assert_non_null(tg_token_get(ts, on_token, &g));
	sh.answer(sh.ts, jwt, tg_clock_now_ms() + 500);	/* not a second left */
	assert_int_equal(fake.calls, 1);
	assert_string_equal(fake.rid, "req-cold");	/* the trace made before the ask */
	assert_int_equal(g.calls, 0);
	reply_jwt(now_s() + 3600, &mine);
	assert_int_equal(g.calls, 1);
	assert_string_equal(g.token, mine);
	assert_int_equal(sh.publishes, 1);
	assert_string_equal(sh.published, mine);
	assert_true(sh.published_exp > tg_clock_now_ms() + 3500 * 1000);
	tg_token_invalidate(ts, mine, NULL, NULL);
	assert_non_null(tg_token_get(ts, on_token_never_until_free, NULL));
	assert_int_equal(sh.fetches, 2);
	assert_true(sh.fresh_until > tg_clock_now_ms() + 60000);	/* past the lead */
	tg_token_src_free(ts);				/* the ask under way is cancelled */
	assert_int_equal(sh.cancels, 1);
	free(jwt);
	free(mine);
	event_base_free(base);
}

/*
 * Tokens that live shorter than the refresh lead (2 s here, the lead 60 s;
 * refreshed at half their life): a refresh asks the fleet for a token newer
 * than the one held with more than half a life left, takes it when another
 * instance logged in meanwhile (no login here), and logs in itself when the
 * record holds only what it has. A fleet that does not answer within its
 * wait (login_timeout here) is no failure: this instance logs in itself,
 * and only the vendor's own silence would be "did not answer".
 */
static void
test_share_short_tokens(void **state)
{
	struct event_base *base = event_base_new();
	struct tg_token_opts o = cc_opts();
	struct tg_token_src *ts;
	struct tg_token_stats st;
	struct got g = { 0 };
	int64_t held;

	o.login_timeout_ms = 300;
	fake_reset();
	ts = shared_src_opts(base, o);
	assert_non_null(tg_token_get(ts, on_token, &g));
	sh.answer(sh.ts, NULL, 0);				/* lead: log in */
	fake_reply(200, "{\"access_token\":\"AT-1\",\"expires_in\":2}", TG_UP_OK);
	assert_string_equal(g.token, "AT-1");
	held = sh.published_exp;
	run_loop(base, 1150);					/* the refresh, at 1 s */
	assert_int_equal(sh.fetches, 2);
	assert_true(sh.fresh_until >= held);			/* newer than AT-1 */
	sh.answer(sh.ts, "AT-9", tg_clock_now_ms() + 2000);	/* another's new login */
	assert_string_equal(tg_token_peek(ts), "AT-9");
	assert_int_equal(fake.calls, 1);
	held = tg_clock_now_ms() + 2000;
	run_loop(base, 1150);					/* its refresh */
	assert_int_equal(sh.fetches, 3);
	assert_true(sh.fresh_until >= held - 50);
	sh.answer(sh.ts, "AT-9", held);				/* the same: not taken */
	assert_int_equal(fake.calls, 2);
	fake_reply(200, "{\"access_token\":\"AT-2\",\"expires_in\":2}", TG_UP_OK);
	assert_string_equal(tg_token_peek(ts), "AT-2");
	run_loop(base, 1150 + 300 + 100);			/* asked; nobody answers */
	assert_int_equal(sh.fetches, 4);
	assert_int_equal(sh.cancels, 1);
	assert_int_equal(fake.calls, 3);			/* then logs in itself */
	assert_field("token_share_timeout", "account", "cli ent&x");
	fake_reply(200, "{\"access_token\":\"AT-3\",\"expires_in\":2}", TG_UP_OK);
	assert_string_equal(tg_token_peek(ts), "AT-3");
	tg_token_get_stats(ts, &st);
	assert_int_equal(st.login_failures, 0);
	assert_int_equal(st.failing, 0);
	tg_token_src_free(ts);
	event_base_free(base);
}

/*
 * A login started by a get carries the first waiter's trace (the hook is
 * called once, with its arg) and its log lines name the account and that
 * request; a prefetch's login is nobody's: the hook gets NULL, the log
 * lines name no request. A 401 names the request it answered.
 */
static void
test_login_trace_hook(void **state)
{
	struct event_base *base = event_base_new();
	struct tg_token_opts o = password_opts();
	struct tg_token_src *ts;
	struct got g1 = { 0 }, g2 = { 0 };

	o.login_headers = trace_hook;
	o.login_headers_arg = &hook;
	memset(&hook, 0, sizeof(hook));
	fake_reset();
	ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);
	assert_non_null(tg_token_get(ts, on_token, &g1));
	assert_non_null(tg_token_get(ts, on_token, &g2));
	assert_int_equal(hook.calls, 1);
	assert_ptr_equal(hook.waiter, &g1);
	assert_string_equal(fake.rid, "req-cold");
	assert_string_equal(fake.tp, CALLER_TP);
	assert_string_equal(fake.ctype, "application/json");	/* the login's own intact */
	reply_jwt(now_s() + 3600, NULL);
	assert_int_equal(g2.calls, 1);
	assert_field("token_login_ok", "account", "demo");
	assert_field("token_login_ok", "request_id", "req-cold");
	assert_field("token_login_ok", "trace_id", CALLER_TRACE);
	assert_field("token_login_ok", "id", NULL);
	assert_null(tg_token_get(ts, on_token, &g1));	/* a valid token: no hook */
	assert_int_equal(hook.calls, 1);

	tg_token_invalidate(ts, tg_token_peek(ts), "req-401", CALLER_TRACE);
	assert_field("token_invalidated", "account", "demo");
	assert_field("token_invalidated", "request_id", "req-401");
	assert_field("token_invalidated", "trace_id", CALLER_TRACE);
	assert_field("token_invalidated", "id", NULL);

	tg_token_prefetch(ts);
	assert_int_equal(hook.calls, 2);
	assert_null(hook.waiter);
	assert_null(fake.rid);
	assert_string_equal(fake.tp, OWN_TP);
	fake_reply(500, "{}", TG_UP_OK);
	assert_field("token_login_failed", "account", "demo");
	assert_field("token_login_failed", "request_id", "null");
	assert_field("token_login_failed", "trace_id", "0af7651916cd43dd8448eb211c80319c");	/* its own */
	assert_field("token_login_failed", "id", NULL);
	tg_token_src_free(ts);
	event_base_free(base);
}

/* login_end: once per login request sent, with its answer and before any
 * waiter hears; a request that could not be sent and one that timed out
 * are failures without a status; a token taken from the fleet sends none. */
static void
test_login_end_hook(void **state)
{
	struct event_base *base = event_base_new();
	struct tg_token_opts o = password_opts();
	struct tg_token_src *ts;
	struct got g = { 0 };
	char *jwt = make_jwt(now_s() + 3600);

	o.login_headers = trace_hook;
	o.login_end = end_hook;
	o.login_headers_arg = &hook;
	o.login_timeout_ms = 200;
	memset(&ended, 0, sizeof(ended));
	ended.g = &g;
	fake_reset();
	ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);
	assert_non_null(tg_token_get(ts, on_token, &g));
	fake_reply(503, "{}", TG_UP_OK);			/* refused */
	assert_int_equal(ended.calls, 1);
	assert_int_equal(ended.status, 503);
	assert_int_equal(ended.failed, 0);
	assert_string_equal(ended.origin, "primary");
	assert_int_equal(ended.waiter_calls, 0);		/* before the waiter heard */
	assert_int_equal(g.calls, 1);
	tg_token_src_free(ts);

	memset(&g, 0, sizeof(g));
	ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);
	assert_non_null(tg_token_get(ts, on_token, &g));
	run_loop(base, 400);					/* timed out */
	assert_int_equal(ended.calls, 2);
	assert_int_equal(ended.status, 0);
	assert_int_equal(ended.failed, 1);
	assert_null(ended.origin);
	tg_token_src_free(ts);

	memset(&g, 0, sizeof(g));
	fake.refuse = 1;					/* not sent */
	ts = tg_token_src_new(base, (struct tg_upstream *)&fake, &o);
	(void)tg_token_get(ts, on_token, &g);
	assert_int_equal(ended.calls, 3);
	assert_int_equal(ended.failed, 1);
	fake.refuse = 0;
	tg_token_src_free(ts);

	memset(&g, 0, sizeof(g));
	ts = shared_src(base);					/* the fleet's token: none */
	assert_non_null(tg_token_get(ts, on_token, &g));
	sh.answer(sh.ts, jwt, (now_s() + 3600) * 1000);
	assert_int_equal(g.calls, 1);
	assert_int_equal(ended.calls, 3);
	tg_token_src_free(ts);
	free(jwt);
	event_base_free(base);
}

/* Runs last: every flow above has logged into the captured stream. */
static void
test_secret_never_logged(void **state)
{
	fflush(logfp);
	assert_non_null(strstr(logbuf, "\"token_login_ok\""));
	assert_non_null(strstr(logbuf, "\"token_login_failed\""));
	assert_non_null(strstr(logbuf, "\"token_invalidated\""));
	assert_non_null(strstr(logbuf, "\"token_shared\""));
	assert_null(strstr(logbuf, "\"id\":"));	/* a request id only: none here */
	assert_non_null(strstr(logbuf, "\"expires_in\""));
	assert_null(strstr(logbuf, SECRET_MARK));
	assert_null(strstr(logbuf, "pw-"));
	assert_null(strstr(logbuf, "s3cr"));
	assert_null(strstr(logbuf, ".sig"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_password_login_and_cached_get),
		cmocka_unit_test(test_jwt_without_exp_uses_default),
		cmocka_unit_test(test_single_flight_1000),
		cmocka_unit_test(test_refresh_before_expiry),
		cmocka_unit_test(test_refresh_half_life),
		cmocka_unit_test(test_invalidate_current_and_stale),
		cmocka_unit_test(test_failure_backoff),
		cmocka_unit_test(test_transport_error_and_floor),
		cmocka_unit_test(test_malformed_and_refused),
		cmocka_unit_test(test_login_timeout),
		cmocka_unit_test(test_client_credentials_request),
		cmocka_unit_test(test_cancel_and_free_pending),
		cmocka_unit_test(test_free_from_callback),
		cmocka_unit_test(test_reentrant_invalidate),
		cmocka_unit_test(test_sync_completion),
		cmocka_unit_test(test_clock_advance_expires),
		cmocka_unit_test(test_tls_failure_named),
		cmocka_unit_test(test_client_secret_basic_scope_audience),
		cmocka_unit_test(test_share_takes_fleet_token),
		cmocka_unit_test(test_share_logs_in_and_publishes),
		cmocka_unit_test(test_share_short_tokens),
		cmocka_unit_test(test_login_trace_hook),
		cmocka_unit_test(test_login_end_hook),
		cmocka_unit_test(test_secret_never_logged),
	};
	int rc;

	TAILQ_INIT(&fake.pending);
	logfp = open_memstream(&logbuf, &loglen);
	tg_log_init(logfp, TG_LOG_DEBUG);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	tg_log_init(stderr, TG_LOG_OFF);
	fclose(logfp);
	free(logbuf);
	fake_clear();
	return rc;
}
