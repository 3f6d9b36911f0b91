/*
 * client_addr.c - the gateway's client address behind load balancers:
 * real_ip_from (trusted proxies, one set for every listener: which hosts
 * are proxies is a fact about the network, not about a port, and an
 * untrusted peer's X-Forwarded-For is ignored wherever it arrives) and
 * proxy_protocol.listeners (per listener: a balancer sends the header to
 * the port it is configured for, and a listener that expects one refuses
 * every connection without it). Checks both with the configuration, and
 * hands them to each listener's front door, which decides the address
 * (src/http/door_client.c). PROXY with TLS on one listener is refused:
 * the header would have to be read off the socket before OpenSSL's
 * handshake reads it, which bufferevent_openssl does not allow. Called by
 * config_check.c, config.c and server.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/frontdoor.h"
#include "tidegate/realip.h"
#include "gw.h"

static const char *const names[] = { "dex", "sim", "admin", NULL };

int
gw_config_names_listener(const struct tg_strlist *list, int l)
{
	size_t i;

	for (i = 0; i < list->n; i++)
		if (strcmp(list->v[i], names[l]) == 0)
			return 1;
	return 0;
}

void
gw_client_config_check(struct gw_config *c, struct tg_cfg_report *rep)
{
	struct tg_err err;
	char key[48];
	size_t i;
	int l;

	c->real_ip = c->real_ip_from.n > 0 ? tg_xcalloc(1, sizeof(*c->real_ip)) : NULL;
	for (i = 0; i < c->real_ip_from.n; i++) {
		snprintf(key, sizeof(key), "real_ip_from[%zu]", i);
		if (tg_http_cidrs_add(c->real_ip, c->real_ip_from.v[i], &err) != 0)
			tg_config_report_add(rep, NULL, key, "%s", err.msg);
	}
	for (i = 0; i < c->proxy_protocol_on.n; i++) {
		for (l = 0; names[l] != NULL && strcmp(names[l], c->proxy_protocol_on.v[i]); l++)
			;
		snprintf(key, sizeof(key), "proxy_protocol.listeners[%zu]", i);
		if (names[l] == NULL)
			tg_config_report_add(rep, NULL, key, "must be dex, sim or admin, got '%s'",
			    c->proxy_protocol_on.v[i]);
	}
	if (c->ltls_cert == NULL || *c->ltls_cert == '\0')
		return;
	for (l = 0; l < GW_NLISTENERS; l++)
		if (gw_config_names_listener(&c->proxy_protocol_on, l) &&
		    gw_config_names_listener(&c->ltls_on, l))
			tg_config_report_add(rep, NULL, "proxy_protocol.listeners", "%s speaks TLS "
			    "(tls_listen.listeners): the PROXY protocol is read on plain listeners "
			    "only (terminate TLS at the balancer, or send the header to a plain "
			    "listener)", names[l]);
}

void
gw_client_config_free(struct gw_config *c)
{
	if (c->real_ip == NULL)
		return;
	tg_http_cidrs_cleanup(c->real_ip);
	free(c->real_ip);
	c->real_ip = NULL;
}

void
gw_client_door(int l, const struct gw_config *c, struct tg_frontdoor *d)
{
	d->real_ip_from = c->real_ip != NULL && c->real_ip->n > 0 ? c->real_ip : NULL;
	d->proxy_protocol = gw_config_names_listener(&c->proxy_protocol_on, l);
}
