/*
 * test_owners.c - the correlation ownership store (src/state/sqlite/owners.c)
 * without an event loop: record and look up, families kept apart, other
 * spellings of an id (case, spaces, a UUID's hyphens and braces) finding
 * its owner, a later record replacing an earlier one, records surviving
 * close and reopen
 * (with their count), the age bound (lookups ignore old records, prune
 * deletes them), the count bound per key (a key past it loses its own
 * oldest records, one at a time, never another key's, never a wholesale
 * reset), a version 1 file migrated with its records, WAL mode, and bad
 * inputs.
 * Times are passed in; nothing sleeps.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <sqlite3.h>

#include "tidegate/owners.h"

#define T0	1700000000000LL
#define DAY	(86400LL * 1000)

static struct {
	char dir[64];
	char db[96];
	struct tg_owners *o;
} O;

static struct tg_owners *
open_with(int64_t keep_ms, int64_t max_rows)
{
	struct tg_owners_opts opts = { O.db, keep_ms, max_rows };
	struct tg_err err = { "" };
	struct tg_owners *o;

	if ((o = tg_owners_open(&opts, &err)) == NULL)
		fail_msg("open: %s", err.msg);
	return o;
}

static int
setup(void **state)
{
	snprintf(O.dir, sizeof(O.dir), "/tmp/tg-owners-XXXXXX");
	if (mkdtemp(O.dir) == NULL)
		return -1;
	snprintf(O.db, sizeof(O.db), "%s/owners.db", O.dir);
	O.o = open_with(0, 0);
	return 0;
}

static int
teardown(void **state)
{
	char cmd[128];

	tg_owners_close(O.o);
	O.o = NULL;
	snprintf(cmd, sizeof(cmd), "rm -rf %s", O.dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void
record(const char *family, const char *cid, const char *key, int64_t at)
{
	struct tg_err err = { "" };

	if (tg_owners_record(O.o, family, cid, key, at, &err) != 0)
		fail_msg("record %s: %s", cid, err.msg);
}

/* The owner's name, or "" when none; a static buffer. */
static const char *
owner(const char *family, const char *cid, int64_t now)
{
	static char buf[64];
	struct tg_err err = { "" };
	char *key = NULL;
	int rc = tg_owners_lookup(O.o, family, cid, now, &key, &err);

	assert_int_not_equal(rc, -1);
	assert_true(rc == 0 ? key != NULL : key == NULL);
	snprintf(buf, sizeof(buf), "%s", rc == 0 ? key : "");
	free(key);
	return buf;
}

static void
test_record_lookup_and_families(void **state)
{
	record("export", "c-1", "a", T0);
	record("import", "c-2", "b", T0);
	assert_string_equal(owner("export", "c-1", T0), "a");
	assert_string_equal(owner("import", "c-2", T0), "b");
	/* an import's id is not an export's */
	assert_string_equal(owner("import", "c-1", T0), "");
	assert_string_equal(owner("export", "c-2", T0), "");
	assert_string_equal(owner("export", "c-1x", T0), "");
	assert_string_equal(owner("export", "c1", T0), "");	/* not a UUID: '-' counts */
	assert_int_equal(tg_owners_count(O.o), 2);
	/* the same job recorded again: the later creation wins, no second row */
	record("export", "c-1", "c", T0 + 1);
	assert_string_equal(owner("export", "c-1", T0 + 1), "c");
	assert_int_equal(tg_owners_count(O.o), 2);
}

/* Spellings a vendor may read as the same id (case, surrounding spaces, a
 * UUID's hyphens, braces or parentheses) find the owner; others do not. */
static void
test_other_spellings_of_an_id(void **state)
{
	static const char *const same[] = {
		"3f2a9c1e-7b4d-4e8a-9c0f-1a2b3c4d5e6f", "3F2A9C1E-7B4D-4E8A-9C0F-1A2B3C4D5E6F",
		"3f2a9c1e7b4d4e8a9c0f1a2b3c4d5e6f", "{3f2a9c1e-7b4d-4e8a-9c0f-1a2b3c4d5e6f}",
		"(3F2A9C1E-7B4D-4E8A-9C0F-1A2B3C4D5E6F)", " 3f2a9c1e-7b4d-4e8a-9c0f-1a2b3c4d5e6f\t",
		"3f2a-9c1e-7b4d-4e8a-9c0f-1a2b-3c4d-5e6f",
	};
	static const char *const other[] = {
		"3f2a9c1e-7b4d-4e8a-9c0f-1a2b3c4d5e60", "3f2a9c1e-7b4d-4e8a-9c0f-1a2b3c4d5e6",
		"3f2a9c1e-7b4d-4e8a-9c0f-1a2b3c4d5e6f0", "urn:3f2a9c1e-7b4d-4e8a-9c0f-1a2b3c4d5e6f",
		"3f2a9c1e_7b4d_4e8a_9c0f_1a2b3c4d5e6f",
	};
	size_t i;

	record("export", "3F2A9C1E-7b4d-4e8a-9c0f-1a2b3c4d5e6f", "a", T0);
	record("export", "Job-7", "b", T0);
	for (i = 0; i < sizeof(same) / sizeof(same[0]); i++)
		assert_string_equal(owner("export", same[i], T0), "a");
	for (i = 0; i < sizeof(other) / sizeof(other[0]); i++)
		assert_string_equal(owner("export", other[i], T0), "");
	assert_string_equal(owner("import", same[0], T0), "");
	assert_string_equal(owner("export", "JOB-7", T0), "b");
	assert_string_equal(owner("export", " job-7 ", T0), "b");
	assert_string_equal(owner("export", "job7", T0), "");
	/* a spelling recorded again is the same job: still one row */
	record("export", same[2], "a", T0 + 1);
	assert_int_equal(tg_owners_count(O.o), 2);
}

static void
test_survives_reopen(void **state)
{
	record("export", "c-1", "a", T0);
	record("import", "c-1", "b", T0);
	tg_owners_close(O.o);
	O.o = open_with(0, 0);
	assert_int_equal(tg_owners_count(O.o), 2);
	assert_string_equal(owner("export", "c-1", T0 + DAY), "a");
	assert_string_equal(owner("import", "c-1", T0 + DAY), "b");
}

static void
test_age_bound(void **state)
{
	struct tg_err err = { "" };

	tg_owners_close(O.o);
	O.o = open_with(2 * DAY, 0);
	record("export", "old", "a", T0);
	record("export", "new", "a", T0 + DAY);
	assert_string_equal(owner("export", "old", T0 + 2 * DAY), "a");
	/* past keep: no longer an owner, even before a prune deletes it */
	assert_string_equal(owner("export", "old", T0 + 2 * DAY + 1), "");
	assert_string_equal(owner("export", "new", T0 + 2 * DAY + 1), "a");
	assert_int_equal(tg_owners_prune(O.o, T0 + 2 * DAY + 1, &err), 1);
	assert_int_equal(tg_owners_count(O.o), 1);
	assert_int_equal(tg_owners_prune(O.o, T0 + 2 * DAY + 1, &err), 0);
	assert_int_equal(tg_owners_prune(O.o, T0 + 3 * DAY + 1, &err), 1);
	assert_int_equal(tg_owners_count(O.o), 0);
}

/* Rows in the file, counted by SQLite itself (not the store's counter). */
static long long
rows_in_file(void)
{
	sqlite3 *db;
	sqlite3_stmt *s;
	long long n = -1;

	assert_int_equal(sqlite3_open_v2(O.db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, "SELECT count(*) FROM owners", -1, &s, NULL),
	    SQLITE_OK);
	if (sqlite3_step(s) == SQLITE_ROW)
		n = sqlite3_column_int64(s, 0);
	sqlite3_finalize(s);
	sqlite3_close(db);
	return n;
}

static void
test_count_bound_per_key_oldest_first(void **state)
{
	char cid[32];
	int i;

	tg_owners_close(O.o);
	O.o = open_with(0, 100);
	record("export", "a-0", "a", T0);
	record("import", "a-1", "a", T0);
	for (i = 0; i < 350; i++) {
		snprintf(cid, sizeof(cid), "c-%d", i);
		record(i % 2 ? "import" : "export", cid, "b", T0 + i);
		/* never more than the bound, and never a cliff: once full, full */
		assert_int_equal(tg_owners_count(O.o), 2 + (i < 100 ? i + 1 : 100));
	}
	assert_int_equal(rows_in_file(), 102);
	/* b's newest 100 are kept, its older ones went first; a's are a's */
	for (i = 0; i < 350; i++) {
		snprintf(cid, sizeof(cid), "c-%d", i);
		assert_string_equal(owner(i % 2 ? "import" : "export", cid, T0 + 350),
		    i < 250 ? "" : "b");
	}
	assert_string_equal(owner("export", "a-0", T0 + 350), "a");
	assert_string_equal(owner("import", "a-1", T0 + 350), "a");
	/* a record that replaces another takes the key's next number: the bound
	 * holds (the key's oldest goes, leaving a gap), never another key's */
	record("import", "c-349", "b", T0 + 400);
	assert_int_equal(tg_owners_count(O.o), 101);
	assert_string_equal(owner("export", "c-250", T0 + 400), "");
	assert_string_equal(owner("import", "c-251", T0 + 400), "b");
	/* a smaller bound at the next open is applied by prune, per key, oldest first */
	tg_owners_close(O.o);
	O.o = open_with(0, 10);
	assert_int_equal(tg_owners_count(O.o), 101);
	assert_int_equal(tg_owners_prune(O.o, T0 + 400, NULL), 90);
	assert_int_equal(rows_in_file(), 11);
	assert_string_equal(owner("export", "c-342", T0 + 400), "b");
	assert_string_equal(owner("import", "c-349", T0 + 400), "b");
	assert_string_equal(owner("import", "c-341", T0 + 400), "b");
	assert_string_equal(owner("export", "c-340", T0 + 400), "");
	assert_string_equal(owner("export", "a-0", T0 + 400), "a");
}

/* A file of version 1 (one bound for all keys) keeps its records, each
 * key's numbered in the order they were made. */
static void
test_version_1_file_migrated(void **state)
{
	sqlite3 *db;
	char q[160];
	int i;

	tg_owners_close(O.o);
	O.o = NULL;
	assert_int_equal(unlink(O.db), 0);
	assert_int_equal(sqlite3_open(O.db, &db), SQLITE_OK);
	assert_int_equal(sqlite3_exec(db, "CREATE TABLE owners (id INTEGER PRIMARY KEY "
	    "AUTOINCREMENT, family TEXT NOT NULL, correlation_id TEXT NOT NULL, api_key TEXT "
	    "NOT NULL, created_at INTEGER NOT NULL, UNIQUE (family, correlation_id)); "
	    "CREATE INDEX owners_created ON owners (created_at); PRAGMA user_version = 1",
	    NULL, NULL, NULL), SQLITE_OK);
	for (i = 0; i < 6; i++) {
		snprintf(q, sizeof(q), "INSERT INTO owners (family, correlation_id, api_key, "
		    "created_at) VALUES ('export', 'v-%d', '%s', %lld)", i, i % 2 ? "b" : "a",
		    T0 + i);
		assert_int_equal(sqlite3_exec(db, q, NULL, NULL, NULL), SQLITE_OK);
	}
	sqlite3_close(db);
	O.o = open_with(0, 3);
	assert_int_equal(tg_owners_count(O.o), 6);
	assert_string_equal(owner("export", "v-1", T0 + 9), "b");
	/* a's fourth record: a's first (v-0) goes, b's three stay */
	record("export", "v-6", "a", T0 + 6);
	assert_string_equal(owner("export", "v-0", T0 + 9), "");
	assert_string_equal(owner("export", "v-2", T0 + 9), "a");
	for (i = 1; i < 6; i += 2) {
		snprintf(q, sizeof(q), "v-%d", i);
		assert_string_equal(owner("export", q, T0 + 9), "b");
	}
	assert_int_equal(tg_owners_count(O.o), 6);
	assert_int_equal(rows_in_file(), 6);
}

static void
test_wal_and_schema(void **state)
{
	sqlite3 *db;
	sqlite3_stmt *s;

	assert_int_equal(sqlite3_open_v2(O.db, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &s, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(s), SQLITE_ROW);
	assert_string_equal((const char *)sqlite3_column_text(s, 0), "wal");
	sqlite3_finalize(s);
	assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA user_version", -1, &s, NULL), SQLITE_OK);
	assert_int_equal(sqlite3_step(s), SQLITE_ROW);
	assert_int_equal(sqlite3_column_int(s, 0), 2);
	sqlite3_finalize(s);
	sqlite3_close(db);
}

static void
test_bad_inputs(void **state)
{
	struct tg_owners_opts none = { NULL, 0, 0 }, dir = { "/nonexistent/dir/owners.db", 0, 0 };
	struct tg_err err = { "" };

	assert_null(tg_owners_open(&none, &err));
	assert_non_null(strstr(err.msg, "no database path"));
	assert_null(tg_owners_open(&dir, &err));
	assert_non_null(strstr(err.msg, "cannot open"));
	assert_int_equal(tg_owners_record(O.o, "export", "", "a", T0, &err), -1);
	assert_int_equal(tg_owners_record(O.o, "export", NULL, "a", T0, &err), -1);
	assert_int_equal(tg_owners_record(O.o, "export", "c", NULL, T0, &err), -1);
	assert_int_equal(tg_owners_count(O.o), 0);
	tg_owners_close(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_record_lookup_and_families, setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_spellings_of_an_id, setup, teardown),
		cmocka_unit_test_setup_teardown(test_survives_reopen, setup, teardown),
		cmocka_unit_test_setup_teardown(test_age_bound, setup, teardown),
		cmocka_unit_test_setup_teardown(test_count_bound_per_key_oldest_first, setup,
		    teardown),
		cmocka_unit_test_setup_teardown(test_version_1_file_migrated, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wal_and_schema, setup, teardown),
		cmocka_unit_test_setup_teardown(test_bad_inputs, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
