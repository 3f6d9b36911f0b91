/*
 * state.c - the state seam's dispatch (include/tidegate/state.h): picks a
 * backend by the URL's scheme from one table at open, and hands every
 * operation to it. Called by whatever needs durable or shared state; the
 * backends are in src/state/<name>/ (backend.h says what they provide).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <unistd.h>

#include "tidegate/json.h"
#include "tidegate/state.h"
#include "db.h"
#include "seam.h"

struct tg_state_watch {
	TAILQ_ENTRY(tg_state_watch) next;
	char topic[32];
	tg_state_wake_cb cb;
	void *arg;
};

#define OWNERS_KEEP_MS		(30LL * 24 * 3600 * 1000)
#define OWNERS_MAX_ROWS		1000000


/* Schemes of state.url. A NULL backend is known but not built in. */
static const struct {
	const char *scheme;
	const struct tg_state_backend *be;
} backends[] = {
	{ "sqlite", &tg_state_sqlite_backend },
#if TG_HAVE_PQ
	{ "postgresql", &tg_state_pg_backend },
	{ "postgres", &tg_state_pg_backend },
#else
	{ "postgresql", NULL },
	{ "postgres", NULL },
#endif
};

const char *
tg_state_rc_str(int rc)
{
	static const char *const names[] = {
		"ok", "not found", "conflict", "refused", "unavailable", "error",
		"outcome unknown",
	};

	return rc >= 0 && (size_t)rc < sizeof(names) / sizeof(names[0]) ? names[rc] : "error";
}

int
tg_state_rc_down(int rc)
{
	return rc == TG_STATE_UNAVAILABLE || rc == TG_STATE_UNKNOWN;
}

/* Another instance's wake-up: every watch of its topic hears it (a
 * callback may unwatch itself or another: the cursor moves on). */
static void
wake(void *ctx, const char *topic, const char *what)
{
	struct tg_state *st = ctx;
	struct tg_state_watch *w;

	for (w = TAILQ_FIRST(&st->watches); w != NULL; w = st->cursor) {
		st->cursor = TAILQ_NEXT(w, next);
		if (topic == NULL)
			w->cb(w->topic, NULL, w->arg);	/* lost ones: look again */
		else if (strcmp(w->topic, topic) == 0)
			w->cb(topic, what, w->arg);
	}
	st->cursor = NULL;
}

struct tg_state_watch *
tg_state_watch(struct tg_state *st, const char *topic, tg_state_wake_cb cb, void *arg)
{
	struct tg_state_watch *w = tg_xcalloc(1, sizeof(*w));

	snprintf(w->topic, sizeof(w->topic), "%s", topic);
	w->cb = cb;
	w->arg = arg;
	TAILQ_INSERT_TAIL(&st->watches, w, next);
	return w;
}

void
tg_state_unwatch(struct tg_state *st, struct tg_state_watch *w)
{
	if (w == NULL)
		return;
	if (st->cursor == w)
		st->cursor = TAILQ_NEXT(w, next);
	TAILQ_REMOVE(&st->watches, w, next);
	free(w);
}

void
tg_state_health(const struct tg_state *st, struct tg_state_health *h)
{
	memset(h, 0, sizeof(*h));
	h->backend = st->be->name;
	h->up = 1;
	if (st->be->health != NULL)
		st->be->health(st->impl, h);
	h->notifies = st->notifies;
	h->leases = tg_state_shared_leads(st);
}

/* The backend url names, or NULL with err. */
static const struct tg_state_backend *
pick(const char *url, struct tg_err *err)
{
	size_t i, n;

	if (url == NULL || *url == '\0')
		return &tg_state_sqlite_backend;
	n = strcspn(url, ":");
	for (i = 0; i < sizeof(backends) / sizeof(backends[0]); i++) {
		if (strlen(backends[i].scheme) != n || strncmp(url, backends[i].scheme, n) != 0)
			continue;
		if (backends[i].be == NULL)
			tg_err_set(err, "state.url: the %s backend is not built into this "
			    "tidegate", backends[i].scheme);
		return backends[i].be;
	}
	tg_err_set(err, "state.url: unknown scheme \"%.*s\" (expected postgresql:// or "
	    "none for SQLite)", (int)(n > 32 ? 32 : n), url);
	return NULL;
}

int
tg_state_check(const struct tg_state_opts *opts, struct tg_state_problems *out)
{
	const struct tg_state_backend *be;

	memset(out, 0, sizeof(*out));
	if ((be = pick(opts->url, &out->err[TG_STATE_PART_URL])) == NULL) {
		out->bad[TG_STATE_PART_URL] = 1;
		return -1;
	}
	return be->check != NULL ? be->check(opts, out) : 0;
}

/* The instance's name: the configured one (state.instance), else host:pid. */
static char *
instance_name(const char *configured)
{
	char host[256];

	if (configured != NULL && *configured != '\0')
		return tg_xstrdup(configured);
	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	return tg_xasprintf("%s:%ld", host, (long)getpid());
}

struct tg_state *
tg_state_open(struct event_base *base, const struct tg_state_opts *opts, struct tg_err *err)
{
	const struct tg_state_backend *be = pick(opts->url, err);
	struct tg_state_opts o = *opts;
	struct tg_state *st;
	char *name;

	if (be == NULL)
		return NULL;
	o.instance = name = instance_name(opts->instance);
	st = tg_xcalloc(1, sizeof(*st));
	if ((st->impl = be->open(base, &o, &tg_state_db_stmts, err)) == NULL) {
		free(name);
		free(st);
		return NULL;
	}
	st->be = be;
	st->base = base;
	TAILQ_INIT(&st->replays);
	st->instance = name;
	st->timeout_ms = opts->timeout_ms > 0 ? opts->timeout_ms : TG_STATE_TIMEOUT_MS;
	st->owners_keep_ms = opts->owners != NULL && opts->owners->keep_ms > 0 ?
	    opts->owners->keep_ms : OWNERS_KEEP_MS;
	st->owners_max_rows = opts->owners != NULL && opts->owners->max_rows > 0 ?
	    opts->owners->max_rows : OWNERS_MAX_ROWS;
	if (opts->runs != NULL)
		tg_state_runs_limits(opts->runs, &st->runs);
	tg_state_shared_init(st);
	tg_state_outbox_init(st, opts->outbox);
	TAILQ_INIT(&st->watches);
	if (be->listen != NULL)
		be->listen(st->impl, wake, st);
	return st;
}

void
tg_state_close(struct tg_state *st)
{
	struct tg_state_watch *w;

	if (st == NULL)
		return;
	st->closing = 1;		/* writes lost now are not sent again */
	st->be->close(st->impl);
	tg_db_replays_close(st);
	tg_state_shared_free(st);
	tg_state_outbox_free(st);
	free(st->instance);
	while ((w = TAILQ_FIRST(&st->watches)) != NULL) {
		TAILQ_REMOVE(&st->watches, w, next);
		free(w);
	}
	free(st);
}

const char *
tg_state_backend_name(const struct tg_state *st)
{
	return st->be->name;
}

int64_t
tg_state_timeout_ms(const struct tg_state *st)
{
	return st->timeout_ms;
}

void
tg_state_cancel(struct tg_state_op *op)
{
	if (op != NULL)
		op->be->cancel(op);
}
