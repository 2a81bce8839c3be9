// SPDX-License-Identifier: MIT
// Peer identity of an accepted connection, from the socket itself.
#define _GNU_SOURCE /* struct ucred */
#include "peer.h"

#include <arpa/inet.h>
#include <linux/vm_sockets.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

static void peer_tcp(struct cmx_peer *p, int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char text[INET6_ADDRSTRLEN] = "?";

	if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
		return;
	if (ss.ss_family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)&ss;
		p->ip[10] = p->ip[11] = 0xff;
		memcpy(p->ip + 12, &in->sin_addr, 4);
		p->tcp_port = ntohs(in->sin_port);
		inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
		snprintf(p->name, sizeof(p->name), "tcp %s:%u", text, p->tcp_port);
	} else if (ss.ss_family == AF_INET6) {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
		memcpy(p->ip, &in6->sin6_addr, 16);
		p->tcp_port = ntohs(in6->sin6_port);
		inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
		snprintf(p->name, sizeof(p->name), "tcp [%s]:%u", text, p->tcp_port);
	}
}

void cmx_peer_init(struct cmx_peer *p, int fd, enum cmx_peer_kind kind, uint32_t cid)
{
	memset(p, 0, sizeof(*p));
	p->kind = kind;
	p->cid = cid;
	if (kind == CMX_PEER_UNIX || kind == CMX_PEER_VSOCK_UDS) {
		/* vsock-uds: the VMM's process, which connected for its guest. */
		struct ucred cr;
		socklen_t len = sizeof(cr);
		if (!getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len)) {
			p->has_cred = 1;
			p->uid = cr.uid;
			p->gid = cr.gid;
			p->pid = cr.pid;
		}
	}
	switch (kind) {
	case CMX_PEER_UNIX:
		if (p->has_cred)
			snprintf(p->name, sizeof(p->name), "unix uid %u pid %d", (unsigned)p->uid,
				 (int)p->pid);
		else
			snprintf(p->name, sizeof(p->name), "unix");
		break;
	case CMX_PEER_VSOCK: {
		struct sockaddr_vm svm;
		socklen_t len = sizeof(svm);
		if (!getpeername(fd, (struct sockaddr *)&svm, &len) && svm.svm_family == AF_VSOCK)
			p->cid = svm.svm_cid;
		snprintf(p->name, sizeof(p->name), "vsock cid %u", p->cid);
		break;
	}
	case CMX_PEER_VSOCK_UDS:
		if (cid == CMX_PEER_CID_NONE)
			snprintf(p->name, sizeof(p->name), "vsock-uds");
		else
			snprintf(p->name, sizeof(p->name), "vsock-uds cid %u", cid);
		break;
	case CMX_PEER_TCP:
		snprintf(p->name, sizeof(p->name), "tcp");
		peer_tcp(p, fd);
		break;
	}
}

void cmx_peer_key(const struct cmx_peer *p, uint8_t key[16])
{
	uint32_t v = p->kind == CMX_PEER_UNIX ? (uint32_t)p->uid : p->cid;

	if (p->kind == CMX_PEER_TCP) {
		static const uint8_t v4mapped[12] = {[10] = 0xff, [11] = 0xff};
		memcpy(key, p->ip, 16);
		/* One IPv4 address is one source; an IPv6 host commonly holds a
		 * whole /64 and picks a fresh address per connection at no
		 * cost, so its /64 is one source. */
		if (memcmp(p->ip, v4mapped, sizeof(v4mapped)))
			memset(key + 8, 0, 8);
		return;
	}
	/* Not an IPv6 address a TCP peer could have: ff00::/8 is multicast. */
	memset(key, 0, 16);
	key[0] = 0xff;
	key[1] = (uint8_t)p->kind;
	memcpy(key + 12, &v, 4);
}
