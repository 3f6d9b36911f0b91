/*
 * pg_err.c - errors of the PostgreSQL state backend without secrets:
 * libpq's messages (several lines, and some of them quote what they could
 * not parse) become one line of res->err or of a log entry, and the
 * password of state.url never appears in either; and which results say
 * that the connection itself is gone.
 */
#include <stdio.h>
#include <string.h>

#include "pg.h"

void
tg_state_pg_err(struct tg_err *err, const char *prefix, const char *msg,
    const char *secret)
{
	char line[sizeof(err->msg)];
	size_t n = 0, slen = secret != NULL ? strlen(secret) : 0;
	const char *p = msg != NULL ? msg : "";

	while (*p != '\0' && n + 4 < sizeof(line)) {
		if (slen > 0 && strncmp(p, secret, slen) == 0) {
			memcpy(line + n, "***", 3);
			n += 3;
			p += slen;
			continue;
		}
		if (*p != '\n' && *p != '\t' && *p != '\r')
			line[n++] = *p;
		else if (n > 0 && line[n - 1] != ' ')
			line[n++] = ' ';
		p++;
	}
	while (n > 0 && line[n - 1] == ' ')
		n--;
	line[n] = '\0';
	tg_err_set(err, "%s%s", prefix, line);
}

int
tg_state_pg_gone(const PGresult *r)
{
	const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);

	return PQresultStatus(r) == PGRES_FATAL_ERROR && state != NULL &&
	    (!strncmp(state, "08", 2) || !strncmp(state, "57", 2));
}
