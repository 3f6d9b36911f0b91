/*
 * trace.c - who a vendor call is for: the caller's request id and W3C
 * Trace Context (traceparent, tracestate) carried onto every call the
 * gateway makes for a client (vendor.c sets the headers on each attempt,
 * a new span id each time; also on a vendor login a caller waits for),
 * with X-Forwarded-For and the gateway's User-Agent. A valid incoming
 * traceparent is continued (its trace id), anything else starts a new
 * trace (OpenSSL RAND through ids.c); span ids for the exported spans
 * (spans.c). Called by proxy.c and admin_log.c
 * (a request's ids), vendor.c, the access log, and features that make
 * calls for a caller (polls, webhook deliveries).
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/crypto.h"
#include "tidegate/frontdoor.h"
#include "tidegate/hblock.h"
#include "tidegate/http.h"
#include "tidegate/ids.h"
#include "version.h"
#include "gw.h"

/* n random bytes as hex, from a pool refilled 4 KiB at a time: one
 * RAND_bytes call serves a few hundred ids, as ids.c does for request
 * ids (every request and every vendor call draws one). */
static void
pooled_hex(char *out, size_t n)
{
	static uint8_t pool[4096];
	static size_t used = sizeof(pool);

	if (used + n > sizeof(pool)) {
		tg_id_random(pool, sizeof(pool));
		used = 0;
	}
	tg_hex(pool + used, n, out);
	explicit_bzero(pool + used, n);
	used += n;
}

/* The pool's digits are all hex: only an id of zeros (invalid) is drawn
 * again. */
void
gw_trace_new_id(char id[33])
{
	do
		pooled_hex(id, 16);
	while (strspn(id, "0") == 32);
}

void
gw_trace_new_span(char span[17])
{
	do
		pooled_hex(span, 8);
	while (strspn(span, "0") == 16);
}

void
gw_trace_parent(const char *trace_id, int sampled, char out[56], char span[17])
{
	char s[17];

	gw_trace_new_span(s);
	memcpy(out, "00-", 3);		/* 00-<32>-<16>-01: the exact lengths, no printf */
	memcpy(out + 3, trace_id, 32);
	out[35] = '-';
	memcpy(out + 36, s, 16);
	memcpy(out + 52, sampled ? "-01" : "-00", 4);
	if (span != NULL)
		memcpy(span, s, 17);
}

int
gw_req_ids(struct evhttp_request *req, char id[TG_UUID_LEN], char trace_id[33])
{
	const char *rid = tg_http_header(req, "X-Request-Id");
	const char *tp = tg_http_header(req, "traceparent");
	size_t n = rid != NULL ? strlen(rid) : 0;

	if (rid != NULL && tg_http_request_id_valid(rid, n)) {
		n = n < TG_UUID_LEN - 1 ? n : TG_UUID_LEN - 1;	/* as long as the id kept */
		memcpy(id, rid, n);
		id[n] = '\0';
	} else
		tg_id_uuid4(id);
	if (!tg_id_trace_of(tp, trace_id)) {
		gw_trace_new_id(trace_id);
		return -1;
	}
	/* the flags' low bit: sampled (two lower-case hex digits, checked) */
	return (tp[54] <= '9' ? tp[54] - '0' : tp[54] - 'a' + 10) & 1;
}

const char *
gw_user_agent(void)
{
	return "tidegate/" TG_VERSION;
}

/* src (borrowed) into dst of n bytes when it fits, else "" (no printf:
 * this runs for every vendor call). */
static void
copy_in(char *dst, size_t n, const char *src)
{
	size_t len = strlen(src);

	if (len >= n)
		len = 0;
	memcpy(dst, src, len);
	dst[len] = '\0';
}

void
gw_trace_of_req(struct gw_trace *t, const struct gw_req *r)
{
	const char *st = r->req != NULL ? tg_http_header(r->req, "tracestate") : NULL;
	const char *prev = r->req != NULL ? tg_http_header(r->req, "X-Forwarded-For") : NULL;
	char host[48] = "";

	/* every string is written below or emptied: no 800-byte memset */
	t->state[0] = '\0';
	copy_in(t->rid, sizeof(t->rid), r->id);
	memcpy(t->trace_id, r->trace_id, sizeof(t->trace_id));
	memcpy(t->span_id, r->span_id, sizeof(t->span_id));
	t->unsampled = !r->sampled;
	if (st != NULL)
		copy_in(t->state, sizeof(t->state), st);
	if (r->conn != NULL)	/* the hop: the peer, or its PROXY header's address */
		tg_frontdoor_conn_addr(r->conn, host, sizeof(host));
	if (prev != NULL && strlen(prev) + 70 < sizeof(t->forwarded))
		snprintf(t->forwarded, sizeof(t->forwarded), "%s, %s", prev,
		    *host ? host : "unknown");
	else
		copy_in(t->forwarded, sizeof(t->forwarded), *host ? host : "unknown");
}

/* The names gw_trace_headers_span sets, as bits. */
enum { H_TP = 1, H_TS = 2, H_RID = 4, H_XFF = 8, H_UA = 16 };

/* Which of them out already holds, in one walk of the list (a relayed
 * request's holds the client's headers): a first letter tells most names
 * apart, where a lookup per name would compare every header five times. */
static unsigned
present(const struct evkeyvalq *out)
{
	const struct evkeyval *h;
	unsigned bits = 0;

	TAILQ_FOREACH(h, out, next) {
		switch (h->key[0] | 0x20) {
		case 't':
			bits |= strcasecmp(h->key, "traceparent") == 0 ? H_TP :
			    strcasecmp(h->key, "tracestate") == 0 ? H_TS : 0;
			break;
		case 'x':
			bits |= strcasecmp(h->key, "X-Request-Id") == 0 ? H_RID :
			    strcasecmp(h->key, "X-Forwarded-For") == 0 ? H_XFF : 0;
			break;
		case 'u':
			bits |= strcasecmp(h->key, "User-Agent") == 0 ? H_UA : 0;
			break;
		}
	}
	return bits;
}

/* name set to value: every copy out held is removed first (bits say). */
static void
put(struct evkeyvalq *out, unsigned bits, unsigned bit, const char *name, const char *value)
{
	if (bits & bit)
		while (evhttp_remove_header(out, name) == 0)
			;
	if (value != NULL)
		tg_header_add(out, name, value);
}

void
gw_trace_headers(const struct gw_trace *t, struct evkeyvalq *out)
{
	gw_trace_headers_span(t, out, NULL);
}

void
gw_trace_headers_span(const struct gw_trace *t, struct evkeyvalq *out, char span[17])
{
	char tp[56], id[33];
	unsigned bits;

	if (t != NULL && t->trace_id[0] != '\0') {
		gw_trace_parent(t->trace_id, !t->unsampled, tp, span);
	} else {
		gw_trace_new_id(id);
		gw_trace_parent(id, 1, tp, span);
	}
	bits = present(out);
	put(out, bits, H_TP, "traceparent", tp);
	put(out, bits, H_TS, "tracestate", t != NULL && t->state[0] != '\0' ? t->state : NULL);
	if (t != NULL && t->rid[0] != '\0')
		put(out, bits, H_RID, "X-Request-Id", t->rid);
	if (t != NULL && t->forwarded[0] != '\0')
		put(out, bits, H_XFF, "X-Forwarded-For", t->forwarded);
	if (!(bits & H_UA))
		tg_header_add(out, "User-Agent", gw_user_agent());
}
