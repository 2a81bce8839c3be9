// SPDX-License-Identifier: MIT
// Logging: one line per event on stderr, threshold from CLMUX_LOG.
#include "log.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *log_prog = "clmux";
static int log_level = -1;
static const char *const level_names[] = { "error", "warning", "info", "debug" };
static int bad_told; /* a bad CLMUX_LOG was warned about */

void cmx_log_init(const char *prog, enum cmx_log_level dflt)
{
	const char *env = getenv("CLMUX_LOG");

	log_prog = prog;
	log_level = dflt;
	if (!env || !*env)
		return;
	/* A level by its first three letters ("warn", "warning"). */
	for (int i = 0; i <= CMX_LOG_DEBUG; i++)
		if (!strncmp(env, level_names[i], 3)) {
			log_level = i;
			return;
		}
	/* Once: the daemon names itself again as a worker. */
	if (!bad_told) {
		bad_told = 1;
		cmx_warn("CLMUX_LOG=%s: expected err, warn, info or debug; %s is used", env,
			 level_names[dflt]);
	}
}

int cmx_log_enabled(enum cmx_log_level level)
{
	if (log_level < 0)
		cmx_log_init(log_prog, CMX_LOG_WARN);
	return (int)level <= log_level;
}

void cmx_log(enum cmx_log_level level, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	if (!cmx_log_enabled(level))
		return;
	n = snprintf(line, sizeof(line), "%s: %s: ", log_prog, level_names[level]);
	/* At the debug level every line says when (CLOCK_MONOTONIC, ms),
	 * so that lines of several processes can be put in order. */
	if (log_level == CMX_LOG_DEBUG) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		n += snprintf(line + n, sizeof(line) - (size_t)n, "%lld.%06ld ms: ",
			      (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000,
			      ts.tv_nsec % 1000000);
	}
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
	va_end(ap);
	/* One write per line so lines from threads never interleave. */
	fprintf(stderr, "%s\n", line);
}
