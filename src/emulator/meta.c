/*
 * meta.c - the emulator's own state in <data_dir>/emulator.json: the keys
 * that sign tokens (so tokens issued before a restart stay valid), the
 * revocation generation and the clock offset of POST /__emulator/clock.
 * tg_emu_new loads it before any job (jobs are judged against the restored
 * clock); control.c saves it when the clock moves or tokens are revoked.
 */
#include <stdio.h>
#include <string.h>

#include "tidegate/json.h"
#include "tidegate/log.h"
#include "emu.h"

#define META_NAME "emulator"

void
emu_meta_save(struct tg_emu *emu)
{
	yajl_gen g;

	if (emu->cfg->data_dir == NULL)
		return;
	g = tg_json_gen_new();
	yajl_gen_map_open(g);
	tg_json_kv_str(g, "dexSecret", emu->dex_secret);
	tg_json_kv_str(g, "simSecret", emu->sim_secret);
	tg_json_kv_int(g, "tokenGeneration", emu->token_gen);
	tg_json_kv_int(g, "clockOffsetMs", tg_clock_offset_ms());
	yajl_gen_map_close(g);
	emu_store_put(emu, NULL, META_NAME, g);
	yajl_gen_free(g);
}

static void
secret_from(char *dst, size_t len, yajl_val meta, const char *key)
{
	const char *s = tg_json_get_str(meta, key);

	if (s != NULL && *s != '\0' && strlen(s) < len)
		snprintf(dst, len, "%s", s);
}

/* A configured dex.jwt_secret wins over the stored one. The clock only
 * moves forward: when embedded, the gateway may have advanced it already. */
void
emu_meta_load(struct tg_emu *emu)
{
	yajl_val meta = emu_store_get(emu, NULL, META_NAME), v;
	int64_t off;

	if (meta != NULL) {
		if (emu->cfg->dex_jwt_secret == NULL)
			secret_from(emu->dex_secret, sizeof(emu->dex_secret), meta, "dexSecret");
		secret_from(emu->sim_secret, sizeof(emu->sim_secret), meta, "simSecret");
		if ((v = tg_json_get(meta, "tokenGeneration")) != NULL && YAJL_IS_INTEGER(v))
			emu->token_gen = YAJL_GET_INTEGER(v);
		v = tg_json_get(meta, "clockOffsetMs");
		off = v != NULL && YAJL_IS_INTEGER(v) ? YAJL_GET_INTEGER(v) : 0;
		if (off > tg_clock_offset_ms())
			tg_clock_advance_ms(off - tg_clock_offset_ms());
		tg_log(TG_LOG_INFO, "data_dir_restored", TG_LS("data_dir", emu->cfg->data_dir),
		    TG_LI("clockOffsetMs", tg_clock_offset_ms()));
		yajl_tree_free(meta);
	}
	emu_meta_save(emu);
}
