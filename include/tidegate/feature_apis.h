/*
 * feature_apis.h - the APIs one feature offers the others, by name.
 *
 * Features never include each other (tests/layers.py), and the core does
 * not carry their APIs as slots of its own: a feature that offers a
 * service registers a struct of function pointers under a name when it
 * registers (gw_api_provide), and a feature that uses one looks it up once,
 * when every feature is registered (its start callback: gw_api_get),
 * never per request. A name not provided (the feature is not built in, or
 * a test leaves it out) is NULL, and the user says what it does without it.
 * Each API is declared here, with its name, beside the provider's
 * contract, so both sides name it openly.
 */
#ifndef TIDEGATE_FEATURE_APIS_H
#define TIDEGATE_FEATURE_APIS_H

#include "tidegate/gateway.h"

/* "jobs.answers": the poll multiplexer's answers (src/jobs), for a feature
 * that polls a job itself (the webhook's export data). */
#define GW_API_JOBS_ANSWERS "jobs.answers"
struct gw_jobs_answers {
	/* The answer the multiplexer holds for GET uri (borrowed) of service
	 * (GW_DEX / GW_SIM): 1 and *out (borrowed until the loop runs again)
	 * when it has a fresh one it would serve without asking the vendor. */
	int (*peek)(void *ctx, int service, const char *uri, struct gw_peek *out);
};

/* "webhook.callbacks": callback URLs other features accept from callers,
 * and whose secrets sign what they send (src/webhook). */
#define GW_API_WEBHOOK_CALLBACKS "webhook.callbacks"
struct gw_webhook_callbacks {
	/* A callback URL (borrowed) given by r's caller (borrowed) for API key
	 * (borrowed, may be NULL): a secret to sign with, and the egress
	 * policy's consent. 0, or -1 with a problem at /callbackUrl added to p. */
	int (*check)(void *ctx, const struct gw_req *r, const char *url, const char *key,
	    struct tg_problems *p);
	/* Whose secrets sign for API key (borrowed, may be NULL) under rt
	 * (borrowed): the key's own, "global", or NULL when none is configured
	 * (borrowed from rt's configuration). */
	const char *(*secret_ref)(void *ctx, const struct gw_runtime *rt, const char *key);
	/* A job queued through the state seam by another feature is due (its
	 * payload committed): the worker looks now, rather than on its timer
	 * (which in a fleet waits a third of webhooks.lease). NULL: nothing to
	 * kick. */
	void (*kick)(void *ctx);
};

/* "limits.sweeps": the daily quota of sweeps of a caller's key (src/limits),
 * for the feature that creates sweeps on an endpoint of its own (src/runs).
 * The unit is r's until r ends: given back then unless kept. */
#define GW_API_LIMITS_SWEEPS "limits.sweeps"
struct gw_limits_sweeps {
	/* Take a unit for the sweep r (borrowed) asks for: 0 when taken or
	 * r's key has no such quota (go on), -1 when r was answered (429
	 * QUOTA_EXCEEDED), 1 when the unit is on its way: done(r) follows
	 * when it is taken (never before take returns), or r is answered 429
	 * without it. */
	int (*take)(void *ctx, struct gw_req *r, void (*done)(struct gw_req *r));
	/* The sweep r asked for was created: its unit stays used. */
	void (*keep)(void *ctx, struct gw_req *r);
};

/**
 * Offer api (borrowed, static: a struct above) under name (borrowed,
 * static) with its ctx (borrowed, the provider's until its stop): 0, or -1
 * with err when the name is taken or too many APIs are offered.
 */
int gw_api_provide(struct gw *gw, const char *name, const void *api, void *ctx,
    struct tg_err *err);
/**
 * The API offered under name (borrowed; the provider's struct, borrowed)
 * and its context into *ctx (borrowed); NULL when no feature offers it.
 * A string compare: call it from a start callback, not per request.
 */
const void *gw_api_get(const struct gw *gw, const char *name, void **ctx);

#endif
