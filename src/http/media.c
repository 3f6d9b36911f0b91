/*
 * media.c - whether a request's Content-Type is one a route takes (its
 * route table's tg_route.accepts): type and subtype compared without case
 * and without parameters (RFC 9110 8.3.1: "application/json; charset=utf-8"
 * is application/json), and "application/json" taking any structured
 * "+json" type (RFC 6839: application/merge-patch+json). Called by the
 * gateway's request core (proxy.c) before a body is read as its route's.
 */
#include <string.h>
#include <strings.h>

#include "tidegate/http.h"

/* The media type of a Content-Type value: its start and length, spaces
 * and parameters left out. */
static size_t
media_type(const char *v, const char **start)
{
	size_t n;

	while (*v == ' ' || *v == '\t')
		v++;
	n = strcspn(v, "; \t");
	*start = v;
	return n;
}

/* One accepted type a (n bytes) against the request's t (tn bytes). */
static int
type_matches(const char *a, size_t n, const char *t, size_t tn)
{
	static const char json[] = "application/json";

	if (tn == n && strncasecmp(a, t, n) == 0)
		return 1;
	/* application/<anything>+json, for a route that takes JSON */
	return n == sizeof(json) - 1 && strncasecmp(a, json, n) == 0 && tn > 17 &&
	    strncasecmp(t, "application/", 12) == 0 && strncasecmp(t + tn - 5, "+json", 5) == 0;
}

int
tg_http_media_accepted(const char *accepts, const char *ctype)
{
	const char *t, *a = accepts;
	size_t tn, n;

	if (accepts == NULL || ctype == NULL)
		return 1;	/* no declared type: read as the route's first */
	tn = media_type(ctype, &t);
	while (*a) {
		while (*a == ' ' || *a == ',')
			a++;
		n = strcspn(a, ",");
		if (n > 0 && type_matches(a, n, t, tn))
			return 1;
		a += n;
	}
	return 0;
}
