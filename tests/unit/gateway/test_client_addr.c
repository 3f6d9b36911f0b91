/*
 * test_client_addr.c - the client address keys (src/gateway/client_addr.c)
 * from YAML through the core's key table: real_ip_from parsed into the set
 * the front doors get (every listener), each bad entry a problem at its
 * own key path, proxy_protocol.listeners per listener, unknown names and
 * a TLS listener refused; unset, the doors get nothing to do.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tidegate/frontdoor.h"
#include "tidegate/gateway_config.h"
#include "tidegate/realip.h"
#include "gw.h"

static void
load(const char *yaml, struct gw_config *c, struct tg_cfg_report *rep)
{
	memset(c, 0, sizeof(*c));
	memset(rep, 0, sizeof(*rep));
	assert_int_equal(tg_config_load_string_report("t.yaml", yaml, gw_config_keys,
	    gw_config_nkeys, c, rep), 0);
	gw_client_config_check(c, rep);
}

static void
release(struct gw_config *c, struct tg_cfg_report *rep)
{
	gw_client_config_free(c);
	tg_config_free(gw_config_keys, gw_config_nkeys, c);
	tg_config_report_cleanup(rep);
}

static void
blocks_reach_every_door(void **state)
{
	struct tg_frontdoor d[GW_NLISTENERS];
	struct tg_cfg_report rep;
	struct gw_config c;
	int l;

	load("real_ip_from: [10.0.0.0/8, '2001:db8::/32', 192.0.2.7]\n"
	    "proxy_protocol:\n  listeners: [sim]\n", &c, &rep);
	assert_int_equal(rep.n, 0);
	assert_non_null(c.real_ip);
	assert_int_equal(c.real_ip->n, 3);
	for (l = 0; l < GW_NLISTENERS; l++) {
		memset(&d[l], 0, sizeof(d[l]));
		gw_client_door(l, &c, &d[l]);
		assert_ptr_equal(d[l].real_ip_from, c.real_ip);
		assert_int_equal(d[l].proxy_protocol, l == GW_SIM);
	}
	assert_true(tg_http_cidrs_match(d[GW_DEX].real_ip_from, "10.9.8.7"));
	assert_true(tg_http_cidrs_match(d[GW_DEX].real_ip_from, "2001:db8::1"));
	assert_false(tg_http_cidrs_match(d[GW_DEX].real_ip_from, "192.0.2.8"));
	release(&c, &rep);
}

static void
unset_costs_nothing(void **state)
{
	struct tg_cfg_report rep;
	struct tg_frontdoor d;
	struct gw_config c;

	load("log_level: info\n", &c, &rep);
	assert_int_equal(rep.n, 0);
	assert_null(c.real_ip);
	memset(&d, 0xff, sizeof(d));
	gw_client_door(GW_DEX, &c, &d);
	assert_null(d.real_ip_from);
	assert_int_equal(d.proxy_protocol, 0);
	release(&c, &rep);
}

static void
bad_entries_by_key(void **state)
{
	struct tg_cfg_report rep;
	struct gw_config c;

	load("real_ip_from: [10.0.0.0/8, 10.1.2.3/8, bogus]\n"
	    "proxy_protocol:\n  listeners: [dex, dexx]\n", &c, &rep);
	assert_int_equal(rep.n, 3);
	assert_non_null(strstr(rep.v[0].msg, "t.yaml:1:28: real_ip_from[1]: '10.1.2.3/8' has "
	    "host bits set (did you mean '10.0.0.0/8'?)"));
	assert_non_null(strstr(rep.v[1].msg, "real_ip_from[2]: 'bogus' is not an IPv4 or IPv6 "
	    "address"));
	assert_non_null(strstr(rep.v[2].msg, "t.yaml:3:20: proxy_protocol.listeners[1]: must "
	    "be dex, sim or admin, got 'dexx'"));
	release(&c, &rep);
}

static void
tls_listener_refused(void **state)
{
	struct tg_cfg_report rep;
	struct gw_config c;

	load("tls_listen:\n  cert_file: c.pem\n  key_file: k.pem\n  listeners: [dex, admin]\n"
	    "proxy_protocol:\n  listeners: [sim, admin]\n", &c, &rep);
	assert_int_equal(rep.n, 1);
	assert_non_null(strstr(rep.v[0].msg, "proxy_protocol.listeners: admin speaks TLS"));
	release(&c, &rep);
	load("tls_listen:\n  listeners: [dex]\nproxy_protocol:\n  listeners: [dex]\n", &c, &rep);
	assert_int_equal(rep.n, 0);	/* no certificate: the listener is plain */
	release(&c, &rep);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(blocks_reach_every_door),
		cmocka_unit_test(unset_costs_nothing),
		cmocka_unit_test(bad_entries_by_key),
		cmocka_unit_test(tls_listener_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
