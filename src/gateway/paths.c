/*
 * paths.c - the request target of every request on the service listeners,
 * settled before anything routes on it: refused with 400
 * BAD_REQUEST_TARGET when it is not a plain origin-form target
 * (src/http/target.c says which), else normalised into r->path, the one
 * spelling the router, the gateway's own endpoints and pass-through use,
 * so the path routed is the path the vendor receives (under the vendor
 * URL's base path, which a normalised path cannot climb out of). The
 * emulator's control API is never reachable through the gateway: a path
 * with an "__emulator" segment, in any spelling, is 404. Called by
 * gw_on_request first thing; docs/architecture.md (Request targets).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/http.h>

#include "tidegate/target.h"
#include "gw.h"

#define EMULATOR_SEGMENT "__emulator"

static void
count_refusal(struct gw_req *r, const char *rule)
{
	char labels[96];

	snprintf(labels, sizeof(labels), "service=\"%s\",rule=\"%s\"", r->svc->name, rule);
	tg_metrics_inc(r->gw->metrics, "tidegate_request_target_refusals_total", labels, 1);
}

/* Any segment, not only the first: a vendor URL with a base path puts
 * the emulator's control API one level down. */
int
gw_path_reserved(const char *path)
{
	size_t n = strlen(EMULATOR_SEGMENT);
	const char *p;

	/* '_' has no case: only a segment that begins with it is compared,
	 * found by one search for "/_" */
	for (p = path; (p = strstr(p, "/_")) != NULL; p++)
		if (strncasecmp(p + 1, EMULATOR_SEGMENT, n) == 0 &&
		    (p[1 + n] == '/' || p[1 + n] == '\0'))
			return 1;
	return 0;
}

int
gw_path_prepare(struct gw_req *r)
{
	const char *raw = evhttp_request_get_uri(r->req);
	struct tg_target t;
	struct tg_err err;

	if (tg_http_target_normalise(raw ? raw : "", raw ? strlen(raw) : 0, &t, &err) != 0) {
		count_refusal(r, t.rule);
		gw_req_reply_error(r, 400, "BAD_REQUEST_TARGET", err.msg);
		return -1;
	}
	free(r->path);
	r->path = t.path;
	t.path = NULL;
	tg_http_target_cleanup(&t);
	if (gw_path_reserved(r->path)) {
		count_refusal(r, "reserved");
		gw_req_reply_error(r, 404, "NOT_FOUND", "no such endpoint");
		return -1;
	}
	return 0;
}
