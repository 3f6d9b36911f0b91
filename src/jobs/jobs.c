/*
 * jobs.c - correlation ownership of data exchange jobs (poll.ownership).
 * A job created through the gateway (an export, an import) belongs to the
 * API key that created it: the vendor's answer to the creation is recorded
 * in the owner store (include/tidegate/owners.h; SQLite beside the other
 * databases, so a restart forgets nothing), and every read of a job
 * (GET /export, /import/status, /import/result, /import/failed) is checked
 * against it before the poll multiplexer or the vendor sees it.
 *
 * The job id is read from the query once (tg_route_query_one): a query the
 * vendor could read another way is refused, and the upstream request is
 * built from that one decoded value alone, so what was checked is what the
 * vendor reads. Called from poll.c (jobs_owner_check, first thing for
 * those operations) and feature.c (the creations' answers, open, close,
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
#include "jobs_int.h"

#define PRUNE_EVERY_S 60

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

static void
prune(struct jobs *j)
{
	struct tg_err err;
	long long n = tg_owners_prune(j->owners, tg_clock_now_ms(), &err);

	if (n < 0)
		tg_log(TG_LOG_ERROR, "owners_prune_failed", TG_LS("error", err.msg));
	else if (n > 0)
		tg_log(TG_LOG_INFO, "owners_pruned", TG_LI("rows", n),
		    TG_LI("left", tg_owners_count(j->owners)));
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

int
jobs_owners_open(struct jobs *j, const struct gw_config *c, struct tg_err *err)
{
	struct tg_owners_opts o;
	struct timeval tv = { PRUNE_EVERY_S, 0 };

	tg_jobs_owners_opts(c, &o);
	if ((j->owners = tg_owners_open(&o, err)) == NULL)
		return -1;
	prune(j);
	j->owners_prune = event_new(j->gw->base, -1, EV_PERSIST, on_prune, j);
	evtimer_add(j->owners_prune, &tv);
	tg_log(TG_LOG_INFO, "owners_open", TG_LS("db", c->owners_db_path),
	    TG_LI("rows", tg_owners_count(j->owners)));
	return 0;
}

void
jobs_owners_close(struct jobs *j)
{
	if (j->owners_prune != NULL)
		event_free(j->owners_prune);
	j->owners_prune = NULL;
	tg_owners_close(j->owners);
	j->owners = NULL;
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

/* 0: r may read job cid of fam; -1 when it has replied (404, 503). */
static int
check_owner(struct gw_req *r, const char *fam, const char *cid)
{
	char *owner = NULL;
	struct tg_err err;
	int rc;

	if (!r->rt->cfg.poll_ownership)
		return 0;
	rc = tg_owners_lookup(jobs_of(r)->owners, fam, cid, tg_clock_now_ms(), &owner, &err);
	if (rc < 0) {
		tg_log(TG_LOG_ERROR, "owners_lookup_failed", TG_LS("id", r->id),
		    TG_LS("error", err.msg));
		evhttp_add_header(evhttp_request_get_output_headers(r->req), "Retry-After", "1");
		gw_req_reply_error(r, 503, "OWNERSHIP_UNAVAILABLE",
		    "the record of who created this job could not be read; try again");
		return -1;
	}
	if (rc == 0 && (r->key == NULL || strcmp(owner, r->key->name) != 0)) {
		free(owner);
		tg_metrics_inc(r->gw->metrics, "tidegate_job_owner_refusals_total", "", 1);
		gw_req_reply_error(r, 404, "NOT_FOUND", "no such job for this API key");
		return -1;
	}
	free(owner);
	return 0;
}

int
jobs_owner_check(struct gw_req *r, char **job)
{
	const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(r->req);
	enum tg_op op = r->op;
	struct tg_err why;

	*job = NULL;
	if (jobs_of(r)->owners == NULL || !reads_job(op))
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
	if (check_owner(r, family(op), *job) != 0) {
		free(*job);
		*job = NULL;
		return -1;
	}
	free(r->uri);
	r->uri = job_uri(r, *job);
	return 0;
}

void
jobs_owner_record(struct gw_req *r, struct evbuffer *body)
{
	yajl_val v = tg_json_parse((const char *)evbuffer_pullup(body, -1),
	    evbuffer_get_length(body), NULL);
	const char *cid = tg_json_get_str(v, "correlationId");
	const char *fam = family(r->op);
	struct tg_owners *o = jobs_of(r)->owners;
	struct tg_err err;

	if (o != NULL && r->key != NULL && fam != NULL && cid != NULL &&
	    *cid != '\0' && tg_owners_record(o, fam, cid, r->key->name,
	    tg_clock_now_ms(), &err) != 0) {
		tg_log(TG_LOG_ERROR, "owners_record_failed", TG_LS("id", r->id),
		    TG_LS("correlationId", cid), TG_LS("error", err.msg));
		tg_metrics_inc(r->gw->metrics, "tidegate_job_owner_errors_total", "", 1);
	}
	yajl_tree_free(v);
}

void
jobs_owners_metrics(struct jobs *j, struct evbuffer *out)
{
	if (j->owners == NULL)
		return;
	evbuffer_add_printf(out, "# HELP tidegate_job_owners Jobs whose creating API key is "
	    "remembered (poll.ownership).\n# TYPE tidegate_job_owners gauge\n"
	    "tidegate_job_owners %lld\n", tg_owners_count(j->owners));
}
