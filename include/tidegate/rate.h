/*
 * rate.h - the arithmetic of a rate limit with a burst (GCRA, the generic
 * cell rate algorithm of ATM networks, as redis-cell and Envoy use it): one
 * number per limit, its theoretical arrival time (TAT), the moment the
 * bucket would be full again. Taking k units moves it k intervals later;
 * units are there while it runs at most a burst of intervals ahead of now.
 * Pure functions over that number, so the same rule serves a local bucket,
 * a share leased from the fleet's and the fleet's own row. Times are
 * microseconds on any clock the caller keeps to; a clock that jumps back
 * never holds units back longer than one full refill once a take has read it.
 */
#ifndef TIDEGATE_RATE_H
#define TIDEGATE_RATE_H

#include <stddef.h>
#include <stdint.h>

/** A limit: one unit every interval_us on average, burst units at once. */
struct tg_rate {
	int64_t interval_us;
	int64_t burst;
};

/** r (borrowed) set to per_second units a second with burst (>= 1):
 * 0, or -1 when either is out of range (rate in (0, 1e6], burst in
 * [1, 1e9]). */
int tg_rate_init(struct tg_rate *r, double per_second, int64_t burst);
/** Take up to n units at now: the units granted (0..n), *tat moved on
 * (r and tat borrowed, as in every call below). */
int64_t tg_rate_take(const struct tg_rate *r, int64_t *tat, int64_t now, int64_t n);
/** Give back n units taken and not used (borrowed): *tat moved back,
 * never behind now (a full bucket holds no more than its burst). */
void tg_rate_give(const struct tg_rate *r, int64_t *tat, int64_t now, int64_t n);
/** The units there at now (0..burst; r borrowed). */
int64_t tg_rate_left(const struct tg_rate *r, int64_t tat, int64_t now);
/** Microseconds from now until the next unit (0: one is there; r
 * borrowed). */
int64_t tg_rate_wait(const struct tg_rate *r, int64_t tat, int64_t now);
/** Microseconds from now until the bucket is full again (r borrowed). */
int64_t tg_rate_reset(const struct tg_rate *r, int64_t tat, int64_t now);

/**
 * The RateLimit-Policy and RateLimit field values (draft-ietf-httpapi-
 * ratelimit-headers) of the policy named name (borrowed; a token: letters,
 * digits, '_', '-', '.'): quota units a window of window_s seconds, left
 * of them, reset_s seconds until the quota is whole again. Written into
 * policy and state (borrowed, NUL-terminated, truncated to their size).
 */
void tg_rate_fields(const char *name, int64_t quota, int64_t window_s, int64_t left,
    int64_t reset_s, char *policy, size_t policy_len, char *state, size_t state_len);

#endif
