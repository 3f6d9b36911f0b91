/*
 * stmts.c - the statements of every domain, in one list: state.c hands it
 * to the backend at open, and the PostgreSQL driver prepares each on
 * every connection, by its name. A new domain adds its table here.
 */
#include "db.h"
#include "outbox.h"

static const struct tg_db_table *const tables[] = {
	&tg_state_owners_stmts,
	&tg_state_shared_stmts,
	&tg_state_runs_stmts,
	&tg_state_runs_keep_stmts,
	&tg_state_sweeps_stmts,
	&tg_state_outbox_stmts,
	&tg_state_outbox_admin_stmts,
	&tg_state_outbox_key_stmts,
	&tg_state_payload_stmts,
	&tg_state_payload_rows_stmts,
	&tg_state_quota_stmts,
	&tg_state_fleet_stmts,
};

const struct tg_db_list tg_state_db_stmts = { tables, sizeof(tables) / sizeof(tables[0]) };
