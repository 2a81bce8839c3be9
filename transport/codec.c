// SPDX-License-Identifier: MIT
// The one hand-written marshaller: encodes and bounds-checks every message.
#include "codec.h"
#include "wire.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static inline size_t pad8(size_t n)
{
	return (n + 7) & ~(size_t)7;
}

static inline void *field_ptr(const void *args, const struct cmx_field *f)
{
	return (char *)args + f->offset;
}

size_t cmx_codec_size(const struct cmx_msgdesc *d, const void *args)
{
	size_t n = 0;

	for (unsigned i = 0; i < d->nfields; i++) {
		const struct cmx_field *f = &d->fields[i];
		const void *p = field_ptr(args, f);

		switch (f->type) {
		case CMX_T_BYTES:
		case CMX_T_STR:
			n += 8 + pad8(((const struct cmx_blob *)p)->len);
			break;
		case CMX_T_U64S:
			n += 8 + 8 * ((const struct cmx_u64s *)p)->n;
			break;
		case CMX_T_IDS:
			n += 8 + 8 * ((const struct cmx_refs *)p)->n;
			break;
		case CMX_T_RECS: {
			const struct cmx_recs *a = p;
			n += 8;
			for (uint64_t k = 0; k < a->n; k++)
				n += cmx_codec_size(f->rec, (const char *)a->v + k * f->rec->size);
			break;
		}
		default:
			n += 8;
		}
	}
	return n;
}

static uint8_t *put_u64(uint8_t *out, uint64_t v)
{
	memcpy(out, &v, 8);
	return out + 8;
}

static uint8_t *put_array(uint8_t *out, const void *src, uint64_t n, size_t elem)
{
	size_t len = n * elem;

	out = put_u64(out, n);
	if (len)
		memcpy(out, src, len);
	memset(out + len, 0, pad8(len) - len);
	return out + pad8(len);
}

static uint8_t *encode(const struct cmx_msgdesc *d, const void *args, uint8_t *out)
{
	for (unsigned i = 0; i < d->nfields; i++) {
		const struct cmx_field *f = &d->fields[i];
		const void *p = field_ptr(args, f);

		switch (f->type) {
		case CMX_T_U64:
		case CMX_T_I64:
			out = put_u64(out, *(const uint64_t *)p);
			break;
		case CMX_T_ID:
		case CMX_T_NEWID:
			out = put_u64(out, ((const struct cmx_ref *)p)->id);
			break;
		case CMX_T_BYTES:
		case CMX_T_STR: {
			const struct cmx_blob *b = p;
			out = put_array(out, b->ptr, b->len, 1);
			break;
		}
		case CMX_T_U64S: {
			const struct cmx_u64s *a = p;
			out = put_array(out, a->v, a->n, 8);
			break;
		}
		case CMX_T_IDS: {
			const struct cmx_refs *a = p;
			out = put_array(out, a->v, a->n, 8);
			break;
		}
		case CMX_T_RECS: {
			const struct cmx_recs *a = p;
			out = put_u64(out, a->n);
			for (uint64_t k = 0; k < a->n; k++)
				out = encode(f->rec, (const char *)a->v + k * f->rec->size, out);
			break;
		}
		}
	}
	return out;
}

void cmx_codec_encode(const struct cmx_msgdesc *d, const void *args, uint8_t *out)
{
	encode(d, args, out);
}

uint64_t cmx_codec_min_id(const struct cmx_msgdesc *d, const void *args, uint64_t from)
{
	uint64_t min = UINT64_MAX;

	for (unsigned i = 0; i < d->nfields; i++) {
		const struct cmx_field *f = &d->fields[i];
		const void *p = field_ptr(args, f);

		if (f->type == CMX_T_ID || f->type == CMX_T_NEWID) {
			uint64_t id = ((const struct cmx_ref *)p)->id;
			if (id >= from && id < min)
				min = id;
		} else if (f->type == CMX_T_IDS) {
			const struct cmx_refs *a = p;
			for (uint64_t k = 0; k < a->n; k++)
				if (a->v[k] >= from && a->v[k] < min)
					min = a->v[k];
		}
	}
	return min;
}

/*
 * Reads a length-prefixed array of n elements of `elem` bytes. Checks the count
 * against the field's limit before multiplying, and the bytes against what is
 * left, so no count from a peer can overflow or overrun.
 */
static int get_array(const uint8_t **in, size_t *left, const struct cmx_field *f, size_t elem,
		     const void **ptr, uint64_t *n)
{
	uint64_t count, limit = elem == 1 ? CMX_MAX_ARGS : CMX_MAX_ARRAY;
	size_t len;

	/* The schema's max=, where it gives one, is the field's own limit: a
	 * message's arguments stay within CMX_MAX_ARGS whatever it says. */
	if (f->max)
		limit = f->max;
	if (*left < 8)
		return -EBADMSG;
	memcpy(&count, *in, 8);
	*in += 8;
	*left -= 8;
	if (count > limit)
		return -EBADMSG;
	len = pad8((size_t)count * elem);
	if (len > *left)
		return -EBADMSG;
	*ptr = count ? *in : NULL;
	*n = count;
	*in += len;
	*left -= len;
	return 0;
}

static int decode(const struct cmx_msgdesc *d, const uint8_t **in, size_t *left, void *args);

/*
 * An array of records: the count is read once, checked against the field's
 * limit and against the bytes left (every field of a record takes at least
 * 8 of them) before the C structs are allocated, zeroed, so that a failure
 * half-way leaves nothing cmx_codec_release() cannot walk.
 */
static int get_records(const uint8_t **in, size_t *left, const struct cmx_field *f,
		       struct cmx_recs *a)
{
	const struct cmx_msgdesc *r = f->rec;
	uint64_t count, limit = f->max ? f->max : CMX_MAX_ARRAY;
	char *v;

	if (*left < 8)
		return -EBADMSG;
	memcpy(&count, *in, 8);
	*in += 8;
	*left -= 8;
	if (count > limit || !r->nfields || count > *left / (8u * r->nfields))
		return -EBADMSG;
	if (!count)
		return 0;
	v = calloc((size_t)count, r->size);
	if (!v)
		return -ENOMEM;
	a->v = v;
	a->n = count;
	for (uint64_t k = 0; k < count; k++) {
		int e = decode(r, in, left, v + k * r->size);
		if (e)
			return e;
	}
	return 0;
}

/* Records are allocated zeroed, so only the top level clears its struct. */
static int decode(const struct cmx_msgdesc *d, const uint8_t **inp, size_t *leftp, void *args)
{
	const uint8_t *in = *inp;
	size_t len = *leftp;

	for (unsigned i = 0; i < d->nfields; i++) {
		const struct cmx_field *f = &d->fields[i];
		void *p = field_ptr(args, f);
		int r;

		switch (f->type) {
		case CMX_T_U64:
		case CMX_T_I64:
		case CMX_T_ID:
		case CMX_T_NEWID:
			if (len < 8)
				return -EBADMSG;
			/* cmx_ref starts with its id, so one copy serves all four. */
			memcpy(p, in, 8);
			in += 8;
			len -= 8;
			break;
		case CMX_T_BYTES:
		case CMX_T_STR: {
			struct cmx_blob *b = p;
			r = get_array(&in, &len, f, 1, &b->ptr, &b->len);
			if (r)
				return r;
			/* A str carries its NUL inside its length, and no other. */
			if (f->type == CMX_T_STR && b->len &&
			    (((const char *)b->ptr)[b->len - 1] != '\0' ||
			     memchr(b->ptr, '\0', b->len) != (const char *)b->ptr + b->len - 1))
				return -EBADMSG;
			if (f->type == CMX_T_STR && !b->len && !(f->flags & CMX_F_NULLOK))
				return -EBADMSG;
			break;
		}
		case CMX_T_U64S: {
			struct cmx_u64s *a = p;
			r = get_array(&in, &len, f, 8, (const void **)&a->v, &a->n);
			if (r)
				return r;
			break;
		}
		case CMX_T_IDS: {
			struct cmx_refs *a = p;
			r = get_array(&in, &len, f, 8, (const void **)&a->v, &a->n);
			if (r)
				return r;
			break;
		}
		case CMX_T_RECS:
			r = get_records(&in, &len, f, p);
			if (r)
				return r;
			break;
		default:
			return -EBADMSG;
		}
	}
	*inp = in;
	*leftp = len;
	return 0;
}

int cmx_codec_decode(const struct cmx_msgdesc *d, const uint8_t *in, size_t len, void *args)
{
	int e;

	if (len & 7)
		return -EBADMSG;
	memset(args, 0, d->size);
	e = decode(d, &in, &len, args);
	/* Trailing bytes are a malformed message, not padding. */
	if (!e && len)
		e = -EBADMSG;
	if (e)
		cmx_codec_release(d, args);
	return e;
}

void cmx_codec_release(const struct cmx_msgdesc *d, void *args)
{
	if (!(d->flags & CMX_D_OWNS))
		return;
	for (unsigned i = 0; i < d->nfields; i++) {
		const struct cmx_field *f = &d->fields[i];
		struct cmx_recs *a = field_ptr(args, f);

		if (f->type != CMX_T_RECS)
			continue;
		for (uint64_t k = 0; k < a->n; k++)
			cmx_codec_release(f->rec, (char *)a->v + k * f->rec->size);
		free((void *)a->v);
		a->v = NULL;
		a->n = 0;
	}
}
