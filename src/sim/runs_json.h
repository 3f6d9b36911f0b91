/*
 * runs_json.h - private helpers of the run presenters (runs_json.c) that
 * the sweep summaries (sweep.c) share. Not for other modules.
 */
#ifndef TG_SIM_RUNS_JSON_H
#define TG_SIM_RUNS_JSON_H

#include <stdint.h>

#include <yajl/yajl_gen.h>

/** Copy of url (borrowed) with its query replaced by "?…" and its fragment
 * dropped; the caller takes ownership (free()). */
char *tg_runs_url_redact(const char *url);
/** ISO 8601 member k (borrowed) into g (borrowed), or null for 0. */
void tg_runs_kv_time(yajl_gen g, const char *k, int64_t ms);

#endif
