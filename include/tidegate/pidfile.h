/*
 * pidfile.h - the pid file of a process started without a service manager
 * (pid_file: nginx's and HAProxy's), so `tidegate -s reload|stop` signals
 * that process and no other gateway on the host. Linux: a live process is
 * known for the program it runs by /proc/<pid>/comm.
 */
#ifndef TIDEGATE_PIDFILE_H
#define TIDEGATE_PIDFILE_H

#include <sys/types.h>

#include "tidegate/util.h"

/**
 * Whether path (borrowed) may be taken by this process: 0 when it does not
 * exist, names no process, a process gone, this one, or a process that
 * does not run prog (borrowed, e.g. "tidegate": a pid reused since); -1
 * with err naming the file and the process when a live prog holds it (a
 * second instance with the same configuration), or when it cannot be read.
 */
int tg_pidfile_check(const char *path, const char *prog, struct tg_err *err);
/** Write this process's id to path (borrowed), mode 0644, atomically (a
 * file beside it renamed over it): 0, or -1 with err. */
int tg_pidfile_write(const char *path, struct tg_err *err);
/** Remove path (borrowed) if it still names this process: 0, or -1 with
 * err (e.g. the directory is not writable by the account it runs as). */
int tg_pidfile_remove(const char *path, struct tg_err *err);
/**
 * Send sig to the live prog (borrowed) whose id path (borrowed) holds, its
 * id into *pid: 0, or -1 with err naming the file: missing or unreadable,
 * no process id in it, the process gone, or it is not prog.
 */
int tg_pidfile_signal(const char *path, const char *prog, int sig, pid_t *pid,
    struct tg_err *err);

#endif
