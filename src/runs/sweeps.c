/*
 * sweeps.c - the sweep endpoints of the extension API on the simulation
 * listener (docs/simulations.md):
 *   POST /tidegate/v1/sweeps       check the request, take a unit of the
 *                                  key's daily quota of sweeps (limits.sweeps:
 *                                  given back unless the sweep is stored),
 *                                  fetch the base case
 *                                  with the gateway's token, patch and
 *                                  check every variant (all problems in
 *                                  one 400), store the sweep, 201
 *   GET  /tidegate/v1/sweeps       the caller's sweeps, newest first
 *                                  (state=running|done, limit, offset)
 *   GET  /tidegate/v1/sweeps/{id}  the summary, JSON or CSV
 *                                  (Accept: text/csv)
 * and the sweep webhook once every variant has ended (runs_sweep_settle).
 * Submitting the variants is sweeper.c's. The registry and the outbox
 * answer through the state seam, in callbacks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/clock.h"
#include "tidegate/http.h"
#include "tidegate/json.h"
#include "tidegate/log.h"
#include "tidegate/registry.h"
#include "runs_int.h"

#define SWEEPS_PATH	RUNS_API_PREFIX "sweeps"
#define CASE_MAX_BODY	(16 * 1024 * 1024)

/* A POST in progress: the parsed request while the base case is fetched. */
struct runs_sweep_post {
	struct tg_sweep_request req;
	char *callback;			/* checked callback URL, or NULL */
};

void
runs_sweep_post_free(struct runs_sweep_post *sp)
{
	if (sp == NULL)
		return;
	tg_sweep_request_cleanup(&sp->req);
	free(sp->callback);
	free(sp);
}

/* ---- the summary ---- */

static int
wants_csv(struct gw_req *r)
{
	const char *a = tg_http_header(r->req, "Accept");

	return a != NULL && strstr(a, "text/csv") != NULL;
}

static void
on_summary_variants(const struct tg_state_res *res, const struct tg_sweep_variant *v,
    size_t n, void *arg)
{
	struct gw_req *r = arg;
	struct runs_req *q = runs_req_of(r);
	struct evbuffer *b;
	yajl_gen g;

	q->op = NULL;
	if (res->rc == TG_STATE_NOT_FOUND) {
		gw_req_reply_error(r, 404, "NOT_FOUND", "no such sweep");
	} else if (res->rc != 0) {
		runs_reply_state(r, res, 503, "REGISTRY_UNAVAILABLE", "the run registry failed");
	} else if (q->status == 200 && wants_csv(r)) {
		b = evbuffer_new();
		tg_sweep_csv(b, v, n);
		gw_req_reply_buf(r, 200, "text/csv; charset=utf-8", b);
		evbuffer_free(b);
	} else {
		g = tg_json_gen_new();
		tg_sweep_json(g, &q->sweep_rec, v, n);
		gw_req_reply_json(r, q->status, g);
		yajl_gen_free(g);
	}
}

/* Sweep id of r's key (another key's is not found): its variants next. */
static void
on_summary_sweep(const struct tg_state_res *res, const struct tg_sweep *s, size_t n,
    int more, void *arg)
{
	struct gw_req *r = arg;
	struct runs_req *q = runs_req_of(r);

	q->op = NULL;
	if (res->rc == TG_STATE_NOT_FOUND || (res->rc == 0 && (n == 0 ||
	    s[0].api_key == NULL || strcmp(s[0].api_key, r->key->name) != 0))) {
		gw_req_reply_error(r, 404, "NOT_FOUND", "no such sweep");
		return;
	}
	if (res->rc != 0) {
		runs_reply_state(r, res, 503, "REGISTRY_UNAVAILABLE", "the run registry failed");
		return;
	}
	tg_sweep_cleanup(&q->sweep_rec);
	runs_sweep_copy(&q->sweep_rec, &s[0]);
	runs_req_wait(r, tg_state_sweep_variants(r->gw->state, s[0].id, on_summary_variants,
	    r));
}

/* Answer r with the summary of sweep id (borrowed), HTTP status. */
static void
reply_summary(struct gw_req *r, const char *id, int status)
{
	runs_req_of(r)->status = status;
	runs_req_wait(r, tg_state_sweep_get(r->gw->state, id, on_summary_sweep, r));
}

/* ---- POST: request, base case, variants, store ---- */

/* Whether sweep id was stored is unknown (the database was lost while it
 * was written, state.timeout passed): if it was, the leader submits its
 * variants; say so, and how to find out. */
static void
sweep_unknown(struct gw_req *r, const char *id, const struct tg_state_res *res)
{
	char msg[400];

	tg_log(TG_LOG_ERROR, "sweep_create_unknown", TG_LS("id", r->id), TG_LS("sweepId", id),
	    TG_LS("error", res->err.msg));
	snprintf(msg, sizeof(msg), "whether sweep %.64s was stored is unknown (the database "
	    "was lost while it was written and did not answer again in time): if it was, its "
	    "variants will be submitted; GET " SWEEPS_PATH "/%.64s tells (404: it was not "
	    "stored, nothing will be submitted)", id, id);
	runs_reply_state(r, res, 503, "REGISTRY_UNAVAILABLE", msg);
}

/* The sweep is stored (durable): its variants go, and r gets the summary. */
static void
on_created(const struct tg_state_res *res, const char *id, void *arg)
{
	struct gw_req *r = arg;
	struct runs_req *q = runs_req_of(r);
	struct runs_sweep_post *sp = q->sweep;
	char *loc;

	q->op = NULL;
	if (res->rc == TG_STATE_UNKNOWN) {
		sweep_unknown(r, id, res);
		return;
	}
	if (res->rc != 0) {
		tg_log(TG_LOG_ERROR, "sweep_create_failed", TG_LS("id", r->id),
		    TG_LS("error", res->err.msg));
		runs_reply_state(r, res, 503, "REGISTRY_UNAVAILABLE",
		    "the sweep could not be stored; nothing was submitted");
		return;
	}
	tg_metrics_inc(r->gw->metrics, "tidegate_sweeps_created_total", "", 1);
	if (RUNS(r->gw)->sweeps_quota != NULL)
		RUNS(r->gw)->sweeps_quota->keep(RUNS(r->gw)->sweeps_quota_ctx, r);
	tg_log(TG_LOG_INFO, "sweep_created", TG_LS("id", r->id), TG_LS("sweepId", id),
	    TG_LS("key", r->key->name), TG_LI("variants", sp->req.n),
	    TG_LI("concurrency", sp->req.concurrency > 0 ? sp->req.concurrency :
	    (int)runs_cfg(r->rt)->runs_sweep_concurrency));
	loc = tg_xasprintf("%s/%s", SWEEPS_PATH, id);
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "Location", loc);
	free(loc);
	runs_sweeper_kick(RUNS(r->gw)->sweeper, id);
	reply_summary(r, id, 201);
}

static void
create(struct gw_req *r, yajl_val base)
{
	struct runs_sweep_post *sp = runs_req_of(r)->sweep;
	struct tg_sweep_variant_new *built = NULL;
	struct tg_problems p;
	struct tg_sweep_new s;
	size_t n = sp->req.n;		/* r and sp may be freed by the reply */

	memset(&p, 0, sizeof(p));
	p.max = (size_t)r->rt->cfg.max_problems;
	if (tg_sweep_build(&sp->req, base, &r->svc->cfg->cases, &built, &p) != 0) {
		gw_reply_problems(r, &p);
		tg_problems_cleanup(&p);
		return;
	}
	memset(&s, 0, sizeof(s));
	s.api_key = r->key->name;
	s.base_case_id = sp->req.base_case_id;
	s.callback_url = sp->callback;
	s.concurrency = sp->req.concurrency > 0 ? sp->req.concurrency :
	    (int)runs_cfg(r->rt)->runs_sweep_concurrency;
	s.variants = built;
	s.nvariants = sp->req.n;
	/* s is copied by the call; r may be gone when it returns */
	runs_req_wait(r, tg_state_sweep_create(r->gw->state, &s, tg_clock_now_ms(), on_created,
	    r));
	tg_sweep_built_free(built, n);
	tg_problems_cleanup(&p);
}

static void
on_case(struct gw_vcall *c, const struct gw_vfetch *res, void *arg)
{
	struct gw_req *r = arg;
	const char *id = runs_req_of(r)->sweep->req.base_case_id;
	enum tg_up_error uerr = res->err;
	int status = res->status;
	struct evbuffer *body = res->body;
	char msg[384];
	yajl_val base;

	runs_req_of(r)->call = NULL;	/* freed after this returns */
	r->upstream_status = status;
	if (res->token_why != NULL) {
		gw_req_reply_token_error(r, "no vendor token to fetch the base case",
		    res->token_why, res->retry_after);
	} else if (uerr == TG_UP_BUSY) {
		gw_req_reply_busy(r, res->u);
	} else if (uerr != TG_UP_OK) {
		snprintf(msg, sizeof(msg), "the base case could not be fetched: %s",
		    tg_up_error_str(uerr));
		gw_req_reply_error(r, 502, "UPSTREAM_ERROR", msg);
	} else if (status == 404) {
		snprintf(msg, sizeof(msg), "the vendor has no case %.256s", id);
		gw_req_reply_error(r, 404, "NOT_FOUND", msg);
	} else if (status != 200) {
		snprintf(msg, sizeof(msg), "the vendor answered HTTP %d to GET of the base case",
		    status);
		gw_req_reply_error(r, 502, "UPSTREAM_ERROR", msg);
	} else if ((base = tg_json_parse((const char *)evbuffer_pullup(body, -1),
	    evbuffer_get_length(body), NULL)) == NULL) {
		gw_req_reply_error(r, 502, "UPSTREAM_ERROR",
		    "the vendor's base case is not JSON");
	} else {
		create(r, base);
		yajl_tree_free(base);
	}
}

static void
case_headers(struct gw_vcall *c, struct evkeyvalq *h, void *arg)
{
	struct gw_req *r = arg;

	evhttp_add_header(h, "Accept", "application/json");
	evhttp_add_header(h, "X-Request-Id", r->id);
}

static void
fetch_case(struct gw_req *r)
{
	const struct gw_service *s = &r->rt->svc[GW_SIM];
	struct tg_route_match m;
	struct gw_vcall_req q;
	char *enc, *path;

	memset(&m, 0, sizeof(m));
	enc = evhttp_uriencode(runs_req_of(r)->sweep->req.base_case_id, -1, 0);
	snprintf(m.param_name[0], sizeof(m.param_name[0]), "id");
	snprintf(m.param[0], sizeof(m.param[0]), "%s", enc);
	m.nparam = 1;
	free(enc);
	path = tg_route_expand(s->cfg->routes[TG_OP_SIM_CASE], &m);
	free(r->uri);
	r->uri = tg_xasprintf("%s%s", tg_upstream_base_path(s->api), path ? path : "/");
	free(path);
	memset(&q, 0, sizeof(q));
	q.rt = r->rt;
	q.service = GW_SIM;
	q.method = EVHTTP_REQ_GET;
	q.uri = r->uri;
	q.owner = gw_req_owner(r);
	runs_req_of(r)->call = gw_vcall_fetch(&q, CASE_MAX_BODY, case_headers, on_case, r);
}

static void
post_sweep(struct gw_req *r)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(r->req);
	struct runs_sweep_post *sp = tg_xcalloc(1, sizeof(*sp));
	const struct gw_limits_sweeps *quota = RUNS(r->gw)->sweeps_quota;
	struct tg_problems p;
	const char *url;

	memset(&p, 0, sizeof(p));
	p.max = (size_t)r->rt->cfg.max_problems;
	runs_req_of(r)->sweep = sp;
	if (tg_sweep_request_parse((const char *)evbuffer_pullup(in, -1),
	    evbuffer_get_length(in), (size_t)runs_cfg(r->rt)->runs_sweep_max_variants, &sp->req,
	    &p) != 0)
		goto refuse;
	url = sp->req.callback_url;
	if (url != NULL && runs_callback_check(r, url, &p) != 0)
		goto refuse;
	if (strlen(sp->req.base_case_id) * 3 >= TG_ROUTE_PARAMLEN) {
		tg_problems_add(&p, "/baseCaseId", "range", "baseCaseId is too long");
		goto refuse;
	}
	sp->callback = url != NULL ? tg_xstrdup(url) : NULL;
	if (quota == NULL || quota->take(RUNS(r->gw)->sweeps_quota_ctx, r, fetch_case) == 0)
		fetch_case(r);
	return;
refuse:
	gw_reply_problems(r, &p);
	tg_problems_cleanup(&p);
}

void
runs_sweeps_page_json(yajl_gen g, const struct tg_sweep *s, size_t n, size_t limit,
    size_t offset, int more)
{
	size_t i;

	yajl_gen_map_open(g);
	tg_json_str(g, "sweeps");
	yajl_gen_array_open(g);
	for (i = 0; i < n; i++)
		tg_sweep_brief_json(g, &s[i]);
	yajl_gen_array_close(g);
	tg_json_kv_int(g, "limit", (long long)limit);
	tg_json_kv_int(g, "offset", (long long)offset);
	tg_json_kv_bool(g, "more", more);
	yajl_gen_map_close(g);
}

static void
on_list(const struct tg_state_res *res, const struct tg_sweep *s, size_t n, int more,
    void *arg)
{
	struct gw_req *r = arg;
	struct runs_req *q = runs_req_of(r);
	yajl_gen g;

	q->op = NULL;
	if (res->rc != 0) {
		runs_reply_state(r, res, 400, "BAD_REQUEST", res->err.msg);
		return;
	}
	g = tg_json_gen_new();
	runs_sweeps_page_json(g, s, n, q->limit, q->offset, more);
	gw_req_reply_json(r, 200, g);
	yajl_gen_free(g);
}

static void
list_sweeps(struct gw_req *r)
{
	char *state = tg_http_query(r->req, "state"), why[128];
	size_t limit = 100, offset = 0;

	if (runs_api_paging(r, &limit, &offset, why, sizeof(why)) != 0) {
		gw_req_reply_error(r, 400, "BAD_REQUEST", why);
		free(state);
		return;
	}
	runs_req_of(r)->limit = limit;
	runs_req_of(r)->offset = offset;
	runs_req_wait(r, tg_state_sweep_list(r->gw->state, r->key->name, state, limit, offset,
	    on_list, r));
	free(state);
}

void
runs_sweeps_api(struct gw_req *r, const char *rest)
{
	enum evhttp_cmd_type m = evhttp_request_get_command(r->req);

	if (*rest == '\0') {
		if (m == EVHTTP_REQ_POST)
			post_sweep(r);
		else if (m == EVHTTP_REQ_GET)
			list_sweeps(r);
		else
			gw_req_reply_405(r, "GET, POST");
		return;
	}
	if (rest[0] != '/' || rest[1] == '\0' || strchr(rest + 1, '/') != NULL) {
		gw_req_reply_error(r, 404, "NOT_FOUND", "no such endpoint");
		return;
	}
	if (m != EVHTTP_REQ_GET)
		gw_req_reply_405(r, "GET");
	else
		reply_summary(r, rest + 1, 200);
}
