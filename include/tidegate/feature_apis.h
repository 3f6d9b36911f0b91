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
