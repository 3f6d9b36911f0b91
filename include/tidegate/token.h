/*
 * token.h - vendor credentials held by the gateway.
 *
 * struct tg_token_src is one credential: the data exchange password flow
 * (POST JSON {username, password} -> {token}: a JWT whose exp is read) or
 * the simulation client-credentials flow (form-urlencoded -> access_token,
 * expires_in; optional scope and audience; client authentication in the
 * body or by HTTP Basic, RFC 6749 2.3.1). It logs in lazily, refreshes ahead of expiry with jitter,
 * and is single-flight: any number of waiters share one login. A 401 from
 * the vendor invalidates the token (once per token). While the login
 * endpoint fails, waiters get an error with a Retry-After instead of a hang.
 *
 * struct tg_login_cache answers callers' own logins (legacy tools that
 * authenticate before every call) from a cache keyed by the identity and a
 * salted hash of the secret, valid while the vendor's token is.
 */
#ifndef TIDEGATE_TOKEN_H
#define TIDEGATE_TOKEN_H

#include <stddef.h>
#include <stdint.h>

#include "tidegate/util.h"

struct event_base;
struct tg_upstream;
struct evbuffer;
struct evkeyvalq;

enum tg_token_flow { TG_FLOW_PASSWORD, TG_FLOW_CLIENT_CREDENTIALS };

/* Strings borrowed by the struct; tg_token_src_new copies them. */
struct tg_token_opts {
	enum tg_token_flow flow;
	const char *path;		/* login path on the upstream, base path included */
	const char *url;		/* the login endpoint's whole URL, for messages and
					 * logs (holds no secret); NULL: path */
	const char *id;			/* username or client_id */
	const char *secret;		/* password or client_secret */
	const char *scope;		/* client credentials: scope parameter, or NULL */
	const char *audience;		/* client credentials: audience parameter, or NULL */
	int client_basic;		/* client credentials: id and secret in HTTP Basic
					 * (client_secret_basic) instead of the form body */
	int64_t refresh_before_ms;	/* refresh this long before expiry */
	int64_t jitter_ms;		/* random extra lead, 0..jitter */
	int64_t default_lifetime_ms;	/* when the vendor states no expiry */
	int64_t login_timeout_ms;	/* give up waiting for a login; <= 0: none */
	int retry_after_s;		/* least Retry-After advertised while logins fail */
	/*
	 * Trace context for a login, or NULL. Called once per login as it
	 * starts (before a fleet's fetch, so a token shared by another
	 * instance names the same trigger), never on tg_token_get's path
	 * with a valid token: hook_arg is login_headers_arg; waiter_arg is the
	 * tg_token_get arg of the first caller waiting for this login, or NULL
	 * when nobody waits (tg_token_prefetch, the refresh ahead of expiry).
	 * Adds headers to out (borrowed for the call), never Content-Type,
	 * Accept or Authorization. When a caller waits, the login's log lines
	 * name the X-Request-Id and the traceparent's trace id it added as
	 * request_id and trace_id.
	 */
	void (*login_headers)(void *hook_arg, void *waiter_arg, struct evkeyvalq *out);
	void *login_headers_arg;	/* borrowed: must outlive the source */
	/*
	 * The login request this instance sent ends, or NULL: answered with
	 * status by origin ("primary", "fallback"; static), or failed (not
	 * sent, no whole answer, login_timeout_ms passed: status 0). Called
	 * once per request, before any waiter hears; never for a token taken
	 * from the fleet, nor for a request cancelled by tg_token_src_free.
	 * hook_arg is login_headers_arg.
	 */
	void (*login_end)(void *hook_arg, int status, int failed, const char *origin);
};

struct tg_token_src;
struct tg_token_wait;

/**
 * token and why are borrowed for the duration of the call (copy to keep),
 * arg is the caller's; token is NULL on failure with why
 * (a sentence for the client, never containing the secret) and
 * retry_after_s (>= 1): the seconds left in the login backoff window
 * (1 s after the first failure, doubling up to 30 s, reset by a success),
 * rounded up and never less than opts->retry_after_s.
 */
typedef void (*tg_token_cb)(const char *token, const char *why, int retry_after_s, void *arg);

/** New source, owned by the caller: tg_token_src_free(). opts and its strings
 * are borrowed (copied). base and login are borrowed and must outlive the
 * source. */
struct tg_token_src *tg_token_src_new(struct event_base *base, struct tg_upstream *login,
    const struct tg_token_opts *opts);
/**
 * Takes ownership of ts and frees it: cancels the login in flight and drops
 * (frees) waiters without calling them; NULL-safe; safe from inside a
 * tg_token_cb.
 */
void tg_token_src_free(struct tg_token_src *ts);
/**
 * Call cb with a valid token. Returns NULL when cb has already been called:
 * a cached token, or a failure inside the backoff window (no login is
 * sent). Otherwise cb is called after the shared login and the returned
 * wait handle can cancel it: owned by ts (borrowed; freed just before cb
 * runs, by tg_token_wait_cancel or tg_token_src_free). ts is borrowed; arg is
 * handed to cb, never freed.
 */
struct tg_token_wait *tg_token_get(struct tg_token_src *ts, tg_token_cb cb, void *arg);
/** Forget a waiter (its client went away) and free it (w is no longer valid;
 * NULL-safe); the login itself goes on. */
void tg_token_wait_cancel(struct tg_token_wait *w);
/*
 * A fleet's view of one credential (tg_token_set_share): before a login the
 * source asks fetch for a token another instance holds, expiring after
 * fresh_until_ms (later than the one held, and fresh enough not to need a
 * refresh soon: the refresh lead, or half the life of the last token for
 * tokens that live shorter than that); answer(ts, token, expires_at_ms)
 * comes once, from the loop and never inside fetch, with a token
 * (borrowed for the call) or NULL when this instance should log in
 * itself. cancel: the fetch under way is not wanted any more (answer must
 * not come). After a login of its own the source publishes the token;
 * after a 401 it invalidates it. Every callback gets arg (the sharer's,
 * borrowed). wait_ms: the longest the fleet's answer may take (another
 * instance's login included); past it the source stops waiting and logs
 * in itself (0: login_timeout_ms).
 */
struct tg_token_share {
	void (*fetch)(void *arg, int64_t fresh_until_ms,
	    void (*answer)(void *ts, const char *token, int64_t expires_at_ms), void *ts);
	void (*cancel)(void *arg);
	void (*publish)(void *arg, const char *token, int64_t expires_at_ms);
	void (*invalidate)(void *arg, const char *token);
	void *arg;
	int64_t wait_ms;
};
/** Share ts's logins through sh (copied; sh->arg borrowed, must outlive ts). */
void tg_token_set_share(struct tg_token_src *ts, const struct tg_token_share *sh);

/**
 * The vendor refused token (401): drop it if it is still the current one,
 * so the next get logs in. A stale token is ignored, so any number of 401s
 * for the same token cost one login. request_id and trace_id name the
 * request the 401 answered in the log line (NULL: none). ts, token,
 * request_id and trace_id are borrowed.
 */
void tg_token_invalidate(struct tg_token_src *ts, const char *token, const char *request_id,
    const char *trace_id);
/**
 * How the last login failed: TG_UP_TLS when the login endpoint's
 * certificate or handshake was refused, another tg_up_error when it could
 * not be reached, TG_UP_OK when it answered (or no login failed yet). ts is
 * borrowed.
 */
int tg_token_last_error(const struct tg_token_src *ts);
/** Current token or NULL (no login is started). ts is borrowed; the token is
 * borrowed from ts until the next call on it or the next loop turn. */
const char *tg_token_peek(const struct tg_token_src *ts);
/** Start a login now if none is cached (readiness checks, start-up); ts is
 * borrowed. */
void tg_token_prefetch(struct tg_token_src *ts);

struct tg_token_stats {
	unsigned long long logins;	/* login requests sent */
	unsigned long long login_failures;	/* of those, failed or timed out */
	unsigned long long invalidations;	/* current tokens dropped after a 401 */
	int64_t expires_at_ms;		/* 0 when none */
	int failing;			/* the last login failed */
};
/** Copy ts's counters into st (both borrowed). */
void tg_token_get_stats(const struct tg_token_src *ts, struct tg_token_stats *st);

/**
 * exp claim of a JWT (seconds), without verifying it; -1 when absent,
 * negative or not a number, or when the token is malformed. A fractional
 * NumericDate is truncated. jwt is borrowed.
 */
int64_t tg_jwt_exp(const char *jwt);

/* ---- callers' own logins ---- */

struct tg_login_cache;
/**
 * At most max_entries (0 disables the cache). When full, expired entries
 * are evicted first, else the one closest to expiry. The caller owns the
 * cache: tg_login_cache_free().
 */
struct tg_login_cache *tg_login_cache_new(size_t max_entries);
/** Takes ownership of lc and frees it with its entries; NULL-safe. */
void tg_login_cache_free(struct tg_login_cache *lc);
/**
 * Cached vendor response body for (id, secret) while valid at now_ms, or
 * NULL. lc, id and secret are borrowed; the body is borrowed from lc until
 * the next call on the cache. When
 * expires_at_ms is not NULL it receives the entry's expiry.
 */
const char *tg_login_cache_get(struct tg_login_cache *lc, const char *id, const char *secret,
    int64_t now_ms, int64_t *expires_at_ms);
/**
 * Remember body for (id, secret) until expires_at_ms (wall clock,
 * compared with tg_clock_now_ms; an already expired body is not stored).
 * token is the vendor token body carries (NULL: none known), for
 * tg_login_cache_drop_token. lc, id, secret, body and token are borrowed
 * (body is copied; only salted hashes of id and secret, and of token, are
 * kept).
 */
void tg_login_cache_put(struct tg_login_cache *lc, const char *id, const char *secret,
    const char *body, const char *token, int64_t expires_at_ms);
/** Forget every entry whose answer carries token (borrowed: a token the
 * vendor refused); returns how many. O(entries): called on a 401. */
size_t tg_login_cache_drop_token(struct tg_login_cache *lc, const char *token);
/** Forget every entry (the vendor revoked tokens); lc borrowed, NULL-safe. */
void tg_login_cache_clear(struct tg_login_cache *lc);
/** Entries held (some may have expired and not been dropped yet); lc is borrowed. */
size_t tg_login_cache_count(const struct tg_login_cache *lc);

#endif
