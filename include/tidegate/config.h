/*
 * config.h - YAML configuration through libyaml into plain structs.
 *
 * A binary describes its configuration as a table of keys (dotted path,
 * type, offset into its struct, default, bounds). tg_config_load parses
 * the file, checks every key against the table (unknown keys are errors,
 * with a "did you mean" at any level), fills defaults, and reports problems
 * as "file:line:col: key: message". tg_config_load_report collects every
 * problem of a file (not only the first) and where each key was set, so a
 * binary's own cross-key checks can report with positions too (the
 * gateway's -t, start and SIGHUP use it). Lists of maps use a sub-table.
 */
#ifndef TIDEGATE_CONFIG_H
#define TIDEGATE_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tidegate/util.h"

enum tg_cfg_type {
	TG_CFG_STR,		/* char *, malloc'd (the struct owns it) */
	TG_CFG_INT,		/* long long, bounded by min/max */
	TG_CFG_BOOL,		/* int 0/1: true/false/yes/no/on/off */
	TG_CFG_DOUBLE,		/* double, bounded by min/max */
	TG_CFG_DURATION,	/* int64_t ms: 250ms, 5s, 2m, 1h, 31d; bare number = s */
	TG_CFG_SIZE,		/* int64_t bytes: 512, 64k, 10MB, 1GiB */
	TG_CFG_ADDR,		/* char * "host:port", port checked */
	TG_CFG_SECRET,		/* char *: from KEY, KEY_env (variable) or KEY_file */
	TG_CFG_STRLIST,		/* struct tg_strlist */
	TG_CFG_LIST,		/* array of structs described by sub; see below */
	TG_CFG_PATH,		/* char *, malloc'd; a relative path is taken from the
				 * config file's directory */
};

/*
 * Mappings and sequences nest at most this deep (the top-level mapping is
 * level 1). A deeper file is refused with the position of the first level
 * too many, so a hostile file cannot exhaust the loader's stack.
 */
#define TG_CONFIG_MAX_DEPTH 64

/* Owns v and its strings (tg_config_free of the enclosing struct). */
struct tg_strlist {
	char **v;
	size_t n;
};

/* A table row; tables are static and everything in them is borrowed. */
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

/*
 * One table of a binary that loads several (tg_config_load_tables_report):
 * its keys fill out. Keys of all tables share the file's one namespace: a
 * key no table knows is unknown, the "did you mean" looks in every table,
 * and a list at the same path in several tables (keys[]) is read from the
 * same items, each table filling its own array from its own sub-table.
 */
struct tg_cfg_table {
	const struct tg_cfg_key *keys;	/* borrowed */
	size_t nkeys;
	void *out;			/* borrowed; NULL for tg_config_doc_tables */
};

/* At most this many tables in one load. */
#define TG_CONFIG_MAX_TABLES 9

/* One problem found in a configuration file. */
struct tg_cfg_problem {
	size_t line, col;	/* 0:0 sorts first (problems without a position) */
	char *msg;		/* "file:line:col: key: message" (owned by the report) */
};

/* Where a key was set in the file: its value's position. */
struct tg_cfg_pos {
	char *key;		/* "webhooks.mode", "keys[0].sha256", "keys[0].services[1]"
				 * (owned by the report) */
	size_t line, col;
};

/* At most this many problems are kept (a final one says how many more). */
#define TG_CONFIG_MAX_PROBLEMS 100

/*
 * Every problem of one load, in file order, and the position of every key
 * the file set. Zero it, set file (borrowed), load, then release with
 * tg_config_report_cleanup.
 */
struct tg_cfg_report {
	const char *file;		/* borrowed: the name used in messages */
	struct tg_cfg_problem *v;
	size_t n, dropped;
	struct tg_cfg_pos *pos;
	size_t npos;
	int bound;			/* the YAML parsed and the keys were bound */
	int empty;			/* the file held no document, or only null */
};

/**
 * Load path into out (zeroed by the caller) using the table, adding every
 * problem to rep (borrowed; rep->file is set to path when NULL, so path must
 * then outlive rep's use). keys is borrowed. Returns -1 when rep holds a
 * problem. out (borrowed) owns what is filled in, either way: release it
 * with tg_config_free.
 */
int tg_config_load_report(const char *path, const struct tg_cfg_key *keys, size_t nkeys,
    void *out, struct tg_cfg_report *rep);
/** Same for nt tables (t borrowed, at most TG_CONFIG_MAX_TABLES; each out
 * zeroed by the caller and released with tg_config_free of its table). */
int tg_config_load_tables_report(const char *path, const struct tg_cfg_table *t, size_t nt,
    struct tg_cfg_report *rep);
/** Same, from a string (yaml borrowed for the call); name is used in messages
 * (and kept in rep->file like path). */
int tg_config_load_string_report(const char *name, const char *yaml,
    const struct tg_cfg_key *keys, size_t nkeys, void *out, struct tg_cfg_report *rep);
/**
 * Add "file:line:col: key: message" to rep, at the position of the key at
 * (key itself when at is NULL; else its nearest enclosing section the file
 * set; else 1:1). rep is borrowed and owns the message; key, at and fmt are
 * borrowed (copied into the message).
 */
void tg_config_report_add(struct tg_cfg_report *rep, const char *at, const char *key,
    const char *fmt, ...) __attribute__((format(printf, 4, 5)));
/** Same at an explicit position (line 0: "file: key: message"); pointers as
 * for tg_config_report_add. */
void tg_config_report_add_at(struct tg_cfg_report *rep, size_t line, size_t col,
    const char *key, const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/** The position of key as set in the file; -1 when the file did not set it.
 * rep and key are borrowed. */
int tg_config_report_pos(const struct tg_cfg_report *rep, const char *key, size_t *line,
    size_t *col);
/** Move src's problems (another file's) after dst's own, as they are: dst
 * takes ownership of the messages. Both are borrowed; src keeps its arrays and
 * positions, so it still needs tg_config_report_cleanup. */
void tg_config_report_merge(struct tg_cfg_report *dst, struct tg_cfg_report *src);
/** Free what rep holds (rep itself is borrowed; file is not freed). */
void tg_config_report_cleanup(struct tg_cfg_report *rep);

/**
 * Open a file the configuration names (the file itself, a *_file secret,
 * a CA bundle) for reading, never blocking: a descriptor the caller owns
 * (close it), or -1 with *why (static, borrowed) saying why: it does not
 * exist or cannot be read, it is not a regular file (a directory, a named
 * pipe, a device), or it is a file of the kernel's /proc or /sys, wherever
 * a symbolic link leads. path is borrowed.
 */
int tg_config_file_open(const char *path, const char **why);

/**
 * Load path into out (zeroed by the caller) using the table. On error
 * returns -1 with the first problem, "file:line:col: key: message", in
 * err; out (borrowed) owns what is filled in either way and must be
 * released with tg_config_free. path and keys are borrowed.
 */
int tg_config_load(const char *path, const struct tg_cfg_key *keys, size_t nkeys,
    void *out, struct tg_err *err);
/** Same, from a string (name is used in messages; name and yaml borrowed). */
int tg_config_load_string(const char *name, const char *yaml, const struct tg_cfg_key *keys,
    size_t nkeys, void *out, struct tg_err *err);
/** Fill defaults only (no file); out as for tg_config_load. */
int tg_config_defaults(const struct tg_cfg_key *keys, size_t nkeys, void *out,
    struct tg_err *err);
/** Free every heap field of out the table describes (out itself is borrowed);
 * keys is borrowed. */
void tg_config_free(const struct tg_cfg_key *keys, size_t nkeys, void *out);

/** Write the table as Markdown rows (key, type, default, meaning) to out;
 * both borrowed. */
void tg_config_doc(const struct tg_cfg_key *keys, size_t nkeys, FILE *out);
/** The same for nt tables (t borrowed), in order; a list a table before
 * has (keys[]) adds only its items' rows. */
void tg_config_doc_tables(const struct tg_cfg_table *t, size_t nt, FILE *out);

/** Parse helpers, exposed for tests and for query parameters; s and the
 * outputs are borrowed. */
int tg_config_parse_duration(const char *s, int64_t *ms);
int tg_config_parse_size(const char *s, int64_t *bytes);
int tg_config_parse_bool(const char *s, int *b);
/** Split "host:port" / "[v6]:port" (s borrowed); on 0 the caller takes
 * ownership of *host (free()), *port is the number. -1: nothing allocated. */
int tg_config_parse_addr(const char *s, char **host, int *port);
/** 1 when listen addresses a and b ("host:port", borrowed) cannot both be
 * bound: one port (not 0) on the same address, or on a wildcard address
 * (0.0.0.0, ::) and another of its family (:: covers both, bound
 * dual-stack). Host names conflict only when spelled alike: where they
 * resolve is the start's to find out. */
int tg_config_addr_conflict(const char *a, const char *b);

#endif
