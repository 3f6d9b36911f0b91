/*
 * test_worker.c - the worker thread of src/core/worker.c: jobs run off the
 * loop thread and in order, done callbacks run on the loop thread and
 * never before submit returns, cancel skips a queued job and still calls
 * done (cancelled), a done callback may submit the next job, and freeing
 * the worker hands every job still owed its done (cancelled).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>
#include <event2/event.h>

#include "tidegate/worker.h"

#define NJOBS 64

static pthread_t loop_thread;

struct gate {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int open;
	int entered;		/* a job is waiting at the gate */
};

static void
gate_open(struct gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->open = 1;
	pthread_cond_broadcast(&g->cond);
	pthread_mutex_unlock(&g->lock);
}

/* Until a job is held at the gate (it is running). */
static void
gate_wait_entered(struct gate *g)
{
	pthread_mutex_lock(&g->lock);
	while (!g->entered)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
}

static void
gate_wait(struct gate *g)
{
	pthread_mutex_lock(&g->lock);
	g->entered = 1;
	pthread_cond_broadcast(&g->cond);
	while (!g->open)
		pthread_cond_wait(&g->cond, &g->lock);
	pthread_mutex_unlock(&g->lock);
}

struct job {
	int id;
	int ran, done, cancelled;
	pthread_t ran_on, done_on;
	int *order;		/* ids in the order run was called */
	int *norder;
	struct gate *gate;	/* run waits until the test opens it */
	struct tg_worker *w;	/* done submits next when set */
	struct job *next;
};

static void
job_run(void *arg)
{
	struct job *j = arg;

	if (j->gate != NULL)
		gate_wait(j->gate);
	j->ran++;
	j->ran_on = pthread_self();
	if (j->order != NULL)
		j->order[(*j->norder)++] = j->id;
}

static void
job_done(void *arg, int cancelled)
{
	struct job *j = arg;

	j->done++;
	j->cancelled = cancelled;
	j->done_on = pthread_self();
	if (j->w != NULL && j->next != NULL)
		tg_worker_submit(j->w, job_run, job_done, j->next);
}

/* Run the loop until every job of v has had its done, within 10 s. */
static void
loop_until_done(struct event_base *base, struct job *v, size_t n)
{
	struct timeval tick = { 0, 10000 };
	size_t i, left;
	int rounds;

	for (rounds = 0; rounds < 1000; rounds++) {
		for (i = 0, left = 0; i < n; i++)
			left += v[i].done == 0;
		if (left == 0)
			return;
		event_base_loopexit(base, &tick);
		event_base_dispatch(base);
	}
	fail_msg("jobs not done after 10 s");
}

static void
test_jobs_run_off_the_loop_and_complete_on_it(void **state)
{
	struct event_base *base = event_base_new();
	struct tg_err err;
	struct tg_worker *w = tg_worker_new(base, &err);
	struct job v[NJOBS];
	int order[NJOBS], norder = 0, i;

	assert_non_null(w);
	memset(v, 0, sizeof(v));
	for (i = 0; i < NJOBS; i++) {
		v[i].id = i;
		v[i].order = order;
		v[i].norder = &norder;
		assert_non_null(tg_worker_submit(w, job_run, job_done, &v[i]));
		assert_int_equal(v[i].done, 0);		/* never from inside submit */
	}
	assert_int_equal(tg_worker_busy(w), NJOBS);
	loop_until_done(base, v, NJOBS);
	assert_int_equal(tg_worker_busy(w), 0);
	assert_int_equal(norder, NJOBS);
	for (i = 0; i < NJOBS; i++) {
		assert_int_equal(order[i], i);			/* FIFO */
		assert_int_equal(v[i].ran, 1);
		assert_int_equal(v[i].done, 1);
		assert_int_equal(v[i].cancelled, 0);
		assert_false(pthread_equal(v[i].ran_on, loop_thread));
		assert_true(pthread_equal(v[i].done_on, loop_thread));
	}
	tg_worker_free(w);
	event_base_free(base);
}

static void
test_cancel(void **state)
{
	struct gate gate = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
	struct event_base *base = event_base_new();
	struct tg_err err;
	struct tg_worker *w = tg_worker_new(base, &err);
	struct tg_job *running, *queued;
	struct job v[3];

	memset(v, 0, sizeof(v));
	v[0].gate = &gate;		/* holds the thread until the gate opens */
	running = tg_worker_submit(w, job_run, job_done, &v[0]);
	queued = tg_worker_submit(w, job_run, job_done, &v[1]);
	tg_worker_submit(w, job_run, job_done, &v[2]);
	gate_wait_entered(&gate);	/* v[0] is running, v[1] waits behind it */
	tg_worker_cancel(queued);
	tg_worker_cancel(running);	/* its run goes on; its done says cancelled */
	assert_int_equal(v[1].done + v[0].done, 0);	/* never from inside cancel */
	gate_open(&gate);
	loop_until_done(base, v, 3);
	assert_int_equal(v[1].ran, 0);			/* skipped */
	assert_int_equal(v[1].done, 1);
	assert_int_equal(v[1].cancelled, 1);
	assert_int_equal(v[0].ran, 1);
	assert_int_equal(v[0].done, 1);
	assert_int_equal(v[0].cancelled, 1);
	assert_true(pthread_equal(v[0].done_on, loop_thread));
	assert_int_equal(v[2].ran, 1);			/* the rest is unaffected */
	assert_int_equal(v[2].cancelled, 0);
	assert_int_equal(tg_worker_busy(w), 0);
	tg_worker_free(w);
	event_base_free(base);
}

static void
test_done_may_submit_the_next_job(void **state)
{
	struct event_base *base = event_base_new();
	struct tg_err err;
	struct tg_worker *w = tg_worker_new(base, &err);
	struct job v[2];

	memset(v, 0, sizeof(v));
	v[0].w = w;
	v[0].next = &v[1];
	tg_worker_submit(w, job_run, job_done, &v[0]);
	loop_until_done(base, v, 2);
	assert_int_equal(v[0].ran + v[1].ran, 2);
	assert_int_equal(v[1].cancelled, 0);
	assert_int_equal(tg_worker_busy(w), 0);
	tg_worker_free(w);
	event_base_free(base);
}

static void *
open_gate_later(void *arg)
{
	struct timespec ts = { 0, 200 * 1000 * 1000 };

	nanosleep(&ts, NULL);
	gate_open(arg);
	return NULL;
}

/* Jobs still owed their done when the worker goes (a drain that timed
 * out): each gets done, cancelled, so its owner can free what it holds. */
static void
test_free_cancels_what_is_left(void **state)
{
	struct gate gate = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
	struct event_base *base = event_base_new();
	struct tg_err err;
	struct tg_worker *w = tg_worker_new(base, &err);
	struct job v[4];
	pthread_t opener;
	int i;

	memset(v, 0, sizeof(v));
	v[0].gate = &gate;
	for (i = 0; i < 4; i++)
		tg_worker_submit(w, job_run, job_done, &v[i]);
	gate_wait_entered(&gate);	/* v[0] is running */
	/* the gate opens while free waits for the running job */
	pthread_create(&opener, NULL, open_gate_later, &gate);
	tg_worker_free(w);
	pthread_join(opener, NULL);
	assert_int_equal(v[0].ran, 1);
	for (i = 0; i < 4; i++) {
		assert_int_equal(v[i].done, 1);
		assert_int_equal(v[i].cancelled, 1);
		assert_true(pthread_equal(v[i].done_on, loop_thread));
	}
	assert_int_equal(v[3].ran, 0);
	tg_worker_free(NULL);
	event_base_free(base);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_jobs_run_off_the_loop_and_complete_on_it),
		cmocka_unit_test(test_cancel),
		cmocka_unit_test(test_done_may_submit_the_next_job),
		cmocka_unit_test(test_free_cancels_what_is_left),
	};

	loop_thread = pthread_self();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
