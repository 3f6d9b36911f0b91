/*
 * ops.c - the name of a canonical operation, read from the route table
 * that carries it (src/dex/routes.c, src/sim/routes.c). The gateway labels
 * metrics and access log lines with it and reads the routes.<name> config
 * keys by it; it is the one place that sees both services' tables.
 */
#include <stddef.h>

#include "tidegate/dex.h"
#include "tidegate/ops.h"
#include "tidegate/routes.h"
#include "tidegate/sim.h"

const char *
tg_op_name(enum tg_op op)
{
	const char *name;

	if (op == TG_OP_PASSTHROUGH)
		return "passthrough";
	if ((name = tg_route_op_name(&tg_dex_service_routes, (int)op)) != NULL ||
	    (name = tg_route_op_name(&tg_sim_service_routes, (int)op)) != NULL)
		return name;
	return "unknown";
}
