/*
 * config_print.c - tidegate -T: the effective configuration, every key of
 * the core's table and the features' with the value the start would use
 * (defaults included; a key without a value as a comment), as YAML that
 * loads again. Secrets are redacted, the key kept: a secret key's value,
 * and wherever a value holds a URL's password (user:password@) or a
 * password= parameter (a PostgreSQL state.url). Nested sections come out
 * once each, in the order of the tables; lists a table before has
 * (keys[]) get each table's members in their items. Called by
 * src/tidegate.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/gateway_config.h"

#define REDACTED "(redacted)"

/* One key of the tables, with the struct its value is in. */
struct row {
	const struct tg_cfg_key *k;
	const void *base;
};

/* The rows of a table list at one path (keys[]): each table's sub-table. */
struct rows {
	struct row *v;
	size_t n;
};

static void
put_quoted(FILE *out, const char *s, size_t n)
{
	size_t i;

	fputc('"', out);
	for (i = 0; i < n; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch == '"' || ch == '\\')
			fprintf(out, "\\%c", ch);
		else if (ch < 0x20 || ch == 0x7f)
			fprintf(out, "\\x%02x", ch);
		else
			fputc(ch, out);
	}
	fputc('"', out);
}

/* A password that begins at p in s (a URL's user:password@ when p is its
 * "://", the value of a password= parameter): 1 with where it starts and
 * how long it is. */
static int
password_at(const char *s, const char *p, const char **start, size_t *len)
{
	const char *host, *end, *at, *colon;

	if (strncmp(p, "password=", 9) == 0 && (p == s || strchr("?& ", p[-1]) != NULL)) {
		*start = p + 9;
		*len = strcspn(*start, "& ");
		return *len > 0;
	}
	if (strncmp(p, "://", 3) != 0)
		return 0;
	host = p + 3;
	end = host + strcspn(host, "/?#");
	for (at = end; at > host && at[-1] != '@'; at--)
		;
	if (at == host || (colon = memchr(host, ':', (size_t)(at - 1 - host))) == NULL)
		return 0;
	*start = colon + 1;
	*len = (size_t)(at - 1 - *start);
	return 1;
}

/* s quoted, each password in it replaced (the user, host and rest kept). */
static void
put_redacted(FILE *out, const char *s)
{
	const char *p, *from = s, *start;
	char *buf = tg_xcalloc(1, strlen(s) * 2 + 16), *w = buf;
	size_t len;

	for (p = s; *p != '\0'; p++) {
		if (!password_at(s, p, &start, &len))
			continue;
		memcpy(w, from, (size_t)(start - from));
		w += start - from;
		w += sprintf(w, "%s", REDACTED);
		from = start + len;
		p = from - 1;
	}
	strcpy(w, from);
	put_quoted(out, buf, strlen(buf));
	free(buf);
}

static void
put_strlist(FILE *out, const struct tg_strlist *l)
{
	size_t i;

	fputc('[', out);
	for (i = 0; i < l->n; i++) {
		fputs(i ? ", " : "", out);
		put_redacted(out, l->v[i]);
	}
	fputc(']', out);
}

/* A secret that is not a URL is redacted whole. */
static void
put_secret(FILE *out, const char *s)
{
	if (strstr(s, "://") != NULL || strstr(s, "password=") != NULL)
		put_redacted(out, s);
	else
		fputs("\"" REDACTED "\"", out);
}

/* "name: value" of a scalar key (name its last part), or a comment when
 * it has no value. */
static void
put_scalar(FILE *out, int depth, const char *name, const struct row *r)
{
	const char *at = (const char *)r->base + r->k->off;
	int str = r->k->type == TG_CFG_STR || r->k->type == TG_CFG_ADDR ||
	    r->k->type == TG_CFG_PATH || r->k->type == TG_CFG_SECRET;
	const char *s = str ? *(char *const *)(const void *)at : NULL;

	fprintf(out, "%*s%s%s:", depth * 2, "", str && s == NULL ? "# " : "", name);
	if (str && s == NULL)
		fputs(" (unset)", out);
	else if (r->k->type == TG_CFG_SECRET)
		fputc(' ', out), put_secret(out, s);
	else if (str)
		fputc(' ', out), put_redacted(out, s);
	else if (r->k->type == TG_CFG_INT)
		fprintf(out, " %lld", *(const long long *)(const void *)at);
	else if (r->k->type == TG_CFG_BOOL)
		fputs(*(const int *)(const void *)at ? " true" : " false", out);
	else if (r->k->type == TG_CFG_DOUBLE)
		fprintf(out, " %.15g", *(const double *)(const void *)at);
	else if (r->k->type == TG_CFG_DURATION)
		fprintf(out, " %lldms", (long long)*(const int64_t *)(const void *)at);
	else if (r->k->type == TG_CFG_SIZE)
		fprintf(out, " %lld", (long long)*(const int64_t *)(const void *)at);
	else if (r->k->type == TG_CFG_STRLIST)
		fputc(' ', out), put_strlist(out, (const struct tg_strlist *)(const void *)at);
	fputc('\n', out);
}

static void emit(FILE *out, const struct rows *all, const char *prefix, size_t plen,
    int depth);

/* One item of a list: its rows (nested sections too) at depth + 2, the
 * first line marked "- ". */
static void
put_item(FILE *out, int depth, const struct rows *item)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);

	if (m == NULL)
		return;
	emit(m, item, "", 0, depth + 2);
	fclose(m);
	if (len > (size_t)depth * 2 + 2)
		buf[depth * 2 + 2] = '-';
	fputs(buf, out);
	free(buf);
}

/* The items of the list at lists->v[0]'s path: item i holds each table's
 * members of its i-th element. */
static void
put_list(FILE *out, int depth, const char *name, const struct rows *lists)
{
	const struct row *l = &lists->v[0];
	size_t n = *(const size_t *)(const void *)((const char *)l->base + l->k->count_off);
	size_t i, t, j, nsub = 0;
	struct rows item;

	fprintf(out, "%*s%s:%s\n", depth * 2, "", name, n == 0 ? " []" : "");
	for (t = 0; t < lists->n; t++)
		nsub += lists->v[t].k->nsub;
	item.v = tg_xcalloc(nsub + 1, sizeof(*item.v));
	for (i = 0; i < n; i++) {
		for (t = 0, item.n = 0; t < lists->n; t++) {
			const struct tg_cfg_key *k = lists->v[t].k;
			const char *arr = *(char *const *)(const void *)((const char *)
			    lists->v[t].base + k->off);

			for (j = 0; j < k->nsub && arr != NULL; j++)
				item.v[item.n++] = (struct row){ &k->sub[j], arr + i * k->elem_size };
		}
		put_item(out, depth, &item);
	}
	free(item.v);
}

/* Every row under prefix (plen bytes), each section once, at depth. */
static void
emit(FILE *out, const struct rows *all, const char *prefix, size_t plen, int depth)
{
	size_t i, j, n, m;
	const char *rest, *dot;
	struct rows lists;

	for (i = 0; i < all->n; i++) {
		if (strncmp(all->v[i].k->path, prefix, plen) != 0)
			continue;
		rest = all->v[i].k->path + plen;
		n = strcspn(rest, ".");
		for (j = 0; j < i; j++)	/* this name, met before: written then */
			if (strncmp(all->v[j].k->path, all->v[i].k->path, plen + n) == 0 &&
			    strchr(".", all->v[j].k->path[plen + n]) != NULL)
				break;
		if (j < i)
			continue;
		dot = rest[n] == '.' ? rest + n : NULL;
		if (dot != NULL) {
			fprintf(out, "%*s%.*s:\n", depth * 2, "", (int)n, rest);
			emit(out, all, all->v[i].k->path, plen + n + 1, depth + 1);
		} else if (all->v[i].k->type == TG_CFG_LIST) {
			lists.v = tg_xcalloc(all->n, sizeof(*lists.v));
			for (m = 0, lists.n = 0; m < all->n; m++)
				if (strcmp(all->v[m].k->path, all->v[i].k->path) == 0)
					lists.v[lists.n++] = all->v[m];
			put_list(out, depth, rest, &lists);
			free(lists.v);
		} else {
			put_scalar(out, depth, rest, &all->v[i]);
		}
	}
}

void
gw_config_print(const struct gw_config *c, FILE *out)
{
	struct rows all;
	size_t i, j, n = gw_config_nkeys;

	for (i = 0; i < c->ndefs; i++)
		n += c->def[i]->nkeys;
	all.v = tg_xcalloc(n, sizeof(*all.v));
	all.n = 0;
	for (j = 0; j < gw_config_nkeys; j++)
		all.v[all.n++] = (struct row){ &gw_config_keys[j], c };
	for (i = 0; i < c->ndefs; i++)
		for (j = 0; j < c->def[i]->nkeys; j++)
			all.v[all.n++] = (struct row){ &c->def[i]->keys[j], c->settings[i] };
	fprintf(out, "# tidegate -T: the effective configuration of %s (defaults included, "
	    "secrets redacted)\n", c->path);
	emit(out, &all, "", 0, 0);
	free(all.v);
}
