// SPDX-License-Identifier: MIT
// A program's staged parts: their memory and its charge (host/parts.h).
#include "parts.h"

#include <stdlib.h>

#include "server.h"
#include "session.h"
#include "tenant.h"

void cmx_parts_charge(struct cmx_session *s, int64_t n)
{
	s->bytes += (uint64_t)n;
	s->srv->bytes += (uint64_t)n;
	s->tenant->bytes += (uint64_t)n;
}

int cmx_parts_fail(struct cmx_session *s, int err)
{
	struct cmx_parts *p = s->parts;

	free(p->data);
	p->data = NULL;
	cmx_parts_charge(s, -(int64_t)p->charged);
	p->charged = 0;
	p->err = err;
	return err;
}

void cmx_parts_drop(struct cmx_session *s)
{
	if (!s->parts)
		return;
	cmx_parts_fail(s, 0);
	free(s->parts);
	s->parts = NULL;
}
