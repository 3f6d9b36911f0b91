/*
 * webhook.h - the gateway's own delivery of callbackUrl webhooks: Standard
 * Webhooks signing (sign.c), the egress (SSRF) policy applied to callback
 * URLs (egress.c, resolve.c), outbox jobs as JSON (job_json.c) and the
 * delivery worker on the event loop (deliver.c, worker.c). The durable
 * outbox is reached only through the state seam (tidegate/state.h, whose
 * record types it uses: included here). Called by the webhook
 * feature (src/webhook/feature.c): the export route adds jobs and streams
 * their payloads, the admin listener lists and redelivers, the metrics
 * endpoint reads the counters.
 *
 * The order of calls for one job:
 *   tg_egress_check_url()        at request time, 400 when refused
 *   tg_state_outbox_add()        job "waiting", durable when its callback runs
 *   tg_state_payload_open() … _append() … _commit()   job "ready"
 *   the worker leases, signs, sends, records the outcome and calls
 *   on_outcome: "delivered", "gone" (410), "dead" (schedule exhausted), or
 *   "ready" again with the next attempt time.
 *
 * Everything runs on the loop thread; no call here waits for the disk
 * (the seam's writes answer later).
 */
#ifndef TIDEGATE_WEBHOOK_H
#define TIDEGATE_WEBHOOK_H

#include <stddef.h>
#include <stdint.h>

#include <yajl/yajl_gen.h>

#include "tidegate/config.h"
#include "tidegate/state.h"
#include "tidegate/util.h"

struct event_base;
struct evdns_base;
struct evbuffer;
struct sockaddr;
struct tg_state;

/* ---- signing (sign.c) ---- */

/** Decoded key length bounds for "whsec_" secrets (the spec asks 24..64). */
#define TG_WEBHOOK_KEY_MIN	24
#define TG_WEBHOOK_KEY_MAX	512

/**
 * Decode "whsec_<base64>" (borrowed) into its key: the caller takes ownership
 * of the buffer (free()), its length in *len. NULL with err for anything malformed; err never
 * quotes the secret.
 */
uint8_t *tg_webhook_secret_decode(const char *secret, size_t *len, struct tg_err *err);

struct tg_webhook_signer;
/**
 * A streaming signer over "id.ts." followed by the body bytes given to
 * _update, one HMAC-SHA256 per secret (secrets borrowed, decoded now; the
 * caller keeps nothing alive). NULL with err when a secret is malformed or
 * id is empty or contains '.'; id is borrowed (copied). The caller owns the
 * signer: tg_webhook_signer_free.
 */
struct tg_webhook_signer *tg_webhook_signer_new(const char *const *secrets, size_t nsecrets,
    const char *id, int64_t ts, struct tg_err *err);
/** s and data are borrowed; data is not kept. */
void tg_webhook_signer_update(struct tg_webhook_signer *s, const void *data, size_t n);
/**
 * The webhook-signature header value, "v1,<base64>" per secret in the
 * order given, space-separated; the caller takes ownership (free()). s is
 * borrowed (still freed with tg_webhook_signer_free). Call once.
 */
char *tg_webhook_signer_final(struct tg_webhook_signer *s);
/** Takes ownership of s and frees it; NULL-safe. */
void tg_webhook_signer_free(struct tg_webhook_signer *s);
/** One-shot signature of a body in memory; secrets, id and body borrowed; the
 * caller takes ownership of the result (free()), or NULL with err. */
char *tg_webhook_sign(const char *const *secrets, size_t nsecrets, const char *id, int64_t ts,
    const void *body, size_t len, struct tg_err *err);
/**
 * Receiver side: 0 when one of the "v1,…" signatures in sig_header matches
 * secret over id.ts.body (constant-time comparison) and, when tolerance_s
 * is above 0, ts lies within tolerance_s of now_s. -1 with the reason in
 * err otherwise. All arguments borrowed.
 */
int tg_webhook_verify(const char *secret, const char *id, const char *ts,
    const char *sig_header, const void *body, size_t len, int64_t now_s, int64_t tolerance_s,
    struct tg_err *err);

/* ---- relay URLs (relay_mac.c) ---- */

#define TG_WEBHOOK_RELAY_KEY_LEN	32	/* the state's relay key (bytes) */
#define TG_WEBHOOK_RELAY_MAC_HEX	32	/* the MAC in a relay URL: 16 bytes, hex */
/** "msg_<32 hex>.<32 hex>" and NUL: a relay URL's last path segment. */
#define TG_WEBHOOK_RELAY_SEG_LEN	(4 + 32 + 1 + TG_WEBHOOK_RELAY_MAC_HEX + 1)

/**
 * The last path segment of job id's relay URL (all borrowed): the id, a
 * dot and HMAC-SHA256 of the id under key, its first 16 bytes in hex, so
 * that any instance holding key tells a genuine id from a made-up one
 * without asking the state.
 */
void tg_webhook_relay_seg(const uint8_t key[TG_WEBHOOK_RELAY_KEY_LEN], const char *id,
    char out[TG_WEBHOOK_RELAY_SEG_LEN]);
/**
 * 0 when seg (borrowed) is a segment tg_webhook_relay_seg made under key
 * (borrowed; the MAC compared in constant time): its job id into id
 * (borrowed, "msg_<32 hex>"). -1 otherwise (another shape, or a MAC that
 * is not key's), id "".
 */
int tg_webhook_relay_check(const uint8_t key[TG_WEBHOOK_RELAY_KEY_LEN], const char *seg,
    char id[TG_WEBHOOK_ID_LEN]);
/** 1 when seg (borrowed) is a bare job id, "msg_<32 hex>" (the relay URLs
 * of jobs made before relay URLs carried a MAC), else 0. */
int tg_webhook_relay_bare(const char *seg);

/* ---- egress policy (egress.c, resolve.c) ---- */

struct tg_egress;
/**
 * A policy refusing every special-purpose address range (see
 * docs/webhooks.md) except what allow names: CIDRs ("10.0.0.0/8",
 * "fd00::/8"), single addresses, host names ("hooks.internal") and name
 * suffixes ("*.svc.cluster.local"); borrowed, copied; NULL means none.
 * NULL with err naming a bad entry. The caller owns the policy:
 * tg_egress_free.
 */
struct tg_egress *tg_egress_new(const struct tg_strlist *allow, struct tg_err *err);
/** Takes ownership of p and frees it; NULL-safe. */
void tg_egress_free(struct tg_egress *p);
/**
 * The synchronous check at request time. 0 when url may be used: http or
 * https, a host, no user info, and the host either an allowed literal
 * address or a name (whose addresses are checked by DNS at each attempt).
 * -1 with the reason in why (which may quote the URL's host, never its
 * query). p and url are borrowed.
 */
int tg_egress_check_url(const struct tg_egress *p, const char *url, struct tg_err *why);
/**
 * One resolved address of host (may be NULL): 0 when allowed (public, in
 * an allowed CIDR, or host allow-listed by name), -1 with why. p, host and
 * sa are borrowed.
 */
int tg_egress_check_addr(const struct tg_egress *p, const char *host, const struct sockaddr *sa,
    struct tg_err *why);
/**
 * The special-purpose range sa falls in ("loopback", "private", …), or
 * NULL for a public address. IPv6 forms embedding an IPv4 address
 * (mapped, compatible, NAT64, 6to4) report the embedded address's range.
 * Static string (borrowed); sa is borrowed.
 */
const char *tg_egress_range(const struct sockaddr *sa);

struct tg_egress_lookup;
/** addr: the checked address to connect to (IP literal), or NULL and why
 * (both borrowed); refused: 1 when the policy refused the host or one of
 * its addresses, 0 when it could not be resolved (DNS: may heal). */
typedef void (*tg_egress_cb)(const char *addr, const char *why, int refused, void *arg);
/**
 * Resolve host (an IP literal is checked without DNS) through dns and
 * check EVERY address: one refused address refuses the host. cb runs
 * exactly once, from the loop (never inside this call), unless the
 * lookup is cancelled; timeout_ms bounds the DNS wait. p, base and dns
 * are borrowed and must outlive the lookup; host is copied. The lookup
 * is freed after cb returns. The returned handle stays owned by the
 * lookup (borrowed): valid until cb is called or tg_egress_lookup_cancel.
 */
struct tg_egress_lookup *tg_egress_resolve(const struct tg_egress *p, struct event_base *base,
    struct evdns_base *dns, const char *host, int64_t timeout_ms, tg_egress_cb cb, void *arg);
/**
 * No callback after this; l (borrowed) is no longer valid (it is freed now
 * or by evdns). A DNS query still in flight is cancelled and
 * its memory released when evdns reports the cancel, so the loop must run
 * once more before the evdns_base is freed.
 */
void tg_egress_lookup_cancel(struct tg_egress_lookup *l);

/* ---- outbox presenters (job_json.c); the outbox itself: tidegate/outbox.h ---- */

/**
 * A job as JSON into g: id, state, url (query redacted), kind,
 * correlationId, service, apiKey, attempts, lastStatus, lastError, size,
 * leased, and ISO 8601 times (null when not yet). g and job are borrowed.
 */
void tg_outbox_job_json(yajl_gen g, const struct tg_outbox_job *job);

/* ---- the delivery worker (deliver.c, worker.c) ---- */

/** Zero fields take their defaults. */
struct tg_webhook_opts {
	int64_t attempt_timeout_ms;	/* DNS, connect, and silence while sending or
					 * awaiting the answer; 0: 15 s */
	int64_t attempt_deadline_ms;	/* a whole attempt, DNS to answer, plus a second
					 * per MiB of payload; 0: 60 s (at least
					 * attempt_timeout_ms) */
	size_t max_inflight;		/* attempts at once; 0: 8 */
	size_t max_inflight_per_host;	/* attempts at once to one callback host (the
					 * URL's, as the lease names it); 0: a quarter
					 * of max_inflight, at least 1 */
	int tls_insecure;		/* 1: skip certificate verification (tests only) */
	const char *ca_file;		/* PEM bundle (copied); NULL: system store */
	const char *user_agent;		/* (copied) NULL: "tidegate-webhook" */
	int64_t lease_ms;		/* the outbox's lease length (tg_outbox_opts):
					 * renewed every third of it; 0: 60 s */
};

/** What on_outcome hears after each attempt; everything borrowed for the call. */
struct tg_webhook_outcome {
	const char *id, *kind, *correlation_id, *service, *api_key;	/* NULL when unset */
	const char *host;		/* the callback URL's host (never its query) */
	int attempt;			/* 1-based */
	int status;			/* HTTP status, 0 when none came */
	const char *error;		/* "" on success, else why (no secrets) */
	enum tg_outbox_state state;	/* READY (will retry), DELIVERED, GONE or DEAD */
	int64_t next_at;		/* READY: when the next attempt is due (ms) */
	int64_t duration_ms;		/* this attempt, DNS to answer */
	int64_t first_delay_ms;		/* attempt 1: payload ready → attempt start; else -1 */
};

struct tg_webhook_cbs {
	/**
	 * The whsec_ secrets for ref, current first (older ones during a
	 * rotation): a list borrowed until the call returns, or NULL when ref
	 * is unknown (the attempt fails and retries).
	 */
	const struct tg_strlist *(*secrets)(const char *ref, void *arg);
	/** After each attempt, once its outcome is durable. May be NULL. */
	void (*on_outcome)(const struct tg_webhook_outcome *o, void *arg);
};

struct tg_webhook;
/**
 * Start delivering the outbox's due jobs on base, through the state seam
 * st (its outbox configured). base, dns, st and pol are borrowed and must
 * outlive the worker; opts (may be NULL) and cbs are copied (with the
 * strings opts points to); arg is passed to the callbacks. NULL with err;
 * else the caller owns the worker: tg_webhook_free.
 */
struct tg_webhook *tg_webhook_new(struct event_base *base, struct evdns_base *dns,
    struct tg_state *st, const struct tg_egress *pol, const struct tg_webhook_opts *opts,
    const struct tg_webhook_cbs *cbs, void *arg, struct tg_err *err);
/** Look for due jobs now: call it after a write that makes a job due (a
 * payload committed, a redelivery), since the seam announces nothing; the
 * worker otherwise looks at the next due time, at least every second (in
 * a fleet every third of the lease, and at once on another instance's
 * "outbox" wake-up). w is borrowed. */
void tg_webhook_kick(struct tg_webhook *w);
/**
 * Remember that request rid added job id, for the X-Request-Id of its
 * deliveries by this process (in memory, up to a bound: a job delivered
 * after a restart or by another instance goes without). w, id, rid
 * borrowed (copied).
 */
void tg_webhook_note_origin(struct tg_webhook *w, const char *id, const char *rid);
/**
 * The W3C trace id of job id's deliveries, derived from the id alone
 * (the first 16 bytes of SHA-256("tidegate-webhook:" id), in hex), so
 * that every instance and every attempt agree with what the
 * webhook_job_added log line names. id and out borrowed.
 */
void tg_webhook_trace_id(const char *id, char out[33]);
/**
 * From the next attempt on (a reload): the deadline of an attempt and the
 * attempts at once to one host (0: their defaults, as in tg_webhook_opts).
 * Attempts in flight keep their deadline. w borrowed.
 */
void tg_webhook_set_limits(struct tg_webhook *w, int64_t attempt_deadline_ms,
    size_t max_inflight_per_host);
/**
 * Use pol (borrowed) from the next attempt on, e.g. after a configuration
 * reload. Attempts in flight may still read the previous policy: free it
 * only once tg_webhook_inflight() has been 0 (or keep one spare).
 */
void tg_webhook_set_policy(struct tg_webhook *w, const struct tg_egress *pol);
/**
 * Stop taking jobs; on_drained(arg) runs from the loop once no attempt is
 * in flight (at most about one attempt deadline later). w and arg borrowed.
 */
void tg_webhook_drain(struct tg_webhook *w, void (*on_drained)(void *arg), void *arg);
/** Attempts in flight now; w is borrowed. */
size_t tg_webhook_inflight(const struct tg_webhook *w);
/**
 * Stop at once: attempts in flight are abandoned and their leases
 * released (due again at the next start: at least once); the loop runs
 * here (up to 2 s) until the seam has written the releases. Takes
 * ownership of w and frees it; NULL-safe; not from inside on_outcome or a
 * loop callback of w. Run the loop once more before freeing dns.
 */
void tg_webhook_free(struct tg_webhook *w);

/* ---- the feature (src/webhook/feature.c) ---- */

struct gw;
struct gw_config;
struct gw_config_def;
/** The feature's keys (webhooks.*, keys[].webhook_secret), their checks
 * and settings: gw_config_define it before the first gw_config_load. */
extern const struct gw_config_def tg_webhook_config;
/** The outbox's store options from c (borrowed, loaded with
 * tg_webhook_config defined; o borrows from c): for the state seam's open
 * (tg_state_opts.outbox). */
void tg_webhook_outbox_opts(const struct gw_config *c, struct tg_outbox_opts *o);
/**
 * Register the webhook feature with gw (borrowed), configured by gw's
 * running configuration: callbackUrl on exports (deliver and relay modes),
 * the relay endpoint, callback URL checks for other features, the admin
 * API under /webhooks, the delivery worker, all on gw->state (its outbox
 * configured: tg_webhook_outbox_opts). 0, or -1 with err (no state seam, a
 * bad egress policy). gw owns the feature from then on (gw_free).
 */
int tg_webhook_register(struct gw *gw, struct tg_err *err);

#endif
