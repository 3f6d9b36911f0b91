/*
 * limits_int.h - the per-key limits feature's insides: its settings
 * (config.c) and the limits each key's requests take (feature.c).
 */
#ifndef TIDEGATE_LIMITS_INT_H
#define TIDEGATE_LIMITS_INT_H

#include <stdint.h>

#include "tidegate/limits.h"
#include "tidegate/ops.h"
#include "tidegate/quota.h"

/* A key's limits, by kind: its rate, its concurrency, and its daily
 * quotas of job creations (exports, imports, simulations, sweeps). */
enum { LIM_RATE, LIM_SLOTS, LIM_EXPORTS, LIM_IMPORTS, LIM_SIMS, LIM_SWEEPS, LIM_N };

/* Then one rate per operation (keys[].limits.operations.<op>): kind
 * LIM_OP + op, LIM_ALL kinds in all. */
#define LIM_OP	LIM_N
#define LIM_ALL	(LIM_N + TG_OP_COUNT)

/* A key's limits as configured (keys[].limits.*; 0: none). */
struct lim_key_cfg {
	double rate;		/* requests a second */
	long long burst;	/* at once; 0: the rate rounded up (at least 1) */
	long long concurrent;	/* requests at once */
	long long daily[4];	/* creations a UTC day: exports, imports, simulations,
				 * sweeps */
	struct {
		double rate;		/* this operation's requests a second, besides rate */
		long long burst;	/* 0: its rate rounded up (at least 1) */
	} op[TG_OP_COUNT];	/* by enum tg_op (ops.h); TG_OP_PASSTHROUGH unused */
};

/* The feature's settings, one per configuration loaded. */
struct lim_cfg {
	int headers;		/* RateLimit fields on answers under the limit too */
	char *count;		/* "all", or "vendor": only requests the vendor answers
				 * count against a rate (cached answers, long-polls
				 * and the gateway's own answers do not) */
	int count_vendor;	/* not a key: count is "vendor" */
	int64_t lease_ms, hold_ms;
	char *rates;		/* "share" (a share of a rate by demand) or "exact" */
	int exact_rates;	/* not a key: rates is "exact" */
	int64_t share_ms;	/* a rate's share is asked for again this often */
	struct lim_key_cfg *keys;	/* as many as the core's keys */
	size_t nkeys;
	int any;		/* not a key: some key has a limit */
};

/* The operations a key may limit, by name (config.c; TG_OP_COUNT of them,
 * NULL for TG_OP_PASSTHROUGH): the route tables' names (tg_op_name). */
extern const char *const lim_op_names[TG_OP_COUNT];

/** The settings in c (borrowed, as long as c). */
const struct lim_cfg *lim_cfg_of(const struct gw_config *c);

#endif
