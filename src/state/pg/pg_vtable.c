/*
 * pg_vtable.c - the PostgreSQL state backend's vtable for the seam
 * (src/state/state.c), and the domains it does not hold yet.
 *
 * Issue 14 (fleet mode), second step: correlation ownership, vendor token
 * records and poll entries (pg_shared.c) and the webhook outbox with its
 * payloads (pg_outbox.c, pg_outbox_admin.c, pg_payload.c) are built; every
 * operation of the run registry and sweeps answers TG_STATE_UNAVAILABLE,
 * before its call returns, with "not built yet in the postgresql backend".
 */
#include "pg.h"

static void
not_built(struct tg_state_res *res)
{
	res->rc = TG_STATE_UNAVAILABLE;
	tg_err_set(&res->err, "not built yet in the postgresql backend");
}

static struct tg_state_op *
later_runs_add(void *impl, const struct tg_run_new *run, int64_t now_ms,
    tg_state_done_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, arg);
	return NULL;
}

static struct tg_state_op *
later_runs_set_status(void *impl, const char *id, enum tg_run_status status,
    int64_t completed_at, int64_t now_ms, tg_state_num_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, 0, arg);
	return NULL;
}

static struct tg_state_op *
later_runs_check_failed(void *impl, const char *id, const char *why, int64_t retry_after_ms,
    int64_t now_ms, tg_state_done_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, arg);
	return NULL;
}

static struct tg_state_op *
later_runs_due(void *impl, int64_t now_ms, size_t max, tg_state_runs_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, NULL, 0, 0, arg);
	return NULL;
}

static struct tg_state_op *
later_runs_next_due(void *impl, int64_t now_ms, tg_state_num_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, 0, arg);
	return NULL;
}

static struct tg_state_op *
later_runs_next_unhandled(void *impl, tg_state_unhandled_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, NULL, TG_RUN_IN_PROGRESS, arg);
	return NULL;
}

static struct tg_state_op *
later_runs_set_handled(void *impl, const char *id, tg_state_done_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, arg);
	return NULL;
}

static struct tg_state_op *
later_runs_get(void *impl, const char *id, tg_state_runs_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, NULL, 0, 0, arg);
	return NULL;
}

static struct tg_state_op *
later_runs_list(void *impl, const struct tg_runs_query *q, tg_state_runs_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, NULL, 0, 0, arg);
	return NULL;
}

static struct tg_state_op *
later_runs_set_figures(void *impl, const char *id, yajl_val results, tg_state_done_cb cb,
    void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, arg);
	return NULL;
}

static struct tg_state_op *
later_runs_stats(void *impl, tg_state_runs_stats_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, NULL, arg);
	return NULL;
}

static struct tg_state_op *
later_runs_archive(void *impl, const char *id, const void *data, size_t len, int64_t now_ms,
    tg_state_done_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, arg);
	return NULL;
}

static struct tg_state_op *
later_runs_archived(void *impl, const char *id, tg_state_blob_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, NULL, 0, arg);
	return NULL;
}

static struct tg_state_op *
later_runs_archive_usage(void *impl, tg_state_pair_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, 0, 0, arg);
	return NULL;
}

static struct tg_state_op *
later_runs_expire(void *impl, int64_t now_ms, tg_state_num_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, 0, arg);
	return NULL;
}

static struct tg_state_op *
later_runs_purge(void *impl, int64_t now_ms, tg_state_pair_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, 0, 0, arg);
	return NULL;
}

static struct tg_state_op *
later_sweep_create(void *impl, const struct tg_sweep_new *s, int64_t now_ms,
    tg_state_str_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, NULL, arg);
	return NULL;
}

static struct tg_state_op *
later_sweep_get(void *impl, const char *id, tg_state_sweeps_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, NULL, 0, 0, arg);
	return NULL;
}

static struct tg_state_op *
later_sweep_list(void *impl, const char *api_key, const char *state, size_t limit,
    size_t offset, tg_state_sweeps_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, NULL, 0, 0, arg);
	return NULL;
}

static struct tg_state_op *
later_sweep_variants(void *impl, const char *id, tg_state_variants_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, NULL, 0, arg);
	return NULL;
}

static struct tg_state_op *
later_sweep_claim(void *impl, const char *id, int64_t now_ms, tg_state_claim_cb cb,
    void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, NULL, arg);
	return NULL;
}

static struct tg_state_op *
later_sweep_submitted(void *impl, const char *id, const char *name,
    const struct tg_run_new *run, int64_t now_ms, tg_state_done_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, arg);
	return NULL;
}

static struct tg_state_op *
later_sweep_unclaim(void *impl, const char *id, const char *name, const char *why,
    int final, int64_t now_ms, tg_state_done_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, arg);
	return NULL;
}

static struct tg_state_op *
later_sweep_settle(void *impl, const char *id, int64_t now_ms, tg_state_num_cb cb,
    void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, 0, arg);
	return NULL;
}

static struct tg_state_op *
later_sweep_running(void *impl, tg_state_strs_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, NULL, 0, arg);
	return NULL;
}

const struct tg_state_backend tg_state_pg_backend = {
	.name = "postgresql",
	.open = tg_state_pg_open,
	.close = tg_state_pg_close,
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
	.outbox_list = tg_state_pg_outbox_list,
	.outbox_get = tg_state_pg_outbox_get,
	.outbox_redeliver = tg_state_pg_outbox_redeliver,
	.outbox_redeliver_since = tg_state_pg_outbox_redeliver_since,
	.outbox_purge = tg_state_pg_outbox_purge,
	.outbox_stats = tg_state_pg_outbox_stats,
	.runs_add = later_runs_add,
	.runs_set_status = later_runs_set_status,
	.runs_check_failed = later_runs_check_failed,
	.runs_due = later_runs_due,
	.runs_next_due = later_runs_next_due,
	.runs_next_unhandled = later_runs_next_unhandled,
	.runs_set_handled = later_runs_set_handled,
	.runs_get = later_runs_get,
	.runs_list = later_runs_list,
	.runs_set_figures = later_runs_set_figures,
	.runs_stats = later_runs_stats,
	.runs_archive = later_runs_archive,
	.runs_archived = later_runs_archived,
	.runs_archive_usage = later_runs_archive_usage,
	.runs_expire = later_runs_expire,
	.runs_purge = later_runs_purge,
	.sweep_create = later_sweep_create,
	.sweep_get = later_sweep_get,
	.sweep_list = later_sweep_list,
	.sweep_variants = later_sweep_variants,
	.sweep_claim = later_sweep_claim,
	.sweep_submitted = later_sweep_submitted,
	.sweep_unclaim = later_sweep_unclaim,
	.sweep_settle = later_sweep_settle,
	.sweep_running = later_sweep_running,
	.owners_record = tg_state_pg_owners_record,
	.owners_lookup = tg_state_pg_owners_lookup,
	.owners_prune = tg_state_pg_owners_prune,
	.owners_count = tg_state_pg_owners_count,
	.token_get = tg_state_pg_token_get,
	.token_put = tg_state_pg_token_put,
	.token_invalidate = tg_state_pg_token_invalidate,
	.poll_lead = tg_state_pg_poll_lead,
	.poll_publish = tg_state_pg_poll_publish,
	.poll_fetch = tg_state_pg_poll_fetch,
};
