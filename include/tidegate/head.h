/*
 * head.h - a strict HTTP/1.1 request head parser (RFC 9112): the request
 * line and the header fields of one request, checked before libevent's
 * lenient parser sees them. Used by the front door (frontdoor.h), which
 * frames every request a listener receives; pure, so unit tests and the
 * fuzz target drive it directly.
 */
#ifndef TIDEGATE_HEAD_H
#define TIDEGATE_HEAD_H

#include <stddef.h>
#include <stdint.h>

/** Why a head is refused; 0 is none. Stable numbers: the front door hands
 * them to the listener's handler (tg_frontdoor_refusal). */
enum tg_head_fault {
	TG_HEAD_INCOMPLETE = -1,	/* not a fault: the head has not ended yet */
	TG_HEAD_OK = 0,
	TG_HEAD_BAD_LINE,	/* request line not "method SP target SP version" */
	TG_HEAD_BAD_METHOD,	/* a method this server does not implement */
	TG_HEAD_BAD_VERSION,	/* not HTTP/1.0 or HTTP/1.1 */
	TG_HEAD_BAD_EOL,	/* a bare CR or LF: lines end in CRLF */
	TG_HEAD_BAD_NAME,	/* field name not a token, or whitespace before ':' */
	TG_HEAD_OBS_FOLD,	/* a field line starting with whitespace */
	TG_HEAD_BAD_VALUE,	/* a control character in a field value */
	TG_HEAD_DUP_LENGTH,	/* Content-Length more than once */
	TG_HEAD_BAD_LENGTH,	/* Content-Length not 1*DIGIT, or too large */
	TG_HEAD_LENGTH_AND_TE,	/* Content-Length together with Transfer-Encoding */
	TG_HEAD_BAD_TE,		/* Transfer-Encoding other than exactly "chunked" */
	TG_HEAD_NO_HOST,	/* HTTP/1.1 without Host, or Host more than once */
	TG_HEAD_RESERVED,	/* a field only the front door may write */
	TG_HEAD_TOO_LARGE,	/* head longer than the limit, or too many fields */
	TG_HEAD_BODY_TOO_LARGE,	/* Content-Length above the listener's max body */
	TG_HEAD_KEY_MISSING,	/* a body without an API key (the listener's check) */
	TG_HEAD_KEY_UNKNOWN,	/* a body with a key that is not one (same) */
	TG_HEAD_TIMEOUT,	/* the head did not arrive in time */
	TG_HEAD_BAD_TARGET,	/* a body sent to a target the listener refuses */
	TG_HEAD_NOT_FOUND,	/* a body sent to a path the listener hides */
	TG_HEAD_BAD_CHUNK,	/* a chunked body malformed after its head passed */
	TG_HEAD_BODY_NOT_ALLOWED,	/* a body on a method that has none (HEAD) */
	TG_HEAD_BAD_HOST,	/* Host not an RFC 3986 host[:port] */
	TG_HEAD_BAD_EXPECT,	/* Expect other than 100-continue (HTTP/1.1) */
	TG_HEAD_BODY_STALLED,	/* no body byte for the listener's body timeout */
	TG_HEAD_BODY_TOO_SLOW,	/* a body under the listener's minimum rate */
	TG_HEAD_UNAVAILABLE,	/* a feature cannot tell yet whether the body may be read */
	TG_HEAD_CLIENT_LIMIT,	/* through a trusted proxy: its client has
				 * max_clients_per_ip requests in flight */
	TG_HEAD_NFAULTS
};

/** The field the front door adds to the stand-in request of a refusal. */
#define TG_HEAD_REFUSAL_FIELD "Tidegate-Refusal"
/** Fields kept per head; more is TG_HEAD_TOO_LARGE. */
#define TG_HEAD_MAX_FIELDS 100

struct tg_head_field {
	const char *name;	/* borrowed from the parsed buffer, not NUL-terminated */
	size_t nlen;
	const char *value;	/* without surrounding whitespace */
	size_t vlen;
};

struct tg_head {
	const char *method;	/* all pointers borrow the parsed buffer */
	size_t mlen;
	const char *target;
	size_t tlen;
	int minor;		/* HTTP/1.<minor> */
	int line_ok;		/* the request line parsed whole, method known */
	int no_body;		/* the method carries no body (HEAD) */
	int tab;		/* a value follows a tab in its OWS: the front door
				 * writes the head again for evhttp (frontdoor.c) */
	int chunked;		/* Transfer-Encoding: chunked */
	int64_t length;		/* Content-Length, -1 when absent */
	size_t nfields;
	struct tg_head_field f[TG_HEAD_MAX_FIELDS];
};

/**
 * Parse buf[0..len), one request head ending with its empty line (CRLF
 * CRLF included). Fills *h (the caller's, borrowed; its pointers borrow buf,
 * valid while buf is unchanged) and returns TG_HEAD_OK or the first fault
 * found. Nothing is allocated.
 */
int tg_head_parse(const char *buf, size_t len, struct tg_head *h);
/**
 * Parse the head at the start of buf[0..avail), which may hold less (then
 * TG_HEAD_INCOMPLETE) or more (the body, the next request): a fault is
 * found as soon as its bytes are there. On TG_HEAD_OK *hlen is the head's
 * length, empty line included. *h as for tg_head_parse.
 */
int tg_head_scan(const char *buf, size_t avail, struct tg_head *h, size_t *hlen);
/**
 * A chunk-size line of a chunked body, line[0..len) with its CRLF
 * (borrowed; RFC 9112 section 7.1): hex digits (leading zeros and case free, at most 15
 * significant), then chunk extensions (";" name ["=" token or
 * quoted-string], with optional whitespace around), which are checked and
 * ignored. 0 and *size set, or -1.
 */
int tg_head_chunk_size(const char *line, size_t len, uint64_t *size);
/** A trailer field line, line[0..len) with its CRLF (borrowed): well-formed
 * as a header field line is (tg_head_scan). 1 or 0. */
int tg_head_field_line_ok(const char *line, size_t len);
/** The field named name (ASCII case-insensitive, borrowed), or NULL; borrowed
 * from h. */
const struct tg_head_field *tg_head_get(const struct tg_head *h, const char *name);
/** Status code answered for fault (400, 401, 408, 413, 417, 431, 501, 505). */
int tg_head_fault_status(int fault);
/** Stable error code and message for fault (static strings, borrowed). */
const char *tg_head_fault_code(int fault);
const char *tg_head_fault_message(int fault);

#endif
