// SPDX-License-Identifier: MIT
// Transport addresses: "unix:/path[,opt=value...]".
#include "addr.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/vm_sockets.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

int cmx_addr_parse(const char *spec, struct cmx_addr *a, char *err, size_t errlen)
{
	const char *rest, *comma;
	size_t n;

	memset(a, 0, sizeof(*a));
	if (!strncmp(spec, "unix:", 5)) {
		a->type = CMX_ADDR_UNIX;
		rest = spec + 5;
	} else if (!strncmp(spec, "vsock:", 6)) {
		/* vsock:CID:PORT, from inside a VM (CID 2 is the host). */
		unsigned long cid, port;
		char *end;
		a->type = CMX_ADDR_VSOCK;
		cid = strtoul(spec + 6, &end, 10);
		if (*end != ':' || end == spec + 6 || cid > 0xffffffffu)
			goto bad_vsock;
		rest = end + 1;
		port = strtoul(rest, &end, 10);
		if ((*end && *end != ',') || end == rest || !port || port > 0xffffffffu)
			goto bad_vsock;
		a->cid = (uint32_t)cid;
		a->port = (uint32_t)port;
		snprintf(a->path, sizeof(a->path), "%lu:%lu", cid, port);
		if (*end)
			snprintf(a->opts, sizeof(a->opts), "%s", end);
		return 0;
	bad_vsock:
		snprintf(err, errlen, "bad vsock address in '%s' (expected vsock:CID:PORT)", spec);
		return -EINVAL;
	} else {
		snprintf(err, errlen, "unknown transport in '%s' (expected unix:PATH)", spec);
		return -EINVAL;
	}
	comma = strchr(rest, ',');
	n = comma ? (size_t)(comma - rest) : strlen(rest);
	if (!n || n >= sizeof(a->path)) {
		snprintf(err, errlen, "bad socket path in '%s'", spec);
		return -EINVAL;
	}
	memcpy(a->path, rest, n);
	if (comma) {
		if (strlen(comma) >= sizeof(a->opts)) {
			snprintf(err, errlen, "options too long in '%s'", spec);
			return -EINVAL;
		}
		strcpy(a->opts, comma);
	}
	return 0;
}

int cmx_addr_opt(const struct cmx_addr *a, const char *key, char *val, size_t len)
{
	size_t klen = strlen(key);

	for (const char *p = a->opts; (p = strchr(p, ',')); ) {
		p++;
		if (!strncmp(p, key, klen) && p[klen] == '=') {
			const char *v = p + klen + 1, *end = strchr(v, ',');
			size_t n = end ? (size_t)(end - v) : strlen(v);
			if (n >= len)
				return -ENAMETOOLONG;
			memcpy(val, v, n);
			val[n] = '\0';
			return 0;
		}
	}
	return -ENOENT;
}

static socklen_t unix_sockaddr(const struct cmx_addr *a, struct sockaddr_un *sun)
{
	memset(sun, 0, sizeof(*sun));
	sun->sun_family = AF_UNIX;
	memcpy(sun->sun_path, a->path, strlen(a->path));
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + strlen(a->path) + 1);
}

void cmx_addr_tune(int fd)
{
	int size = 4 << 20;

	setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
	setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, sizeof(size));
}

static int vsock_connect(const struct cmx_addr *a)
{
	struct sockaddr_vm svm = { .svm_family = AF_VSOCK, .svm_cid = a->cid, .svm_port = a->port };
	int fd = socket(AF_VSOCK, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&svm, sizeof(svm)) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

int cmx_addr_connect(const struct cmx_addr *a)
{
	struct sockaddr_un sun;
	socklen_t len = unix_sockaddr(a, &sun);
	int fd;

	if (a->type == CMX_ADDR_VSOCK)
		return vsock_connect(a);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	cmx_addr_tune(fd);
	if (connect(fd, (struct sockaddr *)&sun, len) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}

int cmx_addr_listen(const struct cmx_addr *a)
{
	struct sockaddr_un sun;
	socklen_t len = unix_sockaddr(a, &sun);
	struct stat st;
	int fd;

	if (a->type != CMX_ADDR_UNIX)
		return -EAFNOSUPPORT; /* listening on AF_VSOCK is not here yet */
	/* Replace a socket file left by a daemon that died; never another file. */
	if (!lstat(a->path, &st) && S_ISSOCK(st.st_mode))
		unlink(a->path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sun, len) < 0 || listen(fd, 128) < 0) {
		int e = -errno;
		close(fd);
		return e;
	}
	return fd;
}
