// SPDX-License-Identifier: MIT
// Checkpoints (issue 17): an application's session is written to the
// daemon's --state-dir, by `clmuxctl checkpoint` (without workers) and at
// SIGTERM (with them). The state file is read back with the daemon's own
// reader: the requests that made each live object in order, a kernel
// argument's last value only, a program the application released kept
// for the kernels made from it, a released buffer left out, one that a
// live kernel's argument names kept and released again, and the
// buffers' bytes equal to the native run's. A state directory that others
// can read is refused at start. The kept requests are charged to the
// tenant's mem quota, and without --state-dir none is kept and a
// checkpoint is refused. The events case: events an application holds
// across restarts answer and serve as natively, a checkpoint that a
// command behind an unset user event would hang is refused, and EVENT
// records no checkpoint writes end only their own session's restore. The
// images case: images of every shape and of every format the device
// supports, their bytes written by the application and by a kernel, read
// back after two restarts as the native run reads them, also from a file
// whose images' rows come last first; IMAGE records no checkpoint writes
// end only their own session's restore.
// Eight applications at work through a restart resume by themselves,
// every result equal to the native run's. A file whose replay fails ends
// only its session. A file named with the restoring daemon's own pid, as
// a predecessor of the same pid (in a container) named its own, is
// restored, not taken for the daemon's own checkpoint's. Over unix, and
// shm from e2e-shm.sh.
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../host/tests/adminclient.h"
#include "../../host/tests/rawclient.h"
#include "codec.h"
#include "e2e.h"
#include "proto.gen.h"
#include "state.h"

/* In the application's process, where a check assertion would not end
 * the test: it exits with the line. */
#define APP_OK(x)                                                                                  \
	do {                                                                                       \
		cl_int err_ = (x);                                                                 \
		if (err_) {                                                                        \
			fprintf(stderr, "%s:%d: %s: %d\n", __FILE__, __LINE__, #x, err_);          \
			_exit(5);                                                                  \
		}                                                                                  \
	} while (0)

#define N 65536
/* Tenant small's mem quota: a program's source of SMALL_SRC bytes fits,
 * and so do build options of SMALL_OPTS bytes, not both. */
#define SMALL_MEM  (128u << 10)
#define SMALL_SRC  (48u << 10)
#define SMALL_OPTS (96u << 10)

static char dir[64], sock[96], admin[96], state[96], small[96];
/* Start the next daemon without --state-dir. */
static int stateless;
/* Two more listeners for the next daemon, each "" or a --listen spec. */
static char extra[2][512];
/* Tenant default is this uid's, and no peer's by default: a VM device's
 * listener then maps to no tenant, and gets a worker of its own. */
static int default_by_uid;
/* Called with the next daemon's pid before it starts (its process waits
 * to exec clmuxd until this returns), or NULL. */
static void (*before_exec)(pid_t pid);

static const char src[] = "kernel void scramble(global const uint *a, global uint *b, uint k)\n"
			  "{ size_t i = get_global_id(0); b[i] = a[i] * 2654435761u + k; }\n";

static int accepts(const char *path)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0), ok;

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
	ok = connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0;
	close(fd);
	return ok;
}

static int daemon_accepts(void)
{
	return accepts(sock);
}

/* A clmuxd with --state-dir (in a new directory, or the last one again);
 * its pid (the address in CLMUX_SERVER). */
static pid_t daemon_again(const char *workers, int fresh)
{
	const char *bin = getenv("CLMUXD");
	pid_t pid;

	ck_assert_msg(bin && *bin, "CLMUXD unset");
	if (fresh)
		ck_assert_ptr_nonnull(mkdtemp(strcpy(dir, "/tmp/clmux-ckpt-XXXXXX")));
	unlink(sock);
	snprintf(sock, sizeof(sock), "%s/s.sock", dir);
	snprintf(admin, sizeof(admin), "%s/admin.sock", dir);
	snprintf(state, sizeof(state), "%s/state", dir);
	char server[128];
	/* CMX_E2E_TRANSPORT=shm (e2e-shm.sh): the application's calls on
	 * shared-memory rings; the restore's raw client stays on the socket. */
	const char *t = getenv("CMX_E2E_TRANSPORT");
	snprintf(server, sizeof(server), "%s:%s", t && !strcmp(t, "shm") ? "shm" : "unix", sock);
	setenv("CLMUX_SERVER", server, 1);
	/* Tenant "small", on a listener of its own, has a mem quota that a
	 * program's records can pass. */
	char conf[128];
	snprintf(conf, sizeof(conf), "%s/clmuxd.conf", dir);
	snprintf(small, sizeof(small), "%s/small.sock", dir);
	unlink(small);
	FILE *f = fopen(conf, "w");
	ck_assert_ptr_nonnull(f);
	/* Tenant other has no listener: its worker starts only for it. */
	if (default_by_uid)
		fprintf(f, "[tenant default]\nuid = %u\n", (unsigned)getuid());
	else
		fprintf(f, "[clmuxd]\ndefault-tenant = default\n");
	fprintf(f, "[tenant small]\nmem = %u\n[tenant other]\n", SMALL_MEM);
	ck_assert_int_eq(fclose(f), 0);
	int gate[2] = {-1, -1};
	if (before_exec)
		ck_assert_int_eq(pipe(gate), 0);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char listen[128], listen_small[140], byte;
		/* clmuxd gets this process's pid: before_exec() sees it first. */
		if (before_exec) {
			close(gate[1]);
			if (read(gate[0], &byte, 1) != 1)
				_exit(126);
			close(gate[0]);
		}
		snprintf(listen, sizeof(listen), "unix:%s", sock);
		snprintf(listen_small, sizeof(listen_small), "unix:%s,tenant=small", small);
		if (stateless)
			execl(bin, bin, "--listen", listen, "--listen", listen_small, "--config",
			      conf, "--admin", admin, "--workers", workers, (char *)NULL);
		else if (extra[0][0])
			execl(bin, bin, "--listen", listen, "--listen", listen_small, "--listen",
			      extra[0], "--listen", extra[1], "--config", conf, "--admin", admin,
			      "--state-dir", state, "--workers", workers, (char *)NULL);
		else
			execl(bin, bin, "--listen", listen, "--listen", listen_small, "--config",
			      conf, "--admin", admin, "--state-dir", state, "--workers", workers,
			      (char *)NULL);
		_exit(127);
	}
	if (before_exec) {
		close(gate[0]);
		before_exec(pid);
		ck_assert_int_eq(write(gate[1], "", 1), 1);
		close(gate[1]);
	}
	for (int i = 0; i < 3000 && !daemon_accepts(); i++)
		usleep(10000);
	ck_assert_msg(daemon_accepts(), "clmuxd did not listen on %s", sock);
	/* The admin socket opens after the guests' listeners. */
	for (int i = 0; i < 3000 && !accepts(admin); i++)
		usleep(10000);
	ck_assert_msg(accepts(admin), "clmuxd did not listen on %s", admin);
	return pid;
}

static pid_t daemon_start(const char *workers)
{
	return daemon_again(workers, 1);
}

static void dir_remove(void)
{
	char cmd[128];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static void scramble_run(struct e2e_plat *p, const uint32_t *a, uint32_t k, uint32_t *out)
{
	cl_program prog = e2e_program_build(p, src, NULL);
	cl_kernel kern = e2e_kernel_create(p, prog, "scramble");
	cl_mem ma = e2e_buffer_create(p, CL_MEM_COPY_HOST_PTR, N * 4, (void *)a);
	cl_mem mb = e2e_buffer_create(p, CL_MEM_READ_WRITE, N * 4, NULL);
	size_t g = N;

	E2E_OK(p, clSetKernelArg(kern, 0, sizeof(ma), &ma));
	E2E_OK(p, clSetKernelArg(kern, 1, sizeof(mb), &mb));
	E2E_OK(p, clSetKernelArg(kern, 2, sizeof(k), &k));
	E2E_OK(p, clEnqueueNDRangeKernel(p->queue, kern, 1, NULL, &g, NULL, 0, NULL, NULL));
	E2E_OK(p, clEnqueueReadBuffer(p->queue, mb, CL_TRUE, 0, N * 4, out, 0, NULL, NULL));
	clReleaseMemObject(ma);
	clReleaseMemObject(mb);
	clReleaseKernel(kern);
	clReleaseProgram(prog);
}

/* The virtual platform's session: buffers a and b, a kernel from a
 * program the application has released, its last argument set twice
 * and run, a buffer made and released, and a second kernel whose
 * argument names a buffer released since. */
static void session_make(struct e2e_plat *v, const uint32_t *a)
{
	cl_program prog = e2e_program_build(v, src, NULL);
	cl_kernel kern = e2e_kernel_create(v, prog, "scramble");
	cl_mem ma = e2e_buffer_create(v, CL_MEM_COPY_HOST_PTR, N * 4, (void *)a);
	cl_mem mb = e2e_buffer_create(v, CL_MEM_READ_WRITE, N * 4, NULL);
	cl_mem gone = e2e_buffer_create(v, CL_MEM_READ_WRITE, 4096, NULL);
	uint32_t k0 = 1, k = 7;
	size_t g = N;

	cl_kernel k2 = e2e_kernel_create(v, prog, "scramble");
	cl_mem named = e2e_buffer_create(v, CL_MEM_READ_WRITE, 4096, NULL);

	/* A program linked from a compiled one: a sync call that makes an
	 * object (LinkProgram), for restore_resume to send again. */
	const char *text = src;
	cl_int e;
	cl_program obj = clCreateProgramWithSource(v->context, 1, &text, NULL, &e);
	E2E_OK(v, e);
	E2E_OK(v, clCompileProgram(obj, 1, &v->device, NULL, 0, NULL, NULL, NULL, NULL));
	cl_program linked = clLinkProgram(v->context, 1, &v->device, NULL, 1, &obj, NULL, NULL, &e);
	E2E_OK(v, e);
	ck_assert_ptr_nonnull(linked);

	E2E_OK(v, clReleaseProgram(prog));
	E2E_OK(v, clReleaseMemObject(gone));
	/* A released buffer that a live kernel's argument still names. */
	E2E_OK(v, clSetKernelArg(k2, 0, sizeof(named), &named));
	E2E_OK(v, clReleaseMemObject(named));
	E2E_OK(v, clSetKernelArg(kern, 0, sizeof(ma), &ma));
	E2E_OK(v, clSetKernelArg(kern, 1, sizeof(mb), &mb));
	E2E_OK(v, clSetKernelArg(kern, 2, sizeof(k0), &k0));
	E2E_OK(v, clSetKernelArg(kern, 2, sizeof(k), &k));
	E2E_OK(v, clEnqueueNDRangeKernel(v->queue, kern, 1, NULL, &g, NULL, 0, NULL, NULL));
	/* Everything sent has reached the daemon before the checkpoint is
	 * asked for on another socket. */
	E2E_OK(v, clFinish(v->queue));
}

/* What a restore test needs of a state file: the session, its token,
 * the fixture's queue and buffer b. */
struct ids {
	uint64_t session, token, queue, b, applied;
	/* The build's kept message (header and arguments), as sent. */
	uint8_t build[256];
	size_t build_len;
	/* The link's, a sync call that made its program. */
	uint8_t link[256];
	size_t link_len;
};

/* The one state file in the state directory, checked and walked: what the
 * session made, and b's bytes against want. */
static void state_check(const uint32_t *a, const uint32_t *want, struct ids *ids, char *file)
{
	uint64_t a_id = 0;
	DIR *d = opendir(state);
	struct dirent *e;
	char name[256] = "";
	unsigned files = 0, creates[0x800] = {0}, args = 0, contents = 0;
	int dfd;
	const void *p;
	size_t n;
	struct cmx_state_reader r;
	struct cmx_state_rec rec;
	struct stat st;

	ck_assert_int_eq(stat(state, &st), 0);
	ck_assert_uint_eq(st.st_mode & 0777, 0700);
	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		if (strstr(e->d_name, ".state")) {
			snprintf(name, sizeof(name), "%s", e->d_name);
			files++;
		}
	closedir(d);
	ck_assert_uint_eq(files, 1);
	dfd = open(state, O_RDONLY | O_DIRECTORY);
	ck_assert_int_eq(cmx_state_map(dfd, name, &p, &n), 0);
	ck_assert_int_eq(cmx_state_open(&r, p, n), 0);
	ck_assert_str_eq(r.head.tenant, "default");
	ids->session = r.head.session;
	ids->token = r.head.token;
	ids->applied = r.head.applied;
	ids->queue = ids->b = 0;
	strcpy(file, name);
	while (cmx_state_next(&r, &rec) == 1) {
		if (rec.type == CMX_STATE_AREA) {
			/* The ICD's shared area, before every call. */
			ck_assert_uint_eq(creates[CMX_OP_CreateContext], 0);
			ck_assert_uint_ge(rec.area_len, 1u << 20);
			continue;
		}
		if (rec.type == CMX_STATE_CALL) {
			ck_assert_uint_lt(rec.hdr.op, 0x800);
			creates[rec.hdr.op]++;
			if (rec.hdr.op == CMX_OP_BuildProgram) {
				ck_assert_uint_le(rec.len, sizeof(ids->build));
				ck_assert(rec.hdr.flags & CMX_HDR_SYNC);
				memcpy(ids->build, rec.data, rec.len);
				ids->build_len = rec.len;
			}
			if (rec.hdr.op == CMX_OP_LinkProgram) {
				ck_assert_uint_le(rec.len, sizeof(ids->link));
				ck_assert(rec.hdr.flags & CMX_HDR_SYNC);
				memcpy(ids->link, rec.data, rec.len);
				ids->link_len = rec.len;
			}
			if (rec.hdr.op == CMX_OP_CreateQueue && !ids->queue) {
				struct cmx_CreateQueue_in in;
				ck_assert_int_eq(cmx_codec_decode(&cmx_desc_CreateQueue_in,
								  rec.args, rec.hdr.size, &in),
						 0);
				ids->queue = in.queue.id;
			}
			if (rec.hdr.op == CMX_OP_CreateBuffer) {
				struct cmx_CreateBuffer_in in;
				ck_assert_int_eq(cmx_codec_decode(&cmx_desc_CreateBuffer_in,
								  rec.args, rec.hdr.size, &in),
						 0);
				/* a, then b */
				if (creates[CMX_OP_CreateBuffer] == 1)
					a_id = in.mem.id;
				else if (creates[CMX_OP_CreateBuffer] == 2)
					ids->b = in.mem.id;
			}
			if (rec.hdr.op == CMX_OP_ReleaseMem)
				ck_assert_uint_eq(args, 4);
			if (rec.hdr.op == CMX_OP_SetKernelArg) {
				struct cmx_SetKernelArg_in in;
				ck_assert_int_eq(cmx_codec_decode(&cmx_desc_SetKernelArg_in,
								  rec.args, rec.hdr.size, &in),
						 0);
				if (in.index == 2) {
					uint32_t k;
					ck_assert_uint_eq(in.value.len, 4);
					memcpy(&k, in.value.ptr, 4);
					ck_assert_uint_eq(k, 7);
				}
				args++;
			}
			ck_assert_int_eq(contents, 0);
		} else {
			ck_assert_uint_eq(rec.type, CMX_STATE_CONTENTS);
			ck_assert_uint_eq(rec.offset, 0);
			ck_assert_uint_eq(rec.len, 16 + N * 4);
			ck_assert(rec.id == a_id || rec.id == ids->b);
			ck_assert_mem_eq(rec.data + 16, rec.id == a_id ? a : want, N * 4);
			contents++;
		}
	}
	ck_assert_uint_eq(creates[CMX_OP_CreateContext], 1);
	ck_assert_uint_eq(creates[CMX_OP_CreateQueue], 2); /* the fixture's two */
	ck_assert_uint_eq(creates[CMX_OP_CreateProgramWithSource], 2);
	ck_assert_uint_eq(creates[CMX_OP_BuildProgram], 1);
	ck_assert_uint_eq(creates[CMX_OP_CompileProgram], 1);
	ck_assert_uint_eq(creates[CMX_OP_LinkProgram], 1);
	ck_assert_uint_eq(creates[CMX_OP_CreateKernel], 2);
	/* a, b and the released one k2 names (released again once k2's
	 * argument is set), not the other released one. */
	ck_assert_uint_eq(creates[CMX_OP_CreateBuffer], 3);
	ck_assert_uint_eq(creates[CMX_OP_ReleaseMem], 1);
	ck_assert_uint_eq(creates[CMX_OP_ReleaseProgram], 0);
	ck_assert_uint_eq(args, 4);
	ck_assert_uint_eq(contents, 2);
	cmx_state_unmap(p, n);
	close(dfd);
}

static void setup_both(struct e2e_plat *nat, struct e2e_plat *v, uint32_t *a, uint32_t *want)
{
	e2e_rand_u32(a, N, 23, 0);
	ck_assert_int_eq(e2e_plat_init(nat, "native", e2e_native_match()), 0);
	scramble_run(nat, a, 7, want);
	ck_assert_int_eq(e2e_plat_init(v, "virtual", e2e_virtual_match()), 0);
}

START_TEST(admin_checkpoint)
{
	static uint32_t a[N], want[N];
	struct e2e_plat nat, v;
	pid_t pid = daemon_start("off");
	char *reply, file[256];
	struct ids ids;
	int st;

	setup_both(&nat, &v, a, want);
	session_make(&v, a);
	reply = ask(admin, "checkpoint\n");
	ck_assert_msg(!strncmp(reply, "ok\n1 sessions written", 21), "checkpoint: %s", reply);
	free(reply);
	state_check(a, want, &ids, file);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	dir_remove();
}
END_TEST

START_TEST(sigterm_checkpoint)
{
	static uint32_t a[N], want[N];
	struct e2e_plat nat, v;
	pid_t pid = daemon_start("on");
	struct ids ids;
	char file[256];
	int st;

	setup_both(&nat, &v, a, want);
	session_make(&v, a);
	/* The worker writes it as it drains, before the session ends. */
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	state_check(a, want, &ids, file);
	dir_remove();
}
END_TEST

/* session_make() in a child process, which waits, its session open, to be
 * killed: its pid, once its calls have reached the daemon. want is the
 * native run's b. The native run is the child's too: any OpenCL call here
 * loads the clmux ICD, whose session (opened at its start) the child would
 * share through fork, and which would resume it itself once the daemon is
 * back, before the raw client that a test resumes it with. */
static pid_t session_apart(uint32_t *a, uint32_t *want)
{
	size_t bytes = N * sizeof(uint32_t);
	uint32_t *shared = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	struct e2e_plat nat, v;
	int pfd[2];
	char byte;
	pid_t app;

	ck_assert_ptr_ne(shared, MAP_FAILED);
	e2e_rand_u32(a, N, 23, 0);
	ck_assert_int_eq(pipe(pfd), 0);
	app = fork();
	ck_assert_int_ge(app, 0);
	if (app == 0) {
		close(pfd[0]);
		if (e2e_plat_init(&nat, "native", e2e_native_match()))
			_exit(2);
		scramble_run(&nat, a, 7, shared);
		if (e2e_plat_init(&v, "virtual", e2e_virtual_match()))
			_exit(2);
		session_make(&v, a);
		if (write(pfd[1], "", 1) != 1)
			_exit(3);
		for (;;)
			pause();
	}
	close(pfd[1]);
	ck_assert_int_eq(read(pfd[0], &byte, 1), 1);
	close(pfd[0]);
	memcpy(want, shared, N * sizeof(uint32_t));
	munmap(shared, bytes);
	return app;
}

/* A checkpoint while the sessions a daemon started with are still being
 * restored (their builds replayed on executor threads): each counts as
 * written, its state file standing for it until its restore writes it
 * again. The daemon then dies without a checkpoint of its own: the
 * directory still holds the session whole, whether its restore ended in
 * between or not. */
START_TEST(checkpoint_mid_restore)
{
	static uint32_t a[N], want[N];
	pid_t pid = daemon_start("off"), app;
	struct ids ids;
	char *reply, file[256];
	int st;

	app = session_apart(a, want);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	pid = daemon_again("off", 0);
	reply = ask(admin, "checkpoint\n");
	ck_assert_msg(!strncmp(reply, "ok\n1 sessions written", 21), "checkpoint: %s", reply);
	free(reply);
	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	kill(app, SIGKILL);
	ck_assert_int_eq(waitpid(app, &st, 0), app);
	state_check(a, want, &ids, file);
	dir_remove();
}
END_TEST

/* Hello resuming session ids on a fresh connection: its status (1: the
 * daemon ended the connection). */
static int resume(struct client *c, const struct ids *ids)
{
	struct cmx_Hello_in in = {.magic = CMX_PROTO_MAGIC,
				  .version = CMX_PROTO_VERSION,
				  .role = CMX_ROLE_CALL,
				  .session = ids->session,
				  .token = ids->token};
	struct cmx_Hello_out out = {0};
	int e;

	c->fd = dial_at(sock);
	c->seq = 0;
	send_msg(c, &cmx_desc_Hello_in, &in, 1, NULL, 0);
	e = recv_reply(c, &cmx_desc_Hello_out, &out, NULL);
	if (!e)
		ck_assert_uint_eq(out.session, ids->session);
	return e;
}

/* GetStats' first counter: the session's messages after its Hello. */
static uint64_t messages_of(struct client *c)
{
	struct cmx_GetStats_in in = {0};
	struct cmx_GetStats_out out = {0};
	uint8_t *keep = NULL;
	uint64_t n;

	send_msg(c, &cmx_desc_GetStats_in, &in, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(c, &cmx_desc_GetStats_out, &out, &keep), 0);
	ck_assert_uint_ge(out.counters.n, 1);
	n = out.counters.v[0];
	free(keep);
	return n;
}

/* Buffer b of the resumed session, read with a blocking ReadBuffer. */
static void read_b(struct client *c, const struct ids *ids, uint32_t *got)
{
	struct cmx_ReadBuffer_in in = {
	    .queue = {.id = ids->queue}, .mem = {.id = ids->b}, .size = N * 4};
	struct cmx_hdr h;
	uint8_t args[64];
	int64_t status;

	send_msg(c, &cmx_desc_ReadBuffer_in, &in, 1, NULL, 0);
	ck_assert_int_eq(recv(c->fd, &h, CMX_HDR_SIZE, MSG_WAITALL), CMX_HDR_SIZE);
	ck_assert_uint_eq(h.op, CMX_OP_REPLY);
	ck_assert_uint_le(h.size, sizeof(args));
	ck_assert_int_eq(recv(c->fd, args, h.size, MSG_WAITALL), (ssize_t)h.size);
	memcpy(&status, args, 8);
	ck_assert_int_eq(status, CL_SUCCESS);
	ck_assert_uint_eq(h.bulk, N * 4);
	ck_assert_int_eq(recv(c->fd, got, N * 4, MSG_WAITALL), N * 4);
}

/* The same file as `name`, for another session id (and another tenant,
 * unless NULL): a second session to restore beside the first. */
static void file_clone_as(const char *from, const char *name, uint64_t session, const char *tenant)
{
	int dfd = open(state, O_RDONLY | O_DIRECTORY);
	struct cmx_state_writer *w = malloc(sizeof(*w));
	struct cmx_state_reader r;
	struct cmx_state_rec rec;
	const void *p;
	size_t n;

	ck_assert_int_eq(cmx_state_map(dfd, from, &p, &n), 0);
	ck_assert_int_eq(cmx_state_open(&r, p, n), 0);
	ck_assert_int_eq(cmx_state_begin(w, dfd, name, session, r.head.token, r.head.applied,
					 tenant ? tenant : r.head.tenant),
			 0);
	while (cmx_state_next(&r, &rec) == 1) {
		struct iovec iov = {(void *)rec.data, rec.len};
		cmx_state_put(w, rec.type, &iov, 1);
	}
	ck_assert_int_eq(cmx_state_commit(w), 0);
	cmx_state_unmap(p, n);
	free(w);
	close(dfd);
}

static void file_clone(const char *from, uint64_t session)
{
	char name[64];

	snprintf(name, sizeof(name), "clone-%llu.state", (unsigned long long)session);
	file_clone_as(from, name, session, NULL);
}

static int exists(const char *name)
{
	char path[400];

	snprintf(path, sizeof(path), "%s/%s", state, name);
	return access(path, F_OK) == 0;
}

#define READS 16

/* Non-blocking reads of b whose data the daemon still holds when SIGTERM
 * stops it (the notification channel is read only then, and their data
 * passes what its socket holds): its drain sends every one before it
 * closes the connections, since the resumed session would not get them
 * again. */
static void reads_flushed(struct client *c, const struct ids *ids, pid_t pid, const uint32_t *want)
{
	struct cmx_Hello_in in = {.magic = CMX_PROTO_MAGIC,
				  .version = CMX_PROTO_VERSION,
				  .role = CMX_ROLE_NOTIFY,
				  .session = ids->session,
				  .token = ids->token};
	struct cmx_Hello_out out = {0};
	struct client nc = {0};
	static uint32_t got[N];

	nc.fd = dial_at(sock);
	send_msg(&nc, &cmx_desc_Hello_in, &in, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&nc, &cmx_desc_Hello_out, &out, NULL), 0);
	for (unsigned i = 0; i < READS; i++) {
		struct cmx_ReadBuffer_in r = {.queue = {.id = ids->queue},
					      .mem = {.id = ids->b},
					      .size = N * 4,
					      .tag = i + 1};
		send_msg(c, &cmx_desc_ReadBuffer_in, &r, 0, NULL, 0);
	}
	/* A sync call behind them: the daemon has applied them. */
	messages_of(c);
	kill(pid, SIGTERM);
	/* Each read once; the order is the completions' (the driver's). */
	unsigned seen = 0;
	for (unsigned i = 0; i < READS; i++) {
		struct cmx_ReadDone_in rd = {0};
		struct cmx_hdr h;
		uint8_t args[64];

		ck_assert_int_eq(recv(nc.fd, &h, CMX_HDR_SIZE, MSG_WAITALL), CMX_HDR_SIZE);
		ck_assert_uint_eq(h.op, CMX_OP_ReadDone);
		ck_assert_uint_le(h.size, sizeof(args));
		ck_assert_int_eq(recv(nc.fd, args, h.size, MSG_WAITALL), (ssize_t)h.size);
		ck_assert_int_eq(cmx_codec_decode(&cmx_desc_ReadDone_in, args, h.size, &rd), 0);
		ck_assert_msg(rd.tag >= 1 && rd.tag <= READS && !(seen & (1u << (rd.tag - 1))),
			      "ReadDone tag %llu (seen %#x)", (unsigned long long)rd.tag, seen);
		seen |= 1u << (rd.tag - 1);
		ck_assert_int_eq(rd.status, CL_SUCCESS);
		ck_assert_uint_eq(h.bulk, N * 4);
		ck_assert_int_eq(recv(nc.fd, got, N * 4, MSG_WAITALL), N * 4);
		ck_assert_mem_eq(got, want, N * 4);
	}
	close(nc.fd);
}

/* The daemon stops with SIGTERM, a new one restores the session from the
 * state directory, and a guest that says Hello with its id and token
 * finds its buffer's bytes where its kernel left them. A second session's
 * file, damaged, is refused (kept as .bad) while the first is restored. */
START_TEST(restore_resume)
{
	static uint32_t a[N], want[N], got[N];
	pid_t pid = daemon_start("on"), app;
	struct ids ids, bad;
	struct client c = {0}, cb = {0};
	char file[256], badfile[300];
	int st, fd;

	app = session_apart(a, want);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	/* The application is gone before the daemon is back: its ICD would
	 * resume the session itself, before the raw client below. */
	kill(app, SIGKILL);
	ck_assert_int_eq(waitpid(app, &st, 0), app);
	state_check(a, want, &ids, file);
	/* A second session, its file damaged in its last bytes (b's). */
	file_clone(file, ids.session + 1000);
	bad = ids;
	bad.session = ids.session + 1000;
	snprintf(badfile, sizeof(badfile), "%s/clone-%llu.state", state,
		 (unsigned long long)bad.session);
	fd = open(badfile, O_RDWR);
	ck_assert_int_ge(fd, 0);
	ck_assert_int_eq(pwrite(fd, "\xff", 1, lseek(fd, 0, SEEK_END) - 100), 1);
	close(fd);

	pid = daemon_again("on", 0);
	/* Restored files are used up; the damaged one is set aside. */
	for (int i = 0; i < 3000 && exists(file); i++)
		usleep(10000);
	ck_assert_msg(!exists(file), "%s was not restored", file);
	snprintf(badfile, sizeof(badfile), "clone-%llu.state.bad", (unsigned long long)bad.session);
	ck_assert(exists(badfile));

	ck_assert_int_eq(resume(&c, &ids), 0);
	read_b(&c, &ids, got);
	ck_assert_mem_eq(got, want, sizeof(got));
	/* The build, applied before the checkpoint, sent again as a
	 * resuming guest whose reply was lost sends it: answered from what
	 * the restore built (a build again would fail: the program has
	 * kernels), its kernel described. */
	{
		struct cmx_BuildProgram_out out = {0};
		uint8_t *keep = NULL;
		struct cmx_hdr h;
		memcpy(&h, ids.build, CMX_HDR_SIZE);
		c.seq = h.seq;
		send_raw(c.fd, ids.build, ids.build_len);
		ck_assert_int_eq(recv_reply(&c, &cmx_desc_BuildProgram_out, &out, &keep),
				 CL_SUCCESS);
		ck_assert_uint_eq(out.kernels.n, 1);
		free(keep);
		c.seq = 1000;
	}
	/* The link, a call that made its program, sent again the same way:
	 * answered from the program the restore linked (made again, its id
	 * would be refused as taken), its kernel described. */
	{
		struct cmx_LinkProgram_out out = {0};
		uint8_t *keep = NULL;
		struct cmx_hdr h;
		ck_assert_uint_gt(ids.link_len, 0);
		memcpy(&h, ids.link, CMX_HDR_SIZE);
		c.seq = h.seq;
		send_raw(c.fd, ids.link, ids.link_len);
		ck_assert_int_eq(recv_reply(&c, &cmx_desc_LinkProgram_out, &out, &keep),
				 CL_SUCCESS);
		ck_assert_uint_eq(out.kernels.n, 1);
		free(keep);
		c.seq = 1000;
	}
	/* Its count of messages goes on from the checkpoint's: this read,
	 * the build, the link and the GetStats asking. */
	ck_assert_uint_gt(ids.applied, 0);
	ck_assert_uint_eq(messages_of(&c), ids.applied + 4);
	/* Nothing of the damaged one, and no session for a wrong token. */
	ck_assert_int_ne(resume(&cb, &bad), 0);
	close(cb.fd);
	ids.token ^= 1;
	ck_assert_int_ne(resume(&cb, &ids), 0);
	close(cb.fd);
	ids.token ^= 1;
	reads_flushed(&c, &ids, pid, want);
	close(c.fd);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	dir_remove();
}
END_TEST

/* Source of about SMALL_SRC bytes (a comment pads it), or build options
 * of about SMALL_OPTS bytes: the caller frees it. */
static char *padded(int options)
{
	size_t n = options ? SMALL_OPTS : SMALL_SRC, len = 0;
	char *p = malloc(n + sizeof(src) + 64);

	ck_assert_ptr_nonnull(p);
	if (options) {
		for (unsigned i = 0; len + 32 < n; i++)
			len += (size_t)sprintf(p + len, "-DPAD%u=%u ", i, i);
	} else {
		len = (size_t)sprintf(p, "%s/*", src);
		memset(p + len, 'x', n - len);
		len = n;
		len += (size_t)sprintf(p + len, "*/\n");
	}
	p[len] = '\0';
	return p;
}

/* The virtual platform of tenant small. */
static void small_init(struct e2e_plat *v)
{
	char server[128];

	snprintf(server, sizeof(server), "unix:%s", small);
	setenv("CLMUX_SERVER", server, 1);
	ck_assert_int_eq(e2e_plat_init(v, "virtual", e2e_virtual_match()), 0);
}

/* With --state-dir the requests a checkpoint needs are memory the daemon
 * holds for the tenant: charged to its mem quota, a call whose record
 * would pass it failing with CL_OUT_OF_HOST_MEMORY, and given back when
 * the guest releases what they made. */
START_TEST(records_charged)
{
	pid_t pid = daemon_start("off");
	char *big = padded(0), *opts = padded(1);
	const char *bigc = big, *srcc = src;
	struct e2e_plat v;
	uint64_t base, mem;
	cl_program p, q;
	cl_int e;
	int st;

	small_init(&v);
	/* Its creations have reached the daemon. */
	E2E_OK(&v, clFinish(v.queue));
	base = admin_tenant_field(admin, "small", "mem");
	/* Its context and queues are kept: a few hundred bytes. */
	ck_assert_uint_gt(base, 0);
	ck_assert_uint_lt(base, 4096);
	p = clCreateProgramWithSource(v.context, 1, &bigc, NULL, &e);
	E2E_OK(&v, e);
	E2E_OK(&v, clBuildProgram(p, 1, &v.device, NULL, NULL, NULL));
	mem = admin_tenant_field(admin, "small", "mem");
	ck_assert_uint_ge(mem, base + SMALL_SRC);
	/* Its source and these options together pass the quota. */
	E2E_EXPECT(&v, clBuildProgram(p, 1, &v.device, opts, NULL, NULL), CL_OUT_OF_HOST_MEMORY);
	ck_assert_uint_eq(admin_tenant_field(admin, "small", "mem"), mem);
	/* Released, its records go: the options fit now. */
	E2E_OK(&v, clReleaseProgram(p));
	E2E_OK(&v, clFinish(v.queue));
	admin_field_becomes(admin, "small", "mem", base);
	q = clCreateProgramWithSource(v.context, 1, &srcc, NULL, &e);
	E2E_OK(&v, e);
	E2E_OK(&v, clBuildProgram(q, 1, &v.device, opts, NULL, NULL));
	E2E_OK(&v, clReleaseProgram(q));
	E2E_OK(&v, clFinish(v.queue));
	admin_field_becomes(admin, "small", "mem", base);
	e2e_plat_fini(&v);
	free(big);
	free(opts);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	dir_remove();
}
END_TEST

/* After an admin checkpoint, the one state file holds one
 * CreateProgramWithParts, its payload the size bytes of want. */
static void parts_checked(const char *want, size_t size)
{
	struct cmx_state_reader r;
	struct cmx_state_rec rec;
	char name[256] = "", *reply = ask(admin, "checkpoint\n");
	struct dirent *e;
	const void *p;
	int dfd, found = 0, same = 0;
	size_t n;
	DIR *d;

	ck_assert_msg(!strncmp(reply, "ok\n1 sessions written", 21), "checkpoint: %s", reply);
	free(reply);
	ck_assert_ptr_nonnull(d = opendir(state));
	while ((e = readdir(d)))
		if (strstr(e->d_name, ".state"))
			snprintf(name, sizeof(name), "%s", e->d_name);
	closedir(d);
	dfd = open(state, O_RDONLY | O_DIRECTORY);
	ck_assert_int_eq(cmx_state_map(dfd, name, &p, &n), 0);
	ck_assert_int_eq(cmx_state_open(&r, p, n), 0);
	while (cmx_state_next(&r, &rec) == 1)
		if (rec.type == CMX_STATE_CALL && rec.hdr.op == CMX_OP_CreateProgramWithParts) {
			found++;
			same = rec.hdr.bulk == size && rec.bulk && !memcmp(rec.bulk, want, size);
		}
	cmx_state_unmap(p, n);
	close(dfd);
	ck_assert_msg(found == 1 && same, "CreateProgramWithParts kept %d times, its source %s",
		      found, same ? "whole" : "not whole");
}

/* A program whose source came in parts (over 16 MiB) is kept as its
 * creation with the whole source as payload; a restarted daemon replays
 * it, and keeps it again. */
START_TEST(parts_kept)
{
	const size_t size = 20u << 20;
	pid_t pid = daemon_start("off");
	char *big = e2e_xmalloc(size + 1);
	const char *bigc = big;
	struct e2e_plat v;
	cl_program prog;
	cl_int err;
	int st;

	memset(big, ' ', size);
	memcpy(big, "// e2e: parts", 13);
	big[size] = 0;
	ck_assert_int_eq(e2e_plat_init(&v, "virtual", e2e_virtual_match()), 0);
	prog = clCreateProgramWithSource(v.context, 1, &bigc, NULL, &err);
	E2E_OK(&v, err);
	parts_checked(big, size);
	/* Checkpointed at SIGTERM, restored by the next daemon. */
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	pid = daemon_again("off", 0);
	parts_checked(big, size);
	clReleaseProgram(prog);
	free(big);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	dir_remove();
}
END_TEST

/* A checkpoint between a program's parts (3 MiB of source, the first
 * 2 MiB staged): the restore stages them again, and the resumed guest's
 * last part and creation make the program, which builds. Without the
 * staged parts in the state file the creation finds none. */
START_TEST(parts_staged)
{
	const size_t len = 3u << 20, first = 2u << 20;
	const uint64_t ctx = CMX_FIRST_GUEST_ID + 100, prog = ctx + 10;
	pid_t pid = daemon_start("off");
	char *text = malloc(len);
	struct client c = {0};
	struct ids ids = {0};
	uint64_t devs[1] = {1};
	int st, i;

	ck_assert_ptr_nonnull(text);
	memset(text, ' ', len);
	memcpy(text, src, sizeof(src) - 1);
	hello_at(&c, sock);
	queue_and_buffer(&c, ctx, 64);
	struct cmx_ProgramPart_in p1 = {
	    .program = prog, .offset = 0, .total = len, .data = {text, first}};
	send_msg(&c, &cmx_desc_ProgramPart_in, &p1, 0, NULL, 0);
	/* Applied before the checkpoint. */
	ck_assert_uint_gt(messages_of(&c), 0);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	close(c.fd);
	ids.session = c.session;
	ids.token = c.token;
	pid = daemon_again("off", 0);
	for (i = 0; i < 3000 && resume(&c, &ids); i++) {
		close(c.fd);
		usleep(10000);
	}
	ck_assert_int_lt(i, 3000);
	struct cmx_ProgramPart_in p2 = {
	    .program = prog, .offset = first, .total = len, .data = {text + first, len - first}};
	send_msg(&c, &cmx_desc_ProgramPart_in, &p2, 0, NULL, 0);
	struct cmx_CreateProgramWithParts_in cp = {
	    .program = {prog}, .context = {ctx}, .il = 0, .length = len};
	struct cmx_CreateProgramWithParts_out out;
	send_msg(&c, &cmx_desc_CreateProgramWithParts_in, &cp, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&c, &cmx_desc_CreateProgramWithParts_out, &out, NULL),
			 CL_SUCCESS);
	struct cmx_BuildProgram_in b = {.program = {prog}, .devices = {.v = devs, .n = 1}};
	struct cmx_BuildProgram_out bo = {0};
	uint8_t *keep = NULL;
	send_msg(&c, &cmx_desc_BuildProgram_in, &b, 1, NULL, 0);
	ck_assert_int_eq(recv_reply(&c, &cmx_desc_BuildProgram_out, &bo, &keep), CL_SUCCESS);
	ck_assert_uint_eq(bo.kernels.n, 1);
	free(keep);
	close(c.fd);
	free(text);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	dir_remove();
}
END_TEST

/* Binaries of 20 MiB, made in parts (the program's own binary, padded),
 * are kept: after a SIGTERM's checkpoint and the restore, a kernel made
 * from the program computes what the native run does. */
START_TEST(binary_parts_kept)
{
	const size_t total = 20u << 20;
	static uint32_t a[N], want[N], got[N];
	pid_t pid = daemon_start("off");
	struct e2e_plat nat, v;
	unsigned char *bin = calloc(1, total);
	const unsigned char *binc = bin;
	size_t size = 0, g = N;
	cl_int err, status = 1;
	uint32_t k = 7;
	int st;

	ck_assert_ptr_nonnull(bin);
	e2e_rand_u32(a, N, 31, 0);
	ck_assert_int_eq(e2e_plat_init(&nat, "native", e2e_native_match()), 0);
	scramble_run(&nat, a, k, want);
	ck_assert_int_eq(e2e_plat_init(&v, "virtual", e2e_virtual_match()), 0);
	cl_program built = e2e_program_build(&v, src, NULL);
	E2E_OK(&v, clGetProgramInfo(built, CL_PROGRAM_BINARY_SIZES, sizeof(size), &size, NULL));
	ck_assert(size > 0 && size < total);
	E2E_OK(&v, clGetProgramInfo(built, CL_PROGRAM_BINARIES, sizeof(bin), &bin, NULL));
	E2E_OK(&v, clReleaseProgram(built));
	cl_program prog = clCreateProgramWithBinary(v.context, 1, &v.device, &total, &binc, &status, &err);
	E2E_OK(&v, err);
	ck_assert_int_eq(status, CL_SUCCESS);
	E2E_OK(&v, clBuildProgram(prog, 1, &v.device, NULL, NULL, NULL));
	E2E_OK(&v, clFinish(v.queue));
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	pid = daemon_again("off", 0);
	/* The next calls resume the session. */
	cl_kernel kern = e2e_kernel_create(&v, prog, "scramble");
	cl_mem ma = e2e_buffer_create(&v, CL_MEM_COPY_HOST_PTR, N * 4, a);
	cl_mem mb = e2e_buffer_create(&v, CL_MEM_READ_WRITE, N * 4, NULL);
	E2E_OK(&v, clSetKernelArg(kern, 0, sizeof(ma), &ma));
	E2E_OK(&v, clSetKernelArg(kern, 1, sizeof(mb), &mb));
	E2E_OK(&v, clSetKernelArg(kern, 2, sizeof(k), &k));
	E2E_OK(&v, clEnqueueNDRangeKernel(v.queue, kern, 1, NULL, &g, NULL, 0, NULL, NULL));
	E2E_OK(&v, clEnqueueReadBuffer(v.queue, mb, CL_TRUE, 0, N * 4, got, 0, NULL, NULL));
	ck_assert_mem_eq(got, want, sizeof(got));
	clReleaseMemObject(ma);
	clReleaseMemObject(mb);
	clReleaseKernel(kern);
	clReleaseProgram(prog);
	free(bin);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	dir_remove();
}
END_TEST

/* A kernel argument set again replaces its kept value, charge and all;
 * a released buffer that a kernel's argument names stays kept (and
 * charged) until the argument names another. */
START_TEST(records_replaced)
{
	pid_t pid = daemon_start("off");
	struct e2e_plat v;
	cl_program p;
	cl_kernel k;
	cl_mem b, c;
	uint64_t m1, m2;
	cl_int e;
	int st;

	small_init(&v);
	p = e2e_program_build(&v, src, NULL);
	k = e2e_kernel_create(&v, p, "scramble");
	b = clCreateBuffer(v.context, CL_MEM_READ_WRITE, 4096, NULL, &e);
	E2E_OK(&v, e);
	c = clCreateBuffer(v.context, CL_MEM_READ_WRITE, 4096, NULL, &e);
	E2E_OK(&v, e);
	E2E_OK(&v, clSetKernelArg(k, 0, sizeof(b), &b));
	for (uint32_t i = 0; i < 2; i++)
		E2E_OK(&v, clSetKernelArg(k, 2, sizeof(i), &i));
	E2E_OK(&v, clFinish(v.queue));
	m1 = admin_tenant_field(admin, "small", "mem");
	for (uint32_t i = 0; i < 64; i++)
		E2E_OK(&v, clSetKernelArg(k, 2, sizeof(i), &i));
	E2E_OK(&v, clFinish(v.queue));
	ck_assert_uint_eq(admin_tenant_field(admin, "small", "mem"), m1);
	/* Its device memory goes; its records stay, for the argument. */
	E2E_OK(&v, clReleaseMemObject(b));
	E2E_OK(&v, clFinish(v.queue));
	m2 = admin_tenant_field(admin, "small", "mem");
	ck_assert_uint_eq(m2, m1 - 4096);
	E2E_OK(&v, clSetKernelArg(k, 0, sizeof(c), &c));
	E2E_OK(&v, clFinish(v.queue));
	ck_assert_uint_lt(admin_tenant_field(admin, "small", "mem"), m2);
	E2E_OK(&v, clReleaseKernel(k));
	E2E_OK(&v, clReleaseProgram(p));
	E2E_OK(&v, clReleaseMemObject(c));
	e2e_plat_fini(&v);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	dir_remove();
}
END_TEST

#define RESUME_ITERS 24
#define RESUME_AT    4
#define RESUME_HELD  1000u

/* The application of guest_resume: a loop of write, kernel and read whose
 * every result must equal the native run's; after each iteration it
 * writes the iteration's number to fd. In iteration RESUME_AT, with its
 * write sent and its kernel's calls still in the ICD's batch, it writes
 * RESUME_HELD and waits for a byte on go before it reads. Exits 0 when
 * all matched. */
static void resume_app(int fd, int go)
{
	static uint32_t a[N], want[N], got[N];
	struct e2e_plat nat, v;
	cl_program prog;
	cl_kernel kern;
	cl_mem ma, mb;
	size_t g = N;
	cl_int e;

	/* The ICD's defaults on the transport daemon_again() named (unix,
	 * or shm's rings): a shared area whose heap holds ma
	 * (CL_MEM_ALLOC_HOST_PTR), and payloads in its blocks. */
	if (e2e_plat_init(&nat, "native", e2e_native_match()) ||
	    e2e_plat_init(&v, "virtual", e2e_virtual_match()))
		_exit(2);
	prog = e2e_program_build(&v, src, NULL);
	kern = e2e_kernel_create(&v, prog, "scramble");
	ma = clCreateBuffer(v.context, CL_MEM_READ_WRITE | CL_MEM_ALLOC_HOST_PTR, N * 4, NULL, &e);
	mb = clCreateBuffer(v.context, CL_MEM_READ_WRITE, N * 4, NULL, &e);
	if (!ma || !mb || clSetKernelArg(kern, 0, sizeof(ma), &ma) ||
	    clSetKernelArg(kern, 1, sizeof(mb), &mb))
		_exit(3);
	for (uint32_t i = 0; i < RESUME_ITERS; i++) {
		e2e_rand_u32(a, N, 100 + i, 0);
		scramble_run(&nat, a, i, want);
		uint32_t held = RESUME_HELD;
		char byte;
		if ((e = clEnqueueWriteBuffer(v.queue, ma, i != RESUME_AT, 0, N * 4, a, 0, NULL,
					      NULL)) ||
		    (e = clSetKernelArg(kern, 2, sizeof(i), &i)) ||
		    (e = clEnqueueNDRangeKernel(v.queue, kern, 1, NULL, &g, NULL, 0, NULL, NULL)) ||
		    (i == RESUME_AT &&
		     (write(fd, &held, sizeof(held)) != sizeof(held) || read(go, &byte, 1) != 1)) ||
		    (e = clEnqueueReadBuffer(v.queue, mb, CL_TRUE, 0, N * 4, got, 0, NULL, NULL))) {
			fprintf(stderr, "resume_app: iteration %u: error %d\n", i, e);
			_exit(4);
		}
		if (memcmp(got, want, sizeof(got))) {
			fprintf(stderr, "resume_app: iteration %u: checksum differs\n", i);
			_exit(5);
		}
		if (write(fd, &i, sizeof(i)) != sizeof(i))
			_exit(6);
	}
	_exit(0);
}

/* resume_app() in a child process (env, when given, sets its environment
 * first), once it holds in iteration RESUME_AT: its pid; *rd reads its
 * iterations, a byte on *go lets it go on. */
static pid_t app_held(int *rd, int *go, void (*env)(const void *arg), const void *arg)
{
	int pfd[2], gfd[2];
	uint32_t i = 0;
	pid_t app;

	ck_assert_int_eq(pipe(pfd), 0);
	ck_assert_int_eq(pipe(gfd), 0);
	app = fork();
	ck_assert_int_ge(app, 0);
	if (app == 0) {
		close(pfd[0]);
		close(gfd[1]);
		if (env)
			env(arg);
		resume_app(pfd[1], gfd[0]);
	}
	close(pfd[1]);
	close(gfd[0]);
	while (read(pfd[0], &i, sizeof(i)) == sizeof(i) && i != RESUME_HELD)
		;
	ck_assert_uint_eq(i, RESUME_HELD);
	*rd = pfd[0];
	*go = gfd[1];
	return app;
}

/* Lets app_held()'s application go on (go: -1 when it was let go
 * already); it must finish its loop with every result right. */
static void app_finishes(pid_t app, int rd, int go)
{
	uint32_t i = 0, last = 0;
	int st;

	if (go >= 0) {
		ck_assert_int_eq(write(go, "", 1), 1);
		close(go);
	}
	while (read(rd, &i, sizeof(i)) == sizeof(i))
		last = i;
	ck_assert_int_eq(waitpid(app, &st, 0), app);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the application failed: %d", st);
	ck_assert_uint_eq(last, RESUME_ITERS - 1);
	close(rd);
}

/* An application's daemon is checkpointed (SIGTERM) and restarted with the
 * same --state-dir in the middle of its loop, with a write applied and
 * the kernel's argument and launch not yet sent: the guest ICD resumes its
 * session (its shared area too: the kernel's input lives there), sends
 * again what the daemon had not applied, and every iteration's result
 * equals the native run's, with no error seen. */
static void guest_resume_with(const char *workers)
{
	pid_t pid = daemon_start(workers), app;
	int rd, go, st;

	app = app_held(&rd, &go, NULL, NULL);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	/* Its next call finds the daemon gone and resumes once it is back:
	 * it goes on before the new daemon starts. */
	ck_assert_int_eq(write(go, "", 1), 1);
	close(go);
	pid = daemon_again(workers, 0);
	app_finishes(app, rd, -1);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	dir_remove();
}

START_TEST(guest_resume)
{
	guest_resume_with("off");
}
END_TEST

/* The same with worker processes: the tenant's worker writes the session
 * and its successor restores it. */
START_TEST(guest_resume_workers)
{
	guest_resume_with("on");
}
END_TEST

/* pid_repeated's state file: its name as written, and the one it gets. */
static char repeated_from[256], repeated_to[256];

/* The state file renamed as a clmuxd of this pid would name its own
 * checkpoint's if it told them by its pid alone
 * ("<key>-p<pid>-<tenant>-<session>.state"): what a predecessor of the
 * same pid leaves in a container, where every start gets the same pids. */
static void name_as_pid(pid_t pid)
{
	const char *d1 = strchr(repeated_from, '-'), *d2 = d1 ? strchr(d1 + 1, '-') : NULL;
	char from[400], to[400];

	ck_assert_ptr_nonnull(d2);
	snprintf(repeated_to, sizeof(repeated_to), "%.*s-p%d%s", (int)(d1 - repeated_from),
		 repeated_from, (int)pid, d2);
	snprintf(from, sizeof(from), "%s/%s", state, repeated_from);
	snprintf(to, sizeof(to), "%s/%s", state, repeated_to);
	ck_assert_int_eq(rename(from, to), 0);
}

/*
 * A daemon in a fresh pid namespace (a container) gets the same pid at
 * every start. A state file named with the pid of the daemon that
 * restores it, as a predecessor of that pid named its own by the pid
 * alone, is one to restore: a checkpoint asked for as the daemon starts
 * counts its session (it does not remove the file as the daemon's own
 * last checkpoint's), the file is restored, the resumed session finds
 * its buffer's bytes where its kernel left them, and the directory
 * holds the session whole after the daemon dies.
 */
START_TEST(pid_repeated)
{
	static uint32_t a[N], want[N], got[N];
	pid_t pid = daemon_start("off"), app;
	struct client c = {0};
	struct ids ids;
	char *reply, file[256];
	int st;

	app = session_apart(a, want);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	kill(app, SIGKILL);
	ck_assert_int_eq(waitpid(app, &st, 0), app);
	state_check(a, want, &ids, file);
	snprintf(repeated_from, sizeof(repeated_from), "%s", file);
	before_exec = name_as_pid;
	pid = daemon_again("off", 0);
	before_exec = NULL;
	reply = ask(admin, "checkpoint\n");
	ck_assert_msg(!strncmp(reply, "ok\n1 sessions written", 21), "checkpoint: %s", reply);
	free(reply);
	for (int i = 0; i < 3000 && exists(repeated_to); i++)
		usleep(10000);
	ck_assert_msg(!exists(repeated_to), "%s was not restored", repeated_to);
	ck_assert_int_eq(resume(&c, &ids), 0);
	read_b(&c, &ids, got);
	ck_assert_mem_eq(got, want, sizeof(got));
	close(c.fd);
	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	state_check(a, want, &ids, file);
	dir_remove();
}
END_TEST

/* A loopback port free now (the daemon binds it right after). */
static int free_port(void)
{
	struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ck_assert_int_eq(bind(fd, (struct sockaddr *)&sin, len), 0);
	ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sin, &len), 0);
	close(fd);
	return ntohs(sin.sin_port);
}

/* The one state file of the directory: its name. */
static void the_file(char *name, size_t len)
{
	DIR *d = opendir(state);
	struct dirent *e;
	unsigned files = 0;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		if (strstr(e->d_name, ".state")) {
			snprintf(name, len, "%s", e->d_name);
			files++;
		}
	closedir(d);
	ck_assert_uint_eq(files, 1);
}

/* A raw Hello resuming ids through the Unix listener (tenant default's
 * worker), asked again while the session is still being restored there:
 * its status once that is over. */
static int resume_settled(const struct ids *ids)
{
	struct client c = {0};
	int e;

	while ((e = resume(&c, ids)) == CL_DEVICE_NOT_AVAILABLE) {
		close(c.fd);
		usleep(10000);
	}
	close(c.fd);
	return e;
}

/*
 * State files name the worker that wrote them, and only that worker
 * restores them: the one its guests come back to. An application of
 * tenant default reaches the daemon over a TLS listener shared by tokens
 * (worker l:2; a VM device's worker v:0 beside it, both serving any
 * tenant): SIGTERM writes its session as l:2's. The restarted daemon
 * restores it in l:2 alone, where the application resumes by itself and
 * finishes with every result equal to the native run's; tenant default's
 * own worker t:default (its peers on the Unix listener) does not have it:
 * a resuming Hello there is refused, not answered "still restoring".
 * Copies of the file, named as an older clmuxd named its files
 * ("<key>-p<pid>-"): one named as v:0's is restored by v:0 and not by
 * t:default; one named as t:default's, and one of tenant other, start
 * those tenants' workers with the daemon (neither has a listener of its
 * own), which restore them before any guest comes.
 */
/* app_held()'s environment: the TLS listener on tls_port, its CA cert. */
static int tls_port;

static void tls_env(const void *cert)
{
	char server[64];

	snprintf(server, sizeof(server), "tls:127.0.0.1:%d", tls_port);
	setenv("CLMUX_SERVER", server, 1);
	setenv("CLMUX_TOKEN", "0123456789abcdef0123456789abcdef", 1);
	setenv("CLMUX_TLS_CA", cert, 1);
}

START_TEST(listener_worker)
{
	char cert[128], key[128], tokens[128], cmd[512], file[256], name[200];
	char vfile[160], ofile[160], dfile[160], *reply;
	int rd, go, st, port = free_port();
	struct cmx_state_head head;
	struct ids ids = {0}, vids, dids;
	pid_t pid, app;
	FILE *f;

	ck_assert_ptr_nonnull(mkdtemp(strcpy(dir, "/tmp/clmux-ckpt-XXXXXX")));
	snprintf(cert, sizeof(cert), "%s/cert.pem", dir);
	snprintf(key, sizeof(key), "%s/key.pem", dir);
	snprintf(tokens, sizeof(tokens), "%s/tokens", dir);
	snprintf(cmd, sizeof(cmd),
		 "openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 "
		 "-subj /CN=clmux-e2e -addext subjectAltName=IP:127.0.0.1 -keyout '%s' "
		 "-out '%s' 2>/dev/null",
		 key, cert);
	ck_assert_msg(system(cmd) == 0, "openssl could not make a certificate");
	f = fopen(tokens, "w");
	ck_assert_ptr_nonnull(f);
	ck_assert_int_eq(fchmod(fileno(f), 0600), 0);
	fprintf(f, "default 0123456789abcdef0123456789abcdef\n");
	ck_assert_int_eq(fclose(f), 0);
	snprintf(extra[0], sizeof(extra[0]), "tcp:127.0.0.1:%d,tokens=%s,tls=%s:%s", port, tokens,
		 cert, key);
	snprintf(extra[1], sizeof(extra[1]), "vhost-user-vsock:%s/vm.sock,cid=3", dir);
	default_by_uid = 1;
	pid = daemon_again("on", 0);

	tls_port = port;
	app = app_held(&rd, &go, tls_env, cert);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);

	/* Written once, as the TLS listener's worker's (the third --listen). */
	the_file(file, sizeof(file));
	ck_assert_msg(!strncmp(file, "l_2-i", 5) && strlen(file) > 22 && file[21] == '-',
		      "state file %s", file);
	{
		int dfd = open(state, O_RDONLY | O_DIRECTORY);
		ck_assert_int_eq(cmx_state_head_read(dfd, file, &head), 0);
		close(dfd);
	}
	ck_assert_str_eq(head.tenant, "default");
	ids.session = head.session;
	ids.token = head.token;
	vids = ids;
	vids.session = ids.session + 1000;
	snprintf(vfile, sizeof(vfile), "v_0-p1-default-%llu.state",
		 (unsigned long long)vids.session);
	file_clone_as(file, vfile, vids.session, NULL);
	snprintf(ofile, sizeof(ofile), "t_other-p1-other-%llu.state",
		 (unsigned long long)ids.session + 2000);
	file_clone_as(file, ofile, ids.session + 2000, "other");
	dids = ids;
	dids.session = ids.session + 3000;
	snprintf(dfile, sizeof(dfile), "t_default-p1-default-%llu.state",
		 (unsigned long long)dids.session);
	file_clone_as(file, dfile, dids.session, NULL);

	/* The admin socket is answered by the front end's loop, which runs
	 * once the workers the files need are started. */
	pid = daemon_again("on", 0);
	reply = ask(admin, "workers\n");
	ck_assert_msg(strstr(reply, "t:other") && strstr(reply, "t:default"),
		      "no worker for tenant other or default: %s", reply);
	free(reply);
	for (int k = 0; k < 3000 && (exists(ofile) || exists(vfile) || exists(dfile)); k++)
		usleep(10000);
	ck_assert_msg(!exists(ofile), "%s was not restored", ofile);
	ck_assert_msg(!exists(vfile), "%s was not restored", vfile);
	ck_assert_msg(!exists(dfile), "%s was not restored", dfile);
	snprintf(name, sizeof(name), "%s.bad", ofile);
	ck_assert(!exists(name));

	/* The application resumes through the TLS listener. */
	app_finishes(app, rd, go);
	ck_assert(!exists(file));
	/* Neither session is tenant default's own worker's as well; the
	 * one named as its own is. */
	ck_assert_int_eq(resume_settled(&ids), CL_INVALID_VALUE);
	ck_assert_int_eq(resume_settled(&vids), CL_INVALID_VALUE);
	{
		struct client c = {0};
		ck_assert_int_eq(resume(&c, &dids), 0);
		close(c.fd);
	}

	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	extra[0][0] = extra[1][0] = '\0';
	default_by_uid = 0;
	dir_remove();
}
END_TEST

#define HELD_READS 16
#define HELD_BYTES 4096

static atomic_int held_in, held_go;

/* Holds the notification thread (callbacks run on it) until let go. */
static void CL_CALLBACK hold(cl_event e, cl_int status, void *arg)
{
	(void)e;
	(void)status;
	(void)arg;
	atomic_store(&held_in, 1);
	while (!atomic_load(&held_go))
		usleep(1000);
}

/* The application of notify_drained: b computed, the notification thread
 * held in a callback, non-blocking reads of b whose ReadDone wait unread
 * in the old daemon's channel; after the restart a blocking write resumes
 * the session on this thread, then the callback ends. Exit status 0: the
 * reads' bytes are the native run's. */
static void held_app(int ready, int go)
{
	static uint32_t a[N], want[N], got[HELD_READS][HELD_BYTES / 4];
	struct e2e_plat nat, v;
	cl_event marker;
	char byte;

	e2e_rand_u32(a, N, 29, 0);
	if (e2e_plat_init(&nat, "native", e2e_native_match()))
		_exit(2);
	scramble_run(&nat, a, 7, want);
	if (e2e_plat_init(&v, "virtual", e2e_virtual_match()))
		_exit(2);
	cl_program prog = e2e_program_build(&v, src, NULL);
	cl_kernel kern = e2e_kernel_create(&v, prog, "scramble");
	cl_mem ma = e2e_buffer_create(&v, CL_MEM_COPY_HOST_PTR, N * 4, a);
	cl_mem mb = e2e_buffer_create(&v, CL_MEM_READ_WRITE, N * 4, NULL);
	uint32_t k = 7;
	size_t g = N;
	if (clSetKernelArg(kern, 0, sizeof(ma), &ma) || clSetKernelArg(kern, 1, sizeof(mb), &mb) ||
	    clSetKernelArg(kern, 2, sizeof(k), &k) ||
	    clEnqueueNDRangeKernel(v.queue, kern, 1, NULL, &g, NULL, 0, NULL, NULL) ||
	    clEnqueueMarkerWithWaitList(v.queue, 0, NULL, &marker) ||
	    clSetEventCallback(marker, CL_COMPLETE, hold, NULL))
		_exit(3);
	clFlush(v.queue);
	while (!atomic_load(&held_in))
		usleep(1000);
	for (unsigned i = 0; i < HELD_READS; i++)
		if (clEnqueueReadBuffer(v.queue, mb, CL_FALSE, i * HELD_BYTES, HELD_BYTES, got[i], 0,
					NULL, NULL))
			_exit(4);
	/* A blocking write behind them, on a queue of its own (on theirs it
	 * would wait for their data, which waits for the callback): the
	 * daemon has taken them. */
	cl_int e;
	cl_command_queue q2 = clCreateCommandQueueWithProperties(v.context, v.device, NULL, &e);
	if (!q2 || clEnqueueWriteBuffer(q2, ma, CL_TRUE, 0, 4, a, 0, NULL, NULL) ||
	    write(ready, "", 1) != 1 || read(go, &byte, 1) != 1)
		_exit(5);
	/* The daemon is back: this call resumes the session. */
	if (clEnqueueWriteBuffer(q2, ma, CL_TRUE, 0, 4, a, 0, NULL, NULL))
		_exit(6);
	atomic_store(&held_go, 1);
	if (clFinish(v.queue))
		_exit(7);
	for (unsigned i = 0; i < HELD_READS; i++)
		if (memcmp(got[i], want + i * (HELD_BYTES / 4), HELD_BYTES))
			_exit(8);
	_exit(0);
}

/* Notifications the old daemon sent before it stopped, still unread when
 * another thread of the application resumes the session (its
 * notification thread was in a callback), are read before the new
 * daemon's: a resume sends none of them again. Over shm the new daemon's
 * ring replaces the old one. */
START_TEST(notify_drained)
{
	pid_t pid = daemon_start("off"), app;
	int rfd[2], gfd[2], st;
	char byte;

	ck_assert_int_eq(pipe(rfd), 0);
	ck_assert_int_eq(pipe(gfd), 0);
	app = fork();
	ck_assert_int_ge(app, 0);
	if (app == 0) {
		close(rfd[0]);
		close(gfd[1]);
		held_app(rfd[1], gfd[0]);
	}
	close(rfd[1]);
	close(gfd[0]);
	ck_assert_int_eq(read(rfd[0], &byte, 1), 1);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	pid = daemon_again("off", 0);
	ck_assert_int_eq(write(gfd[1], "", 1), 1);
	ck_assert_int_eq(waitpid(app, &st, 0), app);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the application: %d", st);
	close(rfd[0]);
	close(gfd[1]);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	dir_remove();
}
END_TEST

/* restart_sessions: applications, the words of each one's buffer r, and
 * the work-items of a step (each reads and rewrites FLEET_G words of r,
 * a window that moves with the iteration). */
#define FLEET	     8
#define FLEET_N	     16384
#define FLEET_G	     4096
#define FLEET_STEADY 3

static const char advance_src[] =
    "kernel void advance(global uint *r, global const uint *in, global uint *out, uint n,\n"
    "                    uint k)\n"
    "{\n"
    "	size_t j = get_global_id(0);\n"
    "	uint at = (uint)((j + (ulong)k * get_global_size(0)) % n);\n"
    "	uint v = r[at] * 2654435761u + in[j] + k;\n"
    "	out[j] = v;\n"
    "	r[at] = v;\n"
    "}\n";

/* One application's progress, in memory it shares with the test. */
struct fleet_app {
	_Atomic unsigned iters;
	_Atomic int ready;
};

/* An application's objects on one platform. */
struct fleet_objs {
	cl_kernel k;
	cl_mem r, in, out;
};

static int fleet_objs_make(struct e2e_plat *p, const uint32_t *r0, struct fleet_objs *o)
{
	const char *text = advance_src;
	cl_uint n = FLEET_N;
	cl_program prog;
	cl_int e;

	prog = clCreateProgramWithSource(p->context, 1, &text, NULL, &e);
	if (e || clBuildProgram(prog, 1, &p->device, NULL, NULL, NULL))
		return -1;
	o->k = clCreateKernel(prog, "advance", &e);
	clReleaseProgram(prog);
	o->r = clCreateBuffer(p->context, CL_MEM_COPY_HOST_PTR, FLEET_N * 4, (void *)r0, &e);
	o->in = clCreateBuffer(p->context, CL_MEM_READ_ONLY, FLEET_G * 4, NULL, &e);
	o->out = clCreateBuffer(p->context, CL_MEM_WRITE_ONLY, FLEET_G * 4, NULL, &e);
	if (!o->k || !o->r || !o->in || !o->out || clSetKernelArg(o->k, 0, sizeof(o->r), &o->r) ||
	    clSetKernelArg(o->k, 1, sizeof(o->in), &o->in) ||
	    clSetKernelArg(o->k, 2, sizeof(o->out), &o->out) ||
	    clSetKernelArg(o->k, 3, sizeof(n), &n))
		return -1;
	return clFinish(p->queue) ? -1 : 0;
}

/* Iteration k on p: in written, a step, out read into got. */
static cl_int fleet_step(struct e2e_plat *p, struct fleet_objs *o, const uint32_t *in, cl_uint k,
			 uint32_t *got)
{
	size_t g = FLEET_G;
	cl_int e;

	if ((e = clEnqueueWriteBuffer(p->queue, o->in, CL_FALSE, 0, FLEET_G * 4, in, 0, NULL,
				      NULL)) ||
	    (e = clSetKernelArg(o->k, 4, sizeof(k), &k)) ||
	    (e = clEnqueueNDRangeKernel(p->queue, o->k, 1, NULL, &g, NULL, 0, NULL, NULL)))
		return e;
	return clEnqueueReadBuffer(p->queue, o->out, CL_TRUE, 0, FLEET_G * 4, got, 0, NULL, NULL);
}

/* Application idx of restart_sessions: the same loop of write, kernel and
 * read on both platforms, each result compared, until *stop; then r read
 * whole on both and compared. Exits 0 when all matched, 4 on an error,
 * 5 on a difference. */
static void fleet_app_main(unsigned idx, struct fleet_app *st, _Atomic int *stop)
{
	static uint32_t r0[FLEET_N], in[FLEET_G], want[FLEET_N], got[FLEET_N];
	struct e2e_plat nat, v;
	struct fleet_objs on = {0}, ov = {0};

	e2e_rand_u32(r0, FLEET_N, 300 + idx, 0);
	if (e2e_plat_init(&nat, "native", e2e_native_match()) ||
	    e2e_plat_init(&v, "virtual", e2e_virtual_match()) || fleet_objs_make(&nat, r0, &on) ||
	    fleet_objs_make(&v, r0, &ov))
		_exit(3);
	st->ready = 1;
	for (cl_uint k = 0; !*stop; k++) {
		cl_int e;
		e2e_rand_u32(in, FLEET_G, ((uint64_t)idx << 32) | k, 0);
		if (fleet_step(&nat, &on, in, k, want))
			_exit(3);
		if ((e = fleet_step(&v, &ov, in, k, got))) {
			fprintf(stderr, "application %u: iteration %u: error %d\n", idx, k, e);
			_exit(4);
		}
		if (memcmp(got, want, FLEET_G * 4)) {
			fprintf(stderr, "application %u: iteration %u: result differs\n", idx, k);
			_exit(5);
		}
		st->iters++;
	}
	if (clEnqueueReadBuffer(nat.queue, on.r, CL_TRUE, 0, FLEET_N * 4, want, 0, NULL, NULL))
		_exit(3);
	if (clEnqueueReadBuffer(v.queue, ov.r, CL_TRUE, 0, FLEET_N * 4, got, 0, NULL, NULL))
		_exit(4);
	_exit(memcmp(got, want, sizeof(got)) ? 5 : 0);
}

/* Until every application has done want[i] iterations (NULL: is ready);
 * one that ends before fails the test. */
static void fleet_reach(const pid_t *apps, struct fleet_app *st, const unsigned *want)
{
	for (unsigned i = 0; i < FLEET; i++) {
		int s;
		while (want ? st[i].iters < want[i] : !st[i].ready) {
			ck_assert_msg(waitpid(apps[i], &s, WNOHANG) == 0,
				      "application %u ended early: %d", i, s);
			usleep(10000);
		}
	}
}

/* FLEET applications at work, each its own session, when the daemon is
 * checkpointed (SIGTERM) and restarted on the same --state-dir: every
 * ICD resumes its session by itself, and every result before and after,
 * and each buffer at the end, equals the native run's, with no error. */
static void restart_sessions_with(const char *workers)
{
	size_t bytes = FLEET * sizeof(struct fleet_app) + sizeof(_Atomic int);
	struct fleet_app *st =
	    mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	_Atomic int *stop = (_Atomic int *)(st + FLEET);
	pid_t pid = daemon_start(workers), apps[FLEET];
	unsigned want[FLEET];
	int s;

	ck_assert_ptr_ne(st, MAP_FAILED);
	/* Forked before this process makes any OpenCL call: each its own
	 * ICD session. */
	for (unsigned i = 0; i < FLEET; i++) {
		apps[i] = fork();
		ck_assert_int_ge(apps[i], 0);
		if (!apps[i])
			fleet_app_main(i, &st[i], stop);
	}
	fleet_reach(apps, st, NULL);
	for (unsigned i = 0; i < FLEET; i++)
		want[i] = FLEET_STEADY;
	fleet_reach(apps, st, want);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &s, 0), pid);
	for (unsigned i = 0; i < FLEET; i++)
		want[i] = st[i].iters + FLEET_STEADY;
	pid = daemon_again(workers, 0);
	fleet_reach(apps, st, want);
	*stop = 1;
	for (unsigned i = 0; i < FLEET; i++) {
		ck_assert_int_eq(waitpid(apps[i], &s, 0), apps[i]);
		ck_assert_msg(WIFEXITED(s) && WEXITSTATUS(s) == 0, "application %u: %d", i, s);
	}
	munmap(st, bytes);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &s, 0), pid);
	dir_remove();
}

START_TEST(restart_sessions)
{
	restart_sessions_with("off");
}
END_TEST

/* The same with workers: the front end hands the resuming connections to
 * the tenant's new worker, which restores every session. */
START_TEST(restart_sessions_workers)
{
	restart_sessions_with("on");
}
END_TEST

/* A state file whose replay fails once its session is made (bytes for a
 * buffer it does not have, before any call): the session is closed, the
 * file kept as .bad, and the daemon goes on (an ASan build sees it touch
 * nothing of the closed session) and ends cleanly. */
START_TEST(replay_fails)
{
	struct cmx_state_writer *w = malloc(sizeof(*w));
	uint64_t head[3] = {0x4242, 0, 0};
	struct iovec iov = {head, sizeof(head)};
	char bad[300];
	pid_t pid;
	int dfd, st;

	ck_assert_ptr_nonnull(mkdtemp(strcpy(dir, "/tmp/clmux-ckpt-XXXXXX")));
	snprintf(state, sizeof(state), "%s/state", dir);
	ck_assert_int_eq(mkdir(state, 0700), 0);
	dfd = open(state, O_RDONLY | O_DIRECTORY);
	ck_assert_int_ge(dfd, 0);
	ck_assert_int_eq(cmx_state_begin(w, dfd, "p1-default-77.state", 77, 1234, 0, "default"), 0);
	cmx_state_put(w, CMX_STATE_CONTENTS, &iov, 1);
	ck_assert_int_eq(cmx_state_commit(w), 0);
	free(w);
	close(dfd);
	pid = daemon_again("off", 0);
	snprintf(bad, sizeof(bad), "%s/p1-default-77.state.bad", state);
	while (access(bad, F_OK))
		usleep(10000);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "clmuxd: %d", st);
	dir_remove();
}
END_TEST

/* A daemon with --state-dir killed without a checkpoint and started
 * again has no such session: it says so to the resuming guest, whose
 * session then fails at once (not after its minute of tries), as when a
 * daemon dies. */
START_TEST(resume_refused)
{
	pid_t pid = daemon_start("off"), app;
	int pfd[2], gfd[2], st;
	char byte;

	ck_assert_int_eq(pipe(pfd), 0);
	ck_assert_int_eq(pipe(gfd), 0);
	app = fork();
	ck_assert_int_ge(app, 0);
	if (app == 0) {
		struct e2e_plat v;
		char server[128];
		cl_int e;
		snprintf(server, sizeof(server), "unix:%s", sock);
		setenv("CLMUX_SERVER", server, 1);
		setenv("CLMUX_AREA_MB", "0", 1);
		if (e2e_plat_init(&v, "virtual", e2e_virtual_match()) || clFinish(v.queue) ||
		    write(pfd[1], "r", 1) != 1 || read(gfd[0], &byte, 1) != 1)
			_exit(2);
		e = clFinish(v.queue);
		_exit(e == CL_OUT_OF_RESOURCES ? 0 : 3);
	}
	close(pfd[1]);
	close(gfd[0]);
	ck_assert_int_eq(read(pfd[0], &byte, 1), 1);
	kill(pid, SIGKILL);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	pid = daemon_again("off", 0);
	ck_assert_int_eq(write(gfd[1], "", 1), 1);
	ck_assert_int_eq(waitpid(app, &st, 0), app);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the application: %d", st);
	close(pfd[0]);
	close(gfd[1]);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	dir_remove();
}
END_TEST

/* Without --state-dir nothing is kept, so nothing is charged, and a
 * checkpoint is refused with the reason. */
START_TEST(no_state_dir)
{
	char *big = padded(0), *reply;
	const char *bigc = big;
	struct e2e_plat v;
	cl_program p;
	cl_int e;
	pid_t pid;
	int st;

	stateless = 1;
	pid = daemon_start("off");
	small_init(&v);
	p = clCreateProgramWithSource(v.context, 1, &bigc, NULL, &e);
	E2E_OK(&v, e);
	E2E_OK(&v, clBuildProgram(p, 1, &v.device, NULL, NULL, NULL));
	E2E_OK(&v, clFinish(v.queue));
	ck_assert_uint_eq(admin_tenant_field(admin, "small", "mem"), 0);
	reply = ask(admin, "checkpoint\n");
	ck_assert_msg(strstr(reply, "error: no state directory"), "checkpoint: %s", reply);
	free(reply);
	E2E_OK(&v, clReleaseProgram(p));
	e2e_plat_fini(&v);
	free(big);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	dir_remove();
}
END_TEST

/* A state directory that others may read: the daemon does not start. */
START_TEST(open_dir_refused)
{
	const char *bin = getenv("CLMUXD");
	char listen[160];
	int st;
	pid_t pid;

	ck_assert_msg(bin && *bin, "CLMUXD unset");
	ck_assert_ptr_nonnull(mkdtemp(strcpy(dir, "/tmp/clmux-ckpt-XXXXXX")));
	snprintf(state, sizeof(state), "%s/state", dir);
	ck_assert_int_eq(mkdir(state, 0755), 0);
	ck_assert_int_eq(chmod(state, 0755), 0);
	snprintf(listen, sizeof(listen), "unix:%s/s.sock", dir);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		execl(bin, bin, "--listen", listen, "--admin", "none", "--state-dir", state,
		      "--workers", "off", (char *)NULL);
		_exit(127);
	}
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	ck_assert(WIFEXITED(st));
	ck_assert_int_ne(WEXITSTATUS(st), 0);
	ck_assert_int_ne(WEXITSTATUS(st), 127);
	dir_remove();
}
END_TEST

/* Events an application holds across a restart (events_resume): what it
 * asks of each, as seen on one platform. */
#define EV_N	    7
#define EV_RESTARTS 2
struct ev_seen {
	cl_int status[EV_N], type[EV_N], qerr[EV_N], cerr[EV_N];
	int queue_same[EV_N], context_same[EV_N];
	cl_int prof_err[4];
	cl_ulong prof_before[4], prof_after[4];
	cl_int wait, wait_user, cb_status, cb_pending_status, set_status, release;
	uint32_t out[N], out_user[N];
};

static _Atomic int cb_calls;
static _Atomic cl_int cb_last = 1;

static void CL_CALLBACK ev_cb(cl_event e, cl_int status, void *data)
{
	(void)e;
	*(_Atomic cl_int *)data = status;
	cb_calls++;
}

/* Runs the application's events on p: made, and for the virtual platform
 * (fd >= 0) held while the daemon restarts (RESUME_HELD written to fd, a
 * byte read from go), then asked about and used. */
static void events_run(struct e2e_plat *p, int fd, int go, struct ev_seen *r)
{
	static uint32_t a[N];
	static _Atomic cl_int pending_cb;
	cl_program prog = e2e_program_build(p, src, NULL);
	cl_kernel kern = e2e_kernel_create(p, prog, "scramble");
	cl_mem ma = e2e_buffer_create(p, CL_MEM_READ_WRITE, N * 4, NULL);
	cl_mem mb = e2e_buffer_create(p, CL_MEM_READ_WRITE, N * 4, NULL);
	cl_command_queue q = p->queue_prof;
	cl_event ev[EV_N], gone, after;
	uint32_t k = 11, held = RESUME_HELD;
	size_t g = N;
	cl_int e;
	char byte;

	memset(r, 0, sizeof(*r));
	e2e_rand_u32(a, N, 31, 0);
	APP_OK(clSetKernelArg(kern, 0, sizeof(ma), &ma));
	APP_OK(clSetKernelArg(kern, 1, sizeof(mb), &mb));
	APP_OK(clSetKernelArg(kern, 2, sizeof(k), &k));
	/* A write, a kernel, a read, a marker: their commands complete. */
	APP_OK(clEnqueueWriteBuffer(q, ma, CL_FALSE, 0, N * 4, a, 0, NULL, &ev[0]));
	APP_OK(clEnqueueNDRangeKernel(q, kern, 1, NULL, &g, NULL, 1, &ev[0], &ev[1]));
	APP_OK(clEnqueueReadBuffer(q, mb, CL_TRUE, 0, N * 4, r->out, 1, &ev[1], &ev[2]));
	APP_OK(clEnqueueMarkerWithWaitList(q, 0, NULL, &ev[3]));
	/* User events: one set complete, one set to an error, one left
	 * unset with a callback waiting for it. */
	ev[4] = clCreateUserEvent(p->context, &e);
	APP_OK(e);
	APP_OK(clSetUserEventStatus(ev[4], CL_COMPLETE));
	ev[5] = clCreateUserEvent(p->context, &e);
	APP_OK(e);
	APP_OK(clSetUserEventStatus(ev[5], -1234));
	ev[6] = clCreateUserEvent(p->context, &e);
	APP_OK(e);
	pending_cb = 1;
	APP_OK(clSetEventCallback(ev[6], CL_COMPLETE, ev_cb, (void *)&pending_cb));
	/* Released before the restart: not kept. */
	APP_OK(clEnqueueMarkerWithWaitList(q, 0, NULL, &gone));
	APP_OK(clReleaseEvent(gone));
	APP_OK(clFinish(q));
	for (int i = 0; i < 4; i++)
		APP_OK(clGetEventProfilingInfo(ev[1], CL_PROFILING_COMMAND_QUEUED + i,
					       sizeof(cl_ulong), &r->prof_before[i], NULL));
	/* Two restarts: the second daemon writes what the first restored.
	 * A call between them resumes the session. */
	for (int i = 0; fd >= 0 && i < EV_RESTARTS; i++) {
		cl_int st;
		if (write(fd, &held, sizeof(held)) != sizeof(held) || read(go, &byte, 1) != 1)
			_exit(6);
		APP_OK(clGetEventInfo(ev[0], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(st), &st,
				      NULL));
	}
	/* What each says of itself. */
	for (int i = 0; i < EV_N; i++) {
		cl_command_queue eq = NULL;
		cl_context ec = NULL;
		cl_command_type t = 0;
		r->status[i] = 99;
		cl_int se = clGetEventInfo(ev[i], CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(cl_int),
					   &r->status[i], NULL);
		if (se)
			r->status[i] = 1000 + se;
		r->type[i] =
		    clGetEventInfo(ev[i], CL_EVENT_COMMAND_TYPE, sizeof(t), &t, NULL) ?: (cl_int)t;
		r->qerr[i] = clGetEventInfo(ev[i], CL_EVENT_COMMAND_QUEUE, sizeof(eq), &eq, NULL);
		r->cerr[i] = clGetEventInfo(ev[i], CL_EVENT_CONTEXT, sizeof(ec), &ec, NULL);
		r->queue_same[i] = eq == (i < 4 ? q : NULL);
		r->context_same[i] = ec == p->context;
	}
	for (int i = 0; i < 4; i++)
		r->prof_err[i] = clGetEventProfilingInfo(ev[1], CL_PROFILING_COMMAND_QUEUED + i,
							 sizeof(cl_ulong), &r->prof_after[i], NULL);
	/* Waited for, and waited for by a later command. */
	r->wait = clWaitForEvents(5, ev);
	k = 12;
	APP_OK(clSetKernelArg(kern, 2, sizeof(k), &k));
	APP_OK(clEnqueueNDRangeKernel(q, kern, 1, NULL, &g, NULL, 4, ev + 1, &after));
	APP_OK(clEnqueueReadBuffer(q, mb, CL_TRUE, 0, N * 4, r->out, 1, &after, NULL));
	APP_OK(clReleaseEvent(after));
	/* A callback on a completed command's event. */
	cb_calls = 0;
	cb_last = 1;
	APP_OK(clSetEventCallback(ev[1], CL_COMPLETE, ev_cb, (void *)&cb_last));
	while (!cb_calls)
		usleep(1000);
	r->cb_status = cb_last;
	/* The user event left unset: a kernel behind it runs once it is set,
	 * and the callback from before the restart comes. */
	k = 13;
	APP_OK(clSetKernelArg(kern, 2, sizeof(k), &k));
	APP_OK(clEnqueueNDRangeKernel(q, kern, 1, NULL, &g, NULL, 1, &ev[6], &after));
	r->set_status = clSetUserEventStatus(ev[6], CL_COMPLETE);
	r->wait_user = clWaitForEvents(1, &after);
	APP_OK(clEnqueueReadBuffer(q, mb, CL_TRUE, 0, N * 4, r->out_user, 0, NULL, NULL));
	APP_OK(clReleaseEvent(after));
	while (pending_cb == 1)
		usleep(1000);
	r->cb_pending_status = pending_cb;
	for (int i = 0; i < EV_N; i++)
		r->release |= clReleaseEvent(ev[i]);
	APP_OK(clFinish(q));
	clReleaseMemObject(ma);
	clReleaseMemObject(mb);
	clReleaseKernel(kern);
	clReleaseProgram(prog);
}

/* The application of events_resume: the native run, then the virtual
 * one across the restart, compared; exits 0 when they agree. */
static void events_app(int fd, int go)
{
	static struct ev_seen nat_r, v_r;
	struct e2e_plat nat, v;

	if (e2e_plat_init(&nat, "native", e2e_native_match()) ||
	    e2e_plat_init(&v, "virtual", e2e_virtual_match()))
		_exit(2);
	events_run(&nat, -1, -1, &nat_r);
	events_run(&v, fd, go, &v_r);
	int bad = 0;
	for (int i = 0; i < EV_N; i++)
		if (v_r.status[i] != nat_r.status[i] || v_r.type[i] != nat_r.type[i] ||
		    v_r.qerr[i] || v_r.cerr[i] || !v_r.queue_same[i] || !v_r.context_same[i]) {
			fprintf(stderr,
				"events_app: event %d: status %d (native %d), type %#x (native "
				"%#x), queue %d/%d, context %d/%d\n",
				i, v_r.status[i], nat_r.status[i], v_r.type[i], nat_r.type[i],
				v_r.qerr[i], v_r.queue_same[i], v_r.cerr[i], v_r.context_same[i]);
			bad = 1;
		}
	for (int i = 0; i < 4; i++)
		if (v_r.prof_err[i] != nat_r.prof_err[i] ||
		    v_r.prof_after[i] != v_r.prof_before[i]) {
			fprintf(stderr,
				"events_app: profiling %d: %d (native %d), %llu then %llu\n", i,
				v_r.prof_err[i], nat_r.prof_err[i],
				(unsigned long long)v_r.prof_before[i],
				(unsigned long long)v_r.prof_after[i]);
			bad = 1;
		}
#define SAME(f)                                                                                    \
	if (v_r.f != nat_r.f) {                                                                    \
		fprintf(stderr, "events_app: " #f ": %d (native %d)\n", v_r.f, nat_r.f);           \
		bad = 1;                                                                           \
	}
	SAME(wait);
	SAME(wait_user);
	SAME(cb_status);
	SAME(cb_pending_status);
	SAME(set_status);
	SAME(release);
	if (memcmp(v_r.out, nat_r.out, sizeof(v_r.out)) ||
	    memcmp(v_r.out_user, nat_r.out_user, sizeof(v_r.out_user))) {
		fprintf(stderr, "events_app: a kernel's result differs\n");
		bad = 1;
	}
	_exit(bad ? 7 : 0);
}

/* The state file a SIGTERM wrote: its events, and the callbacks they
 * carry. */
static void events_counted(unsigned *events, unsigned *cbs, unsigned *pending, char *name)
{
	DIR *d = opendir(state);
	struct dirent *e;

	struct cmx_state_reader r;
	struct cmx_state_rec rec;
	const void *p;
	size_t n;
	int dfd;

	ck_assert_ptr_nonnull(d);
	while ((e = readdir(d)))
		if (strstr(e->d_name, ".state"))
			snprintf(name, 256, "%s", e->d_name);
	closedir(d);
	dfd = open(state, O_RDONLY | O_DIRECTORY);
	ck_assert_int_eq(cmx_state_map(dfd, name, &p, &n), 0);
	ck_assert_int_eq(cmx_state_open(&r, p, n), 0);
	*events = *cbs = *pending = 0;
	while (cmx_state_next(&r, &rec) == 1)
		if (rec.type == CMX_STATE_EVENT) {
			(*events)++;
			*cbs += (unsigned)rec.ev.nc;
			*pending += rec.ev.status > CL_COMPLETE;
		}
	cmx_state_unmap(p, n);
	close(dfd);
}

/* An application holds events across a checkpoint and restart: a write's,
 * a kernel's (profiled), a read's and a marker's, a user event set
 * complete, one set to an error, and one left unset with a callback
 * waiting for it. Resumed, each answers its status, type, queue and
 * context as natively, the kernel's profiling values are as they were,
 * waits and a later command's wait list take them, a callback on one
 * comes, and the unset one can be set: the command behind it runs and the
 * callback from before the restart comes. The state file holds the seven,
 * not one released before; a second restart keeps what the first
 * restored. */
static void events_resume_with(const char *workers)
{
	pid_t pid = daemon_start(workers), app;
	int pfd[2], gfd[2], st;
	unsigned events, cbs, pending;
	uint32_t i = 0;

	ck_assert_int_eq(pipe(pfd), 0);
	ck_assert_int_eq(pipe(gfd), 0);
	app = fork();
	ck_assert_int_ge(app, 0);
	if (app == 0) {
		close(pfd[0]);
		close(gfd[1]);
		events_app(pfd[1], gfd[0]);
	}
	close(pfd[1]);
	close(gfd[0]);
	for (int k = 0; k < EV_RESTARTS; k++) {
		char file[256] = "";
		uint64_t objects, mem;
		ck_assert_int_eq(read(pfd[0], &i, sizeof(i)), sizeof(i));
		ck_assert_uint_eq(i, RESUME_HELD);
		objects = admin_tenant_field(admin, "default", "objects");
		mem = admin_tenant_field(admin, "default", "mem");
		kill(pid, SIGTERM);
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		events_counted(&events, &cbs, &pending, file);
		ck_assert_uint_eq(events, EV_N);
		ck_assert_uint_eq(cbs, 1);
		ck_assert_uint_eq(pending, 1);
		pid = daemon_again(workers, 0);
		/* Restored, its guest not back yet: the tenant is charged
		 * what it was, its events and their callbacks too. */
		for (int t = 0; t < 3000 && exists(file); t++)
			usleep(10000);
		ck_assert_msg(!exists(file), "%s was not restored", file);
		admin_field_becomes(admin, "default", "objects", objects);
		ck_assert_uint_eq(admin_tenant_field(admin, "default", "mem"), mem);
		ck_assert_int_eq(write(gfd[1], "", 1), 1);
	}
	close(gfd[1]);
	ck_assert_int_eq(waitpid(app, &st, 0), app);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the application failed: %d", st);
	close(pfd[0]);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	dir_remove();
}

START_TEST(events_resume)
{
	events_resume_with("off");
}
END_TEST

START_TEST(events_resume_workers)
{
	events_resume_with("on");
}
END_TEST

/* The file from, for another session id, with one EVENT record added
 * (and its callbacks, nc of cb); its name. */
static void file_clone_event(const char *from, uint64_t session, const struct cmx_state_event *ev,
			     const struct cmx_state_event_cb *cb, char *name, size_t len)
{
	int dfd = open(state, O_RDONLY | O_DIRECTORY);
	struct cmx_state_writer *w = malloc(sizeof(*w));
	struct cmx_state_reader r;
	struct cmx_state_rec rec;
	const void *p;
	size_t n;

	ck_assert_int_eq(cmx_state_map(dfd, from, &p, &n), 0);
	ck_assert_int_eq(cmx_state_open(&r, p, n), 0);
	snprintf(name, len, "event-%llu.state", (unsigned long long)session);
	ck_assert_int_eq(
	    cmx_state_begin(w, dfd, name, session, r.head.token, r.head.applied, r.head.tenant), 0);
	while (cmx_state_next(&r, &rec) == 1) {
		struct iovec iov = {(void *)rec.data, rec.len};
		cmx_state_put(w, rec.type, &iov, 1);
	}
	struct iovec iov[2] = {{(void *)ev, sizeof(*ev)}, {(void *)cb, ev->nc * sizeof(*cb)}};
	cmx_state_put(w, CMX_STATE_EVENT, iov, 2);
	ck_assert_int_eq(cmx_state_commit(w), 0);
	cmx_state_unmap(p, n);
	free(w);
	close(dfd);
}

/* The context the file's session made first. */
static uint64_t file_context(const char *name)
{
	int dfd = open(state, O_RDONLY | O_DIRECTORY);
	struct cmx_state_reader r;
	struct cmx_state_rec rec;
	uint64_t id = 0;
	const void *p;
	size_t n;

	ck_assert_int_eq(cmx_state_map(dfd, name, &p, &n), 0);
	ck_assert_int_eq(cmx_state_open(&r, p, n), 0);
	while (!id && cmx_state_next(&r, &rec) == 1)
		if (rec.type == CMX_STATE_CALL && rec.hdr.op == CMX_OP_CreateContext) {
			struct cmx_CreateContext_in in;
			ck_assert_int_eq(cmx_codec_decode(&cmx_desc_CreateContext_in, rec.args,
							  rec.hdr.size, &in),
					 0);
			id = in.context.id;
		}
	cmx_state_unmap(p, n);
	close(dfd);
	ck_assert_uint_ne(id, 0);
	return id;
}

/* EVENT records whose checksums hold but whose values no checkpoint
 * writes (an id taken or of the daemon's range, a context that is
 * none, a status no checkpoint writes, a callback on a completed event
 * or for a status the event has reached): each ends its own session's
 * restore, kept as .bad, while the same file with a well-formed event
 * (complete; a user event unset with a callback) is restored beside
 * them. */
START_TEST(events_refused)
{
	static uint32_t a[N], want[N];
	pid_t pid = daemon_start("off"), app;
	struct ids ids;
	char file[256], name[64], bad[80];
	int st;

	app = session_apart(a, want);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	kill(app, SIGKILL);
	ck_assert_int_eq(waitpid(app, &st, 0), app);
	state_check(a, want, &ids, file);
	uint64_t ctx = file_context(file), free_id = 0x7ff00000;
	struct cmx_state_event_cb cb = {.type = CL_COMPLETE, .tag = 0x1234};
	const struct {
		struct cmx_state_event ev;
		int good;
	} cases[] = {
	    {{.id = free_id, .context = ctx, .status = CL_COMPLETE, .type = CL_COMMAND_MARKER}, 1},
	    {{.id = free_id,
	      .context = ctx,
	      .status = CL_SUBMITTED,
	      .type = CL_COMMAND_USER,
	      .flags = CMX_STATE_EV_USER,
	      .nc = 1},
	     1},
	    {{.id = free_id, .context = ids.b, .status = CL_COMPLETE}, 0},
	    {{.id = ids.b, .context = ctx, .status = CL_COMPLETE}, 0},
	    {{.id = 5, .context = ctx, .status = CL_COMPLETE}, 0},
	    {{.id = free_id, .context = ctx, .status = CL_COMPLETE, .nc = 1}, 0},
	    {{.id = free_id, .context = ctx, .status = CL_RUNNING}, 0},
	    {{.id = free_id, .context = ctx, .status = CL_SUBMITTED}, 0},
	    {{.id = free_id, .context = ctx, .status = (int64_t)INT32_MIN - 1}, 0},
	};
	const int ncases = (int)(sizeof(cases) / sizeof(cases[0]));
	for (int i = 0; i < ncases; i++)
		file_clone_event(file, ids.session + 100 + (uint64_t)i, &cases[i].ev, &cb, name,
				 sizeof(name));
	/* A callback for a status the user event has reached. */
	struct cmx_state_event sub = cases[1].ev;
	struct cmx_state_event_cb cbs = {.type = CL_SUBMITTED, .tag = 1};
	file_clone_event(file, ids.session + 100 + (uint64_t)ncases, &sub, &cbs, name,
			 sizeof(name));

	pid = daemon_again("off", 0);
	for (int i = 0; i <= ncases; i++) {
		int good = i < ncases && cases[i].good;
		snprintf(name, sizeof(name), "event-%llu.state",
			 (unsigned long long)(ids.session + 100 + (uint64_t)i));
		snprintf(bad, sizeof(bad), "%s.bad", name);
		for (int k = 0; k < 3000 && exists(name); k++)
			usleep(10000);
		ck_assert_msg(!exists(name), "%s was not read", name);
		ck_assert_msg(exists(bad) == !good, "case %d: %s", i,
			      good ? "refused" : "restored");
	}
	/* The session itself, beside them (in the directory's order). */
	for (int k = 0; k < 3000 && exists(file); k++)
		usleep(10000);
	ck_assert_msg(!exists(file), "%s was not restored", file);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	dir_remove();
}
END_TEST

/* A command behind a user event the application has not set: a
 * checkpoint does not wait for it (the drain would wait for the
 * application), it fails for that session; once the event is set it is
 * written. */
START_TEST(checkpoint_blocked)
{
	pid_t pid = daemon_start("off");
	struct e2e_plat v;
	cl_event ue;
	cl_mem m;
	uint32_t pattern = 5;
	char *reply;
	cl_int e;
	int st;

	ck_assert_int_eq(e2e_plat_init(&v, "virtual", e2e_virtual_match()), 0);
	ue = clCreateUserEvent(v.context, &e);
	E2E_OK(&v, e);
	m = e2e_buffer_create(&v, CL_MEM_READ_WRITE, 4096, NULL);
	E2E_OK(&v, clEnqueueFillBuffer(v.queue, m, &pattern, 4, 0, 4096, 1, &ue, NULL));
	E2E_OK(&v, clFlush(v.queue));
	/* The fill has reached the daemon before the checkpoint is asked
	 * for: a call answered after it. */
	cl_int status;
	E2E_OK(&v, clGetEventInfo(ue, CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof(status), &status,
				  NULL));
	reply = ask(admin, "checkpoint\n");
	ck_assert_msg(strstr(reply, "0 sessions written") && strstr(reply, "1 failed"),
		      "checkpoint: %s", reply);
	free(reply);
	E2E_OK(&v, clSetUserEventStatus(ue, CL_COMPLETE));
	E2E_OK(&v, clFinish(v.queue));
	reply = ask(admin, "checkpoint\n");
	ck_assert_msg(!strncmp(reply, "ok\n1 sessions written", 21), "checkpoint: %s", reply);
	free(reply);
	E2E_OK(&v, clReleaseEvent(ue));
	E2E_OK(&v, clReleaseMemObject(m));
	e2e_plat_fini(&v);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	dir_remove();
}
END_TEST

/* Images an application holds across restarts (images_resume). */
#define IMG_MAX	    160
#define IMG_FORMATS 128
#define IMG_BLOB    (512u << 10)
#define IMG_PITCH_W 13u
#define IMG_PITCH_H 9u

static const char image_src[] =
    "kernel void turn(read_only image2d_t in, write_only image2d_t out)\n"
    "{\n"
    "	int2 c = (int2)(get_global_id(0), get_global_id(1));\n"
    "	uint4 v = read_imageui(in, c);\n"
    "	write_imageui(out, c, ((uint4)(255) - v) ^ (uint4)(c.x, c.y, 1, 2));\n"
    "}\n";

/* One image of the application, and what is read of it. */
struct img {
	cl_mem m;
	size_t region[3];
	size_t elem;
};

struct img_seen {
	unsigned n, own; /* images; those with memory of their own */
	cl_uint nfmt;
	cl_image_format fmt[IMG_FORMATS];
	cl_int from2d; /* a 2D image over a buffer: made, or why not */
	size_t off[IMG_MAX], len[IMG_MAX];
	uint8_t blob[IMG_BLOB];
};

static struct img img_make(struct e2e_plat *p, cl_mem_object_type type, cl_channel_order order,
			   cl_channel_type ctype, size_t w, size_t h, size_t depth_or_layers,
			   size_t row_pitch, void *host, cl_mem buffer)
{
	cl_image_format f = {order, ctype};
	cl_image_desc d = {.image_type = type, .image_width = w, .buffer = buffer};
	struct img im = {.region = {w, 1, 1}};
	cl_int e;

	if (type == CL_MEM_OBJECT_IMAGE1D_ARRAY) {
		d.image_array_size = h;
		im.region[1] = h;
	} else if (type != CL_MEM_OBJECT_IMAGE1D && type != CL_MEM_OBJECT_IMAGE1D_BUFFER) {
		d.image_height = h;
		im.region[1] = h;
	}
	if (type == CL_MEM_OBJECT_IMAGE3D)
		d.image_depth = depth_or_layers;
	if (type == CL_MEM_OBJECT_IMAGE2D_ARRAY)
		d.image_array_size = depth_or_layers;
	if (type == CL_MEM_OBJECT_IMAGE3D || type == CL_MEM_OBJECT_IMAGE2D_ARRAY)
		im.region[2] = depth_or_layers;
	d.image_row_pitch = row_pitch;
	im.m = clCreateImage(p->context, CL_MEM_READ_WRITE | (host ? CL_MEM_COPY_HOST_PTR : 0), &f,
			     &d, host, &e);
	APP_OK(e);
	APP_OK(clGetImageInfo(im.m, CL_IMAGE_ELEMENT_SIZE, sizeof(im.elem), &im.elem, NULL));
	return im;
}

/* Writes known bytes into all of im (packed), from seed. */
static void img_fill(struct e2e_plat *p, const struct img *im, uint64_t seed)
{
	const size_t o[3] = {0, 0, 0};
	size_t n = im->elem * im->region[0] * im->region[1] * im->region[2];
	uint8_t *b = e2e_xmalloc(n);

	e2e_rand_bytes(b, n, seed);
	APP_OK(
	    clEnqueueWriteImage(p->queue, im->m, CL_TRUE, o, im->region, 0, 0, b, 0, NULL, NULL));
	free(b);
}

/* The whole of im, packed, appended to r. */
static void img_read(struct e2e_plat *p, const struct img *im, struct img_seen *r)
{
	const size_t o[3] = {0, 0, 0};
	size_t n = im->elem * im->region[0] * im->region[1] * im->region[2];
	size_t at = r->n ? r->off[r->n - 1] + r->len[r->n - 1] : 0;

	if (r->n == IMG_MAX || n > IMG_BLOB - at)
		_exit(8);
	APP_OK(clEnqueueReadImage(p->queue, im->m, CL_TRUE, o, im->region, 0, 0, r->blob + at, 0,
				  NULL, NULL));
	r->off[r->n] = at;
	r->len[r->n++] = n;
}

/* Runs the application's images on p: one 2D image of each format the
 * device supports, a 1D image, a 1D array, a 2D image made from host
 * memory with a row pitch and written again in a box with one, a 2D
 * array, a 3D image written with pitches, a 1D image over a buffer and,
 * where the device has them, a 2D image over a buffer (their bytes the
 * buffer's, written through it and through the image), and an image a
 * kernel writes; for the virtual platform (fd >= 0) held while the daemon
 * restarts twice (RESUME_HELD and the images with memory of their own
 * written to fd, a byte read from go), then all read back, and the kernel
 * run again on what came back. */
static void images_run(struct e2e_plat *p, int fd, int go, struct img_seen *r)
{
	struct img im[IMG_MAX];
	unsigned n = 0;
	char ext[4096] = "";
	cl_int e;

	memset(r, 0, sizeof(*r));
	APP_OK(clGetSupportedImageFormats(p->context, CL_MEM_READ_WRITE, CL_MEM_OBJECT_IMAGE2D,
					  IMG_FORMATS, r->fmt, &r->nfmt));
	if (r->nfmt > IMG_FORMATS)
		r->nfmt = IMG_FORMATS;
	for (cl_uint i = 0; i < r->nfmt; i++) {
		im[n] = img_make(p, CL_MEM_OBJECT_IMAGE2D, r->fmt[i].image_channel_order,
				 r->fmt[i].image_channel_data_type, 5, 3, 1, 0, NULL, NULL);
		img_fill(p, &im[n++], 1000 + i);
	}
	im[n] =
	    img_make(p, CL_MEM_OBJECT_IMAGE1D, CL_RGBA, CL_UNSIGNED_INT8, 77, 1, 1, 0, NULL, NULL);
	img_fill(p, &im[n++], 1);
	im[n] = img_make(p, CL_MEM_OBJECT_IMAGE1D_ARRAY, CL_RGBA, CL_SIGNED_INT16, 33, 4, 1, 0,
			 NULL, NULL);
	img_fill(p, &im[n++], 2);
	/* Made from rows of IMG_PITCH_W pixels and 12 bytes more, then a box
	 * of it written from rows of 40 bytes. */
	{
		const size_t pitch = IMG_PITCH_W * 4 + 12, o[3] = {2, 3, 0}, rg[3] = {7, 4, 1};
		uint8_t host[(IMG_PITCH_W * 4 + 12) * IMG_PITCH_H], box[40 * 4];
		e2e_rand_bytes(host, sizeof(host), 3);
		e2e_rand_bytes(box, sizeof(box), 4);
		im[n] = img_make(p, CL_MEM_OBJECT_IMAGE2D, CL_RGBA, CL_UNSIGNED_INT8, IMG_PITCH_W,
				 IMG_PITCH_H, 1, pitch, host, NULL);
		APP_OK(clEnqueueWriteImage(p->queue, im[n].m, CL_TRUE, o, rg, 40, 0, box, 0, NULL,
					   NULL));
		n++;
	}
	const unsigned pitched = n - 1;
	im[n] = img_make(p, CL_MEM_OBJECT_IMAGE2D_ARRAY, CL_RGBA, CL_FLOAT, 9, 7, 3, 0, NULL, NULL);
	img_fill(p, &im[n++], 5);
	/* Rows of 16 pixels, slices of 7 rows, from the host. */
	{
		const size_t o[3] = {0, 0, 0}, rg[3] = {11, 6, 4};
		uint8_t *host = e2e_xmalloc(16 * 16 * 7 * 4);
		e2e_rand_bytes(host, 16 * 16 * 7 * 4, 6);
		im[n] = img_make(p, CL_MEM_OBJECT_IMAGE3D, CL_RGBA, CL_UNSIGNED_INT32, 11, 6, 4, 0,
				 NULL, NULL);
		APP_OK(clEnqueueWriteImage(p->queue, im[n].m, CL_TRUE, o, rg, 16 * 16, 16 * 16 * 7,
					   host, 0, NULL, NULL));
		free(host);
		n++;
	}
	/* The kernel's output, written only by it. */
	im[n] = img_make(p, CL_MEM_OBJECT_IMAGE2D, CL_RGBA, CL_UNSIGNED_INT8, IMG_PITCH_W,
			 IMG_PITCH_H, 1, 0, NULL, NULL);
	const unsigned out = n++;
	r->own = n;
	/* Over buffers: their bytes are the buffer's, written through it
	 * and, for the 2D one, through the image too. */
	{
		uint8_t bytes[4096];
		cl_mem buf = e2e_buffer_create(p, CL_MEM_READ_WRITE, sizeof(bytes), NULL);
		e2e_rand_bytes(bytes, sizeof(bytes), 7);
		APP_OK(clEnqueueWriteBuffer(p->queue, buf, CL_TRUE, 0, sizeof(bytes), bytes, 0,
					    NULL, NULL));
		im[n++] = img_make(p, CL_MEM_OBJECT_IMAGE1D_BUFFER, CL_RGBA, CL_UNSIGNED_INT32, 64,
				   1, 1, 0, NULL, buf);
		APP_OK(
		    clGetDeviceInfo(p->device, CL_DEVICE_EXTENSIONS, sizeof(ext) - 1, ext, NULL));
		r->from2d = -1;
		if (strstr(ext, "cl_khr_image2d_from_buffer")) {
			cl_image_format f = {CL_RGBA, CL_UNSIGNED_INT8};
			cl_image_desc d = {.image_type = CL_MEM_OBJECT_IMAGE2D,
					   .image_width = 16,
					   .image_height = 8,
					   .buffer = buf};
			const size_t o[3] = {3, 2, 0}, rg[3] = {5, 3, 1};
			uint8_t box[5 * 3 * 4];
			cl_mem m = clCreateImage(p->context, CL_MEM_READ_WRITE, &f, &d, NULL, &e);
			r->from2d = e;
			if (m) {
				im[n] = (struct img){.m = m, .region = {16, 8, 1}, .elem = 4};
				e2e_rand_bytes(box, sizeof(box), 8);
				APP_OK(clEnqueueWriteImage(p->queue, m, CL_TRUE, o, rg, 0, 0, box,
							   0, NULL, NULL));
				n++;
			}
		}
		/* The buffer itself is read back last. */
		im[n++] = (struct img){.m = buf};
	}
	cl_program prog = e2e_program_build(p, image_src, NULL);
	cl_kernel kern = e2e_kernel_create(p, prog, "turn");
	size_t g[2] = {IMG_PITCH_W, IMG_PITCH_H};
	APP_OK(clSetKernelArg(kern, 0, sizeof(cl_mem), &im[pitched].m));
	APP_OK(clSetKernelArg(kern, 1, sizeof(cl_mem), &im[out].m));
	APP_OK(clEnqueueNDRangeKernel(p->queue, kern, 2, NULL, g, NULL, 0, NULL, NULL));
	APP_OK(clFinish(p->queue));
	for (int i = 0; fd >= 0 && i < EV_RESTARTS; i++) {
		uint32_t msg[2] = {RESUME_HELD, r->own};
		const size_t o[3] = {0, 0, 0}, one[3] = {1, 1, 1};
		uint8_t px[16];
		char byte;
		if (write(fd, msg, sizeof(msg)) != sizeof(msg) || read(go, &byte, 1) != 1)
			_exit(6);
		/* A call that resumes the session before the next restart. */
		APP_OK(clEnqueueReadImage(p->queue, im[0].m, CL_TRUE, o, one, 0, 0, px, 0, NULL,
					  NULL));
	}
	for (unsigned i = 0; i + 1 < n; i++)
		img_read(p, &im[i], r);
	{
		size_t at = r->off[r->n - 1] + r->len[r->n - 1];
		if (IMG_BLOB - at < 4096)
			_exit(8);
		APP_OK(clEnqueueReadBuffer(p->queue, im[n - 1].m, CL_TRUE, 0, 4096, r->blob + at, 0,
					   NULL, NULL));
		r->off[r->n] = at;
		r->len[r->n++] = 4096;
	}
	/* The kernel again, on the image that came back. */
	APP_OK(clEnqueueNDRangeKernel(p->queue, kern, 2, NULL, g, NULL, 0, NULL, NULL));
	img_read(p, &im[out], r);
	for (unsigned i = 0; i < n; i++)
		clReleaseMemObject(im[i].m);
	clReleaseKernel(kern);
	clReleaseProgram(prog);
}

/* The application of images_resume: the native run, then the virtual one
 * across the restarts, compared; exits 0 when they agree. */
static void images_app(int fd, int go)
{
	static struct img_seen nat_r, v_r;
	struct e2e_plat nat, v;
	int bad = 0;

	if (e2e_plat_init(&nat, "native", e2e_native_match()) ||
	    e2e_plat_init(&v, "virtual", e2e_virtual_match()))
		_exit(2);
	images_run(&nat, -1, -1, &nat_r);
	images_run(&v, fd, go, &v_r);
	if (v_r.nfmt != nat_r.nfmt || memcmp(v_r.fmt, nat_r.fmt, sizeof(v_r.fmt)) ||
	    v_r.from2d != nat_r.from2d || v_r.n != nat_r.n) {
		fprintf(stderr, "images_app: %u formats (native %u), 2D over a buffer %d (%d)\n",
			v_r.nfmt, nat_r.nfmt, v_r.from2d, nat_r.from2d);
		_exit(7);
	}
	for (unsigned i = 0; i < v_r.n; i++)
		if (v_r.len[i] != nat_r.len[i] ||
		    memcmp(v_r.blob + v_r.off[i], nat_r.blob + nat_r.off[i], v_r.len[i])) {
			size_t k = 0;
			while (k < v_r.len[i] &&
			       v_r.blob[v_r.off[i] + k] == nat_r.blob[nat_r.off[i] + k])
				k++;
			fprintf(
			    stderr,
			    "images_app: image %u (of %u; %u formats) differs at byte %zu of %zu\n",
			    i, v_r.n, v_r.nfmt, k, v_r.len[i]);
			bad = 1;
		}
	_exit(bad ? 7 : 0);
}

/* The state file a SIGTERM wrote (name, found when empty): its IMAGE
 * records and the images they are of. */
static void images_counted(unsigned *records, unsigned *images, char *name)
{
	DIR *d = opendir(state);
	struct dirent *e;
	struct cmx_state_reader r;
	struct cmx_state_rec rec;
	uint64_t last = 0;
	const void *p;
	size_t n;
	int dfd;

	ck_assert_ptr_nonnull(d);
	/* The daemon's own, named by its tenant's worker (not a clone, nor
	 * one kept as .bad). */
	while (!name[0] && (e = readdir(d)))
		if (!strncmp(e->d_name, "t_", 2) && strlen(e->d_name) > 6 &&
		    !strcmp(e->d_name + strlen(e->d_name) - 6, ".state"))
			snprintf(name, 256, "%s", e->d_name);
	closedir(d);
	dfd = open(state, O_RDONLY | O_DIRECTORY);
	ck_assert_int_eq(cmx_state_map(dfd, name, &p, &n), 0);
	ck_assert_int_eq(cmx_state_open(&r, p, n), 0);
	*records = *images = 0;
	while (cmx_state_next(&r, &rec) == 1)
		if (rec.type == CMX_STATE_IMAGE) {
			(*records)++;
			*images += rec.id != last;
			last = rec.id;
		}
	cmx_state_unmap(p, n);
	close(dfd);
}

/* The state file name with each IMAGE record of more than one row cut
 * into rows, written last row first: no image is held whole, so each is
 * made with its fill and its rows go in as WriteImage calls. */
static void file_rows_reversed(const char *name)
{
	int dfd = open(state, O_RDONLY | O_DIRECTORY);
	struct cmx_state_writer *w = malloc(sizeof(*w));
	struct cmx_state_reader r;
	struct cmx_state_rec rec;
	const void *p;
	size_t n;

	ck_assert_int_eq(cmx_state_map(dfd, name, &p, &n), 0);
	ck_assert_int_eq(cmx_state_open(&r, p, n), 0);
	ck_assert_int_eq(cmx_state_begin(w, dfd, name, r.head.session, r.head.token, r.head.applied,
					 r.head.tenant),
			 0);
	while (cmx_state_next(&r, &rec) == 1) {
		struct cmx_state_image im = rec.img;
		uint64_t rows = im.region[1] * im.region[2], row = im.region[0] * im.elem;
		if (rec.type != CMX_STATE_IMAGE || rows == 1) {
			struct iovec iov = {(void *)rec.data, rec.len};
			cmx_state_put(w, rec.type, &iov, 1);
			continue;
		}
		for (uint64_t k = rows; k-- > 0;) {
			const uint8_t *b = rec.data + sizeof(im) + k * row;
			im.origin[1] = rec.img.origin[1] + k % rec.img.region[1];
			im.origin[2] = rec.img.origin[2] + k / rec.img.region[1];
			im.region[1] = im.region[2] = 1;
			struct iovec iov[2] = {{&im, sizeof(im)}, {(void *)b, row}};
			cmx_state_put(w, CMX_STATE_IMAGE, iov, 2);
		}
	}
	ck_assert_int_eq(cmx_state_commit(w), 0);
	cmx_state_unmap(p, n);
	free(w);
	close(dfd);
}

/* The file from, for another session id, with one record of type added
 * (from iov); its name. */
static void file_clone_rec(const char *from, uint64_t session, uint32_t type,
			   const struct iovec *iov, int niov, char *name, size_t len)
{
	int dfd = open(state, O_RDONLY | O_DIRECTORY);
	struct cmx_state_writer *w = malloc(sizeof(*w));
	struct cmx_state_reader r;
	struct cmx_state_rec rec;
	const void *p;
	size_t n;

	ck_assert_int_eq(cmx_state_map(dfd, from, &p, &n), 0);
	ck_assert_int_eq(cmx_state_open(&r, p, n), 0);
	snprintf(name, len, "image-%llu.state", (unsigned long long)session);
	ck_assert_int_eq(
	    cmx_state_begin(w, dfd, name, session, r.head.token, r.head.applied, r.head.tenant), 0);
	while (cmx_state_next(&r, &rec) == 1) {
		struct iovec one = {(void *)rec.data, rec.len};
		cmx_state_put(w, rec.type, &one, 1);
	}
	cmx_state_put(w, type, iov, niov);
	ck_assert_int_eq(cmx_state_commit(w), 0);
	cmx_state_unmap(p, n);
	free(w);
	close(dfd);
}

#define IMG_CASES 7

/* Clones of the session in file, each with one record added whose
 * checksums hold: one pixel of the first image, as a checkpoint writes
 * it (restored), and of that image with another element size or extent,
 * of the image over a buffer, of the buffer, of no object, and a
 * CONTENTS record of the image (each refused: its own restore ends). */
static void images_clones(const char *file, uint64_t session)
{
	int dfd = open(state, O_RDONLY | O_DIRECTORY);
	struct cmx_state_reader r;
	struct cmx_state_rec rec;
	struct cmx_state_image first = {0};
	uint64_t buffer = 0, over = 0;
	uint8_t px[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
	char name[64];
	const void *p;
	size_t n;

	ck_assert_int_eq(cmx_state_map(dfd, file, &p, &n), 0);
	ck_assert_int_eq(cmx_state_open(&r, p, n), 0);
	while (cmx_state_next(&r, &rec) == 1) {
		if (rec.type == CMX_STATE_IMAGE && !first.id)
			first = rec.img;
		if (rec.type == CMX_STATE_CALL && rec.hdr.op == CMX_OP_CreateBuffer) {
			struct cmx_CreateBuffer_in in;
			ck_assert_int_eq(cmx_codec_decode(&cmx_desc_CreateBuffer_in, rec.args,
							  rec.hdr.size, &in),
					 0);
			buffer = in.mem.id;
		}
		if (rec.type == CMX_STATE_CALL && rec.hdr.op == CMX_OP_CreateImage) {
			struct cmx_CreateImage_in in;
			ck_assert_int_eq(
			    cmx_codec_decode(&cmx_desc_CreateImage_in, rec.args, rec.hdr.size, &in),
			    0);
			if (in.buffer.id)
				over = in.mem.id;
		}
	}
	cmx_state_unmap(p, n);
	close(dfd);
	ck_assert_uint_ne(first.id, 0);
	ck_assert_uint_ne(buffer, 0);
	ck_assert_uint_ne(over, 0);
	struct cmx_state_image c[IMG_CASES - 1];
	for (int i = 0; i < IMG_CASES - 1; i++) {
		c[i] = first;
		for (int k = 0; k < 3; k++) {
			c[i].origin[k] = 0;
			c[i].region[k] = 1;
		}
	}
	c[1].elem = first.elem == 16 ? 8 : first.elem * 2;
	c[2].extent[0]++;
	c[3] = (struct cmx_state_image){
	    .id = over, .elem = 16, .extent = {64, 1, 1}, .region = {1, 1, 1}};
	c[4] = (struct cmx_state_image){
	    .id = buffer, .elem = 4, .extent = {1024, 1, 1}, .region = {1, 1, 1}};
	c[5].id = 0x7ff00000;
	for (int i = 0; i < IMG_CASES - 1; i++) {
		struct iovec iov[2] = {{&c[i], sizeof(c[i])}, {px, c[i].elem}};
		file_clone_rec(file, session + (uint64_t)i, CMX_STATE_IMAGE, iov, 2, name,
			       sizeof(name));
	}
	uint64_t head[2] = {first.id, 0};
	struct iovec iov[2] = {{head, sizeof(head)}, {px, 4}};
	file_clone_rec(file, session + IMG_CASES - 1, CMX_STATE_CONTENTS, iov, 2, name,
		       sizeof(name));
}

/* The clones images_clones() made: each read, the first restored and
 * the others kept as .bad. */
static void images_clones_read(uint64_t session)
{
	char name[64], bad[80];

	for (int i = 0; i < IMG_CASES; i++) {
		snprintf(name, sizeof(name), "image-%llu.state",
			 (unsigned long long)(session + (uint64_t)i));
		snprintf(bad, sizeof(bad), "%s.bad", name);
		for (int k = 0; k < 3000 && exists(name); k++)
			usleep(10000);
		ck_assert_msg(!exists(name), "%s was not read", name);
		ck_assert_msg(exists(bad) == (i != 0), "case %d: %s", i,
			      i ? "restored" : "refused");
	}
}

/* An application's images across two checkpoints and restarts: one of
 * each format the device supports, a 1D image, a 1D array, a 2D image
 * made from pitched host memory and written in a box with a pitch, a 2D
 * array, a 3D image written with pitches, an image a kernel wrote, and
 * images over a buffer. The state file holds one IMAGE record for each
 * image with memory of its own (they are small) and none for those over
 * the buffer; the restored session is charged what it was; resumed, each
 * image reads back as natively, and the kernel runs again on what came
 * back. With rewrite, the first file's images are cut into rows written
 * last first (their restore fills them and writes each row as a
 * WriteImage call), and clones of it with one IMAGE record added that no
 * checkpoint writes are refused alone (images_clones()). */
static void images_resume_with(const char *workers, int rewrite)
{
	pid_t pid = daemon_start(workers), app;
	int pfd[2], gfd[2], st;
	unsigned records, images;
	uint64_t clones = 0;

	ck_assert_int_eq(pipe(pfd), 0);
	ck_assert_int_eq(pipe(gfd), 0);
	app = fork();
	ck_assert_int_ge(app, 0);
	if (app == 0) {
		close(pfd[0]);
		close(gfd[1]);
		images_app(pfd[1], gfd[0]);
	}
	close(pfd[1]);
	close(gfd[0]);
	for (int k = 0; k < EV_RESTARTS; k++) {
		char file[256] = "";
		uint32_t msg[2] = {0, 0};
		uint64_t objects, mem;
		ck_assert_int_eq(read(pfd[0], msg, sizeof(msg)), sizeof(msg));
		ck_assert_uint_eq(msg[0], RESUME_HELD);
		objects = admin_tenant_field(admin, "default", "objects");
		mem = admin_tenant_field(admin, "default", "mem");
		kill(pid, SIGTERM);
		ck_assert_int_eq(waitpid(pid, &st, 0), pid);
		images_counted(&records, &images, file);
		ck_assert_uint_eq(images, msg[1]);
		ck_assert_uint_eq(records, msg[1]);
		if (rewrite && k == 0) {
			struct cmx_state_reader r;
			const void *p;
			size_t n;
			int dfd = open(state, O_RDONLY | O_DIRECTORY);
			ck_assert_int_eq(cmx_state_map(dfd, file, &p, &n), 0);
			ck_assert_int_eq(cmx_state_open(&r, p, n), 0);
			clones = r.head.session + 100;
			cmx_state_unmap(p, n);
			close(dfd);
			images_clones(file, clones);
			file_rows_reversed(file);
			images_counted(&records, &images, file);
			ck_assert_uint_eq(images, msg[1]);
			ck_assert_uint_gt(records, msg[1]);
		}
		pid = daemon_again(workers, 0);
		for (int t = 0; t < 3000 && exists(file); t++)
			usleep(10000);
		ck_assert_msg(!exists(file), "%s was not restored", file);
		if (rewrite && k == 0) {
			images_clones_read(clones);
			/* Each row's payload was the tenant's while staged
			 * for its WriteImage, and no longer. */
			admin_field_becomes(admin, "default", "output", 0);
		} else {
			/* The clones hold what they were restored with. */
			admin_field_becomes(admin, "default", "objects", objects);
			ck_assert_uint_eq(admin_tenant_field(admin, "default", "mem"), mem);
		}
		ck_assert_int_eq(write(gfd[1], "", 1), 1);
	}
	close(gfd[1]);
	ck_assert_int_eq(waitpid(app, &st, 0), app);
	ck_assert_msg(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the application failed: %d", st);
	close(pfd[0]);
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	dir_remove();
}

START_TEST(images_resume)
{
	images_resume_with("off", 0);
}
END_TEST

START_TEST(images_resume_workers)
{
	images_resume_with("on", 0);
}
END_TEST

START_TEST(images_rewritten)
{
	images_resume_with("off", 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("checkpoint");
	TCase *tc = tcase_create("checkpoint");
	SRunner *sr;
	int failed;

	if (!getenv("CLMUXD"))
		return E2E_EXIT_SKIP;
	tcase_add_test(tc, admin_checkpoint);
	tcase_add_test(tc, sigterm_checkpoint);
	tcase_add_test(tc, open_dir_refused);
	tcase_add_test(tc, restore_resume);
	tcase_add_test(tc, records_charged);
	tcase_add_test(tc, records_replaced);
	tcase_add_test(tc, parts_kept);
	tcase_add_test(tc, checkpoint_mid_restore);
	tcase_add_test(tc, binary_parts_kept);
	tcase_add_test(tc, parts_staged);
	tcase_add_test(tc, no_state_dir);
	tcase_add_test(tc, guest_resume);
	tcase_add_test(tc, guest_resume_workers);
	tcase_add_test(tc, resume_refused);
	tcase_add_test(tc, notify_drained);
	tcase_add_test(tc, restart_sessions);
	tcase_add_test(tc, restart_sessions_workers);
	tcase_add_test(tc, replay_fails);
	tcase_set_timeout(tc, E2E_TIMEOUT_S);
	suite_add_tcase(s, tc);
	/* Events held across a restart (CK_RUN_CASE=events runs these alone). */
	tc = tcase_create("events");
	tcase_add_test(tc, events_resume);
	tcase_add_test(tc, events_resume_workers);
	tcase_add_test(tc, checkpoint_blocked);
	tcase_add_test(tc, events_refused);
	tcase_set_timeout(tc, E2E_TIMEOUT_S);
	suite_add_tcase(s, tc);
	/* Which worker restores which file, by its name (CK_RUN_CASE=keys). */
	tc = tcase_create("keys");
	tcase_add_test(tc, listener_worker);
	tcase_add_test(tc, pid_repeated);
	tcase_set_timeout(tc, E2E_TIMEOUT_S);
	suite_add_tcase(s, tc);
	/* Images' contents across restarts (CK_RUN_CASE=images). */
	tc = tcase_create("images");
	tcase_add_test(tc, images_resume);
	tcase_add_test(tc, images_resume_workers);
	tcase_add_test(tc, images_rewritten);
	tcase_set_timeout(tc, E2E_TIMEOUT_S);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
