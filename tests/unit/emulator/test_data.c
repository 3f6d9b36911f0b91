/*
 * test_data.c - unit tests of the seeded records behind the export
 * endpoints (data.c): counts, id formats, references that stay inside the
 * configured counts, determinism, and the heap-free activity view. Run by
 * meson test (suite unit).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "emu.h"

static struct tg_emu_project cfg = {
	.id = "P-T", .seed = 42, .sites = 9, .assets_per_site = 3, .activity_categories = 11,
	.personnel = 200, .timesheets = 500, .work_order_sequences = 4, .work_orders = 70,
	.work_packages = 13, .activities = 1000,
};

static struct emu_project
project(const struct tg_emu_project *c)
{
	struct emu_project p;

	memset(&p, 0, sizeof(p));
	p.cfg = c;
	p.epoch_ms = tg_clock_days_from_civil(2024, 1, 1) * 86400000LL;
	return p;
}

/* n of "PREFIX-n" when 1 <= n <= max, else -1. */
static long long
ref_index(const char *s, const char *prefix, long long max)
{
	size_t pl = strlen(prefix);
	char *end;
	long long n;

	if (s == NULL || strncmp(s, prefix, pl) != 0)
		return -1;
	n = strtoll(s + pl, &end, 10);
	return *end == '\0' && n >= 1 && n <= max ? n : -1;
}

static const char *
str(const struct emu_rec *r, const char *key)
{
	const struct emu_field *f = emu_rec_get(r, key);

	assert_non_null(f);
	assert_int_equal(f->type, EMU_F_STR);
	return f->s;
}

static void
test_counts_follow_config(void **state)
{
	struct emu_project p = project(&cfg);

	assert_int_equal(emu_data_count(&p, EMU_K_ACTIVITY), 1000);
	assert_int_equal(emu_data_count(&p, EMU_K_CATEGORY), 11);
	assert_int_equal(emu_data_count(&p, EMU_K_PERSONNEL), 200);
	assert_int_equal(emu_data_count(&p, EMU_K_TIMESHEET), 500);
	assert_int_equal(emu_data_count(&p, EMU_K_WOS), 4);
	assert_int_equal(emu_data_count(&p, EMU_K_WO), 70);
	assert_int_equal(emu_data_count(&p, EMU_K_WP), 13);
}

static void
test_ids_and_references(void **state)
{
	struct emu_project p = project(&cfg);
	struct emu_rec r;
	const char *wos;
	long long i;

	for (i = 0; i < cfg.work_orders; i++) {
		emu_data_record(&p, EMU_K_WO, i, &r);
		assert_int_equal(ref_index(str(&r, "id"), "WO-", cfg.work_orders), i + 1);
		assert_true(ref_index(str(&r, "workPackageId"), "WP-", cfg.work_packages) > 0);
		assert_true(ref_index(str(&r, "siteId"), "S-", cfg.sites) > 0);
		wos = str(&r, "workOrderSequenceId");
		assert_true(wos == NULL || ref_index(wos, "WOS-", cfg.work_order_sequences) > 0);
	}
	for (i = 0; i < cfg.personnel; i++) {
		emu_data_record(&p, EMU_K_PERSONNEL, i, &r);
		assert_int_equal(ref_index(str(&r, "id"), "PER-", cfg.personnel), i + 1);
		assert_non_null(strchr(str(&r, "email"), '@'));
		assert_true(emu_rec_get(&r, "teams")->n >= 1);
	}
	for (i = 0; i < cfg.work_packages; i++) {
		emu_data_record(&p, EMU_K_WP, i, &r);
		assert_true(emu_rec_get(&r, "startDate")->t < emu_rec_get(&r, "endDate")->t);
		assert_true(emu_rec_get(&r, "createdAt")->t <= emu_rec_get(&r, "updatedAt")->t);
	}
}

static void
test_timesheet_entries_agree_with_lists(void **state)
{
	struct emu_project p = project(&cfg);
	const struct emu_field *te, *acts, *per;
	struct emu_activity a;
	struct emu_rec r;
	long long i, idx;
	size_t k;

	for (i = 0; i < cfg.timesheets; i++) {
		emu_data_record(&p, EMU_K_TIMESHEET, i, &r);
		te = emu_rec_get(&r, "timeEntries");
		acts = emu_rec_get(&r, "activityIds");
		per = emu_rec_get(&r, "personnelIds");
		assert_true(te->n >= 1 && te->n <= 3 && acts->n >= 1 && acts->n <= te->n);
		assert_int_equal(per->n, 1);
		assert_string_equal(per->v[0], str(&r, "personnelId"));
		for (k = 0; k < te->n; k++) {
			idx = ref_index(te->te[k].activity_id, "ACT-", cfg.activities);
			assert_true(idx > 0);
			emu_data_activity(&p, idx - 1, &a);
			/* an entry's work package is its activity's */
			if (a.work_package_id == NULL)
				assert_null(te->te[k].work_package_id);
			else
				assert_string_equal(a.work_package_id, te->te[k].work_package_id);
			emu_activity_cleanup(&a);
		}
		if (strcmp(str(&r, "status"), "DRAFT") == 0)
			assert_null(str(&r, "submittedBy"));
	}
}

static void
test_deterministic_by_seed(void **state)
{
	struct tg_emu_project other = cfg;
	struct emu_project p = project(&cfg), q;
	struct emu_rec a, b;
	enum emu_kind k;
	int differ = 0;
	long long i;

	other.seed = 43;
	q = project(&other);
	for (k = EMU_K_CATEGORY; k <= EMU_K_WP; k++) {
		for (i = 0; i < emu_data_count(&p, k); i++) {
			emu_data_record(&p, k, i, &a);
			emu_data_record(&p, k, i, &b);
			assert_int_equal(a.nf, b.nf);
			assert_memory_equal(a.arena, b.arena, a.used);
			emu_data_record(&q, k, i, &b);
			differ |= a.used != b.used || memcmp(a.arena, b.arena, a.used) != 0;
		}
	}
	assert_true(differ);
}

static void
test_activity_view_matches_copy(void **state)
{
	struct emu_project p = project(&cfg);
	struct emu_activity_buf buf;
	struct emu_activity v, c;
	long long i;

	for (i = 0; i < cfg.activities; i++) {
		emu_data_activity_view(&p, i, &v, &buf);
		emu_data_activity(&p, i, &c);
		assert_string_equal(v.id, c.id);
		assert_string_equal(v.site_id, c.site_id);
		assert_string_equal(v.status, c.status);
		assert_int_equal(v.end_ms, c.end_ms);
		assert_int_equal(v.teams.n, c.teams.n);
		assert_string_equal(v.teams.v[0], c.teams.v[0]);
		assert_int_equal(emu_data_activity_index(&p, v.id), i);
		emu_activity_cleanup(&c);
	}
	assert_int_equal(emu_data_activity_index(&p, "ACT-001000"), 999);
	assert_int_equal(emu_data_activity_index(&p, "ACT-001001"), -1);
	assert_int_equal(emu_data_activity_index(&p, "ACT-1"), -1);
	assert_int_equal(emu_data_activity_index(&p, "ACT-000000"), -1);
	assert_int_equal(emu_data_activity_index(&p, "ACT-00001x"), -1);
	p.overlay = tg_map_new(NULL);
	assert_int_equal(emu_data_activity_get(&p, "ACT-000007", &c), 0);
	assert_string_equal(c.id, "ACT-000007");
	emu_activity_cleanup(&c);
	tg_map_free(p.overlay);
}

static void
test_largest_records_fit(void **state)
{
	struct tg_emu_project big = cfg;
	struct emu_project p;
	struct emu_rec r;
	enum emu_kind k;

	big.activities = 100000000;
	big.personnel = 1000000;
	big.timesheets = 10000000;
	big.work_orders = 10000000;
	big.work_packages = 1000000;
	big.activity_categories = 100000;
	big.work_order_sequences = 100000;
	big.sites = 1000000;
	p = project(&big);
	for (k = EMU_K_CATEGORY; k <= EMU_K_WP; k++)
		emu_data_record(&p, k, emu_data_count(&p, k) - 1, &r);
	emu_data_record(&p, EMU_K_PERSONNEL, 999999, &r);
	assert_string_equal(str(&r, "id"), "PER-1000000");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_counts_follow_config),
		cmocka_unit_test(test_ids_and_references),
		cmocka_unit_test(test_timesheet_entries_agree_with_lists),
		cmocka_unit_test(test_deterministic_by_seed),
		cmocka_unit_test(test_activity_view_matches_copy),
		cmocka_unit_test(test_largest_records_fit),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
