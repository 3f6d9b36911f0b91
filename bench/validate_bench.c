/*
 * validate_bench.c - throughput of the streaming import check against a
 * bare yajl parse of the same bytes (the target: the check costs at most
 * 1.3 times the parse). bench/validate.sh builds and runs it pinned to one
 * core:
 *
 *     build-release/bench/validate_bench [MB] [ROUNDS]
 *
 * A realistic import of MB megabytes (default 200) is generated once: every
 * activity carries all fields of spec part 2, values varied as exports
 * vary them. It is held in an evbuffer cut into 4 KB chains, as evhttp
 * reads a body. Each round times, interleaved so drift hits all alike:
 * (a) yajl_parse with no callbacks over the same chains, (b)
 * tg_import_check_json, (c) tg_import_check_multipart over the same JSON
 * as the `file` part of an upload. Each run is timed by the thread's CPU
 * clock (user and system time, so page faults count; time the thread
 * spends preempted on a shared core does not) and by the wall clock.
 * Reported: MB/s of CPU time as median and min-max, then for both clocks
 * the ratio of the medians and the median (min-max) of the ratios within
 * each round, whose runs are adjacent and so share the machine's state.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <event2/buffer.h>
#include <yajl/yajl_parse.h>

#include "tidegate/dex.h"

#define CHAIN 4096
#define BND "bench-bnd-5d1c"
#define MAX_ROUNDS 50

static uint32_t seed = 12345;

static uint32_t
rnd(uint32_t n)
{
	seed = seed * 1103515245u + 12345u;
	return (seed >> 8) % n;
}

static const char *const statuses[] = { "PLANNED", "DISPATCHED", "COMPLETED" };
static const char *const teams[] = { "Alpha", "Bravo", "Charlie", "Delta", "Echo" };
static const char *const categories[] = { "Inspection", "Corrective maintenance",
	"Blade repair", "Cable survey", "Transfer" };

static int
add_list(char *o, size_t n, const char *key, int count, int personnel)
{
	int i, k = snprintf(o, n, "\"%s\":[", key);

	for (i = 0; i < count; i++) {
		if (personnel)
			k += snprintf(o + k, n - k, "%s\"P-%05u\"", i ? "," : "", rnd(50000));
		else
			k += snprintf(o + k, n - k, "%s\"%s\"", i ? "," : "", teams[i]);
	}
	return k + snprintf(o + k, n - k, "],");
}

/* One activity with every field; about 600 bytes. */
static int
activity(char *o, size_t n, unsigned i)
{
	unsigned d = 1 + rnd(28), h = rnd(20), nt = 1 + rnd(3);
	int k;

	k = snprintf(o, n, "{\"id\":\"ACT-%08u\",\"siteId\":\"S-%u\",\"assetId\":\"WTG-%03u\","
	    "\"startDate\":\"2024-%02u-%02uT%02u:00:00Z\",\"endDate\":\"2024-%02u-%02uT%02u:30:00.000Z\","
	    "\"activityCategory\":\"%s\",\"status\":\"%s\",\"workPackageId\":\"WP-%04u\","
	    "\"additionalClientWork\":%s,\"workOrderId\":\"WO-%06u\",", i, 1 + rnd(12), rnd(120),
	    1 + i % 12, d, h, 1 + i % 12, d, h + 3, categories[rnd(5)], statuses[rnd(3)], rnd(900),
	    rnd(4) ? "false" : "true", rnd(999999));
	k += add_list(o + k, n - k, "teams", (int)nt, 0);
	k += add_list(o + k, n - k, "personnelIds", 1 + (int)rnd(4), 1);
	k += snprintf(o + k, n - k, "\"manpower\":{\"Alpha\":%u%s},", 1 + rnd(6),
	    nt > 1 ? ",\"Bravo\":2" : "");
	k += snprintf(o + k, n - k, "\"internalRemarks\":\"Crane vessel booked for window %u; "
	    "check \\\"hook height\\\" before lift. Access via TP-%u.\",\"externalRemarks\":"
	    "\"Planned outage of turbine WTG-%03u, expected duration %u hours.\"}", rnd(50),
	    rnd(9), rnd(120), 2 + rnd(10));
	return k;
}

/* The whole import in one buffer (chains will point into it). */
static char *
generate(size_t mb, size_t *len, size_t *rows)
{
	size_t cap = mb * 1024 * 1024 + 4096, n = 0;
	char *s = malloc(cap);

	if (s == NULL)
		abort();
	s[n++] = '[';
	for (*rows = 0; n < cap - 4096; (*rows)++) {
		if (*rows > 0)
			s[n++] = ',';
		n += (size_t)activity(s + n, cap - n, (unsigned)*rows);
	}
	s[n++] = ']';
	*len = n;
	return s;
}

static void
add_chains(struct evbuffer *b, const char *s, size_t len)
{
	size_t off, k;

	for (off = 0; off < len; off += k) {
		k = len - off < CHAIN ? len - off : CHAIN;
		evbuffer_add_reference(b, s + off, k, NULL, NULL);
	}
}

/* A run's CPU time (this thread, user and system) and wall time. */
struct span {
	double cpu, wall;
};

static double
clock_s(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static struct span
since(struct span t0)
{
	struct span d;

	d.cpu = clock_s(CLOCK_THREAD_CPUTIME_ID) - t0.cpu;
	d.wall = clock_s(CLOCK_MONOTONIC) - t0.wall;
	return d;
}

static struct span
start(void)
{
	struct span t;

	t.cpu = clock_s(CLOCK_THREAD_CPUTIME_ID);
	t.wall = clock_s(CLOCK_MONOTONIC);
	return t;
}

/* (a): the floor, the same chains walked the same way. */
static struct span
raw_parse(struct evbuffer *b)
{
	struct evbuffer_iovec v[16];
	struct evbuffer_ptr ptr;
	size_t len = evbuffer_get_length(b), off = 0, step;
	struct span t0 = start();
	yajl_handle h = yajl_alloc(NULL, NULL, NULL);
	int n, i;

	evbuffer_ptr_set(b, &ptr, 0, EVBUFFER_PTR_SET);
	while (off < len) {
		n = evbuffer_peek(b, -1, &ptr, v, 16);
		n = n > 16 ? 16 : n;
		for (i = 0, step = 0; i < n; i++) {
			if (yajl_parse(h, v[i].iov_base, v[i].iov_len) != yajl_status_ok)
				abort();
			step += v[i].iov_len;
		}
		off += step;
		if (off < len)
			evbuffer_ptr_set(b, &ptr, step, EVBUFFER_PTR_ADD);
	}
	if (yajl_complete_parse(h) != yajl_status_ok)
		abort();
	yajl_free(h);
	return since(t0);
}

static struct span
checked(struct evbuffer *b, const char *ctype, size_t rows)
{
	struct tg_problems p = { 0 };
	struct tg_import_result res;
	struct span t0 = start(), t;
	int rc, too_large = 0;

	rc = ctype ? tg_import_check_multipart(b, ctype, 0, &res, &p, &too_large) :
	    tg_import_check_json(b, &res, &p);
	t = since(t0);
	if (rc != 0 || res.rows != rows) {
		fprintf(stderr, "unexpected verdict: rc %d, %zu rows, %zu problems%s%s\n", rc,
		    res.rows, p.total, p.n ? ": " : "", p.n ? p.v[0].message : "");
		exit(1);
	}
	tg_problems_cleanup(&p);
	return t;
}

static int
cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double
median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp);
	return v[n / 2];
}

/* (b) and (c) against (a): the ratio of the medians and within each round. */
static void
ratios(const char *clock, double *raw, double *json, double *form, int n)
{
	double rj[MAX_ROUNDS], rf[MAX_ROUNDS], mj, mf, mraw, mjson, mform;
	int r;

	for (r = 0; r < n; r++) {
		rj[r] = json[r] / raw[r];
		rf[r] = form[r] / raw[r];
	}
	mj = median(rj, n);	/* each sorts its array: read the ends afterwards */
	mf = median(rf, n);
	mraw = median(raw, n);
	mjson = median(json, n);
	mform = median(form, n);
	printf("%s time / yajl time: json %.2f, multipart %.2f (ratio of medians); "
	    "within rounds json %.2f (%.2f-%.2f), multipart %.2f (%.2f-%.2f)\n", clock,
	    mjson / mraw, mform / mraw, mj, rj[0], rj[n - 1], mf, rf[0], rf[n - 1]);
}

static void
report(const char *what, const double *t, int n, double mb)
{
	double v[MAX_ROUNDS], med;

	memcpy(v, t, (size_t)n * sizeof(*v));
	med = median(v, n);
	printf("%-32s median %6.1f MB/s (min %6.1f, max %6.1f)\n", what, mb / med,
	    mb / v[n - 1], mb / v[0]);
}

int
main(int argc, char **argv)
{
	size_t mb = argc > 1 ? strtoul(argv[1], NULL, 10) : 200, len, rows;
	int rounds = argc > 2 ? atoi(argv[2]) : 5, r;
	double cpu[3][MAX_ROUNDS], wall[3][MAX_ROUNDS], m;
	struct evbuffer *jb = evbuffer_new(), *mb_body = evbuffer_new();
	struct span t;
	char *s;

	if (mb == 0 || rounds < 1 || rounds > MAX_ROUNDS) {
		fprintf(stderr, "usage: validate_bench [MB] [ROUNDS <= %d]\n", MAX_ROUNDS);
		return 2;
	}
	s = generate(mb, &len, &rows);
	add_chains(jb, s, len);
	evbuffer_add_printf(mb_body, "--" BND "\r\nContent-Disposition: form-data; name=\"file\"; "
	    "filename=\"import.json\"\r\nContent-Type: application/json\r\n\r\n");
	add_chains(mb_body, s, len);
	evbuffer_add_printf(mb_body, "\r\n--" BND "--\r\n");
	m = (double)len / (1024 * 1024);
	printf("import: %.1f MB, %zu activities, %zu chains of %d bytes, %d rounds\n", m, rows,
	    (len + CHAIN - 1) / CHAIN, CHAIN, rounds);
	for (r = 0; r < rounds; r++) {
		t = raw_parse(jb);
		cpu[0][r] = t.cpu, wall[0][r] = t.wall;
		t = checked(jb, NULL, rows);
		cpu[1][r] = t.cpu, wall[1][r] = t.wall;
		t = checked(mb_body, "multipart/form-data; boundary=" BND, rows);
		cpu[2][r] = t.cpu, wall[2][r] = t.wall;
	}
	printf("throughput by CPU time (this thread):\n");
	report("(a) yajl_parse, no callbacks", cpu[0], rounds, m);
	report("(b) tg_import_check_json", cpu[1], rounds, m);
	report("(c) tg_import_check_multipart", cpu[2], rounds, m);
	ratios("CPU ", cpu[0], cpu[1], cpu[2], rounds);
	ratios("wall", wall[0], wall[1], wall[2], rounds);
	printf("target: validation costs at most 1.30 times the parse\n");
	evbuffer_free(jb);
	evbuffer_free(mb_body);
	free(s);
	return 0;
}
