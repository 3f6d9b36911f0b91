/*
 * tls_listen.c - TLS on the gateway's own listeners (tls_listen.*): one
 * server SSL_CTX made from the certificate chain and key files (TLS 1.2 or
 * newer; with client_ca_file, a client must present a certificate that CA
 * signed), handed to the front door of each listener named in
 * tls_listen.listeners as the maker of its connections' bufferevents
 * (libevent's bufferevent_openssl, accepting). A SIGHUP reads the files
 * again: new connections get the new context, open ones keep theirs (the
 * context is reference-counted by OpenSSL); files that do not load keep
 * the old context and log why. Called by server.c (start, reload, doors,
 * free) and config_check.c (tidegate -t loads the files).
 */
#include <string.h>

#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include "tidegate/log.h"
#include "gw.h"

struct gw_tls {
	SSL_CTX *ctx;		/* NULL: no certificate configured */
};

static void
ssl_error(struct tg_err *err, const char *what)
{
	char reason[200];

	ERR_error_string_n(ERR_get_error(), reason, sizeof(reason));
	ERR_clear_error();
	tg_err_set(err, "%s: %s", what, reason);
}

static int
client_certs(SSL_CTX *ctx, const char *ca, struct tg_err *err)
{
	STACK_OF(X509_NAME) *names;

	if (SSL_CTX_load_verify_locations(ctx, ca, NULL) != 1 ||
	    (names = SSL_load_client_CA_file(ca)) == NULL) {
		ssl_error(err, "tls_listen.client_ca_file");
		return -1;
	}
	SSL_CTX_set_client_CA_list(ctx, names);
	SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
	return 0;
}

SSL_CTX *
gw_tls_ctx_new(const struct gw_config *c, struct tg_err *err)
{
	SSL_CTX *ctx;

	if (c->ltls_cert == NULL || *c->ltls_cert == '\0')
		return NULL;
	if ((ctx = SSL_CTX_new(TLS_server_method())) == NULL) {
		ssl_error(err, "tls_listen");
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
	if (SSL_CTX_use_certificate_chain_file(ctx, c->ltls_cert) != 1 ||
	    SSL_CTX_use_PrivateKey_file(ctx, c->ltls_key, SSL_FILETYPE_PEM) != 1 ||
	    SSL_CTX_check_private_key(ctx) != 1) {
		ssl_error(err, "tls_listen.cert_file/tls_listen.key_file");
		SSL_CTX_free(ctx);
		return NULL;
	}
	if (c->ltls_client_ca != NULL && *c->ltls_client_ca != '\0' &&
	    client_certs(ctx, c->ltls_client_ca, err) != 0) {
		SSL_CTX_free(ctx);
		return NULL;
	}
	return ctx;
}

int
gw_tls_start(struct gw *gw, struct tg_err *err)
{
	SSL_CTX *ctx = gw_tls_ctx_new(&gw->rt->cfg, err);

	if (ctx == NULL && gw->rt->cfg.ltls_cert != NULL && *gw->rt->cfg.ltls_cert != '\0')
		return -1;
	gw->tls = tg_xcalloc(1, sizeof(*gw->tls));
	gw->tls->ctx = ctx;
	return 0;
}

void
gw_tls_reload(struct gw *gw, const struct gw_config *c)
{
	struct tg_err err;
	SSL_CTX *ctx;

	err.msg[0] = '\0';
	ctx = gw_tls_ctx_new(c, &err);
	if (ctx == NULL && err.msg[0] != '\0') {
		tg_log(TG_LOG_ERROR, "reload_tls_kept", TG_LS("reason", err.msg));
		return;
	}
	SSL_CTX_free(gw->tls->ctx);	/* connections hold their own reference */
	gw->tls->ctx = ctx;
}

static struct bufferevent *
accepting(struct event_base *base, void *arg)
{
	struct gw *gw = arg;
	SSL *ssl = gw->tls->ctx != NULL ? SSL_new(gw->tls->ctx) : NULL;

	return ssl != NULL ? bufferevent_openssl_socket_new(base, -1, ssl,
	    BUFFEREVENT_SSL_ACCEPTING, BEV_OPT_CLOSE_ON_FREE) : NULL;
}

/* l's name is in tls_listen.listeners of c. */
static int
named(const struct gw_config *c, int l)
{
	return gw_config_names_listener(&c->ltls_on, l);
}

void
gw_tls_door(struct gw *gw, int l, const struct gw_config *c, struct tg_frontdoor *d)
{
	int on = gw->tls != NULL && gw->tls->ctx != NULL && named(c, l);

	d->make_bev = on ? accepting : NULL;
	d->make_arg = on ? gw : NULL;
}

int
gw_tls_on(const struct gw *gw, int l)
{
	return gw->tls != NULL && gw->tls->ctx != NULL && named(&gw->rt->cfg, l);
}

static int
set(const char *s)
{
	return s != NULL && *s != '\0';
}

const char *
gw_tls_downgrade(const struct gw *gw, const struct gw_config *c)
{
	const struct gw_config *now = &gw->rt->cfg;
	int l;

	for (l = 0; l < GW_NLISTENERS; l++) {
		if (!gw_tls_on(gw, l))
			continue;
		if (!set(c->ltls_cert) || !named(c, l))
			return "a listener that speaks TLS would go plain: that needs a restart";
		if (set(now->ltls_client_ca) && !set(c->ltls_client_ca))
			return "client certificates would no longer be asked for: that needs a "
			    "restart";
	}
	return NULL;
}

void
gw_tls_free(struct gw *gw)
{
	if (gw->tls == NULL)
		return;
	SSL_CTX_free(gw->tls->ctx);
	free(gw->tls);
	gw->tls = NULL;
}
