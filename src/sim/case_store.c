/*
 * case_store.c - the partial cases the gateway served, by case id, so a
 * later submission of that case can be diffed against what the caller was
 * given (tg_case_check). Filled by the case handler when a case passes
 * through, read by the submit handler.
 *
 * Bounded: when full, the least recently used case (put or fetched) is
 * dropped, so a case an analyst keeps submitting variants of stays while
 * cases looked at once age out. A dropped case only costs the diff: the
 * submission is still checked for structure and case type.
 *
 * A check that runs off the event loop (src/gateway/validate.c) holds a
 * struct tg_case_ref: the tree stays valid, and is never changed, until the
 * reference is released, even if the store drops or replaces the case
 * meanwhile. Counts are only touched on the loop thread; the trees are only
 * read, so the worker may read one while the loop reads it too.
 */
#include <stdlib.h>

#include "tidegate/map.h"
#include "tidegate/sim.h"

#define DEFAULT_MAX 256

struct tg_case_ref {
	yajl_val tree;
	size_t refs;			/* the store's entry, and each holder */
};

struct entry {
	char *id;
	struct tg_case_ref *shared;
	struct entry *prev, *next;	/* most recently used first */
};

struct tg_case_store {
	struct tg_map *by_id;		/* id -> struct entry (owned) */
	struct entry *head, *tail;
	size_t max;
};

void
tg_case_ref_release(struct tg_case_ref *ref)
{
	if (ref == NULL || --ref->refs > 0)
		return;
	yajl_tree_free(ref->tree);
	free(ref);
}

yajl_val
tg_case_ref_tree(const struct tg_case_ref *ref)
{
	return ref == NULL ? NULL : ref->tree;
}

static void
entry_free(void *p)
{
	struct entry *e = p;

	tg_case_ref_release(e->shared);
	free(e->id);
	free(e);
}

static void
unlink_entry(struct tg_case_store *cs, struct entry *e)
{
	if (e->prev != NULL)
		e->prev->next = e->next;
	else
		cs->head = e->next;
	if (e->next != NULL)
		e->next->prev = e->prev;
	else
		cs->tail = e->prev;
	e->prev = e->next = NULL;
}

static void
push_front(struct tg_case_store *cs, struct entry *e)
{
	e->next = cs->head;
	if (cs->head != NULL)
		cs->head->prev = e;
	cs->head = e;
	if (cs->tail == NULL)
		cs->tail = e;
}

/* max_cases 0: a default of 256. */
struct tg_case_store *
tg_case_store_new(size_t max_cases)
{
	struct tg_case_store *cs = tg_xcalloc(1, sizeof(*cs));

	cs->by_id = tg_map_new(entry_free);
	cs->max = max_cases ? max_cases : DEFAULT_MAX;
	return cs;
}

void
tg_case_store_free(struct tg_case_store *cs)
{
	if (cs == NULL)
		return;
	tg_map_free(cs->by_id);
	free(cs);
}

/* A NULL tree forgets the case; putting the stored tree again only touches it. */
void
tg_case_store_put(struct tg_case_store *cs, const char *case_id, yajl_val tree)
{
	struct entry *e;

	if (cs == NULL || case_id == NULL) {
		yajl_tree_free(tree);
		return;
	}
	if ((e = tg_map_get(cs->by_id, case_id)) != NULL) {
		unlink_entry(cs, e);
		if (tree != NULL && tree == e->shared->tree) {
			push_front(cs, e);
			return;
		}
		tg_map_del(cs->by_id, case_id);
	}
	if (tree == NULL)
		return;
	while (tg_map_count(cs->by_id) >= cs->max && cs->tail != NULL) {
		e = cs->tail;
		unlink_entry(cs, e);
		tg_map_del(cs->by_id, e->id);
	}
	e = tg_xcalloc(1, sizeof(*e));
	e->id = tg_xstrdup(case_id);
	e->shared = tg_xcalloc(1, sizeof(*e->shared));
	e->shared->tree = tree;
	e->shared->refs = 1;
	push_front(cs, e);
	tg_map_put(cs->by_id, case_id, e);
}

static struct entry *
touch(struct tg_case_store *cs, const char *case_id)
{
	struct entry *e;

	if (cs == NULL || case_id == NULL || (e = tg_map_get(cs->by_id, case_id)) == NULL)
		return NULL;
	unlink_entry(cs, e);
	push_front(cs, e);
	return e;
}

yajl_val
tg_case_store_get(struct tg_case_store *cs, const char *case_id)
{
	struct entry *e = touch(cs, case_id);

	return e == NULL ? NULL : e->shared->tree;
}

struct tg_case_ref *
tg_case_store_ref(struct tg_case_store *cs, const char *case_id)
{
	struct entry *e = touch(cs, case_id);

	if (e == NULL)
		return NULL;
	e->shared->refs++;
	return e->shared;
}
