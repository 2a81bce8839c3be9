// SPDX-License-Identifier: MIT
// clmuxd's admin socket from a test: one request, the whole answer, and a
// tenant's figures from `json tenants` (host/tests/test_*.c).
#ifndef CMX_TESTS_ADMINCLIENT_H
#define CMX_TESTS_ADMINCLIENT_H

#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

/* Sends len bytes to the socket at path, returns all it answers. */
static inline char *ask_n(const char *path, const char *line, size_t len)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	size_t cap = 1 << 16, got = 0;
	char *buf = malloc(cap);
	ssize_t n;
	int fd = socket(AF_UNIX, SOCK_STREAM, 0);

	strcpy(sun.sun_path, path);
	ck_assert_int_eq(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
	/* The daemon may have answered and closed already (a refusal). */
	if (len && send(fd, line, len, MSG_NOSIGNAL) < 0)
		ck_assert_msg(errno == EPIPE || errno == ECONNRESET, "send: %s", strerror(errno));
	while ((n = recv(fd, buf + got, cap - 1 - got, 0)) > 0)
		got += (size_t)n;
	buf[got] = '\0';
	close(fd);
	return buf;
}

static inline char *ask(const char *path, const char *line)
{
	return ask_n(path, line, line ? strlen(line) : 0);
}

/* A number from `clmuxctl --json tenants` at admin: field of tenant name. */
static inline uint64_t admin_tenant_field(const char *admin, const char *name, const char *field)
{
	char *all = ask(admin, "json tenants\n"), key[96], *p;
	uint64_t v;

	ck_assert_msg(!strncmp(all, "ok\n", 3), "admin: %s", all);
	snprintf(key, sizeof(key), "{\"name\":\"%s\"", name);
	p = strstr(all, key);
	ck_assert_msg(p, "no tenant %s in %s", name, all);
	snprintf(key, sizeof(key), ",\"%s\":", field);
	p = strstr(p, key);
	ck_assert_msg(p, "no %s in %s", field, all);
	v = strtoull(p + strlen(key), NULL, 10);
	free(all);
	return v;
}

/* Waits (up to 20 s) for a tenant's figure to settle at want: closes are
 * asynchronous. */
static inline void admin_field_becomes(const char *admin, const char *name, const char *field,
				       uint64_t want)
{
	uint64_t v = 0;

	for (int i = 0; i < 1000; i++) {
		v = admin_tenant_field(admin, name, field);
		if (v == want)
			return;
		usleep(20000);
	}
	ck_abort_msg("tenant %s: %s stayed %" PRIu64 ", want %" PRIu64, name, field, v, want);
}

#endif
