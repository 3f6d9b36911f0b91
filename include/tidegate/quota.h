/*
 * quota.h - the quota engine's lease client: named limits (a rate with a
 * burst, concurrent slots, units per UTC day) that hold for the whole fleet
 * without a database round trip per request. Each instance holds a local
 * share of every limit, leased in batches from a store (the state seam's
 * quota domain through tg_quota_store_state(), or a test's fake), and takes
 * units from that share in memory (Google Doorman, Envoy quota leasing).
 *
 * Contract
 *   - tg_quota_take() never blocks, never does I/O and never allocates: it
 *     counts in memory and, when the share runs low, only activates an
 *     event (allocated with the limit) that renews it in the background.
 *   - A refused take says when to retry (retry_ms, >= 1) and, granted or
 *     not, the limit's figures for the RateLimit fields (quota, window,
 *     left, reset): struct tg_quota_verdict.
 *   - Every lease the client asks for has a deadline (opts.timeout_ms, the
 *     state.timeout): one unanswered by then is cancelled and counts as the
 *     store being unreachable. A lost answer never leaks units beyond the
 *     lease's hold: a rate's units come back with time (its TAT), slots
 *     leased to an instance expire with the instance's lease (opts.hold_ms
 *     x 4 after its last renewal), and a day's units lost so are at most
 *     one batch (counted as used: a day's quota errs on the strict side).
 *   - A fleet's rate (unless opts.exact_rates, and when the store can
 *     share): no units are leased. Every opts.share_ms while the limit is
 *     used, the client asks the store for its demand a second (units
 *     asked for, granted or not) and is given a share (Google Doorman's
 *     proportional share: demand and an even part of the spare under the
 *     limit, the limit by demand over it, never more than the others'
 *     shares leave, so the live shares add up to at most the rate); it
 *     runs that share as a local bucket, the burst in the same proportion.
 *     One store round trip an instance a period, whatever the request
 *     rate. A refused take whose demand has risen well above the one
 *     reported asks again sooner (at most every share_ms / 4) and says
 *     pending. A share lapses 3 periods after it was asked for (an
 *     instance that died holds its share until then); an instance no
 *     longer using the limit asks for none once and then costs the store
 *     nothing. A share grows as the others shrink at their next report:
 *     a newcomer on a saturated fleet waits up to a period for its part.
 *   - Renewal: before the share runs out (at the low-water mark, half a
 *     batch) the client asks for a batch sized to the recent demand
 *     (demand/s x opts.lease_ms, at least 1, at most opts.max_batch and the
 *     limit's burst). Units unused opts.hold_ms after the last grant go
 *     back, so that load moving between instances keeps the fleet's rate.
 *   - Not in a fleet (opts.fleet 0), a rate and slots are purely local (no
 *     store I/O at all), and a day leases from the store (SQLite: the count
 *     survives a restart), or counts in memory when there is no store.
 *   - Store unreachable (an error or a deadline passed): the limit falls
 *     back to a local share, limit / the live instances the store last
 *     reported, or the whole limit when it never answered (an instance that
 *     cannot know its share keeps serving rather than refuse everyone;
 *     docs/operations.md), reports it (tg_quota_fallback()), and leases
 *     again as soon as a renewal is answered.
 *   - Reload (tg_quota_define()): a limit redefined by name with the same
 *     kind keeps what was used; one no longer defined is dropped (its share
 *     handed back), freed once its last reference goes.
 *
 * Threads: the loop thread only. Times: now_us is tg_clock_mono_us() (or
 * any monotonic microseconds the caller keeps to); the day of a DAY limit
 * is the UTC day of tg_clock_now_ms().
 */
#ifndef TIDEGATE_QUOTA_H
#define TIDEGATE_QUOTA_H

#include <stddef.h>
#include <stdint.h>

#include "tidegate/util.h"

struct event_base;

enum tg_quota_kind {
	TG_QUOTA_RATE,		/* per_second units a second, burst at once */
	TG_QUOTA_SLOTS,		/* limit units held at once: taken at start, given at end */
	TG_QUOTA_DAY,		/* limit units per UTC day (resets at 00:00 UTC) */
};

/** "rate", "slots", "day" (static, borrowed). */
const char *tg_quota_kind_str(enum tg_quota_kind k);

/** A limit's definition; name is fleet-unique ("key:<name>:rate",
 * "vendor:dex:rate", …), every pointer borrowed for the call. */
struct tg_quota_def {
	const char *name;
	enum tg_quota_kind kind;
	double per_second;	/* RATE: (0, 1e6] */
	int64_t burst;		/* RATE: [1, 1e9] */
	int64_t limit;		/* SLOTS, DAY: [1, 1e12] */
};

/** What a take saw: figures for the RateLimit and Retry-After fields. */
struct tg_quota_verdict {
	int64_t retry_ms;	/* refused: when units may be there (>= 1); 0 when granted */
	int64_t quota;		/* RATE: burst; SLOTS, DAY: limit */
	int64_t window_s;	/* RATE: the burst's refill time; SLOTS: 1; DAY: 86400 */
	int64_t left;		/* units left after this take, as this instance knows */
	int64_t reset_s;	/* seconds until the quota is whole again */
	int pending;		/* refused only because this instance's share is
				 * empty while the fleet's last answer had units: a
				 * lease is under way, wait for it (tg_quota_wait,
				 * with a deadline) before refusing */
};

/* ---- the store the shares are leased from ---- */

/** A store's answer: rc 0, or -1 (unreachable, timed out, an error). */
struct tg_quota_grant {
	int64_t granted;	/* take: units granted, 0..n */
	int64_t wait_ms;	/* RATE: until the fleet's next unit (0: now) */
	int64_t left;		/* RATE: units the fleet's bucket holds after it */
	int64_t used;		/* DAY: the day's units used, fleet-wide; SLOTS: what this
				 * instance holds after it */
	int64_t instances;	/* live instances the store knows of (0: unknown) */
	double share;		/* share: the rate a second this instance is given */
	int64_t sharers;	/* share: instances holding a live share, this one
				 * included */
};
typedef void (*tg_quota_store_cb)(int rc, const struct tg_quota_grant *g, void *arg);

/**
 * A store's operations (ctx and the pointers borrowed for the client's
 * life). take leases up to n units of d (borrowed) to this instance
 * (SLOTS: n more held, the instance's slot lease renewed to now_ms +
 * ttl_ms; n may be 0 to renew only); give hands n back. day is the UTC day
 * (days since the epoch) for DAY. Each returns an op handle for cancel, or
 * NULL when cb has already been called; cb is called exactly once unless
 * cancelled.
 */
struct tg_quota_store {
	void *(*take)(void *ctx, const struct tg_quota_def *d, int64_t day, int64_t n,
	    int64_t now_ms, int64_t ttl_ms, tg_quota_store_cb cb, void *arg);
	void *(*give)(void *ctx, const struct tg_quota_def *d, int64_t day, int64_t n,
	    int64_t now_ms, tg_quota_store_cb cb, void *arg);
	void (*cancel)(void *ctx, void *op);
	void *ctx;
	/* RATE shared by demand: ask for this instance's demand a second of
	 * d (lasting ttl_ms from now_ms; ttl_ms 0 withdraws it) and get its
	 * share (g->share, g->sharers): the live shares add up to at most
	 * d->per_second. May be NULL: rates lease units. */
	void *(*share)(void *ctx, const struct tg_quota_def *d, double demand,
	    int64_t now_ms, int64_t ttl_ms, tg_quota_store_cb cb, void *arg);
};

struct tg_state;
/**
 * The store over the state seam (st borrowed, outliving the store): its
 * quota domain, and the live instances it counts (an instance says it is
 * live with its leases, at most every 5 s, and counts for 15 s). The
 * caller takes ownership.
 */
struct tg_quota_store *tg_quota_store_state(struct tg_state *st);
/** Free a store made by tg_quota_store_state (takes ownership; NULL ok),
 * after the client using it: operations still in flight (the client's
 * last hand-backs) are cancelled. */
void tg_quota_store_state_free(struct tg_quota_store *store);

/** The client's settings; zero fields take their defaults. */
struct tg_quota_opts {
	int fleet;		/* lease RATE and SLOTS from the store too */
	int64_t lease_ms;	/* batch = demand over this long; 0: 200 */
	int64_t hold_ms;	/* unused units go back after; 0: 1000 */
	int64_t max_batch;	/* 0: 1000 */
	int64_t timeout_ms;	/* a lease's deadline; 0: 2000 */
	int64_t tick_ms;	/* background step (demand, hold, deadlines); 0: 50 */
	int exact_rates;	/* a fleet's RATE leases units from one bucket (never
				 * over the burst; a store round trip per batch)
				 * rather than a share of the rate by demand */
	int64_t share_ms;	/* a share is asked for again this often while
				 * used; 0: 1000 */
};

struct tg_quota;
struct tg_quota_limit;

/**
 * A client on base (borrowed) leasing from store (borrowed, may be NULL:
 * everything local, DAY in memory). The caller takes ownership.
 */
struct tg_quota *tg_quota_new(struct event_base *base, const struct tg_quota_store *store,
    const struct tg_quota_opts *opts);
/** Hand back every share (best effort) and free q (takes ownership; NULL ok). */
void tg_quota_free(struct tg_quota *q);

/**
 * Make defs[0..n-1] (borrowed) the client's limits: kept by name (same
 * kind: what was used stays), added, or dropped. 0, or -1 with err
 * (borrowed) naming the bad definition, the old set untouched.
 */
int tg_quota_define(struct tg_quota *q, const struct tg_quota_def *defs, size_t n,
    struct tg_err *err);
/** The limit named name (borrowed), or NULL. Borrowed until the next
 * tg_quota_define() unless referenced. */
struct tg_quota_limit *tg_quota_find(struct tg_quota *q, const char *name);
/** Keep l (borrowed) alive across reloads until tg_quota_unref(): for a
 * unit given back after a reload (a slot, a refused creation). */
struct tg_quota_limit *tg_quota_ref(struct tg_quota_limit *l);
void tg_quota_unref(struct tg_quota_limit *l);
/** l's definition (borrowed, as long as l). */
const struct tg_quota_def *tg_quota_limit_def(const struct tg_quota_limit *l);

/**
 * Take n units of l (borrowed) at now_us: 0 granted, -1 refused; v
 * (borrowed, may be NULL) gets the figures. All or nothing.
 */
int tg_quota_take(struct tg_quota_limit *l, int64_t n, int64_t now_us,
    struct tg_quota_verdict *v);
/** Give back n units taken (SLOTS: at the end of use; RATE, DAY: units
 * taken and not used, e.g. a creation the vendor refused). l borrowed. */
void tg_quota_give(struct tg_quota_limit *l, int64_t n, int64_t now_us);
/** l's figures at now_us without taking (v borrowed). */
void tg_quota_peek(struct tg_quota_limit *l, int64_t now_us, struct tg_quota_verdict *v);

/** A caller-owned wait: no allocation. Fields are the client's. */
struct tg_quota_waiter {
	struct tg_quota_waiter *next, *prev;
	struct tg_quota_limit *limit;
	void (*cb)(struct tg_quota_waiter *w, void *arg);
	void *arg;
};
/**
 * Call cb(w, arg) once, later on the loop, when units of l may be there
 * (a share arrived, a slot given back, a rate's next unit due): the
 * caller then takes again (and may wait again). w and l borrowed until cb
 * or tg_quota_wait_cancel(); l is referenced meanwhile.
 */
void tg_quota_wait(struct tg_quota_limit *l, struct tg_quota_waiter *w,
    void (*cb)(struct tg_quota_waiter *w, void *arg), void *arg);
/** Stop w (borrowed) from being called; no-op if it is not waiting. */
void tg_quota_wait_cancel(struct tg_quota_waiter *w);

/** How many limits run on a local fallback share (store unreachable): 0
 * when all lease normally (q borrowed; /readyz and metrics show it). */
int tg_quota_fallback(const struct tg_quota *q);
/** How many times a limit of q (borrowed) went onto a local share since
 * q was made (each time the fleet's bound may be passed by that share). */
unsigned long long tg_quota_fallbacks(const struct tg_quota *q);
/** Is l (borrowed) on its fallback share? */
int tg_quota_limit_fallback(const struct tg_quota_limit *l);
/** The rate a second l (borrowed, RATE) lets this instance admit at
 * now_us: the whole rate (local, or units leased from the fleet's
 * bucket), its share by demand (0 while it has none), the fallback share. */
double tg_quota_limit_rate(const struct tg_quota_limit *l, int64_t now_us);
/** Units l (borrowed) holds leased and not yet taken (tests, metrics). */
int64_t tg_quota_limit_share(const struct tg_quota_limit *l);
/** Run the background step now (tests; the client's timer calls it). */
void tg_quota_tick(struct tg_quota *q, int64_t now_us);

#endif
