/*
 * outbox_key.c - the relay key (tg_state_outbox_key), written once: one
 * row of state_keys beside the outbox's jobs, made by the first call on a
 * store without one and kept across restarts, the same for every
 * instance of a fleet. Two steps of one operation: an insert of fresh
 * random bytes that does nothing when a key is held (a fleet's concurrent
 * insert waits for the first one's commit, so all agree), then the read
 * of whichever key the table holds, in a transaction of its own so that
 * it sees the insert that won.
 */
#include <string.h>

#include "tidegate/ids.h"
#include "outbox.h"
#include "seam.h"

#define KEY_NAME	"relay"

enum { PUT, GET };

static const struct tg_db_stmt sql[] = {
	[PUT] = { "key_put", TG_DB_OUTBOX, 1, "INSERT INTO state_keys (name, key)"
	    " VALUES ($1, $2) ON CONFLICT (name) DO NOTHING", NULL },
	[GET] = { "key_get", TG_DB_OUTBOX, 0, "SELECT key FROM state_keys WHERE name = $1",
	    NULL },
};

const struct tg_db_table tg_state_outbox_key_stmts = { sql, TG_NELEM(sql) };

static void
answer(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct tg_db_op *o = (struct tg_db_op *)q;
	const void *key = NULL;
	size_t len = 0;

	if (r != NULL && q->stmt == &sql[PUT]) {	/* in (or nothing to do): read it */
		tg_db_again(q, &sql[GET]);
		tg_db_text(q, KEY_NAME);
		return;
	}
	if (r != NULL && (tg_db_nrows(r) < 1 ||
	    (key = tg_db_blob(r, 0, 0, &len)) == NULL || len != TG_STATE_KEY_LEN)) {
		q->res.rc = TG_STATE_ERROR;
		tg_err_set(&q->res.err, "state: no relay key of %d bytes is held",
		    TG_STATE_KEY_LEN);
	}
	if (q->res.rc != TG_STATE_OK)
		o->cb.blob(&q->res, NULL, 0, o->arg);
	else
		o->cb.blob(&q->res, key, len, o->arg);
}

struct tg_state_op *
tg_state_outbox_key(struct tg_state *st, tg_state_blob_cb cb, void *arg)
{
	struct tg_db_op *o = tg_db_op_new(sizeof(*o), st, &sql[PUT], answer, KEY_NAME, arg);
	unsigned char fresh[TG_STATE_KEY_LEN];

	o->cb.blob = cb;
	tg_id_random(fresh, sizeof(fresh));
	tg_db_bytes(&o->q, fresh, sizeof(fresh));
	memset(fresh, 0, sizeof(fresh));
	return tg_db_submit(st, &o->q);
}
