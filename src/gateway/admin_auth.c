/*
 * admin_auth.c - who may use the admin listener's API (the features' admin
 * paths, /webhooks…): a gateway API key with the admin service when keys
 * are configured (or admin-read, for GET and HEAD alone: admin_scope.c
 * refuses the rest for every feature at once); anyone when none are (every listener is then loopback
 * only). The probes (/healthz, /readyz, /metrics) ask for no key. One
 * decision, taken twice: by the front door on the head of every admin
 * request that announces a body, which is capped at admin_max_body, so
 * that nothing is read for a caller who would be refused
 * (gw_admin_head_check, registered in server.c), and by a feature's admin
 * handler (gw_admin_authorized, which answers the refusal:
 * admin_webhooks.c, admin_runs.c).
 */
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>

#include "tidegate/frontdoor.h"
#include "tidegate/http.h"
#include "gw.h"

const char *
gw_admin_probe(const char *path, size_t len)
{
	static const char *const probes[] = { "/healthz", "/readyz", "/metrics" };
	size_t i;

	for (i = 0; i < sizeof(probes) / sizeof(probes[0]); i++)
		if (strlen(probes[i]) == len && memcmp(path, probes[i], len) == 0)
			return probes[i] + 1;
	return NULL;
}

enum gw_admin_auth
gw_admin_auth(const struct gw_runtime *rt, const char *apikey, const char *bearer,
    const struct tg_key **key)
{
	const char *presented = apikey != NULL ? apikey : bearer;

	*key = NULL;
	if (rt->keys.n == 0)
		return GW_ADMIN_OK;	/* no keys: every listener is loopback-only */
	if (presented == NULL)
		return GW_ADMIN_MISSING;
	if ((*key = tg_keyring_match(&rt->keys, presented)) == NULL)
		return GW_ADMIN_UNKNOWN;
	return ((*key)->services & (TG_SVC_ADMIN | TG_SVC_ADMIN_READ)) ? GW_ADMIN_OK :
	    GW_ADMIN_FORBIDDEN;
}

int
gw_admin_authorized(struct gw *gw, struct evhttp_request *req)
{
	const struct tg_key *k;
	enum gw_admin_auth v = gw_admin_auth(gw->rt, tg_http_header(req, "X-Api-Key"),
	    tg_http_bearer(req), &k);

	if (k != NULL)
		gw_admin_set_key(gw, req, k->name);	/* its access line names it */
	if (v == GW_ADMIN_MISSING || v == GW_ADMIN_UNKNOWN) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
		    "Bearer");
		gw_admin_reply_error(gw, req, 401, "UNAUTHORIZED", v == GW_ADMIN_UNKNOWN ?
		    "unknown API key" : "an API key with the admin service is required "
		    "(Authorization: Bearer <key> or X-Api-Key)");
	} else if (v == GW_ADMIN_FORBIDDEN) {
		gw_admin_reply_error(gw, req, 403, "FORBIDDEN",
		    "this API key may not use the admin API");
	}
	return v == GW_ADMIN_OK;
}

/* No admin path takes a body from a caller the API would refuse; a known
 * key without the admin service reads its 403 after at most the cap, a
 * probe's path (no key asked) its 405. The path is read as evhttp will
 * (the target up to its query), as gw_admin_on_request reads it. */
int
gw_admin_head_check(const struct tg_head *h, void *arg, uint64_t *limit)
{
	struct gw_lctx *lc = arg;
	struct gw_runtime *rt = lc->gw->rt;
	const struct tg_head_field *x = tg_head_get(h, "X-Api-Key");
	size_t plen = 0;
	char *bearer, *apikey;
	const struct tg_key *key;
	enum gw_admin_auth v;

	if ((uint64_t)rt->cfg.admin_max_body < *limit)
		*limit = (uint64_t)rt->cfg.admin_max_body;
	while (plen < h->tlen && h->target[plen] != '?' && h->target[plen] != '#')
		plen++;
	if (gw_admin_probe(h->target, plen) != NULL)
		return 0;
	bearer = gw_head_bearer(tg_head_get(h, "Authorization"));
	apikey = x != NULL ? tg_xstrndup(x->value, x->vlen) : NULL;
	v = gw_admin_auth(rt, apikey, bearer, &key);
	free(bearer);
	free(apikey);
	return v == GW_ADMIN_MISSING ? TG_HEAD_KEY_MISSING : v == GW_ADMIN_UNKNOWN ?
	    TG_HEAD_KEY_UNKNOWN : 0;
}
