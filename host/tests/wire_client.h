// SPDX-License-Identifier: MIT
// A raw protocol client for the daemon tests: Hello, calls, replies.
#ifndef CMX_TESTS_WIRE_CLIENT_H
#define CMX_TESTS_WIRE_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#include "proto.gen.h"

struct client {
	int fd;
	uint32_t seq;
	uint64_t session, token;
};

/* The socket at path (NULL: $CLMUX_SERVER), connected. */
int dial_at(const char *path);
int dial(void);
void send_raw(int fd, const void *p, size_t n);
void send_msg(struct client *c, const struct cmx_msgdesc *d, const void *in, int sync,
	      const void *bulk, uint64_t bulk_len);
/* Reads one reply; returns its status, decoding outputs into out. Returns
 * 1 when the daemon closed the connection instead. */
int recv_reply(struct client *c, const struct cmx_msgdesc *d, void *out, uint8_t **keep);
/* A session on path (NULL: $CLMUX_SERVER); fails the test when refused. */
void hello_at(struct client *c, const char *path);
void hello(struct client *c);
/* True when the daemon has ended this connection. */
int closed_by_daemon(int fd);

#endif
