/*
 * keys.h - gateway API keys. Keys are configured as SHA-256 hex digests
 * (never in clear); a presented key is hashed and compared in constant
 * time against every configured digest. Each key is allowed a set of
 * services: dex, sim, admin (the admin API, reading and acting), admin-read
 * (the admin API's reads only).
 */
#ifndef TIDEGATE_KEYS_H
#define TIDEGATE_KEYS_H

#include <stddef.h>

#include "tidegate/util.h"

#define TG_SVC_DEX   0x1
#define TG_SVC_SIM   0x2
#define TG_SVC_ADMIN 0x4
#define TG_SVC_ADMIN_READ 0x8	/* the admin API's GETs only (admin-read) */

struct tg_key {
	char *name;		/* shown in logs and metrics; not secret */
	unsigned char digest[32];
	unsigned services;	/* TG_SVC_* mask */
};

struct tg_key_seen;

/** Zero-initialise; owns its keys and their names: tg_keyring_cleanup(). */
struct tg_keyring {
	struct tg_key *keys;	/* owned array; each name owned */
	size_t n;
	struct tg_key_seen *seen;	/* owned: keys matched lately (keys.c) */
};

/**
 * Add a key from its hex digest and service names; -1 with err when
 * malformed. kr is borrowed and owns the new key; name, sha256_hex and
 * services are borrowed (name is copied).
 */
int tg_keyring_add(struct tg_keyring *kr, const char *name, const char *sha256_hex,
    const char *const *services, size_t nservices, struct tg_err *err);
/** Free what kr owns (kr itself is borrowed, not NULL). */
void tg_keyring_cleanup(struct tg_keyring *kr);
/**
 * The key matching presented (hashed, constant-time over all keys), or NULL.
 * A key presented lately is found again without hashing: the keyring
 * remembers the last TG_KEY_SEEN keys it matched (never a miss), compared
 * in constant time; a new keyring (a reload) remembers none.
 * kr and presented are borrowed; the result is borrowed from kr, valid until
 * the next tg_keyring_add or tg_keyring_cleanup.
 */
const struct tg_key *tg_keyring_match(const struct tg_keyring *kr, const char *presented);

#endif
