/*
 * run_records.c - the calls of include/tidegate/run_records.h: the run
 * statuses' names, the check schedule, a case's digest, and freeing the
 * records the run registry and sweeps hand out.
 */
#include <stdlib.h>
#include <string.h>

#include "tidegate/crypto.h"
#include "tidegate/run_records.h"

static const char *const status_names[TG_RUN_NSTATUS] = {
	"IN_PROGRESS", "COMPLETED", "FAILED", "EXPIRED", "UNKNOWN",
};

const char *
tg_runs_status_str(enum tg_run_status s)
{
	return (unsigned)s < TG_RUN_NSTATUS ? status_names[s] : "UNKNOWN";
}

int
tg_runs_status_parse(const char *s)
{
	int i;

	for (i = 0; s != NULL && i < TG_RUN_NSTATUS; i++)
		if (strcmp(s, status_names[i]) == 0)
			return i;
	return -1;
}

int
tg_runs_status_terminal(enum tg_run_status s)
{
	return s != TG_RUN_IN_PROGRESS;
}

int64_t
tg_runs_check_delay(int checks)
{
	if (checks < 0)
		checks = 0;
	if (checks >= 8)
		return TG_RUNS_CHECK_MAX_MS;
	return (int64_t)TG_RUNS_CHECK_MIN_MS << checks;
}

void
tg_runs_case_digest(const void *body, size_t len, char out[TG_RUNS_SHA_LEN])
{
	uint8_t md[TG_SHA256_LEN];

	tg_sha256_oneshot(body, len, md);	/* also called off the loop (validate.c) */
	tg_hex(md, sizeof(md), out);
}

void
tg_run_cleanup(struct tg_run *run)
{
	if (run == NULL)
		return;
	free(run->simulation_id);
	free(run->api_key);
	free(run->host);
	free(run->case_id);
	free(run->validation);
	free(run->failure);
	free(run->last_error);
	free(run->callback_url);
	free(run->sweep_id);
	free(run->variant);
	yajl_tree_free(run->figures);
	memset(run, 0, sizeof(*run));
}

void
tg_runs_free(struct tg_run *runs, size_t n)
{
	size_t i;

	for (i = 0; runs != NULL && i < n; i++)
		tg_run_cleanup(&runs[i]);
	free(runs);
}

int
tg_runs_expired(const struct tg_run *run, int64_t now_ms)
{
	return run->expires_at != 0 && run->expires_at <= now_ms;
}

const char *
tg_sweep_state_str(enum tg_sweep_state s)
{
	return s == TG_SWEEP_DONE ? "done" : "running";
}

const char *
tg_sweep_variant_status(const struct tg_sweep_variant *v)
{
	switch (v->state) {
	case TG_VARIANT_PENDING:
		return "PENDING";
	case TG_VARIANT_SUBMITTING:
		return "SUBMITTING";
	case TG_VARIANT_REJECTED:
		return "REJECTED";
	default:
		return tg_runs_status_str(v->run_status);
	}
}

void
tg_sweep_cleanup(struct tg_sweep *s)
{
	if (s == NULL)
		return;
	free(s->api_key);
	free(s->base_case_id);
	free(s->callback_url);
	memset(s, 0, sizeof(*s));
}

void
tg_sweeps_free(struct tg_sweep *s, size_t n)
{
	size_t i;

	for (i = 0; s != NULL && i < n; i++)
		tg_sweep_cleanup(&s[i]);
	free(s);
}

void
tg_sweep_variants_free(struct tg_sweep_variant *v, size_t n)
{
	size_t i;

	for (i = 0; v != NULL && i < n; i++) {
		free(v[i].name);
		free(v[i].simulation_id);
		free(v[i].error);
		free(v[i].failure);
		yajl_tree_free(v[i].figures);
	}
	free(v);
}

void
tg_sweep_claim_cleanup(struct tg_sweep_claim *c)
{
	if (c == NULL)
		return;
	free(c->name);
	free(c->body);
	free(c->api_key);
	memset(c, 0, sizeof(*c));
}
