/*
 * pool.c - the upstream object and its per-origin connection pools: URL
 * parsing, options, the idle list and busy set of evhttp connections, the
 * queue of requests waiting for a connection (one FIFO per owner tag,
 * served oldest first among the owners under their cap), the queue
 * deadline, and the "pump", one event per upstream that starts queued
 * requests and frees dead connections outside of their own callbacks.
 * Called by request.c and by the public API users (proxy path, token
 * cache, poll multiplexer).
 *
 * Connections are never reconnected by libevent: once closed, for any
 * reason, a connection is discarded and replaced (bufferevent_openssl keeps
 * stale state across evhttp's own reconnects, so the rule is uniform).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <event2/bufferevent_ssl.h>

#include "tidegate/clock.h"
#include "tidegate/log.h"
#include "tidegate/sockwrite.h"
#include "up.h"

#define UP_CONNECT_TIMEOUT_MS	10000
#define UP_READ_TIMEOUT_MS	30000
#define UP_MAX_CONNS		32
#define UP_MAX_HEADERS		(64 * 1024)
#define UP_QUEUE_TIMEOUT_MS	10000
/* libevent's own connect timeout, a backstop behind ours (see conn_new). */
#define UP_BACKSTOP_MS		1000
#define UP_EJECT_AFTER		3
#define UP_EJECT_BASE_MS	30000
#define UP_EJECT_MAX_MS		300000
#define UP_PROBE_INTERVAL_MS	5000
#define UP_RETRY_BUDGET_PCT	20
#define UP_RETRY_BUDGET_MIN	3
#define UP_RETRY_AFTER_MAX_MS	60000
/* What one bufferevent read of libevent 2.1 takes at most (EVBUFFER_MAX_READ). */
#define UP_LIBEVENT_READ	4096
/* The most read_more takes a loop turn: a fair share of the loop per
 * connection, and a bound on what one turn adds above the high water. */
#define UP_READ_MAX		(256 * 1024)

static void
ms_to_tv(int64_t ms, struct timeval *tv)
{
	tv->tv_sec = (time_t)(ms / 1000);
	tv->tv_usec = (suseconds_t)((ms % 1000) * 1000);
}

void
tg_upstream_conn_nodelay(struct up_conn *c, evutil_socket_t fd)
{
	int one = 1;

	if (c->nodelay || fd < 0)
		return;
	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) == 0)
		c->nodelay = 1;
}

void
tg_upstream_pump_kick(struct tg_upstream *u)
{
	event_active(u->pump, EV_TIMEOUT, 0);
}

/* The queue deadline follows the oldest waiting request (the aging list is
 * in enqueue order, and every request gets the same timeout). */
static void
deadline_arm(struct tg_upstream *u)
{
	struct tg_up_req *r = TAILQ_FIRST(&u->aging);
	int64_t ms;
	struct timeval tv;

	if (r == NULL || u->opts.queue_timeout_ms < 0) {
		evtimer_del(u->deadline);
		return;
	}
	ms = r->queued_at + u->opts.queue_timeout_ms - tg_clock_turn_ms(u->base);
	ms_to_tv(ms > 0 ? ms : 0, &tv);
	evtimer_add(u->deadline, &tv);
}

static void
on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct tg_upstream *u = arg;
	struct tg_up_req *r;
	int64_t now = tg_clock_turn_ms(u->base);

	/* on_done may cancel or queue requests: the head is read afresh. */
	while ((r = TAILQ_FIRST(&u->aging)) != NULL && u->opts.queue_timeout_ms >= 0 &&
	    now - r->queued_at >= u->opts.queue_timeout_ms)
		tg_upstream_req_expire(r);
	deadline_arm(u);
}

int
tg_upstream_owner_capped(const struct tg_up_req *r, const struct up_origin *o)
{
	return r->w->name != NULL && r->w->busy[o->index] >= o->u->opts.max_conns_per_owner;
}

void
tg_upstream_enqueue(struct up_origin *o, struct tg_up_req *r, int head)
{
	struct tg_upstream *u = o->u;
	struct up_owner *w = r->w;

	r->o = o;
	if (r->seq == 0)
		r->seq = ++u->seq;
	if (head)
		TAILQ_INSERT_HEAD(&w->queue[o->index][r->klass], r, qentry);
	else
		TAILQ_INSERT_TAIL(&w->queue[o->index][r->klass], r, qentry);
	u->class_queued[r->klass]++;
	r->queued_at = tg_clock_turn_ms(u->base);
	TAILQ_INSERT_TAIL(&u->aging, r, aentry);
	r->queued = 1;
	w->nqueued[o->index]++;
	o->nqueued++;
	if (!evtimer_pending(u->deadline, NULL))
		deadline_arm(u);
	tg_upstream_pump_kick(u);
}

void
tg_upstream_dequeue(struct tg_up_req *r)
{
	if (!r->queued)
		return;
	TAILQ_REMOVE(&r->w->queue[r->o->index][r->klass], r, qentry);
	r->u->class_queued[r->klass]--;
	TAILQ_REMOVE(&r->u->aging, r, aentry);
	r->w->nqueued[r->o->index]--;
	r->o->nqueued--;
	r->queued = 0;
}

void
tg_upstream_req_bind(struct tg_up_req *r, struct up_conn *c)
{
	r->c = c;
	c->r = r;
	r->w->busy[c->o->index]++;
}

struct up_conn *
tg_upstream_req_unbind(struct tg_up_req *r)
{
	struct up_conn *c = r->c;

	if (c == NULL)
		return NULL;
	r->w->busy[c->o->index]--;
	r->c = NULL;
	if (c->r == r)
		c->r = NULL;
	return c;
}

/*
 * The first bytes evhttp adds to the output buffer mean the connection is
 * up (it only writes after BEV_EVENT_CONNECTED, i.e. after the TLS
 * handshake too); bytes leaving it while a socket is attached went to the
 * kernel. evhttp_connection_reset_ drains the buffer after detaching the
 * socket, which is why the fd is checked: those bytes were never sent.
 * The socket is looked up only when something is to change: evhttp adds a
 * request's head in several writes to a connection already up.
 */
static void
on_output(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct up_conn *c = arg;
	struct tg_upstream *u = c->o->u;
	evutil_socket_t fd;
	struct timeval tv;

	if (c->state != UP_CONN_BUSY || (c->established && info->n_deleted == 0) ||
	    (fd = bufferevent_getfd(c->bev)) < 0)
		return;
	if (info->n_added > 0 && !c->established) {
		c->established = 1;
		evtimer_del(c->ctimer);
		tg_upstream_conn_nodelay(c, fd);
		ms_to_tv(u->opts.read_timeout_ms, &tv);
		evhttp_connection_set_timeout_tv(c->evcon, &tv);
	}
	if (info->n_deleted > 0) {
		c->sent = 1;
		if (c->r != NULL && c->r->seg != NULL)
			tg_up_body_more(c->r, c, buf);	/* a file body's next bytes */
		/* Upload progress counts as activity: a large body must not
		 * run into the read timeout while it is still being sent.
		 * Once all of it has left, evhttp starts reading (in this
		 * turn: evhttp_start_read_ enables EV_READ, which arms the
		 * read timeout from now), so there is nothing to re-arm. */
		if (evbuffer_get_length(buf) > 0) {
			ms_to_tv(u->opts.read_timeout_ms, &tv);
			bufferevent_set_timeouts(c->bev, &tv, &tv);
		}
	}
}

/*
 * libevent 2.1's evbuffer_read takes at most 4,096 bytes a call
 * (EVBUFFER_MAX_READ), so a bufferevent reads a large answer 4 KB a loop
 * turn. When a read of a plain connection came back full, the rest of
 * what the socket holds is read here, in the same turn, before evhttp
 * parses the input (evbuffer callbacks run inside evbuffer_read), up to
 * UP_READ_MAX. The size is what FIONREAD reports: a read no larger than
 * the queued bytes always returns bytes, never the EOF or the error the
 * bufferevent's next read is to see (a reset must not end a body read
 * until close as if complete), and the buffer gets about the room the
 * bytes need, not 256 KB for a trickle. A paused request is not read:
 * its bufferevent does not read either. TLS connections read through
 * OpenSSL and keep libevent's reads.
 */
static void
read_more(struct up_conn *c, struct evbuffer *buf)
{
	evutil_socket_t fd = bufferevent_getfd(c->bev);
	struct evbuffer_iovec v[2];
	struct iovec iov[2];
	int avail = 0, nv, i;
	size_t want;
	ssize_t n;

	if (fd < 0 || ioctl(fd, FIONREAD, &avail) != 0 || avail <= 0)
		return;
	want = avail < UP_READ_MAX ? (size_t)avail : UP_READ_MAX;
	if ((nv = evbuffer_reserve_space(buf, (ev_ssize_t)want, v, 2)) <= 0)
		return;
	for (i = 0; i < nv; i++) {
		iov[i].iov_base = v[i].iov_base;
		iov[i].iov_len = v[i].iov_len < want ? v[i].iov_len : want;
		want -= iov[i].iov_len;
	}
	if ((n = readv(fd, iov, nv)) <= 0)
		return;		/* nothing to commit */
	for (i = 0; i < nv; i++) {
		v[i].iov_len = (size_t)n < iov[i].iov_len ? (size_t)n : iov[i].iov_len;
		n -= (ssize_t)v[i].iov_len;
	}
	if (v[nv - 1].iov_len == 0)
		nv--;		/* the second chain got nothing */
	c->o->u->reads++;
	c->reading = 1;		/* the commit runs on_input again */
	evbuffer_commit_space(buf, v, nv);
	c->reading = 0;
}

/*
 * The request evhttp just put in the output of a connection already up
 * (evhttp_make_request on an idle kept-alive connection) is written now,
 * in the caller's turn, rather than when EV_WRITE fires a turn later
 * (about 5 epoll_ctl per proxied request). Written whole, EV_WRITE goes
 * off before the loop sees it; evhttp_write_connectioncb, which starts
 * reading the answer, runs from the bufferevent's write callback, so that
 * is triggered deferred: at the start of the next turn, before the answer
 * can be read, never inside the caller's stack. A connection reset or
 * freed meanwhile (a cancel) has its callbacks cleared and the deferred
 * call runs nothing. What the socket does not take (a large body), an
 * error (the vendor gone) or more of a file body (on_output) is left to
 * the bufferevent as before (sockwrite.c). TLS writes through OpenSSL:
 * left alone.
 */
void
tg_upstream_conn_write_now(struct up_conn *c)
{
	if (c->o->tls || evbuffer_get_length(bufferevent_get_output(c->bev)) == 0)
		return;
	if (tg_bev_write_now(c->bev))
		bufferevent_trigger(c->bev, EV_WRITE, BEV_TRIG_DEFER_CALLBACKS);
}

static void
on_input(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct up_conn *c = arg;

	if (info->n_added == 0 || c->state != UP_CONN_BUSY || c->r == NULL)
		return;
	if (c->established)
		c->r->got_bytes = 1;
	if (c->reading)
		return;
	c->o->u->reads++;
	if (info->n_added == UP_LIBEVENT_READ && !c->o->tls && !c->r->paused)
		read_more(c, buf);
}

/* libevent closed the socket: the server went away, a response said
 * "Connection: close", or a request failed. An idle connection goes now;
 * a busy one when its request's outcome is handled. */
static void
on_conn_close(struct evhttp_connection *evcon, void *arg)
{
	struct up_conn *c = arg;

	c->closed = 1;
	if (c->state == UP_CONN_IDLE)
		tg_upstream_conn_kill(c);
}

static void
on_connect_timer(evutil_socket_t fd, short what, void *arg)
{
	struct up_conn *c = arg;

	c->timed_out = 1;
	if (c->state == UP_CONN_BUSY && c->r != NULL)
		tg_upstream_req_connect_timeout(c);
	else
		tg_upstream_conn_kill(c);
}

static struct bufferevent *
conn_bev(struct up_conn *c)
{
	struct tg_upstream *u = c->o->u;
	struct bufferevent *bev;
	SSL *ssl;

	if (!c->o->tls)
		return bufferevent_socket_new(u->base, -1,
		    BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if ((ssl = tg_upstream_tls_ssl_new(u, c->o, c)) == NULL)
		return NULL;
	bev = bufferevent_openssl_socket_new(u->base, -1, ssl, BUFFEREVENT_SSL_CONNECTING,
	    BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
	if (bev == NULL) {
		SSL_free(ssl);
		return NULL;
	}
	/* Servers rarely send close_notify; a missing one must not turn a
	 * read-until-close body into an error. */
	bufferevent_openssl_set_allow_dirty_shutdown(bev, 1);
	return bev;
}

/*
 * Connect timeout: libevent 2.1 applies one evhttp timeout to connecting
 * and reading, and reports an expired connect like a refused one (done
 * callback, code 0, no error). So the connect timeout is our own timer
 * (covering DNS, TCP and the TLS handshake), libevent's timeout is set just
 * behind it as a backstop, and switched to the read timeout in on_output
 * once the connection is up. The connection is o's, made for r (named in
 * the log line of a failure).
 */
static struct up_conn *
conn_new(struct up_origin *o, const struct tg_up_req *r)
{
	struct tg_upstream *u = o->u;
	struct up_conn *c = tg_xcalloc(1, sizeof(*c));
	struct up_req_ids ids;
	struct timeval tv;

	c->o = o;
	if ((c->bev = conn_bev(c)) == NULL)
		goto err;
	c->evcon = evhttp_connection_base_bufferevent_new(u->base, u->dns, c->bev,
	    o->connect != NULL ? o->connect : o->host, (ev_uint16_t)o->port);
	if (c->evcon == NULL) {
		bufferevent_free(c->bev);
		goto err;
	}
	evhttp_connection_set_retries(c->evcon, 0);
	evhttp_connection_set_max_headers_size(c->evcon, UP_MAX_HEADERS);
	/* An early answer (413 while uploading) beats a reset. */
	evhttp_connection_set_flags(c->evcon, EVHTTP_CON_READ_ON_WRITE_ERROR);
	evhttp_connection_set_closecb(c->evcon, on_conn_close, c);
	ms_to_tv(u->opts.connect_timeout_ms + UP_BACKSTOP_MS, &tv);
	evhttp_connection_set_timeout_tv(c->evcon, &tv);
	c->out_cb = evbuffer_add_cb(bufferevent_get_output(c->bev), on_output, c);
	c->in_cb = evbuffer_add_cb(bufferevent_get_input(c->bev), on_input, c);
	c->ctimer = evtimer_new(u->base, on_connect_timer, c);
	ms_to_tv(u->opts.connect_timeout_ms, &tv);
	evtimer_add(c->ctimer, &tv);
	return c;
err:
	tg_upstream_req_ids(r, &ids);
	tg_log(TG_LOG_WARN, "upstream_conn_failed", TG_LS("origin", o->name),
	    TG_LS("host", o->hosthdr), UP_IDS(ids));
	free(c);
	return NULL;
}

static void
conn_free(struct up_conn *c)
{
	SSL *ssl;

	/* The bufferevent may outlive evhttp_connection_free while deferred
	 * callbacks hold a reference: nothing of it may point at c. */
	if (c->o->tls && (ssl = bufferevent_openssl_get_ssl(c->bev)) != NULL) {
		SSL_set_app_data(ssl, NULL);
		SSL_set_info_callback(ssl, NULL);
	}
	evhttp_connection_set_closecb(c->evcon, NULL, NULL);
	evbuffer_remove_cb_entry(bufferevent_get_output(c->bev), c->out_cb);
	evbuffer_remove_cb_entry(bufferevent_get_input(c->bev), c->in_cb);
	evhttp_connection_free(c->evcon);
	event_free(c->ctimer);
	free(c);
}

void
tg_upstream_conn_kill(struct up_conn *c)
{
	struct up_origin *o = c->o;

	switch (c->state) {
	case UP_CONN_IDLE:
		TAILQ_REMOVE(&o->idle, c, entry);
		o->nidle--;
		break;
	case UP_CONN_BUSY:
		TAILQ_REMOVE(&o->busy, c, entry);
		o->nbusy--;
		break;
	case UP_CONN_DEAD:
		return;
	}
	c->state = UP_CONN_DEAD;
	c->r = NULL;
	TAILQ_INSERT_TAIL(&o->u->dead, c, entry);
	bufferevent_disable(c->bev, EV_READ | EV_WRITE);
	evtimer_del(c->ctimer);
	tg_upstream_pump_kick(o->u);
}

void
tg_upstream_conn_release(struct up_conn *c, int reusable)
{
	struct up_origin *o = c->o;

	c->r = NULL;
	c->nreq++;
	if (!reusable || c->closed || o->nidle >= o->u->opts.max_idle) {
		tg_upstream_conn_kill(c);
		return;
	}
	TAILQ_REMOVE(&o->busy, c, entry);
	o->nbusy--;
	/* Most recently used first: it is the least likely to be stale. */
	TAILQ_INSERT_HEAD(&o->idle, c, entry);
	o->nidle++;
	c->state = UP_CONN_IDLE;
	if (o->nqueued > 0)
		tg_upstream_pump_kick(o->u);
}

/* A connection for the head request: 1 with *cp set (NULL if one could
 * not be made), 0 when the origin is at max_conns and r must wait. */
static int
pick(struct up_origin *o, const struct tg_up_req *r, struct up_conn **cp)
{
	struct up_conn *c;

	*cp = NULL;
	if (!r->fresh && (c = TAILQ_FIRST(&o->idle)) != NULL) {
		TAILQ_REMOVE(&o->idle, c, entry);
		o->nidle--;
		*cp = c;
		return 1;
	}
	if (o->nidle + o->nbusy >= o->u->opts.max_conns) {
		if (o->nidle == 0)
			return 0;
		tg_upstream_conn_kill(TAILQ_LAST(&o->idle, up_connq));
	}
	*cp = conn_new(o, r);
	return 1;
}

/* The request of class k to start next on o: the oldest at the head of
 * an owner's queue whose owner is under its cap; NULL when none may
 * start. A head passed over because of its owner's cap is counted as a
 * wait, once. */
static struct tg_up_req *
next_of_class(struct up_origin *o, int k)
{
	struct tg_up_req *best = NULL, *r;
	struct up_owner *w;

	TAILQ_FOREACH(w, &o->u->owners, entry) {
		if ((r = TAILQ_FIRST(&w->queue[o->index][k])) == NULL)
			continue;
		if (tg_upstream_owner_capped(r, o)) {
			if (!r->capped)
				w->waits++;
			r->capped = 1;
		} else if (best == NULL || r->seq < best->seq) {
			best = r;
		}
	}
	return best;
}

/* The first class's next request: a class with none waiting is skipped
 * without a look at the owners. */
static struct tg_up_req *
next_eligible(struct up_origin *o)
{
	struct tg_up_req *r;
	int k;

	for (k = 0; k < TG_UP_NCLASS; k++)
		if (o->u->class_queued[k] > 0 && (r = next_of_class(o, k)) != NULL)
			return r;
	return NULL;
}

static void
dispatch(struct up_origin *o)
{
	struct tg_up_req *r;
	struct up_conn *c;
	int gate;

	while (o->nqueued > 0 && (r = next_eligible(o)) != NULL) {
		/* pick fails only with every connection busy: the gate is
		 * asked once a connection can be had. */
		if (o->nidle == 0 && o->nbusy >= o->u->opts.max_conns)
			break;
		if (o->u->gate.take != NULL && (gate = tg_upstream_gate_admit(o->u, r)) <= 0) {
			if (gate == 0)
				break;
			tg_upstream_req_expire(r);	/* may queue or cancel: read afresh */
			continue;
		}
		pick(o, r, &c);
		tg_upstream_dequeue(r);
		if (c == NULL) {
			tg_upstream_gate_put(r, 1);
			tg_upstream_req_fail_start(r);
			continue;
		}
		c->state = UP_CONN_BUSY;
		TAILQ_INSERT_TAIL(&o->busy, c, entry);
		o->nbusy++;
		tg_upstream_req_start(r, c);
	}
}

static void
on_pump(evutil_socket_t fd, short what, void *arg)
{
	struct tg_upstream *u = arg;
	struct up_conn *c;
	int i;

	while ((c = TAILQ_FIRST(&u->dead)) != NULL) {
		TAILQ_REMOVE(&u->dead, c, entry);
		conn_free(c);
	}
	for (i = 0; i < u->norigins; i++)
		dispatch(&u->origin[i]);
}

static int
is_ip(const char *host)
{
	struct in6_addr a6;
	struct in_addr a4;

	return inet_pton(AF_INET, host, &a4) == 1 || inet_pton(AF_INET6, host, &a6) == 1;
}

static int
origin_parse(struct up_origin *o, const struct evhttp_uri *uri, const char *url,
    struct tg_err *err)
{
	const char *scheme = evhttp_uri_get_scheme(uri), *host = evhttp_uri_get_host(uri);
	const char *path = evhttp_uri_get_path(uri);
	int port = evhttp_uri_get_port(uri), defport;
	size_t n;

	if (scheme == NULL || (strcasecmp(scheme, "http") != 0 &&
	    strcasecmp(scheme, "https") != 0)) {
		tg_err_set(err, "%s URL '%s': scheme must be http or https", o->name, url);
		return -1;
	}
	if (host == NULL || *host == '\0' || evhttp_uri_get_userinfo(uri) != NULL ||
	    evhttp_uri_get_query(uri) != NULL || evhttp_uri_get_fragment(uri) != NULL ||
	    port == 0) {
		tg_err_set(err, "%s URL '%s': want scheme://host[:port][/base]", o->name, url);
		return -1;
	}
	o->tls = strcasecmp(scheme, "https") == 0;
	defport = o->tls ? 443 : 80;
	o->port = port > 0 ? port : defport;
	n = strlen(host);
	o->host = host[0] == '[' ? tg_xstrndup(host + 1, n - 2) : tg_xstrdup(host);
	o->is_ip = is_ip(o->host);
	o->hosthdr = port > 0 && port != defport ? tg_xasprintf("%s:%d", host, port) :
	    tg_xstrdup(host);
	n = path ? strlen(path) : 0;
	while (n > 0 && path[n - 1] == '/')
		n--;
	o->base_path = tg_xstrndup(path ? path : "", n);
	return 0;
}

static int
origin_init(struct tg_upstream *u, int i, const char *url, struct tg_err *err)
{
	struct up_origin *o = &u->origin[i];
	struct evhttp_uri *uri;
	int rc;

	o->name = i == 0 ? "primary" : "fallback";
	o->index = i;
	if ((uri = evhttp_uri_parse(url)) == NULL) {
		tg_err_set(err, "%s URL '%s' does not parse", o->name, url);
		return -1;
	}
	rc = origin_parse(o, uri, url, err);
	evhttp_uri_free(uri);
	if (rc == 0 && !o->is_ip && u->dns == NULL) {
		tg_err_set(err, "%s URL '%s': a host name needs an evdns_base", o->name, url);
		rc = -1;
	}
	return rc;
}

/* Defaults of the two-origin options (health.c). */
static void
health_opts(struct tg_upstream *u)
{
	struct tg_upstream_opts *o = &u->opts;

	if (o->eject_after == 0)
		o->eject_after = UP_EJECT_AFTER;
	if (o->eject_base_ms <= 0)
		o->eject_base_ms = UP_EJECT_BASE_MS;
	if (o->eject_max_ms <= 0)
		o->eject_max_ms = UP_EJECT_MAX_MS;
	if (o->eject_max_ms < o->eject_base_ms)
		o->eject_max_ms = o->eject_base_ms;
	if (o->probe_interval_ms <= 0)
		o->probe_interval_ms = UP_PROBE_INTERVAL_MS;
	if (o->retry_budget_pct <= 0)
		o->retry_budget_pct = UP_RETRY_BUDGET_PCT;
	if (o->retry_budget_min <= 0)
		o->retry_budget_min = UP_RETRY_BUDGET_MIN;
	if (o->retry_after_max_ms <= 0)
		o->retry_after_max_ms = UP_RETRY_AFTER_MAX_MS;
	u->probe_path = tg_xstrdup(o->probe_path != NULL && *o->probe_path == '/' ?
	    o->probe_path : "/");
	o->probe_path = u->probe_path;
}

static void
opts_init(struct tg_upstream *u, const struct tg_upstream_opts *opts)
{
	struct tg_upstream_opts *o = &u->opts;

	if (opts != NULL)
		*o = *opts;
	else
		o->tls_verify = 1;
	if (o->connect_timeout_ms <= 0)
		o->connect_timeout_ms = UP_CONNECT_TIMEOUT_MS;
	if (o->read_timeout_ms <= 0)
		o->read_timeout_ms = UP_READ_TIMEOUT_MS;
	if (o->max_conns == 0)
		o->max_conns = UP_MAX_CONNS;
	if (o->max_idle == 0 || o->max_idle > o->max_conns)
		o->max_idle = o->max_conns;
	if (o->max_conns_per_owner == 0)
		o->max_conns_per_owner = o->max_conns > 1 ? o->max_conns / 2 : 1;
	if (o->max_conns_per_owner > o->max_conns)
		o->max_conns_per_owner = o->max_conns;
	if (o->queue_timeout_ms == 0)
		o->queue_timeout_ms = UP_QUEUE_TIMEOUT_MS;
	u->ca_file = o->ca_file ? tg_xstrdup(o->ca_file) : NULL;
	o->ca_file = u->ca_file;
	health_opts(u);
}

static struct up_owner *
owner_new(struct tg_upstream *u, const char *name)
{
	struct up_owner *w = tg_xcalloc(1, sizeof(*w));

	w->name = name != NULL ? tg_xstrdup(name) : NULL;
	int k;

	for (k = 0; k < TG_UP_NCLASS; k++) {
		TAILQ_INIT(&w->queue[0][k]);
		TAILQ_INIT(&w->queue[1][k]);
	}
	TAILQ_INSERT_TAIL(&u->owners, w, entry);
	return w;
}

/* Owners are few (the tags come from a bounded set): a list will do. */
static struct up_owner *
owner_get(struct tg_upstream *u, const char *name)
{
	struct up_owner *w;

	if (name == NULL)
		return u->untagged;
	TAILQ_FOREACH(w, &u->owners, entry)
		if (w->name != NULL && strcmp(w->name, name) == 0)
			return w;
	return owner_new(u, name);
}

void
tg_up_req_set_owner_class(struct tg_up_req *r, const char *owner, enum tg_up_class k)
{
	struct up_origin *o = r->o;
	int queued = r->queued;

	if (r->c != NULL || r->done || r->cancelled)
		return;		/* started already: too late to count it */
	if (queued)
		tg_upstream_dequeue(r);
	r->w = owner_get(r->u, owner);
	if ((unsigned)k < TG_UP_NCLASS)
		r->klass = (int)k;
	if (queued)
		tg_upstream_enqueue(o, r, 0);
}

void
tg_up_req_set_owner(struct tg_up_req *r, const char *owner)
{
	tg_up_req_set_owner_class(r, owner, (enum tg_up_class)r->klass);
}

struct tg_upstream *
tg_upstream_new(struct event_base *base, struct evdns_base *dns, const char *url,
    const char *fallback_url, const struct tg_upstream_opts *opts, struct tg_err *err)
{
	struct tg_upstream *u = tg_xcalloc(1, sizeof(*u));
	int i;

	u->base = base;
	u->dns = dns;
	TAILQ_INIT(&u->dead);
	TAILQ_INIT(&u->live);
	TAILQ_INIT(&u->owners);
	TAILQ_INIT(&u->aging);
	for (i = 0; i < 2; i++) {
		u->origin[i].u = u;
		TAILQ_INIT(&u->origin[i].idle);
		TAILQ_INIT(&u->origin[i].busy);
	}
	u->untagged = owner_new(u, NULL);
	opts_init(u, opts);
	u->pump = event_new(base, -1, 0, on_pump, u);
	u->deadline = evtimer_new(base, on_deadline, u);
	u->gate_timer = evtimer_new(base, tg_upstream_on_gate_timer, u);
	if (origin_init(u, 0, url, err) != 0)
		goto fail;
	u->norigins = 1;
	if (fallback_url != NULL && *fallback_url != '\0') {
		if (origin_init(u, 1, fallback_url, err) != 0)
			goto fail;
		u->norigins = 2;
	}
	for (i = 0; i < u->norigins; i++)
		u->origin[i].h.probe = evtimer_new(base, tg_upstream_on_probe, &u->origin[i]);
	if ((u->origin[0].tls || u->origin[1].tls) &&
	    (u->ssl_ctx = tg_upstream_tls_ctx_new(&u->opts, err)) == NULL)
		goto fail;
	if (u->ssl_ctx != NULL && !u->opts.tls_verify)
		tg_log(TG_LOG_WARN, "upstream_tls_verify_off", TG_LS("host", u->origin[0].hosthdr));
	return u;
fail:
	tg_upstream_free(u);
	return NULL;
}

static void
origin_free(struct up_origin *o)
{
	struct up_conn *c;

	while ((c = TAILQ_FIRST(&o->idle)) != NULL) {
		TAILQ_REMOVE(&o->idle, c, entry);
		conn_free(c);
	}
	while ((c = TAILQ_FIRST(&o->busy)) != NULL) {
		TAILQ_REMOVE(&o->busy, c, entry);
		conn_free(c);
	}
	tg_upstream_health_free(o);
	free(o->host);
	free(o->connect);
	free(o->hosthdr);
	free(o->base_path);
}

void
tg_upstream_free(struct tg_upstream *u)
{
	struct tg_up_req *r;
	struct up_owner *w;
	struct up_conn *c;
	int i;

	if (u == NULL)
		return;
	while ((r = TAILQ_FIRST(&u->live)) != NULL)
		tg_upstream_req_free(r);
	for (i = 0; i < 2; i++)
		origin_free(&u->origin[i]);
	while ((c = TAILQ_FIRST(&u->dead)) != NULL) {
		TAILQ_REMOVE(&u->dead, c, entry);
		conn_free(c);
	}
	if (u->pump != NULL)
		event_free(u->pump);
	if (u->deadline != NULL)
		event_free(u->deadline);
	if (u->gate_timer != NULL)
		event_free(u->gate_timer);
	while ((w = TAILQ_FIRST(&u->owners)) != NULL) {
		TAILQ_REMOVE(&u->owners, w, entry);
		free(w->name);
		free(w);
	}
	SSL_CTX_free(u->ssl_ctx);
	free(u->ca_file);
	free(u->probe_path);
	free(u);
}

int
tg_upstream_set_connect_addr(struct tg_upstream *u, const char *addr, struct tg_err *err)
{
	struct up_origin *o = &u->origin[0];

	if (addr == NULL || !is_ip(addr)) {
		tg_err_set(err, "connect address '%s' is not an IP address", addr ? addr : "");
		return -1;
	}
	free(o->connect);
	o->connect = tg_xstrdup(addr);
	return 0;
}

const char *
tg_upstream_base_path(const struct tg_upstream *u)
{
	return u->origin[0].base_path;
}

void
tg_upstream_get_stats(const struct tg_upstream *u, struct tg_upstream_stats *st)
{
	int i;

	memset(st, 0, sizeof(*st));
	for (i = 0; i < u->norigins; i++) {
		st->idle += u->origin[i].nidle;
		st->busy += u->origin[i].nbusy;
		st->queued += u->origin[i].nqueued;
	}
	st->requests = u->requests;
	st->retries = u->retries;
	st->failovers = u->failovers;
	st->connect_errors = u->connect_errors;
	st->queue_timeouts = u->queue_timeouts;
	st->down = u->down;
	st->reads = u->reads;
}

void
tg_upstream_foreach_owner(const struct tg_upstream *u, tg_upstream_owner_cb cb, void *arg)
{
	struct tg_upstream_owner_stats st;
	const struct up_owner *w;

	TAILQ_FOREACH(w, &u->owners, entry) {
		st.owner = w->name;
		st.busy = w->busy[0] + w->busy[1];
		st.queued = w->nqueued[0] + w->nqueued[1];
		st.waits = w->waits;
		st.timeouts = w->timeouts;
		cb(&st, arg);
	}
}
