/*
 * up.h - private contract between the files of src/upstream: the pool and
 * its connections (pool.c), one request's life on a connection (request.c),
 * the buffered wrapper (fetch.c) and TLS setup (tls.c). Everything runs on
 * the event loop the upstream was created on.
 *
 * Lifetimes: a struct up_conn belongs to its origin (idle or busy list) and
 * then to the upstream's dead list, from which the pump frees it outside
 * any of its own callbacks. A struct tg_up_req belongs to the upstream's
 * live list from tg_upstream_send until it is freed, which happens when no
 * callback of it is on the stack any more (depth == 0) after on_done or a
 * cancel.
 *
 * Queueing: a waiting request sits in its owner's queue for its origin
 * (struct up_owner, one per tag seen, kept for the upstream's life) and in
 * the upstream's aging list (oldest first, for the queue deadline). An
 * owner counts the connections its requests hold: r->c is set and cleared
 * only through tg_upstream_req_bind / tg_upstream_req_unbind.
 */
#ifndef TG_UPSTREAM_UP_H
#define TG_UPSTREAM_UP_H

#include <sys/queue.h>
#include <sys/time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/ssl.h>

#include "tidegate/upstream.h"

enum up_conn_state { UP_CONN_IDLE, UP_CONN_BUSY, UP_CONN_DEAD };

struct up_origin;

TAILQ_HEAD(up_reqq, tg_up_req);

/* The requests of one owner tag (name NULL: untagged, never capped). */
struct up_owner {
	TAILQ_ENTRY(up_owner) entry;	/* upstream's owners, untagged first */
	char *name;
	size_t busy[2];			/* connections held, by origin index */
	size_t nqueued[2];
	struct up_reqq queue[2][TG_UP_NCLASS];	/* waiting for origin i, by class,
						 * in order */
	unsigned long long waits;	/* requests passed over for the cap */
	unsigned long long timeouts;	/* requests failed with TG_UP_BUSY */
};

TAILQ_HEAD(up_ownerq, up_owner);

struct up_conn {
	TAILQ_ENTRY(up_conn) entry;	/* origin idle/busy list or upstream dead list */
	struct up_origin *o;
	struct evhttp_connection *evcon;	/* owns bev */
	struct bufferevent *bev;
	struct evbuffer_cb_entry *out_cb, *in_cb;
	struct event *ctimer;		/* connect timeout, ours (see pool.c) */
	struct tg_up_req *r;		/* request on it while busy, else NULL */
	enum up_conn_state state;
	enum evhttp_request_error lerr;	/* what libevent's error callback said */
	int has_lerr;
	int established;		/* TCP (and TLS) up: evhttp wrote to it */
	int sent;			/* bytes of the current request left for the kernel */
	int closed;			/* libevent closed the socket (closecb) */
	int timed_out;			/* our connect timer fired */
	int nodelay;
	int tls_verify_err;		/* X509_V_ERR_* seen by the verify callback */
	int reading;			/* pool.c's read_more is committing */
	unsigned long nreq;		/* requests completed on it */
};

TAILQ_HEAD(up_connq, up_conn);

/* An origin's health (health.c). */
struct up_health {
	int fails;			/* consecutive failures */
	int ejections;			/* consecutive ejections: the time doubles */
	int ejected;			/* out until a probe answers after ejected_until */
	int64_t ejected_until;		/* monotonic ms */
	int64_t avoid_until;		/* a 503's Retry-After: out until (monotonic ms) */
	int64_t back_at;		/* when it came back */
	char last_error[160];
	struct event *probe;		/* the next probe, while ejected */
	struct tg_up_req *probing;	/* the probe in flight */
	unsigned long long ejections_total, probes, probe_failures;
	unsigned long long failovers[TG_UP_NWHY], retries[TG_UP_NWHY];
	unsigned long long lat[TG_UP_LAT_NB + 1];	/* attempts by latency bucket
							 * (latency.c), last: +Inf */
	unsigned long long lat_sum_us;
};

struct up_origin {
	struct tg_upstream *u;
	const char *name;		/* "primary" or "fallback" */
	int index;			/* 0 or 1: in u->origin and owner arrays */
	char *host;			/* the URL's: IPv6 without brackets */
	char *connect;			/* address to connect to instead of host, or NULL */
	char *hosthdr;			/* Host header: host[:port] */
	char *base_path;		/* "" or "/base" */
	int port;
	int tls;
	int is_ip;			/* literal address: no SNI, IP SAN check */
	struct up_connq idle, busy;
	size_t nidle, nbusy;
	size_t nqueued;			/* in the owners' queues of this origin */
	struct up_health h;
};

struct tg_upstream {
	struct event_base *base;
	struct evdns_base *dns;
	struct tg_upstream_opts opts;	/* ca_file points at ca_file below */
	char *ca_file;
	struct up_origin origin[2];
	int norigins;
	SSL_CTX *ssl_ctx;		/* NULL when no origin is https */
	struct up_connq dead;
	struct up_reqq live;
	struct up_ownerq owners;
	struct up_owner *untagged;	/* first of owners */
	struct up_reqq aging;		/* queued requests, oldest first */
	struct event *pump;
	struct event *deadline;		/* the oldest queued request's queue timeout */
	unsigned long long seq;		/* order of first enqueue */
	unsigned long long requests, retries, failovers, connect_errors, queue_timeouts;
	unsigned long long down;
	unsigned long long reads;	/* reads of answers (tg_upstream_stats) */
	char *probe_path;		/* opts.probe_path points here */
	struct tg_up_gate gate;		/* take NULL: none */
	struct event *gate_timer;	/* ask the gate again */
	unsigned long long gate_waits[TG_UP_NCLASS], class_timeouts[TG_UP_NCLASS];
	unsigned long long gate_refused_upto;	/* seq of the newest request queued
						 * when the gate last refused */
	size_t class_queued[TG_UP_NCLASS];
	size_t nlive, nretrying;	/* requests in flight (probes not counted), and
					 * those on a second attempt: the retry budget */
};

struct tg_up_req {
	TAILQ_ENTRY(tg_up_req) qentry;	/* owner's queue while waiting */
	TAILQ_ENTRY(tg_up_req) aentry;	/* upstream aging list while waiting */
	TAILQ_ENTRY(tg_up_req) lentry;	/* upstream live list */
	struct tg_upstream *u;
	struct up_owner *w;		/* whose connections it counts against */
	unsigned long long seq;		/* FIFO position across owners */
	int64_t queued_at;		/* monotonic ms of the last enqueue */
	int64_t sent_us;		/* monotonic us the attempt started; 0: not
					 * timed (latency.c) */
	struct up_origin *o;		/* origin of the current attempt */
	struct up_conn *c;		/* connection of the current attempt */
	enum evhttp_cmd_type method;
	char *uri;
	struct evkeyvalq headers;	/* copy of the caller's */
	struct evbuffer *body;		/* borrowed */
	struct evbuffer_file_segment *seg;	/* file body (send_file), or NULL */
	int64_t seglen;
	int fd;				/* seg's file (the caller's) */
	int64_t body_off;		/* seg: bytes of it queued this attempt */
	struct tg_up_cbs cbs;
	void *arg;
	int status;
	struct evkeyvalq resp_headers;	/* a fetch's copy: outlives libevent's request */
	struct evbuffer *in;		/* response bytes not consumed yet */
	struct event *kick;		/* delivery after resume, made on demand */
	void *fetch;			/* fetch.c state, freed with the request */
	void (*fetch_free)(void *);
	int depth;			/* our callbacks of it on the stack */
	int queued, fresh, retried, failed_over;
	int retrying;			/* counted in u->nretrying */
	int probe;			/* a health probe: pinned to r->o, not counted */
	int down;			/* never sent: TG_UP_DOWN from the loop */
	int retry_after;		/* seconds, with TG_UP_DOWN */
	int why;			/* enum tg_up_why of a failover or retry, -1: none */
	int got_bytes, head, paused, finished, cancelled, done;
	int refused;			/* never sent: TG_UP_BAD_TARGET from the loop;
					 * 2 once logged */
	int capped;			/* passed over for its owner's cap (counted) */
	int klass;			/* enum tg_up_class */
	int gated;			/* holds what the gate's take gave */
	int gate_held;			/* held back by the gate (counted) */
	int64_t gate_ahead_ms;		/* > 0: the gate holds calls back this much
					 * longer than its queue deadline */
	char detail[200];		/* why it failed, for logs */
};

/* Who a request is for, in its log lines: its own X-Request-Id and the
 * trace id of its traceparent (NULL when it has none), read from r's
 * headers only when a line is written. */
struct up_req_ids {
	const char *rid;		/* borrowed from r's headers, or NULL */
	char trace[33];
};
#define UP_IDS(ids) \
	TG_LS("request_id", (ids).rid), \
	TG_LS("trace_id", (ids).trace[0] != '\0' ? (ids).trace : NULL)

/* ---- pool.c ---- */
void tg_upstream_pump_kick(struct tg_upstream *u);
/** Queue r on o (at the head of its owner's queue for retries and
 * failovers, which keep their place in the FIFO: they waited longest). */
void tg_upstream_enqueue(struct up_origin *o, struct tg_up_req *r, int head);
void tg_upstream_dequeue(struct tg_up_req *r);
/** r holds c now: counted against r's owner. */
void tg_upstream_req_bind(struct tg_up_req *r, struct up_conn *c);
/** r lets go of its connection (if any), which is returned: c->r cleared. */
struct up_conn *tg_upstream_req_unbind(struct tg_up_req *r);
/** Whether r's owner holds its cap of o's connections. */
int tg_upstream_owner_capped(const struct tg_up_req *r, const struct up_origin *o);
/** Close c for good: off its list, reads/writes off, freed later by the pump. */
void tg_upstream_conn_kill(struct up_conn *c);
/** The request on c finished cleanly; keep c idle if it can carry another. */
void tg_upstream_conn_release(struct up_conn *c, int reusable);

/* ---- gate.c ---- */
/** Whether r may start now: 1 (urgent, no gate, or the gate's take said
 * yes); 0, the gate timer armed and r counted as held back once; -1 when
 * the gate will not open before r's queue deadline (a vendor's pause):
 * r is to be answered busy at once rather than wait for nothing. */
int tg_upstream_gate_admit(struct tg_upstream *u, struct tg_up_req *r);
/** Count r (borrowed), starting or timing out, as held back by the gate
 * when it was queued while the gate refused. */
void tg_upstream_gate_count(struct tg_up_req *r);
/** r lets go of what the gate gave it, if anything (unused: not sent). */
void tg_upstream_gate_put(struct tg_up_req *r, int unused);
/** The gate timer's callback: the pump runs. */
void tg_upstream_on_gate_timer(evutil_socket_t fd, short what, void *arg);

/* ---- health.c ---- */
/** The origin a new request goes to, or NULL when every one is out (r's
 * detail and retry_after then say why); r->why set when it skips the
 * primary. */
struct up_origin *tg_upstream_route(struct tg_upstream *u, struct tg_up_req *r);
/** The other origin, when it is in service; else NULL. */
struct up_origin *tg_upstream_other(const struct up_origin *o);
/** o failed (why, borrowed: the last error): maybe ejected. */
void tg_upstream_health_fail(struct up_origin *o, const char *why);
/** o answered. */
void tg_upstream_health_ok(struct up_origin *o);
/** o said 503 with Retry-After: out for ra_s seconds (capped). */
void tg_upstream_health_avoid(struct up_origin *o, long ra_s);
/** Whether one more retry or failover fits the budget. */
int tg_upstream_budget_ok(const struct tg_upstream *u);
/** r (borrowed) starts a second attempt: counted against the budget. */
void tg_upstream_budget_take(struct tg_up_req *r);
/** A probe (r borrowed) ended: answered with status (0: none). */
void tg_upstream_probe_done(struct tg_up_req *r, int status);
/** o's probe timer fired: 1 when a probe is to go now (else it is
 * re-armed or not needed). */
int tg_upstream_probe_due(struct up_origin *o);
/** Free o's health (probe timer; a probe in flight is the pool's). */
void tg_upstream_health_free(struct up_origin *o);

/* ---- latency.c ---- */
/** r's attempt starts now (r borrowed): its clock starts, probes aside. */
void tg_upstream_lat_start(struct tg_up_req *r);
/** r's attempt got its head or failed: counted once on r->o (borrowed). */
void tg_upstream_lat_end(struct tg_up_req *r);

/* ---- request.c ---- */
/** Put r on c (busy, fresh or idle) and hand it to libevent. */
/** r's file body (filebody.c): its first bytes into the request's own
 * buffer req_out (borrowed), from the start of the file. */
void tg_up_body_first(struct tg_up_req *r, struct evbuffer *req_out);
/** More of r's file body onto c's output buffer out (all borrowed), as
 * the kernel takes what is queued (pool.c's output callback). */
void tg_up_body_more(struct tg_up_req *r, const struct up_conn *c, struct evbuffer *out);
void tg_upstream_req_start(struct tg_up_req *r, struct up_conn *c);
/** Attempt on c failed before it could start (no connection object). */
void tg_upstream_req_fail_start(struct tg_up_req *r);
/** c's connect timer fired while r was on it. */
void tg_upstream_req_connect_timeout(struct up_conn *c);
/** Free r now (no callbacks): upstream teardown. */
void tg_upstream_req_free(struct tg_up_req *r);
/** r waited its queue timeout: off the queue, on_done with TG_UP_BUSY. */
void tg_upstream_req_expire(struct tg_up_req *r);
/** r's ids for a log line into ids (both borrowed; ids->rid lives as long as
 * r's headers). r may be NULL: no ids. */
void tg_upstream_req_ids(const struct tg_up_req *r, struct up_req_ids *ids);
/** o's probe timer (the event of o->h.probe; arg: o). */
void tg_upstream_on_probe(evutil_socket_t fd, short what, void *arg);

/* ---- tls.c ---- */
SSL_CTX *tg_upstream_tls_ctx_new(const struct tg_upstream_opts *opts, struct tg_err *err);
/** A client SSL for one connection to o: SNI, host check, verify callback. */
SSL *tg_upstream_tls_ssl_new(struct tg_upstream *u, struct up_origin *o, struct up_conn *c);
/** Why the TLS side of c failed into buf; 0 when there is no TLS reason. */
int tg_upstream_tls_describe(struct up_conn *c, char *buf, size_t len);

/** Write the request evhttp just put in the output of c (borrowed), a
 * connection already up, at once on a plain socket (pool.c). */
void tg_upstream_conn_write_now(struct up_conn *c);
/** TCP_NODELAY once per connection: requests are written whole, answers wanted now. */
void tg_upstream_conn_nodelay(struct up_conn *c, evutil_socket_t fd);

#endif
