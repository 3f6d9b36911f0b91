/*
 * test_frontdoor.c - the front door's end of an exchange
 * (tg_frontdoor_set_on_end, src/http/door_conns.c) on a real listener and
 * loopback clients in this process: the answer written ends it once, with
 * the completion callback still called; a client that resets a held
 * request ends it once, unanswered, with the close callback still called;
 * a request the front door did not take is refused. A listener's check
 * (frontdoor.h) sees every head when it asks to, and the body limit it
 * sets holds for Content-Length and chunked bodies alike, answered with
 * the JSON error and never a reset; a malformed chunk is answered too.
 */
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>

#include "tidegate/clock.h"
#include "tidegate/frontdoor.h"
#include "tidegate/http.h"
#include "harness.h"

enum mode { ANSWER, HOLD, UNFRAMED };

/* What the callbacks saw, reset by each test. */
static struct {
	enum mode mode;
	struct evhttp_request *held;	/* HOLD: the request, until its close */
	int handled, rc;		/* requests handled; set_on_end's answer */
	int ends, written, status;	/* the end callback: calls, how, status read */
	struct evhttp_request *end_req;
	int completions, closes;	/* the other two callbacks, beside it */
} seen;

static struct event_base *base;
static int port_framed, port_plain, port_checked;
static struct tg_frontdoor door = { .max_head = TG_HTTP_MAX_HEAD, .max_body = 1 << 20 };

/* The checked listener: its check lowers every request's body limit to 10
 * bytes and refuses the target /refused; what its handler saw. */
static struct {
	int checks, handled, fault;
	size_t body;
} chk;

static int
check(const struct tg_head *h, void *arg, uint64_t *limit)
{
	assert_ptr_equal(arg, &chk);
	assert_int_equal(*limit, 1 << 20);	/* comes in as max_body */
	chk.checks++;
	*limit = 10;
	return h->tlen == 8 && memcmp(h->target, "/refused", 8) == 0 ? TG_HEAD_KEY_MISSING : 0;
}

static struct tg_frontdoor checked_door = {
	.max_head = TG_HTTP_MAX_HEAD, .max_body = 1 << 20, .check = check, .arg = &chk,
	.check_bodiless = 1,
};

static void
on_end(struct evhttp_request *req, int written, void *arg)
{
	assert_ptr_equal(arg, &seen);
	seen.ends++;
	seen.written = written;
	seen.end_req = req;
	seen.status = req != NULL ? evhttp_request_get_response_code(req) : 0;
}

static void
on_complete(struct evhttp_request *req, void *arg)
{
	seen.completions++;
}

static void
on_close(struct evhttp_connection *conn, void *arg)
{
	seen.closes++;
	seen.held = NULL;	/* libevent frees it with the connection */
}

static void
on_request(struct evhttp_request *req, void *arg)
{
	struct evbuffer *b = evbuffer_new();

	seen.handled++;
	if (seen.mode != UNFRAMED)
		assert_int_equal(tg_frontdoor_refusal(req), 0);
	seen.rc = tg_frontdoor_set_on_end(req, on_end, &seen);
	if (seen.mode == HOLD) {
		seen.held = req;
		tg_frontdoor_set_closecb(evhttp_request_get_connection(req), on_close, NULL);
	} else {
		if (seen.mode == ANSWER)
			tg_frontdoor_set_on_complete(req, on_complete, NULL);
		evbuffer_add(b, "ok", 2);
		tg_reply_buf(req, 200, "text/plain", b);
	}
	evbuffer_free(b);
}

/* Run the loop until *n is set (at most 3 s), then one turn of 20 ms
 * more: what the same exchange writes next (the answer of a handler that
 * answered at once, a second end) is on the socket or seen by then. */
static void
settle(const int *n)
{
	th_run_until(base, n, 1, 3000);
	th_run_for(base, 20);
}

static int
client(int port)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	const char *get = "GET /x HTTP/1.1\r\nHost: t\r\n\r\n";

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(send(fd, get, strlen(get), 0), (ssize_t)strlen(get));
	return fd;
}

static void
test_written(void **state)
{
	char buf[256];
	int fd;

	memset(&seen, 0, sizeof(seen));
	seen.mode = ANSWER;
	fd = client(port_framed);
	settle(&seen.ends);
	assert_int_equal(seen.rc, 0);
	assert_int_equal(seen.ends, 1);
	assert_int_equal(seen.written, 1);
	assert_non_null(seen.end_req);
	assert_int_equal(seen.status, 200);
	assert_int_equal(seen.completions, 1);	/* the completion slot is untouched */
	assert_true(recv(fd, buf, sizeof(buf), 0) > 12);
	assert_memory_equal(buf, "HTTP/1.1 200", 12);
	close(fd);			/* the close after the end is no second end */
	th_run_for(base, 100);
	assert_int_equal(seen.ends, 1);
}

/* evhttp reads nothing while a handler holds a request: the reset is seen
 * when the answer meets it. */
static void
test_closed_first(void **state)
{
	struct linger lg = { 1, 0 };
	int fd;

	memset(&seen, 0, sizeof(seen));
	seen.mode = HOLD;
	fd = client(port_framed);
	settle(&seen.handled);
	assert_int_equal(seen.rc, 0);
	assert_non_null(seen.held);
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)), 0);
	close(fd);			/* an RST */
	th_run_for(base, 100);
	if (seen.held != NULL)
		tg_reply_buf(seen.held, 200, "text/plain", NULL);
	settle(&seen.ends);
	assert_int_equal(seen.closes, 1);	/* the close slot is untouched */
	assert_int_equal(seen.ends, 1);
	assert_int_equal(seen.written, 0);
	assert_null(seen.end_req);
	th_run_for(base, 100);
	assert_int_equal(seen.ends, 1);
}

static void
on_checked(struct evhttp_request *req, void *arg)
{
	int fault = tg_frontdoor_refusal(req);

	chk.handled++;
	chk.fault = fault;
	chk.body = evbuffer_get_length(evhttp_request_get_input_buffer(req));
	if (fault != 0)
		tg_frontdoor_reply(req, fault);
	else
		tg_reply_buf(req, 200, "text/plain", NULL);
}

/* Send data to the checked listener and read what comes back until the
 * front door's side closes (3 s at most); out NUL-terminated. */
static size_t
exchange(const char *data, size_t len, char *out, size_t size)
{
	struct sockaddr_in sa;
	int fd = socket(AF_INET, SOCK_STREAM, 0), done = 0;
	int64_t end = tg_clock_mono_ms() + 3000;
	size_t got = 0;
	ssize_t n;

	memset(&sa, 0, sizeof(sa));
	sa.sin_family = AF_INET;
	sa.sin_port = htons((uint16_t)port_checked);
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(send(fd, data, len, 0), (ssize_t)len);
	while (!done && tg_clock_mono_ms() < end && got + 1 < size) {
		th_run_for(base, 10);
		n = recv(fd, out + got, size - 1 - got, MSG_DONTWAIT);
		if (n > 0)
			got += (size_t)n;
		else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))
			done = 1;
		assert_true(n >= 0 || errno != ECONNRESET);	/* never a reset */
	}
	out[got] = '\0';
	close(fd);
	return got;
}

static void
test_check_sees_bodiless_heads(void **state)
{
	static const char get[] = "GET /x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
	static const char refused[] = "GET /refused HTTP/1.1\r\nHost: t\r\n\r\n";
	char out[4096];

	memset(&chk, 0, sizeof(chk));
	exchange(get, sizeof(get) - 1, out, sizeof(out));
	assert_int_equal(chk.checks, 1);
	assert_int_equal(chk.handled, 1);
	assert_int_equal(chk.fault, 0);
	assert_non_null(strstr(out, "HTTP/1.1 200"));
	memset(&chk, 0, sizeof(chk));
	exchange(refused, sizeof(refused) - 1, out, sizeof(out));
	assert_int_equal(chk.fault, TG_HEAD_KEY_MISSING);
	assert_non_null(strstr(out, "HTTP/1.1 401"));
}

/* The check's limit, not max_body: a Content-Length above it is refused on
 * the head, with its body unread; at the limit it passes. */
static void
test_limit_content_length(void **state)
{
	static const char over[] = "POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 11\r\n\r\n"
	    "0123456789A";
	static const char at[] = "POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 10\r\n"
	    "Connection: close\r\n\r\n0123456789";
	char out[4096];

	memset(&chk, 0, sizeof(chk));
	exchange(over, sizeof(over) - 1, out, sizeof(out));
	assert_int_equal(chk.fault, TG_HEAD_BODY_TOO_LARGE);
	assert_int_equal(chk.body, 0);
	assert_non_null(strstr(out, "HTTP/1.1 413"));
	assert_non_null(strstr(out, "\"error\":\"PAYLOAD_TOO_LARGE\""));
	memset(&chk, 0, sizeof(chk));
	exchange(at, sizeof(at) - 1, out, sizeof(out));
	assert_int_equal(chk.fault, 0);
	assert_int_equal(chk.body, 10);
}

/* A chunked body is counted as it passes: the chunk that goes over the
 * limit ends it, and the handler answers 413 (JSON) instead of using what
 * arrived; a request before it on the connection is answered first. */
static void
test_limit_chunked(void **state)
{
	static const char two[] = "POST /x HTTP/1.1\r\nHost: t\r\nContent-Length: 2\r\n\r\nab"
	    "POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n"
	    "6\r\n012345\r\n5\r\n6789A\r\n0\r\n\r\n";
	char out[8192];

	memset(&chk, 0, sizeof(chk));
	exchange(two, sizeof(two) - 1, out, sizeof(out));
	assert_int_equal(chk.handled, 2);
	assert_int_equal(chk.fault, TG_HEAD_BODY_TOO_LARGE);
	assert_non_null(strstr(out, "HTTP/1.1 200"));
	assert_true(strstr(out, "HTTP/1.1 413") > strstr(out, "HTTP/1.1 200"));
	assert_non_null(strstr(out, "\"statusCode\":413"));
}

/* A malformed chunk-size line after the head passed: a JSON 400, no reset. */
static void
test_bad_chunk_answered(void **state)
{
	static const char bad[] = "POST /x HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n"
	    "\r\n2\r\nab\r\nzz\r\nPOST /x HTTP/1.1\r\nHost: t\r\n\r\n";
	char out[4096];

	memset(&chk, 0, sizeof(chk));
	exchange(bad, sizeof(bad) - 1, out, sizeof(out));
	assert_int_equal(chk.handled, 1);	/* what followed was never read */
	assert_int_equal(chk.fault, TG_HEAD_BAD_CHUNK);
	assert_non_null(strstr(out, "HTTP/1.1 400"));
	assert_non_null(strstr(out, "chunked body"));
}

static void
test_unframed(void **state)
{
	char buf[256];
	int fd;

	memset(&seen, 0, sizeof(seen));
	seen.mode = UNFRAMED;
	fd = client(port_plain);
	settle(&seen.handled);
	assert_int_equal(seen.rc, -1);
	assert_true(recv(fd, buf, sizeof(buf), 0) > 12);
	close(fd);
	th_run_for(base, 100);
	assert_int_equal(seen.ends, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_written),
		cmocka_unit_test(test_closed_first),
		cmocka_unit_test(test_unframed),
		cmocka_unit_test(test_check_sees_bodiless_heads),
		cmocka_unit_test(test_limit_content_length),
		cmocka_unit_test(test_limit_chunked),
		cmocka_unit_test(test_bad_chunk_answered),
	};
	struct evhttp *framed, *plain, *checked;
	struct tg_err err;
	int rc;

	base = event_base_new();
	framed = tg_http_listen(base, "127.0.0.1:0", 1 << 20, &port_framed, &err);
	plain = tg_http_listen(base, "127.0.0.1:0", 1 << 20, &port_plain, &err);
	checked = tg_http_listen(base, "127.0.0.1:0", 1 << 20, &port_checked, &err);
	if (framed == NULL || plain == NULL || checked == NULL)
		return 1;
	tg_frontdoor_attach(framed, &door);
	tg_frontdoor_attach(checked, &checked_door);
	evhttp_set_gencb(framed, on_request, NULL);
	evhttp_set_gencb(plain, on_request, NULL);
	evhttp_set_gencb(checked, on_checked, NULL);
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	evhttp_free(framed);
	evhttp_free(plain);
	evhttp_free(checked);
	event_base_free(base);
	return rc;
}
