// SPDX-License-Identifier: MIT
// The one test, made alike by guest and daemon, of whether program text or a
// binary may reach printf.
#ifndef CMX_TRANSPORT_MAYPRINT_H
#define CMX_TRANSPORT_MAYPRINT_H

#include <stddef.h>
#include <string.h>

/*
 * Conservative: "printf" anywhere (source, build options, headers, the
 * symbol names of a binary or IL module), or "##", with which the
 * preprocessor can paste the name together. Both sides run it on the same
 * bytes, so the guest expects output from exactly the launches the daemon
 * captures it for (docs/protocol.md, "Kernel printf").
 */
static inline int cmx_may_print(const void *p, size_t n)
{
	const char *s = p;

	for (size_t i = 0; s && i + 1 < n; i++) {
		if (s[i] == '#' && s[i + 1] == '#')
			return 1;
		if (s[i] == 'p' && n - i >= 6 && !memcmp(s + i, "printf", 6))
			return 1;
	}
	return 0;
}

#endif
