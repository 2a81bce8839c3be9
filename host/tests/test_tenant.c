// SPDX-License-Identifier: MIT
// Tenants against a live clmuxd with a config: each quota breached and
// enforced, memory returned when a client dies, ids that mean nothing in
// another tenant, identity mapping, the root-only admin socket, live quota
// changes written back, eviction, and the metrics endpoint.
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "adminclient.h"
#include "rawclient.h"

static char dir[64], conf[128], sock_a[128], sock_b[128], sock_d[128], sock_any[128], admin[128],
    metrics[128];
static pid_t daemon_pid;

/* ---- the daemon and its admin socket ---- */

/* The admin socket of this test's daemon. */
#define tenant_field(name, field) admin_tenant_field(admin, name, field)
#define field_becomes(name, field, want) admin_field_becomes(admin, name, field, want)

static int daemon_start(void)
{
	const char *bin = getenv("CLMUXD");
	FILE *f;

	strcpy(dir, "/tmp/clmux-tenant-XXXXXX");
	if (!mkdtemp(dir))
		return -errno;
	chmod(dir, 0755);
	snprintf(conf, sizeof(conf), "%s/clmuxd.conf", dir);
	snprintf(sock_a, sizeof(sock_a), "%s/a.sock", dir);
	snprintf(sock_b, sizeof(sock_b), "%s/b.sock", dir);
	snprintf(sock_d, sizeof(sock_d), "%s/d.sock", dir);
	snprintf(sock_any, sizeof(sock_any), "%s/any.sock", dir);
	snprintf(admin, sizeof(admin), "%s/admin.sock", dir);
	snprintf(metrics, sizeof(metrics), "%s/metrics.sock", dir);
	f = fopen(conf, "w");
	if (!f)
		return -errno;
	/* b and d are one group (one worker process), where the scheduler
	 * holds one's launches behind the other's flood (held commands); a
	 * and c have workers of their own. */
	fprintf(f,
		"# test tenants\n[tenant a]\nmem = 1M\nobjects = 12\ninflight = 4\n\n"
		"[tenant b]\nweight = 3\nrate = 1M/s\ngroup = bd\n\n[tenant c]\nuid = %u\n"
		"cap = 20%%\n\n[tenant d]\ngroup = bd\n",
		(unsigned)getuid());
	fclose(f);
	daemon_pid = fork();
	if (daemon_pid < 0)
		return -errno;
	if (!daemon_pid) {
		char la[160], lb[160], ld[160], lany[160], m[160];
		snprintf(la, sizeof(la), "unix:%s,tenant=a", sock_a);
		snprintf(lb, sizeof(lb), "unix:%s,tenant=b", sock_b);
		snprintf(ld, sizeof(ld), "unix:%s,tenant=d", sock_d);
		snprintf(lany, sizeof(lany), "unix:%s", sock_any);
		snprintf(m, sizeof(m), "unix:%s", metrics);
		execl(bin, bin, "--listen", la, "--listen", lb, "--listen", ld, "--listen", lany,
		      "--config", conf, "--admin", admin, "--metrics", m, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 500 && access(metrics, F_OK); i++)
		usleep(20000);
	if (access(metrics, F_OK)) {
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
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	if (system(cmd))
		fprintf(stderr, "could not remove %s\n", dir);
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -1;
}

/* ---- calls ---- */

static uint64_t stat_counter(struct client *c, unsigned i)
{
	struct cmx_GetStats_in in = {0};
	struct cmx_GetStats_out out;
	uint8_t *keep;
	uint64_t v;

	send_msg(c, &cmx_desc_GetStats_in, &in, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(c, &cmx_desc_GetStats_out, &out, &keep), 0);
	v = out.counters.v[i];
	free(keep);
	return v;
}

/* The `value` blob of a *Info query (their outputs share one layout). */
static void info_value(struct client *c, const struct cmx_msgdesc *din, const void *in,
		       const struct cmx_msgdesc *dout, void *v, size_t len)
{
	struct cmx_GetDeviceInfo_out out;
	uint8_t *keep;

	_Static_assert(sizeof(struct cmx_GetDeviceInfo_out) == sizeof(struct cmx_GetEventInfo_out),
		       "one layout");
	send_msg(c, din, in, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(c, dout, &out, &keep), 0);
	ck_assert_uint_eq(out.value.len, len);
	memcpy(v, out.value.ptr, len);
	free(keep);
}

static uint64_t device_u64(struct client *c, unsigned param)
{
	struct cmx_GetDeviceInfo_in in = {.device = {1}, .param = param};
	uint64_t v;

	info_value(c, &cmx_desc_GetDeviceInfo_in, &in, &cmx_desc_GetDeviceInfo_out, &v, 8);
	return v;
}

static void context(struct client *c, uint64_t id)
{
	uint64_t devs[1] = {1};
	struct cmx_CreateContext_in in = {.context = {id}, .devices = {devs, 1}};

	send_msg(c, &cmx_desc_CreateContext_in, &in, 0, NULL, 0);
}

static int context_ok(struct client *c, uint64_t id)
{
	struct cmx_GetContextInfo_in q = {.context = {id}, .param = 0x1082 /* NUM_DEVICES */};
	struct cmx_GetContextInfo_out out;

	send_msg(c, &cmx_desc_GetContextInfo_in, &q, 1, NULL, 0);
	return recv_reply(c, &cmx_desc_GetContextInfo_out, &out, NULL);
}

static void buffer(struct client *c, uint64_t id, uint64_t ctx, uint64_t size)
{
	struct cmx_CreateBuffer_in in = {.mem = {id}, .context = {ctx}, .size = size};

	send_msg(c, &cmx_desc_CreateBuffer_in, &in, 0, NULL, 0);
}

static int mem_ok(struct client *c, uint64_t id)
{
	struct cmx_GetMemInfo_in q = {.mem = {id}, .param = 0x1102 /* CL_MEM_SIZE */};
	struct cmx_GetMemInfo_out out;

	send_msg(c, &cmx_desc_GetMemInfo_in, &q, 1, NULL, 0);
	return recv_reply(c, &cmx_desc_GetMemInfo_out, &out, NULL);
}

static void ping(struct client *c)
{
	struct cmx_Ping_in in = {0};
	struct cmx_Ping_out out;

	send_msg(c, &cmx_desc_Ping_in, &in, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(c, &cmx_desc_Ping_out, &out, NULL), 0);
}

/* Context 0x10100, queue 0x10101, and kernel 0x10103 built from src. */
static void kernel_setup(struct client *c, const char *src, const char *name)
{
	uint64_t devs[1] = {1}, qprops[1] = {0};
	struct cmx_CreateQueue_in qu = {
	    .queue = {0x10101}, .context = {0x10100}, .device = {1}, .props = {qprops, 1}};
	struct cmx_CreateProgramWithSource_in pr = {
	    .program = {0x10102}, .context = {0x10100}, .source = {src, strlen(src)}};
	struct cmx_BuildProgram_in bu = {.program = {0x10102}, .devices = {devs, 1}};
	struct cmx_BuildProgram_out bout;
	struct cmx_CreateKernel_in kn = {
	    .kernel = {0x10103}, .program = {0x10102}, .name = {name, strlen(name) + 1}};

	context(c, 0x10100);
	send_msg(c, &cmx_desc_CreateQueue_in, &qu, 0, NULL, 0);
	send_msg(c, &cmx_desc_CreateProgramWithSource_in, &pr, 0, NULL, 0);
	send_msg(c, &cmx_desc_BuildProgram_in, &bu, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(c, &cmx_desc_BuildProgram_out, &bout, NULL), 0);
	cmx_codec_release(&cmx_desc_BuildProgram_out, &bout);
	send_msg(c, &cmx_desc_CreateKernel_in, &kn, 0, NULL, 0);
}

/* Kernel 0x10103 on queue, n work-items, after wait (0: none). */
static void launch_on(struct client *c, uint64_t queue, uint64_t event, uint64_t wait, uint64_t n)
{
	uint64_t gl[1] = {n}, w[1] = {wait};
	struct cmx_EnqueueKernel_in in = {.queue = {queue},
					  .kernel = {0x10103},
					  .global = {gl, 1},
					  .wait = {w, wait ? 1 : 0},
					  .event = {event}};

	send_msg(c, &cmx_desc_EnqueueKernel_in, &in, 0, NULL, 0);
}

static void launch(struct client *c, uint64_t event, uint64_t wait, uint64_t n)
{
	launch_on(c, 0x10101, event, wait, n);
}

static int32_t event_status(struct client *c, uint64_t id)
{
	struct cmx_GetEventInfo_in in = {.event = {id}, .param = 0x11d3 /* EXECUTION_STATUS */};
	int32_t st;

	info_value(c, &cmx_desc_GetEventInfo_in, &in, &cmx_desc_GetEventInfo_out, &st, 4);
	return st;
}

static void wait_events(struct client *c, const uint64_t *ids, uint64_t n)
{
	struct cmx_WaitForEvents_in in = {.events = {ids, n}};
	struct cmx_WaitForEvents_out out;

	send_msg(c, &cmx_desc_WaitForEvents_in, &in, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(c, &cmx_desc_WaitForEvents_out, &out, NULL), 0);
}

static uint64_t metric(const char *name, const char *tenant)
{
	char *all = ask(metrics, "GET /metrics HTTP/1.0\r\n\r\n"), key[128], *p;
	uint64_t v;

	snprintf(key, sizeof(key), "\nclmux_tenant_%s{tenant=\"%s\"} ", name, tenant);
	p = strstr(all, key);
	ck_assert_msg(p, "no %s in metrics:\n%s", key + 1, all);
	v = strtoull(p + strlen(key), NULL, 10);
	free(all);
	return v;
}

/* A forked client is set up: it tells the parent (on fd), then waits to be
 * killed. */
static _Noreturn void child_park(int fd)
{
	if (write(fd, "x", 1) != 1)
		_exit(1);
	pause();
	_exit(0);
}

/* Kills the client pid of tenant: all it was charged comes back. */
static void killed_returns_all(pid_t pid, const char *tenant)
{
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
	field_becomes(tenant, "inflight", 0);
	field_becomes(tenant, "mem", 0);
	field_becomes(tenant, "objects", 0);
	field_becomes(tenant, "sessions", 0);
}

/* ---- tests ---- */

START_TEST(memory_quota)
{
	struct client a, b;

	field_becomes("a", "mem", 0);
	hello_at(&a, sock_a);
	/* The quota is the tenant's device memory. */
	ck_assert_uint_eq(device_u64(&a, 0x101F /* GLOBAL_MEM_SIZE */), 1 << 20);
	ck_assert_uint_le(device_u64(&a, 0x1010 /* MAX_MEM_ALLOC_SIZE */), 1 << 20);
	context(&a, 0x10100);
	buffer(&a, 0x10200, 0x10100, 768 << 10);
	buffer(&a, 0x10201, 0x10100, 512 << 10); /* 1.25 MiB in all: refused */
	buffer(&a, 0x10202, 0x10100, 256 << 10); /* exactly 1 MiB: fits */
	ck_assert_int_eq(mem_ok(&a, 0x10200), 0);
	ck_assert_int_eq(mem_ok(&a, 0x10201), -38 /* CL_INVALID_MEM_OBJECT */);
	ck_assert_int_eq(mem_ok(&a, 0x10202), 0);
	ck_assert_uint_eq(stat_counter(&a, 4), 1 << 20);
	ck_assert_uint_eq(stat_counter(&a, 5), 1); /* one async failure */
	ck_assert_uint_eq(tenant_field("a", "mem"), 1 << 20);
	/* Another tenant is not held to a's quota. */
	hello_at(&b, sock_b);
	context(&b, 0x10100);
	buffer(&b, 0x10200, 0x10100, 2 << 20);
	ck_assert_int_eq(mem_ok(&b, 0x10200), 0);
	ck_assert_uint_eq(device_u64(&b, 0x101F), device_u64(&b, 0x101F));
	close(a.fd);
	close(b.fd);
	field_becomes("a", "mem", 0);
	field_becomes("b", "mem", 0);
}
END_TEST

START_TEST(object_quota)
{
	struct client a;
	int ok = 0;

	field_becomes("a", "objects", 0);
	hello_at(&a, sock_a);
	for (uint64_t i = 0; i < 20; i++)
		context(&a, 0x10100 + i);
	for (uint64_t i = 0; i < 20; i++)
		ok += context_ok(&a, 0x10100 + i) == 0;
	ck_assert_int_eq(ok, 12);
	ck_assert_uint_eq(stat_counter(&a, 5), 8);
	close(a.fd);
	field_becomes("a", "objects", 0);
}
END_TEST

START_TEST(inflight_quota)
{
	static const char src[] = "kernel void k(void) { }\n";
	struct cmx_CreateUserEvent_in ue = {.event = {0x10300}, .context = {0x10100}};
	struct cmx_SetUserEventStatus_in go = {.event = {0x10300}, .status = 0};
	uint64_t done[4] = {0x10301, 0x10302, 0x10303, 0x10304};
	struct client a;

	field_becomes("a", "objects", 0);
	hello_at(&a, sock_a);
	kernel_setup(&a, src, "k");
	send_msg(&a, &cmx_desc_CreateUserEvent_in, &ue, 0, NULL, 0);
	/* Held by the user event: four fit the quota, the rest are refused. */
	for (uint64_t i = 0; i < 6; i++)
		launch(&a, 0x10301 + i, 0x10300, 1);
	ck_assert_int_eq(event_status(&a, 0x10305), -5 /* CL_OUT_OF_RESOURCES */);
	ck_assert_int_eq(event_status(&a, 0x10306), -5);
	ck_assert_uint_eq(tenant_field("a", "inflight"), 4);
	send_msg(&a, &cmx_desc_SetUserEventStatus_in, &go, 0, NULL, 0);
	wait_events(&a, done, 4);
	field_becomes("a", "inflight", 0);
	/* Room again. */
	launch(&a, 0x10307, 0, 1);
	wait_events(&a, (uint64_t[]){0x10307}, 1);
	close(a.fd);
	field_becomes("a", "objects", 0);
}
END_TEST

/* What a resting event is charged: CMX_COMPLETE_REST_BYTES (host/complete.h). */
#define REST_BYTES 4096u

/* A failed command's event rests a few seconds before the daemon's last
 * release (host/complete.c), charged to its tenant's mem quota meanwhile,
 * and the charge goes with it. */
START_TEST(failed_events_charged)
{
	static const char src[] = "kernel void k(void) { }\n";
	struct cmx_CreateUserEvent_in ue = {.event = {0x10300}, .context = {0x10100}};
	struct cmx_SetUserEventStatus_in fail = {.event = {0x10300}, .status = -1};
	struct client a;
	uint64_t mem = 0;

	field_becomes("a", "mem", 0);
	hello_at(&a, sock_a);
	kernel_setup(&a, src, "k");
	send_msg(&a, &cmx_desc_CreateUserEvent_in, &ue, 0, NULL, 0);
	for (uint64_t i = 0; i < 4; i++)
		launch(&a, 0x10301 + i, 0x10300, 1);
	send_msg(&a, &cmx_desc_SetUserEventStatus_in, &fail, 0, NULL, 0);
	ck_assert_int_lt(event_status(&a, 0x10304), 0);
	for (uint64_t i = 0; i <= 4; i++) {
		struct cmx_ReleaseEvent_in re = {.event = {0x10300 + i}};
		send_msg(&a, &cmx_desc_ReleaseEvent_in, &re, 0, NULL, 0);
	}
	/* The five resting: the user event and the four launches. */
	for (int i = 0; i < 200 && mem < 5 * REST_BYTES; i++)
		mem = tenant_field("a", "mem");
	ck_assert_uint_ge(mem, 5 * REST_BYTES);
	field_becomes("a", "mem", 0);
	ping(&a);
	close(a.fd);
	field_becomes("a", "objects", 0);
}
END_TEST

START_TEST(forged_ids_across_tenants)
{
	struct client a, b;

	hello_at(&a, sock_a);
	hello_at(&b, sock_b);
	context(&a, 0x10400);
	buffer(&a, 0x10401, 0x10400, 4096);
	ck_assert_int_eq(context_ok(&a, 0x10400), 0);
	/* a's ids mean nothing to b: forged, wrong kind, used to create. */
	ck_assert_int_eq(context_ok(&b, 0x10400), -34 /* CL_INVALID_CONTEXT */);
	ck_assert_int_eq(mem_ok(&b, 0x10401), -38);
	ck_assert_int_eq(context_ok(&b, 1), -34); /* a device id as a context */
	buffer(&b, 0x10402, 0x10400, 4096);
	ck_assert_int_eq(mem_ok(&b, 0x10402), -38);
	/* Stale: released in a, then used. */
	send_msg(&a, &cmx_desc_ReleaseContext_in, &(struct cmx_ReleaseContext_in){{0x10400}}, 0,
		 NULL, 0);
	ck_assert_int_eq(context_ok(&a, 0x10400), -34);
	ck_assert_int_eq(mem_ok(&a, 0x10401), 0);
	ping(&b);
	close(a.fd);
	close(b.fd);
	field_becomes("a", "objects", 0);
	field_becomes("b", "objects", 0);
}
END_TEST

START_TEST(killed_client_returns_memory)
{
	int pipefd[2];
	pid_t pid;
	char x;

	field_becomes("a", "mem", 0);
	ck_assert_int_eq(pipe(pipefd), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		struct client a;
		hello_at(&a, sock_a);
		context(&a, 0x10100);
		buffer(&a, 0x10101, 0x10100, 512 << 10);
		ping(&a);
		child_park(pipefd[1]);
	}
	ck_assert_int_eq(read(pipefd[0], &x, 1), 1);
	ck_assert_uint_eq(tenant_field("a", "mem"), 512 << 10);
	ck_assert_uint_eq(tenant_field("a", "sessions"), 1);
	killed_returns_all(pid, "a");
}
END_TEST

/* In a child that gave up root: the admin socket says no, and a socket
 * with no tenant and no default tenant refuses the unknown uid. */
START_TEST(non_root_refused)
{
	struct client c;
	pid_t pid;
	int status;

	if (getuid() != 0) {
		fprintf(stderr, "non_root_refused: not root, skipped\n");
		return;
	}
	chmod(admin, 0666);
	chmod(sock_any, 0666);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		char *r;
		int fd;
		if (setgid(65534) || setuid(65534))
			_exit(2);
		r = ask(admin, "tenants\n");
		if (strncmp(r, "error: permission denied", 24))
			_exit(3);
		fd = dial_at(sock_any);
		struct client n = {.fd = fd};
		struct cmx_Hello_in in = {.magic = CMX_PROTO_MAGIC, .version = CMX_PROTO_VERSION, .role = CMX_ROLE_CALL};
		send_msg(&n, &cmx_desc_Hello_in, &in, 1, NULL, 0);
		_exit(closed_by_daemon(fd) ? 0 : 4);
	}
	ck_assert_int_eq(waitpid(pid, &status, 0), pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %d", status);
	chmod(admin, 0600);
	/* Root's uid is tenant c's in the config. */
	hello_at(&c, sock_any);
	ck_assert_uint_eq(tenant_field("c", "sessions"), 1);
	close(c.fd);
	field_becomes("c", "sessions", 0);
}
END_TEST

START_TEST(live_quota_change)
{
	struct client a;
	char *r, *text;
	FILE *f;
	long n;

	r = ask(admin, "quota set a mem=2M objects=20\n");
	ck_assert_str_eq(r, "ok\n");
	free(r);
	hello_at(&a, sock_a);
	ck_assert_uint_eq(device_u64(&a, 0x101F), 2 << 20);
	context(&a, 0x10100);
	buffer(&a, 0x10101, 0x10100, 1536 << 10);
	ck_assert_int_eq(mem_ok(&a, 0x10101), 0);
	r = ask(admin, "quota get a\n");
	ck_assert_msg(strstr(r, "mem       2M\n") && strstr(r, "objects   20\n"), "%s", r);
	free(r);
	/* Written back, the rest of the file kept. */
	f = fopen(conf, "r");
	text = calloc(1, 8192);
	n = (long)fread(text, 1, 8191, f);
	fclose(f);
	ck_assert_int_gt(n, 0);
	ck_assert_msg(strstr(text, "# test tenants\n") && strstr(text, "[tenant a]\nmem = 2M\n") &&
			  strstr(text, "uid = "),
		      "%s", text);
	free(text);
	/* Bad requests change nothing. */
	r = ask(admin, "quota set a mem=lots inflight=1\n");
	ck_assert_msg(!strncmp(r, "error: bad value 'lots' for mem", 31), "%s", r);
	free(r);
	r = ask(admin, "quota get nosuch\n");
	ck_assert_msg(!strncmp(r, "error: no tenant", 16), "%s", r);
	free(r);
	ck_assert_uint_eq(tenant_field("a", "inflight_quota"), 4);
	r = ask(admin, "quota set a mem=1M objects=12\n");
	ck_assert_str_eq(r, "ok\n");
	free(r);
	close(a.fd);
	field_becomes("a", "mem", 0);
}
END_TEST

static char *file_read(const char *path)
{
	FILE *f = fopen(path, "r");
	char *text = calloc(1, 16384);

	ck_assert_ptr_nonnull(f);
	ck_assert_int_gt((long)fread(text, 1, 16383, f), 0);
	fclose(f);
	return text;
}

static void file_write(const char *path, const char *a, const char *b)
{
	FILE *f = fopen(path, "w");

	ck_assert_ptr_nonnull(f);
	fprintf(f, "%s%s", a, b);
	fclose(f);
}

/* Until `quota get name` holds want (the front end reads its SIGHUP on its
 * loop): 1, or 0 after the wait. */
static int quota_becomes(const char *name, const char *want)
{
	char req[96];

	snprintf(req, sizeof(req), "quota get %s\n", name);
	for (int i = 0; i < 3000; i++) {
		char *r = ask(admin, req);
		int ok = strstr(r, want) != NULL;
		free(r);
		if (ok)
			return 1;
		usleep(20000);
	}
	return 0;
}

/* SIGHUP reads the file again: quotas, a new tenant, new peers; a file with
 * an error changes nothing. */
START_TEST(reload_config)
{
	char *orig = file_read(conf), *r;
	struct client e;

	/* a's mem from 1M to 2M (the later line wins), and a new tenant e on
	 * the listener for any peer: our uid, taken from c. */
	file_write(conf,
		   "[tenant a]\nmem = 1M\nobjects = 12\ninflight = 4\nmem = 2M\n\n"
		   "[tenant b]\nweight = 3\nrate = 1M/s\ngroup = bd\n\n[tenant c]\ncap = 20%\n\n"
		   "[tenant d]\ngroup = bd\n\n[tenant e]\nmem = 3M\n",
		   "");
	{
		char line[64];
		FILE *f = fopen(conf, "a");
		snprintf(line, sizeof(line), "uid = %u\n", (unsigned)getuid());
		fputs(line, f);
		fclose(f);
	}
	kill(daemon_pid, SIGHUP);
	ck_assert_msg(quota_becomes("e", "mem       3M\n"), "tenant e never came");
	ck_assert(quota_becomes("a", "mem       2M\n"));
	/* Our uid is e's now: a connection on the any-peer socket is e's,
	 * with e's memory. */
	hello_at(&e, sock_any);
	ck_assert_uint_eq(device_u64(&e, 0x101F), 3 << 20);
	close(e.fd);

	/* An error: --check-config says where, and a reload applies nothing
	 * of the file, not even the good lines before it. */
	file_write(conf, "[tenant a]\nmem = 5M\n[tenant e]\nmem = -1\n", "");
	{
		char cmd[512];
		snprintf(cmd, sizeof(cmd), "%s --check-config --config %s 2>&1 | grep -q 'line 4'",
			 getenv("CLMUXD"), conf);
		ck_assert_int_eq(system(cmd), 0);
		snprintf(cmd, sizeof(cmd), "%s --check-config --config %s >/dev/null 2>&1",
			 getenv("CLMUXD"), conf);
		ck_assert_int_ne(system(cmd), 0);
	}
	kill(daemon_pid, SIGHUP);
	r = ask(admin, "stats\n"); /* a round on the loop, which read the signal */
	free(r);
	usleep(200000);
	r = ask(admin, "quota get a\n");
	ck_assert_msg(strstr(r, "mem       2M\n"), "%s", r);
	free(r);

	/* Back: a's 1M again; c has our uid again, before e (config order). */
	file_write(conf, orig, "");
	{
		char cmd[512];
		snprintf(cmd, sizeof(cmd), "%s --check-config --config %s | grep -q ': ok, 4 tenants'",
			 getenv("CLMUXD"), conf);
		ck_assert_int_eq(system(cmd), 0);
	}
	kill(daemon_pid, SIGHUP);
	ck_assert(quota_becomes("a", "mem       1M\n"));
	free(orig);
	field_becomes("e", "sessions", 0);
}
END_TEST

START_TEST(evict)
{
	struct client b1, b2, a;
	char *r;

	hello_at(&b1, sock_b);
	hello_at(&b2, sock_b);
	hello_at(&a, sock_a);
	r = ask(admin, "evict b\n");
	ck_assert_msg(!strcmp(r, "ok\n2 sessions of b closed\n"), "%s", r);
	free(r);
	ck_assert(closed_by_daemon(b1.fd));
	ck_assert(closed_by_daemon(b2.fd));
	ping(&a);
	close(a.fd);
	close(b1.fd);
	close(b2.fd);
}
END_TEST

/* b may send 1 MiB/s: a 3 MiB write is paused on the way in. */
START_TEST(rate_quota)
{
	struct client b;
	static uint8_t data[3 << 20];
	struct cmx_WriteBuffer_in wr = {.queue = {0x10101}, .mem = {0x10200}, .size = sizeof(data)};
	uint64_t qprops[1] = {0};
	struct cmx_CreateQueue_in qu = {
	    .queue = {0x10101}, .context = {0x10100}, .device = {1}, .props = {qprops, 1}};
	uint64_t before = metric("throttled_total", "b");

	hello_at(&b, sock_b);
	context(&b, 0x10100);
	send_msg(&b, &cmx_desc_CreateQueue_in, &qu, 0, NULL, 0);
	buffer(&b, 0x10200, 0x10100, sizeof(data));
	send_msg(&b, &cmx_desc_WriteBuffer_in, &wr, 0, data, sizeof(data));
	ping(&b);
	ck_assert_uint_gt(metric("throttled_total", "b"), before);
	ck_assert_uint_ge(metric("received_bytes_total", "b"), sizeof(data));
	close(b.fd);
}
END_TEST

/* c may use 20% of the device: once its burst allowance is spent, its
 * kernels are held back. Batches run until that is seen (or far past it:
 * the allowance is 40 ms of device time). */
START_TEST(cap_quota)
{
	static const char src[] = "kernel void spin(global int *p) {\n"
				  "  int x = (int)get_global_id(0);\n"
				  "  for (int i = 0; i < 1000000; i++) x = x * 3 + (x >> 7) + i;\n"
				  "  p[get_global_id(0)] = x; }\n";
	struct cmx_SetKernelArg_in arg = {
	    .kernel = {0x10103}, .index = 0, .kind = 1, .mem = {0x10104}};
	uint64_t ev[16], n = 0, before = metric("commands_completed_total", "c");
	struct client c;

	hello_at(&c, sock_any);
	kernel_setup(&c, src, "spin");
	buffer(&c, 0x10104, 0x10100, 64 * 4);
	send_msg(&c, &cmx_desc_SetKernelArg_in, &arg, 0, NULL, 0);
	for (unsigned batch = 0; batch < 200 && !metric("capped_total", "c"); batch++) {
		for (unsigned i = 0; i < 16; i++) {
			ev[i] = 0x10200 + n++;
			launch(&c, ev[i], 0, 64);
		}
		wait_events(&c, ev, 16);
	}
	ck_assert_uint_gt(metric("capped_total", "c"), 0);
	/* Every launch is counted once its completion has reached the
	 * scheduler, which may be a callback after the guest saw it. */
	for (int i = 0; i < 500 && metric("commands_completed_total", "c") - before < n; i++)
		usleep(20000);
	ck_assert_uint_eq(metric("commands_completed_total", "c") - before, n);
	close(c.fd);
}
END_TEST

/* A lone tenant's launches without events share the scheduler's tickets
 * (one per queue and loop turn, host/scheduler.c): each one is still
 * counted as launched and as completed, and nothing stays in flight. */
START_TEST(lone_launches_counted)
{
	static const char src[] = "kernel void k(void) { }\n";
	uint64_t n = 3000, last = 0x10400;
	uint64_t l0 = metric("commands_launched_total", "d");
	uint64_t c0 = metric("commands_completed_total", "d");
	struct client d;

	field_becomes("d", "inflight", 0);
	hello_at(&d, sock_d);
	kernel_setup(&d, src, "k");
	for (uint64_t i = 0; i < n; i++)
		launch(&d, i + 1 == n ? last : 0, 0, 1);
	wait_events(&d, &last, 1);
	field_becomes("d", "inflight", 0);
	ck_assert_uint_eq(metric("commands_launched_total", "d") - l0, n);
	ck_assert_uint_eq(metric("commands_completed_total", "d") - c0, n);
	close(d.fd);
	field_becomes("d", "objects", 0);
}
END_TEST

START_TEST(metrics_and_tables)
{
	char *m = ask(metrics, "GET /metrics HTTP/1.0\r\n\r\n"), *t;

	ck_assert_msg(!strncmp(m, "HTTP/1.0 200 OK\r\n", 17), "%s", m);
	ck_assert_ptr_nonnull(strstr(m, "# TYPE clmux_tenant_memory_bytes gauge\n"));
	ck_assert_ptr_nonnull(strstr(m, "clmux_tenant_memory_quota_bytes{tenant=\"a\"} 1048576\n"));
	ck_assert_ptr_nonnull(strstr(m, "clmux_tenant_weight{tenant=\"b\"} 3\n"));
	free(m);
	t = ask(admin, "tenants\n");
	ck_assert_msg(!strncmp(t, "ok\nTENANT ", 10) && strstr(t, "\na "), "%s", t);
	free(t);
	t = ask(admin, "json stats\n");
	ck_assert_msg(!strncmp(t, "ok\n{\"uptime_s\":", 15), "%s", t);
	free(t);
	t = ask(admin, "frobnicate\n");
	ck_assert_msg(!strncmp(t, "error: unknown request", 22), "%s", t);
	free(t);
}
END_TEST

/* A worker process per tenant, and one for the group b and d: each named
 * with its tenants, and ended by evict with a successor for its listener. */
START_TEST(workers_listed)
{
	struct client a;
	char *t = ask(admin, "workers\n"), *line;
	int pid0;

	ck_assert_msg(!strncmp(t, "ok\nWORKER ", 10), "%s", t);
	ck_assert_msg(strstr(t, "  b d\n") || strstr(t, "  d b\n"), "no group bd in %s", t);
	line = strstr(t, "\nt:a ");
	ck_assert_msg(line && strstr(line, "running") && strstr(line, "  a\n"), "%s", t);
	pid0 = atoi(line + 5);
	free(t);
	ck_assert_int_gt(pid0, 0);
	t = ask(admin, "evict a\n");
	free(t);
	/* The listener's worker is started again: a's next session works. */
	hello_at(&a, sock_a);
	ping(&a);
	close(a.fd);
	t = ask(admin, "json workers\n");
	line = strstr(t, "{\"worker\":\"t:a\",\"pid\":");
	ck_assert_msg(line, "%s", t);
	ck_assert_int_ne(atoi(line + strlen("{\"worker\":\"t:a\",\"pid\":")), pid0);
	free(t);
}
END_TEST

/* Runs clmuxctl (beside the daemon's build) with args; its output (stdout
 * and stderr) into out, its exit status returned. */
static int clmuxctl(const char *args, char *out, size_t len)
{
	const char *d = getenv("CLMUXD");
	char cmd[1024];
	size_t n;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "%.*s/../tools/clmuxctl %s 2>&1", (int)(strrchr(d, '/') - d), d,
		 args);
	p = popen(cmd, "r");
	ck_assert_ptr_nonnull(p);
	n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	return WEXITSTATUS(pclose(p));
}

/* The command-line tool: tables, JSON, and one line and status 1 on error. */
START_TEST(clmuxctl_cli)
{
	char args[512], out[4096];

	snprintf(args, sizeof(args), "--admin %s --json tenants", admin);
	ck_assert_int_eq(clmuxctl(args, out, sizeof(out)), 0);
	ck_assert_msg(out[0] == '[' && strstr(out, "{\"name\":\"a\""), "%s", out);
	snprintf(args, sizeof(args), "--admin %s quota get nosuch", admin);
	ck_assert_int_eq(clmuxctl(args, out, sizeof(out)), 1);
	ck_assert_str_eq(out, "clmuxctl: no tenant 'nosuch'\n");
	snprintf(args, sizeof(args), "--admin %s.none stats", admin);
	ck_assert_int_eq(clmuxctl(args, out, sizeof(out)), 1);
	ck_assert_msg(!strncmp(out, "clmuxctl: cannot reach clmuxd", 29), "%s", out);
	snprintf(args, sizeof(args), "--admin %s quota", admin);
	ck_assert_int_eq(clmuxctl(args, out, sizeof(out)), 1);
	ck_assert_int_eq(clmuxctl("", out, sizeof(out)), 2);
	/* top, once, to a pipe: the tenants table under a heading line, no
	 * terminal control sequences. */
	snprintf(args, sizeof(args), "--admin %s top -n 1", admin);
	ck_assert_int_eq(clmuxctl(args, out, sizeof(out)), 0);
	ck_assert_msg(!strncmp(out, "clmuxd at ", 10) && strstr(out, "\nTENANT ") &&
			  strstr(out, "\na ") && !strchr(out, '\033'),
		      "%s", out);
	snprintf(args, sizeof(args), "--admin %s top -n 0", admin);
	ck_assert_int_eq(clmuxctl(args, out, sizeof(out)), 1);
}
END_TEST

/* Evicted with launches held behind a user event: they are failed, not
 * run, and the tenant's usage returns to nothing. */
START_TEST(evict_held)
{
	static const char src[] = "kernel void k(void) { }\n";
	struct cmx_CreateUserEvent_in ue = {.event = {0x10300}, .context = {0x10100}};
	struct client a;
	char *r;

	field_becomes("a", "objects", 0);
	hello_at(&a, sock_a);
	kernel_setup(&a, src, "k");
	send_msg(&a, &cmx_desc_CreateUserEvent_in, &ue, 0, NULL, 0);
	for (uint64_t i = 0; i < 3; i++)
		launch(&a, 0x10301 + i, 0x10300, 1);
	ping(&a);
	ck_assert_uint_eq(tenant_field("a", "inflight"), 3);
	r = ask(admin, "evict a\n");
	ck_assert_msg(!strcmp(r, "ok\n1 session of a closed\n"), "%s", r);
	free(r);
	ck_assert(closed_by_daemon(a.fd));
	close(a.fd);
	field_becomes("a", "inflight", 0);
	field_becomes("a", "objects", 0);
	field_becomes("a", "sessions", 0);
}
END_TEST

/* ---- held commands (host/scheduler.c) ---- */

/* Tenant b's flood: kernels of some 10 ms each on PoCL, enough that the
 * scheduler holds another tenant's launches while they run. */
static const char spin_src[] = "kernel void spin(global int *p) {\n"
			       "  int x = (int)get_global_id(0);\n"
			       "  for (int i = 0; i < 200000; i++) x = x * 3 + (x >> 7) + i;\n"
			       "  p[get_global_id(0)] = x; }\n";
/* Tenant d's launches: each writes its own value into its own slot. */
static const char put_src[] = "kernel void put(global int *p, int slot, int v) { p[slot] = v; }\n";

static void arg_mem(struct client *c, uint64_t index, uint64_t mem)
{
	struct cmx_SetKernelArg_in in = {
	    .kernel = {0x10103}, .index = index, .kind = 1, .mem = {mem}};

	send_msg(c, &cmx_desc_SetKernelArg_in, &in, 0, NULL, 0);
}

static void arg_int(struct client *c, uint64_t index, int32_t v)
{
	struct cmx_SetKernelArg_in in = {
	    .kernel = {0x10103}, .index = index, .size = 4, .value = {&v, 4}};

	send_msg(c, &cmx_desc_SetKernelArg_in, &in, 0, NULL, 0);
}

static void queue(struct client *c, uint64_t id)
{
	uint64_t qprops[1] = {0};
	struct cmx_CreateQueue_in in = {
	    .queue = {id}, .context = {0x10100}, .device = {1}, .props = {qprops, 1}};

	send_msg(c, &cmx_desc_CreateQueue_in, &in, 0, NULL, 0);
}

/* b: six spins on the device, straight (b is alone with work then). */
static void flood(struct client *b, uint64_t first)
{
	for (uint64_t i = 0; i < 6; i++)
		launch(b, first + i, 0, 64);
	ping(b);
}

static void flood_setup(struct client *b)
{
	hello_at(b, sock_b);
	kernel_setup(b, spin_src, "spin");
	buffer(b, 0x10104, 0x10100, 64 * 4);
	arg_mem(b, 0, 0x10104);
}

/* d: the put kernel on buffer 0x10104 of 16 ints, queues 0x10110, 0x10111. */
static void put_setup(struct client *d)
{
	hello_at(d, sock_d);
	kernel_setup(d, put_src, "put");
	buffer(d, 0x10104, 0x10100, 16 * 4);
	arg_mem(d, 0, 0x10104);
	queue(d, 0x10110);
	queue(d, 0x10111);
	ping(d);
}

/* A blocking read of n ints of buffer 0x10104 on queue. */
static void read_ints(struct client *c, uint64_t queue, int32_t *out, uint64_t n)
{
	struct cmx_ReadBuffer_in in = {
	    .queue = {queue}, .mem = {0x10104}, .size = n * 4};
	struct cmx_hdr h;
	int64_t args[4];

	send_msg(c, &cmx_desc_ReadBuffer_in, &in, 1, NULL, 0);
	ck_assert_int_eq(recv(c->fd, &h, CMX_HDR_SIZE, MSG_WAITALL), CMX_HDR_SIZE);
	ck_assert_uint_le(h.size, sizeof(args));
	ck_assert_int_eq(recv(c->fd, args, h.size, MSG_WAITALL), (ssize_t)h.size);
	ck_assert_int_eq(args[0], 0);
	ck_assert_uint_eq(h.bulk, n * 4);
	ck_assert_int_eq(recv(c->fd, out, n * 4, MSG_WAITALL), (ssize_t)(n * 4));
}

/* Tenant d's launches are held in the daemon while b's flood runs. Its
 * kernel's arguments change between them: each launch must still write
 * its own slot with its own value (the held ones keep theirs). A launch on
 * a second queue waits for a held one, a marker on a third for another;
 * clFinish waits for the first queue's last; a blocking read on the second
 * queue, which cannot be held, has what is still held there go first. */
START_TEST(held_commands)
{
	uint64_t b_ev[6], waits[2] = {0x10208, 0x10209};
	struct cmx_EnqueueMarker_in mk = {
	    .queue = {0x10111}, .wait = {(uint64_t[]){0x10203}, 1}, .event = {0x10209}};
	struct cmx_Finish_in fin = {.queue = {0x10101}};
	struct client b, d;
	int32_t got[9];

	flood_setup(&b);
	put_setup(&d);
	flood(&b, 0x10200);
	for (int32_t i = 0; i < 8; i++) {
		arg_int(&d, 1, i);
		arg_int(&d, 2, 100 + i);
		launch_on(&d, 0x10101, 0x10200 + (uint64_t)i, 0, 1);
	}
	arg_int(&d, 1, 8);
	arg_int(&d, 2, 108);
	launch_on(&d, 0x10110, 0x10208, 0x10207, 1);
	send_msg(&d, &cmx_desc_EnqueueMarker_in, &mk, 0, NULL, 0);
	send_msg(&d, &cmx_desc_Finish_in, &fin, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&d, &cmx_desc_Finish_out, &(struct cmx_Finish_out){0}, NULL), 0);
	read_ints(&d, 0x10110, got, 9);
	wait_events(&d, waits, 2);
	ck_assert_int_eq(event_status(&d, 0x10209), 0 /* CL_COMPLETE */);
	for (int i = 0; i < 9; i++)
		ck_assert_msg(got[i] == 100 + i, "slot %d: %d, want %d", i, got[i], 100 + i);
	for (unsigned i = 0; i < 6; i++)
		b_ev[i] = 0x10200 + i;
	wait_events(&b, b_ev, 6);
	close(b.fd);
	close(d.fd);
	field_becomes("d", "inflight", 0);
	field_becomes("d", "objects", 0);
	field_becomes("b", "objects", 0);
}
END_TEST

/* Killed with launches held in the daemon (behind a user event it never
 * sets, as d would be given the next turn within half a window): they are
 * dropped and the tenant's charges (commands in flight, objects, memory)
 * return to zero. */
START_TEST(killed_with_held)
{
	int to_child[2], to_parent[2];
	struct client b;
	pid_t pid;
	char x;

	ck_assert_int_eq(pipe(to_child), 0);
	ck_assert_int_eq(pipe(to_parent), 0);
	flood_setup(&b);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (!pid) {
		struct cmx_CreateUserEvent_in ue = {.event = {0x10300}, .context = {0x10100}};
		struct client d;
		put_setup(&d);
		send_msg(&d, &cmx_desc_CreateUserEvent_in, &ue, 0, NULL, 0);
		if (write(to_parent[1], "r", 1) != 1 || read(to_child[0], &x, 1) != 1)
			_exit(1);
		for (int32_t i = 0; i < 8; i++) {
			arg_int(&d, 2, i);
			launch_on(&d, 0x10101, 0x10200 + (uint64_t)i, 0x10300, 1);
		}
		ping(&d);
		child_park(to_parent[1]);
	}
	ck_assert_int_eq(read(to_parent[0], &x, 1), 1);
	flood(&b, 0x10200);
	ck_assert_int_eq(write(to_child[1], "g", 1), 1);
	ck_assert_int_eq(read(to_parent[0], &x, 1), 1);
	ck_assert_uint_gt(tenant_field("d", "inflight"), 0);
	killed_returns_all(pid, "d");
	wait_events(&b, (uint64_t[]){0x10200, 0x10201, 0x10202, 0x10203, 0x10204, 0x10205}, 6);
	close(b.fd);
	field_becomes("b", "inflight", 0);
	for (int i = 0; i < 2; i++) {
		close(to_child[i]);
		close(to_parent[i]);
	}
}
END_TEST

/* Bad admin requests end that request only. */
START_TEST(admin_garbage)
{
	static char big[6000];
	char *r;
	struct client a;

	r = ask_n(admin, "\0\0\n", 3);
	ck_assert_str_eq(r, "error: empty request\n");
	free(r);
	r = ask(admin, "\x01\xff quota\n");
	ck_assert_msg(!strncmp(r, "error: ", 7), "%s", r);
	free(r);
	r = ask(admin, "quota set a mem\n");
	ck_assert_msg(!strncmp(r, "error: expected key=value", 25), "%s", r);
	free(r);
	memset(big, 'x', sizeof(big) - 1);
	r = ask(admin, big); /* no newline within the limit: closed */
	ck_assert_str_eq(r, "");
	free(r);
	hello_at(&a, sock_a);
	ping(&a);
	close(a.fd);
}
END_TEST

/* Runs cmd through the shell: its exit status (-1 when it did not exit),
 * and its output (stdout and stderr) in out. */
static int run_out(const char *cmd, char *out, size_t len)
{
	char full[1024];
	size_t n;
	FILE *p;
	int st;

	snprintf(full, sizeof(full), "%s 2>&1", cmd);
	out[0] = '\0';
	p = popen(full, "r");
	if (!p)
		return -1;
	n = fread(out, 1, len - 1, p);
	out[n] = '\0';
	st = pclose(p);
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Numbers on the command line and in CLMUX_LOG are checked once, at
 * start: a bad one is named and the daemon does not start. */
START_TEST(options_checked)
{
	static const char *bad[] = { "--threads 8x", "--threads -1", "--sched-window 2ms",
				     "--profile 2", "--listen-fd 99999999999:unix:/nonexistent/s" };
	const char *bin = getenv("CLMUXD");
	char cmd[512], out[4096];

	/* --check-config ends the daemon once its options are read. */
	for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(cmd, sizeof(cmd),
			 "%s --check-config --config %s --listen unix:%s/o.sock %s", bin, conf, dir,
			 bad[i]);
		ck_assert_int_eq(run_out(cmd, out, sizeof(out)), 2);
		ck_assert_msg(strstr(out, bad[i]), "%s: %s", bad[i], out);
	}
	snprintf(cmd, sizeof(cmd),
		 "%s --check-config --config %s --listen unix:%s/o.sock "
		 "--threads 0 --sched-window 0 --profile 1 --listen-fd 3:unix:%s/p.sock",
		 bin, conf, dir, dir);
	ck_assert_int_eq(run_out(cmd, out, sizeof(out)), 0);
	ck_assert_msg(strstr(out, ": ok, 4 tenants"), "%s", out);
	/* A port with junk after it was read up to the junk (the guard's
	 * timeout only ends a daemon that took it). */
	snprintf(cmd, sizeof(cmd),
		 "timeout 60 %s --workers off --admin none --listen unix:%s/o.sock --metrics "
		 "tcp:127.0.0.1:9100x",
		 bin, dir);
	ck_assert_int_eq(run_out(cmd, out, sizeof(out)), 1);
	ck_assert_msg(strstr(out, "expected tcp:HOST:PORT[,public]"), "%s", out);
	/* An unknown level is named, and the default kept. */
	snprintf(cmd, sizeof(cmd), "CLMUX_LOG=loud %s --check-config --config %s", bin, conf);
	ck_assert_int_eq(run_out(cmd, out, sizeof(out)), 0);
	ck_assert_msg(
	    strstr(out, "CLMUX_LOG=loud: expected err, warn, info or debug; info is used"), "%s",
	    out);
	snprintf(cmd, sizeof(cmd), "CLMUX_LOG=warning %s --check-config --config %s", bin, conf);
	ck_assert_int_eq(run_out(cmd, out, sizeof(out)), 0);
	ck_assert_msg(!strstr(out, "CLMUX_LOG"), "%s", out);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tenant");
	TCase *tc = tcase_create("tenant");
	SRunner *sr;
	int failed;

	if (!getenv("CLMUXD"))
		return 77;
	tcase_add_test(tc, options_checked);
	tcase_add_test(tc, memory_quota);
	tcase_add_test(tc, object_quota);
	tcase_add_test(tc, inflight_quota);
	tcase_add_test(tc, failed_events_charged);
	tcase_add_test(tc, lone_launches_counted);
	tcase_add_test(tc, forged_ids_across_tenants);
	tcase_add_test(tc, killed_client_returns_memory);
	tcase_add_test(tc, non_root_refused);
	tcase_add_test(tc, live_quota_change);
	tcase_add_test(tc, reload_config);
	tcase_add_test(tc, evict);
	tcase_add_test(tc, evict_held);
	tcase_add_test(tc, held_commands);
	tcase_add_test(tc, killed_with_held);
	tcase_add_test(tc, rate_quota);
	tcase_add_test(tc, cap_quota);
	tcase_add_test(tc, metrics_and_tables);
	tcase_add_test(tc, clmuxctl_cli);
	tcase_add_test(tc, admin_garbage);
	tcase_add_test(tc, workers_listed);
	tcase_set_timeout(tc, 120);
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
