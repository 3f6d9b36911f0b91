/*
 * listeners.c - the gateway's three listeners (dex, sim, admin): bound at
 * start, their front doors following the configuration, and rebound on
 * SIGHUP when a listen address changes, as nginx does: the new address is
 * bound first (a bind that fails fails the reload, the old listener
 * kept), then the old one stops accepting and is retired: its open
 * connections finish (their answers say Connection: close, so keep-alive
 * clients move to the new address after their current request; an idle
 * one closes at keepalive_timeout), and it is freed once the last closes.
 * Called by server.c.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>
#include <event2/http.h>

#include "tidegate/http.h"
#include "tidegate/log.h"
#include "gw.h"

#define RETIRED_CHECK_MS	250	/* how often retired listeners are looked at */

static const char *const names[GW_NLISTENERS] = { "dex", "sim", "admin" };

const char *
gw_listen_addr(const struct gw_config *c, int l)
{
	return l == GW_DEX ? c->listen_dex : l == GW_SIM ? c->listen_sim : c->listen_admin;
}

void
gw_listener_door(struct gw *gw, int l, const struct gw_config *c)
{
	struct tg_frontdoor *d = &gw->lctx[l]->door;

	d->max_head = TG_HTTP_MAX_HEAD;
	d->max_body = (uint64_t)c->max_body;
	d->max_conns = (uint64_t)c->max_clients;
	d->max_conns_per_addr = (uint64_t)c->max_clients_per_ip;
	d->header_timeout_ms = c->client_header_timeout;
	d->body_timeout_ms = c->client_body_timeout;
	d->body_min_rate = (uint64_t)c->client_body_min_rate;
	d->body_rate_grace_ms = c->client_body_rate_grace;
	d->idle_timeout_ms = c->keepalive_timeout;
	d->stats = &gw->lctx[l]->stats;
	d->check = gw->lkinds[l].check;
	d->arg = gw->lctx[l];
	gw_tls_door(gw, l, c, d);
	gw_client_door(l, c, d);
	evhttp_set_max_body_size(gw->http[l], (ev_ssize_t)c->max_body);
}

/* The loopback rule of a gateway without API keys: every listener of c. */
static int
loopback_rule(const struct gw_config *c, struct tg_err *err)
{
	int l;

	for (l = 0; l < GW_NLISTENERS && c->nkeys == 0; l++)
		if (!gw_config_addr_loopback(gw_listen_addr(c, l))) {
			tg_err_set(err, "%s: listen.%s: %s is not a loopback address and no API "
			    "keys are configured (add keys, or listen on 127.0.0.1)", c->path,
			    names[l], gw_listen_addr(c, l));
			return -1;
		}
	return 0;
}

/* http (taken) becomes listener l under c, with a door and counters of its own. */
static void
install(struct gw *gw, int l, struct evhttp *http, const struct gw_config *c, int port)
{
	gw->http[l] = http;
	gw->lctx[l] = tg_xcalloc(1, sizeof(*gw->lctx[l]));
	gw->lctx[l]->gw = gw;
	gw->lctx[l]->listener = l;
	gw_listener_door(gw, l, c);
	tg_frontdoor_attach(http, &gw->lctx[l]->door);
	evhttp_set_gencb(http, gw->lkinds[l].on_request, gw->lctx[l]);
	tg_log(TG_LOG_INFO, "listening", TG_LS("listener", names[l]),
	    TG_LS("addr", gw_listen_addr(c, l)), TG_LI("port", port),
	    TG_LS("tls", gw_tls_on(gw, l) ? "on" : "off"));
}

int
gw_listeners_bind(struct gw *gw, const struct gw_listener_kind *kinds, struct tg_err *err)
{
	const struct gw_config *c = &gw->rt->cfg;
	struct evhttp *http;
	int l, port;

	gw->lkinds = kinds;
	if (gw_tls_start(gw, err) != 0 || loopback_rule(c, err) != 0)
		return -1;
	for (l = 0; l < GW_NLISTENERS; l++) {
		http = tg_http_listen(gw->base, gw_listen_addr(c, l), (size_t)c->max_body, &port,
		    err);
		if (http == NULL)
			return -1;
		install(gw, l, http, c, port);
	}
	return 0;
}

int
gw_rebind_prepare(struct gw *gw, const struct gw_config *c, struct gw_rebind *rb,
    struct tg_err *err)
{
	int l;

	memset(rb, 0, sizeof(*rb));
	if (loopback_rule(c, err) != 0)
		return -1;
	for (l = 0; l < GW_NLISTENERS && !gw->draining; l++) {	/* draining: none opens */
		if (strcmp(gw_listen_addr(c, l), gw_listen_addr(&gw->rt->cfg, l)) == 0)
			continue;
		rb->http[l] = tg_http_listen(gw->base, gw_listen_addr(c, l), (size_t)c->max_body,
		    &rb->port[l], err);
		if (rb->http[l] == NULL) {
			gw_rebind_abort(rb);
			return -1;
		}
	}
	return 0;
}

void
gw_rebind_abort(struct gw_rebind *rb)
{
	int l;

	for (l = 0; l < GW_NLISTENERS; l++)
		if (rb->http[l] != NULL)
			evhttp_free(rb->http[l]);
	memset(rb, 0, sizeof(*rb));
}

static void
stop_accepting(struct evhttp_bound_socket *bs, void *arg)
{
	struct evhttp_bound_socket **list = arg;
	size_t i;

	for (i = 0; i < 8 && list[i] != NULL; i++)
		;
	if (i < 8)
		list[i] = bs;
}

void
gw_listener_close(struct evhttp *http)
{
	struct evhttp_bound_socket *bs[8];
	int i;

	memset(bs, 0, sizeof(bs));
	evhttp_foreach_bound_socket(http, stop_accepting, bs);
	for (i = 0; i < 8 && bs[i] != NULL; i++)
		evhttp_del_accept_socket(http, bs[i]);
}

/* A retired listener's counters join the current one's as it goes. */
static void
fold(struct tg_frontdoor_stats *to, const struct tg_frontdoor_stats *from)
{
	to->refused_max += from->refused_max;
	to->refused_addr += from->refused_addr;
	to->header_timeouts += from->header_timeouts;
	to->body_timeouts += from->body_timeouts;
	to->idle_closed += from->idle_closed;
	to->body_too_slow += from->body_too_slow;
}

/* Free the retired listeners whose last connection closed. */
static void
on_retired(evutil_socket_t fd, short what, void *arg)
{
	struct gw *gw = arg;
	struct gw_retired **p = &gw->retired, *r;
	struct timeval tv = { 0, RETIRED_CHECK_MS * 1000 };

	while ((r = *p) != NULL) {
		if (r->lctx->stats.open > 0) {
			p = &r->next;
			continue;
		}
		*p = r->next;
		fold(&gw->lctx[r->lctx->listener]->stats, &r->lctx->stats);
		tg_log(TG_LOG_INFO, "listener_retired", TG_LS("listener",
		    names[r->lctx->listener]), TG_LS("reason", "its last connection closed"));
		evhttp_free(r->http);
		free(r->lctx);
		free(r);
	}
	if (gw->retired != NULL)
		evtimer_add(gw->retired_ev, &tv);
}

void
gw_rebind_commit(struct gw *gw, struct gw_rebind *rb)
{
	struct timeval tv = { 0, RETIRED_CHECK_MS * 1000 };
	struct gw_retired *r;
	int l;

	for (l = 0; l < GW_NLISTENERS; l++) {
		if (rb->http[l] == NULL)
			continue;
		gw_listener_close(gw->http[l]);
		r = tg_xcalloc(1, sizeof(*r));
		r->http = gw->http[l];
		r->lctx = gw->lctx[l];
		r->lctx->retired = 1;
		r->next = gw->retired;
		gw->retired = r;
		install(gw, l, rb->http[l], &gw->rt->cfg, rb->port[l]);
	}
	if (gw->retired != NULL && gw->retired_ev == NULL)
		gw->retired_ev = evtimer_new(gw->base, on_retired, gw);
	if (gw->retired != NULL && !evtimer_pending(gw->retired_ev, NULL))
		evtimer_add(gw->retired_ev, &tv);
	memset(rb, 0, sizeof(*rb));
}

void
gw_listener_stats(const struct gw *gw, int l, struct tg_frontdoor_stats *st)
{
	const struct gw_retired *r;

	*st = gw->lctx[l]->stats;
	for (r = gw->retired; r != NULL; r = r->next)
		if (r->lctx->listener == l) {
			fold(st, &r->lctx->stats);
			st->open += r->lctx->stats.open;
		}
}

void
gw_listeners_free(struct gw *gw)
{
	struct gw_retired *r;
	int l;

	while ((r = gw->retired) != NULL) {
		gw->retired = r->next;
		evhttp_free(r->http);
		free(r->lctx);
		free(r);
	}
	if (gw->retired_ev != NULL)
		event_free(gw->retired_ev);
	for (l = 0; l < GW_NLISTENERS; l++) {
		if (gw->http[l] != NULL)
			evhttp_free(gw->http[l]);
		free(gw->lctx[l]);
		gw->http[l] = NULL;
		gw->lctx[l] = NULL;
	}
}
