/*
 * test_egress.c - the webhook egress (SSRF) policy: every refused range in
 * its IPv4 and IPv6 forms (mapped, compatible, NAT64, 6to4 judged by the
 * embedded IPv4), public addresses at the edges of those ranges, URL
 * shapes and schemes, the allow-list by CIDR and by host name, and the
 * DNS check through a local evdns_base fed from a temporary hosts file
 * (no network): every address checked, the checked one returned, the
 * callback always from the loop, the lookup timeout and cancel.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>
#include <event2/dns.h>
#include <event2/event.h>

#include "tidegate/clock.h"
#include "tidegate/log.h"
#include "tidegate/webhook.h"
#include "harness.h"

static int
sa_of(const char *ip, struct sockaddr_storage *ss)
{
	struct sockaddr_in *s4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)ss;

	memset(ss, 0, sizeof(*ss));
	if (inet_pton(AF_INET, ip, &s4->sin_addr) == 1) {
		s4->sin_family = AF_INET;
		return 0;
	}
	if (inet_pton(AF_INET6, ip, &s6->sin6_addr) == 1) {
		s6->sin6_family = AF_INET6;
		return 0;
	}
	fail_msg("bad test address %s", ip);
	return -1;
}

static const char *
range_of(const char *ip)
{
	struct sockaddr_storage ss;

	sa_of(ip, &ss);
	return tg_egress_range((struct sockaddr *)&ss);
}

static const struct {
	const char *ip, *range;
} refused[] = {
	{ "127.0.0.1", "loopback" }, { "127.255.255.254", "loopback" },
	{ "10.0.0.1", "private" }, { "10.255.255.255", "private" },
	{ "172.16.0.1", "private" }, { "172.31.255.255", "private" },
	{ "192.168.1.1", "private" },
	{ "169.254.0.1", "link-local" }, { "169.254.169.254", "metadata" },
	{ "100.64.0.1", "cgnat" }, { "100.127.255.255", "cgnat" },
	{ "224.0.0.1", "multicast" }, { "239.255.255.255", "multicast" },
	{ "0.0.0.0", "unspecified" }, { "0.1.2.3", "unspecified" },
	{ "255.255.255.255", "broadcast" }, { "240.0.0.1", "reserved" },
	{ "192.0.2.10", "documentation" }, { "198.51.100.10", "documentation" },
	{ "203.0.113.10", "documentation" },
	{ "198.18.0.1", "benchmarking" }, { "198.19.255.255", "benchmarking" },
	{ "192.0.0.8", "reserved" },
	{ "::1", "loopback" }, { "::", "unspecified" },
	{ "fc00::1", "private" }, { "fdff:ffff::1", "private" },
	{ "fd00:ec2::254", "metadata" },
	{ "fe80::1", "link-local" }, { "febf::1", "link-local" },
	{ "ff02::1", "multicast" }, { "ff0e::1", "multicast" },
	{ "2001:db8::1", "documentation" }, { "2001:db8:ffff::1", "documentation" },
	{ "fec0::1", "site-local" }, { "100::1", "discard" }, { "2001::1", "teredo" },
	{ "2001:2::1", "benchmarking" }, { "64:ff9b:1::1", "nat64-local" },
	{ "4000::1", "reserved" },
	/* IPv4 inside IPv6, judged as the IPv4 */
	{ "::ffff:127.0.0.1", "loopback" }, { "::ffff:10.1.2.3", "private" },
	{ "::ffff:169.254.169.254", "metadata" }, { "::ffff:0.0.0.0", "unspecified" },
	{ "::127.0.0.1", "loopback" }, { "::10.0.0.1", "private" },
	{ "::ffff:0:7f00:1", "loopback" },
	{ "64:ff9b::7f00:1", "loopback" }, { "64:ff9b::a9fe:a9fe", "metadata" },
	{ "64:ff9b::c0a8:101", "private" },
	{ "2002:7f00:1::1", "loopback" }, { "2002:c0a8:101:1::1", "private" },
	{ "2002:a9fe:a9fe::", "metadata" },
};

static const char *const allowed[] = {
	"8.8.8.8", "1.1.1.1", "93.184.216.34", "9.255.255.255", "11.0.0.0",
	"172.15.255.255", "172.32.0.0", "192.167.255.255", "192.169.0.0",
	"100.63.255.255", "100.128.0.0", "169.253.255.255", "169.255.0.0",
	"198.17.255.255", "198.20.0.0", "223.255.255.255", "126.255.255.255",
	"2606:4700:4700::1111", "2a00:1450:4001::1", "2001:4860:4860::8888",
	"::ffff:8.8.8.8", "64:ff9b::808:808", "2002:808:808::1", "2001:db9::1",
};

static void
test_ranges(void **state)
{
	struct tg_egress *p = tg_egress_new(NULL, NULL);
	struct sockaddr_storage ss;
	struct tg_err why;
	const char *r;
	size_t i;

	for (i = 0; i < TG_NELEM(refused); i++) {
		r = range_of(refused[i].ip);
		if (r == NULL || strcmp(r, refused[i].range) != 0)
			fail_msg("%s: range %s, want %s", refused[i].ip, r ? r : "public",
			    refused[i].range);
		sa_of(refused[i].ip, &ss);
		assert_int_equal(tg_egress_check_addr(p, "x.example", (struct sockaddr *)&ss,
		    &why), -1);
		assert_non_null(strstr(why.msg, refused[i].range));
	}
	for (i = 0; i < TG_NELEM(allowed); i++) {
		if ((r = range_of(allowed[i])) != NULL)
			fail_msg("%s: range %s, want public", allowed[i], r);
		sa_of(allowed[i], &ss);
		assert_int_equal(tg_egress_check_addr(p, NULL, (struct sockaddr *)&ss, &why), 0);
	}
	sa_of("::ffff:127.0.0.1", &ss);
	tg_egress_check_addr(p, NULL, (struct sockaddr *)&ss, &why);
	assert_non_null(strstr(why.msg, "IPv4-mapped of 127.0.0.1"));
	tg_egress_free(p);
}

static int
url_ok(const struct tg_egress *p, const char *url)
{
	struct tg_err why;

	return tg_egress_check_url(p, url, &why);
}

static void
test_urls(void **state)
{
	static const char *const bad[] = {
		"ftp://8.8.8.8/", "file:///etc/passwd", "gopher://example.com/",
		"javascript:alert(1)", "data:text/plain,x", "ws://example.com/",
		"example.com/hook", "http://", "http:///path", "not a url",
		"https://user:pw@example.com/", "http://example.com:0/",
		"http://127.0.0.1/", "http://127.0.0.1:8080/hook", "http://[::1]:8080/",
		"http://[::ffff:127.0.0.1]/", "http://[fd00:ec2::254]/", "http://169.254.169.254/",
		"http://10.0.0.1/", "http://0.0.0.0:80/", "http://[::]/",
		"http://localhost/", "http://LocalHost./", "http://api.localhost/",
		"http://2130706433/", "http://127.1/", "http://0x7f.0.0.1/", "http://0177.0.0.1/",
		"http://0x7f000001/", "http://127.0.0.1./", "http://%31%32%37.0.0.1/",
		"http://exa_mple.com/", "http://[fe80::1%25eth0]/",
	};
	static const char *const good[] = {
		"http://example.com/hook", "https://hooks.example.com:8443/a/b?token=x#frag",
		"HTTPS://Example.COM", "http://8.8.8.8/", "http://[2606:4700:4700::1111]:80/",
		"https://deadbeef.cafe/", "http://a-b.example./x",
	};
	struct tg_egress *p = tg_egress_new(NULL, NULL);
	size_t i;

	for (i = 0; i < TG_NELEM(bad); i++)
		if (url_ok(p, bad[i]) != -1)
			fail_msg("accepted %s", bad[i]);
	for (i = 0; i < TG_NELEM(good); i++)
		if (url_ok(p, good[i]) != 0)
			fail_msg("refused %s", good[i]);
	tg_egress_free(p);
}

static struct tg_egress *
policy(const char *const *v, size_t n)
{
	struct tg_strlist l = { (char **)v, n };
	struct tg_err err;
	struct tg_egress *p = tg_egress_new(&l, &err);

	if (p == NULL)
		fail_msg("policy: %s", err.msg);
	return p;
}

/* A refused localhost says what to allow: an allowed 127.0.0.1/32 does
 * not cover the name (it may resolve to ::1 too); the name itself does. */
static void
test_localhost_names_what_to_allow(void **state)
{
	static const char *const loop[] = { "127.0.0.1/32" }, *const name[] = { "localhost" };
	struct tg_egress *p = policy(loop, 1), *q = policy(name, 1);
	struct tg_err why;

	assert_int_equal(tg_egress_check_url(p, "http://localhost:8000/hook", &why), -1);
	assert_non_null(strstr(why.msg, "list 'localhost' itself in webhooks.allow"));
	assert_int_equal(url_ok(p, "http://127.0.0.1:8000/hook"), 0);
	assert_int_equal(url_ok(q, "http://localhost:8000/hook"), 0);
	tg_egress_free(p);
	tg_egress_free(q);
	(void)state;
}

static int
addr_ok(const struct tg_egress *p, const char *host, const char *ip)
{
	struct sockaddr_storage ss;
	struct tg_err why;

	sa_of(ip, &ss);
	return tg_egress_check_addr(p, host, (struct sockaddr *)&ss, &why);
}

static void
test_allow_list(void **state)
{
	static const char *const allow[] = {
		"127.0.0.0/8", "fd00::/8", "192.168.1.10", "hooks.internal", "*.svc.local",
		"localhost",
	};
	static const char *const bad[] = { "10.0.0.0/33", "::1/129", "bad host!", "1.2.3.4/x",
		"fe80::/", "", "*." };
	struct tg_egress *p = policy(allow, TG_NELEM(allow));
	struct tg_strlist l;
	struct tg_err err;
	size_t i;

	assert_int_equal(url_ok(p, "http://127.0.0.1:9/"), 0);
	assert_int_equal(url_ok(p, "http://[::ffff:127.0.0.1]:9/"), 0);
	assert_int_equal(url_ok(p, "http://[fd00::1]/"), 0);
	assert_int_equal(url_ok(p, "http://[fd00:ec2::254]/"), 0);
	assert_int_equal(url_ok(p, "http://192.168.1.10/"), 0);
	assert_int_equal(url_ok(p, "http://192.168.1.11/"), -1);
	assert_int_equal(url_ok(p, "http://10.0.0.1/"), -1);
	assert_int_equal(url_ok(p, "http://[fe80::1]/"), -1);
	assert_int_equal(url_ok(p, "http://localhost:8080/"), 0);
	assert_int_equal(addr_ok(p, "hooks.internal", "10.0.0.1"), 0);
	assert_int_equal(addr_ok(p, "HOOKS.internal.", "::1"), 0);
	assert_int_equal(addr_ok(p, "a.svc.local", "10.0.0.1"), 0);
	assert_int_equal(addr_ok(p, "x.a.svc.local", "10.0.0.1"), 0);
	assert_int_equal(addr_ok(p, "svc.local", "10.0.0.1"), -1);
	assert_int_equal(addr_ok(p, "evilsvc.local", "10.0.0.1"), -1);
	assert_int_equal(addr_ok(p, "other.example", "10.0.0.1"), -1);
	assert_int_equal(addr_ok(p, NULL, "127.0.0.2"), 0);
	assert_int_equal(addr_ok(p, NULL, "64:ff9b::7f00:1"), 0);
	tg_egress_free(p);
	for (i = 0; i < TG_NELEM(bad); i++) {
		l.v = (char **)&bad[i];
		l.n = 1;
		if ((p = tg_egress_new(&l, &err)) != NULL)
			fail_msg("allow entry '%s' accepted", bad[i]);
	}
}

/* ---- DNS ---- */

static struct {
	struct event_base *base;
	struct evdns_base *dns;
	char hosts[64];
} D;

struct res {
	int done, refused;
	char addr[64];
	char why[256];
};

static void
on_res(const char *addr, const char *why, int policy, void *arg)
{
	struct res *r = arg;

	r->done++;
	r->refused = policy;
	snprintf(r->addr, sizeof(r->addr), "%s", addr ? addr : "");
	snprintf(r->why, sizeof(r->why), "%s", why ? why : "");
}

static void
resolve(const struct tg_egress *p, const char *host, struct res *r)
{
	memset(r, 0, sizeof(*r));
	tg_egress_resolve(p, D.base, D.dns, host, 300, on_res, r);
	/* Never from inside the call. */
	assert_int_equal(r->done, 0);
	th_run_until(D.base, &r->done, 1, 2000);
	assert_int_equal(r->done, 1);
}

static int
dns_setup(void **state)
{
	static const char hosts[] =
	    "93.184.216.34 pub.test\n2606:2800:220:1::1 pub.test\n"
	    "2606:2800:220:1::2 v6only.test\n"
	    "10.1.2.3 priv.test\n"
	    "93.184.216.35 mixed.test\n127.0.0.1 mixed.test\n"
	    "::ffff:127.0.0.1 mapped.test\n"
	    "169.254.169.254 meta.test\n"
	    "10.9.9.9 sidecar.internal\n";
	FILE *f;

	snprintf(D.hosts, sizeof(D.hosts), "/tmp/tg-egress-hosts-XXXXXX");
	if (mkstemp(D.hosts) < 0 || (f = fopen(D.hosts, "w")) == NULL)
		return -1;
	fputs(hosts, f);
	fclose(f);
	D.base = event_base_new();
	D.dns = evdns_base_new(D.base, 0);
	return evdns_base_load_hosts(D.dns, D.hosts);
}

static int
dns_teardown(void **state)
{
	evdns_base_free(D.dns, 1);
	event_base_free(D.base);
	unlink(D.hosts);
	return 0;
}

static void
test_dns(void **state)
{
	static const char *const allow[] = { "sidecar.internal" };
	struct tg_egress *p = tg_egress_new(NULL, NULL), *sc = policy(allow, 1);
	struct res r;

	resolve(p, "pub.test", &r);
	assert_string_equal(r.addr, "93.184.216.34");	/* IPv4 first */
	resolve(p, "v6only.test", &r);
	assert_string_equal(r.addr, "2606:2800:220:1::2");
	assert_int_equal(r.refused, 0);
	resolve(p, "priv.test", &r);
	assert_string_equal(r.addr, "");
	assert_non_null(strstr(r.why, "10.1.2.3 is a private address"));
	assert_int_equal(r.refused, 1);		/* the policy's: dead at once */
	/* One refused address refuses the name. */
	resolve(p, "mixed.test", &r);
	assert_string_equal(r.addr, "");
	assert_non_null(strstr(r.why, "loopback"));
	resolve(p, "mapped.test", &r);
	assert_non_null(strstr(r.why, "loopback"));
	resolve(p, "meta.test", &r);
	assert_non_null(strstr(r.why, "metadata"));
	/* The sidecar case: allowed by name, whatever it resolves to. */
	resolve(sc, "sidecar.internal", &r);
	assert_string_equal(r.addr, "10.9.9.9");
	resolve(p, "sidecar.internal", &r);
	assert_string_equal(r.addr, "");
	/* Literals and names refused by shape need no DNS. */
	resolve(p, "8.8.8.8", &r);
	assert_string_equal(r.addr, "8.8.8.8");
	resolve(p, "127.0.0.1", &r);
	assert_non_null(strstr(r.why, "loopback"));
	assert_int_equal(r.refused, 1);
	resolve(p, "localhost", &r);
	assert_non_null(strstr(r.why, "loopback"));
	tg_egress_free(p);
	tg_egress_free(sc);
}

/* No name server is configured: an unknown name waits until the timeout. */
static void
test_dns_timeout_and_cancel(void **state)
{
	struct tg_egress *p = tg_egress_new(NULL, NULL);
	struct tg_egress_lookup *l;
	struct res r;
	int64_t t0 = tg_clock_mono_ms();

	resolve(p, "unknown.test", &r);
	assert_non_null(strstr(r.why, "timed out"));
	assert_int_equal(r.refused, 0);		/* DNS: may heal, retried */
	assert_true(tg_clock_mono_ms() - t0 >= 250);
	memset(&r, 0, sizeof(r));
	l = tg_egress_resolve(p, D.base, D.dns, "unknown.test", 300, on_res, &r);
	tg_egress_lookup_cancel(l);
	th_run_for(D.base, 100);
	assert_int_equal(r.done, 0);
	/* A lookup answered from the hosts file, cancelled before delivery. */
	l = tg_egress_resolve(p, D.base, D.dns, "pub.test", 300, on_res, &r);
	tg_egress_lookup_cancel(l);
	th_run_for(D.base, 20);
	assert_int_equal(r.done, 0);
	tg_egress_free(p);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ranges),
		cmocka_unit_test(test_urls),
		cmocka_unit_test(test_localhost_names_what_to_allow),
		cmocka_unit_test(test_allow_list),
		cmocka_unit_test(test_dns),
		cmocka_unit_test(test_dns_timeout_and_cancel),
	};

	tg_log_init(stderr, getenv("TG_TEST_LOG") ? TG_LOG_DEBUG : TG_LOG_OFF);
	return cmocka_run_group_tests(tests, dns_setup, dns_teardown);
}
