/*
 * tidegate.c - the gateway's entry point: options, configuration check
 * (-t), logging, the embedded emulator (upstream: embedded), the gateway's
 * request core and the features it serves (jobs, webhook, runs), the
 * event loop. SIGHUP reloads, SIGTERM/SIGINT drain and exit 0
 * (src/gateway/server.c). Started as root, it binds the listeners and
 * becomes the configured `user` before it serves (include/tidegate/priv.h);
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
#include "tidegate/log.h"
#include "tidegate/notify.h"
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
	fputs("usage: tidegate [-t] [-c FILE] | -K | -h | -V\n"
	    "  -c, --config FILE  configuration (default conf/tidegate.yaml)\n"
	    "  -t, --test         check the configuration, print \"configuration OK\", exit\n"
	    "  -K, --keys         print every configuration key as a Markdown table\n"
	    "  -h, --help         print this help\n"
	    "  -V, -v, --version  print the version\n"
	    "SIGHUP reloads the configuration; SIGTERM drains and exits 0. Manual: tidegate(8),\n"
	    "tidegate.yaml(5).\n", out);
	exit(rc);
}

static void
version(void)
{
	printf("tidegate %s%s%s%s\n", TG_VERSION, TG_VERSION_GIT[0] ? " (git " : "",
	    TG_VERSION_GIT, TG_VERSION_GIT[0] ? ")" : "");
	exit(0);
}

/* Options: -c sets *path, -t *test; -K, -h and -V answer and exit. */
static void
parse_options(int argc, char **argv, const char **path, int *test)
{
	static const struct option longs[] = {
		{ "config", required_argument, NULL, 'c' }, { "test", no_argument, NULL, 't' },
		{ "keys", no_argument, NULL, 'K' }, { "help", no_argument, NULL, 'h' },
		{ "version", no_argument, NULL, 'V' }, { NULL, 0, NULL, 0 }
	};
	int ch;

	while ((ch = getopt_long(argc, argv, "tc:KhVv", longs, NULL)) != -1) {
		if (ch == 'K') {
			tg_config_doc(gw_config_keys, gw_config_nkeys, stdout);
			exit(0);
		}
		if (ch == 't')
			*test = 1;
		else if (ch == 'c')
			*path = optarg;
		else if (ch == 'h')
			usage(stdout, 0);
		else if (ch == 'V' || ch == 'v')
			version();
		else
			usage(stderr, 2);
	}
	if (optind < argc)
		usage(stderr, 2);
}

/* The one check of the configuration, for -t and the start alike: every
 * problem is printed, one "file:line:col: key: message" a line. */
static int
load_config(const char *path, struct gw_config *cfg)
{
	struct tg_cfg_report rep = { 0 };
	size_t i;
	int rc;

	rc = gw_config_load(path, cfg, &rep);
	for (i = 0; i < rep.n; i++)
		fprintf(stderr, "%s\n", rep.v[i].msg);
	if (rep.dropped > 0)
		fprintf(stderr, "%s: %zu more problems not shown\n", path, rep.dropped);
	tg_config_report_cleanup(&rep);
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
	tg_config_load_report(full, tg_emu_config_keys, tg_emu_config_nkeys, &ecfg, &sub);
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

/* The state seam with every store the features keep (each feature says
 * how its store is configured). */
static struct tg_state *
open_state(struct event_base *base, const struct gw_config *c, struct tg_err *err)
{
	struct tg_runs_opts ro;
	struct tg_outbox_opts oo;
	struct tg_owners_opts wo;
	struct tg_state_opts so = { c->state_url, &ro, &oo, &wo, c->state_instance,
		c->state_timeout };

	tg_runs_store_opts(c, &ro);
	tg_webhook_outbox_opts(c, &oo);
	tg_jobs_owners_opts(c, &wo);
	return tg_state_open(base, &so, err);
}

/*
 * The features, in the order the core calls them for an operation several
 * serve: the run registry answers expired runs before the poll
 * multiplexer, which records a job's owner before the webhook feature
 * answers a held export.
 */
static int
add_features(struct gw *gw, struct tg_err *err)
{
	if (tg_runs_register(gw, err) != 0 || tg_jobs_register(gw, err) != 0 ||
	    tg_webhook_register(gw, err) != 0)
		return -1;
	return 0;
}

/* Started as root: become the configured user now (root left only as the
 * saved uid, to bind); else say why `user` is not used. */
static int
become_user(const struct gw_config *c, struct tg_priv *p, struct tg_err *err)
{
	struct tg_err why;
	int warn;

	if (tg_priv_begin(c->user, p, &warn, &why) != 0) {
		tg_err_set(err, "%s: %s", c->path, why.msg);
		return -1;
	}
	if (warn && geteuid() == 0)
		tg_log(TG_LOG_WARN, "running_as_root", TG_LS("reason",
		    "user: root keeps every privilege; name an unprivileged account"));
	else if (warn)
		tg_log(TG_LOG_WARN, "user_ignored", TG_LS("user", c->user),
		    TG_LS("reason", "not started as root"));
	return 0;
}

/* Start everything, serve until the drain is over; 0 or 1 for exit. The
 * listeners are bound as root (when started as root), the rest as the user. */
static int
run(const char *path, struct gw_config *cfg)
{
	struct event_base *base = tg_event_base_new();
	struct tg_emu_config ecfg;
	struct tg_emu *emu = NULL;
	struct tg_state *st = NULL;
	struct gw *gw = NULL;
	struct tg_priv priv;
	struct tg_err err;
	int rc = 1;

	memset(&ecfg, 0, sizeof(ecfg));
	if (become_user(cfg, &priv, &err) != 0 || (strcmp(cfg->upstream, "embedded") == 0 &&
	    (emu = start_emulator(base, cfg, &ecfg, &err)) == NULL) ||
	    (st = open_state(base, cfg, &err)) == NULL ||
	    (gw = gw_new(base, path, cfg, st, &err)) == NULL || add_features(gw, &err) != 0 ||
	    tg_priv_regain(&priv, &err) != 0 || gw_start(gw, &err) != 0 ||
	    tg_priv_drop(&priv, &err) != 0) {
		tg_log(TG_LOG_ERROR, "start_failed", TG_LS("reason", err.msg));
		goto done;
	}
	if (priv.active)
		tg_log(TG_LOG_INFO, "user", TG_LS("user", priv.name), TG_LI("uid", priv.uid),
		    TG_LI("gid", priv.gid));
	tg_notify_ready();
	event_base_dispatch(base);
	tg_log(TG_LOG_INFO, "stopped", TG_LS("config", path));
	rc = 0;
done:
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
	struct gw_config cfg;
	int test = 0, lvl;

	parse_options(argc, argv, &path, &test);
	tg_metrics_build_set(TG_VERSION, TG_VERSION_GIT);
	gw_config_add_check(tg_webhook_config_check);
	gw_config_add_check(check_emulator);
	if (load_config(path, &cfg) != 0) {
		gw_config_free(&cfg);
		return 1;
	}
	lvl = tg_log_level_parse(cfg.log_level);	/* checked by gw_config_load */
	if (test) {
		puts("configuration OK");
		gw_config_free(&cfg);
		return 0;
	}
	tg_log_init(stderr, (enum tg_log_level)lvl);
	signal(SIGPIPE, SIG_IGN);
	umask(077);	/* state, spool and payload files: the user's alone */
	return run(path, &cfg);
}
