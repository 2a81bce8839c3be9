// SPDX-License-Identifier: MIT
// A growable text buffer with printf-style appends (config, admin, metrics).
#ifndef CMX_HOST_TEXT_H
#define CMX_HOST_TEXT_H

#include <stddef.h>

struct cmx_text {
	char *s; /* NUL-terminated once anything was added */
	size_t len, cap;
	int oom; /* sticky: a failed allocation */
};

void cmx_text_put(struct cmx_text *t, const char *p, size_t n);
__attribute__((format(printf, 2, 3))) void cmx_text_add(struct cmx_text *t, const char *fmt, ...);
void cmx_text_fini(struct cmx_text *t);

#endif
