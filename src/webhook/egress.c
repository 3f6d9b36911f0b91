/*
 * egress.c - where webhooks may go (SSRF policy): the special-purpose
 * address ranges refused by default (IPv4, IPv6, and the IPv6 forms that
 * embed an IPv4 address, judged by that address), the allow-list of CIDRs
 * and host names, and the synchronous check of a callback URL. Called by
 * the gateway at request time (tg_egress_check_url), by resolve.c for
 * every address DNS returns, and by deliver.c, which also uses the URL
 * parser here.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include <event2/http.h>

#include "tidegate/json.h"
#include "tidegate/webhook.h"
#include "wh.h"

/* An address as 16 bytes: IPv4 in the first four. */
struct net {
	int v6;
	uint8_t a[16];
	int bits;
};

struct named {
	const char *cidr;
	const char *name;
};

/* Most specific first: the first match names the range. */
static const struct named v4_special[] = {
	{ "169.254.169.254/32", "metadata" },
	{ "255.255.255.255/32", "broadcast" },
	{ "0.0.0.0/8", "unspecified" },
	{ "10.0.0.0/8", "private" },
	{ "100.64.0.0/10", "cgnat" },
	{ "127.0.0.0/8", "loopback" },
	{ "169.254.0.0/16", "link-local" },
	{ "172.16.0.0/12", "private" },
	{ "192.0.0.0/24", "reserved" },		/* IETF protocol assignments */
	{ "192.0.2.0/24", "documentation" },
	{ "192.88.99.0/24", "reserved" },	/* former 6to4 relay anycast */
	{ "192.168.0.0/16", "private" },
	{ "198.18.0.0/15", "benchmarking" },
	{ "198.51.100.0/24", "documentation" },
	{ "203.0.113.0/24", "documentation" },
	{ "224.0.0.0/4", "multicast" },
	{ "240.0.0.0/4", "reserved" },
};

static const struct named v6_special[] = {
	{ "::/128", "unspecified" },
	{ "::1/128", "loopback" },
	{ "fd00:ec2::254/128", "metadata" },
	{ "64:ff9b:1::/48", "nat64-local" },
	{ "100::/64", "discard" },
	{ "2001::/32", "teredo" },
	{ "2001:2::/48", "benchmarking" },
	{ "2001:10::/28", "reserved" },		/* ORCHID */
	{ "2001:20::/28", "reserved" },		/* ORCHIDv2 */
	{ "2001:db8::/32", "documentation" },
	{ "fc00::/7", "private" },
	{ "fe80::/10", "link-local" },
	{ "fec0::/10", "site-local" },
	{ "ff00::/8", "multicast" },
};

/* IPv6 prefixes carrying an IPv4 address at byte offset off. */
static const struct {
	const char *cidr;
	int off;
	const char *name;
} v6_embed[] = {
	{ "::ffff:0:0/96", 12, "IPv4-mapped" },
	{ "::ffff:0:0:0/96", 12, "IPv4-translated" },
	{ "64:ff9b::/96", 12, "NAT64" },
	{ "2002::/16", 2, "6to4" },
	{ "::/96", 12, "IPv4-compatible" },
};

struct tg_egress {
	struct net *nets;
	size_t nnets;
	char **names;		/* lower case; ".suffix" for "*.suffix" */
	size_t nnames;
};

static int
net_parse(const char *s, struct net *n)
{
	char buf[64], *slash, *end;
	long bits;

	if (strlen(s) >= sizeof(buf))
		return -1;
	strcpy(buf, s);
	if ((slash = strchr(buf, '/')) != NULL)
		*slash = '\0';
	memset(n, 0, sizeof(*n));
	if (inet_pton(AF_INET, buf, n->a) == 1)
		n->bits = 32;
	else if (inet_pton(AF_INET6, buf, n->a) == 1) {
		n->v6 = 1;
		n->bits = 128;
	} else
		return -1;
	if (slash != NULL) {
		bits = strtol(slash + 1, &end, 10);
		if (slash[1] == '\0' || *end != '\0' || bits < 0 || bits > n->bits)
			return -1;
		n->bits = (int)bits;
	}
	return 0;
}

static int
net_contains(const struct net *n, int v6, const uint8_t *a)
{
	int full = n->bits / 8, rest = n->bits % 8;
	uint8_t mask;

	if (n->v6 != v6 || memcmp(n->a, a, (size_t)full) != 0)
		return 0;
	if (rest == 0)
		return 1;
	mask = (uint8_t)(0xff << (8 - rest));
	return (n->a[full] & mask) == (a[full] & mask);
}

/* The tables parse once; they are constants, so a failure is a bug. */
static int
in_table(const struct named *t, size_t n, int v6, const uint8_t *a, const char **name)
{
	struct net net;
	size_t i;

	for (i = 0; i < n; i++) {
		if (net_parse(t[i].cidr, &net) != 0)
			abort();
		if (net_contains(&net, v6, a)) {
			*name = t[i].name;
			return 1;
		}
	}
	return 0;
}

/* The embedded IPv4 address of a, into v4; the form's name or NULL. */
static const char *
embedded_v4(const uint8_t *a, uint8_t v4[4])
{
	struct net net;
	size_t i;

	for (i = 0; i < TG_NELEM(v6_embed); i++) {
		if (net_parse(v6_embed[i].cidr, &net) != 0)
			abort();
		if (net_contains(&net, 1, a)) {
			memcpy(v4, a + v6_embed[i].off, 4);
			return v6_embed[i].name;
		}
	}
	return NULL;
}

/* The range of an address, NULL when public; *form names an IPv4-embedding
 * IPv6 form (its IPv4 in v4) or is NULL. */
static const char *
classify(int v6, const uint8_t *a, const char **form, uint8_t v4[4])
{
	const char *name = NULL;

	*form = NULL;
	if (!v6)
		return in_table(v4_special, TG_NELEM(v4_special), 0, a, &name) ? name : NULL;
	if (in_table(v6_special, TG_NELEM(v6_special), 1, a, &name))
		return name;
	if ((*form = embedded_v4(a, v4)) != NULL)
		return in_table(v4_special, TG_NELEM(v4_special), 0, v4, &name) ? name : NULL;
	/* Only 2000::/3 is global unicast; the rest is unassigned. */
	return (a[0] & 0xe0) == 0x20 ? NULL : "reserved";
}

static int
sa_bytes(const struct sockaddr *sa, uint8_t a[16], int *v6)
{
	memset(a, 0, 16);
	if (sa->sa_family == AF_INET) {
		memcpy(a, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		*v6 = 0;
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		memcpy(a, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
		*v6 = 1;
		return 0;
	}
	return -1;
}

const char *
tg_egress_range(const struct sockaddr *sa)
{
	uint8_t a[16], v4[4];
	const char *form;
	int v6;

	if (sa_bytes(sa, a, &v6) != 0)
		return "unsupported";
	return classify(v6, a, &form, v4);
}

/* The ranges refused unless allow names them, as the admin API shows them
 * (GET /webhooks/policy): one list, the tables above, so what is shown is
 * what is enforced. */
static void
named_json(yajl_gen g, const struct named *t, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++) {
		yajl_gen_map_open(g);
		tg_json_kv_str(g, "cidr", t[i].cidr);
		tg_json_kv_str(g, "range", t[i].name);
		yajl_gen_map_close(g);
	}
}

void
wh_egress_refused_json(yajl_gen g)
{
	size_t i;

	yajl_gen_array_open(g);
	named_json(g, v4_special, TG_NELEM(v4_special));
	named_json(g, v6_special, TG_NELEM(v6_special));
	for (i = 0; i < TG_NELEM(v6_embed); i++) {
		yajl_gen_map_open(g);
		tg_json_kv_str(g, "cidr", v6_embed[i].cidr);
		tg_json_kv_str(g, "range", v6_embed[i].name);
		tg_json_kv_str(g, "judgedBy", "the embedded IPv4 address");
		yajl_gen_map_close(g);
	}
	yajl_gen_array_close(g);
}

/* ---- the policy ---- */

/* Lower-case, one trailing dot dropped: how names are compared. */
static char *
name_norm(const char *host)
{
	char *s = tg_xstrdup(host), *p;
	size_t n = strlen(s);

	if (n > 0 && s[n - 1] == '.')
		s[n - 1] = '\0';
	for (p = s; *p; p++)
		*p = (char)tolower((unsigned char)*p);
	return s;
}

/* Letters, digits, '-' and '.', labels of 1..63, 253 in all. */
static int
name_valid(const char *s)
{
	size_t n = strlen(s), label = 0, i;

	if (n == 0 || n > 253)
		return 0;
	for (i = 0; i < n; i++) {
		if (s[i] == '.') {
			if (label == 0)
				return 0;
			label = 0;
			continue;
		}
		if (!(isalnum((unsigned char)s[i]) || s[i] == '-') || ++label > 63)
			return 0;
	}
	return label > 0;
}

static int
host_allowed(const struct tg_egress *p, const char *host)
{
	char *h;
	size_t i, hn, sn;
	int ok = 0;

	if (p == NULL || host == NULL || p->nnames == 0)
		return 0;
	h = name_norm(host);
	hn = strlen(h);
	for (i = 0; i < p->nnames && !ok; i++) {
		sn = strlen(p->names[i]);
		if (p->names[i][0] == '.')
			ok = hn > sn && strcmp(h + hn - sn, p->names[i]) == 0;
		else
			ok = strcmp(h, p->names[i]) == 0;
	}
	free(h);
	return ok;
}

static int
allow_add(struct tg_egress *p, const char *e, struct tg_err *err)
{
	struct net n;
	char *name;

	if (net_parse(e, &n) == 0) {
		p->nets = tg_xrealloc(p->nets, (p->nnets + 1) * sizeof(*p->nets));
		p->nets[p->nnets++] = n;
		return 0;
	}
	if (strchr(e, '/') != NULL || strchr(e, ':') != NULL) {
		tg_err_set(err, "egress allow entry '%s' is not a valid CIDR or address", e);
		return -1;
	}
	name = name_norm(strncmp(e, "*.", 2) == 0 ? e + 2 : e);
	if (!name_valid(name)) {
		tg_err_set(err, "egress allow entry '%s' is not a host name, address or CIDR", e);
		free(name);
		return -1;
	}
	p->names = tg_xrealloc(p->names, (p->nnames + 1) * sizeof(*p->names));
	p->names[p->nnames++] = strncmp(e, "*.", 2) == 0 ? tg_xasprintf(".%s", name) :
	    tg_xstrdup(name);
	free(name);
	return 0;
}

struct tg_egress *
tg_egress_new(const struct tg_strlist *allow, struct tg_err *err)
{
	struct tg_egress *p = tg_xcalloc(1, sizeof(*p));
	size_t i;

	for (i = 0; allow != NULL && i < allow->n; i++) {
		if (allow_add(p, allow->v[i], err) != 0) {
			tg_egress_free(p);
			return NULL;
		}
	}
	return p;
}

void
tg_egress_free(struct tg_egress *p)
{
	size_t i;

	if (p == NULL)
		return;
	for (i = 0; i < p->nnames; i++)
		free(p->names[i]);
	free(p->names);
	free(p->nets);
	free(p);
}

static int
net_allowed(const struct tg_egress *p, int v6, const uint8_t *a)
{
	size_t i;

	for (i = 0; p != NULL && i < p->nnets; i++)
		if (net_contains(&p->nets[i], v6, a))
			return 1;
	return 0;
}

int
tg_egress_check_addr(const struct tg_egress *p, const char *host, const struct sockaddr *sa,
    struct tg_err *why)
{
	char txt[INET6_ADDRSTRLEN], v4txt[INET_ADDRSTRLEN];
	uint8_t a[16], v4[4];
	const char *range, *form;
	int v6;

	if (sa_bytes(sa, a, &v6) != 0) {
		tg_err_set(why, "address family %d is not IP", sa->sa_family);
		return -1;
	}
	range = classify(v6, a, &form, v4);
	if (range == NULL || host_allowed(p, host) || net_allowed(p, v6, a) ||
	    (form != NULL && net_allowed(p, 0, v4)))
		return 0;
	inet_ntop(v6 ? AF_INET6 : AF_INET, a, txt, sizeof(txt));
	/* the fix named with the refusal: the address itself in webhooks.allow */
	if (form != NULL) {
		inet_ntop(AF_INET, v4, v4txt, sizeof(v4txt));
		tg_err_set(why, "%s is %s of %s, a %s address (not allowed; to allow it, list "
		    "%s/32 in webhooks.allow)", txt, form, v4txt, range, v4txt);
	} else
		tg_err_set(why, "%s is a %s address (not allowed; to allow it, list %s/%d in "
		    "webhooks.allow)", txt, range, txt, v6 ? 128 : 32);
	return -1;
}

/* ---- callback URLs ---- */

void
tg_webhook_url_cleanup(struct wh_url *u)
{
	free(u->scheme);
	free(u->host);
	free(u->origin);
	free(u->target);
	memset(u, 0, sizeof(*u));
}

static int
url_fields(const struct evhttp_uri *e, struct wh_url *u, struct tg_err *why)
{
	const char *scheme = evhttp_uri_get_scheme(e), *host = evhttp_uri_get_host(e);
	const char *path = evhttp_uri_get_path(e), *query = evhttp_uri_get_query(e);
	int port = evhttp_uri_get_port(e), tls;
	size_t n;

	if (scheme == NULL || (strcasecmp(scheme, "http") != 0 &&
	    strcasecmp(scheme, "https") != 0)) {
		tg_err_set(why, "callback URL scheme must be http or https");
		return -1;
	}
	if (host == NULL || *host == '\0' || port == 0 || port > 65535) {
		tg_err_set(why, "callback URL needs a host (and a port from 1 to 65535)");
		return -1;
	}
	if (evhttp_uri_get_userinfo(e) != NULL) {
		tg_err_set(why, "callback URL must not carry user info");
		return -1;
	}
	tls = strcasecmp(scheme, "https") == 0;
	u->scheme = tg_xstrdup(tls ? "https" : "http");
	n = strlen(host);
	u->host = host[0] == '[' ? tg_xstrndup(host + 1, n - 2) : tg_xstrdup(host);
	u->port = port > 0 ? port : tls ? 443 : 80;
	u->origin = port > 0 ? tg_xasprintf("%s://%s:%d", u->scheme, host, port) :
	    tg_xasprintf("%s://%s", u->scheme, host);
	u->target = tg_xasprintf("%s%s%s", path != NULL && *path != '\0' ? path : "/",
	    query != NULL ? "?" : "", query != NULL ? query : "");
	return 0;
}

int
tg_webhook_url_parse(const char *url, struct wh_url *u, struct tg_err *why)
{
	struct evhttp_uri *e;
	int rc;

	memset(u, 0, sizeof(*u));
	if (url == NULL || strlen(url) > 4096 || (e = evhttp_uri_parse(url)) == NULL) {
		tg_err_set(why, "callback URL does not parse");
		return -1;
	}
	rc = url_fields(e, u, why);
	evhttp_uri_free(e);
	if (rc != 0)
		tg_webhook_url_cleanup(u);
	return rc;
}

char *
tg_webhook_url_redact(const char *url)
{
	size_t n = strcspn(url, "?#");

	return url[n] == '?' ? tg_xasprintf("%.*s?…", (int)n, url) : tg_xstrndup(url, n);
}

/* A literal address as a sockaddr; 0 when host is one. */
static int
literal(const char *host, struct sockaddr_storage *ss)
{
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, host, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, host, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		return 0;
	}
	return -1;
}

/* The last label is all digits, or 0x-hex: resolvers read such names as
 * IPv4 in shorthand ("127.1", "2130706433", "0x7f.1"), DNS never has them. */
static int
numeric_name(const char *h)
{
	const char *last = strrchr(h, '.');
	size_t i;

	last = last != NULL ? last + 1 : h;
	if (last[0] == '0' && (last[1] == 'x' || last[1] == 'X'))
		return 1;
	for (i = 0; last[i] != '\0'; i++)
		if (!isdigit((unsigned char)last[i]))
			return 0;
	return i > 0;
}

/* Names refused before DNS: malformed, numeric, and localhost (RFC 6761). */
static int
check_name(const struct tg_egress *p, const char *host, struct tg_err *why)
{
	char *h = name_norm(host);
	size_t n = strlen(h);
	int rc = -1;

	if (!name_valid(h))
		tg_err_set(why, "callback URL host is not a valid host name");
	else if (numeric_name(h))
		tg_err_set(why, "callback URL host '%s' is a numeric name, not an address", h);
	else if (!host_allowed(p, h) && (strcmp(h, "localhost") == 0 ||
	    (n > 10 && strcmp(h + n - 10, ".localhost") == 0)))
		tg_err_set(why, "callback URL host '%s' is loopback (not allowed; an allowed "
		    "address range does not cover names: list '%s' itself in webhooks.allow)", h,
		    h);
	else
		rc = 0;
	free(h);
	return rc;
}

int
tg_webhook_check_host(const struct tg_egress *p, const char *host, struct tg_err *why)
{
	struct sockaddr_storage ss;
	struct tg_err e;

	if (literal(host, &ss) != 0)
		return check_name(p, host, why);
	if (tg_egress_check_addr(p, host, (struct sockaddr *)&ss, &e) != 0) {
		tg_err_set(why, "callback URL host %s", e.msg);
		return -1;
	}
	return 0;
}

int
tg_egress_check_url(const struct tg_egress *p, const char *url, struct tg_err *why)
{
	struct wh_url u;
	int rc;

	if (tg_webhook_url_parse(url, &u, why) != 0)
		return -1;
	rc = tg_webhook_check_host(p, u.host, why);
	tg_webhook_url_cleanup(&u);
	return rc;
}
