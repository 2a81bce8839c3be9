// SPDX-License-Identifier: MIT
// vm-transfer: keeps large transfers to and from the clmux device going
// until killed, holding several buffers; prints "transferring" once the
// first round trip is done (the VM tests kill the VM after that).
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SIZE (16u << 20)
#define NBUF 4

static void check(cl_int err, const char *what)
{
	if (err != CL_SUCCESS) {
		fprintf(stderr, "vm-transfer: %s: %d\n", what, err);
		exit(1);
	}
}

int main(int argc, char **argv)
{
	long rounds = argc > 1 ? strtol(argv[1], NULL, 10) : -1;
	cl_platform_id plat;
	cl_device_id dev;
	cl_context ctx;
	cl_command_queue q;
	cl_mem buf[NBUF];
	unsigned char *host = malloc(SIZE), *back = malloc(SIZE);
	cl_int err;

	setvbuf(stdout, NULL, _IOLBF, 0);
	check(clGetPlatformIDs(1, &plat, NULL), "clGetPlatformIDs");
	check(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL), "clGetDeviceIDs");
	ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
	check(err, "clCreateContext");
	q = clCreateCommandQueueWithProperties(ctx, dev, NULL, &err);
	check(err, "clCreateCommandQueue");
	for (int i = 0; i < NBUF; i++) {
		buf[i] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, SIZE, NULL, &err);
		check(err, "clCreateBuffer");
	}
	for (long r = 0; rounds < 0 || r < rounds; r++) {
		memset(host, (int)r, SIZE);
		check(clEnqueueWriteBuffer(q, buf[r % NBUF], CL_FALSE, 0, SIZE, host, 0, NULL, NULL),
		      "write");
		check(clEnqueueReadBuffer(q, buf[r % NBUF], CL_TRUE, 0, SIZE, back, 0, NULL, NULL),
		      "read");
		if (memcmp(host, back, SIZE)) {
			fprintf(stderr, "vm-transfer: round %ld read back wrong data\n", r);
			return 1;
		}
		if (r == 0)
			printf("transferring\n");
	}
	printf("vm-transfer: %ld rounds of %u MiB each way\n", rounds, SIZE >> 20);
	return 0;
}
