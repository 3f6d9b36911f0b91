/*
 * feature.c - a feature's configuration loaded from a temporary
 * directory (feature.h), as tests/unit/jobs and tests/unit/runs start.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "feature.h"
#include "harness.h"
#include "tidegate/config.h"

void
th_gw_config(struct th_gw_dir *t, const char *name, const struct gw_config_def *def,
    const char *yaml, struct gw_config *cfg)
{
	struct tg_cfg_report rep = { 0 };
	FILE *fp;

	th_tmpdir(t->dir, sizeof(t->dir), name);
	snprintf(t->path, sizeof(t->path), "%s/tidegate.yaml", t->dir);
	assert_non_null(fp = fopen(t->path, "w"));
	fputs(yaml, fp);
	assert_int_equal(fclose(fp), 0);
	assert_int_equal(gw_config_define(def), 0);
	assert_int_equal(gw_config_load(t->path, cfg, &rep), 0);
	tg_config_report_cleanup(&rep);
}
