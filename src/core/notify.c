/*
 * notify.c - the sd_notify messages of a Type=notify service
 * (include/tidegate/notify.h), through libsystemd. sd_notify itself does
 * nothing without NOTIFY_SOCKET; the environment is kept (unset_environment
 * 0) because a reload sends again. Failures are not the gateway's business:
 * a manager that does not listen only makes the start time out. A build
 * without libsystemd (-Dsystemd=disabled) sends nothing: run it as
 * Type=exec (tidegate --version says which it is).
 */
#include <time.h>

#include "tidegate/notify.h"

#if TG_HAVE_SYSTEMD
#include <systemd/sd-daemon.h>

void
tg_notify_ready(void)
{
	(void)sd_notify(0, "READY=1\nSTATUS=serving");
}

void
tg_notify_reloading(void)
{
	struct timespec ts;
	unsigned long long usec;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	usec = (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000;
	(void)sd_notifyf(0, "RELOADING=1\nMONOTONIC_USEC=%llu\nSTATUS=reloading", usec);
}

void
tg_notify_stopping(void)
{
	(void)sd_notify(0, "STOPPING=1\nSTATUS=draining");
}
#else
void
tg_notify_ready(void)
{
}

void
tg_notify_reloading(void)
{
}

void
tg_notify_stopping(void)
{
}
#endif
