/*
 * ids.h - identifiers from OpenSSL's RAND: UUIDv4 for correlation and
 * request ids (from a pooled RAND_bytes), hex strings for opaque tokens;
 * the trace id a traceparent names, for log lines.
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
/**
 * The trace id of traceparent tp (borrowed, may be NULL) into id (borrowed):
 * 1 when tp has version 00's layout (00-<32>-<16>-<2>), else 0 and id "".
 * Only the layout is checked: for naming a trace the gateway sent in a log
 * line, not for accepting a caller's.
 */
int tg_id_trace_of(const char *tp, char id[33]);

#endif
