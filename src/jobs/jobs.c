/*
 * jobs.c - correlation ownership of data exchange jobs (poll.ownership).
 * A job created through the gateway (an export, an import) belongs to the
 * API key that created it: the vendor's answer to the creation is recorded
 * through the state seam (include/tidegate/state.h: tg_state_owners_*;
 * durable, so a restart forgets nothing), and every read of a job
 * (GET /export, /import/status, /import/result, /import/failed) is checked
 * against it before the poll multiplexer or the vendor sees it. A lookup
 * may answer later: the request then waits in its slot (struct jobs_req)
 * and goes on from the callback. A read that comes while owner records
 * are still on their way to the store waits for them, so that a job is
 * never readable by another key just after its creation. While the state
 * cannot answer, a job this instance created or looked up lately keeps
 * its owner (known.c); others get 503 OWNERSHIP_UNAVAILABLE.
 *
 * The job id is read from the query once (tg_route_query_one): a query the
 * vendor could read another way is refused, and the upstream request is
 * built from that one decoded value alone, so what was checked is what the
 * vendor reads. Called from poll.c (jobs_owner_check, first thing for
 * those operations) and feature.c (the creations' answers, start, stop,
 * metrics).
 */
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
#include "tidegate/owners.h"
#include "tidegate/state.h"
#include "jobs_int.h"

#define PRUNE_EVERY_S 60

/* An owner record on its way to the store: it outlives its request. */
struct jobs_record {
	TAILQ_ENTRY(jobs_record) next;
	struct jobs *j;
	struct tg_state_op *op;		/* owned by the seam; NULL while it is called */
	char id[TG_UUID_LEN];		/* the creating request's, for the log */
	char *cid;
};

static void
record_free(struct jobs_record *rec)
{
	free(rec->cid);
	free(rec);
}

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
	o->path = c->owners_db_path;
	o->keep_ms = c->owners_keep;
	o->max_rows = c->owners_max;
}

void
jobs_owners_start(struct jobs *j)
{
	struct timeval tv = { PRUNE_EVERY_S, 0 };

	TAILQ_INIT(&j->records);
	TAILQ_INIT(&j->deferred);
	if ((j->state = j->gw->state) == NULL)
		return;
	prune(j);
	j->owners_prune = event_new(j->gw->base, -1, EV_PERSIST, on_prune, j);
	evtimer_add(j->owners_prune, &tv);
}

void
jobs_owners_stop(struct jobs *j)
{
	struct jobs_record *rec;
	struct jobs_req *q;

	if (j->owners_prune != NULL)
		event_free(j->owners_prune);
	j->owners_prune = NULL;
	tg_state_cancel(j->prune_op);
	j->prune_op = NULL;
	while ((rec = TAILQ_FIRST(&j->records)) != NULL) {
		TAILQ_REMOVE(&j->records, rec, next);
		tg_state_cancel(rec->op);
		record_free(rec);
	}
	while ((q = TAILQ_FIRST(&j->deferred)) != NULL) {
		TAILQ_REMOVE(&j->deferred, q, defer_next);
		q->deferred = 0;
	}
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

/* 0: r may read the job the lookup was about; -1 when it has replied (404,
 * 503: r is gone then). */
static int
verdict(struct jobs_req *q)
{
	struct gw_req *r = q->r;
	int ok = q->look_rc == TG_STATE_NOT_FOUND || (q->look_rc == TG_STATE_OK &&
	    r->key != NULL && strcmp(q->owner, r->key->name) == 0);

	free(q->owner);
	q->owner = NULL;
	q->looked = 0;
	if (ok)
		return 0;
	if (q->look_rc != TG_STATE_OK) {
		tg_log(TG_LOG_ERROR, "owners_lookup_failed", TG_LS("id", r->id),
		    TG_LS("error", q->look_err.msg));
		evhttp_add_header(evhttp_request_get_output_headers(r->req), "Retry-After", "1");
		gw_req_reply_error(r, 503, "OWNERSHIP_UNAVAILABLE",
		    "the record of who created this job could not be read; try again");
		return -1;
	}
	tg_metrics_inc(r->gw->metrics, "tidegate_job_owner_refusals_total", "", 1);
	gw_req_reply_error(r, 404, "NOT_FOUND", "no such job for this API key");
	return -1;
}

/* Look up the owner of q's job, unless owner records are still on their
 * way to the store (a read issued now might miss them): then after them.
 * 0 allowed, -1 replied, 1 answered later. */
static int
lookup_start(struct jobs_req *q)
{
	struct jobs *j = jobs_of(q->r);
	struct tg_state_op *op;

	if (!TAILQ_EMPTY(&j->records)) {
		q->deferred = 1;
		TAILQ_INSERT_TAIL(&j->deferred, q, defer_next);
		return 1;
	}
	q->looked = 0;
	q->in_lookup = 1;
	op = tg_state_owners_lookup(j->state, q->fam, q->job, tg_clock_now_ms(), on_lookup, q);
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
	else if (q->look_rc == TG_STATE_UNAVAILABLE &&
	    (owner = jobs_known_get(jobs_of(q->r), q->fam, q->job)) != NULL) {
		q->look_rc = TG_STATE_OK;	/* the state is away: what this instance saw */
		q->owner = tg_xstrdup(owner);
	}
	if (q->in_lookup)
		return;		/* answered inside the call: lookup_start goes on */
	if (verdict(q) == 0)
		go_on(q);
}

/* The records in flight are durable (or failed): the reads held back go on. */
static void
resume_deferred(struct jobs *j)
{
	struct jobs_req *q;

	while (TAILQ_EMPTY(&j->records) && (q = TAILQ_FIRST(&j->deferred)) != NULL) {
		TAILQ_REMOVE(&j->deferred, q, defer_next);
		q->deferred = 0;
		if (lookup_start(q) == 0)
			go_on(q);
	}
}

void
jobs_owner_forget(struct jobs_req *q)
{
	tg_state_cancel(q->owner_op);
	q->owner_op = NULL;
	if (q->deferred)
		TAILQ_REMOVE(&jobs_of(q->r)->deferred, q, defer_next);
	q->deferred = 0;
	free(q->job);
	q->job = NULL;
	free(q->owner);
	q->owner = NULL;
}

int
jobs_owner_check(struct gw_req *r, char **job)
{
	const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(r->req);
	enum tg_op op = r->op;
	struct jobs_req *q;
	struct tg_err why;
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
	if (r->rt->cfg.poll_ownership) {
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

static void
on_recorded(const struct tg_state_res *res, void *arg)
{
	struct jobs_record *rec = arg;
	struct jobs *j = rec->j;

	TAILQ_REMOVE(&j->records, rec, next);
	if (res->rc != TG_STATE_OK) {
		tg_log(TG_LOG_ERROR, "owners_record_failed", TG_LS("id", rec->id),
		    TG_LS("correlationId", rec->cid), TG_LS("error", res->err.msg));
		tg_metrics_inc(j->gw->metrics, "tidegate_job_owner_errors_total", "", 1);
	}
	record_free(rec);
	resume_deferred(j);
}

void
jobs_owner_record(struct gw_req *r, struct evbuffer *body)
{
	yajl_val v = tg_json_parse((const char *)evbuffer_pullup(body, -1),
	    evbuffer_get_length(body), NULL);
	const char *cid = tg_json_get_str(v, "correlationId");
	const char *fam = family(r->op);
	struct jobs *j = jobs_of(r);
	struct jobs_record *rec;
	struct tg_state_op *op;

	if (j->state != NULL && r->key != NULL && fam != NULL && cid != NULL && *cid != '\0') {
		rec = tg_xcalloc(1, sizeof(*rec));
		rec->j = j;
		snprintf(rec->id, sizeof(rec->id), "%s", r->id);
		rec->cid = tg_xstrdup(cid);
		jobs_known_put(j, fam, cid, r->key->name);
		TAILQ_INSERT_TAIL(&j->records, rec, next);
		op = tg_state_owners_record(j->state, fam, cid, r->key->name, tg_clock_now_ms(),
		    on_recorded, rec);
		if (op != NULL)
			rec->op = op;	/* else answered (and freed) already */
	}
	yajl_tree_free(v);
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
