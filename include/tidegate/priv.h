/*
 * priv.h - the account a process started as root runs as (the gateway's
 * `user` key), as nginx and HAProxy do it: the listeners are bound as
 * root, then the process becomes the user for good before it serves.
 *
 * The gateway opens its state (SQLite files, spool and payload
 * directories) before it binds its listeners, so in between it runs with
 * the user's effective ids and root only as its saved set-user-ID: every
 * file it creates is the user's, and checked as the user's. Called by
 * src/tidegate.c only: tg_priv_begin at start, tg_priv_regain just before
 * binding, tg_priv_drop just after.
 */
#ifndef TIDEGATE_PRIV_H
#define TIDEGATE_PRIV_H

#include <sys/types.h>

#include "tidegate/util.h"

struct tg_priv {
	int active;		/* 1: started as root, to become uid/gid */
	uid_t uid;
	gid_t gid;
	char name[64];
};

/** The account user names (borrowed) into p (borrowed: uid, gid, name;
 * not made active): 0, or -1 with err when there is no such account. */
int tg_priv_lookup(const char *user, struct tg_priv *p, struct tg_err *err);
/**
 * Decide what the start means for `user` (borrowed, as are p and warn:
 * filled; NULL when the key is
 * unset). Not root: nothing to do (0; *warn set when the user asked for
 * is not the one running, and not "root"). Root and no user: -1, err says to set one. Root and "root": 0,
 * *warn set (the process keeps every privilege). Root and another
 * account: supplementary groups, effective gid and uid become the
 * account's (p->active 1). An unknown account: -1.
 */
int tg_priv_begin(const char *user, struct tg_priv *p, int *warn, struct tg_err *err);
/** Effective uid 0 again, to bind (nothing when !p->active; p borrowed). */
int tg_priv_regain(const struct tg_priv *p, struct tg_err *err);
/** Real, effective and saved ids become the account's for good, checked
 * (nothing when !p->active; p borrowed). */
int tg_priv_drop(const struct tg_priv *p, struct tg_err *err);

#endif
