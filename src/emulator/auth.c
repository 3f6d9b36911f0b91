/*
 * auth.c - the vendor's two credential flows. Data exchange: POST
 * /authenticate with username/password -> HS256 JWT (iat, exp). Simulation:
 * OAuth2 client credentials at /api/oauth2/token -> access_token with
 * expires_in, errors per RFC 6749. Tokens carry a generation number so the
 * control API can revoke every token issued so far.
 */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <event2/buffer.h>
#include <sys/queue.h>
#include <event2/keyvalq_struct.h>

#include "tidegate/crypto.h"
#include "tidegate/http.h"
#include "tidegate/ids.h"
#include "tidegate/json.h"
#include "tidegate/log.h"
#include "emu.h"

char *
emu_jwt_sign(const char *secret, const char *sub, int64_t iat_s, int64_t exp_s, long long gen)
{
	static const char header[] = "{\"alg\":\"HS256\",\"typ\":\"JWT\"}";
	uint8_t mac[TG_SHA256_LEN];
	const unsigned char *pbuf;
	char *h, *p, *sig, *signing, *tok, jti[33];
	size_t plen;
	yajl_gen g = tg_json_gen_new();

	tg_id_hex(jti, 16);
	yajl_gen_map_open(g);
	tg_json_kv_str(g, "sub", sub);
	tg_json_kv_int(g, "iat", iat_s);
	tg_json_kv_int(g, "exp", exp_s);
	tg_json_kv_str(g, "jti", jti);
	tg_json_kv_int(g, "gen", gen);
	yajl_gen_map_close(g);
	yajl_gen_get_buf(g, &pbuf, &plen);
	h = tg_b64url_encode(header, sizeof(header) - 1);
	p = tg_b64url_encode(pbuf, plen);
	yajl_gen_free(g);
	signing = tg_xasprintf("%s.%s", h, p);
	tg_hmac_sha256(secret, strlen(secret), signing, strlen(signing), mac);
	sig = tg_b64url_encode(mac, sizeof(mac));
	tok = tg_xasprintf("%s.%s", signing, sig);
	free(h);
	free(p);
	free(sig);
	free(signing);
	return tok;
}

int
emu_jwt_verify(const char *secret, const char *token, long long min_gen)
{
	const char *d1 = strchr(token, '.'), *d2 = d1 ? strchr(d1 + 1, '.') : NULL;
	uint8_t mac[TG_SHA256_LEN], *sig = NULL, *payload = NULL;
	size_t siglen, plen;
	yajl_val v = NULL, exp, gen;
	int rc = -1;

	if (d2 == NULL || strchr(d2 + 1, '.') != NULL)
		return -1;
	tg_hmac_sha256(secret, strlen(secret), token, (size_t)(d2 - token), mac);
	sig = tg_b64_decode(d2 + 1, strlen(d2 + 1), &siglen);
	if (sig == NULL || siglen != sizeof(mac) || !tg_mem_equal_ct(sig, mac, sizeof(mac)))
		goto done;
	payload = tg_b64_decode(d1 + 1, (size_t)(d2 - d1 - 1), &plen);
	if (payload == NULL || (v = tg_json_parse((char *)payload, plen, NULL)) == NULL)
		goto done;
	exp = tg_json_get(v, "exp");
	gen = tg_json_get(v, "gen");
	if (exp == NULL || !YAJL_IS_INTEGER(exp) || gen == NULL || !YAJL_IS_INTEGER(gen))
		goto done;
	if (YAJL_GET_INTEGER(exp) * 1000 <= tg_clock_now_ms() || YAJL_GET_INTEGER(gen) < min_gen)
		goto done;
	rc = 0;
done:
	yajl_tree_free(v);
	free(payload);
	free(sig);
	return rc;
}

static int
check(struct evhttp_request *req, const char *secret, long long gen)
{
	const char *tok = tg_http_bearer(req);

	if (tok == NULL) {
		emu_reply_error(req, 401, "missing bearer token");
		return -1;
	}
	if (emu_jwt_verify(secret, tok, gen) != 0) {
		evhttp_add_header(evhttp_request_get_output_headers(req), "WWW-Authenticate",
		    "Bearer error=\"invalid_token\"");
		emu_reply_error(req, 401, "invalid, expired or revoked token");
		return -1;
	}
	return 0;
}

int
emu_auth_check_dex(struct tg_emu *emu, struct evhttp_request *req)
{
	return check(req, emu->dex_secret, emu->token_gen);
}

int
emu_auth_check_sim(struct tg_emu *emu, struct evhttp_request *req)
{
	return check(req, emu->sim_secret, emu->token_gen);
}

static int
secret_equal(const char *a, const char *b)
{
	uint8_t ha[TG_SHA256_LEN], hb[TG_SHA256_LEN];

	/* Hash first so the comparison time does not depend on lengths. */
	tg_sha256(a, strlen(a), ha);
	tg_sha256(b, strlen(b), hb);
	return tg_mem_equal_ct(ha, hb, sizeof(ha));
}

void
emu_h_authenticate(struct tg_emu *emu, struct evhttp_request *req, const char *const *prm)
{
	const struct tg_emu_config *cfg = emu->cfg;
	const char *user, *pass;
	struct tg_err err;
	size_t len, i;
	char *body = tg_http_body(req, &len), *tok;
	yajl_val v = tg_json_parse(body, len, &err);
	int64_t now = tg_clock_now_ms() / 1000;
	yajl_gen g;

	free(body);
	if (v == NULL || !YAJL_IS_OBJECT(v)) {
		emu_reply_error(req, 400, v ? "body must be a JSON object" : err.msg);
		goto done;
	}
	user = tg_json_get_str(v, "username");
	pass = tg_json_get_str(v, "password");
	if (user == NULL || pass == NULL) {
		emu_reply_error(req, 400, "username and password are required");
		goto done;
	}
	for (i = 0; i < cfg->nusers; i++)
		if (strcmp(cfg->users[i].username, user) == 0 &&
		    secret_equal(cfg->users[i].password, pass))
			break;
	if (i == cfg->nusers) {
		emu_reply_error(req, 401, "invalid username or password");
		goto done;
	}
	tok = emu_jwt_sign(emu->dex_secret, user, now, now + cfg->dex_token_lifetime / 1000,
	    emu->token_gen);
	g = tg_json_gen_new();
	yajl_gen_map_open(g);
	tg_json_kv_str(g, "token", tok);
	yajl_gen_map_close(g);
	tg_reply_json(req, 200, g);
	yajl_gen_free(g);
	free(tok);
done:
	yajl_tree_free(v);
}

static void
oauth_error(struct evhttp_request *req, int status, const char *code, const char *desc)
{
	yajl_gen g = tg_json_gen_new();

	yajl_gen_map_open(g);
	tg_json_kv_str(g, "error", code);
	tg_json_kv_str(g, "error_description", desc);
	yajl_gen_map_close(g);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-store");
	tg_reply_json(req, status, g);
	yajl_gen_free(g);
}

void
emu_h_oauth_token(struct tg_emu *emu, struct evhttp_request *req, const char *const *prm)
{
	const struct tg_emu_config *cfg = emu->cfg;
	const char *ctype = tg_http_header(req, "Content-Type"), *id, *secret, *grant;
	struct evkeyvalq form;
	int64_t now = tg_clock_now_ms() / 1000;
	size_t len, i;
	char *body = tg_http_body(req, &len), *tok;
	yajl_gen g;

	TAILQ_INIT(&form);
	if (ctype == NULL || strncasecmp(ctype, "application/x-www-form-urlencoded", 33) != 0) {
		oauth_error(req, 400, "invalid_request",
		    "Content-Type must be application/x-www-form-urlencoded");
		goto done;
	}
	if (evhttp_parse_query_str(body, &form) != 0) {
		oauth_error(req, 400, "invalid_request", "malformed form body");
		goto done;
	}
	grant = evhttp_find_header(&form, "grant_type");
	id = evhttp_find_header(&form, "client_id");
	secret = evhttp_find_header(&form, "client_secret");
	if (grant == NULL || id == NULL || secret == NULL) {
		oauth_error(req, 400, "invalid_request",
		    "grant_type, client_id and client_secret are required");
		goto done;
	}
	if (strcmp(grant, "client_credentials") != 0) {
		oauth_error(req, 400, "unsupported_grant_type",
		    "only client_credentials is supported");
		goto done;
	}
	for (i = 0; i < cfg->nclients; i++)
		if (strcmp(cfg->clients[i].id, id) == 0 && secret_equal(cfg->clients[i].secret,
		    secret))
			break;
	if (i == cfg->nclients) {
		oauth_error(req, 401, "invalid_client", "client authentication failed");
		goto done;
	}
	tok = emu_jwt_sign(emu->sim_secret, id, now, now + cfg->sim_token_lifetime / 1000,
	    emu->token_gen);
	g = tg_json_gen_new();
	yajl_gen_map_open(g);
	tg_json_kv_str(g, "access_token", tok);
	tg_json_kv_str(g, "token_type", "Bearer");
	tg_json_kv_int(g, "expires_in", cfg->sim_token_lifetime / 1000);
	yajl_gen_map_close(g);
	evhttp_add_header(evhttp_request_get_output_headers(req), "Cache-Control", "no-store");
	tg_reply_json(req, 200, g);
	yajl_gen_free(g);
	free(tok);
done:
	evhttp_clear_headers(&form);
	free(body);
}
