/*
 * poll_int.h - the poll multiplexer's own contract, between its files:
 * the entries and the requests' way in (poll.c), the answers held and
 * their byte budget (poll_cache.c), the callers waiting and long-polls
 * (poll_wait.c), and the one vendor GET per entry, shared with a fleet
 * (poll_fetch.c). Private to src/jobs; the feature sees jobs_int.h.
 * Dependencies go one way: poll.c -> poll_fetch.c -> poll_wait.c ->
 * poll_cache.c.
 */
#ifndef TIDEGATE_POLL_INT_H
#define TIDEGATE_POLL_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include <event2/util.h>

#include "jobs_int.h"

struct evbuffer;
struct evkeyvalq;
struct tg_map;
struct tg_state_watch;

struct poll_answer {
	int status;
	char *ctype, *retry_after;
	char *body;
	size_t len;
	int64_t at;		/* monotonic ms; 0 when none */
	int terminal;
	int held;		/* counted in the budget, on the LRU list */
	struct jobs_spool *spool;	/* a final answer too large for memory (spool.c) */
};

struct poll_entry {
	char *key;
	struct jobs_poll *p;
	int service;		/* GW_DEX / GW_SIM: the runtime is looked up at fetch time */
	enum tg_op op;
	char *uri;		/* upstream path and query */
	char *bearer;		/* the caller's own token in caller-token mode, else NULL */
	char *job;		/* correlationId or simulation id */
	struct poll_answer ans;
	int64_t created, not_before, used;	/* monotonic ms */
	struct gw_vcall *call;	/* the fetch in flight (it holds the runtime) */
	struct tg_state_op *lead_op;	/* asking the state seam who polls (lead()) */
	int leading;		/* this instance leads the key in the fleet: publish or release */
	struct gw_observed *observed;	/* observers still hold the new answer */
	struct evbuffer *fbuf;	/* the answer in flight, up to cache_max_body */
	int f_status;
	int f_ra;		/* the fetch's Retry-After when every origin is out */
	const struct evkeyvalq *f_hdr;	/* borrowed from on_f_head to on_f_done */
	struct jobs_spool *writing;	/* the answer in flight, spooled */
	int passthrough;
	TAILQ_HEAD(, jobs_req) waiters;
	struct event *timer;	/* next poll for long-poll waiters */
	TAILQ_ENTRY(poll_entry) lru;	/* while ans.held */
};

struct jobs_poll {
	struct gw *gw;
	struct tg_map *entries;		/* key -> struct poll_entry */
	struct tg_map *imports_done;	/* correlationId -> (void *)1 */
	struct event *sweep;
	TAILQ_HEAD(, poll_entry) lru;	/* held answers, least recently used first */
	size_t bytes;			/* body bytes of the held answers */
	struct jobs_spool_stats spool;	/* spool files, all entries */
	struct tg_state *fleet;		/* gw->state when shared by a fleet, else NULL */
	struct tg_state_watch *watch;	/* the other instances' publishes */
};

/* A fetch (or the question who makes it) is under way. */
static inline int
poll_busy(const struct poll_entry *e)
{
	return e->call != NULL || e->lead_op != NULL || e->observed != NULL;
}

/* Waiters are the jobs_req slots of their requests. */
#define WAITER(r)	jobs_req_of(r)

/* poll_cache.c: the answers held, each entry's one, within one byte
 * budget; e and p borrowed. */
/** A body of len bytes (and a NUL) that replies share by reference;
 * owned by the answer it is stored in (jobs_answer_clear). */
char *jobs_answer_body_new(size_t len);
/** Append a's body (borrowed) to b (borrowed) by reference. */
void jobs_answer_body_ref(const struct poll_answer *a, struct evbuffer *b);
/** Free what a (borrowed) holds and zero it (not counted: see _drop). */
void jobs_answer_clear(struct poll_answer *a);
/** Forget e's answer, and its bytes when they were counted. */
void jobs_answer_drop(struct poll_entry *e);
/** e's answer was just used: the last to be evicted. */
void jobs_answer_touch(struct poll_entry *e);
/** Evict answers no request waits on until need more bytes fit: 1 when they do. */
int jobs_cache_make_room(struct jobs_poll *p, size_t need);
/** Count e's answer in the budget, evicting others; 0 when it does not fit. */
int jobs_answer_hold(struct poll_entry *e);
/** Is status and body (borrowed) the job's last word? (an import's done
 * status is remembered for its result and failed rows) */
int jobs_answer_terminal(struct poll_entry *e, int status, const char *body, size_t len);
/** How long a non-terminal answer of e is reused: grows with e's age. */
int64_t jobs_poll_interval(const struct poll_entry *e);
/** e's answer may be served without asking the vendor. */
int jobs_answer_fresh(const struct poll_entry *e);
/** e's answer is one no wait changes (the vendor refused the read itself). */
int jobs_answer_settled(const struct poll_entry *e);

/* poll_wait.c: the callers waiting on an entry (their jobs_req slots),
 * long-polls and their deadlines; e, r and p borrowed. */
/** The first request waiting on e, or NULL. */
struct gw_req *jobs_waiter_first(struct poll_entry *e);
/** r stops waiting (if it does). */
void jobs_waiter_remove(struct gw_req *r);
/** Answer r with a (borrowed), how (static) its X-Tidegate-Poll and served. */
void jobs_waiter_reply(struct gw_req *r, const struct poll_answer *a, const char *how);
/** r waits on e, for wait_ms (0: until the next answer; a long-poll else). */
void jobs_waiter_add(struct poll_entry *e, struct gw_req *r, int64_t wait_ms);
/** A new answer: terminal and settled ones and plain polls are answered. */
void jobs_waiters_wake(struct poll_entry *e);
/** Every waiter gets the error status, code and msg (borrowed), with
 * Retry-After retry_after when above 0. */
void jobs_waiters_fail(struct poll_entry *e, int status, const char *code, const char *msg,
    int retry_after);
/** The answer is too large to share: every waiter goes to the vendor itself. */
void jobs_waiters_proxy(struct poll_entry *e);
/** An answer the budget has no room for: every waiter gets it, then it is dropped. */
void jobs_waiters_serve_unkept(struct poll_entry *e);

/* poll_fetch.c: the vendor's GET for an entry, or the fleet's answer. */
/** Ask for e's answer: this instance fetches, or in a fleet the leader's
 * answer is followed. */
void jobs_poll_lead(struct poll_entry *e);
/** As jobs_poll_lead, knowing whether the owner lookup took the lead
 * (led) of key (taken; NULL or another key: jobs_poll_lead). */
void jobs_poll_lead_as(struct poll_entry *e, char *key, int led);
/** Arm e's timer for its next poll while long-polls wait on it. */
void jobs_poll_schedule(struct poll_entry *e);
/** e's fetch ended with no answer to share: give the fleet's lead up. */
void jobs_poll_unlead(struct poll_entry *e);
/** e's timer (arg: e, borrowed): its next poll. */
void jobs_poll_on_timer(evutil_socket_t fd, short what, void *arg);
/** The state's "poll" watch (arg: the multiplexer, borrowed): another
 * instance published an answer for key (borrowed; NULL: perhaps any). */
void jobs_poll_on_wake(const char *topic, const char *key, void *arg);

#endif
