/*
 * adopt.c - waiting jobs in a fleet. A job waits for its export data while
 * the instance that added it polls the vendor (hook_fetch.c); the state
 * holds that fetch for the instance (tg_state_outbox_hold, webhooks.lease
 * from the add). Every lease/3 this instance renews its hold on the jobs
 * it fetches and adopts those whose hold ran out, their instance having
 * died (tg_state_outbox_adopt: each to one survivor), and fetches them
 * itself. At start it adopts page by page what is free. With SQLite
 * (one instance) hooks.c resumes every waiting job at start instead.
 */
#include <stdlib.h>

#include <event2/event.h>

#include "tidegate/clock.h"
#include "tidegate/log.h"
#include "tidegate/map.h"
#include "tidegate/state.h"
#include "hooks_int.h"

#define ADOPT_PAGE	100

static void
arm(struct wh_hooks *h)
{
	int64_t ms = wh_cfg(h->gw->rt)->wh_lease / 3;
	struct timeval tv;

	if (ms < 100)
		ms = 100;
	tv.tv_sec = ms / 1000;
	tv.tv_usec = (ms % 1000) * 1000;
	evtimer_add(h->adopt_ev, &tv);
}

static void
on_held(const struct tg_state_res *res, void *arg)
{
	struct wh_hooks *h = arg;

	h->hold_op = NULL;
	if (res->rc != TG_STATE_OK)
		tg_log(TG_LOG_WARN, "webhook_hold_failed", TG_LS("error", res->err.msg));
}

/* Renew the hold on every job this instance fetches. */
static void
hold(struct wh_hooks *h)
{
	size_t n = tg_map_count(h->fetches), i = 0, pos = 0;
	const char **ids;
	const char *k;
	void *v;

	if (n == 0 || h->hold_op != NULL)
		return;
	ids = tg_xcalloc(n, sizeof(*ids));
	while (i < n && tg_map_next(h->fetches, &pos, &k, &v))
		ids[i++] = k;
	h->hold_op = tg_state_outbox_hold(h->st, ids, i, tg_clock_now_ms(), on_held, h);
	free(ids);
}

static void
on_adopted(const struct tg_state_res *res, const struct tg_outbox_job *jobs, size_t n,
    void *arg)
{
	struct wh_hooks *h = arg;
	const struct wh_cfg *c = wh_cfg(h->gw->rt);
	size_t i;

	h->adopt_op = NULL;
	if (res->rc != TG_STATE_OK) {
		tg_log(TG_LOG_WARN, "webhook_adopt_failed", TG_LS("error", res->err.msg));
		n = 0;
	}
	for (i = 0; i < n; i++)
		wh_fetch_start(h, jobs[i].id, jobs[i].api_key, c->wh_mode == WH_RELAY ? NULL :
		    jobs[i].correlation_id, jobs[i].created_at, 0);
	if (n > 0)
		tg_log(TG_LOG_INFO, "webhook_fetch_adopted", TG_LI("jobs", n));
	if (n == ADOPT_PAGE)
		event_active(h->adopt_ev, EV_TIMEOUT, 1);	/* the next page */
	else
		arm(h);
}

static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct wh_hooks *h = arg;
	struct tg_state_op *op;

	if (h->adopt_op != NULL || h->gw->draining)
		return;
	hold(h);
	op = tg_state_outbox_adopt(h->st, tg_clock_now_ms(), ADOPT_PAGE, on_adopted, h);
	if (op != NULL)
		h->adopt_op = op;
}

void
wh_adopt_start(struct wh_hooks *h)
{
	h->adopt_ev = evtimer_new(h->gw->base, on_tick, h);
	on_tick(-1, 0, h);
}

void
wh_adopt_stop(struct wh_hooks *h)
{
	tg_state_cancel(h->hold_op);
	h->hold_op = NULL;
	tg_state_cancel(h->adopt_op);
	h->adopt_op = NULL;
	if (h->adopt_ev != NULL)
		event_free(h->adopt_ev);
	h->adopt_ev = NULL;
}
