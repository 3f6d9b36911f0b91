/*
 * routes.h - the router: maps every spelling a tool may use (prefixes such
 * as /public/v1, /api) onto a service's canonical routes and expands the
 * configured upstream path templates. It knows no service: a service's
 * table (its routes, their operation numbers, names and request checks,
 * its prefixes) is declared by that service (dex.h, sim.h). Implemented in
 * src/http/router.c.
 */
#ifndef TIDEGATE_ROUTES_H
#define TIDEGATE_ROUTES_H

#include <stddef.h>

struct tg_body_check;

/* A route table entry; its strings are static, borrowed. */
struct tg_route {
	int op;			/* the service's operation number (never 0: 0 is pass-through) */
	const char *method;
	const char *pattern;	/* canonical path; "{name}" captures one segment */
	const char *name;	/* metrics label and config key under routes. */
	const char *upstream;	/* default upstream path template */
	const struct tg_body_check *check;	/* its request check (body_check.h), or
						 * NULL: none */
	const char *accepts;	/* the media types its body may have, comma-separated
				 * (tg_http_media_accepted; 415 otherwise), or NULL: any */
};

#define TG_ROUTE_MAXPARAM 2
#define TG_ROUTE_PARAMLEN 256

struct tg_route_match {
	const struct tg_route *route;	/* borrowed from the table; NULL: no canonical
					 * route (pass through) */
	char param_name[TG_ROUTE_MAXPARAM][32];
	char param[TG_ROUTE_MAXPARAM][TG_ROUTE_PARAMLEN];
	int nparam;
};

/* A service's table (dex.h, sim.h): static; everything in it is borrowed. */
struct tg_service_routes {
	const struct tg_route *routes;
	size_t nroutes;
	const char *const *prefixes;	/* stripped before matching; "" last */
	size_t nprefixes;
	const char *job_param;	/* the query parameter naming a job (the access
				 * line's correlationId), or NULL */
	const char *seconds;	/* every byte that follows a pattern's first '/'
				 * ("aei" for /authenticate, /export, /import...):
				 * a path whose byte there is none of them is
				 * matched against no pattern. NULL: not given
				 * (needed when a pattern begins with "/{") */
};

/**
 * Match method and path (no query). Returns 1 with m filled when a canonical
 * route matched; 0 when the path is unknown (m->route NULL); -1 when the
 * path is known but not for this method (405). sr, method, path and m are
 * borrowed; m->route then points into sr (valid while sr is), parameters are
 * copied into m.
 */
int tg_route_match(const struct tg_service_routes *sr, const char *method, const char *path,
    struct tg_route_match *m);
/**
 * The methods path takes ("GET, POST"), for the Allow header of a 405:
 * into out (n bytes, "" for an unknown path). Off the matching path: called
 * only when tg_route_match said -1. sr, path and out are borrowed.
 */
void tg_route_allow(const struct tg_service_routes *sr, const char *path, char *out,
    size_t n);
/**
 * The route path nearest path, a near miss of it (tg_did_you_mean: another
 * case, or at most two edits; "{name}" segments taken from path), with the
 * prefix path was sent under: into out (n bytes), 1; 0 when none is near.
 * Off the matching path: for a 404. sr, path and out are borrowed.
 */
int tg_route_suggest(const struct tg_service_routes *sr, const char *path, char *out,
    size_t n);
/**
 * Expand "{name}" in tmpl from m's parameters, or NULL if one is missing.
 * tmpl and m are borrowed; the caller takes ownership of the result (free()).
 */
char *tg_route_expand(const char *tmpl, const struct tg_route_match *m);
/** Value of parameter name, or NULL; m and name are borrowed, the result is
 * borrowed from m. */
const char *tg_route_param(const struct tg_route_match *m, const char *name);
/** Name of the first route of sr (borrowed) with operation op, or NULL; the
 * name is borrowed from sr's table. */
const char *tg_route_op_name(const struct tg_service_routes *sr, int op);

#endif
