/*
 * runs_schema.c - the SQLite file of the run registry and sweeps (their
 * records are runs.c's, runs_keep.c's and the sweeps' store's): the schema
 * and its migrations (sq_conn.c runs them).
 */
#include <stddef.h>

#include "sq.h"

/* Version 1. A later version appends its own list; old ones never change. */
static const char *const v1[] = {
	"CREATE TABLE runs ("
	" simulation_id TEXT PRIMARY KEY, api_key TEXT, host TEXT NOT NULL,"
	" case_id TEXT NOT NULL, case_sha256 TEXT NOT NULL,"
	" submitted_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,"
	" status TEXT NOT NULL CHECK (status IN"
	"  ('IN_PROGRESS', 'COMPLETED', 'FAILED', 'EXPIRED', 'UNKNOWN')),"
	" vendor_status TEXT, status_at INTEGER NOT NULL, completed_at INTEGER,"
	" next_check_at INTEGER, checks INTEGER NOT NULL DEFAULT 0,"
	" validation TEXT, failure TEXT, last_error TEXT, callback_url TEXT,"
	" sweep_id TEXT, variant TEXT,"
	" archived INTEGER NOT NULL DEFAULT 0 CHECK (archived IN (0, 1)),"
	" results BLOB, results_size INTEGER NOT NULL DEFAULT 0, figures TEXT)",
	"CREATE INDEX runs_due ON runs (next_check_at) WHERE next_check_at IS NOT NULL",
	"CREATE INDEX runs_submitted ON runs (submitted_at)",
	"CREATE INDEX runs_expires ON runs (expires_at)",
	"CREATE INDEX runs_sweep ON runs (sweep_id, status) WHERE sweep_id IS NOT NULL",
	"CREATE INDEX runs_archived ON runs (archived, results_size)",
	"CREATE TABLE sweeps ("
	" sweep_id TEXT PRIMARY KEY, api_key TEXT, base_case_id TEXT NOT NULL,"
	" created_at INTEGER NOT NULL, concurrency INTEGER NOT NULL CHECK (concurrency >= 1),"
	" callback_url TEXT, state TEXT NOT NULL CHECK (state IN ('running', 'done')),"
	" variants INTEGER NOT NULL, done_at INTEGER)",
	"CREATE TABLE sweep_variants ("
	" sweep_id TEXT NOT NULL REFERENCES sweeps (sweep_id) ON DELETE CASCADE,"
	" position INTEGER NOT NULL, name TEXT NOT NULL,"
	" state TEXT NOT NULL CHECK (state IN"
	"  ('pending', 'submitting', 'submitted', 'rejected')),"
	" case_body BLOB, case_sha256 TEXT NOT NULL, simulation_id TEXT, error TEXT,"
	" attempts INTEGER NOT NULL DEFAULT 0, submitted_at INTEGER,"
	" PRIMARY KEY (sweep_id, position), UNIQUE (sweep_id, name))",
	NULL,
};

/* Version 2: whether the gateway has handled a run's end (figures,
 * archive, webhook, sweep), so that a restart in between loses none. */
static const char *const v2[] = {
	"ALTER TABLE runs ADD COLUMN ended_handled INTEGER NOT NULL DEFAULT 0"
	" CHECK (ended_handled IN (0, 1))",
	"UPDATE runs SET ended_handled = 1 WHERE status != 'IN_PROGRESS'",
	"CREATE INDEX runs_unhandled ON runs (status_at)"
	" WHERE ended_handled = 0 AND status != 'IN_PROGRESS'",
	NULL,
};

/* Version 3: a claim names the instance that made it, as a fleet's do
 * (the statements of sweeps.c are the same for both databases). */
static const char *const v3[] = {
	"ALTER TABLE sweep_variants ADD COLUMN claimed_by TEXT",
	NULL,
};

static const char *const *const versions[] = { v1, v2, v3 };

/* One instance: a variant left submitting by a process that stopped in
 * the middle of its submission is pending again (the submission may have
 * reached the vendor: docs/simulations.md). */
const struct sq_schema tg_state_sq_runs_schema = {
	.name = "runs", .nversions = 3, .versions = versions,
	.on_open = "UPDATE sweep_variants SET state = 'pending' WHERE state = 'submitting'",
};
