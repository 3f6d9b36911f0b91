/*
 * metrics_process.c - the series every Prometheus client library exports
 * about its process, named and computed as they do (process_cpu_seconds_total
 * from utime + stime, memory from /proc/self/stat, open descriptors from
 * /proc/self/fd, their limit from RLIMIT_NOFILE, the start time from the
 * boot time and the process's start in clock ticks), and tidegate_build_info.
 * Rendered by the admin listener's /metrics at scrape time; the build is set
 * once by the entry point (src/tidegate.c).
 */
#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include <event2/buffer.h>

#include "tidegate/metrics.h"

static char build_version[64] = "unknown", build_commit[64] = "unknown";

void
tg_metrics_build_set(const char *version, const char *commit)
{
	if (version != NULL && *version != '\0')
		snprintf(build_version, sizeof(build_version), "%s", version);
	if (commit != NULL && *commit != '\0')
		snprintf(build_commit, sizeof(build_commit), "%s", commit);
}

static void
gauge(struct evbuffer *out, const char *name, const char *type, const char *help, double v)
{
	evbuffer_add_printf(out, "# HELP %s %s\n# TYPE %s %s\n%s %.17g\n", name, help, name,
	    type, name, v);
}

/* Seconds since the epoch at boot, from /proc/stat's btime; 0 when unread. */
static double
boot_time(void)
{
	char line[256];
	unsigned long long bt = 0;
	FILE *f = fopen("/proc/stat", "re");

	if (f == NULL)
		return 0;
	while (fgets(line, sizeof(line), f) != NULL)
		if (sscanf(line, "btime %llu", &bt) == 1)
			break;
	fclose(f);
	return (double)bt;
}

/* Fields 14 (utime), 15 (stime), 22 (starttime), 23 (vsize) and 24 (rss) of
 * /proc/self/stat, read after the command name's closing parenthesis (the
 * name may hold spaces). 0 when read, -1 otherwise. */
static int
read_stat(unsigned long long *ut, unsigned long long *st, unsigned long long *start,
    unsigned long long *vsize, long long *rss)
{
	char buf[1024], *p;
	size_t n;
	FILE *f = fopen("/proc/self/stat", "re");

	if (f == NULL)
		return -1;
	n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = '\0';
	if ((p = strrchr(buf, ')')) == NULL)
		return -1;
	/* state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt */
	return sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d "
	    "%*d %*d %*d %*d %llu %llu %lld", ut, st, start, vsize, rss) == 5 ? 0 : -1;
}

static int
open_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	int n = 0;

	if (d == NULL)
		return 0;
	while ((e = readdir(d)) != NULL)
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

void
tg_metrics_process_render(struct evbuffer *out)
{
	unsigned long long ut, st, start, vsize;
	long long rss;
	double hz = (double)sysconf(_SC_CLK_TCK), page = (double)sysconf(_SC_PAGESIZE);
	struct rlimit rl;

	evbuffer_add_printf(out, "# HELP tidegate_build_info The gateway's version and the "
	    "git commit it was built from (git describe), always 1.\n"
	    "# TYPE tidegate_build_info gauge\n"
	    "tidegate_build_info{version=\"%s\",commit=\"%s\"} 1\n", build_version, build_commit);
	if (read_stat(&ut, &st, &start, &vsize, &rss) == 0) {
		gauge(out, "process_cpu_seconds_total", "counter",
		    "Total user and system CPU time spent in seconds.", (double)(ut + st) / hz);
		gauge(out, "process_resident_memory_bytes", "gauge",
		    "Resident memory size in bytes.", (double)rss * page);
		gauge(out, "process_virtual_memory_bytes", "gauge",
		    "Virtual memory size in bytes.", (double)vsize);
		gauge(out, "process_start_time_seconds", "gauge",
		    "Start time of the process since unix epoch in seconds.",
		    boot_time() + (double)start / hz);
	}
	gauge(out, "process_open_fds", "gauge", "Number of open file descriptors.",
	    open_fds());
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		gauge(out, "process_max_fds", "gauge", "Maximum number of open file descriptors.",
		    (double)rl.rlim_cur);
}
