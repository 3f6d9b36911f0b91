/*
 * routes.h - canonical operations of both services and the router that
 * maps every spelling a tool may use (prefixes such as /public/v1, /api)
 * onto them, expands the configured upstream path templates, and reads
 * the one value of a query parameter that names a job.
 * Tables live in src/dex/routes.c and src/sim/routes.c.
 */
#ifndef TIDEGATE_ROUTES_H
#define TIDEGATE_ROUTES_H

#include <stddef.h>

enum tg_op {
	TG_OP_PASSTHROUGH = 0,
	TG_OP_DEX_AUTHENTICATE, TG_OP_DEX_EXPORT, TG_OP_DEX_EXPORT_GET, TG_OP_DEX_IMPORT_JSON,
	TG_OP_DEX_IMPORT_FILE, TG_OP_DEX_IMPORT_STATUS, TG_OP_DEX_IMPORT_RESULT,
	TG_OP_DEX_IMPORT_FAILED,
	TG_OP_SIM_TOKEN, TG_OP_SIM_CASES, TG_OP_SIM_CASE, TG_OP_SIM_SUBMIT, TG_OP_SIM_LIST,
	TG_OP_SIM_STATUS, TG_OP_SIM_RESULTS,
	TG_OP_COUNT
};

struct tg_route {
	enum tg_op op;
	const char *method;
	const char *pattern;	/* canonical path; "{name}" captures one segment */
	const char *name;	/* metrics label and config key under routes. */
	const char *upstream;	/* default upstream path template */
};

#define TG_ROUTE_MAXPARAM 2
#define TG_ROUTE_PARAMLEN 256

struct tg_route_match {
	const struct tg_route *route;	/* NULL: no canonical route (pass through) */
	char param_name[TG_ROUTE_MAXPARAM][32];
	char param[TG_ROUTE_MAXPARAM][TG_ROUTE_PARAMLEN];
	int nparam;
};

struct tg_service_routes {
	const struct tg_route *routes;
	size_t nroutes;
	const char *const *prefixes;	/* stripped before matching; "" last */
	size_t nprefixes;
};

extern const struct tg_service_routes tg_dex_service_routes;
extern const struct tg_service_routes tg_sim_service_routes;

/**
 * Match method and path (no query). Returns 1 with m filled when a canonical
 * route matched; 0 when the path is unknown (m->route NULL); -1 when the
 * path is known but not for this method (405).
 */
int tg_route_match(const struct tg_service_routes *sr, const char *method, const char *path,
    struct tg_route_match *m);
/** Expand "{name}" in tmpl from m's parameters; malloc'd, NULL if one is missing. */
char *tg_route_expand(const char *tmpl, const struct tg_route_match *m);
/** Value of parameter name, or NULL. */
const char *tg_route_param(const struct tg_route_match *m, const char *name);
const char *tg_op_name(enum tg_op op);

struct tg_err;
/**
 * The one value of query parameter name in the raw query string q (both
 * borrowed; q may be NULL), read as a vendor would: names and values
 * percent-decoded ('+' is a space), names compared without regard to case.
 * 0 with *out (malloc'd, the caller frees; NULL when the parameter is
 * absent), or -1 with why when the query could be read more than one way:
 * the parameter given twice in any spelling, empty, with a broken escape,
 * a control character (%00 included) or more than TG_ROUTE_PARAMLEN bytes.
 * Implemented in src/dex/job_query.c.
 */
int tg_route_query_one(const char *q, const char *name, char **out, struct tg_err *why);

#endif
