/*
 * config.h - YAML configuration through libyaml into plain structs.
 *
 * A binary describes its configuration as a table of keys (dotted path,
 * type, offset into its struct, default, bounds). tg_config_load parses
 * the file, checks every key against the table (unknown keys are errors,
 * with a "did you mean"), fills defaults, and reports the first problem as
 * "file:line:col: key: message". Lists of maps use a sub-table.
 */
#ifndef TIDEGATE_CONFIG_H
#define TIDEGATE_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tidegate/util.h"

enum tg_cfg_type {
	TG_CFG_STR,		/* char *, malloc'd */
	TG_CFG_INT,		/* long long, bounded by min/max */
	TG_CFG_BOOL,		/* int 0/1: true/false/yes/no/on/off */
	TG_CFG_DOUBLE,		/* double, bounded by min/max */
	TG_CFG_DURATION,	/* int64_t ms: 250ms, 5s, 2m, 1h, 31d; bare number = s */
	TG_CFG_SIZE,		/* int64_t bytes: 512, 64k, 10MB, 1GiB */
	TG_CFG_ADDR,		/* char * "host:port", port checked */
	TG_CFG_SECRET,		/* char *: from KEY, KEY_env (variable) or KEY_file */
	TG_CFG_STRLIST,		/* struct tg_strlist */
	TG_CFG_LIST,		/* array of structs described by sub; see below */
};

/*
 * Mappings and sequences nest at most this deep (the top-level mapping is
 * level 1). A deeper file is refused with the position of the first level
 * too many, so a hostile file cannot exhaust the loader's stack.
 */
#define TG_CONFIG_MAX_DEPTH 64

struct tg_strlist {
	char **v;
	size_t n;
};

struct tg_cfg_key {
	const char *path;	/* dotted, relative to the enclosing map */
	enum tg_cfg_type type;
	size_t off;		/* offset of the field in the struct */
	const char *def;	/* default as YAML scalar text; NULL: none */
	int required;
	double min, max;	/* bounds for INT/DOUBLE/DURATION(ms)/SIZE; min==max: none */
	/* TG_CFG_LIST: field at off is a void * array of elem_size items,
	 * its count a size_t at count_off; each item is filled by sub. */
	const struct tg_cfg_key *sub;
	size_t nsub;
	size_t elem_size;
	size_t count_off;
	const char *doc;	/* one line, for docs/configuration.md */
};

/**
 * Load path into out (zeroed by the caller) using the table. On error
 * returns -1 with "file:line:col: key: message" in err; out must still be
 * released with tg_config_free.
 */
int tg_config_load(const char *path, const struct tg_cfg_key *keys, size_t nkeys,
    void *out, struct tg_err *err);
/** Same, from a string (name is used in messages). */
int tg_config_load_string(const char *name, const char *yaml, const struct tg_cfg_key *keys,
    size_t nkeys, void *out, struct tg_err *err);
/** Fill defaults only (no file). */
int tg_config_defaults(const struct tg_cfg_key *keys, size_t nkeys, void *out,
    struct tg_err *err);
/** Free every heap field the table describes. */
void tg_config_free(const struct tg_cfg_key *keys, size_t nkeys, void *out);

/** Write the table as Markdown rows (key, type, default, meaning) to out. */
void tg_config_doc(const struct tg_cfg_key *keys, size_t nkeys, FILE *out);

/** Parse helpers, exposed for tests and for query parameters. */
int tg_config_parse_duration(const char *s, int64_t *ms);
int tg_config_parse_size(const char *s, int64_t *bytes);
int tg_config_parse_bool(const char *s, int *b);
/** Split "host:port" / "[v6]:port"; host and port are malloc'd. */
int tg_config_parse_addr(const char *s, char **host, int *port);

#endif
