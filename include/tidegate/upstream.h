/*
 * upstream.h - the gateway's HTTP client side: one struct tg_upstream per
 * vendor origin (plus an optional fallback origin used when the first
 * cannot be connected to), each with a keep-alive connection pool (evhttp
 * connections carry one request at a time, so the pool keeps an idle list),
 * TLS through bufferevent_openssl with certificate and host verification,
 * evdns for names, TCP_NODELAY, connect/read timeouts, one retry on a fresh
 * connection for idempotent requests that failed before any response byte,
 * streaming of response bodies with backpressure (pause/resume), a cap
 * on the connections one owner (a caller, by its tag) may hold, and a
 * deadline on the wait in the queue.
 *
 * Used by the proxy path (streaming), the token cache and the poll
 * multiplexer (tg_upstream_fetch, buffered), and webhook deliveries (file
 * bodies, sockets pinned to an address the egress policy checked).
 *
 * Callbacks never run from inside tg_upstream_send/fetch: requests are
 * started from the event loop. tg_upstream_free must not be called from
 * inside one of the upstream's callbacks. The process must ignore SIGPIPE
 * (upstreams close connections while we write).
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

/*
 * A zero number takes its default (connect 10 s, read 30 s, max_conns 32,
 * max_idle = max_conns, max_conns_per_owner = half of max_conns but at
 * least 1, queue timeout 10 s; a negative queue timeout: no deadline).
 * tls_verify is used as given (0 turns verification off, logged at warn);
 * passing opts NULL means all defaults, verify on.
 */
struct tg_upstream_opts {
	int64_t connect_timeout_ms;	/* per connection attempt: DNS, TCP and TLS handshake */
	int64_t read_timeout_ms;	/* no progress (bytes sent or received) for this long;
					 * also how long an unused idle connection is kept */
	size_t max_conns;		/* busy + idle connections per origin */
	size_t max_idle;		/* idle connections kept per origin */
	int tls_verify;			/* verify certificate chain and host name */
	const char *ca_file;		/* PEM bundle (copied); NULL: system default paths */
	size_t max_conns_per_owner;	/* connections of one origin one owner may hold at
					 * once (tg_up_req_set_owner); capped at max_conns */
	int64_t queue_timeout_ms;	/* longest wait in the queue for a connection */
	/* Two origins (a fallback_url): outlier ejection and failover. */
	int eject_after;		/* consecutive failures that eject an origin
					 * (0: 3; negative: never) */
	int64_t eject_base_ms;		/* first ejection (0: 30 s), doubled by each
					 * repeat up to eject_max_ms (0: 5 min) */
	int64_t eject_max_ms;
	const char *probe_path;		/* GET to bring an ejected origin back (copied;
					 * NULL: "/"): any answer below 500 */
	int64_t probe_interval_ms;	/* between probes (0: 5 s) */
	int retry_budget_pct;		/* retries and failovers in flight at most this
					 * share of the requests in flight (0: 20) */
	int retry_budget_min;		/* ... or this many (0: 3) */
	int64_t retry_after_max_ms;	/* a 503's Retry-After keeps an origin out at
					 * most this long (0: 60 s) */
};

enum tg_up_error {
	TG_UP_OK = 0,
	TG_UP_CONNECT,		/* no connection could be made (refused, DNS):
				 * nothing was sent */
	TG_UP_TIMEOUT,		/* connect or read timeout */
	TG_UP_RESET,		/* connection failed after the request was (partly) sent */
	TG_UP_PROTOCOL,		/* malformed response */
	TG_UP_TOO_LARGE,	/* tg_upstream_fetch: body over its max */
	TG_UP_BAD_TARGET,	/* uri holds a CTL, space or non-ASCII byte: refused,
				 * nothing sent */
	TG_UP_BUSY,		/* no connection came free within the queue timeout
				 * (every one busy, or the owner at its cap): nothing
				 * was sent */
	TG_UP_TLS,		/* the TLS handshake failed or the vendor's
				 * certificate was refused (chain, host name, IP
				 * address): nothing was sent; tg_up_req_detail
				 * names the reason */
	TG_UP_DOWN,		/* every origin is out of service (ejected, or
				 * holding a Retry-After): nothing was sent;
				 * tg_up_req_detail names each and its last
				 * error, tg_up_req_retry_after says when to try */
};

struct tg_upstream;
struct tg_up_req;

struct tg_up_cbs {
	/** Response head arrived; headers are borrowed for the callback only
	 * (libevent's list: it frees them with its request). */
	void (*on_head)(struct tg_up_req *r, int status, const struct evkeyvalq *headers,
	    void *arg);
	/**
	 * Body bytes are in buf (owned by the request): move or drain what you
	 * consume. Bytes left are offered again with the next piece; leave
	 * bytes only together with tg_up_req_pause, or they may be dropped at
	 * the end.
	 */
	void (*on_body)(struct tg_up_req *r, struct evbuffer *buf, void *arg);
	/** Exactly once per request unless it was cancelled; r is freed after it returns. */
	void (*on_done)(struct tg_up_req *r, enum tg_up_error err, void *arg);
};

/**
 * url: "http://host:port[/base]" or "https://…"; fallback_url may be NULL.
 * url, fallback_url and opts are borrowed (copied); base and dns are
 * borrowed and must outlive the upstream. Returns NULL with err for a bad
 * URL or TLS setup failure; else the caller owns it: tg_upstream_free().
 */
struct tg_upstream *tg_upstream_new(struct event_base *base, struct evdns_base *dns,
    const char *url, const char *fallback_url, const struct tg_upstream_opts *opts,
    struct tg_err *err);
/**
 * Connect the primary origin's sockets to addr, an IP literal (copied),
 * instead of resolving the URL's host: Host, SNI and the certificate check
 * keep the URL's host, so a caller can check an address and then use
 * exactly that one. Call before the first request. -1 with err when addr
 * is not an IP address. u is borrowed.
 */
int tg_upstream_set_connect_addr(struct tg_upstream *u, const char *addr, struct tg_err *err);
/** Takes ownership of u and frees it with its pool; requests still in flight
 * are cancelled (and freed) without callbacks. */
void tg_upstream_free(struct tg_upstream *u);
/** Path prefix of the primary URL ("" or "/base"), borrowed. */
const char *tg_upstream_base_path(const struct tg_upstream *u);

/**
 * Send method uri (path and query, already including the base path) with
 * headers (borrowed, copied; Host and Content-Length are set by the pool), uri
 * (borrowed, copied), and body
 * (borrowed by reference: it must stay alive and unchanged until on_done;
 * NULL for none). Hop-by-hop headers in headers are the caller's
 * responsibility. u is borrowed; cbs is copied, arg borrowed. Returns the
 * request, owned by the pool (borrowed): valid until on_done returns or
 * tg_up_req_cancel.
 *
 * With two origins, a request goes to the primary while it is in
 * service, else to the fallback (the primary's base path swapped for the
 * fallback's); with both out, it fails at once with TG_UP_DOWN. An attempt
 * that fails is tried once on the other origin when that one is in
 * service and the retry budget allows: any request that was not sent
 * (connect, TLS), and an idempotent one (GET, HEAD, PUT, DELETE, OPTIONS)
 * after a reset, a timeout or a 502/503/504 answer (the answer is then
 * dropped unseen). A 503 with Retry-After keeps its origin out that long;
 * a 429 is the caller's. eject_after consecutive failures take an origin
 * out of service for eject_base_ms, doubling with each repeat; once that
 * has passed, a probe (GET probe_path, every probe_interval_ms) that gets
 * any answer below 500 brings it back. With one origin nothing is ejected,
 * and an idempotent request (or one not sent) is retried once on a fresh
 * connection after a reset; timeouts and rejected certificates are not.
 * A uri holding a CTL, space or non-ASCII byte is never sent: on_done
 * gets TG_UP_BAD_TARGET.
 *
 * Requests wait in the queue while the origin holds max_conns connections
 * or while their owner holds max_conns_per_owner of them; the oldest
 * request whose owner is under its cap goes first. One that waited
 * queue_timeout gets TG_UP_BUSY (nothing sent; tg_up_req_detail says
 * which limit held it back).
 */
struct tg_up_req *tg_upstream_send(struct tg_upstream *u, enum evhttp_cmd_type method,
    const char *uri, const struct evkeyvalq *headers, struct evbuffer *body,
    const struct tg_up_cbs *cbs, void *arg);
/**
 * tg_upstream_send with the body read from bytes [0, len) of the regular
 * file fd (borrowed: it must stay open and unchanged until on_done or the
 * cancel). Every attempt adds the file afresh (evbuffer_add_file_segment:
 * mapped, never copied into memory), because libevent cannot reference a
 * buffer holding file segments. NULL when the file cannot be used; no
 * callback is called then.
 */
struct tg_up_req *tg_upstream_send_file(struct tg_upstream *u, enum evhttp_cmd_type method,
    const char *uri, const struct evkeyvalq *headers, int fd, int64_t len,
    const struct tg_up_cbs *cbs, void *arg);
/**
 * Stop reading the response body (the sink is full) / start again. Safe
 * from inside on_head/on_body/on_done and after the body is complete; bytes
 * already read wait in the request and come with the next on_body after
 * resume. While paused the read timeout does not run.
 */
void tg_up_req_pause(struct tg_up_req *r);	/* r borrowed */
void tg_up_req_resume(struct tg_up_req *r);
/**
 * Abort (the client went away): no callback is called after this, r is
 * freed, the connection is closed (never reused half-read). Safe from
 * inside the request's callbacks; a no-op inside on_done.
 */
void tg_up_req_cancel(struct tg_up_req *r);
/**
 * Tag r (borrowed) with the owner its connection counts against: owner
 * (copied) names a caller, e.g. an API key. Call right after send, before
 * the loop runs. Untagged requests (the default, or owner NULL) belong to
 * the upstream's own user: they wait in the same FIFO but are never held
 * back by the per-owner cap. Tags are kept, with their statistics, for the
 * upstream's life: take them from a bounded set.
 */
void tg_up_req_set_owner(struct tg_up_req *r, const char *owner);
/** "primary" or "fallback": which origin answered (valid from on_head);
 * static, borrowed; r is borrowed. */
const char *tg_up_req_origin(const struct tg_up_req *r);
/** Why r went to the fallback, or was tried again ("connect", "reset",
 * "timeout", "tls", "502", "503", "504", "ejected": the primary was out of
 * service), or NULL (static, borrowed; r borrowed). */
const char *tg_up_req_why(const struct tg_up_req *r);
/** With TG_UP_DOWN: seconds until an origin may be in service again
 * (at least 1); else 0. r borrowed. */
int tg_up_req_retry_after(const struct tg_up_req *r);
/**
 * The request headers r will send (borrowed): a caller may add to them
 * right after tg_upstream_send returns (the request starts from the event
 * loop), instead of building a list for send to copy.
 */
struct evkeyvalq *tg_up_req_headers(struct tg_up_req *r);
/** Why the request failed, in words for logs and error bodies (borrowed,
 * valid in on_done; "" on success). */
const char *tg_up_req_detail(const struct tg_up_req *r);
/** Answered busy at once because the vendor's budget (a pause it asked
 * for) holds calls back past its queue deadline: for how much longer, ms;
 * else 0 (r borrowed). */
int64_t tg_up_req_held_ms(const struct tg_up_req *r);

typedef void (*tg_up_fetch_cb)(int status, const struct evkeyvalq *headers,
    struct evbuffer *body, enum tg_up_error err, void *arg);
/**
 * Buffered exchange for small bodies (logins, polls): cb gets the whole
 * body (borrowed) or an error; at most max_body bytes (TG_UP_TOO_LARGE).
 * cb is called exactly once unless the request is cancelled; status and
 * headers are 0/NULL when no response head arrived, body is NULL on any
 * error. All three are borrowed until cb returns. Pointers as for
 * tg_upstream_send (body borrowed until cb; the request is freed after cb).
 */
struct tg_up_req *tg_upstream_fetch(struct tg_upstream *u, enum evhttp_cmd_type method,
    const char *uri, const struct evkeyvalq *headers, struct evbuffer *body, size_t max_body,
    tg_up_fetch_cb cb, void *arg);

/* idle/busy/queued: now, both origins; the rest count since _new:
 * requests sent, retries, failovers to the fallback, attempts that
 * failed before a connection was up (connect_errors), and requests failed
 * with TG_UP_BUSY (queue_timeouts). */
struct tg_upstream_stats {
	size_t idle, busy, queued;
	unsigned long long requests, retries, failovers, connect_errors, queue_timeouts;
	unsigned long long down;	/* requests failed with TG_UP_DOWN */
	unsigned long long reads;	/* reads that brought answer bytes in: one
					 * per socket read on plain connections (a
					 * large answer is read up to 256 KB at a
					 * time), per TLS read on TLS ones */
};

/* Reasons of failovers and retries, in tg_upstream_origin_stats. */
enum tg_up_why { TG_UP_WHY_CONNECT, TG_UP_WHY_RESET, TG_UP_WHY_TIMEOUT, TG_UP_WHY_TLS,
	TG_UP_WHY_502, TG_UP_WHY_503, TG_UP_WHY_504, TG_UP_WHY_EJECTED, TG_UP_NWHY };
/** Name of a reason (static, borrowed). */
const char *tg_up_why_str(enum tg_up_why w);

/* One origin's health: now, and counts since _new. */
/* Buckets of the vendor latency histogram (tg_upstream_origin_stats). */
#define TG_UP_LAT_NB 14
/** The bucket of a latency of us microseconds: the first bound >= us, or
 * TG_UP_LAT_NB above the last. */
int tg_upstream_lat_bucket(int64_t us);
/** Upper bound of bucket i in seconds (0 for i out of range). */
double tg_upstream_lat_le(int i);

struct tg_upstream_origin_stats {
	const char *name;		/* "primary" / "fallback" (static) */
	const char *host;		/* host[:port] (borrowed from u) */
	int in_service;			/* 0: ejected or holding a Retry-After */
	int64_t out_ms;			/* while out: ms until it may come back */
	int fails;			/* consecutive failures now */
	const char *last_error;		/* borrowed; "" when none */
	unsigned long long ejections, probes, probe_failures;
	unsigned long long failovers[TG_UP_NWHY];	/* away from this origin, by reason */
	unsigned long long retries[TG_UP_NWHY];		/* again on this origin, by reason */
	/* vendor attempts by latency (send to response head, or to the
	 * failure), not cumulative: lat[i] for bound i, lat[TG_UP_LAT_NB] above
	 * the last; probes not counted */
	unsigned long long lat[TG_UP_LAT_NB + 1];
	unsigned long long lat_sum_us;
};
/** Origin i (0 primary, 1 fallback) of u into st (borrowed): 0, or -1 when
 * u has no such origin. */
int tg_upstream_origin_stats(const struct tg_upstream *u, int i,
    struct tg_upstream_origin_stats *st);
/** st is filled (borrowed; u borrowed). */
void tg_upstream_get_stats(const struct tg_upstream *u, struct tg_upstream_stats *st);

/* One owner's share: connections held and requests queued now (both
 * origins); since _new, requests that were next in line for their owner
 * but passed over because it held its cap of connections (waits), and
 * requests failed with TG_UP_BUSY (timeouts). */
struct tg_upstream_owner_stats {
	const char *owner;	/* borrowed; NULL: untagged requests */
	size_t busy, queued;
	unsigned long long waits, timeouts;
};
typedef void (*tg_upstream_owner_cb)(const struct tg_upstream_owner_stats *st, void *arg);
/** cb once per owner seen since _new, untagged first (st borrowed for the
 * call; u and arg borrowed). */
void tg_upstream_foreach_owner(const struct tg_upstream *u, tg_upstream_owner_cb cb,
    void *arg);
/** Name of err (static, borrowed). */
const char *tg_up_error_str(enum tg_up_error err);

/*
 * Priority classes of the queue and a gate in front of the vendor. The
 * queue starts the oldest waiting request of the first class that has one
 * (then owner caps as above); urgent requests (logins; the default) never
 * pass the gate, every other class asks it before it is started.
 */
enum tg_up_class {
	TG_UP_CLASS_URGENT = 0,	/* logins: first, never held back by the gate */
	TG_UP_CLASS_POLL,	/* the gateway's polls for coalesced callers */
	TG_UP_CLASS_READ,	/* callers' own reads */
	TG_UP_CLASS_CREATE,	/* callers' submissions */
	TG_UP_NCLASS
};
/** Name of a class (static, borrowed). */
const char *tg_up_class_str(enum tg_up_class k);
/** Set r's class (r borrowed): right after send, like tg_up_req_set_owner. */
void tg_up_req_set_class(struct tg_up_req *r, enum tg_up_class k);
/** tg_up_req_set_owner and tg_up_req_set_class in one step (r borrowed,
 * owner copied). */
void tg_up_req_set_owner_class(struct tg_up_req *r, const char *owner, enum tg_up_class k);

/*
 * The gate (a vendor budget): take asks for one request of class k,
 * queued since queued_ms (tg_clock_mono_ms), to start: 1 when it may (it then holds what it took until put), else 0
 * with *wait_ms the time after which to ask again (-1: until
 * tg_upstream_gate_kick). A refusal of class k refuses every later class
 * too. put hands back what take gave: unused 1 when nothing was sent.
 * Both run on the loop, never re-entering the upstream.
 */
struct tg_up_gate {
	int (*take)(void *arg, enum tg_up_class k, int64_t queued_ms, int64_t *wait_ms);
	void (*put)(void *arg, enum tg_up_class k, int unused);
	void *arg;
};
/** Put gate (copied; its arg borrowed, outliving u) in front of u, or
 * none (NULL). u borrowed. */
void tg_upstream_set_gate(struct tg_upstream *u, const struct tg_up_gate *gate);
/** The gate may admit again: look at the queue (u borrowed). */
void tg_upstream_gate_kick(struct tg_upstream *u);
/* Per class, since _new: requests the gate held back (queued while it
 * refused; counted once each, when they start or time out), and requests
 * failed with TG_UP_BUSY. */
struct tg_upstream_class_stats {
	unsigned long long gate_waits[TG_UP_NCLASS];
	unsigned long long timeouts[TG_UP_NCLASS];
	size_t queued[TG_UP_NCLASS];
};
/** st filled (borrowed; u borrowed). */
void tg_upstream_class_stats(const struct tg_upstream *u, struct tg_upstream_class_stats *st);

#endif
