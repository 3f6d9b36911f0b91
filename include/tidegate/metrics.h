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

/** A new registry; the caller takes ownership (tg_metrics_free). */
struct tg_metrics *tg_metrics_new(void);
/** Takes ownership of m and frees it (NULL-safe). */
void tg_metrics_free(struct tg_metrics *m);
/**
 * Add delta to counter name{labels}; labels like `service="dex",code="200"` or "".
 * m, name and labels are borrowed (copied when the series is new).
 */
void tg_metrics_inc(struct tg_metrics *m, const char *name, const char *labels, double delta);
/** Record seconds in histogram name{labels} (fixed buckets 0.1 ms .. 60 s); m, name
 * and labels are borrowed (copied when the series is new). */
void tg_metrics_observe(struct tg_metrics *m, const char *name, const char *labels,
    double seconds);
/** Declare a metric's help text (once, at start-up); type "counter" or "histogram".
 * m, name, type and help are borrowed (copied). */
void tg_metrics_help(struct tg_metrics *m, const char *name, const char *type,
    const char *help);
/** Make series name{labels} exist at 0 (a counter, or a histogram when name was
 * declared one) so it is scraped before its first event; arguments borrowed. */
void tg_metrics_touch(struct tg_metrics *m, const char *name, const char *labels);
/** tg_metrics_touch for each label string of the NULL-terminated list (borrowed). */
void tg_metrics_touch_list(struct tg_metrics *m, const char *name, const char *const *labels);
/** Append every series in text format, grouped by name; m and out are borrowed. */
void tg_metrics_render(const struct tg_metrics *m, struct evbuffer *out);
/** Record the build for tidegate_build_info (the entry point, once at start);
 * version and commit are borrowed (copied); an empty commit reads "unknown". */
void tg_metrics_build_set(const char *version, const char *commit);
/** Append tidegate_build_info and the process_* series of the Prometheus client
 * libraries (CPU, memory, descriptors, start time, from /proc); out borrowed. */
void tg_metrics_process_render(struct evbuffer *out);
/** Value of a counter (tests and readiness), 0 when absent; arguments borrowed. */
double tg_metrics_value(const struct tg_metrics *m, const char *name, const char *labels);

#endif
