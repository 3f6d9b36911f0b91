/*
 * limits.h - the per-key limits feature: each API key's rate (with a
 * burst) and concurrent requests, configured in its keys[] item
 * (keys[].limits.*), kept by the quota engine (quota.h) and answered with
 * 429, Retry-After and the RateLimit fields when over.
 */
#ifndef TIDEGATE_LIMITS_H
#define TIDEGATE_LIMITS_H

#include "tidegate/gateway.h"
#include "tidegate/gateway_config.h"

/** The feature's configuration (static): defined before the first load. */
extern const struct gw_config_def tg_limits_config;

/** Register the feature with gw (borrowed): 0, or -1 with err (borrowed). */
int tg_limits_register(struct gw *gw, struct tg_err *err);

#endif
