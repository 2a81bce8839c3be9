// SPDX-License-Identifier: MIT
// JSON answers of the admin socket and the front end (json-c), one line each.
#include "jsonline.h"

#include <json.h>

#include "text.h"

void cmx_json_line(struct cmx_text *out, struct json_object *o)
{
	const char *s = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
							      JSON_C_TO_STRING_NOSLASHESCAPE);

	if (!o || !s)
		out->oom = 1;
	else
		cmx_text_add(out, "%s\n", s);
	json_object_put(o);
}

void cmx_json_add(struct json_object *o, const char *key, struct json_object *v)
{
	if (!o || json_object_object_add(o, key, v))
		json_object_put(v);
}
