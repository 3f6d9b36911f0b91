/*
 * results.c - the emulator's simulation model, called by sim.c once per
 * valid submission. The vendor does not describe its simulator; this is
 * a closed-form stand-in that answers instantly, gives the same results
 * for the same case, and moves the way analysts expect when they edit the
 * editable sections: more vessels or technicians never lower availability
 * nor delay completion. docs/emulator.md lists the formulas.
 *
 * Resources are pooled by vessel type and by technician role: a pool adds
 * up the quantities of its entries and takes the best operational limit,
 * transit speed and mobilisation of them, which is what keeps the model
 * monotone when entries are added.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/clock.h"
#include "tidegate/json.h"
#include "tidegate/map.h"
#include "emu_case.h"

#define DAY_MS 86400000.0
#define KN_KMH 1.852
#define Q_KNEE 0.95		/* queue growth turns linear above this utilisation */
#define WORK_SHARE 0.5		/* O&M: one 12-hour shift a day, crews on 2-on/2-off rotation */
#define WINDY 1.5		/* waiting for waves costs more energy: waves come with wind */

enum { T_CORRECTIVE, T_SCHEDULED, T_INSTALL, T_COMMISSION };

struct pool {
	const char *name;	/* borrowed from the case */
	double qty, limit, speed, mob, shift;
	double access;		/* share of time the sea state is within limit */
	double demand, supply, rho;
	double used;		/* vessel-days worked, for spot charters */
};

struct pools {
	struct pool *p;
	size_t n, cap;
	struct tg_map *index;	/* name -> position + 1, so cases with many entries stay fast */
};

struct task {
	int phase;
	double n, h, k, parts, dist;
	size_t v, r, asset;
};

struct asset {
	size_t farm;
	int wtg;
	double mw, dt, wdt;
};

struct model {
	int kind;
	int64_t start_ms;
	double days, hours, hs, cf;
	struct pools vessels, roles;
	struct task *tasks;
	size_t ntasks, tcap;
	struct asset *assets;
	size_t nassets, acap, nfarms;
};

static double
num(yajl_val obj, const char *key, double dflt)
{
	yajl_val v = tg_json_get(obj, key);

	return v != NULL && YAJL_IS_DOUBLE(v) ? YAJL_GET_DOUBLE(v) : dflt;
}

/* Room for element n of arr, doubling its capacity when full. */
static void *
grow(void *arr, size_t n, size_t *cap, size_t size)
{
	if (n < *cap)
		return arr;
	*cap = *cap > 0 ? *cap * 2 : 16;
	return tg_xrealloc(arr, *cap * size);
}

static size_t
pool_get(struct pools *ps, const char *name)
{
	uintptr_t at;

	if (ps->index == NULL)
		ps->index = tg_map_new(NULL);
	if ((at = (uintptr_t)tg_map_get(ps->index, name)) != 0)
		return at - 1;
	ps->p = grow(ps->p, ps->n, &ps->cap, sizeof(*ps->p));
	tg_map_put(ps->index, name, (void *)(uintptr_t)(ps->n + 1));
	memset(&ps->p[ps->n], 0, sizeof(*ps->p));
	ps->p[ps->n].name = name;
	ps->p[ps->n].mob = INFINITY;
	return ps->n++;
}

/* The pool's address, taken after pool_get may have moved the array. */
static struct pool *
pool_at(struct pools *ps, const char *name)
{
	size_t i = pool_get(ps, name);

	return &ps->p[i];
}

static void
add_resources(struct model *m, yajl_val c)
{
	yajl_val vl = tg_json_get(c, "vesselList"), pl = tg_json_get(c, "personnelList"), e;
	struct pool *p;
	double q;
	size_t i;

	for (i = 0; i < vl->u.array.len; i++) {
		e = vl->u.array.values[i];
		if ((q = num(e, "quantity", 0)) <= 0)
			continue;	/* a vessel nobody hired brings no capability */
		p = pool_at(&m->vessels, tg_json_get_str(e, "type"));
		p->qty += q;
		p->limit = fmax(p->limit, num(tg_json_get(e, "operationalLimits"),
		    "maxSignificantWaveHeightM", 1.5));
		p->speed = fmax(p->speed, num(e, "transitSpeedKn", 20));
		p->mob = fmin(p->mob, num(e, "mobilisationDays", 0));
	}
	for (i = 0; i < pl->u.array.len; i++) {
		e = pl->u.array.values[i];
		if ((q = num(e, "quantity", 0)) <= 0)
			continue;
		p = pool_at(&m->roles, tg_json_get_str(e, "role"));
		p->qty += q;
		p->shift = fmax(p->shift, num(e, "shiftHours", 12));
	}
}

static void
add_task(struct model *m, yajl_val fx, size_t asset, double dist)
{
	const char *type = tg_json_get_str(fx, "fixableType");
	struct task *t;
	int corrective = 0, kind = emu_fixable_kind(type, &corrective);

	m->tasks = grow(m->tasks, m->ntasks, &m->tcap, sizeof(*m->tasks));
	t = &m->tasks[m->ntasks++];
	t->h = num(fx, "durationHours", 0);
	t->k = num(fx, "techniciansRequired", 0);
	t->parts = num(fx, "partsCost", 0);
	t->dist = dist;
	t->asset = asset;
	t->v = pool_get(&m->vessels, tg_json_get_str(fx, "vesselType"));
	t->r = pool_get(&m->roles, tg_json_get_str(fx, "technicianRole"));
	if (kind == EMU_CASE_CONSTRUCTION) {
		t->phase = strcmp(type, "COMMISSIONING_TASK") == 0 ? T_COMMISSION : T_INSTALL;
		t->n = 1;
	} else if (corrective) {
		t->phase = T_CORRECTIVE;
		t->n = num(fx, "failureRatePerYear", 0) * m->days / 365;
	} else {
		t->phase = T_SCHEDULED;
		t->n = m->days / num(fx, "intervalDays", 365);
	}
}

static void
add_assets(struct model *m, yajl_val farms)
{
	yajl_val infra, a, fix;
	struct asset *as;
	double dist;
	size_t i, j, k;

	m->nfarms = farms->u.array.len;
	for (i = 0; i < farms->u.array.len; i++) {
		dist = num(farms->u.array.values[i], "distanceToPortKm", 0);
		infra = tg_json_get(farms->u.array.values[i], "infrastructureList");
		for (j = 0; j < infra->u.array.len; j++) {
			a = infra->u.array.values[j];
			m->assets = grow(m->assets, m->nassets, &m->acap, sizeof(*m->assets));
			as = &m->assets[m->nassets];
			memset(as, 0, sizeof(*as));
			as->farm = i;
			as->wtg = tg_json_get_str(a, "type") != NULL &&
			    strcmp(tg_json_get_str(a, "type"), "WTG") == 0;
			as->mw = num(a, "ratedPowerMW", 0);
			fix = tg_json_get(a, "fixable");
			for (k = 0; k < fix->u.array.len; k++)
				add_task(m, fix->u.array.values[k], m->nassets, dist);
			m->nassets++;
		}
	}
}

static void
model_init(struct model *m, yajl_val c, int kind)
{
	int64_t end = 0;
	struct pool *p;
	size_t i;

	memset(m, 0, sizeof(*m));
	m->kind = kind;
	if (tg_clock_parse_iso(tg_json_get_str(c, "startDate"), &m->start_ms) != 0 ||
	    tg_clock_parse_iso(tg_json_get_str(c, "endDate"), &end) != 0 || end <= m->start_ms)
		end = m->start_ms + 365 * (int64_t)DAY_MS;
	m->days = (double)(end - m->start_ms) / DAY_MS;
	m->hours = 24 * m->days;
	m->hs = num(tg_json_get(c, "weather"), "meanSignificantWaveHeightM", 1.5);
	m->cf = num(tg_json_get(c, "weather"), "capacityFactor", 0.45);
	add_resources(m, c);
	add_assets(m, tg_json_get(c, "windFarms"));
	for (i = 0; i < m->vessels.n; i++) {
		p = &m->vessels.p[i];
		/* Rayleigh-distributed significant wave height with the site's mean. */
		p->access = m->hs > 0 ? 1 - exp(-M_PI / 4 * pow(p->limit / m->hs, 2)) : 1;
	}
}

static void
model_cleanup(struct model *m)
{
	free(m->vessels.p);
	free(m->roles.p);
	tg_map_free(m->vessels.index);
	tg_map_free(m->roles.index);
	free(m->tasks);
	free(m->assets);
}

static int
feasible(const struct model *m, const struct task *t)
{
	const struct pool *v = &m->vessels.p[t->v], *r = &m->roles.p[t->r];

	return v->qty > 0 && v->access > 0 && r->qty >= t->k;
}

static double
transit(const struct model *m, const struct task *t)
{
	double speed = m->vessels.p[t->v].speed;

	return speed > 0 ? t->dist / (speed * KN_KMH) : 0;
}

static double
ratio(double demand, double supply)
{
	return supply > 0 ? demand / supply : demand > 0 ? INFINITY : 0;
}

/* Waiting time per unit of work at utilisation rho (M/M/1, linear past the knee). */
static double
queue_factor(double rho)
{
	if (rho < Q_KNEE)
		return rho / (1 - rho);
	return Q_KNEE / (1 - Q_KNEE) + 100 * (rho - Q_KNEE);
}

/* ---- O&M ---- */

static void
om_load(struct model *m)
{
	struct task *t;
	struct pool *v, *r;
	double hours;
	size_t i;

	for (i = 0; i < m->ntasks; i++) {
		t = &m->tasks[i];
		v = &m->vessels.p[t->v];
		r = &m->roles.p[t->r];
		hours = t->h + 2 * transit(m, t);
		v->demand += t->n * hours;
		r->demand += t->n * t->k * hours;
		if (v->qty > 0)
			v->used += t->n * (hours / 24 + (t->phase == T_CORRECTIVE ? v->mob : 0));
	}
	for (i = 0; i < m->vessels.n; i++) {
		v = &m->vessels.p[i];
		v->supply = v->qty * v->access * m->hours * WORK_SHARE;
		v->rho = ratio(v->demand, v->supply);
	}
	for (i = 0; i < m->roles.n; i++) {
		r = &m->roles.p[i];
		r->supply = r->qty * r->shift * m->days * WORK_SHARE;
		r->rho = ratio(r->demand, r->supply);
	}
}

/* Hours one occurrence keeps its asset down; ww weighs the wait for weather. */
static double
om_occurrence(const struct model *m, const struct task *t, double ww)
{
	const struct pool *v = &m->vessels.p[t->v], *r = &m->roles.p[t->r];
	double cap = m->hours / 2, wait = 0;

	if (!feasible(m, t))
		return cap;	/* work nobody can do: down half the period on average */
	if (t->h > 0)
		wait = t->h * (queue_factor(v->rho) + queue_factor(r->rho));
	if (t->phase == T_CORRECTIVE)
		wait += 24 * v->mob + transit(m, t) + ww * 24 * (1 - v->access) / v->access;
	return fmin(cap, wait + t->h);
}

struct om_kpi {
	double tba, eba, downtime, lost_mwh, repairs, scheduled;
};

static void
om_downtime(struct model *m, struct om_kpi *k)
{
	double *fdt = tg_xcalloc(m->nfarms, sizeof(double) * 2), nwtg = 0, mw = 0, d, wd;
	struct asset *a;
	size_t i;

	for (i = 0; i < m->ntasks; i++) {
		a = &m->assets[m->tasks[i].asset];
		a->dt += m->tasks[i].n * om_occurrence(m, &m->tasks[i], 1);
		a->wdt += m->tasks[i].n * om_occurrence(m, &m->tasks[i], WINDY);
	}
	for (i = 0; i < m->nassets; i++) {
		a = &m->assets[i];
		if (!a->wtg) {	/* a substation outage stops its whole farm */
			fdt[2 * a->farm] += fmin(m->hours, a->dt);
			fdt[2 * a->farm + 1] += fmin(m->hours, a->wdt);
		}
	}
	memset(k, 0, sizeof(*k));
	for (i = 0; i < m->nassets; i++) {
		a = &m->assets[i];
		if (!a->wtg)
			continue;
		d = fmin(m->hours, a->dt + fdt[2 * a->farm]);
		wd = fmin(m->hours, a->wdt + fdt[2 * a->farm + 1]);
		nwtg++;
		mw += a->mw;
		k->downtime += d;
		k->lost_mwh += a->mw * wd * m->cf;
		k->eba += a->mw * wd;
	}
	k->tba = nwtg > 0 ? 1 - k->downtime / (nwtg * m->hours) : 1;
	k->eba = mw > 0 ? 1 - k->eba / (mw * m->hours) : k->tba;
	free(fdt);
}

static void
om_counts(const struct model *m, struct om_kpi *k)
{
	const struct task *t;
	double share;
	size_t i;

	for (i = 0; i < m->ntasks; i++) {
		t = &m->tasks[i];
		if (!feasible(m, t))
			continue;
		/* An overloaded pool only gets through 1/rho of its work. */
		share = fmax(m->vessels.p[t->v].rho, m->roles.p[t->r].rho);
		share = share > 1 ? 1 / share : 1;
		if (t->phase == T_CORRECTIVE)
			k->repairs += t->n * share;
		else
			k->scheduled += t->n * share;
	}
}

/* ---- Construction ---- */

/*
 * Days a phase takes: its slowest vessel or crew pool, INFINITY when a task
 * has no vessel of its type or fewer technicians than it needs. Vessels
 * work around the clock and crews in shifts, both stretched by the share
 * of time the sea is outside the vessel's limit.
 */
static double
con_phase(struct model *m, int phase, int weather, int account)
{
	double *vh = tg_xcalloc(m->vessels.n, sizeof(double));
	double *rh = tg_xcalloc(m->roles.n, sizeof(double)), days = 0, stretch;
	const struct task *t;
	size_t i;

	for (i = 0; i < m->ntasks; i++) {
		t = &m->tasks[i];
		if (t->phase != phase)
			continue;
		if (!feasible(m, t)) {
			days = INFINITY;
			continue;
		}
		stretch = weather ? 1 / m->vessels.p[t->v].access : 1;
		vh[t->v] += (t->h + 2 * transit(m, t)) * stretch;
		rh[t->r] += t->k * t->h * stretch;	/* crews wait on board too */
	}
	for (i = 0; i < m->vessels.n; i++) {
		if (vh[i] > 0)
			days = fmax(days, vh[i] / (24 * m->vessels.p[i].qty));
		if (account)
			m->vessels.p[i].used += vh[i] / 24;
	}
	for (i = 0; i < m->roles.n; i++)
		if (rh[i] > 0)
			days = fmax(days, rh[i] / (m->roles.p[i].qty * m->roles.p[i].shift));
	free(vh);
	free(rh);
	return days;
}

/* Share of a phase's tasks done by the horizon, the phase running at an even pace. */
static double
done_share(double start, double dur, double horizon)
{
	if (start + dur <= horizon)
		return 1;
	if (dur <= 0 || start >= horizon)
		return 0;
	return (horizon - start) / dur;
}

struct con_kpi {
	double mob, inst, com, computed, completion, delay;
	double ninst, ncom, inst_done, com_done;
};

static void
con_schedule(struct model *m, struct con_kpi *k)
{
	const struct task *t;
	double calm;
	size_t i;

	memset(k, 0, sizeof(*k));
	for (i = 0; i < m->ntasks; i++) {
		t = &m->tasks[i];
		if (t->phase == T_INSTALL)
			k->ninst++;
		else
			k->ncom++;
		if (feasible(m, t))	/* the fleet sails once the last vessel is there */
			k->mob = fmax(k->mob, m->vessels.p[t->v].mob);
	}
	k->inst = con_phase(m, T_INSTALL, 1, 1);
	k->com = con_phase(m, T_COMMISSION, 1, 1);
	k->computed = k->mob + k->inst + k->com;
	calm = k->mob + con_phase(m, T_INSTALL, 0, 0) + con_phase(m, T_COMMISSION, 0, 0);
	k->completion = fmin(m->days, k->computed);
	k->delay = k->completion - fmin(m->days, calm);
	k->inst_done = floor(k->ninst * done_share(k->mob, k->inst, m->days) + 1e-9);
	k->com_done = floor(k->ncom * done_share(k->mob + k->inst, k->com, m->days) + 1e-9);
	for (i = 0; i < m->vessels.n; i++) {
		m->vessels.p[i].rho = k->completion > 0 && m->vessels.p[i].qty > 0 ?
		    fmin(1, m->vessels.p[i].used / (m->vessels.p[i].qty * k->completion)) : 0;
		if (m->vessels.p[i].used > 0)
			m->vessels.p[i].used += m->vessels.p[i].mob;
	}
}

/* ---- output ---- */

static void
kv_fixed(yajl_gen g, const char *key, double v, int decimals)
{
	char buf[512], *e;
	int n;

	tg_json_str(g, key);
	if (!isfinite(v)) {
		yajl_gen_null(g);
		return;
	}
	n = snprintf(buf, sizeof(buf), "%.*f", decimals, v);
	if (strchr(buf, '.') != NULL) {
		for (e = buf + n - 1; *e == '0'; e--)
			*e = '\0';
		if (*e == '.')
			*e = '\0';
	}
	if (strcmp(buf, "-0") == 0)
		strcpy(buf, "0");
	yajl_gen_number(g, buf, strlen(buf));
}

static void
gen_util(yajl_gen g, const char *key, const struct pools *ps)
{
	size_t i;

	tg_json_str(g, key);
	yajl_gen_map_open(g);
	for (i = 0; i < ps->n; i++)
		if (ps->p[i].qty > 0)
			kv_fixed(g, ps->p[i].name, fmin(1, ps->p[i].rho), 4);
	yajl_gen_map_close(g);
}

/* Time-chartered vessels and crews are paid for hire_days; spot vessels for work done. */
static void
gen_costs(yajl_gen g, struct model *m, yajl_val c, double hire_days)
{
	yajl_val vl = tg_json_get(c, "vesselList"), pl = tg_json_get(c, "personnelList"), e;
	double vessel = 0, crew = 0, parts = 0, q, rate;
	const char *charter;
	struct pool *p;
	size_t i;

	for (i = 0; i < vl->u.array.len; i++) {
		e = vl->u.array.values[i];
		if ((q = num(e, "quantity", 0)) <= 0)
			continue;
		rate = num(e, "dayRate", 0);
		charter = tg_json_get_str(e, "charterType");
		p = pool_at(&m->vessels, tg_json_get_str(e, "type"));
		vessel += charter != NULL && strcmp(charter, "SPOT") == 0 ?
		    rate * p->used * q / p->qty : q * rate * hire_days;
	}
	for (i = 0; i < pl->u.array.len; i++) {
		e = pl->u.array.values[i];
		crew += fmax(0, num(e, "quantity", 0)) * num(e, "dayRate", 0) * hire_days;
	}
	for (i = 0; i < m->ntasks; i++)
		parts += m->tasks[i].n * m->tasks[i].parts;
	kv_fixed(g, "vesselCost", vessel, 0);
	kv_fixed(g, "personnelCost", crew, 0);
	kv_fixed(g, "partsCost", parts, 0);
	kv_fixed(g, "totalCost", vessel + crew + parts, 0);
}

static void
gen_om(yajl_gen g, struct model *m, yajl_val c)
{
	struct om_kpi k;

	om_load(m);
	om_downtime(m, &k);
	om_counts(m, &k);
	kv_fixed(g, "availability", k.tba, 6);
	kv_fixed(g, "timeBasedAvailability", k.tba, 6);
	kv_fixed(g, "energyBasedAvailability", k.eba, 6);
	kv_fixed(g, "downtimeHours", k.downtime, 1);
	kv_fixed(g, "lostProductionMWh", k.lost_mwh, 1);
	kv_fixed(g, "repairsCompleted", round(k.repairs), 0);
	kv_fixed(g, "scheduledTasksCompleted", round(k.scheduled), 0);
	gen_util(g, "vesselUtilisation", &m->vessels);
	gen_util(g, "technicianUtilisation", &m->roles);
	gen_costs(g, m, c, m->days);
}

static void
gen_con(yajl_gen g, struct model *m, yajl_val c)
{
	char iso[TG_ISO_LEN];
	struct con_kpi k;

	con_schedule(m, &k);
	k.completion = round(k.completion * 100) / 100;	/* the date matches the days shown */
	tg_clock_iso(m->start_ms + (int64_t)llround(k.completion * DAY_MS), iso);
	kv_fixed(g, "completionDays", k.completion, 2);
	tg_json_kv_str(g, "completionDate", iso);
	tg_json_kv_bool(g, "allTasksCompleted", k.computed <= m->days);
	kv_fixed(g, "installationTasksTotal", k.ninst, 0);
	kv_fixed(g, "installationTasksCompleted", k.inst_done, 0);
	kv_fixed(g, "commissioningTasksTotal", k.ncom, 0);
	kv_fixed(g, "commissioningTasksCompleted", k.com_done, 0);
	kv_fixed(g, "mobilisationDays", k.mob, 2);
	kv_fixed(g, "weatherDelayDays", k.delay, 2);
	gen_util(g, "vesselUtilisation", &m->vessels);
	gen_costs(g, m, c, k.completion);
}

yajl_val
emu_results_compute(yajl_val c, int kind)
{
	yajl_gen g = tg_json_gen_new();
	const unsigned char *buf;
	struct model m;
	yajl_val v;
	size_t len;

	model_init(&m, c, kind);
	yajl_gen_map_open(g);
	tg_json_kv_str(g, "caseType", emu_case_kind_name(kind));
	kv_fixed(g, "simulationPeriodDays", m.days, 2);
	if (kind == EMU_CASE_OM)
		gen_om(g, &m, c);
	else
		gen_con(g, &m, c);
	yajl_gen_map_close(g);
	yajl_gen_get_buf(g, &buf, &len);
	v = tg_json_parse((const char *)buf, len, NULL);
	yajl_gen_free(g);
	model_cleanup(&m);
	return v;
}
