/*
 * pg_vtable.c - the PostgreSQL state backend's vtable for the seam
 * (src/state/state.c), and the domains it does not hold yet.
 *
 * Issue 14 (fleet mode) so far: correlation ownership, vendor token
 * records and poll entries (pg_shared.c), the run registry (pg_runs.c)
 * and sweeps (pg_sweeps.c) are built; every operation of the webhook
 * outbox and its payloads answers TG_STATE_UNAVAILABLE, before its call
 * returns, with "not built yet in the postgresql backend". No payload writer is ever
 * handed out, so append, commit and abort are never reached with one.
 */
#include <event2/buffer.h>

#include "pg.h"

static void
not_built(struct tg_state_res *res)
{
	res->rc = TG_STATE_UNAVAILABLE;
	tg_err_set(&res->err, "not built yet in the postgresql backend");
}

static struct tg_state_op *
later_outbox_add(void *impl, const struct tg_outbox_new *job, int64_t now_ms,
    tg_state_str_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, NULL, arg);
	return NULL;
}

static struct tg_state_op *
later_outbox_set_cid(void *impl, const char *id, const char *cid, tg_state_done_cb cb,
    void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, arg);
	return NULL;
}

static struct tg_state_op *
later_outbox_abandon(void *impl, const char *id, const char *reason, int64_t now_ms,
    tg_state_done_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, arg);
	return NULL;
}

static struct tg_state_op *
later_outbox_lease(void *impl, int64_t now_ms, tg_state_lease_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, NULL, arg);
	return NULL;
}

static struct tg_state_op *
later_outbox_renew(void *impl, const struct tg_outbox_lease *l, int64_t now_ms,
    tg_state_num_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, 0, arg);
	return NULL;
}

static struct tg_state_op *
later_outbox_release(void *impl, const struct tg_outbox_lease *l, tg_state_done_cb cb,
    void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, arg);
	return NULL;
}

static struct tg_state_op *
later_outbox_complete(void *impl, const struct tg_outbox_lease *l,
    const struct tg_outbox_result *r, int64_t now_ms, tg_state_outcome_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, TG_OUTBOX_WAITING, 0, arg);
	return NULL;
}

static struct tg_state_op *
later_outbox_next_due(void *impl, tg_state_num_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, 0, arg);
	return NULL;
}

static struct tg_state_op *
later_payload_open(void *impl, const char *id, tg_state_payload_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, NULL, arg);
	return NULL;
}

static struct tg_state_op *
later_payload_append(struct tg_state_payload *w, struct evbuffer *buf, tg_state_done_cb cb,
    void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	evbuffer_drain(buf, evbuffer_get_length(buf));
	cb(&res, arg);
	return NULL;
}

static struct tg_state_op *
later_payload_commit(struct tg_state_payload *w, int64_t now_ms, tg_state_done_cb cb,
    void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, arg);
	return NULL;
}

static void
later_payload_abort(struct tg_state_payload *w)
{
}

static struct tg_state_op *
later_payload_set(void *impl, const char *id, const void *data, size_t len, int64_t now_ms,
    tg_state_done_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, arg);
	return NULL;
}

static struct tg_state_op *
later_outbox_list(void *impl, const struct tg_outbox_query *q, tg_state_jobs_cb cb,
    void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, NULL, 0, arg);
	return NULL;
}

static struct tg_state_op *
later_outbox_get(void *impl, const char *id, tg_state_jobs_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, NULL, 0, arg);
	return NULL;
}

static struct tg_state_op *
later_outbox_redeliver(void *impl, const char *id, int64_t now_ms, tg_state_done_cb cb,
    void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, arg);
	return NULL;
}

static struct tg_state_op *
later_outbox_redeliver_since(void *impl, int64_t since_ms, int64_t now_ms,
    tg_state_num_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, 0, arg);
	return NULL;
}

static struct tg_state_op *
later_outbox_purge(void *impl, int64_t before_ms, tg_state_num_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, 0, arg);
	return NULL;
}

static struct tg_state_op *
later_outbox_stats(void *impl, int64_t now_ms, tg_state_outbox_stats_cb cb, void *arg)
{
	struct tg_state_res res;

	not_built(&res);
	cb(&res, NULL, arg);
	return NULL;
}

const struct tg_state_backend tg_state_pg_backend = {
	.name = "postgresql",
	.open = tg_state_pg_open,
	.close = tg_state_pg_close,
	.cancel = tg_state_pg_cancel,
	.outbox_add = later_outbox_add,
	.outbox_set_cid = later_outbox_set_cid,
	.outbox_abandon = later_outbox_abandon,
	.outbox_lease = later_outbox_lease,
	.outbox_renew = later_outbox_renew,
	.outbox_release = later_outbox_release,
	.outbox_complete = later_outbox_complete,
	.outbox_next_due = later_outbox_next_due,
	.payload_open = later_payload_open,
	.payload_append = later_payload_append,
	.payload_commit = later_payload_commit,
	.payload_abort = later_payload_abort,
	.payload_set = later_payload_set,
	.outbox_list = later_outbox_list,
	.outbox_get = later_outbox_get,
	.outbox_redeliver = later_outbox_redeliver,
	.outbox_redeliver_since = later_outbox_redeliver_since,
	.outbox_purge = later_outbox_purge,
	.outbox_stats = later_outbox_stats,
	.runs_add = tg_state_pg_runs_add,
	.runs_set_status = tg_state_pg_runs_set_status,
	.runs_check_failed = tg_state_pg_runs_check_failed,
	.runs_due = tg_state_pg_runs_due,
	.runs_next_due = tg_state_pg_runs_next_due,
	.runs_next_unhandled = tg_state_pg_runs_next_unhandled,
	.runs_set_handled = tg_state_pg_runs_set_handled,
	.runs_get = tg_state_pg_runs_get,
	.runs_list = tg_state_pg_runs_list,
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
