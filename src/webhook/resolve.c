/*
 * resolve.c - the DNS half of the egress policy: a callback URL's host is
 * resolved through the gateway's evdns_base (never blocking DNS), every
 * address is checked, and the first allowed one (IPv4 preferred) is what
 * the delivery connects to, so a name cannot be re-resolved to another
 * address between check and use. Called by deliver.c for each attempt.
 *
 * evdns answers literals and hosts-file names from inside
 * evdns_getaddrinfo and queries later; both reach the caller from the loop.
 * A cancelled query still calls back once (EVUTIL_EAI_CANCEL), so a
 * timeout waits for that before reporting, and a user's cancel leaves the
 * lookup to be freed by it.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/dns.h>
#include <event2/event.h>
#include <event2/util.h>

#include "tidegate/webhook.h"
#include "wh.h"

struct tg_egress_lookup {
	const struct tg_egress *p;
	char *host;
	int64_t timeout_ms;
	struct evdns_getaddrinfo_request *req;	/* set while a query is in flight */
	struct event *ev;			/* delivery from the loop, or the timeout */
	tg_egress_cb cb;
	void *arg;
	char addr[INET6_ADDRSTRLEN];
	struct tg_err why;
	int ok, have_result, in_call, timed_out, dns_cancelled, cancelled;
	int refused;		/* the policy said no (not DNS) */
};

static void
lookup_free(struct tg_egress_lookup *l)
{
	if (l->ev != NULL)
		event_free(l->ev);
	free(l->host);
	free(l);
}

static void
finish(struct tg_egress_lookup *l)
{
	l->cb(l->ok ? l->addr : NULL, l->ok ? NULL : l->why.msg, !l->ok && l->refused, l->arg);
	lookup_free(l);
}

static void
addr_text(const struct sockaddr *sa, char *buf, size_t len)
{
	if (sa->sa_family == AF_INET)
		inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, (socklen_t)len);
	else
		inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf,
		    (socklen_t)len);
}

/* Every address must pass; the first IPv4 one (else the first) is used. */
static void
judge(struct tg_egress_lookup *l, const struct evutil_addrinfo *ai)
{
	const struct sockaddr *pick = NULL;
	struct tg_err e;

	for (; ai != NULL; ai = ai->ai_next) {
		if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
			continue;
		if (tg_egress_check_addr(l->p, l->host, ai->ai_addr, &e) != 0) {
			tg_err_set(&l->why, "%s resolves to %s", l->host, e.msg);
			l->refused = 1;
			return;
		}
		if (pick == NULL || (pick->sa_family != AF_INET && ai->ai_family == AF_INET))
			pick = ai->ai_addr;
	}
	if (pick == NULL) {
		tg_err_set(&l->why, "%s has no IP address", l->host);
		return;
	}
	addr_text(pick, l->addr, sizeof(l->addr));
	l->ok = 1;
}

static void
on_dns(int result, struct evutil_addrinfo *ai, void *arg)
{
	struct tg_egress_lookup *l = arg;

	l->req = NULL;
	if (l->cancelled) {
		if (ai != NULL)
			evutil_freeaddrinfo(ai);
		lookup_free(l);
		return;
	}
	if (l->timed_out)
		tg_err_set(&l->why, "DNS lookup of %s timed out after %lld ms", l->host,
		    (long long)l->timeout_ms);
	else if (result != 0)
		tg_err_set(&l->why, "cannot resolve %s: %s", l->host, evutil_gai_strerror(result));
	else
		judge(l, ai);
	if (ai != NULL)
		evutil_freeaddrinfo(ai);
	l->have_result = 1;
	if (l->in_call)
		return;		/* tg_egress_resolve defers it */
	event_del(l->ev);
	finish(l);
}

static void
on_ev(evutil_socket_t fd, short what, void *arg)
{
	struct tg_egress_lookup *l = arg;

	if (l->have_result) {
		finish(l);
		return;
	}
	/* The timeout: the answer comes as a cancel, through on_dns. */
	l->timed_out = 1;
	l->dns_cancelled = 1;
	evdns_getaddrinfo_cancel(l->req);
}

static void
start_dns(struct tg_egress_lookup *l, struct evdns_base *dns)
{
	struct evutil_addrinfo hints;
	struct evdns_getaddrinfo_request *req;
	struct timeval tv;

	memset(&hints, 0, sizeof(hints));
	hints.ai_family = AF_UNSPEC;
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_protocol = IPPROTO_TCP;
	l->in_call = 1;
	req = evdns_getaddrinfo(dns, l->host, NULL, &hints, on_dns, l);
	l->in_call = 0;
	if (l->have_result || req == NULL) {
		if (!l->have_result)
			tg_err_set(&l->why, "cannot start a DNS lookup of %s", l->host);
		l->have_result = 1;
		event_active(l->ev, EV_TIMEOUT, 1);
		return;
	}
	l->req = req;
	tv.tv_sec = (time_t)(l->timeout_ms / 1000);
	tv.tv_usec = (suseconds_t)(l->timeout_ms % 1000 * 1000);
	evtimer_add(l->ev, &tv);
}

struct tg_egress_lookup *
tg_egress_resolve(const struct tg_egress *p, struct event_base *base, struct evdns_base *dns,
    const char *host, int64_t timeout_ms, tg_egress_cb cb, void *arg)
{
	struct tg_egress_lookup *l = tg_xcalloc(1, sizeof(*l));
	struct sockaddr_in6 s6;
	struct sockaddr_in s4;
	int is_ip;

	l->p = p;
	l->host = tg_xstrdup(host);
	l->timeout_ms = timeout_ms > 0 ? timeout_ms : 15000;
	l->cb = cb;
	l->arg = arg;
	l->ev = evtimer_new(base, on_ev, l);
	is_ip = inet_pton(AF_INET, host, &s4.sin_addr) == 1 ||
	    inet_pton(AF_INET6, host, &s6.sin6_addr) == 1;
	if (tg_webhook_check_host(p, host, &l->why) != 0 || is_ip || dns == NULL) {
		l->refused = l->why.msg[0] != '\0';
		if (l->why.msg[0] == '\0' && !is_ip)
			tg_err_set(&l->why, "no resolver for %s", host);
		else if (l->why.msg[0] == '\0') {
			snprintf(l->addr, sizeof(l->addr), "%s", host);
			l->ok = 1;
		}
		l->have_result = 1;
		event_active(l->ev, EV_TIMEOUT, 1);
		return l;
	}
	start_dns(l, dns);
	return l;
}

void
tg_egress_lookup_cancel(struct tg_egress_lookup *l)
{
	if (l == NULL)
		return;
	if (l->req == NULL) {
		lookup_free(l);
		return;
	}
	/* In flight: on_dns frees it when evdns reports the cancel. */
	l->cancelled = 1;
	event_del(l->ev);
	if (!l->dns_cancelled) {
		l->dns_cancelled = 1;
		evdns_getaddrinfo_cancel(l->req);
	}
}
