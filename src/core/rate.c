/*
 * rate.c - a rate limit with a burst as one number (rate.h): the GCRA
 * arithmetic, and the RateLimit header fields that report it.
 *
 * With interval I and burst B, units are there at now while the TAT runs
 * less than B intervals ahead: left = floor((now + B*I - max(tat, now)) / I).
 * A TAT more than B intervals ahead can only come from a clock that went
 * back (or a row written by a host whose clock runs ahead): it is read as
 * exactly B intervals ahead, so the wait it causes is at most one refill.
 */
#include <math.h>
#include <stdio.h>

#include "tidegate/rate.h"

int
tg_rate_init(struct tg_rate *r, double per_second, int64_t burst)
{
	if (!(per_second > 0 && per_second <= 1e6) || burst < 1 || burst > 1000000000)
		return -1;
	r->interval_us = (int64_t)llround(1e6 / per_second);
	if (r->interval_us < 1)
		r->interval_us = 1;
	r->burst = burst;
	return 0;
}

/* The TAT as this clock may read it: not before now, at most a burst ahead. */
static int64_t
start(const struct tg_rate *r, int64_t tat, int64_t now)
{
	int64_t full = now + r->burst * r->interval_us;

	return tat < now ? now : tat > full ? full : tat;
}

int64_t
tg_rate_left(const struct tg_rate *r, int64_t tat, int64_t now)
{
	return (now + r->burst * r->interval_us - start(r, tat, now)) / r->interval_us;
}

int64_t
tg_rate_take(const struct tg_rate *r, int64_t *tat, int64_t now, int64_t n)
{
	int64_t left = tg_rate_left(r, *tat, now), k = n < left ? n : left;

	if (k < 0)
		k = 0;
	*tat = start(r, *tat, now) + k * r->interval_us;
	return k;
}

void
tg_rate_give(const struct tg_rate *r, int64_t *tat, int64_t now, int64_t n)
{
	int64_t t = start(r, *tat, now);

	if (n <= 0)
		return;
	*tat = n >= (t - now) / r->interval_us + 1 ? now : t - n * r->interval_us;
}

int64_t
tg_rate_wait(const struct tg_rate *r, int64_t tat, int64_t now)
{
	int64_t w = start(r, tat, now) - (r->burst - 1) * r->interval_us - now;

	return w > 0 ? w : 0;
}

int64_t
tg_rate_reset(const struct tg_rate *r, int64_t tat, int64_t now)
{
	return start(r, tat, now) - now;
}

void
tg_rate_fields(const char *name, int64_t quota, int64_t window_s, int64_t left,
    int64_t reset_s, char *policy, size_t policy_len, char *state, size_t state_len)
{
	snprintf(policy, policy_len, "\"%s\";q=%lld;w=%lld", name, (long long)quota,
	    (long long)(window_s > 0 ? window_s : 1));
	snprintf(state, state_len, "\"%s\";r=%lld;t=%lld", name,
	    (long long)(left > 0 ? left : 0), (long long)(reset_s > 0 ? reset_s : 0));
}
