/*
 * sim.c - placeholder until the simulation endpoints land.
 */
#include "tidegate/http.h"
#include "emu.h"

#define NI(name) void name(struct tg_emu *emu, struct evhttp_request *req, \
	const char *const *p) { emu_reply_error(req, 501, "simulations are not implemented yet"); }
NI(emu_h_cases_list)
NI(emu_h_case_get)
NI(emu_h_sim_submit)
NI(emu_h_sim_status)
NI(emu_h_sim_results)
NI(emu_h_sim_list)

void
emu_sim_init(struct tg_emu *emu)
{
	emu->sims = tg_map_new(NULL);
	emu->cases = tg_map_new(NULL);
}

void
emu_sim_free(struct tg_emu *emu)
{
	tg_map_free(emu->sims);
	tg_map_free(emu->cases);
}
