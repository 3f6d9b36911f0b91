/*
 * routes.c - the data exchange service's canonical operations, the path
 * prefixes tools use for them, and the default upstream paths (the spec's
 * example addresses, including its two exceptions: GET /public/export and
 * /public/v1/import/activities/failed), each route with its request check
 * (checks.c).
 */
#include "tidegate/dex.h"
#include "tidegate/util.h"

/* What a body may be declared as (tg_route.accepts): JSON, and any
 * structured +json type (RFC 6839). */
#define TG_MEDIA_JSON "application/json"

static const struct tg_route dex_routes[] = {
	{ TG_OP_DEX_AUTHENTICATE, "POST", "/authenticate", "authenticate",
	  "/public/v1/authenticate", NULL, TG_MEDIA_JSON },
	{ TG_OP_DEX_EXPORT, "POST", "/export/{kind}", "export", "/public/v1/export/{kind}",
	  &tg_dex_export_check, TG_MEDIA_JSON },
	{ TG_OP_DEX_EXPORT_GET, "GET", "/export", "export_get", "/public/export", NULL, NULL },
	{ TG_OP_DEX_IMPORT_JSON, "POST", "/import/activities", "import_activities",
	  "/public/v1/import/activities", &tg_dex_import_json_check, TG_MEDIA_JSON },
	{ TG_OP_DEX_IMPORT_FILE, "POST", "/import/activities/file", "import_file",
	  "/public/v1/import/activities/file", &tg_dex_import_file_check,
	  "multipart/form-data" },
	{ TG_OP_DEX_IMPORT_STATUS, "GET", "/import/status", "import_status",
	  "/public/v1/import/status", NULL, NULL },
	{ TG_OP_DEX_IMPORT_RESULT, "GET", "/import/result", "import_result",
	  "/public/v1/import/result", NULL, NULL },
	{ TG_OP_DEX_IMPORT_FAILED, "GET", "/import/failed", "import_failed",
	  "/public/v1/import/activities/failed", NULL, NULL },
	{ TG_OP_DEX_IMPORT_FAILED, "GET", "/import/activities/failed", "import_failed",
	  "/public/v1/import/activities/failed", NULL, NULL },
};

/* Longest first: "/public/v1/export" must not be read as "/public" + "/v1/export". */
static const char *const dex_prefixes[] = {
	"/api/public/v1", "/public/v1", "/api/public", "/public", "/api/v1", "/api", "",
};

const struct tg_service_routes tg_dex_service_routes = {
	dex_routes, TG_NELEM(dex_routes), dex_prefixes, TG_NELEM(dex_prefixes),
	"correlationId", "aei",	/* test_router holds "aei" to the patterns */
};
