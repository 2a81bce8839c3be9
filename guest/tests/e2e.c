// SPDX-License-Identifier: MIT
// e2e.c - harness for the end-to-end tests: platforms, fixtures, daemon, data.
#define _GNU_SOURCE /* strcasestr */

#include "e2e.h"

#include <CL/cl_ext.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define E2E_DAEMON_WAIT_MS 10000
#define E2E_POLL_MS 20

struct e2e_plat e2e_native;
struct e2e_plat e2e_virtual;

const char *e2e_native_match(void)
{
	const char *s = getenv("CMX_E2E_NATIVE");

	return s && *s ? s : "Portable Computing Language";
}

const char *e2e_virtual_match(void)
{
	const char *s = getenv("CMX_E2E_VIRTUAL");

	return s && *s ? s : "clmux";
}

int e2e_platform_find(const char *match, cl_platform_id *out)
{
	cl_platform_id *ids = NULL;
	cl_uint n = 0;
	cl_int err;
	int ret = -ENOENT;

	err = clGetPlatformIDs(0, NULL, &n);
	if (err == CL_PLATFORM_NOT_FOUND_KHR || (err == CL_SUCCESS && n == 0))
		return -ENOENT;
	if (err != CL_SUCCESS)
		return -EIO;
	ids = calloc(n, sizeof(*ids));
	if (!ids)
		return -ENOMEM;
	err = clGetPlatformIDs(n, ids, NULL);
	if (err != CL_SUCCESS) {
		ret = -EIO;
		goto out;
	}
	for (cl_uint i = 0; i < n; i++) {
		char name[256] = "";

		err = clGetPlatformInfo(ids[i], CL_PLATFORM_NAME, sizeof(name) - 1,
					name, NULL);
		if (err != CL_SUCCESS)
			continue;
		if (strcasestr(name, match)) {
			*out = ids[i];
			ret = 0;
			break;
		}
	}
out:
	free(ids);
	return ret;
}

/* Prints every platform's name, to explain a failed lookup. */
static void e2e_platforms_list(FILE *f)
{
	cl_platform_id ids[16];
	cl_uint n = 0;

	if (clGetPlatformIDs(16, ids, &n) != CL_SUCCESS)
		n = 0;
	if (n > 16)
		n = 16;
	fprintf(f, "e2e: %u OpenCL platform(s) found:\n", n);
	for (cl_uint i = 0; i < n; i++) {
		char name[256] = "?";

		clGetPlatformInfo(ids[i], CL_PLATFORM_NAME, sizeof(name) - 1, name,
				  NULL);
		fprintf(f, "e2e:   \"%s\"\n", name);
	}
}

int e2e_plat_init(struct e2e_plat *p, const char *role, const char *match)
{
	cl_queue_properties prof[] = {CL_QUEUE_PROPERTIES,
				      CL_QUEUE_PROFILING_ENABLE, 0};
	cl_context_properties cprops[3];
	char version[128] = "";
	cl_int err;
	int ret;

	memset(p, 0, sizeof(*p));
	p->role = role;
	ret = e2e_platform_find(match, &p->platform);
	if (ret < 0) {
		fprintf(stderr, "e2e: %s: no platform matching \"%s\": %s\n",
			role, match, strerror(-ret));
		return ret;
	}
	err = clGetPlatformInfo(p->platform, CL_PLATFORM_NAME,
				sizeof(p->name) - 1, p->name, NULL);
	if (err != CL_SUCCESS)
		goto fail;
	err = clGetDeviceIDs(p->platform, CL_DEVICE_TYPE_ALL, 1, &p->device,
			     NULL);
	if (err != CL_SUCCESS)
		goto fail;
	cprops[0] = CL_CONTEXT_PLATFORM;
	cprops[1] = (cl_context_properties)p->platform;
	cprops[2] = 0;
	p->context = clCreateContext(cprops, 1, &p->device, NULL, NULL, &err);
	if (!p->context)
		goto fail;
	/* A 1.x platform (oclgrind) has no clCreateCommandQueueWithProperties:
	 * the loader must not be asked for it. */
	err = clGetPlatformInfo(p->platform, CL_PLATFORM_VERSION,
				sizeof(version) - 1, version, NULL);
	if (err != CL_SUCCESS)
		goto fail;
	if (!strncmp(version, "OpenCL 1.", 9)) {
		p->queue = clCreateCommandQueue(p->context, p->device, 0, &err);
		if (p->queue)
			p->queue_prof = clCreateCommandQueue(p->context, p->device,
							     CL_QUEUE_PROFILING_ENABLE,
							     &err);
	} else {
		p->queue = clCreateCommandQueueWithProperties(p->context, p->device,
							      NULL, &err);
		if (p->queue)
			p->queue_prof = clCreateCommandQueueWithProperties(
				p->context, p->device, prof, &err);
	}
	if (!p->queue || !p->queue_prof)
		goto fail;
	return 0;
fail:
	fprintf(stderr, "e2e: %s (\"%s\"): setup failed: %s (%d)\n", role,
		p->name, e2e_cl_strerror(err), err);
	e2e_plat_fini(p);
	return -EIO;
}

void e2e_plat_fini(struct e2e_plat *p)
{
	const char *role = p->role;

	if (p->queue_prof)
		clReleaseCommandQueue(p->queue_prof);
	if (p->queue)
		clReleaseCommandQueue(p->queue);
	if (p->context)
		clReleaseContext(p->context);
	memset(p, 0, sizeof(*p));
	p->role = role;
}

void e2e_setup(void)
{
	int ret;

	ret = e2e_plat_init(&e2e_native, "native", e2e_native_match());
	ck_assert_msg(ret == 0, "native platform \"%s\": %s", e2e_native_match(),
		      strerror(-ret));
	ret = e2e_plat_init(&e2e_virtual, "virtual", e2e_virtual_match());
	ck_assert_msg(ret == 0, "virtual platform \"%s\": %s",
		      e2e_virtual_match(), strerror(-ret));
}

void e2e_teardown(void)
{
	e2e_plat_fini(&e2e_virtual);
	e2e_plat_fini(&e2e_native);
}

int e2e_same_platform(void)
{
	return e2e_native.platform == e2e_virtual.platform;
}

void e2e_check_err(const char *what, cl_int virt, cl_int nat, cl_int want)
{
	if (nat != want)
		fprintf(stderr, "e2e: note: native %s: %s (%d), the spec says %s\n",
			what, e2e_cl_strerror(nat), nat, e2e_cl_strerror(want));
	if (nat != want && e2e_same_platform()) {
		ck_assert_msg(virt == nat, "%s: virtual %s, native %s", what,
			      e2e_cl_strerror(virt), e2e_cl_strerror(nat));
		return;
	}
	ck_assert_msg(virt == want, "%s: virtual %s (%d), want %s (%d); native %s",
		      what, e2e_cl_strerror(virt), virt, e2e_cl_strerror(want),
		      want, e2e_cl_strerror(nat));
}

void e2e_tcase_add_test(TCase *tc, const TTest *t)
{
	const char *only = getenv("CMX_E2E_TEST");
	size_t n = strlen(t->name);

	if (only && *only) {
		const char *p = only;

		while ((p = strstr(p, t->name)) &&
		       !((p == only || p[-1] == ',') && (p[n] == ',' || !p[n])))
			p += n;
		if (!p)
			return;
	}
	_tcase_add_test(tc, t, 0, 0, 0, 1);
}

TCase *e2e_tcase(const char *name)
{
	TCase *tc = tcase_create(name);

	tcase_add_checked_fixture(tc, e2e_setup, e2e_teardown);
	tcase_set_timeout(tc, E2E_TIMEOUT_S);
	return tc;
}

/*
 * Looks both platforms up in a child, so that this process stays free of
 * OpenCL state for the children Check forks.  The child's exit status:
 * 0 found, 2 virtual missing, 3 native missing, 4 lookup error.
 */
static int e2e_probe(void)
{
	const char *require = getenv("CMX_E2E_REQUIRE");
	int missing_rc = require && strcmp(require, "1") == 0 ? 1 : E2E_EXIT_SKIP;
	cl_platform_id id;
	int status, ret;
	pid_t pid;

	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		perror("e2e: fork");
		return 1;
	}
	if (pid == 0) {
		int code = 0;

		ret = e2e_platform_find(e2e_virtual_match(), &id);
		if (ret == -ENOENT)
			code = 2;
		else if (ret == 0 &&
			 (ret = e2e_platform_find(e2e_native_match(), &id)) == -ENOENT)
			code = 3;
		else if (ret < 0)
			code = 4;
		if (code)
			e2e_platforms_list(stderr);
		fflush(NULL);
		_exit(code);
	}
	while (waitpid(pid, &status, 0) < 0) {
		if (errno != EINTR) {
			perror("e2e: waitpid");
			return 1;
		}
	}
	if (!WIFEXITED(status)) {
		fprintf(stderr, "e2e: platform probe died (status 0x%x)\n",
			status);
		return 1;
	}
	switch (WEXITSTATUS(status)) {
	case 0:
		return 0;
	case 2:
		fprintf(stderr,
			"e2e: virtual platform not found: no CL_PLATFORM_NAME "
			"contains \"%s\" (CMX_E2E_VIRTUAL)%s\n",
			e2e_virtual_match(),
			missing_rc == 1 ? "; CMX_E2E_REQUIRE=1: failing"
					: "; skipping");
		return missing_rc;
	case 3:
		fprintf(stderr,
			"e2e: native platform not found: no CL_PLATFORM_NAME "
			"contains \"%s\" (CMX_E2E_NATIVE)%s\n",
			e2e_native_match(),
			missing_rc == 1 ? "; CMX_E2E_REQUIRE=1: failing"
					: "; skipping");
		return missing_rc;
	default:
		fprintf(stderr, "e2e: platform lookup failed\n");
		return 1;
	}
}

int e2e_main(Suite *s)
{
	SRunner *sr = srunner_create(s);
	int rc;

	if (e2e_daemon_start() < 0) {
		srunner_free(sr);
		return 1;
	}
	rc = e2e_probe();
	if (rc == 0) {
		srunner_run_all(sr, CK_ENV);
		rc = srunner_ntests_failed(sr) ? 1 : 0;
	}
	/* A daemon that does not exit cleanly fails the run, skip or not. */
	if (e2e_daemon_stop() < 0)
		rc = 1;
	srunner_free(sr);
	return rc;
}

int e2e_daemon_run(Suite *s)
{
	SRunner *sr;
	int failed;

	if (e2e_daemon_start())
		return 1;
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	if (e2e_daemon_stop())
		failed++;
	return failed ? 1 : 0;
}

/* ---- daemon ---- */

static pid_t e2e_daemon_pid;
static char e2e_daemon_dir[PATH_MAX];
static char e2e_daemon_sock[sizeof(((struct sockaddr_un *)0)->sun_path)];

/* CMX_E2E_TRANSPORT (tcp, tcp6, tls, tcp-lz4, tls-lz4, vsock-uds): a second
 * listener that the guest is pointed at; the Unix one stays for the start-up probe. */
static char e2e_extra_listen[2 * PATH_MAX + 64];
static char e2e_extra_server[PATH_MAX + 64];
static char e2e_extra_files[4][PATH_MAX];

/* A loopback port that is free now (the daemon binds it right after). */
static int e2e_free_port(int v6)
{
	struct sockaddr_storage ss = {0};
	socklen_t len = v6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
	int fd = socket(v6 ? AF_INET6 : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

	ss.ss_family = v6 ? AF_INET6 : AF_INET;
	if (v6)
		((struct sockaddr_in6 *)&ss)->sin6_addr = in6addr_loopback;
	else
		((struct sockaddr_in *)&ss)->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (fd >= 0 && !bind(fd, (struct sockaddr *)&ss, len) &&
	    !getsockname(fd, (struct sockaddr *)&ss, &len))
		port = ntohs(v6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
				: ((struct sockaddr_in *)&ss)->sin_port);
	if (fd >= 0)
		close(fd);
	return port;
}

/* Fills e2e_extra_*: listener, guest address, token file and CLMUX_TOKEN. */
static int e2e_transport_setup(void)
{
	const char *t = getenv("CMX_E2E_TRANSPORT");
	char token[40];
	uint64_t seed = (uint64_t)getpid() * 0x9e3779b97f4a7c15ull ^ (uint64_t)time(NULL);
	FILE *f;
	int port, tls;

	if (!t || !*t || !strcmp(t, "unix"))
		return 0;
	/* The daemon listens on unix: only; the ICD speaks shm over it. */
	if (!strcmp(t, "shm"))
		return snprintf(e2e_extra_server, sizeof(e2e_extra_server), "shm:%s",
				e2e_daemon_sock) >= (int)sizeof(e2e_extra_server)
			       ? -ENAMETOOLONG
			       : 0;
	/* A region as QEMU would map it, in /dev/shm where there is one; the
	 * ICD maps the file itself, as a guest maps the BAR. */
	if (!strcmp(t, "ivshmem")) {
		const char *base = strrchr(e2e_daemon_dir, '/') + 1;
		struct stat st;

		if ((!stat("/dev/shm", &st)
			     ? snprintf(e2e_extra_files[0], PATH_MAX, "/dev/shm/%s.ivshmem", base)
			     : snprintf(e2e_extra_files[0], PATH_MAX, "%s/ivshmem", e2e_daemon_dir)) >=
			    PATH_MAX ||
		    snprintf(e2e_extra_listen, sizeof(e2e_extra_listen), "ivshmem:%s,%s",
			     e2e_extra_files[0],
			     getenv("CMX_E2E_IVSHMEM") ? getenv("CMX_E2E_IVSHMEM")
						       : "size=256M,slots=8") >=
			    (int)sizeof(e2e_extra_listen) ||
		    snprintf(e2e_extra_server, sizeof(e2e_extra_server), "ivshmem:%s",
			     e2e_extra_files[0]) >= (int)sizeof(e2e_extra_server))
			return -ENAMETOOLONG;
		return 0;
	}
	if (!strcmp(t, "vsock-uds")) {
		if (snprintf(e2e_extra_files[0], PATH_MAX, "%s/v.sock_7447", e2e_daemon_dir) >=
			    PATH_MAX ||
		    snprintf(e2e_extra_listen, sizeof(e2e_extra_listen), "vsock-uds:%s,cid=3",
			     e2e_extra_files[0]) >= (int)sizeof(e2e_extra_listen) ||
		    snprintf(e2e_extra_server, sizeof(e2e_extra_server), "vsock-uds:%s",
			     e2e_extra_files[0]) >= (int)sizeof(e2e_extra_server))
			return -ENAMETOOLONG;
		return 0;
	}
	if (strcmp(t, "tcp") && strcmp(t, "tcp6") && strcmp(t, "tls") && strcmp(t, "tcp-lz4") &&
	    strcmp(t, "tls-lz4")) {
		fprintf(stderr, "e2e: CMX_E2E_TRANSPORT=%s: expected unix, shm, ivshmem, tcp, tcp6, "
			"tls, tcp-lz4, tls-lz4 or vsock-uds\n", t);
		return -EINVAL;
	}
	tls = !strncmp(t, "tls", 3);
	/* -lz4: the guest asks for compressed payloads. */
	if (strstr(t, "-lz4") && setenv("CLMUX_COMPRESS", "lz4", 1) < 0)
		return -ENOMEM;
	port = e2e_free_port(!strcmp(t, "tcp6"));
	if (port < 0) {
		fprintf(stderr, "e2e: no free loopback port for %s\n", t);
		return -EADDRNOTAVAIL;
	}
	for (int i = 0; i < 32; i++)
		token[i] = "0123456789abcdef"[e2e_rand_next(&seed) & 15];
	token[32] = '\0';
	if (snprintf(e2e_extra_files[1], PATH_MAX, "%s/tokens", e2e_daemon_dir) >= PATH_MAX)
		return -ENAMETOOLONG;
	f = fopen(e2e_extra_files[1], "w");
	if (!f || fchmod(fileno(f), 0600) || fprintf(f, "e2e %s\n", token) < 0 || fclose(f)) {
		fprintf(stderr, "e2e: writing %s failed\n", e2e_extra_files[1]);
		return -EIO;
	}
	snprintf(e2e_extra_server, sizeof(e2e_extra_server),
		 !strcmp(t, "tcp6") ? "tcp:[::1]:%d" : "tcp:127.0.0.1:%d", port);
	if (snprintf(e2e_extra_listen, sizeof(e2e_extra_listen), "%s,tokens=%s", e2e_extra_server,
		     e2e_extra_files[1]) >= (int)sizeof(e2e_extra_listen))
		return -ENAMETOOLONG;
	if (tls) {
		/* A self-signed certificate for 127.0.0.1, the guest's CA too. */
		char cmd[3 * PATH_MAX + 256];
		size_t n = strlen(e2e_extra_listen);

		if (snprintf(e2e_extra_files[2], PATH_MAX, "%s/cert.pem", e2e_daemon_dir) >= PATH_MAX ||
		    snprintf(e2e_extra_files[3], PATH_MAX, "%s/key.pem", e2e_daemon_dir) >= PATH_MAX)
			return -ENAMETOOLONG;
		snprintf(cmd, sizeof(cmd),
			 "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes "
			 "-days 1 -subj /CN=clmux-e2e -addext subjectAltName=IP:127.0.0.1 "
			 "-keyout '%s' -out '%s' 2>/dev/null",
			 e2e_extra_files[3], e2e_extra_files[2]);
		if (system(cmd)) {
			fprintf(stderr, "e2e: openssl could not make a certificate\n");
			return -EIO;
		}
		if (snprintf(e2e_extra_listen + n, sizeof(e2e_extra_listen) - n, ",tls=%s:%s",
			     e2e_extra_files[2], e2e_extra_files[3]) >= (int)(sizeof(e2e_extra_listen) - n))
			return -ENAMETOOLONG;
		snprintf(e2e_extra_server, sizeof(e2e_extra_server), "tls:127.0.0.1:%d", port);
		if (setenv("CLMUX_TLS_CA", e2e_extra_files[2], 1) < 0)
			return -ENOMEM;
	}
	return setenv("CLMUX_TOKEN", token, 1) < 0 ? -ENOMEM : 0;
}

/* A tenant with limits (e2e_tenant()): a listener of its own, named in the
 * daemon's configuration file, both in the harness's directory. */
static const char *e2e_tenant_name, *e2e_tenant_keys;
static char e2e_tenant_conf[PATH_MAX], e2e_tenant_sock[PATH_MAX];
static char e2e_tenant_listen[PATH_MAX + 80], e2e_tenant_addr[PATH_MAX + 8];

void e2e_tenant(const char *name, const char *keys)
{
	e2e_tenant_name = name;
	e2e_tenant_keys = keys;
}

const char *e2e_tenant_server(void)
{
	return e2e_tenant_addr[0] ? e2e_tenant_addr : NULL;
}

/* Writes the configuration (every other peer stays tenant default, with
 * no limits) and fills the listener's words; 0 or -errno. */
static int e2e_tenant_setup(void)
{
	FILE *f;

	if (!e2e_tenant_name)
		return 0;
	if (snprintf(e2e_tenant_conf, PATH_MAX, "%s/clmuxd.conf", e2e_daemon_dir) >= PATH_MAX ||
	    snprintf(e2e_tenant_sock, PATH_MAX, "%s/%s.sock", e2e_daemon_dir, e2e_tenant_name) >=
		(int)sizeof(((struct sockaddr_un *)0)->sun_path))
		return -ENAMETOOLONG;
	f = fopen(e2e_tenant_conf, "w");
	if (!f)
		return -errno;
	fprintf(f, "[clmuxd]\ndefault-tenant = default\n[tenant %s]\n%s\n", e2e_tenant_name,
		e2e_tenant_keys);
	if (fclose(f))
		return -EIO;
	snprintf(e2e_tenant_listen, sizeof(e2e_tenant_listen), "unix:%s,tenant=%s", e2e_tenant_sock,
		 e2e_tenant_name);
	snprintf(e2e_tenant_addr, sizeof(e2e_tenant_addr), "unix:%s", e2e_tenant_sock);
	return 0;
}

static void e2e_daemon_cleanup(void)
{
	if (e2e_daemon_pid)
		unsetenv("CLMUX_SERVER");
	if (e2e_tenant_conf[0])
		unlink(e2e_tenant_conf);
	if (e2e_tenant_sock[0])
		unlink(e2e_tenant_sock);
	e2e_tenant_conf[0] = e2e_tenant_sock[0] = e2e_tenant_listen[0] = e2e_tenant_addr[0] = '\0';
	for (int i = 0; i < 4; i++)
		if (e2e_extra_files[i][0])
			unlink(e2e_extra_files[i]);
	memset(e2e_extra_files, 0, sizeof(e2e_extra_files));
	e2e_extra_listen[0] = e2e_extra_server[0] = '\0';
	if (e2e_daemon_sock[0] && unlink(e2e_daemon_sock) < 0 &&
	    errno != ENOENT)
		fprintf(stderr, "e2e: unlink %s: %s\n", e2e_daemon_sock,
			strerror(errno));
	if (e2e_daemon_dir[0] && rmdir(e2e_daemon_dir) < 0)
		fprintf(stderr, "e2e: rmdir %s: %s\n", e2e_daemon_dir,
			strerror(errno));
	e2e_daemon_sock[0] = '\0';
	e2e_daemon_dir[0] = '\0';
	e2e_daemon_pid = 0;
}

/* 1 when the socket accepts a connection, 0 when not yet.  Stream and
 * seqpacket are both tried: the harness does not assume the transport's. */
static int e2e_daemon_accepts(void)
{
	static const int types[] = {SOCK_STREAM, SOCK_SEQPACKET};
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	memcpy(sa.sun_path, e2e_daemon_sock, strlen(e2e_daemon_sock) + 1);
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		int fd = socket(AF_UNIX, types[i] | SOCK_CLOEXEC, 0);
		int ok, err;

		if (fd < 0)
			return 0;
		ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
		err = errno;
		close(fd);
		if (ok)
			return 1;
		if (err != EPROTOTYPE)
			return 0;
	}
	return 0;
}

/* 1 when the second listener serves too: an ivshmem region is ready once
 * its magic is written (the daemon opens it after its sockets). */
static int e2e_extra_ready(void)
{
	/* "CMXI", transport/ivshmem_layout.h */
	return strncmp(e2e_extra_listen, "ivshmem:", 8) ||
	       e2e_file_has_magic(e2e_extra_files[0], 0x49584d43u);
}

int e2e_file_has_magic(const char *path, uint32_t magic)
{
	uint32_t v = 0;
	FILE *f = fopen(path, "rb");

	if (!f)
		return 0;
	if (fread(&v, sizeof(v), 1, f) != 1)
		v = 0;
	fclose(f);
	return v == magic;
}

/* Reaps the daemon if it has exited; 1 and *status set when it has. */
static int e2e_daemon_reaped(int *status)
{
	pid_t r;

	do
		r = waitpid(e2e_daemon_pid, status, WNOHANG);
	while (r < 0 && errno == EINTR);
	return r == e2e_daemon_pid;
}

static void e2e_daemon_describe(const char *what, int status)
{
	if (WIFEXITED(status))
		fprintf(stderr, "e2e: clmuxd %s with status %d\n", what,
			WEXITSTATUS(status));
	else if (WIFSIGNALED(status))
		fprintf(stderr, "e2e: clmuxd %s on signal %d (%s)\n", what,
			WTERMSIG(status), strsignal(WTERMSIG(status)));
}

const char *e2e_daemon_tmpdir(void)
{
	return e2e_daemon_dir[0] ? e2e_daemon_dir : NULL;
}

int e2e_daemon_start(void)
{
	const char *bin = getenv("CLMUXD");
	const char *tmp = getenv("TMPDIR");
	char addr[sizeof(e2e_daemon_sock) + 8];
	int status, n;
	pid_t pid;

	if (!bin || !*bin)
		return 0;
	if (access(bin, X_OK) < 0) {
		int ret = -errno;

		fprintf(stderr, "e2e: CLMUXD=%s: %s\n", bin, strerror(errno));
		return ret;
	}
	if (!tmp || !*tmp)
		tmp = "/tmp";
	n = snprintf(e2e_daemon_dir, sizeof(e2e_daemon_dir),
		     "%s/clmux-e2e-XXXXXX", tmp);
	if (n < 0 || (size_t)n >= sizeof(e2e_daemon_dir) ||
	    !mkdtemp(e2e_daemon_dir)) {
		fprintf(stderr, "e2e: mkdtemp in %s: %s\n", tmp,
			n < 0 || (size_t)n >= sizeof(e2e_daemon_dir)
				? "name too long"
				: strerror(errno));
		e2e_daemon_dir[0] = '\0';
		return -ENAMETOOLONG;
	}
	n = snprintf(e2e_daemon_sock, sizeof(e2e_daemon_sock), "%s/clmuxd.sock",
		     e2e_daemon_dir);
	if (n < 0 || (size_t)n >= sizeof(e2e_daemon_sock)) {
		fprintf(stderr, "e2e: socket path under %s is too long\n",
			e2e_daemon_dir);
		e2e_daemon_sock[0] = '\0';
		e2e_daemon_cleanup();
		return -ENAMETOOLONG;
	}
	snprintf(addr, sizeof(addr), "unix:%s", e2e_daemon_sock);
	if (e2e_transport_setup() < 0 || e2e_tenant_setup() < 0) {
		e2e_daemon_cleanup();
		return -EINVAL;
	}

	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		int ret = -errno;

		perror("e2e: fork");
		e2e_daemon_cleanup();
		return ret;
	}
	if (pid == 0) {
		/* Do not outlive a test program that crashes. */
		const char *extra = getenv("CMX_E2E_DAEMON_ARGS");
		/* --admin none: a test daemon must not take the host's
		 * default admin socket. */
		char *argv[20] = {(char *)bin, "--listen", addr, "--admin", "none"}, *words;
		int argc = 5;

		prctl(PR_SET_PDEATHSIG, SIGTERM);
		if (e2e_extra_listen[0]) {
			argv[argc++] = "--listen";
			argv[argc++] = e2e_extra_listen;
		}
		if (e2e_tenant_listen[0]) {
			argv[argc++] = "--config";
			argv[argc++] = e2e_tenant_conf;
			argv[argc++] = "--listen";
			argv[argc++] = e2e_tenant_listen;
		}
		/* More daemon options, split at spaces (e.g. "--device oclgrind"). */
		if (extra && (words = strdup(extra)))
			for (char *w = strtok(words, " "); w && argc < 19; w = strtok(NULL, " "))
				argv[argc++] = w;
		argv[argc] = NULL;
		/* The daemon's temporary files go in the harness's directory,
		 * where tests can look at them (and rmdir finds them). */
		setenv("TMPDIR", e2e_daemon_dir, 1);
		execv(bin, argv);
		fprintf(stderr, "e2e: exec %s: %s\n", bin, strerror(errno));
		_exit(127);
	}
	e2e_daemon_pid = pid;
	if (setenv("CLMUX_SERVER", e2e_extra_server[0] ? e2e_extra_server : addr, 1) < 0) {
		perror("e2e: setenv");
		e2e_daemon_stop();
		return -ENOMEM;
	}

	for (int waited = 0; waited < E2E_DAEMON_WAIT_MS; waited += E2E_POLL_MS) {
		if (e2e_daemon_reaped(&status)) {
			e2e_daemon_describe("exited before listening", status);
			e2e_daemon_cleanup();
			return -ECHILD;
		}
		if (e2e_daemon_accepts() && e2e_extra_ready())
			return 0;
		e2e_sleep_ms(E2E_POLL_MS);
	}
	fprintf(stderr, "e2e: clmuxd did not accept on %s within %d ms\n",
		e2e_daemon_sock, E2E_DAEMON_WAIT_MS);
	kill(e2e_daemon_pid, SIGKILL);
	while (waitpid(e2e_daemon_pid, &status, 0) < 0 && errno == EINTR)
		;
	e2e_daemon_cleanup();
	return -ETIMEDOUT;
}

int e2e_daemon_stop(void)
{
	int status = 0, ret = 0, waited;

	if (!e2e_daemon_pid)
		return 0;
	if (kill(e2e_daemon_pid, SIGTERM) < 0)
		perror("e2e: kill clmuxd");
	for (waited = 0; waited < E2E_DAEMON_WAIT_MS; waited += E2E_POLL_MS) {
		if (e2e_daemon_reaped(&status))
			break;
		e2e_sleep_ms(E2E_POLL_MS);
	}
	if (waited >= E2E_DAEMON_WAIT_MS) {
		fprintf(stderr,
			"e2e: clmuxd ignored SIGTERM for %d ms; killing it\n",
			E2E_DAEMON_WAIT_MS);
		kill(e2e_daemon_pid, SIGKILL);
		while (waitpid(e2e_daemon_pid, &status, 0) < 0 &&
		       errno == EINTR)
			;
		ret = -ETIMEDOUT;
	} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		e2e_daemon_describe("stopped", status);
		ret = -EPROTO;
	}
	e2e_daemon_cleanup();
	return ret;
}

/* ---- OpenCL helpers ---- */

char *e2e_build_log(cl_program prog, cl_device_id dev)
{
	size_t n = 0;
	char *log;

	if (clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, 0, NULL,
				  &n) != CL_SUCCESS)
		return NULL;
	log = calloc(1, n + 1);
	if (!log)
		return NULL;
	if (n && clGetProgramBuildInfo(prog, dev, CL_PROGRAM_BUILD_LOG, n, log,
				       NULL) != CL_SUCCESS) {
		free(log);
		return NULL;
	}
	return log;
}

cl_program e2e_program_build(struct e2e_plat *p, const char *src,
			     const char *options)
{
	cl_program prog;
	cl_int err;
	char *log;

	prog = clCreateProgramWithSource(p->context, 1, &src, NULL, &err);
	ck_assert_msg(prog && err == CL_SUCCESS,
		      "%s: clCreateProgramWithSource: %s (%d)", p->role,
		      e2e_cl_strerror(err), err);
	err = clBuildProgram(prog, 1, &p->device, options, NULL, NULL);
	if (err != CL_SUCCESS) {
		log = e2e_build_log(prog, p->device);
		fprintf(stderr, "e2e: %s: build failed: %s (%d); log:\n%s\n",
			p->role, e2e_cl_strerror(err), err,
			log ? log : "(none)");
		free(log);
		ck_abort_msg("%s: clBuildProgram: %s (%d)", p->role,
			     e2e_cl_strerror(err), err);
	}
	return prog;
}

cl_kernel e2e_kernel_create(struct e2e_plat *p, cl_program prog,
			    const char *name)
{
	cl_int err;
	cl_kernel k = clCreateKernel(prog, name, &err);

	ck_assert_msg(k && err == CL_SUCCESS, "%s: clCreateKernel(%s): %s (%d)",
		      p->role, name, e2e_cl_strerror(err), err);
	return k;
}

cl_mem e2e_buffer_create(struct e2e_plat *p, cl_mem_flags flags, size_t size,
			 void *host)
{
	cl_int err;
	cl_mem m = clCreateBuffer(p->context, flags, size, host, &err);

	ck_assert_msg(m && err == CL_SUCCESS,
		      "%s: clCreateBuffer(%zu bytes): %s (%d)", p->role, size,
		      e2e_cl_strerror(err), err);
	return m;
}

/* ---- data ---- */

/* splitmix64: tiny, seedable, and the same on every libc. */
uint64_t e2e_rand_next(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

void e2e_rand_bytes(void *dst, size_t n, uint64_t seed)
{
	unsigned char *d = dst;

	for (size_t i = 0; i < n; i += 8) {
		uint64_t v = e2e_rand_next(&seed);
		size_t k = n - i < 8 ? n - i : 8;

		memcpy(d + i, &v, k);
	}
}

void e2e_rand_u32(uint32_t *dst, size_t n, uint64_t seed, uint32_t mod)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t v = (uint32_t)(e2e_rand_next(&seed) >> 32);

		dst[i] = mod ? v % mod : v;
	}
}

void e2e_rand_float(float *dst, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++)
		dst[i] = (float)(e2e_rand_next(&seed) >> 40) / (float)(1 << 23) -
			 1.0f;
}

void *e2e_xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	ck_assert_msg(p != NULL, "malloc(%zu) failed", n);
	return p;
}

void *e2e_xcalloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);

	ck_assert_msg(p != NULL, "calloc(%zu) failed", n);
	return p;
}

void e2e_assert_floats_near(const float *got, const float *want, size_t n,
			    float abs_tol, float rel_tol, const char *what)
{
	for (size_t i = 0; i < n; i++) {
		float tol = abs_tol + rel_tol * fabsf(want[i]);

		/* Written so that a NaN in got fails too. */
		if (!(fabsf(got[i] - want[i]) <= tol))
			ck_abort_msg("%s: element %zu is %.9g, want %.9g (tol %g)",
				     what, i, (double)got[i], (double)want[i],
				     (double)tol);
	}
}

void e2e_assert_bytes_eq(const void *got, const void *want, size_t n,
			 const char *what)
{
	const unsigned char *g = got, *w = want;

	if (memcmp(g, w, n) == 0)
		return;
	for (size_t i = 0; i < n; i++)
		if (g[i] != w[i])
			ck_abort_msg("%s: byte %zu of %zu is 0x%02x, want 0x%02x",
				     what, i, n, g[i], w[i]);
}

void e2e_sleep_ms(unsigned ms)
{
	struct timespec ts = {.tv_sec = ms / 1000,
			      .tv_nsec = (long)(ms % 1000) * 1000000L};

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

const char *e2e_cl_strerror(cl_int err)
{
	switch (err) {
#define E2E_CASE(c)                                                            \
	case c:                                                                \
		return #c
		E2E_CASE(CL_SUCCESS);
		E2E_CASE(CL_DEVICE_NOT_FOUND);
		E2E_CASE(CL_DEVICE_NOT_AVAILABLE);
		E2E_CASE(CL_COMPILER_NOT_AVAILABLE);
		E2E_CASE(CL_MEM_OBJECT_ALLOCATION_FAILURE);
		E2E_CASE(CL_OUT_OF_RESOURCES);
		E2E_CASE(CL_OUT_OF_HOST_MEMORY);
		E2E_CASE(CL_PROFILING_INFO_NOT_AVAILABLE);
		E2E_CASE(CL_MEM_COPY_OVERLAP);
		E2E_CASE(CL_IMAGE_FORMAT_MISMATCH);
		E2E_CASE(CL_IMAGE_FORMAT_NOT_SUPPORTED);
		E2E_CASE(CL_BUILD_PROGRAM_FAILURE);
		E2E_CASE(CL_MAP_FAILURE);
		E2E_CASE(CL_MISALIGNED_SUB_BUFFER_OFFSET);
		E2E_CASE(CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
		E2E_CASE(CL_COMPILE_PROGRAM_FAILURE);
		E2E_CASE(CL_LINKER_NOT_AVAILABLE);
		E2E_CASE(CL_LINK_PROGRAM_FAILURE);
		E2E_CASE(CL_DEVICE_PARTITION_FAILED);
		E2E_CASE(CL_KERNEL_ARG_INFO_NOT_AVAILABLE);
		E2E_CASE(CL_INVALID_VALUE);
		E2E_CASE(CL_INVALID_DEVICE_TYPE);
		E2E_CASE(CL_INVALID_PLATFORM);
		E2E_CASE(CL_INVALID_DEVICE);
		E2E_CASE(CL_INVALID_CONTEXT);
		E2E_CASE(CL_INVALID_QUEUE_PROPERTIES);
		E2E_CASE(CL_INVALID_COMMAND_QUEUE);
		E2E_CASE(CL_INVALID_HOST_PTR);
		E2E_CASE(CL_INVALID_MEM_OBJECT);
		E2E_CASE(CL_INVALID_IMAGE_FORMAT_DESCRIPTOR);
		E2E_CASE(CL_INVALID_IMAGE_SIZE);
		E2E_CASE(CL_INVALID_SAMPLER);
		E2E_CASE(CL_INVALID_BINARY);
		E2E_CASE(CL_INVALID_BUILD_OPTIONS);
		E2E_CASE(CL_INVALID_PROGRAM);
		E2E_CASE(CL_INVALID_PROGRAM_EXECUTABLE);
		E2E_CASE(CL_INVALID_KERNEL_NAME);
		E2E_CASE(CL_INVALID_KERNEL_DEFINITION);
		E2E_CASE(CL_INVALID_KERNEL);
		E2E_CASE(CL_INVALID_ARG_INDEX);
		E2E_CASE(CL_INVALID_ARG_VALUE);
		E2E_CASE(CL_INVALID_ARG_SIZE);
		E2E_CASE(CL_INVALID_KERNEL_ARGS);
		E2E_CASE(CL_INVALID_WORK_DIMENSION);
		E2E_CASE(CL_INVALID_WORK_GROUP_SIZE);
		E2E_CASE(CL_INVALID_WORK_ITEM_SIZE);
		E2E_CASE(CL_INVALID_GLOBAL_OFFSET);
		E2E_CASE(CL_INVALID_EVENT_WAIT_LIST);
		E2E_CASE(CL_INVALID_EVENT);
		E2E_CASE(CL_INVALID_OPERATION);
		E2E_CASE(CL_INVALID_GL_OBJECT);
		E2E_CASE(CL_INVALID_BUFFER_SIZE);
		E2E_CASE(CL_INVALID_MIP_LEVEL);
		E2E_CASE(CL_INVALID_GLOBAL_WORK_SIZE);
		E2E_CASE(CL_INVALID_PROPERTY);
		E2E_CASE(CL_INVALID_IMAGE_DESCRIPTOR);
		E2E_CASE(CL_INVALID_COMPILER_OPTIONS);
		E2E_CASE(CL_INVALID_LINKER_OPTIONS);
		E2E_CASE(CL_INVALID_DEVICE_PARTITION_COUNT);
		E2E_CASE(CL_INVALID_PIPE_SIZE);
		E2E_CASE(CL_INVALID_DEVICE_QUEUE);
		E2E_CASE(CL_INVALID_SPEC_ID);
		E2E_CASE(CL_MAX_SIZE_RESTRICTION_EXCEEDED);
		E2E_CASE(CL_PLATFORM_NOT_FOUND_KHR);
#undef E2E_CASE
	default:
		return "unknown CL error";
	}
}
