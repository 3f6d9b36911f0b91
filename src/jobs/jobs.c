/*
 * jobs.c - correlation ownership of data exchange jobs (poll.ownership).
 * A job created through the gateway (an export, an import) belongs to the
 * API key that created it, and is served to that key alone: the vendor's
 * 200 to the creation is held (its correlationId is the job's only name)
 * until the owner record is committed through the state seam
 * (include/tidegate/state.h: tg_state_owners_*; durable, shared by a
 * fleet), and only then answered, so no read anywhere can come before the
 * record; a record that cannot be committed is answered 503 and the job
 * is never served. Every read of a job (GET /export, /import/status,
 * /import/result, /import/failed) is checked before the poll multiplexer
 * or the vendor sees it: a keyed caller is served only when a record
 * names its key; no record (never written, pruned, or written by a caller
 * without a key) proves nothing, so it is refused like another key's job.
 * A caller without a key (its own vendor token, a gateway without keys)
 * is refused a keyed job and left to the vendor for the rest. A lookup
 * may answer later: the request then waits in its slot (struct jobs_req).
 * While the state cannot answer, a job this instance recorded or looked up
 * lately keeps its owner (known.c); others get 503 OWNERSHIP_UNAVAILABLE.
 *
 * The job id is read from the query once (tg_route_query_one): a query the
 * vendor could read another way is refused, and the upstream request is
 * built from that one decoded value alone, so what was checked is what the
 * vendor reads. Called from poll.c (jobs_owner_check, first thing for
 * those operations) and feature.c (the creations' answers, start, stop,
 * metrics).
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/clock.h"
#include "tidegate/dex.h"
#include "tidegate/json.h"
#include "tidegate/log.h"
#include "tidegate/state.h"
#include "jobs_int.h"

#define PRUNE_EVERY_S 60
/* A write the state could not commit: as the other durable features. */
#define OWNERS_RETRY_AFTER "5"

/* The family a job's creation and its reads share; NULL: not a dex job. */
static const char *
family(enum tg_op op)
{
	switch (op) {
	case TG_OP_DEX_EXPORT:
	case TG_OP_DEX_EXPORT_GET:
		return "export";
	case TG_OP_DEX_IMPORT_JSON:
	case TG_OP_DEX_IMPORT_FILE:
	case TG_OP_DEX_IMPORT_STATUS:
	case TG_OP_DEX_IMPORT_RESULT:
	case TG_OP_DEX_IMPORT_FAILED:
		return "import";
	default:
		return NULL;
	}
}

static int
reads_job(enum tg_op op)
{
	return op == TG_OP_DEX_EXPORT_GET || op == TG_OP_DEX_IMPORT_STATUS ||
	    op == TG_OP_DEX_IMPORT_RESULT || op == TG_OP_DEX_IMPORT_FAILED;
}

/* ---- the prune timer ---- */

/* Rows removed are logged with the rows left (counted behind the prune). */
static void
on_counted_after_prune(const struct tg_state_res *res, int64_t n, void *arg)
{
	struct jobs *j = arg;

	j->prune_op = NULL;
	if (res->rc == TG_STATE_OK)
		tg_log(TG_LOG_INFO, "owners_pruned", TG_LI("rows", j->pruned), TG_LI("left", n));
	else
		tg_log(TG_LOG_INFO, "owners_pruned", TG_LI("rows", j->pruned));
}

static void
on_pruned(const struct tg_state_res *res, int64_t n, void *arg)
{
	struct jobs *j = arg;
	struct tg_state_op *op;

	j->prune_op = NULL;
	if (res->rc != TG_STATE_OK) {
		tg_log(TG_LOG_ERROR, "owners_prune_failed", TG_LS("error", res->err.msg));
		return;
	}
	if ((j->pruned = n) <= 0)
		return;
	if ((op = tg_state_owners_count(j->state, on_counted_after_prune, j)) != NULL)
		j->prune_op = op;
}

static void
prune(struct jobs *j)
{
	struct tg_state_op *op;

	if (j->prune_op != NULL)
		return;		/* the last one is still under way */
	if ((op = tg_state_owners_prune(j->state, tg_clock_now_ms(), on_pruned, j)) != NULL)
		j->prune_op = op;
}

static void
on_prune(evutil_socket_t fd, short what, void *arg)
{
	prune(arg);
}

void
tg_jobs_owners_opts(const struct gw_config *c, struct tg_owners_opts *o)
{
	const struct jobs_cfg *j = jobs_cfg_of(c);

	o->path = j->owners_db_path;
	o->keep_ms = j->owners_keep;
	o->max_rows = j->owners_max;
}

void
jobs_owners_start(struct jobs *j)
{
	struct timeval tv = { PRUNE_EVERY_S, 0 };

	if ((j->state = j->gw->state) == NULL)
		return;
	prune(j);
	j->owners_prune = event_new(j->gw->base, -1, EV_PERSIST, on_prune, j);
	evtimer_add(j->owners_prune, &tv);
}

void
jobs_owners_stop(struct jobs *j)
{
	if (j->owners_prune != NULL)
		event_free(j->owners_prune);
	j->owners_prune = NULL;
	tg_state_cancel(j->prune_op);
	j->prune_op = NULL;
	jobs_known_free(j);
}

/* 400 VALIDATION_FAILED naming the query (path ""), as for other query
 * parameters; frees r. */
static void
refuse(struct gw_req *r, const char *code, const char *msg)
{
	struct tg_problems p;

	memset(&p, 0, sizeof(p));
	p.max = (size_t)r->rt->cfg.max_problems;
	tg_problems_add(&p, "", code, "%s", msg);
	gw_reply_problems(r, &p);
	tg_problems_cleanup(&p);
}

/* The upstream request of a job read: the route's path and the one value. */
static char *
job_uri(struct gw_req *r, const char *cid)
{
	const char *tmpl = r->svc->cfg->routes[r->op];
	char *path = tg_route_expand(tmpl, &r->m);
	char *enc = evhttp_uriencode(cid, -1, 0);
	char *uri = tg_xasprintf("%s%s?correlationId=%s", tg_upstream_base_path(r->svc->api),
	    path != NULL ? path : tmpl, enc);

	free(enc);
	free(path);
	return uri;
}

/* The lookup's answer, kept in r's slot: the callback may run inside the
 * call (reply only after it has returned) or later. */
static void
on_lookup(const struct tg_state_res *res, const char *owner, void *arg);

/*
 * Whether r may read a job whose lookup answered rc and owner: a keyed
 * caller only when the record names its key (no record proves nothing); a
 * caller without a key when no key owns it (the vendor judges its token).
 */
static int
owns(const struct gw_req *r, int rc, const char *owner)
{
	if (rc == TG_STATE_OK)
		return r->key != NULL && owner != NULL && strcmp(owner, r->key->name) == 0;
	return rc == TG_STATE_NOT_FOUND && r->key == NULL;
}

/* 0: r may read the job the lookup was about; -1 when it has replied (404,
 * 503: r is gone then). */
static int
verdict(struct jobs_req *q)
{
	struct gw_req *r = q->r;
	int ok = owns(r, q->look_rc, q->owner);
	char msg[400];

	free(q->owner);
	q->owner = NULL;
	q->looked = 0;
	if (ok)
		return 0;
	jobs_poll_lead_drop(jobs_of(r)->poll, q->lead_key, q->led);	/* none for a refusal */
	q->lead_key = NULL;
	if (q->look_rc != TG_STATE_OK && q->look_rc != TG_STATE_NOT_FOUND) {
		tg_log(TG_LOG_ERROR, "owners_lookup_failed", TG_LS("id", r->id),
		    TG_LS("error", q->look_err.msg));
		if (r->req != NULL)
			evhttp_add_header(evhttp_request_get_output_headers(r->req),
			    "Retry-After", "1");
		snprintf(msg, sizeof(msg), "the record of who created this job could not be "
		    "read (%s); try again", q->look_err.msg);
		gw_req_reply_error(r, 503, "OWNERSHIP_UNAVAILABLE", msg);
		return -1;
	}
	tg_metrics_inc(r->gw->metrics, "tidegate_job_owner_refusals_total", "", 1);
	gw_req_reply_error(r, 404, "NOT_FOUND", "no such job for this API key");
	return -1;
}

/* The lookup that also asked the fleet for the lead of the first poll. */
static void
on_lookup_lead(const struct tg_state_res *res, const char *owner, int led, void *arg)
{
	struct jobs_req *q = arg;

	q->led = led;
	if (res->rc != TG_STATE_OK && res->rc != TG_STATE_NOT_FOUND) {
		free(q->lead_key);	/* the state cannot say: the poll asks again */
		q->lead_key = NULL;
	}
	on_lookup(res, owner, arg);
}

/*
 * Look up the owner of q's job: 0 allowed, -1 replied, 1 answered later.
 * A fleet's first poll of the job here asks for its poll lead in the same
 * statement (one round trip, not two after each other): taken only for a
 * caller the lookup allows, used by poll.c or given up.
 */
static int
lookup_start(struct jobs_req *q)
{
	struct jobs *j = jobs_of(q->r);
	struct gw_req *r = q->r;
	struct tg_state_op *op;
	char *uri;

	q->looked = 0;
	q->in_lookup = 1;
	if (jobs_poll_shared(j->poll)) {
		uri = job_uri(r, q->job);
		q->lead_key = jobs_poll_first_key(j->poll, r, uri);
		free(uri);
	}
	if (q->lead_key != NULL)
		op = tg_state_owners_lookup_lead(j->state, q->fam, q->job, tg_clock_now_ms(),
		    r->key != NULL ? r->key->name : NULL, q->lead_key,
		    jobs_cfg(r->rt)->poll_max_interval, on_lookup_lead, q);
	else
		op = tg_state_owners_lookup(j->state, q->fam, q->job, tg_clock_now_ms(),
		    on_lookup, q);
	q->in_lookup = 0;
	if (!q->looked) {
		q->owner_op = op;
		return 1;
	}
	return verdict(q);
}

/* The check allowed q's request later: on to the multiplexer or the vendor. */
static void
go_on(struct jobs_req *q)
{
	struct gw_req *r = q->r;
	char *job = q->job;

	q->job = NULL;
	free(r->uri);
	r->uri = job_uri(r, job);
	jobs_poll_resume(r, job);
}

static void
on_lookup(const struct tg_state_res *res, const char *owner, void *arg)
{
	struct jobs_req *q = arg;

	q->owner_op = NULL;
	q->looked = 1;
	q->look_rc = res->rc;
	q->look_err = res->err;
	q->owner = res->rc == TG_STATE_OK && owner != NULL ? tg_xstrdup(owner) : NULL;
	if (q->look_rc == TG_STATE_OK && q->owner == NULL)
		q->look_rc = TG_STATE_ERROR;
	if (q->owner != NULL)
		jobs_known_put(jobs_of(q->r), q->fam, q->job, q->owner);
	else if (q->look_rc != TG_STATE_NOT_FOUND &&
	    (owner = jobs_known_get(jobs_of(q->r), q->fam, q->job)) != NULL) {
		q->look_rc = TG_STATE_OK;	/* the state is away: what this instance saw */
		q->owner = tg_xstrdup(owner);
	}
	if (q->in_lookup)
		return;		/* answered inside the call: lookup_start goes on */
	if (verdict(q) == 0)
		go_on(q);
}

void
jobs_owner_forget(struct jobs_req *q)
{
	if (q->owner_op != NULL && q->lead_key != NULL)
		q->led = 1;	/* the lookup may have taken the lead: give it up */
	tg_state_cancel(q->owner_op);
	q->owner_op = NULL;
	jobs_poll_lead_drop(q->r != NULL ? jobs_of(q->r)->poll : NULL, q->lead_key, q->led);
	q->lead_key = NULL;
	free(q->job);
	q->job = NULL;
	free(q->owner);
	q->owner = NULL;
}

/* The vendor's job ids: 8-4-4-4-12 hex digits, either case. */
static int
is_uuid(const char *s)
{
	size_t i;

	for (i = 0; i < 36; i++)
		if (i == 8 || i == 13 || i == 18 || i == 23 ? s[i] != '-' :
		    !isxdigit((unsigned char)s[i]))
			return 0;
	return s[36] == '\0';
}

/* Echoed in an error only when it is plain ASCII (a cut leaves it whole). */
static int
printable(const char *s)
{
	for (; *s; s++)
		if (*s < 0x20 || *s > 0x7e)
			return 0;
	return 1;
}

int
jobs_owner_check(struct gw_req *r, char **job)
{
	const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(r->req);
	enum tg_op op = r->op;
	struct jobs_req *q;
	struct tg_err why;
	char msg[320];
	int rc;

	*job = NULL;
	if (jobs_of(r)->state == NULL || !reads_job(op))
		return 0;
	if (tg_route_query_one(u ? evhttp_uri_get_query(u) : NULL, "correlationId", job,
	    &why) != 0) {
		refuse(r, "ambiguous", why.msg);
		return -1;
	}
	if (*job == NULL) {
		refuse(r, "required", "query parameter 'correlationId' is required");
		return -1;
	}
	if (jobs_cfg(r->rt)->poll_uuid_ids && !is_uuid(*job)) {
		snprintf(msg, sizeof(msg), "query parameter 'correlationId' is not a job id of "
		    "the vendor: '%.64s%s' (its ids are UUIDs, as its exports and imports "
		    "answer them: 8-4-4-4-12 hex digits; poll.uuid_ids: false sends any id)",
		    printable(*job) ? *job : "…", strlen(*job) > 64 ? "…" : "");
		refuse(r, "format", msg);
		free(*job);
		*job = NULL;
		return -1;
	}
	if (jobs_cfg(r->rt)->poll_ownership) {
		q = jobs_req_of(r);
		q->job = *job;
		q->fam = family(op);
		*job = NULL;
		if ((rc = lookup_start(q)) != 0)
			return rc;	/* replied (q is gone), or later */
		*job = q->job;
		q->job = NULL;
	}
	free(r->uri);
	r->uri = job_uri(r, *job);
	return 0;
}

/* ---- creations ---- */

int
jobs_owner_holds(struct gw_req *r, int status)
{
	const struct jobs *j = jobs_of(r);
	const char *fam = family(r->op);

	if (status != 200 || fam == NULL || reads_job(r->op) || r->key == NULL ||
	    j->state == NULL || !jobs_cfg(r->rt)->poll_ownership)
		return 0;
	jobs_req_of(r)->holding = 1;
	return 1;
}

/*
 * The record could not be committed: the job exists at the vendor, and
 * nobody will be served it through the gateway. Or (unknown) whether it
 * was is unknown (the database was lost while it was written and did not
 * answer again within state.timeout): the job may be this key's on every
 * instance, so never "will not be served": say how to find out. r is gone
 * after.
 */
static void
refuse_unowned(struct gw_req *r, const char *cid, const char *why, int unknown)
{
	char msg[512];

	tg_log(TG_LOG_ERROR, unknown ? "owners_record_unknown" : "owners_record_failed",
	    TG_LS("id", r->id), TG_LS("correlationId", cid), TG_LS("error", why));
	tg_metrics_inc(r->gw->metrics, "tidegate_job_owner_errors_total", "", 1);
	if (unknown)
		snprintf(msg, sizeof(msg), "%s %.64s was created at the vendor; whether the record "
		    "of its owner was stored is unknown (the database was lost while it was "
		    "written and did not answer again in time): read the job with this key once "
		    "the gateway answers (200: it is yours; 404: it was not stored, create it "
		    "again)", family(r->op), cid);
	else
		snprintf(msg, sizeof(msg), "%s %.64s was created at the vendor, but the record of "
		    "its owner could not be stored (%.200s): it will not be served through the "
		    "gateway (create it again later)", family(r->op), cid, why);
	if (r->req != NULL)
		evhttp_add_header(evhttp_request_get_output_headers(r->req), "Retry-After",
		    OWNERS_RETRY_AFTER);
	gw_req_reply_error(r, 503, "OWNERSHIP_UNAVAILABLE", msg);
}

/* The owner is durable (or not): answer the creator, or refuse. */
static void
on_recorded(const struct tg_state_res *res, void *arg)
{
	struct jobs_req *q = arg;
	struct gw_req *r = q->r;

	q->owner_op = NULL;
	if (res->rc != TG_STATE_OK) {
		refuse_unowned(r, q->job, res->err.msg, res->rc == TG_STATE_UNKNOWN);
		return;
	}
	jobs_known_put(jobs_of(r), q->fam, q->job, r->key->name);
	free(q->job);
	q->job = NULL;
	gw_req_done_continue(r);	/* the other features, then the held 200 */
}

int
jobs_owner_record(struct gw_req *r, enum tg_up_error err, struct evbuffer *capture)
{
	struct jobs_req *q = jobs_req_find(r);
	yajl_val v;
	const char *cid;
	struct tg_state_op *op;

	if (q == NULL || !q->holding || err != TG_UP_OK)
		return 0;	/* not held here, or broken off: the core answers 502 */
	if (capture == NULL) {
		gw_req_reply_error(r, 502, "UPSTREAM_ERROR", "the vendor's answer to the "
		    "creation was too large to hold: the job may exist, but is not served");
		return 1;
	}
	v = tg_json_parse((const char *)evbuffer_pullup(capture, -1),
	    evbuffer_get_length(capture), NULL);
	cid = tg_json_get_str(v, "correlationId");
	if (cid == NULL || *cid == '\0') {
		yajl_tree_free(v);
		return 0;	/* no job named: nothing to own */
	}
	q->job = tg_xstrdup(cid);
	q->fam = family(r->op);
	yajl_tree_free(v);
	op = tg_state_owners_record(jobs_of(r)->state, q->fam, q->job, r->key->name,
	    tg_clock_now_ms(), on_recorded, q);
	if (op != NULL)
		q->owner_op = op;	/* else answered (r may be gone) */
	return 1;
}

/* A scrape's part waiting for the count. */
struct owners_scrape {
	struct gw_scrape *s;
	struct evbuffer *out;
};

static void
on_counted(const struct tg_state_res *res, int64_t n, void *arg)
{
	struct owners_scrape *c = arg;

	if (res->rc == TG_STATE_OK)
		evbuffer_add_printf(c->out, "# HELP tidegate_job_owners Jobs whose creating API "
		    "key is remembered (poll.ownership).\n# TYPE tidegate_job_owners gauge\n"
		    "tidegate_job_owners %lld\n", (long long)n);
	else
		tg_log(TG_LOG_WARN, "owners_count_failed", TG_LS("error", res->err.msg));
	gw_scrape_release(c->s);
	free(c);
}

void
jobs_owners_metrics(struct jobs *j, struct evbuffer *out, struct gw_scrape *s)
{
	struct owners_scrape *c;

	if (j->state == NULL)
		return;
	c = tg_xmalloc(sizeof(*c));
	c->s = s;
	c->out = out;
	gw_scrape_hold(s);
	(void)tg_state_owners_count(j->state, on_counted, c);
}
