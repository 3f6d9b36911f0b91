/*
 * keys.c - gateway API keys. The configuration loader adds keys
 * (tg_keyring_add) from SHA-256 hex digests, so a leaked config file does
 * not leak keys; the client authentication step of every request matches
 * the presented key (tg_keyring_match).
 *
 * Matching hashes the presented key once and compares it with every
 * configured digest without stopping at the first hit, so neither the
 * position of a key nor a near miss shows in the response time.
 *
 * A SHA-256 a request is most of the check's cost, and callers present the
 * same few keys again and again: the keyring remembers the keys it matched
 * in a small table, indexed by a cheap hash of the presented key and
 * compared with it in constant time, so a presented key learns nothing of
 * a remembered one but whether it is the same. Only matches are kept (a
 * stream of wrong keys evicts, never fills it with verdicts), the table is
 * bounded and belongs to the keyring: a reload builds a new keyring, so a
 * key removed from the configuration stops matching with the reload.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/crypto.h"
#include "tidegate/keys.h"

static const struct {
	const char *name;
	unsigned bit;
} services[] = {
	{ "dex", TG_SVC_DEX },
	{ "sim", TG_SVC_SIM },
	{ "admin", TG_SVC_ADMIN },
	{ "admin-read", TG_SVC_ADMIN_READ },
};

/* Remembered keys: slots of a direct-mapped table; longer keys are hashed
 * each time. */
#define SEEN_SLOTS	64
#define SEEN_MAX	95

struct tg_key_seen {
	struct {
		size_t len;	/* 0: empty */
		size_t key;	/* index into keys */
		char text[SEEN_MAX + 1];
	} slot[SEEN_SLOTS];
};

static void
seen_forget(struct tg_keyring *kr)
{
	if (kr->seen != NULL)
		explicit_bzero(kr->seen, sizeof(*kr->seen));
}

static size_t
seen_index(const char *s, size_t n)
{
	uint32_t h = 2166136261u;	/* FNV-1a */
	size_t i;

	for (i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 16777619u;
	return h % SEEN_SLOTS;
}

static int
parse_digest(const char *hex, unsigned char out[TG_SHA256_LEN])
{
	size_t i;
	int hi, lo;

	if (hex == NULL || strlen(hex) != 2 * TG_SHA256_LEN)
		return -1;
	for (i = 0; i < TG_SHA256_LEN; i++) {
		if ((hi = tg_hexval(hex[2 * i])) < 0 || (lo = tg_hexval(hex[2 * i + 1])) < 0)
			return -1;
		out[i] = (unsigned char)(hi << 4 | lo);
	}
	return 0;
}

static int
parse_services(const char *const *names, size_t n, unsigned *mask, struct tg_err *err)
{
	size_t i, j;

	*mask = 0;
	for (i = 0; i < n; i++) {
		for (j = 0; j < TG_NELEM(services); j++)
			if (names[i] != NULL && strcmp(names[i], services[j].name) == 0)
				break;
		if (j == TG_NELEM(services)) {
			tg_err_set(err, "unknown service \"%s\" (expected dex, sim, admin or "
			    "admin-read)", names[i] ? names[i] : "");
			return -1;
		}
		*mask |= services[j].bit;
	}
	if (*mask == 0) {
		tg_err_set(err, "no services: list at least one of dex, sim, admin, "
		    "admin-read");
		return -1;
	}
	return 0;
}

int
tg_keyring_add(struct tg_keyring *kr, const char *name, const char *sha256_hex,
    const char *const *svc, size_t nsvc, struct tg_err *err)
{
	unsigned char digest[TG_SHA256_LEN];
	unsigned mask;
	size_t i;
	int rc = -1;

	if (name == NULL || *name == '\0') {
		tg_err_set(err, "a key needs a name");
		goto done;
	}
	if (parse_digest(sha256_hex, digest) < 0) {
		tg_err_set(err, "key \"%s\": sha256 must be 64 hex characters", name);
		goto done;
	}
	if (parse_services(svc, nsvc, &mask, err) < 0)
		goto done;
	for (i = 0; i < kr->n; i++)
		if (memcmp(kr->keys[i].digest, digest, sizeof(digest)) == 0) {
			tg_err_set(err, "key \"%s\": same digest as key \"%s\"", name,
			    kr->keys[i].name);
			goto done;
		}
	kr->keys = tg_xrealloc(kr->keys, (kr->n + 1) * sizeof(*kr->keys));
	kr->keys[kr->n].name = tg_xstrdup(name);
	memcpy(kr->keys[kr->n].digest, digest, sizeof(digest));
	kr->keys[kr->n].services = mask;
	kr->n++;
	if (kr->seen == NULL)
		kr->seen = tg_xcalloc(1, sizeof(*kr->seen));
	seen_forget(kr);
	rc = 0;
done:
	return rc;
}

void
tg_keyring_cleanup(struct tg_keyring *kr)
{
	size_t i;

	for (i = 0; i < kr->n; i++)
		free(kr->keys[i].name);
	free(kr->keys);
	kr->keys = NULL;
	kr->n = 0;
	seen_forget(kr);
	free(kr->seen);
	kr->seen = NULL;
}

static const struct tg_key *
match_digest(const struct tg_keyring *kr, const char *presented, size_t len)
{
	unsigned char h[TG_SHA256_LEN];
	size_t i, found = 0, hit = 0, eq, take;

	tg_sha256(presented, len, h);
	for (i = 0; i < kr->n; i++) {
		eq = (size_t)tg_mem_equal_ct(h, kr->keys[i].digest, sizeof(h));
		/* all ones on the first hit, else zero: select without a branch */
		take = (size_t)0 - (eq & (hit ^ 1));
		found = (found & ~take) | (i & take);
		hit |= eq;
	}
	return hit ? &kr->keys[found] : NULL;
}

const struct tg_key *
tg_keyring_match(const struct tg_keyring *kr, const char *presented)
{
	const struct tg_key *k;
	size_t len, i;

	if (presented == NULL || kr->n == 0)
		return NULL;
	len = strlen(presented);
	i = seen_index(presented, len);
	if (len > 0 && len <= SEEN_MAX && kr->seen->slot[i].len == len &&
	    tg_mem_equal_ct(kr->seen->slot[i].text, presented, len))
		return &kr->keys[kr->seen->slot[i].key];
	if ((k = match_digest(kr, presented, len)) != NULL && len > 0 && len <= SEEN_MAX) {
		kr->seen->slot[i].len = len;
		kr->seen->slot[i].key = (size_t)(k - kr->keys);
		memcpy(kr->seen->slot[i].text, presented, len);
	}
	return k;
}
