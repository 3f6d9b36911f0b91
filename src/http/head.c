/*
 * head.c - the strict request head parser of head.h. libevent's parser
 * takes the first of two Content-Length fields, reads "Transfer-Encoding :"
 * as some other field and joins obs-folded lines; a front proxy that reads
 * the same bytes differently would then disagree with the gateway about
 * where a request ends. This parser refuses every such head instead
 * (RFC 9112 §2.2, §3, §5, §6.1, §6.3). Called by frontdoor.c per request.
 */
#include <stddef.h>
#include <string.h>
#include <strings.h>

#include "tidegate/head.h"

static const char *const methods[] = {
	"GET", "POST", "PUT", "DELETE", "HEAD", "PATCH", "OPTIONS",
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
	    "request body larger than the configured max_body" },
	[TG_HEAD_KEY_MISSING] = { 401, "UNAUTHORIZED",
	    "an API key is required (Authorization: Bearer <key> or X-Api-Key)" },
	[TG_HEAD_KEY_UNKNOWN] = { 401, "UNAUTHORIZED", "unknown API key" },
	[TG_HEAD_TIMEOUT] = { 408, "REQUEST_TIMEOUT",
	    "the request head did not arrive in time" },
	[TG_HEAD_BAD_TARGET] = { 400, "BAD_REQUEST_TARGET",
	    "request target refused: not an origin-form path that can be normalised safely" },
	[TG_HEAD_NOT_FOUND] = { 404, "NOT_FOUND", "no such endpoint" },
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

static int
is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	    (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* The end of the line at p (just past its CRLF), or NULL for a bare CR or LF. */
static const char *
line_end(const char *p, const char *end, const char **eol)
{
	const char *nl = memchr(p, '\n', (size_t)(end - p));

	if (nl == NULL || nl == p || nl[-1] != '\r' || memchr(p, '\r', (size_t)(nl - 1 - p)))
		return NULL;
	*eol = nl - 1;
	return nl + 1;
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

static int
parse_request_line(const char *p, const char *eol, struct tg_head *h)
{
	const char *sp1 = memchr(p, ' ', (size_t)(eol - p)), *sp2, *c;
	size_t i;
	int rc;

	if (sp1 == NULL || sp1 == p || (sp2 = memchr(sp1 + 1, ' ', (size_t)(eol - sp1 - 1))) ==
	    NULL || sp2 == sp1 + 1)
		return TG_HEAD_BAD_LINE;
	for (c = p; c < sp1; c++)
		if (!is_tchar((unsigned char)*c))
			return TG_HEAD_BAD_LINE;
	for (c = sp1 + 1; c < sp2; c++)	/* VCHAR only: no CTL, no obs-text */
		if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
			return TG_HEAD_BAD_LINE;
	h->method = p;
	h->mlen = (size_t)(sp1 - p);
	h->target = sp1 + 1;
	h->tlen = (size_t)(sp2 - sp1 - 1);
	if ((rc = parse_version(sp2 + 1, (size_t)(eol - sp2 - 1), &h->minor)) != TG_HEAD_OK)
		return rc;
	for (i = 0; i < sizeof(methods) / sizeof(methods[0]); i++)
		if (strlen(methods[i]) == h->mlen && memcmp(methods[i], p, h->mlen) == 0)
			return TG_HEAD_OK;
	return TG_HEAD_BAD_METHOD;
}

/* One field line [p, eol): name, ':', OWS, value, OWS. */
static int
parse_field(const char *p, const char *eol, struct tg_head_field *f)
{
	const char *c = p, *v, *ve;

	if (*p == ' ' || *p == '\t')
		return TG_HEAD_OBS_FOLD;
	while (c < eol && is_tchar((unsigned char)*c))
		c++;
	if (c == p || c == eol || *c != ':')
		return TG_HEAD_BAD_NAME;
	for (v = c + 1; v < eol && (*v == ' ' || *v == '\t'); v++)
		;
	for (ve = eol; ve > v && (ve[-1] == ' ' || ve[-1] == '\t'); ve--)
		;
	f->name = p;
	f->nlen = (size_t)(c - p);
	f->value = v;
	f->vlen = (size_t)(ve - v);
	for (; v < ve; v++)
		if (((unsigned char)*v < 0x20 && *v != '\t') || (unsigned char)*v == 0x7f)
			return TG_HEAD_BAD_VALUE;
	return TG_HEAD_OK;
}

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

/* The meaning of the fields that frame the body and address the request. */
static int
check_fields(struct tg_head *h)
{
	size_t i, hosts = 0, tes = 0;
	int rc;

	for (i = 0; i < h->nfields; i++) {
		const struct tg_head_field *f = &h->f[i];

		if (name_is(f, "Content-Length") && (rc = parse_length(f, &h->length)) != 0)
			return rc;
		if (name_is(f, "Transfer-Encoding")) {
			if (tes++ > 0 || f->vlen != 7 || strncasecmp(f->value, "chunked", 7) != 0)
				return TG_HEAD_BAD_TE;
			h->chunked = 1;
		}
		if (name_is(f, "Host"))
			hosts++;
		if (name_is(f, TG_HEAD_REFUSAL_FIELD))
			return TG_HEAD_RESERVED;
	}
	if (h->chunked && h->length >= 0)
		return TG_HEAD_LENGTH_AND_TE;
	if (h->chunked && h->minor == 0)
		return TG_HEAD_BAD_TE;
	if (hosts > 1 || (hosts == 0 && h->minor == 1))
		return TG_HEAD_NO_HOST;
	return TG_HEAD_OK;
}

int
tg_head_parse(const char *buf, size_t len, struct tg_head *h)
{
	const char *p = buf, *end = buf + len, *eol, *next;
	int rc;

	memset(h, 0, offsetof(struct tg_head, f));
	h->length = -1;
	if ((next = line_end(p, end, &eol)) == NULL)
		return TG_HEAD_BAD_EOL;
	if ((rc = parse_request_line(p, eol, h)) != TG_HEAD_OK)
		return rc;
	for (p = next; p < end; p = next) {
		if ((next = line_end(p, end, &eol)) == NULL)
			return TG_HEAD_BAD_EOL;
		if (eol == p)		/* the empty line: end of the head */
			return next == end ? check_fields(h) : TG_HEAD_BAD_LINE;
		if (h->nfields == TG_HEAD_MAX_FIELDS)
			return TG_HEAD_TOO_LARGE;
		if ((rc = parse_field(p, eol, &h->f[h->nfields++])) != TG_HEAD_OK)
			return rc;
	}
	return TG_HEAD_BAD_EOL;
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
