/*
 * pg_vtable.c - the PostgreSQL state backend's vtable for the seam
 * (src/state/state.c): its driver under the domains written once
 * (pg_db.c) with the payload store of chunk rows (../payload_rows.c), and
 * the domains not yet: the run registry (pg_runs.c) and sweeps
 * (pg_sweeps.c).
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
	.runs_add = tg_state_pg_runs_add,
	.runs_set_status = tg_state_pg_runs_set_status,
	.runs_check_failed = tg_state_pg_runs_check_failed,
	.runs_due = tg_state_pg_runs_due,
	.runs_next_due = tg_state_pg_runs_next_due,
	.runs_next_unhandled = tg_state_pg_runs_next_unhandled,
	.runs_set_handled = tg_state_pg_runs_set_handled,
	.runs_get = tg_state_pg_runs_get,
	.runs_list = tg_state_pg_runs_list,
	.runs_get_many = tg_state_pg_runs_get_many,
	.runs_set_figures = tg_state_pg_runs_set_figures,
	.runs_stats = tg_state_pg_runs_stats,
	.runs_archive = tg_state_pg_runs_archive,
	.runs_archived = tg_state_pg_runs_archived,
	.runs_archive_usage = tg_state_pg_runs_archive_usage,
	.runs_expire = tg_state_pg_runs_expire,
	.runs_purge = tg_state_pg_runs_purge,
	.sweep_create = tg_state_pg_sweep_create,
	.sweep_get = tg_state_pg_sweep_get,
	.sweep_list = tg_state_pg_sweep_list,
	.sweep_variants = tg_state_pg_sweep_variants,
	.sweep_claim = tg_state_pg_sweep_claim,
	.sweep_submitted = tg_state_pg_sweep_submitted,
	.sweep_unclaim = tg_state_pg_sweep_unclaim,
	.sweep_settle = tg_state_pg_sweep_settle,
	.sweep_running = tg_state_pg_sweep_running,
	.listen = tg_state_pg_listen,
	.health = tg_state_pg_health,
};
