/*
 * hook_fetch.c - obtaining the payload of a waiting webhook job: in
 * deliver mode the gateway polls the vendor's GET /export?correlationId=
 * with its own token, every webhooks.poll_interval (growing with the
 * job's age; a 429 or 503 waits as its Retry-After says), and streams
 * the ready export through the state seam into the job's payload (one
 * append in flight; the poll pauses while the writer lags, so memory
 * stays bounded), whose commit readies the job for the worker. Before each poll it asks the poll multiplexer, which may hold a
 * fresh answer because a caller polls the same job. A 404 (unknown or
 * expired export) or webhooks.payload_timeout gives the job up (dead);
 * transport errors and other answers are tried again later. In relay mode
 * the fetcher only keeps the deadline: the vendor's delivery arrives at
 * callbacks.c.
 *
 * The payload is written under the quota (webhooks.payload_max_bytes and
 * a key's share): an append that would pass it is refused, the poll is
 * dropped with what was written, and the job stays waiting: its export
 * is polled again later (while the payloads held are at the cap, only the
 * bytes held are asked, not the vendor), until payload_timeout gives it
 * up with the quota as the reason. A fresh answer from the poll
 * multiplexer is written the same way.
 *
 * One struct wh_fetch per waiting job, owned by h->fetches (keyed by job
 * id) with the one seam operation it waits on; it ends by removing itself
 * from the map from its own timer, never inside an upstream or seam
 * callback.
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
#define HIGH_WATER	(1024 * 1024)		/* body waiting for the writer: pause the poll */

struct wh_fetch {
	struct wh_hooks *h;
	char id[TG_WEBHOOK_ID_LEN];
	char *cid;			/* NULL: wait for the vendor's relay delivery */
	char *key;			/* the job's API key, or NULL */
	int64_t created;		/* wall ms: when the job was added */
	struct event *timer;
	struct gw_vcall *call;		/* the poll in flight */
	struct tg_state_op *op;		/* the seam operation in flight */
	unsigned gen;			/* which operation op belongs to */
	int busy;			/* an operation is in flight (op may be NULL) */
	struct tg_state_payload *w;	/* open while a 200 streams in */
	struct evbuffer *buf;		/* body not yet handed to an append */
	int opening, appending, paused, body_over;
	int status;
	int over;			/* ended: the timer removes it */
	int silent;			/* a give-up the request side counts */
	int job_gone;			/* the job no longer waits (NOT_FOUND/CONFLICT) */
	int write_failed;
	int quota;			/* the last store was refused by the quota: */
#define Q_ALL	1			/* … the cap of all */
#define Q_KEY	2			/* … the key's share */
	int cached;			/* the body is the poll multiplexer's answer */
	int64_t retry_after_ms;
	int64_t bytes;
};

void
wh_quota_of(const struct wh_cfg *c, struct tg_outbox_quota *q)
{
	q->max_bytes = c->wh_payload_max_bytes;
	q->key_max_bytes = (int64_t)((double)c->wh_payload_max_bytes * c->wh_payload_key_share);
}

void
wh_quota_refused(struct gw *gw, const char *stage, const char *id, const char *why)
{
	char label[32];

	snprintf(label, sizeof(label), "stage=\"%s\"", stage);
	tg_metrics_inc(gw->metrics, "tidegate_webhook_quota_refusals_total", label, 1);
	tg_log(TG_LOG_WARN, "webhook_quota", TG_LS("stage", stage), TG_LS("webhook_id", id),
	    TG_LS("error", why));
}

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

/* ---- the seam operation in flight (one at a time) ---- */

/* Before a seam call: its number, for op_end. */
static unsigned
op_begin(struct wh_fetch *f)
{
	f->busy = 1;
	return ++f->gen;
}

/* After it: keep op unless the answer came during the call (a callback
 * may have started the next operation meanwhile). */
static void
op_end(struct wh_fetch *f, unsigned gen, struct tg_state_op *op)
{
	if (f->busy && f->gen == gen)
		f->op = op;
}

/* First thing in every callback. */
static void
op_done(struct wh_fetch *f)
{
	f->busy = 0;
	f->op = NULL;
}

/* The writer caught up (or is gone): read the vendor's answer again. */
static void
unpause(struct wh_fetch *f)
{
	if (f->paused && f->call != NULL)
		gw_vcall_resume(f->call);
	f->paused = 0;
}

/* Drop the payload being written and whatever waits for it. */
static void
writer_drop(struct wh_fetch *f)
{
	if (f->busy && (f->opening || f->appending)) {
		tg_state_cancel(f->op);
		op_done(f);
	}
	f->opening = f->appending = 0;
	tg_state_payload_abort(f->w);
	f->w = NULL;
	if (f->buf != NULL)
		evbuffer_drain(f->buf, evbuffer_get_length(f->buf));
	unpause(f);
}

/* ---- waiting for room in the quota ---- */

#define KEY(k)	((k) != NULL ? (k) : "")

static void
quota_unmark(struct wh_fetch *f)
{
	struct wh_hooks *h = f->h;
	uintptr_t n;

	if (f->quota == Q_ALL)
		h->quota_waits--;
	if (f->quota == Q_KEY) {
		n = (uintptr_t)tg_map_get(h->quota_key_waits, KEY(f->key));
		if (n > 1)
			tg_map_put(h->quota_key_waits, KEY(f->key), (void *)(n - 1));
		else
			tg_map_del(h->quota_key_waits, KEY(f->key));
	}
	f->quota = 0;
}

/* The store was refused (why says for which cap): f waits for room, and
 * new callbackUrls are refused meanwhile (callbacks.c). */
static void
quota_mark(struct wh_fetch *f, const char *why)
{
	struct wh_hooks *h = f->h;
	int kind = strstr(why, TG_OUTBOX_QUOTA_KEY_WHY) != NULL ? Q_KEY : Q_ALL;

	if (f->quota == kind)
		return;
	quota_unmark(f);
	f->quota = kind;
	if (kind == Q_ALL) {
		h->quota_waits++;
		return;
	}
	if (h->quota_key_waits == NULL)
		h->quota_key_waits = tg_map_new(NULL);
	tg_map_put(h->quota_key_waits, KEY(f->key),
	    (void *)((uintptr_t)tg_map_get(h->quota_key_waits, KEY(f->key)) + 1));
}

void
wh_quota_waits(const struct wh_hooks *h, const char *key, size_t *all, size_t *mine)
{
	*all = h->quota_waits;
	*mine = h->quota_key_waits != NULL ?
	    (size_t)(uintptr_t)tg_map_get(h->quota_key_waits, KEY(key)) : 0;
}

void
wh_fetch_free(void *arg)
{
	struct wh_fetch *f = arg;

	gw_vcall_cancel(f->call);
	tg_state_cancel(f->op);
	tg_state_payload_abort(f->w);
	if (f->buf != NULL)
		evbuffer_free(f->buf);
	event_free(f->timer);
	quota_unmark(f);
	free(f->cid);
	free(f->key);
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
	return f->created + wh_cfg(f->h->gw->rt)->wh_payload_timeout;
}

/* The next poll: the vendor's Retry-After when it asked for one (429,
 * 503), else the interval grown with the job's age; never past the
 * deadline. */
static void
again(struct wh_fetch *f, int64_t retry_after_ms)
{
	const struct wh_cfg *c = wh_cfg(f->h->gw->rt);
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

/* ---- giving up ---- */

static void
on_abandoned(const struct tg_state_res *res, void *arg)
{
	struct wh_fetch *f = arg;

	op_done(f);
	if (res->rc == TG_STATE_ERROR || tg_state_rc_down(res->rc)) {
		tg_log(TG_LOG_ERROR, "webhook_abandon_failed", TG_LS("webhook_id", f->id),
		    TG_LS("error", res->err.msg));
		again(f, -1);	/* the timer asks again (past the deadline: at once) */
		return;
	}
	if (res->rc == TG_STATE_OK && !f->silent) {
		count(f, R_ABANDONED);
		tg_metrics_inc(f->h->gw->metrics, "tidegate_webhook_dead_letters_total",
		    "reason=\"abandoned\"", 1);
	}
	end(f);
}

static void
abandon(struct wh_fetch *f, const char *reason)
{
	unsigned gen = op_begin(f);

	if (!f->silent)
		tg_log(TG_LOG_WARN, "webhook_abandoned", TG_LS("webhook_id", f->id),
		    TG_LS("correlationId", f->cid), TG_LS("reason", reason));
	op_end(f, gen, tg_state_outbox_abandon(f->h->st, f->id, reason, tg_clock_now_ms(),
	    on_abandoned, f));
}

static void
ready(struct wh_fetch *f, int64_t bytes, int cached)
{
	count(f, cached ? R_CACHED : R_READY);
	tg_log(TG_LOG_INFO, "webhook_payload_ready", TG_LS("webhook_id", f->id),
	    TG_LS("correlationId", f->cid), TG_LI("bytes", bytes),
	    TG_LS("from", cached ? "poll_cache" : "vendor"));
	tg_webhook_kick(f->h->w);	/* the seam announces nothing: wake the worker */
	end(f);
}

/* ---- the payload writer ---- */

static void over_quota(struct wh_fetch *f, const char *why);

static void
on_committed(const struct tg_state_res *res, void *arg)
{
	struct wh_fetch *f = arg;

	op_done(f);
	if (res->rc == TG_STATE_OK) {
		ready(f, f->bytes, f->cached);
	} else if (res->rc == TG_STATE_NOT_FOUND || res->rc == TG_STATE_CONFLICT) {
		end(f);
	} else if (res->rc == TG_STATE_REFUSED) {
		over_quota(f, res->err.msg);
	} else {
		tg_log(TG_LOG_ERROR, "webhook_payload_commit", TG_LS("webhook_id", f->id),
		    TG_LS("error", res->err.msg));
		count(f, R_FAILED);
		again(f, -1);
	}
}

static void pump(struct wh_fetch *f);

static void release(struct wh_fetch *f);

/* What a job waiting for room says as its last error (the admin API). */
static void
quota_note(char *buf, size_t n, const char *why)
{
	snprintf(buf, n, "waiting for room: %s (webhooks.payload_max_bytes, "
	    "webhooks.payload_key_share)", why);
}

static void
on_noted(const struct tg_state_res *res, void *arg)
{
	struct wh_fetch *f = arg;

	op_done(f);
	again(f, -1);
}

/* The payload does not fit the quota: drop what was written, stop reading
 * the export, say why on the job, and poll again later (it stays waiting). */
static void
over_quota(struct wh_fetch *f, const char *why)
{
	char note[400];
	unsigned gen;

	release(f);
	writer_drop(f);
	f->body_over = 0;
	quota_mark(f, why);
	wh_quota_refused(f->h->gw, "store", f->id, why);
	quota_note(note, sizeof(note), why);
	gen = op_begin(f);
	op_end(f, gen, tg_state_outbox_note(f->h->st, f->id, note, on_noted, f));
}

static void
on_appended(const struct tg_state_res *res, void *arg)
{
	struct wh_fetch *f = arg;

	op_done(f);
	f->appending = 0;
	if (res->rc == TG_STATE_REFUSED) {
		over_quota(f, res->err.msg);
		return;
	}
	if (res->rc != TG_STATE_OK) {
		tg_log(TG_LOG_ERROR, "webhook_payload_write", TG_LS("webhook_id", f->id),
		    TG_LS("error", res->err.msg));
		writer_drop(f);
		f->write_failed = 1;
	}
	pump(f);
}

static void
on_opened(const struct tg_state_res *res, struct tg_state_payload *w, void *arg)
{
	struct wh_fetch *f = arg;
	struct tg_outbox_quota q;

	op_done(f);
	f->opening = 0;
	f->w = w;
	if (w != NULL) {
		wh_quota_of(wh_cfg(f->h->gw->rt), &q);
		tg_state_payload_limit(w, &q);
	}
	if (res->rc != TG_STATE_OK) {
		f->job_gone = res->rc == TG_STATE_NOT_FOUND || res->rc == TG_STATE_CONFLICT;
		f->write_failed = !f->job_gone;
		tg_log(TG_LOG_WARN, "webhook_payload_open", TG_LS("webhook_id", f->id),
		    TG_LS("error", res->err.msg));
		if (f->buf != NULL)
			evbuffer_drain(f->buf, evbuffer_get_length(f->buf));
		unpause(f);
	}
	pump(f);
}

static void poll_over(struct wh_fetch *f);

/* Move the body on: one append in flight, the poll paused while the
 * writer lags, the commit once the body is whole and written. */
static void
pump(struct wh_fetch *f)
{
	unsigned gen;

	if (f->busy)
		return;
	if (f->w != NULL && f->buf != NULL && evbuffer_get_length(f->buf) > 0) {
		f->appending = 1;
		gen = op_begin(f);
		op_end(f, gen, tg_state_payload_append(f->w, f->buf, on_appended, f));
		unpause(f);
		return;
	}
	if (f->body_over)
		poll_over(f);
}

/* ---- the vendor's answer ---- */

/* The poll is over (from its last callback, where freeing it is safe). */
static void
release(struct wh_fetch *f)
{
	gw_vcall_cancel(f->call);
	f->call = NULL;
	f->paused = 0;
}

static void
on_head(struct gw_vcall *c, int status, const struct evkeyvalq *headers, void *arg)
{
	struct wh_fetch *f = arg;
	unsigned gen;

	f->status = status;
	f->retry_after_ms = tg_http_retry_after_ms(headers);
	if (status != 200)
		return;
	if (f->buf == NULL)
		f->buf = evbuffer_new();
	f->opening = 1;
	gen = op_begin(f);
	op_end(f, gen, tg_state_payload_open(f->h->st, f->id, on_opened, f));
}

static void
too_large(struct wh_fetch *f)
{
	char why[120];

	release(f);
	writer_drop(f);
	snprintf(why, sizeof(why), "the export is larger than webhooks.max_payload (%lld bytes)",
	    (long long)wh_cfg(f->h->gw->rt)->wh_max_payload);
	abandon(f, why);
}

static void
on_body(struct gw_vcall *c, struct evbuffer *buf, void *arg)
{
	struct wh_fetch *f = arg;

	if (f->status != 200 || f->job_gone || f->write_failed) {
		evbuffer_drain(buf, evbuffer_get_length(buf));
		return;
	}
	f->bytes += (int64_t)evbuffer_get_length(buf);
	if (f->bytes > wh_cfg(f->h->gw->rt)->wh_max_payload) {
		too_large(f);
		return;
	}
	evbuffer_add_buffer(f->buf, buf);
	if (!f->paused && evbuffer_get_length(f->buf) > HIGH_WATER) {
		f->paused = 1;
		gw_vcall_pause(c);
	}
	pump(f);
}

/* The answer is over and its body written: commit, or decide what next. */
static void
poll_over(struct wh_fetch *f)
{
	char why[160];
	struct tg_state_payload *w = f->w;
	unsigned gen;

	f->body_over = 0;
	f->w = NULL;
	if (f->status == 200 && w != NULL && !f->write_failed) {
		gen = op_begin(f);
		op_end(f, gen, tg_state_payload_commit(w, tg_clock_now_ms(), on_committed, f));
		return;
	}
	tg_state_payload_abort(w);
	if (f->job_gone) {
		end(f);
	} else if (f->status == 404) {
		snprintf(why, sizeof(why), "the vendor has no export %s (404: unknown or expired)",
		    f->cid);
		abandon(f, why);
	} else if (f->status == 202) {
		count(f, R_PENDING);
		again(f, -1);	/* its Retry-After is an estimate; ours is the interval */
	} else {
		count(f, R_FAILED);
		tg_log(TG_LOG_WARN, "webhook_payload_poll_failed", TG_LS("webhook_id", f->id),
		    TG_LS("correlationId", f->cid), TG_LI("status", f->status),
		    TG_LS("error", f->write_failed ? "the payload could not be written" : NULL));
		again(f, f->status == 429 || f->status == 503 ? f->retry_after_ms : -1);
	}
}

/* A 401 here came after the call's one replay with a fresh token. */
static void
on_done(struct gw_vcall *c, enum tg_up_error err, void *arg)
{
	struct wh_fetch *f = arg;

	release(f);
	if (err != TG_UP_OK) {
		writer_drop(f);
		count(f, R_FAILED);
		tg_log(TG_LOG_WARN, "webhook_payload_poll_failed", TG_LS("webhook_id", f->id),
		    TG_LS("correlationId", f->cid), TG_LI("status", f->status),
		    TG_LS("error", tg_up_error_str(err)));
		again(f, f->status == 429 || f->status == 503 ? f->retry_after_ms : -1);
		return;
	}
	f->body_over = 1;
	pump(f);
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
	tg_log(TG_LOG_WARN, "webhook_payload_poll_failed", TG_LS("webhook_id", f->id),
	    TG_LS("correlationId", f->cid), TG_LS("error", why));
	again(f, retry_after_s > 0 ? (int64_t)retry_after_s * 1000 : -1);
}

/* Each attempt (a 401 replayed is a second one) starts afresh. */
static void
poll_headers(struct gw_vcall *c, struct evkeyvalq *h, void *arg)
{
	struct wh_fetch *f = arg;

	evhttp_add_header(h, "Accept", "application/json");
	writer_drop(f);
	f->status = 0;
	f->bytes = 0;
	f->job_gone = f->write_failed = f->cached = 0;
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

/* 1 when the multiplexer's fresh answer decides this turn (a 200 is
 * written as the vendor's would be: opened, appended under the quota,
 * committed by poll_over). */
static int
from_cache(struct wh_fetch *f)
{
	const struct wh_hooks *h = f->h;
	struct gw_peek pk;
	char *uri = export_uri(f, h->gw->rt);
	int hit = h->answers != NULL && h->answers->peek(h->answers_ctx, GW_DEX, uri, &pk);
	unsigned gen;

	free(uri);
	if (!hit || (pk.status != 200 && pk.status != 202 && pk.status != 429))
		return 0;
	if (pk.status != 200) {
		count(f, R_PENDING);
		again(f, -1);
		return 1;
	}
	if ((int64_t)pk.len > wh_cfg(f->h->gw->rt)->wh_max_payload)
		return 0;	/* the vendor's stream gives the size error */
	f->bytes = (int64_t)pk.len;
	f->status = 200;
	f->cached = 1;
	f->job_gone = f->write_failed = 0;
	if (f->buf == NULL)
		f->buf = evbuffer_new();
	evbuffer_add(f->buf, pk.body, pk.len);
	f->body_over = 1;
	f->opening = 1;
	gen = op_begin(f);
	op_end(f, gen, tg_state_payload_open(f->h->st, f->id, on_opened, f));
	return 1;
}

static void
poll_next(struct wh_fetch *f)
{
	if (!from_cache(f))
		poll_vendor(f);
}

/* After a store the quota refused: the vendor is asked only once the
 * payloads held are below the cap (or the key's share) again. */
static void
on_room(const struct tg_state_res *res, int64_t all, int64_t mine, void *arg)
{
	struct wh_fetch *f = arg;
	struct tg_outbox_quota q;

	op_done(f);
	wh_quota_of(wh_cfg(f->h->gw->rt), &q);
	if (res->rc == TG_STATE_OK && (f->quota == Q_ALL ? all >= q.max_bytes :
	    mine >= q.key_max_bytes))
		again(f, -1);
	else
		poll_next(f);
}

static void
on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct wh_fetch *f = arg;
	char id[TG_WEBHOOK_ID_LEN];
	unsigned gen;

	if (f->over) {
		memcpy(id, f->id, sizeof(id));
		tg_map_del(f->h->fetches, id);	/* frees f */
		return;
	}
	if (f->busy || f->call != NULL)
		return;		/* its answer decides what comes next */
	if (tg_clock_now_ms() >= deadline(f)) {
		abandon(f, f->quota ? "the export data could not be stored within "
		    "webhooks.payload_timeout: the webhook payloads held were at "
		    "webhooks.payload_max_bytes or this API key's share of it "
		    "(webhooks.payload_key_share)" : f->cid != NULL ? "the export data did not come "
		    "within webhooks.payload_timeout" : "the vendor's relay delivery did not come "
		    "within webhooks.payload_timeout");
		return;
	}
	if (f->cid == NULL) {
		again(f, deadline(f) - tg_clock_now_ms());
		return;
	}
	if (f->quota) {
		gen = op_begin(f);
		op_end(f, gen, tg_state_outbox_usage(f->h->st, f->key, on_room, f));
		return;
	}
	poll_next(f);
}

/* ---- API ---- */

static struct wh_fetch *
fetch_new(struct wh_hooks *h, const char *id, const char *key, const char *cid,
    int64_t created_ms)
{
	struct wh_fetch *f = tg_xcalloc(1, sizeof(*f));

	f->h = h;
	snprintf(f->id, sizeof(f->id), "%s", id);
	f->cid = cid != NULL && *cid != '\0' ? tg_xstrdup(cid) : NULL;
	f->key = key != NULL ? tg_xstrdup(key) : NULL;
	f->created = created_ms;
	f->retry_after_ms = -1;
	f->timer = evtimer_new(h->gw->base, on_timer, f);
	tg_map_put(h->fetches, f->id, f);
	return f;
}

void
wh_fetch_start(struct wh_hooks *h, const char *id, const char *key, const char *cid,
    int64_t created_ms, int64_t delay_ms)
{
	if (h->gw->draining || tg_map_get(h->fetches, id) != NULL)
		return;		/* the next start resumes it */
	arm(fetch_new(h, id, key, cid, created_ms), delay_ms);
}

static void
on_relay_noted(const struct tg_state_res *res, void *arg)
{
}

void
wh_fetch_quota(struct wh_hooks *h, const char *id, const char *why)
{
	struct wh_fetch *f = tg_map_get(h->fetches, id);
	char note[400];

	if (f != NULL && !f->over)
		quota_mark(f, why);
	quota_note(note, sizeof(note), why);
	(void)tg_state_outbox_note(h->st, id, note, on_relay_noted, NULL);	/* a hint */
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

int
wh_fetch_waiting(const struct wh_hooks *h, const char *id)
{
	const struct wh_fetch *f = tg_map_get(h->fetches, id);

	return f != NULL && !f->over;
}

void
wh_fetch_give_up(struct wh_hooks *h, const char *id, const char *reason)
{
	struct wh_fetch *f = tg_map_get(h->fetches, id);

	if (f == NULL)
		f = fetch_new(h, id, NULL, NULL, tg_clock_now_ms());
	release(f);
	writer_drop(f);
	tg_state_cancel(f->op);
	op_done(f);
	evtimer_del(f->timer);
	f->over = 0;
	f->silent = 1;		/* the request side says why */
	abandon(f, reason);
}
