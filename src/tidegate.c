/*
 * tidegate.c - the gateway's entry point: options, configuration check
 * (-t), logging, the event loop. SIGHUP reloads, SIGTERM/SIGINT drain and
 * exit 0 (src/gateway/server.c).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "tidegate/emulator.h"
#include "tidegate/http.h"
#include "tidegate/log.h"
#include "gateway/gateway.h"

static void
usage(void)
{
	fputs("usage: tidegate [-t] [-c conf/tidegate.yaml] | -K\n"
	    "  -t  check the configuration and exit\n"
	    "  -K  print every configuration key as a Markdown table\n", stderr);
	exit(2);
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

int
main(int argc, char **argv)
{
	const char *path = "conf/tidegate.yaml";
	struct event_base *base;
	struct gw_config cfg;
	struct tg_err err;
	struct gw *gw;
	int test = 0, ch, lvl;

	while ((ch = getopt(argc, argv, "tc:K")) != -1) {
		if (ch == 'K') {
			tg_config_doc(gw_config_keys, gw_config_nkeys, stdout);
			return 0;
		}
		if (ch == 't')
			test = 1;
		else if (ch == 'c')
			path = optarg;
		else
			usage();
	}
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
	base = tg_event_base_new();
	if ((gw = gw_new(base, path, &cfg, &err)) == NULL) {
		tg_log(TG_LOG_ERROR, "start_failed", TG_LS("reason", err.msg));
		gw_config_free(&cfg);
		event_base_free(base);
		return 1;
	}
	event_base_dispatch(base);
	tg_log(TG_LOG_INFO, "stopped", TG_LS("config", path));
	gw_free(gw);
	event_base_free(base);
	return 0;
}
