/*
 * import.c - placeholder until the import endpoints land.
 */
#include "tidegate/http.h"
#include "emu.h"

#define NI(name) void name(struct tg_emu *emu, struct evhttp_request *req, \
	const char *const *p) { emu_reply_error(req, 501, "imports are not implemented yet"); }
NI(emu_h_import_json)
NI(emu_h_import_file)
NI(emu_h_import_status)
NI(emu_h_import_result)
NI(emu_h_import_failed)

void
emu_imports_free(struct tg_emu *emu)
{
	tg_map_free(emu->imports);
}
