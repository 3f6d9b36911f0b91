/*
 * outbox_rules.h - the webhook outbox's rules (src/state/outbox_rules.c),
 * applied by its domain (outbox.c, outbox_admin.c) whatever the database:
 * the retry schedule with its defaults, jitter and Retry-After cap, the
 * lease length, the state an attempt's outcome leads to, and why a job
 * cannot be redelivered. Pure: no SQL, no I/O. Private to src/state/.
 */
#ifndef TG_STATE_OUTBOX_RULES_H
#define TG_STATE_OUTBOX_RULES_H

#include <stddef.h>
#include <stdint.h>

#include "tidegate/state.h"

struct tg_state_rules {
	int64_t *schedule;		/* delay before attempt i+1 (owned) */
	size_t nschedule;
	int jitter_pct;			/* 0…100 */
	int64_t retry_after_max_ms;
	int64_t lease_ms;
};

/** Fill r (borrowed) from o (borrowed; NULL: every default), copying the
 * schedule: the caller frees it with tg_state_rules_free. */
void tg_state_rules_init(struct tg_state_rules *r, const struct tg_outbox_opts *o);
/** Free what r (borrowed) holds; r itself is the caller's. */
void tg_state_rules_free(struct tg_state_rules *r);
/**
 * The delay after `failed` failed attempts (1…): the schedule's entry plus
 * a random 0…jitter_pct % (never earlier), stretched to retry_after_ms
 * (>= 0) up to the cap; -1 when the schedule is exhausted. r borrowed.
 */
int64_t tg_state_rules_delay(const struct tg_state_rules *r, int failed, int64_t retry_after_ms);
/**
 * The state attempt number `attempt` (1…) leads to with outcome res
 * (borrowed): 2xx delivered, 410 gone, else ready again at *next_at or
 * dead when the schedule is exhausted (Retry-After counts for 429 and 5xx
 * only). *next_at is 0 unless READY. r borrowed.
 */
enum tg_outbox_state tg_state_rules_judge(const struct tg_state_rules *r, int attempt,
    const struct tg_outbox_result *res, int64_t now_ms, int64_t *next_at);
/**
 * Why a job in state st (leased: an attempt holds a live lease;
 * has_payload: its payload was committed) cannot be redelivered, or NULL
 * when it can (static, borrowed).
 */
const char *tg_state_rules_refusal(enum tg_outbox_state st, int leased, int has_payload);
/**
 * The host of a callback URL (borrowed), lower case, without IPv6
 * brackets, user info or port: what the worker's in-flight share per
 * host counts (a lease names it with this; SQLite's lease SQL calls it
 * as tg_url_host, PostgreSQL's has the same rule in SQL, outbox.c). ""
 * when the URL has no "://". The caller takes ownership (free()).
 */
char *tg_state_url_host(const char *url);
/** The hosts of skip (borrowed; NULL or empty: none) as one string, each
 * between newlines ("\na\nb\n"), for a lease's SQL to search; NULL for
 * none. The caller takes ownership (free()). */
char *tg_state_skip_join(const struct tg_strlist *skip);

#endif
