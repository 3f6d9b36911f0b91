/*
 * deliver.c - one delivery attempt of a leased job, on the event loop:
 * resolve and check the callback host (resolve.c), look up the job's
 * secrets, sign id.timestamp.body by reading the payload file a few
 * hundred KB per loop turn (a large export never stalls the loop or sits
 * in memory), POST it through a one-connection upstream that connects to
 * the checked address while Host, SNI and the certificate check keep the
 * URL's name, and record the outcome under the lease. Called by worker.c.
 *
 * Redirects are never followed (3xx is a failure); the response body is
 * read and dropped. Every step after the request went out runs from the
 * attempt's own event, never inside an upstream callback, because the
 * upstream is freed at the end.
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
#include "tidegate/log.h"
#include "tidegate/upstream.h"
#include "tidegate/webhook.h"
#include "wh.h"

#define SIGN_CHUNK	(256 * 1024)
#define SIGN_CHUNKS	4		/* per loop turn: 1 MiB */

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
	int signing, ending;
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

static void
on_head(struct tg_up_req *r, int status, const struct evkeyvalq *headers, void *arg)
{
	struct wh_attempt *a = arg;

	a->status = status;
	a->retry_after_ms = tg_webhook_retry_after_parse(evhttp_find_header(headers, "Retry-After"),
	    tg_clock_now_ms());
}

static void
on_body(struct tg_up_req *r, struct evbuffer *buf, void *arg)
{
	evbuffer_drain(buf, evbuffer_get_length(buf));
}

static void
on_done(struct tg_up_req *r, enum tg_up_error err, void *arg)
{
	struct wh_attempt *a = arg;
	const char *detail = tg_up_req_detail(r);

	a->req = NULL;
	/* A 2xx counts even if the connection broke while its body came. */
	if (a->status >= 200 && a->status <= 299)
		end_with(a, NULL);
	else if (a->status > 0)
		end_with(a, "HTTP %d", a->status);
	else
		end_with(a, "%s", detail != NULL && *detail != '\0' ? detail :
		    tg_up_error_str(err));
}

static const struct tg_up_cbs up_cbs = { on_head, on_body, on_done };

static void
headers_fill(struct wh_attempt *a, struct evkeyvalq *h)
{
	char ts[24];

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
on_resolved(const char *addr, const char *why, void *arg)
{
	struct wh_attempt *a = arg;

	a->lookup = NULL;
	if (addr == NULL) {
		tg_log(TG_LOG_WARN, "webhook_egress_refused", TG_LS("id", a->l->id),
		    TG_LS("host", a->url.host), TG_LS("reason", why));
		end_with(a, "egress refused: %s", why);
		return;
	}
	snprintf(a->addr, sizeof(a->addr), "%s", addr);
	start_signing(a);
}

/* ---- the end ---- */

static void
attempt_free(struct wh_attempt *a)
{
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

	tg_log(st == TG_OUTBOX_DELIVERED ? TG_LOG_INFO : TG_LOG_WARN, "webhook_attempt",
	    TG_LS("id", o.id), TG_LS("correlationId", o.correlation_id),
	    TG_LS("key", o.api_key), TG_LS("host", o.host), TG_LI("attempt", o.attempt),
	    TG_LI("status", o.status), TG_LS("state", tg_outbox_state_str(st)),
	    TG_LS("error", o.error), TG_LI("ms", o.duration_ms));
	if (w->cbs.on_outcome != NULL)
		w->cbs.on_outcome(&o, w->arg);
}

static void
finish(struct wh_attempt *a)
{
	struct tg_webhook *w = a->w;
	struct tg_outbox_result res = { a->status, a->retry_after_ms, a->error };
	enum tg_outbox_state st;
	int64_t next_at;
	struct tg_err err;

	/* Outside the upstream's callbacks now: it may go. */
	tg_upstream_free(a->up);
	a->up = NULL;
	if (tg_outbox_complete(w->ob, a->l, &res, tg_clock_now_ms(), &st, &next_at, &err) != 0)
		tg_log(TG_LOG_ERROR, "webhook_complete_failed", TG_LS("id", a->l->id),
		    TG_LS("error", err.msg));
	else
		report(a, st, next_at);
	TAILQ_REMOVE(&w->attempts, a, entry);
	w->inflight--;
	attempt_free(a);
	tg_webhook_worker_attempt_over(w);
}

static void
on_step(evutil_socket_t fd, short what, void *arg)
{
	struct wh_attempt *a = arg;

	if (a->ending)
		finish(a);
	else if (a->signing)
		sign_some(a);
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
	TAILQ_INSERT_TAIL(&w->attempts, a, entry);
	w->inflight++;
	if (tg_webhook_url_parse(l->url, &a->url, &why) != 0)
		end_with(a, "%s", why.msg);
	else
		a->lookup = tg_egress_resolve(w->pol, w->base, w->dns, a->url.host,
		    w->opts.attempt_timeout_ms, on_resolved, a);
	return a;
}

void
tg_webhook_attempts_abandon(struct tg_webhook *w)
{
	struct wh_attempt *a;
	struct tg_err err;

	while ((a = TAILQ_FIRST(&w->attempts)) != NULL) {
		TAILQ_REMOVE(&w->attempts, a, entry);
		w->inflight--;
		if (tg_outbox_lease_release(w->ob, a->l, &err) != 0)
			tg_log(TG_LOG_WARN, "webhook_release_failed", TG_LS("id", a->l->id),
			    TG_LS("error", err.msg));
		attempt_free(a);
	}
}

void
tg_webhook_attempts_renew(struct tg_webhook *w, int64_t now_ms)
{
	struct wh_attempt *a;
	struct tg_err err;

	TAILQ_FOREACH(a, &w->attempts, entry)
		if (tg_outbox_lease_renew(w->ob, a->l, now_ms, &err) != 0)
			tg_log(TG_LOG_WARN, "webhook_lease_renew_failed", TG_LS("id", a->l->id),
			    TG_LS("error", err.msg));
}
