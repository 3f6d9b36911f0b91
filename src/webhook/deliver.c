/*
 * deliver.c - one delivery attempt of a leased job, on the event loop:
 * resolve and check the callback host (resolve.c), look up the job's
 * secrets, sign id.timestamp.body by reading the payload file a few
 * hundred KB per loop turn (a large export never stalls the loop or sits
 * in memory), POST it through a one-connection upstream that connects to
 * the checked address while Host, SNI and the certificate check keep the
 * URL's name, and record the outcome under the lease through the state
 * seam (answered later, or at once). Called by worker.c.
 *
 * Redirects are never followed (3xx is a failure). Only the answer's
 * status counts (Standard Webhooks): once it is in, the body is read for
 * at most ANSWER_GRACE_MS and ANSWER_MAX bytes (dropped), then the
 * connection is closed, so a receiver that drips its answer cannot hold
 * an in-flight slot. Each attempt also has a total deadline (the
 * worker's attempt_deadline_ms, plus a second per MiB of payload for the
 * upload): the silence timeout alone lets a receiver that sends one byte
 * every few seconds hold the attempt for ever. Every step after the
 * request went out runs from the attempt's own event, never inside an
 * upstream callback, because the upstream is freed at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/clock.h"
#include "tidegate/crypto.h"
#include "tidegate/ids.h"
#include "tidegate/log.h"
#include "tidegate/map.h"
#include "tidegate/upstream.h"
#include "tidegate/webhook.h"
#include "wh.h"

#define SIGN_CHUNK	(256 * 1024)
#define SIGN_CHUNKS	4		/* per loop turn: 1 MiB */
#define ANSWER_MAX	4096		/* body bytes read after the status */
#define ANSWER_GRACE_MS	1000		/* … for at most this long */
#define UPLOAD_RATE	(1024 * 1024)	/* bytes a second of payload the deadline allows */
#define RECORD_AGAIN_MS	250		/* an outcome not recorded: asked again after */

struct wh_attempt {
	TAILQ_ENTRY(wh_attempt) entry;	/* worker's list */
	struct tg_webhook *w;
	struct tg_outbox_lease *l;
	struct wh_url url;
	struct tg_egress_lookup *lookup;
	char addr[64];			/* the checked address */
	int fd;				/* payload file */
	uint8_t *buf;			/* signing reads */
	struct tg_webhook_signer *signer;
	int64_t signed_bytes;
	char *signature;
	int64_t ts;			/* webhook-timestamp */
	int64_t t0;			/* monotonic start */
	struct tg_upstream *up;
	struct tg_up_req *req;
	struct evbuffer *empty;		/* body of an empty payload */
	struct event *step;		/* signing turns and the end */
	struct event *deadline;		/* the whole attempt */
	struct event *grace;		/* the answer's body, once its status is in */
	struct event *again;		/* the outcome recorded again (NULL: never) */
	int unsure;			/* a record of it may have committed */
	int64_t deadline_ms;
	int64_t answer_bytes;		/* body bytes read (and dropped) */
	struct tg_state_op *renew_op;	/* a renewal asked for */
	struct tg_state_op *complete_op;	/* the outcome being recorded */
	int signing, ending, renewing, completing, completed;
	int complete_rc;		/* its answer (enum tg_state_rc) */
	char complete_err[256];
	enum tg_outbox_state state;	/* … the state it left the job in … */
	int64_t next_at;		/* … and its next attempt time */
	int status;
	int64_t retry_after_ms;
	char error[256];
};

static void
end_with(struct wh_attempt *a, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Over: the rest happens in on_step, outside any library callback. */
static void
end_with(struct wh_attempt *a, const char *fmt, ...)
{
	va_list ap;

	if (fmt != NULL && a->error[0] == '\0') {
		va_start(ap, fmt);
		vsnprintf(a->error, sizeof(a->error), fmt, ap);
		va_end(ap);
	}
	a->signing = 0;
	a->ending = 1;
	event_active(a->step, EV_TIMEOUT, 1);
}

int64_t
tg_webhook_retry_after_parse(const char *v, int64_t now_ms)
{
	struct tm tm;
	const char *end;
	int64_t s = 0;
	size_t i;

	if (v == NULL)
		return -1;
	while (*v == ' ')
		v++;
	for (i = 0; v[i] >= '0' && v[i] <= '9'; i++)
		if (i < 10)
			s = s * 10 + (v[i] - '0');
	if (i > 0 && i <= 10 && v[i + strspn(v + i, " ")] == '\0')
		return s * 1000;
	if (i > 0)
		return -1;
	memset(&tm, 0, sizeof(tm));
	end = strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (end == NULL || end[strspn(end, " ")] != '\0')
		return -1;
	s = (int64_t)timegm(&tm) * 1000 - now_ms;
	return s > 0 ? s : 0;
}

/* ---- the request ---- */

/* The status decides (docs/webhooks.md, Outcomes); detail is why no
 * status came. */
static void
answer_end(struct wh_attempt *a, const char *detail)
{
	if (a->ending)
		return;
	if (a->status >= 200 && a->status <= 299)
		end_with(a, NULL);	/* even if the connection broke while its body came */
	else if (a->status > 0)
		end_with(a, "HTTP %d", a->status);
	else
		end_with(a, "%s", detail);
}

/* Enough of the answer: close the connection (from a callback of the
 * request too: the upstream frees it once that returns). */
static void
answer_stop(struct wh_attempt *a)
{
	tg_up_req_cancel(a->req);
	a->req = NULL;
	answer_end(a, "no answer");
}

static void
on_grace(evutil_socket_t fd, short what, void *arg)
{
	answer_stop(arg);
}

static void
on_head(struct tg_up_req *r, int status, const struct evkeyvalq *headers, void *arg)
{
	struct wh_attempt *a = arg;
	struct timeval tv = { ANSWER_GRACE_MS / 1000, ANSWER_GRACE_MS % 1000 * 1000 };

	a->status = status;
	a->retry_after_ms = tg_webhook_retry_after_parse(evhttp_find_header(headers, "Retry-After"),
	    tg_clock_now_ms());
	evtimer_add(a->grace, &tv);
}

static void
on_body(struct tg_up_req *r, struct evbuffer *buf, void *arg)
{
	struct wh_attempt *a = arg;

	a->answer_bytes += (int64_t)evbuffer_get_length(buf);
	evbuffer_drain(buf, evbuffer_get_length(buf));
	if (a->answer_bytes > ANSWER_MAX)
		answer_stop(a);
}

static void
on_done(struct tg_up_req *r, enum tg_up_error err, void *arg)
{
	struct wh_attempt *a = arg;
	const char *detail = tg_up_req_detail(r);

	a->req = NULL;
	answer_end(a, detail != NULL && *detail != '\0' ? detail : tg_up_error_str(err));
}

static const struct tg_up_cbs up_cbs = { on_head, on_body, on_done };

#define ORIGINS_MAX 65536	/* remembered request ids: ~100 bytes each */

void
tg_webhook_note_origin(struct tg_webhook *w, const char *id, const char *rid)
{
	if (w == NULL || rid == NULL || *rid == '\0')
		return;
	if (w->origins == NULL)
		w->origins = tg_map_new(free);
	if (tg_map_count(w->origins) < ORIGINS_MAX)
		tg_map_put(w->origins, id, tg_xstrdup(rid));
}

void
tg_webhook_trace_id(const char *id, char out[33])
{
	uint8_t md[TG_SHA256_LEN];
	char *in = tg_xasprintf("tidegate-webhook:%s", id);

	tg_sha256_oneshot(in, strlen(in), md);
	tg_hex(md, 16, out);
	free(in);
}

/* traceparent: the job's trace (derived from its id), a new span per
 * attempt; X-Request-Id: the request that added the job, when known. */
static void
trace_fill(struct wh_attempt *a, struct evkeyvalq *h)
{
	const char *rid = a->w->origins != NULL ? tg_map_get(a->w->origins, a->l->id) : NULL;
	char trace[33], span[17], tp[56];

	tg_webhook_trace_id(a->l->id, trace);
	do
		tg_id_hex(span, 8);
	while (strspn(span, "0") == 16);
	snprintf(tp, sizeof(tp), "00-%s-%s-01", trace, span);
	evhttp_add_header(h, "traceparent", tp);
	if (rid != NULL)
		evhttp_add_header(h, "X-Request-Id", rid);
}

static void
headers_fill(struct wh_attempt *a, struct evkeyvalq *h)
{
	char ts[24];

	trace_fill(a, h);
	snprintf(ts, sizeof(ts), "%lld", (long long)a->ts);
	evhttp_add_header(h, "Content-Type", a->l->content_type);
	evhttp_add_header(h, "User-Agent", a->w->opts.user_agent);
	evhttp_add_header(h, "webhook-id", a->l->id);
	evhttp_add_header(h, "webhook-timestamp", ts);
	evhttp_add_header(h, "webhook-signature", a->signature);
}

static void
send_request(struct wh_attempt *a)
{
	struct tg_webhook *w = a->w;
	struct tg_upstream_opts o = {
		.connect_timeout_ms = w->opts.attempt_timeout_ms,
		.read_timeout_ms = w->opts.attempt_timeout_ms,
		.max_conns = 1,
		.tls_verify = !w->opts.tls_insecure,
		.ca_file = w->opts.ca_file,
	};
	struct evkeyvalq h;
	struct tg_err err;

	if ((a->up = tg_upstream_new(w->base, w->dns, a->url.origin, NULL, &o, &err)) == NULL ||
	    tg_upstream_set_connect_addr(a->up, a->addr, &err) != 0) {
		end_with(a, "%s", err.msg);
		return;
	}
	TAILQ_INIT(&h);
	headers_fill(a, &h);
	if (a->l->size > 0)
		a->req = tg_upstream_send_file(a->up, EVHTTP_REQ_POST, a->url.target, &h, a->fd,
		    a->l->size, &up_cbs, a);
	else {
		a->empty = evbuffer_new();
		a->req = tg_upstream_send(a->up, EVHTTP_REQ_POST, a->url.target, &h, a->empty,
		    &up_cbs, a);
	}
	evhttp_clear_headers(&h);
	if (a->req == NULL)
		end_with(a, "cannot send the payload file");
}

/* ---- signing ---- */

static void
sign_some(struct wh_attempt *a)
{
	ssize_t n;
	int i;

	for (i = 0; i < SIGN_CHUNKS && a->signed_bytes < a->l->size; i++) {
		n = pread(a->fd, a->buf, SIGN_CHUNK, (off_t)a->signed_bytes);
		if (n <= 0) {
			end_with(a, "cannot read the payload: %s", n < 0 ? strerror(errno) :
			    "file shrank");
			return;
		}
		if (n > a->l->size - a->signed_bytes)
			n = (ssize_t)(a->l->size - a->signed_bytes);
		tg_webhook_signer_update(a->signer, a->buf, (size_t)n);
		a->signed_bytes += n;
	}
	if (a->signed_bytes < a->l->size) {
		event_active(a->step, EV_TIMEOUT, 1);	/* let the loop breathe */
		return;
	}
	a->signing = 0;
	a->signature = tg_webhook_signer_final(a->signer);
	send_request(a);
}

static int
open_payload(struct wh_attempt *a)
{
	struct stat st;

	if ((a->fd = open(a->l->payload_path, O_RDONLY | O_CLOEXEC)) < 0) {
		end_with(a, "cannot open the payload: %s", strerror(errno));
		return -1;
	}
	if (fstat(a->fd, &st) != 0 || st.st_size != a->l->size) {
		end_with(a, "the payload file is not the %lld bytes committed",
		    (long long)a->l->size);
		return -1;
	}
	return 0;
}

static void
start_signing(struct wh_attempt *a)
{
	struct tg_webhook *w = a->w;
	const struct tg_strlist *secrets;
	struct tg_err err;

	secrets = w->cbs.secrets != NULL ? w->cbs.secrets(a->l->secret_ref, w->arg) : NULL;
	if (secrets == NULL || secrets->n == 0) {
		end_with(a, "no webhook secret named '%s'", a->l->secret_ref);
		return;
	}
	if (open_payload(a) != 0)
		return;
	a->ts = tg_clock_now_ms() / 1000;
	a->signer = tg_webhook_signer_new((const char *const *)secrets->v, secrets->n, a->l->id,
	    a->ts, &err);
	if (a->signer == NULL) {
		end_with(a, "webhook secret '%s': %s", a->l->secret_ref, err.msg);
		return;
	}
	a->buf = tg_xmalloc(SIGN_CHUNK);
	a->signing = 1;
	event_active(a->step, EV_TIMEOUT, 1);
}

static void
on_resolved(const char *addr, const char *why, int refused, void *arg)
{
	struct wh_attempt *a = arg;

	a->lookup = NULL;
	if (addr == NULL && refused) {
		tg_log(TG_LOG_WARN, "webhook_egress_refused", TG_LS("webhook_id", a->l->id),
		    TG_LS("host", a->url.host), TG_LS("reason", why));
		a->status = TG_OUTBOX_REFUSED;	/* dead at once: docs/webhooks.md */
		end_with(a, "egress refused (dead at once; allow it in webhooks.allow, then "
		    "redeliver): %s", why);
		return;
	}
	if (addr == NULL) {
		end_with(a, "%s", why);		/* DNS: retried on the schedule */
		return;
	}
	snprintf(a->addr, sizeof(a->addr), "%s", addr);
	start_signing(a);
}

/* ---- the end ---- */

/* What the share per host counts an attempt against. */
static const char *
lease_host(const struct tg_outbox_lease *l)
{
	return l->host != NULL ? l->host : "";
}

static void
attempt_free(struct wh_attempt *a)
{
	tg_state_cancel(a->renew_op);
	tg_state_cancel(a->complete_op);
	tg_egress_lookup_cancel(a->lookup);
	tg_up_req_cancel(a->req);
	tg_upstream_free(a->up);
	if (a->empty != NULL)
		evbuffer_free(a->empty);
	tg_webhook_signer_free(a->signer);
	free(a->signature);
	free(a->buf);
	if (a->fd >= 0)
		close(a->fd);
	event_free(a->step);
	event_free(a->deadline);
	event_free(a->grace);
	if (a->again != NULL)
		event_free(a->again);
	tg_webhook_url_cleanup(&a->url);
	tg_outbox_lease_free(a->l);
	free(a);
}

static void
report(struct wh_attempt *a, enum tg_outbox_state st, int64_t next_at)
{
	struct tg_webhook *w = a->w;
	struct tg_webhook_outcome o = {
		.id = a->l->id, .kind = a->l->kind, .correlation_id = a->l->correlation_id,
		.service = a->l->service, .api_key = a->l->api_key,
		.host = a->url.host != NULL ? a->url.host : "",
		.attempt = a->l->attempt, .status = a->status, .error = a->error,
		.state = st, .next_at = next_at,
		.duration_ms = tg_clock_mono_ms() - a->t0,
		.first_delay_ms = a->l->first_delay_ms,
	};

	const char *rid = w->origins != NULL ? tg_map_get(w->origins, o.id) : NULL;
	char trace[33];

	tg_webhook_trace_id(o.id, trace);
	tg_log(st == TG_OUTBOX_DELIVERED ? TG_LOG_INFO : TG_LOG_WARN, "webhook_attempt",
	    TG_LS("webhook_id", o.id), TG_LS("request_id", rid), TG_LS("trace_id", trace),
	    TG_LS("correlationId", o.correlation_id),
	    TG_LS("key", o.api_key), TG_LS("host", o.host), TG_LI("attempt", o.attempt),
	    TG_LI("status", o.status), TG_LS("state", tg_outbox_state_str(st)),
	    TG_LS("error", o.error), TG_LI("ms", o.duration_ms));
	if (w->cbs.on_outcome != NULL)
		w->cbs.on_outcome(&o, w->arg);
	if (w->origins != NULL && (st == TG_OUTBOX_DELIVERED || st == TG_OUTBOX_DEAD))
		free(tg_map_take(w->origins, a->l->id));	/* no attempt follows */
}

/* The outcome is recorded (or could not be): the rest runs from on_step. */
static void
on_completed(const struct tg_state_res *res, enum tg_outbox_state st, int64_t next_at,
    void *arg)
{
	struct wh_attempt *a = arg;

	a->completing = 0;
	a->complete_op = NULL;
	a->completed = 1;
	a->complete_rc = res->rc;
	snprintf(a->complete_err, sizeof(a->complete_err), "%s", res->rc != TG_STATE_OK ?
	    res->err.msg : "");
	a->state = st;
	a->next_at = next_at;
	event_active(a->step, EV_TIMEOUT, 1);
}

/* Record the outcome under the lease; on_completed answers. */
static void
finish(struct wh_attempt *a)
{
	struct tg_outbox_result res = { a->status, a->retry_after_ms, a->error };
	struct tg_state_op *op;

	/* Outside the upstream's callbacks now: it may go. */
	tg_upstream_free(a->up);
	a->up = NULL;
	a->completing = 1;
	op = tg_state_outbox_complete(a->w->st, a->l, &res, tg_clock_now_ms(), on_completed, a);
	if (a->completing)
		a->complete_op = op;
}

static void
on_again(evutil_socket_t fd, short what, void *arg)
{
	finish(arg);
}

/*
 * The outcome could not be recorded (the database lost, or unreachable):
 * while the lease lasts no instance takes the job again, so it is asked
 * again, every RECORD_AGAIN_MS until the lease runs out, and a delivery
 * whose record was lost (a failover shorter than the lease) is not
 * repeated (unless the gateway is draining: it stops at once, as
 * before). 1 when it will be asked again.
 */
static int
record_again(struct wh_attempt *a)
{
	struct timeval tv = { 0, RECORD_AGAIN_MS * 1000 };

	if (!tg_state_rc_down(a->complete_rc) || a->w->draining ||
	    tg_clock_now_ms() + RECORD_AGAIN_MS >= a->l->expires_at)
		return 0;
	a->unsure |= a->complete_rc == TG_STATE_UNKNOWN;
	a->completed = 0;
	if (a->again == NULL)
		a->again = evtimer_new(a->w->base, on_again, a);
	evtimer_add(a->again, &tv);
	return 1;
}

/* The attempt is over: report a recorded outcome, then go. A lease lost
 * or a store that failed leaves the job to be leased again (at least once).
 * A lease "lost" after a record whose outcome was unknown: that record
 * committed, and cleared the lease. */
static void
conclude(struct wh_attempt *a)
{
	struct tg_webhook *w = a->w;

	if (record_again(a))
		return;
	if (a->complete_rc == TG_STATE_CONFLICT && a->unsure)
		tg_log(TG_LOG_INFO, "webhook_complete_known", TG_LS("webhook_id", a->l->id));
	else if (a->complete_rc != TG_STATE_OK)
		tg_log(TG_LOG_ERROR, "webhook_complete_failed", TG_LS("webhook_id", a->l->id),
		    TG_LS("error", a->complete_err));
	else
		report(a, a->state, a->next_at);
	TAILQ_REMOVE(&w->attempts, a, entry);
	w->inflight--;
	tg_webhook_host_give(w, lease_host(a->l));
	attempt_free(a);
	tg_webhook_worker_attempt_over(w);
}

static void
on_step(evutil_socket_t fd, short what, void *arg)
{
	struct wh_attempt *a = arg;

	if (a->completed)
		conclude(a);
	else if (a->ending && !a->completing)
		finish(a);
	else if (a->signing)
		sign_some(a);
}

/* The deadline passed: whatever the attempt waits for is dropped (the
 * DNS lookup, the connection); a status already in still decides. */
static void
on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct wh_attempt *a = arg;

	if (a->ending)
		return;
	tg_egress_lookup_cancel(a->lookup);
	a->lookup = NULL;
	tg_up_req_cancel(a->req);
	a->req = NULL;
	if (a->status > 0)
		answer_end(a, NULL);
	else
		end_with(a, "deadline: the attempt did not end within %lld ms",
		    (long long)a->deadline_ms);
}

static void
deadline_arm(struct wh_attempt *a)
{
	struct timeval tv;

	a->deadline_ms = a->w->opts.attempt_deadline_ms + a->l->size * 1000 / UPLOAD_RATE;
	tv.tv_sec = (time_t)(a->deadline_ms / 1000);
	tv.tv_usec = (suseconds_t)(a->deadline_ms % 1000 * 1000);
	a->deadline = evtimer_new(a->w->base, on_deadline, a);
	evtimer_add(a->deadline, &tv);
}

struct wh_attempt *
tg_webhook_attempt_start(struct tg_webhook *w, struct tg_outbox_lease *l)
{
	struct wh_attempt *a = tg_xcalloc(1, sizeof(*a));
	struct tg_err why;

	a->w = w;
	a->l = l;
	a->fd = -1;
	a->retry_after_ms = -1;
	a->t0 = tg_clock_mono_ms();
	a->step = event_new(w->base, -1, 0, on_step, a);
	a->grace = evtimer_new(w->base, on_grace, a);
	deadline_arm(a);
	TAILQ_INSERT_TAIL(&w->attempts, a, entry);
	w->inflight++;
	tg_webhook_host_take(w, lease_host(l));
	if (tg_webhook_url_parse(l->url, &a->url, &why) != 0)
		end_with(a, "%s", why.msg);
	else
		a->lookup = tg_egress_resolve(w->pol, w->base, w->dns, a->url.host,
		    w->opts.attempt_timeout_ms, on_resolved, a);
	return a;
}

/* ---- leases given back ---- */

struct wh_release {
	TAILQ_ENTRY(wh_release) entry;
	struct tg_webhook *w;
	struct tg_outbox_lease *l;
	struct tg_state_op *op;
	int in_call, answered;
};

static void
release_free(struct wh_release *rel)
{
	TAILQ_REMOVE(&rel->w->releases, rel, entry);
	tg_outbox_lease_free(rel->l);
	free(rel);
}

static void
on_released(const struct tg_state_res *res, void *arg)
{
	struct wh_release *rel = arg;

	rel->answered = 1;
	rel->op = NULL;
	if (res->rc != TG_STATE_OK)
		tg_log(TG_LOG_WARN, "webhook_release_failed", TG_LS("webhook_id", rel->l->id),
		    TG_LS("error", res->err.msg));
	if (!rel->in_call)
		release_free(rel);
}

void
tg_webhook_lease_release(struct tg_webhook *w, struct tg_outbox_lease *l)
{
	struct wh_release *rel = tg_xcalloc(1, sizeof(*rel));
	struct tg_state_op *op;

	rel->w = w;
	rel->l = l;
	TAILQ_INSERT_TAIL(&w->releases, rel, entry);
	rel->in_call = 1;
	op = tg_state_outbox_release(w->st, l, on_released, rel);
	rel->in_call = 0;
	if (rel->answered)
		release_free(rel);
	else
		rel->op = op;
}

void
tg_webhook_releases_cancel(struct tg_webhook *w)
{
	struct wh_release *rel;

	while ((rel = TAILQ_FIRST(&w->releases)) != NULL) {
		tg_state_cancel(rel->op);
		release_free(rel);
	}
}

/* Teardown: a lease nobody completes is given back (due again at once). */
void
tg_webhook_attempts_abandon(struct tg_webhook *w)
{
	struct wh_attempt *a;

	while ((a = TAILQ_FIRST(&w->attempts)) != NULL) {
		TAILQ_REMOVE(&w->attempts, a, entry);
		w->inflight--;
		tg_webhook_host_give(w, lease_host(a->l));
		tg_state_cancel(a->renew_op);
		tg_state_cancel(a->complete_op);
		a->renew_op = a->complete_op = NULL;
		tg_webhook_lease_release(w, a->l);
		a->l = NULL;
		attempt_free(a);
	}
}

static void
on_renewed(const struct tg_state_res *res, int64_t expires_at, void *arg)
{
	struct wh_attempt *a = arg;

	a->renewing = 0;
	a->renew_op = NULL;
	if (res->rc == TG_STATE_OK)
		a->l->expires_at = expires_at;
	else
		tg_log(TG_LOG_WARN, "webhook_lease_renew_failed", TG_LS("webhook_id", a->l->id),
		    TG_LS("error", res->err.msg));
}

void
tg_webhook_attempts_renew(struct tg_webhook *w, int64_t now_ms)
{
	struct wh_attempt *a;
	struct tg_state_op *op;

	TAILQ_FOREACH(a, &w->attempts, entry) {
		if (a->renewing || a->completing || a->completed)
			continue;
		a->renewing = 1;
		op = tg_state_outbox_renew(w->st, a->l, now_ms, on_renewed, a);
		if (a->renewing)
			a->renew_op = op;
	}
}
