/*
 * case.c - the simulation API's partial cases: a fixed, deterministic set
 * of one Construction and two O&M cases built at start (emu_sim_init), the
 * case kind derived from fixableTypes, and the validity check that decides
 * whether a submitted edit of a case can complete (emu_h_sim_submit).
 *
 * A case is written with yajl_gen from the tables below and parsed once,
 * so what GET /api/v1/cases/{id} returns and what submissions are compared
 * against is the same tree.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/json.h"
#include "emu.h"
#include "emu_case.h"

struct fix_def {
	const char *suffix, *name, *type, *vessel, *role;
	double hours;
	int techs;
	double freq;		/* failureRatePerYear or intervalDays (O&M only) */
	double parts;
};

struct asset_def {
	const char *prefix, *label, *type, *model;
	int count;
	double mw;
	const struct fix_def *fix;
	size_t nfix;
};

struct farm_def {
	const char *id, *name, *port;
	double distance_km;
	const struct asset_def *assets;
	size_t nassets;
};

struct vessel_def {
	const char *id, *name, *type, *charter;
	int qty, techs;
	double day_rate, cargo_t, max_hs, max_wind, speed_kn, mob_days;
};

struct role_def {
	const char *id, *role, *shift;
	int qty;
	double shift_hours, day_rate;
};

struct port_def {
	const char *id, *name, *country;
};

struct case_def {
	const char *id, *name, *start, *end, *dataset;
	double hs, wind, cf;
	const struct port_def *ports;
	size_t nports;
	const struct vessel_def *vessels;
	size_t nvessels;
	const struct role_def *roles;
	size_t nroles;
	const struct farm_def *farms;
	size_t nfarms;
};

#define LIST(a) a, TG_NELEM(a)

static const struct {
	const char *name;
	int kind, corrective;
} fixable_types[] = {
	{ "INSTALLATION_TASK", EMU_CASE_CONSTRUCTION, 0 },
	{ "COMMISSIONING_TASK", EMU_CASE_CONSTRUCTION, 0 },
	{ "CORRECTIVE_MAINTENANCE", EMU_CASE_OM, 1 },
	{ "PREVENTIVE_MAINTENANCE", EMU_CASE_OM, 0 },
	{ "SCHEDULED_SERVICE", EMU_CASE_OM, 0 },
	{ "INSPECTION", EMU_CASE_OM, 0 },
};

/* ---- CASE-CON-1: Silver Sands, foundations to commissioning ---- */

static const struct fix_def con_wtg[] = {
	{ "MP", "Monopile installation", "INSTALLATION_TASK", "HLV", "INSTALLATION_TECHNICIAN",
	  30, 6, 0, 2400000 },
	{ "TP", "Transition piece installation", "INSTALLATION_TASK", "HLV",
	  "INSTALLATION_TECHNICIAN", 18, 6, 0, 900000 },
	{ "WTG", "Turbine installation", "INSTALLATION_TASK", "JACK_UP",
	  "INSTALLATION_TECHNICIAN", 36, 8, 0, 0 },
	{ "CABLE", "Array cable pull-in", "INSTALLATION_TASK", "CLV", "CABLE_TECHNICIAN",
	  12, 4, 0, 350000 },
	{ "COM", "Turbine commissioning", "COMMISSIONING_TASK", "CTV",
	  "COMMISSIONING_TECHNICIAN", 72, 4, 0, 0 },
};

static const struct fix_def con_oss[] = {
	{ "JACKET", "Jacket installation", "INSTALLATION_TASK", "HLV",
	  "INSTALLATION_TECHNICIAN", 96, 10, 0, 6500000 },
	{ "TOPSIDE", "Topside installation", "INSTALLATION_TASK", "HLV",
	  "INSTALLATION_TECHNICIAN", 48, 12, 0, 21000000 },
	{ "COM", "Substation commissioning", "COMMISSIONING_TASK", "CTV",
	  "COMMISSIONING_TECHNICIAN", 240, 6, 0, 0 },
};

static const struct asset_def con_assets[] = {
	{ "SS-WTG", "Turbine", "WTG", "SG 8.0-167 DD", 8, 8.0, LIST(con_wtg) },
	{ "SS-OSS", "Offshore substation", "SUBSTATION", "220 kV OSS", 1, 0, LIST(con_oss) },
};

static const struct farm_def con_farms[] = {
	{ "WF-SS", "Silver Sands", "PORT-ESB", 60, LIST(con_assets) },
};

static const struct vessel_def con_vessels[] = {
	{ "V-HLV-1", "Orion Lift", "HLV", "TIME_CHARTER", 1, 60, 220000, 5000, 2.5, 20, 10, 10 },
	{ "V-JUV-1", "Voltaire Jack", "JACK_UP", "TIME_CHARTER", 1, 80, 180000, 4000, 2.0, 18,
	  9, 7 },
	{ "V-CLV-1", "Cable Tern", "CLV", "TIME_CHARTER", 1, 40, 90000, 3000, 2.5, 18, 11, 5 },
	{ "V-CTV-1", "Swift Crest", "CTV", "TIME_CHARTER", 2, 12, 3500, 2, 1.5, 15, 25, 0 },
};

static const struct role_def con_roles[] = {
	{ "P-INST", "INSTALLATION_TECHNICIAN", "DAY_NIGHT", 12, 12, 800 },
	{ "P-CABLE", "CABLE_TECHNICIAN", "DAY", 6, 12, 750 },
	{ "P-COM", "COMMISSIONING_TECHNICIAN", "DAY", 8, 12, 700 },
};

/* ---- CASE-OM-1: North Reef, CTV-based with a spot jack-up ---- */

static const struct fix_def om1_wtg[] = {
	{ "CM-MINOR", "Minor repair", "CORRECTIVE_MAINTENANCE", "CTV", "WTG_TECHNICIAN",
	  6, 3, 5.0, 1200 },
	{ "CM-MAJOR", "Major repair", "CORRECTIVE_MAINTENANCE", "CTV", "WTG_TECHNICIAN",
	  24, 4, 0.8, 15000 },
	{ "CM-REPLACE", "Major component replacement", "CORRECTIVE_MAINTENANCE", "JACK_UP",
	  "WTG_TECHNICIAN", 120, 6, 0.05, 600000 },
	{ "PM", "Annual service", "PREVENTIVE_MAINTENANCE", "CTV", "WTG_TECHNICIAN",
	  72, 3, 365, 8000 },
	{ "INSP", "Blade inspection", "INSPECTION", "CTV", "WTG_TECHNICIAN", 8, 2, 180, 0 },
};

static const struct fix_def om1_oss[] = {
	{ "CM-HV", "HV switchgear repair", "CORRECTIVE_MAINTENANCE", "CTV", "HV_TECHNICIAN",
	  16, 2, 0.2, 40000 },
	{ "SVC", "HV annual service", "SCHEDULED_SERVICE", "CTV", "HV_TECHNICIAN",
	  48, 2, 365, 5000 },
};

static const struct asset_def om1_assets[] = {
	{ "NR-WTG", "Turbine", "WTG", "V164-8.0", 6, 8.0, LIST(om1_wtg) },
	{ "NR-OSS", "Offshore substation", "SUBSTATION", "155 kV OSS", 1, 0, LIST(om1_oss) },
};

static const struct farm_def om1_farms[] = {
	{ "WF-NR", "North Reef", "PORT-ESB", 45, LIST(om1_assets) },
};

static const struct vessel_def om1_vessels[] = {
	{ "V-CTV-1", "Tern", "CTV", "TIME_CHARTER", 2, 12, 3800, 2, 1.5, 15, 25, 0 },
	{ "V-JUV-1", "Atlas Jack", "JACK_UP", "SPOT", 1, 60, 140000, 3000, 2.0, 18, 9, 14 },
};

static const struct role_def om1_roles[] = {
	{ "P-WTG", "WTG_TECHNICIAN", "DAY", 12, 12, 620 },
	{ "P-HV", "HV_TECHNICIAN", "DAY", 2, 12, 850 },
};

/* ---- CASE-OM-2: Kestrel Bank A and B, SOV-based ---- */

static const struct fix_def om2_wtg[] = {
	{ "CM-MINOR", "Minor repair", "CORRECTIVE_MAINTENANCE", "SOV", "WTG_TECHNICIAN",
	  5, 3, 6.0, 1000 },
	{ "CM-BLADE", "Blade repair", "CORRECTIVE_MAINTENANCE", "CTV", "BLADE_TECHNICIAN",
	  30, 3, 0.3, 25000 },
	{ "CM-REPLACE", "Main bearing replacement", "CORRECTIVE_MAINTENANCE", "JACK_UP",
	  "WTG_TECHNICIAN", 144, 6, 0.04, 900000 },
	{ "PM", "Annual service", "PREVENTIVE_MAINTENANCE", "SOV", "WTG_TECHNICIAN",
	  80, 4, 365, 9000 },
	{ "SVC", "Lift and safety service", "SCHEDULED_SERVICE", "SOV", "WTG_TECHNICIAN",
	  10, 2, 365, 1500 },
	{ "INSP", "Blade inspection", "INSPECTION", "CTV", "BLADE_TECHNICIAN", 6, 2, 365, 0 },
};

static const struct fix_def om2_oss[] = {
	{ "CM-HV", "Transformer repair", "CORRECTIVE_MAINTENANCE", "SOV", "HV_TECHNICIAN",
	  24, 2, 0.15, 80000 },
	{ "INSP", "Substation inspection", "INSPECTION", "SOV", "HV_TECHNICIAN", 12, 2, 90, 0 },
};

static const struct asset_def om2a_assets[] = {
	{ "KBA-WTG", "Turbine", "WTG", "SG 11.0-200 DD", 5, 11.0, LIST(om2_wtg) },
	{ "KBA-OSS", "Offshore substation", "SUBSTATION", "220 kV OSS", 1, 0, LIST(om2_oss) },
};

static const struct asset_def om2b_assets[] = {
	{ "KBB-WTG", "Turbine", "WTG", "SG 11.0-200 DD", 4, 11.0, LIST(om2_wtg) },
	{ "KBB-OSS", "Offshore substation", "SUBSTATION", "220 kV OSS", 1, 0, LIST(om2_oss) },
};

static const struct farm_def om2_farms[] = {
	{ "WF-KBA", "Kestrel Bank A", "PORT-GRM", 80, LIST(om2a_assets) },
	{ "WF-KBB", "Kestrel Bank B", "PORT-GRM", 95, LIST(om2b_assets) },
};

static const struct vessel_def om2_vessels[] = {
	{ "V-SOV-1", "Fulmar", "SOV", "TIME_CHARTER", 1, 40, 32000, 50, 3.0, 20, 12, 0 },
	{ "V-CTV-1", "Skua", "CTV", "TIME_CHARTER", 1, 12, 3600, 2, 1.5, 15, 25, 0 },
	{ "V-JUV-1", "Brent Jack", "JACK_UP", "SPOT", 1, 60, 150000, 3000, 2.0, 18, 9, 10 },
};

static const struct role_def om2_roles[] = {
	{ "P-WTG", "WTG_TECHNICIAN", "DAY", 18, 12, 640 },
	{ "P-BLADE", "BLADE_TECHNICIAN", "DAY", 4, 12, 700 },
	{ "P-HV", "HV_TECHNICIAN", "DAY", 3, 12, 850 },
};

static const struct port_def esbjerg[] = { { "PORT-ESB", "Esbjerg", "DK" } };
static const struct port_def grimsby[] = { { "PORT-GRM", "Grimsby", "GB" } };

static const struct case_def cases[] = {
	{ "CASE-CON-1", "Silver Sands construction", "2026-03-01T00:00:00Z",
	  "2027-03-01T00:00:00Z", "SILVER-SANDS-HINDCAST-1995-2024", 1.6, 9.8, 0.47,
	  LIST(esbjerg), LIST(con_vessels), LIST(con_roles), LIST(con_farms) },
	{ "CASE-OM-1", "North Reef O&M baseline", "2025-01-01T00:00:00Z",
	  "2026-01-01T00:00:00Z", "NORTH-REEF-HINDCAST-2004-2023", 1.4, 9.2, 0.45,
	  LIST(esbjerg), LIST(om1_vessels), LIST(om1_roles), LIST(om1_farms) },
	{ "CASE-OM-2", "Kestrel Bank O&M with SOV", "2025-01-01T00:00:00Z",
	  "2026-01-01T00:00:00Z", "KESTREL-BANK-HINDCAST-2000-2023", 1.8, 10.1, 0.49,
	  LIST(grimsby), LIST(om2_vessels), LIST(om2_roles), LIST(om2_farms) },
};

int
emu_fixable_kind(const char *fixable_type, int *corrective)
{
	size_t i;

	for (i = 0; fixable_type != NULL && i < TG_NELEM(fixable_types); i++) {
		if (strcmp(fixable_types[i].name, fixable_type) == 0) {
			if (corrective != NULL)
				*corrective = fixable_types[i].corrective;
			return fixable_types[i].kind;
		}
	}
	return EMU_CASE_NONE;
}

const char *
emu_case_kind_name(int kind)
{
	return kind == EMU_CASE_CONSTRUCTION ? "CONSTRUCTION" : kind == EMU_CASE_OM ? "O&M" :
	    "UNKNOWN";
}

static void
gen_num(yajl_gen g, const char *k, double v)
{
	char buf[64];
	int n = snprintf(buf, sizeof(buf), "%.10g", v);

	tg_json_str(g, k);
	yajl_gen_number(g, buf, (size_t)n);
}

static void
gen_vessel(yajl_gen g, const struct vessel_def *v)
{
	yajl_gen_map_open(g);
	tg_json_kv_str(g, "id", v->id);
	tg_json_kv_str(g, "name", v->name);
	tg_json_kv_str(g, "type", v->type);
	tg_json_kv_int(g, "quantity", v->qty);
	tg_json_kv_str(g, "charterType", v->charter);
	gen_num(g, "dayRate", v->day_rate);
	gen_num(g, "mobilisationDays", v->mob_days);
	gen_num(g, "transitSpeedKn", v->speed_kn);
	tg_json_str(g, "capacities");
	yajl_gen_map_open(g);
	tg_json_kv_int(g, "technicians", v->techs);
	gen_num(g, "cargoTonnes", v->cargo_t);
	yajl_gen_map_close(g);
	tg_json_str(g, "operationalLimits");
	yajl_gen_map_open(g);
	gen_num(g, "maxSignificantWaveHeightM", v->max_hs);
	gen_num(g, "maxWindSpeedMs", v->max_wind);
	yajl_gen_map_close(g);
	yajl_gen_map_close(g);
}

static void
gen_role(yajl_gen g, const struct role_def *r)
{
	yajl_gen_map_open(g);
	tg_json_kv_str(g, "id", r->id);
	tg_json_kv_str(g, "role", r->role);
	tg_json_kv_int(g, "quantity", r->qty);
	tg_json_kv_str(g, "shift", r->shift);
	gen_num(g, "shiftHours", r->shift_hours);
	gen_num(g, "dayRate", r->day_rate);
	yajl_gen_map_close(g);
}

static void
gen_fixable(yajl_gen g, const char *asset_id, const struct fix_def *f)
{
	char *id = tg_xasprintf("%s-%s", asset_id, f->suffix);
	int corrective = 0, kind = emu_fixable_kind(f->type, &corrective);

	yajl_gen_map_open(g);
	tg_json_kv_str(g, "id", id);
	tg_json_kv_str(g, "name", f->name);
	tg_json_kv_str(g, "fixableType", f->type);
	if (kind == EMU_CASE_OM)
		gen_num(g, corrective ? "failureRatePerYear" : "intervalDays", f->freq);
	gen_num(g, "durationHours", f->hours);
	tg_json_kv_str(g, "vesselType", f->vessel);
	tg_json_kv_str(g, "technicianRole", f->role);
	tg_json_kv_int(g, "techniciansRequired", f->techs);
	gen_num(g, "partsCost", f->parts);
	yajl_gen_map_close(g);
	free(id);
}

static void
gen_assets(yajl_gen g, const struct asset_def *a)
{
	char *id, *name;
	size_t j;
	int i;

	for (i = 1; i <= a->count; i++) {
		id = tg_xasprintf("%s-%02d", a->prefix, i);
		name = tg_xasprintf("%s %02d", a->label, i);
		yajl_gen_map_open(g);
		tg_json_kv_str(g, "id", id);
		tg_json_kv_str(g, "name", name);
		tg_json_kv_str(g, "type", a->type);
		tg_json_kv_str(g, "model", a->model);
		if (a->mw > 0)
			gen_num(g, "ratedPowerMW", a->mw);
		tg_json_str(g, "fixable");
		yajl_gen_array_open(g);
		for (j = 0; j < a->nfix; j++)
			gen_fixable(g, id, &a->fix[j]);
		yajl_gen_array_close(g);
		yajl_gen_map_close(g);
		free(id);
		free(name);
	}
}

static void
gen_farm(yajl_gen g, const struct farm_def *f)
{
	size_t i;

	yajl_gen_map_open(g);
	tg_json_kv_str(g, "id", f->id);
	tg_json_kv_str(g, "name", f->name);
	tg_json_kv_str(g, "portId", f->port);
	gen_num(g, "distanceToPortKm", f->distance_km);
	tg_json_str(g, "infrastructureList");
	yajl_gen_array_open(g);
	for (i = 0; i < f->nassets; i++)
		gen_assets(g, &f->assets[i]);
	yajl_gen_array_close(g);
	yajl_gen_map_close(g);
}

static void
gen_head(yajl_gen g, const struct case_def *c)
{
	size_t i;

	tg_json_kv_str(g, "caseId", c->id);
	tg_json_kv_str(g, "name", c->name);
	tg_json_kv_str(g, "currency", "EUR");
	tg_json_kv_str(g, "startDate", c->start);
	tg_json_kv_str(g, "endDate", c->end);
	tg_json_str(g, "weather");
	yajl_gen_map_open(g);
	tg_json_kv_str(g, "dataset", c->dataset);
	gen_num(g, "meanSignificantWaveHeightM", c->hs);
	gen_num(g, "meanWindSpeedMs", c->wind);
	gen_num(g, "capacityFactor", c->cf);
	yajl_gen_map_close(g);
	tg_json_str(g, "ports");
	yajl_gen_array_open(g);
	for (i = 0; i < c->nports; i++) {
		yajl_gen_map_open(g);
		tg_json_kv_str(g, "id", c->ports[i].id);
		tg_json_kv_str(g, "name", c->ports[i].name);
		tg_json_kv_str(g, "country", c->ports[i].country);
		yajl_gen_map_close(g);
	}
	yajl_gen_array_close(g);
}

static yajl_val
build_case(const struct case_def *c)
{
	yajl_gen g = tg_json_gen_new();
	const unsigned char *buf;
	yajl_val v;
	size_t i, len;

	yajl_gen_map_open(g);
	gen_head(g, c);
	tg_json_str(g, "vesselList");
	yajl_gen_array_open(g);
	for (i = 0; i < c->nvessels; i++)
		gen_vessel(g, &c->vessels[i]);
	yajl_gen_array_close(g);
	tg_json_str(g, "personnelList");
	yajl_gen_array_open(g);
	for (i = 0; i < c->nroles; i++)
		gen_role(g, &c->roles[i]);
	yajl_gen_array_close(g);
	tg_json_str(g, "windFarms");
	yajl_gen_array_open(g);
	for (i = 0; i < c->nfarms; i++)
		gen_farm(g, &c->farms[i]);
	yajl_gen_array_close(g);
	yajl_gen_map_close(g);
	yajl_gen_get_buf(g, &buf, &len);
	v = tg_json_parse((const char *)buf, len, NULL);
	yajl_gen_free(g);
	if (v == NULL)
		abort();	/* the tables above are wrong: a build error, not input */
	return v;
}

static void
free_tree(void *v)
{
	yajl_tree_free(v);
}

void
emu_cases_init(struct tg_emu *emu)
{
	size_t i;

	emu->cases = tg_map_new(free_tree);
	emu->case_ids = tg_xcalloc(TG_NELEM(cases), sizeof(*emu->case_ids));
	for (i = 0; i < TG_NELEM(cases); i++) {
		tg_map_put(emu->cases, cases[i].id, build_case(&cases[i]));
		emu->case_ids[i] = tg_xstrdup(cases[i].id);
	}
	emu->ncases = TG_NELEM(cases);
}

void
emu_cases_free(struct tg_emu *emu)
{
	size_t i;

	tg_map_free(emu->cases);
	for (i = 0; i < emu->ncases; i++)
		free(emu->case_ids[i]);
	free(emu->case_ids);
	emu->cases = NULL;
	emu->case_ids = NULL;
	emu->ncases = 0;
}

/* Calls fn on every fixable of the case until it returns nonzero. */
static int
each_fixable(yajl_val c, int (*fn)(yajl_val fx, void *arg), void *arg)
{
	yajl_val farms = tg_json_get(c, "windFarms"), infra, fix;
	size_t i, j, k;
	int rc;

	for (i = 0; farms != NULL && YAJL_IS_ARRAY(farms) && i < farms->u.array.len; i++) {
		infra = tg_json_get(farms->u.array.values[i], "infrastructureList");
		for (j = 0; infra != NULL && YAJL_IS_ARRAY(infra) && j < infra->u.array.len;
		    j++) {
			fix = tg_json_get(infra->u.array.values[j], "fixable");
			for (k = 0; fix != NULL && YAJL_IS_ARRAY(fix) && k < fix->u.array.len; k++)
				if ((rc = fn(fix->u.array.values[k], arg)) != 0)
					return rc;
		}
	}
	return 0;
}

static int
kind_of(yajl_val fx, void *arg)
{
	int *kind = arg, k = emu_fixable_kind(tg_json_get_str(fx, "fixableType"), NULL);

	if (k == EMU_CASE_NONE || (*kind != EMU_CASE_NONE && *kind != k)) {
		*kind = EMU_CASE_NONE;
		return 1;
	}
	*kind = k;
	return 0;
}

int
emu_case_kind(yajl_val c)
{
	int kind = EMU_CASE_NONE;

	each_fixable(c, kind_of, &kind);
	return kind;
}

/* ---- validity of a submitted case ---- */

static int
num_equal(yajl_val a, yajl_val b)
{
	if (YAJL_IS_INTEGER(a) && YAJL_IS_INTEGER(b))
		return YAJL_GET_INTEGER(a) == YAJL_GET_INTEGER(b);
	if (YAJL_IS_DOUBLE(a) && YAJL_IS_DOUBLE(b))
		return YAJL_GET_DOUBLE(a) == YAJL_GET_DOUBLE(b);
	return strcmp(YAJL_GET_NUMBER(a), YAJL_GET_NUMBER(b)) == 0;
}

/*
 * Recursion follows b as well as a, so its depth is bounded by the smaller
 * tree: a base case is a handful of levels deep whatever a client sends.
 */
int
emu_json_equal(yajl_val a, yajl_val b)
{
	size_t i;

	if (a == NULL || b == NULL || a->type != b->type)
		return a == b;
	switch (a->type) {
	case yajl_t_string:
		return strcmp(a->u.string, b->u.string) == 0;
	case yajl_t_number:
		return num_equal(a, b);
	case yajl_t_object:
		if (a->u.object.len != b->u.object.len)
			return 0;
		for (i = 0; i < a->u.object.len; i++)
			if (!emu_json_equal(a->u.object.values[i],
			    tg_json_get(b, a->u.object.keys[i])))
				return 0;
		return 1;
	case yajl_t_array:
		if (a->u.array.len != b->u.array.len)
			return 0;
		for (i = 0; i < a->u.array.len; i++)
			if (!emu_json_equal(a->u.array.values[i], b->u.array.values[i]))
				return 0;
		return 1;
	default:
		return 1;
	}
}

static int
skipped(const char *key, const char *const *skip)
{
	for (; *skip != NULL; skip++)
		if (strcmp(*skip, key) == 0)
			return 1;
	return 0;
}

/* First key (of either object) whose value differs, skip excepted; NULL if equal. */
static const char *
obj_diff(yajl_val a, yajl_val b, const char *const *skip)
{
	yajl_val objs[2] = { a, b };
	size_t i, o;
	const char *k;

	if (!YAJL_IS_OBJECT(a))
		return "";
	for (o = 0; o < 2; o++) {
		for (i = 0; i < objs[o]->u.object.len; i++) {
			k = objs[o]->u.object.keys[i];
			if (!skipped(k, skip) && !emu_json_equal(tg_json_get(a, k),
			    tg_json_get(b, k)))
				return k;
		}
	}
	return NULL;
}

enum { F_REQ = 1, F_INT = 2, F_POS = 4 };

/* A number member within [lo, hi] (> lo with F_POS, integral with F_INT). */
static int
check_num(yajl_val obj, const char *key, double lo, double hi, int flags, const char *where,
    struct tg_err *err)
{
	yajl_val v = tg_json_get(obj, key);
	double d;

	if (v == NULL && !(flags & F_REQ))
		return 0;
	if (v == NULL || !YAJL_IS_DOUBLE(v))
		goto bad;
	d = YAJL_GET_DOUBLE(v);
	if (!isfinite(d) || d < lo || d > hi || ((flags & F_POS) && d <= lo) ||
	    ((flags & F_INT) && d != floor(d)))
		goto bad;
	return 0;
bad:
	tg_err_set(err, "%s/%s: must be %s in %s%g, %g]", where, key,
	    (flags & F_INT) ? "an integer" : "a number", (flags & F_POS) ? "(" : "[", lo, hi);
	return -1;
}

static int
check_str(yajl_val obj, const char *key, int flags, const char *where, struct tg_err *err)
{
	yajl_val v = tg_json_get(obj, key);

	if (v == NULL && !(flags & F_REQ))
		return 0;
	if (v != NULL && YAJL_IS_STRING(v) && v->u.string[0] != '\0')
		return 0;
	tg_err_set(err, "%s/%s: must be a non-empty string", where, key);
	return -1;
}

static int
check_vessel(yajl_val v, const char *where, struct tg_err *err)
{
	const char *charter = tg_json_get_str(v, "charterType");
	yajl_val cap = tg_json_get(v, "capacities"), lim = tg_json_get(v, "operationalLimits");

	if (!YAJL_IS_OBJECT(v)) {
		tg_err_set(err, "%s: must be an object", where);
		return -1;
	}
	if (check_str(v, "id", F_REQ, where, err) || check_str(v, "type", F_REQ, where, err) ||
	    check_num(v, "quantity", 0, 10000, F_REQ | F_INT, where, err) ||
	    check_num(v, "dayRate", 0, 1e9, F_REQ, where, err) ||
	    check_num(v, "mobilisationDays", 0, 365, 0, where, err) ||
	    check_num(v, "transitSpeedKn", 0, 100, F_POS, where, err))
		return -1;
	if (tg_json_get(v, "charterType") != NULL && (charter == NULL ||
	    (strcmp(charter, "TIME_CHARTER") != 0 && strcmp(charter, "SPOT") != 0))) {
		tg_err_set(err, "%s/charterType: must be TIME_CHARTER or SPOT", where);
		return -1;
	}
	if ((cap != NULL && !YAJL_IS_OBJECT(cap)) || (lim != NULL && !YAJL_IS_OBJECT(lim))) {
		tg_err_set(err, "%s: capacities and operationalLimits must be objects", where);
		return -1;
	}
	return check_num(cap, "technicians", 0, 10000, F_INT, where, err) ||
	    check_num(cap, "cargoTonnes", 0, 1e6, 0, where, err) ||
	    check_num(lim, "maxSignificantWaveHeightM", 0, 30, F_POS, where, err) ||
	    check_num(lim, "maxWindSpeedMs", 0, 100, F_POS, where, err) ? -1 : 0;
}

static int
check_role(yajl_val r, const char *where, struct tg_err *err)
{
	if (!YAJL_IS_OBJECT(r)) {
		tg_err_set(err, "%s: must be an object", where);
		return -1;
	}
	return check_str(r, "role", F_REQ, where, err) ||
	    check_num(r, "quantity", 0, 100000, F_REQ | F_INT, where, err) ||
	    check_num(r, "dayRate", 0, 1e7, F_REQ, where, err) ||
	    check_num(r, "shiftHours", 0, 24, F_POS, where, err) ? -1 : 0;
}

/* vesselList or personnelList: an array of well-formed entries. */
static int
check_list(yajl_val list, const char *name, int (*fn)(yajl_val, const char *, struct tg_err *),
    struct tg_err *err)
{
	char where[96];
	size_t i;

	if (list == NULL || !YAJL_IS_ARRAY(list)) {
		tg_err_set(err, "/%s: missing or not an array", name);
		return -1;
	}
	for (i = 0; i < list->u.array.len; i++) {
		snprintf(where, sizeof(where), "/%s/%zu", name, i);
		if (fn(list->u.array.values[i], where, err) != 0)
			return -1;
	}
	return 0;
}

static int
check_fixable(yajl_val fx, int kind, const char *where, struct tg_err *err)
{
	const char *type = tg_json_get_str(fx, "fixableType");
	int corrective = 0, k = emu_fixable_kind(type, &corrective);

	if (!YAJL_IS_OBJECT(fx)) {
		tg_err_set(err, "%s: must be an object", where);
		return -1;
	}
	if (check_str(fx, "id", F_REQ, where, err))
		return -1;
	if (k == EMU_CASE_NONE || k != kind) {
		tg_err_set(err, "%s/fixableType: %s is not a%s parameter", where,
		    type ? type : "(missing)", kind == EMU_CASE_OM ? "n O&M" : " construction");
		return -1;
	}
	if (check_num(fx, "durationHours", 0, 1e5, F_REQ, where, err) ||
	    check_str(fx, "vesselType", F_REQ, where, err) ||
	    check_str(fx, "technicianRole", F_REQ, where, err) ||
	    check_num(fx, "techniciansRequired", 0, 10000, F_REQ | F_INT, where, err) ||
	    check_num(fx, "partsCost", 0, 1e10, 0, where, err))
		return -1;
	if (kind == EMU_CASE_OM)
		return corrective ? check_num(fx, "failureRatePerYear", 0, 1000, F_REQ, where, err) :
		    check_num(fx, "intervalDays", 0, 36500, F_REQ | F_POS, where, err);
	return 0;
}

static int
check_fixables(yajl_val fix, int kind, const char *where, struct tg_err *err)
{
	struct tg_map *ids = NULL;
	const char *id;
	char at[160];
	size_t i;
	int rc = -1;

	if (fix == NULL || !YAJL_IS_ARRAY(fix)) {
		tg_err_set(err, "%s/fixable: missing or not an array", where);
		goto done;
	}
	ids = tg_map_new(NULL);
	for (i = 0; i < fix->u.array.len; i++) {
		snprintf(at, sizeof(at), "%s/fixable/%zu", where, i);
		if (check_fixable(fix->u.array.values[i], kind, at, err) != 0)
			goto done;
		id = tg_json_get_str(fix->u.array.values[i], "id");
		if (tg_map_get(ids, id) != NULL) {
			tg_err_set(err, "%s/id: duplicate fixable id %s", at, id);
			goto done;
		}
		tg_map_put(ids, id, fix->u.array.values[i]);
	}
	rc = 0;
done:
	tg_map_free(ids);
	return rc;
}

/* Same length as base; the caller's message names the first array that is not. */
static int
same_shape(yajl_val a, yajl_val base, const char *where, struct tg_err *err)
{
	if (a != NULL && YAJL_IS_ARRAY(a) && a->u.array.len == base->u.array.len)
		return 0;
	tg_err_set(err, "%s: must be an array of %zu entries, as in the case", where,
	    base->u.array.len);
	return -1;
}

static int
check_infra(yajl_val a, yajl_val base, int kind, const char *where, struct tg_err *err)
{
	static const char *const skip[] = { "fixable", NULL };
	const char *k;
	char at[128];
	size_t i;

	if (same_shape(a, base, where, err) != 0)
		return -1;
	for (i = 0; i < a->u.array.len; i++) {
		snprintf(at, sizeof(at), "%s/%zu", where, i);
		if ((k = obj_diff(a->u.array.values[i], base->u.array.values[i], skip)) != NULL) {
			tg_err_set(err, "%s/%s: not editable, differs from the case", at, k);
			return -1;
		}
		if (check_fixables(tg_json_get(a->u.array.values[i], "fixable"), kind, at,
		    err) != 0)
			return -1;
	}
	return 0;
}

static int
check_farms(yajl_val a, yajl_val base, int kind, struct tg_err *err)
{
	static const char *const skip[] = { "infrastructureList", NULL };
	const char *k;
	char at[64];
	size_t i;

	if (same_shape(a, base, "/windFarms", err) != 0)
		return -1;
	for (i = 0; i < a->u.array.len; i++) {
		snprintf(at, sizeof(at), "/windFarms/%zu", i);
		if ((k = obj_diff(a->u.array.values[i], base->u.array.values[i], skip)) != NULL) {
			tg_err_set(err, "%s/%s: not editable, differs from the case", at, k);
			return -1;
		}
		snprintf(at, sizeof(at), "/windFarms/%zu/infrastructureList", i);
		if (check_infra(tg_json_get(a->u.array.values[i], "infrastructureList"),
		    tg_json_get(base->u.array.values[i], "infrastructureList"), kind, at,
		    err) != 0)
			return -1;
	}
	return 0;
}

int
emu_case_validate(yajl_val sub, yajl_val base, struct tg_err *err)
{
	static const char *const skip[] = { "vesselList", "personnelList", "windFarms", NULL };
	int kind = emu_case_kind(base);
	const char *k;

	if ((k = obj_diff(sub, base, skip)) != NULL) {
		tg_err_set(err, "/%s: not editable, differs from the case", k);
		return -1;
	}
	if (check_list(tg_json_get(sub, "vesselList"), "vesselList", check_vessel, err) != 0 ||
	    check_list(tg_json_get(sub, "personnelList"), "personnelList", check_role,
	    err) != 0)
		return -1;
	return check_farms(tg_json_get(sub, "windFarms"), tg_json_get(base, "windFarms"),
	    kind, err);
}
