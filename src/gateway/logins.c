/*
 * logins.c - callers' own logins: POST /authenticate (data exchange) and
 * the OAuth2 token endpoint (simulation). Legacy tools log in before every
 * call; the gateway answers repeats from a cache keyed by the identity and
 * a salted hash of the secret while the vendor's token is valid, so the
 * vendor sees one login. Anything it cannot parse is passed through as is.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/clock.h"
#include "tidegate/http.h"
#include "tidegate/json.h"
#include "tidegate/log.h"
#include "gw.h"

/* Cached answers stop being served this long before the token expires, so
 * a caller never receives a token that dies in its hands. */
#define EXPIRY_MARGIN_MS 30000

struct login {
	struct gw_req *r;
	char *id, *secret;
	int sim;
};

static void
login_free(struct login *l)
{
	if (l->secret != NULL)
		explicit_bzero(l->secret, strlen(l->secret));
	free(l->id);
	free(l->secret);
	free(l);
}

static void
reply_body(struct gw_req *r, int status, const char *body, size_t len)
{
	struct evbuffer *b = evbuffer_new();

	evbuffer_add(b, body, len);
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "Cache-Control", "no-store");
	gw_req_reply_buf(r, status, "application/json", b);
	evbuffer_free(b);
}

/* A cached token answer with expires_in counting down from the original. */
static void
reply_cached_sim(struct gw_req *r, const char *body, int64_t expires_at)
{
	yajl_val v = tg_json_parse(body, strlen(body), NULL);
	yajl_gen g = tg_json_gen_new();
	const unsigned char *buf;
	size_t i, len;

	yajl_gen_map_open(g);
	for (i = 0; v != NULL && YAJL_IS_OBJECT(v) && i < v->u.object.len; i++) {
		if (strcmp(v->u.object.keys[i], "expires_in") == 0)
			continue;
		tg_json_str(g, v->u.object.keys[i]);
		tg_json_gen_val(g, v->u.object.values[i]);
	}
	tg_json_kv_int(g, "expires_in", (expires_at + EXPIRY_MARGIN_MS - tg_clock_now_ms()) / 1000);
	yajl_gen_map_close(g);
	yajl_gen_get_buf(g, &buf, &len);
	reply_body(r, 200, (const char *)buf, len);
	yajl_gen_free(g);
	yajl_tree_free(v);
}

/* Expiry of a successful vendor login answer, or -1 when it is not one. */
static int64_t
answer_expiry(const char *body, size_t len, int sim)
{
	yajl_val v = tg_json_parse(body, len, NULL), e;
	const char *tok = tg_json_get_str(v, sim ? "access_token" : "token");
	int64_t at = -1, exp;

	if (tok != NULL && sim) {
		e = tg_json_get(v, "expires_in");
		if (e != NULL && YAJL_IS_INTEGER(e) && YAJL_GET_INTEGER(e) > 0)
			at = tg_clock_now_ms() + YAJL_GET_INTEGER(e) * 1000;
	} else if (tok != NULL && (exp = tg_jwt_exp(tok)) > 0) {
		at = exp * 1000;
	}
	yajl_tree_free(v);
	return at > 0 ? at - EXPIRY_MARGIN_MS : -1;
}

static void
on_login_done(int status, const struct evkeyvalq *headers, struct evbuffer *body,
    enum tg_up_error err, void *arg)
{
	struct login *l = arg;
	struct gw_req *r = l->r;
	struct tg_up_req *u = r->up;	/* valid until this returns */
	size_t len = body ? evbuffer_get_length(body) : 0;
	char *buf = tg_xmalloc(len + 1);
	int64_t until;

	r->up = NULL;
	r->upstream_status = status;
	if (err == TG_UP_BUSY) {
		gw_req_reply_busy(r, u);
		goto done;
	}
	if (err != TG_UP_OK) {
		gw_req_reply_upstream(r, u, err, "login endpoint");
		goto done;
	}
	evbuffer_copyout(body, buf, len);
	buf[len] = '\0';
	if (status == 200 && r->svc->logins != NULL &&
	    (until = answer_expiry(buf, len, l->sim)) > tg_clock_now_ms()) {
		tg_login_cache_put(r->svc->logins, l->id, l->secret, buf, until);
		tg_metrics_inc(r->gw->metrics, "tidegate_login_cache_total",
		    l->sim ? "service=\"sim\",result=\"miss\"" : "service=\"dex\",result=\"miss\"",
		    1);
	}
	reply_body(r, status, buf, len);
done:
	free(buf);
	login_free(l);
}

/* Pull the identity and secret out of the caller's login body. */
static int
parse_credentials(struct gw_req *r, int sim, char **id, char **secret)
{
	size_t len;
	char *body = tg_http_body(r->req, &len);
	struct evkeyvalq form;
	const char *a, *b, *g;
	yajl_val v;
	int rc = -1;

	if (sim) {
		TAILQ_INIT(&form);
		if (evhttp_parse_query_str(body, &form) == 0 &&
		    (g = evhttp_find_header(&form, "grant_type")) != NULL &&
		    strcmp(g, "client_credentials") == 0 &&
		    (a = evhttp_find_header(&form, "client_id")) != NULL &&
		    (b = evhttp_find_header(&form, "client_secret")) != NULL) {
			*id = tg_xstrdup(a);
			*secret = tg_xstrdup(b);
			rc = 0;
		}
		evhttp_clear_headers(&form);
	} else if ((v = tg_json_parse(body, len, NULL)) != NULL) {
		a = tg_json_get_str(v, "username");
		b = tg_json_get_str(v, "password");
		if (a != NULL && b != NULL) {
			*id = tg_xstrdup(a);
			*secret = tg_xstrdup(b);
			rc = 0;
		}
		yajl_tree_free(v);
	}
	explicit_bzero(body, len);
	free(body);
	return rc;
}

static struct evkeyvalq *
login_headers(struct gw_req *r, struct evkeyvalq *h)
{
	const char *ct = tg_http_header(r->req, "Content-Type");
	struct gw_trace t;

	TAILQ_INIT(h);
	evhttp_add_header(h, "Content-Type", ct ? ct : "application/json");
	evhttp_add_header(h, "Accept", "application/json");
	gw_trace_of_req(&t, r);
	gw_trace_headers(&t, h);	/* request id, traceparent, X-Forwarded-For */
	return h;
}

void
gw_login_handle(struct gw_req *r)
{
	int sim = r->svc->index == GW_SIM;
	const char *cached;
	struct evkeyvalq h;
	struct login *l;
	char *id = NULL, *secret = NULL, *uri;
	int64_t until;

	if (!r->svc->cfg->login_cache || parse_credentials(r, sim, &id, &secret) != 0) {
		r->auth = GW_AUTH_CALLER;
		gw_req_proxy(r);	/* not a form we cache: the vendor answers */
		return;
	}
	cached = tg_login_cache_get(r->svc->logins, id, secret, tg_clock_now_ms(), &until);
	if (cached != NULL) {
		tg_metrics_inc(r->gw->metrics, "tidegate_login_cache_total",
		    sim ? "service=\"sim\",result=\"hit\"" : "service=\"dex\",result=\"hit\"", 1);
		r->origin = "cache";
		if (sim)
			reply_cached_sim(r, cached, until);
		else
			reply_body(r, 200, cached, strlen(cached));
		explicit_bzero(secret, strlen(secret));
		free(id);
		free(secret);
		return;
	}
	l = tg_xcalloc(1, sizeof(*l));
	l->r = r;
	l->id = id;
	l->secret = secret;
	l->sim = sim;
	/* sim.token_url: the auth upstream's URL is the endpoint itself. */
	uri = sim && r->svc->cfg->token_url != NULL ?
	    tg_xstrdup(*tg_upstream_base_path(r->svc->auth) ? tg_upstream_base_path(r->svc->auth) :
	    "/") : tg_xasprintf("%s%s", tg_upstream_base_path(r->svc->auth),
	    r->svc->cfg->routes[r->m.route->op]);
	r->up = tg_upstream_fetch(r->svc->auth, EVHTTP_REQ_POST, uri, login_headers(r, &h),
	    evhttp_request_get_input_buffer(r->req), 64 * 1024, on_login_done, l);
	tg_up_req_set_owner(r->up, gw_req_owner(r));
	evhttp_clear_headers(&h);
	free(uri);
}
