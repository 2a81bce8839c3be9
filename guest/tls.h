// SPDX-License-Identifier: MIT
// The guest's TLS client (OpenSSL): one per connected channel of a tls:
// server; reads and writes from several threads, like a socket's.
// Layer: transport, below dial.c (guest/icd.h has the layers).
#ifndef CMX_GUEST_TLS_H
#define CMX_GUEST_TLS_H

#include <stddef.h>
#include <sys/types.h>
#include <sys/uio.h>

struct cmx_tls;

/*
 * Runs the handshake on the connected socket fd, checking the server's
 * certificate against the CA file `ca` (NULL: the system's CAs) and the
 * name or address `host`. The socket becomes non-blocking (the link waits
 * with poll(2)). 0, or -errno with a one-line reason in why.
 */
int cmx_tls_connect(int fd, const char *host, const char *ca, struct cmx_tls **out, char *why,
		    size_t whylen);
/* Like sendmsg(2) of every byte of iov (blocking until all are written),
 * and recv(2) with or without MSG_WAITALL: -1 with errno on failure.
 * One writer and one reader may run at once, as on a socket. */
ssize_t cmx_tls_send(struct cmx_tls *t, const struct iovec *iov, size_t n);
ssize_t cmx_tls_recv(struct cmx_tls *t, void *buf, size_t len, int waitall);
/* Frees the link (the socket stays the caller's to close). */
void cmx_tls_free(struct cmx_tls *t);

#endif
