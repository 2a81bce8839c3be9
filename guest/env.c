// SPDX-License-Identifier: MIT
// The ICD's CLMUX_* numbers: one table of variable, range and field.
#include "env.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>

#include "log.h"
#include "piece.h"

struct var {
	const char *name;
	size_t off;
	int64_t min, max;
};

#define VAR(name, field, min, max)                                                                 \
	{                                                                                          \
		name, offsetof(struct cmx_env, field), min, max                                    \
	}

static const struct var vars[] = {
    VAR("CLMUX_LANES", lanes, 0, CMX_LANES_MAX),
    VAR("CLMUX_AREA_MB", area_mb, 0, 1024),
    VAR("CLMUX_HEAP_MB", heap_mb, 0, 1024),
    VAR("CLMUX_IVSHMEM_POLL_US", ivshmem_poll_us, 1, 1000000),
    VAR("CLMUX_COPY_THREADS", copy_threads, 0, 7),
};

static struct cmx_env env;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
	env.disable = getenv("CLMUX_DISABLE") != NULL;
	for (unsigned i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		const struct var *v = &vars[i];
		const char *s = getenv(v->name);
		int64_t x = CMX_ENV_AUTO;
		unsigned long long u;
		char *end;

		/* Set but empty: the default, as unset. */
		if (s && *s) {
			errno = 0;
			u = strtoull(s, &end, 10);
			if (!isdigit((unsigned char)*s) || errno || *end || u < (uint64_t)v->min ||
			    u > (uint64_t)v->max)
				cmx_warn("%s=%s: expected %lld to %lld; the default is used",
					 v->name, s, (long long)v->min, (long long)v->max);
			else
				x = (int64_t)u;
		}
		*(int64_t *)((char *)&env + v->off) = x;
	}
}

const struct cmx_env *cmx_env(void)
{
	pthread_once(&once, load);
	return &env;
}
