// SPDX-License-Identifier: MIT
// TLS on accepted TCP connections (OpenSSL, in user space): a listener's
// certificate, and the layer that carries a connection's bytes through it.
#ifndef CMX_HOST_TLS_H
#define CMX_HOST_TLS_H

#include <stddef.h>

struct cmx_listener;
struct cmx_server;
struct cmx_tls_ctx;

/* Loads "CERT:KEY" (PEM files: the certificate chain and its private key,
 * which must not be readable by others). 0, or -errno with a reason in
 * err. */
int cmx_tls_ctx_create(struct cmx_tls_ctx **out, const char *spec, char *err, size_t errlen);
void cmx_tls_ctx_destroy(struct cmx_tls_ctx *t);

/*
 * Takes a socket accepted on l, whose listener has a certificate: the
 * socket is made non-blocking and the handshake runs on the loop (each
 * step when io_uring says the socket is ready), then every byte of the
 * connection (host/conn.c) is decrypted into it and encrypted out of it.
 * The connection's Auth deadline covers the handshake. 0, or -ENOMEM with
 * fd closed.
 */
int cmx_tls_accept(struct cmx_server *srv, int fd, const struct cmx_listener *l);

#endif
