// SPDX-License-Identifier: MIT
// Writing all of a buffer to a file descriptor (pipes, stdout), for both sides.
#ifndef CMX_TRANSPORT_FDIO_H
#define CMX_TRANSPORT_FDIO_H

#include <errno.h>
#include <stddef.h>
#include <unistd.h>

/* 0, or -errno from the first write that fails (EINTR is retried). */
static inline int cmx_fd_write_all(int fd, const void *buf, size_t n)
{
	const char *p = buf;

	while (n) {
		ssize_t w = write(fd, p, n);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return w < 0 ? -errno : -EIO;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

#endif
