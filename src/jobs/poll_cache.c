/*
 * poll_cache.c - the poll multiplexer's answers and their byte budget:
 * each entry holds the vendor's last answer for its job; terminal answers
 * (an export that is ready, an import with processed == total, a
 * simulation completed or failed, its results) are served without upstream
 * calls, others are reused for an interval that grows as the job ages.
 * The bodies held count against one budget (poll.cache_max_bytes): to make
 * room the least recently used answer no request waits on is evicted (its
 * entry asks the vendor again when next polled). A body is shared by
 * reference with the replies written from it.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/buffer.h>

#include "tidegate/clock.h"
#include "tidegate/json.h"
#include "tidegate/map.h"
#include "poll_int.h"

/* A held body is shared with the replies being written from it (by
 * reference, never copied per caller): freed when the answer and every
 * such reply have let go of it. */
struct body_ref {
	size_t refs;
	char data[];
};

char *
jobs_answer_body_new(size_t len)
{
	struct body_ref *b = tg_xmalloc(sizeof(*b) + len + 1);

	b->refs = 1;
	return b->data;
}

static struct body_ref *
body_of(char *data)
{
	return (struct body_ref *)(void *)(data - offsetof(struct body_ref, data));
}

static void
body_unref(char *data)
{
	if (data != NULL && --body_of(data)->refs == 0)
		free(body_of(data));
}

/* evbuffer_add_reference's cleanup: the reply's bytes are written or gone. */
static void
on_body_sent(const void *data, size_t len, void *arg)
{
	body_unref(arg);
}

/* Append a's body to b (borrowed) by reference: shared, never copied. */
void
jobs_answer_body_ref(const struct poll_answer *a, struct evbuffer *b)
{
	if (a->len == 0)
		return;
	body_of(a->body)->refs++;
	evbuffer_add_reference(b, a->body, a->len, on_body_sent, a->body);
}

void
jobs_answer_clear(struct poll_answer *a)
{
	free(a->ctype);
	free(a->retry_after);
	body_unref(a->body);
	jobs_spool_unref(a->spool);
	memset(a, 0, sizeof(*a));
}

/* Forget e's answer, and its bytes when they were counted. */
void
jobs_answer_drop(struct poll_entry *e)
{
	if (e->ans.held) {
		TAILQ_REMOVE(&e->p->lru, e, lru);
		e->p->bytes -= e->ans.len;
	}
	jobs_answer_clear(&e->ans);
}

/* e's answer was just used: the last to be evicted. */
void
jobs_answer_touch(struct poll_entry *e)
{
	if (!e->ans.held)
		return;
	TAILQ_REMOVE(&e->p->lru, e, lru);
	TAILQ_INSERT_TAIL(&e->p->lru, e, lru);
}

/*
 * Evict the least recently used answers no request waits on until need
 * more bytes fit in poll.cache_max_bytes: 1 when they fit. Answers with
 * waiters stay (a long-poll is answered from its entry's answer).
 */
int
jobs_cache_make_room(struct jobs_poll *p, size_t need)
{
	size_t max = (size_t)jobs_cfg(p->gw->rt)->poll_cache_max_bytes;
	struct poll_entry *e, *next;

	if (need > max)
		return 0;
	for (e = TAILQ_FIRST(&p->lru); e != NULL && p->bytes + need > max; e = next) {
		next = TAILQ_NEXT(e, lru);
		if (!TAILQ_EMPTY(&e->waiters))
			continue;
		jobs_answer_drop(e);
		tg_metrics_inc(p->gw->metrics, "tidegate_poll_cache_evictions_total", "", 1);
	}
	return p->bytes + need <= max;
}

/* Count e's answer in the budget, evicting others; 0 when it does not fit. */
int
jobs_answer_hold(struct poll_entry *e)
{
	if (!jobs_cache_make_room(e->p, e->ans.len))
		return 0;
	e->ans.held = 1;
	e->p->bytes += e->ans.len;
	TAILQ_INSERT_TAIL(&e->p->lru, e, lru);
	return 1;
}

static int
json_int(yajl_val v, const char *k, long long *out)
{
	yajl_val x = tg_json_get(v, k);

	if (x == NULL || !YAJL_IS_INTEGER(x))
		return -1;
	*out = YAJL_GET_INTEGER(x);
	return 0;
}

/* Is this answer the job's last word? */
int
jobs_answer_terminal(struct poll_entry *e, int status, const char *body, size_t len)
{
	const char *st;
	long long total, processed;
	yajl_val v;
	int t = 0;

	switch (e->op) {
	case TG_OP_DEX_EXPORT_GET:
		return status == 200;
	case TG_OP_SIM_RESULTS:
		return status == 200;
	case TG_OP_DEX_IMPORT_RESULT:
	case TG_OP_DEX_IMPORT_FAILED:
		return status == 200 && tg_map_get(e->p->imports_done, e->job) != NULL;
	case TG_OP_DEX_IMPORT_STATUS:
	case TG_OP_SIM_STATUS:
		if (status != 200 || (v = tg_json_parse(body, len, NULL)) == NULL)
			return 0;
		if (e->op == TG_OP_SIM_STATUS) {
			st = tg_json_get_str(v, "status");
			t = st && (strcmp(st, "COMPLETED") == 0 || strcmp(st, "FAILED") == 0);
		} else if (json_int(v, "total", &total) == 0 &&
		    json_int(v, "processed", &processed) == 0) {
			t = processed >= total;
			if (t)
				tg_map_put(e->p->imports_done, e->job, (void *)1);
		}
		yajl_tree_free(v);
		return t;
	default:
		return 0;
	}
}

/* Non-terminal answers are reused for an interval that grows with age. */
int64_t
jobs_poll_interval(const struct poll_entry *e)
{
	const struct jobs_cfg *c = jobs_cfg(e->p->gw->rt);
	int64_t age = tg_clock_mono_ms() - e->created, iv = c->poll_interval;

	if (age > c->poll_backoff_after)
		iv += (age - c->poll_backoff_after) * c->poll_interval / c->poll_backoff_after;
	return iv < c->poll_max_interval ? iv : c->poll_max_interval;
}

/* An import's result or failed rows read before its status said it was
 * done: the status has said so since, so the rows read then are partial. */
static int
overtaken(const struct poll_entry *e)
{
	return (e->op == TG_OP_DEX_IMPORT_RESULT || e->op == TG_OP_DEX_IMPORT_FAILED) &&
	    !e->ans.terminal && tg_map_get(e->p->imports_done, e->job) != NULL;
}

int
jobs_answer_fresh(const struct poll_entry *e)
{
	if (e->ans.at == 0 || e->observed != NULL || overtaken(e))
		return 0;	/* none yet, not served before its observers have it, or
				 * partial rows of an import since done */
	return e->ans.terminal || tg_clock_mono_ms() - e->ans.at < jobs_poll_interval(e) ||
	    tg_clock_mono_ms() < e->not_before;
}

/* An answer no wait changes: the vendor's refusal of the read itself (404
 * an unknown or expired id, 400, 401, 403, 410), not a job still running,
 * a vendor error or its 429 and 408, which a long-poll waits through. */
int
jobs_answer_settled(const struct poll_entry *e)
{
	int st = e->ans.status;

	return st >= 400 && st < 500 && st != 408 && st != 429;
}
