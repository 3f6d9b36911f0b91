/*
 * job_key.c - the folded form of a job id shared by the state backends
 * (job_key.h): one definition, so that SQLite and PostgreSQL fold alike.
 */
#include <stdlib.h>
#include <string.h>

#include "tidegate/util.h"
#include "job_key.h"

static int
decoration(char c)
{
	return c == '-' || c == '{' || c == '}' || c == '(' || c == ')';
}

static int
hex_digit(char c)
{
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

/*
 * A vendor may read other spellings of an id as the same job (a UUID
 * column ignores case, braces and hyphens; some frameworks trim values),
 * and none of them may escape the owner. Two distinct ids collide only
 * when they differ in nothing else.
 */
char *
tg_state_job_key(const char *cid)
{
	size_t n = strlen(cid), i, k = 0, hex = 0, other = 0;
	char *out;

	while (n > 0 && (cid[n - 1] == ' ' || cid[n - 1] == '\t'))
		n--;
	while (n > 0 && (*cid == ' ' || *cid == '\t')) {
		cid++;
		n--;
	}
	out = tg_xmalloc(n + 1);
	for (i = 0; i < n; i++) {
		out[i] = cid[i] >= 'A' && cid[i] <= 'Z' ? (char)(cid[i] - 'A' + 'a') : cid[i];
		hex += hex_digit(out[i]);
		other += !hex_digit(out[i]) && !decoration(out[i]);
	}
	out[n] = '\0';
	if (hex == 32 && other == 0) {
		for (i = 0; i < n; i++)
			if (hex_digit(out[i]))
				out[k++] = out[i];
		out[k] = '\0';
	}
	return out;
}
