/*
 * spans.c - the spans tidegate exports while tracing.otlp_url is set
 * (otlp.c sends them): one SERVER span per client request on the dex and
 * sim listeners, its id made at arrival (proxy.c, gw_span_arrive) and the
 * caller's span as its parent when its traceparent was valid, ended when
 * its access line is written (reply.c, gw_req_finish); one CLIENT span per
 * attempt of a vendor call made for such a request (vendor.c), whose id is
 * the one that attempt's traceparent carried and whose parent is the
 * request's SERVER span; so do the vendor logins such a request waits for
 * (the gateway's own, vendor.c, and the caller's, logins.c). A request is
 * traced when its caller's valid traceparent says sampled, or, starting a
 * trace, with the share tracing.sample. Calls made for nobody (logins
 * nobody waits for, run checks) carry no SERVER span and make none. Times: the loop's monotonic
 * clock at the start, turned into Unix time at the end.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/http.h>

#include "tidegate/clock.h"
#include "tidegate/http.h"
#include "gw.h"

/* The Unix time in ns of the monotonic instant t0_us, and of now. */
static void
span_times(int64_t t0_us, int64_t *start_ns, int64_t *end_ns)
{
	struct timespec ts;
	int64_t now_us = tg_clock_mono_us();

	clock_gettime(CLOCK_REALTIME, &ts);
	*end_ns = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
	*start_ns = *end_ns - (now_us - t0_us) * 1000;
}

/* src (borrowed, may be NULL) into dst of n bytes, cut to fit, control
 * and non-ASCII bytes as '?' (the generator does not check UTF-8). */
static void
copy_text(char *dst, size_t n, const char *src)
{
	size_t i;

	for (i = 0; src != NULL && src[i] != '\0' && i + 1 < n; i++)
		dst[i] = (unsigned char)src[i] < 0x20 || (unsigned char)src[i] > 0x7e ? '?' :
		    src[i];
	dst[i] = '\0';
}

/* host[:port] of the vendor host that answered, from the configuration:
 * for the access line (reply.c) and CLIENT spans. */
void
gw_origin_addr(const struct gw_service *s, const char *origin, int login, char *out,
    size_t len)
{
	const char *url = origin == NULL || strcmp(origin, "none") == 0 ? NULL :
	    login && s->index == GW_SIM ? (s->cfg->token_url != NULL ? s->cfg->token_url :
	    s->cfg->auth_url) : strcmp(origin, "fallback") == 0 ? s->cfg->fallback_url :
	    s->cfg->url;
	struct evhttp_uri *u = url != NULL ? evhttp_uri_parse(url) : NULL;
	const char *h = u != NULL ? evhttp_uri_get_host(u) : NULL;
	int port = u != NULL ? evhttp_uri_get_port(u) : -1;

	*out = '\0';
	if (h != NULL && port > 0)
		snprintf(out, len, "%s:%d", h, port);
	else if (h != NULL)
		snprintf(out, len, "%s", h);
	if (u != NULL)
		evhttp_uri_free(u);
}

/* A new trace is sampled when its span id's first 32 bits, random, fall
 * below the configured share of 2^32. */
static int
sample_new(const char *span, double share)
{
	char hi[9];

	if (share >= 1.0)
		return 1;
	memcpy(hi, span, 8);
	hi[8] = '\0';
	return (double)strtoul(hi, NULL, 16) < share * 4294967296.0;
}

void
gw_span_arrive(struct gw_req *r, int flag)
{
	const char *tp = tg_http_header(r->req, "traceparent");

	gw_trace_new_span(r->span_id);
	/* a caller's trace continued: its span is the parent, its sampled
	 * flag decides (W3C parent-based sampling) */
	if (flag >= 0) {
		memcpy(r->parent_span_id, tp + 36, 16);
		r->parent_span_id[16] = '\0';
		r->sampled = flag;
	} else {
		r->sampled = sample_new(r->span_id, r->rt->cfg.otlp_sample);
	}
	if (!r->sampled)	/* no SERVER span, hence no CLIENT spans */
		r->span_id[0] = r->parent_span_id[0] = '\0';
}

void
gw_span_server(struct gw_req *r, const char *origin, const char *served)
{
	struct gw_span s;

	if (r->gw->otlp == NULL)
		return;		/* turned off by a reload while r lived */
	memset(&s, 0, sizeof(s));
	memcpy(s.trace_id, r->trace_id, sizeof(s.trace_id));
	memcpy(s.span_id, r->span_id, sizeof(s.span_id));
	memcpy(s.parent_id, r->parent_span_id, sizeof(s.parent_id));
	s.kind = GW_SPAN_SERVER;
	s.service = r->svc->name;
	s.op = tg_op_name(r->op);
	s.method = r->method;
	span_times(r->t0_us, &s.start_ns, &s.end_ns);
	s.status = r->status;
	s.error = r->status >= 500;
	copy_text(s.path, sizeof(s.path), r->path);
	copy_text(s.addr, sizeof(s.addr), r->client);
	copy_text(s.rid, sizeof(s.rid), r->id);
	copy_text(s.key, sizeof(s.key), r->key != NULL ? r->key->name : NULL);
	s.origin = origin;
	s.served = served;
	gw_otlp_add(r->gw->otlp, &s);
}

void
gw_span_client(struct gw *gw, const struct gw_span_call *c)
{
	struct gw_span s;

	if (gw->otlp == NULL)
		return;
	memset(&s, 0, sizeof(s));
	memcpy(s.trace_id, c->t->trace_id, sizeof(s.trace_id));
	copy_text(s.span_id, sizeof(s.span_id), c->span);
	memcpy(s.parent_id, c->t->span_id, sizeof(s.parent_id));
	s.kind = GW_SPAN_CLIENT;
	s.method = tg_http_cmd_name(c->method);
	s.op = s.method;	/* HTTP client spans are named by their method */
	span_times(c->t0_us, &s.start_ns, &s.end_ns);
	s.status = c->status;
	s.error = c->failed || c->status >= 500;
	gw_origin_addr(c->s, c->origin != NULL ? c->origin : "primary", c->login, s.addr,
	    sizeof(s.addr));
	s.retry = c->retry;
	gw_otlp_add(gw->otlp, &s);
}

void
gw_login_span_begin(struct gw_login_span *ls, struct gw *gw, const struct gw_trace *t,
    struct evkeyvalq *out)
{
	ls->gw = gw != NULL && gw->otlp != NULL && t != NULL && t->span_id[0] != '\0' ? gw :
	    NULL;
	if (ls->gw != NULL) {
		ls->trace = *t;
		ls->t0_us = tg_clock_mono_us();
	}
	gw_trace_headers_span(t, out, ls->span);
}

void
gw_login_span_end(struct gw_login_span *ls, const struct gw_service *s, int status,
    int failed, const char *origin)
{
	struct gw_span_call sc = { &ls->trace, ls->span, s, EVHTTP_REQ_POST, ls->t0_us, status,
		failed, origin, NULL, 1 };

	if (ls->gw == NULL)
		return;
	gw_span_client(ls->gw, &sc);
	ls->gw = NULL;
}
