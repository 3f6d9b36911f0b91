/*
 * feature.h - for a feature's unit test (tests/unit/jobs, tests/unit/runs):
 * the configuration of a gateway core with only that feature's keys
 * defined, written to a fresh temporary directory and loaded, as the
 * entry point loads it. The test then opens the state seam, makes the
 * gateway and registers the feature in its own order.
 */
#ifndef TG_TEST_HARNESS_FEATURE_H
#define TG_TEST_HARNESS_FEATURE_H

#include "tidegate/gateway_config.h"

struct th_gw_dir {
	char dir[64];	/* the temporary directory: th_rmtree it at teardown */
	char path[128];	/* dir/tidegate.yaml */
};

/**
 * Make t->dir (/tmp/<name>-XXXXXX), write yaml (borrowed) to t->path,
 * define the feature's configuration def (borrowed, static; the first
 * call in the process defines it) and load t->path into cfg (zeroed here;
 * the caller frees it or hands it to gw_new). The test fails on any
 * problem.
 */
void th_gw_config(struct th_gw_dir *t, const char *name, const struct gw_config_def *def,
    const char *yaml, struct gw_config *cfg);

#endif
