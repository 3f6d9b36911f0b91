/*
 * seam.h - the opened state (struct tg_state) as the domains see it
 * (private to src/state/): the backend and its handle, the watches of
 * wake-ups, and what the domains keep per state: ownership's bounds, and
 * what one instance keeps in memory (vendor tokens) or counts (leads
 * held, wake-ups sent). state.c opens and closes it; domains submit
 * queries to it through db.h.
 */
#ifndef TG_STATE_SEAM_H
#define TG_STATE_SEAM_H

#include <sys/queue.h>

#include "tidegate/map.h"
#include "tidegate/state.h"
#include "backend.h"
#include "outbox_rules.h"
#include "run_rules.h"

struct tg_state_watch;

#define TG_SPOOL_KEPT	4	/* payload copies an instance keeps for retries */
struct tg_db_replay;

struct tg_state {
	const struct tg_state_backend *be;
	void *impl;
	TAILQ_HEAD(, tg_state_watch) watches;
	struct tg_state_watch *cursor;	/* the next watch a wake-up reaches */
	int64_t timeout_ms;		/* every operation's deadline */
	struct event_base *base;	/* the loop (borrowed): replay.c's timers */
	TAILQ_HEAD(, tg_db_replay) replays;	/* writes whose outcome is being
						 * made known (replay.c) */
	int closing;
	char *instance;			/* this instance's name (tokens, leads) */
	/* ownership (owners.c) */
	int64_t owners_keep_ms;
	long long owners_max_rows;
	/* the run registry (runs.c, runs_keep.c) */
	struct tg_state_runs_limits runs;
	/* quota.c: the last day whose first take pruned older days' counts */
	int64_t quota_day_pruned;
	/* shared.c */
	struct tg_map *tokens;		/* one instance: service -> its token */
	struct tg_map *leads;		/* a fleet: keys led -> until (mono ms) */
	unsigned long long notifies;	/* wake-ups sent */
	/* the webhook outbox (outbox.c, outbox_admin.c, payload.c) */
	int outbox;			/* configured */
	struct tg_state_rules rules;	/* its schedule and lease length */
	struct tg_outbox_stats ctr;	/* this instance's counters since open */
	char *spool;			/* where leased payloads are spooled */
	struct tg_spool_kept {		/* payloads spooled, kept for a later
					 * attempt here (payload_rows.c) */
		char id[TG_WEBHOOK_ID_LEN];
		char ptoken[33];	/* the committed writer's */
		int64_t size;
		int fd;			/* 0: none */
		uint64_t used;		/* the last fetch that used it */
	} kept[TG_SPOOL_KEPT];
	uint64_t kept_uses;
};

/** shared.c: set up and free what it keeps in st (borrowed). */
void tg_state_shared_init(struct tg_state *st);
void tg_state_shared_free(struct tg_state *st);
/** outbox.c: set up (o borrowed; NULL: no outbox) and free what the
 * outbox keeps in st (borrowed). */
void tg_state_outbox_init(struct tg_state *st, const struct tg_outbox_opts *o);
void tg_state_outbox_free(struct tg_state *st);
/** Leads st (borrowed) holds now. */
size_t tg_state_shared_leads(const struct tg_state *st);
/** st (borrowed) leads key (borrowed, copied) until mono ms (0: no longer). */
void tg_state_lead_held(struct tg_state *st, const char *key, int64_t until);

#endif
