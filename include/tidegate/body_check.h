/*
 * body_check.h - a route's request check, as its service declares it in
 * its route table (routes.h: tg_route.check) and the request core runs it
 * (src/gateway/validate.c). The core knows no operation: it asks the
 * matched route for its check and runs the check's steps, inline or with
 * run on the worker thread for a large body; the check knows no request
 * core: it reads what tg_check_in hands it and says in tg_check_out what
 * becomes of the request. The checks are the services' (src/dex/checks.c,
 * src/sim/submit_check.c).
 */
#ifndef TIDEGATE_BODY_CHECK_H
#define TIDEGATE_BODY_CHECK_H

#include <stddef.h>

#include <yajl/yajl_tree.h>

#include "tidegate/problems.h"

struct evbuffer;
struct evhttp_request;
struct tg_route_match;
struct tg_case_rules;
struct tg_case_store;

/* What a check reads of its request, on the loop: borrowed for begin, and
 * the strings and rules as long as the configuration they come from (the
 * core holds it for the check's life). */
struct tg_check_in {
	struct evhttp_request *req;	/* its query and headers (begin only) */
	const struct tg_route_match *m;	/* its route's parameters (begin only) */
	const char *request_id;
	size_t max_problems;		/* validation.max_problems */
	size_t max_body;		/* limits.max_body: the largest upload part */
	int strict;			/* dex: unknown export members are problems */
	const char *wp_status_field;	/* dex: "status" or "statuses" */
	const struct tg_case_rules *case_rules;	/* sim: the case rules */
	struct tg_case_store *cases;	/* sim: the partial cases served (between only),
					 * or NULL */
};

/* The body as a check read it, for a feature that reads it too (the
 * scan): parsed once, everything borrowed for the scan's call. */
struct tg_check_body {
	yajl_val tree;			/* the caller's body parsed; NULL: not JSON */
	int checked;			/* the check passed: the fields below hold */
	const char *sent;		/* the body to be sent (normalised or the caller's) */
	size_t sentlen;
	const char *stripped;		/* an export's without its callbackUrl */
	size_t stripped_len;
	const char *callback;		/* the callbackUrl in the body sent, or NULL */
};

/* One request's check: the core's; priv is the check's (kind->free). */
struct tg_check {
	const struct tg_body_check *kind;	/* borrowed: its route's */
	void *priv;			/* the check's own state, set by begin */
	struct tg_problems p;		/* the one 400's problems (p.max set by the core) */
	const char *drop_query;		/* a query parameter not to forward (static), or
					 * NULL: set by begin */
	/* A feature reading the body too: set by the core before the first
	 * run; run calls scan(scan_arg, body) once, on whatever thread it runs
	 * on, and keeps the result in scanned (the core's). NULL: none. */
	void *(*scan)(void *arg, const struct tg_check_body *b);
	void *scan_arg;
	void *scanned;
};

/* What becomes of the request, as verdict says (on the loop). */
struct tg_check_out {
	char *body;			/* to go on: the body to send instead (the core
					 * takes it; free()), or NULL: the caller's */
	size_t len;
	const char *header, *header_value;	/* a header of the answer (static), or NULL */
	int status;			/* verdict 1: the answer instead of the vendor's */
	const char *code, *msg;		/* its error body (static): code NULL, reply */
	struct evbuffer *reply;		/* or this JSON body (the core takes it) */
};

struct tg_body_check {
	/** On the loop: c->priv from in (borrowed), the query's problems in
	 * c->p. */
	void (*begin)(struct tg_check *c, const struct tg_check_in *in);
	/** Check body (borrowed; c->priv owns nothing of it): reads only c and
	 * body, so it may run on the worker thread. */
	void (*run)(struct tg_check *c, struct evbuffer *body);
	/** On the loop after a run: 1 when run must run again (what it needs
	 * from the loop now taken), else 0. NULL: never. */
	int (*between)(struct tg_check *c);
	/** On the loop, the body checked: 0 to go on, -1 when c->p is the
	 * answer (400), 1 when out says the answer. out zeroed by the core. */
	int (*verdict)(struct tg_check *c, struct tg_check_out *out);
	/** Free c->priv (NULL-safe). */
	void (*free)(struct tg_check *c);
};

#endif
