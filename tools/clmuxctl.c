// SPDX-License-Identifier: MIT
// clmuxctl: tenants, quotas and eviction through clmuxd's admin socket.
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#define ADMIN_DEFAULT "/run/clmux/admin.sock"
#define REQ_MAX	      4000

static void usage(FILE *f)
{
	fprintf(f, "usage: clmuxctl [--admin PATH] [--json] COMMAND\n"
		   "  tenants                      every tenant: sessions, memory, objects,\n"
		   "                               commands in flight, device-time share (1 min)\n"
		   "  quota get TENANT             its quotas\n"
		   "  quota set TENANT KEY=VALUE.. mem=2G objects=10000 inflight=256 weight=3\n"
		   "                               cap=50%% rate=1G/s sessions=8 (any subset;\n"
		   "                               'none' lifts)\n"
		   "  evict TENANT                 end the tenant's worker (or, in a group,\n"
		   "                               close every session of the tenant)\n"
		   "  workers                      clmuxd's worker processes: pid, state,\n"
		   "                               starts, tenants\n"
		   "  stats                        daemon-wide counters\n"
		   "  --admin PATH  clmuxd's admin socket (default " ADMIN_DEFAULT ")\n"
		   "  --json        machine-readable output\n");
}

static int fail(const char *fmt, const char *a, const char *b)
{
	fprintf(stderr, "clmuxctl: ");
	fprintf(stderr, fmt, a, b);
	fputc('\n', stderr);
	return 1;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"admin", required_argument, NULL, 'a'},
	    {"json", no_argument, NULL, 'j'},
	    {"help", no_argument, NULL, 'h'},
	    {NULL, 0, NULL, 0},
	};
	const char *path = getenv("CLMUX_ADMIN") ? getenv("CLMUX_ADMIN") : ADMIN_DEFAULT;
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	char req[REQ_MAX + 2], *buf = NULL;
	size_t len = 0, got = 0, cap = 0;
	int opt, json = 0, fd;
	ssize_t n;
	char *nl;

	while ((opt = getopt_long(argc, argv, "+a:jh", opts, NULL)) != -1) {
		switch (opt) {
		case 'a':
			path = optarg;
			break;
		case 'j':
			json = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind == argc) {
		usage(stderr);
		return 2;
	}
	if (json)
		len += (size_t)snprintf(req, sizeof(req), "json");
	for (int i = optind; i < argc; i++) {
		size_t w = strlen(argv[i]);
		if (strpbrk(argv[i], " \t\n") || len + w + 2 > REQ_MAX)
			return fail("bad argument '%s'%s", argv[i], "");
		len +=
		    (size_t)snprintf(req + len, sizeof(req) - len, "%s%s", len ? " " : "", argv[i]);
	}
	req[len++] = '\n';
	if (strlen(path) >= sizeof(sun.sun_path))
		return fail("admin socket path too long: %s%s", path, "");
	strcpy(sun.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0)
		return fail("cannot reach clmuxd at %s: %s", path, strerror(errno));
	/* A daemon that accepted but never answers (stopped, wedged) must not
	 * hang the tool. */
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){ .tv_sec = 10 },
		   sizeof(struct timeval));
	if (send(fd, req, len, MSG_NOSIGNAL) != (ssize_t)len)
		return fail("sending to %s: %s", path, strerror(errno));
	/* The first line says ok or why not; the rest is the answer. */
	for (;;) {
		if (got + 4096 > cap) {
			char *m = realloc(buf, cap = cap * 2 + 4096);
			if (!m)
				return fail("out of memory%s%s", "", "");
			buf = m;
		}
		n = recv(fd, buf + got, cap - got - 1, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	close(fd);
	if (!buf)
		return fail("no answer from clmuxd at %s%s", path, "");
	buf[got] = '\0';
	nl = strchr(buf, '\n');
	if (!nl)
		return fail("no answer from clmuxd at %s%s", path, "");
	*nl = '\0';
	if (strcmp(buf, "ok"))
		return fail("%s%s", strncmp(buf, "error: ", 7) ? buf : buf + 7, "");
	fputs(nl + 1, stdout);
	return 0;
}
