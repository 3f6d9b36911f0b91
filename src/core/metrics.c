/*
 * metrics.c - Prometheus counters and histograms. Series live in one map
 * keyed by "name{labels}"; rendering sorts the keys so output is stable and
 * each metric's # HELP / # TYPE lines come once, a declared family with no
 * series yet among them. Called by the gateway on every request
 * (inc/observe) and by the admin listener (/metrics).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "tidegate/map.h"
#include "tidegate/metrics.h"
#include "tidegate/util.h"

/* Sub-millisecond buckets first: answers from the poll cache and refusals
 * before the vendor take tens to hundreds of microseconds. */
static const double bounds[] = {
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
};
#define NB (sizeof(bounds) / sizeof(bounds[0]))

struct series {
	char *name;		/* metric name without labels */
	char *labels;
	const char *asked;	/* the name pointer it was last asked for by */
	int histogram;
	double value;		/* counter value, or histogram sum */
	unsigned long long count;
	unsigned long long buckets[NB];	/* observations in (bounds[i-1], bounds[i]]:
					 * one count each, summed when rendered */
};

struct help {
	char *type, *text;
};

/* The series used last: a request counts itself under the same few series
 * as the one before it, found again by comparing names instead of hashing
 * name{labels}. Series live as long as the registry. */
#define RECENT 4

struct tg_metrics {
	struct tg_map *series;
	struct tg_map *help;
	struct series *recent[RECENT];
	unsigned next;
};

static void
series_free(void *p)
{
	struct series *s = p;

	free(s->name);
	free(s->labels);
	free(s);
}

static void
help_free(void *p)
{
	struct help *h = p;

	free(h->type);
	free(h->text);
	free(h);
}

struct tg_metrics *
tg_metrics_new(void)
{
	struct tg_metrics *m = tg_xcalloc(1, sizeof(*m));

	m->series = tg_map_new(series_free);
	m->help = tg_map_new(help_free);
	return m;
}

void
tg_metrics_free(struct tg_metrics *m)
{
	if (m == NULL)
		return;
	tg_map_free(m->series);
	tg_map_free(m->help);
	free(m);
}

static struct series *
get(struct tg_metrics *m, const char *name, const char *labels, int histogram)
{
	char key[512];
	struct series *s;
	size_t n, l, i;

	/* callers name series with literals: the pointer they were asked
	 * by rules the other recent series out without a comparison, and
	 * the strings are still compared before one is taken */
	for (i = 0; i < RECENT; i++)
		if ((s = m->recent[i]) != NULL && s->asked == name &&
		    strcmp(s->name, name) == 0 && strcmp(s->labels, labels) == 0)
			return s;
	n = strlen(name);
	l = strlen(labels);

	if (n > sizeof(key) / 2)	/* never with the project's names */
		n = sizeof(key) / 2;
	if (n + l + 3 > sizeof(key))
		l = sizeof(key) - n - 3;
	memcpy(key, name, n);		/* name{labels}, made on every request */
	key[n] = '{';
	memcpy(key + n + 1, labels, l);
	key[n + 1 + l] = '}';
	key[n + 2 + l] = '\0';
	s = tg_map_get(m->series, key);
	if (s == NULL) {
		s = tg_xcalloc(1, sizeof(*s));
		s->name = tg_xstrdup(name);
		s->labels = tg_xstrdup(labels);
		s->histogram = histogram;
		tg_map_put(m->series, key, s);
	}
	s->asked = name;
	m->recent[m->next++ % RECENT] = s;
	return s;
}

void
tg_metrics_inc(struct tg_metrics *m, const char *name, const char *labels, double delta)
{
	get(m, name, labels, 0)->value += delta;
}

void
tg_metrics_observe(struct tg_metrics *m, const char *name, const char *labels, double seconds)
{
	struct series *s = get(m, name, labels, 1);
	size_t i;

	s->value += seconds;
	s->count++;
	for (i = 0; i < NB && !(seconds <= bounds[i]); i++)	/* NaN: in none */
		;
	if (i < NB)
		s->buckets[i]++;	/* above the last bound: in count (+Inf) only */
}

void
tg_metrics_help(struct tg_metrics *m, const char *name, const char *type, const char *help)
{
	struct help *h = tg_xcalloc(1, sizeof(*h));

	h->type = tg_xstrdup(type);
	h->text = tg_xstrdup(help);
	tg_map_put(m->help, name, h);
}

void
tg_metrics_touch(struct tg_metrics *m, const char *name, const char *labels)
{
	const struct help *h = tg_map_get(m->help, name);

	get(m, name, labels, h != NULL && strcmp(h->type, "histogram") == 0);
}

void
tg_metrics_touch_list(struct tg_metrics *m, const char *name, const char *const *labels)
{
	for (; *labels != NULL; labels++)
		tg_metrics_touch(m, name, *labels);
}

double
tg_metrics_value(const struct tg_metrics *m, const char *name, const char *labels)
{
	char key[512];
	struct series *s;

	snprintf(key, sizeof(key), "%s{%s}", name, labels);
	s = tg_map_get(m->series, key);
	return s ? s->value : 0;
}

static int
cmp_series(const void *a, const void *b)
{
	const struct series *x = *(struct series *const *)a, *y = *(struct series *const *)b;
	int c = strcmp(x->name, y->name);

	return c ? c : strcmp(x->labels, y->labels);
}

/* Expands to the three strings that print "{labels}", or nothing when empty. */
#define LB(l) (*(l) ? "{" : ""), (l), (*(l) ? "}" : "")

static void
render_histogram(const struct series *s, struct evbuffer *out)
{
	const char *sep = *s->labels ? "," : "";
	unsigned long long upto = 0;
	size_t i;

	for (i = 0; i < NB; i++) {
		upto += s->buckets[i];	/* a bucket counts every observation at or below */
		evbuffer_add_printf(out, "%s_bucket{%s%sle=\"%g\"} %llu\n", s->name, s->labels, sep,
		    bounds[i], upto);
	}
	evbuffer_add_printf(out, "%s_bucket{%s%sle=\"+Inf\"} %llu\n", s->name, s->labels, sep,
	    s->count);
	evbuffer_add_printf(out, "%s_sum%s%s%s %.6f\n%s_count%s%s%s %llu\n", s->name,
	    LB(s->labels), s->value, s->name, LB(s->labels), s->count);
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

static void
header(const struct tg_metrics *m, const char *name, struct evbuffer *out)
{
	const struct help *h = tg_map_get(m->help, name);

	if (h != NULL)
		evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, h->text, name,
		    h->type);
}

/* The names of m's map (series or help) in an array the caller frees. */
static void **
collect(const struct tg_map *map, size_t *n, const char ***keys)
{
	size_t i = 0, pos = 0;
	void **all, *v;
	const char *k;

	*n = tg_map_count(map);
	all = tg_xcalloc(*n + 1, sizeof(*all));
	*keys = tg_xcalloc(*n + 1, sizeof(**keys));
	while (tg_map_next(map, &pos, &k, &v)) {
		(*keys)[i] = k;
		all[i++] = v;
	}
	return all;
}

/* Series and declared families merged in name order: a family declared
 * with no series yet still shows its HELP and TYPE. */
void
tg_metrics_render(const struct tg_metrics *m, struct evbuffer *out)
{
	size_t n, nh, i, j = 0;
	const char **names, **sk, *last = "";
	struct series **all = (struct series **)collect(m->series, &n, &sk);

	free(collect(m->help, &nh, &names));
	qsort(all, n, sizeof(*all), cmp_series);
	qsort(names, nh, sizeof(*names), cmp_str);
	for (i = 0; i < n; i++) {
		if (strcmp(all[i]->name, last) != 0) {
			last = all[i]->name;
			for (; j < nh && strcmp(names[j], last) < 0; j++)
				header(m, names[j], out);
			if (j < nh && strcmp(names[j], last) == 0)
				j++;
			header(m, last, out);
		}
		if (all[i]->histogram)
			render_histogram(all[i], out);
		else
			evbuffer_add_printf(out, "%s%s%s%s %.17g\n", all[i]->name,
			    LB(all[i]->labels), all[i]->value);
	}
	for (; j < nh; j++)
		header(m, names[j], out);
	free(all);
	free(sk);
	free(names);
}
