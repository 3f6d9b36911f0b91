/*
 * multipart.c - incremental multipart/form-data parser (RFC 7578 on top of
 * RFC 2046). Used by the emulator's file import, later by the gateway;
 * input comes straight from the network, so every byte is treated as
 * hostile and the parser is a fuzzing target.
 *
 * The body is scanned for the delimiter CRLF "--" boundary. A virtual CRLF
 * is assumed before the first byte so that a body opening with the
 * boundary line needs no special case. Part data is handed to the caller
 * as it is scanned; only the bytes of a possible delimiter are held back,
 * and those are known (a prefix of the delimiter), so no data is copied.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "tidegate/multipart.h"

enum mp_state {
	MP_PREAMBLE,		/* before the first delimiter: ignored */
	MP_AFTER_DELIM,		/* delimiter matched: "--", padding or CRLF next */
	MP_CLOSE_DASH,		/* one '-' of the closing "--" seen */
	MP_PADDING,		/* transport padding (spaces, tabs) before CRLF */
	MP_DELIM_LF,		/* CR of the delimiter line seen */
	MP_HEADERS,		/* collecting a part's header block */
	MP_DATA,		/* part data */
	MP_EPILOGUE,		/* after the closing delimiter: ignored */
	MP_FAILED,		/* sticky: every later call fails with err */
};

#define MP_MAX_BOUNDARY 70	/* RFC 2046 section 5.1.1 */

struct tg_multipart {
	const struct tg_multipart_cbs *cbs;
	void *arg;
	size_t max_part_size;
	enum mp_state state;
	char delim[4 + MP_MAX_BOUNDARY + 1];	/* CRLF "--" boundary */
	size_t dlen;
	size_t matched;		/* delimiter bytes seen at the end of the input */
	char hdr[TG_MULTIPART_MAX_HEADERS + 1];
	size_t hlen;
	size_t part_size;
	char *name;		/* current part, for messages */
	int too_large;
	struct tg_err err;
};

/* RFC 7230 tchar. */
static int
is_tchar(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	    (c != '\0' && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

/* RFC 2046 bchars (space is allowed, except last). */
static int
is_bchar(int c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	    (c != '\0' && strchr("'()+_,-./:=? ", c) != NULL);
}

static const char *
skip_ows(const char *p)
{
	while (*p == ' ' || *p == '\t')
		p++;
	return p;
}

/* A quoted-string at *pp (on the opening quote); malloc'd, unescaped. */
static char *
quoted(const char **pp, struct tg_err *err)
{
	const char *p = *pp + 1;
	char *out = tg_xmalloc(strlen(p) + 1), *o = out;

	for (;;) {
		unsigned char c = (unsigned char)*p++;

		if (c == '"')
			break;
		if (c == '\\' && *p != '\0')
			c = (unsigned char)*p++;
		else if (c == '\\' || c == '\0') {
			tg_err_set(err, "unterminated quoted string");
			free(out);
			return NULL;
		}
		if ((c < 0x20 && c != '\t') || c == 0x7f) {
			tg_err_set(err, "control character in a quoted string");
			free(out);
			return NULL;
		}
		*o++ = (char)c;
	}
	*o = '\0';
	*pp = p;
	return out;
}

/*
 * One ";name=value" parameter at *pp: 1 with name and value malloc'd, 0 at
 * the end of the header value, -1 with err. Unquoted values are taken up
 * to ';' or white space, more leniently than RFC 7230 tokens, because
 * clients send unquoted boundaries with '/', ':' or '='.
 */
static int
next_param(const char **pp, char **name, char **value, struct tg_err *err)
{
	const char *p = skip_ows(*pp), *s;

	*name = *value = NULL;
	if (*p == '\0')
		return 0;
	if (*p != ';')
		goto bad;
	p = skip_ows(p + 1);
	if (*p == '\0')
		return 0;	/* a trailing ';' is common and harmless */
	for (s = p; is_tchar((unsigned char)*p); p++)
		;
	if (p == s || *p != '=')
		goto bad;
	*name = tg_xstrndup(s, (size_t)(p - s));
	p++;
	if (*p == '"') {
		if ((*value = quoted(&p, err)) == NULL)
			goto fail;
	} else {
		for (s = p; *p > ' ' && *p < 0x7f && *p != ';' && *p != '"'; p++)
			;
		if (p == s)
			goto bad;
		*value = tg_xstrndup(s, (size_t)(p - s));
	}
	p = skip_ows(p);
	if (*p != '\0' && *p != ';')
		goto bad;
	*pp = p;
	return 1;
bad:
	tg_err_set(err, "malformed parameter list");
fail:
	free(*name);
	free(*value);
	*name = *value = NULL;
	return -1;
}

static int
check_boundary(const char *b, struct tg_err *err)
{
	size_t i, n = strlen(b);

	if (n < 1 || n > MP_MAX_BOUNDARY) {
		tg_err_set(err, "boundary must be 1 to %d characters", MP_MAX_BOUNDARY);
		return -1;
	}
	for (i = 0; i < n; i++) {
		if (!is_bchar((unsigned char)b[i])) {
			tg_err_set(err, "boundary contains a character RFC 2046 does not allow");
			return -1;
		}
	}
	if (b[n - 1] == ' ') {
		tg_err_set(err, "boundary must not end with a space");
		return -1;
	}
	return 0;
}

/* Skip the "multipart/form-data" media type; -1 if it is another. */
static int
media_type(const char **pp, struct tg_err *err)
{
	static const char want[] = "multipart/form-data";
	const char *p = skip_ows(*pp), *s = p;

	while (is_tchar((unsigned char)*p) || *p == '/')
		p++;
	if ((size_t)(p - s) != sizeof(want) - 1 || strncasecmp(s, want, sizeof(want) - 1) != 0)
		return -1;
	*pp = p;
	return 0;
}

char *
tg_multipart_boundary(const char *content_type, struct tg_err *err)
{
	const char *p = content_type;
	char *name, *value, *boundary = NULL;
	struct tg_err perr;
	int rc;

	if (p == NULL || media_type(&p, err) != 0) {
		tg_err_set(err, "Content-Type must be multipart/form-data");
		return NULL;
	}
	while ((rc = next_param(&p, &name, &value, &perr)) == 1) {
		rc = strcasecmp(name, "boundary");
		free(name);
		if (rc != 0) {
			free(value);
			continue;
		}
		if (boundary != NULL) {
			free(value);
			tg_err_set(err, "duplicate boundary parameter");
			goto fail;
		}
		boundary = value;
	}
	if (rc == -1) {
		tg_err_set(err, "Content-Type: %s", perr.msg);
		goto fail;
	}
	if (boundary == NULL) {
		tg_err_set(err, "multipart/form-data Content-Type has no boundary parameter");
		goto fail;
	}
	if (check_boundary(boundary, err) != 0)
		goto fail;
	return boundary;
fail:
	free(boundary);
	return NULL;
}

struct tg_multipart *
tg_multipart_new(const char *boundary, const struct tg_multipart_cbs *cbs, void *arg,
    size_t max_part_size)
{
	struct tg_multipart *mp = tg_xcalloc(1, sizeof(*mp));

	mp->cbs = cbs;
	mp->arg = arg;
	mp->max_part_size = max_part_size;
	if (boundary == NULL || check_boundary(boundary, &mp->err) != 0) {
		tg_err_set(&mp->err, "invalid multipart boundary");
		mp->state = MP_FAILED;
		return mp;
	}
	mp->dlen = (size_t)snprintf(mp->delim, sizeof(mp->delim), "\r\n--%s", boundary);
	mp->state = MP_PREAMBLE;
	mp->matched = 2;	/* the virtual CRLF before the first byte */
	return mp;
}

void
tg_multipart_free(struct tg_multipart *mp)
{
	if (mp == NULL)
		return;
	free(mp->name);
	free(mp);
}

int
tg_multipart_too_large(const struct tg_multipart *mp)
{
	return mp->too_large;
}

static void fail(struct tg_multipart *mp, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* The first failure wins: later ones are consequences of it. */
static void
fail(struct tg_multipart *mp, const char *fmt, ...)
{
	va_list ap;

	if (mp->state == MP_FAILED)
		return;
	va_start(ap, fmt);
	vsnprintf(mp->err.msg, sizeof(mp->err.msg), fmt, ap);
	va_end(ap);
	mp->state = MP_FAILED;
}

/* Hand scanned bytes to the caller (part data) or drop them (preamble). */
static int
emit(struct tg_multipart *mp, const char *p, size_t n)
{
	if (n == 0 || mp->state != MP_DATA)
		return 0;
	if (mp->max_part_size > 0 && n > mp->max_part_size - mp->part_size) {
		mp->too_large = 1;
		fail(mp, "part '%s' is larger than the size limit", mp->name);
		return -1;
	}
	mp->part_size += n;
	if (mp->cbs->on_part_data != NULL && mp->cbs->on_part_data(mp->arg, p, n) != 0) {
		fail(mp, "processing stopped in the data of part '%s'", mp->name);
		return -1;
	}
	return 0;
}

static void
delimiter_found(struct tg_multipart *mp)
{
	if (mp->state == MP_DATA && mp->cbs->on_part_end != NULL &&
	    mp->cbs->on_part_end(mp->arg) != 0) {
		fail(mp, "processing stopped at the end of part '%s'", mp->name);
		return;
	}
	mp->state = MP_AFTER_DELIM;
}

/*
 * Preamble or part data: look for the delimiter. The delimiter holds '\r'
 * only at its start (boundaries cannot contain CR), so after a mismatch no
 * shorter prefix can be in progress: the held bytes are released and the
 * current byte is examined afresh. Returns the bytes consumed.
 */
static size_t
scan(struct tg_multipart *mp, const char *p, size_t n)
{
	size_t i = 0, start = 0;
	const char *cr;

	while (i < n) {
		if (mp->matched == 0) {
			if ((cr = memchr(p + i, '\r', n - i)) == NULL) {
				i = n;
				break;
			}
			i = (size_t)(cr - p);
			if (emit(mp, p + start, i - start) != 0)
				return n;
			start = i;
		}
		if (p[i] != mp->delim[mp->matched]) {
			if (emit(mp, mp->delim, mp->matched) != 0)
				return n;
			mp->matched = 0;
			continue;
		}
		start = ++i;
		if (++mp->matched == mp->dlen) {
			mp->matched = 0;
			delimiter_found(mp);
			return i;
		}
	}
	emit(mp, p + start, i - start);
	return n;
}

/* The rest of a delimiter line: "--" (close), or padding and CRLF. */
static void
delimiter_line(struct tg_multipart *mp, char c)
{
	switch (mp->state) {
	case MP_AFTER_DELIM:
		if (c == '-')
			mp->state = MP_CLOSE_DASH;
		else if (c == ' ' || c == '\t')
			mp->state = MP_PADDING;
		else if (c == '\r')
			mp->state = MP_DELIM_LF;
		else
			fail(mp, "malformed boundary line: text after the boundary");
		break;
	case MP_CLOSE_DASH:
		if (c == '-')
			mp->state = MP_EPILOGUE;
		else
			fail(mp, "malformed boundary line: text after the boundary");
		break;
	case MP_PADDING:
		if (c == '\r')
			mp->state = MP_DELIM_LF;
		else if (c != ' ' && c != '\t')
			fail(mp, "malformed boundary line: text after the boundary");
		break;
	default:
		if (c != '\n') {
			fail(mp, "malformed boundary line: CR without LF");
			break;
		}
		mp->state = MP_HEADERS;
		mp->hlen = 0;
		break;
	}
}

/* Content-Disposition: form-data; name="..."[; filename="..."] */
static int
disposition(const char *v, char **name, char **filename, struct tg_err *err)
{
	static const char fd[] = "form-data";
	const char *p = v;
	char *pn, *pv, **slot;
	struct tg_err perr;
	int rc;

	while (is_tchar((unsigned char)*p))
		p++;
	if ((size_t)(p - v) != sizeof(fd) - 1 || strncasecmp(v, fd, sizeof(fd) - 1) != 0) {
		tg_err_set(err, "part Content-Disposition must be form-data");
		return -1;
	}
	while ((rc = next_param(&p, &pn, &pv, &perr)) == 1) {
		slot = strcasecmp(pn, "name") == 0 ? name :
		    strcasecmp(pn, "filename") == 0 ? filename : NULL;
		if (slot != NULL && *slot != NULL) {
			tg_err_set(err, "duplicate %s parameter in Content-Disposition", pn);
			free(pn);
			free(pv);
			return -1;
		}
		if (slot != NULL)
			*slot = pv;
		else
			free(pv);
		free(pn);
	}
	if (rc == -1) {
		tg_err_set(err, "part Content-Disposition: %s", perr.msg);
		return -1;
	}
	if (*name == NULL) {
		tg_err_set(err, "part Content-Disposition has no name parameter");
		return -1;
	}
	return 0;
}

/* Join folded lines (obs-fold) in place so each header is one line. */
static int
unfold(char *h, size_t len)
{
	size_t i;

	if (len > 0 && (h[0] == ' ' || h[0] == '\t'))
		return -1;
	for (i = 0; i + 2 < len; i++) {
		if (h[i] == '\r' && (h[i + 2] == ' ' || h[i + 2] == '\t')) {
			h[i] = ' ';
			h[i + 1] = ' ';
		}
	}
	return 0;
}

/* Split "Name: value" in place; value has its surrounding white space cut. */
static int
split_header(char *line, char **value)
{
	char *p = line, *e;

	while (is_tchar((unsigned char)*p))
		p++;
	if (p == line || *p != ':')
		return -1;
	*p++ = '\0';
	p = (char *)skip_ows(p);
	e = p + strlen(p);
	while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
		*--e = '\0';
	*value = p;
	return 0;
}

struct part_hdrs {
	char *name, *filename;
	const char *ctype;	/* points into mp->hdr */
	int have_cd;
};

static int
one_header(char *line, struct part_hdrs *ph, struct tg_err *err)
{
	char *value;

	if (split_header(line, &value) != 0) {
		tg_err_set(err, "malformed part header line");
		return -1;
	}
	if (strcasecmp(line, "Content-Disposition") == 0) {
		if (ph->have_cd++) {
			tg_err_set(err, "duplicate Content-Disposition header in a part");
			return -1;
		}
		return disposition(value, &ph->name, &ph->filename, err);
	}
	if (strcasecmp(line, "Content-Type") == 0) {
		if (ph->ctype != NULL) {
			tg_err_set(err, "duplicate Content-Type header in a part");
			return -1;
		}
		ph->ctype = value;
	}
	return 0;
}

/* The header block is complete (mp->hdr ends with the empty line). */
static void
begin_part(struct tg_multipart *mp)
{
	struct part_hdrs ph = { NULL, NULL, NULL, 0 };
	char *line = mp->hdr, *eol;
	size_t len = mp->hlen - 2;	/* without the final CRLF */
	int rc = 0;

	mp->hdr[len] = '\0';
	if (unfold(mp->hdr, len) != 0) {
		fail(mp, "part header block starts with a continuation line");
		return;
	}
	while (rc == 0 && *line != '\0') {
		if ((eol = strstr(line, "\r\n")) != NULL)
			*eol = '\0';
		rc = one_header(line, &ph, &mp->err);
		line = eol ? eol + 2 : line + strlen(line);
	}
	if (rc == 0 && !ph.have_cd) {
		tg_err_set(&mp->err, "part has no Content-Disposition header");
		rc = -1;
	}
	if (rc != 0) {
		mp->state = MP_FAILED;	/* err already says why */
		free(ph.name);
		free(ph.filename);
		return;
	}
	free(mp->name);
	mp->name = ph.name;
	mp->part_size = 0;
	mp->state = MP_DATA;
	if (mp->cbs->on_part_begin != NULL &&
	    mp->cbs->on_part_begin(mp->arg, ph.name, ph.filename, ph.ctype) != 0)
		fail(mp, "processing stopped at the start of part '%s'", mp->name);
	free(ph.filename);
}

/* Collect header bytes up to the empty line; returns the bytes consumed. */
static size_t
headers(struct tg_multipart *mp, const char *p, size_t n)
{
	size_t i;
	char c, prev;

	for (i = 0; i < n; i++) {
		c = p[i];
		prev = mp->hlen > 0 ? mp->hdr[mp->hlen - 1] : '\0';
		if (mp->hlen == TG_MULTIPART_MAX_HEADERS) {
			fail(mp, "part headers exceed %d bytes", TG_MULTIPART_MAX_HEADERS);
			return n;
		}
		if (c == '\0' || (prev == '\r' && c != '\n') || (c == '\n' && prev != '\r')) {
			fail(mp, "%s", c == '\0' ? "NUL byte in part headers" :
			    "part header lines must end with CRLF");
			return n;
		}
		mp->hdr[mp->hlen++] = c;
		if (c == '\n' && (mp->hlen == 2 ||
		    (mp->hlen >= 4 && memcmp(mp->hdr + mp->hlen - 4, "\r\n\r\n", 4) == 0))) {
			begin_part(mp);
			return i + 1;
		}
	}
	return n;
}

int
tg_multipart_feed(struct tg_multipart *mp, const char *data, size_t len, struct tg_err *err)
{
	size_t i = 0;

	while (i < len && mp->state != MP_FAILED && mp->state != MP_EPILOGUE) {
		switch (mp->state) {
		case MP_PREAMBLE:
		case MP_DATA:
			i += scan(mp, data + i, len - i);
			break;
		case MP_HEADERS:
			i += headers(mp, data + i, len - i);
			break;
		default:
			delimiter_line(mp, data[i++]);
			break;
		}
	}
	if (mp->state != MP_FAILED)
		return 0;
	tg_err_set(err, "%s", mp->err.msg);
	return -1;
}

int
tg_multipart_finish(struct tg_multipart *mp, struct tg_err *err)
{
	switch (mp->state) {
	case MP_EPILOGUE:
		return 0;
	case MP_FAILED:
		break;
	case MP_PREAMBLE:
		fail(mp, "no boundary line found in the body");
		break;
	case MP_HEADERS:
		fail(mp, "body ends inside the headers of a part");
		break;
	case MP_DATA:
		fail(mp, "body ends inside part '%s': missing closing boundary", mp->name);
		break;
	default:
		fail(mp, "body ends after a boundary line: missing closing boundary");
		break;
	}
	tg_err_set(err, "%s", mp->err.msg);
	return -1;
}
