/*
 * test_run_records.c - the run registry's records without a database
 * (src/state/run_records.c, run_rules.c): status names and the check
 * schedule, the case digest, expiry of a record, a variant's status, the
 * failure text of a FAILED run at every scale of duration, the delay after
 * a check without an answer, and the cleanups that take NULL. The records
 * in a database are the state seam's suite's (test_state.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tidegate/run_records.h"
#include "run_rules.h"

#define T0	1700000000000LL
#define SEC	1000LL

static void
test_status_names_and_schedule(void **state)
{
	static const int64_t want[] = { 2000, 4000, 8000, 16000, 32000, 64000, 128000, 256000,
		300000, 300000 };
	int i;

	for (i = 0; i < TG_RUN_NSTATUS; i++)
		assert_int_equal(tg_runs_status_parse(tg_runs_status_str(i)), i);
	assert_string_equal(tg_runs_status_str(TG_RUN_IN_PROGRESS), "IN_PROGRESS");
	assert_string_equal(tg_runs_status_str(TG_RUN_UNKNOWN), "UNKNOWN");
	assert_int_equal(tg_runs_status_parse("in_progress"), -1);
	assert_int_equal(tg_runs_status_parse(""), -1);
	assert_int_equal(tg_runs_status_parse("x' OR 1=1 --"), -1);
	assert_int_equal(tg_runs_status_parse(NULL), -1);
	assert_false(tg_runs_status_terminal(TG_RUN_IN_PROGRESS));
	assert_true(tg_runs_status_terminal(TG_RUN_COMPLETED));
	assert_true(tg_runs_status_terminal(TG_RUN_FAILED));
	assert_true(tg_runs_status_terminal(TG_RUN_EXPIRED));
	assert_true(tg_runs_status_terminal(TG_RUN_UNKNOWN));
	for (i = 0; i < (int)TG_NELEM(want); i++)
		assert_int_equal(tg_runs_check_delay(i), want[i]);
	assert_int_equal(tg_runs_check_delay(-3), TG_RUNS_CHECK_MIN_MS);
	assert_int_equal(tg_runs_check_delay(1 << 30), TG_RUNS_CHECK_MAX_MS);
}

/* The digest of the bytes sent, and when a record counts as expired. */
static void
test_digest_and_expiry(void **state)
{
	struct tg_run run = { .expires_at = T0 };
	char sha[TG_RUNS_SHA_LEN];

	tg_runs_case_digest("{}", 2, sha);
	assert_string_equal(sha,
	    "44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a");
	tg_runs_case_digest("", 0, sha);
	assert_string_equal(sha,
	    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	assert_false(tg_runs_expired(&run, T0 - 1));
	assert_true(tg_runs_expired(&run, T0));
	run.expires_at = 0;			/* none: never */
	assert_false(tg_runs_expired(&run, INT64_MAX));
}

static void
test_variant_status(void **state)
{
	struct tg_sweep_variant v = { .state = TG_VARIANT_PENDING, .run_status = TG_RUN_FAILED };

	assert_string_equal(tg_sweep_variant_status(&v), "PENDING");
	v.state = TG_VARIANT_SUBMITTING;
	assert_string_equal(tg_sweep_variant_status(&v), "SUBMITTING");
	v.state = TG_VARIANT_REJECTED;
	assert_string_equal(tg_sweep_variant_status(&v), "REJECTED");
	v.state = TG_VARIANT_SUBMITTED;
	assert_string_equal(tg_sweep_variant_status(&v), "FAILED");
	assert_string_equal(tg_sweep_state_str(TG_SWEEP_RUNNING), "running");
	assert_string_equal(tg_sweep_state_str(TG_SWEEP_DONE), "done");
}

static void
expect_failure(int64_t took, const char *host, const char *validation, const char *want)
{
	char *got = tg_state_run_failure_text(T0, host, validation, T0 + took);

	assert_string_equal(got, want);
	free(got);
}

/* Everything the gateway can say of a run the vendor says FAILED. */
static void
test_failure_text(void **state)
{
	expect_failure(192 * SEC, "fallback", "passed (diff skipped: base case not served)",
	    "the vendor reported FAILED 3 min 12 s after submission and gives no reason; "
	    "host: fallback; gateway validation: passed (diff skipped: base case not served)");
	expect_failure(42 * SEC + 999, "primary", "passed (diff checked)",
	    "the vendor reported FAILED 42 s after submission and gives no reason; "
	    "host: primary; gateway validation: passed (diff checked)");
	expect_failure(7500 * SEC, NULL, NULL,
	    "the vendor reported FAILED 2 h 5 min after submission and gives no reason; "
	    "host: unknown; gateway validation: not recorded");
	expect_failure((3 * 86400 + 4 * 3600 + 59) * SEC, "h", "v",
	    "the vendor reported FAILED 3 d 4 h after submission and gives no reason; "
	    "host: h; gateway validation: v");
	expect_failure(-5 * SEC, "h", "v",	/* a clock that went back: no time */
	    "the vendor reported FAILED 0 s after submission and gives no reason; "
	    "host: h; gateway validation: v");
}

/* After a check without an answer: the schedule, or Retry-After up to an
 * hour; the error recorded. */
static void
test_retry_delay(void **state)
{
	assert_int_equal(tg_state_run_retry_delay(0, -1), 4 * SEC);
	assert_int_equal(tg_state_run_retry_delay(1, 0), 8 * SEC);
	assert_int_equal(tg_state_run_retry_delay(1, 60 * SEC), 60 * SEC);
	assert_int_equal(tg_state_run_retry_delay(2, 86400 * SEC), 3600 * SEC);
	assert_int_equal(tg_state_run_retry_delay(20, 1), TG_RUNS_CHECK_MAX_MS);
	assert_string_equal(tg_state_run_check_error("upstream timeout"), "upstream timeout");
	assert_string_equal(tg_state_run_check_error(""), "no answer");
	assert_string_equal(tg_state_run_check_error(NULL), "no answer");
}

static void
test_null_safe(void **state)
{
	tg_run_cleanup(NULL);
	tg_runs_free(NULL, 0);
	tg_sweep_cleanup(NULL);
	tg_sweeps_free(NULL, 0);
	tg_sweep_variants_free(NULL, 0);
	tg_sweep_claim_cleanup(NULL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_status_names_and_schedule),
		cmocka_unit_test(test_digest_and_expiry),
		cmocka_unit_test(test_variant_status),
		cmocka_unit_test(test_failure_text),
		cmocka_unit_test(test_retry_delay),
		cmocka_unit_test(test_null_safe),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
