/*
 * door_conns.c - the connections behind the front door (frontdoor.h):
 * each live connection's slot, claimed when evhttp sets the connection up
 * and released by its close callback (which the front door owns and
 * chains, tg_frontdoor_set_closecb), the per-listener and per-address
 * limits on open connections, and the time limits nginx has: the whole
 * request head within client_header_timeout, no gap between body reads
 * longer than client_body_timeout, an idle keep-alive connection closed
 * after keepalive_timeout; and Apache's minimum body rate (a body may take
 * a grace period plus its size over client_body_min_rate). A request cut
 * by a time limit is answered 408 here, by the front door itself, where
 * an answer can still be written. One timer a second walks the live
 * slots, and finds the clients that left while their answer was being
 * made. It
 * also tells a handler how a request's exchange ended (answer written or
 * connection closed first: tg_frontdoor_set_on_end), from the completion
 * and close callbacks it owns, and the client address decided for a
 * request (door_client.c decides it). Called by libevent (connection set-up,
 * close, completion, the timer) and by the listeners' handlers
 * (tg_frontdoor_refusal, the callbacks they chain).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include <event2/bufferevent.h>
#include <event2/event.h>

#include "tidegate/clock.h"
#include "tidegate/errors.h"
#include "tidegate/http.h"
#include "tidegate/ids.h"
#include "tidegate/realip.h"
#include "tidegate/util.h"
#include "door.h"

/* Slots by file descriptor: a descriptor names one live connection, and a
 * slot is claimed when libevent sets up the connection, so a later
 * connection on a reused descriptor starts from a clean slot. A slot is
 * allocated once and kept (callbacks hold its address); the table grows
 * with the highest descriptor, so it is as large as the most connections
 * ever open at once. */
static struct conn **slots;
static size_t nslots;
static struct conn *last_hit;	/* a request's connection is asked for more
				 * than once: the last one found */
#define TG_DOOR_MAX_WRITE (1024 * 1024)	/* bytes one write call may take */
#define TG_DOOR_LINGER_MS 5000	/* the front door's own answer, written and
				 * then read past, before the connection is cut */

static struct event *sweep_ev;	/* the one-second walk of the slots */

/* A connection being set up: the bufferevent evhttp asked for, not yet
 * given its descriptor. */
struct pending {
	struct bufferevent *bev;
	const struct tg_frontdoor *door;
};

static struct conn *
claim(evutil_socket_t fd)
{
	size_t n = nslots;
	struct conn *c;

	if ((size_t)fd >= nslots) {
		nslots = (size_t)fd + 1 > 2 * nslots ? (size_t)fd + 1 : 2 * nslots;
		slots = tg_xrealloc(slots, nslots * sizeof(*slots));
		memset(slots + n, 0, (nslots - n) * sizeof(*slots));
	}
	if ((c = slots[fd]) == NULL) {
		c = slots[fd] = tg_xcalloc(1, sizeof(*c));
		c->hold = evbuffer_new();
	}
	evbuffer_drain(c->hold, evbuffer_get_length(c->hold));
	c->st = ST_HEAD;
	c->left = c->requests = c->limit = c->body = c->fault_at = c->delivered = 0;
	c->fault = 0;
	c->busy = c->inflight = 0;
	c->since = c->read_at = tg_clock_mono_ms();	/* the first head is due from now */
	c->rate_since = c->closing_at = 0;
	c->rate_base = 0;
	c->addr[0] = c->client[0] = '\0';
	c->counted = c->trusted = c->client_counted = c->client_fault = 0;
	c->user_cb = NULL;
	c->user_arg = c->done_arg = c->end_arg = NULL;
	c->done_cb = NULL;
	c->end_cb = NULL;
	return c;
}

/* The connection goes: a request in flight whose end was asked for ends
 * here, unanswered (on_done clears end_cb once an answer is written). */
static void
on_close(struct evhttp_connection *evcon, void *arg)
{
	struct conn *c = arg;
	tg_frontdoor_end_cb end = c->end_cb;

	c->end_cb = NULL;
	if (c->user_cb != NULL)
		c->user_cb(evcon, c->user_arg);
	if (end != NULL)
		end(NULL, 0, c->end_arg);
	if (c->door->stats != NULL)
		c->door->stats->open--;
	if (c->counted)
		tg_door_addr_count(c->addr, -1);
	tg_door_client_end(c);
	c->bev = NULL;
	c->evcon = NULL;
	c->user_cb = NULL;
	c->done_cb = NULL;
	evbuffer_drain(c->hold, evbuffer_get_length(c->hold));
}

static void
peer_addr(evutil_socket_t fd, char *out, size_t size)
{
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	out[0] = '\0';
	if (getpeername(fd, (struct sockaddr *)&ss, &sl) != 0)
		return;
	if (ss.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&ss)->sin_addr, out, (socklen_t)size);
	else if (ss.ss_family == AF_INET6)
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&ss)->sin6_addr, out,
		    (socklen_t)size);
}

/* Over a limit: refused at once, before a byte is read (the reset costs
 * the established connections nothing). */
static int
over_limit(const struct tg_frontdoor *d, struct conn *c)
{
	struct tg_frontdoor_stats *st = d->stats;

	if (d->max_conns > 0 && st != NULL && st->open >= d->max_conns) {
		st->refused_max++;
		return 1;
	}
	if (c->trusted || d->proxy_protocol)
		return 0;	/* counted by request, or once its PROXY header is read */
	if (d->max_conns_per_addr > 0 && tg_door_addr_count(c->addr, 0) >= d->max_conns_per_addr) {
		if (st != NULL)
			st->refused_addr++;
		return 1;
	}
	return 0;
}

/* The front door's own answer is out: the client is told the end
 * (FIN) while what it still sends is read and dropped (the front door's
 * input callback discards it), so that the kernel does not answer those
 * bytes with a reset that could destroy the answer before it is read. */
static void
on_answered(struct bufferevent *bev, void *arg)
{
	shutdown(bufferevent_getfd(bev), SHUT_WR);
	bufferevent_enable(bev, EV_READ);
}

static void
on_answer_event(struct bufferevent *bev, short what, void *arg)
{
	struct conn *c = arg;

	evhttp_connection_free(c->evcon);	/* the client left, or is done */
}

static void
on_linger_read(struct bufferevent *bev, void *arg)
{
	evbuffer_drain(bufferevent_get_input(bev), evbuffer_get_length(bufferevent_get_input(bev)));
}

/*
 * Answer a request cut by a time limit with the JSON error of fault, then
 * close. Only asked when no request of the connection is in flight: every
 * answer before it is written, and no handler has this one (evhttp is
 * still reading it), so the answer is the front door's to write. evhttp's
 * callbacks on the connection are taken over: it reads nothing more and is
 * freed once the answer is out and the client closed, or at closing_at.
 */
static void
answer(struct conn *c, int fault, int64_t now)
{
	struct evbuffer *b = evbuffer_new();
	char id[TG_UUID_LEN];

	tg_id_uuid4(id);
	tg_error_body(b, tg_head_fault_status(fault), tg_head_fault_code(fault),
	    tg_head_fault_message(fault), id, NULL, 0);
	evbuffer_add_printf(bufferevent_get_output(c->bev), "HTTP/1.1 %d Request Timeout\r\n"
	    "Content-Type: application/json\r\nX-Request-Id: %s\r\nConnection: close\r\n"
	    "Content-Length: %zu\r\n\r\n", tg_head_fault_status(fault), id,
	    evbuffer_get_length(b));
	bufferevent_write_buffer(c->bev, b);
	evbuffer_free(b);
	evbuffer_drain(c->hold, evbuffer_get_length(c->hold));
	c->st = ST_DISCARD;
	c->closing_at = now + TG_DOOR_LINGER_MS;
	bufferevent_setcb(c->bev, on_linger_read, on_answered, on_answer_event, c);
	bufferevent_disable(c->bev, EV_READ);
	bufferevent_enable(c->bev, EV_WRITE);
}

/* Close c's connection for a time limit: a request under way is answered
 * 408 (fault) and closed; an idle keep-alive connection gets an orderly
 * close (the client sees the end of the stream); one that never sent a
 * byte is reset, as there is nothing to answer. */
static void
expire(struct conn *c, int64_t now, int fault)
{
	struct tg_frontdoor_stats *st = c->door->stats;
	evutil_socket_t fd = bufferevent_getfd(c->bev);
	int idle = c->st == ST_HEAD && evbuffer_get_length(c->hold) == 0 && c->requests > 0;

	if (st != NULL)
		idle ? st->idle_closed++ : fault == TG_HEAD_TIMEOUT ? st->header_timeouts++ :
		    fault == TG_HEAD_BODY_TOO_SLOW ? st->body_too_slow++ : st->body_timeouts++;
	c->since = now;			/* once: evhttp frees it from the loop */
	if (idle)
		shutdown(fd, SHUT_RDWR);	/* evhttp reads the end and frees it */
	else if ((c->st == ST_HEAD && evbuffer_get_length(c->hold) == 0) || c->st == ST_PROXY)
		tg_http_fd_reset(fd);	/* nothing to answer; a proxy's header gets no answer */
	else
		answer(c, fault, now);
}

uint64_t
tg_door_body_received(const struct conn *c)
{
	return c->body - (c->st == ST_BODY || c->st == ST_CHUNK_DATA ? c->left : 0);
}

/* A body under way that is slower than body_min_rate on average, counted
 * from body_rate_grace_ms after rate_since: it may take the grace period
 * plus its bytes over the rate (Apache's RequestReadTimeout MinRate). */
static int
too_slow(const struct conn *c, int64_t now)
{
	const struct tg_frontdoor *d = c->door;
	uint64_t got;

	if (d->body_min_rate == 0 || c->inflight || c->st == ST_HEAD || c->st == ST_DISCARD ||
	    c->st == ST_PROXY)
		return 0;
	got = tg_door_body_received(c) - c->rate_base;
	return now - c->rate_since > d->body_rate_grace_ms +
	    (int64_t)(got * 1000 / d->body_min_rate);
}

/* The limit that applies to c now, in ms; 0: none (a request being
 * answered has none here: client_send_timeout is the gateway's). */
static int64_t
limit_of(const struct conn *c)
{
	if (c->inflight || c->st == ST_DISCARD)
		return 0;
	if (c->st == ST_PROXY)
		return c->door->header_timeout_ms;	/* from the connection's start */
	if (c->st != ST_HEAD)
		return c->door->body_timeout_ms;
	if (evbuffer_get_length(c->hold) > 0 || c->requests == 0)
		return c->door->header_timeout_ms;
	return c->door->idle_timeout_ms;
}

/*
 * A client whose request is in flight and that has closed its end (EOF, or
 * a reset): evhttp reads nothing while it answers, so it would learn this
 * only when it writes, and a long-poll or a slow vendor call would run on
 * for nobody. The read side's end is told to evhttp as if it had read it:
 * the request is detached and the connection freed, its close callback
 * runs (499 client_closed). A peek leaves pipelined bytes where they are;
 * like nginx, a client that only shut its sending side down counts as gone.
 */
static void
probe(struct conn *c)
{
	char b;
	ssize_t n = recv(bufferevent_getfd(c->bev), &b, 1, MSG_PEEK | MSG_DONTWAIT);

	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
		bufferevent_trigger_event(c->bev, BEV_EVENT_EOF | BEV_EVENT_READING, 0);
}

static void
on_sweep(evutil_socket_t unused, short what, void *arg)
{
	int64_t now = tg_clock_mono_ms(), lim;
	size_t i;

	for (i = 0; i < nslots; i++) {
		struct conn *c = slots[i];

		if (c != NULL && c->bev != NULL && c->inflight)
			probe(c);	/* may free the connection: c->bev NULL */
		if (c == NULL || c->bev == NULL)
			continue;
		if (c->closing_at > 0 && now >= c->closing_at) {
			tg_http_fd_reset(bufferevent_getfd(c->bev));
			evhttp_connection_free(c->evcon);	/* its answer had its time */
		} else if (too_slow(c, now)) {
			expire(c, now, TG_HEAD_BODY_TOO_SLOW);
		} else if ((lim = limit_of(c)) > 0 && now - c->since >= lim) {
			expire(c, now, c->st == ST_HEAD || c->st == ST_PROXY ? TG_HEAD_TIMEOUT :
			    TG_HEAD_BODY_STALLED);
		}
	}
}

static void
sweep_start(struct event_base *base)
{
	struct timeval one = { 1, 0 };

	if (sweep_ev != NULL)
		return;
	sweep_ev = event_new(base, -1, EV_PERSIST, on_sweep, NULL);
	event_add(sweep_ev, &one);
}

static void
admit(struct pending *p, evutil_socket_t fd, struct evhttp_connection *evcon)
{
	struct conn *c = claim(fd);
	int one = 1;

	c->door = p->door;
	peer_addr(fd, c->addr, sizeof(c->addr));
	c->st = p->door->proxy_protocol ? ST_PROXY : ST_HEAD;
	c->trusted = p->door->real_ip_from != NULL && !p->door->proxy_protocol &&
	    tg_http_cidrs_match(p->door->real_ip_from, c->addr);
	if (over_limit(p->door, c)) {
		tg_http_fd_reset(fd);	/* evhttp sees the error and frees it */
		return;
	}
	c->bev = p->bev;
	c->evcon = evcon;
	if (p->door->stats != NULL)
		p->door->stats->open++;
	if (!c->trusted && !p->door->proxy_protocol)
		c->counted = tg_door_addr_count(c->addr, 1) > 0;
	/* replies are written whole: no 40 ms wait for a delayed ACK */
	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* libevent writes 16 KB a loop turn by default: a 4 MB answer took
	 * ~260 writev and as many epoll_wait; let one writev take what the
	 * socket will (bench/s7_sizes.py) */
	bufferevent_set_max_single_write(p->bev, TG_DOOR_MAX_WRITE);
	evbuffer_add_cb(bufferevent_get_input(p->bev), tg_door_on_input, c);
	evhttp_connection_set_closecb(evcon, on_close, c);
	sweep_start(bufferevent_get_base(p->bev));
}

/* Runs once evhttp has given the connection its descriptor, before any
 * read: claim the slot, hook the input buffer and the close callback. */
static void
on_setup(evutil_socket_t unused, short what, void *arg)
{
	struct pending *p = arg;
	evutil_socket_t fd = bufferevent_getfd(p->bev);
	void *evcon = NULL;

	bufferevent_getcb(p->bev, NULL, NULL, NULL, &evcon);
	if (fd >= 0 && evcon != NULL)	/* else evhttp gave the connection up */
		admit(p, fd, evcon);
	free(p);
}

static struct bufferevent *
on_bev(struct event_base *base, void *arg)
{
	struct pending *p = tg_xcalloc(1, sizeof(*p));

	p->door = arg;
	p->bev = p->door->make_bev != NULL ? p->door->make_bev(base, p->door->make_arg) :
	    bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
	if (p->bev == NULL || event_base_once(base, -1, EV_TIMEOUT, on_setup, p, NULL) != 0) {
		if (p->bev != NULL)
			bufferevent_free(p->bev);
		free(p);
		return NULL;
	}
	return p->bev;
}

void
tg_frontdoor_attach(struct evhttp *http, const struct tg_frontdoor *door)
{
	evhttp_set_bevcb(http, on_bev, (void *)door);
}

struct conn *
tg_door_find(struct evhttp_connection *conn)
{
	struct bufferevent *bev;
	evutil_socket_t fd;

	if (last_hit == NULL || last_hit->evcon != conn) {
		bev = evhttp_connection_get_bufferevent(conn);
		fd = bev != NULL ? bufferevent_getfd(bev) : -1;
		last_hit = fd >= 0 && (size_t)fd < nslots && slots[fd] != NULL &&
		    slots[fd]->evcon == conn ? slots[fd] : NULL;
	}
	return last_hit;
}

void
tg_frontdoor_set_closecb(struct evhttp_connection *conn,
    void (*cb)(struct evhttp_connection *, void *), void *arg)
{
	struct conn *c = tg_door_find(conn);

	if (c != NULL) {
		c->user_cb = cb;
		c->user_arg = arg;
	} else {
		evhttp_connection_set_closecb(conn, cb, arg);	/* no front door */
	}
}

/* The answer to the connection's request is written: it is idle from now
 * (keepalive_timeout) until the next head passes. */
static void
on_done(struct evhttp_request *req, void *arg)
{
	struct conn *c = arg;
	void (*cb)(struct evhttp_request *, void *) = c->done_cb;
	tg_frontdoor_end_cb end = c->end_cb;

	c->inflight = 0;
	c->since = c->rate_since = tg_clock_mono_ms();
	c->rate_base = tg_door_body_received(c);	/* a pipelined body waited */
	c->done_cb = NULL;
	tg_door_client_end(c);
	c->end_cb = NULL;	/* before the calls: the close that may follow is not its end */
	if (cb != NULL)
		cb(req, c->done_arg);
	if (end != NULL)
		end(req, 1, c->end_arg);
}

void
tg_frontdoor_set_on_complete(struct evhttp_request *req,
    void (*cb)(struct evhttp_request *, void *), void *arg)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	struct conn *c = conn != NULL ? tg_door_find(conn) : NULL;

	if (c != NULL && c->inflight) {
		c->done_cb = cb;
		c->done_arg = arg;
	} else {
		evhttp_request_set_on_complete_cb(req, cb, arg);
	}
}

int
tg_frontdoor_set_on_end(struct evhttp_request *req, tg_frontdoor_end_cb cb, void *arg)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	struct conn *c = conn != NULL ? tg_door_find(conn) : NULL;

	if (c == NULL || !c->inflight)
		return -1;
	c->end_cb = cb;
	c->end_arg = arg;
	return 0;
}

/*
 * A handler took req: no time limit of the front door's until answered.
 * evhttp hands requests over one at a time, in the order the front door
 * passed them, so the count of requests taken names this one. The request
 * a fault was recorded for is also the last evhttp will ever read on the
 * connection (everything after it is discarded): with nothing left in the
 * input buffer the fault is its, whatever the count says (refuse when
 * unsure).
 */
int
tg_door_request_begins(struct evhttp_request *req)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	struct conn *c = conn != NULL ? tg_door_find(conn) : NULL;

	if (c == NULL)
		return 0;
	if (!c->inflight) {	/* asked twice for one request: counted once */
		c->delivered++;
		c->client_fault = c->trusted ? tg_door_client_begin(c, req) : 0;
	}
	c->inflight = 1;
	c->done_cb = NULL;
	evhttp_request_set_on_complete_cb(req, on_done, c);
	if (c->client_fault != 0)
		return c->client_fault;
	if (c->fault == 0 || (c->delivered != c->fault_at &&
	    evbuffer_get_length(bufferevent_get_input(c->bev)) > 0))
		return 0;
	return c->fault;
}

static void
copy_out(char *out, size_t size, const char *s)
{
	size_t n = strnlen(s, size - 1);

	memcpy(out, s, n);
	out[n] = '\0';
}

void
tg_frontdoor_client(struct evhttp_request *req, char *out, size_t size)
{
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	struct conn *c = conn != NULL ? tg_door_find(conn) : NULL;

	if (c != NULL && c->trusted && c->inflight)
		copy_out(out, size, c->client);
	else if (c != NULL || conn == NULL)
		copy_out(out, size, c != NULL ? c->addr : "");
	else
		tg_frontdoor_conn_addr(conn, out, size);
}

void
tg_frontdoor_conn_addr(struct evhttp_connection *conn, char *out, size_t size)
{
	struct conn *c = tg_door_find(conn);
	char *host = NULL;
	ev_uint16_t port = 0;

	if (c != NULL) {
		copy_out(out, size, c->addr);
		return;
	}
	evhttp_connection_get_peer(conn, &host, &port);
	copy_out(out, size, host != NULL ? host : "");
}
