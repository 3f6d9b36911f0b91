/*
 * job_query.c - the one value of a query parameter as the vendor would read
 * it (tg_route_query_one in include/tidegate/dex.h). A job id decides
 * whose job is read, so a query that could be read two ways is refused
 * instead of guessed at: the gateway checks ownership of this value and
 * sends the vendor only this value. Called by the gateway for the polls of
 * data exchange jobs (src/gateway/jobs.c).
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tidegate/dex.h"
#include "tidegate/util.h"

/* Form decoding of s[0..n) (percent escapes, '+' as space) into a malloc'd
 * string; NULL when an escape is broken. *bytes gets the decoded length,
 * which is shorter than strlen() of the result when it holds %00. */
static char *
decode(const char *s, size_t n, size_t *bytes)
{
	char *out = tg_xmalloc(n + 1);
	size_t i, k = 0;
	int hi, lo;

	for (i = 0; i < n; i++) {
		if (s[i] == '+') {
			out[k++] = ' ';
		} else if (s[i] != '%') {
			out[k++] = s[i];
		} else if (i + 2 < n && (hi = tg_hexval(s[i + 1])) >= 0 &&
		    (lo = tg_hexval(s[i + 2])) >= 0) {
			out[k++] = (char)(hi << 4 | lo);
			i += 2;
		} else {
			free(out);
			return NULL;
		}
	}
	out[k] = '\0';
	*bytes = k;
	return out;
}

/* A decoded value the gateway can check and send as it is. */
static int
value_ok(const char *v, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
			return 0;
	return 1;
}

/* Does the segment's name, decoded, spell name (in any case)? */
static int
names_it(const char *seg, size_t len, const char *name)
{
	size_t n, nl = strlen(name);
	char *d = decode(seg, len, &n);
	int hit = d != NULL && n == nl && strncasecmp(d, name, nl) == 0;

	free(d);
	return hit;
}

/* Take the value of one occurrence (val NULL: the segment had no '='). */
static int
take(const char *name, const char *val, size_t vlen, char **out, struct tg_err *why)
{
	size_t n;

	if (*out != NULL) {
		tg_err_set(why, "query parameter '%s' is given more than once (in some "
		    "spelling); give it once", name);
		return -1;
	}
	if (val == NULL || vlen == 0) {
		tg_err_set(why, "query parameter '%s' is empty", name);
		return -1;
	}
	if ((*out = decode(val, vlen, &n)) == NULL) {
		tg_err_set(why, "query parameter '%s' has a broken percent-escape", name);
		return -1;
	}
	if (n > TG_ROUTE_PARAMLEN) {
		tg_err_set(why, "query parameter '%s' is too long", name);
		return -1;
	}
	if (!value_ok(*out, n)) {
		tg_err_set(why, "query parameter '%s' holds a control character", name);
		return -1;
	}
	return 0;
}

int
tg_route_query_one(const char *q, const char *name, char **out, struct tg_err *why)
{
	const char *seg = q, *amp, *eq;
	size_t len;

	*out = NULL;
	while (seg != NULL && *seg != '\0') {
		amp = strchr(seg, '&');
		len = amp != NULL ? (size_t)(amp - seg) : strlen(seg);
		eq = memchr(seg, '=', len);
		if (names_it(seg, eq != NULL ? (size_t)(eq - seg) : len, name) &&
		    take(name, eq != NULL ? eq + 1 : NULL,
		    eq != NULL ? len - (size_t)(eq + 1 - seg) : 0, out, why) != 0) {
			free(*out);
			*out = NULL;
			return -1;
		}
		seg = amp != NULL ? amp + 1 : NULL;
	}
	return 0;
}
