/*
 * emu.h - private contract between the emulator's files: the shared state
 * (struct tg_emu), the seeded data model, and the route handlers that
 * server.c dispatches to. Everything here runs on one event loop.
 */
#ifndef TIDEGATE_EMU_H
#define TIDEGATE_EMU_H

#include <stdint.h>

#include <event2/http.h>
#include <yajl/yajl_gen.h>
#include <yajl/yajl_tree.h>

#include "tidegate/clock.h"
#include "tidegate/config.h"
#include "tidegate/emulator.h"
#include "tidegate/map.h"

#define EMU_NO_TIME INT64_MIN

enum emu_listener { EMU_DEX, EMU_SIM, EMU_DESIGN, EMU_AUTH, EMU_NLISTENERS };

struct emu_fault {
	char *method;		/* NULL: any */
	char *path;		/* prefix; NULL: any */
	int listener;		/* -1: any */
	int64_t latency_ms;
	double rate;		/* chance the error part applies, 0..1 */
	int status;		/* 0: no error reply */
	int retry_after;	/* seconds, with 429/503 */
	int reset;		/* reset the connection instead of replying */
	long long remaining;	/* applications left; -1 unlimited */
};

struct emu_manpower {
	char *team;
	long long n;
};

/** An activity in export-record form plus the import-only fields. */
struct emu_activity {
	char *id, *site_id, *asset_id, *name, *category, *status, *type;
	char *work_package_id, *work_order_id, *internal_remarks, *external_remarks;
	int64_t start_ms, end_ms, created_ms, updated_ms;	/* EMU_NO_TIME: unset */
	int additional_client_work;	/* -1 unset */
	struct tg_strlist teams, personnel_ids;
	struct emu_manpower *manpower;
	size_t nmanpower;
};

/** A project's state: the generated set (from cfg) plus imported changes. */
struct emu_project {
	const struct tg_emu_project *cfg;
	int64_t epoch_ms;		/* base of generated dates (fixed: 2024-01-01) */
	struct tg_map *overlay;		/* id -> struct emu_activity * (imported) */
	char **new_ids;			/* imported ids that are not generated, in order */
	size_t nnew;
};

struct tg_emu {
	const struct tg_emu_config *cfg;
	struct event_base *base;
	struct evhttp *http[EMU_NLISTENERS];
	int port[EMU_NLISTENERS];
	char dex_secret[65], sim_secret[65];
	long long token_gen;		/* tokens of older generations are revoked */
	struct tg_map *calls;		/* "METHOD /path" -> long long * */
	struct tg_map *calls_by[EMU_NLISTENERS];
	struct emu_fault *faults;
	size_t nfaults;
	struct emu_project *projects;
	size_t nprojects;
	struct tg_map *exports;		/* correlationId -> export job (export.c) */
	struct tg_map *imports;		/* correlationId -> import job (import.c) */
	struct emu_import_queue *importq;	/* import order and timer (import.c) */
	struct tg_map *sims;		/* simulation id -> run (sim.c) */
	struct tg_map *cases;		/* case id -> yajl_val partial case (sim.c) */
	char **case_ids;		/* in listing order */
	size_t ncases;
	struct emu_stream *streams;	/* open export streams (export.c) */
	struct emu_pending *pending;	/* requests delayed by fault latency (server.c) */
};

/** Route handler; params holds the '*' segments of the route pattern. */
typedef void (*emu_handler)(struct tg_emu *emu, struct evhttp_request *req,
    const char *const *params);

/* ---- store.c: data_dir files (only called when cfg->data_dir is set) ---- */
/** Create data_dir and its job folders (0700); -1 with err. */
int emu_store_open(struct tg_emu *emu, struct tg_err *err);
/** Write g's buffer (borrowed) as <data_dir>[/dir]/name.json, atomically and
 * durably (dir NULL: data_dir itself); -1 when it failed (logged). */
int emu_store_put(struct tg_emu *emu, const char *dir, const char *name, yajl_gen g);
/** Remove dir/name.json; a no-op without data_dir. */
void emu_store_del(struct tg_emu *emu, const char *dir, const char *name);
/** Parsed <data_dir>[/dir]/name.json, which the caller owns (yajl_tree_free),
 * or NULL when absent or unreadable. */
yajl_val emu_store_get(struct tg_emu *emu, const char *dir, const char *name);
/** Called per stored job: name is borrowed, doc (a JSON object) is owned by cb. */
typedef void (*emu_store_cb)(struct tg_emu *emu, const char *name, yajl_val doc);
/** Detach member key from obj (borrowed): the caller owns the result, which
 * yajl_tree_free(obj) no longer frees; NULL when absent. */
yajl_val emu_store_take(yajl_val obj, const char *key);
/** Pass every job file of dir to cb, in no particular order; how many. */
size_t emu_store_load(struct tg_emu *emu, const char *dir, emu_store_cb cb);

/* ---- meta.c: token keys, revocation generation, clock offset ---- */
/** Restore them from data_dir (then save, so a first start records its keys). */
void emu_meta_load(struct tg_emu *emu);
/** Save them; a no-op without data_dir. */
void emu_meta_save(struct tg_emu *emu);

/* ---- server.c ---- */
const char *emu_listener_name(int l);

/* ---- reply.c ---- */
/** Reply with the emulator's error shape {statusCode, error, message}.
 * req is borrowed (answered here); message is borrowed. */
void emu_reply_error(struct evhttp_request *req, int status, const char *message);

/* ---- auth.c ---- */
void emu_h_authenticate(struct tg_emu *emu, struct evhttp_request *req, const char *const *p);
void emu_h_oauth_token(struct tg_emu *emu, struct evhttp_request *req, const char *const *p);
/** 0 when the request carries a valid, unrevoked token for the service. */
int emu_auth_check_dex(struct tg_emu *emu, struct evhttp_request *req);
int emu_auth_check_sim(struct tg_emu *emu, struct evhttp_request *req);
/** HS256 JWT with sub, iat, exp, gen; malloc'd. */
char *emu_jwt_sign(const char *secret, const char *sub, int64_t iat_s, int64_t exp_s,
    long long gen);
/** 0 if the signature, exp (against the emulator clock) and gen hold. */
int emu_jwt_verify(const char *secret, const char *token, long long min_gen);

/* ---- control.c ---- */
void emu_control(struct tg_emu *emu, struct evhttp_request *req, const char *path);
void emu_faults_clear(struct tg_emu *emu);

/* ---- data.c: seeded data set ---- */
void emu_projects_init(struct tg_emu *emu);
void emu_projects_free(struct tg_emu *emu);
struct emu_project *emu_project_find(struct tg_emu *emu, const char *id);
int emu_data_site_exists(const struct emu_project *p, const char *site_id);
/** Index of a generated activity id ("ACT-000123" -> 122), or -1. */
long long emu_data_activity_index(const struct emu_project *p, const char *id);
/** Fill out with generated activity i (heap fields; emu_activity_cleanup). */
void emu_data_activity(const struct emu_project *p, long long i, struct emu_activity *out);
/** Current version of an activity by id: overlay, else generated; 0 if found. */
int emu_data_activity_get(const struct emu_project *p, const char *id,
    struct emu_activity *out);
/** Store an imported activity (takes ownership of a). */
void emu_data_activity_put(struct emu_project *p, struct emu_activity *a);
void emu_activity_copy(struct emu_activity *dst, const struct emu_activity *src);
void emu_activity_cleanup(struct emu_activity *a);

/** Record kinds; the value doubles as the kind argument of emu_data_rand. */
enum emu_kind {
	EMU_K_ACTIVITY = 1, EMU_K_CATEGORY, EMU_K_PERSONNEL, EMU_K_TIMESHEET,
	EMU_K_WOS, EMU_K_WO, EMU_K_WP
};

/** Stateless hash of (project seed, kind, index, field). */
uint64_t emu_data_rand(const struct emu_project *p, int kind, long long i, int field);

/** Storage behind an activity from emu_data_activity_view (no heap). */
struct emu_activity_buf {
	char id[32], site[32], asset[48], name[40], category[32], status[16], type[16];
	char wp[32], wo[32], remarks[48], team[2][16], per[32];
	char *teams[2], *per_ids[1];
	struct emu_manpower mp[2];
};
/**
 * Generated activity i with every string in buf: out is valid while buf
 * is and must not be cleaned up. emu_data_activity is this plus a copy.
 */
void emu_data_activity_view(const struct emu_project *p, long long i, struct emu_activity *out,
    struct emu_activity_buf *buf);

/*
 * A record of any export kind as an ordered list of typed fields: the one
 * shape that export filters read and the JSON writer walks. Strings are
 * borrowed (from the record's arena, or from an activity that outlives it).
 */
enum emu_ftype { EMU_F_STR, EMU_F_LIST, EMU_F_TIME, EMU_F_INT, EMU_F_ENTRIES };

struct emu_time_entry {
	const char *id, *activity_id, *work_package_id, *personnel_id;	/* NULL: unset */
	int64_t date_ms;
	long long hours;
};

struct emu_field {
	const char *key;		/* JSON member name (static) */
	enum emu_ftype type;
	int hidden;			/* filterable, not exported */
	const char *s;			/* STR; NULL writes null */
	const char *const *v;		/* LIST */
	const struct emu_time_entry *te;	/* ENTRIES */
	size_t n;			/* LIST, ENTRIES */
	int64_t t;			/* TIME (EMU_NO_TIME writes null), INT */
};

#define EMU_REC_MAXF	24
#define EMU_REC_MAXV	32
#define EMU_REC_MAXTE	4
#define EMU_REC_ARENA	1536

struct emu_rec {
	struct emu_field f[EMU_REC_MAXF];
	size_t nf;
	const char *vals[EMU_REC_MAXV];	/* elements of LIST fields, contiguous per field */
	size_t nvals;
	struct emu_time_entry te[EMU_REC_MAXTE];
	size_t nte;
	char arena[EMU_REC_ARENA];
	size_t used;
};

void emu_rec_init(struct emu_rec *r);
/** Append a zeroed field (t = EMU_NO_TIME); aborts past EMU_REC_MAXF. */
struct emu_field *emu_rec_add(struct emu_rec *r, const char *key, enum emu_ftype type);
/** Field by key, or NULL. */
const struct emu_field *emu_rec_get(const struct emu_rec *r, const char *key);
/** Number of generated records of a kind (from the project's config). */
long long emu_data_count(const struct emu_project *p, enum emu_kind k);
/** Generated record i (0-based) of a kind other than activities. */
void emu_data_record(const struct emu_project *p, enum emu_kind k, long long i,
    struct emu_rec *r);

/* ---- export.c ---- */
void emu_h_export_create(struct tg_emu *emu, struct evhttp_request *req, const char *const *p);
void emu_h_export_get(struct tg_emu *emu, struct evhttp_request *req, const char *const *p);
void emu_exports_free(struct tg_emu *emu);
/** Restore the exports of data_dir (callbacks not yet sent are scheduled). */
void emu_exports_load(struct tg_emu *emu);

/* ---- import.c ---- */
void emu_h_import_json(struct tg_emu *emu, struct evhttp_request *req, const char *const *p);
void emu_h_import_file(struct tg_emu *emu, struct evhttp_request *req, const char *const *p);
void emu_h_import_status(struct tg_emu *emu, struct evhttp_request *req, const char *const *p);
void emu_h_import_result(struct tg_emu *emu, struct evhttp_request *req, const char *const *p);
void emu_h_import_failed(struct tg_emu *emu, struct evhttp_request *req, const char *const *p);
void emu_imports_free(struct tg_emu *emu);
/** Restore the imports of data_dir and replay their rows due by now, in
 * submission order, so the projects hold the same imported activities. */
void emu_imports_load(struct tg_emu *emu);

/* ---- sim.c ---- */
void emu_sim_init(struct tg_emu *emu);
void emu_h_cases_list(struct tg_emu *emu, struct evhttp_request *req, const char *const *p);
void emu_h_case_get(struct tg_emu *emu, struct evhttp_request *req, const char *const *p);
void emu_h_sim_submit(struct tg_emu *emu, struct evhttp_request *req, const char *const *p);
void emu_h_sim_status(struct tg_emu *emu, struct evhttp_request *req, const char *const *p);
void emu_h_sim_results(struct tg_emu *emu, struct evhttp_request *req, const char *const *p);
void emu_h_sim_list(struct tg_emu *emu, struct evhttp_request *req, const char *const *p);
void emu_sim_free(struct tg_emu *emu);
/** Restore the runs of data_dir. */
void emu_sim_load(struct tg_emu *emu);

#endif
