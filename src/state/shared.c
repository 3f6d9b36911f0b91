/*
 * shared.c - what a fleet shares beyond ownership, written once
 * (include/tidegate/state.h): vendor token records (service, token,
 * expiry and the instance that wrote it; an invalidation removes the
 * record only while it still holds the refused token), poll entries
 * (leadership of a key taken when free, run out or already this
 * instance's, and never while a published answer is fresh; an answer
 * published gives the lead up and wakes the other instances, and is
 * cached until its expiry) and wake-ups.
 *
 * One instance (a driver that is no fleet) shares nothing: its tokens
 * live in memory here, it always leads, publishes to nobody, finds no
 * other instance's answer, and has nobody to wake; each call answers
 * before it returns.
 */
#include <stdlib.h>
#include <string.h>

#include "tidegate/clock.h"
#include "db.h"
#include "seam.h"

enum { TOKEN_GET, TOKEN_PUT, TOKEN_INVALIDATE, LEAD, PUBLISH, FETCH, RELEASE, NOTIFY };

/*
 * A poll entry's lead, answer and release commit without waiting for the
 * disk (synchronous_commit off for that transaction alone): they are what
 * a first poll waits for, a flush is most of a commit's time, and losing
 * the last of them in a crash of the server costs at most one more vendor
 * poll of a job (the lead gone, another instance takes it), the same as
 * while the state cannot answer and every instance polls for itself. What
 * a caller is promised (owners, jobs, tokens) still waits for its flush.
 * The CTE is read by the statement, so the setting is made before its
 * commit; SQLite (one instance) never runs them.
 */
#define LAZY	TG_DB_LAZY

static const struct tg_db_stmt sql[] = {
	[TOKEN_GET] = { "token_get", TG_DB_ANY, 0,
	    "SELECT token, expires_at FROM vendor_tokens WHERE service = $1", NULL },
	[TOKEN_PUT] = { "token_put", TG_DB_ANY, 1,
	    "WITH u AS (INSERT INTO vendor_tokens (service, token, expires_at, instance)"
	    " VALUES ($1, $2, $3, $4) ON CONFLICT (service) DO UPDATE SET token = EXCLUDED.token,"
	    " expires_at = EXCLUDED.expires_at, instance = EXCLUDED.instance, written_at = now()"
	    " RETURNING service) SELECT pg_notify('" TG_DB_CHANNEL "', 'token' || E'\\n' || $4::text"
	    " || E'\\n' || service) FROM u", NULL },
	[TOKEN_INVALIDATE] = { "token_invalidate", TG_DB_ANY, 1,
	    "DELETE FROM vendor_tokens WHERE service = $1 AND"
	    " ($2::text IS NULL OR token = $2::text)", NULL },
	/* A lead another instance holds (or a fresh answer) is seen by the
	 * NOT EXISTS read, and nothing is written: the row lock of an ON
	 * CONFLICT refused by its WHERE would take a transaction id for each
	 * follower's look. The WHERE stays the arbiter of a race. */
	[LEAD] = { "poll_lead", TG_DB_ANY, 1,
	    "WITH " LAZY " " TG_DB_LEAD("$1", "$2", "$3", "$4", ""), NULL },
	[PUBLISH] = { "poll_publish", TG_DB_ANY, 1,
	    "WITH " LAZY ", u AS (INSERT INTO poll_entries (key, status, content_type,"
	    " body, answer_until) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (key) DO UPDATE SET"
	    " status = EXCLUDED.status, content_type = EXCLUDED.content_type,"
	    " body = EXCLUDED.body, answer_until = EXCLUDED.answer_until, lead_until = 0"
	    " RETURNING key) SELECT pg_notify('" TG_DB_CHANNEL "', 'poll' || E'\\n' || $6::text"
	    " || E'\\n' || key) FROM u, lazy WHERE lazy.s IS NOT NULL", NULL },
	[FETCH] = { "poll_fetch", TG_DB_ANY, 0,
	    "SELECT status, content_type, body, answer_until FROM poll_entries"
	    " WHERE key = $1 AND status IS NOT NULL AND answer_until > $2", NULL },
	[RELEASE] = { "poll_release", TG_DB_ANY, 1,
	    "WITH " LAZY " UPDATE poll_entries SET lead_until = 0 FROM lazy WHERE key = $1"
	    " AND leader = $2 AND lazy.s IS NOT NULL", NULL },
	[NOTIFY] = { "notify", TG_DB_ANY, 1, "SELECT pg_notify('" TG_DB_CHANNEL "', $1)", NULL },
};

const struct tg_db_table tg_state_shared_stmts = { sql, TG_NELEM(sql) };

struct op {
	struct tg_db_op d;	/* d.id: the statement's $1 (service, key, payload) */
	int64_t ttl_ms;		/* a lead's */
};

static struct op *
op_new(struct tg_state *st, int stmt, void (*answer)(struct tg_db_q *,
    const struct tg_db_rows *), const char *first, void *arg)
{
	return tg_db_op_new(sizeof(struct op), st, &sql[stmt], answer, first, arg);
}

static struct tg_state_op *
done_now(tg_state_done_cb cb, void *arg, int rc, const char *why)
{
	struct tg_state_res res = { rc, { "" } };

	if (why != NULL)
		tg_err_set(&res.err, "%s", why);
	cb(&res, arg);
	return NULL;
}

/* ---- vendor token records ---- */

struct tok {
	char *token;
	int64_t expires_at;
};

static void
tok_free(void *v)
{
	struct tok *t = v;

	free(t->token);
	free(t);
}

static void
answer_token(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;
	struct tg_state_token t = { NULL, 0 };

	if (r != NULL && tg_db_nrows(r) > 0) {
		t.token = (char *)tg_db_str(r, 0, 0);
		t.expires_at = tg_db_i64(r, 0, 1);
	} else if (r != NULL) {
		q->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&q->res.err, "no token held for the service");
	}
	o->d.cb.token(&q->res, t.token != NULL ? &t : NULL, o->d.arg);
}

struct tg_state_op *
tg_state_token_get(struct tg_state *st, const char *service, tg_state_token_cb cb, void *arg)
{
	struct tg_state_res res = { TG_STATE_OK, { "" } };
	struct tg_state_token t;
	const struct tok *k;
	struct op *o;

	if (!tg_db_fleet(st)) {
		if ((k = tg_map_get(st->tokens, service)) == NULL) {
			res.rc = TG_STATE_NOT_FOUND;
			tg_err_set(&res.err, "no token held for %s", service);
		} else
			t = (struct tg_state_token){ k->token, k->expires_at };
		cb(&res, k != NULL ? &t : NULL, arg);
		return NULL;
	}
	o = op_new(st, TOKEN_GET, answer_token, service, arg);
	o->d.cb.token = cb;
	return tg_db_submit(st, &o->d.q);
}

struct tg_state_op *
tg_state_token_put(struct tg_state *st, const char *service, const struct tg_state_token *t,
    tg_state_done_cb cb, void *arg)
{
	struct tok *k;
	struct op *o;

	if (!tg_db_fleet(st)) {
		k = tg_xcalloc(1, sizeof(*k));
		k->token = tg_xstrdup(t->token != NULL ? t->token : "");
		k->expires_at = t->expires_at;
		tg_map_put(st->tokens, service, k);
		return done_now(cb, arg, TG_STATE_OK, NULL);
	}
	o = op_new(st, TOKEN_PUT, tg_db_answer_done, service, arg);
	o->d.cb.done = cb;
	tg_db_text(&o->d.q, t->token != NULL ? t->token : "");
	tg_db_int(&o->d.q, t->expires_at);
	tg_db_text(&o->d.q, st->instance);
	st->notifies++;
	return tg_db_submit(st, &o->d.q);
}

static void
answer_invalidate(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;

	if (r != NULL && tg_db_changes(r) == 0) {
		q->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&q->res.err, "the service holds no such token");
	}
	o->d.cb.done(&q->res, o->d.arg);
}

struct tg_state_op *
tg_state_token_invalidate(struct tg_state *st, const char *service, const char *token,
    tg_state_done_cb cb, void *arg)
{
	const struct tok *k;
	struct op *o;

	if (!tg_db_fleet(st)) {
		k = tg_map_get(st->tokens, service);
		if (k == NULL || (token != NULL && strcmp(k->token, token) != 0))
			return done_now(cb, arg, TG_STATE_NOT_FOUND,
			    "the service holds no such token");
		(void)tg_map_del(st->tokens, service);
		return done_now(cb, arg, TG_STATE_OK, NULL);
	}
	o = op_new(st, TOKEN_INVALIDATE, answer_invalidate, service, arg);
	o->d.cb.done = cb;
	tg_db_text(&o->d.q, token);
	return tg_db_submit(st, &o->d.q);
}

/* ---- poll entries ---- */

/* This instance leads key until mono ms (0: no longer). */
void
tg_state_lead_held(struct tg_state *st, const char *key, int64_t until)
{
	int64_t *u;

	if (until == 0) {
		(void)tg_map_del(st->leads, key);
		return;
	}
	u = tg_xmalloc(sizeof(*u));
	*u = until;
	tg_map_put(st->leads, key, u);
}

size_t
tg_state_shared_leads(const struct tg_state *st)
{
	int64_t now = tg_clock_mono_ms();
	const char *k;
	size_t pos = 0, n = 0;
	void *v;

	while (st->leads != NULL && tg_map_next(st->leads, &pos, &k, &v))
		n += *(const int64_t *)v > now;
	return n;
}

/* n: 1 when this instance now leads the key (a row came back). */
static void
answer_lead(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;
	int led = r != NULL && tg_db_nrows(r) > 0;

	if (led)
		tg_state_lead_held(o->d.st, o->d.id, tg_clock_mono_ms() + o->ttl_ms);
	o->d.cb.num(&q->res, led, o->d.arg);
}

struct tg_state_op *
tg_state_poll_lead(struct tg_state *st, const char *key, int64_t now_ms, int64_t ttl_ms,
    tg_state_num_cb cb, void *arg)
{
	struct tg_state_res res = { TG_STATE_OK, { "" } };
	struct op *o;

	if (!tg_db_fleet(st)) {
		cb(&res, 1, arg);
		return NULL;
	}
	o = op_new(st, LEAD, answer_lead, key, arg);
	o->d.cb.num = cb;
	o->ttl_ms = ttl_ms;
	tg_db_text(&o->d.q, st->instance);
	tg_db_int(&o->d.q, now_ms);
	tg_db_int(&o->d.q, now_ms + ttl_ms);
	return tg_db_submit(st, &o->d.q);
}

struct tg_state_op *
tg_state_poll_release(struct tg_state *st, const char *key, tg_state_done_cb cb, void *arg)
{
	struct op *o;

	if (!tg_db_fleet(st))
		return done_now(cb, arg, TG_STATE_OK, NULL);
	tg_state_lead_held(st, key, 0);
	o = op_new(st, RELEASE, tg_db_answer_done, key, arg);
	o->d.cb.done = cb;
	tg_db_text(&o->d.q, st->instance);
	return tg_db_submit(st, &o->d.q);
}

struct tg_state_op *
tg_state_poll_publish(struct tg_state *st, const char *key, const struct tg_state_answer *a,
    int64_t now_ms, int64_t ttl_ms, tg_state_done_cb cb, void *arg)
{
	struct op *o;

	if (!tg_db_fleet(st))
		return done_now(cb, arg, TG_STATE_OK, NULL);
	tg_state_lead_held(st, key, 0);
	o = op_new(st, PUBLISH, tg_db_answer_done, key, arg);
	o->d.cb.done = cb;
	tg_db_int(&o->d.q, a->status);
	tg_db_text(&o->d.q, a->content_type);
	tg_db_bytes(&o->d.q, a->body, a->body != NULL ? a->len : 0);
	tg_db_int(&o->d.q, now_ms + ttl_ms);
	tg_db_text(&o->d.q, st->instance);
	st->notifies++;
	return tg_db_submit(st, &o->d.q);
}

static void
answer_fetch(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct op *o = (struct op *)q;
	struct tg_state_answer a = { 0, NULL, NULL, 0, 0 };

	if (r != NULL && tg_db_nrows(r) > 0) {
		a.status = (int)tg_db_i64(r, 0, 0);
		a.content_type = tg_db_str(r, 0, 1);
		a.body = tg_db_blob(r, 0, 2, &a.len);
		a.expires_at = tg_db_i64(r, 0, 3);
		o->d.cb.answer(&q->res, &a, o->d.arg);
		return;
	}
	if (r != NULL) {
		q->res.rc = TG_STATE_NOT_FOUND;
		tg_err_set(&q->res.err, "no answer published for the key");
	}
	o->d.cb.answer(&q->res, NULL, o->d.arg);
}

struct tg_state_op *
tg_state_poll_fetch(struct tg_state *st, const char *key, int64_t now_ms,
    tg_state_answer_cb cb, void *arg)
{
	struct tg_state_res res = { TG_STATE_NOT_FOUND, { "" } };
	struct op *o;

	if (!tg_db_fleet(st)) {
		tg_err_set(&res.err, "no answer published for %s (one instance)", key);
		cb(&res, NULL, arg);
		return NULL;
	}
	o = op_new(st, FETCH, answer_fetch, key, arg);
	o->d.cb.answer = cb;
	tg_db_int(&o->d.q, now_ms);
	return tg_db_submit(st, &o->d.q);
}

struct tg_state_op *
tg_state_notify(struct tg_state *st, const char *topic, const char *what, tg_state_done_cb cb,
    void *arg)
{
	struct op *o;
	char *payload;

	if (!tg_db_fleet(st))
		return done_now(cb, arg, TG_STATE_OK, NULL);
	if (topic == NULL || strchr(topic, '\n') != NULL || what == NULL || strlen(what) > 1000)
		return done_now(cb, arg, TG_STATE_ERROR, "notify: a topic without newline and a "
		    "what of at most 1000 bytes");
	payload = tg_xasprintf("%s\n%s\n%s", topic, st->instance, what);
	o = op_new(st, NOTIFY, tg_db_answer_done, payload, arg);
	o->d.cb.done = cb;
	free(payload);
	st->notifies++;
	return tg_db_submit(st, &o->d.q);
}

void
tg_state_shared_init(struct tg_state *st)
{
	st->tokens = tg_map_new(tok_free);
	st->leads = tg_map_new(free);
}

void
tg_state_shared_free(struct tg_state *st)
{
	tg_map_free(st->tokens);
	tg_map_free(st->leads);
}
