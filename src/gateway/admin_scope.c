/*
 * admin_scope.c - what a key with admin-read (and not admin) may do on the
 * admin listener: read. Called by admin.c before a feature's admin API,
 * so that every feature's actions (redeliver, and any added later) are
 * refused in one place, whatever the feature checks itself. Its GETs are
 * marked X-Tidegate-Admin-Actions: none, which the console reads to
 * disable its buttons. The key is matched here as gw_admin_auth matches
 * it (the API key header first, then the bearer); a request with no key
 * or an unknown one is left to the feature's own 401.
 */
#include <event2/http.h>

#include "tidegate/http.h"
#include "tidegate/keys.h"
#include "gw.h"

int
gw_admin_may_act(struct gw *gw, struct evhttp_request *req)
{
	enum evhttp_cmd_type m = evhttp_request_get_command(req);
	const char *presented = tg_http_header(req, "X-Api-Key");
	const struct tg_key *k;

	if (presented == NULL)
		presented = tg_http_bearer(req);
	k = presented != NULL ? tg_keyring_match(&gw->rt->keys, presented) : NULL;
	if (k == NULL || !(k->services & TG_SVC_ADMIN_READ) || (k->services & TG_SVC_ADMIN))
		return 1;	/* the feature answers: its 401 or 403, or an admin key */
	if (m == EVHTTP_REQ_GET || m == EVHTTP_REQ_HEAD) {
		evhttp_add_header(evhttp_request_get_output_headers(req),
		    "X-Tidegate-Admin-Actions", "none");
		return 1;
	}
	gw_admin_set_key(gw, req, k->name);
	gw_admin_reply_error(gw, req, 403, "FORBIDDEN", "this API key may read the admin API "
	    "but not act on it (admin-read)");
	return 0;
}
