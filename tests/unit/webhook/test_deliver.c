/*
 * test_deliver.c - webhook delivery end to end in one process: the worker
 * and an evhttp receiver on 127.0.0.1 share a loop (loopback is refused by
 * default, so the receiver is reached through the allow-list), the
 * receiver checks every signature, and a short schedule (0, 100, 200 ms)
 * keeps it quick. Covered: 500 twice then 200, 410 gone, 301 not followed,
 * Retry-After, timeouts to a dead letter, DNS-refused hosts, allow-listing
 * by host name (connecting to the checked address, Host kept), key
 * rotation, unknown secrets, drain and teardown with an attempt in flight,
 * lease renewal during a long attempt, https with the certificate checked
 * for the name while connecting to the checked address, and a 50 MB payload sent to a raw socket receiver that hashes as it
 * reads while the sender's anonymous memory stays flat. The worker reaches
 * the outbox through the state seam (SQLite backend); the test adds jobs
 * and reads them back on its own connection to the same database, and
 * kicks the worker after adding (the seam announces nothing).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <event2/bufferevent_ssl.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>

#include "tidegate/clock.h"
#include "tidegate/http.h"
#include "tidegate/json.h"
#include "tidegate/log.h"
#include "tidegate/state.h"
#include "tidegate/webhook.h"
#include "wh.h"

#define SECRET		"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
#define SECRET_OLD	"whsec_c2VjcmV0LW51bWJlci10d28tZm9yLXJvdGF0aW9u"
#define BODY		"{\"hello\":\"world\"}"
#define BIG		(50u << 20)
#define MAX_HITS	16
#define MAX_OUT		32

static const int64_t sched[] = { 0, 100, 200 };

struct hit {
	char path[32], id[64], ts[24], host[128], ctype[64];
	int verified;		/* signature checked out with the job's secret(s) */
	int64_t at;		/* monotonic ms */
};

struct outcome {
	char id[TG_WEBHOOK_ID_LEN], error[256];
	int attempt, status;
	enum tg_outbox_state state;
	int64_t next_at, at;
};

static struct {
	char dir[64], db[96], hosts[96];
	struct event_base *base;
	struct evdns_base *dns;
	struct evhttp *http;
	int port;
	struct tg_state *st;
	int64_t lease_ms;
	struct tg_egress *pol;
	struct tg_webhook *w;
	struct hit hits[MAX_HITS];
	int nhits, flaky, busy;
	struct outcome out[MAX_OUT];
	int nout, drained;
} T;

static int64_t
mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- the receiver ---- */

static void
reply(struct evhttp_request *req, int status, const char *hname, const char *hval)
{
	if (hname != NULL)
		evhttp_add_header(evhttp_request_get_output_headers(req), hname, hval);
	evhttp_send_reply(req, status, tg_http_reason(status), NULL);
}

static int
verified(struct evhttp_request *req, const char *path)
{
	const char *id = tg_http_header(req, "webhook-id");
	const char *ts = tg_http_header(req, "webhook-timestamp");
	const char *sig = tg_http_header(req, "webhook-signature");
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t len = evbuffer_get_length(in);
	const void *body = evbuffer_pullup(in, -1);
	int64_t now = time(NULL);
	struct tg_err err;

	if (tg_webhook_verify(SECRET, id, ts, sig, body, len, now, 60, &err) != 0)
		return 0;
	if (strcmp(path, "/rot") == 0)
		return strchr(sig, ' ') != NULL && tg_webhook_verify(SECRET_OLD, id, ts, sig, body,
		    len, now, 60, &err) == 0;
	return 1;
}

static void
record(struct evhttp_request *req, const char *path)
{
	struct hit *h;
	const char *v;

	if (T.nhits >= MAX_HITS)
		return;
	h = &T.hits[T.nhits++];
	snprintf(h->path, sizeof(h->path), "%s", path);
	snprintf(h->id, sizeof(h->id), "%s", (v = tg_http_header(req, "webhook-id")) ? v : "");
	snprintf(h->ts, sizeof(h->ts), "%s",
	    (v = tg_http_header(req, "webhook-timestamp")) ? v : "");
	snprintf(h->host, sizeof(h->host), "%s", (v = tg_http_header(req, "Host")) ? v : "");
	snprintf(h->ctype, sizeof(h->ctype), "%s",
	    (v = tg_http_header(req, "Content-Type")) ? v : "");
	h->verified = verified(req, path);
	h->at = mono_ms();
}

static void
on_slow_reply(evutil_socket_t fd, short what, void *arg)
{
	reply(arg, 200, NULL, NULL);
}

static void
on_request(struct evhttp_request *req, void *arg)
{
	const char *path = tg_http_path(req);
	char loc[96];

	record(req, path);
	if (strcmp(path, "/flaky") == 0)
		reply(req, ++T.flaky <= 2 ? 500 : 200, NULL, NULL);
	else if (strcmp(path, "/gone") == 0)
		reply(req, 410, NULL, NULL);
	else if (strcmp(path, "/moved") == 0) {
		snprintf(loc, sizeof(loc), "http://127.0.0.1:%d/target", T.port);
		reply(req, 301, "Location", loc);
	} else if (strcmp(path, "/busy") == 0)
		reply(req, ++T.busy == 1 ? 503 : 200, "Retry-After", "1");
	else if (strcmp(path, "/fail") == 0)
		reply(req, 500, NULL, NULL);
	else if (strcmp(path, "/slow") == 0)
		event_base_once(T.base, -1, EV_TIMEOUT, on_slow_reply, req,
		    &(struct timeval){ 0, 800000 });
	else
		reply(req, 200, NULL, NULL);
}

/* ---- the worker's side ---- */

static const struct tg_strlist *
on_secrets(const char *ref, void *arg)
{
	static char *main_v[] = { SECRET }, *rot_v[] = { SECRET, SECRET_OLD };
	static const struct tg_strlist main_l = { main_v, 1 }, rot_l = { rot_v, 2 };

	if (strcmp(ref, "main") == 0)
		return &main_l;
	return strcmp(ref, "rot") == 0 ? &rot_l : NULL;
}

static void
on_outcome(const struct tg_webhook_outcome *o, void *arg)
{
	struct outcome *r;

	if (T.nout >= MAX_OUT)
		return;
	r = &T.out[T.nout++];
	snprintf(r->id, sizeof(r->id), "%s", o->id);
	snprintf(r->error, sizeof(r->error), "%s", o->error);
	r->attempt = o->attempt;
	r->status = o->status;
	r->state = o->state;
	r->next_at = o->next_at;
	r->at = mono_ms();
}

static const struct tg_webhook_cbs cbs = { on_secrets, on_outcome };

static void
worker_start_opts(struct tg_webhook_opts *o)
{
	struct tg_err err;

	o->lease_ms = T.lease_ms;
	T.w = tg_webhook_new(T.base, T.dns, T.st, T.pol, o, &cbs, NULL, &err);
	if (T.w == NULL)
		fail_msg("worker: %s", err.msg);
}

static void
worker_start_with(int64_t timeout_ms, const char *ca_file)
{
	struct tg_webhook_opts o = { .attempt_timeout_ms = timeout_ms, .max_inflight = 4,
		.max_inflight_per_host = 4, .ca_file = ca_file };

	worker_start_opts(&o);
}

static void
worker_start(void)
{
	worker_start_with(300, NULL);
}

static struct tg_egress *
policy(const char *entry)
{
	char *v[1] = { (char *)entry };
	struct tg_strlist l = { v, 1 };

	return tg_egress_new(&l, NULL);
}

/* The worker's state seam on the test's database: 0, or -1. */
static int
outbox_open(int64_t lease_ms)
{
	struct tg_outbox_opts oo = { .path = T.db, .schedule_ms = sched,
		.nschedule = TG_NELEM(sched), .jitter_pct = -1, .lease_ms = lease_ms };
	struct tg_state_opts so = { .outbox = &oo };

	T.lease_ms = lease_ms;
	tg_state_close(T.st);
	T.st = tg_state_open(T.base, &so, NULL);
	return T.st != NULL ? 0 : -1;
}

/* ---- the test's own calls of the seam, waited for on the loop ---- */

struct seam_wait {
	int called;
	struct tg_state_res res;
	char *s;
	struct tg_outbox_job job;
	struct tg_state_payload *w;
};

static void
seam_until(struct seam_wait *w)
{
	int i;

	for (i = 0; i < 5000 && !w->called; i++) {
		struct timeval tv = { 0, 1000 };

		event_base_loopexit(T.base, &tv);
		event_base_loop(T.base, EVLOOP_ONCE);
	}
	if (!w->called)
		fail_msg("the state seam did not answer");
}

static void
seam_done(const struct tg_state_res *res, void *arg)
{
	struct seam_wait *w = arg;

	w->called = 1;
	w->res = *res;
}

static void
seam_str(const struct tg_state_res *res, const char *s, void *arg)
{
	seam_done(res, arg);
	((struct seam_wait *)arg)->s = s != NULL ? strdup(s) : NULL;
}

static char *
dup_or_null(const char *s)
{
	return s != NULL ? strdup(s) : NULL;
}

static void
seam_jobs(const struct tg_state_res *res, const struct tg_outbox_job *jobs, size_t n,
    void *arg)
{
	struct seam_wait *w = arg;

	seam_done(res, arg);
	if (n != 1)
		return;
	w->job = jobs[0];
	w->job.url = dup_or_null(jobs[0].url);
	w->job.kind = dup_or_null(jobs[0].kind);
	w->job.correlation_id = dup_or_null(jobs[0].correlation_id);
	w->job.service = dup_or_null(jobs[0].service);
	w->job.api_key = dup_or_null(jobs[0].api_key);
	w->job.secret_ref = dup_or_null(jobs[0].secret_ref);
	w->job.last_error = dup_or_null(jobs[0].last_error);
}

static void
seam_writer(const struct tg_state_res *res, struct tg_state_payload *p, void *arg)
{
	seam_done(res, arg);
	((struct seam_wait *)arg)->w = p;
}

/* A job added (its id into id): 0, or -1 with err. */
static int
ob_add(const struct tg_outbox_new *j, char id[TG_WEBHOOK_ID_LEN], struct tg_err *err)
{
	struct seam_wait w = { 0 };

	if (tg_state_outbox_add(T.st, j, tg_clock_now_ms(), seam_str, &w) != NULL)
		seam_until(&w);
	*err = w.res.err;
	if (w.res.rc == TG_STATE_OK)
		snprintf(id, TG_WEBHOOK_ID_LEN, "%s", w.s);
	free(w.s);
	return w.res.rc == TG_STATE_OK ? 0 : -1;
}

static int
ob_set(const char *id, const char *body, struct tg_err *err)
{
	struct seam_wait w = { 0 };

	if (tg_state_payload_set(T.st, id, body, strlen(body), tg_clock_now_ms(), seam_done,
	    &w) != NULL)
		seam_until(&w);
	*err = w.res.err;
	return w.res.rc == TG_STATE_OK ? 0 : -1;
}

/* Job id into *j (the caller cleans it up): 0, or -1. */
static int
ob_get(const char *id, struct tg_outbox_job *j)
{
	struct seam_wait w = { 0 };

	if (tg_state_outbox_get(T.st, id, seam_jobs, &w) != NULL)
		seam_until(&w);
	*j = w.job;
	return w.res.rc == TG_STATE_OK ? 0 : -1;
}

static int
setup(void **state)
{
	struct tg_err err;
	FILE *f;

	memset(&T, 0, sizeof(T));
	snprintf(T.dir, sizeof(T.dir), "/tmp/tg-deliver-XXXXXX");
	if (mkdtemp(T.dir) == NULL)
		return -1;
	snprintf(T.db, sizeof(T.db), "%s/wh.db", T.dir);
	snprintf(T.hosts, sizeof(T.hosts), "%s/hosts", T.dir);
	if ((f = fopen(T.hosts, "w")) == NULL)
		return -1;
	fputs("127.0.0.1 hook.test\n10.0.0.5 internal.test\n", f);
	fclose(f);
	T.base = event_base_new();
	T.dns = evdns_base_new(T.base, 0);
	evdns_base_load_hosts(T.dns, T.hosts);
	T.http = tg_http_listen(T.base, "127.0.0.1:0", 1 << 20, &T.port, &err);
	evhttp_set_gencb(T.http, on_request, NULL);
	T.pol = policy("127.0.0.1/32");
	if (outbox_open(0) != 0)
		return -1;
	worker_start();
	return T.http != NULL && T.pol != NULL ? 0 : -1;
}

static int
teardown(void **state)
{
	char cmd[128];
	struct timeval tv = { 0, 20000 };

	tg_webhook_free(T.w);
	event_base_loopexit(T.base, &tv);	/* cancelled lookups report back */
	event_base_dispatch(T.base);
	tg_state_close(T.st);
	tg_egress_free(T.pol);
	evhttp_free(T.http);
	evdns_base_free(T.dns, 1);
	event_base_free(T.base);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", T.dir);
	return system(cmd) == 0 ? 0 : -1;
}

/* Run the loop until the job has a final outcome, or fail after ms. */
static const struct outcome *
run_to_end(const char *id, int ms)
{
	int64_t end = mono_ms() + ms;
	struct timeval tv = { 0, 10000 };
	int i;

	while (mono_ms() < end) {
		for (i = 0; i < T.nout; i++)
			if (strcmp(T.out[i].id, id) == 0 && T.out[i].state != TG_OUTBOX_READY)
				return &T.out[i];
		event_base_loopexit(T.base, &tv);
		event_base_dispatch(T.base);
	}
	fail_msg("job %s did not finish in %d ms", id, ms);
	return NULL;
}

static void
run_for(int ms)
{
	int64_t end = mono_ms() + ms;
	struct timeval tv = { 0, 5000 };

	while (mono_ms() < end) {
		event_base_loopexit(T.base, &tv);
		event_base_dispatch(T.base);
	}
}

static void
job_at(const char *url, const char *ref, char id[TG_WEBHOOK_ID_LEN])
{
	struct tg_outbox_new j = { .url = url, .secret_ref = ref, .kind = "export",
		.correlation_id = "corr-1", .service = "dex" };
	struct tg_err err;

	if (ob_add(&j, id, &err) != 0 || ob_set(id, BODY, &err) != 0)
		fail_msg("job: %s", err.msg);
	if (T.w != NULL)
		tg_webhook_kick(T.w);
}

static void
job(const char *path, const char *ref, char id[TG_WEBHOOK_ID_LEN])
{
	char url[128];

	snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", T.port, path);
	job_at(url, ref, id);
}

static int
outcomes_of(const char *id, const struct outcome **v, int max)
{
	int i, n = 0;

	for (i = 0; i < T.nout && n < max; i++)
		if (strcmp(T.out[i].id, id) == 0)
			v[n++] = &T.out[i];
	return n;
}

/* ---- tests ---- */

static void
test_retry_then_delivered(void **state)
{
	char id[TG_WEBHOOK_ID_LEN], host[64];
	const struct outcome *o[8];
	int i;

	job("/flaky", "main", id);
	assert_int_equal(run_to_end(id, 3000)->state, TG_OUTBOX_DELIVERED);
	assert_int_equal(outcomes_of(id, o, 8), 3);
	assert_int_equal(o[0]->status, 500);
	assert_int_equal(o[0]->state, TG_OUTBOX_READY);
	assert_string_equal(o[0]->error, "HTTP 500");
	assert_int_equal(o[1]->attempt, 2);
	assert_int_equal(o[2]->status, 200);
	assert_int_equal(o[2]->attempt, 3);
	assert_int_equal(T.nhits, 3);
	snprintf(host, sizeof(host), "127.0.0.1:%d", T.port);
	for (i = 0; i < 3; i++) {
		assert_true(T.hits[i].verified);
		assert_string_equal(T.hits[i].id, id);	/* stable across retries */
		assert_string_equal(T.hits[i].host, host);
		assert_string_equal(T.hits[i].ctype, "application/json");
	}
	assert_true(T.hits[1].at - T.hits[0].at >= 95);
	assert_true(T.hits[2].at - T.hits[1].at >= 195);
	assert_true(strcmp(T.hits[0].ts, T.hits[2].ts) <= 0);
}

static void
test_gone(void **state)
{
	char id[TG_WEBHOOK_ID_LEN];
	struct tg_outbox_job j;

	job("/gone", "main", id);
	assert_int_equal(run_to_end(id, 2000)->state, TG_OUTBOX_GONE);
	run_for(300);
	assert_int_equal(T.nhits, 1);			/* never again */
	assert_int_equal(ob_get(id, &j), 0);
	assert_int_equal(j.state, TG_OUTBOX_GONE);
	assert_int_equal(j.last_status, 410);
	tg_outbox_job_cleanup(&j);
}

static void
test_redirect_not_followed(void **state)
{
	char id[TG_WEBHOOK_ID_LEN];
	const struct outcome *o;
	int i;

	job("/moved", "main", id);
	o = run_to_end(id, 3000);
	assert_int_equal(o->state, TG_OUTBOX_DEAD);	/* 3xx fails, through the schedule */
	assert_int_equal(o->status, 301);
	assert_int_equal(o->attempt, 3);
	for (i = 0; i < T.nhits; i++)
		assert_string_equal(T.hits[i].path, "/moved");
}

static void
test_retry_after(void **state)
{
	char id[TG_WEBHOOK_ID_LEN];
	const struct outcome *o[4];

	job("/busy", "main", id);
	assert_int_equal(run_to_end(id, 4000)->state, TG_OUTBOX_DELIVERED);
	assert_int_equal(outcomes_of(id, o, 4), 2);
	assert_int_equal(o[0]->status, 503);
	/* The schedule said 100 ms; Retry-After: 1 says a second. */
	assert_true(T.hits[1].at - T.hits[0].at >= 950);
}

static void
test_retry_after_parse(void **state)
{
	int64_t t = 784111777000LL;	/* Sun, 06 Nov 1994 08:49:37 GMT */

	assert_int_equal(tg_webhook_retry_after_parse("120", 0), 120000);
	assert_int_equal(tg_webhook_retry_after_parse(" 5 ", 0), 5000);
	assert_int_equal(tg_webhook_retry_after_parse("0", 0), 0);
	assert_int_equal(tg_webhook_retry_after_parse("Sun, 06 Nov 1994 08:49:37 GMT",
	    t - 10000), 10000);
	assert_int_equal(tg_webhook_retry_after_parse("Sun, 06 Nov 1994 08:49:37 GMT", t + 5000), 0);
	assert_int_equal(tg_webhook_retry_after_parse("Sun, 06 Nov 1994 08:49:37", t), -1);
	assert_int_equal(tg_webhook_retry_after_parse("soon", 0), -1);
	assert_int_equal(tg_webhook_retry_after_parse("-5", 0), -1);
	assert_int_equal(tg_webhook_retry_after_parse("5s", 0), -1);
	assert_int_equal(tg_webhook_retry_after_parse("12345678901", 0), -1);
	assert_int_equal(tg_webhook_retry_after_parse(NULL, 0), -1);
}

/* A listener that never accepts: connections complete in the backlog,
 * requests are never answered. */
static int
silent_listener(int *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 16), 0);
	getsockname(fd, (struct sockaddr *)&sa, &sl);
	*port = ntohs(sa.sin_port);
	return fd;
}

static void
test_timeout_dead_letter(void **state)
{
	char id[TG_WEBHOOK_ID_LEN], url[64];
	const struct outcome *o[4];
	struct tg_outbox_job j;
	int port, fd = silent_listener(&port);

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/slow", port);
	job_at(url, "main", id);
	assert_int_equal(run_to_end(id, 4000)->state, TG_OUTBOX_DEAD);
	assert_int_equal(outcomes_of(id, o, 4), 3);
	assert_int_equal(o[0]->status, 0);
	assert_non_null(strstr(o[0]->error, "no answer"));
	assert_int_equal(o[1]->state, TG_OUTBOX_READY);
	assert_int_equal(ob_get(id, &j), 0);
	assert_int_equal(j.state, TG_OUTBOX_DEAD);
	assert_int_equal(j.attempts, 3);
	assert_non_null(strstr(j.last_error, "no answer"));
	tg_outbox_job_cleanup(&j);
	close(fd);
}

static void
test_egress(void **state)
{
	char id[TG_WEBHOOK_ID_LEN], url[96], host[64];
	struct tg_egress *by_name = policy("hook.test");
	const struct outcome *o;

	/* DNS says private: refused at each attempt, nothing is sent. */
	snprintf(url, sizeof(url), "http://internal.test:%d/ok", T.port);
	job_at(url, "main", id);
	o = run_to_end(id, 3000);
	assert_int_equal(o->state, TG_OUTBOX_DEAD);
	assert_non_null(strstr(o->error, "egress refused"));
	assert_non_null(strstr(o->error, "10.0.0.5 is a private address"));
	assert_int_equal(T.nhits, 0);
	/* Allowed by name: the checked address is used, Host stays the name. */
	tg_webhook_set_policy(T.w, by_name);
	snprintf(url, sizeof(url), "http://hook.test:%d/ok", T.port);
	job_at(url, "main", id);
	assert_int_equal(run_to_end(id, 2000)->state, TG_OUTBOX_DELIVERED);
	assert_int_equal(T.nhits, 1);
	snprintf(host, sizeof(host), "hook.test:%d", T.port);
	assert_string_equal(T.hits[0].host, host);
	assert_true(T.hits[0].verified);
	/* Without the CIDR, the loopback literal is refused. */
	job("/ok", "main", id);
	o = run_to_end(id, 3000);
	assert_int_equal(o->state, TG_OUTBOX_DEAD);
	assert_non_null(strstr(o->error, "loopback"));
	assert_int_equal(T.nhits, 1);
	tg_webhook_free(T.w);
	T.w = NULL;
	tg_egress_free(by_name);
}

static void
test_secrets(void **state)
{
	char id[TG_WEBHOOK_ID_LEN];
	const struct outcome *o;

	job("/rot", "rot", id);
	assert_int_equal(run_to_end(id, 2000)->state, TG_OUTBOX_DELIVERED);
	assert_true(T.hits[0].verified);	/* both signatures, each with its secret */
	job("/ok", "nope", id);
	o = run_to_end(id, 3000);
	assert_int_equal(o->state, TG_OUTBOX_DEAD);
	assert_non_null(strstr(o->error, "no webhook secret named 'nope'"));
	assert_int_equal(T.nhits, 1);
}

static void
on_drained(void *arg)
{
	T.drained++;
}

/* Teardown mid-attempt releases the lease (due again at once); drain waits
 * for the attempt in flight to end. */
static void
test_drain_and_free(void **state)
{
	char id[TG_WEBHOOK_ID_LEN], url[64];
	struct tg_outbox_job j;
	int port, fd = silent_listener(&port);

	snprintf(url, sizeof(url), "http://127.0.0.1:%d/slow", port);
	job_at(url, "main", id);
	run_for(50);
	assert_int_equal(tg_webhook_inflight(T.w), 1);
	tg_webhook_free(T.w);
	assert_int_equal(ob_get(id, &j), 0);
	assert_int_equal(j.leased, 0);
	assert_int_equal(j.state, TG_OUTBOX_READY);
	assert_int_equal(j.attempts, 1);
	tg_outbox_job_cleanup(&j);
	worker_start();
	run_for(50);
	assert_int_equal(tg_webhook_inflight(T.w), 1);
	tg_webhook_drain(T.w, on_drained, NULL);
	run_for(100);
	assert_int_equal(T.drained, 0);
	run_for(400);
	assert_int_equal(T.drained, 1);
	assert_int_equal(tg_webhook_inflight(T.w), 0);
	assert_int_equal(T.nout, 1);
	assert_int_equal(T.out[0].attempt, 2);
	run_for(300);				/* drained: no further attempt */
	assert_int_equal(T.nout, 1);
	close(fd);
}

/* An attempt longer than the lease keeps its job: the worker renews the
 * lease, so the job is not leased a second time meanwhile. */
static void
test_lease_renewed(void **state)
{
	char id[TG_WEBHOOK_ID_LEN];
	const struct outcome *o;

	tg_webhook_free(T.w);
	assert_int_equal(outbox_open(300), 0);	/* renewed every 100 ms */
	worker_start_with(2000, NULL);
	job("/slow", "main", id);
	o = run_to_end(id, 3000);
	assert_int_equal(o->state, TG_OUTBOX_DELIVERED);
	assert_int_equal(o->attempt, 1);
	assert_int_equal(T.nhits, 1);
	assert_int_equal(T.nout, 1);
}

/* ---- TLS ---- */

static SSL_CTX *tls_ctx;

static struct bufferevent *
on_tls_accept(struct event_base *base, void *arg)
{
	return bufferevent_openssl_socket_new(base, -1, SSL_new(tls_ctx),
	    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE);
}

static void
make_cert(void)
{
	static const char script[] =
	    "set -e; cd \"$1\"\n"
	    "key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out $1; }\n"
	    "key ca.key; openssl req -x509 -new -key ca.key -out ca.pem -days 2 -subj /CN=ca\n"
	    "key hook.key; openssl req -new -key hook.key -out hook.csr -subj /CN=hook.test\n"
	    "printf 'subjectAltName=DNS:hook.test\\nbasicConstraints=CA:FALSE\\n' > hook.ext\n"
	    "openssl x509 -req -in hook.csr -CA ca.pem -CAkey ca.key -CAcreateserial -days 2"
	    " -extfile hook.ext -out hook.pem\n";
	char path[128], cmd[256];
	FILE *f;

	snprintf(path, sizeof(path), "%s/mk.sh", T.dir);
	f = fopen(path, "w");
	assert_non_null(f);
	fputs(script, f);
	fclose(f);
	snprintf(cmd, sizeof(cmd), "sh %s %s >/dev/null 2>&1", path, T.dir);
	assert_int_equal(system(cmd), 0);
}

/* https to a name allow-listed, resolved to 127.0.0.1: the socket goes to
 * the checked address, the certificate is verified for the name. */
static void
test_https(void **state)
{
	struct tg_egress *by_name = policy("hook.test");
	char id[TG_WEBHOOK_ID_LEN], url[96], cert[128], key[128], ca[128];
	struct evhttp *https;
	struct tg_err err;
	int port;

	make_cert();
	snprintf(cert, sizeof(cert), "%s/hook.pem", T.dir);
	snprintf(key, sizeof(key), "%s/hook.key", T.dir);
	snprintf(ca, sizeof(ca), "%s/ca.pem", T.dir);
	tls_ctx = SSL_CTX_new(TLS_server_method());
	assert_int_equal(SSL_CTX_use_certificate_chain_file(tls_ctx, cert), 1);
	assert_int_equal(SSL_CTX_use_PrivateKey_file(tls_ctx, key, SSL_FILETYPE_PEM), 1);
	https = tg_http_listen(T.base, "127.0.0.1:0", 1 << 20, &port, &err);
	assert_non_null(https);
	evhttp_set_bevcb(https, on_tls_accept, NULL);
	evhttp_set_gencb(https, on_request, NULL);
	tg_webhook_free(T.w);
	worker_start_with(2000, ca);
	tg_webhook_set_policy(T.w, by_name);
	snprintf(url, sizeof(url), "https://hook.test:%d/ok", port);
	job_at(url, "main", id);
	assert_int_equal(run_to_end(id, 3000)->state, TG_OUTBOX_DELIVERED);
	assert_int_equal(T.nhits, 1);
	assert_true(T.hits[0].verified);
	/* The same server under an address the certificate does not name. */
	tg_webhook_set_policy(T.w, T.pol);
	snprintf(url, sizeof(url), "https://127.0.0.1:%d/ok", port);
	job_at(url, "main", id);
	assert_non_null(strstr(run_to_end(id, 3000)->error, "certificate"));
	assert_int_equal(T.nhits, 1);
	tg_webhook_free(T.w);
	T.w = NULL;
	evhttp_free(https);
	SSL_CTX_free(tls_ctx);
	tg_egress_free(by_name);
}

/* ---- 50 MB ---- */

/* A raw receiver: reads into one fixed buffer and hashes as it goes, so
 * nothing on the receiving side allocates per byte either. Its HMAC is
 * written out from SHA-256 (RFC 2104), independent of the signer's. */
static struct {
	int fd;
	struct event *ev;
	char head[8192];
	size_t hlen, body_at;
	int64_t clen, got;
	char sig[128];
	unsigned char key[64];		/* the key, zero-padded to SHA-256's block */
	EVP_MD_CTX *h;
	int done, ok;
} R;

static void
pad_digest(EVP_MD_CTX *c, unsigned char x)
{
	unsigned char pad[64];
	int i;

	for (i = 0; i < 64; i++)
		pad[i] = R.key[i] ^ x;
	EVP_DigestUpdate(c, pad, sizeof(pad));
}

static void
hmac_start(void)
{
	R.h = EVP_MD_CTX_new();
	EVP_DigestInit_ex(R.h, EVP_sha256(), NULL);
	pad_digest(R.h, 0x36);
}

static void
hmac_end(unsigned char mac[32])
{
	EVP_MD_CTX *outer = EVP_MD_CTX_new();
	unsigned char inner[32];

	EVP_DigestFinal_ex(R.h, inner, NULL);
	EVP_MD_CTX_free(R.h);
	EVP_DigestInit_ex(outer, EVP_sha256(), NULL);
	pad_digest(outer, 0x5c);
	EVP_DigestUpdate(outer, inner, sizeof(inner));
	EVP_DigestFinal_ex(outer, mac, NULL);
	EVP_MD_CTX_free(outer);
}

static void
header_value(const char *name, char *out, size_t len)
{
	const char *p = strcasestr(R.head, name);
	size_t n;

	out[0] = '\0';
	if (p == NULL)
		return;
	p += strlen(name);
	n = strcspn(p, "\r");
	snprintf(out, len, "%.*s", (int)n, p);
}

static void
head_done(void)
{
	char id[64], ts[32], cl[32], pre[128];

	header_value("\r\nwebhook-id: ", id, sizeof(id));
	header_value("\r\nwebhook-timestamp: ", ts, sizeof(ts));
	header_value("\r\nwebhook-signature: ", R.sig, sizeof(R.sig));
	header_value("\r\nContent-Length: ", cl, sizeof(cl));
	R.clen = atoll(cl);
	memset(R.key, 0, sizeof(R.key));
	EVP_DecodeBlock(R.key, (const unsigned char *)SECRET + 6, 32);	/* 24 bytes */
	hmac_start();
	snprintf(pre, sizeof(pre), "%s.%s.", id, ts);
	EVP_DigestUpdate(R.h, pre, strlen(pre));
	R.got = (int64_t)(R.hlen - R.body_at);
	EVP_DigestUpdate(R.h, R.head + R.body_at, (size_t)R.got);
}

static void
body_done(void)
{
	static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
	unsigned char mac[32], b64[64];
	char want[80];

	hmac_end(mac);
	EVP_EncodeBlock(b64, mac, 32);
	snprintf(want, sizeof(want), "v1,%s", b64);
	R.ok = strcmp(want, R.sig) == 0 && R.got == R.clen;
	assert_true(write(R.fd, ok, sizeof(ok) - 1) > 0);
	R.done = 1;
	event_del(R.ev);
}

static void
on_raw_read(evutil_socket_t fd, short what, void *arg)
{
	static unsigned char buf[256 * 1024];
	char *end;
	ssize_t n;

	if (R.body_at == 0) {
		n = read(fd, R.head + R.hlen, sizeof(R.head) - 1 - R.hlen);
		if (n <= 0)
			return;
		R.hlen += (size_t)n;
		R.head[R.hlen] = '\0';
		if ((end = strstr(R.head, "\r\n\r\n")) == NULL)
			return;
		R.body_at = (size_t)(end + 4 - R.head);
		head_done();
	} else {
		if ((n = read(fd, buf, sizeof(buf))) <= 0)
			return;
		EVP_DigestUpdate(R.h, buf, (size_t)n);
		R.got += n;
	}
	if (R.got >= R.clen)
		body_done();
}

static void
on_raw_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
    void *arg)
{
	R.fd = fd;
	R.ev = event_new(T.base, fd, EV_READ | EV_PERSIST, on_raw_read, NULL);
	event_add(R.ev, NULL);
}

static long
rss_anon_kb(void)
{
	char line[128];
	long kb = -1;
	FILE *f = fopen("/proc/self/status", "r");

	while (f != NULL && fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "RssAnon: %ld kB", &kb) == 1)
			break;
	if (f != NULL)
		fclose(f);
	return kb;
}

static long peak_kb;

static void
on_sample(evutil_socket_t fd, short what, void *arg)
{
	long kb = rss_anon_kb();

	if (kb > peak_kb)
		peak_kb = kb;
}

static void
big_payload(char id[TG_WEBHOOK_ID_LEN], const char *url)
{
	static char chunk[1 << 20];
	struct tg_outbox_new j = { .url = url, .secret_ref = "main", .kind = "export" };
	struct evbuffer *b = evbuffer_new();
	struct seam_wait w = { 0 };
	struct tg_state_payload *p;
	struct tg_err err;
	size_t i;

	/* Stop the worker while the payload is written, as the gateway would not. */
	tg_webhook_free(T.w);
	T.w = NULL;
	assert_int_equal(ob_add(&j, id, &err), 0);
	if (tg_state_payload_open(T.st, id, seam_writer, &w) != NULL)
		seam_until(&w);
	assert_non_null(p = w.w);
	for (i = 0; i < BIG / sizeof(chunk); i++) {
		memset(&w, 0, sizeof(w));
		memset(chunk, 'a' + (int)(i % 26), sizeof(chunk));
		evbuffer_add(b, chunk, sizeof(chunk));
		if (tg_state_payload_append(p, b, seam_done, &w) != NULL)
			seam_until(&w);
		assert_int_equal(w.res.rc, TG_STATE_OK);
	}
	evbuffer_free(b);
	memset(&w, 0, sizeof(w));
	if (tg_state_payload_commit(p, tg_clock_now_ms(), seam_done, &w) != NULL)
		seam_until(&w);
	assert_int_equal(w.res.rc, TG_STATE_OK);
}

static void
test_big_payload(void **state)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	struct evconnlistener *l;
	struct event *sampler;
	struct timeval tv = { 0, 2000 };
	char id[TG_WEBHOOK_ID_LEN], url[64];
	long base_kb;

	memset(&R, 0, sizeof(R));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = evconnlistener_new_bind(T.base, on_raw_accept, NULL,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 16, (struct sockaddr *)&sa, sizeof(sa));
	assert_non_null(l);
	getsockname(evconnlistener_get_fd(l), (struct sockaddr *)&sa, &sl);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/big", ntohs(sa.sin_port));
	big_payload(id, url);
	sampler = event_new(T.base, -1, EV_PERSIST, on_sample, NULL);
	event_add(sampler, &tv);
	base_kb = peak_kb = rss_anon_kb();
	worker_start();
	assert_int_equal(run_to_end(id, 20000)->state, TG_OUTBOX_DELIVERED);
	assert_true(R.done);
	assert_true(R.ok);			/* every byte, signature verified */
	assert_int_equal(R.clen, BIG);
	if (getenv("TG_TEST_LOG") != NULL)
		fprintf(stderr, "anon base %ld kB, peak %ld kB\n", base_kb, peak_kb);
	if (peak_kb - base_kb > 16 * 1024)
		fail_msg("anonymous memory grew by %ld kB for a %u MB payload",
		    peak_kb - base_kb, BIG >> 20);
	event_free(sampler);
	event_free(R.ev);
	close(R.fd);
	evconnlistener_free(l);
}

/* One host at its share (one attempt here) does not hold back another:
 * three jobs to hook.test whose receiver answers after 800 ms, then one
 * to 127.0.0.1 (the same receiver by another host name). With two slots
 * the fourth is delivered at once, and hook.test never has two attempts
 * at once; without the share the first two jobs would take both slots. */
static void
test_share_per_host(void **state)
{
	struct tg_webhook_opts wo = { .attempt_timeout_ms = 3000, .max_inflight = 2,
		.max_inflight_per_host = 1 };
	char slow[3][TG_WEBHOOK_ID_LEN], id[TG_WEBHOOK_ID_LEN], url[64];
	const struct outcome *o;
	int64_t t0;
	int i;

	tg_webhook_free(T.w);
	T.w = NULL;
	tg_egress_free(T.pol);
	T.pol = policy("127.0.0.0/8");
	snprintf(url, sizeof(url), "http://hook.test:%d/slow", T.port);
	for (i = 0; i < 3; i++)
		job_at(url, "main", slow[i]);
	job("/ok", "main", id);
	t0 = mono_ms();
	worker_start_opts(&wo);
	o = run_to_end(id, 3000);
	assert_int_equal(o->state, TG_OUTBOX_DELIVERED);
	assert_true(o->at - t0 < 400);
	for (i = 0; i < 3; i++)
		assert_int_equal(run_to_end(slow[i], 4000)->state, TG_OUTBOX_DELIVERED);
	assert_int_equal(T.nhits, 4);
	for (i = 2; i < 4; i++)		/* hits 0, 2, 3 are /slow: one after the other */
		assert_true(T.hits[i].at - T.hits[i == 2 ? 0 : 2].at >= 750);
	assert_string_equal(T.hits[1].path, "/ok");
}

/* A reload widens the share (tg_webhook_set_limits): the job held back
 * goes at once, before the first attempt to its host has ended. */
static void
test_share_reloaded(void **state)
{
	struct tg_webhook_opts wo = { .attempt_timeout_ms = 3000, .max_inflight = 2,
		.max_inflight_per_host = 1 };
	char slow[2][TG_WEBHOOK_ID_LEN], url[64];
	int i;

	tg_webhook_free(T.w);
	T.w = NULL;
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/slow", T.port);
	for (i = 0; i < 2; i++)
		job_at(url, "main", slow[i]);
	worker_start_opts(&wo);
	run_for(300);
	assert_int_equal(T.nhits, 1);
	tg_webhook_set_limits(T.w, 0, 2);
	run_for(200);
	assert_int_equal(T.nhits, 2);			/* the first still in flight */
	assert_int_equal(T.nout, 0);
	for (i = 0; i < 2; i++)
		assert_int_equal(run_to_end(slow[i], 3000)->state, TG_OUTBOX_DELIVERED);
}

/* ---- receivers that drip their answer ---- */

#define DRIP_MAX	8

/* One connection: D.now written at once, then D.drip one byte a tick,
 * round and round; what the client sends is read and dropped. */
struct drip_conn {
	int fd;
	struct event *rd, *tick;
	size_t at;
};

static struct {
	const char *now, *drip;
	int tick_ms;
	int conns, closed;
	int64_t closed_at[DRIP_MAX];
	struct drip_conn *c[DRIP_MAX];
} D;

static void
drip_close(struct drip_conn *c)
{
	if (c->fd < 0)
		return;
	event_free(c->rd);
	event_free(c->tick);
	close(c->fd);
	c->fd = -1;
}

static void
on_drip_read(evutil_socket_t fd, short what, void *arg)
{
	struct drip_conn *c = arg;
	char buf[65536];
	ssize_t n = recv(fd, buf, sizeof(buf), 0);

	if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR)))
		return;
	if (D.closed < DRIP_MAX)
		D.closed_at[D.closed] = mono_ms();
	D.closed++;		/* the client closed: it stopped reading the answer */
	drip_close(c);
}

static void
on_drip_tick(evutil_socket_t fd, short what, void *arg)
{
	struct drip_conn *c = arg;
	size_t len = strlen(D.drip);

	if (len > 0 && send(c->fd, D.drip + c->at++ % len, 1, MSG_NOSIGNAL) < 0 &&
	    errno != EAGAIN)
		drip_close(c);
}

static void
on_drip_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
    void *arg)
{
	struct drip_conn *c;
	struct timeval tv = { D.tick_ms / 1000, D.tick_ms % 1000 * 1000 };

	if (D.conns >= DRIP_MAX) {
		close(fd);
		return;
	}
	c = D.c[D.conns++] = tg_xcalloc(1, sizeof(*c));
	c->fd = fd;
	evutil_make_socket_nonblocking(fd);
	if (*D.now != '\0' && send(fd, D.now, strlen(D.now), MSG_NOSIGNAL) < 0)
		fail_msg("drip: send: %s", strerror(errno));
	c->rd = event_new(T.base, fd, EV_READ | EV_PERSIST, on_drip_read, c);
	c->tick = event_new(T.base, -1, EV_PERSIST, on_drip_tick, c);
	event_add(c->rd, NULL);
	event_add(c->tick, &tv);
}

static struct evconnlistener *
drip_listen(const char *now, const char *drip, int tick_ms, int *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	struct evconnlistener *l;

	memset(&D, 0, sizeof(D));
	D.now = now;
	D.drip = drip;
	D.tick_ms = tick_ms;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	l = evconnlistener_new_bind(T.base, on_drip_accept, NULL,
	    LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE, 16, (struct sockaddr *)&sa, sizeof(sa));
	assert_non_null(l);
	getsockname(evconnlistener_get_fd(l), (struct sockaddr *)&sa, &sl);
	*port = ntohs(sa.sin_port);
	return l;
}

static void
drip_free(struct evconnlistener *l)
{
	int i;

	for (i = 0; i < D.conns; i++) {
		drip_close(D.c[i]);
		free(D.c[i]);
	}
	evconnlistener_free(l);
}

/* The status decides: a 200 whose body drips (one byte every 100 ms,
 * faster than the silence timeout) is delivered once the status is in
 * plus the answer's grace, and the connection closed; without it the
 * attempt would wait 100 s for the body. */
static void
test_answer_drips(void **state)
{
	char id[TG_WEBHOOK_ID_LEN], url[64];
	const struct outcome *o;
	struct evconnlistener *l;
	int64_t t0;
	int port;

	l = drip_listen("HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n", "x", 100, &port);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/drip", port);
	t0 = mono_ms();
	job_at(url, "main", id);
	o = run_to_end(id, 3000);
	assert_int_equal(o->state, TG_OUTBOX_DELIVERED);
	assert_int_equal(o->status, 200);
	assert_in_range(o->at - t0, 900, 1600);	/* the grace: 1 s after the status */
	run_for(100);
	assert_int_equal(D.closed, 1);
	drip_free(l);
}

/* A body past the cap ends the attempt at once: here a 500 with 8 KiB of
 * a 1 MB body, the rest never sent. */
static void
test_answer_cap(void **state)
{
	static char head[9000];
	char id[TG_WEBHOOK_ID_LEN], url[64];
	const struct outcome *o[3];
	struct evconnlistener *l;
	int64_t t0;
	int port, n;

	n = snprintf(head, sizeof(head), "HTTP/1.1 500 Oops\r\nContent-Length: 1000000\r\n\r\n");
	memset(head + n, 'x', 8192);
	head[n + 8192] = '\0';
	l = drip_listen(head, "", 1000, &port);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/cap", port);
	t0 = mono_ms();
	job_at(url, "main", id);
	assert_int_equal(run_to_end(id, 3000)->state, TG_OUTBOX_DEAD);
	assert_int_equal(outcomes_of(id, o, 3), 3);
	assert_int_equal(o[0]->status, 500);
	assert_string_equal(o[0]->error, "HTTP 500");
	assert_true(o[0]->at - t0 < 400);	/* not the grace's 1 s */
	assert_true(o[2]->at - t0 < 1200);	/* three attempts, 0 + 100 + 200 ms apart */
	drip_free(l);
}

/* A receiver that drips its head (never a whole status) holds each
 * attempt only until the deadline: three attempts, each about 800 ms,
 * each failed "deadline", then dead. The silence timeout (300 ms) never
 * fires: a byte comes every 50 ms. */
static void
test_attempt_deadline(void **state)
{
	struct tg_webhook_opts wo = { .attempt_timeout_ms = 300, .attempt_deadline_ms = 800,
		.max_inflight = 4 };
	char id[TG_WEBHOOK_ID_LEN], url[64];
	const struct outcome *o[3];
	struct evconnlistener *l;
	struct tg_outbox_job j;
	int64_t t0;
	int port, i;

	tg_webhook_free(T.w);
	worker_start_opts(&wo);
	l = drip_listen("HTTP/1.1 200 OK\r\n", "X-Drip: y\r\n", 50, &port);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/head", port);
	t0 = mono_ms();
	job_at(url, "main", id);
	assert_int_equal(run_to_end(id, 5000)->state, TG_OUTBOX_DEAD);
	assert_int_equal(outcomes_of(id, o, 3), 3);
	for (i = 0; i < 3; i++) {
		assert_int_equal(o[i]->status, 0);
		assert_non_null(strstr(o[i]->error, "deadline"));
		/* libevent times its timers with CLOCK_MONOTONIC_COARSE (a tick
		 * of up to 4 ms behind the test's clock): 5 ms of slack below */
		assert_in_range(o[i]->at - t0, 800 * (i + 1) + 100 * i * (i + 1) / 2 - 5,
		    800 * (i + 1) + 100 * i * (i + 1) / 2 + 400 * (i + 1));
	}
	run_for(100);
	assert_int_equal(D.closed, 3);			/* every connection closed */
	assert_int_equal(ob_get(id, &j), 0);
	assert_int_equal(j.attempts, 3);
	assert_non_null(strstr(j.last_error, "deadline"));
	tg_outbox_job_cleanup(&j);
	drip_free(l);
}

/* A job as the admin API shows it: the URL's query and the secret's name
 * stay inside, times in RFC 3339, a time not yet null. */
static void
test_job_json(void **state)
{
	struct tg_outbox_job j = { .id = "msg_0a", .state = TG_OUTBOX_READY,
		.url = "https://hooks.example.com/in?token=s3cret", .kind = "export",
		.secret_ref = "main", .size = 7, .created_at = 1700000000002LL };
	const unsigned char *out;
	struct tg_err err;
	yajl_gen g = tg_json_gen_new();
	yajl_val v;
	size_t len;

	tg_outbox_job_json(g, &j);
	yajl_gen_get_buf(g, &out, &len);
	v = tg_json_parse((const char *)out, len, &err);
	assert_non_null(v);
	assert_string_equal(tg_json_get_str(v, "id"), "msg_0a");
	assert_string_equal(tg_json_get_str(v, "state"), "ready");
	assert_string_equal(tg_json_get_str(v, "url"), "https://hooks.example.com/in?\u2026");
	assert_null(strstr((const char *)out, "s3cret"));
	assert_null(strstr((const char *)out, "main"));
	assert_string_equal(tg_json_get_str(v, "createdAt"), "2023-11-14T22:13:20.002Z");
	assert_true(YAJL_IS_NULL(tg_json_get(v, "firstAttemptAt")));
	assert_int_equal(YAJL_GET_INTEGER(tg_json_get(v, "size")), 7);
	yajl_tree_free(v);
	yajl_gen_free(g);
}

#define T_(f) cmocka_unit_test_setup_teardown(f, setup, teardown)

int
main(void)
{
	const struct CMUnitTest tests[] = {
		T_(test_retry_then_delivered),
		T_(test_gone),
		T_(test_redirect_not_followed),
		T_(test_retry_after),
		cmocka_unit_test(test_retry_after_parse),
		cmocka_unit_test(test_job_json),
		T_(test_timeout_dead_letter),
		T_(test_egress),
		T_(test_secrets),
		T_(test_drain_and_free),
		T_(test_lease_renewed),
		T_(test_https),
		T_(test_big_payload),
		T_(test_answer_drips),
		T_(test_answer_cap),
		T_(test_attempt_deadline),
		T_(test_share_per_host),
		T_(test_share_reloaded),
	};

	tg_log_init(stderr, getenv("TG_TEST_LOG") ? TG_LOG_DEBUG : TG_LOG_OFF);
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
