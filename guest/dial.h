// SPDX-License-Identifier: MIT
// How the guest reaches clmuxd: the server address and token from the
// environment or /etc/clmux/client.conf, and connecting one channel.
// Layer: transport, below lane.c and session.c (guest/icd.h has the layers).
#ifndef CMX_GUEST_DIAL_H
#define CMX_GUEST_DIAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "addr.h"

/* SYSCONFDIR/clmux/client.conf: /etc/clmux/client.conf with the packages. */
#ifndef CMX_SYSCONFDIR
#define CMX_SYSCONFDIR "/etc"
#endif
#define CMX_CLIENT_CONF CMX_SYSCONFDIR "/clmux/client.conf"
#define CMX_DEFAULT_UNIX "/run/clmux/clmuxd.sock"

/* The value of `key = value` in client.conf into buf; 0 or -ENOENT. */
int cmx_conf_get(const char *key, char *buf, size_t len);
/* $CLMUX_SERVER, else client.conf's server, else the default: the local
 * daemon's socket when it exists, else vsock to the host when this is a VM
 * (/dev/vsock), else the socket's path anyway (for the message). */
const char *cmx_dial_server(char *buf, size_t len);
/* Connects one channel; when a token is set ($CLMUX_TOKEN, client.conf's
 * token) or the transport is tcp, sends Auth and waits for its answer.
 * A socket, or -errno: -ENOKEY (a token is needed and none is set),
 * -EKEYREJECTED (refused), -EAGAIN (refused after too many failures). */
int cmx_dial(const struct cmx_addr *a);
/* The compression the guest asks for: $CLMUX_COMPRESS, else client.conf's
 * compress: "lz4" gives CMX_COMPRESS_LZ4; else ("none", unset) 0. */
unsigned cmx_dial_compress(void);
/* Why the last cmx_dial() failed, when it knows more than err says (a TLS
 * certificate refused), else strerror(-err). */
const char *cmx_dial_strerror(int err);

/* A channel's I/O, through TLS when it was dialled with tls: (guest/tls.c),
 * else the socket's own: as sendmsg(2) (MSG_NOSIGNAL; through TLS, every
 * byte is written), recvmsg(2) (no file descriptors through TLS) and
 * recv(2) (flags: 0 or MSG_WAITALL). -1 with errno set on failure. */
ssize_t cmx_dial_sendmsg(int fd, const struct msghdr *mh);
ssize_t cmx_dial_recvmsg(int fd, struct msghdr *mh, int flags);
ssize_t cmx_dial_recv(int fd, void *buf, size_t len, int flags);
/* All of iov (n entries, consumed) through cmx_dial_sendmsg(), counting
 * the writes in *writes (may be NULL); all of n bytes into p through
 * cmx_dial_recv(). 0 or -errno (-ECONNRESET: the peer closed). */
int cmx_dial_send_all(int fd, struct iovec *iov, int n, uint64_t *writes);
int cmx_dial_recv_all(int fd, void *p, uint64_t n);
/* Closes a channel's socket and frees its TLS link. */
void cmx_dial_close(int fd);
/* In a child of fork(): the TLS links are the parent's (their sockets are
 * closed by their session); forgotten, never used or shut down. */
void cmx_dial_forked(void);

#endif
