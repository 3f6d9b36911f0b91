/*
 * pidfile.c - the pid file (include/tidegate/pidfile.h). Written once the
 * listeners are bound, removed at exit; a file left by a process that is
 * gone, or whose id now belongs to another program, is taken over, while a
 * live process of the same program holding it refuses the start. Called by
 * src/tidegate.c (the start, the exit, -s).
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tidegate/pidfile.h"

/* The id path holds: > 0; 0 when the file does not exist; -1 with err when
 * it cannot be read, -2 when it holds no id. */
static pid_t
read_pid(const char *path, struct tg_err *err)
{
	char buf[32], *end;
	ssize_t n;
	long v;
	int fd;

	if ((fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC)) < 0) {
		if (errno == ENOENT)
			return 0;
		tg_err_set(err, "pid_file %s: %s", path, strerror(errno));
		return -1;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	buf[n > 0 ? n : 0] = '\0';
	errno = 0;
	v = strtol(buf, &end, 10);
	if (n <= 0 || errno != 0 || end == buf || (*end != '\n' && *end != '\0') || v <= 0 ||
	    v > 0x7fffffff) {
		tg_err_set(err, "pid_file %s: holds no process id", path);
		return -2;
	}
	return (pid_t)v;
}

/* 1 when pid is alive and runs prog (its command name; a kernel without
 * /proc: any live process counts), 0 when gone, -1 alive but another. */
static int
runs(pid_t pid, const char *prog)
{
	char p[64], comm[32];
	FILE *f;
	int got;

	if (kill(pid, 0) != 0 && errno == ESRCH)
		return 0;
	snprintf(p, sizeof(p), "/proc/%ld/comm", (long)pid);
	if ((f = fopen(p, "re")) == NULL)
		return errno == ENOENT && access("/proc/self", F_OK) == 0 ? 0 : 1;
	got = fgets(comm, sizeof(comm), f) != NULL;
	fclose(f);
	if (!got)
		return 0;
	comm[strcspn(comm, "\n")] = '\0';
	return strncmp(comm, prog, 15) == 0 ? 1 : -1;	/* comm: 15 bytes at most */
}

int
tg_pidfile_check(const char *path, const char *prog, struct tg_err *err)
{
	pid_t pid = read_pid(path, err);

	if (pid == -1)		/* unreadable: refused; no id in it: no one's */
		return -1;
	if (pid <= 0 || pid == getpid() || runs(pid, prog) != 1)
		return 0;
	tg_err_set(err, "pid_file %s: process %ld, a running %s, holds it (another instance "
	    "with this configuration? stop it first: tidegate -s stop)", path, (long)pid, prog);
	return -1;
}

int
tg_pidfile_write(const char *path, struct tg_err *err)
{
	char *tmp = tg_xasprintf("%s.%ld.tmp", path, (long)getpid());
	char buf[32];
	int fd, len, ok;

	len = snprintf(buf, sizeof(buf), "%ld\n", (long)getpid());
	/* a name made in advance (a link to another file) is not written through */
	(void)unlink(tmp);
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	ok = fd >= 0 && fchmod(fd, 0644) == 0 && write(fd, buf, (size_t)len) == len;
	if (fd >= 0 && close(fd) != 0)
		ok = 0;
	if (!ok || rename(tmp, path) != 0) {
		tg_err_set(err, "pid_file %s: %s", path, strerror(errno));
		if (fd >= 0)
			(void)unlink(tmp);
		free(tmp);
		return -1;
	}
	free(tmp);
	return 0;
}

int
tg_pidfile_remove(const char *path, struct tg_err *err)
{
	struct tg_err why;

	if (read_pid(path, &why) != getpid())
		return 0;	/* another's now, or gone */
	if (unlink(path) != 0) {
		tg_err_set(err, "pid_file %s: %s", path, strerror(errno));
		return -1;
	}
	return 0;
}

int
tg_pidfile_signal(const char *path, const char *prog, int sig, pid_t *pid,
    struct tg_err *err)
{
	int r;

	if ((*pid = read_pid(path, err)) < 0)
		return -1;
	if (*pid == 0) {
		tg_err_set(err, "pid_file %s: no such file (is %s running, and started with "
		    "this configuration?)", path, prog);
		return -1;
	}
	if ((r = runs(*pid, prog)) != 1) {
		tg_err_set(err, "pid_file %s: process %ld %s (a stale file: nothing was "
		    "signalled)", path, (long)*pid, r == 0 ? "is not running" : "runs another program");
		return -1;
	}
	if (kill(*pid, sig) != 0) {
		tg_err_set(err, "pid_file %s: process %ld: %s", path, (long)*pid, strerror(errno));
		return -1;
	}
	return 0;
}
