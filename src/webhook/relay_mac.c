/*
 * relay_mac.c - relay URLs any instance can vouch for: the URL the vendor
 * gets names its job as "msg_<id hex>.<mac hex>", the MAC being the first
 * 16 bytes of HMAC-SHA256 of the job id under the state's relay key (made
 * once per state, shared by a fleet: tg_state_outbox_key). An instance
 * holding the key refuses a made-up id on the request's head, before a
 * body byte is read, with no database round trip. The MAC is compared in
 * constant time, so that timing does not reveal how much of a forged one
 * matched.
 */
#include <stdio.h>
#include <string.h>

#include "tidegate/crypto.h"
#include "tidegate/util.h"
#include "tidegate/webhook.h"

#define ID_LEN		(4 + 32)	/* "msg_" and 32 hex digits */
#define MAC_BYTES	(TG_WEBHOOK_RELAY_MAC_HEX / 2)
/* Domain separation: the key signs relay URLs and nothing else. */
#define MAC_LABEL	"tidegate-relay-v1:"

static void
mac_hex(const uint8_t *key, const char *id, char out[TG_WEBHOOK_RELAY_MAC_HEX + 1])
{
	char msg[sizeof(MAC_LABEL) + ID_LEN];
	uint8_t d[TG_SHA256_LEN];

	memcpy(msg, MAC_LABEL, sizeof(MAC_LABEL) - 1);
	memcpy(msg + sizeof(MAC_LABEL) - 1, id, ID_LEN);
	tg_hmac_sha256(key, TG_WEBHOOK_RELAY_KEY_LEN, msg, sizeof(MAC_LABEL) - 1 + ID_LEN, d);
	tg_hex(d, MAC_BYTES, out);
}

int
tg_webhook_relay_bare(const char *seg)
{
	return strlen(seg) == ID_LEN && strncmp(seg, "msg_", 4) == 0 &&
	    strspn(seg + 4, "0123456789abcdef") == 32;
}

void
tg_webhook_relay_seg(const uint8_t key[TG_WEBHOOK_RELAY_KEY_LEN], const char *id,
    char out[TG_WEBHOOK_RELAY_SEG_LEN])
{
	char mac[TG_WEBHOOK_RELAY_MAC_HEX + 1];

	mac_hex(key, id, mac);
	snprintf(out, TG_WEBHOOK_RELAY_SEG_LEN, "%.*s.%s", ID_LEN, id, mac);
}

int
tg_webhook_relay_check(const uint8_t key[TG_WEBHOOK_RELAY_KEY_LEN], const char *seg,
    char id[TG_WEBHOOK_ID_LEN])
{
	char want[TG_WEBHOOK_RELAY_MAC_HEX + 1];

	id[0] = '\0';
	if (strlen(seg) != TG_WEBHOOK_RELAY_SEG_LEN - 1 || seg[ID_LEN] != '.')
		return -1;
	memcpy(id, seg, ID_LEN);
	id[ID_LEN] = '\0';
	if (!tg_webhook_relay_bare(id)) {
		id[0] = '\0';
		return -1;
	}
	mac_hex(key, id, want);
	if (!tg_mem_equal_ct(want, seg + ID_LEN + 1, TG_WEBHOOK_RELAY_MAC_HEX)) {
		id[0] = '\0';
		return -1;
	}
	return 0;
}
