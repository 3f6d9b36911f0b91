/*
 * clock.h - the process clock. Wall time carries an offset that tests
 * advance (the emulator's 30-day retention, token expiry); monotonic time
 * is for timeouts and latency. ISO 8601 parsing and formatting live here
 * because every timestamp the project reads or writes goes through them.
 */
#ifndef TIDEGATE_CLOCK_H
#define TIDEGATE_CLOCK_H

#include <stdint.h>
#include <stddef.h>

/** Wall-clock milliseconds since the epoch, plus the advanced offset. */
int64_t tg_clock_now_ms(void);
/** Monotonic milliseconds (not affected by advancing). */
int64_t tg_clock_mono_ms(void);
/** Monotonic microseconds (latencies below a millisecond). */
int64_t tg_clock_mono_us(void);
struct event_base;
/**
 * Monotonic milliseconds read at most once per turn of base's loop (base
 * borrowed): the first call while libevent's cached time stays the same
 * reads the clock, later calls get that reading again. That cache is
 * CLOCK_MONOTONIC_COARSE's, so a reading is late by up to one of its ticks
 * (1-10 ms by the kernel's HZ) and the loop's work since: the precision
 * libevent's own timers have. For deadlines those timers enforce, not for
 * durations reported to the millisecond. Outside the loop: the clock.
 */
int64_t tg_clock_turn_ms(struct event_base *base);
/** Move wall time forward by ms (never backwards: negative is ignored). */
void tg_clock_advance_ms(int64_t ms);
/** Total offset applied so far. */
int64_t tg_clock_offset_ms(void);

#define TG_ISO_LEN 32
/** Format ms as "YYYY-MM-DDTHH:MM:SS.mmmZ" (millis omitted when 0) into out
 * (borrowed). */
void tg_clock_iso(int64_t ms, char out[TG_ISO_LEN]);
/**
 * Parse a strict ISO 8601 UTC timestamp: YYYY-MM-DDTHH:MM[:SS[.fff]]
 * followed by Z or +hh:mm/-hh:mm. Calendar-checked (no 2024-02-30).
 * Returns 0 and the epoch ms, or -1. s and ms are borrowed.
 */
int tg_clock_parse_iso(const char *s, int64_t *ms);
/** Days since the epoch for a civil date (proleptic Gregorian). */
int64_t tg_clock_days_from_civil(int y, unsigned m, unsigned d);
/** Civil date of an epoch ms, into the borrowed y, mo, d, h, mi and s. */
void tg_clock_civil(int64_t ms, int *y, int *mo, int *d, int *h, int *mi, int *s);

#endif
