/*
 * test_config.c - the YAML config loader: types, defaults, bounds, lists,
 * secrets from *_env / *_file, paths relative to the file, and
 * file:line:col errors with hints.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "tidegate/config.h"

struct item {
	char *name;
	long long n;
};

struct cfg {
	char *addr, *name, *secret;
	long long workers;
	int flag;
	double ratio;
	int64_t timeout, size;
	struct tg_strlist tags;
	struct item *items;
	size_t nitems;
};

static const struct tg_cfg_key item_keys[] = {
	{ "name", TG_CFG_STR, offsetof(struct item, name), NULL, 1, 0, 0, NULL, 0, 0, 0, "" },
	{ "n", TG_CFG_INT, offsetof(struct item, n), "7", 0, 0, 10, NULL, 0, 0, 0, "" },
};

#define O(f) offsetof(struct cfg, f)
static const struct tg_cfg_key keys[] = {
	{ "listen.addr", TG_CFG_ADDR, O(addr), "127.0.0.1:80", 0, 0, 0, NULL, 0, 0, 0, "" },
	{ "name", TG_CFG_STR, O(name), NULL, 0, 0, 0, NULL, 0, 0, 0, "" },
	{ "secret", TG_CFG_SECRET, O(secret), NULL, 0, 0, 0, NULL, 0, 0, 0, "" },
	{ "workers", TG_CFG_INT, O(workers), "4", 0, 1, 64, NULL, 0, 0, 0, "" },
	{ "flag", TG_CFG_BOOL, O(flag), "false", 0, 0, 0, NULL, 0, 0, 0, "" },
	{ "ratio", TG_CFG_DOUBLE, O(ratio), "0.5", 0, 0, 1, NULL, 0, 0, 0, "" },
	{ "limits.timeout", TG_CFG_DURATION, O(timeout), "5s", 0, 0, 0, NULL, 0, 0, 0, "" },
	{ "limits.size", TG_CFG_SIZE, O(size), "1MB", 0, 0, 0, NULL, 0, 0, 0, "" },
	{ "tags", TG_CFG_STRLIST, O(tags), "a,b", 0, 0, 0, NULL, 0, 0, 0, "" },
	{ "items", TG_CFG_LIST, O(items), NULL, 0, 0, 0, item_keys, 2, sizeof(struct item),
	  O(nitems), "" },
};

static int
load(const char *yaml, struct cfg *c, struct tg_err *err)
{
	memset(c, 0, sizeof(*c));
	return tg_config_load_string("t.yaml", yaml, keys, TG_NELEM(keys), c, err);
}

static void
done(struct cfg *c)
{
	tg_config_free(keys, TG_NELEM(keys), c);
}

static void
test_defaults(void **state)
{
	struct tg_err err;
	struct cfg c;

	assert_int_equal(load("", &c, &err), 0);
	assert_string_equal(c.addr, "127.0.0.1:80");
	assert_null(c.name);
	assert_int_equal(c.workers, 4);
	assert_int_equal(c.flag, 0);
	assert_int_equal(c.timeout, 5000);
	assert_int_equal(c.size, 1048576);
	assert_int_equal(c.tags.n, 2);
	assert_string_equal(c.tags.v[1], "b");
	assert_int_equal(c.nitems, 0);
	done(&c);
}

static void
test_values(void **state)
{
	struct tg_err err;
	struct cfg c;

	assert_int_equal(load("listen: {addr: \"[::1]:9\"}\nname: x\nworkers: 64\nflag: yes\n"
	    "ratio: 1\nlimits:\n  timeout: 250ms\n  size: 64k\ntags: [p, q, r]\n"
	    "items:\n  - name: one\n  - name: two\n    n: 10\n", &c, &err), 0);
	assert_string_equal(c.addr, "[::1]:9");
	assert_string_equal(c.name, "x");
	assert_int_equal(c.workers, 64);
	assert_int_equal(c.flag, 1);
	assert_true(c.ratio == 1.0);
	assert_int_equal(c.timeout, 250);
	assert_int_equal(c.size, 65536);
	assert_int_equal(c.tags.n, 3);
	assert_int_equal(c.nitems, 2);
	assert_string_equal(c.items[0].name, "one");
	assert_int_equal(c.items[0].n, 7);
	assert_int_equal(c.items[1].n, 10);
	done(&c);
}

static void
expect_error(const char *yaml, const char *msg)
{
	struct tg_err err;
	struct cfg c;

	err.msg[0] = '\0';
	if (msg == NULL) {	/* no problem expected */
		assert_int_equal(load(yaml, &c, &err), 0);
		done(&c);
		return;
	}
	assert_int_equal(load(yaml, &c, &err), -1);
	if (strcmp(err.msg, msg) != 0)
		fail_msg("got '%s', want '%s'", err.msg, msg);
	done(&c);
}

static void
test_errors(void **state)
{
	expect_error("workers: 65\n", "t.yaml:1:10: workers: must be between 1 and 64");
	expect_error("workers: many\n", "t.yaml:1:10: workers: expected an integer, got 'many'");
	expect_error("flag: maybe\n", "t.yaml:1:7: flag: expected true or false, got 'maybe'");
	expect_error("listen:\n  adr: 1.2.3.4:5\n",
	    "t.yaml:2:3: listen.adr: unknown key (did you mean 'listen.addr'?)");
	expect_error("wrokers: 3\n", "t.yaml:1:1: wrokers: unknown key (did you mean 'workers'?)");
	expect_error("zzz: 3\n", "t.yaml:1:1: zzz: unknown key");
	expect_error("listen:\n  addr: nohost\n",
	    "t.yaml:2:9: listen.addr: expected host:port, got 'nohost'");
	expect_error("listen:\n  addr: h:99999\n",
	    "t.yaml:2:9: listen.addr: expected host:port, got 'h:99999'");
	expect_error("limits:\n  timeout: 5 parsecs\n",
	    "t.yaml:2:12: limits.timeout: expected a duration (250ms, 5s, 2m, 1h, 30d), "
	    "got '5 parsecs'");
	expect_error("items:\n  - n: 1\n", "t.yaml:2:5: items[0].name: required");
	expect_error("items:\n  - name: a\n    m: 1\n",
	    "t.yaml:3:5: items[0].m: unknown key (did you mean 'items[0].n'?)");
	expect_error("items: 3\n", "t.yaml:1:8: items: expected a list");
	expect_error("name: a\nname: b\n", "t.yaml:2:1: name: duplicate key");
	expect_error("- 1\n- 2\n", "t.yaml:1:1: the top level must be a mapping");
	expect_error("name: [1\n", "t.yaml:2:1: did not find expected ',' or ']'");
	expect_error("a: &x 1\nb: *x\n", "t.yaml:2:4: anchors and aliases are not supported");
	expect_error("name: {a: 1}\n", "t.yaml:1:7: name: expected a scalar value");
}

static void
test_null_means_default(void **state)
{
	struct tg_err err;
	struct cfg c;

	assert_int_equal(load("workers: ~\nname: null\nsecret:\nlisten: {addr: ~}\n"
	    "other: \"~\"\n", &c, &err), -1);	/* quoted "~" is a string: unknown key */
	done(&c);
	assert_int_equal(load("workers: ~\nname: null\nsecret:\nlisten: {addr: ~}\n", &c,
	    &err), 0);
	assert_int_equal(c.workers, 4);
	assert_null(c.name);
	assert_null(c.secret);
	assert_string_equal(c.addr, "127.0.0.1:80");
	done(&c);
	assert_int_equal(load("name: \"~\"\n", &c, &err), 0);
	assert_string_equal(c.name, "~");
	done(&c);
}

/* "name: " then n opening brackets (closed when close is set). */
static char *
nested(size_t n, int close)
{
	char *s = malloc(6 + 2 * n + 2), *o = s;

	memcpy(o, "name: ", 6);
	o += 6;
	memset(o, '[', n);
	o += n;
	if (close) {
		memset(o, ']', n);
		o += n;
	}
	strcpy(o, "\n");
	return s;
}

/*
 * A file nested 100,000 deep once overflowed the loader's stack (tidegate
 * -t crashed, and so did a SIGHUP reload). It is refused at the first level
 * past TG_CONFIG_MAX_DEPTH, with its position; 64 levels still parse.
 */
static void
test_deep_nesting(void **state)
{
	char path[] = "/tmp/tg_deep_XXXXXX", *yaml, want[128];
	struct tg_err err;
	struct cfg c;
	FILE *f;
	int fd;

	assert_int_equal(TG_CONFIG_MAX_DEPTH, 64);
	yaml = nested(100000, 1);
	expect_error(yaml, "t.yaml:1:70: nested deeper than 64 levels");
	free(yaml);
	yaml = nested(100000, 0);	/* never closed: refused before the end */
	expect_error(yaml, "t.yaml:1:70: nested deeper than 64 levels");
	free(yaml);
	yaml = nested(64, 1);		/* the mapping and 64 sequences: 65 levels */
	expect_error(yaml, "t.yaml:1:70: nested deeper than 64 levels");
	free(yaml);
	yaml = nested(63, 1);		/* 64 levels: parsed, then bound */
	expect_error(yaml, "t.yaml:1:7: name: expected a scalar value");
	free(yaml);
	expect_error("a:\n b:\n  c: {d: {e: [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[["
	    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]\n",
	    "t.yaml:3:73: nested deeper than 64 levels");
	/* the same through a file, as tidegate -t and SIGHUP read it */
	fd = mkstemp(path);
	assert_true(fd >= 0);
	f = fdopen(fd, "w");
	fputs("name: ", f);
	for (int i = 0; i < 100000; i++)
		fputs("{a: ", f);
	fputs("1\n", f);
	fclose(f);
	memset(&c, 0, sizeof(c));
	assert_int_equal(tg_config_load(path, keys, TG_NELEM(keys), &c, &err), -1);
	snprintf(want, sizeof(want), "%s:1:259: nested deeper than 64 levels", path);
	assert_string_equal(err.msg, want);
	done(&c);
	unlink(path);
}

static void
test_secret(void **state)
{
	char path[] = "/tmp/tg_secret_XXXXXX";
	struct tg_err err;
	struct cfg c;
	int fd;

	assert_int_equal(load("secret: inline\n", &c, &err), 0);
	assert_string_equal(c.secret, "inline");
	done(&c);
	setenv("TG_TEST_SECRET", "from-env", 1);
	assert_int_equal(load("secret_env: TG_TEST_SECRET\n", &c, &err), 0);
	assert_string_equal(c.secret, "from-env");
	done(&c);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, "from-file\n", 10), 10);
	close(fd);
	{
		char yaml[128];

		snprintf(yaml, sizeof(yaml), "secret_file: %s\n", path);
		assert_int_equal(load(yaml, &c, &err), 0);
		assert_string_equal(c.secret, "from-file");
		done(&c);
	}
	unlink(path);
	unsetenv("TG_TEST_UNSET");
	expect_error("secret_env: TG_TEST_UNSET\n",
	    "t.yaml:1:13: secret_env: environment variable TG_TEST_UNSET is not set");
	expect_error("secret: a\nsecret_env: B\n",
	    "t.yaml:2:1: secret: give only one of secret, secret_env and secret_file");
}

/* A secret file that is not a regular file of an operator's is refused
 * before a byte is read, and the open never waits: a named pipe (no writer
 * ever comes here), a directory, a device, /proc and a link into it. */
static void
test_secret_special_files(void **state)
{
	char dir[] = "/tmp/tg_special_XXXXXX", fifo[64], link[64], yaml[160], want[200];
	const char *why;

	assert_non_null(mkdtemp(dir));
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	snprintf(link, sizeof(link), "%s/link", dir);
	assert_int_equal(mkfifo(fifo, 0600), 0);
	assert_int_equal(symlink("/proc/self/environ", link), 0);
	assert_int_equal(tg_config_file_open(fifo, &why), -1);
	assert_string_equal(why, "not a regular file (a named pipe)");
	assert_int_equal(tg_config_file_open(dir, &why), -1);
	assert_string_equal(why, "not a regular file (a directory)");
	assert_int_equal(tg_config_file_open("/dev/null", &why), -1);
	assert_string_equal(why, "not a regular file (a device)");
	assert_int_equal(tg_config_file_open("/proc/self/environ", &why), -1);
	assert_string_equal(why, "a file of the kernel's /proc or /sys, refused");
	assert_int_equal(tg_config_file_open(link, &why), -1);
	assert_string_equal(why, "a file of the kernel's /proc or /sys, refused");
	snprintf(yaml, sizeof(yaml), "secret_file: %s\n", fifo);
	snprintf(want, sizeof(want), "t.yaml:1:14: secret_file: cannot use %s: not a regular "
	    "file (a named pipe)", fifo);
	expect_error(yaml, want);
	snprintf(yaml, sizeof(yaml), "secret_file: %s\n", link);
	snprintf(want, sizeof(want), "t.yaml:1:14: secret_file: cannot use %s: a file of the "
	    "kernel's /proc or /sys, refused", link);
	expect_error(yaml, want);
	unlink(fifo);
	unlink(link);
	rmdir(dir);
}

/* Listen addresses two listeners cannot both bind (the start's second bind
 * fails), as -t judges them without binding. */
static void
test_addr_conflict(void **state)
{
	static const struct {
		const char *a, *b;
		int conflict;
	} cases[] = {
		{ "127.0.0.1:80", "127.0.0.1:80", 1 },
		{ "127.0.0.1:80", "127.0.0.1:81", 0 },
		{ "127.0.0.1:80", "127.0.0.2:80", 0 },
		{ "0.0.0.0:80", "127.0.0.1:80", 1 },
		{ "10.0.0.1:80", "0.0.0.0:80", 1 },
		{ "0.0.0.0:80", "[::1]:80", 0 },
		{ "[::]:80", "127.0.0.1:80", 1 },
		{ "[::]:80", "0.0.0.0:80", 1 },
		{ "[::1]:80", "[0:0::1]:80", 1 },
		{ "[::1]:80", "127.0.0.1:80", 0 },
		{ "127.0.0.1:0", "127.0.0.1:0", 0 },	/* each gets its own port */
		{ "localhost:80", "LOCALHOST:80", 1 },
		{ "localhost:80", "127.0.0.1:80", 0 },	/* resolved only at start */
		{ "nonsense", "127.0.0.1:80", 0 },
		{ NULL, "127.0.0.1:80", 0 },
	};
	size_t i;

	for (i = 0; i < TG_NELEM(cases); i++) {
		if (tg_config_addr_conflict(cases[i].a, cases[i].b) != cases[i].conflict ||
		    tg_config_addr_conflict(cases[i].b, cases[i].a) != cases[i].conflict)
			fail_msg("%s and %s: want %d", cases[i].a ? cases[i].a : "(null)",
			    cases[i].b, cases[i].conflict);
	}
}

/* Every problem of a file is reported in one load, in file order. */
static void
test_report_collects_all(void **state)
{
	struct tg_cfg_report rep = { 0 };
	struct cfg c;

	memset(&c, 0, sizeof(c));
	assert_int_equal(tg_config_load_string_report("t.yaml", "zzz: 1\nworkers: 65\n"
	    "flag: maybe\nitems:\n  - n: 1\n  - 3\ntags: [a, [b]]\n", keys, TG_NELEM(keys),
	    &c, &rep), -1);
	assert_int_equal(rep.n, 6);
	assert_true(rep.bound);
	assert_string_equal(rep.v[0].msg, "t.yaml:1:1: zzz: unknown key");
	assert_string_equal(rep.v[1].msg, "t.yaml:2:10: workers: must be between 1 and 64");
	assert_string_equal(rep.v[2].msg, "t.yaml:3:7: flag: expected true or false, got 'maybe'");
	assert_string_equal(rep.v[3].msg, "t.yaml:5:5: items[0].name: required");
	assert_string_equal(rep.v[4].msg, "t.yaml:6:5: items[1]: expected a mapping");
	assert_string_equal(rep.v[5].msg, "t.yaml:7:11: tags[1]: expected a string");
	tg_config_report_cleanup(&rep);
	done(&c);
}

/* A section given as a scalar or a list is refused, not defaulted. */
static void
test_section_types(void **state)
{
	expect_error("listen: 8080\n", "t.yaml:1:9: listen: must be a mapping of keys "
	    "(listen.<key>: value, one per line), not a scalar");
	expect_error("limits: [a, b]\n", "t.yaml:1:9: limits: must be a mapping of keys "
	    "(limits.<key>: value, one per line), not a list");
	expect_error("listen: {}\nlimits: ~\n", NULL);
}

/* "did you mean" at every level: sections, leaves, _env and _file forms. */
static void
test_suggestions(void **state)
{
	expect_error("limit:\n  size: 1\n",
	    "t.yaml:1:1: limit: unknown key (did you mean 'limits'?)");
	expect_error("secret_fil: x\n",
	    "t.yaml:1:1: secret_fil: unknown key (did you mean 'secret_file'?)");
	expect_error("secrt_env: X\n",
	    "t.yaml:1:1: secrt_env: unknown key (did you mean 'secret_env'?)");
	expect_error("limits:\n  tmeout: 1\n",
	    "t.yaml:2:3: limits.tmeout: unknown key (did you mean 'limits.timeout'?)");
}

/* Positions of the keys set are kept for the caller's own checks. */
static void
test_report_positions(void **state)
{
	struct tg_cfg_report rep = { 0 };
	size_t line = 0, col = 0;
	struct cfg c;

	memset(&c, 0, sizeof(c));
	assert_int_equal(tg_config_load_string_report("t.yaml", "limits:\n  size: 1k\n"
	    "tags: [x, y]\nitems:\n  - name: a\n", keys, TG_NELEM(keys), &c, &rep), 0);
	assert_int_equal(tg_config_report_pos(&rep, "limits.size", &line, &col), 0);
	assert_true(line == 2 && col == 9);
	assert_int_equal(tg_config_report_pos(&rep, "tags[1]", &line, &col), 0);
	assert_true(line == 3 && col == 11);
	assert_int_equal(tg_config_report_pos(&rep, "items[0].name", &line, &col), 0);
	assert_true(line == 5 && col == 11);
	assert_int_equal(tg_config_report_pos(&rep, "workers", &line, &col), -1);
	tg_config_report_add(&rep, NULL, "tags", "bad");
	tg_config_report_add(&rep, NULL, "limits.timeout", "near its section");
	tg_config_report_add(&rep, "limits.size", "workers", "at another key");
	tg_config_report_add(&rep, NULL, "workers", "nowhere");
	assert_int_equal(rep.n, 4);
	assert_string_equal(rep.v[0].msg, "t.yaml:1:1: limits.timeout: near its section");
	assert_string_equal(rep.v[1].msg, "t.yaml:1:1: workers: nowhere");
	assert_string_equal(rep.v[2].msg, "t.yaml:2:9: workers: at another key");
	assert_string_equal(rep.v[3].msg, "t.yaml:3:7: tags: bad");
	assert_false(rep.empty);
	tg_config_report_cleanup(&rep);
	done(&c);
	memset(&c, 0, sizeof(c));
	assert_int_equal(tg_config_load_string_report("e.yaml", "# nothing\n", keys,
	    TG_NELEM(keys), &c, &rep), 0);
	assert_true(rep.empty);
	tg_config_report_cleanup(&rep);
	done(&c);
}

/* A second table, as a feature of the gateway registers: its own section,
 * and a key of its own in every item of the first table's list. */
struct ext_item {
	char *tag;
};

struct ext {
	long long level;
	struct ext_item *items;
	size_t nitems;
};

static const struct tg_cfg_key ext_item_keys[] = {
	{ "tag", TG_CFG_STR, offsetof(struct ext_item, tag), "none", 0, 0, 0, NULL, 0, 0, 0,
	  "its tag" },
};

static const struct tg_cfg_key ext_keys[] = {
	{ "ext.level", TG_CFG_INT, offsetof(struct ext, level), "2", 0, 1, 5, NULL, 0, 0, 0,
	  "a level" },
	{ "items", TG_CFG_LIST, offsetof(struct ext, items), NULL, 0, 0, 0, ext_item_keys, 1,
	  sizeof(struct ext_item), offsetof(struct ext, nitems), "unused: the first table's" },
};

/* Write yaml to a new file named into path (a mkstemp template). */
static void
write_tmp(char *path, const char *yaml)
{
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	assert_int_equal(write(fd, yaml, strlen(yaml)), (ssize_t)strlen(yaml));
	close(fd);
}

static int
load_two(const char *yaml, struct cfg *c, struct ext *x, struct tg_cfg_report *rep)
{
	char path[] = "/tmp/tg_tables_XXXXXX";
	struct tg_cfg_table t[2] = { { keys, TG_NELEM(keys), c }, { ext_keys, 2, x } };
	int rc;

	memset(c, 0, sizeof(*c));
	memset(x, 0, sizeof(*x));
	memset(rep, 0, sizeof(*rep));
	write_tmp(path, yaml);
	rep->file = "t.yaml";
	rc = tg_config_load_tables_report(path, t, 2, rep);
	unlink(path);
	return rc;
}

static void
done_two(struct cfg *c, struct ext *x, struct tg_cfg_report *rep)
{
	tg_config_free(ext_keys, 2, x);
	done(c);
	tg_config_report_cleanup(rep);
}

/* Several tables: each fills its own struct, a list at one path is read
 * once into both tables' arrays, and problems read as with one table. */
static void
test_tables(void **state)
{
	struct tg_cfg_report rep;
	struct cfg c;
	struct ext x;

	assert_int_equal(load_two("workers: 3\next:\n  level: 4\nitems:\n  - name: a\n"
	    "    tag: t1\n  - name: b\n", &c, &x, &rep), 0);
	assert_int_equal(c.workers, 3);
	assert_int_equal(x.level, 4);
	assert_int_equal(c.nitems, 2);
	assert_int_equal(x.nitems, 2);
	assert_string_equal(c.items[0].name, "a");
	assert_string_equal(x.items[0].tag, "t1");
	assert_string_equal(c.items[1].name, "b");
	assert_string_equal(x.items[1].tag, "none");
	done_two(&c, &x, &rep);
	assert_int_equal(load_two("ext:\n  levle: 1\n  level: 9\nitems:\n  - name: a\n"
	    "    tga: x\nworkrs: 1\n", &c, &x, &rep), -1);
	assert_int_equal(rep.n, 4);
	assert_string_equal(rep.v[0].msg, "t.yaml:2:3: ext.levle: unknown key "
	    "(did you mean 'ext.level'?)");
	assert_string_equal(rep.v[1].msg, "t.yaml:3:10: ext.level: must be between 1 and 5");
	assert_string_equal(rep.v[2].msg, "t.yaml:6:5: items[0].tga: unknown key "
	    "(did you mean 'items[0].tag'?)");
	assert_string_equal(rep.v[3].msg, "t.yaml:7:1: workrs: unknown key "
	    "(did you mean 'workers'?)");
	done_two(&c, &x, &rep);
}

/* The reference of several tables: in order, and a list the first table
 * documents gets only the later table's item rows. */
static void
test_doc_tables(void **state)
{
	struct tg_cfg_table t[2] = { { keys, TG_NELEM(keys), NULL }, { ext_keys, 2, NULL } };
	char *buf = NULL, *items, *level, *tag;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	tg_config_doc_tables(t, 2, f);
	fclose(f);
	items = strstr(buf, "| `items` | list |");
	level = strstr(buf, "| `ext.level` | integer | `2` | a level |");
	tag = strstr(buf, "| `items[].tag` | string | `none` | its tag |");
	assert_non_null(items);
	assert_non_null(level);
	assert_non_null(tag);
	assert_true(items < level && level < tag);
	assert_null(strstr(buf, "unused: the first table's"));
	free(buf);
}

/* TG_CFG_PATH: relative to the config file's directory, absolute as given. */
static void
test_path(void **state)
{
	struct pcfg {
		char *rel, *abs;
	} c;
	static const struct tg_cfg_key pkeys[] = {
		{ "rel", TG_CFG_PATH, offsetof(struct pcfg, rel), NULL, 0, 0, 0, NULL, 0, 0, 0, "" },
		{ "abs", TG_CFG_PATH, offsetof(struct pcfg, abs), NULL, 0, 0, 0, NULL, 0, 0, 0, "" },
	};
	struct tg_err err;

	memset(&c, 0, sizeof(c));
	assert_int_equal(tg_config_load_string("conf/sub/t.yaml", "rel: data\nabs: /var/x\n",
	    pkeys, TG_NELEM(pkeys), &c, &err), 0);
	assert_string_equal(c.rel, "conf/sub/data");
	assert_string_equal(c.abs, "/var/x");
	tg_config_free(pkeys, TG_NELEM(pkeys), &c);
	assert_null(c.rel);
	assert_int_equal(tg_config_load_string("t.yaml", "rel: data\n", pkeys, TG_NELEM(pkeys),
	    &c, &err), 0);
	assert_string_equal(c.rel, "data");
	assert_null(c.abs);
	tg_config_free(pkeys, TG_NELEM(pkeys), &c);
}

static void
test_parsers(void **state)
{
	int64_t v;
	char *host;
	int port, b;

	assert_int_equal(tg_config_parse_duration("31d", &v), 0);
	assert_int_equal(v, 31LL * 86400000);
	assert_int_equal(tg_config_parse_duration("1.5s", &v), 0);
	assert_int_equal(v, 1500);
	assert_int_equal(tg_config_parse_duration("10", &v), 0);
	assert_int_equal(v, 10000);
	assert_int_equal(tg_config_parse_duration("-1s", &v), -1);
	assert_int_equal(tg_config_parse_duration("1w", &v), -1);
	assert_int_equal(tg_config_parse_size("1GiB", &v), 0);
	assert_int_equal(v, 1073741824LL);
	assert_int_equal(tg_config_parse_size("12 parsecs", &v), -1);
	assert_int_equal(tg_config_parse_addr("[::1]:8080", &host, &port), 0);
	assert_string_equal(host, "::1");
	assert_int_equal(port, 8080);
	free(host);
	assert_int_equal(tg_config_parse_addr("::1:8080", &host, &port), -1);
	assert_int_equal(tg_config_parse_addr(":80", &host, &port), -1);
	assert_int_equal(tg_config_parse_bool("On", &b), 0);
	assert_int_equal(b, 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_values),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_null_means_default),
		cmocka_unit_test(test_secret),
		cmocka_unit_test(test_secret_special_files),
		cmocka_unit_test(test_deep_nesting),
		cmocka_unit_test(test_report_collects_all),
		cmocka_unit_test(test_section_types),
		cmocka_unit_test(test_suggestions),
		cmocka_unit_test(test_tables),
		cmocka_unit_test(test_doc_tables),
		cmocka_unit_test(test_report_positions),
		cmocka_unit_test(test_path),
		cmocka_unit_test(test_parsers),
		cmocka_unit_test(test_addr_conflict),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
