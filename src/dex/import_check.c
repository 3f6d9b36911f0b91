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
 * each event, at close to the parser's own speed (bench/validate.sh).
 *
 * Memory is bounded independently of the body except for the set of the
 * batch's ids: keyed 64-bit hashes with the row that used each first (16
 * bytes a slot, load at most 3/4). Two different ids share a hash with
 * probability about rows^2 / 2^65; the SipHash key is random per process
 * so that nobody can aim collisions at the table. The team names of one
 * manpower object are compared in place, or in a second such set when an
 * object has many. yajl holds a string or number that spans two chunks in
 * its own buffer, which is why none may exceed IC_MAX_TOKEN bytes.
 *
 * Verdicts never depend on where the body's chains end (the unit tests cut
 * bodies everywhere; the fuzz target compares whole and cut bodies).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <sys/mman.h>

#include <event2/buffer.h>
#include <yajl/yajl_parse.h>

#include "tidegate/clock.h"
#include "tidegate/ids.h"
#include "tidegate/multipart.h"
#include "tidegate/dex.h"

/* Hashes and timestamps are read a word at a time. */
#if __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "import_check.c reads words little-endian"
#endif

#define IC_MAX_DEPTH	8		/* top array, row and a list need 3 */
#define IC_MAX_TOKEN	(1024 * 1024)
#define IC_MAX_MANPOWER	2147483647LL	/* a manpower figure is a 32-bit int */
#define IC_EXCERPT	40		/* bytes of a bad value quoted in messages */
#define IC_MAX_MESSAGE	512		/* values are quoted in part, so it is enough */
#define IC_NEAR_LEN	22		/* longest name within distance 2 of a field */
#define IC_HARMLESS	8		/* unknown names remembered as no near miss */
#define IC_FEW_TEAMS	8		/* team names compared in place, not hashed, */
#define IC_TEAM_LEN	24		/* while there are no more and none longer */

/* ---- fields of an activity (spec part 2) ---- */

enum fid {
	F_ID, F_SITE, F_ASSET, F_START, F_END, F_CATEGORY, F_STATUS, F_WP, F_ACW,
	F_WO, F_TEAMS, F_PERSONNEL, F_MANPOWER, F_INTERNAL, F_EXTERNAL,
	F_NFIELDS, F_UNKNOWN = F_NFIELDS
};

enum kind { K_REQ, K_STR, K_DATE, K_STATUS, K_BOOL, K_LIST, K_MANPOWER, K_SKIP };

static const char *const names[F_NFIELDS] = {
	"id", "siteId", "assetId", "startDate", "endDate", "activityCategory", "status",
	"workPackageId", "additionalClientWork", "workOrderId", "teams", "personnelIds",
	"manpower", "internalRemarks", "externalRemarks",
};

static const unsigned char kinds[F_NFIELDS] = {
	K_REQ, K_REQ, K_STR, K_DATE, K_DATE, K_STR, K_STATUS, K_STR, K_BOOL, K_STR,
	K_LIST, K_LIST, K_MANPOWER, K_STR, K_STR,
};

#define ID_ADDED (1u << F_NFIELDS)	/* in struct ic's seen: the row's id is in the set */

/* k (the text at hand) equals a literal of the same length. */
#define IS(lit) (memcmp(k, lit, sizeof(lit) - 1) == 0)

/* JSON types of a value event, as messages name them. */
enum vt { V_NULL, V_BOOL, V_NUM, V_STR, V_MAP, V_ARR };
static const char *const vt_names[] = {
	"null", "a boolean", "a number", "a string", "an object", "an array",
};

/* What the containers on the stack hold; S_DOC is below them all. */
enum st { S_DOC, S_TOP, S_ROW, S_LIST, S_MANPOWER, S_SKIP };

/*
 * Where a problem is: "", /row, /row/field, /row/field/index,
 * /row/manpower/team; W_FORM is the `file` field of a multipart form.
 */
enum where { W_ROOT, W_ROW, W_FIELD, W_ELEM, W_TEAM, W_FORM };

/* ---- keyed hash sets ---- */

/*
 * A slot holds a hash and the value stored with it (a row index: 32 bits
 * would need a body of 40 GB to run out), so an insert touches one line.
 */
struct hslot {
	uint64_t h;		/* 0 marks a free slot */
	uint32_t v;
	uint32_t unused;
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
		memcpy(&m, p + i, 8);
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
sip_key_once(void)
{
	uint64_t k[2];

	tg_id_random(k, sizeof(k));
	sip_k0 = k[0];
	sip_k1 = k[1];
}

/* Checks run on the loop and on the validation worker (src/core/worker.c):
 * the key is made once, whichever thread comes first. */
static void
sip_key(void)
{
	static pthread_once_t once = PTHREAD_ONCE_INIT;

	pthread_once(&once, sip_key_once);
}

/*
 * Every page of a table is touched within moments of its creation, at
 * random. Large tables are mapped, asked for huge pages (fewer TLB misses
 * and faults; the stall a compaction may cause is small next to checking
 * the tens of thousands of rows such a table serves) and populated at
 * once, which costs far less than faulting pages in one by one (notably in
 * virtual machines). Small ones are zeroed here rather than by calloc,
 * whose lazily zeroed pages a probe would read, then write: two faults.
 */
#define IC_MAP_MIN (256 * 1024)

static struct hslot *
table_new(size_t slots)
{
	size_t bytes = slots * sizeof(struct hslot);
	void *t;

	if (bytes < IC_MAP_MIN) {
		t = tg_xmalloc(bytes);
		memset(t, 0, bytes);
		return t;
	}
	t = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (t == MAP_FAILED)
		abort();	/* as tg_xmalloc does */
#ifdef MADV_HUGEPAGE
	(void)madvise(t, bytes, MADV_HUGEPAGE);
#endif
#ifdef MADV_POPULATE_WRITE
	if (madvise(t, bytes, MADV_POPULATE_WRITE) == 0)
		return t;
#endif
	memset(t, 0, bytes);
	return t;
}

static void
hset_free(struct hset *hs)
{
	size_t bytes = hs->s ? (hs->mask + 1) * sizeof(struct hslot) : 0;

	if (bytes >= IC_MAP_MIN)
		munmap(hs->s, bytes);
	else
		free(hs->s);
	hs->s = NULL;
}

static void
hset_resize(struct hset *hs, size_t slots)
{
	struct hset old = *hs;
	size_t i, j;

	hs->mask = slots - 1;
	hs->s = table_new(slots);
	for (i = 0; old.s != NULL && i <= old.mask; i++) {
		if (old.s[i].h == 0)
			continue;
		for (j = old.s[i].h & hs->mask; hs->s[j].h != 0; j = (j + 1) & hs->mask)
			;
		hs->s[j] = old.s[i];
	}
	hset_free(&old);
}

static int
hset_full(const struct hset *hs)
{
	return hs->s == NULL || 4 * (hs->n + 1) > 3 * (hs->mask + 1);
}

/*
 * Double the table, or more to hold expect entries (load <= 3/4): a good
 * guess of the final size saves rebuilding it at every doubling.
 */
static void
hset_grow(struct hset *hs, size_t expect)
{
	size_t slots = hs->s ? 2 * (hs->mask + 1) : 16;

	while (4 * expect > 3 * slots)
		slots *= 2;
	hset_resize(hs, slots);
}

/* Ask for h's slot ahead of hset_add: a large table misses the caches. */
static void
hset_prefetch(const struct hset *hs, uint64_t h)
{
	if (hs->s != NULL)
		__builtin_prefetch(&hs->s[(h + (h == 0)) & hs->mask], 1);
}

/* Add h with value v: 0, or 1 with *first the value stored first for h. */
static int
hset_add(struct hset *hs, uint64_t h, uint32_t v, uint32_t *first)
{
	size_t j;

	h += h == 0;
	if (hset_full(hs))
		hset_grow(hs, 0);
	for (j = h & hs->mask; hs->s[j].h != 0; j = (j + 1) & hs->mask) {
		if (hs->s[j].h == h) {
			*first = hs->s[j].v;
			return 1;
		}
	}
	hs->s[j].h = h;
	hs->s[j].v = v;
	hs->n++;
	return 0;
}

/* Empty for reuse; a table grown by one huge object is given back. */
static void
hset_clear(struct hset *hs)
{
	if (hs->s != NULL && hs->mask > 63)
		hset_free(hs);
	else if (hs->s != NULL)
		memset(hs->s, 0, (hs->mask + 1) * sizeof(*hs->s));
	hs->n = 0;
}

/* ---- the checker ---- */

struct ic {
	yajl_handle h;
	struct tg_problems *p;
	size_t base;		/* bytes fed before the current chunk */
	const char *chunk;	/* the chunk yajl is reading */
	size_t clen;
	size_t last;		/* where the last string or number ended */
	size_t bytes;		/* bytes checked (up to the stop) */
	size_t total;		/* bytes there will be at most (for sizing the id set) */
	int stop;		/* a syntax, depth or size problem ended the check */
	int started;		/* a token was seen */
	int single;		/* the body is one object: paths have no row */
	unsigned char stack[IC_MAX_DEPTH + 1];
	size_t depth;		/* containers open; stack[depth] is the innermost */
	int top;		/* stack[depth] */
	size_t rows;		/* rows begun; the current one is rows - 1 */
	int field;		/* field of the last key in the current row */
	int kind;		/* its kind; K_SKIP for unknown fields */
	uint32_t seen;		/* fields named in the current row */
	uint32_t have;		/* fields given a non-null value in it */
	size_t elem;		/* index in the current list */
	struct hset ids, teams;
	uint64_t id_hash;	/* of the current row's id, added at its end */
	char id_ex[IC_EXCERPT + 4];	/* that id, for a message */
	char few[IC_FEW_TEAMS][IC_TEAM_LEN];	/* team names of this manpower object */
	unsigned char few_len[IC_FEW_TEAMS];
	unsigned nfew;		/* names in few; IC_FEW_TEAMS + 1 once they are in teams */
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
    __attribute__((format(printf, 4, 5), noinline, cold));

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
		c->stack[++c->depth] = (unsigned char)s;
		c->top = s;
		return 1;
	}
	if (c->single || c->stack[2] == S_ROW)
		w = W_FIELD;
	else if (c->stack[1] == S_TOP)
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

static void add_id(struct ic *);

static void
end_row(struct ic *c)
{
	int f;

	if (c->seen & ID_ADDED)
		add_id(c);
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
two(const char *s)
{
	return (s[0] - '0') * 10 + (s[1] - '0');
}

/*
 * The 8 bytes at s against a pattern: digits where d has 0xff bytes, the
 * bytes of lit elsewhere. Both are constants, so the masks fold away.
 */
static inline int
match8(const char *s, uint64_t d, uint64_t lit)
{
	uint64_t w;

	memcpy(&w, s, 8);
	return ((w ^ lit) & ~d) == 0 &&
	    (w & d & 0xf0f0f0f0f0f0f0f0ULL) == (d & 0x3030303030303030ULL) &&
	    (((w & d & 0x0f0f0f0f0f0f0f0fULL) + (d & 0x0606060606060606ULL)) &
	    0xf0f0f0f0f0f0f0f0ULL) == 0;
}

/*
 * Exports write YYYY-MM-DDTHH:MM:SS[.fff]Z: that shape is checked here, a
 * word at a time; any other goes to the strict parser, the only judge of
 * what is valid (this accepts nothing it would refuse).
 */
static int
is_plain_utc(const char *s, size_t n)
{
	int y, mo, d;

	if (n == 20 ? !match8(s + 12, 0x00ffff00ffff00ffULL, 0x5a00003a00003a00ULL) :
	    n != 24 || !match8(s + 16, 0x00ffffff00ffff00ULL, 0x5a0000002e00003aULL))
		return 0;
	if (!match8(s, 0x00ffff00ffffffffULL, 0x2d00002d00000000ULL) ||	/* dddd-dd- */
	    !match8(s + 8, 0xffff00ffff00ffffULL, 0x00003a0000540000ULL))	/* ddTdd:dd */
		return 0;
	y = two(s) * 100 + two(s + 2);
	mo = two(s + 5);
	d = two(s + 8);
	return mo >= 1 && mo <= 12 && d >= 1 && d <= (mo != 2 ? 30 + ((mo + mo / 8) & 1) :
	    28 + ((y % 4 == 0 && y % 100 != 0) || y % 400 == 0)) &&
	    two(s + 11) <= 23 && two(s + 14) <= 59 && two(s + 17) <= 59;
}

static int
is_date(const char *s, size_t n)
{
	char buf[64];
	int64_t ms;

	if (is_plain_utc(s, n))
		return 1;
	if (n >= sizeof(buf) || memchr(s, '\0', n) != NULL)
		return 0;
	memcpy(buf, s, n);
	buf[n] = '\0';
	return tg_clock_parse_iso(buf, &ms) == 0;
}

static void
check_status(struct ic *c, const char *k, size_t n)
{
	char ex[IC_EXCERPT + 4];

	if ((n == 7 && IS("PLANNED")) || (n == 10 && IS("DISPATCHED")) ||
	    (n == 9 && IS("COMPLETED")))
		return;
	excerpt(k, n, ex);
	problem(c, W_FIELD, "enum", "'%s' is not one of PLANNED, DISPATCHED, COMPLETED", ex);
}

/*
 * The ids the body will hold at the rate seen so far, once a megabyte has
 * shown the rate; an id takes at least 11 bytes ({"id":"x"},).
 */
static size_t
expected_ids(const struct ic *c)
{
	double guess;

	if (c->last < (1 << 20) || c->total <= c->last)
		return 0;
	guess = (double)c->rows * ((double)c->total / (double)c->last);
	return guess < (double)(c->total / 11) ? (size_t)guess : c->total / 11;
}

/* id and siteId; the id also joins the batch's set. */
static void
check_required(struct ic *c, const char *s, size_t n)
{
	if (n == 0) {
		problem(c, W_FIELD, "required", "field '%s' must not be empty", names[c->field]);
		return;
	}
	if (c->field != F_ID || c->single || (c->seen & ID_ADDED))
		return;
	c->seen |= ID_ADDED;	/* a repeated id is a duplicate field, not row */
	c->id_hash = siphash13((const unsigned char *)s, n);
	excerpt(s, n, c->id_ex);
	hset_prefetch(&c->ids, c->id_hash);
}

/*
 * The row's id joins the batch's set when the row ends: by then the slot
 * asked for when the id was read has come in from memory.
 */
static void
add_id(struct ic *c)
{
	uint32_t first;

	if (hset_full(&c->ids))
		hset_grow(&c->ids, expected_ids(c));
	if (!hset_add(&c->ids, c->id_hash, (uint32_t)(c->rows - 1), &first))
		return;
	c->field = F_ID;
	problem(c, W_FIELD, "duplicate_id", "id '%s' is already used by the activity at index %u",
	    c->id_ex, first);
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
	enum kind k = c->kind;

	if (k == K_SKIP)
		return skip(c, t);
	if (t == V_NULL)
		return 1;	/* null counts as absent */
	c->have |= 1u << c->field;
	if (t == V_STR && k <= K_STATUS) {
		check_string(c, k, s, n);
		return 1;
	}
	if ((t == V_BOOL && k == K_BOOL) || (t == V_ARR && k == K_LIST) ||
	    (t == V_MAP && k == K_MANPOWER)) {
		c->elem = 0;
		c->nfew = 0;
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

	for (; t == V_NUM && i < n && s[i] >= '0' && s[i] <= '9'; i++)
		if (v <= IC_MAX_MANPOWER)
			v = v * 10 + (s[i] - '0');
	if (t != V_NUM || i < n) {	/* yajl stopped at '.', 'e' or 'E' */
		excerpt(c->key, c->klen, team);
		problem(c, W_TEAM, "type", "manpower of team '%s' must be an integer, not %s",
		    team, t == V_NUM ? "a fraction" : vt_names[t]);
		return skip(c, t);
	}
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
	c->started = 1;
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
	switch (c->top) {
	case S_DOC:
		return top_value(c, t);
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

/*
 * Every key of every row comes here: a switch on the length and
 * fixed-length comparisons the compiler inlines, no loop over names.
 */
static int
lookup(const unsigned char *k, size_t n)
{
	switch (n) {
	case 2:
		return IS("id") ? F_ID : F_UNKNOWN;
	case 5:
		return IS("teams") ? F_TEAMS : F_UNKNOWN;
	case 6:
		return IS("siteId") ? F_SITE : IS("status") ? F_STATUS : F_UNKNOWN;
	case 7:
		return IS("assetId") ? F_ASSET : IS("endDate") ? F_END : F_UNKNOWN;
	case 8:
		return IS("manpower") ? F_MANPOWER : F_UNKNOWN;
	case 9:
		return IS("startDate") ? F_START : F_UNKNOWN;
	case 11:
		return IS("workOrderId") ? F_WO : F_UNKNOWN;
	case 12:
		return IS("personnelIds") ? F_PERSONNEL : F_UNKNOWN;
	case 13:
		return IS("workPackageId") ? F_WP : F_UNKNOWN;
	case 15:
		return IS("internalRemarks") ? F_INTERNAL :
		    IS("externalRemarks") ? F_EXTERNAL : F_UNKNOWN;
	case 16:
		return IS("activityCategory") ? F_CATEGORY : F_UNKNOWN;
	case 20:
		return IS("additionalClientWork") ? F_ACW : F_UNKNOWN;
	default:
		return F_UNKNOWN;
	}
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

/*
 * Whether the manpower object named this team before. Objects hold a few
 * short names, compared in place; past that they go to the keyed set.
 */
static int
team_seen(struct ic *c, const unsigned char *k, size_t n)
{
	uint32_t first;
	unsigned i;

	if (c->nfew <= IC_FEW_TEAMS) {
		for (i = 0; i < c->nfew; i++)
			if (c->few_len[i] == n && memcmp(c->few[i], k, n) == 0)
				return 1;
		if (c->nfew < IC_FEW_TEAMS && n <= IC_TEAM_LEN) {
			memcpy(c->few[c->nfew], k, n);
			c->few_len[c->nfew++] = (unsigned char)n;
			return 0;
		}
		hset_clear(&c->teams);
		for (i = 0; i < c->nfew; i++)
			hset_add(&c->teams, siphash13((unsigned char *)c->few[i], c->few_len[i]), 0,
			    &first);
		c->nfew = IC_FEW_TEAMS + 1;
	}
	return hset_add(&c->teams, siphash13(k, n), 0, &first);
}

static void
team_key(struct ic *c, const unsigned char *k, size_t n)
{
	char team[IC_EXCERPT + 4];

	set_key(c, k, n);
	if (!team_seen(c, k, n))
		return;
	excerpt(c->key, c->klen, team);
	problem(c, W_TEAM, "duplicate", "team '%s' is given more than once in 'manpower'", team);
}

/* Keys that need more than a lookup, kept out of the callbacks' way. */
static __attribute__((noinline)) void
other_key(struct ic *c, const unsigned char *k, size_t n, int f)
{
	if (c->top == S_MANPOWER) {
		team_key(c, k, n);
		return;
	}
	c->field = f;
	c->kind = f == F_UNKNOWN ? K_SKIP : kinds[f];
	if (f == F_UNKNOWN) {
		set_key(c, k, n);
		unknown_key(c);
		return;
	}
	problem(c, W_FIELD, "duplicate", "field '%s' is given more than once", names[f]);
}

/* ---- yajl callbacks ---- */

/* No string or number for IC_MAX_TOKEN bytes: the check ends there. */
static __attribute__((noinline)) void
too_long(struct ic *c)
{
	problem(c, W_ROOT, "too_long", "no JSON string or number ends within %d bytes after "
	    "byte offset %zu (they are limited to that length)", IC_MAX_TOKEN, c->last);
	c->bytes = c->last;
	c->stop = 1;
}

/*
 * Only strings and numbers can be long, and yajl may buffer them: the
 * distance between their ends bounds what it holds. Most lie in the chunk
 * (s points into it), so their end is known without asking yajl; escaped
 * and split ones are in yajl's buffers. tail: a closing quote.
 */
static int
mark(struct ic *c, const void *s, size_t n, size_t tail)
{
	size_t at = (uintptr_t)s - (uintptr_t)c->chunk, end;

	if (at < c->clen)
		end = c->base + at + n + tail;
	else
		end = c->base + yajl_get_bytes_consumed(c->h);
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
	return value(arg, V_NULL, NULL, 0);
}

static int
on_bool(void *arg, int b)
{
	return value(arg, V_BOOL, NULL, 0);
}

static int
on_number(void *arg, const char *s, size_t n)
{
	return mark(arg, s, n, 0) && value(arg, V_NUM, s, n);
}

/* Most values of most rows are plain strings or list elements: no more to do. */
static int
on_string(void *arg, const unsigned char *s, size_t n)
{
	struct ic *c = arg;

	if (!mark(c, s, n, 1))
		return 0;
	if (c->top == S_ROW && c->kind == K_STR)
		return 1;
	if (c->top == S_LIST) {
		c->elem++;
		return 1;
	}
	return value(c, V_STR, (const char *)s, n);
}

static int
on_start_map(void *arg)
{
	return value(arg, V_MAP, NULL, 0);
}

static int
on_start_array(void *arg)
{
	return value(arg, V_ARR, NULL, 0);
}

static int
on_key(void *arg, const unsigned char *k, size_t n)
{
	struct ic *c = arg;
	int f;

	if (!mark(c, k, n, 1))
		return 0;
	if (c->top != S_ROW && c->top != S_MANPOWER)
		return 1;
	f = c->top == S_ROW ? lookup(k, n) : F_UNKNOWN;
	if (f != F_UNKNOWN && !(c->seen & (1u << f))) {
		c->seen |= 1u << f;
		c->field = f;
		c->kind = kinds[f];
		return 1;
	}
	other_key(c, k, n, f);
	return 1;
}

static int
on_end(void *arg)
{
	struct ic *c = arg;

	if (c->top == S_ROW)
		end_row(c);
	c->top = c->stack[--c->depth];
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
	hset_free(&c->ids);
	hset_free(&c->teams);
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
	c->chunk = data;
	c->clen = n;
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
	c->clen = 0;	/* yajl reads a blank of its own */
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
	c.total = evbuffer_get_length(body);
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
	u.c.total = evbuffer_get_length(body);
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
