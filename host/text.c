// SPDX-License-Identifier: MIT
// A growable text buffer with printf-style appends.
#include "text.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int grow(struct cmx_text *t, size_t more)
{
	size_t cap = t->cap ? t->cap : 256;
	char *n;

	if (t->oom)
		return -1;
	while (cap < t->len + more + 1)
		cap *= 2;
	if (cap == t->cap)
		return 0;
	n = realloc(t->s, cap);
	if (!n) {
		t->oom = 1;
		return -1;
	}
	t->s = n;
	t->cap = cap;
	return 0;
}

void cmx_text_put(struct cmx_text *t, const char *p, size_t n)
{
	if (grow(t, n))
		return;
	memcpy(t->s + t->len, p, n);
	t->len += n;
	t->s[t->len] = '\0';
}

void cmx_text_add(struct cmx_text *t, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || grow(t, (size_t)n))
		return;
	va_start(ap, fmt);
	vsnprintf(t->s + t->len, (size_t)n + 1, fmt, ap);
	va_end(ap);
	t->len += (size_t)n;
}

void cmx_text_fini(struct cmx_text *t)
{
	free(t->s);
	t->s = NULL;
	t->len = t->cap = 0;
}
