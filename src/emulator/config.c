/*
 * config.c - the emulator's configuration keys (conf/emulator.yaml).
 * The table is the single source of truth: defaults, bounds and the one-line
 * docs that docs/emulator.md repeats.
 */
#include <stddef.h>

#include "tidegate/emulator.h"

#define K(p, t, f, d, doc) { p, t, offsetof(struct tg_emu_config, f), d, 0, 0, 0, \
	NULL, 0, 0, 0, doc }
#define KB(p, t, f, d, lo, hi, doc) { p, t, offsetof(struct tg_emu_config, f), d, 0, lo, \
	hi, NULL, 0, 0, 0, doc }
#define KL(p, f, sub, type, cnt, doc) { p, TG_CFG_LIST, offsetof(struct tg_emu_config, f), \
	NULL, 0, 0, 0, sub, sizeof(sub) / sizeof(sub[0]), sizeof(type), \
	offsetof(struct tg_emu_config, cnt), doc }

static const struct tg_cfg_key user_keys[] = {
	{ "username", TG_CFG_STR, offsetof(struct tg_emu_user, username), NULL, 1, 0, 0,
	  NULL, 0, 0, 0, "login name" },
	{ "password", TG_CFG_SECRET, offsetof(struct tg_emu_user, password), NULL, 1, 0, 0,
	  NULL, 0, 0, 0, "password (or password_env / password_file)" },
};

static const struct tg_cfg_key client_keys[] = {
	{ "id", TG_CFG_STR, offsetof(struct tg_emu_client, id), NULL, 1, 0, 0,
	  NULL, 0, 0, 0, "OAuth2 client_id" },
	{ "secret", TG_CFG_SECRET, offsetof(struct tg_emu_client, secret), NULL, 1, 0, 0,
	  NULL, 0, 0, 0, "client_secret (or secret_env / secret_file)" },
};

#define P(p, f, d, lo, hi, doc) { p, TG_CFG_INT, offsetof(struct tg_emu_project, f), d, 0, \
	lo, hi, NULL, 0, 0, 0, doc }
static const struct tg_cfg_key project_keys[] = {
	{ "id", TG_CFG_STR, offsetof(struct tg_emu_project, id), NULL, 1, 0, 0,
	  NULL, 0, 0, 0, "project id (projectId in requests)" },
	P("seed", seed, "1", 0, 1e15, "seed of the deterministic data set"),
	P("sites", sites, "5", 1, 1e6, "sites S-1 ... S-n"),
	P("assets_per_site", assets_per_site, "4", 0, 1e4, "assets per site"),
	P("activity_categories", activity_categories, "8", 0, 1e5, "activity categories"),
	P("personnel", personnel, "20", 0, 1e6, "personnel records"),
	P("timesheets", timesheets, "30", 0, 1e7, "timesheets"),
	P("work_order_sequences", work_order_sequences, "3", 0, 1e5, "work order sequences"),
	P("work_orders", work_orders, "12", 0, 1e7, "work orders"),
	P("work_packages", work_packages, "6", 0, 1e6, "work packages"),
	P("activities", activities, "50", 0, 1e8, "activities (1,000,000 for benchmarks)"),
};

const struct tg_cfg_key tg_emu_config_keys[] = {
	K("listen.dex", TG_CFG_ADDR, listen_dex, "127.0.0.1:7080", "data exchange API"),
	K("listen.sim", TG_CFG_ADDR, listen_sim, "127.0.0.1:7081", "simulation platform host"),
	K("listen.design", TG_CFG_ADDR, listen_design, "127.0.0.1:7082",
	  "design platform host (same API and state as sim)"),
	K("listen.auth", TG_CFG_ADDR, listen_auth, "127.0.0.1:7083",
	  "simulation token endpoint (auth_url)"),
	K("listen.dex_tls", TG_CFG_ADDR, listen_dex_tls, NULL,
	  "data exchange API over TLS (same routes and state as listen.dex); unset: off"),
	K("tls.cert_file", TG_CFG_STR, tls_cert_file, NULL,
	  "PEM certificate chain of the TLS listener"),
	K("tls.key_file", TG_CFG_STR, tls_key_file, NULL, "PEM private key of the TLS listener"),
	K("data_dir", TG_CFG_PATH, data_dir, NULL,
	  "directory keeping exports, imports, runs, token keys and the clock offset "
	  "across restarts (relative to this file); unset: memory only"),
	K("log_level", TG_CFG_STR, log_level, "info", "debug, info, warn, error or off"),
	KB("max_body", TG_CFG_SIZE, max_body, "256MB", 1024, 4294967296.0,
	   "largest request body accepted (413 above)"),
	K("dex.jwt_secret", TG_CFG_SECRET, dex_jwt_secret, NULL,
	  "HS256 key of data exchange tokens; random per start when unset"),
	KB("dex.token_lifetime", TG_CFG_DURATION, dex_token_lifetime, "1h", 1000, 3.2e10,
	   "lifetime (exp - iat) of data exchange JWTs"),
	KL("users", users, user_keys, struct tg_emu_user, nusers,
	   "data exchange accounts for POST /authenticate"),
	KL("clients", clients, client_keys, struct tg_emu_client, nclients,
	   "simulation API clients for the token endpoint"),
	KB("sim.token_lifetime", TG_CFG_DURATION, sim_token_lifetime, "1h", 1000, 3.2e10,
	   "expires_in of simulation access tokens"),
	KL("projects", projects, project_keys, struct tg_emu_project, nprojects,
	   "projects and the size of their seeded data"),
	KB("export.delay", TG_CFG_DURATION, export_delay, "2s", 0, 8.64e8,
	   "time from an export request until GET /export has the data"),
	KB("export.expiry", TG_CFG_DURATION, export_expiry, "1h", 1000, 3.2e10,
	   "time after completion until an export is gone (404)"),
	KB("export.chunk_records", TG_CFG_INT, export_chunk_records, "500", 1, 1e6,
	   "records generated per streamed chunk"),
	KB("import.rows_per_second", TG_CFG_INT, import_rows_per_second, "100", 1, 1e9,
	   "how fast imports are processed (status counters move at this rate)"),
	KB("sim.run_time", TG_CFG_DURATION, sim_run_time, "5s", 0, 8.64e8,
	   "time a simulation run stays in progress"),
	KB("sim.retention", TG_CFG_DURATION, sim_retention, "30d", 1000, 3.2e11,
	   "time after submission until a run and its results are deleted"),
	KB("sim.failure_rate", TG_CFG_DOUBLE, sim_failure_rate, "0", 0, 1,
	   "share of valid runs that fail anyway (deterministic by simulation id)"),
};

const size_t tg_emu_config_nkeys = sizeof(tg_emu_config_keys) / sizeof(tg_emu_config_keys[0]);
