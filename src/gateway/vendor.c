/*
 * vendor.c - every call the gateway makes to a vendor service, for a
 * client's request or for itself (polls, payload fetches, run checks,
 * sweep submissions): a reference to the runtime for the call's life, the
 * vendor token (waited for, the gateway's own), the upstream exchange, and
 * a vendor 401 on that token answered once by invalidating it and sending
 * the request again; the trace context of a vendor login, the first
 * waiting call's (login_headers). The only user of the vendor token API
 * outside src/auth/, so that a fleet backend for tokens changes one file.
 *
 * Two forms share one struct: streamed (the caller's head/body/done
 * callbacks see the answer as it arrives; a replayed 401 is never shown
 * to them) and whole (gw_vcall_fetch: the body collected up to a limit).
 * No callback runs before gw_vcall_start returns. While tracing, each
 * attempt for a traced request ends its CLIENT span (spans.c).
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/clock.h"
#include "tidegate/hblock.h"
#include "tidegate/log.h"
#include "gw.h"

struct gw_vcall {
	struct gw_runtime *rt;		/* held */
	struct gw_service *svc;
	enum evhttp_cmd_type method;
	char *uri;
	struct evbuffer *body;		/* borrowed */
	char *bearer;			/* the caller's own token, or NULL */
	int no_token;
	const char *owner;
	int klass;			/* enum tg_up_class */
	size_t replay_max;
	struct gw_vcall_cbs cbs;
	void *arg;
	struct tg_up_req *up;		/* the attempt in flight */
	struct tg_token_wait *tw;
	char *token;			/* the gateway's token sent, for a 401 */
	int retry_401, replayed, starting;
	struct event *defer;		/* a token failure met while starting */
	char *why;
	int retry_after;
	/* whole: the body collected for gw_vcall_fetch */
	gw_vfetch_cb fetched;
	size_t max_body;
	struct evbuffer *got;
	int status;
	const struct evkeyvalq *headers;
	struct gw_trace trace;		/* who the call is for */
	int traced;
	struct tg_upstream *target;	/* the service's API, or its login endpoint */
	/* tracing: the CLIENT span of the attempt in flight (spans.c) */
	int span_open, span_status;
	char span[17];			/* the span id its traceparent carries */
	int64_t span_t0;		/* monotonic us */
};

static void vcall_send(struct gw_vcall *c);
static void vcall_begin(struct gw_vcall *c);

/* The attempt's CLIENT span ends (failed: no whole answer). */
static void
span_end(struct gw_vcall *c, int failed)
{
	struct gw_span_call sc = { &c->trace, c->span, c->svc, c->method, c->span_t0,
		c->span_status, failed, c->up != NULL ? tg_up_req_origin(c->up) : NULL,
		c->up != NULL ? tg_up_req_why(c->up) : NULL, c->target != c->svc->api };

	c->span_open = 0;
	gw_span_client(c->rt->gw, &sc);
}

static void
vcall_free(struct gw_vcall *c)
{
	if (c->span_open)
		span_end(c, 1);		/* cancelled in flight */
	if (c->up != NULL)
		tg_up_req_cancel(c->up);
	if (c->tw != NULL)
		tg_token_wait_cancel(c->tw);
	if (c->defer != NULL)
		event_free(c->defer);
	if (c->got != NULL)
		evbuffer_free(c->got);
	gw_runtime_unref(c->rt);
	free(c->uri);
	free(c->bearer);
	free(c->token);
	free(c->why);
	free(c);
}

void
gw_vcall_cancel(struct gw_vcall *c)
{
	if (c != NULL)
		vcall_free(c);
}

/*
 * The vendor refused the token a call sent (401). A caller's own: callers'
 * logins answered from the cache no longer hand it out. The gateway's:
 * the vendor revokes tokens, so none cached for callers is trusted either
 * (each identity costs one login again).
 */
static void
forget_refused(struct gw_vcall *c, struct tg_up_req *u)
{
	const char *a = evhttp_find_header(tg_up_req_headers(u), "Authorization");

	if (c->svc->logins == NULL)
		return;
	if (c->token != NULL)
		tg_login_cache_clear(c->svc->logins);
	else if (a != NULL && strncasecmp(a, "Bearer ", 7) == 0)
		(void)tg_login_cache_drop_token(c->svc->logins, a + 7 + strspn(a + 7, " "));
}

static void
on_head(struct tg_up_req *u, int status, const struct evkeyvalq *h, void *arg)
{
	struct gw_vcall *c = arg;
	size_t n = c->body != NULL ? evbuffer_get_length(c->body) : 0;

	c->span_status = status;
	if ((status == 429 || status == 503) && c->target == c->svc->api)
		gw_budget_seen(c->rt->gw->budget[c->svc->index], status, h);
	if (status == 401)
		forget_refused(c, u);
	if (status == 401 && c->token != NULL && !c->replayed && n <= c->replay_max) {
		c->retry_401 = 1;	/* not shown: sent again with a fresh token */
		return;
	}
	if (c->cbs.on_head != NULL)
		c->cbs.on_head(c, status, h, c->arg);
}

static void
on_body(struct tg_up_req *u, struct evbuffer *buf, void *arg)
{
	struct gw_vcall *c = arg;

	if (c->retry_401 || c->cbs.on_body == NULL)
		evbuffer_drain(buf, evbuffer_get_length(buf));
	else
		c->cbs.on_body(c, buf, c->arg);
}

static void
on_done(struct tg_up_req *u, enum tg_up_error err, void *arg)
{
	struct gw_vcall *c = arg;

	if (c->span_open)
		span_end(c, err != TG_UP_OK);
	if (c->retry_401 && err == TG_UP_OK) {
		c->up = NULL;
		c->retry_401 = 0;
		c->replayed = 1;
		tg_token_invalidate(c->svc->tokens, c->token,
		    c->traced && c->trace.rid[0] != '\0' ? c->trace.rid : NULL,
		    c->traced && c->trace.trace_id[0] != '\0' ? c->trace.trace_id : NULL);
		tg_metrics_inc(c->rt->gw->metrics, "tidegate_token_replays_total", "", 1);
		vcall_begin(c);
		return;
	}
	c->cbs.on_done(c, err, c->arg);		/* u is freed after this returns */
}

static const struct tg_up_cbs up_cbs = { on_head, on_body, on_done };

static void
vcall_send(struct gw_vcall *c)
{
	struct evkeyvalq *h;

	c->up = tg_upstream_send(c->target, c->method, c->uri, NULL, c->body, &up_cbs, c);
	h = tg_up_req_headers(c->up);	/* before the loop starts the request */
	if (c->cbs.add_headers != NULL)
		c->cbs.add_headers(c, h, c->arg);
	/* a new span per attempt, remembered for its CLIENT span when tracing */
	gw_trace_headers_span(c->traced ? &c->trace : NULL, h, c->span);
	if (c->traced && c->trace.span_id[0] != '\0' && c->rt->gw->otlp != NULL) {
		c->span_open = 1;	/* for a traced request: its CLIENT span */
		c->span_status = 0;
		c->span_t0 = tg_clock_mono_us();
	}
	if (c->token != NULL || c->bearer != NULL) {
		if (tg_header_find(h, "Authorization") != NULL)
			evhttp_remove_header(h, "Authorization");
		tg_header_add_prefixed(h, "Authorization", "Bearer ",
		    c->token != NULL ? c->token : c->bearer);
	}
	if (c->owner != NULL)	/* one move in the queue for both */
		tg_up_req_set_owner_class(c->up, c->owner, (enum tg_up_class)c->klass);
	else if (c->klass != TG_UP_CLASS_URGENT)
		tg_up_req_set_class(c->up, (enum tg_up_class)c->klass);
}

static void
on_deferred(evutil_socket_t fd, short what, void *arg)
{
	struct gw_vcall *c = arg;

	c->cbs.on_no_token(c, c->why, c->retry_after, c->arg);
}

static void
on_token(const char *token, const char *why, int retry_after, void *arg)
{
	struct gw_vcall *c = arg;

	c->tw = NULL;
	if (token != NULL) {
		free(c->token);
		c->token = tg_xstrdup(token);
		vcall_send(c);
		return;
	}
	if (!c->starting) {
		c->cbs.on_no_token(c, why, retry_after, c->arg);
		return;
	}
	c->why = why != NULL ? tg_xstrdup(why) : NULL;	/* answered from the loop */
	c->retry_after = retry_after;
	c->defer = event_new(c->rt->gw->base, -1, 0, on_deferred, c);
	event_active(c->defer, EV_TIMEOUT, 0);
}

/* The gateway's token first, unless the call brings its own or none. */
static void
vcall_begin(struct gw_vcall *c)
{
	struct tg_token_wait *w;

	if (c->bearer != NULL || c->no_token || c->svc->tokens == NULL) {
		vcall_send(c);
		return;
	}
	c->starting = 1;	/* on_token may run before tg_token_get returns */
	w = tg_token_get(c->svc->tokens, on_token, c);
	c->starting = 0;
	if (w != NULL)
		c->tw = w;
}

static struct gw_vcall *
vcall_new(const struct gw_vcall_req *q, const struct gw_vcall_cbs *cbs, void *arg)
{
	struct gw_vcall *c = tg_xcalloc(1, sizeof(*c));

	c->rt = q->rt;
	c->rt->refs++;
	c->svc = &c->rt->svc[q->service];
	c->target = q->token_endpoint ? c->svc->auth : c->svc->api;
	c->method = q->method;
	c->uri = tg_xstrdup(q->uri);
	c->body = q->body;
	c->bearer = q->bearer != NULL ? tg_xstrdup(q->bearer) : NULL;
	c->no_token = q->no_token;
	c->owner = q->owner;
	c->klass = q->klass != 0 ? q->klass : q->token_endpoint ? TG_UP_CLASS_URGENT :
	    q->method == EVHTTP_REQ_GET || q->method == EVHTTP_REQ_HEAD ? TG_UP_CLASS_READ :
	    TG_UP_CLASS_CREATE;
	c->replay_max = q->replay_max;
	if (q->trace != NULL) {
		c->trace = *q->trace;
		c->traced = 1;
	}
	c->cbs = *cbs;
	c->arg = arg;
	return c;
}

struct gw_vcall *
gw_vcall_start(const struct gw_vcall_req *q, const struct gw_vcall_cbs *cbs, void *arg)
{
	struct gw_vcall *c = vcall_new(q, cbs, arg);

	vcall_begin(c);
	return c;
}

/* ---- control and state of the attempt in flight ---- */

void
gw_vcall_pause(struct gw_vcall *c)
{
	if (c->up != NULL)
		tg_up_req_pause(c->up);
}

void
gw_vcall_resume(struct gw_vcall *c)
{
	if (c->up != NULL)
		tg_up_req_resume(c->up);
}

const struct tg_up_req *
gw_vcall_upstream(const struct gw_vcall *c)
{
	return c->up;
}

/* ---- whole answers ---- */

static void
fetch_head(struct gw_vcall *c, int status, const struct evkeyvalq *h, void *arg)
{
	c->status = status;
	c->headers = h;
}

static void
fetch_body(struct gw_vcall *c, struct evbuffer *buf, void *arg)
{
	if (evbuffer_get_length(c->got) + evbuffer_get_length(buf) > c->max_body) {
		evbuffer_drain(buf, evbuffer_get_length(buf));
		c->status = -1;		/* over the limit: TG_UP_TOO_LARGE at the end */
		return;
	}
	evbuffer_add_buffer(c->got, buf);
}

static void
fetch_done(struct gw_vcall *c, enum tg_up_error err, void *arg)
{
	struct gw_vfetch res;

	memset(&res, 0, sizeof(res));
	res.err = err == TG_UP_OK && c->status < 0 ? TG_UP_TOO_LARGE : err;
	res.status = res.err == TG_UP_OK ? c->status : 0;
	res.headers = res.err == TG_UP_OK ? c->headers : NULL;
	res.body = res.err == TG_UP_OK ? c->got : NULL;
	res.u = c->up;
	c->up = NULL;		/* the upstream frees it after this returns */
	c->fetched(c, &res, c->arg);
	vcall_free(c);
}

static void
fetch_no_token(struct gw_vcall *c, const char *why, int retry_after, void *arg)
{
	struct gw_vfetch res;

	memset(&res, 0, sizeof(res));
	res.err = TG_UP_CONNECT;	/* nothing was sent */
	res.token_why = why != NULL ? why : "login failed";
	res.retry_after = retry_after;
	c->fetched(c, &res, c->arg);
	vcall_free(c);
}

struct gw_vcall *
gw_vcall_fetch(const struct gw_vcall_req *q, size_t max_body,
    void (*add_headers)(struct gw_vcall *, struct evkeyvalq *, void *), gw_vfetch_cb cb,
    void *arg)
{
	struct gw_vcall_cbs cbs = { fetch_head, fetch_body, fetch_done, fetch_no_token,
		add_headers };
	struct gw_vcall *c = vcall_new(q, &cbs, arg);

	c->fetched = cb;
	c->max_body = max_body;
	c->got = evbuffer_new();
	vcall_begin(c);
	return c;
}

/* ---- the vendor's tokens: sources, state ---- */

/* The trace context of a vendor login: the waiting call's (a struct
 * gw_vcall, the only user of tg_token_get) when one started it, else a
 * trace of the login's own; a CLIENT span when that call's request is
 * traced. hook_arg: the service. */
static void
login_headers(void *hook_arg, void *waiter, struct evkeyvalq *out)
{
	struct gw_service *s = hook_arg;
	const struct gw_vcall *c = waiter;

	gw_login_span_begin(s->login_span, c != NULL ? c->rt->gw : NULL,
	    c != NULL && c->traced ? &c->trace : NULL, out);
}

static void
login_end(void *hook_arg, int status, int failed, const char *origin)
{
	struct gw_service *s = hook_arg;

	gw_login_span_end(s->login_span, s, status, failed, origin);
}

/* The login endpoint's URL for messages: base's scheme, host and port
 * with path. Config URLs hold no user info (the upstream refuses it). */
static char *
login_url(const char *base, const char *path)
{
	struct evhttp_uri *u = evhttp_uri_parse(base);
	char buf[512], *out;

	if (u == NULL)
		return tg_xstrdup(path);
	evhttp_uri_set_path(u, path);
	evhttp_uri_set_query(u, NULL);
	out = tg_xstrdup(evhttp_uri_join(u, buf, sizeof(buf)) ? buf : path);
	evhttp_uri_free(u);
	return out;
}

/* sim.token_url names the endpoint whole; else auth_url (sim) or url (dex)
 * plus the login route. */
int
gw_vendor_init(struct gw *gw, struct gw_service *s, const struct tg_upstream_opts *o,
    struct tg_err *err)
{
	const char *base = s->index == GW_DEX ? s->cfg->url :
	    s->cfg->token_url != NULL ? s->cfg->token_url : s->cfg->auth_url;
	const char *route = s->cfg->token_url != NULL ? "" :
	    s->cfg->routes[s->index == GW_DEX ? TG_OP_DEX_AUTHENTICATE : TG_OP_SIM_TOKEN];
	struct tg_token_opts to;
	char *path, *url;

	s->auth = s->api;
	if (s->index == GW_SIM && (s->auth = tg_upstream_new(gw->base, gw->dns, base, NULL, o,
	    err)) == NULL)
		return -1;
	s->logins = tg_login_cache_new(4096);
	if (s->cfg->id == NULL)
		return 0;
	memset(&to, 0, sizeof(to));
	to.flow = s->index == GW_DEX ? TG_FLOW_PASSWORD : TG_FLOW_CLIENT_CREDENTIALS;
	path = tg_xasprintf("%s%s", tg_upstream_base_path(s->auth), route);
	if (*path == '\0') {
		free(path);
		path = tg_xstrdup("/");
	}
	url = login_url(base, path);
	to.path = path;
	to.url = url;
	to.id = s->cfg->id;
	to.secret = s->cfg->secret;
	to.scope = s->cfg->scope;
	to.audience = s->cfg->audience;
	to.client_basic = s->cfg->client_auth != NULL &&
	    strcmp(s->cfg->client_auth, "client_secret_basic") == 0;
	to.refresh_before_ms = s->cfg->refresh_before;
	to.jitter_ms = s->cfg->refresh_jitter;
	to.default_lifetime_ms = 300000;
	to.login_timeout_ms = s->cfg->login_timeout;
	to.retry_after_s = (int)(s->cfg->login_retry_after / 1000);
	to.login_headers = login_headers;
	to.login_end = login_end;
	to.login_headers_arg = s;
	s->login_span = tg_xcalloc(1, sizeof(*s->login_span));
	s->tokens = tg_token_src_new(gw->base, s->auth, &to);
	if (gw->state != NULL) {	/* a fleet shares one login per service */
		struct tg_token_share sh;

		s->share = gw_share_new(gw, s->name, s->cfg->login_timeout, &sh);
		tg_token_set_share(s->tokens, &sh);
	}
	free(path);
	free(url);
	return 0;
}

void
gw_vendor_cleanup(struct gw_service *s)
{
	tg_token_src_free(s->tokens);
	s->tokens = NULL;
	free(s->login_span);
	s->login_span = NULL;
	gw_share_free(s->share);	/* after the source: it may cancel a fetch */
	s->share = NULL;
}

void
gw_vendor_prefetch(struct gw_service *s)
{
	if (s->tokens != NULL)
		tg_token_prefetch(s->tokens);
}

void
gw_vendor_stats(const struct gw_service *s, struct tg_token_stats *st)
{
	memset(st, 0, sizeof(*st));
	if (s->tokens != NULL)
		tg_token_get_stats(s->tokens, st);
}

const char *
gw_vendor_state(struct gw_service *s, int *ready)
{
	struct tg_token_stats ts;

	*ready = 1;
	if (s->tokens == NULL)
		return "no credentials (callers bring their own)";
	if (tg_token_peek(s->tokens) != NULL)
		return "token held";
	tg_token_get_stats(s->tokens, &ts);
	tg_token_prefetch(s->tokens);
	*ready = 0;
	return ts.failing ? "vendor login failing" : "logging in";
}


int
gw_token_error(struct tg_token_src *ts, const char *what, const char *why, char *msg,
    size_t len, const char **code)
{
	int tls = ts != NULL && tg_token_last_error(ts) == TG_UP_TLS;

	snprintf(msg, len, "%s: %s", what, why ? why : "login failed");
	*code = tls ? "UPSTREAM_TLS_FAILED" : "TOKEN_UNAVAILABLE";
	return tls ? 502 : 503;
}
