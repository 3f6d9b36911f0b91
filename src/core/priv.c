/*
 * priv.c - becoming the configured account after binding
 * (include/tidegate/priv.h). Called by src/tidegate.c. The effective ids
 * change first (saved uid 0 kept) so that the state the gateway opens
 * before binding is created by, and checked as, the account; the final
 * drop sets all three ids and then proves that root cannot come back.
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "tidegate/priv.h"

int
tg_priv_lookup(const char *user, struct tg_priv *p, struct tg_err *err)
{
	struct passwd *pw;

	errno = 0;
	if ((pw = getpwnam(user)) == NULL) {
		tg_err_set(err, "user: no such user '%s'%s%s", user, errno ? ": " : "",
		    errno ? strerror(errno) : "");
		return -1;
	}
	p->uid = pw->pw_uid;
	p->gid = pw->pw_gid;
	snprintf(p->name, sizeof(p->name), "%s", user);
	return 0;
}

int
tg_priv_begin(const char *user, struct tg_priv *p, int *warn, struct tg_err *err)
{
	memset(p, 0, sizeof(*p));
	*warn = 0;
	if (geteuid() != 0) {	/* a unit's User=, or a user's shell */
		*warn = user != NULL && strcmp(user, "root") != 0 &&
		    (tg_priv_lookup(user, p, err) != 0 || p->uid != geteuid());
		memset(p, 0, sizeof(*p));
		return 0;
	}
	if (user == NULL) {
		tg_err_set(err, "started as root without `user:` in the configuration: set "
		    "user: to the account to run as (user: root keeps root)");
		return -1;
	}
	if (tg_priv_lookup(user, p, err) != 0)
		return -1;
	if (p->uid == 0) {
		*warn = 1;
		return 0;
	}
	if (initgroups(p->name, p->gid) != 0 || setegid(p->gid) != 0 || seteuid(p->uid) != 0) {
		tg_err_set(err, "user: cannot become '%s': %s", user, strerror(errno));
		return -1;
	}
	p->active = 1;
	return 0;
}

int
tg_priv_regain(const struct tg_priv *p, struct tg_err *err)
{
	if (p->active && seteuid(0) != 0) {
		tg_err_set(err, "cannot regain root to bind: %s", strerror(errno));
		return -1;
	}
	return 0;
}

int
tg_priv_drop(const struct tg_priv *p, struct tg_err *err)
{
	if (!p->active)
		return 0;
	if (seteuid(0) != 0 || setresgid(p->gid, p->gid, p->gid) != 0 ||
	    setresuid(p->uid, p->uid, p->uid) != 0) {
		tg_err_set(err, "cannot become '%s': %s", p->name, strerror(errno));
		return -1;
	}
	if (setuid(0) == 0 || seteuid(0) == 0) {
		tg_err_set(err, "root came back after becoming '%s'", p->name);
		return -1;
	}
#if defined(__SANITIZE_ADDRESS__)
	/* LeakSanitizer stops the threads with ptrace, which a process made
	 * undumpable by the change of ids refuses: sanitizer builds only. */
	(void)prctl(PR_SET_DUMPABLE, 1);
#endif
	return 0;
}
