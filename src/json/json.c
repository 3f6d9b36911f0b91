/*
 * json.c - yajl tree access by key and JSON Pointer, and generation
 * helpers. Used by the emulator and the gateway alike.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <yajl/yajl_parse.h>

#include "tidegate/json.h"

struct prepass {
	int depth, nul;
};

static int
on_open(void *arg)
{
	return ++((struct prepass *)arg)->depth <= TG_JSON_MAX_DEPTH;	/* 0 stops */
}

static int
on_close(void *arg)
{
	((struct prepass *)arg)->depth--;
	return 1;
}

/* yajl's tree keeps strings NUL-terminated, so "\u0000" would cut a value
 * (or a key: "projectId\u0000x" would read as "projectId"). */
static int
on_string(void *arg, const unsigned char *s, size_t len)
{
	if (memchr(s, '\0', len) != NULL) {
		((struct prepass *)arg)->nul = 1;
		return 0;
	}
	return 1;
}

/*
 * yajl_tree_parse and yajl_tree_free recurse once per nesting level, so a
 * few megabytes of '[' would overflow the stack; yajl's streaming parser
 * does not recurse: it measures the depth, and finds NULs in strings,
 * before any tree is built. Returns a reason, or NULL.
 */
static const char *
prepass(const char *buf, size_t len)
{
	static const yajl_callbacks cb = { NULL, NULL, NULL, NULL, NULL, on_string, on_open,
		on_string, on_close, on_open, on_close };
	struct prepass st = { 0, 0 };
	yajl_handle h = yajl_alloc(&cb, NULL, &st);

	if (yajl_parse(h, (const unsigned char *)buf, len) == yajl_status_ok)
		(void)yajl_complete_parse(h);
	yajl_free(h);
	if (st.nul)
		return "invalid JSON: a string contains \\u0000";
	return st.depth > TG_JSON_MAX_DEPTH ? "nested" : NULL;
}

yajl_val
tg_json_parse(const char *buf, size_t len, struct tg_err *err)
{
	char *copy, ebuf[200];
	const char *why;
	yajl_val v;
	char *nl;

	if (buf == NULL || len == 0) {	/* an empty body: pullup of it gives NULL */
		tg_err_set(err, "invalid JSON: the body is empty");
		return NULL;
	}
	copy = tg_xstrndup(buf, len);
	if (memchr(buf, '\0', len) != NULL) {
		free(copy);
		tg_err_set(err, "body contains a NUL byte");
		return NULL;
	}
	if ((why = prepass(buf, len)) != NULL) {
		free(copy);
		if (strcmp(why, "nested") == 0)
			tg_err_set(err, "invalid JSON: nested deeper than %d levels",
			    TG_JSON_MAX_DEPTH);
		else
			tg_err_set(err, "%s", why);
		return NULL;
	}
	ebuf[0] = '\0';
	v = yajl_tree_parse(copy, ebuf, sizeof(ebuf));
	free(copy);
	if (v == NULL) {
		/* yajl's message spans lines with a caret diagram; keep the first. */
		if ((nl = strchr(ebuf, '\n')) != NULL)
			*nl = '\0';
		tg_err_set(err, "invalid JSON: %s", ebuf[0] ? ebuf : "parse error");
	}
	return v;
}

yajl_val
tg_json_get(yajl_val obj, const char *key)
{
	size_t i;

	if (obj == NULL || !YAJL_IS_OBJECT(obj))
		return NULL;
	for (i = 0; i < obj->u.object.len; i++)
		if (strcmp(obj->u.object.keys[i], key) == 0)
			return obj->u.object.values[i];
	return NULL;
}

const char *
tg_json_get_str(yajl_val obj, const char *key)
{
	yajl_val v = tg_json_get(obj, key);

	return v != NULL && YAJL_IS_STRING(v) ? v->u.string : NULL;
}

static int
array_index(const char *tok, size_t len, size_t *idx)
{
	size_t i, v = 0;

	if (len == 0 || (len > 1 && tok[0] == '0'))
		return -1;
	for (i = 0; i < len; i++) {
		if (tok[i] < '0' || tok[i] > '9' || v > ((size_t)-1) / 10 - 10)
			return -1;
		v = v * 10 + (size_t)(tok[i] - '0');
	}
	*idx = v;
	return 0;
}

yajl_val
tg_json_ptr(yajl_val root, const char *pointer)
{
	char tok[256];
	const char *p = pointer, *e;
	size_t len, i, j, idx;

	if (*p == '\0')
		return root;
	while (root != NULL && *p == '/') {
		p++;
		e = strchr(p, '/');
		len = e ? (size_t)(e - p) : strlen(p);
		for (i = 0, j = 0; i < len && j < sizeof(tok) - 1; i++) {
			if (p[i] == '~' && i + 1 < len && (p[i + 1] == '0' || p[i + 1] == '1'))
				tok[j++] = p[++i] == '0' ? '~' : '/';
			else
				tok[j++] = p[i];
		}
		tok[j] = '\0';
		if (YAJL_IS_OBJECT(root)) {
			root = tg_json_get(root, tok);
		} else if (YAJL_IS_ARRAY(root)) {
			if (array_index(tok, j, &idx) || idx >= root->u.array.len)
				return NULL;
			root = root->u.array.values[idx];
		} else {
			return NULL;
		}
		p += len;
	}
	return *p == '\0' ? root : NULL;
}

char *
tg_json_ptr_escape(const char *token)
{
	char *out = tg_xmalloc(2 * strlen(token) + 1), *o = out;

	for (; *token; token++) {
		if (*token == '~') {
			*o++ = '~';
			*o++ = '0';
		} else if (*token == '/') {
			*o++ = '~';
			*o++ = '1';
		} else {
			*o++ = *token;
		}
	}
	*o = '\0';
	return out;
}

void
tg_json_path_init(struct tg_json_path *p, const char *start)
{
	p->buf = tg_xstrdup(start);
	p->len = strlen(start);
	p->cap = p->len + 1;
}

static size_t
path_push(struct tg_json_path *p, const char *token)
{
	size_t mark = p->len, n = strlen(token);

	if (p->len + n + 2 > p->cap) {
		p->cap = 2 * (p->len + n + 2);
		p->buf = tg_xrealloc(p->buf, p->cap);
	}
	p->buf[p->len++] = '/';
	memcpy(p->buf + p->len, token, n + 1);
	p->len += n;
	return mark;
}

size_t
tg_json_path_push_key(struct tg_json_path *p, const char *key)
{
	char *tok = tg_json_ptr_escape(key);
	size_t mark = path_push(p, tok);

	free(tok);
	return mark;
}

size_t
tg_json_path_push_index(struct tg_json_path *p, size_t i)
{
	char tok[24];

	snprintf(tok, sizeof(tok), "%zu", i);
	return path_push(p, tok);
}

void
tg_json_path_pop(struct tg_json_path *p, size_t mark)
{
	p->len = mark;
	p->buf[mark] = '\0';
}

void
tg_json_path_cleanup(struct tg_json_path *p)
{
	free(p->buf);
	p->buf = NULL;
	p->len = p->cap = 0;
}

yajl_gen
tg_json_gen_new(void)
{
	return yajl_gen_alloc(NULL);
}

void
tg_json_str(yajl_gen g, const char *s)
{
	yajl_gen_string(g, (const unsigned char *)s, strlen(s));
}

void
tg_json_kv_str(yajl_gen g, const char *k, const char *v)
{
	tg_json_str(g, k);
	if (v == NULL)
		yajl_gen_null(g);
	else
		tg_json_str(g, v);
}

void
tg_json_kv_int(yajl_gen g, const char *k, long long v)
{
	tg_json_str(g, k);
	yajl_gen_integer(g, v);
}

void
tg_json_kv_bool(yajl_gen g, const char *k, int v)
{
	tg_json_str(g, k);
	yajl_gen_bool(g, v);
}

void
tg_json_gen_val(yajl_gen g, yajl_val v)
{
	size_t i;

	if (v == NULL) {
		yajl_gen_null(g);
		return;
	}
	switch (v->type) {
	case yajl_t_string:
		tg_json_str(g, v->u.string);
		break;
	case yajl_t_number:
		yajl_gen_number(g, v->u.number.r, strlen(v->u.number.r));
		break;
	case yajl_t_object:
		yajl_gen_map_open(g);
		for (i = 0; i < v->u.object.len; i++) {
			tg_json_str(g, v->u.object.keys[i]);
			tg_json_gen_val(g, v->u.object.values[i]);
		}
		yajl_gen_map_close(g);
		break;
	case yajl_t_array:
		yajl_gen_array_open(g);
		for (i = 0; i < v->u.array.len; i++)
			tg_json_gen_val(g, v->u.array.values[i]);
		yajl_gen_array_close(g);
		break;
	case yajl_t_true:
		yajl_gen_bool(g, 1);
		break;
	case yajl_t_false:
		yajl_gen_bool(g, 0);
		break;
	default:
		yajl_gen_null(g);
		break;
	}
}

void
tg_json_gen_flush(yajl_gen g, struct evbuffer *out)
{
	const unsigned char *buf;
	size_t len;

	yajl_gen_get_buf(g, &buf, &len);
	evbuffer_add(out, buf, len);
	yajl_gen_clear(g);
}
