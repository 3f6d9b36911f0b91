/*
 * callbacks.c - the request side of callbackUrl webhooks. For an export
 * request (POST /export/<kind>) carrying a callbackUrl, by webhooks.mode:
 *
 * - deliver: the URL is checked (egress policy, a signing secret exists),
 *   taken out of the body sent to the vendor, and the vendor's 200
 *   {correlationId} is held (proxy.c captures it instead of streaming)
 *   until the job is committed to the outbox; then the caller gets the
 *   answer and hook_fetch.c polls for the export data;
 * - relay: the job is added first and the vendor is given the gateway's
 *   inbound endpoint POST /__tidegate/callbacks/{job id} (under
 *   webhooks.public_url) instead; its delivery fills the job's payload;
 * - forward: nothing here, the URL goes to the vendor untouched.
 *
 * In deliver and relay mode the payload quota is asked first: while the
 * payloads held are at webhooks.payload_max_bytes, or the caller's key at
 * its share, the request is refused (503 WEBHOOK_QUOTA) before the vendor
 * hears of it. The vendor's relay delivery is stored under the same quota.
 *
 * Called through the webhook feature's registration (feature.c), which
 * the request core calls per operation: wh_hook_check and wh_scan_fill
 * when the body is validated (the scan reads an export body once for
 * both, on the validation worker thread for a large body), wh_hook_prepare
 * before the vendor call, wh_hook_done at its end, wh_hook_relay_head and
 * wh_hook_relay for the inbound endpoint.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/clock.h"
#include "tidegate/http.h"
#include "tidegate/json.h"
#include "tidegate/log.h"
#include "hooks_int.h"

void
wh_hook_free(struct wh_hook *hk)
{
	if (hk == NULL)
		return;
	free(hk->url);
	free(hk->cid);
	free(hk);
}

/* The URL's host only, for logs (never its path or query). */
static void
url_host(const char *url, char *out, size_t n)
{
	struct evhttp_uri *u = evhttp_uri_parse(url);
	const char *h = u != NULL ? evhttp_uri_get_host(u) : NULL;

	snprintf(out, n, "%s", h != NULL ? h : "");
	if (u != NULL)
		evhttp_uri_free(u);
}

/* ---- the request body ---- */

static struct evbuffer *
body_of(struct gw_req *r)
{
	return r->body != NULL ? r->body : evhttp_request_get_input_buffer(r->req);
}

/* Either spelling (validation normalises to callbackUrl; with dex.validate
 * off the caller's spelling arrives). NULL: none, or the vendor's "none". */
static const char *
callback_url(yajl_val v, const char **member)
{
	static const char *const names[] = { "callbackUrl", "callbackURL" };
	yajl_val u;
	size_t i;

	for (i = 0; i < TG_NELEM(names); i++) {
		u = tg_json_get(v, names[i]);
		if (u != NULL && YAJL_IS_STRING(u) && *YAJL_GET_STRING(u) != '\0') {
			*member = names[i];
			return YAJL_GET_STRING(u);
		}
	}
	return NULL;
}

/* The body (an object) without its callbackUrl members. */
static char *
strip_callback(yajl_val v, size_t *len)
{
	yajl_gen g = tg_json_gen_new();
	const unsigned char *buf;
	const char *k;
	char *out;
	size_t i;

	yajl_gen_map_open(g);
	for (i = 0; i < v->u.object.len; i++) {
		k = v->u.object.keys[i];
		if (strcmp(k, "callbackUrl") == 0 || strcmp(k, "callbackURL") == 0)
			continue;
		tg_json_str(g, k);
		tg_json_gen_val(g, v->u.object.values[i]);
	}
	yajl_gen_map_close(g);
	yajl_gen_get_buf(g, &buf, len);
	out = tg_xmalloc(*len + 1);
	memcpy(out, buf, *len + 1);
	yajl_gen_free(g);
	return out;
}

static char *
object_callback(yajl_val v, const char **member)
{
	const char *url;

	if (v == NULL || !YAJL_IS_OBJECT(v) || (url = callback_url(v, member)) == NULL)
		return NULL;
	return tg_xstrdup(url);
}

/*
 * Everything the webhook code reads of an export body, from the body as
 * the request check parsed it (b borrowed): the caller's callbackUrl, and
 * the body sent without it, which the check made (or, the check having let
 * an export kind it does not know through unchanged, generated here from
 * the same tree). Nothing is parsed again; reads only b, so it runs on the
 * worker thread for a large body.
 */
void
wh_scan_fill(struct wh_scan *s, const struct tg_check_body *b)
{
	memset(s, 0, sizeof(*s));
	s->raw_url = object_callback(b->tree, &s->raw_member);
	if (b->checked) {
		s->sent = 1;
		s->member = "callbackUrl";
		s->url = b->callback != NULL && *b->callback != '\0' ?
		    tg_xstrdup(b->callback) : NULL;
		if (s->url != NULL && b->stripped != NULL)
			s->stripped = tg_xstrndup(b->stripped, b->stripped_len);
		s->stripped_len = b->stripped_len;
	} else if (b->sent == NULL && b->tree != NULL && YAJL_IS_OBJECT(b->tree)) {
		s->sent = 1;	/* unchecked: the caller's body is the one sent */
		if ((s->url = object_callback(b->tree, &s->member)) != NULL)
			s->stripped = strip_callback(b->tree, &s->stripped_len);
	}
}

/* The same from a body no check read (dex.validate off): one parse. */
static void
scan_bytes(struct wh_scan *s, const char *bytes, size_t len)
{
	struct tg_check_body b = { NULL, 0, NULL, 0, NULL, 0, NULL };

	b.tree = tg_json_parse(bytes, len, NULL);
	wh_scan_fill(s, &b);
	yajl_tree_free(b.tree);
}

void
wh_scan_free(struct wh_scan *s)
{
	if (s == NULL)
		return;
	free(s->raw_url);
	free(s->url);
	free(s->stripped);
	free(s);
}

static void
free_ref(const void *data, size_t len, void *arg)
{
	free(arg);
}

/* The body without its callbackUrl, or with relay_url in its place: the
 * stripped body (taken from s, not copied), its closing brace replaced by
 * the relay member. */
static void
rewrite_body(struct gw_req *r, struct wh_scan *s, const char *relay_url)
{
	struct evbuffer *b = evbuffer_new();
	const unsigned char *tail;
	yajl_gen g;
	size_t n;

	if (relay_url == NULL) {
		evbuffer_add_reference(b, s->stripped, s->stripped_len, free_ref, s->stripped);
	} else {
		g = tg_json_gen_new();
		yajl_gen_map_open(g);
		tg_json_kv_str(g, "callbackUrl", relay_url);
		yajl_gen_map_close(g);
		yajl_gen_get_buf(g, &tail, &n);		/* {"callbackUrl":"…"} */
		evbuffer_add_reference(b, s->stripped, s->stripped_len - 1, free_ref, s->stripped);
		if (s->stripped_len > 2)
			evbuffer_add(b, ",", 1);
		evbuffer_add(b, tail + 1, n - 1);
		yajl_gen_free(g);
	}
	s->stripped = NULL;
	if (r->body != NULL)
		evbuffer_free(r->body);
	r->body = b;
}

/* ---- request time ---- */

/* Space comes back as deliveries end: the schedule's early steps. */
#define QUOTA_RETRY_AFTER	"60"

static void
reply_quota(struct gw_req *r, const char *msg)
{
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "Retry-After",
	    QUOTA_RETRY_AFTER);
	gw_req_reply_error(r, 503, "WEBHOOK_QUOTA", msg);
}


static const char *
secret_ref(struct gw_req *r)
{
	return wh_secret_ref(r->rt, r->key != NULL ? r->key->name : NULL);
}

static void
refuse(struct gw_req *r, const char *member, const char *code, const char *msg)
{
	struct tg_problems p;
	char path[32];

	memset(&p, 0, sizeof(p));
	p.max = (size_t)r->rt->cfg.max_problems;
	snprintf(path, sizeof(path), "/%s", member);
	tg_problems_add(&p, path, code, "%s", msg);
	gw_reply_problems(r, &p);	/* frees r */
	tg_problems_cleanup(&p);
}

/* ---- adding a job ---- */

/*
 * A job being added outlives its request: the client may go while the
 * job is written (a write that may still commit), and the job must then
 * still be looked after: its payload fetched (deliver), or given up
 * (relay: the vendor was never called). Held in h->adds; the request's
 * slot points to it while the request lasts.
 */
struct wh_add {
	TAILQ_ENTRY(wh_add) entry;	/* h->adds */
	struct wh_hooks *h;
	struct gw_req *r;		/* NULL once the request is gone */
	struct tg_state_op *op;
	char *cid;			/* deliver: the vendor's correlationId */
	char *key;			/* the caller's API key name, or NULL */
	int in_call, done;
};

static void
add_free(struct wh_add *a)
{
	TAILQ_REMOVE(&a->h->adds, a, entry);
	free(a->cid);
	free(a->key);
	free(a);
}

void
wh_add_orphan(struct wh_add *a)
{
	a->r = NULL;
}

void
wh_adds_cancel(struct wh_hooks *h)
{
	struct wh_add *a;

	while ((a = TAILQ_FIRST(&h->adds)) != NULL) {
		tg_state_cancel(a->op);
		add_free(a);
	}
}

/* The job is durable, its request gone. */
static void
orphan_added(struct wh_add *a, const char *id)
{
	const struct wh_cfg *c = wh_cfg(a->h->gw->rt);

	if (a->cid != NULL)
		wh_fetch_start(a->h, id, a->key, a->cid, tg_clock_now_ms(), c->wh_poll_interval);
	else
		wh_fetch_give_up(a->h, id, "the request ended before the vendor was called");
}

static void
on_added(const struct tg_state_res *res, const char *id, void *arg)
{
	struct wh_add *a = arg;

	a->op = NULL;
	a->done = 1;
	if (a->r != NULL) {
		wh_req_find(a->r)->add = NULL;
		wh_req_on_str(res, id, a->r);	/* may end the request */
	} else if (res->rc == TG_STATE_OK || res->rc == TG_STATE_UNKNOWN) {
		orphan_added(a, id);	/* UNKNOWN: it may exist; a fetch of a job
					 * that does not ends at once */
	}
	if (!a->in_call)
		add_free(a);
}

/* Add job j for r (cid copied, NULL in relay mode); then(r) hears the answer. */
static void
add_job(struct gw_req *r, const struct tg_outbox_new *j, const char *cid,
    void (*then)(struct gw_req *r))
{
	struct wh_hooks *h = WH(r->gw);
	struct wh_add *a = tg_xcalloc(1, sizeof(*a));
	struct tg_state_op *op;

	a->h = h;
	a->r = r;
	a->cid = cid != NULL ? tg_xstrdup(cid) : NULL;
	a->key = j->api_key != NULL ? tg_xstrdup(j->api_key) : NULL;
	TAILQ_INSERT_TAIL(&h->adds, a, entry);
	wh_req_begin(r, then);
	wh_req_find(r)->add = a;
	a->in_call = 1;
	op = tg_state_outbox_add(h->st, j, tg_clock_now_ms(), on_added, a);
	a->in_call = 0;
	if (a->done)
		add_free(a);
	else
		a->op = op;
	wh_req_end(r, NULL);	/* then(r) now when the answer came already */
}

/* Relay: the job exists before the vendor hears of it, since the URL the
 * vendor gets names it. relay_added goes on once it is durable. */
static void relay_added(struct gw_req *r);

static void
relay_add(struct gw_req *r, struct wh_hook *hk)
{
	struct tg_outbox_new j = { hk->url, hk->secret_ref, r->key ? r->key->name : NULL,
		"export", NULL, "dex", NULL };

	if (!WH(r->gw)->relay_key_ok) {	/* no URL could be made for the job */
		wh_reply_unavailable(r, "the state's relay key is not loaded yet (the state "
		    "cannot be reached), so nothing was sent to the vendor; try again", NULL);
		return;
	}
	add_job(r, &j, NULL, relay_added);
}

/* The URL the vendor gets: the job's id and its MAC (relay_mac.c). */
static char *
relay_url(const struct wh_hooks *h, const char *id)
{
	const char *base = wh_cfg(h->gw->rt)->wh_public_url;
	char seg[TG_WEBHOOK_RELAY_SEG_LEN];
	size_t n = strlen(base);

	while (n > 0 && base[n - 1] == '/')
		n--;
	wh_relay_seg(h, id, seg);	/* loaded: relay_add checked, it stays */
	return tg_xasprintf("%.*s%s%s", (int)n, base, WH_RELAY_PREFIX, seg);
}

#define NO_SECRET_MSG "no webhook signing secret is configured for this API key " \
	"(keys[].webhook_secret) or globally (webhooks.secret)"

/* The URL may be used: a secret to sign with and the egress policy agree.
 * -1 when it has replied 400. */
static int
check_url(struct gw_req *r, const char *url, const char *member, const char **ref)
{
	struct tg_err why;

	if ((*ref = secret_ref(r)) == NULL) {
		refuse(r, member, "no_secret", NO_SECRET_MSG);
		return -1;
	}
	if (tg_egress_check_url(WH(r->gw)->pol, url, &why) != 0) {
		tg_metrics_inc(r->gw->metrics, "tidegate_webhook_egress_refusals_total",
		    "stage=\"request\"", 1);
		refuse(r, member, "egress", why.msg);
		return -1;
	}
	return 0;
}

/* The job exists: the vendor gets the gateway's endpoint naming it. */
static void
relay_added(struct gw_req *r)
{
	struct wh_req *q = wh_req_find(r);
	struct wh_hooks *h = WH(r->gw);
	char *relay;

	if (q->rc != TG_STATE_OK) {
		tg_log(TG_LOG_ERROR, "webhook_add_failed", TG_LS("id", r->id),
		    TG_LS("webhook_id", q->str), TG_LS("error", q->err));
		if (q->rc == TG_STATE_UNKNOWN)	/* it may exist: it will wait for nothing */
			wh_fetch_give_up(h, q->str, "the request ended before the vendor was "
			    "called");
		wh_reply_unavailable(r, "the webhook could not be stored, so nothing was sent to "
		    "the vendor; try again", q->err);
		return;
	}
	snprintf(q->hook->id, sizeof(q->hook->id), "%s", q->str);
	wh_fetch_start(h, q->hook->id, r->key ? r->key->name : NULL, NULL, tg_clock_now_ms(), 0);
	relay = relay_url(h, q->hook->id);
	rewrite_body(r, q->scan, relay);
	wh_scan_free(q->scan);
	q->scan = NULL;
	free(relay);
	gw_req_continue(r);	/* the features after this one, then the vendor */
}

/* Whether r is an export whose callbackUrl the gateway handles. */
static int
hooked_op(const struct gw_req *r)
{
	return wh_cfg(r->rt)->wh_mode != WH_FORWARD && r->op == TG_OP_DEX_EXPORT &&
	    evhttp_request_get_command(r->req) == EVHTTP_REQ_POST;
}

/* Validation already refused the URL's shape: nothing more to say of it. */
static int
refused_already(const struct tg_problems *p)
{
	size_t i;

	for (i = 0; i < p->n; i++)
		if (strcmp(p->v[i].path, "/callbackUrl") == 0 ||
		    strcmp(p->v[i].path, "/callbackURL") == 0)
			return 1;
	return 0;
}

/* The caller's callbackUrl: from the scan validation made, else read here. */
static const char *
raw_callback(struct gw_req *r, const char **member, struct wh_scan **own)
{
	struct evbuffer *in;

	*own = NULL;
	if (wh_req_find(r) != NULL && wh_req_find(r)->scan != NULL) {
		*member = wh_req_find(r)->scan->raw_member;
		return wh_req_find(r)->scan->raw_url;
	}
	in = evhttp_request_get_input_buffer(r->req);
	*own = tg_xmalloc(sizeof(**own));
	scan_bytes(*own, (const char *)evbuffer_pullup(in, -1), evbuffer_get_length(in));
	*member = (*own)->raw_member;
	return (*own)->raw_url;
}

void
wh_hook_check(struct gw_req *r, struct tg_problems *p)
{
	struct wh_scan *own;
	const char *url, *member;
	struct tg_err why;
	char path[32];

	if (!hooked_op(r) || refused_already(p))
		return;
	if ((url = raw_callback(r, &member, &own)) != NULL) {
		snprintf(path, sizeof(path), "/%s", member);
		if (secret_ref(r) == NULL)
			tg_problems_add(p, path, "no_secret", "%s", NO_SECRET_MSG);
		if (tg_egress_check_url(WH(r->gw)->pol, url, &why) != 0) {
			tg_metrics_inc(r->gw->metrics, "tidegate_webhook_egress_refusals_total",
			    "stage=\"request\"", 1);
			tg_problems_add(p, path, "egress", "%s", why.msg);
		}
	}
	wh_scan_free(own);
}

/* The scan of the body sent: validation's, else made here (dex.validate off). */
static struct wh_scan *
sent_scan(struct gw_req *r)
{
	struct wh_req *q = wh_req_find(r);
	struct wh_scan *s = q != NULL ? q->scan : NULL;
	struct evbuffer *b;

	if (q != NULL)
		q->scan = NULL;
	if (s == NULL || !s->sent) {
		wh_scan_free(s);
		b = body_of(r);
		s = tg_xmalloc(sizeof(*s));
		scan_bytes(s, (const char *)evbuffer_pullup(b, -1), evbuffer_get_length(b));
	}
	return s;
}

#define FULL_WAIT " (and export data already accepted waits for room)"
#define FULL_TAIL "until deliveries free space, so nothing was sent to the vendor; try " \
	"again later"

/* Why r's callbackUrl is refused by the quota (into msg), or 0 when the
 * payloads held (q->used) leave room and no export data waits for it. */
static int
over_quota(struct gw_req *r, char *msg, size_t n)
{
	const struct wh_req *q = wh_req_find(r);
	struct tg_outbox_quota cap;
	size_t all, mine;

	wh_quota_of(wh_cfg(r->rt), &cap);
	wh_quota_waits(WH(r->gw), r->key ? r->key->name : NULL, &all, &mine);
	if (q->used[0] >= cap.max_bytes || all > 0)
		snprintf(msg, n, "webhook payloads hold %lld bytes of their cap "
		    "(webhooks.payload_max_bytes: %lld bytes)%s: no callbackUrl is accepted "
		    FULL_TAIL, (long long)q->used[0], (long long)cap.max_bytes,
		    all > 0 ? FULL_WAIT : "");
	else if (q->used[1] >= cap.key_max_bytes || mine > 0)
		snprintf(msg, n, "the webhook payloads of this API key hold %lld bytes of its "
		    "share (webhooks.payload_key_share of webhooks.payload_max_bytes: %lld "
		    "bytes)%s: no callbackUrl of this key is accepted " FULL_TAIL,
		    (long long)q->used[1], (long long)cap.key_max_bytes,
		    mine > 0 ? FULL_WAIT : "");
	else
		return 0;
	return 1;
}

/* The bytes held are in: refuse, or go on (relay: add the job first). */
static void
quota_checked(struct gw_req *r)
{
	struct wh_req *q = wh_req_find(r);
	char msg[400];

	if (q->rc != TG_STATE_OK) {
		tg_log(TG_LOG_ERROR, "webhook_usage_failed", TG_LS("id", r->id),
		    TG_LS("error", q->err));
		wh_reply_unavailable(r, "the webhook could not be stored: its outbox cannot be "
		    "reached, so nothing was sent to the vendor; try again", q->err);
	} else if (over_quota(r, msg, sizeof(msg))) {
		wh_quota_refused(r->gw, "request", NULL, msg);
		reply_quota(r, msg);
	} else if (wh_cfg(r->rt)->wh_mode == WH_RELAY) {
		relay_add(r, q->hook);		/* relay_added sends it on */
	} else {
		rewrite_body(r, q->scan, NULL);
		wh_scan_free(q->scan);
		q->scan = NULL;
		gw_req_continue(r);
	}
}

int
wh_hook_prepare(struct gw_req *r)
{
	struct wh_scan *s;
	struct wh_hook *hk;
	const char *ref;
	int rc = 0;

	if (!hooked_op(r))
		return 0;
	s = sent_scan(r);
	if (s->url == NULL)
		goto done;	/* no callback, or a body the vendor will refuse */
	if (check_url(r, s->url, s->member, &ref) != 0) {
		rc = -1;
		goto done;
	}
	hk = tg_xcalloc(1, sizeof(*hk));
	hk->url = tg_xstrdup(s->url);
	hk->secret_ref = ref;
	wh_req_of(r)->hook = hk;
	wh_req_of(r)->scan = s;		/* rewritten once the quota allows */
	wh_req_begin(r, quota_checked);
	wh_req_end(r, tg_state_outbox_usage(WH(r->gw)->st, r->key ? r->key->name : NULL,
	    wh_req_on_pair, r));
	return -1;			/* quota_checked sends it on */
done:
	wh_scan_free(s);
	return rc;
}

int
wh_hook_wanted(const struct gw_req *r)
{
	return hooked_op(r);
}

/* ---- the vendor's answer ---- */

static void
relay_abandon(struct gw_req *r, const char *reason)
{
	if (HOOK(r)->id[0] != '\0')
		wh_fetch_give_up(WH(r->gw), HOOK(r)->id, reason);
}

static void
reply_held(struct gw_req *r)
{
	char host[256], trace[33];

	url_host(HOOK(r)->url, host, sizeof(host));
	tg_webhook_trace_id(HOOK(r)->id, trace);
	tg_webhook_note_origin(WH(r->gw)->w, HOOK(r)->id, r->id);
	tg_log(TG_LOG_INFO, "webhook_job_added", TG_LS("webhook_id", HOOK(r)->id),
	    TG_LS("request_id", r->id), TG_LS("trace_id", r->trace_id),
	    TG_LS("delivery_trace_id", trace),
	    TG_LS("correlationId", HOOK(r)->cid), TG_LS("key", r->key ? r->key->name : NULL),
	    TG_LS("host", host), TG_LS("mode", wh_cfg(r->rt)->wh_mode_str));
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "X-Tidegate-Webhook-Id",
	    HOOK(r)->id);
	gw_req_reply_buf(r, 200, "application/json", r->capture);
}

/* Relay: the job was added already; the id is what counts. */
static void
cid_set(struct gw_req *r)
{
	struct wh_req *q = wh_req_find(r);

	if (q->rc != TG_STATE_OK)
		tg_log(TG_LOG_WARN, "webhook_correlation_failed", TG_LS("webhook_id", q->hook->id),
		    TG_LS("error", q->err));
	reply_held(r);
}

/*
 * Deliver: whether the job was stored is unknown (the database was lost
 * after the add was sent and did not answer again within state.timeout):
 * it may exist, so its fetch starts as for a stored one (a job that does
 * not exist ends it at once), and the caller is told that a callback may
 * come, under which webhook-id, and how to find out.
 */
static void
unknown_added(struct gw_req *r, struct wh_hook *hk, const struct wh_req *q)
{
	char msg[560];

	snprintf(hk->id, sizeof(hk->id), "%s", q->str);
	tg_log(TG_LOG_ERROR, "webhook_add_unknown", TG_LS("id", r->id),
	    TG_LS("webhook_id", hk->id), TG_LS("correlationId", hk->cid), TG_LS("error", q->err));
	wh_fetch_start(WH(r->gw), hk->id, r->key ? r->key->name : NULL, hk->cid, tg_clock_now_ms(),
	    wh_cfg(r->rt)->wh_poll_interval);
	evhttp_add_header(evhttp_request_get_output_headers(r->req), "X-Tidegate-Webhook-Id",
	    hk->id);
	snprintf(msg, sizeof(msg), "export %.64s was created at the vendor; whether its webhook "
	    "was stored is unknown (the database was lost while it was written and did not "
	    "answer again in time): if it was, its callback will come with webhook-id %s "
	    "(GET /webhooks/%s on the admin listener tells); poll GET "
	    "/export?correlationId=%.64s meanwhile", hk->cid, hk->id, hk->id, hk->cid);
	wh_reply_unavailable(r, msg, NULL);
}

/* Deliver: the job is durable (or not) under its correlationId. */
static void
job_added(struct gw_req *r)
{
	struct wh_req *q = wh_req_find(r);
	struct wh_hook *hk = q->hook;
	char msg[400];

	if (q->rc == TG_STATE_UNKNOWN) {
		unknown_added(r, hk, q);
		return;
	}
	if (q->rc != TG_STATE_OK) {
		tg_log(TG_LOG_ERROR, "webhook_add_failed", TG_LS("id", r->id),
		    TG_LS("correlationId", hk->cid), TG_LS("error", q->err));
		snprintf(msg, sizeof(msg), "export %.64s was created at the vendor, but its "
		    "webhook could not be stored: no callback will come (poll GET "
		    "/export?correlationId=%.64s instead)", hk->cid, hk->cid);
		wh_reply_unavailable(r, msg, q->err);
		return;
	}
	snprintf(hk->id, sizeof(hk->id), "%s", q->str);
	wh_fetch_start(WH(r->gw), hk->id, r->key ? r->key->name : NULL, hk->cid, tg_clock_now_ms(),
	    wh_cfg(r->rt)->wh_poll_interval);
	reply_held(r);
}

/* Make the job durable under cid, then answer (cid_set, job_added). */
static void
commit_job(struct gw_req *r, const char *cid)
{
	struct wh_hooks *h = WH(r->gw);
	struct wh_hook *hk = HOOK(r);
	struct tg_outbox_new j = { hk->url, hk->secret_ref, r->key ? r->key->name : NULL,
		"export", cid, "dex", NULL };

	hk->cid = tg_xstrdup(cid);
	if (hk->id[0] != '\0') {
		wh_req_begin(r, cid_set);
		wh_req_end(r, tg_state_outbox_set_cid(h->st, hk->id, cid, wh_req_on_done, r));
		return;
	}
	add_job(r, &j, cid, job_added);
}

/* A held 200: commit the job, then answer (later, once it is durable). */
static void
answer_held(struct gw_req *r)
{
	yajl_val v = tg_json_parse((const char *)evbuffer_pullup(r->capture, -1),
	    evbuffer_get_length(r->capture), NULL);
	const char *cid = tg_json_get_str(v, "correlationId");

	if (cid == NULL || *cid == '\0') {
		relay_abandon(r, "the vendor's answer carried no correlationId");
		gw_req_reply_error(r, 502, "UPSTREAM_ERROR", "the vendor's answer carried no "
		    "correlationId: no callback will be delivered");
	} else {
		commit_job(r, cid);
	}
	yajl_tree_free(v);
}

int
wh_hook_done(struct gw_req *r, enum tg_up_error err)
{
	char why[160];

	if (!r->held) {
		if (err != TG_UP_OK)
			snprintf(why, sizeof(why), "the vendor could not be reached: %s",
			    tg_up_error_str(err));
		else
			snprintf(why, sizeof(why), "the vendor refused the export (HTTP %d)",
			    r->upstream_status);
		relay_abandon(r, why);
		return 0;
	}
	if (err == TG_UP_OK && r->capture != NULL) {
		answer_held(r);
		return 1;
	}
	relay_abandon(r, "the vendor's answer broke off");
	gw_req_reply_error(r, 502, "UPSTREAM_ERROR", err == TG_UP_OK ? "the vendor's answer "
	    "was too large to hold: no callback will be delivered" : "the vendor's answer broke "
	    "off: the export may exist at the vendor, but no callback will be delivered");
	return 1;
}

/* ---- the inbound endpoint (relay mode) ---- */

static void
reply_status(struct gw_req *r, int status, const char *state, const char *id)
{
	yajl_gen g = tg_json_gen_new();
	struct evbuffer *b = evbuffer_new();

	yajl_gen_map_open(g);
	tg_json_kv_str(g, "id", id);
	tg_json_kv_str(g, "status", state);
	yajl_gen_map_close(g);
	tg_json_gen_flush(g, b);
	yajl_gen_free(g);
	gw_req_reply_buf(r, status, "application/json", b);
	evbuffer_free(b);
}

/* The job r's relay URL names (wh_hook_relay checked it). */
static const char *
relay_id(const struct gw_req *r)
{
	return wh_req_find(r)->relay;
}

/* The seam failed q's operation: 503 when it cannot be reached, else 500. */
static void
relay_failed(struct gw_req *r, const char *what)
{
	struct wh_req *q = wh_req_find(r);

	tg_log(TG_LOG_ERROR, "webhook_relay_failed", TG_LS("webhook_id", relay_id(r)),
	    TG_LS("error", q->err));
	if (tg_state_rc_down(q->rc))
		wh_reply_unavailable(r, "the webhook outbox cannot be reached; deliver again "
		    "later", q->err);
	else
		gw_req_reply_error(r, 500, "INTERNAL", what);
}

static void
relay_got(struct gw_req *r)
{
	struct wh_req *q = wh_req_find(r);

	if (q->rc != TG_STATE_OK)
		relay_failed(r, "the webhook outbox could not be read");
	else if (q->state == TG_OUTBOX_DEAD)
		gw_req_reply_error(r, 410, "GONE", "this webhook job was given up");
	else
		reply_status(r, 200, "duplicate", relay_id(r));
}

/* The job holds its payload already (a repeated delivery), or gave up. */
static void
relay_conflict(struct gw_req *r)
{
	wh_req_begin(r, relay_got);
	wh_req_end(r, tg_state_outbox_get(WH(r->gw)->st, relay_id(r), wh_req_on_jobs, r));
}

static void
relay_committed(struct gw_req *r)
{
	struct wh_req *q = wh_req_find(r);
	const char *id = relay_id(r);

	if (q->rc == TG_STATE_OK) {
		tg_webhook_kick(WH(r->gw)->w);
		wh_fetch_stop(WH(r->gw), id);
		tg_metrics_inc(r->gw->metrics, "tidegate_webhook_relay_deliveries_total", "", 1);
		tg_log(TG_LOG_INFO, "webhook_payload_ready", TG_LS("webhook_id", id),
		    TG_LI("bytes", q->bytes), TG_LS("from", "relay"));
		reply_status(r, 200, "accepted", id);
	} else if (q->rc == TG_STATE_NOT_FOUND || q->rc == TG_STATE_CONFLICT) {
		relay_conflict(r);
	} else {
		relay_failed(r, "the export data could not be stored");
	}
}

static void
relay_appended(struct gw_req *r)
{
	struct wh_req *q = wh_req_find(r);
	struct tg_state_payload *w = q->w;
	char msg[400];

	q->w = NULL;
	if (q->rc == TG_STATE_REFUSED) {
		tg_state_payload_abort(w);	/* the job waits: the vendor may deliver again */
		wh_quota_refused(r->gw, "store", relay_id(r), q->err);
		wh_fetch_quota(WH(r->gw), relay_id(r), q->err);
		snprintf(msg, sizeof(msg), "the export data was not stored: %s "
		    "(webhooks.payload_max_bytes, webhooks.payload_key_share); deliver again later",
		    q->err);
		reply_quota(r, msg);
		return;
	}
	if (q->rc != TG_STATE_OK) {
		tg_state_payload_abort(w);
		relay_failed(r, "the export data could not be stored");
		return;
	}
	wh_req_begin(r, relay_committed);
	wh_req_end(r, tg_state_payload_commit(w, tg_clock_now_ms(), wh_req_on_done, r));
}

/* The body is in memory already (evhttp read it whole): one append moves it. */
static void
relay_opened(struct gw_req *r)
{
	struct wh_req *q = wh_req_find(r);
	struct evbuffer *in = evhttp_request_get_input_buffer(r->req);
	struct tg_outbox_quota cap;

	if (q->rc == TG_STATE_OK) {
		q->bytes = (int64_t)evbuffer_get_length(in);
		wh_quota_of(wh_cfg(r->rt), &cap);
		tg_state_payload_limit(q->w, &cap);
		wh_req_begin(r, relay_appended);
		wh_req_end(r, tg_state_payload_append(q->w, in, wh_req_on_done, r));
	} else if (q->rc == TG_STATE_NOT_FOUND) {
		gw_req_reply_error(r, 404, "NOT_FOUND", "no such webhook job");
	} else if (q->rc == TG_STATE_CONFLICT) {
		relay_conflict(r);
	} else {
		relay_failed(r, "the export data could not be stored");
	}
}

/*
 * Whether this instance knows every job waiting for its export data: with
 * one instance (SQLite) it lists them all at start and adds each new one
 * before the vendor hears of its URL. In a fleet a job may wait at another
 * instance, whose delivery a load balancer may bring here: no memory of
 * one instance can say "unknown" for the fleet, and the state's answer
 * comes too late for the head.
 */
static int
waiting_known(const struct wh_hooks *h)
{
	return !h->fleet && h->resumed_all && !h->gw->draining;
}

/*
 * Whether the relay URL's segment may name a job: its MAC is the key's,
 * or (one instance only, where the waiting jobs are known) it is a bare
 * id of a job made before URLs carried a MAC. A fleet cannot vouch for a
 * bare id, nor anyone for any id before the key is loaded.
 */
static int
relay_seg_ok(const struct wh_hooks *h, const char *seg, char id[TG_WEBHOOK_ID_LEN])
{
	switch (wh_relay_check(h, seg, id)) {
	case WH_RELAY_GENUINE:
		return 0;
	case WH_RELAY_BARE:
		return waiting_known(h) ? 0 : TG_HEAD_NOT_FOUND;
	case WH_RELAY_NO_KEY:
		return TG_HEAD_UNAVAILABLE;
	default:
		return TG_HEAD_NOT_FOUND;
	}
}

int
wh_hook_relay_head(struct wh_hooks *h, const char *method, const char *path, int64_t length,
    uint64_t *limit)
{
	char id[TG_WEBHOOK_ID_LEN];
	uint64_t cap = (uint64_t)wh_cfg(h->gw->rt)->wh_max_payload;
	int v;

	if ((v = relay_seg_ok(h, path + strlen(WH_RELAY_PREFIX), id)) != 0)
		return v;
	if (strcmp(method, "POST") != 0) {
		cap = WH_RELAY_IDLE_BODY;	/* 405 after at most that */
	} else if (waiting_known(h) && !wh_fetch_waiting(h, id)) {
		if (length < 0 || length > WH_RELAY_IDLE_BODY)
			return TG_HEAD_NOT_FOUND;	/* chunked or large */
		cap = WH_RELAY_IDLE_BODY;	/* the job's state answers: 404, 410, duplicate */
	}
	if (cap < *limit)
		*limit = cap;
	return 0;
}

void
wh_hook_relay(struct gw_req *r)
{
	struct wh_req *q = wh_req_of(r);
	const char *id = q->relay;
	int v = relay_seg_ok(WH(r->gw), r->path + strlen(WH_RELAY_PREFIX), q->relay);
	char msg[200];

	if (v == TG_HEAD_UNAVAILABLE || r->fault == TG_HEAD_UNAVAILABLE) {
		wh_reply_unavailable(r, "relay URLs cannot be checked until the state's relay "
		    "key is loaded (the state cannot be reached); deliver again later", NULL);
	} else if (v != 0) {
		gw_req_reply_error(r, 404, "NOT_FOUND", "no such webhook job");
	} else if (evhttp_request_get_command(r->req) != EVHTTP_REQ_POST) {
		gw_req_reply_405(r, "POST");
	} else if (r->fault == TG_HEAD_NOT_FOUND) {
		gw_req_reply_error(r, 404, "NOT_FOUND", "no webhook job waits for export data "
		    "under this id (unknown, delivered already, or given up)");
	} else if (r->fault != 0 || (int64_t)evbuffer_get_length(
	    evhttp_request_get_input_buffer(r->req)) > wh_cfg(r->rt)->wh_max_payload) {
		snprintf(msg, sizeof(msg), "the export is larger than a relayed export may be: "
		    "at most webhooks.max_payload (%lld bytes) and max_body (%lld bytes)",
		    (long long)wh_cfg(r->rt)->wh_max_payload, (long long)r->rt->cfg.max_body);
		gw_req_reply_error(r, 413, "PAYLOAD_TOO_LARGE", msg);
	} else {
		wh_req_begin(r, relay_opened);
		wh_req_end(r, tg_state_payload_open(WH(r->gw)->st, id, wh_req_on_payload, r));
	}
}
