/*
 * export.c - placeholder until the export endpoints land.
 */
#include "tidegate/http.h"
#include "emu.h"

void
emu_h_export_create(struct tg_emu *emu, struct evhttp_request *req, const char *const *p)
{
	emu_reply_error(req, 501, "exports are not implemented yet");
}

void
emu_h_export_get(struct tg_emu *emu, struct evhttp_request *req, const char *const *p)
{
	emu_reply_error(req, 501, "exports are not implemented yet");
}

void
emu_exports_free(struct tg_emu *emu)
{
	tg_map_free(emu->exports);
}
