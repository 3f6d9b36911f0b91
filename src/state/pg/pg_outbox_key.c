/*
 * pg_outbox_key.c - the relay key in the PostgreSQL state backend
 * (tg_state_outbox_key): one row of state_keys (pg_schema.c, version 5),
 * shared by the fleet. Two steps of one operation: an insert of fresh
 * random bytes that does nothing when a key is held (a concurrent
 * instance's insert waits for the first one's commit, so all agree), then
 * the read of whichever key the table holds. Both steps run in their own
 * transaction, so the read sees the insert that won.
 */
#include <string.h>

#include "tidegate/ids.h"
#include "pg.h"

#define KEY_NAME	"relay"

static void
answer_key(struct pg_op *o, const PGresult *r)
{
	if (r != NULL && (PQntuples(r) < 1 || PQgetlength(r, 0, 0) != TG_STATE_KEY_LEN)) {
		o->res.rc = TG_STATE_ERROR;
		tg_err_set(&o->res.err, "state: no relay key of %d bytes is held",
		    TG_STATE_KEY_LEN);
	}
	if (o->res.rc != TG_STATE_OK) {
		((tg_state_blob_cb)o->cb)(&o->res, NULL, 0, o->arg);
		return;
	}
	((tg_state_blob_cb)o->cb)(&o->res, PQgetvalue(r, 0, 0), TG_STATE_KEY_LEN, o->arg);
}

/* The insert is in (or did nothing): read the key held. */
static void
answer_put(struct pg_op *o, const PGresult *r)
{
	if (r == NULL) {
		((tg_state_blob_cb)o->cb)(&o->res, NULL, 0, o->arg);
		return;
	}
	tg_state_pg_again(o, PG_KEY_GET, answer_key);
	tg_state_pg_param_str(o, KEY_NAME);
	o->binary = 1;
}

struct tg_state_op *
tg_state_pg_outbox_key(void *impl, tg_state_blob_cb cb, void *arg)
{
	struct pg_op *o = tg_state_pg_op_new(impl, PG_KEY_PUT, answer_put,
	    (void (*)(void))cb, arg);
	unsigned char fresh[TG_STATE_KEY_LEN];

	tg_id_random(fresh, sizeof(fresh));
	tg_state_pg_param_str(o, KEY_NAME);
	tg_state_pg_param_bin(o, fresh, sizeof(fresh));
	memset(fresh, 0, sizeof(fresh));
	return tg_state_pg_submit(o, PG_OUTBOX);
}
