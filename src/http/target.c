/*
 * target.c - checks and normalises the request target of a request line
 * before the gateway routes on it or builds a vendor request line from it.
 * Called by the gateway for every request on its service listeners
 * (src/gateway/paths.c), by tests/unit/http/test_target.c and by the fuzz
 * target tests/fuzz/fuzz_target.c.
 *
 * Tools and attackers spell one path many ways (/a/../b, %2e%2e, %65xport,
 * //); routing on one spelling while the vendor decodes another lets a
 * request skip the gateway's checks. So the path is normalised once, as
 * RFC 3986 section 6.2.2 describes (case, percent-encoding, dot segments),
 * and that one spelling is routed and sent. Whatever cannot be normalised
 * without guessing how the vendor would read it is refused instead.
 */
#include <stdlib.h>
#include <string.h>

#include "tidegate/target.h"

static const char hexdig[] = "0123456789ABCDEF";

static int
unreserved(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	    c == '-' || c == '.' || c == '_' || c == '~';
}

/* Only origin-form ("/path?query") is served: this is not a forward proxy
 * (absolute-form), has no server-wide OPTIONS ("*") and no CONNECT. */
static int
check_form(const char *raw, size_t len, struct tg_target *t, struct tg_err *err)
{
	size_t i = 0;

	if (len > 0 && raw[0] == '/')
		return 0;
	t->rule = "form";
	if (len == 1 && raw[0] == '*') {
		tg_err_set(err, "the asterisk-form request target (*) is not served");
		return -1;
	}
	if (len > 0 && ((raw[0] | 0x20) >= 'a' && (raw[0] | 0x20) <= 'z'))
		while (++i < len && (unreserved((unsigned char)raw[i]) || raw[i] == '+') &&
		    raw[i] != '_' && raw[i] != '~')
			;
	if (i > 0 && i < len && raw[i] == ':')
		tg_err_set(err, "absolute-form request targets (scheme://host/path) are not "
		    "served: this gateway is not a forward proxy; send the path only");
	else
		tg_err_set(err, "the request target must be an absolute path beginning with '/'");
	return -1;
}

/* The bytes a target may hold, one lookup a byte (every request's target
 * is read through it): pchar (RFC 3986 3.3: unreserved, sub-delims, ':'
 * and '@'), '/', '?' (query = *( pchar / "/" / "?" )) and '%', which is
 * checked as an escape in the path only, where it is decoded. */
static const unsigned char target_byte[256] = {
	['a' ... 'z'] = 1, ['A' ... 'Z'] = 1, ['0' ... '9'] = 1,
	['-'] = 1, ['.'] = 1, ['_'] = 1, ['~'] = 1,
	['!'] = 1, ['$'] = 1, ['&'] = 1, ['\''] = 1, ['('] = 1, [')'] = 1, ['*'] = 1,
	['+'] = 1, [','] = 1, [';'] = 1, ['='] = 1, [':'] = 1, ['@'] = 1, ['/'] = 1,
	['%'] = 1, ['?'] = 1,
};

/* Every byte of a request-target is one of a few ASCII classes (RFC 3986
 * section 2, RFC 9112 section 3.2); anything else (CTLs, space, non-ASCII,
 * "<>\^`{|}#[]) would be copied into the vendor's request line. */
static int
check_bytes(const char *raw, size_t len, struct tg_target *t, struct tg_err *err)
{
	size_t i;

	for (i = 0; i < len; i++) {
		unsigned char c = (unsigned char)raw[i];

		if (target_byte[c])
			continue;
		t->rule = "char";
		tg_err_set(err, "byte 0x%02X at offset %zu is not allowed in a request target "
		    "(RFC 3986: percent-encode it)", c, i);
		return -1;
	}
	return 0;
}

/* One byte or escape of a path segment into out: unreserved characters
 * decoded (%7E is ~, %2E is a dot that may form a dot segment), other
 * escapes uppercased, and escapes that would change the path's structure
 * once a vendor decoded them refused. */
static int
put_char(const char *p, size_t len, size_t *i, char *out, size_t *n, struct tg_target *t,
    struct tg_err *err)
{
	int hi, lo, v;

	if (p[*i] != '%') {
		out[(*n)++] = p[(*i)++];
		return 0;
	}
	if (*i + 2 >= len || (hi = tg_hexval((unsigned char)p[*i + 1])) < 0 ||
	    (lo = tg_hexval((unsigned char)p[*i + 2])) < 0) {
		t->rule = "percent";
		tg_err_set(err, "'%%' at offset %zu of the path is not followed by two hex digits",
		    *i);
		return -1;
	}
	v = hi * 16 + lo;
	if (v == '/' || v == '\\' || v < 0x20 || v == 0x7f) {
		t->rule = "encoded";
		tg_err_set(err, "%%%c%c at offset %zu: an encoded '/', '\\' or control character "
		    "in the path is refused (it could change routing)", hexdig[hi], hexdig[lo], *i);
		return -1;
	}
	if (unreserved((unsigned char)v)) {
		out[(*n)++] = (char)v;
	} else {
		out[(*n)++] = '%';
		out[(*n)++] = hexdig[hi];
		out[(*n)++] = hexdig[lo];
	}
	*i += 3;
	return 0;
}

/* 1 for ".", 2 for "..", else 0. */
static int
dots(const char *s, size_t n)
{
	if (n == 1 && s[0] == '.')
		return 1;
	return n == 2 && s[0] == '.' && s[1] == '.' ? 2 : 0;
}

/*
 * The segment "/seg" at out[mark..*n) is complete. Empty segments are
 * merged (as nginx's merge_slashes), except a last one (a trailing '/');
 * "." is dropped and ".." drops the segment before it too, never above
 * the root (RFC 3986 section 5.2.4); a trailing dot segment leaves a '/'.
 */
static int
end_segment(char *out, size_t mark, size_t *n, int last, struct tg_target *t,
    struct tg_err *err)
{
	const char *seg = out + mark + 1, *semi;
	size_t sl = *n - mark - 1;
	int d;

	/* Servlet containers read "..;x" as "..": refuse rather than guess. */
	if ((semi = memchr(seg, ';', sl)) != NULL && dots(seg, (size_t)(semi - seg))) {
		t->rule = "dot_params";
		tg_err_set(err, "a dot segment with parameters ('.;' or '..;') is refused");
		return -1;
	}
	if (sl == 0 && !last) {
		*n = mark;
		return 0;
	}
	if ((d = dots(seg, sl)) == 0)
		return 0;
	*n = mark;
	if (d == 2) {
		while (*n > 0 && out[*n - 1] != '/')
			(*n)--;
		if (*n > 0)
			(*n)--;
	}
	if (last)
		out[(*n)++] = '/';
	return 0;
}

/* p[0..len) begins with '/'; out has room for len + 1 bytes. */
static int
normalise_path(const char *p, size_t len, char *out, size_t *outlen, struct tg_target *t,
    struct tg_err *err)
{
	size_t i = 0, n = 0, mark;

	while (i < len) {
		mark = n;
		out[n++] = '/';
		for (i++; i < len && p[i] != '/';)
			if (put_char(p, len, &i, out, &n, t, err) != 0)
				return -1;
		if (end_segment(out, mark, &n, i >= len, t, err) != 0)
			return -1;
	}
	if (n == 0)
		out[n++] = '/';
	*outlen = n;
	return 0;
}

/*
 * A path normalise_path would leave as it is: no escape, no empty segment
 * but a trailing one, no segment beginning with a dot (which covers every
 * dot segment, with parameters or not). Most paths are; they are copied
 * whole instead of byte by byte.
 */
static int
normal_already(const char *p, size_t len)
{
	const char *end = p + len, *s = p;

	if (memchr(p, '%', len) != NULL)
		return 0;
	while ((s = memchr(s, '/', (size_t)(end - s))) != NULL && ++s < end)
		if (*s == '/' || *s == '.')
			return 0;
	return 1;
}

int
tg_http_target_normalise(const char *raw, size_t len, struct tg_target *t,
    struct tg_err *err)
{
	const char *q;
	size_t plen, n = 0;
	char *out;

	memset(t, 0, sizeof(*t));
	if (check_form(raw, len, t, err) != 0 || check_bytes(raw, len, t, err) != 0)
		return -1;
	q = memchr(raw, '?', len);
	plen = q != NULL ? (size_t)(q - raw) : len;
	out = tg_xmalloc(plen + 2);
	if (normal_already(raw, plen)) {
		memcpy(out, raw, plen);
		n = plen;
	} else if (normalise_path(raw, plen, out, &n, t, err) != 0) {
		free(out);
		return -1;
	}
	out[n] = '\0';
	t->path = out;
	if (q != NULL)
		t->query = tg_xstrndup(q + 1, len - plen - 1);
	return 0;
}

void
tg_http_target_cleanup(struct tg_target *t)
{
	if (t == NULL)
		return;
	free(t->path);
	free(t->query);
	t->path = NULL;
	t->query = NULL;
}
