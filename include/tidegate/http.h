/*
 * http.h - the server side of libevent's evhttp made safe to use: binding
 * listeners from "host:port", reading bodies and query strings, and the
 * reply helpers every handler finishes with (reply exactly once).
 */
#ifndef TIDEGATE_HTTP_H
#define TIDEGATE_HTTP_H

#include <stddef.h>
#include <stdint.h>

#include <event2/http.h>
#include <event2/util.h>
#include <yajl/yajl_gen.h>

#include "tidegate/errors.h"
#include "tidegate/util.h"

struct bufferevent;
struct event_base;

/** Bytes of one request head (request line and fields) a listener takes. */
#define TG_HTTP_MAX_HEAD (64 * 1024)

/**
 * The event base of a binary: epoll's change list on, so that the many
 * enable/disable calls evhttp makes on one connection within a loop turn
 * cost one epoll_ctl (or none) instead of one each. The caller owns it:
 * event_base_free().
 */
struct event_base *tg_event_base_new(void);
/**
 * A new evhttp set up as every listener's is (max_body bytes of body,
 * TG_HTTP_MAX_HEAD of head, the methods the front door serves), not bound:
 * tg_http_listen binds one; the front door's differential fuzz target
 * hands it a socket. base is borrowed (must outlive it); the caller owns
 * the result: evhttp_free().
 */
struct evhttp *tg_http_new(struct event_base *base, size_t max_body);
/**
 * Bind a new evhttp on addr ("127.0.0.1:7080", "[::1]:0"); max_body bytes
 * for request bodies (larger ones get a 413 from libevent before any
 * handler runs). Returns NULL with err set. *port_out (may be NULL)
 * receives the bound port (useful with port 0). base (must outlive the
 * evhttp) and addr are borrowed; the caller owns the result: evhttp_free().
 */
struct evhttp *tg_http_listen(struct event_base *base, const char *addr, size_t max_body,
    int *port_out, struct tg_err *err);

/* Below, req is borrowed; results marked borrowed live as long as req. */
/** Path of the request without query, not percent-decoded (borrowed). */
const char *tg_http_path(struct evhttp_request *req);
/** The first value of query parameter name (ASCII case ignored) of req
 * (borrowed), decoded, or NULL; malloc'd, the caller frees. A parameter
 * without '=' has the value "" and does not hide the others. */
char *tg_http_query(struct evhttp_request *req, const char *name);
/** Calls cb for each name=value pair of req's (borrowed) query in order,
 * both decoded ('+' as a space; borrowed for the call; a pair without '='
 * has value ""), until cb returns nonzero; returns that value, else 0. */
int tg_http_query_walk(struct evhttp_request *req,
    int (*cb)(const char *name, const char *value, void *arg), void *arg);
/** Request body copied into a NUL-terminated buffer; *len its size. The
 * caller takes ownership of it (free()). */
char *tg_http_body(struct evhttp_request *req, size_t *len);
/** Method as text ("GET"); "OTHER" for methods evhttp does not name. Static,
 * borrowed. */
const char *tg_http_method(struct evhttp_request *req);
/** The name of method cmd, as tg_http_method (static, borrowed). */
const char *tg_http_cmd_name(enum evhttp_cmd_type cmd);
/** Request header value (borrowed) or NULL; name is borrowed. */
const char *tg_http_header(struct evhttp_request *req, const char *name);
/** 1 when the media type of Content-Type value ctype is one of accepts
 * (comma-separated types, "application/json" taking "+json" types too),
 * or when either is NULL (nothing declared); else 0. Both borrowed. */
int tg_http_media_accepted(const char *accepts, const char *ctype);
/** Bearer token of the Authorization header (borrowed, after "Bearer "), or NULL. */
const char *tg_http_bearer(struct evhttp_request *req);
/**
 * Make the kernel send an RST on conn's socket (SO_LINGER 0 and, on Linux,
 * connect(AF_UNSPEC)); libevent then sees the error and frees the
 * connection itself (conn is borrowed). For truncated bodies that must not
 * look complete.
 */
void tg_http_conn_reset(struct evhttp_connection *conn);
/** The same on a socket descriptor (-1: nothing). */
void tg_http_fd_reset(evutil_socket_t fd);
/**
 * Write what bev's output holds now on a plain socket (bev borrowed, may
 * be NULL): 1 when all of it went and EV_WRITE was turned off (the caller
 * owes what the bufferevent's write callback would have done), else 0,
 * the rest left to the bufferevent (TLS, a full socket, an error). The
 * process ignores SIGPIPE, as it must for libevent's own writes.
 */
int tg_http_write_now(struct bufferevent *bev);
/** The request id of req's answer (borrowed): the X-Request-Id already
 * set on the answer (a listener that assigns ids sets it on arrival), else
 * the client's X-Request-Id, else NULL. */
const char *tg_http_request_id(struct evhttp_request *req);
/** A caller's X-Request-Id worth keeping: s[0..n) (borrowed) is 1 to 128
 * of [A-Za-z0-9._:-]. */
int tg_http_request_id_valid(const char *s, size_t n);
/** Standard reason phrase for a status (static, borrowed). */
const char *tg_http_reason(int status);

/*
 * The replies: req is handed back to libevent, which frees it once sent;
 * do not use it afterwards. Every other pointer is borrowed for the call.
 */
/** Send what g generated as application/json with status. g is borrowed (its
 * buffer is copied, not cleared; the caller still frees g). */
void tg_reply_json(struct evhttp_request *req, int status, yajl_gen g);
/** Retry-After in delta-seconds (0 to 86399) as ms; -1 when absent or
 * anything else. h (borrowed) may be NULL. */
int64_t tg_http_retry_after_ms(const struct evkeyvalq *h);
/** The same of a Retry-After value v (borrowed; NULL: -1). */
int64_t tg_http_retry_after_value_ms(const char *v);
/** A Retry-After value v (borrowed, may be NULL) in either form,
 * delta-seconds or an HTTP date (read against now_s, Unix seconds), as
 * seconds from now capped at max_s: 0 for a date passed, -1 when v is
 * neither. */
int64_t tg_http_retry_after_s(const char *v, int64_t now_s, int64_t max_s);
/** Send body (borrowed; drained) with content type ctype (borrowed, may be
 * NULL: the Content-Type already set stays). To a HEAD, the head alone,
 * with the body's Content-Length. */
void tg_reply_buf(struct evhttp_request *req, int status, const char *ctype,
    struct evbuffer *body);
/**
 * Send the JSON error body (errors.h) with req's request id
 * (tg_http_request_id). code, message and d[0..n) are borrowed.
 */
void tg_reply_error(struct evhttp_request *req, int status, const char *code,
    const char *message, const struct tg_detail *d, size_t n);

#endif
