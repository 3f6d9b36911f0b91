/*
 * worker.h - run a function off the event loop, then be called back on it.
 *
 * One worker thread takes jobs from a FIFO queue. A job's run function is
 * called on the worker thread; its done function is then called on the
 * loop thread, woken through a pipe (the worker only writes a byte to it:
 * it never touches the event base, an event, a bufferevent or an HTTP
 * object). Used by the gateway to check large request bodies
 * (src/gateway/validate.c) while the loop keeps serving.
 *
 * What run reads must not change while it runs: the caller hands the job
 * its own copies (or references the loop holds still), and takes the
 * results back in done. All functions here are for the loop thread.
 */
#ifndef TIDEGATE_WORKER_H
#define TIDEGATE_WORKER_H

#include <stddef.h>

#include "tidegate/util.h"

struct event_base;
struct tg_worker;
struct tg_job;

/** Called on the worker thread with the job's arg (borrowed). */
typedef void (*tg_job_run_fn)(void *arg);
/**
 * Called once per job on the loop thread: after run returned (cancelled 0),
 * or with cancelled 1 when the job was cancelled (run may or may not have
 * been called) or the worker is being freed. The usual place to free arg.
 */
typedef void (*tg_job_done_fn)(void *arg, int cancelled);

/**
 * New worker, owned by the caller: tg_worker_free(). base is borrowed and
 * must outlive the worker. The thread starts with the first job.
 */
struct tg_worker *tg_worker_new(struct event_base *base, struct tg_err *err);
/**
 * Stop: waits for the job running now, then calls done (cancelled 1) for
 * every job whose done has not run, and joins the thread. NULL-safe. Not
 * from inside a done callback.
 */
void tg_worker_free(struct tg_worker *w);	/* takes ownership of w */
/**
 * Queue run(arg) and, later on the loop, done(arg, cancelled). arg is
 * borrowed (the job never frees it; done does); w is borrowed. Returns a
 * handle owned by the worker (borrowed, freed right after done returns):
 * never calls done before returning.
 */
struct tg_job *tg_worker_submit(struct tg_worker *w, tg_job_run_fn run, tg_job_done_fn done,
    void *arg);
/**
 * The job's requester is gone (borrowed handle, before its done ran): run
 * is skipped if it has not started, and done is called with cancelled 1
 * from the loop later, never from inside this call.
 */
void tg_worker_cancel(struct tg_job *j);
/** Jobs submitted whose done has not run yet (a drain waits for 0); w is
 * borrowed, NULL gives 0. */
size_t tg_worker_busy(const struct tg_worker *w);

#endif
