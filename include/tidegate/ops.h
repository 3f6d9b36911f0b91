/*
 * ops.h - the canonical operations of both vendor APIs: the numbers the
 * route tables of dex and sim carry (src/dex/routes.c, src/sim/routes.c)
 * and the gateway indexes its per-operation settings by. The router
 * (routes.h) knows none of them; an operation's name is the one its route
 * table gives it.
 */
#ifndef TIDEGATE_OPS_H
#define TIDEGATE_OPS_H

enum tg_op {
	TG_OP_PASSTHROUGH = 0,
	TG_OP_DEX_AUTHENTICATE, TG_OP_DEX_EXPORT, TG_OP_DEX_EXPORT_GET, TG_OP_DEX_IMPORT_JSON,
	TG_OP_DEX_IMPORT_FILE, TG_OP_DEX_IMPORT_STATUS, TG_OP_DEX_IMPORT_RESULT,
	TG_OP_DEX_IMPORT_FAILED,
	TG_OP_SIM_TOKEN, TG_OP_SIM_CASES, TG_OP_SIM_CASE, TG_OP_SIM_SUBMIT, TG_OP_SIM_LIST,
	TG_OP_SIM_STATUS, TG_OP_SIM_RESULTS,
	TG_OP_COUNT
};

/**
 * Name of op as its route table spells it (metrics label, config key under
 * routes.): "passthrough" for TG_OP_PASSTHROUGH, "unknown" for a number no
 * table carries. Borrowed. Implemented in src/gateway/ops.c, which sees
 * both tables.
 */
const char *tg_op_name(enum tg_op op);

#endif
