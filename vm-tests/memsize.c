// SPDX-License-Identifier: MIT
// vm-memsize: prints the device memory a fresh process of the guest sees
// (CL_DEVICE_GLOBAL_MEM_SIZE: the tenant's mem quota where that is less),
// then starts fresh processes until one sees another size, and prints it.
// The libvirt test changes the domain's quota in between.
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* How many fresh processes to try, a second apart, before giving up. */
#define TRIES 600

/* In a child of its own: the ICD keeps device facts for the life of a
 * process, so each look is a new session and a new context. 0 on failure. */
static unsigned long long look(void)
{
	unsigned long long v = 0;
	int fd[2];
	pid_t pid;

	if (pipe(fd))
		return 0;
	pid = fork();
	if (pid == 0) {
		cl_platform_id plat;
		cl_device_id dev;
		cl_context ctx;
		cl_ulong size = 0;
		cl_int err;
		close(fd[0]);
		if (clGetPlatformIDs(1, &plat, NULL) ||
		    clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL))
			_exit(1);
		ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
		if (err ||
		    clGetDeviceInfo(dev, CL_DEVICE_GLOBAL_MEM_SIZE, sizeof(size), &size, NULL))
			_exit(1);
		clReleaseContext(ctx);
		if (write(fd[1], &size, sizeof(size)) != sizeof(size))
			_exit(1);
		_exit(0);
	}
	close(fd[1]);
	if (pid > 0) {
		cl_ulong size;
		if (read(fd[0], &size, sizeof(size)) == sizeof(size))
			v = size;
		waitpid(pid, NULL, 0);
	}
	close(fd[0]);
	return v;
}

int main(void)
{
	unsigned long long first = look(), now;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (!first) {
		printf("vm-memsize: no clmux device\n");
		return 1;
	}
	printf("vm-memsize: first %llu\n", first);
	for (int i = 0; i < TRIES; i++) {
		sleep(1);
		now = look();
		if (!now) {
			printf("vm-memsize: the device went away\n");
			return 1;
		}
		if (now != first) {
			printf("vm-memsize: then %llu\n", now);
			return 0;
		}
	}
	printf("vm-memsize: still %llu\n", first);
	return 1;
}
