/*
 * main.c - tidegate-emulator: load the config, start the emulator on one
 * event loop, stop cleanly on SIGINT/SIGTERM. "-t" checks the config only;
 * -h/--help and -V/-v/--version answer on stdout.
 */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "tidegate/config.h"
#include "tidegate/emulator.h"
#include "tidegate/http.h"
#include "tidegate/log.h"
#include "version.h"

static void
usage(FILE *out, int rc)
{
	fputs("usage: tidegate-emulator [-t] [-c FILE] | -h | -V\n"
	    "  -c, --config FILE  configuration (default: built-in defaults)\n"
	    "  -t, --test         check the configuration, print \"configuration OK\", exit\n"
	    "  -h, --help         print this help\n"
	    "  -V, -v, --version  print the version\n"
	    "Manual: tidegate-emulator(1).\n", out);
	exit(rc);
}

static void
parse_options(int argc, char **argv, const char **path, int *test)
{
	static const struct option longs[] = {
		{ "config", required_argument, NULL, 'c' }, { "test", no_argument, NULL, 't' },
		{ "help", no_argument, NULL, 'h' }, { "version", no_argument, NULL, 'V' },
		{ NULL, 0, NULL, 0 }
	};
	int ch;

	while ((ch = getopt_long(argc, argv, "tc:hVv", longs, NULL)) != -1) {
		if (ch == 't')
			*test = 1;
		else if (ch == 'c')
			*path = optarg;
		else if (ch == 'h')
			usage(stdout, 0);
		else if (ch == 'V' || ch == 'v') {
			printf("tidegate-emulator %s%s%s%s\n", TG_VERSION, TG_VERSION_GIT[0] ?
			    " (git " : "", TG_VERSION_GIT, TG_VERSION_GIT[0] ? ")" : "");
			exit(0);
		} else
			usage(stderr, 2);
	}
	if (optind < argc)
		usage(stderr, 2);
}

static void
on_signal(evutil_socket_t sig, short what, void *arg)
{
	tg_log(TG_LOG_INFO, "stopping", TG_LI("signal", sig));
	event_base_loopexit(arg, NULL);
}

int
main(int argc, char **argv)
{
	struct tg_emu_config cfg;
	struct event_base *base;
	struct event *sigint, *sigterm;
	struct tg_emu *emu;
	struct tg_err err;
	const char *path = NULL;
	int test = 0, rc = 1, lvl;

	parse_options(argc, argv, &path, &test);
	memset(&cfg, 0, sizeof(cfg));
	if ((path ? tg_config_load(path, tg_emu_config_keys, tg_emu_config_nkeys, &cfg, &err) :
	    tg_config_defaults(tg_emu_config_keys, tg_emu_config_nkeys, &cfg, &err)) != 0) {
		fprintf(stderr, "%s\n", err.msg);
		goto done;
	}
	if ((lvl = tg_log_level_parse(cfg.log_level)) < 0) {
		fprintf(stderr, "%s: log_level: unknown level '%s'\n", path ? path : "(defaults)",
		    cfg.log_level);
		goto done;
	}
	if (test) {
		puts("configuration OK");
		rc = 0;
		goto done;
	}
	tg_log_init(stderr, (enum tg_log_level)lvl);
	signal(SIGPIPE, SIG_IGN);
	base = tg_event_base_new();
	emu = tg_emu_new(base, &cfg, &err);
	if (emu == NULL) {
		tg_log(TG_LOG_ERROR, "start_failed", TG_LS("reason", err.msg));
		event_base_free(base);
		goto done;
	}
	sigint = evsignal_new(base, SIGINT, on_signal, base);
	sigterm = evsignal_new(base, SIGTERM, on_signal, base);
	evsignal_add(sigint, NULL);
	evsignal_add(sigterm, NULL);
	event_base_dispatch(base);
	event_free(sigint);
	event_free(sigterm);
	tg_emu_free(emu);
	event_base_free(base);
	rc = 0;
done:
	tg_config_free(tg_emu_config_keys, tg_emu_config_nkeys, &cfg);
	return rc;
}
