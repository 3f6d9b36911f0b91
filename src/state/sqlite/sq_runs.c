/*
 * sq_runs.c - the run registry's operations of the SQLite state backend
 * (include/tidegate/state.h, "run registry"): each wraps one call of the
 * registry (include/tidegate/runs_store.h). Writes (add, status, checks,
 * figures, archive, expire, purge) run on the writer thread's connection;
 * get, list, due, next_due, next_unhandled, stats and archive reads on
 * the loop's.
 */
#include <stdlib.h>
#include <string.h>

#include <yajl/yajl_gen.h>

#include "tidegate/json.h"
#include "sq.h"

/* ---- copies of a new run (sweeps use them too) ---- */

struct tg_run_new *
tg_state_sq_run_new_dup(const struct tg_run_new *r)
{
	struct tg_run_new *c = tg_xcalloc(1, sizeof(*c));

	*c = *r;
	c->simulation_id = tg_state_sq_dup(r->simulation_id);
	c->api_key = tg_state_sq_dup(r->api_key);
	c->host = tg_state_sq_dup(r->host);
	c->case_id = tg_state_sq_dup(r->case_id);
	c->case_sha256 = tg_state_sq_dup(r->case_sha256);
	c->validation = tg_state_sq_dup(r->validation);
	c->callback_url = tg_state_sq_dup(r->callback_url);
	return c;
}

void
tg_state_sq_run_new_free(struct tg_run_new *r)
{
	if (r == NULL)
		return;
	free((char *)r->simulation_id);
	free((char *)r->api_key);
	free((char *)r->host);
	free((char *)r->case_id);
	free((char *)r->case_sha256);
	free((char *)r->validation);
	free((char *)r->callback_url);
	free(r);
}
