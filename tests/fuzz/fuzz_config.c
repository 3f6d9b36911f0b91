/*
 * fuzz_config.c - the YAML configuration loader against the gateway's and
 * the emulator's key tables: any input yields a config or a
 * file:line:col error, and everything is freed.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/config.h"
#include "tidegate/emulator.h"
#include "tidegate/gateway_config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct tg_emu_config ec;
	struct gw_config gc;
	struct tg_err err;
	char *yaml;

	if (size > 65536)
		return 0;
	yaml = malloc(size + 1);
	if (size > 0)	/* data is NULL for an empty input */
		memcpy(yaml, data, size);
	yaml[size] = '\0';
	memset(&gc, 0, sizeof(gc));
	(void)tg_config_load_string("fuzz.yaml", yaml, gw_config_keys, gw_config_nkeys, &gc,
	    &err);
	tg_config_free(gw_config_keys, gw_config_nkeys, &gc);
	memset(&ec, 0, sizeof(ec));
	(void)tg_config_load_string("fuzz.yaml", yaml, tg_emu_config_keys, tg_emu_config_nkeys,
	    &ec, &err);
	tg_config_free(tg_emu_config_keys, tg_emu_config_nkeys, &ec);
	free(yaml);
	return 0;
}
