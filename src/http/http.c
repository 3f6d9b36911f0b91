/*
 * http.c - listener setup and the request/reply helpers shared by the
 * emulator and the gateway.
 */
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <time.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/listener.h>
#include <event2/util.h>

#include "tidegate/config.h"
#include "tidegate/hblock.h"
#include "tidegate/http.h"
#include "tidegate/sockwrite.h"

struct event_base *
tg_event_base_new(void)
{
	struct event_config *c = event_config_new();
	struct event_base *b;

	event_config_set_flag(c, EVENT_BASE_FLAG_EPOLL_USE_CHANGELIST);
	b = event_base_new_with_config(c);
	event_config_free(c);
	return b != NULL ? b : event_base_new();
}

struct evhttp *
tg_http_new(struct event_base *base, size_t max_body)
{
	struct evhttp *http = evhttp_new(base);

	/* No Content-Type is made up: libevent would label every body sent
	 * without one text/html, a relayed vendor answer among them. */
	evhttp_set_default_content_type(http, NULL);
	evhttp_set_max_body_size(http, max_body);
	evhttp_set_max_headers_size(http, TG_HTTP_MAX_HEAD);
	evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
	    EVHTTP_REQ_DELETE | EVHTTP_REQ_HEAD | EVHTTP_REQ_PATCH | EVHTTP_REQ_OPTIONS);
	return http;
}

struct evhttp *
tg_http_listen(struct event_base *base, const char *addr, size_t max_body, int *port_out,
    struct tg_err *err)
{
	struct evhttp_bound_socket *bs;
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);
	struct evhttp *http;
	char *host = NULL;
	int port;

	if (tg_config_parse_addr(addr, &host, &port)) {
		tg_err_set(err, "bad listen address '%s'", addr);
		return NULL;
	}
	http = tg_http_new(base, max_body);
	bs = evhttp_bind_socket_with_handle(http, host, (ev_uint16_t)port);
	if (bs == NULL) {
		tg_err_set(err, "cannot listen on %s: %s", addr,
		    evutil_socket_error_to_string(EVUTIL_SOCKET_ERROR()));
		evhttp_free(http);
		free(host);
		return NULL;
	}
	if (port_out != NULL) {
		evutil_socket_t fd = evhttp_bound_socket_get_fd(bs);

		*port_out = port;
		if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0)
			*port_out = ntohs(ss.ss_family == AF_INET6 ?
			    ((struct sockaddr_in6 *)&ss)->sin6_port :
			    ((struct sockaddr_in *)&ss)->sin_port);
	}
	free(host);
	return http;
}

const char *
tg_http_path(struct evhttp_request *req)
{
	const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
	const char *p = u ? evhttp_uri_get_path(u) : NULL;

	return p && *p ? p : "/";
}

int
tg_http_query_walk(struct evhttp_request *req,
    int (*cb)(const char *name, const char *value, void *arg), void *arg)
{
	const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
	const char *q = u ? evhttp_uri_get_query(u) : NULL, *amp;
	char *seg, *eq, *name, *value;
	size_t len;
	int rc = 0;

	while (q != NULL && *q != '\0' && rc == 0) {
		amp = strchr(q, '&');
		len = amp != NULL ? (size_t)(amp - q) : strlen(q);
		seg = tg_xstrndup(q, len);
		if ((eq = strchr(seg, '=')) != NULL)
			*eq++ = '\0';
		name = evhttp_uridecode(seg, 1, NULL);
		value = evhttp_uridecode(eq != NULL ? eq : "", 1, NULL);
		if (len > 0 && name != NULL && value != NULL)
			rc = cb(name, value, arg);
		free(name);
		free(value);
		free(seg);
		q = amp != NULL ? amp + 1 : NULL;
	}
	return rc;
}

struct query_find {
	const char *name;
	char *value;
};

static int
query_find(const char *name, const char *value, void *arg)
{
	struct query_find *f = arg;

	if (strcasecmp(name, f->name) != 0)
		return 0;
	f->value = tg_xstrdup(value);
	return 1;
}

char *
tg_http_query(struct evhttp_request *req, const char *name)
{
	struct query_find f = { name, NULL };

	(void)tg_http_query_walk(req, query_find, &f);
	return f.value;
}

char *
tg_http_body(struct evhttp_request *req, size_t *len)
{
	struct evbuffer *in = evhttp_request_get_input_buffer(req);
	size_t n = evbuffer_get_length(in);
	char *buf = tg_xmalloc(n + 1);

	evbuffer_copyout(in, buf, n);
	buf[n] = '\0';
	*len = n;
	return buf;
}

const char *
tg_http_method(struct evhttp_request *req)
{
	return tg_http_cmd_name(evhttp_request_get_command(req));
}

const char *
tg_http_cmd_name(enum evhttp_cmd_type cmd)
{
	switch (cmd) {
	case EVHTTP_REQ_GET: return "GET";
	case EVHTTP_REQ_POST: return "POST";
	case EVHTTP_REQ_PUT: return "PUT";
	case EVHTTP_REQ_DELETE: return "DELETE";
	case EVHTTP_REQ_HEAD: return "HEAD";
	case EVHTTP_REQ_PATCH: return "PATCH";
	case EVHTTP_REQ_OPTIONS: return "OPTIONS";
	default: return "OTHER";
	}
}

const char *
tg_http_header(struct evhttp_request *req, const char *name)
{
	return tg_header_find(evhttp_request_get_input_headers(req), name);
}

/* The answer's own first: the gateway's listeners set the id they assign
 * (the client's when valid, else a new one) before any handler replies. */
const char *
tg_http_request_id(struct evhttp_request *req)
{
	const char *id = evhttp_find_header(evhttp_request_get_output_headers(req),
	    "X-Request-Id");

	return id != NULL ? id : tg_http_header(req, "X-Request-Id");
}

const char *
tg_http_bearer(struct evhttp_request *req)
{
	const char *h = tg_http_header(req, "Authorization");

	if (h == NULL || strncasecmp(h, "Bearer ", 7) != 0)
		return NULL;
	h += 7;
	while (*h == ' ')
		h++;
	return *h ? h : NULL;
}

void
tg_http_conn_reset(struct evhttp_connection *conn)
{
	struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;

	tg_http_fd_reset(bev ? bufferevent_getfd(bev) : -1);
}

void
tg_http_fd_reset(evutil_socket_t fd)
{
	struct linger lg = { 1, 0 };
	struct sockaddr sa;

	if (fd < 0)
		return;
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	memset(&sa, 0, sizeof(sa));
	sa.sa_family = AF_UNSPEC;
	(void)connect(fd, &sa, sizeof(sa));
}

const char *
tg_http_reason(int status)
{
	switch (status) {
	case 200: return "OK";
	case 201: return "Created";
	case 202: return "Accepted";
	case 204: return "No Content";
	case 400: return "Bad Request";
	case 401: return "Unauthorized";
	case 403: return "Forbidden";
	case 404: return "Not Found";
	case 405: return "Method Not Allowed";
	case 409: return "Conflict";
	case 410: return "Gone";
	case 413: return "Payload Too Large";
	case 415: return "Unsupported Media Type";
	case 429: return "Too Many Requests";
	case 500: return "Internal Server Error";
	case 502: return "Bad Gateway";
	case 503: return "Service Unavailable";
	case 504: return "Gateway Timeout";
	default: return status < 300 ? "OK" : status < 500 ? "Client Error" : "Server Error";
	}
}

/* A plain client socket's output written now (sockwrite.c); TLS writes
 * through OpenSSL: left to its bufferevent. */
int
tg_http_write_now(struct bufferevent *bev)
{
	if (bev == NULL || bufferevent_openssl_get_ssl(bev) != NULL)
		return 0;
	return tg_bev_write_now(bev);
}

/*
 * evhttp_send_reply leaves a whole answer in the output for EV_WRITE;
 * written here at once. Its completion (evhttp_send_done: the request
 * freed, the next one read on a kept-alive connection, the connection
 * closed after an HTTP/1.0 or Connection: close answer) runs from the
 * bufferevent's write callback, which a disabled EV_WRITE no longer
 * calls: it is triggered deferred, at the start of the next loop turn,
 * never inside the caller's stack. The deferred call holds a reference on
 * the bufferevent, and a connection freed or reset meanwhile has cleared
 * its callbacks, so it then runs nothing (libevent 2.1.12,
 * bufferevent_run_deferred_callbacks_unlocked).
 */
static void
send_now(struct evhttp_connection *conn)
{
	struct bufferevent *bev = conn != NULL ? evhttp_connection_get_bufferevent(conn) : NULL;

	if (tg_http_write_now(bev))
		bufferevent_trigger(bev, EV_WRITE, BEV_TRIG_DEFER_CALLBACKS);
}

/* A HEAD gets GET's head, its Content-Length included, and no body:
 * libevent writes whatever body it is given after a HEAD's head, which
 * the client would read as the start of the next answer. */
void
tg_reply_buf(struct evhttp_request *req, int status, const char *ctype, struct evbuffer *body)
{
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	size_t len = body != NULL ? evbuffer_get_length(body) : 0;
	struct evhttp_connection *conn = evhttp_request_get_connection(req);
	char cl[24];

	if (ctype != NULL) {
		evhttp_remove_header(h, "Content-Type");
		evhttp_add_header(h, "Content-Type", ctype);
	}
	if (body != NULL && evhttp_request_get_command(req) == EVHTTP_REQ_HEAD) {
		snprintf(cl, sizeof(cl), "%zu", len);
		evhttp_remove_header(h, "Content-Length");
		evhttp_add_header(h, "Content-Length", cl);
		evbuffer_drain(body, len);
	}
	evhttp_send_reply(req, status, tg_http_reason(status), body);
	send_now(conn);
}

int64_t
tg_http_retry_after_value_ms(const char *v)
{
	char *end;
	long s;

	if (v == NULL)
		return -1;
	s = strtol(v, &end, 10);
	return end != v && *end == '\0' && s >= 0 && s < 86400 ? (int64_t)s * 1000 : -1;
}

int64_t
tg_http_retry_after_ms(const struct evkeyvalq *h)
{
	return tg_http_retry_after_value_ms(h != NULL ? evhttp_find_header(h, "Retry-After") :
	    NULL);
}

/* The three date forms RFC 9110 makes a recipient accept (IMF-fixdate,
 * RFC 850, asctime), all in GMT. */
static int64_t
http_date_s(const char *v)
{
	static const char *const forms[] = { "%a, %d %b %Y %H:%M:%S GMT",
		"%A, %d-%b-%y %H:%M:%S GMT", "%a %b %e %H:%M:%S %Y" };
	struct tm tm;
	const char *end;
	size_t i;

	for (i = 0; i < TG_NELEM(forms); i++) {
		memset(&tm, 0, sizeof(tm));
		if ((end = strptime(v, forms[i], &tm)) != NULL && *end == '\0')
			return (int64_t)timegm(&tm);
	}
	return -1;
}

int64_t
tg_http_retry_after_s(const char *v, int64_t now_s, int64_t max_s)
{
	int64_t s = 0, t;
	const char *p = v;

	if (v == NULL || *v == '\0')
		return -1;
	if (*p >= '0' && *p <= '9') {
		for (; *p >= '0' && *p <= '9'; p++)
			if (s <= max_s)	/* past the cap the digits only grow it */
				s = s * 10 + (*p - '0');
		if (*p != '\0')
			return -1;
		return s < max_s ? s : max_s;
	}
	if ((t = http_date_s(v)) < 0)
		return -1;
	s = t - now_s;
	return s <= 0 ? 0 : s < max_s ? s : max_s;
}

void
tg_reply_json(struct evhttp_request *req, int status, yajl_gen g)
{
	struct evbuffer *b = evbuffer_new();
	const unsigned char *buf;
	size_t len;

	yajl_gen_get_buf(g, &buf, &len);
	evbuffer_add(b, buf, len);
	tg_reply_buf(req, status, "application/json", b);
	evbuffer_free(b);
}

void
tg_reply_error(struct evhttp_request *req, int status, const char *code, const char *message,
    const struct tg_detail *d, size_t n)
{
	struct evbuffer *b = evbuffer_new();

	tg_error_body(b, status, code, message, tg_http_request_id(req), d, n);
	tg_reply_buf(req, status, "application/json", b);
	evbuffer_free(b);
}

int
tg_http_request_id_valid(const char *s, size_t n)
{
	size_t i;

	if (n == 0 || n > 128)
		return 0;
	for (i = 0; i < n; i++)
		if (!(s[i] == '-' || s[i] == '_' || s[i] == '.' || s[i] == ':' ||
		    (s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') ||
		    (s[i] >= 'A' && s[i] <= 'Z')))
			return 0;
	return 1;
}
