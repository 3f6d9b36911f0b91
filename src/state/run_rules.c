/*
 * run_rules.c - the rules of the run registry and sweeps shared by every
 * state backend (run_rules.h): checks of a new run and a new sweep, the
 * failure text of a run the vendor reports FAILED, variant state names,
 * list pages and the names a list may filter by.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_gen.h>

#include "tidegate/json.h"
#include "run_rules.h"

#define RETRY_AFTER_MAX_MS	(3600LL * 1000)
#define RETENTION_MS		(30LL * 86400 * 1000)
#define GRACE_MS		(7LL * 86400 * 1000)
#define ARCHIVE_KEEP_MS		(90LL * 86400 * 1000)
#define ARCHIVE_MAX_RUN		(16LL << 20)
#define ARCHIVE_MAX_TOTAL	(1LL << 30)

static const char *const variant_states[] = {
	"pending", "submitting", "submitted", "rejected",
};

static int64_t
pick(int64_t v, int64_t dflt)
{
	return v > 0 ? v : dflt;
}

void
tg_state_runs_limits(const struct tg_runs_opts *opts, struct tg_state_runs_limits *l)
{
	l->retention_ms = pick(opts->retention_ms, RETENTION_MS);
	l->grace_ms = pick(opts->grace_ms, GRACE_MS);
	l->archive_keep_ms = pick(opts->archive_keep_ms, ARCHIVE_KEEP_MS);
	l->archive_max_run = pick(opts->archive_max_run, ARCHIVE_MAX_RUN);
	l->archive_max_total = pick(opts->archive_max_total, ARCHIVE_MAX_TOTAL);
}

int
tg_state_run_new_ok(const struct tg_run_new *run, struct tg_err *err)
{
	if (run->simulation_id == NULL || *run->simulation_id == '\0' || run->host == NULL ||
	    run->case_id == NULL || run->case_sha256 == NULL) {
		tg_err_set(err, "a run needs simulation_id, host, case_id and case_sha256");
		return -1;
	}
	return 0;
}

int
tg_state_sweep_new_ok(const struct tg_sweep_new *s, struct tg_err *err)
{
	size_t i;

	if (s->base_case_id == NULL || *s->base_case_id == '\0') {
		tg_err_set(err, "a sweep needs a base case id");
		return -1;
	}
	if (s->nvariants == 0 || s->nvariants > TG_SWEEP_MAX_VARIANTS) {
		tg_err_set(err, "a sweep has 1 to %d variants, not %zu", TG_SWEEP_MAX_VARIANTS,
		    s->nvariants);
		return -1;
	}
	if (s->concurrency < 0) {
		tg_err_set(err, "sweep concurrency %d is below 1", s->concurrency);
		return -1;
	}
	for (i = 0; i < s->nvariants; i++) {
		if (s->variants[i].name == NULL || s->variants[i].body == NULL) {
			tg_err_set(err, "sweep variant %zu has no name or no case", i);
			return -1;
		}
	}
	return 0;
}

/* "42 s", "3 min 12 s", "2 h 5 min", "3 d 4 h": how long until it failed. */
static void
fmt_duration(int64_t ms, char *buf, size_t len)
{
	int64_t s = ms > 0 ? ms / 1000 : 0;

	if (s < 60)
		snprintf(buf, len, "%" PRId64 " s", s);
	else if (s < 3600)
		snprintf(buf, len, "%" PRId64 " min %" PRId64 " s", s / 60, s % 60);
	else if (s < 86400)
		snprintf(buf, len, "%" PRId64 " h %" PRId64 " min", s / 3600, s % 3600 / 60);
	else
		snprintf(buf, len, "%" PRId64 " d %" PRId64 " h", s / 86400, s % 86400 / 3600);
}

/* The vendor never says why; this is everything the gateway can add. */
char *
tg_state_run_failure_text(int64_t submitted_at, const char *host, const char *validation,
    int64_t failed_at)
{
	char took[48];

	fmt_duration(failed_at - submitted_at, took, sizeof(took));
	return tg_xasprintf("the vendor reported FAILED %s after submission and gives no "
	    "reason; host: %s; gateway validation: %s", took, host ? host : "unknown",
	    validation ? validation : "not recorded");
}

const char *
tg_state_variant_state_name(enum tg_variant_state s)
{
	return (unsigned)s < TG_NELEM(variant_states) ? variant_states[s] : "rejected";
}

int
tg_state_variant_state_parse(const char *s)
{
	size_t i;

	for (i = 0; s != NULL && i < TG_NELEM(variant_states); i++)
		if (strcmp(s, variant_states[i]) == 0)
			return (int)i;
	return TG_VARIANT_REJECTED;
}

size_t
tg_state_runs_page(size_t limit)
{
	return limit == 0 ? TG_RUNS_LIST_LIMIT : limit > TG_RUNS_LIST_MAX ? TG_RUNS_LIST_MAX :
	    limit;
}

size_t
tg_state_sweeps_page(size_t limit)
{
	return limit == 0 ? 100 : limit > 1000 ? 1000 : limit;
}

int
tg_state_runs_status_ok(const char *status, struct tg_err *err)
{
	if (status != NULL && tg_runs_status_parse(status) < 0) {
		tg_err_set(err, "unknown run status '%.40s' (IN_PROGRESS, COMPLETED, FAILED, "
		    "EXPIRED, UNKNOWN)", status);
		return -1;
	}
	return 0;
}

int
tg_state_sweep_state_ok(const char *state, struct tg_err *err)
{
	if (state != NULL && strcmp(state, "running") != 0 && strcmp(state, "done") != 0) {
		tg_err_set(err, "unknown sweep state '%.40s' (running, done)", state);
		return -1;
	}
	return 0;
}

void
tg_state_run_row(const struct tg_run_new *run, const char *sweep_id, int64_t retention_ms,
    int64_t now_ms, struct tg_state_run_row *row)
{
	enum tg_run_status st = (unsigned)run->status < TG_RUN_NSTATUS ? run->status :
	    TG_RUN_UNKNOWN;

	row->submitted_at = run->submitted_at ? run->submitted_at : now_ms;
	row->expires_at = run->expires_at ? run->expires_at : row->submitted_at + retention_ms;
	row->status = tg_runs_status_str(st);
	row->vendor_status = st <= TG_RUN_FAILED ? row->status : NULL;
	row->completed_at = st == TG_RUN_COMPLETED || st == TG_RUN_FAILED ? now_ms : 0;
	row->next_check_at = tg_runs_status_terminal(st) ? 0 :
	    row->submitted_at + tg_runs_check_delay(0);
	row->callback_url = sweep_id != NULL ? NULL : run->callback_url;
}

void
tg_state_run_change(enum tg_run_status st, int64_t completed_at, int64_t now_ms,
    int64_t submitted_at, const char *host, const char *validation, int checks,
    struct tg_state_run_change *c)
{
	int64_t done = completed_at ? completed_at : now_ms;
	int ended = st == TG_RUN_COMPLETED || st == TG_RUN_FAILED;

	c->terminal = tg_runs_status_terminal(st);
	c->status = tg_runs_status_str(st);
	c->vendor_status = st <= TG_RUN_FAILED ? c->status : NULL;
	c->completed_at = ended ? done : 0;
	c->next_check_at = c->terminal ? 0 : now_ms + tg_runs_check_delay(checks + 1);
	c->failure = st == TG_RUN_FAILED ? tg_state_run_failure_text(submitted_at, host,
	    validation, done) : NULL;
}

int64_t
tg_state_run_retry_delay(int checks, int64_t retry_after_ms)
{
	int64_t delay = tg_runs_check_delay(checks + 1);

	if (retry_after_ms > RETRY_AFTER_MAX_MS)
		retry_after_ms = RETRY_AFTER_MAX_MS;
	return retry_after_ms > delay ? retry_after_ms : delay;
}

const char *
tg_state_run_check_error(const char *why)
{
	return why != NULL && *why != '\0' ? why : "no answer";
}

const char *
tg_state_variant_unclaim_error(const char *why)
{
	return why != NULL && *why != '\0' ? why : "submission failed";
}

char *
tg_state_run_figures(const char *id, yajl_val results, struct tg_err *err)
{
	const unsigned char *buf;
	yajl_gen g;
	size_t i, len;
	char *out;

	if (results == NULL || !YAJL_IS_OBJECT(results)) {
		tg_err_set(err, "results of %s are not a JSON object", id);
		return NULL;
	}
	g = tg_json_gen_new();
	yajl_gen_map_open(g);
	for (i = 0; i < results->u.object.len; i++) {
		if (!YAJL_IS_NUMBER(results->u.object.values[i]))
			continue;
		tg_json_str(g, results->u.object.keys[i]);
		tg_json_gen_val(g, results->u.object.values[i]);
	}
	yajl_gen_map_close(g);
	yajl_gen_get_buf(g, &buf, &len);
	out = tg_xstrndup((const char *)buf, len);
	yajl_gen_free(g);
	return out;
}

int
tg_state_archive_caps(const char *id, size_t len, int64_t old, int64_t used,
    int64_t max_run, int64_t max_total, struct tg_err *err)
{
	if ((uint64_t)len > (uint64_t)max_run) {
		tg_err_set(err, "results of %s are %zu bytes; the archive keeps at most %" PRId64
		    " bytes per run", id, len, max_run);
		return -1;
	}
	if (used - old + (int64_t)len > max_total) {
		tg_err_set(err, "archive full: %" PRId64 " of %" PRId64 " bytes used; results "
		    "of %s need %zu more", used, max_total, id, len);
		return -1;
	}
	return 0;
}

uint64_t *
tg_state_runs_stats_counter(struct tg_runs_stats *st, const char *name)
{
	static const char *const names[] = {
		"sweeps running", "sweeps done", "variants pending", "variants submitting",
	};
	uint64_t *const counters[] = {
		&st->sweeps_running, &st->sweeps_done, &st->variants_pending,
		&st->variants_submitting,
	};
	size_t i;

	for (i = 0; name != NULL && i < TG_NELEM(names); i++)
		if (strcmp(name, names[i]) == 0)
			return counters[i];
	return NULL;
}
