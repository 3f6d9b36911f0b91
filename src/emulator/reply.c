/*
 * reply.c - the emulator's error replies, in the vendor's shape
 * {statusCode, error, message}. Called by every route handler (auth.c,
 * control.c, export.c, import.c, sim.c) and by the dispatch in server.c.
 */
#include <event2/buffer.h>
#include <event2/http.h>

#include "tidegate/errors.h"
#include "tidegate/http.h"
#include "emu.h"

void
emu_reply_error(struct evhttp_request *req, int status, const char *message)
{
	struct evbuffer *b = evbuffer_new();

	tg_error_body(b, status, NULL, message, NULL, NULL, 0);
	tg_reply_buf(req, status, "application/json", b);
	evbuffer_free(b);
}
