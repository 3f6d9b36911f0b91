/*
 * flush.c - a reply handed to libevent until it is written: counted in
 * gw->unflushed (a drain must not end the process while a reply still
 * sits in a buffer), and its client watched for client_send_timeout. A
 * client that takes no byte of its answer for that long while bytes wait
 * for it is reset (its answer is truncated, so it must not look complete);
 * libevent then sees the error and closes the connection, and a request
 * still relaying (proxy.c) ends there, cancelling its vendor request so
 * the vendor connection goes back to the pool. Called by proxy.c.
 *
 * The tracker belongs to its request while the request lives (r->flush)
 * and to the connection's close callback after it (gw_flush_handover);
 * it ends when evhttp reports the reply written (on_complete) or the
 * connection closes, whichever comes first.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/event_struct.h>
#include <event2/http.h>

#include "tidegate/clock.h"
#include "tidegate/frontdoor.h"
#include "tidegate/http.h"
#include "tidegate/log.h"
#include "gw.h"

struct gw_flush {
	struct gw *gw;
	struct gw_req *r;		/* the request while it lives, else NULL */
	struct evhttp_connection *conn;
	struct evbuffer *out;		/* the connection's output buffer (watched) */
	struct evbuffer_cb_entry *watch;	/* NULL: not watched */
	struct event timer;
	int64_t timeout;		/* client_send_timeout, ms */
	int64_t since;			/* the client last took bytes, or bytes began to wait */
	int dropped;			/* reset for its send timeout */
	const char *labels;		/* service="dex" or service="sim" */
	char id[TG_UUID_LEN];		/* the request's, for the log line */
};

/* Bytes leaving the buffer went to the kernel, i.e. the client made room;
 * bytes added to an empty buffer start a wait. */
static void
on_out(struct evbuffer *buf, const struct evbuffer_cb_info *info, void *arg)
{
	struct gw_flush *f = arg;

	if (info->n_deleted > 0 || (info->orig_size == 0 && info->n_added > 0))
		f->since = tg_clock_turn_ms(f->gw->base);
}

static void
arm(struct gw_flush *f, int64_t ms)
{
	struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000 * 1000) };

	evtimer_add(&f->timer, &tv);
}

static void
drop(struct gw_flush *f, int64_t idle)
{
	f->dropped = 1;
	tg_metrics_inc(f->gw->metrics, "tidegate_client_send_timeouts_total", f->labels, 1);
	tg_log(TG_LOG_WARN, "client_send_timeout", TG_LS("id", f->id),
	    TG_LI("pending", evbuffer_get_length(f->out)), TG_LI("ms", idle));
	tg_http_conn_reset(f->conn);
}

/* An empty buffer is no stall (the answer itself is slow): the clock only
 * runs while bytes wait for the client. */
static void
on_send_timer(evutil_socket_t fd, short what, void *arg)
{
	struct gw_flush *f = arg;
	int64_t idle = tg_clock_turn_ms(f->gw->base) - f->since;

	if (evbuffer_get_length(f->out) == 0)
		arm(f, f->timeout);
	else if (idle < f->timeout)
		arm(f, f->timeout - idle);
	else
		drop(f, idle);
}

static void
flush_free(struct gw_flush *f)
{
	struct gw *gw = f->gw;

	if (f->watch != NULL) {
		evbuffer_remove_cb_entry(f->out, f->watch);
		evtimer_del(&f->timer);
	}
	gw->unflushed--;
	free(f);
	gw_maybe_exit(gw);
}

/* evhttp wrote the whole reply (the connection is still open). */
static void
on_flushed(struct evhttp_request *req, void *arg)
{
	struct gw_flush *f = arg;

	/* Only if evhttp_send_reply_end ran before finish(): the request lets
	 * go of the connection here, as evhttp may free it right after. */
	if (f->r != NULL) {
		f->r->flush = NULL;
		f->r->conn = NULL;
	}
	tg_frontdoor_set_closecb(f->conn, NULL, NULL);
	flush_free(f);
}

static void
on_conn_close(struct evhttp_connection *conn, void *arg)
{
	flush_free(arg);
}

void
gw_flush_start(struct gw_req *r)
{
	struct gw_flush *f = tg_xcalloc(1, sizeof(*f));
	struct bufferevent *bev = evhttp_connection_get_bufferevent(r->conn);

	f->gw = r->gw;
	f->r = r;
	f->conn = r->conn;
	f->labels = r->svc->index == GW_SIM ? "service=\"sim\"" : "service=\"dex\"";
	memcpy(f->id, r->id, sizeof(f->id));
	f->timeout = r->rt->cfg.client_send_timeout;
	r->gw->unflushed++;
	r->flush = f;
	tg_frontdoor_set_on_complete(r->req, on_flushed, f);
	if (f->timeout <= 0 || bev == NULL)
		return;
	f->out = bufferevent_get_output(bev);
	f->since = tg_clock_turn_ms(f->gw->base);
	f->watch = evbuffer_add_cb(f->out, on_out, f);
	evtimer_assign(&f->timer, r->gw->base, on_send_timer, f);
	arm(f, f->timeout);
}

void
gw_flush_handover(struct gw_req *r)
{
	struct gw_flush *f = r->flush;

	if (r->conn == NULL)
		return;
	if (f != NULL)
		f->r = NULL;
	r->flush = NULL;
	tg_frontdoor_set_closecb(r->conn, f != NULL ? on_conn_close : NULL, f);
}

int
gw_flush_closed(struct gw_req *r)
{
	struct gw_flush *f = r->flush;
	int dropped;

	if (f == NULL)
		return 0;
	dropped = f->dropped;
	r->flush = NULL;
	flush_free(f);
	return dropped;
}

/*
 * The bytes evhttp was just given for the client are written now, in the
 * loop turn they came in, rather than when EV_WRITE fires a turn later:
 * for a relayed answer that is one write per read of the vendor, and no
 * event armed and disarmed for each (bench/s7_sizes.py). tg_http_write_now
 * turns EV_WRITE off again when all went (evhttp turns it on with its next
 * write) and leaves the rest, or an error, to the bufferevent, which
 * writes it, calls evhttp back when the buffer is empty and reports the
 * error. TLS connections are left to their bufferevent.
 */
int
gw_flush_write(struct gw_req *r)
{
	struct gw_flush *f = r->flush;

	if (f == NULL)
		return 0;
	return tg_http_write_now(evhttp_connection_get_bufferevent(f->conn));
}
