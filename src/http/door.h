/*
 * door.h - what the two halves of the front door share (private to
 * src/http): frontdoor.c frames the bytes of a connection, door_conns.c
 * keeps the connections themselves (slots by descriptor, limits, timeouts,
 * the close, completion and end callbacks it owns).
 */
#ifndef TIDEGATE_DOOR_H
#define TIDEGATE_DOOR_H

#include <stdint.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>

#include "tidegate/frontdoor.h"
#include "tidegate/proxy_proto.h"

enum { ST_HEAD, ST_BODY, ST_CHUNK_SIZE, ST_CHUNK_DATA, ST_CHUNK_END, ST_TRAILER, ST_DISCARD,
	ST_PROXY };

/* The front door's state of one live connection, found by its socket. */
struct conn {
	struct bufferevent *bev;		/* NULL: the slot is free */
	struct evhttp_connection *evcon;	/* evhttp's connection on it */
	const struct tg_frontdoor *door;	/* borrowed from the listener */
	struct evbuffer *hold;			/* received, not yet passed on */
	int st;
	uint64_t left;				/* bytes left of a body or chunk;
						 * in a trailer, its bytes so far */
	uint64_t limit;				/* body bytes the request in framing
						 * may still send (chunked) */
	uint64_t body;				/* its body bytes passed so far */
	int fault;				/* TG_HEAD_* of request fault_at: a
						 * refusal, or its body went bad */
	uint64_t fault_at;			/* 1-based, in the order passed */
	uint64_t delivered;			/* requests handlers have taken */
	int busy;				/* inside on_input: ignore our own moves */
	int inflight;				/* a request handed to the handler,
						 * its answer not yet written */
	uint64_t requests;			/* heads passed on */
	int64_t since;				/* ms: start of the head being read,
						 * last body bytes, or idle since */
	int64_t rate_since;			/* ms: the body's rate counts from */
	int64_t read_at;			/* ms: the clock read once per read of
						 * the client's bytes (tg_door_on_input) */
	uint64_t rate_base;			/* its bytes received by then */
	int64_t closing_at;			/* ms: an answer of the front door's
						 * own is being written; cut then */
	char addr[48];				/* the peer's address, or the PROXY
						 * header's ("" unknown) */
	int counted;				/* counted under addr (per_addr) */
	int trusted;				/* addr is in real_ip_from */
	char client[48];			/* trusted: the request in flight's
						 * client (X-Forwarded-For) */
	int client_counted;			/* counted under client */
	int client_fault;			/* TG_HEAD_CLIENT_LIMIT for it, or 0 */
	void (*user_cb)(struct evhttp_connection *, void *);
	void *user_arg;
	void (*done_cb)(struct evhttp_request *, void *);
	void *done_arg;
	tg_frontdoor_end_cb end_cb;		/* the request in flight's end */
	void *end_arg;
};

/** Frame the new bytes of a connection's input buffer (an evbuffer
 * callback; arg is the struct conn, borrowed). */
void tg_door_on_input(struct evbuffer *in, const struct evbuffer_cb_info *info, void *arg);
/** A handler took req (borrowed): its connection has a request in flight
 * until the answer is written. Returns the fault the front door recorded
 * for this request (c->fault), or 0. */
int tg_door_request_begins(struct evhttp_request *req);
/** A PROXY header h (borrowed) opened c (borrowed): its address becomes
 * c's, counted and limited as a peer's is at accept. 0, or -1: refused
 * (max_conns_per_addr), to be closed unanswered. */
int tg_door_proxied(struct conn *c, const struct tg_proxy_hdr *h);
/** The open connections (or, through a trusted proxy, requests in flight)
 * counted under addr (borrowed), after adding delta; "" counts nothing. */
size_t tg_door_addr_count(const char *addr, int delta);
/** The connection conn (borrowed) is, or NULL when not framed. */
struct conn *tg_door_find(struct evhttp_connection *conn);
/** A trusted proxy's request req (borrowed) begins on c (borrowed): its
 * client address decided from X-Forwarded-For, counted under it. 0, or
 * TG_HEAD_CLIENT_LIMIT (not counted). */
int tg_door_client_begin(struct conn *c, struct evhttp_request *req);
/** The request in flight on c (borrowed) ended: uncounted. */
void tg_door_client_end(struct conn *c);
/** The body bytes of c's request in framing (borrowed) received so far. */
uint64_t tg_door_body_received(const struct conn *c);

#endif
