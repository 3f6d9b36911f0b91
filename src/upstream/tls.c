/*
 * tls.c - the client side of TLS for upstream connections: one SSL_CTX per
 * upstream (TLS 1.2 or newer, chain verified against the configured CA
 * bundle or the system store), one SSL per connection with SNI and the
 * host name (or IP address) check, and the reason a handshake failed in
 * words for logs and error details. Called by pool.c and request.c.
 */
#include <stdio.h>

#include <event2/bufferevent_ssl.h>
#include <openssl/err.h>
#include <openssl/x509v3.h>

#include "up.h"

static void
ssl_error(struct tg_err *err, const char *what, const char *arg)
{
	unsigned long e = ERR_get_error();
	char buf[160];

	ERR_error_string_n(e, buf, sizeof(buf));
	tg_err_set(err, "%s%s%s: %s", what, arg ? " " : "", arg ? arg : "",
	    e ? buf : "unknown error");
	ERR_clear_error();
}

SSL_CTX *
tg_upstream_tls_ctx_new(const struct tg_upstream_opts *opts, struct tg_err *err)
{
	SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());

	if (ctx == NULL) {
		ssl_error(err, "cannot create TLS context", NULL);
		return NULL;
	}
	SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
	if (opts->ca_file != NULL) {
		if (SSL_CTX_load_verify_locations(ctx, opts->ca_file, NULL) != 1) {
			ssl_error(err, "cannot load CA file", opts->ca_file);
			goto fail;
		}
	} else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
		ssl_error(err, "cannot load the system CA store", NULL);
		goto fail;
	}
	SSL_CTX_set_verify(ctx, opts->tls_verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, NULL);
	return ctx;
fail:
	SSL_CTX_free(ctx);
	return NULL;
}

/* Keep the first verification failure: OpenSSL's error stack only says
 * "certificate verify failed", not which check did. */
static int
on_verify(int ok, X509_STORE_CTX *x)
{
	SSL *ssl = X509_STORE_CTX_get_ex_data(x, SSL_get_ex_data_X509_STORE_CTX_idx());
	struct up_conn *c = ssl != NULL ? SSL_get_app_data(ssl) : NULL;

	if (!ok && c != NULL && c->tls_verify_err == 0)
		c->tls_verify_err = X509_STORE_CTX_get_error(x);
	return ok;
}

/* TCP_NODELAY before the ClientHello: the handshake's small flights and
 * the first request must not wait on delayed ACKs. */
static void
on_info(const SSL *ssl, int where, int ret)
{
	struct up_conn *c;

	if ((where & SSL_CB_HANDSHAKE_START) && (c = SSL_get_app_data(ssl)) != NULL)
		tg_upstream_conn_nodelay(c, SSL_get_fd(ssl));
}

SSL *
tg_upstream_tls_ssl_new(struct tg_upstream *u, struct up_origin *o, struct up_conn *c)
{
	SSL *ssl = SSL_new(u->ssl_ctx);
	int ok = 1;

	if (ssl == NULL)
		goto fail;
	/* RFC 6066: no SNI for address literals. */
	if (!o->is_ip)
		ok = SSL_set_tlsext_host_name(ssl, o->host) == 1;
	if (ok && u->opts.tls_verify) {
		ok = o->is_ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), o->host) == 1 :
		    SSL_set1_host(ssl, o->host) == 1;
		SSL_set_verify(ssl, SSL_VERIFY_PEER, on_verify);
	}
	if (!ok)
		goto fail;
	SSL_set_app_data(ssl, c);
	SSL_set_info_callback(ssl, on_info);
	return ssl;
fail:
	SSL_free(ssl);
	ERR_clear_error();
	return NULL;
}

int
tg_upstream_tls_describe(struct up_conn *c, char *buf, size_t len)
{
	unsigned long e, first = 0;

	if (!c->o->tls)
		return 0;
	if (c->tls_verify_err != 0) {
		snprintf(buf, len, "certificate verify failed: %s",
		    X509_verify_cert_error_string(c->tls_verify_err));
		return 1;
	}
	/* libevent keeps the handshake's errors on the bufferevent; bare
	 * SSL_ERROR_* codes (library 0) carry no reason. */
	while ((e = bufferevent_get_openssl_error(c->bev)) != 0)
		if (first == 0 && ERR_GET_LIB(e) != 0)
			first = e;
	if (first == 0)
		return 0;
	ERR_error_string_n(first, buf, len);
	return 1;
}
