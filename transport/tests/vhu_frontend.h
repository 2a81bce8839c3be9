// SPDX-License-Identifier: MIT
// The front end's (QEMU's) side of vhost-user for tests: one message,
// header and payload in one write, fds alongside.
#ifndef CMX_TEST_VHU_FRONTEND_H
#define CMX_TEST_VHU_FRONTEND_H

#include <check.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

static inline void vhu_send(int fd, uint32_t req, const void *payload, uint32_t size,
			    const int *fds, unsigned nfds)
{
	uint8_t buf[12 + 512];
	uint32_t hdr[3] = { req, 1, size };
	union {
		char c[CMSG_SPACE(8 * sizeof(int))];
		struct cmsghdr align;
	} cb;
	struct iovec iov = { buf, 12 + size };
	struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };

	ck_assert_uint_le(size, sizeof(buf) - 12);
	ck_assert_uint_le(nfds, 8);
	memcpy(buf, hdr, 12);
	if (size)
		memcpy(buf + 12, payload, size);
	if (nfds) {
		mh.msg_control = cb.c;
		mh.msg_controllen = CMSG_SPACE(nfds * sizeof(int));
		struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(nfds * sizeof(int));
		memcpy(CMSG_DATA(c), fds, nfds * sizeof(int));
	}
	ck_assert_int_eq(sendmsg(fd, &mh, MSG_NOSIGNAL), 12 + size);
}

#endif
