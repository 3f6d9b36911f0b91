/*
 * realip.c - the trusted proxies of realip.h: CIDR blocks parsed with
 * inet_pton, an address matched against every block (a handful, from the
 * configuration: a linear walk), and the X-Forwarded-For walk of nginx's
 * real_ip_recursive: from the right, past each trusted proxy, to the first
 * address that is not one. A malformed entry ends the walk with the last
 * good address, which is a proxy's: the address a trusted proxy vouched
 * for is used, never a guess further left.
 */
#include <arpa/inet.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "tidegate/realip.h"

#define ADDR_TEXT 48	/* INET6_ADDRSTRLEN and a little */

/* text (NUL-terminated) as an address: its family, the bytes in bin. */
static int
parse_addr(const char *text, unsigned char *bin)
{
	if (inet_pton(AF_INET, text, bin) == 1)
		return AF_INET;
	if (inet_pton(AF_INET6, text, bin) == 1)
		return AF_INET6;
	return 0;
}

static int
prefix_bits(const char *s, unsigned max, unsigned *bits)
{
	unsigned long v = 0;
	size_t i, n = strlen(s);

	if (n == 0 || n > 3)
		return -1;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -1;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	*bits = (unsigned)v;
	return v <= max ? 0 : -1;
}

/* 1 when the bits of a after the first bits are all zero. */
static int
host_bits_zero(const unsigned char *a, unsigned bits, unsigned total)
{
	unsigned i;

	for (i = bits; i < total; i++)
		if (a[i / 8] & (0x80u >> (i % 8)))
			return 0;
	return 1;
}

static void
network_of(struct tg_cidr *c, char *out, size_t size)
{
	unsigned i, total = c->family == AF_INET ? 32 : 128;
	unsigned char a[16];

	memcpy(a, c->addr, sizeof(a));
	for (i = c->bits; i < total; i++)
		a[i / 8] &= (unsigned char)~(0x80u >> (i % 8));
	inet_ntop(c->family, a, out, (socklen_t)size);
}

int
tg_http_cidrs_add(struct tg_cidrs *s, const char *text, struct tg_err *err)
{
	char buf[ADDR_TEXT + 4], net[ADDR_TEXT];
	struct tg_cidr c = { 0 };
	char *slash;
	unsigned total;

	if (strlen(text) >= sizeof(buf) || text[0] == '\0') {
		tg_err_set(err, "expected an address or a CIDR block (10.0.0.0/8, fd00::/8)");
		return -1;
	}
	strcpy(buf, text);
	if ((slash = strchr(buf, '/')) != NULL)
		*slash = '\0';
	if ((c.family = parse_addr(buf, c.addr)) == 0) {
		tg_err_set(err, "'%s' is not an IPv4 or IPv6 address", buf);
		return -1;
	}
	total = c.family == AF_INET ? 32 : 128;
	c.bits = total;
	if (slash != NULL && prefix_bits(slash + 1, total, &c.bits) != 0) {
		tg_err_set(err, "prefix length '%s' is not 0 to %u", slash + 1, total);
		return -1;
	}
	if (!host_bits_zero(c.addr, c.bits, total)) {
		network_of(&c, net, sizeof(net));
		tg_err_set(err, "'%s' has host bits set (did you mean '%s/%u'?)", text, net,
		    c.bits);
		return -1;
	}
	s->v = tg_xrealloc(s->v, (s->n + 1) * sizeof(*s->v));
	s->v[s->n++] = c;
	return 0;
}

void
tg_http_cidrs_cleanup(struct tg_cidrs *s)
{
	free(s->v);
	s->v = NULL;
	s->n = 0;
}

static int
in_block(const struct tg_cidr *c, int family, const unsigned char *a)
{
	unsigned whole = c->bits / 8, rest = c->bits % 8;

	if (c->family != family || memcmp(c->addr, a, whole) != 0)
		return 0;
	return rest == 0 || ((c->addr[whole] ^ a[whole]) & (0xFF00u >> rest) & 0xFF) == 0;
}

int
tg_http_cidrs_match(const struct tg_cidrs *s, const char *addr)
{
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xFF, 0xFF };
	unsigned char a[16];
	int family;
	size_t i;

	if (s == NULL || s->n == 0 || (family = parse_addr(addr, a)) == 0)
		return 0;
	if (family == AF_INET6 && memcmp(a, mapped, sizeof(mapped)) == 0) {
		memmove(a, a + 12, 4);
		family = AF_INET;
	}
	for (i = 0; i < s->n; i++)
		if (in_block(&s->v[i], family, a))
			return 1;
	return 0;
}

/* The entry value[b..e) trimmed of spaces and tabs: into out (written back
 * by inet_ntop) when it is an address; -1 when not, 0 when empty. */
static int
entry(const char *value, size_t b, size_t e, char *out, size_t size)
{
	char buf[ADDR_TEXT], text[ADDR_TEXT];
	unsigned char bin[16];
	int family;

	while (b < e && (value[b] == ' ' || value[b] == '\t'))
		b++;
	while (e > b && (value[e - 1] == ' ' || value[e - 1] == '\t'))
		e--;
	if (b == e)
		return 0;
	if (e - b >= sizeof(buf))
		return -1;
	memcpy(buf, value + b, e - b);
	buf[e - b] = '\0';
	if ((family = parse_addr(buf, bin)) == 0 ||
	    inet_ntop(family, bin, text, sizeof(text)) == NULL || strlen(text) >= size)
		return -1;
	memcpy(out, text, strlen(text) + 1);
	return 1;
}

int
tg_http_realip_xff(const struct tg_cidrs *s, const char *value, size_t vlen, char *addr,
    size_t size)
{
	size_t e = vlen, b;
	int rc;

	while (e > 0) {
		b = e;
		while (b > 0 && value[b - 1] != ',')
			b--;
		if ((rc = entry(value, b, e, addr, size)) < 0 || (rc > 0 &&
		    !tg_http_cidrs_match(s, addr)))
			return 0;
		if (b == 0)
			break;
		e = b - 1;
	}
	return 1;
}
