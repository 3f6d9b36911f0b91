/*
 * config.c - the webhook feature's configuration: its keys (webhooks.*,
 * and keys[].webhook_secret beside the core's keys[]), defaults and
 * bounds, the settings struct they fill (struct wh_cfg), checked and
 * parsed once, at load: the mode and public URL, the retry schedule, the
 * egress allow-list, the bounds one key sets on another (deadline and
 * timeout, quota and largest export), the signing secrets (one whsec_ per
 * line, each decoded; messages name the line, never its content), the CA
 * bundle and the outbox's path resolved beside the configuration file.
 * The entry point defines it before the first load (gw_config_define), so
 * -K, -t, the start and SIGHUP read these keys with the core's.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/gateway_config.h"
#include "hooks_int.h"

#define K(p, t, f, d, doc) GW_CFG_KEY(struct wh_cfg, p, t, f, d, doc)
#define KB(p, t, f, d, lo, hi, doc) GW_CFG_KEYB(struct wh_cfg, p, t, f, d, lo, hi, doc)

/* Read from the items of the core's keys[]: keys[i] here is the core's keys[i]. */
static const struct tg_cfg_key key_keys[] = {
	GW_CFG_KEY(struct wh_key_cfg, "webhook_secret", TG_CFG_SECRET, webhook_secret, NULL,
	    "this key's webhook signing secrets (whsec_ lines, current first; else "
	    "webhooks.secret)"),
};

static const struct tg_cfg_key keys[] = {
	K("webhooks.mode", TG_CFG_STR, wh_mode_str, "deliver",
	  "callbackUrl of exports: deliver (the gateway), forward (to the vendor) or relay"),
	K("webhooks.db", TG_CFG_STR, wh_db, "tidegate.db",
	  "webhook outbox, SQLite (relative to this file; payloads in <db>.payloads/)"),
	K("webhooks.schedule", TG_CFG_STRLIST, wh_schedule, "0s,5s,5m,30m,2h,5h,10h,10h",
	  "delay before each delivery attempt; dead letter after the last"),
	KB("webhooks.attempt_timeout", TG_CFG_DURATION, wh_attempt_timeout, "15s", 100, 3.6e6,
	   "DNS, connect, and silence while sending or awaiting the answer, per attempt"),
	KB("webhooks.lease", TG_CFG_DURATION, wh_lease, "60s", 1000, 3.6e6,
	   "an attempt's claim on its job; after a crash the job is retried once it expires"),
	KB("webhooks.max_inflight", TG_CFG_INT, wh_max_inflight, "8", 1, 1024,
	   "delivery attempts at once"),
	KB("webhooks.attempt_deadline", TG_CFG_DURATION, wh_attempt_deadline, "60s", 100, 8.64e7,
	   "a whole delivery attempt (DNS to answer), plus a second per MiB of payload; at "
	   "least attempt_timeout"),
	KB("webhooks.max_inflight_per_host", TG_CFG_INT, wh_max_inflight_per_host, "0", 0, 1024,
	   "delivery attempts at once to one callback host, per instance; 0: a quarter of "
	   "max_inflight (at least 1)"),
	KB("webhooks.payload_max_bytes", TG_CFG_SIZE, wh_payload_max_bytes, "4GB", 1024,
	   1099511627776.0 * 64, "export data held for delivery in all (waiting, ready and dead "
	   "jobs); at it, new callbackUrls are refused with 503 WEBHOOK_QUOTA"),
	KB("webhooks.payload_key_share", TG_CFG_DOUBLE, wh_payload_key_share, "0.5", 0.001, 1,
	   "share of payload_max_bytes the jobs of one API key may hold (0 to 1)"),
	K("webhooks.allow", TG_CFG_STRLIST, wh_allow, NULL,
	  "egress allow-list: CIDRs, addresses, host names, *.suffixes (else special ranges "
	  "are refused)"),
	K("webhooks.secret", TG_CFG_SECRET, wh_secret, NULL,
	  "signing secrets for keys without their own: whsec_ lines, current first"),
	KB("webhooks.poll_interval", TG_CFG_DURATION, wh_poll_interval, "2s", 10, 3.6e6,
	   "deliver mode: poll a pending export this often (growing with its age)"),
	KB("webhooks.payload_timeout", TG_CFG_DURATION, wh_payload_timeout, "24h", 1000, 2.592e9,
	   "give a job up (dead) when its export data has not come after this long"),
	K("webhooks.public_url", TG_CFG_STR, wh_public_url, NULL,
	  "relay mode: base URL the vendor reaches this gateway's data exchange listener at"),
	KB("webhooks.max_payload", TG_CFG_SIZE, wh_max_payload, "1GB", 1024, 1099511627776.0,
	   "largest export data stored for delivery (bigger: the job is given up)"),
	KB("webhooks.retention", TG_CFG_DURATION, wh_retention, "7d", 60000, 3.1536e10,
	   "finished jobs (delivered, gone, dead) are purged this long after they end"),
	K("webhooks.ca_file", TG_CFG_STR, wh_ca_file, NULL,
	  "PEM CA bundle for https callbacks (default: system)"),
	{ "keys", TG_CFG_LIST, offsetof(struct wh_cfg, keys), NULL, 0, 0, 0, key_keys,
	  TG_NELEM(key_keys), sizeof(struct wh_key_cfg), offsetof(struct wh_cfg, nkeys),
	  "the core's keys[] (its row documents the list)" },
};

/* One whsec_ secret per line (current first), each checked by decoding it;
 * messages name the line, never its content. */
static void
split_secrets(struct tg_cfg_report *rep, const char *key, const char *v,
    struct tg_strlist *out)
{
	const char *p = v, *e;
	struct tg_err why;
	size_t n, line = 0, klen;
	uint8_t *k;
	char *s;

	while (p != NULL && *p != '\0') {
		e = strchr(p, '\n');
		n = e != NULL ? (size_t)(e - p) : strlen(p);
		line++;
		while (n > 0 && (p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t'))
			n--;
		while (n > 0 && (*p == ' ' || *p == '\t')) {
			p++;
			n--;
		}
		if (n > 0) {
			s = tg_xstrndup(p, n);
			if ((k = tg_webhook_secret_decode(s, &klen, &why)) == NULL) {
				explicit_bzero(s, n);
				free(s);
				tg_config_report_add(rep, NULL, key, "line %zu: %s", line, why.msg);
				return;
			}
			explicit_bzero(k, klen);
			free(k);
			out->v = tg_xrealloc(out->v, (out->n + 1) * sizeof(*out->v));
			out->v[out->n++] = s;
		}
		p = e != NULL ? e + 1 : NULL;
	}
}

static void
check_wh_secrets(const struct gw_config *g, struct wh_cfg *c, struct tg_cfg_report *rep)
{
	char key[64];
	size_t i;

	if (c->wh_secret != NULL)
		split_secrets(rep, "webhooks.secret", c->wh_secret, &c->wh_secrets);
	for (i = 0; i < c->nkeys && i < g->nkeys; i++) {
		struct wh_key_cfg *k = &c->keys[i];
		const char *name = g->keys[i].name;

		if (k->webhook_secret == NULL)
			continue;
		snprintf(key, sizeof(key), "keys[%zu].webhook_secret", i);
		split_secrets(rep, key, k->webhook_secret, &k->wh_secrets);
		if (name != NULL && strcmp(name, "global") == 0) {
			snprintf(key, sizeof(key), "keys[%zu].name", i);
			tg_config_report_add(rep, NULL, key, "'global' names webhooks.secret; "
			    "rename this key to give it its own webhook_secret");
		}
	}
}

static void
check_wh_mode(struct wh_cfg *c, struct tg_cfg_report *rep)
{
	static const char *const modes[] = { "deliver", "forward", "relay", NULL };
	const char *u = c->wh_public_url;

	if (gw_config_check_choice(rep, "webhooks.mode", c->wh_mode_str, modes) == 0)
		c->wh_mode = strcmp(c->wh_mode_str, "deliver") == 0 ? WH_DELIVER :
		    strcmp(c->wh_mode_str, "forward") == 0 ? WH_FORWARD : WH_RELAY;
	if (u != NULL && strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0)
		tg_config_report_add(rep, NULL, "webhooks.public_url",
		    "must be an http:// or https:// URL");
	if (c->wh_mode == WH_RELAY && u == NULL)
		tg_config_report_add(rep, "webhooks.mode", "webhooks.public_url",
		    "required with mode relay (how the vendor reaches this gateway)");
}

/* Bounds between keys: the deadline covers what the silence timeout
 * bounds, and an export a key may send must fit its share of the quota. */
static void
check_wh_limits(const struct wh_cfg *c, struct tg_cfg_report *rep)
{
	int64_t share = (int64_t)((double)c->wh_payload_max_bytes * c->wh_payload_key_share);
	size_t line, col;

	if (c->wh_attempt_deadline < c->wh_attempt_timeout)
		tg_config_report_add(rep, NULL, "webhooks.attempt_deadline",
		    "must be at least webhooks.attempt_timeout (%lld ms)",
		    (long long)c->wh_attempt_timeout);
	/* Named where the file set it: the default max_payload meets a cap set low. */
	if (c->wh_max_payload > share)
		tg_config_report_add(rep, tg_config_report_pos(rep, "webhooks.max_payload", &line,
		    &col) == 0 ? NULL : "webhooks.payload_max_bytes", "webhooks.max_payload",
		    "%lld bytes is more than one API key may hold (webhooks.payload_max_bytes "
		    "times webhooks.payload_key_share: %lld bytes): such an export could never "
		    "be stored; lower webhooks.max_payload or raise the cap",
		    (long long)c->wh_max_payload, (long long)share);
}

/* Webhook keys: mode, schedule, allow-list and secrets parsed once here, so a
 * reload with a bad value fails as a whole. */
static void
check(const struct gw_config *g, void *s, struct tg_cfg_report *rep)
{
	struct wh_cfg *c = s;
	struct tg_egress *pol;
	struct tg_err why;

	check_wh_mode(c, rep);
	check_wh_limits(c, rep);
	if (tg_outbox_schedule_parse(&c->wh_schedule, &c->wh_schedule_ms, &c->wh_nschedule,
	    &why) != 0)
		tg_config_report_add(rep, NULL, "webhooks.schedule", "%s", why.msg);
	if ((pol = tg_egress_new(&c->wh_allow, &why)) == NULL)
		tg_config_report_add(rep, NULL, "webhooks.allow", "%s", why.msg);
	tg_egress_free(pol);
	check_wh_secrets(g, c, rep);
	gw_config_check_readable(g, &c->wh_ca_file, "webhooks.ca_file", rep);
	/* checked with the state, as the account (tg_state_check) */
	c->wh_db_path = gw_config_beside(g, c->wh_db);
}

static void
strlist_wipe(struct tg_strlist *l)
{
	size_t i;

	for (i = 0; i < l->n; i++) {
		explicit_bzero(l->v[i], strlen(l->v[i]));
		free(l->v[i]);
	}
	free(l->v);
	l->v = NULL;
	l->n = 0;
}

/* What check derived, and the secrets wiped before the core frees them. */
static void
cleanup(void *s)
{
	struct wh_cfg *c = s;
	size_t i;

	for (i = 0; c->keys != NULL && i < c->nkeys; i++) {
		strlist_wipe(&c->keys[i].wh_secrets);
		if (c->keys[i].webhook_secret != NULL)
			explicit_bzero(c->keys[i].webhook_secret,
			    strlen(c->keys[i].webhook_secret));
	}
	strlist_wipe(&c->wh_secrets);
	if (c->wh_secret != NULL)
		explicit_bzero(c->wh_secret, strlen(c->wh_secret));
	free(c->wh_schedule_ms);
	c->wh_schedule_ms = NULL;
	free(c->wh_db_path);
	c->wh_db_path = NULL;
}

const struct gw_config_def tg_webhook_config = {
	.name = "webhook",
	.keys = keys,
	.nkeys = TG_NELEM(keys),
	.size = sizeof(struct wh_cfg),
	.check = check,
	.cleanup = cleanup,
};

/* The feature's id with the core (gw_feature_register): the same for every
 * gateway of the process, as the features register in one fixed order. */
static int feature_id = -1;

void
wh_cfg_bind(int id)
{
	feature_id = id;
}

const struct wh_cfg *
wh_cfg(const struct gw_runtime *rt)
{
	return gw_feature_settings(rt, feature_id);
}

const struct wh_cfg *
wh_cfg_of(const struct gw_config *c)
{
	return gw_config_settings(c, &tg_webhook_config);
}

const struct tg_strlist *
wh_secrets(const struct gw_runtime *rt, const char *name)
{
	const struct wh_cfg *c = wh_cfg(rt);
	size_t i;

	if (name != NULL && strcmp(name, "global") == 0)
		return c->wh_secrets.n > 0 ? &c->wh_secrets : NULL;
	for (i = 0; name != NULL && i < rt->cfg.nkeys && i < c->nkeys; i++)
		if (rt->cfg.keys[i].name != NULL && strcmp(rt->cfg.keys[i].name, name) == 0)
			return c->keys[i].wh_secrets.n > 0 ? &c->keys[i].wh_secrets : NULL;
	return NULL;
}

const char *
wh_secret_ref(const struct gw_runtime *rt, const char *key)
{
	if (key != NULL && wh_secrets(rt, key) != NULL)
		return key;
	return wh_secrets(rt, "global") != NULL ? "global" : NULL;
}
