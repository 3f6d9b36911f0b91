/*
 * config.c - the gateway's configuration keys, defaults and bounds, and
 * the checks that span keys (addresses, key digests and the keyring the
 * start builds from them, webhook mode, schedule, allow-list and signing
 * secrets, which are parsed here once; files, URLs, routes, listeners and
 * the embedded emulator's file are checked in config_check.c, the
 * databases with the state by the entry point). Every problem is
 * collected with its position; the same path serves the start, -t and
 * SIGHUP, so "-t" passing means the configuration will load.
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
	  NULL, 0, 0, 0, "services the key may use: dex, sim, admin" },
	{ "webhook_secret", TG_CFG_SECRET, offsetof(struct gw_key_cfg, webhook_secret), NULL, 0,
	  0, 0, NULL, 0, 0, 0, "this key's webhook signing secrets (whsec_ lines, current first; "
	  "else webhooks.secret)" },
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
	  "check requests before sending them (400 listing every problem)")

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
	   "open client connections per listener from one address; 0: no limit (a sidecar's "
	   "callers all come from 127.0.0.1)"),
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
	K("poll.enabled", TG_CFG_BOOL, poll_enabled, "true",
	  "share upstream polls of one job among all its callers"),
	KB("poll.interval", TG_CFG_DURATION, poll_interval, "1s", 10, 3.6e6,
	   "reuse a non-terminal answer this long"),
	KB("poll.max_interval", TG_CFG_DURATION, poll_max_interval, "10s", 10, 3.6e6,
	   "longest reuse as a job ages"),
	KB("poll.backoff_after", TG_CFG_DURATION, poll_backoff_after, "30s", 1000, 8.64e7,
	   "job age after which the interval grows (by interval per backoff_after)"),
	KB("poll.max_wait", TG_CFG_DURATION, poll_max_wait, "50s", 0, 3.6e6,
	   "longest long-poll (?wait=N seconds is capped to this); keep it under the "
	   "read/idle timeout of any proxy or load balancer in front (nginx 60s)"),
	KB("poll.wait_margin", TG_CFG_DURATION, poll_wait_margin, "500ms", 0, 60000,
	   "a long-poll answers this much before min(wait, max_wait) (at most a quarter "
	   "of the wait), so a proxy whose timeout equals the wait sees the answer first"),
	KB("poll.cache_max_body", TG_CFG_SIZE, poll_cache_max_body, "1MB", 1024, 1073741824.0,
	   "largest answer shared from memory (bigger: each caller streams its own)"),
	KB("poll.cache_max_bytes", TG_CFG_SIZE, poll_cache_max_bytes, "64MB", 0,
	   1099511627776.0, "bytes of answers held in all; the least recently used answer no "
	   "request waits on is evicted first (0: none kept)"),
	KB("poll.spool_max_bytes", TG_CFG_SIZE, poll_spool_max_bytes, "4GB", 0,
	   1099511627776.0, "final answers larger than cache_max_body are written once to "
	   "files in spool_dir and every caller is served from there; bytes of all spool "
	   "files at once (an answer that outgrows it: each caller streams its own; 0: no "
	   "spool)"),
	K("poll.spool_dir", TG_CFG_STR, poll_spool_dir, "spool",
	  "directory of the spool files (relative to this file; created 0700, files 0600, "
	  "leftovers removed at start)"),
	KB("poll.terminal_ttl", TG_CFG_DURATION, poll_terminal_ttl, "10m", 1000, 8.64e7,
	   "how long a final answer is served without asking the vendor"),
	KB("poll.max_entries", TG_CFG_INT, poll_max_entries, "10000", 1, 1e7,
	   "jobs tracked at once"),
	K("poll.ownership", TG_CFG_BOOL, poll_ownership, "true",
	  "a job created through the gateway is served only to the key that created it"),
	K("poll.ownership_db", TG_CFG_STR, owners_db, "owners.db",
	  "who created each job, SQLite (relative to this file; read at start)"),
	KB("poll.ownership_keep", TG_CFG_DURATION, owners_keep, "30d", 60000, 3.1536e11,
	   "how long a job's creator is remembered; at least the vendor's retention of jobs"),
	KB("poll.ownership_max", TG_CFG_INT, owners_max, "1000000", 1, 1e9,
	   "jobs remembered per API key; beyond, that key's oldest are forgotten first"),
	K("webhooks.mode", TG_CFG_STR, wh_mode_str, "deliver",
	  "callbackUrl of exports: deliver (the gateway), forward (to the vendor) or relay"),
	K("webhooks.db", TG_CFG_STR, wh_db, "tidegate.db",
	  "webhook outbox, SQLite (relative to this file; payloads in <db>.payloads/)"),
	K("webhooks.schedule", TG_CFG_STRLIST, wh_schedule, "0s,5s,5m,30m,2h,5h,10h,10h",
	  "delay before each delivery attempt; dead letter after the last"),
	KB("webhooks.attempt_timeout", TG_CFG_DURATION, wh_attempt_timeout, "15s", 100, 3.6e6,
	   "DNS, connect, and silence while sending or awaiting the answer, per attempt"),
	KB("webhooks.lease", TG_CFG_DURATION, wh_lease, "60s", 1000, 3.6e6,
	   "an attempt's claim on its job; after a crash the job is retried once it expires"),
	KB("webhooks.max_inflight", TG_CFG_INT, wh_max_inflight, "8", 1, 1024,
	   "delivery attempts at once"),
	KB("webhooks.attempt_deadline", TG_CFG_DURATION, wh_attempt_deadline, "60s", 100, 8.64e7,
	   "a whole delivery attempt (DNS to answer), plus a second per MiB of payload; at "
	   "least attempt_timeout"),
	KB("webhooks.max_inflight_per_host", TG_CFG_INT, wh_max_inflight_per_host, "0", 0, 1024,
	   "delivery attempts at once to one callback host, per instance; 0: a quarter of "
	   "max_inflight (at least 1)"),
	KB("webhooks.payload_max_bytes", TG_CFG_SIZE, wh_payload_max_bytes, "4GB", 1024,
	   1099511627776.0 * 64, "export data held for delivery in all (waiting, ready and dead "
	   "jobs); at it, new callbackUrls are refused with 503 WEBHOOK_QUOTA"),
	KB("webhooks.payload_key_share", TG_CFG_DOUBLE, wh_payload_key_share, "0.5", 0.001, 1,
	   "share of payload_max_bytes the jobs of one API key may hold (0 to 1)"),
	K("webhooks.allow", TG_CFG_STRLIST, wh_allow, NULL,
	  "egress allow-list: CIDRs, addresses, host names, *.suffixes (else special ranges "
	  "are refused)"),
	K("webhooks.secret", TG_CFG_SECRET, wh_secret, NULL,
	  "signing secrets for keys without their own: whsec_ lines, current first"),
	KB("webhooks.poll_interval", TG_CFG_DURATION, wh_poll_interval, "2s", 10, 3.6e6,
	   "deliver mode: poll a pending export this often (growing with its age)"),
	KB("webhooks.payload_timeout", TG_CFG_DURATION, wh_payload_timeout, "24h", 1000, 2.592e9,
	   "give a job up (dead) when its export data has not come after this long"),
	K("webhooks.public_url", TG_CFG_STR, wh_public_url, NULL,
	  "relay mode: base URL the vendor reaches this gateway's data exchange listener at"),
	KB("webhooks.max_payload", TG_CFG_SIZE, wh_max_payload, "1GB", 1024, 1099511627776.0,
	   "largest export data stored for delivery (bigger: the job is given up)"),
	KB("webhooks.retention", TG_CFG_DURATION, wh_retention, "7d", 60000, 3.1536e10,
	   "finished jobs (delivered, gone, dead) are purged this long after they end"),
	K("webhooks.ca_file", TG_CFG_STR, wh_ca_file, NULL,
	  "PEM CA bundle for https callbacks (default: system)"),
	K("runs.db", TG_CFG_STR, runs_db, "runs.db",
	  "simulation run registry (SQLite; relative to this file)"),
	K("runs.archive", TG_CFG_BOOL, runs_archive, "false",
	  "keep the results of completed runs past the vendor's retention"),
	KB("runs.archive_max", TG_CFG_SIZE, runs_archive_max, "16MB", 1024, 1099511627776.0,
	   "largest results archived for one run"),
	KB("runs.archive_max_total", TG_CFG_SIZE, runs_archive_max_total, "1GB", 1024,
	   1099511627776.0 * 64, "bytes of archived results kept in all (a run that does not fit "
	   "stays unarchived)"),
	KB("runs.archive_keep", TG_CFG_DURATION, runs_archive_keep, "90d", 60000, 3.1536e11,
	   "archived runs are purged this long after the vendor's expiry"),
	KB("runs.grace", TG_CFG_DURATION, runs_grace, "7d", 0, 3.1536e11,
	   "runs without an archive are purged this long after the vendor's expiry"),
	KB("runs.retention_interval", TG_CFG_DURATION, runs_retention_interval, "1m", 100, 8.64e7,
	   "how often runs past the vendor's retention are marked EXPIRED and old rows purged"),
	K("runs.sync", TG_CFG_STR, runs_sync, "full",
	  "SQLite synchronous mode of the registry: full (survives power loss) or normal"),
	KB("runs.sweep_max_variants", TG_CFG_INT, runs_sweep_max_variants, "100", 1, 1000,
	   "most variants one sweep may have"),
	KB("runs.sweep_concurrency", TG_CFG_INT, runs_sweep_concurrency, "4", 1, 64,
	   "variants of a sweep in flight at once when the sweep does not say"),
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

static void
strlist_wipe(struct tg_strlist *l)
{
	size_t i;

	for (i = 0; i < l->n; i++) {
		explicit_bzero(l->v[i], strlen(l->v[i]));
		free(l->v[i]);
	}
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

/* The features' checks of their keys (gw_config_add_check), in order. */
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

const struct tg_strlist *
gw_config_wh_secrets(const struct gw_config *cfg, const char *name)
{
	size_t i;

	if (name != NULL && strcmp(name, "global") == 0)
		return cfg->wh_secrets.n > 0 ? &cfg->wh_secrets : NULL;
	for (i = 0; name != NULL && i < cfg->nkeys; i++)
		if (cfg->keys[i].name != NULL && strcmp(cfg->keys[i].name, name) == 0)
			return cfg->keys[i].wh_secrets.n > 0 ? &cfg->keys[i].wh_secrets : NULL;
	return NULL;
}

const char *
gw_config_wh_secret_ref(const struct gw_config *cfg, const char *key)
{
	if (key != NULL && gw_config_wh_secrets(cfg, key) != NULL)
		return key;
	return gw_config_wh_secrets(cfg, "global") != NULL ? "global" : NULL;
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
	static const char *const syncs[] = { "full", "normal", NULL };
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
	gw_config_check_choice(rep, "runs.sync", c->runs_sync, syncs);
	for (i = 0; i < nchecks; i++)
		checks[i](c, rep);	/* the features' own keys */
	gw_config_check_more(c, rep);
}

int
gw_config_load(const char *path, struct gw_config *cfg, struct tg_cfg_report *rep)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->path = tg_xstrdup(path);
	if (rep->file == NULL)
		rep->file = path;
	tg_config_load_report(path, gw_config_keys, gw_config_nkeys, cfg, rep);
	if (rep->bound)
		check(cfg, rep);
	return rep->n > 0 ? -1 : 0;
}

void
gw_config_free(struct gw_config *cfg)
{
	size_t i;

	for (i = 0; cfg->keys != NULL && i < cfg->nkeys; i++) {
		strlist_wipe(&cfg->keys[i].wh_secrets);
		if (cfg->keys[i].webhook_secret != NULL)
			explicit_bzero(cfg->keys[i].webhook_secret,
			    strlen(cfg->keys[i].webhook_secret));
	}
	strlist_wipe(&cfg->wh_secrets);
	if (cfg->wh_secret != NULL)
		explicit_bzero(cfg->wh_secret, strlen(cfg->wh_secret));
	if (cfg->state_url != NULL)
		explicit_bzero(cfg->state_url, strlen(cfg->state_url));
	free(cfg->wh_schedule_ms);
	cfg->wh_schedule_ms = NULL;
	free(cfg->wh_db_path);
	cfg->wh_db_path = NULL;
	free(cfg->runs_db_path);
	cfg->runs_db_path = NULL;
	free(cfg->owners_db_path);
	cfg->owners_db_path = NULL;
	free(cfg->spool_dir_path);
	cfg->spool_dir_path = NULL;
	tg_config_free(gw_config_keys, gw_config_nkeys, cfg);
	free(cfg->path);
	cfg->path = NULL;
}
