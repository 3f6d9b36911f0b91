/*
 * ids.h - identifiers from OpenSSL's RAND: UUIDv4 for correlation and
 * request ids (from a pooled RAND_bytes), hex strings for opaque tokens;
 * the W3C traceparent parser.
 * Not for use across fork().
 */
#ifndef TIDEGATE_IDS_H
#define TIDEGATE_IDS_H

#include <stddef.h>

#define TG_UUID_LEN 37
/** Random RFC 4122 version 4 UUID, lower-case, NUL-terminated, into out (borrowed). */
void tg_id_uuid4(char out[TG_UUID_LEN]);
/** nbytes random bytes as 2*nbytes hex characters plus NUL, into out (borrowed). */
void tg_id_hex(char *out, size_t nbytes);
/** Fill buf (borrowed) with cryptographically strong random bytes (aborts on failure). */
void tg_id_random(void *buf, size_t n);
/** 1 when s[0..n) (borrowed) is lower-case hex digits, not all zeros. */
int tg_id_hex_ok(const char *s, size_t n);
/**
 * 1 if tp (borrowed, may be NULL) is a W3C version-00 traceparent whose
 * ids are hex and not all zeros: its trace id into id (borrowed); else 0
 * and id "".
 */
int tg_id_trace_of(const char *tp, char id[33]);

#endif
