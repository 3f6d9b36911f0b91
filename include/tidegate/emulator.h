/*
 * emulator.h - tidegate-emulator as a library: the vendor's data exchange
 * and simulation APIs on their own listeners, on the caller's event loop.
 * Used by src/emulator/main.c and, embedded, by src/tidegate.c (the gateway
 * checks the embedded emulator's config file with its key table).
 */
#ifndef TIDEGATE_EMULATOR_H
#define TIDEGATE_EMULATOR_H

#include <stddef.h>
#include <stdint.h>

#include "tidegate/config.h"
#include "tidegate/util.h"

struct event_base;
struct tg_emu;

struct tg_emu_user {
	char *username;
	char *password;
};

struct tg_emu_client {
	char *id;
	char *secret;
};

/** Sizes of a project's seeded data set (deterministic from seed). */
struct tg_emu_project {
	char *id;
	long long seed;
	long long sites, assets_per_site, activity_categories, personnel, timesheets;
	long long work_order_sequences, work_orders, work_packages, activities;
};

/* Filled by tg_config_load with tg_emu_config_keys; owns its strings and
 * arrays: tg_config_free(tg_emu_config_keys, tg_emu_config_nkeys, cfg). */
struct tg_emu_config {
	char *listen_dex, *listen_sim, *listen_design, *listen_auth;
	char *listen_dex_tls;		/* data exchange over TLS; NULL: off */
	char *tls_cert_file, *tls_key_file;	/* PEM, for listen_dex_tls */
	char *log_level;
	int64_t max_body;
	char *dex_jwt_secret;		/* random per start when unset */
	int64_t dex_token_lifetime;	/* ms */
	struct tg_emu_user *users;
	size_t nusers;
	struct tg_emu_client *clients;
	size_t nclients;
	int64_t sim_token_lifetime;	/* ms */
	struct tg_emu_project *projects;
	size_t nprojects;
	int64_t export_delay, export_expiry;	/* ms */
	long long export_chunk_records;
	long long import_rows_per_second;
	int64_t sim_run_time, sim_retention;	/* ms */
	double sim_failure_rate;	/* share of valid runs that fail anyway */
	char *data_dir;			/* jobs and clock kept on disk; NULL: memory only */
};

/* The key table (static, borrowed). */
extern const struct tg_cfg_key tg_emu_config_keys[];
extern const size_t tg_emu_config_nkeys;

/** Start the listeners on base. base and cfg are borrowed and must outlive the
 * emulator; the caller owns the result: tg_emu_free(). NULL with err. */
struct tg_emu *tg_emu_new(struct event_base *base, const struct tg_emu_config *cfg,
    struct tg_err *err);
/** Takes ownership of emu: closes its listeners and frees it; NULL-safe. */
void tg_emu_free(struct tg_emu *emu);

#endif
