// SPDX-License-Identifier: MIT
// JSON answers of the admin socket and the front end (json-c), one line each.
#ifndef CMX_HOST_JSONLINE_H
#define CMX_HOST_JSONLINE_H

struct cmx_text;
struct json_object;

/* Appends o as one line of plain JSON and drops the reference; a NULL o
 * (out of memory) marks out oom. */
void cmx_json_line(struct cmx_text *out, struct json_object *o);
/* json_object_object_add() where o may be NULL (out of memory): drops v. */
void cmx_json_add(struct json_object *o, const char *key, struct json_object *v);

#endif
