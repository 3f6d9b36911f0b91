/*
 * config.c - YAML configuration loader. libyaml's event parser builds a
 * small tree that keeps each node's line and column; a key table then binds
 * the tree into the caller's plain struct. Every key in the file must be in
 * the table, so a typo is an error with a "did you mean", never a silently
 * ignored setting, and a section given as a scalar or a list is an error,
 * never a silent default. Binding goes on after a problem, so one run
 * reports every problem of a file, each as "file:line:col: key: message",
 * and records where each key was set for the callers' own checks. Called
 * by both entry points at start-up, by -t and on SIGHUP.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <linux/magic.h>

#include <yaml.h>

#include "tidegate/config.h"

enum ytype { Y_SCALAR, Y_MAP, Y_SEQ };

struct ynode;

struct yent {
	char *key;
	size_t line, col;
	struct ynode *val;
	int used;		/* 1 bound as a key, 2 entered as a section */
};

struct ynode {
	enum ytype t;
	size_t line, col;
	char *s;		/* scalar text */
	int plain;		/* scalar was unquoted (so "null" means null) */
	struct yent *ents;	/* map */
	struct ynode **items;	/* seq */
	size_t n;
};

struct ctx {
	const char *file;
	struct tg_cfg_report *rep;
	int depth;		/* mappings and sequences open around the node parsed */
};

static void
node_free(struct ynode *n)
{
	size_t i;

	if (n == NULL)
		return;
	for (i = 0; i < n->n; i++) {
		if (n->t == Y_MAP) {
			free(n->ents[i].key);
			node_free(n->ents[i].val);
		} else if (n->t == Y_SEQ) {
			node_free(n->items[i]);
		}
	}
	free(n->ents);
	free(n->items);
	free(n->s);
	free(n);
}

static int
fail(struct ctx *c, size_t line, size_t col, const char *key, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int
fail(struct ctx *c, size_t line, size_t col, const char *key, const char *fmt, ...)
{
	char msg[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	tg_config_report_add_at(c->rep, line, col, key, "%s", msg);
	return -1;
}

/* ---- the report ---- */

/* Problems are kept in file order (stable for equal positions), so a
 * file's problems read top to bottom whichever check found them. */
void
tg_config_report_add_at(struct tg_cfg_report *rep, size_t line, size_t col, const char *key,
    const char *fmt, ...)
{
	char msg[400], *full;
	va_list ap;
	size_t i;

	if (rep->n >= TG_CONFIG_MAX_PROBLEMS) {
		rep->dropped++;
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (line == 0)
		full = key != NULL && *key ? tg_xasprintf("%s: %s: %s", rep->file, key, msg) :
		    tg_xasprintf("%s: %s", rep->file, msg);
	else if (key != NULL && *key)
		full = tg_xasprintf("%s:%zu:%zu: %s: %s", rep->file, line, col, key, msg);
	else
		full = tg_xasprintf("%s:%zu:%zu: %s", rep->file, line, col, msg);
	for (i = rep->n; i > 0 && (rep->v[i - 1].line > line ||
	    (rep->v[i - 1].line == line && rep->v[i - 1].col > col)); i--)
		;
	rep->v = tg_xrealloc(rep->v, (rep->n + 1) * sizeof(*rep->v));
	memmove(&rep->v[i + 1], &rep->v[i], (rep->n - i) * sizeof(*rep->v));
	rep->v[i].line = line;
	rep->v[i].col = col;
	rep->v[i].msg = full;
	rep->n++;
}

int
tg_config_report_pos(const struct tg_cfg_report *rep, const char *key, size_t *line,
    size_t *col)
{
	size_t i;

	for (i = 0; i < rep->npos; i++) {
		if (strcmp(rep->pos[i].key, key) == 0) {
			*line = rep->pos[i].line;
			*col = rep->pos[i].col;
			return 0;
		}
	}
	return -1;
}

void
tg_config_report_add(struct tg_cfg_report *rep, const char *at, const char *key,
    const char *fmt, ...)
{
	char where[200], msg[400], *cut;
	size_t line = 1, col = 1;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	snprintf(where, sizeof(where), "%s", at != NULL ? at : key);
	while (tg_config_report_pos(rep, where, &line, &col) != 0) {
		line = col = 1;
		cut = strrchr(where, '.');
		if (cut == NULL)
			break;
		*cut = '\0';
	}
	tg_config_report_add_at(rep, line, col, key, "%s", msg);
}

static void
record_pos(struct ctx *c, const char *key, size_t line, size_t col)
{
	struct tg_cfg_report *r = c->rep;

	r->pos = tg_xrealloc(r->pos, (r->npos + 1) * sizeof(*r->pos));
	r->pos[r->npos].key = tg_xstrdup(key);
	r->pos[r->npos].line = line;
	r->pos[r->npos].col = col;
	r->npos++;
}

void
tg_config_report_merge(struct tg_cfg_report *dst, struct tg_cfg_report *src)
{
	size_t i;

	for (i = 0; i < src->n; i++) {
		if (dst->n >= TG_CONFIG_MAX_PROBLEMS) {
			dst->dropped++;
			free(src->v[i].msg);
			continue;
		}
		dst->v = tg_xrealloc(dst->v, (dst->n + 1) * sizeof(*dst->v));
		dst->v[dst->n].line = (size_t)-1;	/* after every problem of dst's file */
		dst->v[dst->n].col = 0;
		dst->v[dst->n++].msg = src->v[i].msg;
	}
	dst->dropped += src->dropped;
	src->n = src->dropped = 0;
}

void
tg_config_report_cleanup(struct tg_cfg_report *rep)
{
	size_t i;

	for (i = 0; i < rep->n; i++)
		free(rep->v[i].msg);
	for (i = 0; i < rep->npos; i++)
		free(rep->pos[i].key);
	free(rep->v);
	free(rep->pos);
	rep->v = NULL;
	rep->pos = NULL;
	rep->n = rep->npos = rep->dropped = 0;
}

/* ---- YAML events -> tree ---- */

/*
 * The tree is built (and later freed and walked) recursively, one frame per
 * level: a file nested 100,000 deep would overflow the stack, so nesting is
 * capped at TG_CONFIG_MAX_DEPTH, far above any real configuration.
 */

static struct ynode *parse_node(yaml_parser_t *p, yaml_event_t *ev, struct ctx *c);

static int
next_event(yaml_parser_t *p, yaml_event_t *ev, struct ctx *c)
{
	if (yaml_parser_parse(p, ev))
		return 0;
	fail(c, p->problem_mark.line + 1, p->problem_mark.column + 1, NULL, "%s",
	    p->problem ? p->problem : "YAML syntax error");
	return -1;
}

static struct ynode *
new_node(enum ytype t, const yaml_event_t *ev)
{
	struct ynode *n = tg_xcalloc(1, sizeof(*n));

	n->t = t;
	n->line = ev->start_mark.line + 1;
	n->col = ev->start_mark.column + 1;
	return n;
}

static struct ynode *
parse_map(yaml_parser_t *p, struct ynode *n, struct ctx *c)
{
	yaml_event_t ev;
	size_t i;

	for (;;) {
		if (next_event(p, &ev, c))
			goto err;
		if (ev.type == YAML_MAPPING_END_EVENT) {
			yaml_event_delete(&ev);
			return n;
		}
		if (ev.type != YAML_SCALAR_EVENT) {
			fail(c, ev.start_mark.line + 1, ev.start_mark.column + 1, NULL,
			    "keys must be plain scalars");
			yaml_event_delete(&ev);
			goto err;
		}
		for (i = 0; i < n->n; i++) {
			if (strcmp(n->ents[i].key, (char *)ev.data.scalar.value) == 0) {
				fail(c, ev.start_mark.line + 1, ev.start_mark.column + 1,
				    (char *)ev.data.scalar.value, "duplicate key");
				yaml_event_delete(&ev);
				goto err;
			}
		}
		n->ents = tg_xrealloc(n->ents, (n->n + 1) * sizeof(*n->ents));
		n->ents[n->n].key = tg_xstrdup((char *)ev.data.scalar.value);
		n->ents[n->n].line = ev.start_mark.line + 1;
		n->ents[n->n].col = ev.start_mark.column + 1;
		n->ents[n->n].used = 0;
		n->ents[n->n].val = NULL;
		n->n++;
		yaml_event_delete(&ev);
		if (next_event(p, &ev, c))
			goto err;
		n->ents[n->n - 1].val = parse_node(p, &ev, c);
		if (n->ents[n->n - 1].val == NULL)
			goto err;
	}
err:
	node_free(n);
	return NULL;
}

static struct ynode *
parse_seq(yaml_parser_t *p, struct ynode *n, struct ctx *c)
{
	yaml_event_t ev;
	struct ynode *item;

	for (;;) {
		if (next_event(p, &ev, c))
			goto err;
		if (ev.type == YAML_SEQUENCE_END_EVENT) {
			yaml_event_delete(&ev);
			return n;
		}
		item = parse_node(p, &ev, c);
		if (item == NULL)
			goto err;
		n->items = tg_xrealloc(n->items, (n->n + 1) * sizeof(*n->items));
		n->items[n->n++] = item;
	}
err:
	node_free(n);
	return NULL;
}

/* Consumes ev, a mapping or sequence start: the node, or NULL too deep. */
static struct ynode *
parse_collection(yaml_parser_t *p, yaml_event_t *ev, struct ctx *c)
{
	int map = ev->type == YAML_MAPPING_START_EVENT;
	struct ynode *n;

	if (c->depth >= TG_CONFIG_MAX_DEPTH) {
		fail(c, ev->start_mark.line + 1, ev->start_mark.column + 1, NULL,
		    "nested deeper than %d levels", TG_CONFIG_MAX_DEPTH);
		yaml_event_delete(ev);
		return NULL;
	}
	n = new_node(map ? Y_MAP : Y_SEQ, ev);
	yaml_event_delete(ev);
	c->depth++;
	n = map ? parse_map(p, n, c) : parse_seq(p, n, c);
	c->depth--;
	return n;
}

/* Consumes ev. */
static struct ynode *
parse_node(yaml_parser_t *p, yaml_event_t *ev, struct ctx *c)
{
	struct ynode *n = NULL;

	switch (ev->type) {
	case YAML_SCALAR_EVENT:
		n = new_node(Y_SCALAR, ev);
		n->s = tg_xstrndup((char *)ev->data.scalar.value, ev->data.scalar.length);
		n->plain = ev->data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
		yaml_event_delete(ev);
		return n;
	case YAML_MAPPING_START_EVENT:
	case YAML_SEQUENCE_START_EVENT:
		return parse_collection(p, ev, c);
	case YAML_ALIAS_EVENT:
		fail(c, ev->start_mark.line + 1, ev->start_mark.column + 1, NULL,
		    "anchors and aliases are not supported");
		break;
	default:
		fail(c, ev->start_mark.line + 1, ev->start_mark.column + 1, NULL,
		    "unexpected YAML event");
		break;
	}
	yaml_event_delete(ev);
	return NULL;
}

/* Returns the root mapping (an empty one for an empty document), or NULL. */
static struct ynode *
parse_doc(yaml_parser_t *p, struct ctx *c)
{
	struct ynode *root = NULL;
	yaml_event_t ev;

	for (;;) {
		if (next_event(p, &ev, c))
			goto err;
		if (ev.type == YAML_STREAM_END_EVENT) {
			yaml_event_delete(&ev);
			break;
		}
		if (ev.type == YAML_STREAM_START_EVENT || ev.type == YAML_DOCUMENT_START_EVENT ||
		    ev.type == YAML_DOCUMENT_END_EVENT) {
			yaml_event_delete(&ev);
			continue;
		}
		if (root != NULL) {
			fail(c, ev.start_mark.line + 1, ev.start_mark.column + 1, NULL,
			    "only one YAML document is allowed");
			yaml_event_delete(&ev);
			goto err;
		}
		root = parse_node(p, &ev, c);
		if (root == NULL)
			goto err;
		if (root->t == Y_SCALAR && root->plain && (*root->s == '\0' ||
		    strcmp(root->s, "~") == 0 || strcmp(root->s, "null") == 0)) {
			node_free(root);
			root = NULL;
			c->rep->empty = 1;
		} else if (root->t != Y_MAP) {
			fail(c, root->line, root->col, NULL, "the top level must be a mapping");
			goto err;
		}
	}
	if (root == NULL) {
		root = tg_xcalloc(1, sizeof(*root));
		c->rep->empty = 1;
	}
	root->t = Y_MAP;
	if (root->line == 0)
		root->line = root->col = 1;
	return root;
err:
	node_free(root);
	return NULL;
}

/* ---- scalar conversions ---- */

int
tg_config_parse_bool(const char *s, int *b)
{
	static const char *const t[] = { "true", "yes", "on", "1" };
	static const char *const f[] = { "false", "no", "off", "0" };
	size_t i;

	for (i = 0; i < TG_NELEM(t); i++) {
		if (strcasecmp(s, t[i]) == 0) {
			*b = 1;
			return 0;
		}
		if (strcasecmp(s, f[i]) == 0) {
			*b = 0;
			return 0;
		}
	}
	return -1;
}

static int
parse_number_unit(const char *s, double *num, const char **unit)
{
	char *end;

	if (*s == '\0' || *s == '-' || *s == '+')
		return -1;
	errno = 0;
	*num = strtod(s, &end);
	if (errno || end == s || !isfinite(*num))
		return -1;
	while (*end == ' ')
		end++;
	*unit = end;
	return 0;
}

int
tg_config_parse_duration(const char *s, int64_t *ms)
{
	static const struct { const char *u; double mult; } units[] = {
		{ "", 1000 }, { "ms", 1 }, { "s", 1000 }, { "m", 60000 }, { "h", 3600000 },
		{ "d", 86400000 },
	};
	const char *unit;
	double num;
	size_t i;

	if (parse_number_unit(s, &num, &unit))
		return -1;
	for (i = 0; i < TG_NELEM(units); i++) {
		if (strcmp(unit, units[i].u) == 0) {
			if (num * units[i].mult > 9.2e18)
				return -1;
			*ms = (int64_t)llround(num * units[i].mult);
			return 0;
		}
	}
	return -1;
}

int
tg_config_parse_size(const char *s, int64_t *bytes)
{
	static const struct { const char *u; double mult; } units[] = {
		{ "", 1 }, { "b", 1 }, { "k", 1024 }, { "kb", 1024 }, { "kib", 1024 },
		{ "m", 1048576 }, { "mb", 1048576 }, { "mib", 1048576 },
		{ "g", 1073741824.0 }, { "gb", 1073741824.0 }, { "gib", 1073741824.0 },
	};
	const char *unit;
	double num;
	size_t i;

	if (parse_number_unit(s, &num, &unit))
		return -1;
	for (i = 0; i < TG_NELEM(units); i++) {
		if (strcasecmp(unit, units[i].u) == 0) {
			if (num * units[i].mult > 9.2e18)
				return -1;
			*bytes = (int64_t)llround(num * units[i].mult);
			return 0;
		}
	}
	return -1;
}

int
tg_config_parse_addr(const char *s, char **host, int *port)
{
	const char *colon, *hs = s, *he;
	char *end;
	long p;

	if (*s == '[') {
		he = strchr(s, ']');
		if (he == NULL || he[1] != ':')
			return -1;
		hs = s + 1;
		colon = he + 1;
	} else {
		colon = strrchr(s, ':');
		if (colon == NULL || memchr(s, ':', (size_t)(colon - s)) != NULL)
			return -1;
		he = colon;
	}
	errno = 0;
	p = strtol(colon + 1, &end, 10);
	if (errno || end == colon + 1 || *end != '\0' || p < 0 || p > 65535 || he == hs)
		return -1;
	*host = tg_xstrndup(hs, (size_t)(he - hs));
	*port = (int)p;
	return 0;
}

/* A listen address's family and bytes; family 0: a host name. */
struct laddr {
	int family, port;
	unsigned char a[16];
	char *host;
};

static int
laddr_parse(const char *s, struct laddr *l)
{
	if (s == NULL || tg_config_parse_addr(s, &l->host, &l->port) != 0)
		return -1;
	if (inet_pton(AF_INET, l->host, l->a) == 1)
		l->family = AF_INET;
	else if (inet_pton(AF_INET6, l->host, l->a) == 1)
		l->family = AF_INET6;
	return 0;
}

/* Whether wildcard w takes the port of l too: 0.0.0.0 every IPv4
 * address, :: every address (libevent binds it dual-stack). */
static int
covers(const struct laddr *w, const struct laddr *l)
{
	static const unsigned char zero[16];

	return w->family != 0 && l->family != 0 &&
	    memcmp(w->a, zero, w->family == AF_INET ? 4 : 16) == 0 &&
	    (w->family == AF_INET6 || l->family == AF_INET);
}

int
tg_config_addr_conflict(const char *a, const char *b)
{
	struct laddr x, y;
	int rc = 0;

	memset(&x, 0, sizeof(x));
	memset(&y, 0, sizeof(y));
	if (laddr_parse(a, &x) == 0 && laddr_parse(b, &y) == 0 && x.port == y.port &&
	    x.port != 0) {
		if (x.family == 0 || y.family == 0)
			rc = x.family == y.family && strcasecmp(x.host, y.host) == 0;
		else
			rc = (x.family == y.family && memcmp(x.a, y.a, x.family == AF_INET ? 4 :
			    16) == 0) || covers(&x, &y) || covers(&y, &x);
	}
	free(x.host);
	free(y.host);
	return rc;
}

static int
parse_int(const char *s, long long *v)
{
	char *end;

	errno = 0;
	*v = strtoll(s, &end, 10);
	return (errno || end == s || *end != '\0') ? -1 : 0;
}

/* ---- binding ---- */

#define FIELD(base, off, type) ((type *)((char *)(base) + (off)))

static int bind_tables(struct ctx *c, struct ynode *map, const struct tg_cfg_table *t,
    size_t nt, const char *prefix);

/* A bound as the key is written: a duration in its largest whole unit
 * (1h, not 3.6e+06), a size in whole KiB/MiB/GiB, a number in full. */
struct unit {
	double per;
	const char *name;
};

static void
bound_str(const struct tg_cfg_key *k, double v, char *out, size_t n)
{
	static const struct unit dur[] = { { 86400000, "d" }, { 3600000, "h" }, { 60000, "m" },
		{ 1000, "s" }, { 1, "ms" }, { 0, NULL } };
	static const struct unit size[] = { { 1073741824.0, "GiB" }, { 1048576, "MiB" },
		{ 1024, "KiB" }, { 1, "" }, { 0, NULL } };
	const struct unit *u = k->type == TG_CFG_DURATION ? dur : k->type == TG_CFG_SIZE ?
	    size : NULL;

	for (; u != NULL && u->name != NULL && v != 0; u++) {
		if (fmod(v, u->per) == 0) {
			snprintf(out, n, "%.0f%s", v / u->per, u->name);
			return;
		}
	}
	snprintf(out, n, v == floor(v) && fabs(v) < 1e15 ? "%.0f" : "%g", v);
}

static int
check_bounds(struct ctx *c, const struct tg_cfg_key *k, const char *name, size_t line,
    size_t col, double v)
{
	char lo[32], hi[32];

	if (k->min == k->max)
		return 0;
	if (v < k->min || v > k->max) {
		bound_str(k, k->min, lo, sizeof(lo));
		bound_str(k, k->max, hi, sizeof(hi));
		return fail(c, line, col, name, "must be between %s and %s", lo, hi);
	}
	return 0;
}

/* Relative paths are taken from the directory of the config file, so a
 * configuration and its files (secrets, TG_CFG_PATH keys) move together. */
static char *
resolve_path(const char *path, const char *cfgfile)
{
	const char *slash = cfgfile != NULL ? strrchr(cfgfile, '/') : NULL;

	if (path[0] != '/' && slash != NULL)
		return tg_xasprintf("%.*s/%s", (int)(slash - cfgfile), cfgfile, path);
	return tg_xstrdup(path);
}

#define SECRET_MAX 4096

/* What a file that is not regular is, for messages. */
static const char *
kind(mode_t m)
{
	return S_ISDIR(m) ? "not a regular file (a directory)" : S_ISFIFO(m) ?
	    "not a regular file (a named pipe)" : S_ISSOCK(m) ?
	    "not a regular file (a socket)" : S_ISCHR(m) || S_ISBLK(m) ?
	    "not a regular file (a device)" : "not a regular file";
}

/* Whether a file system is the kernel's view of itself (proc, sysfs and
 * their kin): what they hold is the process's or the machine's, never an
 * operator's secret or setting. */
static int
kernel_fs(unsigned long type)
{
	static const unsigned long magic[] = { PROC_SUPER_MAGIC, SYSFS_MAGIC,
		DEBUGFS_MAGIC, TRACEFS_MAGIC, SECURITYFS_MAGIC, CGROUP_SUPER_MAGIC,
		CGROUP2_SUPER_MAGIC, EFIVARFS_MAGIC, BPF_FS_MAGIC };
	size_t i;

	for (i = 0; i < sizeof(magic) / sizeof(magic[0]); i++)
		if (type == magic[i])
			return 1;
	return 0;
}

/*
 * A FIFO would block the reader until a writer came (a -t that never ends,
 * a SIGHUP that stops the event loop), and a device may do anything on
 * open: the type is looked at before the open, and again on what the
 * non-blocking open got, in case the path changed in between. A symbolic
 * link is followed (secrets are often links, e.g. Kubernetes'), and where
 * it leads is judged: a file of /proc or /sys (/proc/self/environ would
 * hand the process's environment to the vendor as a password) is refused
 * by the file system it is on, wherever that is mounted.
 */
int
tg_config_file_open(const char *path, const char **why)
{
	struct statfs fs;
	struct stat st;
	int fd = -1;

	*why = NULL;
	if (stat(path, &st) != 0)
		*why = strerror(errno);
	else if (!S_ISREG(st.st_mode))
		*why = kind(st.st_mode);
	else if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)) < 0)
		*why = strerror(errno);
	else if (fstat(fd, &st) != 0 || fstatfs(fd, &fs) != 0)
		*why = strerror(errno);
	else if (!S_ISREG(st.st_mode))
		*why = kind(st.st_mode);
	else if (kernel_fs((unsigned long)fs.f_type))
		*why = "a file of the kernel's /proc or /sys, refused";
	if (*why != NULL && fd >= 0) {
		close(fd);
		fd = -1;
	}
	return fd;
}

/* The secret in file full: its bytes without the line end, or NULL with
 * why (static) set: a file that cannot be read, is not a regular file
 * (a directory, /dev/null, a FIFO), is the kernel's, is empty or longer
 * than SECRET_MAX. */
static char *
read_secret_file(const char *full, const char **why)
{
	char buf[SECRET_MAX + 2], *val = NULL;
	size_t n = 0;
	ssize_t got = 1;
	int fd = tg_config_file_open(full, why);

	while (fd >= 0 && got > 0 && n < sizeof(buf) - 1) {
		got = read(fd, buf + n, sizeof(buf) - 1 - n);
		if (got > 0)
			n += (size_t)got;
		else if (got < 0 && errno == EINTR)
			got = 1;
		else if (got < 0)
			*why = strerror(errno);
	}
	if (fd >= 0)
		close(fd);
	while (*why == NULL && n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
		n--;
	if (*why == NULL && n == 0)
		*why = "the file is empty";
	else if (*why == NULL && n > SECRET_MAX)
		*why = "longer than 4096 bytes";
	else if (*why == NULL)
		val = tg_xstrndup(buf, n);
	explicit_bzero(buf, sizeof(buf));
	return val;
}

static int
set_strlist(struct ctx *c, const struct tg_cfg_key *k, const char *name, struct ynode *v,
    const char *def, void *base)
{
	struct tg_strlist *l = FIELD(base, k->off, struct tg_strlist);
	char sub[240];
	size_t i;
	int rc = 0;

	if (v == NULL) {	/* default: comma separated */
		const char *p = def, *e;

		while (p && *p) {
			e = strchr(p, ',');
			if (e == NULL)
				e = p + strlen(p);
			l->v = tg_xrealloc(l->v, (l->n + 1) * sizeof(char *));
			l->v[l->n++] = tg_xstrndup(p, (size_t)(e - p));
			p = *e ? e + 1 : e;
		}
		return 0;
	}
	if (v->t != Y_SEQ)
		return fail(c, v->line, v->col, name, "expected a list of strings");
	for (i = 0; i < v->n; i++) {
		snprintf(sub, sizeof(sub), "%s[%zu]", name, i);
		if (v->items[i]->t != Y_SCALAR) {
			rc = fail(c, v->items[i]->line, v->items[i]->col, sub, "expected a string");
			continue;
		}
		record_pos(c, sub, v->items[i]->line, v->items[i]->col);
		l->v = tg_xrealloc(l->v, (l->n + 1) * sizeof(char *));
		l->v[l->n++] = tg_xstrdup(v->items[i]->s);
	}
	return rc;
}

/* One table's share of a list every table with a list at the same path
 * fills from the same items (keys[] of the core and of a feature). */
struct list_part {
	const struct tg_cfg_key *k;
	void *base;
};

static int
set_list(struct ctx *c, const struct list_part *p, size_t np, const char *name,
    struct ynode *v)
{
	struct tg_cfg_table sub[TG_CONFIG_MAX_TABLES];
	char subname[240];
	size_t i, m;
	int rc = 0;

	if (v->t != Y_SEQ)
		return fail(c, v->line, v->col, name, "expected a list");
	for (m = 0; m < np; m++) {
		*FIELD(p[m].base, p[m].k->off, void *) = tg_xcalloc(v->n, p[m].k->elem_size);
		*FIELD(p[m].base, p[m].k->count_off, size_t) = v->n;
	}
	for (i = 0; i < v->n; i++) {
		snprintf(subname, sizeof(subname), "%s[%zu]", name, i);
		record_pos(c, subname, v->items[i]->line, v->items[i]->col);
		if (v->items[i]->t != Y_MAP) {
			rc = fail(c, v->items[i]->line, v->items[i]->col, subname,
			    "expected a mapping");
			continue;
		}
		for (m = 0; m < np; m++)
			sub[m] = (struct tg_cfg_table){ p[m].k->sub, p[m].k->nsub,
				*FIELD(p[m].base, p[m].k->off, char *) + i * p[m].k->elem_size };
		if (bind_tables(c, v->items[i], sub, np, subname))
			rc = -1;
	}
	return rc;
}

/* Convert one scalar (text s at line:col, or the default when line == 0). */
static int
set_scalar(struct ctx *c, const struct tg_cfg_key *k, const char *name, const char *s,
    size_t line, size_t col, void *base)
{
	long long iv;
	int64_t v64;
	double dv;
	char *end, *host;
	int port;

	switch (k->type) {
	case TG_CFG_STR:
	case TG_CFG_SECRET:
		free(*FIELD(base, k->off, char *));
		*FIELD(base, k->off, char *) = tg_xstrdup(s);
		return 0;
	case TG_CFG_PATH:
		free(*FIELD(base, k->off, char *));
		*FIELD(base, k->off, char *) = resolve_path(s, c->file);
		return 0;
	case TG_CFG_ADDR:
		if (tg_config_parse_addr(s, &host, &port))
			return fail(c, line, col, name, "expected host:port, got '%s'", s);
		free(host);
		free(*FIELD(base, k->off, char *));
		*FIELD(base, k->off, char *) = tg_xstrdup(s);
		return 0;
	case TG_CFG_INT:
		if (parse_int(s, &iv))
			return fail(c, line, col, name, "expected an integer, got '%s'", s);
		*FIELD(base, k->off, long long) = iv;
		return check_bounds(c, k, name, line, col, (double)iv);
	case TG_CFG_BOOL:
		if (tg_config_parse_bool(s, FIELD(base, k->off, int)))
			return fail(c, line, col, name, "expected true or false, got '%s'", s);
		return 0;
	case TG_CFG_DOUBLE:
		errno = 0;
		dv = strtod(s, &end);
		if (errno || end == s || *end != '\0' || !isfinite(dv))
			return fail(c, line, col, name, "expected a number, got '%s'", s);
		*FIELD(base, k->off, double) = dv;
		return check_bounds(c, k, name, line, col, dv);
	case TG_CFG_DURATION:
		if (tg_config_parse_duration(s, &v64))
			return fail(c, line, col, name,
			    "expected a duration (250ms, 5s, 2m, 1h, 30d), got '%s'", s);
		*FIELD(base, k->off, int64_t) = v64;
		return check_bounds(c, k, name, line, col, (double)v64);
	case TG_CFG_SIZE:
		if (tg_config_parse_size(s, &v64))
			return fail(c, line, col, name, "expected a size (512, 64k, 10MB), got '%s'",
			    s);
		*FIELD(base, k->off, int64_t) = v64;
		return check_bounds(c, k, name, line, col, (double)v64);
	default:
		return fail(c, line, col, name, "internal: bad key type");
	}
}

/* Find a dotted path under map, marking sections entered; NULL if absent. */
static struct yent *
lookup(struct ynode *map, const char *path)
{
	char part[128];
	const char *dot;
	size_t len, i;

	for (;;) {
		dot = strchr(path, '.');
		len = dot ? (size_t)(dot - path) : strlen(path);
		if (len >= sizeof(part) || map == NULL || map->t != Y_MAP)
			return NULL;
		memcpy(part, path, len);
		part[len] = '\0';
		for (i = 0; i < map->n; i++)
			if (strcmp(map->ents[i].key, part) == 0)
				break;
		if (i == map->n)
			return NULL;
		if (dot == NULL)
			return &map->ents[i];
		if (map->ents[i].used == 0)
			map->ents[i].used = 2;
		map = map->ents[i].val;
		path = dot + 1;
	}
}

/* A plain "~", "null" or empty value means "not set": the default applies. */
static int
is_null(const struct ynode *n)
{
	return n->t == Y_SCALAR && n->plain && (*n->s == '\0' || strcmp(n->s, "~") == 0 ||
	    strcmp(n->s, "null") == 0);
}

/* <name>_file: the secret read from the file v names (relative to the
 * configuration's directory), or a problem naming the file as resolved. */
static int
bind_secret_file(struct ctx *c, const struct tg_cfg_key *k, const struct ynode *v,
    const char *name, void *base)
{
	char alt[240], *full = resolve_path(v->s, c->file), *val;
	const char *why;
	int rc = 0;

	if ((val = read_secret_file(full, &why)) == NULL) {
		snprintf(alt, sizeof(alt), "%s_file", name);
		rc = fail(c, v->line, v->col, alt, "cannot use %s: %s", full, why);
	} else {
		*FIELD(base, k->off, char *) = val;
	}
	free(full);
	return rc;
}

static int
bind_secret(struct ctx *c, const struct tg_cfg_key *k, struct ynode *map, const char *name,
    void *base)
{
	char alt[240];
	struct yent *e[3];
	const char *var;
	int found = 0, i;

	e[0] = lookup(map, k->path);
	snprintf(alt, sizeof(alt), "%s_env", k->path);
	e[1] = lookup(map, alt);
	snprintf(alt, sizeof(alt), "%s_file", k->path);
	e[2] = lookup(map, alt);
	for (i = 0; i < 3; i++) {
		if (e[i] == NULL)
			continue;
		e[i]->used = 1;
		if (is_null(e[i]->val)) {
			e[i] = NULL;
			continue;
		}
		if (found++)
			return fail(c, e[i]->line, e[i]->col, name,
			    "give only one of %s, %s_env and %s_file", k->path, k->path, k->path);
		if (e[i]->val->t != Y_SCALAR)
			return fail(c, e[i]->val->line, e[i]->val->col, name, "expected a string");
	}
	for (i = 0; i < 3; i++)
		if (e[i] != NULL)
			record_pos(c, name, e[i]->val->line, e[i]->val->col);
	if (e[0] != NULL)
		return set_scalar(c, k, name, e[0]->val->s, e[0]->val->line, e[0]->val->col,
		    base);
	if (e[1] != NULL) {
		var = getenv(e[1]->val->s);
		if (var == NULL) {
			snprintf(alt, sizeof(alt), "%s_env", name);
			return fail(c, e[1]->val->line, e[1]->val->col, alt,
			    "environment variable %s is not set", e[1]->val->s);
		}
		return set_scalar(c, k, name, var, 0, 0, base);
	}
	if (e[2] != NULL)
		return bind_secret_file(c, k, e[2]->val, name, base);
	if (k->required)
		return fail(c, map->line, map->col, name, "required (give %s, %s_env or %s_file)",
		    k->path, k->path, k->path);
	return 0;
}

static int
bind_key(struct ctx *c, const struct tg_cfg_key *k, struct ynode *map, const char *prefix,
    void *base)
{
	char name[200];
	struct yent *e;

	snprintf(name, sizeof(name), "%s%s%s", prefix, *prefix ? "." : "", k->path);
	if (k->type == TG_CFG_SECRET)
		return bind_secret(c, k, map, name, base);
	e = lookup(map, k->path);
	if (e != NULL && is_null(e->val)) {
		e->used = 1;
		e = NULL;
	}
	if (e == NULL) {
		if (k->required)
			return fail(c, map->line, map->col, name, "required");
		if (k->type == TG_CFG_STRLIST)
			return set_strlist(c, k, name, NULL, k->def, base);
		if (k->def == NULL || k->type == TG_CFG_LIST)
			return 0;
		return set_scalar(c, k, name, k->def, 0, 0, base);
	}
	e->used = 1;
	record_pos(c, name, e->val->line, e->val->col);
	if (k->type == TG_CFG_STRLIST)
		return set_strlist(c, k, name, e->val, NULL, base);
	if (e->val->t != Y_SCALAR)
		return fail(c, e->val->line, e->val->col, name, "expected a scalar value");
	return set_scalar(c, k, name, e->val->s, e->val->line, e->val->col, base);
}

/* 1 when a table before t[before] has a list at path: that list is bound
 * (and documented) first, with every later table's list at the same path. */
static int
list_seen(const struct tg_cfg_table *t, size_t before, const char *path)
{
	size_t i, j;

	for (i = 0; i < before; i++)
		for (j = 0; j < t[i].nkeys; j++)
			if (t[i].keys[j].type == TG_CFG_LIST && strcmp(t[i].keys[j].path, path) == 0)
				return 1;
	return 0;
}

/* The list k of table t[ti] with every later table's list at its path. */
static int
bind_lists(struct ctx *c, const struct tg_cfg_table *t, size_t nt, size_t ti,
    const struct tg_cfg_key *k, struct ynode *map, const char *prefix)
{
	struct list_part p[TG_CONFIG_MAX_TABLES];
	char name[200];
	struct yent *e;
	size_t i, j, np = 0;

	if (list_seen(t, ti, k->path))
		return 0;
	for (i = ti; i < nt && np < TG_CONFIG_MAX_TABLES; i++)
		for (j = 0; j < t[i].nkeys; j++)
			if (t[i].keys[j].type == TG_CFG_LIST &&
			    strcmp(t[i].keys[j].path, k->path) == 0) {
				p[np++] = (struct list_part){ &t[i].keys[j], t[i].out };
				break;
			}
	snprintf(name, sizeof(name), "%s%s%s", prefix, *prefix ? "." : "", k->path);
	e = lookup(map, k->path);
	if (e != NULL && is_null(e->val)) {
		e->used = 1;
		e = NULL;
	}
	if (e == NULL)
		return k->required ? fail(c, map->line, map->col, name, "required") : 0;
	e->used = 1;
	record_pos(c, name, e->val->line, e->val->col);
	return set_list(c, p, np, name, e->val);
}

/* Keep cand as the best hint so far when it is within 2 edits of bad. */
static void
consider(const char *bad, const char *cand, size_t len, char *best, size_t bestsz, int *bestd)
{
	char buf[200];
	int d;

	if (len >= sizeof(buf))
		return;
	memcpy(buf, cand, len);
	buf[len] = '\0';
	d = tg_str_distance(bad, buf, 2);
	if (d < *bestd) {
		*bestd = d;
		snprintf(best, bestsz, "%s", buf);
	}
}

/*
 * The nearest spelling of an unknown key among the table's keys, their
 * _env and _file forms (secrets), and the sections that hold them, so a
 * misspelt section ("webhook") is matched as well as a misspelt leaf.
 */
/* The candidates of one key: its path, the sections above it, and for a
 * secret its _env and _file forms. */
static void
consider_key(const char *bad, const struct tg_cfg_key *k, char *best, size_t bestsz,
    int *bestd)
{
	char alt[200];
	const char *p = k->path, *dot;

	consider(bad, p, strlen(p), best, bestsz, bestd);
	for (dot = strchr(p, '.'); dot != NULL; dot = strchr(dot + 1, '.'))
		consider(bad, p, (size_t)(dot - p), best, bestsz, bestd);
	if (k->type != TG_CFG_SECRET)
		return;
	snprintf(alt, sizeof(alt), "%s_env", p);
	consider(bad, alt, strlen(alt), best, bestsz, bestd);
	snprintf(alt, sizeof(alt), "%s_file", p);
	consider(bad, alt, strlen(alt), best, bestsz, bestd);
}

/*
 * The nearest spelling of an unknown key among every table's keys, their
 * _env and _file forms (secrets), and the sections that hold them, so a
 * misspelt section ("webhook") is matched as well as a misspelt leaf.
 */
static int
suggest(const char *bad, const struct tg_cfg_table *t, size_t nt, char *best, size_t bestsz)
{
	int bestd = 3;
	size_t i, j;

	for (i = 0; i < nt; i++)
		for (j = 0; j < t[i].nkeys; j++)
			consider_key(bad, &t[i].keys[j], best, bestsz, &bestd);
	return bestd < 3 ? 0 : -1;
}

static const char *
kind_name(const struct ynode *n)
{
	return n->t == Y_SEQ ? "a list" : n->t == Y_MAP ? "a mapping" : "a scalar";
}

/* A section (a key the table only names as a prefix) must be a mapping. */
static int
check_section(struct ctx *c, const struct yent *e, const char *name)
{
	if (e->val->t == Y_MAP || is_null(e->val))
		return 0;
	return fail(c, e->val->line, e->val->col, name, "must be a mapping of keys "
	    "(%s.<key>: value, one per line), not %s", name, kind_name(e->val));
}

static int
check_unknown(struct ctx *c, struct ynode *map, const char *rel, const char *prefix,
    const struct tg_cfg_table *t, size_t nt)
{
	char path[200], name[240], hint[200];
	size_t i;
	int rc = 0;

	for (i = 0; i < map->n; i++) {
		struct yent *e = &map->ents[i];

		snprintf(path, sizeof(path), "%s%s%s", rel, *rel ? "." : "", e->key);
		snprintf(name, sizeof(name), "%s%s%s", prefix, *prefix ? "." : "", path);
		if (e->used == 2 && e->val->t == Y_MAP) {
			if (check_unknown(c, e->val, path, prefix, t, nt))
				rc = -1;
			continue;
		}
		if (e->used == 2) {
			if (check_section(c, e, name))
				rc = -1;
			continue;
		}
		if (e->used)
			continue;
		if (suggest(path, t, nt, hint, sizeof(hint)) == 0)
			rc = fail(c, e->line, e->col, name, "unknown key (did you mean '%s%s%s'?)",
			    prefix, *prefix ? "." : "", hint);
		else
			rc = fail(c, e->line, e->col, name, "unknown key");
	}
	return rc;
}

/* Every table's keys from map (a list at one path: bound together, with
 * the first table that has it), then whatever no table knows. */
static int
bind_tables(struct ctx *c, struct ynode *map, const struct tg_cfg_table *t, size_t nt,
    const char *prefix)
{
	const struct tg_cfg_key *k;
	size_t i, j;
	int rc = 0;

	for (i = 0; i < nt; i++)
		for (j = 0; j < t[i].nkeys; j++) {
			k = &t[i].keys[j];
			if (k->type == TG_CFG_LIST ? bind_lists(c, t, nt, i, k, map, prefix) :
			    bind_key(c, k, map, prefix, t[i].out))
				rc = -1;
		}
	if (check_unknown(c, map, "", prefix, t, nt))
		rc = -1;
	return rc;
}

/* Sections the file set are recorded too, so a cross-key check on a key
 * the file left to its default can point at its section. */
static void
record_sections(struct ctx *c, const struct ynode *root)
{
	size_t i;

	for (i = 0; i < root->n; i++)
		if (root->ents[i].val->t == Y_MAP)
			record_pos(c, root->ents[i].key, root->ents[i].line, root->ents[i].col);
}

static int
load(yaml_parser_t *p, const struct tg_cfg_table *t, size_t nt, struct tg_cfg_report *rep)
{
	struct ctx c = { rep->file, rep, 0 };
	struct ynode *root = parse_doc(p, &c);

	if (root == NULL)
		return -1;
	record_sections(&c, root);
	bind_tables(&c, root, t, nt, "");
	rep->bound = 1;
	node_free(root);
	return rep->n > 0 ? -1 : 0;
}

int
tg_config_load_string_report(const char *name, const char *yaml,
    const struct tg_cfg_key *keys, size_t nkeys, void *out, struct tg_cfg_report *rep)
{
	struct tg_cfg_table t = { keys, nkeys, out };
	yaml_parser_t p;
	int rc;

	if (rep->file == NULL)
		rep->file = name;
	yaml_parser_initialize(&p);
	yaml_parser_set_input_string(&p, (const unsigned char *)yaml, strlen(yaml));
	rc = load(&p, &t, 1, rep);
	yaml_parser_delete(&p);
	return rc;
}

int
tg_config_load_tables_report(const char *path, const struct tg_cfg_table *t, size_t nt,
    struct tg_cfg_report *rep)
{
	yaml_parser_t p;
	const char *why;
	FILE *f;
	int fd, rc;

	if (rep->file == NULL)
		rep->file = path;
	if (nt > TG_CONFIG_MAX_TABLES) {
		tg_config_report_add_at(rep, 0, 0, NULL, "internal: %zu key tables", nt);
		return -1;
	}
	if ((fd = tg_config_file_open(path, &why)) < 0 || (f = fdopen(fd, "rb")) == NULL) {
		tg_config_report_add_at(rep, 0, 0, NULL, "%s", why ? why : strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	yaml_parser_initialize(&p);
	yaml_parser_set_input_file(&p, f);
	rc = load(&p, t, nt, rep);
	yaml_parser_delete(&p);
	fclose(f);
	return rc;
}

int
tg_config_load_report(const char *path, const struct tg_cfg_key *keys, size_t nkeys,
    void *out, struct tg_cfg_report *rep)
{
	struct tg_cfg_table t = { keys, nkeys, out };

	return tg_config_load_tables_report(path, &t, 1, rep);
}

/* The first problem into err, for callers that stop at one. */
static int
first_problem(struct tg_cfg_report *rep, int rc, struct tg_err *err)
{
	if (rc != 0)
		tg_err_set(err, "%s", rep->n > 0 ? rep->v[0].msg : "configuration refused");
	tg_config_report_cleanup(rep);
	return rc;
}

int
tg_config_load_string(const char *name, const char *yaml, const struct tg_cfg_key *keys,
    size_t nkeys, void *out, struct tg_err *err)
{
	struct tg_cfg_report rep = { 0 };

	return first_problem(&rep, tg_config_load_string_report(name, yaml, keys, nkeys, out,
	    &rep), err);
}

int
tg_config_load(const char *path, const struct tg_cfg_key *keys, size_t nkeys, void *out,
    struct tg_err *err)
{
	struct tg_cfg_report rep = { 0 };

	return first_problem(&rep, tg_config_load_report(path, keys, nkeys, out, &rep), err);
}

int
tg_config_defaults(const struct tg_cfg_key *keys, size_t nkeys, void *out, struct tg_err *err)
{
	return tg_config_load_string("(defaults)", "{}", keys, nkeys, out, err);
}

void
tg_config_free(const struct tg_cfg_key *keys, size_t nkeys, void *out)
{
	size_t i, j;

	for (i = 0; i < nkeys; i++) {
		const struct tg_cfg_key *k = &keys[i];

		switch (k->type) {
		case TG_CFG_STR:
		case TG_CFG_PATH:
		case TG_CFG_ADDR:
		case TG_CFG_SECRET:
			free(*FIELD(out, k->off, char *));
			*FIELD(out, k->off, char *) = NULL;
			break;
		case TG_CFG_STRLIST: {
			struct tg_strlist *l = FIELD(out, k->off, struct tg_strlist);

			for (j = 0; j < l->n; j++)
				free(l->v[j]);
			free(l->v);
			l->v = NULL;
			l->n = 0;
			break;
		}
		case TG_CFG_LIST: {
			void **arr = FIELD(out, k->off, void *);
			size_t *count = FIELD(out, k->count_off, size_t);

			for (j = 0; *arr != NULL && j < *count; j++)
				tg_config_free(k->sub, k->nsub, (char *)*arr + j * k->elem_size);
			free(*arr);
			*arr = NULL;
			*count = 0;
			break;
		}
		default:
			break;
		}
	}
}

/* ---- documentation ---- */

static const char *
type_name(enum tg_cfg_type t)
{
	static const char *const names[] = { "string", "integer", "boolean", "number",
		"duration", "size", "host:port", "secret", "list of strings", "list", "path" };

	return (size_t)t < TG_NELEM(names) ? names[t] : "?";
}

static void
doc_rows(const struct tg_cfg_key *keys, size_t nkeys, const char *prefix, FILE *out)
{
	char name[200];
	size_t i;

	for (i = 0; i < nkeys; i++) {
		const struct tg_cfg_key *k = &keys[i];

		snprintf(name, sizeof(name), "%s%s", prefix, k->path);
		if (k->type == TG_CFG_SECRET)
			fprintf(out, "| `%s_env`, `%s_file` (or `%s`) | %s | %s | %s |\n", name, name, name,
			    type_name(k->type), k->required ? "required" : "none", k->doc);
		else
			fprintf(out, "| `%s` | %s | %s%s%s | %s |\n", name, type_name(k->type),
			    k->def ? "`" : "", k->def ? k->def : k->required ? "required" : "none",
			    k->def ? "`" : "", k->doc);
		if (k->type == TG_CFG_LIST) {
			snprintf(name, sizeof(name), "%s%s[].", prefix, k->path);
			doc_rows(k->sub, k->nsub, name, out);
		}
	}
}

void
tg_config_doc(const struct tg_cfg_key *keys, size_t nkeys, FILE *out)
{
	struct tg_cfg_table t = { keys, nkeys, NULL };

	tg_config_doc_tables(&t, 1, out);
}

void
tg_config_doc_tables(const struct tg_cfg_table *t, size_t nt, FILE *out)
{
	char name[200];
	size_t i, j;

	fputs("| key | type | default | meaning |\n|---|---|---|---|\n", out);
	for (i = 0; i < nt; i++)
		for (j = 0; j < t[i].nkeys; j++) {
			const struct tg_cfg_key *k = &t[i].keys[j];

			if (k->type != TG_CFG_LIST || !list_seen(t, i, k->path)) {
				doc_rows(k, 1, "", out);
				continue;
			}
			snprintf(name, sizeof(name), "%s[].", k->path);	/* its items' keys */
			doc_rows(k->sub, k->nsub, name, out);
		}
}
