/*
 * pg_vtable.c - the PostgreSQL state backend's vtable for the seam
 * (src/state/state.c): its driver under the domains written once
 * (pg_db.c), and the domains not yet: the webhook outbox with its payloads (pg_outbox.c,
 * pg_outbox_admin.c, pg_payload.c),.
 */
#include "pg.h"

const struct tg_state_backend tg_state_pg_backend = {
	.name = "postgresql",
	.db = &tg_state_pg_db,
	.open = tg_state_pg_open,
	.close = tg_state_pg_close,
	.check = tg_state_pg_check,
	.cancel = tg_state_pg_cancel,
	.outbox_add = tg_state_pg_outbox_add,
	.outbox_set_cid = tg_state_pg_outbox_set_cid,
	.outbox_abandon = tg_state_pg_outbox_abandon,
	.outbox_lease = tg_state_pg_outbox_lease,
	.outbox_renew = tg_state_pg_outbox_renew,
	.outbox_release = tg_state_pg_outbox_release,
	.outbox_complete = tg_state_pg_outbox_complete,
	.outbox_next_due = tg_state_pg_outbox_next_due,
	.payload_open = tg_state_pg_payload_open,
	.payload_append = tg_state_pg_payload_append,
	.payload_commit = tg_state_pg_payload_commit,
	.payload_abort = tg_state_pg_payload_abort,
	.payload_set = tg_state_pg_payload_set,
	.payload_limit = tg_state_pg_payload_limit,
	.outbox_usage = tg_state_pg_outbox_usage,
	.outbox_note = tg_state_pg_outbox_note,
	.outbox_list = tg_state_pg_outbox_list,
	.outbox_get = tg_state_pg_outbox_get,
	.outbox_redeliver = tg_state_pg_outbox_redeliver,
	.outbox_redeliver_since = tg_state_pg_outbox_redeliver_since,
	.outbox_purge = tg_state_pg_outbox_purge,
	.outbox_stats = tg_state_pg_outbox_stats,
	.outbox_key = tg_state_pg_outbox_key,
	.outbox_hold = tg_state_pg_outbox_hold,
	.outbox_adopt = tg_state_pg_outbox_adopt,
	.listen = tg_state_pg_listen,
	.health = tg_state_pg_health,
};
