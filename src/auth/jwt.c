/*
 * jwt.c - read the exp claim of a vendor JWT so the token source knows
 * when to refresh. Called by token.c after a password-flow login.
 *
 * The signature is not checked: the gateway is not the token's audience,
 * it only carries the token to the vendor, which verifies it. A wrong exp
 * costs at most an early refresh or a 401, which invalidates the token.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "tidegate/crypto.h"
#include "tidegate/json.h"
#include "tidegate/token.h"

/* Real tokens carry a few hundred bytes of claims; refuse to decode blobs. */
#define JWT_MAX_PAYLOAD	16384

/* A NumericDate may be fractional (RFC 7519, 2); whole seconds are enough. */
static int64_t
numeric_date(yajl_val v)
{
	if (v == NULL)
		return -1;
	if (YAJL_IS_INTEGER(v))
		return v->u.number.i >= 0 ? v->u.number.i : -1;
	if (YAJL_IS_DOUBLE(v) && isfinite(v->u.number.d) && v->u.number.d >= 0 &&
	    v->u.number.d < 9.0e15)
		return (int64_t)floor(v->u.number.d);
	return -1;
}

int64_t
tg_jwt_exp(const char *jwt)
{
	const char *d1, *d2;
	uint8_t *payload = NULL;
	size_t plen;
	yajl_val root = NULL;
	int64_t exp = -1;

	if (jwt == NULL || (d1 = strchr(jwt, '.')) == NULL ||
	    (d2 = strchr(d1 + 1, '.')) == NULL)
		goto done;
	if (d2 == d1 + 1 || d2 - d1 - 1 > JWT_MAX_PAYLOAD)
		goto done;
	if ((payload = tg_b64_decode(d1 + 1, (size_t)(d2 - d1 - 1), &plen)) == NULL)
		goto done;
	if ((root = tg_json_parse((const char *)payload, plen, NULL)) == NULL)
		goto done;
	exp = numeric_date(tg_json_get(root, "exp"));
done:
	yajl_tree_free(root);
	free(payload);
	return exp;
}
