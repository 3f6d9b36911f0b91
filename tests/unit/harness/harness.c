/*
 * harness.c - the unit tests' shared helpers (harness.h). The loop runs
 * with a timer of its own pending, so a wait with nothing else to do
 * sleeps to its deadline instead of spinning, and the timer is gone when
 * the wait returns (a later dispatch is not held by it).
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "harness.h"
#include "tidegate/clock.h"
#include "tidegate/json.h"
#include "tidegate/util.h"

/* The binaries ignore SIGPIPE (tidegate.c, the emulator's main.c), so a
 * write to a peer that went away fails with EPIPE instead of ending them
 * (libevent's writes and tg_http_write_now's alike); the tests run the
 * same way. */
__attribute__((constructor)) static void
ignore_sigpipe(void)
{
	signal(SIGPIPE, SIG_IGN);
}

static void
th_wake(evutil_socket_t fd, short what, void *arg)
{
	/* only there to end a blocked turn at the deadline */
}

int
th_run_until(struct event_base *base, const int *n, int want, int ms)
{
	int64_t end = tg_clock_mono_ms() + ms, left;
	struct event *guard = evtimer_new(base, th_wake, NULL);

	assert_non_null(guard);
	while (*n < want && (left = end - tg_clock_mono_ms()) > 0) {
		struct timeval tv = { (time_t)(left / 1000), (suseconds_t)(left % 1000) * 1000 };

		evtimer_add(guard, &tv);
		event_base_loop(base, EVLOOP_ONCE);
	}
	event_free(guard);
	return *n >= want;
}

void
th_run_for(struct event_base *base, int ms)
{
	struct timeval tv = { ms / 1000, (ms % 1000) * 1000 };

	event_base_loopexit(base, &tv);
	event_base_dispatch(base);
}

void
th_tmpdir(char *dir, size_t size, const char *name)
{
	int n = snprintf(dir, size, "/tmp/%s-XXXXXX", name);

	assert_true(n > 0 && (size_t)n < size);
	assert_non_null(mkdtemp(dir));
}

void
th_rmtree(const char *dir)
{
	char *cmd = tg_xasprintf("rm -rf '%s'", dir);

	assert_int_equal(system(cmd), 0);
	free(cmd);
}

char *
th_quotes(const char *src)
{
	char *s = tg_xstrdup(src), *c;

	for (c = s; *c; c++)
		if (*c == '\'')
			*c = '"';
	return s;
}

yajl_val
th_parse_quoted(const char *src)
{
	char *s = th_quotes(src);
	struct tg_err err = { "" };
	yajl_val v = tg_json_parse(s, strlen(s), &err);

	if (v == NULL)
		print_error("%s\n%s\n", err.msg, s);
	free(s);
	assert_non_null(v);
	return v;
}

char *
th_problem_list(const struct tg_problems *p)
{
	char *s = tg_xstrdup(""), *t;
	size_t i;

	for (i = 0; i < p->n; i++) {
		t = tg_xasprintf("%s%s %s\n", s, p->v[i].path, p->v[i].code);
		free(s);
		s = t;
	}
	return s;
}
