/*
 * clock.c - wall and monotonic time, the test offset, and strict ISO 8601.
 * The offset is process-wide on purpose: when the emulator runs embedded in
 * the gateway, advancing its clock advances the gateway's too.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <event2/event.h>

#include "tidegate/clock.h"

static int64_t offset_ms;

int64_t
tg_clock_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000 + offset_ms;
}

int64_t
tg_clock_mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t
tg_clock_mono_ms(void)
{
	return tg_clock_mono_us() / 1000;
}

/*
 * libevent caches the time once per pass of its loop
 * (event_base_gettimeofday_cached gives it without a system call while
 * callbacks run), but as wall time: a step of the wall clock would show in
 * a difference. So the cached value only says whether the last reading is
 * still current; the reading itself is monotonic. Per thread: each worker
 * runs a loop of its own.
 */
int64_t
tg_clock_turn_ms(struct event_base *base)
{
	static __thread struct timeval turn;
	static __thread int64_t turn_ms;
	struct timeval tv;

	if (event_base_gettimeofday_cached(base, &tv) == 0 && tv.tv_sec == turn.tv_sec &&
	    tv.tv_usec == turn.tv_usec)
		return turn_ms;
	turn = tv;
	return turn_ms = tg_clock_mono_ms();
}

void
tg_clock_advance_ms(int64_t ms)
{
	if (ms > 0)
		offset_ms += ms;
}

int64_t
tg_clock_offset_ms(void)
{
	return offset_ms;
}

/* Howard Hinnant's days_from_civil / civil_from_days. */
int64_t
tg_clock_days_from_civil(int y, unsigned m, unsigned d)
{
	int64_t era;
	unsigned yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = (unsigned)(y - era * 400);
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + (int64_t)doe - 719468;
}

void
tg_clock_civil(int64_t ms, int *y, int *mo, int *d, int *h, int *mi, int *s)
{
	int64_t secs = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
	int64_t z = (secs >= 0 ? secs : secs - 86399) / 86400;
	int64_t rem = secs - z * 86400, era;
	unsigned doe, yoe, doy, mp;

	*h = (int)(rem / 3600);
	*mi = (int)(rem % 3600 / 60);
	*s = (int)(rem % 60);
	z += 719468;
	era = (z >= 0 ? z : z - 146096) / 146097;
	doe = (unsigned)(z - era * 146097);
	yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
	doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
	mp = (5 * doy + 2) / 153;
	*d = (int)(doy - (153 * mp + 2) / 5 + 1);
	*mo = (int)(mp < 10 ? mp + 3 : mp - 9);
	*y = (int)(yoe + era * 400 + (*mo <= 2));
}

void
tg_clock_iso(int64_t ms, char out[TG_ISO_LEN])
{
	int y, mo, d, h, mi, s;
	int frac = (int)(((ms % 1000) + 1000) % 1000);

	tg_clock_civil(ms, &y, &mo, &d, &h, &mi, &s);
	if (frac)
		snprintf(out, TG_ISO_LEN, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ",
		    y, mo, d, h, mi, s, frac);
	else
		snprintf(out, TG_ISO_LEN, "%04d-%02d-%02dT%02d:%02d:%02dZ", y, mo, d, h, mi, s);
}

static int
digits(const char **p, int n, int *out)
{
	int v = 0, i;

	for (i = 0; i < n; i++) {
		if (!isdigit((unsigned char)(*p)[i]))
			return -1;
		v = v * 10 + ((*p)[i] - '0');
	}
	*p += n;
	*out = v;
	return 0;
}

static int
days_in_month(int y, int m)
{
	static const int dim[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
	int leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

	return m == 2 && leap ? 29 : dim[m - 1];
}

int
tg_clock_parse_iso(const char *s, int64_t *ms)
{
	int y, mo, d, h, mi, sec = 0, frac = 0, oh = 0, om = 0, sign = 0, nf = 0;
	const char *p = s;

	if (digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' ||
	    digits(&p, 2, &d) || (*p != 'T' && *p != 't') || (p++, digits(&p, 2, &h)) ||
	    *p++ != ':' || digits(&p, 2, &mi))
		return -1;
	if (*p == ':') {
		p++;
		if (digits(&p, 2, &sec))
			return -1;
		if (*p == '.') {
			p++;
			while (isdigit((unsigned char)*p)) {
				if (nf < 3)
					frac = frac * 10 + (*p - '0');
				nf++;
				p++;
			}
			if (nf == 0 || nf > 9)
				return -1;
			for (; nf < 3; nf++)
				frac *= 10;
		}
	}
	if (*p == 'Z' || *p == 'z') {
		p++;
	} else if (*p == '+' || *p == '-') {
		sign = *p++ == '+' ? 1 : -1;
		if (digits(&p, 2, &oh) || *p++ != ':' || digits(&p, 2, &om) || oh > 23 || om > 59)
			return -1;
	} else {
		return -1;	/* no zone: not a UTC timestamp */
	}
	if (*p != '\0' || mo < 1 || mo > 12 || d < 1 || d > days_in_month(y, mo) ||
	    h > 23 || mi > 59 || sec > 59)
		return -1;
	*ms = (tg_clock_days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 +
	    mi * 60 + sec - sign * (oh * 3600 + om * 60)) * 1000 + frac;
	return 0;
}
