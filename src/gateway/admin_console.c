/*
 * admin_console.c - the console on the admin listener: GET / (the page)
 * and GET /console/<file> (its script and style sheet), served from the
 * table embed.py compiled into the binary (console.h). Called by admin.c
 * for a GET or HEAD no other admin path took.
 *
 * The files ask for no key: the key is typed into the page, which sends
 * it with every JSON request it makes (the APIs ask for it, as they do of
 * any client). Each answer carries a Content-Security-Policy that lets
 * the page run only its own script and style and talk only to this
 * origin, so a value shown from the state (a callback URL, an error) can
 * never run or send anything; with no cookie anywhere there is nothing
 * for another site's page to ride on. ETags are the files' hashes: a
 * browser revalidates (no-cache) and gets 304 until the binary changes.
 */
#include <string.h>

#include <event2/buffer.h>
#include <event2/http.h>

#include "tidegate/http.h"
#include "console.h"
#include "gw.h"

#define CONSOLE_CSP "default-src 'self'; script-src 'self'; style-src 'self'; " \
	"img-src 'self'; connect-src 'self'; object-src 'none'; base-uri 'none'; " \
	"form-action 'none'; frame-ancestors 'none'"

static const struct gw_console_asset *
find(const char *path)
{
	const struct gw_console_asset *a;

	for (a = gw_console_assets; a->path != NULL; a++)
		if (strcmp(a->path, path) == 0)
			return a;
	return NULL;
}

/* If-None-Match: "*" or a list naming the tag (weak or strong alike). */
static int
not_modified(struct evhttp_request *req, const struct gw_console_asset *a)
{
	const char *inm = tg_http_header(req, "If-None-Match");

	return inm != NULL && (strcmp(inm, "*") == 0 || strstr(inm, a->etag) != NULL);
}

int
gw_admin_console(struct evhttp_request *req, const char *path)
{
	const struct gw_console_asset *a = find(path);
	struct evkeyvalq *h = evhttp_request_get_output_headers(req);
	struct evbuffer *b;

	if (a == NULL)
		return 0;
	evhttp_add_header(h, "Content-Security-Policy", CONSOLE_CSP);
	evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
	evhttp_add_header(h, "Referrer-Policy", "no-referrer");
	evhttp_add_header(h, "X-Frame-Options", "DENY");
	evhttp_add_header(h, "Cache-Control", "no-cache");
	evhttp_add_header(h, "ETag", a->etag);
	if (not_modified(req, a)) {
		tg_reply_buf(req, 304, NULL, NULL);
		return 1;
	}
	b = evbuffer_new();
	evbuffer_add_reference(b, a->data, a->len, NULL, NULL);	/* static: no copy */
	tg_reply_buf(req, 200, a->ctype, b);
	evbuffer_free(b);
	return 1;
}
