/*
 * gateway_config.h - the gateway's configuration (conf/tidegate.yaml): a plain
 * struct of the core's keys filled by the core loader from the key table in
 * config.c, and one settings struct per feature, filled from the key table
 * the feature defines (struct gw_config_def, h2o's configurators are the
 * model). The tables together are the source of docs/configuration.md (-K).
 */
#ifndef TIDEGATE_GW_CONFIG_H
#define TIDEGATE_GW_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "tidegate/config.h"
#include "tidegate/ops.h"
#include "tidegate/routes.h"
#include "tidegate/sim.h"

struct gw_key_cfg {
	char *name;
	char *sha256;		/* hex digest of the key */
	struct tg_strlist services;
};

struct gw_config;
struct tg_cidrs;

/*
 * A feature's configuration: the keys of its own sections (poll.*,
 * webhooks.*; a list the core has, such as keys[], may get keys of its
 * own), parsed into a settings struct of its own. Defined once per process
 * before the first load (gw_config_define); every later load (the start,
 * -t, SIGHUP) reads its keys with the core's, in one namespace (an unknown
 * key is unknown to all), and -K lists them after the core's.
 */
struct gw_config_def {
	const char *name;		/* the feature's: "jobs", "webhook", "runs" */
	const struct tg_cfg_key *keys;	/* paths from the file's root; offsets into
					 * its settings struct */
	size_t nkeys;
	size_t size;			/* bytes of its settings struct */
	/* Its checks across keys and what it derives (resolved paths, parsed
	 * lists), problems into rep: c (the core's part) read only, s its
	 * settings. Runs with the core's checks, so "-t" passing means the
	 * configuration will load. NULL: none. */
	void (*check)(const struct gw_config *c, void *s, struct tg_cfg_report *rep);
	/* Free what check derived (the table's own fields are freed by the
	 * core). NULL: nothing derived. */
	void (*cleanup)(void *s);
};

/* Feature configurations a process may define. */
#define GW_CONFIG_MAX_DEFS 8

/* A key table's row (tg_cfg_key) for field f of struct type st: path p,
 * type t, default d (YAML text; NULL: none), one line of doc; with
 * bounds lo..hi (GW_CFG_KEYB). */
#define GW_CFG_KEY(st, p, t, f, d, doc) \
	{ p, t, offsetof(st, f), d, 0, 0, 0, NULL, 0, 0, 0, doc }
#define GW_CFG_KEYB(st, p, t, f, d, lo, hi, doc) \
	{ p, t, offsetof(st, f), d, 0, lo, hi, NULL, 0, 0, 0, doc }

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
	double budget_rate;	/* vendor budget: requests/s (0: none) */
	long long budget_burst, budget_concurrent;	/* 0: a second's worth / none */
	int64_t budget_pause_max;	/* cap of a vendor's Retry-After pause, ms */
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
	char *pid_file;		/* NULL: none (a service manager knows the pid) */
	int access_log;
	int access_log_probes;	/* the admin's /healthz, /readyz, /metrics logged too */
	int64_t max_body;
	int64_t admin_max_body;	/* a body on the admin listener */
	int64_t drain_timeout;
	int64_t drain_delay;	/* SIGTERM: /readyz 503 this long before the drain */
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
	/* the client address behind load balancers (client_addr.c) */
	struct tg_strlist real_ip_from;		/* trusted proxies, as written */
	struct tg_strlist proxy_protocol_on;	/* listener names */
	struct tg_cidrs *real_ip;		/* real_ip_from parsed by the check
						 * (owned; NULL: none) */
	struct gw_key_cfg *keys;
	size_t nkeys;
	long long max_problems;	/* problems listed in one 400 */
	int64_t check_worker_min;	/* bodies this large are checked off the loop */
	/* the state seam */
	char *state_url;	/* NULL: SQLite; a secret (the URL may hold a password) */
	char *state_instance;	/* NULL in the file: host:pid, set by gw_config_load */
	int64_t state_timeout;	/* every state operation's deadline (ms) */
	char *state_listen_url;	/* NULL: state_url; a secret, as state_url */
	char *state_pooler;	/* "none" or "transaction" (checked) */
	int state_pooler_mode;	/* state_pooler as TG_STATE_POOLER_*, set by the check */
	/* tracing.*: spans exported over OTLP/HTTP JSON (otlp.c) */
	char *otlp_url;		/* NULL: no tracing */
	char *otlp_service;	/* service.name */
	int64_t otlp_flush;	/* ms between exports */
	long long otlp_max_queue;	/* spans held waiting for export */
	double otlp_sample;		/* share of new traces exported, 0..1 */
	/* the features' settings, in the order their configurations were
	 * defined (gw_config_define): settings[i] filled from def[i]'s keys,
	 * owned by this struct (gw_config_free) */
	const struct gw_config_def *def[GW_CONFIG_MAX_DEFS];
	void *settings[GW_CONFIG_MAX_DEFS];
	size_t ndefs;
};

/**
 * Load and check path into cfg (zeroed here), adding every problem to rep
 * (borrowed; rep->file defaults to path): the one path of the start, -t
 * and SIGHUP. Returns -1 when rep holds a problem; cfg must still be freed.
 */
int gw_config_load(const char *path, struct gw_config *cfg, struct tg_cfg_report *rep);
void gw_config_free(struct gw_config *cfg);
/**
 * Define a feature's configuration d (borrowed, static) for every later
 * gw_config_load and -K: once per process, before the first load (the
 * entry point defines each feature's; a second call with d does nothing).
 * 0, or -1 when GW_CONFIG_MAX_DEFS are defined.
 */
int gw_config_define(const struct gw_config_def *d);
/** The settings c (borrowed) holds for d (borrowed from c; NULL when d was
 * not defined before c was loaded). Before a gateway runs (the state's
 * options, -t); a running feature reaches its own by its id
 * (gw_feature_settings, gateway.h). */
const void *gw_config_settings(const struct gw_config *c, const struct gw_config_def *d);
/** Every key, the core's then each feature's, as Markdown rows into out
 * (borrowed): -K, the table in docs/configuration.md. */
void gw_config_doc(FILE *out);
/** tidegate -T: c (borrowed, loaded) as YAML on out (borrowed): every key
 * with its effective value, secrets redacted (config_print.c). */
void gw_config_print(const struct gw_config *c, FILE *out);
/** A check of the entry point's that looks past the gateway's keys (the
 * embedded emulator's file): problems into rep (borrowed); c borrowed. */
typedef void (*gw_config_check_fn)(struct gw_config *c, struct tg_cfg_report *rep);
/** Run fn in every later gw_config_load, after the features' checks (once
 * per process, before the first load). */
void gw_config_add_check(gw_config_check_fn fn);
/* config_check.c: checks that look past the key table. */
/** 0 when v (borrowed) is one of choices (NULL-terminated); else a problem at key. */
int gw_config_check_choice(struct tg_cfg_report *rep, const char *key, const char *v,
    const char *const *choices);
/** keys[i].services: known names, at least one. */
void gw_config_check_services(const struct gw_config *c, size_t i, struct tg_cfg_report *rep);
/** Files, URLs, route templates, listeners, the state; resolves
 * tls.ca_file and the listeners' TLS files against the file's directory
 * (c and rep borrowed; c's resolved paths are owned by c). */
void gw_config_check_more(struct gw_config *c, struct tg_cfg_report *rep);
/** file (borrowed) resolved against the directory of c's file (borrowed):
 * malloc'd, the caller's. For a feature's files and databases. */
char *gw_config_beside(const struct gw_config *c, const char *file);
/** *field (a file named by key; borrowed, owned by its struct) becomes its
 * path resolved beside c's file (gw_config_beside); a file that cannot be
 * read, or is not a regular file, is a problem at key in rep (borrowed). */
void gw_config_check_readable(const struct gw_config *c, char **field, const char *key,
    struct tg_cfg_report *rep);
/* client_addr.c */
/** real_ip_from parsed into c->real_ip (owned by c), proxy_protocol's
 * listeners known and not speaking TLS: problems into rep (borrowed). */
void gw_client_config_check(struct gw_config *c, struct tg_cfg_report *rep);
/** Free what gw_client_config_check derived (c borrowed). */
void gw_client_config_free(struct gw_config *c);
/** 1 when listener l's name ("dex", "sim", "admin") is in list (borrowed). */
int gw_config_names_listener(const struct tg_strlist *list, int l);
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
