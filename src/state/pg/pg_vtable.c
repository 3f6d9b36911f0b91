/*
 * pg_vtable.c - the PostgreSQL state backend's vtable for the seam
 * (src/state/state.c): its driver under the domains written once
 * (pg_db.c) with the payload store of chunk rows (../payload_rows.c).
 */
#include "pg.h"
#include "../payload.h"

const struct tg_state_backend tg_state_pg_backend = {
	.name = "postgresql",
	.db = &tg_state_pg_db,
	.payloads = &tg_state_payload_rows,
	.open = tg_state_pg_open,
	.close = tg_state_pg_close,
	.check = tg_state_pg_check,
	.cancel = tg_state_pg_cancel,
	.listen = tg_state_pg_listen,
	.health = tg_state_pg_health,
};
