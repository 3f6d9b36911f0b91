/*
 * tidegate.c - the gateway's entry point: options, configuration check
 * (-t: the configuration, the account and the state, read-only, checked
 * by the functions the start runs, with the same lines printed), logging,
 * the embedded emulator (upstream: embedded), the gateway's request core
 * and the features it serves (jobs, webhook, runs), the event loop.
 * SIGHUP reloads, SIGTERM/SIGINT drain and exit 0 (src/gateway/server.c).
 * Started as root, it binds the listeners and becomes the configured
 * `user` before it serves (include/tidegate/priv.h);
 * a Type=notify unit hears READY=1 once it serves (tidegate.service).
 */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "tidegate/emulator.h"
#include "tidegate/gateway.h"
#include "tidegate/http.h"
#include "tidegate/jobs.h"
#include "tidegate/limits.h"
#include "tidegate/log.h"
#include "tidegate/notify.h"
#include "tidegate/pidfile.h"
#include "tidegate/priv.h"
#include "tidegate/runs.h"
#include "tidegate/state.h"
#include "tidegate/webhook.h"
#include "tidegate/metrics.h"
#include "version.h"

/* --help on stdout (exit 0), a wrong option on stderr (exit 2). */
static void
usage(FILE *out, int rc)
{
	fputs("usage: tidegate [-t | -T | -s reload|stop] [-c FILE] | -K | -h | -V\n"
	    "  -c, --config FILE  configuration (default conf/tidegate.yaml)\n"
	    "  -t, --test         check the configuration, print \"configuration OK\", exit\n"
	    "  -T, --test-print   check it, then print the effective configuration (every\n"
	    "                     key, defaults included; secrets redacted) as YAML, exit\n"
	    "  -s, --signal SIG   reload or stop the gateway named by the configuration's\n"
	    "                     pid_file (SIGHUP, SIGTERM)\n"
	    "  -K, --keys         print every configuration key as a Markdown table\n"
	    "  -h, --help         print this help\n"
	    "  -V, -v, --version  print the version\n"
	    "SIGHUP reloads the configuration; SIGTERM drains and exits 0. Manual: tidegate(8),\n"
	    "tidegate.yaml(5).\n", out);
	exit(rc);
}

/* What the build has: a fleet needs postgresql, Type=notify systemd. */
static const char *const features = TG_HAVE_PQ && TG_HAVE_SYSTEMD ?
    "sqlite +postgresql +systemd" : TG_HAVE_PQ ? "sqlite +postgresql -systemd" :
    TG_HAVE_SYSTEMD ? "sqlite -postgresql +systemd" : "sqlite -postgresql -systemd";

static void
version(void)
{
	printf("tidegate %s%s%s%s\n", TG_VERSION, TG_VERSION_GIT[0] ? " (git " : "",
	    TG_VERSION_GIT, TG_VERSION_GIT[0] ? ")" : "");
	printf("features: %s\n", features);
	exit(0);
}

/* The log's first line, whatever log_level (but off) says: what runs, built
 * with what, from which file, as nginx's "starting" notice. */
static void
log_start(const char *path, int lvl)
{
	tg_log_init(stderr, lvl == TG_LOG_OFF ? TG_LOG_OFF : TG_LOG_INFO);
	tg_log(TG_LOG_INFO, "starting", TG_LS("version", TG_VERSION),
	    TG_LS("git", TG_VERSION_GIT[0] ? TG_VERSION_GIT : NULL),
	    TG_LS("features", features), TG_LS("config", path), TG_LI("pid", getpid()));
	tg_log_set_level((enum tg_log_level)lvl);
}

/* The features' configurations, before any is loaded or listed (-K): their
 * keys follow the core's in this order. */
static void
define_configs(void)
{
	(void)gw_config_define(&tg_jobs_config);
	(void)gw_config_define(&tg_webhook_config);
	(void)gw_config_define(&tg_runs_config);
	(void)gw_config_define(&tg_limits_config);
}

/* Options: -c sets *path, -t *test (1; -T: 2), -s *sig; -K, -h and -V
 * answer and exit. */
static void
parse_options(int argc, char **argv, const char **path, int *test, const char **sig)
{
	static const struct option longs[] = {
		{ "config", required_argument, NULL, 'c' }, { "test", no_argument, NULL, 't' },
		{ "test-print", no_argument, NULL, 'T' }, { "signal", required_argument, NULL, 's' },
		{ "keys", no_argument, NULL, 'K' }, { "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' }, { NULL, 0, NULL, 0 }
	};
	int ch;

	while ((ch = getopt_long(argc, argv, "tTs:c:KhVv", longs, NULL)) != -1) {
		if (ch == 'K') {
			gw_config_doc(stdout);
			exit(0);
		}
		if (ch == 't' || ch == 'T')
			*test = ch == 't' ? 1 : 2;
		else if (ch == 's' && (strcmp(optarg, "reload") == 0 || strcmp(optarg, "stop") == 0))
			*sig = optarg;
		else if (ch == 'c')
			*path = optarg;
		else if (ch == 'h')
			usage(stdout, 0);
		else if (ch == 'V' || ch == 'v')
			version();
		else
			usage(stderr, 2);
	}
	if (optind < argc || (*sig != NULL && *test))
		usage(stderr, 2);
}

/* Every problem, one "file:line:col: key: message" a line; then rep is
 * emptied. 0 when there was none. */
static int
print_report(const char *path, struct tg_cfg_report *rep)
{
	int rc = rep->n > 0 ? -1 : 0;
	size_t i;

	for (i = 0; i < rep->n; i++)
		fprintf(stderr, "%s\n", rep->v[i].msg);
	if (rep->dropped > 0)
		fprintf(stderr, "%s: %zu more problems not shown\n", path, rep->dropped);
	tg_config_report_cleanup(rep);
	return rc;
}

/*
 * -s reload|stop: SIGHUP or SIGTERM to the process the configuration's
 * pid_file names, and no other (a shared host runs several gateways). A
 * file a reload would refuse is reported and nothing is sent; a stop only
 * needs pid_file to be readable.
 */
static int
signal_cmd(const char *path, const char *what)
{
	int sig = strcmp(what, "reload") == 0 ? SIGHUP : SIGTERM, rc = 1;
	struct tg_cfg_report rep = { 0 };
	struct gw_config cfg;
	struct tg_err err;
	pid_t pid;

	if (gw_config_load(path, &cfg, &rep) != 0 && (sig == SIGHUP || cfg.pid_file == NULL)) {
		(void)print_report(path, &rep);
		fprintf(stderr, "tidegate: %s: %s not sent\n", path, what);
	} else if (cfg.pid_file == NULL) {
		fprintf(stderr, "tidegate: %s sets no pid_file: nothing to signal (set pid_file, "
		    "or signal the process yourself: systemctl %s tidegate)\n", path, what);
	} else if (tg_pidfile_signal(cfg.pid_file, "tidegate", sig, &pid, &err) != 0) {
		fprintf(stderr, "tidegate: %s\n", err.msg);
	} else {
		rc = 0;
	}
	tg_config_report_cleanup(&rep);
	gw_config_free(&cfg);
	return rc;
}

/* The embedded emulator's file: relative to the gateway's (malloc'd). */
static char *
emulator_path(const struct gw_config *c)
{
	char *dir = tg_xstrdup(c->path), *path;

	path = c->emulator_config[0] == '/' ? tg_xstrdup(c->emulator_config) :
	    tg_xasprintf("%s/%s", dirname(dir), c->emulator_config);
	free(dir);
	return path;
}

/* The embedded emulator binds its listeners first: a gateway listener on
 * one of their ports would fail the start. */
static void
check_emulator_ports(const struct gw_config *c, const struct tg_emu_config *e,
    struct tg_cfg_report *rep)
{
	const char *ours[3] = { c->listen_dex, c->listen_sim, c->listen_admin };
	const char *keys[3] = { "listen.dex", "listen.sim", "listen.admin" };
	const char *theirs[5] = { e->listen_dex, e->listen_sim, e->listen_design, e->listen_auth,
		e->listen_dex_tls };
	const char *names[5] = { "dex", "sim", "design", "auth", "dex_tls" };
	int i, j;

	for (i = 0; i < 3; i++)
		for (j = 0; j < 5; j++)
			if (tg_config_addr_conflict(ours[i], theirs[j])) {
				tg_config_report_add(rep, NULL, keys[i], "%s overlaps the embedded "
				    "emulator's listen.%s (%s): each listener needs its own port",
				    ours[i], names[j], theirs[j]);
				break;
			}
}

/* upstream: embedded loads this file at start: load it here the same way,
 * its own problems reported with its own file:line:col. */
static void
check_emulator(struct gw_config *c, struct tg_cfg_report *rep)
{
	struct tg_cfg_report sub = { 0 };
	struct tg_emu_config ecfg;
	char *full;
	size_t i;

	if (c->upstream == NULL || strcmp(c->upstream, "embedded") != 0)
		return;
	full = emulator_path(c);
	if (access(full, R_OK) != 0) {
		tg_config_report_add(rep, tg_config_report_pos(rep, "emulator_config", &i, &i) ?
		    "upstream" : NULL, "emulator_config", "cannot read %s: %s (needed by "
		    "upstream: embedded)", full, strerror(errno));
		free(full);
		return;
	}
	memset(&ecfg, 0, sizeof(ecfg));
	sub.file = full;
	if (tg_config_load_report(full, tg_emu_config_keys, tg_emu_config_nkeys, &ecfg,
	    &sub) == 0)
		check_emulator_ports(c, &ecfg, rep);
	tg_config_report_merge(rep, &sub);
	tg_config_report_cleanup(&sub);
	tg_config_free(tg_emu_config_keys, tg_emu_config_nkeys, &ecfg);
	free(full);
}

/* upstream: embedded runs the emulator on the gateway's event base; its
 * config path is relative to the gateway's config file. ecfg is filled
 * even on failure (tg_config_free is NULL-safe on it). */
static struct tg_emu *
start_emulator(struct event_base *base, const struct gw_config *c,
    struct tg_emu_config *ecfg, struct tg_err *err)
{
	char *path = emulator_path(c);
	struct tg_emu *emu = NULL;

	if (tg_config_load(path, tg_emu_config_keys, tg_emu_config_nkeys, ecfg, err) == 0)
		emu = tg_emu_new(base, ecfg, err);
	free(path);
	return emu;
}

/* What the state seam is opened with: every store the features keep (each
 * feature says how its store is configured). so borrows the others. */
struct state_opts {
	struct tg_state_opts so;
	struct tg_runs_opts ro;
	struct tg_outbox_opts oo;
	struct tg_owners_opts wo;
};

static void
state_opts(const struct gw_config *c, struct state_opts *o)
{
	tg_runs_store_opts(c, &o->ro);
	tg_webhook_outbox_opts(c, &o->oo);
	tg_jobs_owners_opts(c, &o->wo);
	o->so = (struct tg_state_opts){ c->state_url, &o->ro, &o->oo, &o->wo,
		c->state_instance, c->state_timeout, c->state_listen_url, c->state_pooler_mode };
}

static struct tg_state *
open_state(struct event_base *base, const struct gw_config *c, struct tg_err *err)
{
	struct state_opts o;

	state_opts(c, &o);
	return tg_state_open(base, &o.so, err);
}

/* The state the start would open, checked without writing (tg_state_check:
 * the SQLite files read-only, a PostgreSQL URL parsed), with the ids the
 * start opens it with; each problem at the key that names the part. */
static void
check_state(const struct gw_config *c, const struct tg_priv *p, struct tg_cfg_report *rep)
{
	static const char *const keys[TG_STATE_NPARTS] = { "state.url", "webhooks.db",
		"runs.db", "poll.ownership_db", "state.listen_url" };
	struct tg_state_problems sp;
	struct state_opts o;
	int i;

	state_opts(c, &o);
	if (tg_state_check(&o.so, &sp) == 0)
		return;
	for (i = 0; i < TG_STATE_NPARTS; i++)
		if (sp.bad[i])
			tg_config_report_add(rep, NULL, keys[i], "%s%s%s%s", sp.err[i].msg,
			    p->active ? " (checked as user '" : "", p->active ? p->name : "",
			    p->active ? "')" : "");
}

/*
 * Who the start runs as (tg_priv_begin: root becomes `user` now, effective
 * ids only, so the state is checked and opened as the account). -t checks
 * the file the same way, with two differences: an account that does not
 * exist is refused whoever runs it, and root without `user:` is not (it
 * checks a file, not who runs it).
 */
static int
check_user(const struct gw_config *c, int test, struct tg_priv *p, int *warn,
    struct tg_cfg_report *rep)
{
	size_t line = 0, col = 0;
	struct tg_err why;

	memset(p, 0, sizeof(*p));
	*warn = 0;
	if (test && c->user == NULL)
		return 0;
	if ((test && tg_priv_lookup(c->user, p, &why) != 0) ||
	    tg_priv_begin(c->user, p, warn, &why) != 0) {
		tg_config_report_pos(rep, "user", &line, &col);
		tg_config_report_add_at(rep, line, col, NULL, "%s", why.msg);
		return -1;
	}
	return 0;
}

/*
 * The features, in the order the core calls them for an operation several
 * serve: a key's limits first (every operation counts, cached answers and
 * long-polls too), the run registry answers expired runs before the poll
 * multiplexer, which records a job's owner before the webhook feature
 * answers a held export.
 */
static int
add_features(struct gw *gw, struct tg_err *err)
{
	if (tg_limits_register(gw, err) != 0 || tg_runs_register(gw, err) != 0 ||
	    tg_jobs_register(gw, err) != 0 || tg_webhook_register(gw, err) != 0)
		return -1;
	return 0;
}

/* Why `user` is not used (check_user became it when it could). */
static void
log_user(const struct gw_config *c, int warn)
{
	if (warn && geteuid() == 0)
		tg_log(TG_LOG_WARN, "running_as_root", TG_LS("reason",
		    "user: root keeps every privilege; name an unprivileged account"));
	else if (warn)
		tg_log(TG_LOG_WARN, "user_ignored", TG_LS("user", c->user),
		    TG_LS("reason", "not started as root"));
}

/* Start everything, serve until the drain is over; 0 or 1 for exit. The
 * listeners are bound as root (when started as root), the rest as the user. */
static int
run(const char *path, struct gw_config *cfg, struct tg_priv *priv)
{
	struct event_base *base = tg_event_base_new();
	struct tg_emu_config ecfg;
	struct tg_emu *emu = NULL;
	struct tg_state *st = NULL;
	struct gw *gw = NULL;
	struct tg_err err;
	char *pid_file = cfg->pid_file != NULL ? tg_xstrdup(cfg->pid_file) : NULL;
	int rc = 1;

	memset(&ecfg, 0, sizeof(ecfg));
	if ((strcmp(cfg->upstream, "embedded") == 0 &&
	    (emu = start_emulator(base, cfg, &ecfg, &err)) == NULL) ||
	    (st = open_state(base, cfg, &err)) == NULL ||
	    (gw = gw_new(base, path, cfg, st, &err)) == NULL || add_features(gw, &err) != 0 ||
	    tg_priv_regain(priv, &err) != 0 || gw_start(gw, &err) != 0 ||
	    (pid_file != NULL && tg_pidfile_write(pid_file, &err) != 0) ||
	    tg_priv_drop(priv, &err) != 0) {
		tg_log(TG_LOG_ERROR, "start_failed", TG_LS("reason", err.msg));
		goto done;
	}
	if (priv->active)
		tg_log(TG_LOG_INFO, "user", TG_LS("user", priv->name), TG_LI("uid", priv->uid),
		    TG_LI("gid", priv->gid));
	tg_notify_ready();
	event_base_dispatch(base);
	tg_log(TG_LOG_INFO, "stopped", TG_LS("config", path));
	rc = 0;
done:
	if (pid_file != NULL && tg_pidfile_remove(pid_file, &err) != 0)
		tg_log(TG_LOG_WARN, "pid_file_kept", TG_LS("reason", err.msg));
	free(pid_file);
	gw_free(gw);	/* the gateway's upstreams may still talk to the emulator */
	tg_state_close(st);	/* after the features: their operations are over */
	gw_config_free(cfg);	/* emptied by gw_new when it took it */
	tg_emu_free(emu);
	tg_config_free(tg_emu_config_keys, tg_emu_config_nkeys, &ecfg);
	event_base_free(base);
	return rc;
}

int
main(int argc, char **argv)
{
	const char *path = "conf/tidegate.yaml";
	struct tg_cfg_report rep = { 0 };
	struct gw_config cfg;
	struct tg_priv priv;
	struct tg_err why;
	const char *sig = NULL;
	int test = 0, lvl, warn = 0;

	define_configs();
	parse_options(argc, argv, &path, &test, &sig);
	tg_metrics_build_set(TG_VERSION, TG_VERSION_GIT);
	gw_config_add_check(check_emulator);
	if (sig != NULL)
		return signal_cmd(path, sig);
	memset(&priv, 0, sizeof(priv));
	/* The same checks for -t and the start, and the same lines printed. */
	if (gw_config_load(path, &cfg, &rep) == 0 &&
	    check_user(&cfg, test, &priv, &warn, &rep) == 0)
		check_state(&cfg, &priv, &rep);
	if (test || rep.n > 0)	/* what is left is to exit: as the one started */
		(void)tg_priv_regain(&priv, &why);
	if (print_report(path, &rep) != 0) {
		gw_config_free(&cfg);
		return 1;
	}
	lvl = tg_log_level_parse(cfg.log_level);	/* checked by gw_config_load */
	if (test == 2)		/* -T: the file checked, then what it amounts to */
		gw_config_print(&cfg, stdout);
	if (test) {
		fputs("configuration OK\n", test == 2 ? stderr : stdout);
		gw_config_free(&cfg);
		return 0;
	}
	log_start(path, lvl);
	log_user(&cfg, warn);
	if (cfg.pid_file != NULL && tg_pidfile_check(cfg.pid_file, "tidegate", &why) != 0) {
		tg_log(TG_LOG_ERROR, "start_failed", TG_LS("reason", why.msg));
		gw_config_free(&cfg);
		return 1;
	}
	signal(SIGPIPE, SIG_IGN);
	umask(077);	/* state, spool and payload files: the user's alone */
	return run(path, &cfg, &priv);
}
