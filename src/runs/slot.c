/*
 * slot.c - what every file of the runs feature shares: the feature's
 * context among the core's, each request's struct runs_req slot and the
 * state operation it waits on, the operations tied to no request (struct
 * runs_bg, cancelled when the feature stops), the reply to a failed state
 * operation, the paging of the API's lists, and a sweep record's copy.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "tidegate/clock.h"
#include "tidegate/http.h"
#include "tidegate/json.h"
#include "tidegate/log.h"
#include "runs_int.h"

/* The slot index is the same for every gateway of the process: features
 * register in one fixed order (src/tidegate.c). */
static int slot_id = -1;

void
runs_slot_set(int id)
{
	slot_id = id;
}

const struct runs_cfg *
runs_cfg(const struct gw_runtime *rt)
{
	return gw_feature_settings(rt, slot_id);
}

struct runs *
runs_ctx(const struct gw *gw)
{
	return gw->feat_ctx[slot_id];
}

struct runs_req *
runs_req_of(struct gw_req *r)
{
	return gw_req_slot(r, slot_id, sizeof(struct runs_req));
}

int
runs_callback_check(const struct gw_req *r, const char *url, struct tg_problems *p)
{
	const struct runs *rn = runs_ctx(r->gw);
	const char *key = r->key != NULL ? r->key->name : NULL;

	if (rn->callbacks != NULL)
		return rn->callbacks->check(rn->callbacks_ctx, r, url, key, p);
	tg_problems_add(p, "/callbackUrl", "no_secret", "no webhook signing secret is "
	    "configured for this API key (webhooks.secret or keys[].webhook_secret)");
	return -1;
}

const char *
runs_secret_ref(struct gw *gw, const char *key)
{
	const struct runs *rn = runs_ctx(gw);

	return rn->callbacks == NULL ? NULL :
	    rn->callbacks->secret_ref(rn->callbacks_ctx, gw->rt, key);
}

void
runs_webhook_kick(struct gw *gw)
{
	const struct runs *rn = runs_ctx(gw);

	if (rn->callbacks != NULL && rn->callbacks->kick != NULL)
		rn->callbacks->kick(rn->callbacks_ctx);
}

void
runs_req_wait(struct gw_req *r, struct tg_state_op *op)
{
	if (op != NULL)
		runs_req_of(r)->op = op;
}

void
runs_reply_state(struct gw_req *r, const struct tg_state_res *res, int status,
    const char *code, const char *msg)
{
	char why[320];

	if (res->rc == TG_STATE_UNKNOWN && r->req != NULL)
		evhttp_add_header(evhttp_request_get_output_headers(r->req), "Retry-After",
		    STATE_RETRY_AFTER);
	if (res->rc != TG_STATE_UNAVAILABLE) {
		gw_req_reply_error(r, status, code, msg);
		return;
	}
	snprintf(why, sizeof(why), "the gateway's state is unavailable: %s",
	    res->err.msg[0] != '\0' ? res->err.msg : tg_state_rc_str(res->rc));
	if (r->req != NULL)
		evhttp_add_header(evhttp_request_get_output_headers(r->req), "Retry-After",
		    STATE_RETRY_AFTER);
	gw_req_reply_error(r, 503, "STATE_UNAVAILABLE", why);
}

struct runs_bg *
runs_bg_new(struct gw *gw, const char *id)
{
	struct runs_bg *b = tg_xcalloc(1, sizeof(*b));

	b->gw = gw;
	b->id = id != NULL ? tg_xstrdup(id) : NULL;
	LIST_INSERT_HEAD(&RUNS(gw)->bgs, b, link);
	return b;
}

void
runs_bg_wait(struct runs_bg *b, struct tg_state_op *op)
{
	if (op != NULL)
		b->op = op;
}

void
runs_bg_free(struct runs_bg *b)
{
	if (b == NULL)
		return;
	LIST_REMOVE(b, link);
	if (b->obs != NULL)
		gw_answer_release(b->obs);
	if (b->held != NULL)
		gw_held_take(b->held);	/* the feature stopped: no answer */
	free(b->id);
	free(b->key);
	free(b->data);
	tg_sweep_cleanup(&b->sweep);
	free(b);
}

int
runs_api_paging(struct gw_req *r, size_t *limit, size_t *offset, char *why, size_t n)
{
	static const char *const names[2] = { "limit", "offset" };
	unsigned long long v;
	char *s, *e;
	int i, bad;

	for (i = 0; i < 2; i++) {
		if ((s = tg_http_query(r->req, names[i])) == NULL)
			continue;
		errno = 0;
		v = strtoull(s, &e, 10);
		bad = *s < '0' || *s > '9' || *e != '\0' || errno != 0 ||
		    (i == 0 && (v < 1 || v > 1000)) || v > 1000000000ULL;
		free(s);
		if (bad) {
			snprintf(why, n, "%s: %s", names[i], i == 0 ?
			    "a whole number from 1 to 1000" : "a whole number");
			return -1;
		}
		*(i == 0 ? limit : offset) = (size_t)v;
	}
	return 0;
}

/* A deep copy of sweep s (borrowed) into d (the caller's; it then owns
 * what d holds: tg_sweep_cleanup). */
void
runs_sweep_copy(struct tg_sweep *d, const struct tg_sweep *s)
{
	*d = *s;
	d->api_key = s->api_key != NULL ? tg_xstrdup(s->api_key) : NULL;
	d->base_case_id = s->base_case_id != NULL ? tg_xstrdup(s->base_case_id) : NULL;
	d->callback_url = s->callback_url != NULL ? tg_xstrdup(s->callback_url) : NULL;
}
