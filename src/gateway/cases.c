/*
 * cases.c - the partial cases the vendor served through the gateway
 * (GET /cases/{id}), kept in the case store so that a later submission of
 * the same caseId can be diffed against it (validate.c). Called by the
 * relay when a captured case answer ends.
 */
#include <event2/buffer.h>

#include "tidegate/json.h"
#include "tidegate/sim.h"
#include "gw.h"

void
gw_case_served(struct gw_req *r, struct evbuffer *body)
{
	const char *id = tg_route_param(&r->m, "id");
	yajl_val v = tg_json_parse((const char *)evbuffer_pullup(body, -1),
	    evbuffer_get_length(body), NULL);

	evbuffer_free(body);
	if (v == NULL || !YAJL_IS_OBJECT(v) || id == NULL || r->gw->cases == NULL) {
		yajl_tree_free(v);
		return;
	}
	tg_case_store_put(r->gw->cases, id, v);
}
