/*
 * notify.h - tell the service manager where the process is in its life
 * (systemd's sd_notify protocol, Type=notify units): ready once the
 * listeners are bound and start-up is done, reloading during a SIGHUP
 * reload, stopping when a drain begins. Without NOTIFY_SOCKET in the
 * environment (not started by systemd) every call does nothing. Called by
 * src/tidegate.c (ready) and src/gateway/server.c (reload, drain).
 */
#ifndef TIDEGATE_NOTIFY_H
#define TIDEGATE_NOTIFY_H

/** READY=1 with the main pid: start-up done, or a reload over. */
void tg_notify_ready(void);
/** RELOADING=1 with MONOTONIC_USEC (systemd 253's reload protocol; older
 * managers ignore the extra field). READY=1 must follow. */
void tg_notify_reloading(void);
/** STOPPING=1: the drain began; the process exits when it is over. */
void tg_notify_stopping(void);

#endif
