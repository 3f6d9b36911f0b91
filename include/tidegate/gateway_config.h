/*
 * gateway_config.h - the gateway's configuration (conf/tidegate.yaml): a plain
 * struct filled by the core loader from the key table in config.c, which
 * is also the source of docs/configuration.md.
 */
#ifndef TIDEGATE_GW_CONFIG_H
#define TIDEGATE_GW_CONFIG_H

#include <stdint.h>

#include "tidegate/config.h"
#include "tidegate/ops.h"
#include "tidegate/routes.h"
#include "tidegate/sim.h"

struct gw_key_cfg {
	char *name;
	char *sha256;		/* hex digest of the key */
	struct tg_strlist services;
	char *webhook_secret;	/* as configured: whsec_ lines, current first */
	struct tg_strlist wh_secrets;	/* not a key: webhook_secret split into lines */
};

enum gw_wh_mode { GW_WH_DELIVER, GW_WH_FORWARD, GW_WH_RELAY };

struct gw_service_cfg {
	char *url, *fallback_url;
	char *auth_url;		/* simulation: base URL of the token endpoint */
	char *token_url;	/* simulation: the token endpoint's whole URL, or NULL */
	char *scope, *audience;	/* simulation: sent with the token request, or NULL */
	char *client_auth;	/* simulation: client_secret_post or client_secret_basic */
	char *id;		/* username / client_id */
	char *secret;		/* password / client_secret */
	int caller_tokens;	/* forward bearers that are not gateway keys */
	int64_t caller_max_body;	/* a body sent with a caller's own token */
	int64_t login_max_body;		/* a caller's login body */
	int passthrough;	/* forward unknown paths (else 404) */
	int login_cache;	/* answer callers' own logins from a cache */
	int64_t refresh_before, refresh_jitter, login_timeout, login_retry_after;
	int64_t replay_max_body;
	char *routes[TG_OP_COUNT];	/* upstream path templates by op */
	int validate;		/* check requests before they are sent */
	int strict;		/* dex: unknown export members are errors */
	char *wp_status_field;	/* dex: "status" or "statuses" for work packages */
	struct tg_case_rules cases;	/* sim: fixableType kinds, entry rules */
	long long remember_cases;	/* sim: partial cases kept for the diff */
};

struct gw_config {
	char *path;		/* the file loaded (not a key) */
	char *listen_dex, *listen_sim, *listen_admin;
	char *log_level;
	char *user;		/* the account to become when started as root */
	int access_log;
	int access_log_probes;	/* the admin's /healthz, /readyz, /metrics logged too */
	int64_t max_body;
	int64_t admin_max_body;	/* a body on the admin listener */
	int64_t drain_timeout;
	int64_t client_header_timeout, client_body_timeout, keepalive_timeout;
	int64_t client_body_min_rate, client_body_rate_grace;	/* bytes/s (0: none), ms */
	long long max_clients, max_clients_per_ip;
	int64_t client_send_timeout;	/* 0: never */
	char *upstream;		/* "embedded" or "remote" */
	char *emulator_config;	/* relative to this file's directory */
	struct gw_service_cfg dex, sim;
	int64_t connect_timeout, read_timeout, queue_timeout;
	long long max_conns, max_idle, max_conns_per_key;
	/* failover.*: two origins used as one (upstream.h) */
	long long eject_after, retry_budget_pct, retry_budget_min;
	int64_t eject_time, eject_max, probe_interval, retry_after_max;
	char *probe_path;
	int tls_verify;
	char *tls_ca_file;
	/* tls_listen.*: TLS on the gateway's own listeners */
	char *ltls_cert, *ltls_key, *ltls_client_ca;
	struct tg_strlist ltls_on;	/* listener names */
	struct gw_key_cfg *keys;
	size_t nkeys;
	long long max_problems;	/* problems listed in one 400 */
	int64_t check_worker_min;	/* bodies this large are checked off the loop */
	int poll_enabled, poll_ownership;
	int64_t poll_interval, poll_max_interval, poll_backoff_after, poll_max_wait;
	int64_t poll_wait_margin, poll_spool_max_bytes;
	char *poll_spool_dir;	/* large final answers (poll.spool_dir) */
	int64_t poll_cache_max_body, poll_cache_max_bytes, poll_terminal_ttl;
	long long poll_max_entries;
	char *owners_db;	/* correlation ownership (poll.ownership_db) */
	int64_t owners_keep;
	long long owners_max;
	/* webhooks (callbackUrl) */
	char *wh_mode_str, *wh_db, *wh_public_url, *wh_ca_file;
	struct tg_strlist wh_schedule, wh_allow;
	char *wh_secret;
	int64_t wh_attempt_timeout, wh_lease, wh_poll_interval, wh_payload_timeout;
	int64_t wh_max_payload, wh_retention;
	long long wh_max_inflight;
	int64_t wh_attempt_deadline;	/* webhooks.attempt_deadline */
	long long wh_max_inflight_per_host;
	int64_t wh_payload_max_bytes;	/* webhooks.payload_max_bytes */
	double wh_payload_key_share;
	/* simulation run registry */
	char *runs_db;
	int runs_archive;
	int64_t runs_archive_max, runs_archive_max_total, runs_archive_keep, runs_grace;
	int64_t runs_retention_interval;
	char *runs_sync;
	long long runs_sweep_max_variants, runs_sweep_concurrency;
	/* the state seam */
	char *state_url;	/* NULL: SQLite; a secret (the URL may hold a password) */
	char *state_instance;	/* NULL in the file: host:pid, set by gw_config_load */
	int64_t state_timeout;	/* every state operation's deadline (ms) */
	/* tracing.*: spans exported over OTLP/HTTP JSON (otlp.c) */
	char *otlp_url;		/* NULL: no tracing */
	char *otlp_service;	/* service.name */
	int64_t otlp_flush;	/* ms between exports */
	long long otlp_max_queue;	/* spans held waiting for export */
	double otlp_sample;		/* share of new traces exported, 0..1 */
	/* derived by gw_config_load (not keys) */
	enum gw_wh_mode wh_mode;
	char *wh_db_path;		/* wh_db resolved against the file's directory */
	char *runs_db_path;		/* runs_db resolved likewise */
	char *owners_db_path;		/* owners_db resolved likewise */
	char *spool_dir_path;		/* poll_spool_dir resolved likewise */
	int64_t *wh_schedule_ms;
	size_t wh_nschedule;
	struct tg_strlist wh_secrets;	/* wh_secret split into lines, current first */
};

/**
 * Load and check path into cfg (zeroed here), adding every problem to rep
 * (borrowed; rep->file defaults to path): the one path of the start, -t
 * and SIGHUP. Returns -1 when rep holds a problem; cfg must still be freed.
 */
int gw_config_load(const char *path, struct gw_config *cfg, struct tg_cfg_report *rep);
void gw_config_free(struct gw_config *cfg);
/** The webhook secrets of key name ("global": webhooks.secret); NULL when none. */
const struct tg_strlist *gw_config_wh_secrets(const struct gw_config *cfg, const char *name);
/** Whose webhook secrets sign for API key (borrowed, may be NULL): its
 * own, "global", or NULL when none is configured (borrowed from cfg or key). */
const char *gw_config_wh_secret_ref(const struct gw_config *cfg, const char *key);
/** A feature's check of its own keys: problems into rep (borrowed); it may
 * fill the parsed fields of c (borrowed) its keys feed. */
typedef void (*gw_config_check_fn)(struct gw_config *c, struct tg_cfg_report *rep);
/** Run fn in every later gw_config_load (once per process, before the
 * first load: the entry point adds each feature's check). */
void gw_config_add_check(gw_config_check_fn fn);
/* config_check.c: checks that look past the key table. */
/** 0 when v (borrowed) is one of choices (NULL-terminated); else a problem at key. */
int gw_config_check_choice(struct tg_cfg_report *rep, const char *key, const char *v,
    const char *const *choices);
/** keys[i].services: known names, at least one. */
void gw_config_check_services(const struct gw_config *c, size_t i, struct tg_cfg_report *rep);
/** Files, databases, URLs, route templates, listeners, the embedded emulator's
 * file; resolves tls.ca_file, webhooks.ca_file and the databases against the
 * file's directory (c and rep borrowed; c's resolved paths are owned by c). */
void gw_config_check_more(struct gw_config *c, struct tg_cfg_report *rep);
/** 1 when addr ("host:port", borrowed) is a loopback address. */
int gw_config_addr_loopback(const char *addr);
struct tg_keyring;
/** Add configured key k (borrowed) to kr (borrowed; it copies what it
 * keeps): the one place a configured key becomes a keyring entry, for the
 * start, a reload and the configuration check. 0, or -1 with err: a bad
 * digest, no known service, a digest another key has already. */
int gw_config_key_add(struct tg_keyring *kr, const struct gw_key_cfg *k, struct tg_err *err);
extern const struct tg_cfg_key gw_config_keys[];
extern const size_t gw_config_nkeys;

#endif
