/*
 * test_feature.c - the jobs feature (src/jobs/) on a real gateway
 * core and a real state seam (SQLite files in a temporary directory),
 * without the emulator, the run registry or the webhook feature: with an
 * owner recorded through the seam, a read of the job over HTTP by another
 * API key is refused (404) before any vendor is asked, while its
 * creator's read goes on (here to an unreachable vendor); a job no record
 * names is refused to every key. The owner gauge comes through a scrape held
 * until the seam's count answers.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cmocka.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "tidegate/clock.h"
#include "tidegate/gateway.h"
#include "tidegate/http.h"
#include "tidegate/jobs.h"
#include "tidegate/log.h"
#include "tidegate/state.h"
#include "jobs_int.h"
#include "feature.h"
#include "harness.h"

/* sha256("test-key") and sha256("other-key") */
#define KEY_A_SHA "62af8704764faf8ea82fc61ce9c4c3908b6cb97d463a634e9e587d7c885db0ef"
#define KEY_B_SHA "580843d03d2216ff1a275d0991bad66e4d1af871171d929e9de604b7959f9bca"

struct fixture {
	struct th_gw_dir d;
	int port[3];
	struct event_base *base;
	struct tg_state *st;
	struct gw *gw;
	struct jobs *j;
};

static int
free_port(void)
{
	struct sockaddr_in a;
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
	port = ntohs(a.sin_port);
	close(fd);
	return port;
}

/* The configuration: two keys of the data exchange, vendors unreachable;
 * the jobs read are made up ("C-1"), not the vendor's UUIDs. */
static char *
config_yaml(struct fixture *f)
{
	int i;

	for (i = 0; i < 3; i++)
		f->port[i] = free_port();
	return tg_xasprintf("listen:\n  dex: 127.0.0.1:%d\n  sim: 127.0.0.1:%d\n  admin: 127.0.0.1:%d\n"
	    "log_level: off\nupstream: remote\ndex:\n  url: http://127.0.0.1:1\n"
	    "sim:\n  url: http://127.0.0.1:1\n"
	    "keys:\n  - name: a\n    sha256: %s\n    services: [dex]\n"
	    "  - name: b\n    sha256: %s\n    services: [dex]\n"
	    "poll:\n  uuid_ids: false\n",
	    f->port[0], f->port[1], f->port[2], KEY_A_SHA, KEY_B_SHA);
}

static int
setup(void **state)
{
	struct fixture *f = tg_xcalloc(1, sizeof(*f));
	struct gw_config cfg;
	struct tg_owners_opts oo;
	struct tg_state_opts so = { .owners = &oo };
	struct tg_err err;
	char *yaml = config_yaml(f);

	tg_log_init(stderr, TG_LOG_OFF);
	th_gw_config(&f->d, "tg-jobs", &tg_jobs_config, yaml, &cfg);
	free(yaml);
	f->base = tg_event_base_new();
	tg_jobs_owners_opts(&cfg, &oo);
	assert_non_null(f->st = tg_state_open(f->base, &so, &err));
	assert_non_null(f->gw = gw_new(f->base, f->d.path, &cfg, f->st, &err));
	assert_int_equal(tg_jobs_register(f->gw, &err), 0);
	assert_int_equal(gw_start(f->gw, &err), 0);
	f->j = f->gw->feat_ctx[0];
	*state = f;
	return 0;
}

static int
teardown(void **state)
{
	struct fixture *f = *state;

	gw_free(f->gw);
	tg_state_close(f->st);
	event_base_free(f->base);
	th_rmtree(f->d.dir);
	free(f);
	return 0;
}

static int recorded;

static void
on_recorded(const struct tg_state_res *res, void *arg)
{
	assert_int_equal(res->rc, 0);
	recorded = 1;
}

/* Record cid as created by key name through the seam, as a creation's
 * held answer does, and wait for the commit. */
static void
record(struct fixture *f, const char *name, const char *cid)
{
	recorded = 0;
	if (tg_state_owners_record(f->st, "export", cid, name, tg_clock_now_ms(), on_recorded,
	    NULL) != NULL)
		assert_true(th_run_until(f->base, &recorded, 1, 5000));
	assert_true(recorded);
}

/* ---- an HTTP client on the same loop ---- */

struct answer {
	int done, status;
	char body[262144];	/* /metrics of the whole gateway: ~70 KB */
};

static void
on_answer(struct evhttp_request *req, void *arg)
{
	struct answer *a = arg;
	struct evbuffer *b = req ? evhttp_request_get_input_buffer(req) : NULL;
	size_t n = b ? evbuffer_get_length(b) : 0;

	a->status = req ? evhttp_request_get_response_code(req) : 0;
	if (n >= sizeof(a->body))
		n = sizeof(a->body) - 1;
	if (b != NULL)
		evbuffer_copyout(b, a->body, n);
	a->body[n] = '\0';
	a->done = 1;
}

static void
http_get(struct fixture *f, int port, const char *uri, const char *key, struct answer *a)
{
	struct evhttp_connection *c = evhttp_connection_base_new(f->base, NULL, "127.0.0.1",
	    (unsigned short)port);
	struct evhttp_request *req = evhttp_request_new(on_answer, a);
	char auth[64];

	memset(a, 0, sizeof(*a));
	evhttp_add_header(evhttp_request_get_output_headers(req), "Host", "127.0.0.1");
	if (key != NULL) {
		snprintf(auth, sizeof(auth), "Bearer %s", key);
		evhttp_add_header(evhttp_request_get_output_headers(req), "Authorization", auth);
	}
	assert_int_equal(evhttp_make_request(c, req, EVHTTP_REQ_GET, uri), 0);
	assert_true(th_run_until(f->base, &a->done, 1, 5000));
	evhttp_connection_free(c);
}

/* ---- tests ---- */

static void
test_record_then_read(void **state)
{
	struct fixture *f = *state;
	struct answer a;

	record(f, "a", "C-1");
	http_get(f, f->port[0], "/public/export?correlationId=C-1", "other-key", &a);
	assert_int_equal(a.status, 404);
	assert_non_null(strstr(a.body, "no such job for this API key"));
	/* any spelling of the same id */
	http_get(f, f->port[0], "/public/export?correlationId=c-1", "other-key", &a);
	assert_int_equal(a.status, 404);
	/* the creator goes on to the vendor (unreachable here) */
	http_get(f, f->port[0], "/public/export?correlationId=C-1", "test-key", &a);
	assert_int_not_equal(a.status, 404);
	assert_true(a.status >= 500);
	/* a job no record names proves no key: refused to every key */
	http_get(f, f->port[0], "/public/export?correlationId=C-2", "other-key", &a);
	assert_int_equal(a.status, 404);
	http_get(f, f->port[0], "/public/export?correlationId=C-2", "test-key", &a);
	assert_int_equal(a.status, 404);
	/* the id is required, and read once */
	http_get(f, f->port[0], "/public/export", "other-key", &a);
	assert_int_equal(a.status, 400);
	http_get(f, f->port[0], "/public/export?correlationId=C-1&correlationId=C-1",
	    "other-key", &a);
	assert_int_equal(a.status, 400);
}

static void
test_owner_gauge(void **state)
{
	struct fixture *f = *state;
	struct answer *a = tg_xcalloc(1, sizeof(*a));

	record(f, "a", "C-1");
	record(f, "b", "C-2");
	record(f, "a", "C-1");	/* the same job again: one record */
	/* the scrape waits for the seam's count, queued behind the records */
	http_get(f, f->port[2], "/metrics", NULL, a);
	assert_int_equal(a->status, 200);
	assert_non_null(strstr(a->body, "\ntidegate_job_owners 2\n"));
	assert_non_null(strstr(a->body, "tidegate_poll_entries"));
	free(a);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_record_then_read, setup, teardown),
		cmocka_unit_test_setup_teardown(test_owner_gauge, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
