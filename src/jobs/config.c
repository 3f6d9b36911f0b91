/*
 * config.c - the jobs feature's configuration (poll.*): its keys,
 * defaults and bounds, the settings struct they fill (struct jobs_cfg), and
 * the paths resolved beside the configuration file (the ownership database,
 * checked with the state by the entry point as the account that opens it;
 * the spool directory, made at start). The entry point defines it before
 * the first load (gw_config_define), so -K, -t, the start and SIGHUP read
 * these keys with the core's.
 */
#include <stdlib.h>

#include "jobs_int.h"

#define K(p, t, f, d, doc) GW_CFG_KEY(struct jobs_cfg, p, t, f, d, doc)
#define KB(p, t, f, d, lo, hi, doc) GW_CFG_KEYB(struct jobs_cfg, p, t, f, d, lo, hi, doc)

static const struct tg_cfg_key keys[] = {
	K("poll.enabled", TG_CFG_BOOL, poll_enabled, "true",
	  "share upstream polls of one job among all its callers"),
	KB("poll.interval", TG_CFG_DURATION, poll_interval, "1s", 10, 3.6e6,
	   "reuse a non-terminal answer this long"),
	KB("poll.max_interval", TG_CFG_DURATION, poll_max_interval, "10s", 10, 3.6e6,
	   "longest reuse as a job ages"),
	KB("poll.backoff_after", TG_CFG_DURATION, poll_backoff_after, "30s", 1000, 8.64e7,
	   "job age after which the interval grows (by interval per backoff_after)"),
	KB("poll.max_wait", TG_CFG_DURATION, poll_max_wait, "50s", 0, 3.6e6,
	   "longest long-poll (?wait=N seconds is capped to this); keep it under the "
	   "read/idle timeout of any proxy or load balancer in front (nginx 60s)"),
	KB("poll.wait_margin", TG_CFG_DURATION, poll_wait_margin, "500ms", 0, 60000,
	   "a long-poll answers this much before min(wait, max_wait) (at most a quarter "
	   "of the wait), so a proxy whose timeout equals the wait sees the answer first"),
	KB("poll.cache_max_body", TG_CFG_SIZE, poll_cache_max_body, "1MB", 1024, 1073741824.0,
	   "largest answer shared from memory (bigger: each caller streams its own)"),
	KB("poll.cache_max_bytes", TG_CFG_SIZE, poll_cache_max_bytes, "64MB", 0,
	   1099511627776.0, "bytes of answers held in all; the least recently used answer no "
	   "request waits on is evicted first (0: none kept)"),
	KB("poll.spool_max_bytes", TG_CFG_SIZE, poll_spool_max_bytes, "4GB", 0,
	   1099511627776.0, "final answers larger than cache_max_body are written once to "
	   "files in spool_dir and every caller is served from there; bytes of all spool "
	   "files at once (an answer that outgrows it: each caller streams its own; 0: no "
	   "spool)"),
	K("poll.spool_dir", TG_CFG_STR, poll_spool_dir, "spool",
	  "directory of the spool files (relative to this file; created 0700, files 0600, "
	  "leftovers removed at start)"),
	KB("poll.terminal_ttl", TG_CFG_DURATION, poll_terminal_ttl, "10m", 1000, 8.64e7,
	   "how long a final answer is served without asking the vendor"),
	KB("poll.max_entries", TG_CFG_INT, poll_max_entries, "10000", 1, 1e7,
	   "jobs tracked at once"),
	K("poll.ownership", TG_CFG_BOOL, poll_ownership, "true",
	  "a job created through the gateway is served only to the key that created it"),
	K("poll.uuid_ids", TG_CFG_BOOL, poll_uuid_ids, "true",
	  "a job read whose correlationId is not a UUID (the form the vendor's ids take) is "
	  "refused with 400 without asking the vendor; false: any id is sent"),
	K("poll.ownership_db", TG_CFG_STR, owners_db, "owners.db",
	  "who created each job, SQLite (relative to this file; read at start)"),
	KB("poll.ownership_keep", TG_CFG_DURATION, owners_keep, "30d", 60000, 3.1536e11,
	   "how long a job's creator is remembered; at least the vendor's retention of jobs"),
	KB("poll.ownership_max", TG_CFG_INT, owners_max, "1000000", 1, 1e9,
	   "jobs remembered per API key; beyond, that key's oldest are forgotten first"),
};

static void
check(const struct gw_config *c, void *s, struct tg_cfg_report *rep)
{
	struct jobs_cfg *j = s;

	(void)rep;	/* checked with the state, as the account (tg_state_check) */
	j->owners_db_path = gw_config_beside(c, j->owners_db);
	j->spool_dir_path = gw_config_beside(c, j->poll_spool_dir);	/* made at start, 0700 */
}

static void
cleanup(void *s)
{
	struct jobs_cfg *j = s;

	free(j->owners_db_path);
	free(j->spool_dir_path);
	j->owners_db_path = j->spool_dir_path = NULL;
}

const struct gw_config_def tg_jobs_config = {
	.name = "jobs",
	.keys = keys,
	.nkeys = TG_NELEM(keys),
	.size = sizeof(struct jobs_cfg),
	.check = check,
	.cleanup = cleanup,
};

const struct jobs_cfg *
jobs_cfg_of(const struct gw_config *c)
{
	return gw_config_settings(c, &tg_jobs_config);
}
