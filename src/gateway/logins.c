/*
 * logins.c - callers' own logins: POST /authenticate (data exchange) and
 * the OAuth2 token endpoint (simulation). Legacy tools log in before every
 * call; the gateway answers repeats from a cache keyed by the identity and
 * a salted hash of the secret while the vendor's token is valid, so the
 * vendor sees one login. A simulation client authenticates in the form or
 * by HTTP Basic (RFC 6749 2.3.1). Anything it cannot parse is passed
 * through as is, to the same login endpoint (gw_req_upstream: sim.auth_url
 * or sim.token_url).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/clock.h"
#include "tidegate/crypto.h"
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
	int basic;			/* the client authenticated by HTTP Basic */
	struct gw_login_span span;	/* its CLIENT span when r is traced */
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
	gw_req_reply_vendor(r, status, "application/json", b);	/* a refusal: wrapped */
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

/* Expiry of a successful vendor login answer, or -1 when it is not one;
 * *token (malloc'd, the caller's) the token it carries. */
static int64_t
answer_expiry(const char *body, size_t len, int sim, char **token)
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
	*token = at > 0 ? tg_xstrdup(tok) : NULL;
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
	char *buf = tg_xmalloc(len + 1), *tok = NULL;
	int64_t until;

	r->up = NULL;
	r->upstream_status = status;
	gw_login_span_end(&l->span, r->svc, status, err != TG_UP_OK,
	    u != NULL ? tg_up_req_origin(u) : NULL);
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
	    (until = answer_expiry(buf, len, l->sim, &tok)) > tg_clock_now_ms()) {
		tg_login_cache_put(r->svc->logins, l->id, l->secret, buf, tok, until);
		tg_metrics_inc(r->gw->metrics, "tidegate_login_cache_total",
		    l->sim ? "service=\"sim\",result=\"miss\"" : "service=\"dex\",result=\"miss\"",
		    1);
	}
	reply_body(r, status, buf, len);
done:
	if (tok != NULL)
		explicit_bzero(tok, strlen(tok));
	free(tok);
	free(buf);
	login_free(l);
}

/* Credentials read and not used: the secret wiped, both freed and NULL. */
static void
forget(char **id, char **secret)
{
	if (*secret != NULL)
		explicit_bzero(*secret, strlen(*secret));
	free(*id);
	free(*secret);
	*id = *secret = NULL;
}

/* RFC 6749 2.3.1 (client_secret_basic): "Authorization: Basic" of the
 * form-urlencoded id and secret joined by ':'. 0: both malloc'd into id
 * and secret. */
static int
basic_credentials(const char *auth, char **id, char **secret)
{
	size_t n;
	char *raw, *colon;

	*id = *secret = NULL;
	while (*auth == ' ')
		auth++;
	if ((raw = (char *)tg_b64_decode(auth, strlen(auth), &n)) == NULL)
		return -1;
	colon = memchr(raw, ':', n);
	if (colon != NULL && memchr(raw, '\0', n) == NULL) {
		*colon = '\0';
		*id = evhttp_uridecode(raw, 1, NULL);
		*secret = evhttp_uridecode(colon + 1, 1, NULL);
	}
	explicit_bzero(raw, n);
	free(raw);
	if (colon != NULL && *id != NULL && *secret != NULL && **id != '\0')
		return 0;
	forget(id, secret);
	return -1;
}

/* A client credentials grant: its client's id and secret from the form, or
 * from HTTP Basic (*basic set) when the form has no secret (one method at
 * a time, RFC 6749 2.3; a client_id beside Basic must name the same). */
static int
form_credentials(struct gw_req *r, const char *body, char **id, char **secret, int *basic)
{
	const char *auth = tg_http_header(r->req, "Authorization");
	struct evkeyvalq form;
	const char *a, *b, *g;
	int rc = -1, by_basic = auth != NULL && strncasecmp(auth, "Basic ", 6) == 0;

	TAILQ_INIT(&form);
	if (evhttp_parse_query_str(body, &form) == 0 &&
	    (g = evhttp_find_header(&form, "grant_type")) != NULL &&
	    strcmp(g, "client_credentials") == 0) {
		a = evhttp_find_header(&form, "client_id");
		b = evhttp_find_header(&form, "client_secret");
		if (a != NULL && b != NULL && !by_basic) {
			*id = tg_xstrdup(a);
			*secret = tg_xstrdup(b);
			rc = 0;
		} else if (b == NULL && by_basic &&
		    (rc = basic_credentials(auth + 6, id, secret)) == 0 &&
		    a != NULL && strcmp(a, *id) != 0) {
			forget(id, secret);
			rc = -1;
		}
		*basic = rc == 0 && by_basic;
	}
	evhttp_clear_headers(&form);
	return rc;
}

/* Pull the identity and secret out of the caller's login. */
static int
parse_credentials(struct gw_req *r, int sim, char **id, char **secret, int *basic)
{
	size_t len;
	char *body = tg_http_body(r->req, &len);
	const char *a, *b;
	yajl_val v;
	int rc = -1;

	*basic = 0;
	if (sim) {
		rc = form_credentials(r, body, id, secret, basic);
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
login_headers(struct login *l, struct evkeyvalq *h)
{
	const char *ct = tg_http_header(l->r->req, "Content-Type");
	struct gw_trace t;

	TAILQ_INIT(h);
	evhttp_add_header(h, "Content-Type", ct ? ct : "application/json");
	evhttp_add_header(h, "Accept", "application/json");
	if (l->basic)		/* the client's own authentication, as it sent it */
		evhttp_add_header(h, "Authorization", tg_http_header(l->r->req, "Authorization"));
	gw_trace_of_req(&t, l->r);
	/* request id, traceparent, X-Forwarded-For; its span when traced */
	gw_login_span_begin(&l->span, l->r->gw, &t, h);
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
	int basic;

	if (!r->svc->cfg->login_cache || parse_credentials(r, sim, &id, &secret, &basic) != 0) {
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
	l->basic = basic;
	uri = gw_upstream_uri(r);	/* the login endpoint: gw_req_upstream */
	r->up = tg_upstream_fetch(gw_req_upstream(r), EVHTTP_REQ_POST, uri, login_headers(l, &h),
	    evhttp_request_get_input_buffer(r->req), 64 * 1024, on_login_done, l);
	tg_up_req_set_owner(r->up, gw_req_owner(r));
	evhttp_clear_headers(&h);
	free(uri);
}
