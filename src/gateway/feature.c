/*
 * feature.c - the features registered with the core and the calls into
 * them. A request meets only the features registered for its operation
 * (gw->by_op, filled at registration): a plain proxied request, whose
 * operation no feature serves, costs one array length read at each step.
 * Features are called in registration order; the entry point fixes it.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "tidegate/feature_apis.h"
#include "tidegate/util.h"
#include "tidegate/worker.h"
#include "gw.h"

/* Where f's settings are in a configuration c: -1 none, -2 its
 * configuration was not defined before c was loaded. */
static int
settings_index(const struct gw_config *c, const struct gw_feature *f)
{
	size_t i;

	if (f->config == NULL)
		return -1;
	for (i = 0; i < c->ndefs; i++)
		if (c->def[i] == f->config)
			return (int)i;
	return -2;
}

/* A feature without endpoints: every request's prefix walk reads it like
 * the others, without a test of its own. */
static const struct gw_endpoint_role no_endpoints;

int
gw_feature_register(struct gw *gw, const struct gw_feature *f, void *ctx,
    struct tg_err *err)
{
	const enum tg_op *op;
	int id = gw->nfeat, cfg = settings_index(&gw->rt->cfg, f);

	if (id >= GW_MAX_FEATURES) {
		tg_err_set(err, "feature %s: at most %d features", f->name, GW_MAX_FEATURES);
		return -1;
	}
	if (cfg == -2) {
		tg_err_set(err, "feature %s: its configuration was not defined before loading",
		    f->name);
		return -1;
	}
	gw->feat_cfg[id] = cfg;
	gw->feat[id] = f;
	gw->feat_req[id] = f->request;
	gw->feat_chk[id] = f->check;
	gw->feat_ep[id] = f->endpoints != NULL ? f->endpoints : &no_endpoints;
	gw->feat_ctx[id] = ctx;
	gw->nfeat++;
	for (op = f->request != NULL ? f->request->ops : NULL; op != NULL && *op != TG_OP_COUNT;
	    op++)
		gw->by_op[*op][gw->nby_op[*op]++] = (unsigned char)id;
	return id;
}

/* Every runtime's configuration holds the features' settings in one order
 * (the process's definitions), so the index found at registration holds. */
const void *
gw_feature_settings(const struct gw_runtime *rt, int id)
{
	int i = rt->gw->feat_cfg[id];

	return i < 0 ? NULL : rt->cfg.settings[i];
}

void *
gw_req_slot(struct gw_req *r, int id, size_t size)
{
	if (r->slot[id] == NULL)
		r->slot[id] = tg_xcalloc(1, size);
	return r->slot[id];
}

/* Features of r's operation, in order: for (i...) { id = OP_FEAT(r, i) } */
#define NOPFEAT(r)	((r)->gw->nby_op[(r)->op])
#define OPFEAT(r, i)	((r)->gw->by_op[(r)->op][i])

int
gw_feat_prefix(struct gw_req *r)
{
	struct gw *gw = r->gw;
	const struct gw_endpoint_role *f;
	int id;

	for (id = 0; id < gw->nfeat; id++) {
		f = gw->feat_ep[id];
		if (f->on_prefix != NULL && f->prefix_listener == r->svc->index &&
		    tg_str_startswith(r->path, f->prefix)) {
			f->on_prefix(r, gw->feat_ctx[id]);
			return 1;
		}
	}
	return 0;
}

int
gw_feat_prefix_head(struct gw *gw, int listener, const char *method, const char *path,
    int64_t length, uint64_t *limit)
{
	const struct gw_endpoint_role *f;
	int id;

	for (id = 0; id < gw->nfeat; id++) {
		f = gw->feat_ep[id];
		if (f->on_prefix != NULL && f->prefix_open && f->prefix_listener == listener &&
		    tg_str_startswith(path, f->prefix))
			return f->on_prefix_head == NULL ? 0 :
			    f->on_prefix_head(gw->feat_ctx[id], method, path, length, limit);
	}
	return -1;
}

/* From the feature after the last one asked: a feature that took r and
 * lets it go on later (gw_req_continue) resumes the chain after itself. */
int
gw_feat_request(struct gw_req *r)
{
	const struct gw_request_role *f;
	int id;

	while (r->feat_next < NOPFEAT(r)) {
		id = OPFEAT(r, r->feat_next);
		r->feat_next++;
		f = r->gw->feat_req[id];
		if (f->on_request != NULL && f->on_request(r, r->gw->feat_ctx[id]) != 0)
			return -1;
	}
	return 0;
}

enum gw_head
gw_feat_head(struct gw_req *r, int status)
{
	const struct gw_request_role *f;
	enum gw_head h = GW_HEAD_RELAY, a;
	int i, id;

	for (i = 0; i < NOPFEAT(r); i++) {
		id = OPFEAT(r, i);
		f = r->gw->feat_req[id];
		if (f->on_head != NULL && (a = f->on_head(r, r->gw->feat_ctx[id], status)) > h)
			h = a;
	}
	return h;
}

/* From the feature after the last one asked, as gw_feat_request: one that
 * took a held answer and lets it go on (gw_req_done_continue) resumes the
 * chain after itself. */
int
gw_feat_done(struct gw_req *r, enum tg_up_error err, struct evbuffer *capture)
{
	const struct gw_request_role *f;
	int id;

	while (r->feat_done_next < NOPFEAT(r)) {
		id = OPFEAT(r, r->feat_done_next);
		r->feat_done_next++;
		f = r->gw->feat_req[id];
		if (f->on_done != NULL && f->on_done(r, r->gw->feat_ctx[id], err, capture))
			return 1;
	}
	return 0;
}

void
gw_feat_free(struct gw_req *r)
{
	struct gw *gw = r->gw;
	int id;

	for (id = 0; id < gw->nfeat; id++) {
		if (r->slot[id] == NULL)
			continue;
		if (gw->feat_req[id] != NULL && gw->feat_req[id]->on_free != NULL)
			gw->feat_req[id]->on_free(r, gw->feat_ctx[id], r->slot[id]);
		r->slot[id] = NULL;
	}
}

int
gw_feat_wants_scan(const struct gw_req *r, int *id)
{
	const struct gw_check_role *f;
	int i;

	for (i = 0; i < NOPFEAT(r); i++) {
		*id = OPFEAT(r, i);
		f = r->gw->feat_chk[*id];
		if (f != NULL && f->wants_scan != NULL && f->scan != NULL &&
		    f->wants_scan(r, r->gw->feat_ctx[*id]))
			return 1;
	}
	*id = -1;
	return 0;
}

void *
gw_feat_scan(struct gw *gw, int id, const struct tg_check_body *b)
{
	return id < 0 ? NULL : gw->feat_chk[id]->scan(b);
}

void
gw_feat_scan_free(struct gw *gw, int id, void *scan)
{
	if (id >= 0 && scan != NULL && gw->feat_chk[id]->scan_free != NULL)
		gw->feat_chk[id]->scan_free(scan);
}

void
gw_feat_check(struct gw_req *r, int sid, void *scan, struct tg_problems *p)
{
	const struct gw_check_role *f;
	int i, id;

	for (i = 0; i < NOPFEAT(r); i++) {
		id = OPFEAT(r, i);
		f = r->gw->feat_chk[id];
		if (f != NULL && f->check != NULL)
			f->check(r, r->gw->feat_ctx[id], id == sid ? scan : NULL, p);
		if (id == sid)
			scan = NULL;
	}
	gw_feat_scan_free(r->gw, sid, scan);
}

/* ---- observers ---- */

/* Feature id's background role's callback fn, or NULL (none, or no role). */
#define BG(gw, id, fn) \
	((gw)->feat[id]->background != NULL ? (gw)->feat[id]->background->fn : NULL)

/* An answer's observers: its publisher goes on when the count drops to 0. */
struct gw_observed {
	int pending;
	void (*done)(void *arg);	/* NULL once cancelled */
	void *arg;
};

struct gw_observed *
gw_answer_seen(struct gw *gw, struct gw_answer *a, void (*done)(void *arg), void *arg)
{
	struct gw_observed *o = tg_xcalloc(1, sizeof(*o));
	int id;

	o->pending = 1;		/* until every observer has been told */
	o->done = done;
	o->arg = arg;
	a->obs = o;
	for (id = 0; id < gw->nfeat; id++)
		if (BG(gw, id, on_answer) != NULL)
			BG(gw, id, on_answer)(gw->feat_ctx[id], a);
	a->obs = NULL;
	if (o->pending == 1) {
		free(o);
		if (done != NULL)
			done(arg);
		return NULL;
	}
	o->pending--;
	return o;
}

struct gw_observed *
gw_answer_hold(const struct gw_answer *a)
{
	a->obs->pending++;
	return a->obs;
}

void
gw_answer_release(struct gw_observed *o)
{
	void (*done)(void *) = o->done;

	if (--o->pending > 0)
		return;
	o->done = NULL;
	if (done != NULL)
		done(o->arg);
	free(o);
}

void
gw_observed_cancel(struct gw_observed *o)
{
	if (o != NULL)
		o->done = NULL;	/* freed by the last release */
}

/* ---- the APIs the features offer each other (feature_apis.h) ---- */

const void *
gw_api_get(const struct gw *gw, const char *name, void **ctx)
{
	int i;

	for (i = 0; i < gw->napis; i++)
		if (strcmp(gw->apis[i].name, name) == 0) {
			if (ctx != NULL)
				*ctx = gw->apis[i].ctx;
			return gw->apis[i].api;
		}
	return NULL;
}

int
gw_api_provide(struct gw *gw, const char *name, const void *api, void *ctx,
    struct tg_err *err)
{
	if (gw_api_get(gw, name, NULL) != NULL) {
		tg_err_set(err, "API %s: offered twice", name);
		return -1;
	}
	if (gw->napis >= GW_MAX_APIS) {
		tg_err_set(err, "API %s: at most %d APIs", name, GW_MAX_APIS);
		return -1;
	}
	gw->apis[gw->napis++] = (struct gw_api_entry){ name, api, ctx };
	return 0;
}

/* ---- the process ---- */

/* Stop the loop once draining and every reply, check and feature's work
 * is done and the spans queued are exported (otlp.c); past drain_timeout
 * (drain_cut) once the replies of the requests cut are written, whatever
 * else is under way. */
void
gw_maybe_exit(struct gw *gw)
{
	if (gw->draining && gw->inflight == 0 && gw->unflushed == 0 && (gw->drain_cut ||
	    (tg_worker_busy(gw->worker) == 0 && gw_feat_idle(gw) && gw_otlp_idle(gw->otlp))))
		event_base_loopexit(gw->base, NULL);
}

int
gw_feat_admin_find(struct gw *gw, const char *path, const char **op)
{
	const struct gw_endpoint_role *f;
	size_t n;
	int id;

	for (id = 0; id < gw->nfeat; id++) {
		f = gw->feat[id]->endpoints;
		if (f == NULL || f->on_admin == NULL || f->admin_prefix == NULL)
			continue;
		n = strlen(f->admin_prefix);
		if (strncmp(path, f->admin_prefix, n) == 0 && (path[n] == '\0' || path[n] == '/')) {
			*op = f->admin_prefix + (f->admin_prefix[0] == '/');
			return id;
		}
	}
	return -1;
}

void
gw_feat_admin(struct gw *gw, int id, struct evhttp_request *req, const char *path)
{
	gw->feat[id]->endpoints->on_admin(gw->feat_ctx[id], req, path);
}

void
gw_feat_on_start(evutil_socket_t fd, short what, void *arg)
{
	struct gw *gw = arg;
	int id;

	(void)fd;
	(void)what;
	for (id = 0; id < gw->nfeat; id++)
		if (BG(gw, id, start) != NULL)
			BG(gw, id, start)(gw->feat_ctx[id]);
}

void
gw_feat_reload(struct gw *gw, const struct gw_config *old)
{
	int id;

	for (id = 0; id < gw->nfeat; id++)
		if (BG(gw, id, reload) != NULL)
			BG(gw, id, reload)(gw->feat_ctx[id], old);
}

void
gw_feat_drain(struct gw *gw)
{
	int id;

	for (id = 0; id < gw->nfeat; id++)
		if (BG(gw, id, drain) != NULL)
			BG(gw, id, drain)(gw->feat_ctx[id]);
}

int
gw_feat_idle(struct gw *gw)
{
	int id;

	for (id = 0; id < gw->nfeat; id++)
		if (BG(gw, id, idle) != NULL && !BG(gw, id, idle)(gw->feat_ctx[id]))
			return 0;
	return 1;
}

/* In reverse: a feature registered later may use an earlier one's work. */
void
gw_feat_stop(struct gw *gw)
{
	int id;

	for (id = gw->nfeat - 1; id >= 0; id--)
		if (BG(gw, id, stop) != NULL)
			BG(gw, id, stop)(gw->feat_ctx[id]);
	gw->nfeat = 0;
}
