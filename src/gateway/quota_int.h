/*
 * quota_int.h - the lease client's insides (quota.h), shared by its files:
 * quota_take.c (the hot path: take, give, figures, batch size,
 * references, waiters), quota_lease.c (renewal, hand back, deadlines and
 * the fallback share, off the hot path) and quota.c (the set of limits,
 * reload, the timer), each calling only the ones before it.
 */
#ifndef TIDEGATE_QUOTA_INT_H
#define TIDEGATE_QUOTA_INT_H

#include <stdint.h>

#include "tidegate/quota.h"
#include "tidegate/rate.h"

struct event;

struct tg_quota_limit {
	struct tg_quota *q;
	struct tg_quota_limit *next;	/* q's list (not when removed) */
	struct tg_quota_def def;	/* def.name owned */
	struct tg_rate rate;		/* RATE: the whole limit */
	struct tg_rate fb_rate;		/* RATE: the fallback share */
	int64_t tat;			/* local GCRA (not leasing, or falling back) */
	int lease;			/* units come from the store */
	int64_t share;			/* RATE, DAY: leased, not yet taken */
	int64_t held;			/* SLOTS: units this instance holds leased */
	int64_t in_use;			/* SLOTS: taken, not given back */
	int64_t day;			/* DAY: the UTC day of share and used */
	int64_t used;			/* DAY: used fleet-wide as last seen, our share included */
	int64_t fleet_left;		/* RATE: the fleet bucket's units, last seen */
	int64_t fleet_wait_until_us;	/* RATE: the fleet's next unit */
	int64_t fb_used;		/* SLOTS, DAY on the fallback share */
	int fallback;
	int dry;			/* the last lease brought nothing: the fleet has none */
	int64_t demand;			/* units asked since the last tick */
	double per_s;			/* demand a second, smoothed */
	int64_t last_grant_us;
	int sh_mode;			/* RATE leased as a share of the rate by demand */
	struct tg_rate sh_rate;		/* sh_mode: this instance's share, as a bucket */
	int64_t sh_until_us;		/* sh_mode: the share lapses (0: none yet) */
	int64_t sh_asked_us;		/* sh_mode: the last report went out */
	int64_t sh_count;		/* sh_mode: units asked for since */
	double sh_reported;		/* sh_mode: the demand a second then reported */
	double sh_share;		/* sh_mode: the share a second last given */
	void *op;			/* the pending take, if any */
	int64_t op_n, op_since_us;
	struct event *renew;		/* activated by a take at low water */
	struct tg_quota_waiter waiters;	/* list head */
	int refs;			/* the set's, references, pending ops */
	int removed;
};

struct tg_quota {
	struct event_base *base;
	const struct tg_quota_store *store;
	struct tg_quota_opts o;
	struct tg_quota_limit *limits;
	struct event *timer;
	int64_t instances;		/* as the store last said (0: unknown) */
	unsigned long long fallbacks;	/* times a limit went onto a local share */
	int64_t last_tick_us;
};

/** The bucket a RATE take counts on locally: the fallback share, the
 * whole limit (not leased), the share by demand; NULL when units are
 * leased from the fleet's bucket (quota_take.c). */
const struct tg_rate *tg_quota_local_rate(const struct tg_quota_limit *l);
/** Withdraw l's demand from its rate's share, answer ignored (quota_lease.c). */
void tg_quota_withdraw(struct tg_quota_limit *l);
/** sh_rate set from the last answer (quota_lease.c). */
void tg_quota_share_apply(struct tg_quota_limit *l);
/** The batch a renewal asks for (quota_take.c). */
int64_t tg_quota_batch(const struct tg_quota_limit *l);
/** Ask the store for a batch unless one is pending (quota_lease.c). */
void tg_quota_renew(struct tg_quota_limit *l, int64_t now_us);
/** Hand n units back to the store, answer ignored (quota_lease.c). */
void tg_quota_hand_back(struct tg_quota_limit *l, int64_t n);
/** Wake every waiter of l (quota_take.c). */
void tg_quota_wake(struct tg_quota_limit *l);
/** The UTC day of the wall clock (quota_take.c). */
int64_t tg_quota_today(void);

#endif
