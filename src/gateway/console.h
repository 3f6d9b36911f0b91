/*
 * console.h - the console's files, embedded at build time by
 * src/gateway/console/embed.py into console_assets.c, served by
 * admin_console.c. Internal to the request core.
 */
#ifndef TG_GATEWAY_CONSOLE_H
#define TG_GATEWAY_CONSOLE_H

#include <stddef.h>

struct gw_console_asset {
	const char *path;		/* on the admin listener: "/", "/console/x.js" */
	const char *ctype;
	const char *etag;		/* quoted, strong: a prefix of the SHA-256 */
	const unsigned char *data;
	size_t len;
};

/* The table, ended by a NULL path (static, owned by the binary). */
extern const struct gw_console_asset gw_console_assets[];

#endif
