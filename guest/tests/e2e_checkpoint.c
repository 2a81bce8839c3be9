// SPDX-License-Identifier: MIT
// Checkpoints (issue 17): an application's session is written to the
// daemon's --state-dir, by `clmuxctl checkpoint` (without workers) and at
// SIGTERM (with them). The state file is read back with the daemon's own
// reader: the requests that made each live object in order, a kernel
// argument's last value only, a program the application released kept
// for the kernel made from it, a released buffer left out, and the
// buffers' bytes equal to the native run's. A state directory that others
// can read is refused at start.
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../host/tests/adminclient.h"
#include "codec.h"
#include "e2e.h"
#include "proto.gen.h"
#include "state.h"

#define N 65536

static char dir[64], sock[96], admin[96], state[96];

static const char src[] = "kernel void scramble(global const uint *a, global uint *b, uint k)\n"
			  "{ size_t i = get_global_id(0); b[i] = a[i] * 2654435761u + k; }\n";

static int daemon_accepts(void)
{
	struct sockaddr_un sun = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_STREAM, 0), ok;

	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sock);
	ok = connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == 0;
	close(fd);
	return ok;
}

/* A clmuxd with --state-dir; its pid (the address in CLMUX_SERVER). */
static pid_t daemon_start(const char *workers)
{
	const char *bin = getenv("CLMUXD");
	pid_t pid;

	ck_assert_msg(bin && *bin, "CLMUXD unset");
	ck_assert_ptr_nonnull(mkdtemp(strcpy(dir, "/tmp/clmux-ckpt-XXXXXX")));
	snprintf(sock, sizeof(sock), "%s/s.sock", dir);
	snprintf(admin, sizeof(admin), "%s/admin.sock", dir);
	snprintf(state, sizeof(state), "%s/state", dir);
	char server[128];
	snprintf(server, sizeof(server), "unix:%s", sock);
	setenv("CLMUX_SERVER", server, 1);
	pid = fork();
	ck_assert_int_ge(pid, 0);
	if (pid == 0) {
		char listen[128];
		snprintf(listen, sizeof(listen), "unix:%s", sock);
		execl(bin, bin, "--listen", listen, "--admin", admin, "--state-dir", state,
		      "--workers", workers, (char *)NULL);
		_exit(127);
	}
	for (int i = 0; i < 3000 && !daemon_accepts(); i++)
		usleep(10000);
	ck_assert_msg(daemon_accepts(), "clmuxd did not listen on %s", sock);
	return pid;
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
 * and run, and a buffer made and released. */
static void session_make(struct e2e_plat *v, const uint32_t *a)
{
	cl_program prog = e2e_program_build(v, src, NULL);
	cl_kernel kern = e2e_kernel_create(v, prog, "scramble");
	cl_mem ma = e2e_buffer_create(v, CL_MEM_COPY_HOST_PTR, N * 4, (void *)a);
	cl_mem mb = e2e_buffer_create(v, CL_MEM_READ_WRITE, N * 4, NULL);
	cl_mem gone = e2e_buffer_create(v, CL_MEM_READ_WRITE, 4096, NULL);
	uint32_t k0 = 1, k = 7;
	size_t g = N;

	E2E_OK(v, clReleaseProgram(prog));
	E2E_OK(v, clReleaseMemObject(gone));
	E2E_OK(v, clSetKernelArg(kern, 0, sizeof(ma), &ma));
	E2E_OK(v, clSetKernelArg(kern, 1, sizeof(mb), &mb));
	E2E_OK(v, clSetKernelArg(kern, 2, sizeof(k0), &k0));
	E2E_OK(v, clSetKernelArg(kern, 2, sizeof(k), &k));
	E2E_OK(v, clEnqueueNDRangeKernel(v->queue, kern, 1, NULL, &g, NULL, 0, NULL, NULL));
	/* Everything sent has reached the daemon before the checkpoint is
	 * asked for on another socket. */
	E2E_OK(v, clFinish(v->queue));
}

/* The one state file in the state directory, checked and walked: what the
 * session made, and b's bytes against want. */
static void state_check(const uint32_t *a, const uint32_t *want)
{
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
	while (cmx_state_next(&r, &rec) == 1) {
		if (rec.type == CMX_STATE_CALL) {
			ck_assert_uint_lt(rec.hdr.op, 0x800);
			creates[rec.hdr.op]++;
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
			/* a, then b, in the order they were made. */
			ck_assert_mem_eq(rec.data + 16, contents ? want : a, N * 4);
			contents++;
		}
	}
	ck_assert_uint_eq(creates[CMX_OP_CreateContext], 1);
	ck_assert_uint_eq(creates[CMX_OP_CreateQueue], 2); /* the fixture's two */
	ck_assert_uint_eq(creates[CMX_OP_CreateProgramWithSource], 1);
	ck_assert_uint_eq(creates[CMX_OP_BuildProgram], 1);
	ck_assert_uint_eq(creates[CMX_OP_CreateKernel], 1);
	ck_assert_uint_eq(creates[CMX_OP_CreateBuffer], 2); /* not the one released */
	ck_assert_uint_eq(creates[CMX_OP_ReleaseMem], 0);
	ck_assert_uint_eq(creates[CMX_OP_ReleaseProgram], 0);
	ck_assert_uint_eq(args, 3);
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
	char *reply;
	int st;

	setup_both(&nat, &v, a, want);
	session_make(&v, a);
	reply = ask(admin, "checkpoint\n");
	ck_assert_msg(!strncmp(reply, "ok\n1 sessions written", 21), "checkpoint: %s", reply);
	free(reply);
	state_check(a, want);
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
	int st;

	setup_both(&nat, &v, a, want);
	session_make(&v, a);
	/* The worker writes it as it drains, before the session ends. */
	kill(pid, SIGTERM);
	ck_assert_int_eq(waitpid(pid, &st, 0), pid);
	state_check(a, want);
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
	tcase_set_timeout(tc, E2E_TIMEOUT_S);
	suite_add_tcase(s, tc);
	sr = srunner_create(s);
	srunner_run_all(sr, CK_NORMAL);
	failed = srunner_ntests_failed(sr);
	srunner_free(sr);
	return failed ? 1 : 0;
}
