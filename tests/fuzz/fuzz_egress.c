/*
 * fuzz_egress.c - the webhook egress policy: the first byte picks what
 * the rest is. 'U': a callback URL through tg_egress_check_url under a
 * policy with an allow-list; 'A': allow-list entries, one per line, through
 * tg_egress_new (then a URL check with the result); anything else: raw
 * address bytes, checked as IPv4 and IPv6 with the invariant that the
 * IPv4-mapped, NAT64 and 6to4 forms of an IPv4 address fall in its range.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "tidegate/webhook.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char *
range6(const uint8_t a[16])
{
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 };

	memcpy(&s6.sin6_addr, a, 16);
	return tg_egress_range((struct sockaddr *)&s6);
}

static int
same(const char *x, const char *y)
{
	return (x == NULL && y == NULL) || (x != NULL && y != NULL && strcmp(x, y) == 0);
}

/* Check v4 against its mapped, NAT64 and 6to4 forms. */
static void
embedded(const uint8_t v4[4])
{
	struct sockaddr_in s4 = { .sin_family = AF_INET };
	const char *r4;
	uint8_t a[16];

	memcpy(&s4.sin_addr, v4, 4);
	r4 = tg_egress_range((struct sockaddr *)&s4);
	memset(a, 0, 16);
	a[10] = a[11] = 0xff;
	memcpy(a + 12, v4, 4);
	if (!same(r4, range6(a)))
		abort();
	memset(a, 0, 16);
	a[1] = 0x64;
	a[2] = 0xff;
	a[3] = 0x9b;
	memcpy(a + 12, v4, 4);
	if (!same(r4, range6(a)))
		abort();
	memset(a, 0, 16);
	a[0] = 0x20;
	a[1] = 0x02;
	memcpy(a + 2, v4, 4);
	if (!same(r4, range6(a)))
		abort();
}

static void
addresses(const struct tg_egress *p, const uint8_t *d, size_t n)
{
	struct sockaddr_in6 s6 = { .sin6_family = AF_INET6 };
	struct sockaddr_in s4 = { .sin_family = AF_INET };
	struct tg_err why;
	int rc;

	if (n < 4)
		return;
	memcpy(&s4.sin_addr, d, 4);
	rc = tg_egress_check_addr(p, NULL, (struct sockaddr *)&s4, &why);
	/* The policy allows no networks: refused exactly when in a range. */
	if ((rc == 0) != (tg_egress_range((struct sockaddr *)&s4) == NULL))
		abort();
	embedded(d);
	if (n < 16)
		return;
	memcpy(&s6.sin6_addr, d, 16);
	rc = tg_egress_check_addr(p, "fuzz.example", (struct sockaddr *)&s6, &why);
	if ((rc == 0) != (tg_egress_range((struct sockaddr *)&s6) == NULL))
		abort();
}

static struct tg_egress *
allow_list(const char *text)
{
	struct tg_strlist l = { NULL, 0 };
	struct tg_egress *p;
	char *copy = strdup(text), *line, *save = NULL;

	for (line = strtok_r(copy, "\n", &save); line != NULL; line = strtok_r(NULL, "\n", &save)) {
		l.v = realloc(l.v, (l.n + 1) * sizeof(*l.v));
		l.v[l.n++] = line;
	}
	p = tg_egress_new(&l, NULL);
	free(l.v);
	free(copy);
	return p;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const fixed[] = { "127.0.0.0/8", "fd00::/8", "hooks.internal",
		"*.svc.local" };
	struct tg_strlist l = { (char **)fixed, 4 };
	struct tg_egress *p = NULL;
	struct tg_err why;
	char *s;

	if (size < 1 || size > 4096)
		return 0;
	s = malloc(size);
	memcpy(s, data + 1, size - 1);
	s[size - 1] = '\0';
	if (data[0] == 'U' || data[0] == 'A') {
		p = data[0] == 'U' ? tg_egress_new(&l, NULL) : allow_list(s);
		if (p != NULL)
			(void)tg_egress_check_url(p, data[0] == 'U' ? s : "http://hooks.internal/",
			    &why);
	} else {
		p = tg_egress_new(NULL, NULL);
		addresses(p, data + 1, size - 1);
	}
	tg_egress_free(p);
	free(s);
	return 0;
}
