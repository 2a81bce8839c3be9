// SPDX-License-Identifier: MIT
// One client connection on the loop: framing in, gathered writes out.
#ifndef CMX_HOST_CONN_H
#define CMX_HOST_CONN_H

#include <stdint.h>
#include <sys/uio.h>

#include "loop.h"
#include "tenant.h"
#include "wire.h"

struct cmx_server;
struct cmx_session;
struct seg;

enum cmx_conn_role { CMX_ROLE_NEW, CMX_ROLE_CALL, CMX_ROLE_NOTIFY };

#define CMX_CONN_IOV 64

struct cmx_conn {
	struct cmx_server *srv;
	int fd;
	int refs; /* the owner, plus one per submission in flight */
	int dead;
	enum cmx_conn_role role;
	struct cmx_session *sess;
	struct cmx_ident ident; /* who connected: decides the tenant at Hello */

	struct cmx_io rx_io;
	uint8_t *rx;
	size_t rx_len, rx_cap, rx_pos;
	/* A message whose payload is still arriving, straight into bulk_buf. */
	struct cmx_hdr bulk_hdr;
	uint8_t *bulk_args;
	uint8_t *bulk_buf;
	uint64_t bulk_got;
	int in_bulk;

	/* The tenant's rate quota: the next recv waits for this timeout. */
	struct cmx_io rate_io;
	struct __kernel_timespec rate_ts;

	struct cmx_io tx_io;
	struct seg *tx_head, **tx_tail;
	int tx_busy;
	struct iovec iov[CMX_CONN_IOV];
	struct msghdr mh;
	uint64_t tx_bytes_queued;
};

/* Takes a connected socket accepted on a listener bound to `tenant` (or
 * NULL); a unix peer's credentials are read here. */
int cmx_conn_create(struct cmx_server *srv, int fd, const char *tenant);
/* Queues a message: header, encoded args (copied), and a payload that stays
 * referenced until written, then is passed to free_fn. */
void cmx_conn_send(struct cmx_conn *c, const struct cmx_hdr *h, const void *args,
		   void *bulk, void (*free_fn)(void *));
/* Ends the connection; its session learns of it. */
void cmx_conn_kill(struct cmx_conn *c, const char *why);

#endif
