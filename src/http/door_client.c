/*
 * door_client.c - the client address the front door (frontdoor.h) decides
 * for each connection and request, in this one place, and the per-address
 * counts max_conns_per_addr limits. A connection's address is its peer's,
 * or the one its PROXY header gives (that address takes the peer's place:
 * real_ip_from is checked against it, so a client behind a TCP balancer
 * cannot vouch for itself with an X-Forwarded-For). When that address is
 * a trusted proxy (real_ip_from), each request's client is the address
 * its X-Forwarded-For fields name, walked from the right past trusted
 * proxies (tg_http_realip_xff). A trusted proxy's connection is shared by many
 * clients, so it is not counted; each of its requests counts under its
 * client while in flight (nginx's limit_conn behind realip). An untrusted
 * peer's X-Forwarded-For is never read: no header search on the plain
 * path. Called by door_conns.c (accept, a request's start and end, the
 * close; it answers tg_frontdoor_client from what is decided here) and
 * frontdoor.c (the PROXY header).
 */
#include <string.h>
#include <sys/queue.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/map.h"
#include "tidegate/realip.h"
#include "door.h"

static struct tg_map *per_addr;	/* client address -> open connections (or a
				 * trusted proxy's requests in flight) */

size_t
tg_door_addr_count(const char *addr, int delta)
{
	uintptr_t n;

	if (addr[0] == '\0')
		return 0;
	if (per_addr == NULL)
		per_addr = tg_map_new(NULL);
	n = (uintptr_t)tg_map_get(per_addr, addr) + (uintptr_t)(intptr_t)delta;
	if (n == 0)
		tg_map_del(per_addr, addr);
	else
		tg_map_put(per_addr, addr, (void *)n);
	return (size_t)n;
}

int
tg_door_proxied(struct conn *c, const struct tg_proxy_hdr *h)
{
	const struct tg_frontdoor *d = c->door;

	if (!h->local)
		memcpy(c->addr, h->src, sizeof(c->addr));
	c->trusted = d->real_ip_from != NULL && tg_http_cidrs_match(d->real_ip_from, c->addr);
	if (c->trusted)
		return 0;
	if (d->max_conns_per_addr > 0 && tg_door_addr_count(c->addr, 0) >= d->max_conns_per_addr) {
		if (d->stats != NULL)
			d->stats->refused_addr++;
		return -1;
	}
	c->counted = tg_door_addr_count(c->addr, 1) > 0;
	return 0;
}

/* Every X-Forwarded-For field of the request, the last first (together
 * they are one list, RFC 9110 5.3), from the connection's address on.
 * Asked again of the set in force: a reload may have stopped trusting it. */
static void
forwarded_for(const struct conn *c, struct evhttp_request *req, char *out, size_t size)
{
	struct evkeyvalq *in = evhttp_request_get_input_headers(req);
	struct evkeyval *h;

	memcpy(out, c->addr, size < sizeof(c->addr) ? size : sizeof(c->addr));
	out[size - 1] = '\0';
	if (!tg_http_cidrs_match(c->door->real_ip_from, c->addr))
		return;
	TAILQ_FOREACH_REVERSE(h, in, evkeyvalq, next) {
		if (strcasecmp(h->key, "X-Forwarded-For") == 0 &&
		    !tg_http_realip_xff(c->door->real_ip_from, h->value, strlen(h->value), out, size))
			return;
	}
}

int
tg_door_client_begin(struct conn *c, struct evhttp_request *req)
{
	const struct tg_frontdoor *d = c->door;

	forwarded_for(c, req, c->client, sizeof(c->client));
	if (d->max_conns_per_addr == 0)
		return 0;
	if (tg_door_addr_count(c->client, 0) >= d->max_conns_per_addr) {
		if (d->stats != NULL)
			d->stats->refused_addr++;
		return TG_HEAD_CLIENT_LIMIT;
	}
	c->client_counted = tg_door_addr_count(c->client, 1) > 0;
	return 0;
}

void
tg_door_client_end(struct conn *c)
{
	if (c->client_counted)
		tg_door_addr_count(c->client, -1);
	c->client_counted = 0;
}
