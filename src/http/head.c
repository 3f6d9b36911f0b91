/*
 * head.c - the strict request head parser of head.h. libevent's parser
 * takes the first of two Content-Length fields, reads "Transfer-Encoding :"
 * as some other field and joins obs-folded lines; a front proxy that reads
 * the same bytes differently would then disagree with the gateway about
 * where a request ends. This parser refuses every such head instead
 * (RFC 9112 §2.2, §3, §5, §6.1, §6.3). Called by frontdoor.c per request.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "tidegate/head.h"
#include "tidegate/util.h"

/*
 * The methods served, and which may carry a body: the one table of it.
 * evhttp (libevent 2.1.12, evhttp_method_may_have_body) reads a body after
 * GET, POST, PUT, DELETE, PATCH and OPTIONS heads and never after HEAD:
 * a HEAD's Content-Length bytes would be its next request. So a body on a
 * method that has none is refused (nginx and h2o refuse or zero it too);
 * "Content-Length: 0" is no body and passes. TRACE and CONNECT are not
 * served (501). tests/fuzz/fuzz_edge.c holds evhttp to this table.
 */
static const struct {
	const char *name;
	size_t len;
	int body;
} methods[] = {
	{ "GET", 3, 1 }, { "POST", 4, 1 }, { "PUT", 3, 1 }, { "DELETE", 6, 1 },
	{ "HEAD", 4, 0 }, { "PATCH", 5, 1 }, { "OPTIONS", 7, 1 },
};

static const struct {
	int status;
	const char *code;
	const char *msg;
} faults[TG_HEAD_NFAULTS] = {
	[TG_HEAD_OK] = { 200, "OK", "" },
	[TG_HEAD_BAD_LINE] = { 400, "BAD_REQUEST",
	    "malformed request line (method SP origin-form target SP HTTP-version)" },
	[TG_HEAD_BAD_METHOD] = { 501, "NOT_IMPLEMENTED", "method not implemented" },
	[TG_HEAD_BAD_VERSION] = { 505, "HTTP_VERSION_NOT_SUPPORTED",
	    "only HTTP/1.0 and HTTP/1.1 are served" },
	[TG_HEAD_BAD_EOL] = { 400, "BAD_REQUEST", "a bare CR or LF in the request head" },
	[TG_HEAD_BAD_NAME] = { 400, "BAD_REQUEST",
	    "malformed header field name (a token, then ':' with no whitespace before it)" },
	[TG_HEAD_OBS_FOLD] = { 400, "BAD_REQUEST", "obsolete line folding in a header field" },
	[TG_HEAD_BAD_VALUE] = { 400, "BAD_REQUEST", "a control character in a header value" },
	[TG_HEAD_DUP_LENGTH] = { 400, "BAD_REQUEST", "Content-Length given more than once" },
	[TG_HEAD_BAD_LENGTH] = { 400, "BAD_REQUEST", "Content-Length is not a decimal length" },
	[TG_HEAD_LENGTH_AND_TE] = { 400, "BAD_REQUEST",
	    "Content-Length together with Transfer-Encoding" },
	[TG_HEAD_BAD_TE] = { 501, "NOT_IMPLEMENTED",
	    "Transfer-Encoding other than a single 'chunked' (HTTP/1.1 only)" },
	[TG_HEAD_NO_HOST] = { 400, "BAD_REQUEST", "an HTTP/1.1 request needs exactly one Host" },
	[TG_HEAD_RESERVED] = { 400, "BAD_REQUEST",
	    "header field " TG_HEAD_REFUSAL_FIELD " is reserved" },
	[TG_HEAD_TOO_LARGE] = { 431, "HEADERS_TOO_LARGE",
	    "request head too large or too many header fields" },
	[TG_HEAD_BODY_TOO_LARGE] = { 413, "PAYLOAD_TOO_LARGE",
	    "request body larger than this request may send (max_body, or less for a "
	    "caller not yet known)" },
	[TG_HEAD_KEY_MISSING] = { 401, "UNAUTHORIZED",
	    "an API key is required (Authorization: Bearer <key> or X-Api-Key)" },
	[TG_HEAD_KEY_UNKNOWN] = { 401, "UNAUTHORIZED", "unknown API key" },
	[TG_HEAD_TIMEOUT] = { 408, "REQUEST_TIMEOUT",
	    "the request head did not arrive in time" },
	[TG_HEAD_BAD_TARGET] = { 400, "BAD_REQUEST_TARGET",
	    "request target refused: not an origin-form path that can be normalised safely" },
	[TG_HEAD_NOT_FOUND] = { 404, "NOT_FOUND", "no such endpoint" },
	[TG_HEAD_BAD_CHUNK] = { 400, "BAD_REQUEST",
	    "malformed chunked body (chunk-size line, CRLF after chunk data, or trailer)" },
	[TG_HEAD_BODY_NOT_ALLOWED] = { 400, "BAD_REQUEST",
	    "this method carries no body (HEAD): Content-Length above 0 or "
	    "Transfer-Encoding refused" },
	[TG_HEAD_BAD_HOST] = { 400, "BAD_REQUEST",
	    "Host is not host[:port] (RFC 3986: a reg-name, an IPv4 address or a bracketed "
	    "IP-literal)" },
	[TG_HEAD_BAD_EXPECT] = { 417, "EXPECTATION_FAILED",
	    "only Expect: 100-continue is understood" },
	[TG_HEAD_BODY_STALLED] = { 408, "REQUEST_TIMEOUT",
	    "the request body stalled longer than client_body_timeout" },
	[TG_HEAD_BODY_TOO_SLOW] = { 408, "REQUEST_TIMEOUT",
	    "the request body arrived slower than client_body_min_rate" },
	[TG_HEAD_UNAVAILABLE] = { 503, "SERVICE_UNAVAILABLE",
	    "this endpoint cannot take a body yet; try again later" },
	[TG_HEAD_CLIENT_LIMIT] = { 429, "TOO_MANY_REQUESTS",
	    "this client address has max_clients_per_ip requests in progress already" },
};

int
tg_head_fault_status(int fault)
{
	return fault > 0 && fault < TG_HEAD_NFAULTS ? faults[fault].status : 400;
}

const char *
tg_head_fault_code(int fault)
{
	return fault > 0 && fault < TG_HEAD_NFAULTS ? faults[fault].code : "BAD_REQUEST";
}

const char *
tg_head_fault_message(int fault)
{
	return fault > 0 && fault < TG_HEAD_NFAULTS ? faults[fault].msg : "malformed request";
}

/* Byte classes, one table lookup per byte: RFC 9110 tchar (ALPHA / DIGIT /
 * "!#$%&'*+-.^_`|~"), field-value bytes (VCHAR, SP, HTAB, obs-text), and
 * RFC 3986 reg-name bytes but '%' (unreserved, sub-delims). */
enum { C_TCHAR = 1, C_VALUE = 2, C_REGNAME = 4 };
static unsigned char classes[256];

static void
init_classes(void)
{
	static const char extra[] = "!#$%&'*+-.^_`|~", reg[] = "-._~!$&'()*+,;=";
	int c;

	for (c = 0; c < 256; c++) {
		int alnum = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
		    (c >= '0' && c <= '9');

		classes[c] = (c >= 0x20 && c != 0x7f) || c == '\t' ? C_VALUE : 0;
		if (alnum || (c != 0 && memchr(extra, c, sizeof(extra) - 1) != NULL))
			classes[c] |= C_TCHAR;
		if (alnum || (c != 0 && memchr(reg, c, sizeof(reg) - 1) != NULL))
			classes[c] |= C_REGNAME;
	}
}

static int
is_tchar(unsigned char c)
{
	return classes[c] & C_TCHAR;
}

static int
is_ctl(unsigned char c)
{
	return !(classes[c] & C_VALUE);
}

/* Skip field-value bytes from c: eight at a time while none is below 0x20
 * or 0x7f (SWAR), then straight to the first that is (a tab is skipped and
 * the words go on); the byte loop reads the last few. */
static const char *
skip_value(const char *c, const char *end)
{
	const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
	uint64_t x, del, m;

	while (end - c >= 8) {
		memcpy(&x, c, 8);
		del = x ^ (0x7f * ones);
		if ((m = (((x - 0x20 * ones) & ~x) | ((del - ones) & ~del)) & highs) == 0) {
			c += 8;
			continue;
		}
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		/* the lowest flag is the first such byte (a borrow only ever
		 * flags bytes above one): go there; a tab is a value byte */
		c += __builtin_ctzll(m) >> 3;
		if (*c != '\t')
			return c;
		c++;
#else
		break;
#endif
	}
	while (c < end && !is_ctl((unsigned char)*c))
		c++;
	return c;
}

/* Skip VCHAR bytes (a request target) from c: eight at a time while none
 * is at or below 0x20 or at or above 0x7f (SWAR: a borrow or a carry into
 * the next byte only ever flags a byte above one that is such, so a
 * word's lowest flag is the first such byte). */
static const char *
skip_vchar(const char *c, const char *end)
{
	const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
	uint64_t x, m;

	while (end - c >= 8) {
		memcpy(&x, c, 8);
		if ((m = (((x - 0x21 * ones) & ~x) | x | (x + ones)) & highs) == 0) {
			c += 8;
			continue;
		}
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
		return c + (__builtin_ctzll(m) >> 3);
#else
		break;
#endif
	}
	while (c < end && (unsigned char)*c > 0x20 && (unsigned char)*c < 0x7f)
		c++;
	return c;
}

/* CRLF at p: 1; incomplete: 0; anything else: -1 (a bare CR). */
static int
crlf(const char *p, const char *end)
{
	if (p + 1 >= end)
		return 0;
	return p[0] == '\r' && p[1] == '\n' ? 1 : -1;
}

static int
parse_version(const char *v, size_t n, int *minor)
{
	if (n == 8 && memcmp(v, "HTTP/1.", 7) == 0 && (v[7] == '0' || v[7] == '1')) {
		*minor = v[7] - '0';
		return TG_HEAD_OK;
	}
	if (n == 8 && memcmp(v, "HTTP/", 5) == 0 && v[5] >= '0' && v[5] <= '9' &&
	    v[6] == '.' && v[7] >= '0' && v[7] <= '9')
		return TG_HEAD_BAD_VERSION;
	return TG_HEAD_BAD_LINE;
}

/* The method's row in methods[], or -1. */
static int
known_method(const char *m, size_t n)
{
	size_t j;
	int i;

	for (i = 0; i < (int)(sizeof(methods) / sizeof(methods[0])); i++) {
		if (methods[i].len != n)
			continue;
		for (j = 0; j < n && m[j] == methods[i].name[j]; j++)
			;		/* a few bytes: no library call */
		if (j == n)
			return i;
	}
	return -1;
}

/* The version from *cp up to its CRLF: *cp left at the CR. */
static int
scan_version(const char **cp, const char *end, int *minor)
{
	const char *c = *cp, *v = c;
	int rc;

	if (end - c >= 10 && memcmp(c, "HTTP/1.1\r\n", 10) == 0) {
		*minor = 1;	/* nearly every request: no byte loop */
		*cp = c + 8;
		return TG_HEAD_OK;
	}
	for (; c < end && !is_ctl((unsigned char)*c) && *c != ' '; c++)
		;
	if ((rc = crlf(c, end)) <= 0)
		return rc == 0 ? TG_HEAD_INCOMPLETE : *c == ' ' || (*c != '\r' && *c != '\n') ?
		    TG_HEAD_BAD_LINE : TG_HEAD_BAD_EOL;
	*cp = c;
	return parse_version(v, (size_t)(c - v), minor);
}

/* "method SP target SP version CRLF" from p, in one pass; *next past it. */
static int
scan_request_line(const char *p, const char *end, struct tg_head *h, const char **next)
{
	const char *c = p;
	int rc;

	while (c < end && is_tchar((unsigned char)*c))
		c++;
	if (c == end)
		return TG_HEAD_INCOMPLETE;
	if (c == p || *c != ' ')
		return *c == '\r' || *c == '\n' ? TG_HEAD_BAD_EOL : TG_HEAD_BAD_LINE;
	h->method = p;
	h->mlen = (size_t)(c - p);
	h->target = ++c;
	c = skip_vchar(c, end);	/* VCHAR only: no CTL, no space, no obs-text */
	if (c == end)
		return TG_HEAD_INCOMPLETE;
	if (c == h->target || *c != ' ')
		return *c == '\r' || *c == '\n' ? TG_HEAD_BAD_EOL : TG_HEAD_BAD_LINE;
	h->tlen = (size_t)(c - h->target);
	c++;
	if ((rc = scan_version(&c, end, &h->minor)) != TG_HEAD_OK)
		return rc;
	*next = c + 2;
	if ((rc = known_method(h->method, h->mlen)) < 0)
		return TG_HEAD_BAD_METHOD;
	h->no_body = !methods[rc].body;
	return TG_HEAD_OK;
}

/* One field line from p (name, ':', OWS, value, OWS, CRLF) in one pass;
 * *tab set when a tab is in the OWS before the value (evhttp skips only
 * spaces there: its value would begin with the tab). */
static inline int
scan_field(const char *p, const char *end, struct tg_head_field *f, const char **next,
    int *tab)
{
	const char *c = p, *v, *ve;
	int rc, ows = 0;

	if (*p == ' ' || *p == '\t')
		return TG_HEAD_OBS_FOLD;
	while (end - c >= 4 && is_tchar((unsigned char)c[0]) && is_tchar((unsigned char)c[1]) &&
	    is_tchar((unsigned char)c[2]) && is_tchar((unsigned char)c[3]))
		c += 4;		/* a name's bytes four at a time, then one by one */
	while (c < end && is_tchar((unsigned char)*c))
		c++;
	if (c == end)
		return TG_HEAD_INCOMPLETE;
	if (c == p || *c != ':')
		return TG_HEAD_BAD_NAME;
	f->name = p;
	f->nlen = (size_t)(c - p);
	for (c++; c < end && (*c == ' ' || *c == '\t'); c++)
		ows |= *c;
	if (ows & '\t' & ~' ')
		*tab = 1;
	v = c;
	c = skip_value(c, end);
	if ((rc = crlf(c, end)) <= 0)
		return rc == 0 ? TG_HEAD_INCOMPLETE : *c == '\r' || *c == '\n' ?
		    TG_HEAD_BAD_EOL : TG_HEAD_BAD_VALUE;
	for (ve = c; ve > v && (ve[-1] == ' ' || ve[-1] == '\t'); ve--)
		;
	f->value = v;
	f->vlen = (size_t)(ve - v);
	*next = c + 2;
	return TG_HEAD_OK;
}

/* A token (a field name) against lower, a lower-case name of letters and
 * '-': OR-ing 0x20 folds a letter's case and maps no other token byte
 * onto a letter or '-', so no library call is needed. */
static int
token_is(const char *t, const char *lower, size_t n)
{
	size_t i;

	for (i = 0; i < n; i++)
		if ((t[i] | 0x20) != lower[i])
			return 0;
	return 1;
}

/* Length first: most fields are ruled out without touching their bytes. */
#define NAME_IS(f, lit) ((f)->nlen == sizeof(lit) - 1 && \
	token_is((f)->name, (lit), sizeof(lit) - 1))

static int
name_is(const struct tg_head_field *f, const char *name)
{
	return strlen(name) == f->nlen && strncasecmp(f->name, name, f->nlen) == 0;
}

static int
parse_length(const struct tg_head_field *f, int64_t *out)
{
	int64_t n = 0;
	size_t i;

	if (*out >= 0)
		return TG_HEAD_DUP_LENGTH;
	if (f->vlen == 0 || f->vlen > 18)
		return TG_HEAD_BAD_LENGTH;
	for (i = 0; i < f->vlen; i++) {
		if (f->value[i] < '0' || f->value[i] > '9')
			return TG_HEAD_BAD_LENGTH;
		n = n * 10 + (f->value[i] - '0');
	}
	*out = n;
	return TG_HEAD_OK;
}

/* IPv6address or IPvFuture between an IP-literal's brackets, p[0..n). */
static int
ip_literal_ok(const char *p, size_t n)
{
	char buf[INET6_ADDRSTRLEN];
	struct in6_addr a;
	size_t i = 1;

	if (n > 0 && (p[0] == 'v' || p[0] == 'V')) {	/* "v" 1*HEXDIG "." 1*(...) */
		while (i < n && tg_hexval((unsigned char)p[i]) >= 0)
			i++;
		if (i == 1 || i + 1 >= n || p[i++] != '.')
			return 0;
		for (; i < n; i++)
			if (!(classes[(unsigned char)p[i]] & C_REGNAME) && p[i] != ':')
				return 0;
		return 1;
	}
	if (n == 0 || n >= sizeof(buf))
		return 0;
	memcpy(buf, p, n);
	buf[n] = '\0';
	return inet_pton(AF_INET6, buf, &a) == 1;
}

/* Host = uri-host [ ":" port ] (RFC 9110 section 7.2, RFC 3986 section
 * 3.2.2): a reg-name (unreserved, pct-encoded, sub-delims; an IPv4 address
 * is one) or an IP-literal, then at most five port digits. */
static int
host_ok_slow(const char *v, size_t n)
{
	const char *p = v, *end = v + n, *q;

	if (n > 0 && v[0] == '[') {
		if ((q = memchr(v, ']', n)) == NULL || !ip_literal_ok(v + 1, (size_t)(q - v - 1)))
			return 0;
		p = q + 1;
	}
	while (p < end && *p != ':' && v[0] != '[') {
		if (classes[(unsigned char)*p] & C_REGNAME)
			p++;
		else if (*p == '%' && end - p >= 3 && tg_hexval((unsigned char)p[1]) >= 0 &&
		    tg_hexval((unsigned char)p[2]) >= 0)
			p += 3;
		else
			return 0;
	}
	if (p < end && *p++ != ':')
		return 0;
	for (q = p; p < end && (unsigned char)(*p - '0') < 10; p++)
		;
	return p == end && p - q <= 5;
}

/* The same, the common spelling (reg-name bytes, then ":digits") read in
 * one pass: every request has a Host. */
static int
host_ok(const char *v, size_t n)
{
	const char *p = v, *end = v + n, *q;

	while (p < end && (classes[(unsigned char)*p] & C_REGNAME))
		p++;
	if (p == end)
		return 1;
	if (*p == ':') {
		for (q = ++p; p < end && (unsigned char)(*p - '0') < 10; p++)
			;
		if (p == end)
			return p - q <= 5;
	}
	return host_ok_slow(v, n);
}

/* One field that frames the body or addresses the request; the name's
 * length picks the one name it can be, so most fields cost one jump. */
static int
check_field(struct tg_head *h, const struct tg_head_field *f, size_t *hosts, size_t *tes)
{
	switch (f->nlen) {
	case 4:
		if (NAME_IS(f, "host") && ((*hosts)++ > 0 || !host_ok(f->value, f->vlen)))
			return *hosts > 1 ? TG_HEAD_NO_HOST : TG_HEAD_BAD_HOST;
		break;
	case 6:
		if (NAME_IS(f, "expect") && h->minor == 1 && (f->vlen != 12 ||
		    strncasecmp(f->value, "100-continue", 12) != 0))
			return TG_HEAD_BAD_EXPECT;	/* evhttp would answer 417 itself */
		break;
	case 14:
		if (NAME_IS(f, "content-length"))
			return parse_length(f, &h->length);
		break;
	case 16:
		if (NAME_IS(f, "tidegate-refusal"))	/* TG_HEAD_REFUSAL_FIELD */
			return TG_HEAD_RESERVED;
		break;
	case 17:
		if (!NAME_IS(f, "transfer-encoding"))
			break;
		if ((*tes)++ > 0 || f->vlen != 7 || strncasecmp(f->value, "chunked", 7) != 0)
			return TG_HEAD_BAD_TE;
		h->chunked = 1;
		break;
	}
	return TG_HEAD_OK;
}

/* The meaning of the fields that frame the body and address the request. */
static int
check_fields(struct tg_head *h)
{
	size_t i, hosts = 0, tes = 0;
	int rc;

	for (i = 0; i < h->nfields; i++)
		if ((rc = check_field(h, &h->f[i], &hosts, &tes)) != TG_HEAD_OK)
			return rc;
	if (h->chunked && h->length >= 0)
		return TG_HEAD_LENGTH_AND_TE;
	if (h->no_body && (h->chunked || h->length > 0))
		return TG_HEAD_BODY_NOT_ALLOWED;
	if (h->chunked && h->minor == 0)
		return TG_HEAD_BAD_TE;
	if (hosts > 1 || (hosts == 0 && h->minor == 1))
		return TG_HEAD_NO_HOST;
	return TG_HEAD_OK;
}

int
tg_head_scan(const char *buf, size_t avail, struct tg_head *h, size_t *hlen)
{
	const char *p = buf, *end = buf + avail, *next = NULL;
	int rc;

	if (classes['a'] == 0)
		init_classes();
	memset(h, 0, offsetof(struct tg_head, f));
	h->length = -1;
	if ((rc = scan_request_line(p, end, h, &next)) != TG_HEAD_OK)
		return rc;
	h->line_ok = 1;
	for (p = next; p < end; p = next) {
		if ((rc = crlf(p, end)) == 1) {		/* the empty line: end of the head */
			*hlen = (size_t)(p + 2 - buf);
			return check_fields(h);
		}
		if (rc == 0)
			return TG_HEAD_INCOMPLETE;
		if (*p == '\r' || *p == '\n')
			return TG_HEAD_BAD_EOL;
		if (h->nfields == TG_HEAD_MAX_FIELDS)
			return TG_HEAD_TOO_LARGE;
		if ((rc = scan_field(p, end, &h->f[h->nfields], &next, &h->tab)) != TG_HEAD_OK)
			return rc;	/* h->f[] holds only the fields scanned whole */
		h->nfields++;
	}
	return TG_HEAD_INCOMPLETE;
}

int
tg_head_parse(const char *buf, size_t len, struct tg_head *h)
{
	size_t hlen = 0;
	int rc = tg_head_scan(buf, len, h, &hlen);

	if (rc == TG_HEAD_INCOMPLETE)
		return TG_HEAD_BAD_EOL;
	return rc == TG_HEAD_OK && hlen != len ? TG_HEAD_BAD_LINE : rc;
}

int
tg_head_field_line_ok(const char *line, size_t len)
{
	struct tg_head_field f;
	const char *next = NULL;
	int tab = 0;

	if (classes['a'] == 0)
		init_classes();
	return len > 0 && scan_field(line, line + len, &f, &next, &tab) == TG_HEAD_OK &&
	    next == line + len;
}

static const char *
skip_bws(const char *p, const char *end)
{
	while (p < end && (*p == ' ' || *p == '\t'))
		p++;
	return p;
}

static const char *
skip_token(const char *p, const char *end)
{
	while (p < end && is_tchar((unsigned char)*p))
		p++;
	return p;
}

/* A quoted-string from p (at its DQUOTE): past its closing DQUOTE, or NULL. */
static const char *
skip_quoted(const char *p, const char *end)
{
	for (p++; p < end && *p != '"'; p++) {
		if (*p == '\\' && ++p == end)
			return NULL;
		if (is_ctl((unsigned char)*p))	/* HTAB is not a CTL here */
			return NULL;
	}
	return p < end ? p + 1 : NULL;
}

/* *( BWS ";" BWS name [ BWS "=" BWS ( token / quoted-string ) ] ) to end. */
static int
chunk_ext_ok(const char *p, const char *end)
{
	const char *q;

	while ((p = skip_bws(p, end)) < end) {
		if (*p != ';')
			return 0;
		p = skip_bws(p + 1, end);
		if ((q = skip_token(p, end)) == p)
			return 0;
		p = skip_bws(q, end);
		if (p == end || *p != '=')
			continue;
		p = skip_bws(p + 1, end);
		q = p < end && *p == '"' ? skip_quoted(p, end) : skip_token(p, end);
		if (q == NULL || q == p)
			return 0;
		p = q;
	}
	return 1;
}

int
tg_head_chunk_size(const char *line, size_t len, uint64_t *size)
{
	const char *p = line, *end = line + len - 2;
	uint64_t n = 0;
	int digits = 0, d;

	if (classes['a'] == 0)
		init_classes();
	if (len < 3 || end[0] != '\r' || end[1] != '\n')
		return -1;
	for (; p < end && (d = tg_hexval((unsigned char)*p)) >= 0; p++) {
		if ((n > 0 || d > 0) && ++digits > 15)
			return -1;
		n = n * 16 + (uint64_t)d;
	}
	if (p == line || !chunk_ext_ok(p, end))
		return -1;
	*size = n;
	return 0;
}

const struct tg_head_field *
tg_head_get(const struct tg_head *h, const char *name)
{
	size_t i;

	for (i = 0; i < h->nfields; i++)
		if (name_is(&h->f[i], name))
			return &h->f[i];
	return NULL;
}
