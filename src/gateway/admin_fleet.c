/*
 * admin_fleet.c - GET /fleet on the admin listener: the instances the
 * state knows of (tg_state_fleet_list) with what each holds now: its
 * quota membership's end, the leads it holds (lead:runs, a token login,
 * polls), the webhook leases it holds, the sweep variants it is
 * submitting. For the console's Fleet panel. A poll lead's caller is
 * shown as "caller", never by the hash of its token the key holds. Authorized as the admin APIs
 * are (gw_admin_authorized; admin-read may read it). The request is held
 * until the seam answers (its deadline bounds the wait); requests still
 * waiting when the gateway is freed are dropped (gw_admin_fleet_cancel)
 * before the state answers them.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>

#include "tidegate/clock.h"
#include "tidegate/http.h"
#include "tidegate/json.h"
#include "tidegate/state.h"
#include "gw.h"

struct gw_fleet_req {
	struct gw_fleet_req *next, **prev;	/* gw->fleet_reqs */
	struct gw *gw;
	struct gw_held *held;
	struct tg_state_op *op;
	int answered;				/* during the call */
};

static void
unlink_req(struct gw_fleet_req *f)
{
	*f->prev = f->next;
	if (f->next != NULL)
		f->next->prev = f->prev;
}

/* A lead's key as shown: a poll entry's ("service|identity|uri") names its
 * caller by a hash of the caller's bearer token, shown as "caller" so the
 * answer carries nothing derived from a credential. */
static void
lead_json(yajl_gen g, const char *key)
{
	const char *a = strchr(key, '|'), *b = a != NULL ? strchr(a + 1, '|') : NULL;
	char *shown;

	if (b == NULL || ((size_t)(b - a - 1) == 7 && strncmp(a + 1, "gateway", 7) == 0)) {
		tg_json_str(g, key);
		return;
	}
	shown = tg_xasprintf("%.*s|caller%s", (int)(a - key), key, b);
	tg_json_str(g, shown);
	free(shown);
}

static void
instance_json(yajl_gen g, const struct tg_state_instance *v)
{
	char iso[TG_ISO_LEN] = "";
	size_t i;

	yajl_gen_map_open(g);
	tg_json_kv_str(g, "instance", v->name);
	tg_json_kv_bool(g, "self", v->self);
	if (v->live_until_ms > 0)
		tg_clock_iso(v->live_until_ms, iso);
	tg_json_kv_str(g, "liveUntil", v->live_until_ms > 0 ? iso : NULL);
	tg_json_str(g, "leads");
	yajl_gen_array_open(g);
	for (i = 0; i < v->nleads; i++)
		lead_json(g, v->leads[i]);
	yajl_gen_array_close(g);
	tg_json_str(g, "leadCount");
	v->lead_count < 0 ? yajl_gen_null(g) : yajl_gen_integer(g, v->lead_count);
	tg_json_str(g, "webhookLeases");
	v->webhook_leases < 0 ? yajl_gen_null(g) : yajl_gen_integer(g, v->webhook_leases);
	tg_json_str(g, "claims");
	v->claims < 0 ? yajl_gen_null(g) : yajl_gen_integer(g, v->claims);
	yajl_gen_map_close(g);
}

static void
on_list(const struct tg_state_res *res, const struct tg_state_instance *v, size_t n,
    void *arg)
{
	struct gw_fleet_req *f = arg;
	struct evhttp_request *req = gw_held_take(f->held);
	yajl_gen g;
	size_t i;

	f->op = NULL;
	f->answered = 1;
	unlink_req(f);
	if (req == NULL)
		;	/* the client went */
	else if (res->rc != TG_STATE_OK) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "5");
		gw_admin_reply_error(f->gw, req, 503, "STATE_UNAVAILABLE", res->err.msg);
	} else {
		g = tg_json_gen_new();
		yajl_gen_map_open(g);
		tg_json_kv_str(g, "backend", tg_state_backend_name(f->gw->state));
		tg_json_str(g, "instances");
		yajl_gen_array_open(g);
		for (i = 0; i < n; i++)
			instance_json(g, &v[i]);
		yajl_gen_array_close(g);
		yajl_gen_map_close(g);
		tg_reply_json(req, 200, g);
		yajl_gen_free(g);
	}
	free(f);
}

void
gw_admin_fleet(struct gw *gw, struct evhttp_request *req)
{
	struct gw_fleet_req *f;
	struct tg_state_op *op;

	if (!gw_admin_authorized(gw, req))
		return;
	if (gw->state == NULL) {
		gw_admin_reply_error(gw, req, 503, "STATE_UNAVAILABLE", "no state is open");
		return;
	}
	f = tg_xcalloc(1, sizeof(*f));
	f->gw = gw;
	f->held = gw_held_new(req);
	f->next = gw->fleet_reqs;
	f->prev = &gw->fleet_reqs;
	if (f->next != NULL)
		f->next->prev = &f->next;
	gw->fleet_reqs = f;
	/* answered during the call: f is freed already */
	op = tg_state_fleet_list(gw->state, tg_clock_now_ms(), on_list, f);
	if (op != NULL)
		f->op = op;
}

void
gw_admin_fleet_cancel(struct gw *gw)
{
	struct gw_fleet_req *f;

	while ((f = gw->fleet_reqs) != NULL) {
		unlink_req(f);
		tg_state_cancel(f->op);
		gw_held_take(f->held);
		free(f);
	}
}
