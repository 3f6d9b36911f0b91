/*
 * keyed.c - simulation runs per API key on the vendor's own routes, as the
 * runs API (runs_api.c) has them: the registry records the key of each
 * submission (runs.c), and a run is shown to a keyed caller only when its
 * record names that key; a run the registry does not hold proves nothing
 * and is refused to every key. A caller without a key (its own vendor
 * token, a gateway without keys) is refused a keyed run and left to the
 * vendor for the rest. GET /simulations/{id} and its results are checked
 * before the vendor or the poll multiplexer sees them (runs.c's
 * runs_gone, through runs_visible); the vendor's GET /simulations answer
 * is held and filtered here to the caller's runs. Called by feature.c and
 * runs.c.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "tidegate/json.h"
#include "tidegate/log.h"
#include "tidegate/map.h"
#include "runs_int.h"

int
runs_visible(const struct gw_req *r, int held, const char *key)
{
	if (r->key != NULL)
		return held && key != NULL && strcmp(key, r->key->name) == 0;
	return !held || key == NULL;
}

int
runs_list_holds(const struct gw_req *r, int status)
{
	return status == 200 && r->gw->state != NULL &&
	    evhttp_request_get_command(r->req) == EVHTTP_REQ_GET;
}

/* The vendor's list less the runs r may not see, into a new array. */
static void
reply_filtered(struct gw_req *r, yajl_val list, const struct tg_run *runs, size_t n)
{
	struct tg_map *owner = tg_map_new(free);
	yajl_gen g = tg_json_gen_new();
	const char *id, *key;
	size_t i, kept = 0;

	/* "" stands for a run recorded without a key */
	for (i = 0; i < n; i++)
		tg_map_put(owner, runs[i].simulation_id,
		    tg_xstrdup(runs[i].api_key != NULL ? runs[i].api_key : ""));
	yajl_gen_array_open(g);
	for (i = 0; i < list->u.array.len; i++) {
		id = tg_json_get_str(list->u.array.values[i], "simulationId");
		key = id != NULL ? tg_map_get(owner, id) : NULL;
		if (!runs_visible(r, key != NULL, key != NULL && *key != '\0' ? key : NULL))
			continue;
		tg_json_gen_val(g, list->u.array.values[i]);
		kept++;
	}
	yajl_gen_array_close(g);
	tg_log(TG_LOG_DEBUG, "run_list_filtered", TG_LS("id", r->id),
	    TG_LI("vendor", (long long)list->u.array.len), TG_LI("kept", (long long)kept));
	gw_req_reply_json(r, 200, g);
	yajl_gen_free(g);
	tg_map_free(owner);
}

static void
on_owners(const struct tg_state_res *res, const struct tg_run *runs, size_t n, int more,
    void *arg)
{
	struct gw_req *r = arg;
	struct runs_req *q = runs_req_of(r);
	yajl_val list = q->list;

	q->op = NULL;
	q->list = NULL;
	if (res->rc != TG_STATE_OK)
		runs_reply_state(r, res, 503, "REGISTRY_UNAVAILABLE", "the run registry failed: "
		    "whose runs are listed cannot be told");
	else
		reply_filtered(r, list, runs, n);
	yajl_tree_free(list);
}

int
runs_list_done(struct gw_req *r, enum tg_up_error err, struct evbuffer *capture)
{
	struct runs_req *q = runs_req_of(r);
	const char **ids;
	yajl_val v;
	size_t i, n = 0;

	if (err != TG_UP_OK)
		return 0;	/* broke off: the core answers 502 */
	v = capture != NULL ? tg_json_parse((const char *)evbuffer_pullup(capture, -1),
	    evbuffer_get_length(capture), NULL) : NULL;
	if (!YAJL_IS_ARRAY(v)) {
		yajl_tree_free(v);
		gw_req_reply_error(r, 502, "UPSTREAM_ERROR", "the vendor's run list could not "
		    "be read (not a JSON array, or too large), so it cannot be told whose runs "
		    "it holds: not served");
		return 1;
	}
	ids = tg_xcalloc(v->u.array.len + 1, sizeof(*ids));
	for (i = 0; i < v->u.array.len; i++)
		if ((ids[n] = tg_json_get_str(v->u.array.values[i], "simulationId")) != NULL)
			n++;
	q->list = v;
	runs_req_wait(r, tg_state_runs_get_many(r->gw->state, ids, n, on_owners, r));
	free(ids);
	return 1;
}
