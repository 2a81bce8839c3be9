// SPDX-License-Identifier: MIT
// clmux-sample: an ordinary OpenCL application (it knows nothing of clmux):
// SAXPY, a histogram with atomics and a Mandelbrot tile on the first
// platform it finds, printing checksums that must not depend on the platform.
#include <CL/cl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static const char *source =
	"__kernel void saxpy(float a, __global const float *x, __global float *y)\n"
	"{ size_t i = get_global_id(0); y[i] = a * x[i] + y[i]; }\n"
	"__kernel void histogram(__global const uint *v, __global uint *bins, uint n)\n"
	"{ size_t i = get_global_id(0); if (i < n) atomic_inc(&bins[v[i] & 255]); }\n"
	"__kernel void mandel(__global uint *out, uint w, uint h, uint iters)\n"
	"{ uint x = get_global_id(0), y = get_global_id(1);\n"
	"  float cr = -2.0f + 3.0f * x / w, ci = -1.5f + 3.0f * y / h, zr = 0, zi = 0; uint k = 0;\n"
	"  while (k < iters && zr * zr + zi * zi < 4.0f) { float t = zr * zr - zi * zi + cr;\n"
	"    zi = 2.0f * zr * zi + ci; zr = t; k++; }\n"
	"  out[y * w + x] = k; }\n";

#define CHECK(call)                                                               \
	do {                                                                      \
		cl_int e_ = (call);                                               \
		if (e_ != CL_SUCCESS) {                                           \
			fprintf(stderr, "clmux-sample: %s failed: %d\n", #call, e_); \
			exit(1);                                                  \
		}                                                                 \
	} while (0)

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

int main(void)
{
	enum { N = 1 << 20, W = 512, H = 512 };
	cl_platform_id plat;
	cl_device_id dev;
	cl_int e;
	char pname[256], dname[256];
	float *x = malloc(N * sizeof(float)), *y = malloc(N * sizeof(float));
	cl_uint *v = malloc(N * sizeof(cl_uint)), bins[256] = { 0 }, *img = malloc(W * H * sizeof(cl_uint));
	unsigned long long sum_y = 0, sum_bins = 0, sum_img = 0;
	double t0 = now();

	CHECK(clGetPlatformIDs(1, &plat, NULL));
	CHECK(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
	clGetPlatformInfo(plat, CL_PLATFORM_NAME, sizeof(pname), pname, NULL);
	clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof(dname), dname, NULL);
	printf("platform: %s\ndevice:   %s\n", pname, dname);
	for (int i = 0; i < N; i++) {
		x[i] = (float)(i % 1000);
		y[i] = (float)(i % 7);
		v[i] = (cl_uint)(i * 2654435761u);
	}
	cl_context ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &e);
	CHECK(e);
	cl_command_queue q = clCreateCommandQueue(ctx, dev, 0, &e);
	CHECK(e);
	cl_program p = clCreateProgramWithSource(ctx, 1, &source, NULL, &e);
	CHECK(e);
	CHECK(clBuildProgram(p, 1, &dev, NULL, NULL, NULL));
	cl_kernel saxpy = clCreateKernel(p, "saxpy", &e);
	CHECK(e);
	cl_kernel hist = clCreateKernel(p, "histogram", &e);
	CHECK(e);
	cl_kernel mandel = clCreateKernel(p, "mandel", &e);
	CHECK(e);
	cl_mem bx = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, N * sizeof(float), x, &e);
	CHECK(e);
	cl_mem by = clCreateBuffer(ctx, CL_MEM_READ_WRITE, N * sizeof(float), NULL, &e);
	CHECK(e);
	cl_mem bv = clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, N * sizeof(cl_uint), v, &e);
	CHECK(e);
	cl_mem bb = clCreateBuffer(ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizeof(bins), bins, &e);
	CHECK(e);
	cl_mem bi = clCreateBuffer(ctx, CL_MEM_WRITE_ONLY, W * H * sizeof(cl_uint), NULL, &e);
	CHECK(e);

	float a = 2.5f;
	cl_uint n = N, w = W, h = H, iters = 256;
	size_t g1 = N, g2[2] = { W, H };
	CHECK(clEnqueueWriteBuffer(q, by, CL_FALSE, 0, N * sizeof(float), y, 0, NULL, NULL));
	CHECK(clSetKernelArg(saxpy, 0, sizeof(a), &a));
	CHECK(clSetKernelArg(saxpy, 1, sizeof(cl_mem), &bx));
	CHECK(clSetKernelArg(saxpy, 2, sizeof(cl_mem), &by));
	CHECK(clEnqueueNDRangeKernel(q, saxpy, 1, NULL, &g1, NULL, 0, NULL, NULL));
	CHECK(clSetKernelArg(hist, 0, sizeof(cl_mem), &bv));
	CHECK(clSetKernelArg(hist, 1, sizeof(cl_mem), &bb));
	CHECK(clSetKernelArg(hist, 2, sizeof(n), &n));
	CHECK(clEnqueueNDRangeKernel(q, hist, 1, NULL, &g1, NULL, 0, NULL, NULL));
	CHECK(clSetKernelArg(mandel, 0, sizeof(cl_mem), &bi));
	CHECK(clSetKernelArg(mandel, 1, sizeof(w), &w));
	CHECK(clSetKernelArg(mandel, 2, sizeof(h), &h));
	CHECK(clSetKernelArg(mandel, 3, sizeof(iters), &iters));
	CHECK(clEnqueueNDRangeKernel(q, mandel, 2, NULL, g2, NULL, 0, NULL, NULL));
	CHECK(clEnqueueReadBuffer(q, by, CL_FALSE, 0, N * sizeof(float), y, 0, NULL, NULL));
	CHECK(clEnqueueReadBuffer(q, bb, CL_FALSE, 0, sizeof(bins), bins, 0, NULL, NULL));
	CHECK(clEnqueueReadBuffer(q, bi, CL_TRUE, 0, W * H * sizeof(cl_uint), img, 0, NULL, NULL));
	CHECK(clFinish(q));

	for (int i = 0; i < N; i++)
		sum_y += (unsigned long long)y[i];
	for (int i = 0; i < 256; i++)
		sum_bins += (unsigned long long)bins[i] * (unsigned long long)(i + 1);
	for (int i = 0; i < W * H; i++)
		sum_img += img[i];
	printf("result saxpy checksum:      %llu\n", sum_y);
	printf("result histogram checksum:  %llu\n", sum_bins);
	printf("result mandelbrot checksum: %llu\n", sum_img);
	printf("time: %.1f ms (build included)\n", (now() - t0) * 1e3);

	clReleaseMemObject(bx);
	clReleaseMemObject(by);
	clReleaseMemObject(bv);
	clReleaseMemObject(bb);
	clReleaseMemObject(bi);
	clReleaseKernel(saxpy);
	clReleaseKernel(hist);
	clReleaseKernel(mandel);
	clReleaseProgram(p);
	clReleaseCommandQueue(q);
	clReleaseContext(ctx);
	free(x);
	free(y);
	free(v);
	free(img);
	return 0;
}
