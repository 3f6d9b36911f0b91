/*
 * config.c - the runs feature's configuration (runs.*): its keys, defaults
 * and bounds, the settings struct they fill (struct runs_cfg), the
 * registry's synchronous mode checked, and the registry's path resolved
 * beside the configuration file (checked with the state by the entry
 * point, as the account that opens it). The entry point defines it before
 * the first load (gw_config_define), so -K, -t, the start and SIGHUP read
 * these keys with the core's.
 */
#include <stdlib.h>

#include "runs_int.h"

#define K(p, t, f, d, doc) GW_CFG_KEY(struct runs_cfg, p, t, f, d, doc)
#define KB(p, t, f, d, lo, hi, doc) GW_CFG_KEYB(struct runs_cfg, p, t, f, d, lo, hi, doc)

static const struct tg_cfg_key keys[] = {
	K("runs.db", TG_CFG_STR, runs_db, "runs.db",
	  "simulation run registry (SQLite; relative to this file)"),
	K("runs.archive", TG_CFG_BOOL, runs_archive, "false",
	  "keep the results of completed runs past the vendor's retention"),
	KB("runs.archive_max", TG_CFG_SIZE, runs_archive_max, "16MB", 1024, 1099511627776.0,
	   "largest results archived for one run"),
	KB("runs.archive_max_total", TG_CFG_SIZE, runs_archive_max_total, "1GB", 1024,
	   1099511627776.0 * 64, "bytes of archived results kept in all (a run that does not fit "
	   "stays unarchived)"),
	KB("runs.archive_keep", TG_CFG_DURATION, runs_archive_keep, "90d", 60000, 3.1536e11,
	   "archived runs are purged this long after the vendor's expiry"),
	KB("runs.grace", TG_CFG_DURATION, runs_grace, "7d", 0, 3.1536e11,
	   "runs without an archive are purged this long after the vendor's expiry"),
	KB("runs.retention_interval", TG_CFG_DURATION, runs_retention_interval, "1m", 100, 8.64e7,
	   "how often runs past the vendor's retention are marked EXPIRED and old rows purged"),
	K("runs.sync", TG_CFG_STR, runs_sync, "full",
	  "SQLite synchronous mode of the registry: full (survives power loss) or normal"),
	KB("runs.sweep_max_variants", TG_CFG_INT, runs_sweep_max_variants, "100", 1, 1000,
	   "most variants one sweep may have"),
	KB("runs.sweep_concurrency", TG_CFG_INT, runs_sweep_concurrency, "4", 1, 64,
	   "variants of a sweep in flight at once when the sweep does not say"),
};

static void
check(const struct gw_config *c, void *s, struct tg_cfg_report *rep)
{
	static const char *const syncs[] = { "full", "normal", NULL };
	struct runs_cfg *r = s;

	gw_config_check_choice(rep, "runs.sync", r->runs_sync, syncs);
	r->runs_db_path = gw_config_beside(c, r->runs_db);
}

static void
cleanup(void *s)
{
	struct runs_cfg *r = s;

	free(r->runs_db_path);
	r->runs_db_path = NULL;
}

const struct gw_config_def tg_runs_config = {
	.name = "runs",
	.keys = keys,
	.nkeys = TG_NELEM(keys),
	.size = sizeof(struct runs_cfg),
	.check = check,
	.cleanup = cleanup,
};

const struct runs_cfg *
runs_cfg_of(const struct gw_config *c)
{
	return gw_config_settings(c, &tg_runs_config);
}
