/*
 * relay_key.c - the webhook feature's copy of the state's relay key
 * (tg_state_outbox_key), which signs the relay URLs given to the vendor
 * and checks the ones a delivery names (relay_mac.c). Loaded at start and,
 * while the state cannot answer (a fleet's database down at start), tried
 * again every second. Until it is loaded no relay URL can be made or
 * checked: the callers refuse with 503 (callbacks.c). The key is never
 * logged.
 */
#include <stdio.h>
#include <string.h>

#include <event2/event.h>

#include "tidegate/log.h"
#include "hooks_int.h"

#define RETRY_MS	1000

static void
on_key(const struct tg_state_res *res, const void *data, size_t len, void *arg)
{
	struct wh_hooks *h = arg;
	struct timeval tv = { RETRY_MS / 1000, (RETRY_MS % 1000) * 1000 };

	h->key_op = NULL;
	if (res->rc == TG_STATE_OK && len == sizeof(h->relay_key)) {
		memcpy(h->relay_key, data, sizeof(h->relay_key));
		h->relay_key_ok = 1;
		tg_log(TG_LOG_INFO, "webhook_relay_key_loaded",
		    TG_LS("store", tg_state_backend_name(h->st)));
		return;
	}
	if (h->key_tries++ == 0)	/* once: the state's own log says the rest */
		tg_log(TG_LOG_WARN, "webhook_relay_key_unavailable", TG_LS("error",
		    res->rc == TG_STATE_OK ? "a key of another length" : res->err.msg));
	evtimer_add(h->key_ev, &tv);
}

static void
load(evutil_socket_t fd, short what, void *arg)
{
	struct wh_hooks *h = arg;

	(void)fd;
	(void)what;
	h->key_op = tg_state_outbox_key(h->st, on_key, h);	/* NULL: answered */
}

void
wh_relay_key_start(struct wh_hooks *h)
{
	h->key_ev = evtimer_new(h->gw->base, load, h);
	load(-1, 0, h);
}

void
wh_relay_key_stop(struct wh_hooks *h)
{
	tg_state_cancel(h->key_op);
	h->key_op = NULL;
	if (h->key_ev != NULL)
		event_free(h->key_ev);
	h->key_ev = NULL;
	memset(h->relay_key, 0, sizeof(h->relay_key));
	h->relay_key_ok = 0;
}

int
wh_relay_seg(const struct wh_hooks *h, const char *id, char out[TG_WEBHOOK_RELAY_SEG_LEN])
{
	if (!h->relay_key_ok)
		return -1;
	tg_webhook_relay_seg(h->relay_key, id, out);
	return 0;
}

enum wh_relay_id
wh_relay_check(const struct wh_hooks *h, const char *seg, char id[TG_WEBHOOK_ID_LEN])
{
	id[0] = '\0';
	if (tg_webhook_relay_bare(seg)) {
		snprintf(id, TG_WEBHOOK_ID_LEN, "%s", seg);
		return WH_RELAY_BARE;
	}
	if (!h->relay_key_ok)
		return WH_RELAY_NO_KEY;
	return tg_webhook_relay_check(h->relay_key, seg, id) == 0 ? WH_RELAY_GENUINE :
	    WH_RELAY_FORGED;
}
