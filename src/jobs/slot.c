/*
 * slot.c - where the jobs feature finds its own: its context among the
 * core's registered features and each request's struct jobs_req slot
 * (made on first use, freed by the feature's on_free).
 */
#include <stdlib.h>

#include "jobs_int.h"

/* The slot index is the same for every gateway of the process: features
 * register in one fixed order (src/tidegate.c). */
static int slot_id = -1;

void
jobs_slot_set(int id)
{
	slot_id = id;
}

const struct jobs_cfg *
jobs_cfg(const struct gw_runtime *rt)
{
	return gw_feature_settings(rt, slot_id);
}

struct jobs *
jobs_of(const struct gw_req *r)
{
	return r->gw->feat_ctx[slot_id];
}

struct jobs_req *
jobs_req_find(const struct gw_req *r)
{
	return r->slot[slot_id];
}

struct jobs_req *
jobs_req_of(struct gw_req *r)
{
	struct jobs_req *q = gw_req_slot(r, slot_id, sizeof(*q));

	q->r = r;
	return q;
}
