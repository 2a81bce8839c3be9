// SPDX-License-Identifier: MIT
// Who is at the other end of a connection: transport, vsock CID, Unix
// credentials, TCP address, and the tenant an accepted token named.
#ifndef CMX_HOST_PEER_H
#define CMX_HOST_PEER_H

#include <stdint.h>
#include <sys/types.h>

enum cmx_peer_kind {
	CMX_PEER_UNIX,	    /* unix:PATH */
	CMX_PEER_VSOCK,	    /* vsock:PORT, AF_VSOCK: cid from accept */
	CMX_PEER_VSOCK_UDS, /* vsock-uds:PATH: the listener's cid= */
	CMX_PEER_TCP,	    /* tcp:ADDR:PORT: addr */
};

#define CMX_PEER_CID_NONE 0xffffffffu
#define CMX_TENANT_MAX 64 /* bytes of a tenant name, NUL included */

/*
 * Filled when a connection is accepted (cmx_peer_init()), then by an
 * accepted Auth (tenant). Everything here is known before the peer has sent
 * a byte, except `tenant`, which only an accepted token sets. Each
 * connection holds one (struct cmx_conn's `peer`; a session's is
 * s->conn->peer, its call channel's).
 */
struct cmx_peer {
	enum cmx_peer_kind kind;
	uint32_t cid;	   /* vsock, vsock-uds with cid=: the guest's CID; else NONE */
	int has_cred;	   /* unix, vsock-uds (the VMM): uid, gid, pid from SO_PEERCRED */
	uid_t uid;
	gid_t gid;
	pid_t pid;
	uint8_t ip[16];	   /* tcp: the address, IPv4 as v4-mapped IPv6 */
	uint16_t tcp_port;
	char tenant[CMX_TENANT_MAX]; /* named by an accepted token, else "" */
	char name[64];	   /* for log lines: "tcp [::1]:40112", "vsock cid 5" */
};

/* Fills p for an accepted socket of listener kind `kind`; `cid` is the
 * listener's cid= (vsock-uds) or CMX_PEER_CID_NONE. */
void cmx_peer_init(struct cmx_peer *p, int fd, enum cmx_peer_kind kind, uint32_t cid);
/* The source that failed tokens are counted against (host/auth.h): the
 * IPv4 address, the IPv6 /64, the CID, or the Unix uid. */
void cmx_peer_key(const struct cmx_peer *p, uint8_t key[16]);

#endif
