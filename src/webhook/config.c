/*
 * config.c - the webhook feature's configuration keys (webhooks.*,
 * keys[].webhook_secret) checked and parsed once, at load: the mode and
 * public URL, the retry schedule, the egress allow-list, the bounds one
 * key sets on another (deadline and timeout, quota and largest export), and the signing
 * secrets (one whsec_ per line, each decoded; messages name the line,
 * never its content). The entry point adds the check to the core's loader
 * (gw_config_add_check), so -t, the start and SIGHUP all run it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/gateway_config.h"
#include "tidegate/webhook.h"

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
check_wh_secrets(struct gw_config *c, struct tg_cfg_report *rep)
{
	char key[64];
	size_t i;

	if (c->wh_secret != NULL)
		split_secrets(rep, "webhooks.secret", c->wh_secret, &c->wh_secrets);
	for (i = 0; i < c->nkeys; i++) {
		struct gw_key_cfg *k = &c->keys[i];

		if (k->webhook_secret == NULL)
			continue;
		snprintf(key, sizeof(key), "keys[%zu].webhook_secret", i);
		split_secrets(rep, key, k->webhook_secret, &k->wh_secrets);
		if (k->name != NULL && strcmp(k->name, "global") == 0) {
			snprintf(key, sizeof(key), "keys[%zu].name", i);
			tg_config_report_add(rep, NULL, key, "'global' names webhooks.secret; "
			    "rename this key to give it its own webhook_secret");
		}
	}
}

static void
check_wh_mode(struct gw_config *c, struct tg_cfg_report *rep)
{
	static const char *const modes[] = { "deliver", "forward", "relay", NULL };
	const char *u = c->wh_public_url;

	if (gw_config_check_choice(rep, "webhooks.mode", c->wh_mode_str, modes) == 0)
		c->wh_mode = strcmp(c->wh_mode_str, "deliver") == 0 ? GW_WH_DELIVER :
		    strcmp(c->wh_mode_str, "forward") == 0 ? GW_WH_FORWARD : GW_WH_RELAY;
	if (u != NULL && strncmp(u, "http://", 7) != 0 && strncmp(u, "https://", 8) != 0)
		tg_config_report_add(rep, NULL, "webhooks.public_url",
		    "must be an http:// or https:// URL");
	if (c->wh_mode == GW_WH_RELAY && u == NULL)
		tg_config_report_add(rep, "webhooks.mode", "webhooks.public_url",
		    "required with mode relay (how the vendor reaches this gateway)");
}

/* Bounds between keys: the deadline covers what the silence timeout
 * bounds, and an export a key may send must fit its share of the quota. */
static void
check_wh_limits(const struct gw_config *c, struct tg_cfg_report *rep)
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
void
tg_webhook_config_check(struct gw_config *c, struct tg_cfg_report *rep)
{
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
	check_wh_secrets(c, rep);
}

