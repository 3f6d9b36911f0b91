/*
 * metrics.h - a small Prometheus registry: counters and latency histograms
 * keyed by metric name and a label string, rendered in the text exposition
 * format. Gauges are written by the caller at scrape time.
 */
#ifndef TIDEGATE_METRICS_H
#define TIDEGATE_METRICS_H

#include <stddef.h>

struct evbuffer;
struct tg_metrics;

struct tg_metrics *tg_metrics_new(void);
void tg_metrics_free(struct tg_metrics *m);
/** Add delta to counter name{labels}; labels like `service="dex",code="200"` or "". */
void tg_metrics_inc(struct tg_metrics *m, const char *name, const char *labels, double delta);
/** Record seconds in histogram name{labels} (fixed buckets 1 ms .. 60 s). */
void tg_metrics_observe(struct tg_metrics *m, const char *name, const char *labels,
    double seconds);
/** Declare a metric's help text (once, at start-up); type "counter" or "histogram". */
void tg_metrics_help(struct tg_metrics *m, const char *name, const char *type,
    const char *help);
/** Append every series in text format, grouped by name. */
void tg_metrics_render(const struct tg_metrics *m, struct evbuffer *out);
/** Value of a counter (tests and readiness), 0 when absent. */
double tg_metrics_value(const struct tg_metrics *m, const char *name, const char *labels);

#endif
