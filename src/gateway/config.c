/*
 * config.c - the core's configuration keys, defaults and bounds, the
 * checks that span them (addresses, key digests and the keyring the start
 * builds from them, the token endpoint; files, URLs, routes and listeners
 * are checked in config_check.c, the databases with the state by the
 * entry point), and the features' configurations (gw_config_define): each
 * feature's key table is loaded with the core's, into its own settings,
 * and checked by its own check. Every problem is collected with its
 * position; the same path serves the start, -t and SIGHUP, so "-t"
 * passing means the configuration will load.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <event2/http.h>

#include "tidegate/gateway_config.h"
#include "tidegate/keys.h"

#define O(f) offsetof(struct gw_config, f)
#define K(p, t, f, d, doc) { p, t, O(f), d, 0, 0, 0, NULL, 0, 0, 0, doc }
#define KB(p, t, f, d, lo, hi, doc) { p, t, O(f), d, 0, lo, hi, NULL, 0, 0, 0, doc }
#define R(svc, name, op, def) K(#svc ".routes." name, TG_CFG_STR, svc.routes[op], def, \
	"upstream path template of " name)

static const struct tg_cfg_key key_keys[] = {
	{ "name", TG_CFG_STR, offsetof(struct gw_key_cfg, name), NULL, 1, 0, 0, NULL, 0, 0, 0,
	  "name of the caller (logs, metrics)" },
	{ "sha256", TG_CFG_STR, offsetof(struct gw_key_cfg, sha256), NULL, 1, 0, 0, NULL, 0, 0,
	  0, "SHA-256 of the key, 64 hex digits (printf %s KEY | sha256sum)" },
	{ "services", TG_CFG_STRLIST, offsetof(struct gw_key_cfg, services), "dex,sim", 0, 0, 0,
	  NULL, 0, 0, 0, "services the key may use: dex, sim, admin (the admin API), "
	  "admin-read (its reads only)" },
};

#define SERVICE_KEYS(svc, defurl) \
	K(#svc ".url", TG_CFG_STR, svc.url, defurl, "vendor base URL"), \
	K(#svc ".fallback_url", TG_CFG_STR, svc.fallback_url, NULL, \
	  "second vendor host: takes the requests the first fails or cannot serve "   \
	  "(failover.*)"), \
	K(#svc ".caller_tokens", TG_CFG_BOOL, svc.caller_tokens, "true", \
	  "forward callers' own bearer tokens that are not gateway keys"), \
	KB(#svc ".caller_max_body", TG_CFG_SIZE, svc.caller_max_body, "8MB", 1024, \
	   4294967296.0, "largest body sent with a caller's own token (a bearer that is not " \
	   "a gateway key): the gateway cannot vouch for it before the vendor does, so a " \
	   "larger one is refused (413) before it is read"), \
	KB(#svc ".login_max_body", TG_CFG_SIZE, svc.login_max_body, "16KB", 1024, 1048576.0, \
	   "largest body of a caller's login (dex: authenticate, sim: the token endpoint); " \
	   "a larger one is refused (413) before it is read"), \
	K(#svc ".passthrough", TG_CFG_BOOL, svc.passthrough, "true", \
	  "forward unknown paths unchanged with credentials injected (false: 404)"), \
	K(#svc ".login_cache", TG_CFG_BOOL, svc.login_cache, "true", \
	  "answer callers' own logins from a cache while the token is valid"), \
	KB(#svc ".refresh_before", TG_CFG_DURATION, svc.refresh_before, "60s", 0, 8.64e7, \
	   "refresh the vendor token this long before it expires"), \
	KB(#svc ".refresh_jitter", TG_CFG_DURATION, svc.refresh_jitter, "10s", 0, 3.6e6, \
	   "random extra lead on refreshes, so fleets do not refresh together"), \
	KB(#svc ".login_timeout", TG_CFG_DURATION, svc.login_timeout, "10s", 100, 3.6e6, \
	   "give up on a vendor login after this long"), \
	KB(#svc ".login_retry_after", TG_CFG_DURATION, svc.login_retry_after, "5s", 1000, \
	   3.6e6, "Retry-After sent while vendor logins fail"), \
	KB(#svc ".replay_max_body", TG_CFG_SIZE, svc.replay_max_body, "10MB", 0, 4294967296.0, \
	   "largest body replayed after a vendor 401 (bigger: the 401 is relayed)"), \
	K(#svc ".validate", TG_CFG_BOOL, svc.validate, "true", \
	  "check requests before sending them (400 listing every problem)"), \
	KB(#svc ".budget.rate", TG_CFG_DOUBLE, svc.budget_rate, "0", 0, 1e6, \
	   "vendor budget: requests a second to the vendor's API, for the whole fleet (0: no " \
	   "limit); over it " \
	   "calls wait in the queue (pool.queue_timeout), gateway polls first, " \
	   "submissions last"), \
	KB(#svc ".budget.burst", TG_CFG_INT, svc.budget_burst, "0", 0, 1e9, \
	   "vendor budget: requests above budget.rate sent at once after a quiet spell " \
	   "(0: one second's worth)"), \
	KB(#svc ".budget.concurrent", TG_CFG_INT, svc.budget_concurrent, "0", 0, 65536, \
	   "vendor budget: requests in flight to the vendor's API at most, for the whole " \
	   "fleet (0: no limit)"), \
	KB(#svc ".budget.pause_max", TG_CFG_DURATION, svc.budget_pause_max, "60s", 1000, \
	   3.6e6, "longest pause a vendor's 429 (or 503) Retry-After imposes on the " \
	   "service's calls, a longer one is cut to this")

const struct tg_cfg_key gw_config_keys[] = {
	K("listen.dex", TG_CFG_ADDR, listen_dex, "127.0.0.1:8080", "data exchange listener"),
	K("listen.sim", TG_CFG_ADDR, listen_sim, "127.0.0.1:8081", "simulation listener"),
	K("listen.admin", TG_CFG_ADDR, listen_admin, "127.0.0.1:9090",
	  "admin listener: /healthz, /readyz, /metrics"),
	K("log_level", TG_CFG_STR, log_level, "info", "debug, info, warn, error or off"),
	K("user", TG_CFG_STR, user, NULL,
	  "started as root: the account to run as once the listeners are bound (root "
	  "refuses to start without it; \"root\" keeps root, with a warning); "
	  "ignored otherwise"),
	K("pid_file", TG_CFG_PATH, pid_file, NULL,
	  "file the process id is written to once the listeners are bound (removed at exit), "
	  "for tidegate -s reload and -s stop; a live tidegate already named in it refuses the "
	  "start; relative: to this file's directory; unset: none (systemd and containers "
	  "know the pid)"),
	K("access_log", TG_CFG_BOOL, access_log, "true", "one JSON line per request"),
	K("access_log_probes", TG_CFG_BOOL, access_log_probes, "true",
	  "log the admin listener's /healthz, /readyz and /metrics requests too (false: "
	  "not those, e.g. under Kubernetes probes)"),
	KB("max_body", TG_CFG_SIZE, max_body, "256MB", 1024, 4294967296.0,
	   "largest request body accepted from callers (413 above)"),
	KB("admin_max_body", TG_CFG_SIZE, admin_max_body, "16KB", 1024, 1048576.0,
	   "largest request body on the admin listener (413 above, before it is read; its "
	   "API takes no body today)"),
	KB("drain_timeout", TG_CFG_DURATION, drain_timeout, "30s", 0, 3.6e6,
	   "on SIGTERM, wait this long for in-flight requests"),
	KB("drain_delay", TG_CFG_DURATION, drain_delay, "0s", 0, 3.6e6,
	   "on SIGTERM, /readyz answers 503 this long while the listeners still accept and "
	   "serve, so a load balancer probing it stops sending here first; then the drain "
	   "(drain_timeout). A second SIGTERM, or SIGINT, starts the drain at once"),
	KB("client_header_timeout", TG_CFG_DURATION, client_header_timeout, "60s", 0, 3.6e6,
	   "a client's whole request head must arrive within this (from the connection's "
	   "start, or from the first byte of a later head); else a 408 and the connection "
	   "closed (reset when not a byte came); 0: no limit"),
	KB("client_body_timeout", TG_CFG_DURATION, client_body_timeout, "60s", 0, 3.6e6,
	   "longest gap between two reads of a request body; else a 408 and the connection "
	   "closed; 0: no limit"),
	KB("client_body_min_rate", TG_CFG_SIZE, client_body_min_rate, "1KB", 0, 1073741824.0,
	   "bytes a second a request body must average, counted from client_body_rate_grace "
	   "after its head (a body may take the grace plus its size over this rate); slower: "
	   "a 408 and the connection closed; 0: no minimum"),
	KB("client_body_rate_grace", TG_CFG_DURATION, client_body_rate_grace, "20s", 0, 3.6e6,
	   "time a request body is given before client_body_min_rate applies"),
	KB("keepalive_timeout", TG_CFG_DURATION, keepalive_timeout, "75s", 0, 3.6e6,
	   "an idle keep-alive client connection is closed after this (a request being "
	   "answered, a long-poll included, is never idle); 0: no limit"),
	KB("max_clients", TG_CFG_INT, max_clients, "4096", 0, 1e6,
	   "open client connections per listener; more are reset at accept; 0: no limit"),
	KB("max_clients_per_ip", TG_CFG_INT, max_clients_per_ip, "0", 0, 1e6,
	   "open client connections per listener from one address (a PROXY header's, on a "
	   "proxy_protocol listener); a trusted proxy's (real_ip_from) are not counted: each "
	   "request through one counts under its client while in flight, 429 above; 0: no "
	   "limit (a sidecar's callers all come from 127.0.0.1)"),
	KB("client_send_timeout", TG_CFG_DURATION, client_send_timeout, "60s", 0, 8.64e7,
	   "reset a client that takes no byte of its answer for this long, and cancel the "
	   "vendor request feeding it (0: never)"),
	K("upstream", TG_CFG_STR, upstream, "remote",
	  "remote, or embedded: run tidegate-emulator in this process"),
	K("emulator_config", TG_CFG_STR, emulator_config, "emulator.yaml",
	  "emulator config for upstream: embedded (relative to this file)"),
	SERVICE_KEYS(dex, "http://127.0.0.1:7080"),
	K("dex.username", TG_CFG_STR, dex.id, NULL, "vendor account the gateway logs in with"),
	K("dex.password", TG_CFG_SECRET, dex.secret, NULL,
	  "its password: password_env or password_file"),
	K("dex.strict", TG_CFG_BOOL, dex.strict, "false",
	  "unknown members of export requests are errors (else passed through)"),
	K("dex.work_packages_status_field", TG_CFG_STR, dex.wp_status_field, "status",
	  "spelling sent for the work packages status filter: status or statuses"),
	R(dex, "authenticate", TG_OP_DEX_AUTHENTICATE, "/public/v1/authenticate"),
	R(dex, "export", TG_OP_DEX_EXPORT, "/public/v1/export/{kind}"),
	R(dex, "export_get", TG_OP_DEX_EXPORT_GET, "/public/export"),
	R(dex, "import_activities", TG_OP_DEX_IMPORT_JSON, "/public/v1/import/activities"),
	R(dex, "import_file", TG_OP_DEX_IMPORT_FILE, "/public/v1/import/activities/file"),
	R(dex, "import_status", TG_OP_DEX_IMPORT_STATUS, "/public/v1/import/status"),
	R(dex, "import_result", TG_OP_DEX_IMPORT_RESULT, "/public/v1/import/result"),
	R(dex, "import_failed", TG_OP_DEX_IMPORT_FAILED, "/public/v1/import/activities/failed"),
	SERVICE_KEYS(sim, "http://127.0.0.1:7081"),
	K("sim.auth_url", TG_CFG_STR, sim.auth_url, "http://127.0.0.1:7083",
	  "base URL of the OAuth2 token endpoint: the token request goes to auth_url followed "
	  "by sim.routes.token (a path in auth_url is kept); unused when sim.token_url is set"),
	K("sim.token_url", TG_CFG_STR, sim.token_url, NULL,
	  "the OAuth2 token endpoint's whole URL (http or https, no query), e.g. "
	  "https://login.example.com/tenant/oauth2/v2.0/token; replaces sim.auth_url + "
	  "sim.routes.token for the gateway's own logins"),
	K("sim.scope", TG_CFG_STR, sim.scope, NULL,
	  "scope sent with the gateway's token request (e.g. api://ID/.default); unset: none"),
	K("sim.audience", TG_CFG_STR, sim.audience, NULL,
	  "audience sent with the gateway's token request (e.g. an Auth0 API identifier); "
	  "unset: none"),
	K("sim.client_auth", TG_CFG_STR, sim.client_auth, "client_secret_post",
	  "how the gateway authenticates to the token endpoint: client_secret_post (id and "
	  "secret in the form body) or client_secret_basic (HTTP Basic, RFC 6749 2.3.1)"),
	K("sim.client_id", TG_CFG_STR, sim.id, NULL, "API client the gateway uses"),
	K("sim.client_secret", TG_CFG_SECRET, sim.secret, NULL,
	  "its secret: client_secret_env or client_secret_file"),
	K("sim.construction_types", TG_CFG_STRLIST, sim.cases.construction,
	  "INSTALLATION_TASK,COMMISSIONING_TASK", "fixableTypes of Construction cases"),
	K("sim.om_types", TG_CFG_STRLIST, sim.cases.om,
	  "CORRECTIVE_MAINTENANCE,PREVENTIVE_MAINTENANCE,SCHEDULED_SERVICE,INSPECTION",
	  "fixableTypes of O&M cases"),
	K("sim.corrective_types", TG_CFG_STRLIST, sim.cases.corrective, "CORRECTIVE_MAINTENANCE",
	  "O&M fixableTypes timed by failureRatePerYear (the other O&M types by intervalDays)"),
	K("sim.check_entries", TG_CFG_BOOL, sim.cases.entries, "true",
	  "check the members of every vessel, personnel role and fixable of a submitted case "
	  "(docs/validation.md); false: structure, kinds and the diff only"),
	KB("sim.remember_cases", TG_CFG_INT, sim.remember_cases, "256", 0, 1e6,
	   "partial cases kept to diff submissions against (0: no diff)"),
	R(sim, "token", TG_OP_SIM_TOKEN, "/api/oauth2/token"),
	R(sim, "cases", TG_OP_SIM_CASES, "/api/v1/cases"),
	R(sim, "case", TG_OP_SIM_CASE, "/api/v1/cases/{id}"),
	R(sim, "simulations", TG_OP_SIM_SUBMIT, "/api/v1/simulations"),
	R(sim, "simulation_list", TG_OP_SIM_LIST, "/api/v1/simulations"),
	R(sim, "simulation", TG_OP_SIM_STATUS, "/api/v1/simulations/{id}"),
	R(sim, "results", TG_OP_SIM_RESULTS, "/api/v1/simulations/{id}/results"),
	KB("pool.connect_timeout", TG_CFG_DURATION, connect_timeout, "5s", 10, 3.6e6,
	   "upstream connect timeout"),
	KB("pool.read_timeout", TG_CFG_DURATION, read_timeout, "60s", 10, 8.64e7,
	   "upstream read timeout (time without a byte)"),
	KB("pool.max_conns", TG_CFG_INT, max_conns, "256", 1, 65536,
	   "connections per upstream origin (more requests queue)"),
	KB("pool.max_idle", TG_CFG_INT, max_idle, "32", 0, 65536,
	   "idle keep-alive connections kept per origin"),
	KB("pool.max_conns_per_key", TG_CFG_INT, max_conns_per_key, "0", 0, 65536,
	   "connections per origin one API key may hold (callers' own tokens share one "
	   "allowance); 0: half of pool.max_conns"),
	KB("pool.queue_timeout", TG_CFG_DURATION, queue_timeout, "10s", 10, 3.6e6,
	   "a request waiting this long for a connection is answered 503 UPSTREAM_BUSY"),
	KB("failover.eject_after", TG_CFG_INT, eject_after, "3", 0, 1000,
	   "consecutive failures (connect, TLS, reset, timeout, 502/503/504) that take a "
	   "vendor origin out of service while the other serves; 0: never"),
	KB("failover.eject_time", TG_CFG_DURATION, eject_time, "30s", 100, 8.64e7,
	   "how long the first ejection lasts; each repeat doubles it"),
	KB("failover.eject_max", TG_CFG_DURATION, eject_max, "5m", 100, 8.64e7,
	   "the longest ejection"),
	K("failover.probe_path", TG_CFG_STR, probe_path, "/",
	  "path GET from an ejected origin once its ejection time is over: any answer "
	  "below 500 brings it back"),
	KB("failover.probe_interval", TG_CFG_DURATION, probe_interval, "5s", 100, 3.6e6,
	   "between probes of an ejected origin"),
	KB("failover.retry_budget", TG_CFG_INT, retry_budget_pct, "20", 1, 100,
	   "requests tried again on the other origin after it got them (reset, timeout, "
	   "502/503/504) at most this percentage of the requests in flight"),
	KB("failover.retry_budget_min", TG_CFG_INT, retry_budget_min, "3", 1, 100000,
	   "... but always this many at once"),
	KB("failover.retry_after_max", TG_CFG_DURATION, retry_after_max, "60s", 1000, 8.64e7,
	   "a 503's Retry-After keeps its origin out of service at most this long"),
	K("real_ip_from", TG_CFG_STRLIST, real_ip_from, NULL,
	  "trusted proxies, on every listener: addresses and CIDR blocks (IPv4, IPv6); a "
	  "request from one takes its client address from X-Forwarded-For, walked from the "
	  "right past trusted proxies (nginx's set_real_ip_from, real_ip_recursive on); "
	  "other peers' X-Forwarded-For is ignored; unset: none"),
	K("proxy_protocol.listeners", TG_CFG_STRLIST, proxy_protocol_on, NULL,
	  "listeners whose every connection opens with a PROXY protocol header (v1 or v2, "
	  "HAProxy's send-proxy / send-proxy-v2) giving the client's address: dex, sim, "
	  "admin; a connection without a valid one is closed unanswered; not with TLS on the "
	  "listener; unset: none"),
	K("tls.verify", TG_CFG_BOOL, tls_verify, "true",
	  "verify upstream certificates and host names"),
	K("tls.ca_file", TG_CFG_STR, tls_ca_file, NULL, "PEM CA bundle (default: system)"),
	K("tls_listen.cert_file", TG_CFG_STR, ltls_cert, NULL,
	  "PEM certificate chain the gateway's listeners present (TLS 1.2 or newer); "
	  "unset: plain HTTP"),
	K("tls_listen.key_file", TG_CFG_STR, ltls_key, NULL, "its private key (PEM)"),
	K("tls_listen.client_ca_file", TG_CFG_STR, ltls_client_ca, NULL,
	  "PEM CA bundle: when set, a client must present a certificate it signed"),
	K("tls_listen.listeners", TG_CFG_STRLIST, ltls_on, "dex,sim",
	  "listeners that speak TLS when tls_listen.cert_file is set: dex, sim, admin"),
	KB("max_problems", TG_CFG_INT, max_problems, "200", 1, 100000,
	   "problems listed in one 400 (all are counted)"),
	KB("validation.worker_min_body", TG_CFG_SIZE, check_worker_min, "256KB", 0, 4294967296.0,
	   "request bodies this large are checked on the worker thread, so the event loop "
	   "keeps serving (smaller: checked inline)"),
	K("state.url", TG_CFG_SECRET, state_url, NULL,
	  "where durable and shared state lives: absent, the SQLite files above (one "
	  "instance); postgresql://… for a fleet of instances sharing one database "
	  "(docs/fleet.md; a password in it: use state.url_env or state.url_file)"),
	K("state.instance", TG_CFG_STR, state_instance, NULL,
	  "this instance's name in leases, logs, the admin API and its PostgreSQL "
	  "connections' application_name (tidegate/<instance>, unless state.url sets one; "
	  "default: host:pid)"),
	KB("state.timeout", TG_CFG_DURATION, state_timeout, "3s", 100, 6e5,
	   "deadline of every state operation: a database that has not answered by then "
	   "(a frozen server, a partition) makes the request answer 503 with Retry-After and "
	   "/readyz say degraded (\"no answer within N ms\") until it answers again; "
	   "operations asked meanwhile fail at once. SQLite keeps no timer"),
	K("state.listen_url", TG_CFG_SECRET, state_listen_url, NULL,
	  "where the connection that LISTENs for other instances' wake-ups goes: a direct "
	  "connection to the server of state.url, when state.url leads through a pooler "
	  "(docs/fleet.md); default: state.url, on a connection of the pool"),
	K("state.pooler", TG_CFG_STR, state_pooler, "none",
	  "what state.url leads through: none (a direct connection: statements prepared "
	  "once per connection) or transaction (a pooler such as PgBouncer in transaction "
	  "mode: statements unnamed, no session state; needs state.listen_url)"),
	K("tracing.otlp_url", TG_CFG_STR, otlp_url, NULL,
	  "OTLP/HTTP endpoint spans are exported to as JSON, e.g. "
	  "http://127.0.0.1:4318/v1/traces: one SERVER span per client request on dex and "
	  "sim, one CLIENT span per vendor call made for it; unset: no tracing"),
	K("tracing.service_name", TG_CFG_STR, otlp_service, "tidegate",
	  "service.name of the exported spans"),
	KB("tracing.flush_interval", TG_CFG_DURATION, otlp_flush, "2s", 100, 3.6e6,
	   "export the spans queued this often (and as soon as the queue is half full); one "
	   "export in flight at a time"),
	KB("tracing.sample", TG_CFG_DOUBLE, otlp_sample, "1", 0, 1,
	   "share of the requests that start a trace here whose spans are exported (0 to 1); "
	   "a caller's valid traceparent decides by its sampled flag"),
	KB("tracing.max_queue", TG_CFG_INT, otlp_max_queue, "4096", 2, 1e6,
	   "spans held waiting for export; beyond, new spans are dropped and counted "
	   "(tidegate_spans_dropped_total{reason=\"queue_full\"})"),
	{ "keys", TG_CFG_LIST, O(keys), NULL, 0, 0, 0, key_keys, TG_NELEM(key_keys),
	  sizeof(struct gw_key_cfg), O(nkeys),
	  "gateway API keys; without keys the gateway only binds loopback" },
};

const size_t gw_config_nkeys = TG_NELEM(gw_config_keys);

/* The entry point's checks (gw_config_add_check), in order. */
static gw_config_check_fn checks[8];
static size_t nchecks;

void
gw_config_add_check(gw_config_check_fn fn)
{
	size_t i;

	for (i = 0; i < nchecks; i++)
		if (checks[i] == fn)
			return;
	if (nchecks < TG_NELEM(checks))
		checks[nchecks++] = fn;
}

/* The features' configurations (gw_config_define), in the order defined:
 * the order of their keys in -K and of their checks. */
static const struct gw_config_def *defs[GW_CONFIG_MAX_DEFS];
static size_t ndefs;

int
gw_config_define(const struct gw_config_def *d)
{
	size_t i;

	for (i = 0; i < ndefs; i++)
		if (defs[i] == d)
			return 0;
	if (ndefs >= GW_CONFIG_MAX_DEFS)
		return -1;
	defs[ndefs++] = d;
	return 0;
}

const void *
gw_config_settings(const struct gw_config *c, const struct gw_config_def *d)
{
	size_t i;

	for (i = 0; i < c->ndefs; i++)
		if (c->def[i] == d)
			return c->settings[i];
	return NULL;
}

/* The core's table, then each defined feature's, into t (ndefs + 1 rows);
 * with c (NULL: for -K), each fills its own struct: the features' are made
 * here, zeroed, and owned by c. */
static size_t
tables(struct gw_config *c, struct tg_cfg_table *t)
{
	size_t i;

	t[0] = (struct tg_cfg_table){ gw_config_keys, gw_config_nkeys, c };
	for (i = 0; i < ndefs; i++) {
		t[i + 1] = (struct tg_cfg_table){ defs[i]->keys, defs[i]->nkeys, NULL };
		if (c == NULL)
			continue;
		c->def[i] = defs[i];
		c->settings[i] = t[i + 1].out = tg_xcalloc(1, defs[i]->size);
	}
	if (c != NULL)
		c->ndefs = ndefs;
	return ndefs + 1;
}

void
gw_config_doc(FILE *out)
{
	struct tg_cfg_table t[GW_CONFIG_MAX_DEFS + 1];

	tg_config_doc_tables(t, tables(NULL, t), out);
}

/* Whether the file set secret key (name, name_env or name_file). */
static int
secret_given(const struct tg_cfg_report *rep, const char *key)
{
	size_t line, col;

	return tg_config_report_pos(rep, key, &line, &col) == 0;
}

/* The same rules as the upstream's URL parser, so -t catches what start-up
 * would refuse. */
static void
check_token(const struct gw_config *c, struct tg_cfg_report *rep)
{
	static const char *const auths[] = { "client_secret_post", "client_secret_basic", NULL };
	const char *u = c->sim.token_url, *scheme, *host;
	struct evhttp_uri *uri;
	int ok;

	gw_config_check_choice(rep, "sim.client_auth", c->sim.client_auth, auths);
	if (u == NULL)
		return;
	uri = evhttp_uri_parse(u);
	scheme = uri ? evhttp_uri_get_scheme(uri) : NULL;
	host = uri ? evhttp_uri_get_host(uri) : NULL;
	ok = scheme != NULL && (strcmp(scheme, "http") == 0 || strcmp(scheme, "https") == 0) &&
	    host != NULL && *host != '\0' && evhttp_uri_get_userinfo(uri) == NULL &&
	    evhttp_uri_get_query(uri) == NULL && evhttp_uri_get_fragment(uri) == NULL;
	if (uri != NULL)
		evhttp_uri_free(uri);
	if (!ok)
		tg_config_report_add(rep, NULL, "sim.token_url", "expected "
		    "http(s)://host[:port]/path, without user, query or fragment");
}

int
gw_config_key_add(struct tg_keyring *kr, const struct gw_key_cfg *k, struct tg_err *err)
{
	const char *svc[3];
	size_t j;

	for (j = 0; j < k->services.n && j < 3; j++)
		svc[j] = k->services.v[j];
	return tg_keyring_add(kr, k->name, k->sha256, svc, j, err);
}

/* Each key's own checks, then the keyring the start builds, built the same
 * way (two keys with one digest: the start refused them). */
static void
check_keys(struct gw_config *c, struct tg_cfg_report *rep)
{
	struct tg_keyring kr = { 0 };
	struct tg_err why;
	char key[64];
	size_t i, n;

	for (i = 0; i < c->nkeys; i++) {
		const char *name = c->keys[i].name, *sha = c->keys[i].sha256;

		n = rep->n;
		snprintf(key, sizeof(key), "keys[%zu].name", i);
		if (name != NULL && name[0] == '(')
			tg_config_report_add(rep, NULL, key, "names starting with '(' are reserved "
			    "(they tag callers without a key in metrics)");
		snprintf(key, sizeof(key), "keys[%zu].sha256", i);
		if (sha != NULL && (strlen(sha) != 64 || strspn(sha, "0123456789abcdefABCDEF") != 64))
			tg_config_report_add(rep, NULL, key, "expected 64 hex digits (the SHA-256 "
			    "of the key, e.g. printf %%s KEY | sha256sum)");
		gw_config_check_services(c, i, rep);
		if (rep->n == n && name != NULL && sha != NULL &&
		    gw_config_key_add(&kr, &c->keys[i], &why) != 0)
			tg_config_report_add(rep, NULL, key, "%s", why.msg);
	}
	tg_keyring_cleanup(&kr);
}

static void
check(struct gw_config *c, struct tg_cfg_report *rep)
{
	static const char *const upstreams[] = { "remote", "embedded", NULL };
	static const char *const levels[] = { "debug", "info", "warn", "error", "off", NULL };
	static const char *const spellings[] = { "status", "statuses", NULL };
	const struct gw_service_cfg *s[2] = { &c->dex, &c->sim };
	size_t i;

	if (rep->empty)
		tg_config_report_add_at(rep, 1, 1, NULL, "the file sets nothing (an empty "
		    "configuration is refused; start from conf/tidegate.yaml)");
	gw_config_check_choice(rep, "log_level", c->log_level, levels);
	gw_config_check_choice(rep, "upstream", c->upstream, upstreams);
	check_keys(c, rep);
	gw_config_check_choice(rep, "dex.work_packages_status_field", c->dex.wp_status_field,
	    spellings);
	for (i = 0; i < 2; i++) {	/* a secret given but not read: reported already */
		if ((s[i]->id == NULL) != (s[i]->secret == NULL) &&
		    !secret_given(rep, i ? "sim.client_secret" : "dex.password"))
			tg_config_report_add(rep, NULL, i ? "sim" : "dex", "give both %s and its "
			    "secret, or neither", i ? "client_id" : "username");
	}
	check_token(c, rep);
	for (i = 0; i < c->ndefs; i++)	/* the features' own keys */
		if (c->def[i]->check != NULL)
			c->def[i]->check(c, c->settings[i], rep);
	for (i = 0; i < nchecks; i++)
		checks[i](c, rep);
	gw_config_check_more(c, rep);
}

int
gw_config_load(const char *path, struct gw_config *cfg, struct tg_cfg_report *rep)
{
	struct tg_cfg_table t[GW_CONFIG_MAX_DEFS + 1];

	memset(cfg, 0, sizeof(*cfg));
	cfg->path = tg_xstrdup(path);
	if (rep->file == NULL)
		rep->file = path;
	tg_config_load_tables_report(path, t, tables(cfg, t), rep);
	if (rep->bound)
		check(cfg, rep);
	return rep->n > 0 ? -1 : 0;
}

void
gw_config_free(struct gw_config *cfg)
{
	size_t i;

	for (i = 0; i < cfg->ndefs; i++) {
		if (cfg->def[i]->cleanup != NULL)
			cfg->def[i]->cleanup(cfg->settings[i]);
		tg_config_free(cfg->def[i]->keys, cfg->def[i]->nkeys, cfg->settings[i]);
		free(cfg->settings[i]);
		cfg->settings[i] = NULL;
	}
	cfg->ndefs = 0;
	gw_client_config_free(cfg);
	if (cfg->state_url != NULL)
		explicit_bzero(cfg->state_url, strlen(cfg->state_url));
	if (cfg->state_listen_url != NULL)
		explicit_bzero(cfg->state_listen_url, strlen(cfg->state_listen_url));
	tg_config_free(gw_config_keys, gw_config_nkeys, cfg);
	free(cfg->path);
	cfg->path = NULL;
}
