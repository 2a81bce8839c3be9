// SPDX-License-Identifier: MIT
// A lying VM against a live clmuxd's vhost-user-vsock device: a looping
// descriptor chain, a buffer outside guest memory, a malformed vhost-user
// message. Each must end only that VM's device: the daemon keeps running,
// serves the next VMM on the same socket, and exits cleanly.
#define _GNU_SOURCE
#include <check.h>
#include <errno.h>
#include <linux/virtio_ring.h>
#include <linux/virtio_vsock.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "vhu_frontend.h"
#include "vq_driver.h"

#define MEM (1u << 20)
#define UVA 0x7f0000000000ull /* what QEMU's address of guest RAM would be */
#define QN 16
/* Where the rings of queue q lie in guest memory (gpa == offset). */
#define DESC(q) (0x1000u + (q) * 0x1000u)
#define AVAIL(q) (DESC(q) + 16 * QN)
#define USED(q) (DESC(q) + 0x800u)

static char dir[64], vsock_path[128];
static pid_t daemon_pid;

static void daemon_start(void)
{
	const char *bin = getenv("CLMUXD");
	char spec[200];

	ck_assert_msg(bin != NULL, "CLMUXD unset");
	strcpy(dir, "/tmp/clmux-vhost-XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(vsock_path, sizeof(vsock_path), "%s/v.sock", dir);
	snprintf(spec, sizeof(spec), "vhost-user-vsock:%s,cid=3", vsock_path);
	daemon_pid = fork();
	if (!daemon_pid) {
		execl(bin, bin, "--listen", spec, "--admin", "none", (char *)NULL);
		_exit(127);
	}
	/* A loaded machine can take seconds to start the driver. */
	for (int i = 0; i < 3000 && access(vsock_path, F_OK); i++)
		usleep(20000);
}

static void daemon_stop(void)
{
	int status;

	ck_assert_int_eq(kill(daemon_pid, SIGTERM), 0);
	ck_assert_int_eq(waitpid(daemon_pid, &status, 0), daemon_pid);
	ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "clmuxd did not exit cleanly");
	rmdir(dir);
}

static int vmm_connect(void)
{
	struct sockaddr_un sun = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0), r;

	strcpy(sun.sun_path, vsock_path);
	/* The socket's file is there from its bind; it is listened on once
	 * its mode is set (a bound on waiting, never a timing check). */
	r = connect(fd, (struct sockaddr *)&sun, sizeof(sun));

	for (int i = 0; i < 1500 && r && (errno == ECONNREFUSED || errno == ENOENT); i++) {
		usleep(20000);
		r = connect(fd, (struct sockaddr *)&sun, sizeof(sun));
	}
	ck_assert_int_eq(r, 0);
	return fd;
}

static void vmm_send(int fd, uint32_t req, const void *p, uint32_t size, int passfd)
{
	vhu_send(fd, req, p, size, &passfd, passfd >= 0);
}

/* 1 when the daemon answers GET_FEATURES on a fresh connection. */
static int vmm_served(void)
{
	int fd = vmm_connect();
	uint32_t hdr[3];
	uint64_t f = 0;

	vmm_send(fd, 1, NULL, 0, -1);
	int ok = recv(fd, hdr, 12, MSG_WAITALL) == 12 && recv(fd, &f, 8, MSG_WAITALL) == 8 &&
		 (f >> 32 & 1);
	close(fd);
	return ok;
}

/* 1 once the daemon closed the VMM's connection (the device stopped). A
 * bound against a hang, not a timing check. */
static int dropped(int fd)
{
	struct pollfd p = { fd, POLLIN, 0 };
	char c;

	return poll(&p, 1, 30000) == 1 && recv(fd, &c, 1, 0) == 0;
}

/* A VM with both rings running on a memfd; *mem is its memory. */
static int vm_up(uint8_t **mem, int *kick)
{
	int fd = vmm_connect(), memfd = memfd_create("ram", MFD_CLOEXEC);
	uint64_t f = 1ull << 32;

	ck_assert_int_eq(ftruncate(memfd, MEM), 0);
	*mem = mmap(NULL, MEM, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	vmm_send(fd, 2, &f, 8, -1);
	/* nregions=1 (u32) + padding (u32), then gpa, size, uva, offset. */
	uint32_t m[2 + 8] = { 1, 0 };
	uint64_t *r = (uint64_t *)&m[2];
	r[0] = 0, r[1] = MEM, r[2] = UVA, r[3] = 0;
	vmm_send(fd, 5, m, sizeof(m), memfd);
	for (uint32_t q = 0; q < 2; q++) {
		uint32_t st[2] = { q, QN };
		uint64_t a[5] = { q, UVA + DESC(q), UVA + USED(q), UVA + AVAIL(q), 0 };
		uint64_t idx = q;
		int call = eventfd(0, EFD_CLOEXEC);
		vmm_send(fd, 8, st, 8, -1);
		st[1] = 0;
		vmm_send(fd, 10, st, 8, -1);
		vmm_send(fd, 9, a, 40, -1);
		vmm_send(fd, 13, &idx, 8, call);
		kick[q] = eventfd(0, EFD_CLOEXEC);
		vmm_send(fd, 12, &idx, 8, kick[q]);
		close(call);
	}
	close(memfd);
	return fd;
}

/* The guest puts a packet on the tx queue: one buffer, or with loop two
 * that point at each other. */
static void tx_post(uint8_t *mem, int kick, uint64_t addr0, uint32_t len0, int loop)
{
	struct vring_desc *d = (struct vring_desc *)(mem + DESC(1));
	struct vring_avail *av = (struct vring_avail *)(mem + AVAIL(1));
	uint64_t one = 1;

	d[0] = (struct vring_desc){ addr0, len0, loop ? VRING_DESC_F_NEXT : 0, 1 };
	d[1] = (struct vring_desc){ 0x20000, 64, VRING_DESC_F_NEXT, 0 };
	av->ring[0] = 0;
	__atomic_store_n(&av->idx, 1, __ATOMIC_RELEASE);
	ck_assert_int_eq(write(kick, &one, 8), 8);
}

static void lying_guest(uint64_t addr0, uint32_t len0, int loop)
{
	uint8_t *mem;
	int kick[2];
	int fd;

	daemon_start();
	fd = vm_up(&mem, kick);
	tx_post(mem, kick[1], addr0, len0, loop);
	ck_assert_msg(dropped(fd), "the lying VM's device was not stopped");
	ck_assert_msg(vmm_served(), "the daemon no longer serves a new VMM");
	close(fd);
	close(kick[0]);
	close(kick[1]);
	munmap(mem, MEM);
	daemon_stop();
}

START_TEST(looping_chain)
{
	lying_guest(0x10000, 44, 1);
}
END_TEST

START_TEST(buffer_outside_memory)
{
	lying_guest(MEM - 8, 44, 0);
}
END_TEST

START_TEST(short_packet)
{
	lying_guest(0x10000, 4, 0);
}
END_TEST

START_TEST(bad_vring_index)
{
	uint32_t st[2] = { 9, QN };
	int fd;

	daemon_start();
	fd = vmm_connect();
	vmm_send(fd, 8, st, 8, -1);
	ck_assert_msg(dropped(fd), "a malformed vhost-user message did not stop the device");
	ck_assert(vmm_served());
	close(fd);
	daemon_stop();
}
END_TEST

/* The daemon refuses to start on a listen address it cannot honour. */
START_TEST(bad_listen_options)
{
	static const char *const bad[] = {
		"vhost-user-vsock:/tmp/clmux-vhost-x.sock",		  /* no cid */
		"vhost-user-vsock:/tmp/clmux-vhost-x.sock,cid=2",	  /* the host's */
		"vhost-user-vsock:/tmp/clmux-vhost-x.sock,cid=3,port=0",
		"vhost-user-vsock:/tmp/clmux-vhost-x.sock,cid=3,porrt=9", /* a typo */
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int status;
		pid_t pid = fork();
		if (!pid) {
			execl(getenv("CLMUXD"), "clmuxd", "--listen", bad[i], (char *)NULL);
			_exit(127);
		}
		ck_assert_int_eq(waitpid(pid, &status, 0), pid);
		ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 1, "%s: accepted", bad[i]);
	}
	ck_assert_int_ne(access("/tmp/clmux-vhost-x.sock", F_OK), 0);
}
END_TEST

int main(void)
{
	TCase *tc = tcase_create("vhost_badinput");

	if (!getenv("CLMUXD"))
		return 77;
	signal(SIGPIPE, SIG_IGN);
	tcase_set_timeout(tc, 120);
	tcase_add_test(tc, looping_chain);
	tcase_add_test(tc, buffer_outside_memory);
	tcase_add_test(tc, short_packet);
	tcase_add_test(tc, bad_vring_index);
	tcase_add_test(tc, bad_listen_options);
	return vq_run("vhost_badinput", tc);
}
