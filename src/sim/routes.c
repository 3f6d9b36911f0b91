/*
 * routes.c - the simulation service's canonical operations (token, cases,
 * submit, status, results), the prefixes tools use, and the default
 * upstream paths of tidegate-emulator (docs/emulator.md); a submission's
 * request check is submit_check.c.
 */
#include "tidegate/sim.h"
#include "tidegate/util.h"

static const struct tg_route sim_routes[] = {
	{ TG_OP_SIM_TOKEN, "POST", "/oauth2/token", "token", "/api/oauth2/token", NULL,
	  "application/x-www-form-urlencoded" },
	{ TG_OP_SIM_CASES, "GET", "/cases", "cases", "/api/v1/cases", NULL, NULL },
	{ TG_OP_SIM_CASE, "GET", "/cases/{id}", "case", "/api/v1/cases/{id}", NULL, NULL },
	{ TG_OP_SIM_SUBMIT, "POST", "/simulations", "simulations", "/api/v1/simulations",
	  &tg_sim_submit_check, "application/json" },
	{ TG_OP_SIM_LIST, "GET", "/simulations", "simulation_list", "/api/v1/simulations",
	  NULL, NULL },
	{ TG_OP_SIM_STATUS, "GET", "/simulations/{id}", "simulation",
	  "/api/v1/simulations/{id}", NULL, NULL },
	{ TG_OP_SIM_RESULTS, "GET", "/simulations/{id}/results", "results",
	  "/api/v1/simulations/{id}/results", NULL, NULL },
};

static const char *const sim_prefixes[] = { "/api/v1", "/v1", "/api", "" };

const struct tg_service_routes tg_sim_service_routes = {
	sim_routes, TG_NELEM(sim_routes), sim_prefixes, TG_NELEM(sim_prefixes), NULL,
	"ocs",			/* test_router holds "ocs" to the patterns */
};
