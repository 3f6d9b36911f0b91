/*
 * hook_fetch.c - obtaining the payload of a waiting webhook job: in
 * deliver mode the gateway polls the vendor's GET /export?correlationId=
 * with its own token, every webhooks.poll_interval (growing with the
 * job's age; a 429 or 503 waits as its Retry-After says), and streams
 * the ready export into the outbox's payload file, which commits the job
 * for the worker. Before each poll it asks the poll multiplexer, which may hold a
 * fresh answer because a caller polls the same job. A 404 (unknown or
 * expired export) or webhooks.payload_timeout gives the job up (dead);
 * transport errors and other answers are tried again later. In relay mode
 * the fetcher only keeps the deadline: the vendor's delivery arrives at
 * callbacks.c.
 *
 * One struct wh_fetch per waiting job, owned by h->fetches (keyed by job
 * id); it ends by removing itself from the map from its own timer, never
 * inside an upstream callback.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/clock.h"
#include "tidegate/http.h"
#include "tidegate/log.h"
#include "tidegate/map.h"
#include "hooks_int.h"

#define GROWTH_DIVISOR	10			/* interval: at least age / 10 … */
#define MAX_INTERVAL_MS	(5 * 60 * 1000)		/* … up to 5 minutes */
#define RETRY_AFTER_MAX	(3600 * 1000)

struct wh_fetch {
	struct wh_hooks *h;
	char id[TG_WEBHOOK_ID_LEN];
	char *cid;			/* NULL: wait for the vendor's relay delivery */
	int64_t created;		/* wall ms: when the job was added */
	struct event *timer;
	struct gw_vcall *call;		/* the poll in flight */
	struct tg_outbox_payload *p;	/* open while a 200 streams in */
	int status;
	int over;			/* ended: the timer removes it */
	int job_gone;			/* the job no longer waits (NOT_FOUND/CONFLICT) */
	int write_failed;
	int64_t retry_after_ms;
	int64_t bytes;
};

static const char *const result_labels[] = {
	"result=\"ready\"", "result=\"pending\"", "result=\"cached\"", "result=\"failed\"",
	"result=\"abandoned\"",
};
enum { R_READY, R_PENDING, R_CACHED, R_FAILED, R_ABANDONED };

static void
count(struct wh_fetch *f, int r)
{
	tg_metrics_inc(f->h->gw->metrics, "tidegate_webhook_payload_polls_total",
	    result_labels[r], 1);
}

void
wh_fetch_free(void *arg)
{
	struct wh_fetch *f = arg;

	gw_vcall_cancel(f->call);
	tg_outbox_payload_abort(f->p);
	event_free(f->timer);
	free(f->cid);
	free(f);
}

static void
arm(struct wh_fetch *f, int64_t ms)
{
	struct timeval tv;

	if (ms < 0)
		ms = 0;
	tv.tv_sec = (time_t)(ms / 1000);
	tv.tv_usec = (suseconds_t)(ms % 1000 * 1000);
	evtimer_add(f->timer, &tv);
}

/* Removal happens from the timer, outside any upstream callback. */
static void
end(struct wh_fetch *f)
{
	f->over = 1;
	arm(f, 0);
}

static int64_t
deadline(const struct wh_fetch *f)
{
	return f->created + f->h->gw->rt->cfg.wh_payload_timeout;
}

/* The next poll: the vendor's Retry-After when it asked for one (429,
 * 503), else the interval grown with the job's age; never past the
 * deadline. */
static void
again(struct wh_fetch *f, int64_t retry_after_ms)
{
	const struct gw_config *c = &f->h->gw->rt->cfg;
	int64_t now = tg_clock_now_ms(), d = c->wh_poll_interval;
	int64_t floor = c->wh_poll_interval < 1000 ? c->wh_poll_interval : 1000;

	if ((now - f->created) / GROWTH_DIVISOR > d)
		d = (now - f->created) / GROWTH_DIVISOR;
	if (d > MAX_INTERVAL_MS && c->wh_poll_interval <= MAX_INTERVAL_MS)
		d = MAX_INTERVAL_MS;
	if (retry_after_ms >= 0)
		d = retry_after_ms < floor ? floor : retry_after_ms > RETRY_AFTER_MAX ?
		    RETRY_AFTER_MAX : retry_after_ms;
	if (now + d > deadline(f))
		d = deadline(f) - now;
	arm(f, d);
}

static void
abandon(struct wh_fetch *f, const char *reason)
{
	struct tg_err err;
	int rc;

	rc = tg_outbox_abandon(f->h->ob, f->id, reason, tg_clock_now_ms(), &err);
	if (rc == -1) {
		tg_log(TG_LOG_ERROR, "webhook_abandon_failed", TG_LS("id", f->id),
		    TG_LS("error", err.msg));
		again(f, -1);
		return;
	}
	if (rc == 0) {
		count(f, R_ABANDONED);
		tg_metrics_inc(f->h->gw->metrics, "tidegate_webhook_dead_letters_total",
		    "reason=\"abandoned\"", 1);
		tg_log(TG_LOG_WARN, "webhook_abandoned", TG_LS("id", f->id),
		    TG_LS("correlationId", f->cid), TG_LS("reason", reason));
	}
	end(f);
}

static void
ready(struct wh_fetch *f, int64_t bytes, int cached)
{
	count(f, cached ? R_CACHED : R_READY);
	tg_log(TG_LOG_INFO, "webhook_payload_ready", TG_LS("id", f->id),
	    TG_LS("correlationId", f->cid), TG_LI("bytes", bytes),
	    TG_LS("from", cached ? "poll_cache" : "vendor"));
	end(f);
}

/* ---- the vendor's answer ---- */

/* The poll is over (from its last callback, where freeing it is safe). */
static void
release(struct wh_fetch *f)
{
	gw_vcall_cancel(f->call);
	f->call = NULL;
}

static void
on_head(struct gw_vcall *c, int status, const struct evkeyvalq *headers, void *arg)
{
	struct wh_fetch *f = arg;
	struct tg_err err;
	int rc;

	f->status = status;
	f->retry_after_ms = tg_http_retry_after_ms(headers);
	if (status != 200)
		return;
	if ((f->p = tg_outbox_payload_open(f->h->ob, f->id, &rc, &err)) == NULL) {
		f->job_gone = rc == TG_OUTBOX_NOT_FOUND || rc == TG_OUTBOX_CONFLICT;
		f->write_failed = !f->job_gone;
		tg_log(TG_LOG_WARN, "webhook_payload_open", TG_LS("id", f->id),
		    TG_LS("error", err.msg));
	}
}

static void
too_large(struct wh_fetch *f)
{
	char why[120];

	release(f);
	tg_outbox_payload_abort(f->p);
	f->p = NULL;
	snprintf(why, sizeof(why), "the export is larger than webhooks.max_payload (%lld bytes)",
	    (long long)f->h->gw->rt->cfg.wh_max_payload);
	abandon(f, why);
}

static void
on_body(struct gw_vcall *c, struct evbuffer *buf, void *arg)
{
	struct wh_fetch *f = arg;
	struct tg_err err;

	if (f->p == NULL) {
		evbuffer_drain(buf, evbuffer_get_length(buf));
		return;
	}
	f->bytes += (int64_t)evbuffer_get_length(buf);
	if (f->bytes > f->h->gw->rt->cfg.wh_max_payload) {
		too_large(f);
		return;
	}
	if (tg_outbox_payload_write(f->p, buf, &err) != 0) {
		tg_log(TG_LOG_ERROR, "webhook_payload_write", TG_LS("id", f->id),
		    TG_LS("error", err.msg));
		tg_outbox_payload_abort(f->p);
		f->p = NULL;
		f->write_failed = 1;
		evbuffer_drain(buf, evbuffer_get_length(buf));
	}
}

static void
commit(struct wh_fetch *f)
{
	struct tg_err err;
	int64_t bytes = f->bytes;
	int rc;

	rc = tg_outbox_payload_commit(f->p, tg_clock_now_ms(), &err);
	f->p = NULL;
	if (rc == 0) {
		ready(f, bytes, 0);
	} else if (rc == TG_OUTBOX_NOT_FOUND || rc == TG_OUTBOX_CONFLICT) {
		end(f);
	} else {
		tg_log(TG_LOG_ERROR, "webhook_payload_commit", TG_LS("id", f->id),
		    TG_LS("error", err.msg));
		count(f, R_FAILED);
		again(f, -1);
	}
}

/* A 401 here came after the call's one replay with a fresh token. */
static void
on_done(struct gw_vcall *c, enum tg_up_error err, void *arg)
{
	struct wh_fetch *f = arg;
	char why[160];

	release(f);
	if (err == TG_UP_OK && f->status == 200 && f->p != NULL) {
		commit(f);
		return;
	}
	tg_outbox_payload_abort(f->p);
	f->p = NULL;
	if (f->job_gone) {
		end(f);
	} else if (err == TG_UP_OK && f->status == 404) {
		snprintf(why, sizeof(why), "the vendor has no export %s (404: unknown or expired)",
		    f->cid);
		abandon(f, why);
	} else if (err == TG_UP_OK && f->status == 202) {
		count(f, R_PENDING);
		again(f, -1);	/* its Retry-After is an estimate; ours is the interval */
	} else {
		count(f, R_FAILED);
		tg_log(TG_LOG_WARN, "webhook_payload_poll_failed", TG_LS("id", f->id),
		    TG_LS("correlationId", f->cid), TG_LI("status", f->status),
		    TG_LS("error", err != TG_UP_OK ? tg_up_error_str(err) : NULL));
		again(f, f->status == 429 || f->status == 503 ? f->retry_after_ms : -1);
	}
}


/* ---- polling ---- */

/* What the multiplexer keys a gateway-token poll of this export by. */
static char *
export_uri(const struct wh_fetch *f, const struct gw_runtime *rt)
{
	const struct gw_service *s = &rt->svc[GW_DEX];
	char *enc = evhttp_uriencode(f->cid, -1, 0);
	char *uri = tg_xasprintf("%s%s?correlationId=%s", tg_upstream_base_path(s->api),
	    s->cfg->routes[TG_OP_DEX_EXPORT_GET], enc);

	free(enc);
	return uri;
}

static void
on_no_token(struct gw_vcall *c, const char *why, int retry_after_s, void *arg)
{
	struct wh_fetch *f = arg;

	release(f);
	count(f, R_FAILED);
	tg_log(TG_LOG_WARN, "webhook_payload_poll_failed", TG_LS("id", f->id),
	    TG_LS("correlationId", f->cid), TG_LS("error", why));
	again(f, retry_after_s > 0 ? (int64_t)retry_after_s * 1000 : -1);
}

/* Each attempt (a 401 replayed is a second one) starts afresh. */
static void
poll_headers(struct gw_vcall *c, struct evkeyvalq *h, void *arg)
{
	struct wh_fetch *f = arg;

	evhttp_add_header(h, "Accept", "application/json");
	f->status = 0;
	f->bytes = 0;
	f->job_gone = f->write_failed = 0;
}

static const struct gw_vcall_cbs call_cbs = { on_head, on_body, on_done, on_no_token,
	poll_headers };

static void
poll_vendor(struct wh_fetch *f)
{
	struct gw_vcall_req q;
	char *uri = export_uri(f, f->h->gw->rt);

	memset(&q, 0, sizeof(q));
	q.rt = f->h->gw->rt;
	q.service = GW_DEX;
	q.method = EVHTTP_REQ_GET;
	q.uri = uri;
	f->call = gw_vcall_start(&q, &call_cbs, f);
	free(uri);
}

/* 1 when the multiplexer's fresh answer decided this turn. */
static int
from_cache(struct wh_fetch *f)
{
	struct gw_peek pk;
	struct tg_err err;
	char *uri = export_uri(f, f->h->gw->rt);
	int hit = gw_answer_peek(f->h->gw, GW_DEX, uri, &pk), rc;

	free(uri);
	if (!hit || (pk.status != 200 && pk.status != 202 && pk.status != 429))
		return 0;
	if (pk.status != 200) {
		count(f, R_PENDING);
		again(f, -1);
		return 1;
	}
	if ((int64_t)pk.len > f->h->gw->rt->cfg.wh_max_payload)
		return 0;	/* the vendor's stream gives the size error */
	rc = tg_outbox_payload_set(f->h->ob, f->id, pk.body, pk.len, tg_clock_now_ms(), &err);
	if (rc == 0)
		ready(f, (int64_t)pk.len, 1);
	else if (rc == TG_OUTBOX_NOT_FOUND || rc == TG_OUTBOX_CONFLICT)
		end(f);
	else
		return 0;
	return 1;
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct wh_fetch *f = arg;
	char id[TG_WEBHOOK_ID_LEN];

	if (f->over) {
		memcpy(id, f->id, sizeof(id));
		tg_map_del(f->h->fetches, id);	/* frees f */
		return;
	}
	if (tg_clock_now_ms() >= deadline(f)) {
		abandon(f, f->cid != NULL ? "the export data did not come within "
		    "webhooks.payload_timeout" : "the vendor's relay delivery did not come within "
		    "webhooks.payload_timeout");
		return;
	}
	if (f->cid == NULL) {
		again(f, deadline(f) - tg_clock_now_ms());
		return;
	}
	if (!from_cache(f))
		poll_vendor(f);
}

/* ---- API ---- */

void
wh_fetch_start(struct wh_hooks *h, const char *id, const char *cid, int64_t created_ms,
    int64_t delay_ms)
{
	struct wh_fetch *f;

	if (h->gw->draining || tg_map_get(h->fetches, id) != NULL)
		return;		/* the next start resumes it */
	f = tg_xcalloc(1, sizeof(*f));
	f->h = h;
	snprintf(f->id, sizeof(f->id), "%s", id);
	f->cid = cid != NULL && *cid != '\0' ? tg_xstrdup(cid) : NULL;
	f->created = created_ms;
	f->retry_after_ms = -1;
	f->timer = evtimer_new(h->gw->base, on_timer, f);
	tg_map_put(h->fetches, f->id, f);
	arm(f, delay_ms);
}

void
wh_fetch_stop(struct wh_hooks *h, const char *id)
{
	struct wh_fetch *f = tg_map_get(h->fetches, id);

	if (f != NULL && f->call == NULL)
		tg_map_del(h->fetches, id);
	else if (f != NULL && !f->over)
		f->over = 1;	/* its poll's end removes it */
}
