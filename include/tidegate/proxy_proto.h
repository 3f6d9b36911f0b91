/*
 * proxy_proto.h - the PROXY protocol header (HAProxy's proxy-protocol.txt,
 * versions 1 and 2) that a load balancer sends ahead of a connection's
 * first byte to tell the client's address. A pure function of the bytes
 * received so far: the front door (door_conns.c, frontdoor.c) asks it on
 * each read until it says whole or malformed; unit tests and a fuzz target
 * call it directly.
 */
#ifndef TIDEGATE_PROXY_PROTO_H
#define TIDEGATE_PROXY_PROTO_H

#include <stddef.h>

#define TG_PROXY_V1_MAX 107	/* a v1 line, CRLF included (the spec's bound) */
#define TG_PROXY_V2_MAX 4096	/* a whole v2 header, TLVs included: larger is refused */
#define TG_PROXY_ADDR_LEN 48	/* an address as text, NUL included */

/** What a header says. */
struct tg_proxy_hdr {
	int version;			/* 1 or 2 */
	int local;			/* 1: no client address (v1 UNKNOWN, v2 LOCAL,
					 * v2 UNSPEC or UNIX): the peer's stands */
	char src[TG_PROXY_ADDR_LEN];	/* the client's address (inet_ntop), "" when local */
};

/**
 * Read a PROXY header at the start of buf[0..len) (borrowed; any bytes).
 * Returns the header's length (> 0; what follows is the client's own
 * bytes) with *out (the caller's) filled; 0 when buf is a prefix of a
 * header that may still turn out whole (more bytes needed; *out
 * untouched); -1 when it is not one: neither signature, a malformed v1
 * line or one without CRLF within TG_PROXY_V1_MAX bytes, a v2 header over
 * TG_PROXY_V2_MAX, of another version or command, a datagram family, or
 * addresses longer than its length. v2 TLVs are skipped unread.
 */
int tg_http_proxy_parse(const unsigned char *buf, size_t len, struct tg_proxy_hdr *out);

#endif
