/*
 * server.c - the emulator's listeners and request dispatch. Every request
 * is counted (GET /__emulator/stats), may be delayed or failed by an
 * injected fault, then routed by listener, method and path pattern. The
 * control API (/__emulator/...) is answered on every listener, uncounted.
 * An optional TLS listener (listen.dex_tls) serves the dex routes, counted
 * as dex, for the gateway's TLS tests and for users who want HTTPS.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/event.h>
#include <event2/http.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "tidegate/errors.h"
#include "tidegate/frontdoor.h"
#include "tidegate/http.h"
#include "tidegate/ids.h"
#include "tidegate/log.h"
#include "emu.h"

struct route {
	int listener;		/* EMU_DEX, or EMU_SIM for both simulation hosts */
	const char *method;
	const char *pattern;	/* '*' matches one path segment */
	int auth;		/* token required */
	emu_handler fn;
};

static const struct route routes[] = {
	{ EMU_DEX, "POST", "/public/v1/authenticate", 0, emu_h_authenticate },
	{ EMU_DEX, "POST", "/public/v1/export/*", 1, emu_h_export_create },
	{ EMU_DEX, "GET", "/public/export", 1, emu_h_export_get },
	{ EMU_DEX, "POST", "/public/v1/import/activities", 1, emu_h_import_json },
	{ EMU_DEX, "POST", "/public/v1/import/activities/file", 1, emu_h_import_file },
	{ EMU_DEX, "GET", "/public/v1/import/status", 1, emu_h_import_status },
	{ EMU_DEX, "GET", "/public/v1/import/result", 1, emu_h_import_result },
	{ EMU_DEX, "GET", "/public/v1/import/activities/failed", 1, emu_h_import_failed },
	{ EMU_AUTH, "POST", "/api/oauth2/token", 0, emu_h_oauth_token },
	{ EMU_SIM, "GET", "/api/v1/cases", 1, emu_h_cases_list },
	{ EMU_SIM, "GET", "/api/v1/cases/*", 1, emu_h_case_get },
	{ EMU_SIM, "POST", "/api/v1/simulations", 1, emu_h_sim_submit },
	{ EMU_SIM, "GET", "/api/v1/simulations", 1, emu_h_sim_list },
	{ EMU_SIM, "GET", "/api/v1/simulations/*", 1, emu_h_sim_status },
	{ EMU_SIM, "GET", "/api/v1/simulations/*/results", 1, emu_h_sim_results },
};

struct listener_ctx {
	struct tg_emu *emu;
	int listener;
	struct tg_frontdoor door;	/* strict framing, no key check (frontdoor.h) */
};

/* A request held back by an injected latency. */
struct emu_pending {
	struct emu_pending *next;
	struct tg_emu *emu;
	struct evhttp_request *req;
	struct evhttp_connection *conn;
	struct event *timer;
	int listener;
	struct emu_fault err;		/* copy: the rule may be cleared meanwhile */
	int apply_err;
};

static struct listener_ctx lctx[EMU_NLISTENERS];	/* one emulator per process */
static const char *const lnames[] = { "dex", "sim", "design", "auth" };

/* The TLS copy of the dex listener; kept here, like lctx, per process. */
static struct {
	struct evhttp *http;
	struct tg_frontdoor door;
	SSL_CTX *ctx;
	int port;
} tls_dex;

const char *
emu_listener_name(int l)
{
	return l >= 0 && l < EMU_NLISTENERS ? lnames[l] : "?";
}

/* Match path against pattern, capturing '*' segments (max 4, 128 bytes each). */
static int
match(const char *pattern, const char *path, char caps[][128], int *ncap)
{
	const char *e;
	size_t len;

	*ncap = 0;
	while (*pattern && *path) {
		if (*pattern == '*') {
			e = strchr(path, '/');
			len = e ? (size_t)(e - path) : strlen(path);
			if (len == 0 || len >= 128 || *ncap >= 4)
				return 0;
			memcpy(caps[*ncap], path, len);
			caps[(*ncap)++][len] = '\0';
			path += len;
			pattern++;
			continue;
		}
		if (*pattern++ != *path++)
			return 0;
	}
	return *pattern == '\0' && *path == '\0';
}

static void
count(struct tg_emu *emu, int listener, const char *method, const char *path)
{
	char key[512];
	long long *n;
	struct tg_map *maps[2] = { emu->calls, emu->calls_by[listener] };
	int i;

	snprintf(key, sizeof(key), "%s %s", method, path);
	for (i = 0; i < 2; i++) {
		n = tg_map_get(maps[i], key);
		if (n == NULL) {
			n = tg_xcalloc(1, sizeof(*n));
			tg_map_put(maps[i], key, n);
		}
		(*n)++;
	}
}

static void
route(struct tg_emu *emu, struct evhttp_request *req, int listener)
{
	const char *path = tg_http_path(req), *method = tg_http_method(req);
	const char *params[4] = { NULL, NULL, NULL, NULL };
	char caps[4][128];
	int ncap, path_found = 0, rl = listener == EMU_DESIGN ? EMU_SIM : listener, i;
	size_t r;

	for (r = 0; r < TG_NELEM(routes); r++) {
		if (routes[r].listener != rl || !match(routes[r].pattern, path, caps, &ncap))
			continue;
		path_found = 1;
		if (strcmp(routes[r].method, method) != 0)
			continue;
		if (routes[r].auth && (rl == EMU_DEX ? emu_auth_check_dex(emu, req) :
		    emu_auth_check_sim(emu, req)) != 0)
			return;	/* the check replied 401 */
		for (i = 0; i < ncap; i++)
			params[i] = caps[i];
		routes[r].fn(emu, req, params);
		return;
	}
	if (path_found)
		emu_reply_error(req, 405, "method not allowed on this path");
	else
		emu_reply_error(req, 404, "no such endpoint");
}

/* libevent sees the reset, then frees the request and connection itself. */
static void
reset_connection(struct evhttp_request *req)
{
	tg_http_conn_reset(evhttp_request_get_connection(req));
	evhttp_send_reply(req, 500, "Reset", NULL);
}

static void
apply_error(struct evhttp_request *req, const struct emu_fault *f)
{
	char ra[32];

	if (f->reset) {
		reset_connection(req);
		return;
	}
	if (f->retry_after > 0) {
		snprintf(ra, sizeof(ra), "%d", f->retry_after);
		evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", ra);
	}
	emu_reply_error(req, f->status, "injected fault");
}

static void
pending_unlink(struct emu_pending *p)
{
	struct emu_pending **pp;

	for (pp = &p->emu->pending; *pp != NULL; pp = &(*pp)->next) {
		if (*pp == p) {
			*pp = p->next;
			break;
		}
	}
	tg_frontdoor_set_closecb(p->conn, NULL, NULL);
	event_free(p->timer);
	free(p);
}

/* The client went while its answer was held: libevent detached the request
 * from the connection (it is no longer the connection's to free), so it is
 * freed here; one still attached is freed with its connection. */
static void
on_pending_close(struct evhttp_connection *conn, void *arg)
{
	struct emu_pending *p = arg;
	struct evhttp_request *req = p->req;

	pending_unlink(p);
	if (evhttp_request_get_connection(req) == NULL)
		evhttp_request_free(req);
}

static void
on_pending_timer(evutil_socket_t fd, short what, void *arg)
{
	struct emu_pending *p = arg;
	struct evhttp_request *req = p->req;
	struct tg_emu *emu = p->emu;
	struct emu_fault err = p->err;
	int apply = p->apply_err, listener = p->listener;

	pending_unlink(p);
	if (apply)
		apply_error(req, &err);
	else
		route(emu, req, listener);
}

/* First matching rule with applications left; decides whether it errors. */
static const struct emu_fault *
fault_for(struct tg_emu *emu, int listener, const char *method, const char *path, int *err)
{
	struct emu_fault *f;
	size_t i;

	for (i = 0; i < emu->nfaults; i++) {
		f = &emu->faults[i];
		if (f->remaining == 0 || (f->listener >= 0 && f->listener != listener) ||
		    (f->method && strcmp(f->method, method) != 0) ||
		    (f->path && !tg_str_startswith(path, f->path)))
			continue;
		if (f->remaining > 0)
			f->remaining--;
		*err = (f->status > 0 || f->reset) &&
		    (f->rate >= 1.0 || (double)random() / RAND_MAX < f->rate);
		return f;
	}
	return NULL;
}

static void
on_request(struct evhttp_request *req, void *arg)
{
	struct listener_ctx *lc = arg;
	struct tg_emu *emu = lc->emu;
	const char *path = tg_http_path(req), *method = tg_http_method(req);
	const struct emu_fault *f;
	struct emu_pending *p;
	struct timeval tv;
	int err = 0, refused = tg_frontdoor_refusal(req);

	if (refused != 0) {
		tg_frontdoor_reply(req, refused);
		return;
	}
	if (tg_str_startswith(path, "/__emulator/")) {
		emu_control(emu, req, path);
		return;
	}
	count(emu, lc->listener, method, path);
	tg_log(TG_LOG_DEBUG, "request", TG_LS("listener", lnames[lc->listener]),
	    TG_LS("method", method), TG_LS("path", path));
	f = fault_for(emu, lc->listener, method, path, &err);
	if (f != NULL && f->latency_ms > 0) {
		p = tg_xcalloc(1, sizeof(*p));
		p->emu = emu;
		p->req = req;
		p->conn = evhttp_request_get_connection(req);
		p->listener = lc->listener;
		p->err = *f;
		p->apply_err = err;
		p->timer = evtimer_new(emu->base, on_pending_timer, p);
		p->next = emu->pending;
		emu->pending = p;
		tg_frontdoor_set_closecb(p->conn, on_pending_close, p);
		tv.tv_sec = f->latency_ms / 1000;
		tv.tv_usec = (f->latency_ms % 1000) * 1000;
		evtimer_add(p->timer, &tv);
		return;
	}
	if (err)
		apply_error(req, f);
	else
		route(emu, req, lc->listener);
}

static const char *
listen_addr(const struct tg_emu_config *cfg, int l)
{
	switch (l) {
	case EMU_DEX: return cfg->listen_dex;
	case EMU_SIM: return cfg->listen_sim;
	case EMU_DESIGN: return cfg->listen_design;
	default: return cfg->listen_auth;
	}
}

static struct bufferevent *
on_tls_accept(struct event_base *base, void *arg)
{
	SSL *ssl = SSL_new(arg);

	return ssl ? bufferevent_openssl_socket_new(base, -1, ssl, BUFFEREVENT_SSL_ACCEPTING,
	    BEV_OPT_CLOSE_ON_FREE) : NULL;
}

static SSL_CTX *
tls_ctx(const struct tg_emu_config *cfg, struct tg_err *err)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
	char reason[160];

	if (ctx != NULL) {
		SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
		if (SSL_CTX_use_certificate_chain_file(ctx, cfg->tls_cert_file) == 1 &&
		    SSL_CTX_use_PrivateKey_file(ctx, cfg->tls_key_file, SSL_FILETYPE_PEM) == 1 &&
		    SSL_CTX_check_private_key(ctx) == 1)
			return ctx;
	}
	ERR_error_string_n(ERR_get_error(), reason, sizeof(reason));
	ERR_clear_error();
	tg_err_set(err, "tls.cert_file/tls.key_file: %s", reason);
	SSL_CTX_free(ctx);
	return NULL;
}

/* Same handler and counters as the plain dex listener; only the
 * connection's bufferevent differs. */
static int
tls_listen(struct event_base *base, const struct tg_emu_config *cfg, struct tg_err *err)
{
	if (cfg->tls_cert_file == NULL || cfg->tls_key_file == NULL) {
		tg_err_set(err, "listen.dex_tls needs tls.cert_file and tls.key_file");
		return -1;
	}
	if ((tls_dex.ctx = tls_ctx(cfg, err)) == NULL)
		return -1;
	tls_dex.http = tg_http_listen(base, cfg->listen_dex_tls, (size_t)cfg->max_body,
	    &tls_dex.port, err);
	if (tls_dex.http == NULL)
		return -1;
	tls_dex.door = lctx[EMU_DEX].door;	/* framed like the plain listener */
	tls_dex.door.make_bev = on_tls_accept;
	tls_dex.door.make_arg = tls_dex.ctx;
	tg_frontdoor_attach(tls_dex.http, &tls_dex.door);
	evhttp_set_gencb(tls_dex.http, on_request, &lctx[EMU_DEX]);
	tg_log(TG_LOG_INFO, "listening", TG_LS("listener", "dex_tls"),
	    TG_LS("addr", cfg->listen_dex_tls), TG_LI("port", tls_dex.port));
	return 0;
}

/* data_dir: the clock and token keys first, as jobs are judged against
 * the clock; imports before exports, which read the imported activities. */
static int
restore(struct tg_emu *emu, struct tg_err *err)
{
	if (emu_store_open(emu, err) != 0)
		return -1;
	emu_meta_load(emu);
	emu_imports_load(emu);
	emu_exports_load(emu);
	emu_sim_load(emu);
	return 0;
}

struct tg_emu *
tg_emu_new(struct event_base *base, const struct tg_emu_config *cfg, struct tg_err *err)
{
	struct tg_emu *emu = tg_xcalloc(1, sizeof(*emu));
	int l;

	emu->cfg = cfg;
	emu->base = base;
	emu->calls = tg_map_new(free);
	for (l = 0; l < EMU_NLISTENERS; l++)
		emu->calls_by[l] = tg_map_new(free);
	if (cfg->dex_jwt_secret != NULL)
		snprintf(emu->dex_secret, sizeof(emu->dex_secret), "%s", cfg->dex_jwt_secret);
	else
		tg_id_hex(emu->dex_secret, 32);
	tg_id_hex(emu->sim_secret, 32);
	emu->exports = tg_map_new(NULL);
	emu->imports = tg_map_new(NULL);
	emu_projects_init(emu);
	emu_sim_init(emu);
	if (cfg->data_dir != NULL && restore(emu, err) != 0) {
		tg_emu_free(emu);
		return NULL;
	}
	for (l = 0; l < EMU_NLISTENERS; l++) {
		emu->http[l] = tg_http_listen(base, listen_addr(cfg, l), (size_t)cfg->max_body,
		    &emu->port[l], err);
		if (emu->http[l] == NULL) {
			tg_emu_free(emu);
			return NULL;
		}
		lctx[l].emu = emu;
		lctx[l].listener = l;
		lctx[l].door.max_head = TG_HTTP_MAX_HEAD;
		lctx[l].door.max_body = (uint64_t)cfg->max_body;
		tg_frontdoor_attach(emu->http[l], &lctx[l].door);
		evhttp_set_gencb(emu->http[l], on_request, &lctx[l]);
		tg_log(TG_LOG_INFO, "listening", TG_LS("listener", lnames[l]),
		    TG_LS("addr", listen_addr(cfg, l)), TG_LI("port", emu->port[l]));
	}
	if (cfg->listen_dex_tls != NULL && tls_listen(base, cfg, err) != 0) {
		tg_emu_free(emu);
		return NULL;
	}
	return emu;
}

void
tg_emu_free(struct tg_emu *emu)
{
	int l;

	if (emu == NULL)
		return;
	while (emu->pending != NULL)
		pending_unlink(emu->pending);
	for (l = 0; l < EMU_NLISTENERS; l++)
		if (emu->http[l] != NULL)
			evhttp_free(emu->http[l]);
	if (tls_dex.http != NULL)
		evhttp_free(tls_dex.http);
	SSL_CTX_free(tls_dex.ctx);
	memset(&tls_dex, 0, sizeof(tls_dex));
	emu_exports_free(emu);
	emu_imports_free(emu);
	emu_sim_free(emu);
	emu_projects_free(emu);
	emu_faults_clear(emu);
	tg_map_free(emu->calls);
	for (l = 0; l < EMU_NLISTENERS; l++)
		tg_map_free(emu->calls_by[l]);
	free(emu);
}
