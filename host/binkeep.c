// SPDX-License-Identifier: MIT
// Binaries kept while sessions are restored. A daemon restart under many
// applications replays each session's builds, side by side on executor
// threads; a compiler such as PoCL's takes tens of milliseconds for a
// build from source even when its own cache holds the result, one at a
// time, and about one to load the binary that an identical build made.
// So the first of identical builds compiles, and the others wait for it
// and load its binary. What is kept is the tenant's: charged to its mem
// quota while it stays, and not kept past it.
#include "binkeep.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tenant.h"

/* Kept at most: entries, and their bytes (sources, options and binaries);
 * the oldest kept goes first, one still being built never. */
#define KEEP_MAX   16
#define KEEP_BYTES (64u << 20)

struct kept {
	char tenant[CMX_TENANT_NAME];
	cl_device_id dev;
	char *opts, *src;
	unsigned char *bin; /* NULL while its build runs */
	size_t bin_len, bytes;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
/* Signalled when a build's binary is kept or its entry goes. */
static pthread_cond_t built_cond = PTHREAD_COND_INITIALIZER;
static struct kept keep[KEEP_MAX]; /* oldest first */
static unsigned nkeep;
static size_t keep_bytes;

/* Under lock. */
static void drop(unsigned i)
{
	free(keep[i].opts);
	free(keep[i].src);
	free(keep[i].bin);
	keep_bytes -= keep[i].bytes;
	memmove(&keep[i], &keep[i + 1], (--nkeep - i) * sizeof(keep[0]));
}

/* Under lock: the bytes kept for tenant, builds still running included. */
static uint64_t held(const char *tenant)
{
	uint64_t n = 0;

	for (unsigned i = 0; i < nkeep; i++)
		if (!strcmp(keep[i].tenant, tenant))
			n += keep[i].bytes;
	return n;
}

/* Under lock: whether bytes more for tenant stay within its room. */
static int fits(const char *tenant, uint64_t room, uint64_t bytes)
{
	uint64_t h = held(tenant);

	return room == CMX_UNLIMITED || (h <= room && bytes <= room - h);
}

/* Under lock: the entry of that build, or -1. */
static int find(const char *tenant, cl_device_id dev, const char *opts, const char *src)
{
	for (unsigned i = 0; i < nkeep; i++)
		if (keep[i].dev == dev && !strcmp(keep[i].tenant, tenant) &&
		    !strcmp(keep[i].opts, opts) && !strcmp(keep[i].src, src))
			return (int)i;
	return -1;
}

/* Under lock: room for bytes more, the oldest kept binaries dropped; 0,
 * or -1 when builds still running hold it. */
static int make_room(size_t bytes)
{
	unsigned i = 0;

	while (i < nkeep && (nkeep == KEEP_MAX || keep_bytes + bytes > KEEP_BYTES)) {
		if (keep[i].bin)
			drop(i);
		else
			i++;
	}
	return nkeep < KEEP_MAX && keep_bytes + bytes <= KEEP_BYTES ? 0 : -1;
}

cl_program cmx_binkeep_build(const char *tenant, uint64_t room, cl_context ctx, cl_device_id dev,
			     const char *opts, const char *src, int *mine)
{
	size_t bytes = strlen(opts) + strlen(src);
	cl_program p = NULL;
	cl_int e, st;
	int i;

	*mine = 0;
	pthread_mutex_lock(&lock);
	while ((i = find(tenant, dev, opts, src)) >= 0 && !keep[i].bin)
		pthread_cond_wait(&built_cond, &lock);
	if (i >= 0) {
		const unsigned char *bin = keep[i].bin;
		p = clCreateProgramWithBinary(ctx, 1, &dev, &keep[i].bin_len, &bin, &st, &e);
		if (p && (e || st)) {
			clReleaseProgram(p);
			p = NULL;
		}
	} else if (bytes <= KEEP_BYTES && fits(tenant, room, bytes) && !make_room(bytes)) {
		/* This caller's build is the one the others wait for. */
		struct kept *k = &keep[nkeep];
		*k = (struct kept){.dev = dev, .opts = strdup(opts), .src = strdup(src)};
		snprintf(k->tenant, sizeof(k->tenant), "%s", tenant);
		if (k->opts && k->src) {
			k->bytes = bytes;
			keep_bytes += bytes;
			nkeep++;
			*mine = 1;
		} else {
			free(k->opts);
			free(k->src);
		}
	}
	pthread_mutex_unlock(&lock);
	if (p && clBuildProgram(p, 1, &dev, opts, NULL, NULL)) {
		clReleaseProgram(p);
		p = NULL;
	}
	return p;
}

/* The binary of built for dev, in memory of its own; NULL if none. */
static unsigned char *binary_of(cl_program built, cl_device_id dev, size_t *len)
{
	cl_uint n = 0, at = 0;
	cl_device_id *devs = NULL;
	size_t *sizes = NULL;
	unsigned char **bins = NULL, *bin = NULL;

	if (clGetProgramInfo(built, CL_PROGRAM_NUM_DEVICES, sizeof(n), &n, NULL) || !n ||
	    !(devs = calloc(n, sizeof(*devs))) || !(sizes = calloc(n, sizeof(*sizes))) ||
	    !(bins = calloc(n, sizeof(*bins))) ||
	    clGetProgramInfo(built, CL_PROGRAM_DEVICES, n * sizeof(*devs), devs, NULL) ||
	    clGetProgramInfo(built, CL_PROGRAM_BINARY_SIZES, n * sizeof(*sizes), sizes, NULL))
		goto out;
	while (at < n && devs[at] != dev)
		at++;
	if (at == n || !sizes[at] || sizes[at] > KEEP_BYTES || !(bins[at] = malloc(sizes[at])))
		goto out;
	/* Only dev's is asked for: the others' entries stay NULL. */
	if (clGetProgramInfo(built, CL_PROGRAM_BINARIES, n * sizeof(*bins), bins, NULL)) {
		free(bins[at]);
		goto out;
	}
	bin = bins[at];
	*len = sizes[at];
out:
	free(bins);
	free(sizes);
	free(devs);
	return bin;
}

void cmx_binkeep_put(const char *tenant, uint64_t room, cl_device_id dev, const char *opts,
		     const char *src, cl_program built)
{
	size_t len = 0;
	unsigned char *bin = built ? binary_of(built, dev, &len) : NULL;
	int i;

	pthread_mutex_lock(&lock);
	i = find(tenant, dev, opts, src);
	if (i >= 0 && !keep[i].bin) {
		if (bin && keep_bytes + len <= KEEP_BYTES && fits(tenant, room, len)) {
			keep[i].bin = bin;
			keep[i].bin_len = len;
			keep[i].bytes += len;
			keep_bytes += len;
			bin = NULL;
		} else {
			drop((unsigned)i);
		}
	}
	pthread_cond_broadcast(&built_cond);
	pthread_mutex_unlock(&lock);
	free(bin);
}

void cmx_binkeep_clear(void)
{
	pthread_mutex_lock(&lock);
	for (unsigned i = nkeep; i-- > 0;)
		if (keep[i].bin)
			drop(i);
	pthread_mutex_unlock(&lock);
}

uint64_t cmx_binkeep_held(const char *tenant)
{
	uint64_t n;

	pthread_mutex_lock(&lock);
	n = held(tenant);
	pthread_mutex_unlock(&lock);
	return n;
}

void cmx_binkeep_charge(struct cmx_tenants *ts)
{
	pthread_mutex_lock(&lock);
	for (struct cmx_tenant *t = ts->list; t; t = t->next) {
		uint64_t now = held(t->name);
		t->bytes += now - t->kept;
		t->kept = now;
	}
	pthread_mutex_unlock(&lock);
}
