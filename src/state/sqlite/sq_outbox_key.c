/*
 * sq_outbox_key.c - the relay key in the SQLite state backend
 * (tg_state_outbox_key): one row of the outbox database's state_keys,
 * made by the first call on a store without one and kept across
 * restarts. A write (the insert may be needed), so it runs on the writer
 * thread's connection: the insert of fresh random bytes does nothing when
 * a key is held, then the key held is read.
 */
#include <stdlib.h>
#include <string.h>

#include "tidegate/ids.h"
#include "outbox_db.h"
#include "sq.h"

#define KEY_NAME	"relay"

/* One statement on the writer's connection: 0, or -1 with err. */
static int
key_step(struct tg_outbox *ob, const char *sql, const void *fresh, uint8_t *out,
    struct tg_err *err)
{
	sqlite3_stmt *s;
	int rc;

	if (sqlite3_prepare_v2(ob->db, sql, -1, &s, NULL) != SQLITE_OK) {
		tg_state_ob_sql_err(ob, err, "relay key");
		return -1;
	}
	sqlite3_bind_text(s, 1, KEY_NAME, -1, SQLITE_STATIC);
	if (fresh != NULL)
		sqlite3_bind_blob(s, 2, fresh, TG_STATE_KEY_LEN, SQLITE_STATIC);
	rc = sqlite3_step(s);
	if (out != NULL && rc == SQLITE_ROW && sqlite3_column_bytes(s, 0) == TG_STATE_KEY_LEN) {
		memcpy(out, sqlite3_column_blob(s, 0), TG_STATE_KEY_LEN);
		rc = SQLITE_DONE;
	} else if (out != NULL && rc != SQLITE_ERROR) {
		tg_err_set(err, "state: no relay key of %d bytes is held", TG_STATE_KEY_LEN);
		sqlite3_finalize(s);
		return -1;
	}
	sqlite3_finalize(s);
	if (rc == SQLITE_DONE)
		return 0;
	tg_state_ob_sql_err(ob, err, "relay key");
	return -1;
}

static void
run_key(struct sq_op *o)
{
	uint8_t fresh[TG_STATE_KEY_LEN];

	tg_id_random(fresh, sizeof(fresh));
	o->p = tg_xmalloc(TG_STATE_KEY_LEN);
	o->np = TG_STATE_KEY_LEN;
	tg_state_sq_rc(o, key_step(o->sq->wob, "INSERT OR IGNORE INTO state_keys (name, key) "
	    "VALUES (?1, ?2)", fresh, NULL, &o->res.err) != 0 ? -1 :
	    key_step(o->sq->wob, "SELECT key FROM state_keys WHERE name = ?1", NULL, o->p,
	    &o->res.err));
	memset(fresh, 0, sizeof(fresh));
}

static void
answer_key(struct sq_op *o)
{
	((tg_state_blob_cb)o->cb)(&o->res, o->res.rc == 0 ? o->p : NULL,
	    o->res.rc == 0 ? o->np : 0, o->arg);
}

/* The key's bytes do not outlive the operation. */
static void
free_key(struct sq_op *o)
{
	if (o->p != NULL)
		memset(o->p, 0, o->np);
	free(o->p);
	o->p = NULL;
}

struct tg_state_op *
tg_state_sq_outbox_key(void *impl, tg_state_blob_cb cb, void *arg)
{
	struct sq_op *o = tg_state_sq_op_new(impl, SQ_OUTBOX, run_key, answer_key,
	    (void (*)(void))cb, arg);

	o->cleanup = free_key;
	return tg_state_sq_write(o);
}
