/*
 * jobs_int.h - private contract between the jobs feature's files: the poll
 * multiplexer (poll.c, poll_cache.c, poll_wait.c, poll_fetch.c: their own
 * contract is poll_int.h), its spool of large final answers (spool.c), the
 * correlation ownership of data exchange jobs (jobs.c, known.c), and the feature's
 * registration with the request core (feature.c), which owns struct jobs
 * and each request's struct jobs_req slot.
 */
#ifndef TIDEGATE_JOBS_INT_H
#define TIDEGATE_JOBS_INT_H

#include <stdint.h>
#include <sys/queue.h>

#include "tidegate/gateway.h"
#include "tidegate/jobs.h"

struct event;
struct jobs_poll;
struct jobs_spool;
struct jobs_spool_rd;
struct jobs_known;
struct poll_entry;
struct tg_state;
struct tg_state_op;

/* The feature's settings (config.c: poll.*), one per configuration loaded. */
struct jobs_cfg {
	int poll_enabled, poll_ownership;
	int poll_uuid_ids;	/* job reads take only UUIDs (poll.uuid_ids) */
	int64_t poll_interval, poll_max_interval, poll_backoff_after, poll_max_wait;
	int64_t poll_wait_margin, poll_spool_max_bytes;
	char *poll_spool_dir;	/* large final answers (poll.spool_dir) */
	int64_t poll_cache_max_body, poll_cache_max_bytes, poll_terminal_ttl;
	long long poll_max_entries;
	char *owners_db;	/* correlation ownership (poll.ownership_db) */
	int64_t owners_keep;
	long long owners_max;
	/* derived by its check (not keys) */
	char *owners_db_path;	/* owners_db resolved against the file's directory */
	char *spool_dir_path;	/* poll_spool_dir resolved likewise */
};

/* The feature: created by tg_jobs_register, freed by its stop callback. */
struct jobs {
	struct gw *gw;
	int id;				/* the request slot of this feature */
	struct jobs_poll *poll;		/* NULL when poll.enabled is false */
	struct tg_state *state;		/* gw->state (borrowed); NULL: no ownership */
	struct event *owners_prune;
	struct tg_state_op *prune_op;	/* the prune (or its count) in flight */
	int64_t pruned;			/* rows the last prune removed */
	struct jobs_known *known;	/* owners seen lately (known.c); NULL: none yet */
};

/* One request's part in the feature (r->slot[id]), made on first use. */
struct jobs_req {
	struct gw_req *r;
	struct poll_entry *poll;	/* waiting on a shared poll (poll.c) */
	TAILQ_ENTRY(jobs_req) next;
	int64_t wait_until;		/* long-poll deadline (monotonic ms), 0: none */
	struct event *wait_timer;
	struct jobs_spool_rd *spool_rd;	/* reading a spooled answer (spool.c) */
	/* the owner check of a job read answered later, or the owner record
	 * of a creation whose answer is held until it is committed (jobs.c) */
	char *job;			/* the job id, while its owner is looked up or
					 * recorded */
	const char *fam;		/* its family (static) */
	struct tg_state_op *owner_op;	/* the lookup or record in flight (owned by
					 * the seam) */
	int holding;			/* a creation's 200 is held for its record */
	int in_lookup, looked;		/* the lookup is being called / has answered */
	int look_rc;			/* its enum tg_state_rc */
	char *owner;			/* its key (malloc'd), when look_rc is 0 */
	char *lead_key;			/* a fleet's first poll: the poll key the lookup
					 * asked the lead of (malloc'd), until used */
	int led;			/* it took that lead (give it up if unused) */
	struct tg_err look_err;
};

/* known.c */
/** Remember that job (of family fam) is owner's (all borrowed, copied). */
void jobs_known_put(struct jobs *j, const char *fam, const char *job, const char *owner);
/** The owner remembered for job of fam (borrowed from j), or NULL. */
const char *jobs_known_get(const struct jobs *j, const char *fam, const char *job);
void jobs_known_free(struct jobs *j);	/* what j remembers; j borrowed */

/* config.c */
/** The feature's settings in c (borrowed from c), before a gateway runs. */
const struct jobs_cfg *jobs_cfg_of(const struct gw_config *c);

/* slot.c */
/** The feature's settings under rt (borrowed from rt): what a request or
 * a reload sees. */
const struct jobs_cfg *jobs_cfg(const struct gw_runtime *rt);
/** The request slot the core gave the feature (gw_feature_register). */
void jobs_slot_set(int id);
/** r's slot (borrowed; r owns it), made when absent. */
struct jobs_req *jobs_req_of(struct gw_req *r);
/** r's slot (borrowed), or NULL when the feature never used r. */
struct jobs_req *jobs_req_find(const struct gw_req *r);
/** The feature of r's gateway (borrowed). */
struct jobs *jobs_of(const struct gw_req *r);

/* poll.c */
/** The multiplexer of gw (borrowed); c (borrowed) sets its sweep period and
 * spool directory, which a reload does not change. Owned by the caller. */
struct jobs_poll *jobs_poll_new(struct gw *gw, const struct jobs_cfg *c);
void jobs_poll_free(struct jobs_poll *p);	/* takes ownership; NULL-safe */
/** Serve a pollable GET of job (taken: the id its owner check read, or
 * NULL) from the multiplexer p (borrowed; NULL: off): 1 when handled
 * (replied or waiting), 0 to proxy. */
int jobs_poll_handle(struct jobs_poll *p, struct gw_req *r, char *job);
/** The owner check of r (borrowed) allowed it later: serve r from the
 * multiplexer or proxy it. Takes ownership of job (the id read, or NULL). */
void jobs_poll_resume(struct gw_req *r, char *job);
/** The request of q (borrowed) ends: stop waiting. */
void jobs_poll_forget(struct jobs_req *q);
/**
 * The poll key (malloc'd) of r's read of uri (all borrowed) when its first
 * poll would ask p's fleet for the lead (no entry here, or an idle one
 * with a stale answer): the owner lookup asks it in the same statement.
 * NULL when p is no fleet's, or the entry would not lead.
 */
char *jobs_poll_first_key(struct jobs_poll *p, struct gw_req *r, const char *uri);
/** 1 when p (borrowed; NULL-safe) shares its polls with a fleet. */
int jobs_poll_shared(const struct jobs_poll *p);
/** The lead of key (taken; NULL-safe) a lookup took (led) is not used:
 * given up unless an entry of p's (borrowed; NULL: none) asks for or
 * holds it. */
void jobs_poll_lead_drop(struct jobs_poll *p, char *key, int led);
/** SIGTERM: answer every long-poll of p (borrowed; NULL-safe) now. */
void jobs_poll_drain(struct jobs_poll *p);
/**
 * The multiplexer's answer to GET uri (borrowed, upstream path and query)
 * of service, polled with the gateway's own token: 1 and *out when it holds
 * a fresh one (what it would serve a caller without asking the vendor).
 */
int jobs_poll_peek(struct jobs_poll *p, int service, const char *uri, struct gw_peek *out);
/** /metrics: bytes of answers held (gauge) and the budget. */
void jobs_poll_metrics(struct jobs_poll *p, struct evbuffer *out);

/* spool.c */
/* Bytes and files of all spools at once (owned by the poll multiplexer). */
struct jobs_spool_stats {
	int64_t bytes, max;
	long files;
};
/**
 * A new spool file in dir (borrowed) for a final answer of status and
 * ctype (copied): NULL with err when it cannot be created. gw and st are
 * borrowed and must outlive the spool. The caller holds one reference.
 */
struct jobs_spool *jobs_spool_new(struct gw *gw, const char *dir, int status,
    const char *ctype, struct jobs_spool_stats *st, struct tg_err *err);
/** Append buf's bytes (drained; s and buf borrowed): 0, or -1 over st->max
 * or on a write error (the spool has failed then). */
int jobs_spool_append(struct jobs_spool *s, struct evbuffer *buf);
/** The answer is whole (ok) or never will be: readers finish or are reset. */
void jobs_spool_end(struct jobs_spool *s, int ok);
/** Drop a reference (takes it; NULL-safe): the file is removed at once,
 * its bytes freed when the last reader is done. An unfinished spool fails. */
void jobs_spool_unref(struct jobs_spool *s);
/** Stream the spool (borrowed) to r (borrowed until its reply ends),
 * following it while it is written; how is the X-Tidegate-Poll value (static). */
void jobs_spool_serve(struct jobs_spool *s, struct gw_req *r, const char *how);
/** The request of q (borrowed) ends: stop reading. */
void jobs_spool_forget(struct jobs_req *q);
/** Create dir (borrowed; 0700) and remove spool files left by an earlier run. */
void jobs_spool_dir_prepare(const char *dir);

/* jobs.c */
/** Ownership through gw's state seam (j borrowed): the prune timer, and a
 * first prune now. Nothing when gw has no state. */
void jobs_owners_start(struct jobs *j);
/** Stop the timer and drop the operations in flight; safe when never started. */
void jobs_owners_stop(struct jobs *j);
/**
 * A read of a data exchange job (GET /export, /import/…): its one
 * correlationId into *job (malloc'd, the caller frees), ownership checked,
 * r->uri built from that value alone. 0 to go on (*job NULL for other
 * operations), -1 when it has replied (400 ambiguous or missing id, 404
 * another key's job, 503 store failure), 1 when the check answers later
 * (r's slot keeps the id; then it replies or calls jobs_poll_resume).
 * r borrowed.
 */
int jobs_owner_check(struct gw_req *r, char **job);
/** The request of q (borrowed) ends: its lookup is dropped. */
void jobs_owner_forget(struct jobs_req *q);
/** The vendor's status for a creation by r (borrowed): 1 when its answer
 * is to be held until the owner is recorded (a keyed 200, ownership on). */
int jobs_owner_holds(struct gw_req *r, int status);
/**
 * The creation's exchange ended (err; capture borrowed, the held answer or
 * NULL): record its owner read from capture, then answer r through the
 * core (gw_req_done_continue), or 503 when the record cannot be committed.
 * 1 when it has replied or will reply, 0 when r was not held here, broke
 * off, or names no job (the core goes on).
 */
int jobs_owner_record(struct gw_req *r, enum tg_up_error err, struct evbuffer *capture);
/** /metrics: the owner records held (gauge), written later into out
 * (borrowed until s, borrowed, is released); j borrowed. */
void jobs_owners_metrics(struct jobs *j, struct evbuffer *out, struct gw_scrape *s);

#endif
