/*
 * realip.h - trusted proxies and the client address they forward
 * (real_ip_from; nginx's set_real_ip_from with real_ip_recursive on): a
 * set of CIDR blocks, IPv4 and IPv6, and the walk of an X-Forwarded-For
 * value from its right end. Used by the front door (door_conns.c), which
 * decides each request's client address in one place, and by the
 * gateway's configuration check.
 */
#ifndef TIDEGATE_REALIP_H
#define TIDEGATE_REALIP_H

#include <stddef.h>

#include "tidegate/util.h"

struct tg_cidr {
	int family;			/* AF_INET or AF_INET6 */
	unsigned char addr[16];		/* network order, host bits zero */
	unsigned bits;			/* prefix length */
};

/** A set of CIDR blocks (zero-initialised: empty). */
struct tg_cidrs {
	struct tg_cidr *v;		/* owned */
	size_t n;
};

/**
 * Add text (borrowed): an address ("10.0.0.7", "::1": the one host) or a
 * block ("10.0.0.0/8", "fd00::/8"). 0, or -1 with err (s unchanged): not
 * an address inet_pton reads, a prefix over the family's bits, or set host
 * bits ("10.0.0.1/8": the block meant is named).
 */
int tg_http_cidrs_add(struct tg_cidrs *s, const char *text, struct tg_err *err);
/** Free what s (borrowed) owns; s is empty after. */
void tg_http_cidrs_cleanup(struct tg_cidrs *s);
/** 1 when addr (text, borrowed) is in s (borrowed); an IPv4-mapped IPv6
 * address counts as its IPv4 address. 0 when not, or not an address. */
int tg_http_cidrs_match(const struct tg_cidrs *s, const char *addr);
/**
 * One X-Forwarded-For field value[0..vlen) (borrowed; not NUL-terminated),
 * walked from its right end, addr[size] (the caller's) holding the address
 * the request came from so far (a trusted one): each entry in turn that is
 * an address (IPv4 or IPv6, as inet_pton reads it; empty list elements
 * skipped) becomes addr (written back by inet_ntop); the walk stops at the
 * first address not in s (it is the client's) or at an entry that is not
 * an address (addr keeps the last good one). Returns 1 when every entry
 * was a trusted address (an earlier field goes on the walk), 0 when it
 * stopped.
 */
int tg_http_realip_xff(const struct tg_cidrs *s, const char *value, size_t vlen, char *addr,
    size_t size);

#endif
