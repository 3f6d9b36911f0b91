/*
 * config_check.c - the gateway's configuration checks that look past the
 * key table: files named by the configuration (CA bundles, the embedded
 * emulator's file) exist and are readable, relative paths resolved against
 * the configuration file's directory (for the features' files and
 * databases too: gw_config_beside, gw_config_check_readable); vendor URLs
 * and route templates have the shape the upstream code
 * needs; listeners obey the no-keys loopback rule and no two share a port
 * (tg_config_addr_conflict); the listeners' TLS files load (tls_listen.c);
 * enumerated values and key services are known, with a "did you mean".
 * Called by gw_config_load (config.c), so the start, -t and SIGHUP all run
 * them.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/http.h>

#include "tidegate/gateway_config.h"
#include "tidegate/state.h"
#include "gw.h"

int
gw_config_check_choice(struct tg_cfg_report *rep, const char *key, const char *v,
    const char *const *choices)
{
	char list[200] = "";
	const char *hint = NULL;
	size_t i, n;
	int best = 3, d;

	if (v == NULL)
		return -1;
	for (n = 0; choices[n] != NULL; n++)
		if (strcmp(v, choices[n]) == 0)
			return 0;
	for (i = 0; i < n; i++) {
		snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s",
		    i == 0 ? "" : i + 1 == n ? " or " : ", ", choices[i]);
		if ((d = tg_str_distance(v, choices[i], 2)) < best) {
			best = d;
			hint = choices[i];
		}
	}
	if (hint != NULL)
		tg_config_report_add(rep, NULL, key, "must be %s, got '%s' (did you mean '%s'?)",
		    list, v, hint);
	else
		tg_config_report_add(rep, NULL, key, "must be %s, got '%s'", list, v);
	return -1;
}

void
gw_config_check_services(const struct gw_config *c, size_t i, struct tg_cfg_report *rep)
{
	static const char *const names[] = { "dex", "sim", "admin", "admin-read", NULL };
	const struct tg_strlist *l = &c->keys[i].services;
	char key[64];
	size_t j;

	if (l->n == 0) {
		snprintf(key, sizeof(key), "keys[%zu].services", i);
		tg_config_report_add(rep, NULL, key, "list at least one of dex, sim, admin, "
		    "admin-read");
	}
	for (j = 0; j < l->n; j++) {
		snprintf(key, sizeof(key), "keys[%zu].services[%zu]", i, j);
		gw_config_check_choice(rep, key, l->v[j], names);
	}
}

char *
gw_config_beside(const struct gw_config *c, const char *file)
{
	const char *slash = strrchr(c->path, '/');

	if (file[0] == '/' || slash == NULL)
		return tg_xstrdup(file);
	return tg_xasprintf("%.*s/%s", (int)(slash - c->path), c->path, file);
}

/* A file that is not a regular file is refused too: OpenSSL would block
 * on a named pipe. */
void
gw_config_check_readable(const struct gw_config *c, char **field, const char *key,
    struct tg_cfg_report *rep)
{
	const char *why;
	char *full;
	int fd;

	if (*field == NULL || **field == '\0')
		return;
	full = gw_config_beside(c, *field);
	if ((fd = tg_config_file_open(full, &why)) < 0)
		tg_config_report_add(rep, NULL, key, "cannot read %s: %s", full, why);
	else
		close(fd);
	free(*field);
	*field = full;
}

/* The shape the upstream pool accepts: http(s)://host[:port][/path], nothing
 * else (a query or fragment would be dropped or sent as part of a path). */
static void
check_url(const char *url, const char *key, int required, struct tg_cfg_report *rep)
{
	const char *want = "want http://host[:port][/path] or https://…";
	struct evhttp_uri *u;
	const char *scheme, *host;

	if (url == NULL || *url == '\0') {
		if (required)
			tg_config_report_add(rep, NULL, key, "required (%s)", want);
		return;
	}
	if ((u = evhttp_uri_parse(url)) == NULL) {
		tg_config_report_add(rep, NULL, key, "'%s' is not a URL (%s)", url, want);
		return;
	}
	scheme = evhttp_uri_get_scheme(u);
	host = evhttp_uri_get_host(u);
	if (scheme == NULL || (strcasecmp(scheme, "http") && strcasecmp(scheme, "https")))
		tg_config_report_add(rep, NULL, key, "scheme must be http or https, got '%s' (%s)",
		    url, want);
	else if (host == NULL || *host == '\0')
		tg_config_report_add(rep, NULL, key, "'%s' has no host (%s)", url, want);
	else if (evhttp_uri_get_query(u) != NULL)
		tg_config_report_add(rep, NULL, key, "'%s' has a query; give no '?…' (%s)", url,
		    strncmp(key, "sim.auth_url", 12) == 0 ? "the token path is sim.routes.token" :
		    want);
	else if (evhttp_uri_get_fragment(u) != NULL || evhttp_uri_get_userinfo(u) != NULL)
		tg_config_report_add(rep, NULL, key, "'%s' has a %s (%s)", url,
		    evhttp_uri_get_fragment(u) != NULL ? "fragment" : "user name", want);
	else if (evhttp_uri_get_port(u) == 0)
		tg_config_report_add(rep, NULL, key, "'%s': port 0 (%s)", url, want);
	evhttp_uri_free(u);
}

/* Route templates are request targets: a path from '/', never a URL. */
static void
check_routes(const struct gw_config *c, struct tg_cfg_report *rep)
{
	const char *v, *svc;
	size_t i;

	for (i = 0; i < gw_config_nkeys; i++) {
		if (strstr(gw_config_keys[i].path, ".routes.") == NULL)
			continue;
		v = *(char *const *)((const char *)c + gw_config_keys[i].off);
		svc = strncmp(gw_config_keys[i].path, "dex.", 4) == 0 ? "dex.url" : "sim.url";
		if (v == NULL || v[0] == '/')
			continue;
		if (strstr(v, "://") != NULL)
			tg_config_report_add(rep, NULL, gw_config_keys[i].path, "must be a path "
			    "starting with '/', not a URL (the origin belongs in %s)", svc);
		else
			tg_config_report_add(rep, NULL, gw_config_keys[i].path, "must start with "
			    "'/' (did you mean '/%s'?)", v);
	}
}

int
gw_config_addr_loopback(const char *addr)
{
	struct in6_addr a6;
	struct in_addr a4;
	char *host = NULL;
	int port, rc = 0;

	if (addr == NULL || tg_config_parse_addr(addr, &host, &port) != 0)
		return 0;
	if (strcmp(host, "localhost") == 0)
		rc = 1;
	else if (inet_pton(AF_INET, host, &a4) == 1)
		rc = (ntohl(a4.s_addr) >> 24) == 127;
	else if (inet_pton(AF_INET6, host, &a6) == 1)
		rc = IN6_IS_ADDR_LOOPBACK(&a6);
	free(host);
	return rc;
}

/* No two listeners on one address and port (the start's bind fails on
 * the second), and without keys, loopback only. */
static void
check_listeners(const struct gw_config *c, struct tg_cfg_report *rep)
{
	const char *addr[3] = { c->listen_dex, c->listen_sim, c->listen_admin };
	const char *key[3] = { "listen.dex", "listen.sim", "listen.admin" };
	int i, j;

	for (i = 0; c->nkeys == 0 && i < 3; i++)
		if (addr[i] != NULL && !gw_config_addr_loopback(addr[i]))
			tg_config_report_add(rep, NULL, key[i], "%s is not a loopback address and "
			    "no API keys are configured (add keys, or listen on 127.0.0.1)",
			    addr[i]);
	for (i = 1; i < 3; i++)
		for (j = 0; j < i; j++)
			if (tg_config_addr_conflict(addr[i], addr[j])) {
				tg_config_report_add(rep, NULL, key[i], "%s overlaps %s (%s): "
				    "each listener needs its own port", addr[i], key[j], addr[j]);
				break;
			}
}

static int
pg_url(const char *u)
{
	return strncmp(u, "postgresql://", 13) == 0 || strncmp(u, "postgres://", 11) == 0;
}

/* state.listen_url and state.pooler go with a PostgreSQL state.url; behind
 * a transaction pooler, LISTEN would be held by whichever server
 * connection ran it, so the listener needs a direct URL of its own. */
static void
check_state_pooler(struct gw_config *c, struct tg_cfg_report *rep)
{
	const char *u = c->state_url, *l = c->state_listen_url, *p = c->state_pooler;
	int pg = u != NULL && pg_url(u);

	c->state_pooler_mode = TG_STATE_POOLER_NONE;
	if (p != NULL && strcmp(p, "transaction") == 0)
		c->state_pooler_mode = TG_STATE_POOLER_TRANSACTION;
	else if (p != NULL && strcmp(p, "none") != 0)
		tg_config_report_add(rep, NULL, "state.pooler", "must be none or transaction");
	if (l != NULL && (!pg || !pg_url(l)))
		tg_config_report_add(rep, NULL, "state.listen_url", "must be a postgresql:// URL "
		    "and goes with a postgresql:// state.url");
	if (c->state_pooler_mode == TG_STATE_POOLER_TRANSACTION && (!pg || l == NULL))
		tg_config_report_add(rep, NULL, "state.pooler", "transaction needs a postgresql:// "
		    "state.url and state.listen_url: a direct connection to the server for LISTEN, "
		    "which a transaction pooler does not keep (docs/fleet.md)");
}

/* state.url names a backend by its scheme (the rest, which may hold a
 * password, is never quoted); state.instance defaults to host:pid. */
static void
check_state(struct gw_config *c, struct tg_cfg_report *rep)
{
	char host[256];
	const char *u = c->state_url;

	if (u != NULL && *u != '\0' && !pg_url(u))
		tg_config_report_add(rep, NULL, "state.url", "must be a postgresql:// URL "
		    "(without state.url the state is kept in SQLite files)");
	check_state_pooler(c, rep);
	if (c->state_instance != NULL)
		return;
	if (gethostname(host, sizeof(host)) != 0)
		snprintf(host, sizeof(host), "localhost");
	host[sizeof(host) - 1] = '\0';
	c->state_instance = tg_xasprintf("%s:%ld", host, (long)getpid());
}

/* tls_listen.*: files readable, both or neither, known listener names,
 * and the files load as a server context (the key matches). */
static void
check_tls_listen(struct gw_config *c, struct tg_cfg_report *rep)
{
	struct tg_err err;
	SSL_CTX *ctx;
	size_t i, n = rep->n;

	for (i = 0; i < c->ltls_on.n; i++)
		gw_config_check_choice(rep, "tls_listen.listeners", c->ltls_on.v[i],
		    (const char *const[]){ "dex", "sim", "admin", NULL });
	if ((c->ltls_cert == NULL) != (c->ltls_key == NULL)) {
		tg_config_report_add(rep, NULL, c->ltls_cert ? "tls_listen.key_file" :
		    "tls_listen.cert_file", "tls_listen needs both cert_file and key_file");
		return;
	}
	gw_config_check_readable(c, &c->ltls_cert, "tls_listen.cert_file", rep);
	gw_config_check_readable(c, &c->ltls_key, "tls_listen.key_file", rep);
	gw_config_check_readable(c, &c->ltls_client_ca, "tls_listen.client_ca_file", rep);
	if (c->ltls_cert == NULL || rep->n != n)
		return;
	if ((ctx = gw_tls_ctx_new(c, &err)) == NULL)
		tg_config_report_add(rep, NULL, "tls_listen.cert_file", "%s", err.msg);
	SSL_CTX_free(ctx);
}

void
gw_config_check_more(struct gw_config *c, struct tg_cfg_report *rep)
{
	check_tls_listen(c, rep);
	gw_client_config_check(c, rep);
	gw_config_check_readable(c, &c->tls_ca_file, "tls.ca_file", rep);
	check_url(c->dex.url, "dex.url", 1, rep);
	check_url(c->dex.fallback_url, "dex.fallback_url", 0, rep);
	check_url(c->sim.url, "sim.url", 1, rep);
	check_url(c->sim.fallback_url, "sim.fallback_url", 0, rep);
	check_url(c->sim.auth_url, "sim.auth_url", 1, rep);
	check_url(c->otlp_url, "tracing.otlp_url", 0, rep);
	check_routes(c, rep);
	check_listeners(c, rep);
	check_state(c, rep);
}
