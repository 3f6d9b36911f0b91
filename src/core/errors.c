/*
 * errors.c - JSON error bodies (DESIGN.md contract). Generated with yajl
 * so messages that echo user input are always escaped.
 */
#include <string.h>

#include <event2/buffer.h>
#include <yajl/yajl_gen.h>

#include "tidegate/errors.h"

const char *
tg_error_code(int status)
{
	switch (status) {
	case 400: return "BAD_REQUEST";
	case 401: return "UNAUTHORIZED";
	case 403: return "FORBIDDEN";
	case 404: return "NOT_FOUND";
	case 405: return "METHOD_NOT_ALLOWED";
	case 408: return "REQUEST_TIMEOUT";
	case 409: return "CONFLICT";
	case 410: return "GONE";
	case 413: return "PAYLOAD_TOO_LARGE";
	case 415: return "UNSUPPORTED_MEDIA_TYPE";
	case 429: return "TOO_MANY_REQUESTS";
	case 500: return "INTERNAL_SERVER_ERROR";
	case 502: return "BAD_GATEWAY";
	case 503: return "SERVICE_UNAVAILABLE";
	case 504: return "GATEWAY_TIMEOUT";
	default: return status >= 500 ? "SERVER_ERROR" : "CLIENT_ERROR";
	}
}

static void
str(yajl_gen g, const char *s)
{
	yajl_gen_string(g, (const unsigned char *)s, strlen(s));
}

void
tg_error_body(struct evbuffer *out, int status, const char *code, const char *message,
    const char *request_id, const struct tg_detail *d, size_t n)
{
	yajl_gen g = yajl_gen_alloc(NULL);
	const unsigned char *buf;
	size_t len, i;

	yajl_gen_map_open(g);
	str(g, "statusCode");
	yajl_gen_integer(g, status);
	str(g, "error");
	str(g, code ? code : tg_error_code(status));
	str(g, "message");
	str(g, message ? message : "");
	if (request_id != NULL) {
		str(g, "requestId");
		str(g, request_id);
	}
	if (d != NULL) {
		str(g, "details");
		yajl_gen_array_open(g);
		for (i = 0; i < n; i++) {
			yajl_gen_map_open(g);
			str(g, "path");
			str(g, d[i].path);
			str(g, "message");
			str(g, d[i].message);
			if (d[i].code != NULL) {
				str(g, "code");
				str(g, d[i].code);
			}
			yajl_gen_map_close(g);
		}
		yajl_gen_array_close(g);
	}
	yajl_gen_map_close(g);
	yajl_gen_get_buf(g, &buf, &len);
	evbuffer_add(out, buf, len);
	yajl_gen_free(g);
}
