/*
 * login_cache.c - answers callers' own logins (legacy tools that POST
 * /authenticate before every call) from memory while the vendor's token
 * is valid, so the vendor sees one login per identity and token lifetime.
 * Called by the data exchange service's pass-through login route.
 *
 * Entries are keyed by an HMAC of the identity and the secret under a
 * random per-cache salt: the secret is never stored, a different secret
 * for the same identity is a miss (a wrong password is never answered
 * from the cache), and the key is useless outside this process. A token
 * the vendor refuses (a 401 for a caller using it) is forgotten, found by
 * its salted hash; every entry is when the vendor refuses the gateway's
 * own token (a revocation).
 */
#include <stdlib.h>
#include <string.h>

#include "tidegate/clock.h"
#include "tidegate/crypto.h"
#include "tidegate/ids.h"
#include "tidegate/map.h"
#include "tidegate/token.h"

struct entry {
	char *body;
	int64_t expires_at_ms;
	char token[2 * TG_SHA256_LEN + 1];	/* its token's salted hash, "" none */
};

struct tg_login_cache {
	struct tg_map *map;		/* hex key -> struct entry */
	size_t max_entries;
	uint8_t salt[32];
};

static void
entry_free(void *p)
{
	struct entry *e = p;

	if (e == NULL)
		return;
	/* The body holds a live vendor token. */
	explicit_bzero(e->body, strlen(e->body));
	free(e->body);
	free(e);
}

struct tg_login_cache *
tg_login_cache_new(size_t max_entries)
{
	struct tg_login_cache *lc = tg_xcalloc(1, sizeof(*lc));

	lc->map = tg_map_new(entry_free);
	lc->max_entries = max_entries;
	tg_id_random(lc->salt, sizeof(lc->salt));
	return lc;
}

void
tg_login_cache_free(struct tg_login_cache *lc)
{
	if (lc == NULL)
		return;
	tg_map_free(lc->map);
	explicit_bzero(lc->salt, sizeof(lc->salt));
	free(lc);
}

size_t
tg_login_cache_count(const struct tg_login_cache *lc)
{
	return tg_map_count(lc->map);
}

/* A token's salted hash, as entries keep it. */
static void
token_key(const struct tg_login_cache *lc, const char *token, char out[2 * TG_SHA256_LEN + 1])
{
	uint8_t mac[TG_SHA256_LEN];

	tg_hmac_sha256(lc->salt, sizeof(lc->salt), token, strlen(token), mac);
	tg_hex(mac, sizeof(mac), out);
}

/* The NUL separator keeps ("ab", "c") and ("a", "bc") apart. */
static void
cache_key(const struct tg_login_cache *lc, const char *id, const char *secret,
    char out[2 * TG_SHA256_LEN + 1])
{
	size_t idlen = strlen(id), slen = strlen(secret);
	uint8_t mac[TG_SHA256_LEN];
	char *msg = tg_xmalloc(idlen + 1 + slen);

	memcpy(msg, id, idlen);
	msg[idlen] = '\0';
	memcpy(msg + idlen + 1, secret, slen);
	tg_hmac_sha256(lc->salt, sizeof(lc->salt), msg, idlen + 1 + slen, mac);
	explicit_bzero(msg, idlen + 1 + slen);
	free(msg);
	tg_hex(mac, sizeof(mac), out);
}

const char *
tg_login_cache_get(struct tg_login_cache *lc, const char *id, const char *secret,
    int64_t now_ms, int64_t *expires_at_ms)
{
	char key[2 * TG_SHA256_LEN + 1];
	struct entry *e;

	cache_key(lc, id, secret, key);
	if ((e = tg_map_get(lc->map, key)) == NULL)
		return NULL;
	if (now_ms >= e->expires_at_ms) {
		tg_map_del(lc->map, key);
		return NULL;
	}
	if (expires_at_ms != NULL)
		*expires_at_ms = e->expires_at_ms;
	return e->body;
}

/*
 * Keys of the entries to drop: every expired one, or when none is, the
 * one that expires first (it has the least use left). Collected before
 * deleting because deletion reorders the map under a walk.
 */
static size_t
victims(const struct tg_login_cache *lc, int64_t now_ms, char **keys, size_t max)
{
	const char *k, *first = NULL;
	struct entry *e, *soonest = NULL;
	size_t pos = 0, n = 0;
	void *v;

	while (tg_map_next(lc->map, &pos, &k, &v)) {
		e = v;
		if (e->expires_at_ms <= now_ms && n < max)
			keys[n++] = tg_xstrdup(k);
		if (soonest == NULL || e->expires_at_ms < soonest->expires_at_ms) {
			soonest = e;
			first = k;
		}
	}
	if (n == 0 && first != NULL)
		keys[n++] = tg_xstrdup(first);
	return n;
}

/* O(entries) per put when full: the bound is small and puts are rare (one per login). */
static void
evict(struct tg_login_cache *lc, int64_t now_ms)
{
	size_t n, i, cap = tg_map_count(lc->map);
	char **keys = tg_xcalloc(cap ? cap : 1, sizeof(*keys));

	n = victims(lc, now_ms, keys, cap);
	for (i = 0; i < n; i++) {
		tg_map_del(lc->map, keys[i]);
		free(keys[i]);
	}
	free(keys);
}

void
tg_login_cache_put(struct tg_login_cache *lc, const char *id, const char *secret,
    const char *body, const char *token, int64_t expires_at_ms)
{
	char key[2 * TG_SHA256_LEN + 1];
	struct entry *e;
	int64_t now = tg_clock_now_ms();

	if (lc->max_entries == 0 || expires_at_ms <= now)
		return;
	cache_key(lc, id, secret, key);
	if (tg_map_get(lc->map, key) == NULL)
		while (tg_map_count(lc->map) >= lc->max_entries)
			evict(lc, now);
	e = tg_xcalloc(1, sizeof(*e));
	e->body = tg_xstrdup(body);
	e->expires_at_ms = expires_at_ms;
	if (token != NULL)
		token_key(lc, token, e->token);
	tg_map_put(lc->map, key, e);
}

/* Keys of the entries matching tok ("": every one), collected before the
 * deletes (deletion reorders the map under a walk); then deleted. */
static size_t
drop_matching(struct tg_login_cache *lc, const char *tok)
{
	size_t n = 0, i, pos = 0, cap = tg_map_count(lc->map);
	char **keys = tg_xcalloc(cap ? cap : 1, sizeof(*keys));
	const char *k;
	void *v;

	while (tg_map_next(lc->map, &pos, &k, &v))
		if (*tok == '\0' || strcmp(((struct entry *)v)->token, tok) == 0)
			keys[n++] = tg_xstrdup(k);
	for (i = 0; i < n; i++) {
		tg_map_del(lc->map, keys[i]);
		free(keys[i]);
	}
	free(keys);
	return n;
}

size_t
tg_login_cache_drop_token(struct tg_login_cache *lc, const char *token)
{
	char tok[2 * TG_SHA256_LEN + 1];

	if (lc == NULL || token == NULL || *token == '\0')
		return 0;
	token_key(lc, token, tok);
	return drop_matching(lc, tok);
}

void
tg_login_cache_clear(struct tg_login_cache *lc)
{
	if (lc != NULL)
		(void)drop_matching(lc, "");
}
