/*
 * fuzz_case_check.c - libFuzzer target for the simulation case validator
 * (src/sim/case_check.c) and the store of served cases.
 *
 * The input is two JSON documents, the served case and the submission,
 * split at the first NUL byte (or in half when there is none). Both are
 * checked with and without the served case. Beyond memory safety it
 * asserts what callers rely on: -1 exactly when problems were found, and
 * every problem the diff or the type rules report names a node that
 * exists in one of the two trees.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/json.h"
#include "tidegate/sim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char *con_types[] = { "INSTALLATION_TASK", "COMMISSIONING_TASK" };
static char *om_types[] = { "CORRECTIVE_MAINTENANCE", "PREVENTIVE_MAINTENANCE",
	"SCHEDULED_SERVICE", "INSPECTION" };
static char *corrective_types[] = { "CORRECTIVE_MAINTENANCE" };
static const struct tg_case_rules kinds = {
	{ con_types, 2 }, { om_types, 4 }, { corrective_types, 1 }, 1,
};

/*
 * Pointers to missing members cannot resolve, and long tokens are cut by
 * tg_json_ptr; with a member named twice only the first copy resolves.
 */
static int
must_resolve(const struct tg_problems *p, size_t i, int dups)
{
	return !dups && strcmp(p->v[i].code, "structure") != 0 &&
	    strcmp(p->v[i].code, "required") != 0 && strlen(p->v[i].path) < 200;
}

static int
has_dups(const struct tg_problems *p)
{
	size_t i;

	for (i = 0; i < p->n; i++)
		if (strncmp(p->v[i].message, "duplicate member", 16) == 0)
			return 1;
	return 0;
}

static void
run(yajl_val sub, yajl_val base)
{
	struct tg_problems p = { 0 };
	enum tg_case_type t;
	size_t i;
	int rc, dups;

	rc = tg_case_check(sub, base, &kinds, &t, &p);
	if ((rc == 0) != (p.total == 0) || p.n > p.total)
		abort();
	if (t != TG_CASE_UNKNOWN && t != TG_CASE_CONSTRUCTION && t != TG_CASE_OM)
		abort();
	dups = has_dups(&p);
	for (i = 0; i < p.n; i++)
		if (must_resolve(&p, i, dups) && tg_json_ptr(sub, p.v[i].path) == NULL &&
		    (base == NULL || tg_json_ptr(base, p.v[i].path) == NULL))
			abort();
	tg_problems_cleanup(&p);
}

static int
one_input(const uint8_t *data, size_t size)
{
	const char *buf = (const char *)data, *nul = memchr(data, '\0', size);
	size_t blen = nul != NULL ? (size_t)(nul - buf) : size / 2;
	size_t soff = nul != NULL ? blen + 1 : blen;
	struct tg_case_store *cs = NULL;
	yajl_val base, sub = NULL;

	if ((base = tg_json_parse(buf, blen, NULL)) == NULL)
		goto done;
	if ((sub = tg_json_parse(buf + soff, size - soff, NULL)) == NULL)
		goto done;
	/* The gateway reads the served case back from the store; so does this. */
	cs = tg_case_store_new(1);
	tg_case_store_put(cs, "case", base);
	base = NULL;
	run(sub, NULL);
	run(sub, tg_case_store_get(cs, "case"));
done:
	tg_case_store_free(cs);
	yajl_tree_free(base);
	yajl_tree_free(sub);
	return 0;
}

/* An empty input arrives as NULL (replay.c): split it as the empty string. */
int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	return one_input(data != NULL ? data : (const uint8_t *)"", size);
}
