/*
 * gateway.h - what the entry point (src/tidegate.c) needs of the gateway:
 * load a configuration, start, and free after the loop ends.
 */
#ifndef TIDEGATE_GATEWAY_H
#define TIDEGATE_GATEWAY_H

#include "config.h"

struct event_base;
struct gw;

/** Start on base: runtime, listeners, signals. Takes cfg. */
struct gw *gw_new(struct event_base *base, const char *config_path, struct gw_config *cfg,
    struct tg_err *err);
void gw_free(struct gw *gw);

#endif
