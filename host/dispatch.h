// SPDX-License-Identifier: MIT
// The way in of every message of a worker's connections: Auth, Hello, and
// each call to its handler.
#ifndef CMX_HOST_DISPATCH_H
#define CMX_HOST_DISPATCH_H

#include <stdint.h>

#include "wire.h"

struct cmx_conn;
struct cmx_server;
struct cmx_session;

/* A worker's connections hand their messages to this file
 * (srv->conn_ops), and releases go to host/release.c (srv->release). */
void cmx_dispatch_attach(struct cmx_server *srv);
/* Hello: a session begins or resumes, or the connection joins one as its
 * notification channel or a bulk lane. */
int cmx_dispatch_hello(struct cmx_conn *c, const struct cmx_hdr *h, const uint8_t *args);
/* Checks an Auth message's token (host/auth.h) and replies. 0, or
 * -ECONNABORTED once a refusal is queued: the connection ends after it. */
int cmx_dispatch_auth(struct cmx_conn *c, const struct cmx_hdr *h, const uint8_t *args);
/* Decodes, checks ids, runs the handler. Takes ownership of bulk. 0, or
 * -errno for a malformed message (the connection ends). */
int cmx_dispatch_call(struct cmx_session *s, const struct cmx_hdr *h, const uint8_t *args,
		      uint8_t *bulk);

#endif
