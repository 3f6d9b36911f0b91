/*
 * router.c - maps a request's method and path to a canonical operation.
 * Tools spell the same endpoint many ways (/public/v1/X, /public/X,
 * /api/public/v1/X, /api/X, /X); each configured prefix is tried in turn
 * and the remainder matched against the service's canonical patterns.
 * Called by the gateway for every request, on the path as
 * tg_http_target_normalise left it (target.c): no dot segments, no empty
 * ones but a trailing one, unreserved characters decoded, no encoded '/'.
 * On a 404 the gateway asks it for the route path nearest the one sent
 * (tg_route_suggest, with the validators' "did you mean").
 */
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "tidegate/problems.h"
#include "tidegate/routes.h"
#include "tidegate/util.h"

/* Match one pattern, capturing "{name}" segments. Escapes other than of
 * unreserved characters are matched (and captured) as sent. */
static int
match_pattern(const char *pat, const char *path, struct tg_route_match *m)
{
	const char *e, *ne;
	size_t len;

	m->nparam = 0;
	while (*pat && *path) {
		if (*pat == '{') {
			ne = strchr(pat, '}');
			e = strchr(path, '/');
			len = e ? (size_t)(e - path) : strlen(path);
			if (ne == NULL || len == 0 || len >= TG_ROUTE_PARAMLEN ||
			    m->nparam >= TG_ROUTE_MAXPARAM ||
			    (size_t)(ne - pat - 1) >= sizeof(m->param_name[0]))
				return 0;
			memcpy(m->param_name[m->nparam], pat + 1, (size_t)(ne - pat - 1));
			m->param_name[m->nparam][ne - pat - 1] = '\0';
			memcpy(m->param[m->nparam], path, len);
			m->param[m->nparam++][len] = '\0';
			pat = ne + 1;
			path += len;
			continue;
		}
		if (*pat++ != *path++)
			return 0;
	}
	return *pat == '\0' && *path == '\0';
}

/*
 * 1 when pat (a pattern or a prefix) cannot match the start of path for
 * their second bytes: both begin with '/', and pat's next byte is a
 * literal that path's is not. Most routes and prefixes are ruled out so,
 * on every request of a pass-through path, without being measured or
 * walked.
 */
static int
differ_at_1(const char *pat, const char *path)
{
	return pat[0] == '/' && path[0] == '/' && pat[1] != '\0' && pat[1] != '{' &&
	    pat[1] != path[1];
}

/* Try every route on one candidate path: 1 match, -1 wrong method, 0 none. */
static int
match_routes(const struct tg_service_routes *sr, const char *method, const char *path,
    struct tg_route_match *m)
{
	int path_found = 0;
	size_t i;

	if (sr->seconds != NULL && path[0] == '/' && path[1] != '\0' &&
	    strchr(sr->seconds, path[1]) == NULL)
		return 0;	/* no pattern goes on as path does (a pass-through path) */
	for (i = 0; i < sr->nroutes; i++) {
		if (differ_at_1(sr->routes[i].pattern, path) ||
		    !match_pattern(sr->routes[i].pattern, path, m))
			continue;
		if (strcmp(sr->routes[i].method, method) == 0) {
			m->route = &sr->routes[i];
			return 1;
		}
		path_found = 1;
	}
	return path_found ? -1 : 0;
}

int
tg_route_match(const struct tg_service_routes *sr, const char *method, const char *path,
    struct tg_route_match *m)
{
	int rc, best = 0;
	size_t i, pl;

	m->route = NULL;	/* the parameters are read up to nparam only */
	m->nparam = 0;
	for (i = 0; i < sr->nprefixes; i++) {
		if (differ_at_1(sr->prefixes[i], path))
			continue;
		pl = strlen(sr->prefixes[i]);
		if (strncmp(path, sr->prefixes[i], pl) != 0 || (pl > 0 && path[pl] != '/'))
			continue;
		rc = match_routes(sr, method, path + pl, m);
		if (rc == 1)
			return 1;
		if (rc == -1)
			best = -1;
	}
	m->route = NULL;
	m->nparam = 0;
	return best;
}

/* method added to the list out (n bytes) unless it is there. */
static void
allow(char *out, size_t n, const char *method)
{
	size_t len = strlen(out), k = strlen(method);
	const char *p = out;

	while ((p = strstr(p, method)) != NULL) {
		if ((p == out || p[-2] == ',') && (p[k] == '\0' || p[k] == ','))
			return;
		p += k;
	}
	if (len + k + 3 <= n)
		snprintf(out + len, n - len, "%s%s", len > 0 ? ", " : "", method);
}

/* Each method of the table asked in turn, through the matcher itself (its
 * pattern test stays inlined there): O(routes^2), on a 405 only. */
void
tg_route_allow(const struct tg_service_routes *sr, const char *path, char *out, size_t n)
{
	struct tg_route_match m;
	size_t j;

	*out = '\0';
	for (j = 0; j < sr->nroutes; j++)
		if (tg_route_match(sr, sr->routes[j].method, path, &m) == 1)
			allow(out, n, sr->routes[j].method);
}

/* pat with each "{name}" segment replaced by path's segment at the same
 * place, into out (n bytes): "/export/{kind}" for "/exports/x" reads
 * "/export/x". 0 when the segment counts differ or it does not fit. */
static int
fill_pattern(const char *pat, const char *path, char *out, size_t n)
{
	size_t k = 0, pl, sl, len;
	const char *src;

	while (*pat == '/' && *path == '/') {
		pat++;
		path++;
		pl = strcspn(pat, "/");
		sl = strcspn(path, "/");
		src = *pat == '{' ? path : pat;
		len = *pat == '{' ? sl : pl;
		if (k + len + 2 > n)
			return 0;
		out[k++] = '/';
		memcpy(out + k, src, len);
		k += len;
		pat += pl;
		path += sl;
	}
	out[k] = '\0';
	return *pat == '\0' && *path == '\0';
}

#define SUGGEST_MAX 32

int
tg_route_suggest(const struct tg_service_routes *sr, const char *path, char *out, size_t n)
{
	char cand[SUGGEST_MAX][128];
	const char *c[SUGGEST_MAX], *hint, *rest;
	size_t i, j, k, pl;

	for (i = 0; i < sr->nprefixes; i++) {
		pl = strlen(sr->prefixes[i]);
		if (strncmp(path, sr->prefixes[i], pl) != 0 || (pl > 0 && path[pl] != '/'))
			continue;
		rest = path + pl;
		for (j = k = 0; j < sr->nroutes && k < SUGGEST_MAX; j++) {
			if (strchr(sr->routes[j].pattern, '{') == NULL)
				snprintf(cand[k], sizeof(cand[k]), "%s", sr->routes[j].pattern);
			else if (!fill_pattern(sr->routes[j].pattern, rest, cand[k],
			    sizeof(cand[k])))
				continue;
			if (strcmp(cand[k], rest) != 0)
				c[k] = cand[k], k++;
		}
		if ((hint = tg_did_you_mean(rest, c, k)) != NULL) {
			snprintf(out, n, "%.*s%s", (int)pl, path, hint);
			return 1;
		}
	}
	return 0;
}

const char *
tg_route_param(const struct tg_route_match *m, const char *name)
{
	int i;

	for (i = 0; i < m->nparam; i++)
		if (strcmp(m->param_name[i], name) == 0)
			return m->param[i];
	return NULL;
}

char *
tg_route_expand(const char *tmpl, const struct tg_route_match *m)
{
	size_t cap = strlen(tmpl) + 1 + TG_ROUTE_MAXPARAM * TG_ROUTE_PARAMLEN, n = 0, len;
	char *out = tg_xmalloc(cap), name[32];
	const char *p = tmpl, *e, *v;

	while (*p) {
		if (*p == '{' && (e = strchr(p, '}')) != NULL &&
		    (size_t)(e - p - 1) < sizeof(name)) {
			memcpy(name, p + 1, (size_t)(e - p - 1));
			name[e - p - 1] = '\0';
			if ((v = tg_route_param(m, name)) == NULL) {
				free(out);
				return NULL;
			}
			len = strlen(v);
			memcpy(out + n, v, len);
			n += len;
			p = e + 1;
			continue;
		}
		out[n++] = *p++;
	}
	out[n] = '\0';
	return out;
}

const char *
tg_route_op_name(const struct tg_service_routes *sr, int op)
{
	size_t i;

	for (i = 0; i < sr->nroutes; i++)
		if (sr->routes[i].op == op)
			return sr->routes[i].name;
	return NULL;
}
