// SPDX-License-Identifier: MIT
// clmuxctl: tenants, quotas and eviction through clmuxd's admin socket.
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "cdi.h"

#ifdef HAVE_LIBVIRT
#include "domxml.h"
#endif

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
		   "  checkpoint                   every session written to clmuxd's\n"
		   "                               --state-dir, its device drained first\n"
		   "  migrate --tenant T --to ADMIN\n"
		   "                               the tenant's sessions moved, while they run, to\n"
		   "                               the clmuxd whose admin socket is ADMIN (both with\n"
		   "                               --state-dir); their guests resume there\n"
		   "  listeners                    the daemon's listening addresses and tenants\n"
		   "  cdi generate [--output PATH] [--icd PATH]\n"
		   "                               writes a CDI spec (default\n"
		   "                               /var/run/cdi/clmux.json): a device\n"
		   "                               clmux.dev/gpu=TENANT for each tenant's\n"
		   "                               unix listener\n"
		   "  cdi list                     the devices such a spec holds\n"
		   "  top [-n N]                   'tenants' again every second (N times; on\n"
		   "                               a terminal until interrupted, else once)\n"
		   "  domain-xml DOMAIN            the device lines a libvirt domain with a\n"
		   "                               <clmux:gpu> element needs in its XML\n"
		   "  domain-prepare DOMAIN        (libvirt's hook) the domain's XML on standard\n"
		   "                               input: its device is made before QEMU starts\n"
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

/*
 * libvirt's hook at prepare: the domain's XML comes on standard input, and
 * clmuxd must not ask libvirtd for it (libvirtd holds the domain while the
 * hook runs). The element's attributes go in the request. 0 with no request
 * (the domain asks for no GPU), 1 with one in req, -1 on failure (said).
 */
static int prepare_request(const char *name, char *req, size_t cap, size_t *len)
{
#ifdef HAVE_LIBVIRT
	static struct cmx_domxml d;
	char *xml = NULL, why[200];
	size_t got = 0, room = 0;
	ssize_t n;

	for (;;) {
		if (got + 65536 > room) {
			char *m = room >= (16u << 20) ? NULL : realloc(xml, room = room * 2 + 65536);
			if (!m) {
				fail("domain %s: its XML is too large%s", name, "");
				return -1;
			}
			xml = m;
		}
		n = read(0, xml + got, room - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (cmx_domxml_parse(xml ? xml : "", got, &d, why, sizeof(why))) {
		free(xml);
		fail("domain %s: %s", name, why);
		return -1;
	}
	free(xml);
	if (!d.has_gpu)
		return 0;
	if (strcmp(d.name, name)) {
		fail("domain %s: its XML names %s", name, d.name);
		return -1;
	}
	*len = (size_t)snprintf(req, cap, "domain-prepare %s %s", d.name, d.uuid);
	for (unsigned i = 0; i < d.nattrs && *len < cap; i++) {
		if (strpbrk(d.key[i], " \t\r\n") || strpbrk(d.value[i], " \t\r\n")) {
			fail("domain %s: <clmux:gpu> attribute '%s' holds white space", name,
			     d.key[i]);
			return -1;
		}
		*len += (size_t)snprintf(req + *len, cap - *len, " %s=%s", d.key[i], d.value[i]);
	}
	if (*len >= cap) {
		fail("domain %s: <clmux:gpu> too long%s", name, "");
		return -1;
	}
	return 1;
#else
	fail("domain-prepare %s: clmuxctl was built without libvirt%s", name, "");
	return -1;
#endif
}

/* Sends one request (a line: req and a newline) to the admin socket at
 * path; *answer: what follows the "ok" line (to free). 0, or 1 with the
 * reason said. */
int cmx_ctl_ask(const char *path, const char *req, char **answer)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	size_t len = strlen(req), got = 0, cap = 0;
	char *buf = NULL, *nl;
	int fd, ret = 1, wait_s;
	ssize_t n;

	if (strlen(path) >= sizeof(sun.sun_path))
		return fail("admin socket path too long: %s%s", path, "");
	strcpy(sun.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
		fail("cannot reach clmuxd at %s: %s", path, strerror(errno));
		goto out;
	}
	/* A daemon that accepted but never answers (stopped, wedged) must not
	 * hang the tool. A move answers once the state is at the destination,
	 * which the daemon bounds itself. */
	wait_s = strstr(req, "migrate ") ? 600 : 10;
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &(struct timeval){ .tv_sec = wait_s },
		   sizeof(struct timeval));
	if (send(fd, req, len, MSG_NOSIGNAL | MSG_MORE) != (ssize_t)len ||
	    send(fd, "\n", 1, MSG_NOSIGNAL) != 1) {
		fail("sending to %s: %s", path, strerror(errno));
		goto out;
	}
	/* The first line says ok or why not; the rest is the answer. */
	for (;;) {
		if (got + 4096 > cap) {
			char *m = realloc(buf, cap = cap * 2 + 4096);
			if (!m) {
				fail("out of memory%s%s", "", "");
				goto out;
			}
			buf = m;
		}
		n = recv(fd, buf + got, cap - got - 1, 0);
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	if (buf)
		buf[got] = '\0';
	if (!buf || !(nl = strchr(buf, '\n'))) {
		fail("no answer from clmuxd at %s%s", path, "");
		goto out;
	}
	*nl = '\0';
	if (strcmp(buf, "ok")) {
		fail("%s%s", strncmp(buf, "error: ", 7) ? buf : buf + 7, "");
		goto out;
	}
	memmove(buf, nl + 1, strlen(nl + 1) + 1);
	*answer = buf;
	buf = NULL;
	ret = 0;
out:
	if (fd >= 0)
		close(fd);
	free(buf);
	return ret;
}

/*
 * top: the tenants table (share, memory, commands in flight) every second.
 * On a terminal the screen is redrawn until interrupted (or N times);
 * elsewhere it prints N tables (default one), without escape sequences.
 */
static int run_top(const char *path, const char *req, long n, int json)
{
	int tty = isatty(1);
	char *buf, when[32];
	time_t now;

	if (n <= 0)
		n = tty ? -1 : 1;
	for (long i = 0; n < 0 || i < n; i++) {
		if (i)
			sleep(1);
		if (cmx_ctl_ask(path, req, &buf))
			return 1;
		now = time(NULL);
		strftime(when, sizeof(when), "%H:%M:%S", localtime(&now));
		if (tty)
			fputs("\033[H\033[2J", stdout);
		else if (i && !json)
			putchar('\n');
		/* --json: one array per refresh, nothing else on stdout */
		if (!json)
			printf("clmuxd at %s, %s%s\n", path, when,
			       tty ? " (every second; Ctrl-C ends)" : "");
		fputs(buf, stdout);
		fflush(stdout);
		free(buf);
	}
	return 0;
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
	char req[REQ_MAX + 2], *buf = NULL, *end;
	int opt, json = 0, top = 0;
	long top_n = 0;
	size_t len = 0;

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
	if (!strcmp(argv[optind], "cdi"))
		return cmx_cdi_main(path, json, argc - optind, argv + optind);
	if (!strcmp(argv[optind], "domain-prepare")) {
		int e;
		if (argc != optind + 2) {
			usage(stderr);
			return 2;
		}
		e = prepare_request(argv[optind + 1], req, REQ_MAX, &len);
		if (e <= 0)
			return e ? 1 : 0;
		optind = argc;
	}
	/* (domain-prepare has taken every argument: optind is argc.) */
	if (optind < argc && !strcmp(argv[optind], "top")) {
		/* top [-n N]: the tenants request, again and again */
		if (argc == optind + 3 && !strcmp(argv[optind + 1], "-n")) {
			top_n = strtol(argv[optind + 2], &end, 10);
			if (*end || end == argv[optind + 2] || top_n < 1)
				return fail("top -n wants a count, not '%s'%s", argv[optind + 2], "");
		} else if (argc != optind + 1) {
			usage(stderr);
			return 2;
		}
		top = 1;
		optind = argc;
		len = (size_t)snprintf(req, sizeof(req), "%stenants", json ? "json " : "");
	}
	if (json && !len)
		len += (size_t)snprintf(req, sizeof(req), "json");
	for (int i = optind; i < argc; i++) {
		size_t w = strlen(argv[i]);
		if (strpbrk(argv[i], " \t\n") || len + w + 2 > REQ_MAX)
			return fail("bad argument '%s'%s", argv[i], "");
		len +=
		    (size_t)snprintf(req + len, sizeof(req) - len, "%s%s", len ? " " : "", argv[i]);
	}
	req[len] = '\0';
	if (top)
		return run_top(path, req, top_n, json);
	if (cmx_ctl_ask(path, req, &buf))
		return 1;
	fputs(buf, stdout);
	free(buf);
	return 0;
}
