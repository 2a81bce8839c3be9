// SPDX-License-Identifier: MIT
// A --listen address: its socket on the loop, the identity it gives its
// connections, and the tokens it asks for.
#ifndef CMX_HOST_LISTENER_H
#define CMX_HOST_LISTENER_H

#include <stddef.h>
#include <stdint.h>

#include "addr.h"
#include "loop.h"
#include "peer.h"

struct cmx_auth;
struct cmx_tls_ctx;

struct cmx_server;

struct cmx_listener {
	struct cmx_io io;
	struct cmx_server *srv; /* set by cmx_listener_start() */
	int fd;
	struct cmx_addr addr;
	enum cmx_peer_kind kind;
	uint32_t cid;		/* vsock-uds cid=, else CMX_PEER_CID_NONE */
	struct cmx_auth *auth;	/* tokens=: every connection sends Auth first */
	struct cmx_tls_ctx *tls; /* tcp tls=CERT:KEY: connections speak TLS */
	char name[128];		/* the address, for log lines */
	char tenant[64];	/* tenant=: every peer is this tenant's, else "" */
	int inherited;		/* fd came from the front end: never unlinked here */
};

/* Parses "ADDR[,opt=value...]" and loads its token file. 0, or -errno with
 * a reason in err. */
int cmx_listener_init(struct cmx_listener *l, const char *spec, char *err, size_t errlen);
/* Opens the socket (bound and listening, nobody accepting yet): the front
 * end's, for a worker to accept on. 0 or -errno (logged). */
int cmx_listener_bind(struct cmx_listener *l);
/* Opens the socket, unless it is open already (bound by
 * cmx_listener_bind() or inherited: l->fd), and starts accepting on the
 * loop. 0 or -errno (logged). */
int cmx_listener_start(struct cmx_server *srv, struct cmx_listener *l);
/* Stops accepting and removes a socket file. */
void cmx_listener_close(struct cmx_server *srv, struct cmx_listener *l);
void cmx_listener_fini(struct cmx_listener *l);

#endif
