/*
 * outbox_rules.c - the webhook outbox's rules (outbox_rules.h): schedule
 * defaults and parsing, the delay before the next attempt (jitter forward
 * only, Retry-After capped), the outcome of an attempt and the redelivery
 * refusals, the host a callback URL's in-flight share counts against, and
 * the records of state.h (state names, freeing leases and jobs).
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "tidegate/config.h"
#include "tidegate/ids.h"
#include "outbox_rules.h"

#define LEASE_MS		60000
#define JITTER_PCT		10
#define RETRY_AFTER_MAX_MS	(24LL * 3600 * 1000)

static const int64_t default_schedule[] = {
	0, 5000, 300000, 1800000, 7200000, 18000000, 36000000, 36000000,
};

void
tg_state_rules_init(struct tg_state_rules *r, const struct tg_outbox_opts *o)
{
	static const struct tg_outbox_opts none;
	const int64_t *sched;

	if (o == NULL)
		o = &none;
	sched = o->schedule_ms != NULL && o->nschedule > 0 ? o->schedule_ms : default_schedule;
	r->nschedule = sched == default_schedule ? TG_NELEM(default_schedule) : o->nschedule;
	r->schedule = tg_xmalloc(r->nschedule * sizeof(*r->schedule));
	memcpy(r->schedule, sched, r->nschedule * sizeof(*r->schedule));
	r->jitter_pct = o->jitter_pct == 0 ? JITTER_PCT : o->jitter_pct < 0 ? 0 :
	    o->jitter_pct > 100 ? 100 : o->jitter_pct;
	r->retry_after_max_ms = o->retry_after_max_ms > 0 ? o->retry_after_max_ms :
	    RETRY_AFTER_MAX_MS;
	r->lease_ms = o->lease_ms > 0 ? o->lease_ms : LEASE_MS;
}

void
tg_state_rules_free(struct tg_state_rules *r)
{
	free(r->schedule);
	r->schedule = NULL;
	r->nschedule = 0;
}

int64_t
tg_state_rules_delay(const struct tg_state_rules *r, int failed, int64_t retry_after_ms)
{
	int64_t d, spread;
	uint32_t rnd;

	if (failed < 1 || (size_t)failed >= r->nschedule)
		return -1;
	d = r->schedule[failed];
	/* Forward only: never earlier than the schedule says. */
	spread = d / 100 * r->jitter_pct;
	if (spread > 0) {
		tg_id_random(&rnd, sizeof(rnd));
		d += (int64_t)(rnd % (uint64_t)(spread + 1));
	}
	if (retry_after_ms >= 0) {
		if (retry_after_ms > r->retry_after_max_ms)
			retry_after_ms = r->retry_after_max_ms;
		if (retry_after_ms > d)
			d = retry_after_ms;
	}
	return d;
}

enum tg_outbox_state
tg_state_rules_judge(const struct tg_state_rules *r, int attempt,
    const struct tg_outbox_result *res, int64_t now_ms, int64_t *next_at)
{
	int64_t ra = res->status == 429 || res->status >= 500 ? res->retry_after_ms : -1;
	int64_t d;

	*next_at = 0;
	if (res->status == TG_OUTBOX_REFUSED)
		return TG_OUTBOX_DEAD;	/* the policy will not change by itself */
	if (res->status >= 200 && res->status <= 299)
		return TG_OUTBOX_DELIVERED;
	if (res->status == 410)
		return TG_OUTBOX_GONE;
	if ((d = tg_state_rules_delay(r, attempt, ra)) < 0)
		return TG_OUTBOX_DEAD;
	*next_at = now_ms + d;
	return TG_OUTBOX_READY;
}

const char *
tg_state_rules_refusal(enum tg_outbox_state st, int leased, int has_payload)
{
	if (leased)
		return "an attempt is in flight";
	switch (st) {
	case TG_OUTBOX_WAITING:
		return "its payload has not arrived";
	case TG_OUTBOX_DELIVERED:
	case TG_OUTBOX_GONE:
		return "its payload is no longer kept";
	case TG_OUTBOX_DEAD:
		return has_payload ? NULL : "it was abandoned before its payload arrived";
	default:
		return NULL;
	}
}

char *
tg_state_url_host(const char *url)
{
	const char *p = url != NULL ? strstr(url, "://") : NULL;
	const char *at, *end;
	char *h;
	size_t n, i;

	if (p == NULL || strcspn(url, ":/?#") != (size_t)(p - url))
		return tg_xstrdup("");
	p += 3;
	n = strcspn(p, "/?#");			/* the authority */
	for (at = p; (end = memchr(at, '@', n - (size_t)(at - p))) != NULL; at = end + 1)
		;
	if (*at == '[')
		n = strcspn(++at, "]/?#");
	else
		n = strcspn(at, ":/?#");
	h = tg_xstrndup(at, n);
	for (i = 0; i < n; i++)
		h[i] = (char)tolower((unsigned char)h[i]);
	return h;
}

char *
tg_state_skip_join(const struct tg_strlist *skip)
{
	struct evbuffer *b;
	char *s;
	size_t i;

	if (skip == NULL || skip->n == 0)
		return NULL;
	b = evbuffer_new();
	for (i = 0; i < skip->n; i++)
		evbuffer_add_printf(b, "\n%s", skip->v[i]);
	evbuffer_add(b, "\n", 2);		/* with the NUL */
	s = tg_xstrdup((const char *)evbuffer_pullup(b, -1));
	evbuffer_free(b);
	return s;
}

/* ---- the records of state.h ---- */

static const char *const state_names[TG_OUTBOX_NSTATES] = {
	"waiting", "ready", "delivered", "gone", "dead",
};

const char *
tg_outbox_state_str(enum tg_outbox_state s)
{
	return (unsigned)s < TG_OUTBOX_NSTATES ? state_names[s] : "unknown";
}

int
tg_outbox_state_parse(const char *s)
{
	int i;

	for (i = 0; s != NULL && i < TG_OUTBOX_NSTATES; i++)
		if (strcmp(s, state_names[i]) == 0)
			return i;
	return -1;
}

void
tg_outbox_lease_free(struct tg_outbox_lease *l)
{
	if (l == NULL)
		return;
	free(l->url);
	free(l->secret_ref);
	free(l->content_type);
	free(l->kind);
	free(l->correlation_id);
	free(l->service);
	free(l->api_key);
	free(l->payload_path);
	free(l->host);
	if (l->spool_fd > 0)
		close(l->spool_fd);
	free(l);
}

void
tg_outbox_job_cleanup(struct tg_outbox_job *j)
{
	if (j == NULL)
		return;
	free(j->url);
	free(j->kind);
	free(j->correlation_id);
	free(j->service);
	free(j->api_key);
	free(j->secret_ref);
	free(j->last_error);
	memset(j, 0, sizeof(*j));
}

void
tg_outbox_jobs_free(struct tg_outbox_job *jobs, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		tg_outbox_job_cleanup(&jobs[i]);
	free(jobs);
}

int
tg_outbox_schedule_parse(const struct tg_strlist *list, int64_t **ms, size_t *n,
    struct tg_err *err)
{
	size_t i;

	*ms = NULL;
	*n = 0;
	if (list == NULL || list->n == 0) {
		tg_err_set(err, "webhook schedule is empty");
		return -1;
	}
	*ms = tg_xcalloc(list->n, sizeof(**ms));
	for (i = 0; i < list->n; i++) {
		if (tg_config_parse_duration(list->v[i], &(*ms)[i]) != 0 || (*ms)[i] < 0) {
			tg_err_set(err, "webhook schedule entry '%s' is not a duration", list->v[i]);
			free(*ms);
			*ms = NULL;
			return -1;
		}
	}
	*n = list->n;
	return 0;
}
