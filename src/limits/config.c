/*
 * config.c - the per-key limits feature's configuration: limits.* (the
 * fields and the lease) and each key's own in its keys[] item
 * (keys[].limits.*), so a limit can only name a configured key.
 */
#include <math.h>
#include <stddef.h>
#include <string.h>

#include "limits_int.h"

#define K(p, t, f, d, doc) GW_CFG_KEY(struct lim_cfg, p, t, f, d, doc)
#define KB(p, t, f, d, lo, hi, doc) GW_CFG_KEYB(struct lim_cfg, p, t, f, d, lo, hi, doc)

/* Per operation: keys[].limits.operations.<name>.rate and .burst, a map
 * keyed by the operation's name (a fixed set, so the key table carries it
 * and an unknown name gets the loader's "did you mean"). */
#define OP_KEYS(o, nm)								\
	GW_CFG_KEYB(struct lim_key_cfg, "limits.operations." nm ".rate", TG_CFG_DOUBLE,	\
	    op[o].rate, "0", 0, 1e6, "requests a second of operation " nm " this key may "	\
	    "make, fleet-wide, counted besides limits.rate (0: no limit); over it: 429 "	\
	    "RATE_LIMITED"),							\
	GW_CFG_KEYB(struct lim_key_cfg, "limits.operations." nm ".burst", TG_CFG_INT,	\
	    op[o].burst, "0", 0, 1e9, "requests of " nm " at once above its rate (0: the "	\
	    "rate rounded up, at least 1)"),

/* Each operation a key may limit and its name (the route tables'). */
#define LIM_OPS(X)								\
	X(TG_OP_DEX_AUTHENTICATE, "authenticate") X(TG_OP_DEX_EXPORT, "export")		\
	X(TG_OP_DEX_EXPORT_GET, "export_get") X(TG_OP_DEX_IMPORT_JSON, "import_activities")	\
	X(TG_OP_DEX_IMPORT_FILE, "import_file") X(TG_OP_DEX_IMPORT_STATUS, "import_status")	\
	X(TG_OP_DEX_IMPORT_RESULT, "import_result")					\
	X(TG_OP_DEX_IMPORT_FAILED, "import_failed") X(TG_OP_SIM_TOKEN, "token")		\
	X(TG_OP_SIM_CASES, "cases") X(TG_OP_SIM_CASE, "case")				\
	X(TG_OP_SIM_SUBMIT, "simulations") X(TG_OP_SIM_LIST, "simulation_list")		\
	X(TG_OP_SIM_STATUS, "simulation") X(TG_OP_SIM_RESULTS, "results")

#define OP_NAME(o, nm) [o] = nm,
const char *const lim_op_names[TG_OP_COUNT] = { LIM_OPS(OP_NAME) };

static const struct tg_cfg_key key_keys[] = {
	GW_CFG_KEYB(struct lim_key_cfg, "limits.rate", TG_CFG_DOUBLE, rate, "0", 0, 1e6,
	    "requests a second this key may make, for the whole fleet (0: no limit); over "
	    "it: 429 RATE_LIMITED"),
	GW_CFG_KEYB(struct lim_key_cfg, "limits.burst", TG_CFG_INT, burst, "0", 0, 1e9,
	    "requests at once above the rate (0: the rate rounded up, at least 1)"),
	GW_CFG_KEYB(struct lim_key_cfg, "limits.concurrent", TG_CFG_INT, concurrent, "0", 0,
	    1e9, "requests of this key in flight at once, fleet-wide (0: no limit); over it: "
	    "429 CONCURRENCY_LIMITED"),
	GW_CFG_KEYB(struct lim_key_cfg, "limits.daily.exports", TG_CFG_INT, daily[0], "0", 0,
	    1e12, "exports this key may create a UTC day, fleet-wide (0: no limit); over it: "
	    "429 QUOTA_EXCEEDED; one the vendor refuses does not count"),
	GW_CFG_KEYB(struct lim_key_cfg, "limits.daily.imports", TG_CFG_INT, daily[1], "0", 0,
	    1e12, "imports (JSON or file) this key may create a UTC day, as daily.exports"),
	GW_CFG_KEYB(struct lim_key_cfg, "limits.daily.simulations", TG_CFG_INT, daily[2], "0",
	    0, 1e12, "simulation runs this key may submit a UTC day, as daily.exports"),
	GW_CFG_KEYB(struct lim_key_cfg, "limits.daily.sweeps", TG_CFG_INT, daily[3], "0", 0,
	    1e12, "sweeps this key may create a UTC day (POST /tidegate/v1/sweeps), fleet-wide "
	    "(0: no limit); over it: 429 QUOTA_EXCEEDED; one refused does not count"),
	LIM_OPS(OP_KEYS)
};

static const struct tg_cfg_key keys[] = {
	K("limits.headers", TG_CFG_BOOL, headers, "true",
	  "RateLimit-Policy and RateLimit fields on answers under a key's limit too"),
	K("limits.count", TG_CFG_STR, count, "all",
	  "what counts against a key's rate: all (every request, whatever answers it) or "
	  "vendor (only requests answered by a vendor call of their own: not cached answers, "
	  "long-polls or the gateway's own answers)"),
	KB("limits.lease", TG_CFG_DURATION, lease_ms, "200ms", 10, 60000,
	   "an instance leases from the fleet's limit its demand over this long at a time"),
	KB("limits.hold", TG_CFG_DURATION, hold_ms, "1s", 100, 60000,
	   "leased units unused this long go back to the fleet"),
	K("limits.rates", TG_CFG_STR, rates, "share",
	  "how a fleet shares a key's rate: share (each instance runs a share of the rate in "
	  "proportion to its demand, reported every limits.share_every: no database work per "
	  "request, the bound held within what demand moves in one period) or exact (units "
	  "leased in batches from one fleet-wide bucket: never over the burst, a database "
	  "transaction per batch)"),
	KB("limits.share_every", TG_CFG_DURATION, share_ms, "1s", 100, 60000,
	   "an instance using a rate reports its demand and takes its new share this often "
	   "(a share lapses after three of these)"),
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
	int j;

	(void)c;
	if (strcmp(l->count, "all") != 0 && strcmp(l->count, "vendor") != 0)
		tg_config_report_add(rep, NULL, "limits.count", "must be all or vendor");
	l->count_vendor = strcmp(l->count, "vendor") == 0;
	if (strcmp(l->rates, "share") != 0 && strcmp(l->rates, "exact") != 0)
		tg_config_report_add(rep, NULL, "limits.rates", "must be share or exact");
	l->exact_rates = strcmp(l->rates, "exact") == 0;
	for (i = 0; i < l->nkeys; i++) {
		k = &l->keys[i];
		if (k->rate > 0 && k->burst == 0)
			k->burst = (long long)ceil(k->rate);
		l->any |= k->rate > 0 || k->concurrent > 0 || k->daily[0] > 0 || k->daily[1] > 0
		    || k->daily[2] > 0 || k->daily[3] > 0;
		for (j = 0; j < TG_OP_COUNT; j++) {
			if (k->op[j].rate > 0 && k->op[j].burst == 0)
				k->op[j].burst = (long long)ceil(k->op[j].rate);
			l->any |= k->op[j].rate > 0;
		}
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
