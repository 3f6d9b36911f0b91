/*
 * caller_auth.c - who the caller is: a gateway API key (the gateway's
 * vendor token is used), the caller's own bearer (forwarded where the
 * service allows callers' tokens, and on logins), or nobody (401); and,
 * with it, how large a body the caller may send: max_body for a gateway
 * key, the service's caller_max_body for an own token the gateway cannot
 * vouch for before the vendor does, login_max_body for a login. One
 * decision, taken twice: by the front door on the head of every request
 * that announces a body, so that no body is read for a caller who would be
 * refused and no more than the caller's cap is read at all (gw_head_check,
 * registered in server.c), and by gw_on_request (proxy.c) for every
 * request.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>

#include "tidegate/frontdoor.h"
#include "tidegate/http.h"
#include "tidegate/target.h"
#include "gw.h"

enum verdict { V_GATEWAY, V_CALLER, V_MISSING, V_UNKNOWN, V_FORBIDDEN };

/* The caller of one request and the largest body it may send (*cap). */
static enum verdict
decide(const struct gw_runtime *rt, const struct gw_service *svc, int login,
    const char *bearer, const char *apikey, const struct tg_key **key, uint64_t *cap)
{
	const char *presented = apikey ? apikey : bearer;

	*key = NULL;
	*cap = (uint64_t)rt->cfg.max_body;
	if (presented && (*key = tg_keyring_match(&rt->keys, presented)) != NULL)
		return ((*key)->services & svc->mask) ? V_GATEWAY : V_FORBIDDEN;
	if (login || (bearer && !apikey && svc->cfg->caller_tokens)) {
		if (gw_body_cap(svc, login) < *cap)
			*cap = gw_body_cap(svc, login);
		return V_CALLER;
	}
	if (rt->keys.n == 0)
		return V_GATEWAY;	/* loopback-only mode: the gateway's token */
	return presented ? V_UNKNOWN : V_MISSING;
}

uint64_t
gw_body_cap(const struct gw_service *svc, int login)
{
	return (uint64_t)(login ? svc->cfg->login_max_body : svc->cfg->caller_max_body);
}

void
gw_body_cap_message(const struct gw_runtime *rt, const struct gw_service *svc, int login,
    char *msg, size_t size)
{
	uint64_t max = (uint64_t)rt->cfg.max_body, own = gw_body_cap(svc, login);

	if (login)
		snprintf(msg, size, "a login body is at most %" PRIu64 " bytes (%s.login_max_body)",
		    own < max ? own : max, svc->name);
	else if (svc->cfg->caller_tokens && own < max)
		snprintf(msg, size, "request body too large: at most %" PRIu64 " bytes with a "
		    "gateway API key (max_body), %" PRIu64 " with a caller's own token, which the "
		    "gateway cannot vouch for before the body is read (%s.caller_max_body); to "
		    "send more, use a gateway API key or raise %s.caller_max_body", max, own,
		    svc->name, svc->name);
	else
		snprintf(msg, size, "request body larger than max_body (%" PRIu64 " bytes)", max);
}

static int
is_login(const struct tg_route_match *m)
{
	return m->route && (m->route->op == TG_OP_DEX_AUTHENTICATE ||
	    m->route->op == TG_OP_SIM_TOKEN);
}

/* A body over the caller's cap: the front door refuses it on its head, so
 * this is for a cap lowered by a reload while the body was read. */
static int
over_cap(struct gw_req *r, uint64_t cap)
{
	char msg[512];

	if (evbuffer_get_length(evhttp_request_get_input_buffer(r->req)) <= cap)
		return 0;
	gw_body_cap_message(r->rt, r->svc, is_login(&r->m), msg, sizeof(msg));
	gw_req_reply_error(r, 413, "PAYLOAD_TOO_LARGE", msg);
	return 1;
}

int
gw_req_authenticate(struct gw_req *r)
{
	const char *bearer = tg_http_bearer(r->req);
	const char *apikey = tg_http_header(r->req, "X-Api-Key");
	uint64_t cap;

	switch (decide(r->rt, r->svc, is_login(&r->m), bearer, apikey, &r->key, &cap)) {
	case V_GATEWAY:
		r->auth = GW_AUTH_GATEWAY;
		return over_cap(r, cap) ? -1 : 0;
	case V_CALLER:
		r->auth = GW_AUTH_CALLER;
		return over_cap(r, cap) ? -1 : 0;
	case V_FORBIDDEN:
		gw_req_reply_error(r, 403, "FORBIDDEN", "this API key may not use this service");
		return -1;
	case V_UNKNOWN:
		gw_req_reply_error(r, 401, "UNAUTHORIZED", "unknown API key");
		return -1;
	default:
		gw_req_reply_error(r, 401, "UNAUTHORIZED", tg_head_fault_message(
		    TG_HEAD_KEY_MISSING));
		return -1;
	}
}

char *
gw_head_bearer(const struct tg_head_field *f)
{
	size_t i = 7;

	if (f == NULL || f->vlen < 7 || strncasecmp(f->value, "Bearer ", 7) != 0)
		return NULL;
	while (i < f->vlen && f->value[i] == ' ')
		i++;
	return i < f->vlen ? tg_xstrndup(f->value + i, f->vlen - i) : NULL;
}

/* Would gw_on_request refuse this caller, and how much may it send? Only
 * asked for heads with a body; the path is normalised as gw_on_request
 * will (paths.c), so both routes agree on what is a login. */
int
gw_head_check(const struct tg_head *h, void *arg, uint64_t *limit)
{
	struct gw_lctx *lc = arg;
	struct gw_runtime *rt = lc->gw->rt;
	const struct tg_head_field *x = tg_head_get(h, "X-Api-Key");
	char method[16], *bearer, *apikey;
	const struct tg_key *key;
	struct tg_route_match m;
	struct tg_target t;
	struct tg_err err;
	uint64_t cap;
	int v;

	if (h->mlen >= sizeof(method))
		return TG_HEAD_BAD_METHOD;
	if (tg_http_target_normalise(h->target, h->tlen, &t, &err) != 0)
		return TG_HEAD_BAD_TARGET;	/* as gw_on_request would, body unread */
	snprintf(method, sizeof(method), "%.*s", (int)h->mlen, h->method);
	if (gw_path_reserved(t.path) ||
	    (v = gw_feat_prefix_head(lc->gw, lc->listener, method, t.path, h->length, limit)) >= 0) {
		v = gw_path_reserved(t.path) ? TG_HEAD_NOT_FOUND : v;
		tg_http_target_cleanup(&t);	/* 404 without the body, or the feature's */
		return v;			/* own say (the path is its key) */
	}
	if (tg_route_match(rt->svc[lc->listener].routes, method, t.path, &m) != 1)
		memset(&m, 0, sizeof(m));
	tg_http_target_cleanup(&t);
	bearer = gw_head_bearer(tg_head_get(h, "Authorization"));
	apikey = x != NULL ? tg_xstrndup(x->value, x->vlen) : NULL;
	v = decide(rt, &rt->svc[lc->listener], is_login(&m), bearer, apikey, &key, &cap);
	free(bearer);
	free(apikey);
	if (cap < *limit)
		*limit = cap;
	return v == V_MISSING ? TG_HEAD_KEY_MISSING : v == V_UNKNOWN ? TG_HEAD_KEY_UNKNOWN : 0;
}
