/*
 * fleet.c - the instances a fleet's state knows of, written once for
 * every backend (include/tidegate/state.h tg_state_fleet_list): for the
 * admin API's GET /fleet and the console's Fleet panel. An instance is
 * seen by what it wrote with its name (state.instance): its quota
 * membership, the poll entries it leads (lead:runs, a token login, a
 * job's polls), the outbox jobs it leases, the sweep variants it claimed
 * while submitting them. One read statement; what has run out (a lead or
 * lease past its expiry) is not counted, so an instance that died shows
 * its membership's end and nothing held.
 *
 * One instance (a driver that is no fleet; SQLite) records no leads and
 * has nobody else: it answers with itself before the call returns, the
 * figures it does not record unknown (-1).
 */
#include <stdlib.h>
#include <string.h>

#include "db.h"
#include "seam.h"

#define S_(x) #x
#define S(x) S_(x)

/* $1 now (ms), $2 this instance. */
static const struct tg_db_stmt sql[] = {
	{ "fleet_list", TG_DB_ANY, 0,
	    "WITH i AS (SELECT instance AS name FROM quota_members"
	    " UNION SELECT leader FROM poll_entries WHERE leader IS NOT NULL"
	    " AND lead_until > $1::bigint"
	    " UNION SELECT lease_owner FROM outbox_jobs WHERE lease_owner IS NOT NULL"
	    " AND lease_expires > $1::bigint"
	    " UNION SELECT claimed_by FROM sweep_variants WHERE claimed_by IS NOT NULL"
	    " AND state = 'submitting' UNION SELECT $2::text)"
	    " SELECT i.name, (SELECT until FROM quota_members m WHERE m.instance = i.name),"
	    " (SELECT string_agg(key, E'\\n' ORDER BY key) FROM (SELECT key FROM poll_entries p"
	    " WHERE p.leader = i.name AND p.lead_until > $1::bigint ORDER BY key"
	    " LIMIT " S(TG_STATE_FLEET_LEADS) ") k),"
	    " (SELECT count(*) FROM poll_entries p WHERE p.leader = i.name"
	    " AND p.lead_until > $1::bigint),"
	    " (SELECT count(*) FROM outbox_jobs o WHERE o.lease_owner = i.name"
	    " AND o.lease_expires > $1::bigint),"
	    " (SELECT count(*) FROM sweep_variants v WHERE v.claimed_by = i.name"
	    " AND v.state = 'submitting')"
	    " FROM i ORDER BY i.name LIMIT " S(TG_STATE_FLEET_MAX), NULL },
};

const struct tg_db_table tg_state_fleet_stmts = { sql, TG_NELEM(sql) };

struct fop {
	struct tg_db_op d;
	tg_state_fleet_cb cb;
};

/* Row i's leads: the '\n'-joined keys split in place (buf owned by the caller). */
static size_t
split_leads(char *buf, const char **out, size_t max)
{
	size_t n = 0;
	char *p = buf, *e;

	while (p != NULL && *p != '\0' && n < max) {
		out[n++] = p;
		if ((e = strchr(p, '\n')) != NULL)
			*e++ = '\0';
		p = e;
	}
	return n;
}

static void
answer_list(struct tg_db_q *q, const struct tg_db_rows *r)
{
	struct fop *o = (struct fop *)q;
	size_t i, n = r != NULL ? (size_t)tg_db_nrows(r) : 0;
	struct tg_state_instance *v = tg_xcalloc(n + 1, sizeof(*v));
	const char **leads = tg_xcalloc(n * TG_STATE_FLEET_LEADS + 1, sizeof(*leads));
	char **bufs = tg_xcalloc(n + 1, sizeof(*bufs));

	for (i = 0; i < n; i++) {
		v[i].name = tg_db_str(r, (int)i, 0);
		v[i].self = v[i].name != NULL && strcmp(v[i].name, o->d.st->instance) == 0;
		v[i].live_until_ms = tg_db_i64(r, (int)i, 1);
		bufs[i] = tg_db_strdup(r, (int)i, 2);
		v[i].leads = leads + i * TG_STATE_FLEET_LEADS;
		v[i].nleads = split_leads(bufs[i], leads + i * TG_STATE_FLEET_LEADS,
		    TG_STATE_FLEET_LEADS);
		v[i].lead_count = tg_db_i64(r, (int)i, 3);
		v[i].webhook_leases = tg_db_i64(r, (int)i, 4);
		v[i].claims = tg_db_i64(r, (int)i, 5);
	}
	o->cb(&q->res, v, n, o->d.arg);
	for (i = 0; i < n; i++)
		free(bufs[i]);
	free(bufs);
	free(leads);
	free(v);
}

struct tg_state_op *
tg_state_fleet_list(struct tg_state *st, int64_t now_ms, tg_state_fleet_cb cb, void *arg)
{
	struct tg_state_res res = { TG_STATE_OK, { "" } };
	struct tg_state_instance self = { st->instance, 1, 0, NULL, 0, -1, -1, -1 };
	struct fop *o;

	if (!tg_db_fleet(st)) {
		cb(&res, &self, 1, arg);
		return NULL;
	}
	o = tg_db_op_new(sizeof(*o), st, &sql[0], answer_list, NULL, arg);
	o->cb = cb;
	tg_db_int(&o->d.q, now_ms);
	tg_db_text(&o->d.q, st->instance);
	return tg_db_submit(st, &o->d.q);
}
