/*
 * latency.c - how long the vendor took: one observation per attempt, from
 * handing the request to libevent to the response head (or the attempt's
 * failure), kept per origin in fixed buckets (tg_upstream_lat_*) for the
 * admin listener's tidegate_vendor_request_duration_seconds. The request
 * path pays two clock reads and a few integer compares and adds: the
 * bounds are integers of microseconds and the counts plain arrays, so
 * nothing is allocated or formatted per call. Health probes are left out:
 * they measure the origin for ejection, not the vendor's answers to calls.
 */
#include "tidegate/clock.h"
#include "up.h"

/* From the emulator on loopback (a millisecond) to a slow export
 * (tens of seconds); Prometheus's le: a value on a bound counts in it. */
static const int64_t le_us[TG_UP_LAT_NB] = {
	1000, 2500, 5000, 10000, 25000, 50000, 100000, 250000, 500000,
	1000000, 2500000, 5000000, 10000000, 30000000,
};

int
tg_upstream_lat_bucket(int64_t us)
{
	int i = 0;

	while (i < TG_UP_LAT_NB && us > le_us[i])
		i++;
	return i;
}

double
tg_upstream_lat_le(int i)
{
	return i >= 0 && i < TG_UP_LAT_NB ? (double)le_us[i] / 1e6 : 0;
}

void
tg_upstream_lat_start(struct tg_up_req *r)
{
	r->sent_us = r->probe ? 0 : tg_clock_mono_us();
}

void
tg_upstream_lat_end(struct tg_up_req *r)
{
	int64_t us;

	if (r->sent_us == 0)
		return;	/* a probe, not started, or counted at its head */
	us = tg_clock_mono_us() - r->sent_us;
	if (us < 0)
		us = 0;
	r->sent_us = 0;
	r->o->h.lat[tg_upstream_lat_bucket(us)]++;
	r->o->h.lat_sum_us += (unsigned long long)us;
}
