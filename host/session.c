// SPDX-License-Identifier: MIT
// Sessions: their objects and what they are charged. Below the connection
// and the handlers: what releasing an object reaches into is host/release.c.
#include "session.h"

#include <errno.h>
#include <stdlib.h>
#include <sys/random.h>

#include "server.h"
#include "tenant.h"

struct cmx_session *cmx_session_create(struct cmx_server *srv, struct cmx_conn *conn,
				       struct cmx_tenant *t)
{
	struct cmx_session *s = calloc(1, sizeof(*s));

	if (!s)
		return NULL;
	s->srv = srv;
	s->tenant = t;
	t->sessions++;
	s->conn = conn;
	s->refs = 1;
	s->area_fd = -1;
	s->id = ++srv->next_session;
	/* The notification channel proves it belongs to this session with it. */
	if (getrandom(&s->token, sizeof(s->token), 0) != sizeof(s->token))
		s->token = (uint64_t)(uintptr_t)s ^ s->id * 0x9e3779b97f4a7c15ull;
	cmx_objtab_init(&s->objs);
	/* Devices exist before the guest asks: ids 1..n in every session. */
	for (unsigned i = 0; i < srv->ndevices; i++)
		cmx_session_add(s, i + 1, CMX_K_DEVICE, srv->devices[i], NULL, 0, NULL);
	s->next = srv->sessions;
	if (s->next)
		s->next->pprev = &s->next;
	s->pprev = &srv->sessions;
	srv->sessions = s;
	srv->nsessions++;
	return s;
}

struct cmx_session *cmx_session_find(struct cmx_server *srv, uint64_t id, uint64_t token)
{
	/* The token is compared in constant time (a channel that guesses
	 * learns nothing from how long a refusal takes). */
	for (struct cmx_session *s = srv->sessions; s; s = s->next)
		if (s->id == id && !s->closed) {
			volatile uint64_t diff = s->token ^ token;
			return diff ? NULL : s;
		}
	return NULL;
}

struct cmx_obj *cmx_session_obj(struct cmx_session *s, uint64_t id, unsigned kind)
{
	struct cmx_obj *o = cmx_objtab_get(&s->objs, id);

	return o && o->kind == kind ? o : NULL;
}

int cmx_session_add(struct cmx_session *s, uint64_t id, unsigned kind, void *h, void *ctx,
		    int32_t err, struct cmx_obj **out)
{
	struct cmx_obj *o = calloc(1, sizeof(*o));
	int e;

	if (!o)
		return -ENOMEM;
	o->id = id;
	o->kind = (uint8_t)kind;
	o->h = h;
	o->ctx = ctx;
	o->err = err;
	e = cmx_objtab_add(&s->objs, o);
	if (e) {
		free(o);
		return e;
	}
	s->srv->objects++;
	if (kind != CMX_K_DEVICE)
		s->tenant->objects++;
	if (out)
		*out = o;
	return 0;
}

void cmx_session_charge(struct cmx_session *s, struct cmx_obj *o, uint64_t bytes)
{
	o->bytes += bytes;
	s->bytes += bytes;
	s->srv->bytes += bytes;
	s->tenant->bytes += bytes;
}

void cmx_session_release(struct cmx_session *s, uint64_t id, unsigned kind)
{
	struct cmx_obj *o = cmx_session_obj(s, id, kind);

	if (!o || !cmx_objtab_del(&s->objs, id))
		return;
	/* What the object holds reaches into the files above this one (the
	 * scheduler, event callbacks, command buffers, records): released
	 * there (host/release.c, through the hook host/dispatch.c
	 * registers). */
	s->srv->release(s, o);
}

void cmx_session_ref(struct cmx_session *s)
{
	s->refs++;
}

void cmx_session_unref(struct cmx_session *s)
{
	if (--s->refs)
		return;
	*s->pprev = s->next;
	if (s->next)
		s->next->pprev = s->pprev;
	s->srv->nsessions--;
	s->tenant->sessions--;
	free(s);
}
