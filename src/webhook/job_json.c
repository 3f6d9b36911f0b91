/*
 * job_json.c - an outbox job as the admin API shows it (tg_outbox_job_json
 * in include/tidegate/webhook.h), its callback URL's query redacted.
 * Called by the gateway's webhook admin endpoints.
 */
#include <stdlib.h>

#include "tidegate/clock.h"
#include "tidegate/json.h"
#include "tidegate/webhook.h"
#include "wh.h"

static void
kv_time(yajl_gen g, const char *k, int64_t ms)
{
	char iso[TG_ISO_LEN];

	if (ms <= 0) {
		tg_json_kv_str(g, k, NULL);
		return;
	}
	tg_clock_iso(ms, iso);
	tg_json_kv_str(g, k, iso);
}

void
tg_outbox_job_json(yajl_gen g, const struct tg_outbox_job *j)
{
	char *url = tg_webhook_url_redact(j->url ? j->url : "");

	yajl_gen_map_open(g);
	tg_json_kv_str(g, "id", j->id);
	tg_json_kv_str(g, "state", tg_outbox_state_str(j->state));
	tg_json_kv_str(g, "url", url);
	tg_json_kv_str(g, "kind", j->kind);
	tg_json_kv_str(g, "correlationId", j->correlation_id);
	tg_json_kv_str(g, "service", j->service);
	tg_json_kv_str(g, "apiKey", j->api_key);
	tg_json_kv_int(g, "attempts", j->attempts);
	tg_json_str(g, "lastStatus");
	if (j->last_status > 0)
		yajl_gen_integer(g, j->last_status);
	else
		yajl_gen_null(g);
	tg_json_kv_str(g, "lastError", j->last_error);
	tg_json_str(g, "size");
	if (j->size >= 0)
		yajl_gen_integer(g, j->size);
	else
		yajl_gen_null(g);
	tg_json_kv_bool(g, "leased", j->leased);
	kv_time(g, "createdAt", j->created_at);
	kv_time(g, "readyAt", j->ready_at);
	kv_time(g, "nextAttemptAt", j->state == TG_OUTBOX_READY ? j->next_at : 0);
	kv_time(g, "firstAttemptAt", j->first_attempt_at);
	kv_time(g, "lastAttemptAt", j->last_attempt_at);
	kv_time(g, "doneAt", j->done_at);
	yajl_gen_map_close(g);
	free(url);
}
