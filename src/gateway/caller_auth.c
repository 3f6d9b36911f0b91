/*
 * caller_auth.c - who the caller is: a gateway API key (the gateway's
 * vendor token is used), the caller's own bearer (forwarded where the
 * service allows callers' tokens, and on logins), or nobody (401). One
 * decision, taken twice: by the front door on the head of every request
 * that announces a body, so that no body is read for a caller who would be
 * refused (gw_head_check, registered in server.c), and by gw_on_request
 * (proxy.c) for every request.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tidegate/frontdoor.h"
#include "tidegate/http.h"
#include "tidegate/target.h"
#include "gw.h"

enum verdict { V_GATEWAY, V_CALLER, V_MISSING, V_UNKNOWN, V_FORBIDDEN };

static enum verdict
decide(const struct gw_runtime *rt, const struct gw_service *svc, int login,
    const char *bearer, const char *apikey, const struct tg_key **key)
{
	const char *presented = apikey ? apikey : bearer;

	*key = NULL;
	if (presented && (*key = tg_keyring_match(&rt->keys, presented)) != NULL)
		return ((*key)->services & svc->mask) ? V_GATEWAY : V_FORBIDDEN;
	if (login || (bearer && !apikey && svc->cfg->caller_tokens))
		return V_CALLER;
	if (rt->keys.n == 0)
		return V_GATEWAY;	/* loopback-only mode: the gateway's token */
	return presented ? V_UNKNOWN : V_MISSING;
}

static int
is_login(const struct tg_route_match *m)
{
	return m->route && (m->route->op == TG_OP_DEX_AUTHENTICATE ||
	    m->route->op == TG_OP_SIM_TOKEN);
}

int
gw_req_authenticate(struct gw_req *r)
{
	const char *bearer = tg_http_bearer(r->req);
	const char *apikey = tg_http_header(r->req, "X-Api-Key");

	switch (decide(r->rt, r->svc, is_login(&r->m), bearer, apikey, &r->key)) {
	case V_GATEWAY:
		r->auth = GW_AUTH_GATEWAY;
		return 0;
	case V_CALLER:
		r->auth = GW_AUTH_CALLER;
		return 0;
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

/* The bearer of an Authorization field (malloc'd), as tg_http_bearer reads it. */
static char *
head_bearer(const struct tg_head_field *f)
{
	size_t i = 7;

	if (f == NULL || f->vlen < 7 || strncasecmp(f->value, "Bearer ", 7) != 0)
		return NULL;
	while (i < f->vlen && f->value[i] == ' ')
		i++;
	return i < f->vlen ? tg_xstrndup(f->value + i, f->vlen - i) : NULL;
}

/* Would gw_on_request refuse this caller? Only asked for heads with a body;
 * the path is normalised as gw_on_request will (paths.c), so both routes
 * agree on what is a login. */
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
	enum verdict v;

	if (h->mlen >= sizeof(method))
		return TG_HEAD_BAD_METHOD;
	if (tg_http_target_normalise(h->target, h->tlen, &t, &err) != 0)
		return TG_HEAD_BAD_TARGET;	/* as gw_on_request would, body unread */
	snprintf(method, sizeof(method), "%.*s", (int)h->mlen, h->method);
	memset(&m, 0, sizeof(m));
	if (gw_path_reserved(t.path) || gw_feat_prefix_open(lc->gw, lc->listener, t.path)) {
		v = gw_path_reserved(t.path);
		tg_http_target_cleanup(&t);	/* 404 without the body, or the vendor's */
		return v ? TG_HEAD_NOT_FOUND : 0;	/* deliveries (the path is their key) */
	}
	if (tg_route_match(rt->svc[lc->listener].routes, method, t.path, &m) != 1)
		memset(&m, 0, sizeof(m));
	tg_http_target_cleanup(&t);
	bearer = head_bearer(tg_head_get(h, "Authorization"));
	apikey = x != NULL ? tg_xstrndup(x->value, x->vlen) : NULL;
	v = decide(rt, &rt->svc[lc->listener], is_login(&m), bearer, apikey, &key);
	free(bearer);
	free(apikey);
	return v == V_MISSING ? TG_HEAD_KEY_MISSING : v == V_UNKNOWN ? TG_HEAD_KEY_UNKNOWN : 0;
}
