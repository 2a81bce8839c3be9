// SPDX-License-Identifier: MIT
// Open-addressing hash table of a session's objects, keyed by guest id.
#include "objtab.h"

#include <errno.h>
#include <stdlib.h>

#include "object.h"

#define TOMBSTONE ((struct cmx_obj *)1)

static size_t hash(uint64_t id)
{
	/* Guest ids are often sequential: mix them before masking. */
	id ^= id >> 33;
	id *= 0xff51afd7ed558ccdull;
	id ^= id >> 33;
	return (size_t)id;
}

void cmx_objtab_init(struct cmx_objtab *t)
{
	t->slots = NULL;
	t->cap = t->count = t->used = 0;
}

void cmx_objtab_fini(struct cmx_objtab *t)
{
	free(t->slots);
	cmx_objtab_init(t);
}

struct cmx_obj *cmx_objtab_get(const struct cmx_objtab *t, uint64_t id)
{
	if (!t->cap)
		return NULL;
	for (size_t i = hash(id) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
		struct cmx_obj *o = t->slots[i];
		if (!o)
			return NULL;
		if (o != TOMBSTONE && o->id == id)
			return o;
	}
}

static int grow(struct cmx_objtab *t)
{
	size_t cap = t->cap ? t->cap * 2 : 64;
	struct cmx_obj **old = t->slots;
	size_t oldcap = t->cap;

	/* Only rehash in place when tombstones, not live objects, fill it. */
	if (t->count * 4 < t->cap)
		cap = t->cap;
	t->slots = calloc(cap, sizeof(*t->slots));
	if (!t->slots) {
		t->slots = old;
		return -ENOMEM;
	}
	t->cap = cap;
	t->used = t->count;
	for (size_t i = 0; i < oldcap; i++) {
		struct cmx_obj *o = old[i];
		if (!o || o == TOMBSTONE)
			continue;
		size_t j = hash(o->id) & (cap - 1);
		while (t->slots[j])
			j = (j + 1) & (cap - 1);
		t->slots[j] = o;
	}
	free(old);
	return 0;
}

int cmx_objtab_add(struct cmx_objtab *t, struct cmx_obj *o)
{
	size_t i;

	if (cmx_objtab_get(t, o->id))
		return -EEXIST;
	if ((t->used + 1) * 4 > t->cap * 3 && grow(t))
		return -ENOMEM;
	for (i = hash(o->id) & (t->cap - 1); t->slots[i] && t->slots[i] != TOMBSTONE;
	     i = (i + 1) & (t->cap - 1))
		;
	if (!t->slots[i])
		t->used++;
	t->slots[i] = o;
	t->count++;
	return 0;
}

struct cmx_obj *cmx_objtab_del(struct cmx_objtab *t, uint64_t id)
{
	if (!t->cap)
		return NULL;
	for (size_t i = hash(id) & (t->cap - 1);; i = (i + 1) & (t->cap - 1)) {
		struct cmx_obj *o = t->slots[i];
		if (!o)
			return NULL;
		if (o != TOMBSTONE && o->id == id) {
			t->slots[i] = TOMBSTONE;
			t->count--;
			return o;
		}
	}
}

void cmx_objtab_each(struct cmx_objtab *t, void (*fn)(struct cmx_obj *o, void *arg), void *arg)
{
	for (size_t i = 0; i < t->cap; i++)
		if (t->slots[i] && t->slots[i] != TOMBSTONE)
			fn(t->slots[i], arg);
}
