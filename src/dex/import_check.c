/*
 * import_check.c - streaming validation of activity imports against the
 * spec's part 2 ("Activity, as submitted by POST /import/activities"). The
 * gateway's handlers of POST /import/activities (JSON body) and
 * /import/activities/file (multipart upload) call it before anything is
 * sent to the vendor; the rules and codes are listed in docs/validation.md.
 *
 * Imports run to hundreds of megabytes, so the body is never parsed into a
 * tree: yajl's event parser is fed the evbuffer's chains in place and an
 * explicit state machine (a stack of at most IC_MAX_DEPTH states) checks
 * each event. Memory is bounded independently of the body except for two
 * sets of keyed 64-bit hashes: the ids of the batch (16 bytes a slot, load
 * at most 1/2) and the team names of the manpower object being checked.
 * Two different ids share a hash with probability about rows^2 / 2^65;
 * the key is random per process so that nobody can aim collisions at the
 * table. yajl holds a token split across two chunks in its own buffer,
 * which is why no token may exceed IC_MAX_TOKEN bytes.
 */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <yajl/yajl_parse.h>

#include "tidegate/clock.h"
#include "tidegate/ids.h"
#include "tidegate/multipart.h"
#include "tidegate/validate.h"

#define IC_MAX_DEPTH	8		/* top array, row and a list need 3 */
#define IC_MAX_TOKEN	(1024 * 1024)
#define IC_MAX_MANPOWER	2147483647LL	/* the vendor's integers are 32-bit */
#define IC_EXCERPT	40		/* bytes of a bad value quoted in messages */
#define IC_MAX_MESSAGE	512		/* values are quoted in part, so it is enough */
#define IC_NEAR_LEN	22		/* longest name within distance 2 of a field */
#define IC_HARMLESS	8		/* unknown names remembered as no near miss */

/* ---- fields of an activity (spec part 2) ---- */

enum fid {
	F_ID, F_SITE, F_ASSET, F_START, F_END, F_CATEGORY, F_STATUS, F_WP, F_ACW,
	F_WO, F_TEAMS, F_PERSONNEL, F_MANPOWER, F_INTERNAL, F_EXTERNAL,
	F_NFIELDS, F_UNKNOWN = F_NFIELDS
};

enum kind { K_REQ, K_STR, K_DATE, K_STATUS, K_BOOL, K_LIST, K_MANPOWER };

static const char *const names[F_NFIELDS] = {
	"id", "siteId", "assetId", "startDate", "endDate", "activityCategory", "status",
	"workPackageId", "additionalClientWork", "workOrderId", "teams", "personnelIds",
	"manpower", "internalRemarks", "externalRemarks",
};

static const unsigned char kinds[F_NFIELDS] = {
	K_REQ, K_REQ, K_STR, K_DATE, K_DATE, K_STR, K_STATUS, K_STR, K_BOOL, K_STR,
	K_LIST, K_LIST, K_MANPOWER, K_STR, K_STR,
};

/* Keys are matched by length first: at most two fields share one. */
#define NO -1
#define ID_ADDED (1u << F_NFIELDS)	/* in struct ic's seen: the row's id is in the set */
static const signed char by_len[21][2] = {
	[2] = { F_ID, NO }, [5] = { F_TEAMS, NO }, [6] = { F_SITE, F_STATUS },
	[7] = { F_ASSET, F_END }, [8] = { F_MANPOWER, NO }, [9] = { F_START, NO },
	[11] = { F_WO, NO }, [12] = { F_PERSONNEL, NO }, [13] = { F_WP, NO },
	[15] = { F_INTERNAL, F_EXTERNAL }, [16] = { F_CATEGORY, NO }, [20] = { F_ACW, NO },
	[0] = { NO, NO }, [1] = { NO, NO }, [3] = { NO, NO }, [4] = { NO, NO },
	[10] = { NO, NO }, [14] = { NO, NO }, [17] = { NO, NO }, [18] = { NO, NO },
	[19] = { NO, NO },
};

static const char *const statuses[] = { "PLANNED", "DISPATCHED", "COMPLETED" };

/* JSON types of a value event, as messages name them. */
enum vt { V_NULL, V_BOOL, V_NUM, V_STR, V_MAP, V_ARR };
static const char *const vt_names[] = {
	"null", "a boolean", "a number", "a string", "an object", "an array",
};

/* What the containers on the stack hold. */
enum st { S_TOP, S_ROW, S_LIST, S_MANPOWER, S_SKIP };

/*
 * Where a problem is: "", /row, /row/field, /row/field/index,
 * /row/manpower/team; W_FORM is the `file` field of a multipart form.
 */
enum where { W_ROOT, W_ROW, W_FIELD, W_ELEM, W_TEAM, W_FORM };

/* ---- keyed hash sets ---- */

struct hslot {
	uint64_t h;
	size_t v;		/* row index + 1; 0 marks a free slot */
};

struct hset {
	struct hslot *s;
	size_t n, mask;
};

static uint64_t sip_k0, sip_k1;

#define ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND(v0, v1, v2, v3) do {					\
	v0 += v1; v1 = ROTL(v1, 13); v1 ^= v0; v0 = ROTL(v0, 32);	\
	v2 += v3; v3 = ROTL(v3, 16); v3 ^= v2;				\
	v0 += v3; v3 = ROTL(v3, 21); v3 ^= v0;				\
	v2 += v1; v1 = ROTL(v1, 17); v1 ^= v2; v2 = ROTL(v2, 32);	\
} while (0)

/* SipHash-1-3: strong enough against hash flooding, cheap on short ids. */
static uint64_t
siphash13(const unsigned char *p, size_t len)
{
	uint64_t v0 = sip_k0 ^ 0x736f6d6570736575ULL, v1 = sip_k1 ^ 0x646f72616e646f6dULL;
	uint64_t v2 = sip_k0 ^ 0x6c7967656e657261ULL, v3 = sip_k1 ^ 0x7465646279746573ULL;
	uint64_t m, b = (uint64_t)len << 56;
	size_t i, tail = len & 7;

	for (i = 0; i + 8 <= len; i += 8) {
		memcpy(&m, p + i, 8);	/* the input is little-endian on our targets */
		v3 ^= m;
		SIPROUND(v0, v1, v2, v3);
		v0 ^= m;
	}
	for (m = 0; tail > 0; tail--)
		m |= (uint64_t)p[i + tail - 1] << (8 * (tail - 1));
	b |= m;
	v3 ^= b;
	SIPROUND(v0, v1, v2, v3);
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND(v0, v1, v2, v3);
	SIPROUND(v0, v1, v2, v3);
	SIPROUND(v0, v1, v2, v3);
	return v0 ^ v1 ^ v2 ^ v3;
}

static void
sip_key(void)
{
	uint64_t k[2];

	if (sip_k0 != 0 || sip_k1 != 0)
		return;
	tg_id_random(k, sizeof(k));
	sip_k0 = k[0];
	sip_k1 = k[1] | 1;	/* never both zero: that means "not keyed yet" */
}

static void
hset_grow(struct hset *hs)
{
	struct hset old = *hs;
	size_t i, j;

	hs->mask = old.s ? 2 * old.mask + 1 : 15;
	hs->s = tg_xcalloc(hs->mask + 1, sizeof(*hs->s));
	for (i = 0; old.s != NULL && i <= old.mask; i++) {
		if (old.s[i].v == 0)
			continue;
		for (j = old.s[i].h & hs->mask; hs->s[j].v != 0; j = (j + 1) & hs->mask)
			;
		hs->s[j] = old.s[i];
	}
	free(old.s);
}

/* Add h with value v (>= 1); returns 0, or the value stored first for h. */
static size_t
hset_add(struct hset *hs, uint64_t h, size_t v)
{
	size_t j;

	if (hs->s == NULL || 2 * (hs->n + 1) > hs->mask + 1)
		hset_grow(hs);
	for (j = h & hs->mask; hs->s[j].v != 0; j = (j + 1) & hs->mask)
		if (hs->s[j].h == h)
			return hs->s[j].v;
	hs->s[j].h = h;
	hs->s[j].v = v;
	hs->n++;
	return 0;
}

/* Empty for reuse; a table grown by one huge object is given back. */
static void
hset_clear(struct hset *hs)
{
	if (hs->s != NULL && hs->mask > 63) {
		free(hs->s);
		hs->s = NULL;
	} else if (hs->s != NULL) {
		memset(hs->s, 0, (hs->mask + 1) * sizeof(*hs->s));
	}
	hs->n = 0;
}

/* ---- the checker ---- */

struct ic {
	yajl_handle h;
	struct tg_problems *p;
	size_t base;		/* bytes fed before the current chunk */
	size_t last;		/* where the last token ended */
	size_t bytes;		/* bytes checked (up to the stop) */
	int stop;		/* a syntax, depth or size problem ended the check */
	int started;		/* a token was seen */
	int single;		/* the body is one object: paths have no row */
	unsigned char stack[IC_MAX_DEPTH];
	size_t depth;
	size_t rows;		/* rows begun; the current one is rows - 1 */
	int field;		/* field of the last key in the current row */
	uint32_t seen;		/* fields named in the current row */
	uint32_t have;		/* fields given a non-null value in it */
	size_t elem;		/* index in the current list */
	struct hset ids, teams;
	char *key;		/* last unknown field or team name, NUL-terminated */
	size_t klen, kcap;
	char harmless[IC_HARMLESS][IC_NEAR_LEN + 1];
	unsigned nharmless;
};

static void
set_key(struct ic *c, const unsigned char *k, size_t len)
{
	if (len + 1 > c->kcap) {
		c->kcap = len + 1 > 64 ? len + 1 : 64;
		free(c->key);
		c->key = tg_xmalloc(c->kcap);
	}
	memcpy(c->key, k, len);
	c->key[len] = '\0';
	c->klen = len;
}

/* ---- problems ---- */

static size_t
escaped_len(const char *s, size_t n)
{
	size_t i, e = n;

	for (i = 0; i < n; i++)
		e += s[i] == '~' || s[i] == '/';
	return e;
}

/* Append "/" and an RFC 6901 reference token. */
static char *
put_token(char *o, const char *s, size_t n)
{
	size_t i;

	*o++ = '/';
	for (i = 0; i < n; i++) {
		if (s[i] == '~' || s[i] == '/') {
			*o++ = '~';
			*o++ = s[i] == '~' ? '0' : '1';
		} else {
			*o++ = s[i];
		}
	}
	return o;
}

/* The JSON Pointer of a problem, malloc'd. */
static char *
pointer(const struct ic *c, enum where w)
{
	const char *f = c->field == F_UNKNOWN ? c->key : names[c->field];
	size_t flen = c->field == F_UNKNOWN ? c->klen : strlen(f);
	char *out, *o;

	out = o = tg_xmalloc(24 + escaped_len(f, flen) + 1 + escaped_len(c->key, c->klen) + 24);
	*o = '\0';
	if (w == W_ROOT || w == W_FORM)
		return w == W_FORM ? strcpy(out, "/file") : out;
	if (!c->single)
		o += sprintf(o, "/%zu", c->rows - 1);
	if (w >= W_FIELD)
		o = put_token(o, f, flen);
	if (w == W_ELEM)
		o += sprintf(o, "/%zu", c->elem);
	else if (w == W_TEAM)
		o = put_token(o, c->key, c->klen);
	*o = '\0';
	return out;
}

static void problem(struct ic *c, enum where w, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void
problem(struct ic *c, enum where w, const char *code, const char *fmt, ...)
{
	size_t max = c->p->max ? c->p->max : 1000;
	char *path, msg[IC_MAX_MESSAGE];
	va_list ap;

	if (c->p->n >= max) {
		tg_problems_add(c->p, "", code, "-");	/* counted, not stored */
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	path = pointer(c, w);
	tg_problems_add(c->p, path, code, "%s", msg);
	free(path);
}

/* A bad value for a message: at most IC_EXCERPT bytes, cut between characters. */
static void
excerpt(const char *s, size_t n, char out[IC_EXCERPT + 4])
{
	size_t k = n;

	if (n > IC_EXCERPT) {
		for (k = IC_EXCERPT; k > 0 && ((unsigned char)s[k] & 0xc0) == 0x80; k--)
			;
	}
	memcpy(out, s, k);
	memcpy(out + k, k < n ? "..." : "", k < n ? 4 : 1);
}

/* ---- containers ---- */

static int
push(struct ic *c, enum st s)
{
	enum where w = W_ROOT;

	if (c->depth < IC_MAX_DEPTH) {
		c->stack[c->depth++] = (unsigned char)s;
		return 1;
	}
	if (c->single || c->stack[1] == S_ROW)
		w = W_FIELD;
	else if (c->stack[0] == S_TOP)
		w = W_ROW;
	problem(c, w, "depth", "JSON nesting is deeper than %d levels", IC_MAX_DEPTH);
	c->bytes = c->last;
	c->stop = 1;
	return 0;
}

static int
begin_row(struct ic *c)
{
	c->seen = c->have = 0;
	c->field = F_ID;
	return push(c, S_ROW);
}

static void
end_row(struct ic *c)
{
	int f;

	for (f = F_ID; f <= F_SITE; f++) {
		if (c->have & (1u << f))
			continue;
		c->field = f;
		problem(c, W_FIELD, "required", "field '%s' is required", names[f]);
	}
}

/* A value where anything goes: only its nesting is followed. */
static int
skip(struct ic *c, enum vt t)
{
	return t == V_MAP || t == V_ARR ? push(c, S_SKIP) : 1;
}

/* ---- values ---- */

static int
is_date(const char *s, size_t n)
{
	char buf[64];
	int64_t ms;

	if (n >= sizeof(buf) || memchr(s, '\0', n) != NULL)
		return 0;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return tg_clock_parse_iso(buf, &ms) == 0;
}

static void
check_status(struct ic *c, const char *s, size_t n)
{
	char ex[IC_EXCERPT + 4];
	size_t i;

	for (i = 0; i < TG_NELEM(statuses); i++)
		if (strlen(statuses[i]) == n && memcmp(s, statuses[i], n) == 0)
			return;
	excerpt(s, n, ex);
	problem(c, W_FIELD, "enum", "'%s' is not one of PLANNED, DISPATCHED, COMPLETED", ex);
}

/* id and siteId; the id also joins the batch's set. */
static void
check_required(struct ic *c, const char *s, size_t n)
{
	char ex[IC_EXCERPT + 4];
	size_t first;

	if (n == 0) {
		problem(c, W_FIELD, "required", "field '%s' must not be empty", names[c->field]);
		return;
	}
	if (c->field != F_ID || c->single || (c->seen & ID_ADDED))
		return;
	c->seen |= ID_ADDED;	/* a repeated id is a duplicate field, not row */
	if ((first = hset_add(&c->ids, siphash13((const unsigned char *)s, n), c->rows)) == 0)
		return;
	excerpt(s, n, ex);
	problem(c, W_FIELD, "duplicate_id", "id '%s' is already used by the activity at index %zu",
	    ex, first - 1);
}

static void
check_string(struct ic *c, enum kind k, const char *s, size_t n)
{
	char ex[IC_EXCERPT + 4];

	switch (k) {
	case K_REQ:
		check_required(c, s, n);
		break;
	case K_DATE:
		if (n == 0 || is_date(s, n))
			break;
		excerpt(s, n, ex);
		problem(c, W_FIELD, "date", "field '%s' must be an ISO 8601 timestamp with a time "
		    "zone such as 2024-05-01T08:00:00Z, not '%s'", names[c->field], ex);
		break;
	case K_STATUS:
		if (n > 0)
			check_status(c, s, n);
		break;
	default:
		break;
	}
}

static const char *
expected(enum kind k)
{
	switch (k) {
	case K_BOOL:
		return "a boolean";
	case K_LIST:
		return "an array of strings";
	case K_MANPOWER:
		return "an object of team names to integers";
	default:
		return "a string";
	}
}

/* The value of a field of a row; the key was the last event. */
static int
field_value(struct ic *c, enum vt t, const char *s, size_t n)
{
	enum kind k;

	if (c->field == F_UNKNOWN)
		return skip(c, t);
	if (t == V_NULL)
		return 1;	/* null counts as absent */
	c->have |= 1u << c->field;
	k = kinds[c->field];
	if (t == V_STR && k <= K_STATUS) {
		check_string(c, k, s, n);
		return 1;
	}
	if ((t == V_BOOL && k == K_BOOL) || (t == V_ARR && k == K_LIST) ||
	    (t == V_MAP && k == K_MANPOWER)) {
		c->elem = 0;
		if (t == V_MAP)
			hset_clear(&c->teams);
		return t == V_BOOL ? 1 : push(c, t == V_ARR ? S_LIST : S_MANPOWER);
	}
	problem(c, W_FIELD, "type", "field '%s' must be %s, not %s", names[c->field],
	    expected(k), vt_names[t]);
	return skip(c, t);
}

static int
list_value(struct ic *c, enum vt t)
{
	if (t != V_STR)
		problem(c, W_ELEM, "type", "elements of '%s' must be strings, not %s",
		    names[c->field], vt_names[t]);
	c->elem++;
	return skip(c, t);
}

/* A manpower value: a JSON integer (no fraction or exponent) in range. */
static int
team_value(struct ic *c, enum vt t, const char *s, size_t n)
{
	char ex[IC_EXCERPT + 4], team[IC_EXCERPT + 4];
	long long v = 0;
	size_t i = t == V_NUM && s[0] == '-';

	if (t != V_NUM || memchr(s, '.', n) || memchr(s, 'e', n) || memchr(s, 'E', n)) {
		excerpt(c->key, c->klen, team);
		problem(c, W_TEAM, "type", "manpower of team '%s' must be an integer, not %s",
		    team, t == V_NUM ? "a fraction" : vt_names[t]);
		return skip(c, t);
	}
	for (; i < n && v <= IC_MAX_MANPOWER; i++)
		v = v * 10 + (s[i] - '0');
	if ((s[0] == '-' && v != 0) || v > IC_MAX_MANPOWER) {
		excerpt(s, n, ex);
		excerpt(c->key, c->klen, team);
		problem(c, W_TEAM, "range", "manpower of team '%s' must be between 0 and %lld, "
		    "not %s", team, IC_MAX_MANPOWER, ex);
	}
	return 1;
}

/* An element of the top-level array: an activity. */
static int
row_value(struct ic *c, enum vt t)
{
	c->rows++;
	if (t == V_MAP)
		return begin_row(c);
	problem(c, W_ROW, "type", "an activity must be an object, not %s", vt_names[t]);
	return skip(c, t);
}

static int
top_value(struct ic *c, enum vt t)
{
	if (t == V_ARR)
		return push(c, S_TOP);
	if (t == V_MAP) {
		c->single = 1;
		c->rows = 1;
		return begin_row(c);
	}
	problem(c, W_ROOT, "type", "the body must be an array of activities or one activity "
	    "object, not %s", vt_names[t]);
	return 1;
}

static int
value(struct ic *c, enum vt t, const char *s, size_t n)
{
	if (c->depth == 0)
		return top_value(c, t);
	switch (c->stack[c->depth - 1]) {
	case S_TOP:
		return row_value(c, t);
	case S_ROW:
		return field_value(c, t, s, n);
	case S_LIST:
		return list_value(c, t);
	case S_MANPOWER:
		return team_value(c, t, s, n);
	default:
		return skip(c, t);
	}
}

/* ---- keys ---- */

static int
lookup(const unsigned char *k, size_t n)
{
	int i, f;

	if (n >= TG_NELEM(by_len))
		return F_UNKNOWN;
	for (i = 0; i < 2 && (f = by_len[n][i]) != NO; i++)
		if (memcmp(k, names[f], n) == 0)
			return f;
	return F_UNKNOWN;
}

/*
 * Unknown fields are allowed (exports carry name, type, createdAt...), near
 * misses of a field are not. Rows repeat their keys, so names found harmless
 * are remembered rather than measured again.
 */
static void
unknown_key(struct ic *c)
{
	const char *near;
	unsigned i;

	if (c->klen > IC_NEAR_LEN || memchr(c->key, '\0', c->klen) != NULL)
		return;
	for (i = 0; i < c->nharmless && i < IC_HARMLESS; i++)
		if (strcmp(c->harmless[i], c->key) == 0)
			return;
	near = tg_did_you_mean(c->key, names, F_NFIELDS);
	if (near != NULL && strcasecmp(near, c->key) != 0 &&
	    tg_str_distance(c->key, near, 2) >= (int)strlen(near))
		near = NULL;	/* "x" is 2 edits from "id" but no misspelling of it */
	if (near == NULL) {
		memcpy(c->harmless[c->nharmless++ % IC_HARMLESS], c->key, c->klen + 1);
		return;
	}
	problem(c, W_FIELD, "unknown_field", "unknown field '%s' (did you mean '%s'?)", c->key,
	    near);
}

static void
row_key(struct ic *c, const unsigned char *k, size_t n)
{
	int f = lookup(k, n);

	c->field = f;
	if (f == F_UNKNOWN) {
		set_key(c, k, n);
		unknown_key(c);
		return;
	}
	if (c->seen & (1u << f))
		problem(c, W_FIELD, "duplicate", "field '%s' is given more than once", names[f]);
	c->seen |= 1u << f;
}

static void
team_key(struct ic *c, const unsigned char *k, size_t n)
{
	char team[IC_EXCERPT + 4];

	set_key(c, k, n);
	if (hset_add(&c->teams, siphash13(k, n), 1) == 0)
		return;
	excerpt(c->key, c->klen, team);
	problem(c, W_TEAM, "duplicate", "team '%s' is given more than once in 'manpower'", team);
}

/* ---- yajl callbacks ---- */

/* No event for IC_MAX_TOKEN bytes: the check ends there. */
static void
too_long(struct ic *c)
{
	problem(c, W_ROOT, "too_long", "a JSON token after byte offset %zu is longer than %d "
	    "bytes", c->last, IC_MAX_TOKEN);
	c->bytes = c->last;
	c->stop = 1;
}

/*
 * Every token is where yajl stopped reading; the distance from the previous
 * one bounds what yajl may have had to buffer.
 */
static int
mark(struct ic *c)
{
	size_t end = c->base + yajl_get_bytes_consumed(c->h);

	c->started = 1;
	if (end - c->last <= IC_MAX_TOKEN) {
		c->last = end;
		return 1;
	}
	too_long(c);
	return 0;
}

static int
on_null(void *arg)
{
	return mark(arg) && value(arg, V_NULL, NULL, 0);
}

static int
on_bool(void *arg, int b)
{
	return mark(arg) && value(arg, V_BOOL, NULL, 0);
}

static int
on_number(void *arg, const char *s, size_t n)
{
	return mark(arg) && value(arg, V_NUM, s, n);
}

static int
on_string(void *arg, const unsigned char *s, size_t n)
{
	return mark(arg) && value(arg, V_STR, (const char *)s, n);
}

static int
on_start_map(void *arg)
{
	return mark(arg) && value(arg, V_MAP, NULL, 0);
}

static int
on_start_array(void *arg)
{
	return mark(arg) && value(arg, V_ARR, NULL, 0);
}

static int
on_key(void *arg, const unsigned char *k, size_t n)
{
	struct ic *c = arg;

	if (!mark(c))
		return 0;
	if (c->stack[c->depth - 1] == S_ROW)
		row_key(c, k, n);
	else if (c->stack[c->depth - 1] == S_MANPOWER)
		team_key(c, k, n);
	return 1;
}

static int
on_end(void *arg)
{
	struct ic *c = arg;

	if (!mark(c))
		return 0;
	if (c->stack[--c->depth] == S_ROW)
		end_row(c);
	return 1;
}

static const yajl_callbacks callbacks = {
	on_null, on_bool, NULL, NULL, on_number, on_string,
	on_start_map, on_key, on_end, on_start_array, on_end,
};

/* ---- feeding ---- */

static void
ic_init(struct ic *c, struct tg_problems *p)
{
	memset(c, 0, sizeof(*c));
	sip_key();
	c->p = p;
	c->field = F_ID;
	if ((c->h = yajl_alloc(&callbacks, NULL, c)) == NULL)
		abort();
}

static void
ic_cleanup(struct ic *c)
{
	yajl_free(c->h);
	free(c->ids.s);
	free(c->teams.s);
	free(c->key);
}

/* A syntax error: one problem with the offset, and the check ends. */
static void
syntax_error(struct ic *c, size_t consumed, size_t limit)
{
	unsigned char *e = yajl_get_error(c->h, 0, NULL, 0);
	size_t at = c->base + consumed, n = e ? strcspn((char *)e, "\n") : 0;

	if (at > limit)
		at = limit;	/* yajl_complete_parse counts a blank of its own */
	/*
	 * For this error yajl steps back by the token's length, but clamps at
	 * the start of the chunk when the token began in an earlier one (and
	 * forgets a string's quotes): the end of the value before it is where
	 * ',' or '}' was expected, wherever the chunks end.
	 */
	if (e != NULL && strstr((char *)e, "after key and value") != NULL)
		at = c->last;
	if (at - c->last > IC_MAX_TOKEN) {
		too_long(c);	/* as it would be had the chunk ended earlier */
	} else {
		problem(c, W_ROOT, "json", "invalid JSON at byte offset %zu: %.*s", at, (int)n,
		    e ? (char *)e : "syntax error");
		c->bytes = at;
		c->stop = 1;
	}
	yajl_free_error(c->h, e);
}

static void
ic_feed(struct ic *c, const char *data, size_t n)
{
	yajl_status st;

	if (c->stop || n == 0)
		return;
	st = yajl_parse(c->h, (const unsigned char *)data, n);
	if (st == yajl_status_error)
		syntax_error(c, yajl_get_bytes_consumed(c->h), c->base + n);
	c->base += n;
	if (!c->stop && c->base - c->last > IC_MAX_TOKEN)
		too_long(c);
}

/* A top-level scalar is only reported here: yajl needs its end first. */
static void
ic_finish(struct ic *c)
{
	yajl_status st;

	if (c->stop)
		return;
	st = yajl_complete_parse(c->h);
	if (!c->stop && !c->started)
		problem(c, W_ROOT, "type", "the body is empty: expected an array of activities "
		    "or one activity object");
	else if (st == yajl_status_error)
		syntax_error(c, yajl_get_bytes_consumed(c->h), c->base);
}

/* Every chain of body in order, in place. */
static void
each_chunk(struct evbuffer *body, void (*fn)(void *, const char *, size_t), void *arg)
{
	struct evbuffer_iovec v[16];
	struct evbuffer_ptr ptr;
	size_t len = evbuffer_get_length(body), off = 0, step;
	int n, i;

	if (len == 0 || evbuffer_ptr_set(body, &ptr, 0, EVBUFFER_PTR_SET) != 0)
		return;
	while (off < len) {
		if ((n = evbuffer_peek(body, -1, &ptr, v, (int)TG_NELEM(v))) <= 0)
			break;
		if (n > (int)TG_NELEM(v))
			n = (int)TG_NELEM(v);
		for (i = 0, step = 0; i < n; i++) {
			fn(arg, v[i].iov_base, v[i].iov_len);
			step += v[i].iov_len;
		}
		off += step;
		if (off < len && evbuffer_ptr_set(body, &ptr, step, EVBUFFER_PTR_ADD) != 0)
			break;
	}
}

static void
feed_json(void *arg, const char *data, size_t n)
{
	ic_feed(arg, data, n);
}

int
tg_import_check_json(struct evbuffer *body, struct tg_import_result *res,
    struct tg_problems *p)
{
	struct ic c;
	size_t before = p->total;

	ic_init(&c, p);
	each_chunk(body, feed_json, &c);
	ic_finish(&c);
	if (res != NULL) {
		res->rows = c.rows;
		res->bytes = c.stop ? c.bytes : c.base;
	}
	ic_cleanup(&c);
	return p->total > before ? -1 : 0;
}

/* ---- multipart uploads ---- */

/*
 * The part size limit is kept here rather than by the parser: the parser
 * refuses a whole run of data that crosses it, so how much of the file had
 * been checked would depend on where the body's chains end.
 */
struct upload {
	struct ic c;
	size_t max_part;	/* 0: unlimited */
	size_t part_size;	/* data bytes of the current part */
	char part[IC_EXCERPT + 4];	/* its name, for messages */
	int in_file;		/* the part being read is `file` */
	int files;		/* `file` parts begun */
	int duplicate;		/* stopped at a second `file` part */
	int too_large;		/* stopped at a part over max_part */
};

static int
on_part_begin(void *arg, const char *name, const char *filename, const char *ctype)
{
	struct upload *u = arg;

	u->part_size = 0;
	excerpt(name, strlen(name), u->part);
	u->in_file = strcmp(name, "file") == 0;
	if (!u->in_file || u->files++ == 0)
		return 0;
	problem(&u->c, W_FORM, "duplicate", "the form has more than one 'file' part");
	u->duplicate = 1;
	return 1;
}

static int
on_part_data(void *arg, const char *data, size_t n)
{
	struct upload *u = arg;
	size_t room = u->max_part - u->part_size;

	if (u->max_part > 0 && n > room) {
		if (u->in_file)
			ic_feed(&u->c, data, room);	/* exactly max_part bytes, always */
		u->too_large = 1;
		return 1;
	}
	u->part_size += n;
	if (u->in_file)
		ic_feed(&u->c, data, n);
	return 0;
}

static int
on_part_end(void *arg)
{
	struct upload *u = arg;

	if (u->in_file)
		ic_finish(&u->c);
	u->in_file = 0;
	return 0;
}

static const struct tg_multipart_cbs upload_cbs = { on_part_begin, on_part_data, on_part_end };

struct upload_feed {
	struct tg_multipart *mp;
	struct tg_err err;
	int failed;
};

static void
feed_multipart(void *arg, const char *data, size_t n)
{
	struct upload_feed *f = arg;

	if (!f->failed && tg_multipart_feed(f->mp, data, n, &f->err) != 0)
		f->failed = 1;
}

/* The form's own problems, once the body is read. */
static void
form_problems(struct upload *u, struct upload_feed *f, int *too_large)
{
	if (!f->failed && tg_multipart_finish(f->mp, &f->err) != 0)
		f->failed = 1;
	if (u->too_large) {
		*too_large = 1;
		problem(&u->c, W_ROOT, "too_large", "part '%s' is larger than the limit of %zu "
		    "bytes", u->part, u->max_part);
	} else if (f->failed && !u->duplicate) {
		problem(&u->c, W_ROOT, "multipart", "%s", f->err.msg);
	} else if (!f->failed && u->files == 0) {
		problem(&u->c, W_FORM, "required", "the form has no 'file' part");
	}
}

int
tg_import_check_multipart(struct evbuffer *body, const char *content_type, size_t max_part,
    struct tg_import_result *res, struct tg_problems *p, int *too_large)
{
	struct upload u;
	struct upload_feed f;
	size_t before = p->total;
	char *boundary;
	int dummy;

	if (too_large == NULL)
		too_large = &dummy;
	*too_large = 0;
	memset(&u, 0, sizeof(u));
	memset(&f, 0, sizeof(f));
	ic_init(&u.c, p);
	if ((boundary = tg_multipart_boundary(content_type, &f.err)) == NULL) {
		problem(&u.c, W_ROOT, "multipart", "%s", f.err.msg);
		goto done;
	}
	u.max_part = max_part;
	f.mp = tg_multipart_new(boundary, &upload_cbs, &u, 0);
	each_chunk(body, feed_multipart, &f);
	form_problems(&u, &f, too_large);
done:
	if (res != NULL) {
		res->rows = u.c.rows;
		res->bytes = u.c.stop ? u.c.bytes : u.c.base;
	}
	tg_multipart_free(f.mp);
	free(boundary);
	ic_cleanup(&u.c);
	return p->total > before ? -1 : 0;
}
