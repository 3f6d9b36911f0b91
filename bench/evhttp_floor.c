/*
 * evhttp_floor.c - the least an evhttp proxy can do, as the floor the
 * gateway's proxy path is measured against (bench/floor.py): each GET
 * is sent to one upstream on an idle kept-alive evhttp connection (a new
 * one when none is idle) with the client's headers, and the answer is
 * relayed with evhttp_send_reply once complete. No authentication, no
 * routing, no ids, no logs, no metrics, no streaming, no limits.
 *
 *     evhttp_floor LISTEN_PORT UPSTREAM_PORT
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/queue.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

struct link {
	struct evhttp_connection *evcon;
	struct evhttp_request *client;
	struct link *next;
};

static struct event_base *base;
static struct link *idle;
static int upstream_port;

static int
hop(const char *name)
{
	return strcasecmp(name, "Connection") == 0 || strcasecmp(name, "Keep-Alive") == 0 ||
	    strcasecmp(name, "Transfer-Encoding") == 0 || strcasecmp(name, "Host") == 0 ||
	    strcasecmp(name, "Content-Length") == 0;
}

/* The client left before its answer (wrk at the end of a run): the
 * answer, when it comes, is dropped. */
static void
on_client_close(struct evhttp_connection *conn, void *arg)
{
	struct link *l = arg;

	l->client = NULL;
}

static void
on_done(struct evhttp_request *up, void *arg)
{
	struct link *l = arg;
	struct evhttp_request *client = l->client;
	struct evkeyval *kv;

	l->client = NULL;
	if (client != NULL)
		evhttp_connection_set_closecb(evhttp_request_get_connection(client), NULL, NULL);
	if (client == NULL && up != NULL && evhttp_request_get_response_code(up) != 0) {
		l->next = idle;
		idle = l;
		return;
	}
	if (client == NULL) {
		evhttp_connection_free(l->evcon);
		free(l);
		return;
	}
	if (up == NULL || evhttp_request_get_response_code(up) == 0) {
		evhttp_send_error(client, 502, NULL);
		evhttp_connection_free(l->evcon);
		free(l);
		return;
	}
	TAILQ_FOREACH(kv, evhttp_request_get_input_headers(up), next)
		if (!hop(kv->key))
			evhttp_add_header(evhttp_request_get_output_headers(client), kv->key,
			    kv->value);
	evhttp_send_reply(client, evhttp_request_get_response_code(up),
	    evhttp_request_get_response_code_line(up), evhttp_request_get_input_buffer(up));
	l->next = idle;
	idle = l;
}

static void
on_request(struct evhttp_request *req, void *arg)
{
	struct link *l = idle;
	struct evhttp_request *up;
	struct evkeyval *kv;

	if (l != NULL) {
		idle = l->next;
	} else {
		l = calloc(1, sizeof(*l));
		l->evcon = evhttp_connection_base_new(base, NULL, "127.0.0.1",
		    (unsigned short)upstream_port);
	}
	l->client = req;
	evhttp_connection_set_closecb(evhttp_request_get_connection(req), on_client_close, l);
	up = evhttp_request_new(on_done, l);
	TAILQ_FOREACH(kv, evhttp_request_get_input_headers(req), next)
		if (!hop(kv->key))
			evhttp_add_header(evhttp_request_get_output_headers(up), kv->key, kv->value);
	evhttp_add_header(evhttp_request_get_output_headers(up), "Host", "127.0.0.1");
	evhttp_make_request(l->evcon, up, evhttp_request_get_command(req),
	    evhttp_request_get_uri(req));
}

static void
on_term(evutil_socket_t fd, short what, void *arg)
{
	event_base_loopexit(base, NULL);
}

int
main(int argc, char **argv)
{
	struct evhttp *http;
	struct event *term;

	if (argc != 3) {
		fprintf(stderr, "usage: evhttp_floor LISTEN_PORT UPSTREAM_PORT\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	upstream_port = atoi(argv[2]);
	base = event_base_new();
	http = evhttp_new(base);
	if (evhttp_bind_socket(http, "127.0.0.1", (unsigned short)atoi(argv[1])) != 0) {
		fprintf(stderr, "evhttp_floor: cannot listen on %s\n", argv[1]);
		return 1;
	}
	evhttp_set_gencb(http, on_request, NULL);
	term = evsignal_new(base, SIGTERM, on_term, NULL);
	event_add(term, NULL);
	event_base_dispatch(base);
	event_free(term);
	evhttp_free(http);
	event_base_free(base);
	return 0;
}
