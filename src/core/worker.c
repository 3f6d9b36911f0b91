/*
 * worker.c - one thread that runs jobs off the event loop (worker.h). The
 * gateway's validation (src/gateway/validate.c) hands it large bodies to
 * check, so one 20 MB case does not hold up every other request.
 *
 * Jobs go through two lists under one mutex: todo (FIFO, taken by the
 * thread) and finished (taken by the loop). The thread wakes the loop by
 * writing a byte to a pipe whose read end is an ordinary event on the
 * loop's base: libevent is never called from the thread, so the base needs
 * no locking. The loop-side count of jobs not yet delivered (busy) is only
 * touched by the loop.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "tidegate/util.h"
#include "tidegate/worker.h"

struct tg_job {
	struct tg_job *next;
	struct tg_worker *w;
	tg_job_run_fn run;
	tg_job_done_fn done;
	void *arg;
	int cancelled;		/* written by the loop under lock, read by both */
};

struct job_list {
	struct tg_job *head, **tail;
};

struct tg_worker {
	struct event *wake;
	int fds[2];		/* the thread writes [1]; the loop reads [0] */
	pthread_t thread;
	int started;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct job_list todo;	/* under lock */
	struct job_list finished;	/* under lock */
	int stop;		/* under lock */
	size_t busy;		/* loop only */
};

static void
list_init(struct job_list *l)
{
	l->head = NULL;
	l->tail = &l->head;
}

static void
list_push(struct job_list *l, struct tg_job *j)
{
	j->next = NULL;
	*l->tail = j;
	l->tail = &j->next;
}

/* The whole list, leaving it empty. */
static struct tg_job *
list_take(struct job_list *l)
{
	struct tg_job *h = l->head;

	list_init(l);
	return h;
}

/* Under lock. One byte per empty-to-non-empty change is enough: the loop
 * empties the pipe before it takes the list. A full pipe already wakes it. */
static void
wake_loop(struct tg_worker *w, int was_empty)
{
	ssize_t n;

	if (!was_empty)
		return;
	do
		n = write(w->fds[1], "j", 1);
	while (n < 0 && errno == EINTR);
}

static void *
worker_main(void *arg)
{
	struct tg_worker *w = arg;
	struct tg_job *j;
	int skip, was_empty;

	pthread_mutex_lock(&w->lock);
	for (;;) {
		while (w->todo.head == NULL && !w->stop)
			pthread_cond_wait(&w->cond, &w->lock);
		if (w->stop)
			break;
		j = w->todo.head;
		w->todo.head = j->next;
		if (w->todo.head == NULL)
			w->todo.tail = &w->todo.head;
		skip = j->cancelled;
		pthread_mutex_unlock(&w->lock);
		if (!skip)
			j->run(j->arg);
		pthread_mutex_lock(&w->lock);
		was_empty = w->finished.head == NULL;
		list_push(&w->finished, j);
		wake_loop(w, was_empty);
	}
	pthread_mutex_unlock(&w->lock);
	return NULL;
}

/* On the loop: hand each job to its done callback, then free it. A done
 * callback may submit or cancel other jobs; cancelled is read late so a
 * cancel from an earlier callback in the same batch counts. */
static void
deliver(struct tg_worker *w, struct tg_job *list, int cancel_all)
{
	struct tg_job *j;

	while ((j = list) != NULL) {
		list = j->next;
		w->busy--;
		j->done(j->arg, cancel_all || j->cancelled);
		free(j);
	}
}

static void
on_wake(evutil_socket_t fd, short what, void *arg)
{
	struct tg_worker *w = arg;
	struct tg_job *list;
	char buf[64];

	while (read(fd, buf, sizeof(buf)) > 0)
		;
	pthread_mutex_lock(&w->lock);
	list = list_take(&w->finished);
	pthread_mutex_unlock(&w->lock);
	deliver(w, list, 0);
}

/* The thread takes no signals: the loop's signal events stay the only
 * place they are handled. */
static int
start_thread(struct tg_worker *w, struct tg_err *err)
{
	sigset_t all, old;
	int rc;

	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	rc = pthread_create(&w->thread, NULL, worker_main, w);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (rc != 0) {
		tg_err_set(err, "cannot start the worker thread: %s", strerror(rc));
		return -1;
	}
	w->started = 1;
	return 0;
}

struct tg_worker *
tg_worker_new(struct event_base *base, struct tg_err *err)
{
	struct tg_worker *w = tg_xcalloc(1, sizeof(*w));

	w->fds[0] = w->fds[1] = -1;
	list_init(&w->todo);
	list_init(&w->finished);
	pthread_mutex_init(&w->lock, NULL);
	pthread_cond_init(&w->cond, NULL);
	if (pipe2(w->fds, O_NONBLOCK | O_CLOEXEC) != 0) {
		tg_err_set(err, "worker pipe: %s", strerror(errno));
		goto err;
	}
	w->wake = event_new(base, w->fds[0], EV_READ | EV_PERSIST, on_wake, w);
	if (w->wake == NULL || event_add(w->wake, NULL) != 0) {
		tg_err_set(err, "worker wake-up event could not be added");
		goto err;
	}
	return w;	/* the thread starts with the first job: until then the
			 * process stays single-threaded, and glibc skips the
			 * cancellation bookkeeping around every system call */
err:
	tg_worker_free(w);
	return NULL;
}

void
tg_worker_free(struct tg_worker *w)
{
	struct tg_job *fin, *todo;

	if (w == NULL)
		return;
	if (w->started) {
		pthread_mutex_lock(&w->lock);
		w->stop = 1;
		pthread_cond_broadcast(&w->cond);
		pthread_mutex_unlock(&w->lock);
		pthread_join(w->thread, NULL);
	}
	fin = list_take(&w->finished);
	todo = list_take(&w->todo);
	deliver(w, fin, 1);
	deliver(w, todo, 1);
	if (w->wake != NULL)
		event_free(w->wake);
	if (w->fds[0] >= 0)
		close(w->fds[0]);
	if (w->fds[1] >= 0)
		close(w->fds[1]);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->lock);
	free(w);
}

struct tg_job *
tg_worker_submit(struct tg_worker *w, tg_job_run_fn run, tg_job_done_fn done, void *arg)
{
	struct tg_job *j = tg_xcalloc(1, sizeof(*j));
	struct tg_err err;

	j->w = w;
	j->run = run;
	j->done = done;
	j->arg = arg;
	w->busy++;
	if (!w->started && start_thread(w, &err) != 0) {
		/* no thread to be had: run it here, still answered from the loop */
		j->run(j->arg);
		list_push(&w->finished, j);
		wake_loop(w, 1);
		return j;
	}
	pthread_mutex_lock(&w->lock);
	list_push(&w->todo, j);
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
	return j;
}

/* The lock pairs with the thread's read of cancelled before run. */
void
tg_worker_cancel(struct tg_job *j)
{
	pthread_mutex_lock(&j->w->lock);
	j->cancelled = 1;
	pthread_mutex_unlock(&j->w->lock);
}

size_t
tg_worker_busy(const struct tg_worker *w)
{
	return w == NULL ? 0 : w->busy;
}
