// SPDX-License-Identifier: MIT
// A hostile tenant against a live clmuxd with a config: what it makes the
// daemon hold is bounded by its quotas (issue 22, cases 9 to 12): strangers
// before Hello, unread output, event callbacks, sessions, and the rate of
// bytes through every path (Unix socket and area, shm, TCP lanes, TLS,
// ivshmem; vhost-user in vm-check). Each test checks that another tenant
// still works.
#define _GNU_SOURCE
#include <check.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <CL/cl.h>

#include "adminclient.h"
#include "rawclient.h"

#define MiB (1ull << 20)
/* What the daemon may grow by beyond a tenant's mem quota (docs/admin.md). */
#define SLACK (64 * MiB)

static char dir[64], conf[128], admin[128], sock_any[128], sock_hog[128], sock_victim[128],
    sock_cb[128], sock_few[128], sock_slow[128];
static pid_t daemon_pid;
/* Tenant slow's other ways in: TCP and TLS on loopback with its token, and
 * an ivshmem region of its own. */
static char tokens[128], cert[128], key[128], region[128], token[33];
static int tcp_port, tls_port;

/* A loopback TCP port that is free now (the daemon binds it right after). */
static int free_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	if (fd >= 0 && !bind(fd, (struct sockaddr *)&sa, len) &&
	    !getsockname(fd, (struct sockaddr *)&sa, &len))
		port = ntohs(sa.sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* The token file naming slow, and a self-signed certificate for
 * 127.0.0.1 (the guest's CA too). */
static int slow_credentials(void)
{
	char cmd[512];
	FILE *f;
	int fd;

	snprintf(tokens, sizeof(tokens), "%s/tokens", dir);
	snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
	snprintf(key, sizeof(key), "%s/key.pem", dir);
	fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	for (int i = 0; i < 32; i++) {
		unsigned char b = 0;
		if (read(fd, &b, 1) != 1)
			b = (unsigned char)i;
		token[i] = "0123456789abcdef"[b & 15];
	}
	close(fd);
	f = fopen(tokens, "w");
	if (!f || fchmod(fileno(f), 0600) || fprintf(f, "slow %s\n", token) < 0 || fclose(f))
		return -EIO;
	snprintf(cmd, sizeof(cmd),
		 "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 "
		 "-subj /CN=clmux-hostile -addext subjectAltName=IP:127.0.0.1 -keyout '%s' "
		 "-out '%s' 2>/dev/null",
		 key, cert);
	if (system(cmd))
		return -EIO;
	tcp_port = free_port();
	tls_port = free_port();
	return tcp_port > 0 && tls_port > 0 && tcp_port != tls_port ? 0 : -EADDRNOTAVAIL;
}

/* Whether the region carries its magic ("CMXI"): the daemon serves it. */
static int region_ready(void)
{
	uint32_t v = 0;
	FILE *f = fopen(region, "rb");

	if (!f)
		return 0;
	if (fread(&v, sizeof(v), 1, f) != 1)
		v = 0;
	fclose(f);
	return v == 0x49584d43u;
}

/* ---- the daemon and its admin socket ---- */

/* The admin socket of this test's daemon. */
#define tenant_field(name, field) admin_tenant_field(admin, name, field)
#define field_becomes(name, field, want) admin_field_becomes(admin, name, field, want)

static int daemon_start(void)
{
	const char *bin = getenv("CLMUXD");
	FILE *f;

	strcpy(dir, "/tmp/clmux-hostile-XXXXXX");
	if (!mkdtemp(dir))
		return -errno;
	chmod(dir, 0755);
	snprintf(conf, sizeof(conf), "%s/clmuxd.conf", dir);
	snprintf(admin, sizeof(admin), "%s/admin.sock", dir);
	snprintf(sock_any, sizeof(sock_any), "%s/any.sock", dir);
	snprintf(sock_hog, sizeof(sock_hog), "%s/hog.sock", dir);
	snprintf(sock_victim, sizeof(sock_victim), "%s/victim.sock", dir);
	snprintf(sock_cb, sizeof(sock_cb), "%s/cb.sock", dir);
	snprintf(sock_few, sizeof(sock_few), "%s/few.sock", dir);
	snprintf(sock_slow, sizeof(sock_slow), "%s/slow.sock", dir);
	f = fopen(conf, "w");
	if (!f)
		return -errno;
	fprintf(f, "[tenant hog]\nmem = 64M\n\n[tenant victim]\n\n[tenant cb]\nobjects = 3000\n\n"
		   "[tenant few]\nsessions = 2\n\n[tenant slow]\nrate = 1M/s\n");
	fclose(f);
	if (slow_credentials()) {
		fprintf(stderr, "could not make slow's token and certificate\n");
		return -EIO;
	}
	/* Where QEMU's would be, if this machine has a /dev/shm. */
	if (!access("/dev/shm", W_OK))
		snprintf(region, sizeof(region), "/dev/shm/%s.ivshmem", strrchr(dir, '/') + 1);
	else
		snprintf(region, sizeof(region), "%s/ivshmem", dir);
	daemon_pid = fork();
	if (daemon_pid < 0)
		return -errno;
	if (!daemon_pid) {
		char l[9][600];
		setenv("CLMUX_UNREAD_S", "20", 1);
		snprintf(l[0], sizeof(l[0]), "unix:%s", sock_any);
		snprintf(l[1], sizeof(l[1]), "unix:%s,tenant=hog", sock_hog);
		snprintf(l[2], sizeof(l[2]), "unix:%s,tenant=victim", sock_victim);
		snprintf(l[3], sizeof(l[3]), "unix:%s,tenant=cb", sock_cb);
		snprintf(l[4], sizeof(l[4]), "unix:%s,tenant=few", sock_few);
		snprintf(l[5], sizeof(l[5]), "unix:%s,tenant=slow", sock_slow);
		snprintf(l[6], sizeof(l[6]), "tcp:127.0.0.1:%d,tokens=%s", tcp_port, tokens);
		snprintf(l[7], sizeof(l[7]), "tcp:127.0.0.1:%d,tokens=%s,tls=%s:%s", tls_port,
			 tokens, cert, key);
		snprintf(l[8], sizeof(l[8]), "ivshmem:%s,size=32M,slots=2,tenant=slow", region);
		execl(bin, bin, "--listen", l[0], "--listen", l[1], "--listen", l[2], "--listen",
		      l[3], "--listen", l[4], "--listen", l[5], "--listen", l[6], "--listen", l[7],
		      "--listen", l[8], "--config", conf, "--admin", admin, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500 && (access(admin, F_OK) || !region_ready()); i++)
		usleep(20000);
	if (access(admin, F_OK) || !region_ready()) {
		fprintf(stderr, "clmuxd did not start\n");
		return -EIO;
	}
	return 0;
}

static int daemon_stop(void)
{
	int status = 0;
	char cmd[160];

	kill(daemon_pid, SIGTERM);
	waitpid(daemon_pid, &status, 0);
	unlink(region);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", dir);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* The daemon's resident memory, bytes (/proc/PID/status). */
static uint64_t daemon_rss(void)
{
	char path[64], line[256];
	uint64_t kb = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)daemon_pid);
	f = fopen(path, "r");
	ck_assert_ptr_nonnull(f);
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmRSS: %" SCNu64, &kb) == 1)
			break;
	fclose(f);
	ck_assert_uint_gt(kb, 0);
	return kb << 10;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Hello on the socket at path: 0 and c set up, else the reply's status, or 1
 * when the daemon closed the connection instead (c->fd closed). */
static int try_hello_at(struct client *c, const char *path)
{
	struct cmx_Hello_in in = {.magic = CMX_PROTO_MAGIC, .version = CMX_PROTO_VERSION, .role = CMX_ROLE_CALL};
	struct cmx_Hello_out out;
	int st;

	c->fd = dial_at(path);
	c->seq = 0;
	send_msg(c, &cmx_desc_Hello_in, &in, 1, NULL, 0);
	st = recv_reply(c, &cmx_desc_Hello_out, &out, NULL);
	if (st) {
		close(c->fd);
		return st;
	}
	c->session = out.session;
	c->token = out.token;
	return 0;
}

/* Another tenant is served: Hello, Ping, and a 1 MiB write read back with
 * every byte right. Returns the Hello+Ping time, seconds. */
static double victim_works(void)
{
	static uint8_t data[1 << 20], back[1 << 20];
	struct cmx_WriteBuffer_in wr = {
	    .queue = {0x20101}, .mem = {0x20102}, .size = sizeof(data)};
	struct cmx_WriteBuffer_out wout;
	struct cmx_ReadBuffer_in rd = {
	    .queue = {0x20101}, .mem = {0x20102}, .size = sizeof(back)};
	struct cmx_ReadBuffer_out rout;
	struct client v;
	struct cmx_hdr h;
	uint8_t *keep;
	double t0 = now_s(), t;

	hello_at(&v, sock_victim);
	ping_ok(&v);
	t = now_s() - t0;
	for (size_t i = 0; i < sizeof(data); i++)
		data[i] = (uint8_t)(i * 7 + 3);
	queue_and_buffer(&v, 0x20100, sizeof(data));
	send_msg(&v, &cmx_desc_WriteBuffer_in, &wr, 1, data, sizeof(data));
	ck_assert_int_eq(recv_reply(&v, &cmx_desc_WriteBuffer_out, &wout, NULL), 0);
	/* The read's reply carries its data after the arguments. */
	send_msg(&v, &cmx_desc_ReadBuffer_in, &rd, 1, NULL, 0);
	ck_assert_int_eq(recv(v.fd, &h, CMX_HDR_SIZE, MSG_WAITALL), CMX_HDR_SIZE);
	ck_assert_uint_eq(h.bulk, sizeof(back));
	keep = malloc(h.size);
	ck_assert_int_eq(recv(v.fd, keep, h.size, MSG_WAITALL), (ssize_t)h.size);
	ck_assert_int_eq(*(int64_t *)keep, 0);
	free(keep);
	ck_assert_int_eq(recv(v.fd, back, sizeof(back), MSG_WAITALL), (ssize_t)sizeof(back));
	ck_assert_mem_eq(back, data, sizeof(data));
	(void)rout;
	close(v.fd);
	return t;
}

/* ---- case 10: before authentication ---- */

/* 60 strangers each announce a 16 MiB Hello and send a MiB of it: each is
 * ended at the header, and the daemon does not grow. */
START_TEST(prehello_huge_hello)
{
	static uint8_t junk[256 << 10];
	struct cmx_hdr h = {.size = 16u << 20, .op = CMX_OP_Hello, .flags = CMX_HDR_SYNC, .seq = 1};
	struct timeval tv = {5, 0};
	uint64_t rss0 = daemon_rss(), rss1;
	int fds[60];

	for (int i = 0; i < 60; i++) {
		fds[i] = dial_at(sock_any);
		setsockopt(fds[i], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
		send_raw(fds[i], &h, CMX_HDR_SIZE);
		/* Refused at the header: these fail once the daemon has closed. */
		for (int k = 0; k < 4; k++)
			if (send(fds[i], junk, sizeof(junk), MSG_NOSIGNAL) < 0)
				break;
	}
	/* While they are open: a daemon that took their bytes holds them now
	 * (a blocking send returned once most of them were read). */
	rss1 = daemon_rss();
	fprintf(stderr, "prehello_huge_hello: daemon RSS %.1f -> %.1f MiB (%+.1f)\n",
		(double)rss0 / MiB, (double)rss1 / MiB, ((double)rss1 - (double)rss0) / MiB);
	ck_assert_uint_lt(rss1, rss0 + 8 * MiB);
	for (int i = 0; i < 60; i++)
		ck_assert_msg(closed_by_daemon(fds[i]), "connection %d not refused", i);
	for (int i = 0; i < 60; i++)
		close(fds[i]);
	victim_works();
}
END_TEST

/* A stranger that says nothing is closed after the time allowed for Hello
 * (5 s), on a listener without tokens. */
START_TEST(prehello_silent_dropped)
{
	struct timeval tv = {60, 0};
	double t0 = now_s();
	char b;
	int fd = dial_at(sock_any);

	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ck_assert_int_eq(recv(fd, &b, 1, 0), 0);
	fprintf(stderr, "prehello_silent_dropped: closed after %.1f s\n", now_s() - t0);
	close(fd);
}
END_TEST

/* One uid opens 80 connections and says nothing on them: at most 64 wait
 * for their Hello, the rest are closed at once. */
START_TEST(prehello_capped_per_peer)
{
	struct cmx_Hello_in in = {.magic = CMX_PROTO_MAGIC, .version = CMX_PROTO_VERSION, .role = CMX_ROLE_CALL};
	struct client c[80];
	int ok = 0, refused = 0;

	for (int i = 0; i < 80; i++) {
		c[i].fd = dial_at(sock_victim);
		c[i].seq = 0;
	}
	/* Within the 5 s allowed: the ones held get their Hello answered (a
	 * send on one closed already may fail). */
	for (int i = 0; i < 80; i++) {
		uint8_t msg[CMX_HDR_SIZE + 64];
		struct cmx_hdr h = {.size = (uint32_t)cmx_codec_size(&cmx_desc_Hello_in, &in),
				    .op = CMX_OP_Hello,
				    .flags = CMX_HDR_SYNC,
				    .seq = ++c[i].seq};
		memcpy(msg, &h, CMX_HDR_SIZE);
		cmx_codec_encode(&cmx_desc_Hello_in, &in, msg + CMX_HDR_SIZE);
		if (send(c[i].fd, msg, CMX_HDR_SIZE + h.size, MSG_NOSIGNAL) < 0)
			ck_assert_msg(errno == EPIPE || errno == ECONNRESET, "%s", strerror(errno));
	}
	for (int i = 0; i < 80; i++) {
		struct cmx_Hello_out out;
		int st = recv_reply(&c[i], &cmx_desc_Hello_out, &out, NULL);
		ok += st == 0;
		refused += st == 1;
		close(c[i].fd);
	}
	fprintf(stderr, "prehello_capped_per_peer: %d answered, %d closed\n", ok, refused);
	ck_assert_int_eq(ok + refused, 80);
	ck_assert_int_ge(refused, 80 - 64);
	ck_assert_int_gt(ok, 0);
	field_becomes("victim", "sessions", 0);
	victim_works();
}
END_TEST

/* ---- sessions per tenant ---- */

/* Platforms named clmux the ICD loader offers (PoCL's is there too); the
 * first in *out. */
static int clmux_platform(cl_platform_id *out)
{
	cl_platform_id ids[8];
	cl_uint n = 0;
	int found = 0;

	if (clGetPlatformIDs(8, ids, &n) != CL_SUCCESS)
		return 0;
	for (cl_uint i = 0; i < n && i < 8; i++) {
		char name[64] = "";
		clGetPlatformInfo(ids[i], CL_PLATFORM_NAME, sizeof(name) - 1, name, NULL);
		if (!strcmp(name, "clmux") && !found++ && out)
			*out = ids[i];
	}
	return found;
}

/* few may open 2 sessions: a third Hello is answered CL_OUT_OF_RESOURCES
 * and closed, the guest ICD offers no platform, and a session closed makes
 * room again. */
START_TEST(sessions_quota)
{
	struct client a, b, c;
	char spec[160];

	field_becomes("few", "sessions", 0);
	ck_assert_uint_eq(tenant_field("few", "sessions_quota"), 2);
	ck_assert_int_eq(try_hello_at(&a, sock_few), 0);
	ck_assert_int_eq(try_hello_at(&b, sock_few), 0);
	ck_assert_int_eq(try_hello_at(&c, sock_few), CL_OUT_OF_RESOURCES);
	ck_assert_uint_eq(tenant_field("few", "sessions"), 2);
	/* The guest ICD, refused the same way: no platform, no hang. */
	snprintf(spec, sizeof(spec), "unix:%s", sock_few);
	setenv("CLMUX_SERVER", spec, 1);
	ck_assert_int_eq(clmux_platform(NULL), 0);
	ping_ok(&a);
	close(b.fd);
	field_becomes("few", "sessions", 1);
	ck_assert_int_eq(try_hello_at(&c, sock_few), 0);
	ping_ok(&c);
	close(a.fd);
	close(c.fd);
	field_becomes("few", "sessions", 0);
	victim_works();
}
END_TEST

/* ---- case 9: output a session leaves unread ---- */

/* The notification channel of c's session (Hello role notify). */
static int notify_channel(const struct client *c, const char *path)
{
	struct cmx_Hello_in in = {.magic = CMX_PROTO_MAGIC,
				  .version = CMX_PROTO_VERSION,
				  .role = CMX_ROLE_NOTIFY,
				  .session = c->session,
				  .token = c->token};
	struct cmx_Hello_out out;
	struct client n = {.fd = dial_at(path)};

	send_msg(&n, &cmx_desc_Hello_in, &in, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&n, &cmx_desc_Hello_out, &out, NULL), 0);
	return n.fd;
}

/* Whether fd has something to read within ms. */
static int readable(int fd, int ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, ms) > 0;
}

/* Appends one message to *buf (as send_msg() would send it). */
static void append_msg(struct client *c, uint8_t **buf, size_t *len, const struct cmx_msgdesc *d,
		       const void *in, int sync)
{
	size_t size = cmx_codec_size(d, in);
	struct cmx_hdr h = {
	    .size = (uint32_t)size, .op = d->op, .flags = sync ? CMX_HDR_SYNC : 0, .seq = ++c->seq};

	*buf = realloc(*buf, *len + CMX_HDR_SIZE + size);
	ck_assert_ptr_nonnull(*buf);
	memcpy(*buf + *len, &h, CMX_HDR_SIZE);
	cmx_codec_encode(d, in, *buf + *len + CMX_HDR_SIZE);
	*len += CMX_HDR_SIZE + size;
}

/* hog (mem = 64M) opens its notification channel, never reads it, and asks
 * for 250 asynchronous reads of a 512 KiB buffer (125 MiB; small enough to
 * be staged, not sent from the mapped buffer, host/land.h), then Finish. */
static void hog_floods(struct client *h, int *nfd)
{
	uint8_t *batch = NULL;
	size_t len = 0;

	hello_at(h, sock_hog);
	*nfd = notify_channel(h, sock_hog);
	queue_and_buffer(h, 0x30100, 512 << 10);
	for (uint64_t i = 0; i < 250; i++) {
		struct cmx_ReadBuffer_in rd = {
		    .queue = {0x30101}, .mem = {0x30102}, .size = 512 << 10, .tag = i + 1};
		append_msg(h, &batch, &len, &cmx_desc_ReadBuffer_in, &rd, 0);
	}
	append_msg(h, &batch, &len, &cmx_desc_Finish_in,
		   &(struct cmx_Finish_in){.queue = {0x30101}}, 1);
	/* In one send, so that the daemon takes Finish with the reads, before
	 * their output piles up and holds the session's calls back (sent one
	 * by one, a loaded machine let the first reads complete in between). */
	send_raw(h->fd, batch, len);
	free(batch);
	/* Done: their data is the daemon's to send. */
	ck_assert_int_eq(recv_reply(h, NULL, NULL, NULL), 0);
}

/* Sends Pings until one is not answered while the session is counted held
 * back (its output may not have piled up when the first arrives). */
static void until_held_back(struct client *h, uint64_t before)
{
	for (int i = 0; i < 200; i++) {
		struct cmx_Ping_in in = {0};
		struct cmx_Ping_out out;

		send_msg(h, &cmx_desc_Ping_in, &in, 1, NULL, 0);
		/* Unanswered: held back once the count says so (the admin
		 * socket may show a loaded worker's figures late). */
		for (int k = 0; k < 20 && !readable(h->fd, 500); k++)
			if (tenant_field("hog", "backlogged") > before)
				return;
		ck_assert_int_eq(recv_reply(h, &cmx_desc_Ping_out, &out, NULL), 0);
	}
	ck_abort_msg("hog's calls were never held back");
}

/* A session that never reads its notifications is held back instead of
 * growing the daemon: its calls wait, the daemon stays within hog's mem
 * quota plus 64 MiB, another tenant goes on, and once hog reads, its calls
 * are answered again. */
START_TEST(unread_output_held_back)
{
	uint64_t rss0 = daemon_rss(), rss1, before = tenant_field("hog", "backlogged"), got = 0;
	static uint8_t sink[1 << 20];
	struct client h;
	double t;
	int nfd;

	hog_floods(&h, &nfd);
	until_held_back(&h, before);
	rss1 = daemon_rss();
	fprintf(stderr,
		"unread_output_held_back: daemon RSS %.1f -> %.1f MiB (%+.1f; mem quota 64 MiB + "
		"64), hog's output held %.1f MiB\n",
		(double)rss0 / MiB, (double)rss1 / MiB, ((double)rss1 - (double)rss0) / MiB,
		(double)tenant_field("hog", "output") / MiB);
	ck_assert_uint_lt(rss1, rss0 + 64 * MiB + SLACK);
	ck_assert_uint_le(tenant_field("hog", "output"), 64 * MiB + 32 * MiB);
	t = victim_works();
	fprintf(stderr, "unread_output_held_back: victim's Hello+Ping %.1f ms\n", t * 1e3);
	/* hog reads: the Pings it sent get their answers. */
	for (int i = 0; i < 100000 && !readable(h.fd, 0); i++) {
		ssize_t n;
		ck_assert(readable(nfd, 30000));
		n = recv(nfd, sink, sizeof(sink), 0);
		ck_assert_int_gt(n, 0);
		got += (uint64_t)n;
	}
	ck_assert_msg(readable(h.fd, 30000), "no answer after %llu bytes read",
		      (unsigned long long)got);
	ck_assert_int_eq(recv_reply(&h, NULL, NULL, NULL), 0);
	close(nfd);
	close(h.fd);
	field_becomes("hog", "output", 0);
	field_becomes("hog", "mem", 0);
}
END_TEST

/* A peer over the output cap that reads none of it for CLMUX_UNREAD_S
 * (20 s here) is closed, and everything it held comes back. */
START_TEST(unread_peer_dropped)
{
	struct client h;
	double t0;
	int nfd;

	hog_floods(&h, &nfd);
	until_held_back(&h, tenant_field("hog", "backlogged"));
	t0 = now_s();
	/* Answers to the Pings never come: the connection ends. */
	for (int i = 0; i < 100 && readable(h.fd, 5000);) {
		char b[64];
		ssize_t n = recv(h.fd, b, sizeof(b), 0);
		if (n <= 0)
			break;
		ck_assert_int_lt(++i, 100);
	}
	ck_assert_msg(readable(h.fd, 120000), "still open after %.0f s", now_s() - t0);
	fprintf(stderr, "unread_peer_dropped: closed %.1f s after it was held back\n",
		now_s() - t0);
	ck_assert(closed_by_daemon(h.fd));
	close(h.fd);
	close(nfd);
	field_becomes("hog", "output", 0);
	field_becomes("hog", "mem", 0);
	field_becomes("hog", "sessions", 0);
	victim_works();
}
END_TEST

/* ---- case 11: event callbacks ---- */

/* Counts the EventDone notifications on a notification channel. */
struct done_count {
	int fd;
	uint64_t ok, refused, other, stop_at;
};

static void *count_dones(void *arg)
{
	struct done_count *d = arg;

	while (d->ok + d->refused + d->other < d->stop_at) {
		struct cmx_hdr h;
		int64_t v[2];
		if (recv(d->fd, &h, CMX_HDR_SIZE, MSG_WAITALL) != CMX_HDR_SIZE)
			break;
		if (h.op != CMX_OP_EventDone || h.size != sizeof(v) || h.bulk ||
		    recv(d->fd, v, sizeof(v), MSG_WAITALL) != sizeof(v))
			break;
		if (v[1] == 0)
			d->ok++;
		else if (v[1] == CL_OUT_OF_RESOURCES)
			d->refused++;
		else
			d->other++;
	}
	return NULL;
}

/* Another tenant's Hello+Ping, over and over while the flood lasts. */
struct pinger {
	volatile int stop;
	unsigned n;
	double max_s, sum_s;
};

static void *ping_victim(void *arg)
{
	struct pinger *p = arg;

	while (!p->stop || !p->n) {
		struct client v;
		double t0 = now_s(), t;
		hello_at(&v, sock_victim);
		ping_ok(&v);
		t = now_s() - t0;
		close(v.fd);
		p->n++;
		p->sum_s += t;
		if (t > p->max_s)
			p->max_s = t;
		usleep(10000);
	}
	return NULL;
}

static void set_callback(struct client *c, uint64_t event, uint64_t tag)
{
	struct cmx_SetEventCallback_in in = {.event = {event}, .type = CL_COMPLETE, .tag = tag};

	send_msg(c, &cmx_desc_SetEventCallback_in, &in, 0, NULL, 0);
}

static void user_event(struct client *c, uint64_t event, uint64_t ctx)
{
	struct cmx_CreateUserEvent_in in = {.event = {event}, .context = {ctx}};

	send_msg(c, &cmx_desc_CreateUserEvent_in, &in, 0, NULL, 0);
}

static void user_event_done(struct client *c, uint64_t event)
{
	struct cmx_SetUserEventStatus_in in = {.event = {event}, .status = CL_COMPLETE};

	send_msg(c, &cmx_desc_SetUserEventStatus_in, &in, 0, NULL, 0);
}

/* 80,000 callbacks on one user event: 64 are kept (counted as cb's
 * objects), the rest refused with CL_OUT_OF_RESOURCES, and another tenant's
 * Hello+Ping is answered throughout; then cb's objects quota (3000) holds
 * over many events. */
START_TEST(callback_flood)
{
	enum { FLOOD = 80000, EVENTS = 50 };
	uint64_t ctx = 0x40100, ev = 0x40101, devs[1] = {1};
	struct cmx_CreateContext_in cc = {.context = {ctx}, .devices = {devs, 1}};
	struct done_count d = {.stop_at = FLOOD};
	struct pinger p = {0};
	pthread_t counter, pinger;
	struct client c;
	double t0;

	field_becomes("cb", "objects", 0);
	hello_at(&c, sock_cb);
	d.fd = notify_channel(&c, sock_cb);
	send_msg(&c, &cmx_desc_CreateContext_in, &cc, 0, NULL, 0);
	user_event(&c, ev, ctx);
	ck_assert_int_eq(pthread_create(&counter, NULL, count_dones, &d), 0);
	ck_assert_int_eq(pthread_create(&pinger, NULL, ping_victim, &p), 0);
	t0 = now_s();
	for (uint64_t i = 0; i < FLOOD; i++)
		set_callback(&c, ev, i + 1);
	ping_ok(&c);
	fprintf(stderr, "callback_flood: %d registrations taken in %.2f s\n", FLOOD, now_s() - t0);
	p.stop = 1;
	pthread_join(pinger, NULL);
	fprintf(stderr,
		"callback_flood: victim's Hello+Ping during the flood: %u answered, mean %.2f ms, "
		"max %.2f ms\n",
		p.n, p.sum_s / p.n * 1e3, p.max_s * 1e3);
	/* The context, the event, and 64 callbacks. */
	ck_assert_uint_eq(tenant_field("cb", "objects"), 2 + 64);
	user_event_done(&c, ev);
	pthread_join(counter, NULL);
	ck_assert_uint_eq(d.refused, FLOOD - 64);
	ck_assert_uint_eq(d.ok, 64);
	ck_assert_uint_eq(d.other, 0);
	field_becomes("cb", "objects", 2);

	/* Many events, 64 callbacks each: the objects quota stops them. */
	d = (struct done_count){.fd = d.fd, .stop_at = EVENTS * 64};
	for (uint64_t e = 0; e < EVENTS; e++)
		user_event(&c, 0x40200 + e, ctx);
	for (uint64_t e = 0; e < EVENTS; e++)
		for (uint64_t i = 0; i < 64; i++)
			set_callback(&c, 0x40200 + e, e * 64 + i + 1);
	ping_ok(&c);
	ck_assert_uint_eq(tenant_field("cb", "objects"), 3000);
	ck_assert_int_eq(pthread_create(&counter, NULL, count_dones, &d), 0);
	for (uint64_t e = 0; e < EVENTS; e++)
		user_event_done(&c, 0x40200 + e);
	pthread_join(counter, NULL);
	ck_assert_uint_eq(d.ok, 3000 - 2 - EVENTS);
	ck_assert_uint_eq(d.refused, EVENTS * 64 - d.ok);
	field_becomes("cb", "objects", 2 + EVENTS);
	close(d.fd);
	close(c.fd);
	field_becomes("cb", "objects", 0);
	victim_works();
}
END_TEST

/* ---- case 12: the rate quota on every path ---- */

/* One blocking write of n bytes through the guest ICD at spec (this
 * process's first OpenCL call: each test runs in a process of its own),
 * then clFinish and a read-back of its last bytes; the seconds it took. */
static double icd_write(const char *spec, size_t n)
{
	uint8_t *data = malloc(n), back[4096];
	cl_platform_id plat;
	cl_device_id dev;
	cl_context ctx;
	cl_command_queue q;
	cl_mem buf;
	cl_int e;
	double t0, t;

	setenv("CLMUX_SERVER", spec, 1);
	ck_assert_ptr_nonnull(data);
	for (size_t i = 0; i < n; i++)
		data[i] = (uint8_t)(i * 13 + 5);
	ck_assert_int_eq(clmux_platform(&plat), 1);
	ck_assert_int_eq(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL), CL_SUCCESS);
	ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
	ck_assert_int_eq(e, CL_SUCCESS);
	q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &e);
	ck_assert_int_eq(e, CL_SUCCESS);
	buf = clCreateBuffer(ctx, CL_MEM_READ_WRITE, n, NULL, &e);
	ck_assert_int_eq(e, CL_SUCCESS);
	t0 = now_s();
	ck_assert_int_eq(clEnqueueWriteBuffer(q, buf, CL_TRUE, 0, n, data, 0, NULL, NULL),
			 CL_SUCCESS);
	ck_assert_int_eq(clFinish(q), CL_SUCCESS);
	t = now_s() - t0;
	ck_assert_int_eq(clEnqueueReadBuffer(q, buf, CL_TRUE, n - sizeof(back), sizeof(back), back,
					     0, NULL, NULL),
			 CL_SUCCESS);
	ck_assert_mem_eq(back, data + n - sizeof(back), sizeof(back));
	clReleaseMemObject(buf);
	clReleaseCommandQueue(q);
	clReleaseContext(ctx);
	free(data);
	return t;
}

/*
 * slow may send 1 MiB/s after a one-second burst: 8 MiB through the guest
 * ICD at server spec take at least 7 s, however the bytes travel. The
 * rate may be at most 10 % over its quota: at least 7 / 1.1 s. Only that
 * bound is asserted (load can make it slower, never faster); the rate
 * reached is printed.
 */
static void rate_holds(const char *what, const char *spec)
{
	double t = icd_write(spec, 8 * MiB);

	fprintf(stderr, "rate_%s: 8 MiB in %.2f s: %.2f MiB/s (quota 1 MiB/s, one-second burst)\n",
		what, t, 8.0 / t);
	ck_assert_msg(t >= 7.0 / 1.1, "8 MiB at 1 MiB/s went in %.2f s", t);
	victim_works();
}

/* Through slow's Unix socket at transport (unix:, shm:). */
static void rate_holds_on(const char *transport)
{
	char spec[160];

	snprintf(spec, sizeof(spec), "%s:%s", transport, sock_slow);
	rate_holds(transport, spec);
}

/* The unix transport's payloads take the shared area (the guest's
 * default): counted as if they had come through the socket. */
START_TEST(rate_area_unix)
{
	rate_holds_on("unix");
}
END_TEST

/* shm: calls through the command ring, payloads through the area. */
START_TEST(rate_shm)
{
	rate_holds_on("shm");
}
END_TEST

/* TCP with slow's token: calls on the socket, 8 MiB through bulk lanes. */
START_TEST(rate_tcp)
{
	char spec[64];

	setenv("CLMUX_TOKEN", token, 1);
	snprintf(spec, sizeof(spec), "tcp:127.0.0.1:%d", tcp_port);
	rate_holds("tcp", spec);
}
END_TEST

/* TLS: the bytes the daemon decrypts. */
START_TEST(rate_tls)
{
	char spec[64];

	setenv("CLMUX_TOKEN", token, 1);
	setenv("CLMUX_TLS_CA", cert, 1);
	snprintf(spec, sizeof(spec), "tls:127.0.0.1:%d", tls_port);
	rate_holds("tls", spec);
}
END_TEST

/* An ivshmem region of slow's: a slot's rings and data area, polled. */
START_TEST(rate_ivshmem)
{
	char spec[160];

	snprintf(spec, sizeof(spec), "ivshmem:%s", region);
	rate_holds("ivshmem", spec);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hostile_quota");
	TCase *tc = tcase_create("hostile_quota");
	SRunner *sr;
	int failed;

	if (!getenv("CLMUXD"))
		return 77;
	signal(SIGPIPE, SIG_IGN);
	tcase_add_test(tc, prehello_huge_hello);
	tcase_add_test(tc, prehello_silent_dropped);
	tcase_add_test(tc, prehello_capped_per_peer);
	tcase_add_test(tc, sessions_quota);
	tcase_add_test(tc, unread_output_held_back);
	tcase_add_test(tc, unread_peer_dropped);
	tcase_add_test(tc, callback_flood);
	tcase_add_test(tc, rate_area_unix);
	tcase_add_test(tc, rate_shm);
	tcase_add_test(tc, rate_tcp);
	tcase_add_test(tc, rate_tls);
	tcase_add_test(tc, rate_ivshmem);
	tcase_set_timeout(tc, 180);
	suite_add_tcase(s, tc);
	if (daemon_start())
		return 1;
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	if (daemon_stop())
		failed++;
	return failed ? 1 : 0;
}
