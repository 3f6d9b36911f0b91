/*
 * upstream.h - the gateway's HTTP client side: one struct tg_upstream per
 * vendor origin (plus an optional fallback origin used when the first
 * cannot be connected to), each with a keep-alive connection pool (evhttp
 * connections carry one request at a time, so the pool keeps an idle list),
 * TLS through bufferevent_openssl with certificate and host verification,
 * evdns for names, TCP_NODELAY, connect/read timeouts, one retry on a fresh
 * connection for idempotent requests that failed before any response byte,
 * and streaming of response bodies with backpressure (pause/resume).
 *
 * Used by the proxy path (streaming), the token cache and the poll
 * multiplexer (tg_upstream_fetch, buffered).
 */
#ifndef TIDEGATE_UPSTREAM_H
#define TIDEGATE_UPSTREAM_H

#include <stddef.h>
#include <stdint.h>

#include <event2/http.h>

#include "tidegate/util.h"

struct event_base;
struct evdns_base;
struct evbuffer;
struct evkeyvalq;

struct tg_upstream_opts {
	int64_t connect_timeout_ms;	/* per connection attempt */
	int64_t read_timeout_ms;	/* idle time while waiting for response bytes */
	size_t max_conns;		/* busy + idle connections per origin */
	size_t max_idle;		/* idle connections kept per origin */
	int tls_verify;			/* verify certificate chain and host name */
	const char *ca_file;		/* PEM bundle; NULL: system default paths */
};

enum tg_up_error {
	TG_UP_OK = 0,
	TG_UP_CONNECT,		/* no connection could be made: nothing was sent */
	TG_UP_TIMEOUT,		/* connect or read timeout */
	TG_UP_RESET,		/* connection failed after the request was (partly) sent */
	TG_UP_PROTOCOL,		/* malformed response */
	TG_UP_TOO_LARGE,	/* tg_upstream_fetch: body over its max */
};

struct tg_upstream;
struct tg_up_req;

struct tg_up_cbs {
	/** Response head arrived; headers are borrowed until on_done returns. */
	void (*on_head)(struct tg_up_req *r, int status, const struct evkeyvalq *headers,
	    void *arg);
	/** Body bytes are in buf: move or drain what you consume. */
	void (*on_body)(struct tg_up_req *r, struct evbuffer *buf, void *arg);
	/** Exactly once per request unless it was cancelled; r is freed after it returns. */
	void (*on_done)(struct tg_up_req *r, enum tg_up_error err, void *arg);
};

/**
 * url: "http://host:port[/base]" or "https://…"; fallback_url may be NULL.
 * opts is copied. Returns NULL with err for a bad URL or TLS setup failure.
 */
struct tg_upstream *tg_upstream_new(struct event_base *base, struct evdns_base *dns,
    const char *url, const char *fallback_url, const struct tg_upstream_opts *opts,
    struct tg_err *err);
/** Frees the pool; requests still in flight are cancelled without callbacks. */
void tg_upstream_free(struct tg_upstream *u);
/** Path prefix of the primary URL ("" or "/base"), borrowed. */
const char *tg_upstream_base_path(const struct tg_upstream *u);

/**
 * Send method uri (path and query, already including the base path) with
 * headers (copied; Host is set by the pool) and body (borrowed by reference:
 * it must stay alive and unchanged until on_done; NULL for none). Hop-by-hop
 * headers in headers are the caller's responsibility. Returns the request.
 */
struct tg_up_req *tg_upstream_send(struct tg_upstream *u, enum evhttp_cmd_type method,
    const char *uri, const struct evkeyvalq *headers, struct evbuffer *body,
    const struct tg_up_cbs *cbs, void *arg);
/** Stop reading the response body (the sink is full) / start again. */
void tg_up_req_pause(struct tg_up_req *r);
void tg_up_req_resume(struct tg_up_req *r);
/** Abort (the client went away): no callback is called after this. */
void tg_up_req_cancel(struct tg_up_req *r);
/** "primary" or "fallback": which origin answered (valid from on_head). */
const char *tg_up_req_origin(const struct tg_up_req *r);

typedef void (*tg_up_fetch_cb)(int status, const struct evkeyvalq *headers,
    struct evbuffer *body, enum tg_up_error err, void *arg);
/**
 * Buffered exchange for small bodies (logins, polls): cb gets the whole
 * body (borrowed) or an error; at most max_body bytes (TG_UP_TOO_LARGE).
 */
struct tg_up_req *tg_upstream_fetch(struct tg_upstream *u, enum evhttp_cmd_type method,
    const char *uri, const struct evkeyvalq *headers, struct evbuffer *body, size_t max_body,
    tg_up_fetch_cb cb, void *arg);

struct tg_upstream_stats {
	size_t idle, busy, queued;
	unsigned long long requests, retries, failovers, connect_errors;
};
void tg_upstream_get_stats(const struct tg_upstream *u, struct tg_upstream_stats *st);
const char *tg_up_error_str(enum tg_up_error err);

#endif
