/*
 * frontdoor.h - the front door of every listener: it frames each request
 * between the accepted socket and evhttp itself (strict head parser of
 * head.h, Content-Length or chunked body), and evhttp only ever reads bytes
 * whose framing the front door decided and wrote (a chunked body in the
 * one spelling evhttp reads as it does), so that the gateway, evhttp and a
 * front proxy read each request the same way, and so that a request can be
 * refused on its head alone, before its body is read (an API key missing,
 * a body over its limit). A refused request reaches the listener's handler
 * as a stand-in without a body, in its place among pipelined requests; a
 * request whose chunked body went bad reaches it with the fault; the
 * handler answers either with the JSON error body and the connection is
 * closed. A request cut by a time limit is answered 408 by the front door.
 * The front door also decides, in one place, the client address of each
 * request (tg_frontdoor_client): the peer's, or the one a PROXY protocol
 * header gave (proxy_protocol), or, from a trusted proxy (real_ip_from),
 * the one its X-Forwarded-For names.
 * Accepted sockets get TCP_NODELAY. Used by the gateway's and the
 * emulator's listeners.
 */
#ifndef TIDEGATE_FRONTDOOR_H
#define TIDEGATE_FRONTDOOR_H

#include <stddef.h>
#include <stdint.h>

#include <event2/bufferevent.h>
#include <event2/http.h>

#include "tidegate/head.h"

struct tg_cidrs;

/** Counters of a listener's front door (the listener's, written by the
 * front door). */
struct tg_frontdoor_stats {
	uint64_t open;		/* connections open now */
	uint64_t refused_max;	/* refused: max_conns open */
	uint64_t refused_addr;	/* refused: max_conns_per_addr from that address */
	uint64_t header_timeouts, body_timeouts, idle_closed;
	uint64_t body_too_slow;	/* bodies under body_min_rate */
};

/** One decision of the front door, told to tg_frontdoor.decided (tests). */
struct tg_frontdoor_decision {
	const struct tg_head *head;	/* a head decided (borrowed, for the call);
					 * NULL for a body's end, or a head too
					 * large to parse */
	int body_end;			/* 1: the body of the last head passed ended */
	int fault;			/* 0: passed; else the TG_HEAD_* it got */
	uint64_t body;			/* body bytes passed for that head so far */
};

struct tg_frontdoor {
	size_t max_head;	/* bytes of one request head (431 above) */
	uint64_t max_body;	/* a larger Content-Length is refused with 413 */
	uint64_t max_conns;	/* open connections of the listener; 0: no limit */
	uint64_t max_conns_per_addr;	/* from one client address; 0: no limit.
					 * A trusted proxy's connections are not
					 * counted: each request on one counts,
					 * while it is in flight, under its
					 * client's address (over: 429) */
	int proxy_protocol;	/* a PROXY header (v1 or v2) opens every
				 * connection; without one, or malformed, or
				 * not whole within header_timeout_ms, the
				 * connection is closed unanswered */
	const struct tg_cidrs *real_ip_from;	/* borrowed; NULL: no proxy is
						 * trusted (no header is read) */
	int64_t header_timeout_ms;	/* a whole request head; 0: no limit */
	int64_t body_timeout_ms;	/* between two reads of a body; 0: none */
	uint64_t body_min_rate;		/* bytes/s a body must average from
					 * body_rate_grace_ms after its head on
					 * (it may take grace + size / rate in
					 * all); 0: no minimum */
	int64_t body_rate_grace_ms;
	int64_t idle_timeout_ms;	/* a keep-alive connection between requests */
	struct tg_frontdoor_stats *stats;	/* borrowed; may be NULL */
	/** Optional: the connection's bufferevent (a TLS one), made without a
	 * descriptor, as evhttp_set_bevcb's callback; NULL: a plain socket.
	 * base is borrowed; the front door takes ownership of the result. */
	struct bufferevent *(*make_bev)(struct event_base *base, void *arg);
	void *make_arg;		/* borrowed, handed to make_bev */
	/**
	 * Optional: asked for every head that announces a body, and for every
	 * head when check_bodiless is set (h borrowed, for the call only);
	 * returns 0 to let it in or a TG_HEAD_* fault to refuse it before a
	 * byte of the body is read. *limit (the caller's) comes in as max_body
	 * and may be lowered (a higher value counts as max_body): the most
	 * body bytes this request may send. A larger Content-Length is refused
	 * at once (TG_HEAD_BODY_TOO_LARGE, 413); a chunked body is counted as
	 * it passes and cut where it goes over (the same fault, answered by
	 * the handler through tg_frontdoor_refusal).
	 */
	int (*check)(const struct tg_head *h, void *arg, uint64_t *limit);
	void *arg;		/* borrowed, handed to check */
	int check_bodiless;	/* ask check for heads without a body too */
	/**
	 * Tests only (NULL in production, where it costs a test per head and
	 * per body): told each decision in order: a head passed (fault 0; its
	 * request is whole unless it announced a body) or refused, and a
	 * body's end (whole, or cut with a fault). d borrowed, for the call;
	 * decided_arg borrowed. tests/fuzz/fuzz_edge.c holds evhttp to it.
	 */
	void (*decided)(const struct tg_frontdoor_decision *d, void *decided_arg);
	void *decided_arg;
};

/** Frame every connection http (borrowed) accepts through door (borrowed: it
 * must outlive http). */
void tg_frontdoor_attach(struct evhttp *http, const struct tg_frontdoor *door);
/**
 * The close callback of a server connection (conn borrowed; cb may be
 * NULL; arg borrowed, handed to cb): the front door owns evhttp's one
 * close callback slot of the
 * connections it frames and calls cb from it. Falls back to
 * evhttp_connection_set_closecb for other connections.
 */
void tg_frontdoor_set_closecb(struct evhttp_connection *conn,
    void (*cb)(struct evhttp_connection *, void *), void *arg);
/**
 * The completion callback of a server request (req and arg borrowed): the front
 * door owns evhttp's one slot (it learns there that the connection is idle
 * again) and calls cb from it. Falls back to
 * evhttp_request_set_on_complete_cb for other requests.
 */
void tg_frontdoor_set_on_complete(struct evhttp_request *req,
    void (*cb)(struct evhttp_request *, void *), void *arg);
/** How a request's exchange ended (tg_frontdoor_set_on_end): written 1
 * with req (borrowed, for the call) once its answer is written; written 0
 * with req NULL when its connection closed first. */
typedef void (*tg_frontdoor_end_cb)(struct evhttp_request *req, int written, void *arg);
/**
 * Learn how the exchange of req (borrowed) ends, whichever way: cb(req,
 * 1, arg) once its answer is written (req's status and headers may be
 * read then, not kept), or cb(NULL, 0, arg) when the connection closes
 * before that (the client left, or was reset); exactly once, never both,
 * so arg (borrowed, handed to cb) may be freed by cb. A slot of its own:
 * the close callback (tg_frontdoor_set_closecb) and the completion
 * callback (tg_frontdoor_set_on_complete) are neither used nor disturbed.
 * One per request: a later call replaces cb and arg. Only for a request
 * that passed tg_frontdoor_refusal on a framed listener and whose answer
 * is not yet written: returns 0; otherwise -1, and cb is never called (what arg
 * points to stays the caller's).
 */
int tg_frontdoor_set_on_end(struct evhttp_request *req, tg_frontdoor_end_cb cb, void *arg);
/**
 * Called first by every handler of a framed listener (req borrowed): the
 * request is in flight from now until its answer is written (no time limit
 * of the front door's meanwhile). Returns the fault of a refused request's
 * stand-in, the fault of a request whose body went bad after its head had
 * passed (a malformed chunk, a chunked body over its limit: the front door
 * ended the body early, so what evhttp read of it must not be used), or 0
 * for a request that passed the front door whole.
 */
int tg_frontdoor_refusal(struct evhttp_request *req);
/**
 * The client address of req (borrowed) into out[size] (the caller's): on
 * a framed listener the front door's decision, made once per request when
 * its handler takes it (tg_frontdoor_refusal; asked before, the
 * connection's address): the peer's, or the PROXY header's; from a peer in
 * real_ip_from, the address X-Forwarded-For names, walked from the right
 * past trusted proxies. Elsewhere evhttp's peer. "" when unknown.
 */
void tg_frontdoor_client(struct evhttp_request *req, char *out, size_t size);
/** The address conn (borrowed) speaks for, into out[size]: its peer's, or
 * the PROXY header's (the hop an X-Forwarded-For sent on names). */
void tg_frontdoor_conn_addr(struct evhttp_connection *conn, char *out, size_t size);
/** Mark the reply to req (borrowed) as the connection's last: the front
 * door discards what else the client sends. */
void tg_frontdoor_close_after(struct evhttp_request *req);
/** Answer a refused request with the JSON error body of fault and close the
 * connection; req is handed back to libevent (as by tg_reply_error). */
void tg_frontdoor_reply(struct evhttp_request *req, int fault);

#endif
