/*
 * runtime.c - what one configuration builds and a reload swaps: per
 * service the vendor API's upstream (with its fallback host), the login
 * endpoint and the vendor token source (vendor.c), the callers' login
 * cache; and the API keys. Requests and calls hold a reference to the
 * runtime they started with; the last reference often goes from inside an
 * upstream callback, so a released runtime is freed from the loop.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "tidegate/sim.h"
#include "gw.h"

static void
service_cleanup(struct gw_service *s)
{
	gw_vendor_cleanup(s);
	tg_login_cache_free(s->logins);
	if (s->auth != s->api)
		tg_upstream_free(s->auth);
	tg_upstream_free(s->api);
}

static void
runtime_free(struct gw_runtime *rt)
{
	int i;

	for (i = 0; i < 2; i++) {
		gw_budget_detach(rt->gw, &rt->svc[i]);
		service_cleanup(&rt->svc[i]);
	}
	tg_keyring_cleanup(&rt->keys);
	gw_config_free(&rt->cfg);
	free(rt);
}

void
gw_runtime_reap(struct gw *gw)
{
	struct gw_runtime *rt;

	while ((rt = gw->dying) != NULL) {
		gw->dying = rt->next_dying;
		runtime_free(rt);
	}
}

void
gw_runtime_on_reap(evutil_socket_t fd, short what, void *arg)
{
	gw_runtime_reap(arg);
}

/* The last reference often goes from inside an upstream callback, where the
 * upstreams must not be freed: park the runtime and free it from the loop. */
void
gw_runtime_unref(struct gw_runtime *rt)
{
	if (rt == NULL || --rt->refs > 0)
		return;
	rt->next_dying = rt->gw->dying;
	rt->gw->dying = rt;
	event_active(rt->gw->reap_ev, EV_TIMEOUT, 0);
}

static int
service_init(struct gw *gw, struct gw_runtime *rt, int i, struct tg_err *err)
{
	struct gw_service *s = &rt->svc[i];
	const struct gw_config *c = &rt->cfg;
	struct tg_upstream_opts o = { c->connect_timeout, c->read_timeout, (size_t)c->max_conns,
		(size_t)c->max_idle, c->tls_verify, c->tls_ca_file, (size_t)c->max_conns_per_key,
		c->queue_timeout, c->eject_after > 0 ? (int)c->eject_after : -1, c->eject_time,
		c->eject_max, c->probe_path, c->probe_interval, (int)c->retry_budget_pct,
		(int)c->retry_budget_min, c->retry_after_max };

	s->index = i;
	s->name = i == GW_DEX ? "dex" : "sim";
	s->mask = i == GW_DEX ? TG_SVC_DEX : TG_SVC_SIM;
	s->routes = i == GW_DEX ? &tg_dex_service_routes : &tg_sim_service_routes;
	s->cfg = i == GW_DEX ? &c->dex : &c->sim;
	s->api = tg_upstream_new(gw->base, gw->dns, s->cfg->url, s->cfg->fallback_url, &o, err);
	if (s->api == NULL)
		return -1;
	return gw_vendor_init(gw, s, &o, err);
}

/* Takes ownership of *cfg (it is zeroed). */
struct gw_runtime *
gw_runtime_new(struct gw *gw, struct gw_config *cfg, struct tg_err *err)
{
	struct gw_runtime *rt = tg_xcalloc(1, sizeof(*rt));
	size_t i;

	rt->refs = 1;
	rt->gw = gw;
	rt->cfg = *cfg;
	memset(cfg, 0, sizeof(*cfg));
	for (i = 0; i < rt->cfg.nkeys; i++)
		if (gw_config_key_add(&rt->keys, &rt->cfg.keys[i], err) != 0)
			goto err;
	for (i = 0; i < 2; i++)
		if (service_init(gw, rt, (int)i, err) != 0)
			goto err;
	for (i = 0; i < 2; i++)		/* only a runtime that will serve */
		gw_budget_attach(gw, &rt->svc[i]);
	return rt;
err:
	gw_runtime_unref(rt);
	return NULL;
}

