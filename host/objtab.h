// SPDX-License-Identifier: MIT
// A session's object table: guest-chosen 64-bit id -> object, open addressing.
#ifndef CMX_HOST_OBJTAB_H
#define CMX_HOST_OBJTAB_H

#include <stddef.h>
#include <stdint.h>

struct cmx_obj;

struct cmx_objtab {
	struct cmx_obj **slots; /* NULL: empty; TOMBSTONE: deleted */
	size_t cap, count, used;
};

void cmx_objtab_init(struct cmx_objtab *t);
void cmx_objtab_fini(struct cmx_objtab *t);
struct cmx_obj *cmx_objtab_get(const struct cmx_objtab *t, uint64_t id);
/* 0, -EEXIST for an id in use, -ENOMEM. */
int cmx_objtab_add(struct cmx_objtab *t, struct cmx_obj *o);
/* Removes o (found by its id); returns it, or NULL. */
struct cmx_obj *cmx_objtab_del(struct cmx_objtab *t, uint64_t id);
/* Calls fn for every object; fn may not change the table. */
void cmx_objtab_each(struct cmx_objtab *t, void (*fn)(struct cmx_obj *o, void *arg), void *arg);

#endif
