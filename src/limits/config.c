/*
 * config.c - the per-key limits feature's configuration: limits.* (the
 * fields and the lease) and each key's own in its keys[] item
 * (keys[].limits.*), so a limit can only name a configured key.
 */
#include <math.h>
#include <stddef.h>

#include "limits_int.h"

#define K(p, t, f, d, doc) GW_CFG_KEY(struct lim_cfg, p, t, f, d, doc)
#define KB(p, t, f, d, lo, hi, doc) GW_CFG_KEYB(struct lim_cfg, p, t, f, d, lo, hi, doc)

static const struct tg_cfg_key key_keys[] = {
	GW_CFG_KEYB(struct lim_key_cfg, "limits.rate", TG_CFG_DOUBLE, rate, "0", 0, 1e6,
	    "requests a second this key may make, for the whole fleet (0: no limit); over "
	    "it: 429 RATE_LIMITED"),
	GW_CFG_KEYB(struct lim_key_cfg, "limits.burst", TG_CFG_INT, burst, "0", 0, 1e9,
	    "requests at once above the rate (0: the rate rounded up, at least 1)"),
	GW_CFG_KEYB(struct lim_key_cfg, "limits.concurrent", TG_CFG_INT, concurrent, "0", 0,
	    1e9, "requests of this key in flight at once, fleet-wide (0: no limit); over it: "
	    "429 CONCURRENCY_LIMITED"),
};

static const struct tg_cfg_key keys[] = {
	K("limits.headers", TG_CFG_BOOL, headers, "true",
	  "RateLimit-Policy and RateLimit fields on answers under a key's limit too"),
	KB("limits.lease", TG_CFG_DURATION, lease_ms, "200ms", 10, 60000,
	   "an instance leases from the fleet's limit its demand over this long at a time"),
	KB("limits.hold", TG_CFG_DURATION, hold_ms, "1s", 100, 60000,
	   "leased units unused this long go back to the fleet"),
	{ "keys", TG_CFG_LIST, offsetof(struct lim_cfg, keys), NULL, 0, 0, 0, key_keys,
	  TG_NELEM(key_keys), sizeof(struct lim_key_cfg), offsetof(struct lim_cfg, nkeys),
	  "the core's keys[] (its row documents the list)" },
};

static void
check(const struct gw_config *c, void *s, struct tg_cfg_report *rep)
{
	struct lim_cfg *l = s;
	struct lim_key_cfg *k;
	size_t i;

	(void)c;
	(void)rep;
	for (i = 0; i < l->nkeys; i++) {
		k = &l->keys[i];
		if (k->rate > 0 && k->burst == 0)
			k->burst = (long long)ceil(k->rate);
		l->any |= k->rate > 0 || k->concurrent > 0;
	}
}

const struct gw_config_def tg_limits_config = {
	.name = "limits",
	.keys = keys,
	.nkeys = TG_NELEM(keys),
	.size = sizeof(struct lim_cfg),
	.check = check,
};

const struct lim_cfg *
lim_cfg_of(const struct gw_config *c)
{
	return gw_config_settings(c, &tg_limits_config);
}
