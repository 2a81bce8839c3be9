// SPDX-License-Identifier: MIT
// Control packets between the front end and its workers (host/ctl.h).
#define _GNU_SOURCE
#include "ctl.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int cmx_ctl_send(int sock, const void *msg, size_t len, int fd, int nonblock)
{
	struct iovec iov = { .iov_base = (void *)msg, .iov_len = len };
	union {
		struct cmsghdr c;
		char b[CMSG_SPACE(sizeof(int))];
	} cm;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	if (fd >= 0) {
		memset(&cm, 0, sizeof(cm));
		mh.msg_control = cm.b;
		mh.msg_controllen = sizeof(cm.b);
		cm.c.cmsg_level = SOL_SOCKET;
		cm.c.cmsg_type = SCM_RIGHTS;
		cm.c.cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(&cm.c), &fd, sizeof(int));
	}
	do
		n = sendmsg(sock, &mh, MSG_NOSIGNAL | (nonblock ? MSG_DONTWAIT : 0));
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EMSGSIZE;
}

long cmx_ctl_recv(int sock, void *buf, int *fd)
{
	struct iovec iov = { .iov_base = buf, .iov_len = CMX_CTL_MAX };
	union {
		struct cmsghdr c;
		char b[CMSG_SPACE(4 * sizeof(int))];
	} cm;
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cm.b,
			     .msg_controllen = sizeof(cm.b) };
	const struct cmx_ctl_hdr *h = buf;
	ssize_t n;

	*fd = -1;
	do
		n = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		for (size_t i = 0; i < (c->cmsg_len - CMSG_LEN(0)) / sizeof(int); i++) {
			int f;
			memcpy(&f, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (*fd < 0)
				*fd = f;
			else
				close(f);
		}
	}
	if (n == 0)
		return 0;
	if ((size_t)n < sizeof(*h) || h->len != (size_t)n || (mh.msg_flags & MSG_TRUNC)) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		return -EBADMSG;
	}
	return n;
}

void cmx_ctl_usage_pack(const struct cmx_tenant *t, struct cmx_ctl_usage *u)
{
	memset(u, 0, sizeof(*u));
	u->h.op = CMX_CTL_USAGE;
	u->h.len = sizeof(*u);
	snprintf(u->h.tenant, sizeof(u->h.tenant), "%s", t->name);
	u->sessions = t->sessions;
	u->bytes = t->bytes;
	u->objects = t->objects;
	u->inflight = t->inflight;
	u->output = t->output;
	u->backlogged = t->backlogged;
	u->launched = t->launched;
	u->completed = t->completed;
	u->refused = t->refused;
	u->throttled = t->throttled;
	u->capped = t->capped;
	u->device_ns = t->device_ns;
	u->rx_bytes = t->rx_bytes;
	memcpy(u->win_ns, t->win_ns, sizeof(u->win_ns));
	memcpy(u->win_start, t->win_start, sizeof(u->win_start));
}

void cmx_ctl_usage_unpack(struct cmx_tenant *t, const struct cmx_ctl_usage *u)
{
	t->sessions = u->sessions;
	t->bytes = u->bytes;
	t->objects = u->objects;
	t->inflight = u->inflight;
	t->output = u->output;
	t->backlogged = u->backlogged;
	t->launched = u->launched;
	t->completed = u->completed;
	t->refused = u->refused;
	t->throttled = u->throttled;
	t->capped = u->capped;
	t->device_ns = u->device_ns;
	t->rx_bytes = u->rx_bytes;
	memcpy(t->win_ns, u->win_ns, sizeof(t->win_ns));
	memcpy(t->win_start, u->win_start, sizeof(t->win_start));
}
