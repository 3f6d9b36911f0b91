/*
 * vendor_error.c - a vendor's error answer (status 400 and above) relayed
 * in the gateway's own error body (DESIGN.md: statusCode, error, message,
 * requestId), so that every error a client sees names its request id and
 * says whose refusal it is. The vendor's status is kept as the reply's and
 * its answer under "vendor": its status, its message, and its body (the
 * JSON value, or the text), of which at most GW_VENDOR_ERROR_MAX bytes are
 * read. The OAuth token endpoint's errors are relayed as they came: OAuth
 * clients read RFC 6749 5.2 bodies ("error": "invalid_client"). Called by
 * relay.c (relayed and held answers), logins.c, and features that answer
 * with a vendor's answer they keep (jobs' polls, runs' status). A 404 to
 * a path that is no route's but near one says which (gw_path_hint).
 */
#include <stdio.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <yajl/yajl_gen.h>

#include "tidegate/errors.h"
#include "tidegate/http.h"
#include "tidegate/json.h"
#include "tidegate/routes.h"
#include "gw.h"

/* Length of the longest prefix of s[0..n) that is whole UTF-8: a body cut
 * at the bound may end inside a character. */
static size_t
utf8_prefix(const unsigned char *s, size_t n)
{
	size_t i = 0, k, len;

	while (i < n) {
		len = s[i] < 0x80 ? 1 : (s[i] & 0xe0) == 0xc0 ? 2 : (s[i] & 0xf0) == 0xe0 ? 3 :
		    (s[i] & 0xf8) == 0xf0 ? 4 : 0;
		if (len == 0 || i + len > n)
			break;
		for (k = 1; k < len; k++)
			if ((s[i + k] & 0xc0) != 0x80)
				return i;
		i += len;
	}
	return i;
}

/* The vendor's own words: its message, else its error's description. */
static const char *
vendor_message(yajl_val v)
{
	static const char *const keys[] = { "message", "error_description", "detail",
		"title", "error" };
	const char *s;
	size_t i;

	for (i = 0; v != NULL && YAJL_IS_OBJECT(v) && i < TG_NELEM(keys); i++)
		if ((s = tg_json_get_str(v, keys[i])) != NULL && *s != '\0')
			return s;
	return NULL;
}

/* What the client is told: whose refusal, in words that say what to fix. */
static void
wrap_message(const struct gw_req *r, int status, const char *said, char *msg, size_t size)
{
	const char *login = r->op == TG_OP_DEX_AUTHENTICATE ? " the login" : "";

	char hint[340] = "";
	size_t len;

	if (status == 404 && r->m.route == NULL)	/* passed through: a near miss? */
		gw_path_hint(r, hint, sizeof(hint));
	if (status == 401 && r->auth == GW_AUTH_CALLER && !*login &&
	    tg_http_bearer(r->req) != NULL)
		snprintf(msg, size, "not an API key of this gateway, and the vendor refused it "
		    "as a token%s%s", said ? ": " : "", said ? said : "");
	else
		snprintf(msg, size, "the %s vendor answered %d %s to%s%s%s", r->svc->name, status,
		    tg_http_reason(status), *login ? login : " this request", said ? ": " : "",
		    said ? said : "");
	if (*hint != '\0' && (len = strlen(msg)) + strlen(hint) < size)
		memcpy(msg + len, hint, strlen(hint) + 1);	/* whole, or not at all */
	msg[utf8_prefix((const unsigned char *)msg, strlen(msg))] = '\0';	/* cut by size */
}

void
gw_path_hint(const struct gw_req *r, char *out, size_t n)
{
	char near[300];

	*out = '\0';
	if (tg_route_suggest(r->svc->routes, r->path, near, sizeof(near)))
		snprintf(out, n, " (did you mean '%s'?)", near);
}

static void
gen_vendor(yajl_gen g, int status, const char *said, yajl_val v, const char *text,
    size_t len, int cut)
{
	tg_json_str(g, "vendor");
	yajl_gen_map_open(g);
	tg_json_kv_int(g, "status", status);
	if (said != NULL)
		tg_json_kv_str(g, "message", said);
	if (v != NULL || len > 0) {
		tg_json_str(g, "body");
		if (v != NULL)
			tg_json_gen_val(g, v);
		else
			yajl_gen_string(g, (const unsigned char *)text, len);
	}
	if (cut)
		tg_json_kv_bool(g, "truncated", 1);
	yajl_gen_map_close(g);
}

void
gw_req_reply_vendor(struct gw_req *r, int status, const char *ctype, struct evbuffer *b)
{
	size_t all = b != NULL ? evbuffer_get_length(b) : 0;
	size_t n = all < GW_VENDOR_ERROR_MAX ? all : GW_VENDOR_ERROR_MAX, line;
	const char *text = n ? (const char *)evbuffer_pullup(b, (ev_ssize_t)n) : "";
	struct tg_err err;
	yajl_val v;
	yajl_gen g;
	const char *said;
	char msg[600], head[400];
	struct evbuffer *out;

	if (status < 400 || r->req == NULL || r->op == TG_OP_SIM_TOKEN) {
		gw_req_reply_buf(r, status, ctype, b);
		return;
	}
	v = all <= GW_VENDOR_ERROR_MAX ? tg_json_parse(text, n, &err) : NULL;
	n = utf8_prefix((const unsigned char *)text, n);
	said = vendor_message(v);
	if (said == NULL && v == NULL && n > 0) {	/* a text answer: its first line */
		for (line = 0; line < n && line < sizeof(head) - 1 && text[line] != '\r' &&
		    text[line] != '\n'; line++)
			;
		line = utf8_prefix((const unsigned char *)text, line);
		snprintf(head, sizeof(head), "%.*s", (int)line, text);
		said = head;
	}
	wrap_message(r, status, said, msg, sizeof(msg));
	g = tg_json_gen_new();
	yajl_gen_map_open(g);
	tg_json_kv_int(g, "statusCode", status);
	tg_json_kv_str(g, "error", tg_error_code(status));
	tg_json_kv_str(g, "message", msg);
	tg_json_kv_str(g, "requestId", r->id);
	gen_vendor(g, status, said, v, text, n, n < all);
	yajl_gen_map_close(g);
	out = evbuffer_new();
	tg_json_gen_flush(g, out);
	yajl_gen_free(g);
	yajl_tree_free(v);
	evhttp_remove_header(evhttp_request_get_output_headers(r->req), "Content-Encoding");
	gw_req_reply_buf(r, status, "application/json", out);
	evbuffer_free(out);
}
