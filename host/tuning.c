// SPDX-License-Identifier: MIT
// The daemon's tuning knobs: one table of key, variable, range and default.
#include "tuning.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "addr.h"

enum kind {
	SWITCH, /* on|off|auto (1|0 too) */
	NUMBER, /* a decimal in [min, max] */
	SIZE,	/* 64K, 1M ... in [min, max] */
};

struct knob {
	const char *key, *env;
	size_t off;
	enum kind kind;
	int64_t min, max, def; /* def may be CMX_TUNE_AUTO */
};

#define KNOB(key, env, field, kind, min, max, def)                                                 \
	{                                                                                          \
		key, env, offsetof(struct cmx_tuning, field), kind, min, max, def                  \
	}

static const struct knob knobs[] = {
    KNOB("short-blocking", "CLMUX_SHORT_BLOCKING", short_blocking, SWITCH, 0, 1, CMX_TUNE_AUTO),
    KNOB("shm-sync-spin-us", "CLMUX_SHM_SYNC_SPIN_US", shm_sync_spin_us, NUMBER, 0, 1000000,
	 CMX_TUNE_AUTO),
    KNOB("pinned", "CLMUX_PINNED", pinned, SWITCH, 0, 1, CMX_TUNE_AUTO),
    /* Smaller transfers stay pageable. */
    KNOB("pinned-min", "CLMUX_PINNED_MIN", pinned_min, SIZE, 1, 1ll << 30, 1 << 20),
    KNOB("sched-peek", "CLMUX_SCHED_PEEK", sched_peek, SWITCH, 0, 1, 1),
    KNOB("uring-coop", "CLMUX_URING_COOP", uring_coop, SWITCH, 0, 1, 1),
    KNOB("unread-s", "CLMUX_UNREAD_S", unread_s, NUMBER, 1, 86400, 60),
    KNOB("fence-linger-us", "CLMUX_FENCE_LINGER_US", fence_linger_us, NUMBER, 0, 100000,
	 CMX_TUNE_AUTO),
    KNOB("watch-us", "CLMUX_WATCH_US", watch_us, NUMBER, 0, 1000000, 100),
    KNOB("sched-poll-max-us", "CLMUX_SCHED_POLL_MAX_US", sched_poll_max_us, NUMBER, 20, 500000,
	 1000),
    KNOB("equal-turns", "CLMUX_EQUAL_TURNS", equal_turns, SWITCH, 0, 1, CMX_TUNE_AUTO),
};
#define NKNOBS (sizeof(knobs) / sizeof(knobs[0]))

void cmx_tuning_defaults(struct cmx_tuning *t)
{
	for (unsigned i = 0; i < NKNOBS; i++)
		memcpy((char *)t + knobs[i].off, &knobs[i].def, sizeof(int64_t));
}

static int parse(const struct knob *k, const char *s, int64_t *v, char *why, size_t whylen)
{
	uint64_t u;
	char *end;

	if (!strcmp(s, "auto") && k->def == CMX_TUNE_AUTO) {
		*v = CMX_TUNE_AUTO;
		return 0;
	}
	if (k->kind == SWITCH) {
		if (!strcmp(s, "on") || !strcmp(s, "1"))
			*v = 1;
		else if (!strcmp(s, "off") || !strcmp(s, "0"))
			*v = 0;
		else
			goto bad;
		return 0;
	}
	if (!isdigit((unsigned char)*s))
		goto bad;
	if (k->kind == SIZE) {
		if (cmx_size_parse(s, &u))
			goto bad;
	} else {
		errno = 0;
		u = strtoull(s, &end, 10);
		if (errno || *end)
			goto bad;
	}
	if (u < (uint64_t)k->min || u > (uint64_t)k->max)
		goto bad;
	*v = (int64_t)u;
	return 0;
bad:
	if (k->kind == SWITCH)
		snprintf(why, whylen, "'%s': expected on, off%s", s,
			 k->def == CMX_TUNE_AUTO ? " or auto" : "");
	else
		snprintf(why, whylen, "'%s': expected %s%" PRId64 " to %" PRId64 "%s", s,
			 k->kind == SIZE ? "a size of " : "", k->min, k->max,
			 k->def == CMX_TUNE_AUTO ? ", or auto" : "");
	return -EINVAL;
}

int cmx_tuning_set(struct cmx_tuning *t, const char *key, const char *value, char *why,
		   size_t whylen)
{
	char err[160];
	int64_t v;

	for (unsigned i = 0; i < NKNOBS; i++) {
		if (strcmp(knobs[i].key, key))
			continue;
		if (parse(&knobs[i], value, &v, err, sizeof(err))) {
			snprintf(why, whylen, "%s = %s", key, err);
			return -EINVAL;
		}
		memcpy((char *)t + knobs[i].off, &v, sizeof(v));
		return 1;
	}
	return 0;
}

int cmx_tuning_env(struct cmx_tuning *t, char *why, size_t whylen)
{
	char err[160];
	int64_t v;

	for (unsigned i = 0; i < NKNOBS; i++) {
		const char *s = getenv(knobs[i].env);
		if (!s)
			continue;
		if (parse(&knobs[i], s, &v, err, sizeof(err))) {
			snprintf(why, whylen, "%s=%s", knobs[i].env, err);
			return -EINVAL;
		}
		memcpy((char *)t + knobs[i].off, &v, sizeof(v));
	}
	return 0;
}
