/*
 * owners_schema.c - the SQLite file of correlation ownership (its
 * records are owners.c's, written once for every backend): the schema
 * and its migrations (sq_conn.c runs them). AUTOINCREMENT: ids never go
 * back, so the smallest id is the oldest record even after the newest was
 * deleted. Version 1 had one bound for all keys (the oldest rows of any
 * key went first); version 2 numbers each key's records in owner_keys,
 * the existing ones in the order they were made.
 */
#include <stddef.h>

#include "sq.h"

static const char *const v1[] = {
	"CREATE TABLE IF NOT EXISTS owners ("
	" id INTEGER PRIMARY KEY AUTOINCREMENT,"
	" family TEXT NOT NULL,"
	" correlation_id TEXT NOT NULL,"
	" api_key TEXT NOT NULL,"
	" created_at INTEGER NOT NULL,"
	" UNIQUE (family, correlation_id))",
	"CREATE INDEX IF NOT EXISTS owners_created ON owners (created_at)",
	NULL,
};

static const char *const v2[] = {
	"ALTER TABLE owners ADD COLUMN key_seq INTEGER NOT NULL DEFAULT 0",
	"CREATE TABLE owner_keys (api_key TEXT PRIMARY KEY, seq INTEGER NOT NULL)",
	"UPDATE owners SET key_seq = n.rn FROM (SELECT id, row_number() OVER "
	"(PARTITION BY api_key ORDER BY id) AS rn FROM owners) AS n WHERE owners.id = n.id",
	"INSERT INTO owner_keys (api_key, seq) SELECT api_key, max(key_seq) FROM owners "
	"GROUP BY api_key",
	"CREATE INDEX owners_key ON owners (api_key, key_seq)",
	NULL,
};

/* The quota engine's figures (../quota.c), here because this file is
 * always open and a day's count must survive a restart. */
static const char *const v3[] = {
	"CREATE TABLE quota_rate (name TEXT PRIMARY KEY, tat INTEGER NOT NULL,"
	" granted INTEGER NOT NULL DEFAULT 0)",
	"CREATE TABLE quota_day (name TEXT NOT NULL, day INTEGER NOT NULL,"
	" used INTEGER NOT NULL, granted INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (name, day))",
	"CREATE TABLE quota_slots (name TEXT NOT NULL, instance TEXT NOT NULL,"
	" held INTEGER NOT NULL, granted INTEGER NOT NULL DEFAULT 0, expires INTEGER NOT NULL,"
	" PRIMARY KEY (name, instance))",
	"CREATE TABLE quota_members (instance TEXT PRIMARY KEY, until INTEGER NOT NULL)",
	NULL,
};

/* A rate's shares (../quota.c): each instance's demand and share. */
static const char *const v4[] = {
	"CREATE TABLE quota_share (name TEXT NOT NULL, instance TEXT NOT NULL,"
	" demand INTEGER NOT NULL, granted INTEGER NOT NULL, expires INTEGER NOT NULL,"
	" PRIMARY KEY (name, instance))",
	NULL,
};

static const char *const *const versions[] = { v1, v2, v3, v4 };

const struct sq_schema tg_state_sq_owners_schema = {
	.name = "owners", .nversions = 4, .versions = versions,
};
