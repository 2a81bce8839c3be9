// SPDX-License-Identifier: MIT
// Readiness for systemd (Type=notify): the sd_notify datagram, no libsystemd.
#include "notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static char notify_path[sizeof(((struct sockaddr_un *)0)->sun_path)];

void cmx_notify_init(void)
{
	const char *env = getenv("NOTIFY_SOCKET");

	/* A path, or "@name" for the abstract namespace (sd_notify(3)). */
	if (env && (env[0] == '/' || env[0] == '@') && strlen(env) < sizeof(notify_path))
		strcpy(notify_path, env);
	unsetenv("NOTIFY_SOCKET");
}

int cmx_notify(const char *state)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = strlen(notify_path);
	socklen_t len;
	ssize_t sent;
	int fd, e = 0;

	if (!n)
		return 0;
	memcpy(sa.sun_path, notify_path, n);
	if (sa.sun_path[0] == '@')
		sa.sun_path[0] = '\0'; /* abstract: the length, not a NUL, ends it */
	len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
	fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	sent = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, len);
	if (sent < 0)
		e = -errno;
	else if ((size_t)sent != strlen(state))
		e = -EIO;
	close(fd);
	return e;
}
