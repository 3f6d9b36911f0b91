/*
 * pg_check.c - the PostgreSQL backend's check (tg_state_check, state.h):
 * state.url and state.listen_url read as libpq reads them
 * (PQconninfoParse: an unknown parameter, a bad %-escape), offline, so
 * that tidegate -t refuses the URL the start refuses. Whether the server
 * answers is the start's to find out. libpq's complaint is cut before
 * what it quotes, which may be the password.
 */
#include <string.h>

#include "pg.h"

/* url (borrowed) parses, or part of out says why not: 0 or -1. */
static int
check_url(const char *url, enum tg_state_part part, struct tg_state_problems *out)
{
	PQconninfoOption *o;
	char *msg = NULL;
	size_t n;

	if ((o = PQconninfoParse(url, &msg)) != NULL) {
		PQconninfoFree(o);
		return 0;
	}
	n = msg != NULL ? strcspn(msg, ":\"\n") : 0;
	while (n > 0 && msg[n - 1] == ' ')
		n--;
	tg_err_set(&out->err[part], "not a valid postgresql URL%s%.*s%s",
	    n > 0 ? " (libpq: " : "", (int)n, n > 0 ? msg : "", n > 0 ? ")" : "");
	PQfreemem(msg);
	out->bad[part] = 1;
	return -1;
}

int
tg_state_pg_check(const struct tg_state_opts *opts, struct tg_state_problems *out)
{
	int rc = check_url(opts->url, TG_STATE_PART_URL, out);

	if (opts->listen_url != NULL &&
	    check_url(opts->listen_url, TG_STATE_PART_LISTEN_URL, out) != 0)
		rc = -1;
	return rc;
}
