/*
 * limits_int.h - the per-key limits feature's insides: its settings
 * (config.c) and the limits each key's requests take (feature.c).
 */
#ifndef TIDEGATE_LIMITS_INT_H
#define TIDEGATE_LIMITS_INT_H

#include <stdint.h>

#include "tidegate/limits.h"
#include "tidegate/quota.h"

/* A key's limits as configured (keys[].limits.*; 0: none). */
struct lim_key_cfg {
	double rate;		/* requests a second */
	long long burst;	/* at once; 0: the rate rounded up (at least 1) */
	long long concurrent;	/* requests at once */
};

/* The feature's settings, one per configuration loaded. */
struct lim_cfg {
	int headers;		/* RateLimit fields on answers under the limit too */
	int64_t lease_ms, hold_ms;
	struct lim_key_cfg *keys;	/* as many as the core's keys */
	size_t nkeys;
	int any;		/* not a key: some key has a limit */
};

/** The settings in c (borrowed, as long as c). */
const struct lim_cfg *lim_cfg_of(const struct gw_config *c);

#endif
