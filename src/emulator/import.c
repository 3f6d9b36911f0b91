/*
 * import.c - activity imports of the data exchange API: POST
 * /import/activities (JSON body) and /import/activities/file (multipart
 * upload) queue an import and answer its correlationId; GET
 * /import/status, /import/result and /import/activities/failed report on
 * it. server.c dispatches here once the token is checked; import_row.c
 * handles each row.
 *
 * Imports form one queue, as one vendor worker would: rows are processed
 * in submission order at import.rows_per_second of emulator time, so
 * advancing the test clock moves them on. Rows due by now are applied
 * lazily before every import endpoint answers, and from a timer so that
 * exports see imported rows without anyone polling the status.
 *
 * With data_dir an import is written once, when submitted: its rows, start
 * time and place in the queue. Processing is deterministic (each row is
 * applied at the time it was due), so emu_imports_load replays the queue
 * at start and rebuilds both the results and the projects' imported
 * activities. Imports, like in memory, are kept until data_dir is removed.
 */
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <yajl/yajl_parse.h>

#include "tidegate/http.h"
#include "tidegate/ids.h"
#include "tidegate/json.h"
#include "tidegate/log.h"
#include "tidegate/multipart.h"
#include "import.h"

#define TICK_MS 100

struct import_row {
	char *form;		/* packed row form of the submitted row */
	char *message;		/* failed rows only */
	enum emu_row_outcome outcome;
};

struct emu_import {
	char id[TG_UUID_LEN];
	struct emu_project *project;
	yajl_val doc;		/* the submitted rows, until all are processed */
	yajl_val *rowv;		/* borrowed from doc */
	size_t total, processed, created, updated, failed;
	int64_t start_ms;	/* when the queue reaches this import */
	struct import_row *rows;	/* outcomes of the processed rows */
};

struct emu_import_queue {
	struct emu_import **jobs;	/* submission order */
	size_t njobs;
	size_t next;		/* first import with rows left */
	int64_t busy_until_ms;	/* when the last queued row is due */
	long long seq;		/* submissions so far, numbering them for data_dir */
	struct event *timer;
};

#define IMPORTS_DIR "imports"

/* ---- the queue ---- */

static void
job_free(struct emu_import *job)
{
	size_t i;

	for (i = 0; i < job->processed; i++) {
		free(job->rows[i].form);
		free(job->rows[i].message);
	}
	free(job->rows);
	yajl_tree_free(job->doc);
	free(job);
}

void
emu_imports_free(struct tg_emu *emu)
{
	struct emu_import_queue *q = emu->importq;
	const char *k;
	void *v;
	size_t pos = 0;

	while (tg_map_next(emu->imports, &pos, &k, &v))
		job_free(v);
	tg_map_free(emu->imports);
	emu->imports = NULL;
	if (q != NULL) {
		event_free(q->timer);
		free(q->jobs);
		free(q);
		emu->importq = NULL;
	}
}

/* Milliseconds the queue needs for n rows. */
static int64_t
duration_ms(size_t n, long long rate)
{
	return (int64_t)(((unsigned long long)n * 1000 + (unsigned long long)rate - 1) /
	    (unsigned long long)rate);
}

/* Rows of job that are due at now (bounded before multiplying: no overflow). */
static size_t
rows_due(const struct emu_import *job, long long rate, int64_t now)
{
	int64_t elapsed = now - job->start_ms;

	if (elapsed <= 0)
		return 0;
	if (elapsed >= duration_ms(job->total, rate))
		return job->total;
	return (size_t)((unsigned long long)elapsed * (unsigned long long)rate / 1000);
}

static void
process(struct emu_import *job, long long rate, size_t due)
{
	struct import_row *r;
	size_t k;

	for (; job->processed < due; job->processed++) {
		k = job->processed;
		r = &job->rows[k];
		/* the time the row was due, however late it is applied */
		r->outcome = emu_import_row(job->project, job->rowv[k], k + 1,
		    job->start_ms + duration_ms(k + 1, rate), &r->message);
		r->form = emu_rowform(job->rowv[k]);
		job->created += r->outcome == EMU_ROW_CREATED;
		job->updated += r->outcome == EMU_ROW_UPDATED;
		job->failed += r->outcome == EMU_ROW_FAILED;
	}
	if (job->processed == job->total && job->doc != NULL) {
		yajl_tree_free(job->doc);
		job->doc = NULL;
		job->rowv = NULL;
		tg_log(TG_LOG_INFO, "import_done", TG_LS("correlationId", job->id),
		    TG_LI("created", job->created), TG_LI("updated", job->updated),
		    TG_LI("failed", job->failed));
	}
}

/* Apply every row due by now; later imports wait for earlier ones. */
static void
catch_up(struct tg_emu *emu)
{
	struct emu_import_queue *q = emu->importq;
	long long rate = emu->cfg->import_rows_per_second;
	int64_t now = tg_clock_now_ms();
	struct emu_import *job;

	while (q != NULL && q->next < q->njobs) {
		job = q->jobs[q->next];
		process(job, rate, rows_due(job, rate, now));
		if (job->processed < job->total)
			break;
		q->next++;
	}
}

static void
schedule(struct tg_emu *emu)
{
	struct emu_import_queue *q = emu->importq;
	struct timeval tv = { 0, TICK_MS * 1000 };

	if (q->next < q->njobs && !evtimer_pending(q->timer, NULL))
		evtimer_add(q->timer, &tv);
}

static void
on_tick(evutil_socket_t fd, short what, void *arg)
{
	catch_up(arg);
	schedule(arg);
}

static struct emu_import_queue *
queue(struct tg_emu *emu)
{
	if (emu->importq == NULL) {
		emu->importq = tg_xcalloc(1, sizeof(*emu->importq));
		emu->importq->timer = evtimer_new(emu->base, on_tick, emu);
	}
	return emu->importq;
}

/* A job for the rows in *slot, a member of doc (takes ownership), or in doc
 * itself when slot is NULL, appended to the queue from start_ms on. */
static struct emu_import *
enqueue(struct tg_emu *emu, struct emu_project *p, yajl_val doc, yajl_val *slot,
    int64_t start_ms)
{
	struct emu_import *job = tg_xcalloc(1, sizeof(*job));
	struct emu_import_queue *q = queue(emu);
	yajl_val rows;
	int64_t end;

	job->project = p;
	job->doc = doc;
	if (slot == NULL)
		slot = &job->doc;
	rows = *slot;
	job->rowv = YAJL_IS_ARRAY(rows) ? rows->u.array.values : slot;
	job->total = YAJL_IS_ARRAY(rows) ? rows->u.array.len : 1;
	job->rows = tg_xcalloc(job->total ? job->total : 1, sizeof(*job->rows));
	job->start_ms = start_ms;
	end = job->start_ms + duration_ms(job->total, emu->cfg->import_rows_per_second);
	if (end > q->busy_until_ms)
		q->busy_until_ms = end;
	q->jobs = tg_xrealloc(q->jobs, (q->njobs + 1) * sizeof(*q->jobs));
	q->jobs[q->njobs++] = job;
	return job;
}

static void
job_save(struct tg_emu *emu, const struct emu_import *job, yajl_val rows)
{
	yajl_gen g;

	if (emu->cfg->data_dir == NULL)
		return;
	g = tg_json_gen_new();
	yajl_gen_map_open(g);
	tg_json_kv_str(g, "correlationId", job->id);
	tg_json_kv_int(g, "seq", emu->importq->seq);
	tg_json_kv_str(g, "projectId", job->project->cfg->id);
	tg_json_kv_int(g, "startMs", job->start_ms);
	tg_json_str(g, "rows");
	tg_json_gen_val(g, rows);
	yajl_gen_map_close(g);
	emu_store_put(emu, IMPORTS_DIR, job->id, g);
	yajl_gen_free(g);
}

/* Queue the rows of doc (takes ownership) and answer the correlationId. */
static void
start(struct tg_emu *emu, struct evhttp_request *req, struct emu_project *p, yajl_val doc)
{
	struct emu_import_queue *q = queue(emu);
	int64_t now = tg_clock_now_ms();
	struct emu_import *job;
	yajl_gen g;

	job = enqueue(emu, p, doc, NULL, now > q->busy_until_ms ? now : q->busy_until_ms);
	tg_id_uuid4(job->id);
	q->seq++;
	job_save(emu, job, doc);
	tg_map_put(emu->imports, job->id, job);
	tg_log(TG_LOG_INFO, "import_queued", TG_LS("correlationId", job->id),
	    TG_LS("projectId", p->cfg->id), TG_LI("rows", job->total));
	catch_up(emu);
	schedule(emu);
	g = tg_json_gen_new();
	yajl_gen_map_open(g);
	tg_json_kv_str(g, "correlationId", job->id);
	yajl_gen_map_close(g);
	tg_reply_json(req, 200, g);
	yajl_gen_free(g);
}

/* ---- data_dir ---- */

/* Imports read back, until they are sorted into submission order. */
static struct {
	yajl_val *docs;
	size_t n;
} loaded;

static void
on_import_loaded(struct tg_emu *emu, const char *name, yajl_val doc)
{
	const char *id = tg_json_get_str(doc, "correlationId");

	if (id == NULL || strcmp(id, name) != 0 || strlen(id) >= TG_UUID_LEN) {
		emu_store_del(emu, IMPORTS_DIR, name);
		yajl_tree_free(doc);
		return;
	}
	loaded.docs = tg_xrealloc(loaded.docs, (loaded.n + 1) * sizeof(*loaded.docs));
	loaded.docs[loaded.n++] = doc;
}

static long long
int_of(yajl_val doc, const char *key)
{
	yajl_val v = tg_json_get(doc, key);

	return v != NULL && YAJL_IS_INTEGER(v) ? YAJL_GET_INTEGER(v) : -1;
}

static int
by_seq(const void *a, const void *b)
{
	long long x = int_of(*(const yajl_val *)a, "seq"), y = int_of(*(const yajl_val *)b, "seq");

	return x < y ? -1 : x > y;
}

/* The slot of the rows member, so that one submitted object can be a row. */
static yajl_val *
rows_slot(yajl_val doc)
{
	size_t i;

	for (i = 0; i < doc->u.object.len; i++)
		if (strcmp(doc->u.object.keys[i], "rows") == 0)
			return &doc->u.object.values[i];
	return NULL;
}

/* Takes ownership of doc: queued as it was, or dropped when unusable. */
static void
restore(struct tg_emu *emu, yajl_val doc)
{
	const char *id = tg_json_get_str(doc, "correlationId");
	struct emu_project *p = emu_project_find(emu, tg_json_get_str(doc, "projectId") ?
	    tg_json_get_str(doc, "projectId") : "");
	yajl_val *slot = rows_slot(doc);
	struct emu_import *job;

	if (p == NULL || slot == NULL || *slot == NULL || int_of(doc, "startMs") < 0 ||
	    (!YAJL_IS_ARRAY(*slot) && !YAJL_IS_OBJECT(*slot))) {
		emu_store_del(emu, IMPORTS_DIR, id);
		yajl_tree_free(doc);
		return;
	}
	job = enqueue(emu, p, doc, slot, int_of(doc, "startMs"));
	snprintf(job->id, sizeof(job->id), "%s", id);
	if (int_of(doc, "seq") > emu->importq->seq)
		emu->importq->seq = int_of(doc, "seq");
	tg_map_put(emu->imports, job->id, job);
}

void
emu_imports_load(struct tg_emu *emu)
{
	size_t i, n = emu_store_load(emu, IMPORTS_DIR, on_import_loaded);

	if (loaded.n > 1)
		qsort(loaded.docs, loaded.n, sizeof(*loaded.docs), by_seq);
	for (i = 0; i < loaded.n; i++)
		restore(emu, loaded.docs[i]);
	free(loaded.docs);
	loaded.docs = NULL;
	loaded.n = 0;
	catch_up(emu);
	if (emu->importq != NULL)
		schedule(emu);
	tg_log(TG_LOG_INFO, "data_dir_imports", TG_LI("loaded", (long long)n),
	    TG_LI("kept", (long long)tg_map_count(emu->imports)));
}

/* ---- submitting ---- */

/* The project named by the query, or NULL after replying 400/404. */
static struct emu_project *
project_of(struct tg_emu *emu, struct evhttp_request *req, int file)
{
	char *id = tg_http_query(req, "projectId"), *msg;
	struct emu_project *p = NULL;

	/* the spec's parameter table for the file upload names correlationId */
	if (id == NULL && file)
		id = tg_http_query(req, "correlationId");
	if (id == NULL || *id == '\0') {
		emu_reply_error(req, 400, file ? "projectId (or correlationId) query parameter "
		    "is required" : "projectId query parameter is required");
		goto done;
	}
	if ((p = emu_project_find(emu, id)) == NULL) {
		msg = tg_xasprintf("project '%s' not found", id);
		emu_reply_error(req, 404, msg);
		free(msg);
	}
done:
	free(id);
	return p;
}

/* Parse activities from buf: NULL with a malloc'd *msg when unusable. */
static yajl_val
parse_rows(const char *what, struct evbuffer *buf, char **msg)
{
	size_t len = evbuffer_get_length(buf);
	struct tg_err err;
	const char *data;
	yajl_val doc;

	*msg = NULL;
	if (len == 0) {
		*msg = tg_xasprintf("%s is empty; expected a JSON array of activities or one "
		    "activity object", what);
		return NULL;
	}
	data = (const char *)evbuffer_pullup(buf, -1);
	doc = tg_json_parse(data, len, &err);
	if (doc == NULL) {
		*msg = tg_xasprintf("%s: %s", what, err.msg);
	} else if (!YAJL_IS_ARRAY(doc) && !YAJL_IS_OBJECT(doc)) {
		*msg = tg_xasprintf("%s must be a JSON array of activities or one activity "
		    "object", what);
		yajl_tree_free(doc);
		doc = NULL;
	}
	return doc;
}

void
emu_h_import_json(struct tg_emu *emu, struct evhttp_request *req, const char *const *params)
{
	struct emu_project *p;
	yajl_val doc;
	char *msg;

	catch_up(emu);
	if ((p = project_of(emu, req, 0)) == NULL)
		return;
	doc = parse_rows("body", evhttp_request_get_input_buffer(req), &msg);
	if (doc == NULL) {
		emu_reply_error(req, 400, msg);
		free(msg);
		return;
	}
	start(emu, req, p, doc);
}

/* Collects the part named "file" of an upload; other parts are ignored. */
struct upload {
	struct evbuffer *file;
	int nfile;
	int in_file;
};

static int
on_part_begin(void *arg, const char *name, const char *filename, const char *ctype)
{
	struct upload *up = arg;

	up->in_file = strcmp(name, "file") == 0;
	if (up->in_file && ++up->nfile > 1)
		return -1;	/* two files: which one is meant is unknowable */
	return 0;
}

static int
on_part_data(void *arg, const char *data, size_t len)
{
	struct upload *up = arg;

	if (up->in_file)
		evbuffer_add(up->file, data, len);
	return 0;
}

static int
on_part_end(void *arg)
{
	((struct upload *)arg)->in_file = 0;
	return 0;
}

static const struct tg_multipart_cbs upload_cbs = { on_part_begin, on_part_data, on_part_end };

/* Feed the body in the chunks evbuffer holds it in: no copy of the whole. */
static int
feed(struct tg_multipart *mp, struct evbuffer *in, struct tg_err *err)
{
	int n = evbuffer_peek(in, -1, NULL, NULL, 0), i, rc = 0;
	struct evbuffer_iovec *v = tg_xcalloc(n > 0 ? (size_t)n : 1, sizeof(*v));

	n = evbuffer_peek(in, -1, NULL, v, n);
	for (i = 0; i < n && rc == 0; i++)
		rc = tg_multipart_feed(mp, v[i].iov_base, v[i].iov_len, err);
	if (rc == 0)
		rc = tg_multipart_finish(mp, err);
	free(v);
	return rc;
}

/* Extract the "file" part into up->file: 0, or an HTTP status and *msg. */
static int
read_upload(struct tg_emu *emu, struct evhttp_request *req, struct upload *up, char **msg)
{
	struct tg_multipart *mp = NULL;
	struct tg_err err;
	char *boundary;
	int status = 0;

	*msg = NULL;
	boundary = tg_multipart_boundary(tg_http_header(req, "Content-Type"), &err);
	if (boundary == NULL) {
		*msg = tg_xstrdup(err.msg);
		return 400;
	}
	mp = tg_multipart_new(boundary, &upload_cbs, up, (size_t)emu->cfg->max_body);
	if (feed(mp, evhttp_request_get_input_buffer(req), &err) != 0) {
		status = tg_multipart_too_large(mp) ? 413 : 400;
		*msg = up->nfile > 1 ? tg_xstrdup("multipart body has more than one 'file' part") :
		    tg_xasprintf("malformed multipart body: %s", err.msg);
	} else if (up->nfile == 0) {
		status = 400;
		*msg = tg_xstrdup("multipart body has no 'file' part");
	}
	tg_multipart_free(mp);
	free(boundary);
	return status;
}

void
emu_h_import_file(struct tg_emu *emu, struct evhttp_request *req, const char *const *params)
{
	struct upload up = { NULL, 0, 0 };
	struct emu_project *p;
	yajl_val doc = NULL;
	char *msg = NULL;
	int status;

	catch_up(emu);
	if ((p = project_of(emu, req, 1)) == NULL)
		return;
	up.file = evbuffer_new();
	if ((status = read_upload(emu, req, &up, &msg)) != 0) {
		emu_reply_error(req, status, msg);
		goto done;
	}
	if ((doc = parse_rows("file", up.file, &msg)) == NULL) {
		emu_reply_error(req, 400, msg);
		goto done;
	}
	start(emu, req, p, doc);
done:
	free(msg);
	evbuffer_free(up.file);
}

/* ---- reporting ---- */

/* The import named by ?correlationId=, or NULL after replying 400/404. */
static struct emu_import *
job_of(struct tg_emu *emu, struct evhttp_request *req)
{
	char *id = tg_http_query(req, "correlationId"), *msg;
	struct emu_import *job = NULL;

	catch_up(emu);
	if (id == NULL || *id == '\0') {
		emu_reply_error(req, 400, "correlationId query parameter is required");
		goto done;
	}
	if ((job = tg_map_get(emu->imports, id)) == NULL) {
		msg = tg_xasprintf("no import with correlationId '%s'", id);
		emu_reply_error(req, 404, msg);
		free(msg);
	}
done:
	free(id);
	return job;
}

void
emu_h_import_status(struct tg_emu *emu, struct evhttp_request *req, const char *const *params)
{
	struct emu_import *job = job_of(emu, req);
	yajl_gen g;
	size_t i;

	if (job == NULL)
		return;
	g = tg_json_gen_new();
	yajl_gen_map_open(g);
	tg_json_kv_str(g, "correlationId", job->id);
	tg_json_kv_int(g, "total", (long long)job->total);
	tg_json_kv_int(g, "processed", (long long)job->processed);
	tg_json_kv_int(g, "created", (long long)job->created);
	tg_json_kv_int(g, "updated", (long long)job->updated);
	tg_json_kv_int(g, "failed", (long long)job->failed);
	tg_json_kv_int(g, "deleted", 0);	/* the API has no delete operation */
	tg_json_str(g, "messages");
	yajl_gen_array_open(g);
	for (i = 0; i < job->processed; i++)
		if (job->rows[i].outcome == EMU_ROW_FAILED)
			tg_json_str(g, job->rows[i].message);
	yajl_gen_array_close(g);
	yajl_gen_map_close(g);
	tg_reply_json(req, 200, g);
	yajl_gen_free(g);
}

static void
gen_rowform(yajl_gen g, const char *form)
{
	size_t i;

	yajl_gen_map_open(g);
	for (i = 0; i < EMU_ROWFORM_NFIELDS; i++) {
		tg_json_kv_str(g, emu_rowform_fields[i], form);
		form += strlen(form) + 1;
	}
	yajl_gen_map_close(g);
}

/* Entries of one outcome: {index, id, activity} or {index, activity, message}. */
static void
gen_entries(yajl_gen g, const struct emu_import *job, enum emu_row_outcome outcome)
{
	const struct import_row *r;
	size_t i;

	yajl_gen_array_open(g);
	for (i = 0; i < job->processed; i++) {
		r = &job->rows[i];
		if (r->outcome != outcome)
			continue;
		yajl_gen_map_open(g);
		tg_json_kv_int(g, "index", (long long)i + 1);
		if (outcome != EMU_ROW_FAILED)
			tg_json_kv_str(g, "id", emu_rowform_field(r->form, 0));
		tg_json_str(g, "activity");
		gen_rowform(g, r->form);
		if (outcome == EMU_ROW_FAILED)
			tg_json_kv_str(g, "message", r->message);
		yajl_gen_map_close(g);
	}
	yajl_gen_array_close(g);
}

void
emu_h_import_result(struct tg_emu *emu, struct evhttp_request *req, const char *const *params)
{
	struct emu_import *job = job_of(emu, req);
	yajl_gen g;

	if (job == NULL)
		return;
	g = tg_json_gen_new();
	yajl_gen_map_open(g);
	tg_json_str(g, "created");
	gen_entries(g, job, EMU_ROW_CREATED);
	tg_json_str(g, "updated");
	gen_entries(g, job, EMU_ROW_UPDATED);
	tg_json_str(g, "failed");
	gen_entries(g, job, EMU_ROW_FAILED);
	yajl_gen_map_close(g);
	tg_reply_json(req, 200, g);
	yajl_gen_free(g);
}

void
emu_h_import_failed(struct tg_emu *emu, struct evhttp_request *req, const char *const *params)
{
	struct emu_import *job = job_of(emu, req);
	yajl_gen g;

	if (job == NULL)
		return;
	g = tg_json_gen_new();
	gen_entries(g, job, EMU_ROW_FAILED);
	tg_reply_json(req, 200, g);
	yajl_gen_free(g);
}
