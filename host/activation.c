// SPDX-License-Identifier: MIT
// Sockets the service manager opened for clmuxd (socket activation): the
// protocol of sd_listen_fds(3), no libsystemd. A listener whose Unix path a
// passed socket listens on takes that socket instead of binding its own, so
// connections made while the daemon restarts wait in the socket's backlog
// rather than being refused.
#include "activation.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "addr.h"
#include "log.h"

#define FIRST_FD 3
#define MAX_FDS	 16

static int passed[MAX_FDS];
static unsigned npassed;

/* The service manager's LISTEN_* numbers, checked: a bad one passes
 * nothing. */
static int env_uint(const char *name, uint64_t *out)
{
	const char *s = getenv(name);

	return s ? cmx_uint_parse(s, 0, UINT64_MAX, out) : -1;
}

void cmx_activation_init(void)
{
	uint64_t pid, n;

	if (!env_uint("LISTEN_PID", &pid) && pid == (uint64_t)getpid() &&
	    !env_uint("LISTEN_FDS", &n)) {
		if (n > MAX_FDS) {
			cmx_warn("the service manager passed %llu sockets; clmuxd takes %d",
				 (unsigned long long)n, MAX_FDS);
			n = MAX_FDS;
		}
		for (uint64_t i = 0; i < n; i++) {
			int fd = FIRST_FD + (int)i;
			if (fcntl(fd, F_SETFD, FD_CLOEXEC) < 0)
				continue;
			passed[npassed++] = fd;
		}
	}
	unsetenv("LISTEN_PID");
	unsetenv("LISTEN_FDS");
	unsetenv("LISTEN_FDNAMES");
}

/* fd is a listening stream socket bound to path. */
static int listens_on(int fd, const char *path)
{
	struct sockaddr_un sun;
	socklen_t len = sizeof(sun);
	int type = 0, acc = 0;
	socklen_t tl = sizeof(type), al = sizeof(acc);

	if (getsockname(fd, (struct sockaddr *)&sun, &len) < 0 || sun.sun_family != AF_UNIX ||
	    getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) < 0 || type != SOCK_STREAM ||
	    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) < 0 || !acc)
		return 0;
	len -= (socklen_t)offsetof(struct sockaddr_un, sun_path);
	/* A path (NUL-terminated within len), never an abstract name. */
	return len > 1 && sun.sun_path[0] && strnlen(sun.sun_path, len) == strlen(path) &&
	       !memcmp(sun.sun_path, path, strlen(path));
}

int cmx_activation_take(const struct cmx_addr *a)
{
	if (a->type != CMX_ADDR_UNIX && a->type != CMX_ADDR_VSOCK_UDS)
		return -1;
	for (unsigned i = 0; i < npassed; i++) {
		int fd = passed[i];
		if (fd < 0 || !listens_on(fd, a->path))
			continue;
		passed[i] = -1;
		/* The accept loop wants it non-blocking, as its own. */
		fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
		cmx_info("%s: the socket the service manager opened", a->path);
		return fd;
	}
	return -1;
}

void cmx_activation_done(void)
{
	for (unsigned i = 0; i < npassed; i++) {
		struct sockaddr_un sun;
		socklen_t len = sizeof(sun);

		if (passed[i] < 0)
			continue;
		memset(&sun, 0, sizeof(sun));
		getsockname(passed[i], (struct sockaddr *)&sun, &len);
		cmx_warn("the service manager passed a socket (fd %d%s%.*s) that no listener "
			 "names: closed",
			 passed[i], sun.sun_family == AF_UNIX && sun.sun_path[0] ? ", " : "",
			 (int)sizeof(sun.sun_path), sun.sun_path);
		close(passed[i]);
		passed[i] = -1;
	}
	npassed = 0;
}
