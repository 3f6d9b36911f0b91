/*
 * fuzz_route_query.c - a request target ("path?query") through the URI and
 * query-string parsing the gateway relies on and its router: every method
 * against both services' route tables, template expansion of matches, and
 * the one correlationId of a job poll (tg_route_query_one), whose value
 * must be what the gateway can check and send as it is.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/dex.h"
#include "tidegate/sim.h"
#include "tidegate/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
route_all(const char *path)
{
	static const char *const methods[] = { "GET", "POST", "PUT", "DELETE" };
	const struct tg_service_routes *svc[2] = { &tg_dex_service_routes,
		&tg_sim_service_routes };
	struct tg_route_match m;
	size_t i, j;
	char *s;

	for (i = 0; i < 2; i++) {
		for (j = 0; j < 4; j++) {
			if (tg_route_match(svc[i], methods[j], path, &m) != 1)
				continue;
			s = tg_route_expand(m.route->upstream, &m);
			if (s == NULL)
				abort();	/* a matched route always has its params */
			free(s);
		}
	}
}

/* An accepted value is non-empty, bounded and free of control bytes. */
static void
job_id(const char *query)
{
	struct tg_err why;
	char *v = NULL;
	size_t i;

	if (tg_route_query_one(query, "correlationId", &v, &why) != 0) {
		if (v != NULL || why.msg[0] == '\0')
			abort();
		return;
	}
	if (v == NULL)
		return;
	if (*v == '\0' || strlen(v) > TG_ROUTE_PARAMLEN)
		abort();
	for (i = 0; v[i]; i++)
		if ((unsigned char)v[i] < 0x20 || v[i] == 0x7f)
			abort();
	free(v);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct evhttp_uri *u;
	struct evkeyvalq q;
	const char *path, *query;
	char *target;

	if (size > 8192)
		return 0;
	target = malloc(size + 1);
	if (size > 0)	/* data is NULL for an empty input */
		memcpy(target, data, size);
	target[size] = '\0';
	u = evhttp_uri_parse_with_flags(target, EVHTTP_URI_NONCONFORMANT);
	if (u != NULL) {
		path = evhttp_uri_get_path(u);
		query = evhttp_uri_get_query(u);
		route_all(path && *path ? path : "/");
		TAILQ_INIT(&q);
		if (query != NULL && evhttp_parse_query_str(query, &q) == 0)
			(void)evhttp_find_header(&q, "correlationId");
		evhttp_clear_headers(&q);
		job_id(query);
		evhttp_uri_free(u);
	}
	route_all(target);
	job_id(target);
	free(target);
	return 0;
}
