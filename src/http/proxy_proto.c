/*
 * proxy_proto.c - the PROXY protocol header of proxy_proto.h. Version 1 is
 * one text line ("PROXY TCP4 src dst sport dport" CRLF, at most 107
 * bytes; "PROXY UNKNOWN ..." keeps the peer's address); version 2 a
 * 12-byte signature, version and command, family, a 16-bit length, then
 * the addresses and TLVs. Strict: each field is checked as the spec
 * words it (single spaces, addresses that inet_pton reads in the family
 * named, decimal ports up to 65535), so a prefix that cannot become a
 * header is refused as soon as its bytes show it, and an address is
 * written back by inet_ntop (one spelling per address, as the per-address
 * counts need).
 */
#include <arpa/inet.h>
#include <string.h>
#include <sys/socket.h>

#include "tidegate/proxy_proto.h"

static const unsigned char v2_sig[12] = {
	0x0D, 0x0A, 0x0D, 0x0A, 0x00, 0x0D, 0x0A, 0x51, 0x55, 0x49, 0x54, 0x0A
};

/* One token of a v1 line: [*p, end) up to the next space (or end); *p
 * moves past it and one space. Its length, 0 when empty. */
static size_t
token(const char **p, const char *end, const char **tok)
{
	const char *s = *p, *sp = memchr(s, ' ', (size_t)(end - s));
	size_t n = (size_t)((sp != NULL ? sp : end) - s);

	*tok = s;
	*p = sp != NULL ? sp + 1 : end;
	return n;
}

static int
port_ok(const char *s, size_t n)
{
	unsigned long v = 0;
	size_t i;

	if (n == 0 || n > 5)
		return 0;
	for (i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return 0;
		v = v * 10 + (unsigned long)(s[i] - '0');
	}
	return v <= 65535;
}

/* Address text s[0..n) of family af, written back into out by inet_ntop. */
static int
addr_ok(int af, const char *s, size_t n, char *out)
{
	unsigned char bin[16];
	char buf[TG_PROXY_ADDR_LEN];

	if (n == 0 || n >= sizeof(buf))
		return 0;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return inet_pton(af, buf, bin) == 1 && inet_ntop(af, bin, out, TG_PROXY_ADDR_LEN) != NULL;
}

/* "PROXY " proto SP src SP dst SP sport SP dport, the line without CRLF. */
static int
v1_line(const char *s, size_t n, struct tg_proxy_hdr *out)
{
	const char *p = s + 6, *end = s + n, *t[5];
	char dst[TG_PROXY_ADDR_LEN];
	size_t len[5], i;
	int af;

	len[0] = token(&p, end, &t[0]);
	if (len[0] == 7 && memcmp(t[0], "UNKNOWN", 7) == 0 && (t[0] + 7 == end || t[0][7] == ' ')) {
		out->local = 1;		/* the rest of the line is to be ignored */
		return 0;
	}
	if (len[0] != 4 || (memcmp(t[0], "TCP4", 4) != 0 && memcmp(t[0], "TCP6", 4) != 0))
		return -1;
	af = t[0][3] == '4' ? AF_INET : AF_INET6;
	for (i = 1; i < 5; i++) {
		if (p >= end)
			return -1;
		len[i] = token(&p, end, &t[i]);
	}
	if (t[4] + len[4] != end || !addr_ok(af, t[1], len[1], out->src) ||
	    !addr_ok(af, t[2], len[2], dst) || !port_ok(t[3], len[3]) || !port_ok(t[4], len[4]))
		return -1;
	out->local = 0;
	return 0;
}

static int
parse_v1(const unsigned char *buf, size_t len, struct tg_proxy_hdr *out)
{
	size_t n = len < TG_PROXY_V1_MAX ? len : TG_PROXY_V1_MAX;
	const unsigned char *nl = memchr(buf, '\n', n);
	size_t line;

	if (memcmp(buf, "PROXY ", len < 6 ? len : 6) != 0)
		return -1;
	if (nl == NULL)
		return len >= TG_PROXY_V1_MAX ? -1 : 0;
	line = (size_t)(nl - buf) + 1;
	if (line < 8 || buf[line - 2] != '\r' || memchr(buf, '\r', line - 2) != NULL ||
	    memchr(buf, '\0', line) != NULL)
		return -1;
	out->src[0] = '\0';
	if (v1_line((const char *)buf, line - 2, out) != 0)
		return -1;
	out->version = 1;
	return (int)line;
}

/* The fixed part's bytes 13 and 14 as far as they came: version 2 with
 * LOCAL or PROXY; a family and protocol the spec names. */
static int
v2_fixed_ok(const unsigned char *buf, size_t len)
{
	unsigned fam;

	if (len > 12 && buf[12] != 0x20 && buf[12] != 0x21)
		return 0;
	if (len <= 13)
		return 1;
	fam = buf[13];
	return fam == 0x00 || fam == 0x11 || fam == 0x12 || fam == 0x21 || fam == 0x22 ||
	    fam == 0x31 || fam == 0x32;
}

static int
parse_v2(const unsigned char *buf, size_t len, struct tg_proxy_hdr *out)
{
	size_t total, alen;
	unsigned fam;

	if (memcmp(buf, v2_sig, len < 12 ? len : 12) != 0 || !v2_fixed_ok(buf, len))
		return -1;
	if (len < 16)
		return 0;
	alen = (size_t)buf[14] << 8 | buf[15];
	total = 16 + alen;
	fam = buf[13];
	if (total > TG_PROXY_V2_MAX || (fam == 0x11 && alen < 12) || (fam == 0x21 && alen < 36))
		return -1;
	if (buf[12] == 0x21 && (fam == 0x12 || fam == 0x22))
		return -1;	/* a datagram's source on a stream listener */
	if (len < total)
		return 0;
	out->version = 2;
	out->src[0] = '\0';
	out->local = buf[12] == 0x20 || (fam != 0x11 && fam != 0x21);
	if (!out->local && inet_ntop(fam == 0x11 ? AF_INET : AF_INET6, buf + 16, out->src,
	    sizeof(out->src)) == NULL)
		return -1;
	return (int)total;	/* TLVs after the addresses: skipped */
}

int
tg_http_proxy_parse(const unsigned char *buf, size_t len, struct tg_proxy_hdr *out)
{
	if (len == 0)
		return 0;
	if (buf[0] == 'P')
		return parse_v1(buf, len, out);
	if (buf[0] == 0x0D)
		return parse_v2(buf, len, out);
	return -1;
}
