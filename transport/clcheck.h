// SPDX-License-Identifier: MIT
// The argument checks made alike by the guest ICD and the daemon: sizes of
// OpenCL C types and image elements, and the bounds of rect and image boxes.
#ifndef CMX_TRANSPORT_CLCHECK_H
#define CMX_TRANSPORT_CLCHECK_H

/*
 * Header only, for the two sides that speak OpenCL (guest/, host/): the
 * transport library itself never includes it. Every function is pure and
 * overflow-safe: a product is checked before it is formed, so a value of a
 * peer can be passed as it came. The guest checks with them so that an
 * unmodified program gets the specification's error before a round trip;
 * the daemon checks the same again, since a raw client skips the guest, and
 * a driver trusts what it is given (PoCL 3.1 copies whole rows from a
 * shorter pitch, and aborts on a __local size larger than its memory).
 */

#include <CL/cl.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

static inline size_t cmx_cl_scalar_size(const char *t, size_t n, size_t addr_bytes)
{
	static const struct {
		const char *name;
		size_t size;
	} types[] = {
	    {"char", 1},	 {"uchar", 1},		{"unsigned char", 1}, {"short", 2},
	    {"ushort", 2},	 {"unsigned short", 2}, {"int", 4},	      {"uint", 4},
	    {"unsigned int", 4}, {"long", 8},		{"ulong", 8},	      {"unsigned long", 8},
	    {"float", 4},	 {"double", 8},		{"half", 2},	      {"bool", 1},
	};

	if ((n == 6 && !memcmp(t, "size_t", 6)) || (n == 9 && !memcmp(t, "ptrdiff_t", 9)) ||
	    (n == 8 && !memcmp(t, "intptr_t", 8)) || (n == 9 && !memcmp(t, "uintptr_t", 9)))
		return addr_bytes;
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strlen(types[i].name) == n && !memcmp(t, types[i].name, n))
			return types[i].size;
	return 0;
}

/*
 * The size a by-value argument of type t (CL_KERNEL_ARG_TYPE_NAME) must be
 * given with: builtin scalars and vectors (a 3-vector takes the room of 4),
 * pointers; 0 for anything else (structs, typedefs, unions), whose size no
 * OpenCL query tells.
 */
static inline size_t cmx_cl_type_size(const char *t, size_t addr_bytes)
{
	size_t n = strlen(t), elems = 1, digits = 0;

	while (n && t[n - 1] == ' ')
		n--;
	if (n && t[n - 1] == '*')
		return addr_bytes;
	while (digits < n && t[n - 1 - digits] >= '0' && t[n - 1 - digits] <= '9')
		digits++;
	if (digits && digits < n) {
		unsigned long v = 0;

		for (size_t i = n - digits; i < n && v < 100; i++)
			v = v * 10 + (unsigned long)(t[i] - '0');
		switch (v) {
		case 2:
		case 4:
		case 8:
		case 16:
			elems = v;
			break;
		case 3:
			elems = 4;
			break;
		default:
			return 0;
		}
		n -= digits;
	}
	return cmx_cl_scalar_size(t, n, addr_bytes) * elems;
}

/* The memory object type an image argument of type t takes (its
 * CL_KERNEL_ARG_TYPE_NAME), or 0 when t names no image type. */
static inline cl_mem_object_type cmx_cl_image_arg_type(const char *t)
{
	static const struct {
		const char *name;
		cl_mem_object_type type;
	} types[] = {
	    {"image1d_t", CL_MEM_OBJECT_IMAGE1D},
	    {"image1d_array_t", CL_MEM_OBJECT_IMAGE1D_ARRAY},
	    {"image1d_buffer_t", CL_MEM_OBJECT_IMAGE1D_BUFFER},
	    {"image2d_t", CL_MEM_OBJECT_IMAGE2D},
	    {"image2d_depth_t", CL_MEM_OBJECT_IMAGE2D},
	    {"image2d_array_t", CL_MEM_OBJECT_IMAGE2D_ARRAY},
	    {"image2d_array_depth_t", CL_MEM_OBJECT_IMAGE2D_ARRAY},
	    {"image3d_t", CL_MEM_OBJECT_IMAGE3D},
	};

	for (size_t i = 0; i < sizeof(types) / sizeof(*types); i++)
		if (!strcmp(t, types[i].name))
			return types[i].type;
	return 0;
}

/* Bytes of one element of an image format; 0 for a format the
 * specification does not define. */
static inline size_t cmx_cl_elem_size(uint64_t order, uint64_t type)
{
	size_t channels, bytes;

	switch (type) {
	case CL_UNORM_SHORT_565:
	case CL_UNORM_SHORT_555:
		return 2;
	case CL_UNORM_INT_101010:
#ifdef CL_UNORM_INT_101010_2
	case CL_UNORM_INT_101010_2:
#endif
	case CL_UNORM_INT24:
		return 4;
	case CL_SNORM_INT8:
	case CL_UNORM_INT8:
	case CL_SIGNED_INT8:
	case CL_UNSIGNED_INT8:
		bytes = 1;
		break;
	case CL_SNORM_INT16:
	case CL_UNORM_INT16:
	case CL_SIGNED_INT16:
	case CL_UNSIGNED_INT16:
	case CL_HALF_FLOAT:
		bytes = 2;
		break;
	case CL_SIGNED_INT32:
	case CL_UNSIGNED_INT32:
	case CL_FLOAT:
		bytes = 4;
		break;
	default:
		return 0;
	}
	switch (order) {
	case CL_R:
	case CL_A:
	case CL_INTENSITY:
	case CL_LUMINANCE:
	case CL_DEPTH:
		channels = 1;
		break;
	case CL_RG:
	case CL_RA:
	case CL_Rx:
		channels = 2;
		break;
	case CL_RGB:
	case CL_RGx:
	case CL_sRGB:
		channels = 3;
		break;
	case CL_RGBA:
	case CL_BGRA:
	case CL_ARGB:
	case CL_RGBx:
	case CL_sRGBA:
	case CL_sBGRA:
	case CL_sRGBx:
	case CL_ABGR:
		channels = 4;
		break;
	default:
		return 0;
	}
	return channels * bytes;
}

/*
 * An image's extent as transfers address it: width, then rows (height, or
 * the images of a 1D array), then slices (depth, or the images of a 2D
 * array); 1 where the type has no such dimension. Nonzero for a type that
 * is not an image's.
 */
static inline int cmx_cl_image_extent(uint64_t type, uint64_t w, uint64_t h, uint64_t d,
				      uint64_t arr, uint64_t ext[3])
{
	ext[0] = w, ext[1] = 1, ext[2] = 1;
	switch (type) {
	case CL_MEM_OBJECT_IMAGE1D:
	case CL_MEM_OBJECT_IMAGE1D_BUFFER:
		return 0;
	case CL_MEM_OBJECT_IMAGE1D_ARRAY:
		ext[1] = arr;
		return 0;
	case CL_MEM_OBJECT_IMAGE2D:
		ext[1] = h;
		return 0;
	case CL_MEM_OBJECT_IMAGE2D_ARRAY:
		ext[1] = h, ext[2] = arr;
		return 0;
	case CL_MEM_OBJECT_IMAGE3D:
		ext[1] = h, ext[2] = d;
		return 0;
	}
	return 1;
}

/* A box (origin o, region r) inside an image of extent ext: every region
 * size at least 1, every end within the extent. 0 when it is. */
static inline int cmx_cl_box_bad(const uint64_t ext[3], const uint64_t o[3], const uint64_t r[3])
{
	for (int i = 0; i < 3; i++)
		if (!r[i] || o[i] > ext[i] || r[i] > ext[i] - o[i])
			return 1;
	return 0;
}

/*
 * The pitches of a new image's contents in host memory (clCreateImage):
 * row and slice as given, 0 meaning "packed". Given ones must be at least a
 * row (width * elem, a multiple of elem) and a slice (rows * row, a
 * multiple of row; a 1D array's slice is one image: a row). The
 * specification's error is CL_INVALID_IMAGE_DESCRIPTOR; 0 when they are
 * good. elem is the format's (cmx_cl_elem_size(), not 0).
 */
static inline int cmx_cl_image_pitches_bad(uint64_t type, uint64_t w, uint64_t h, uint64_t elem,
					   uint64_t row, uint64_t slice)
{
	uint64_t min_row, min_slice;

	if (!elem || __builtin_mul_overflow(w, elem, &min_row))
		return 1;
	if (row && (row < min_row || row % elem))
		return 1;
	if (!row)
		row = min_row;
	switch (type) {
	case CL_MEM_OBJECT_IMAGE1D_ARRAY:
		min_slice = row;
		break;
	case CL_MEM_OBJECT_IMAGE2D_ARRAY:
	case CL_MEM_OBJECT_IMAGE3D:
		if (__builtin_mul_overflow(row, h, &min_slice))
			return 1;
		break;
	default:
		/* No slices: the pitch means nothing, as drivers take it. */
		return 0;
	}
	return slice && (slice < min_slice || slice % row);
}

/*
 * A rect transfer's pitches for region r (bytes, rows, slices): 0 takes the
 * specification's default (packed), a given row pitch must hold a row of
 * the region and a given slice pitch its rows, as a multiple of the row
 * pitch. Fills the defaults in; nonzero when one is bad (CL_INVALID_VALUE).
 */
static inline int cmx_cl_rect_pitches_bad(const size_t r[3], size_t *row, size_t *slice)
{
	size_t min;

	if (!*row)
		*row = r[0];
	else if (*row < r[0])
		return 1;
	if (__builtin_mul_overflow(r[1], *row, &min))
		return 1;
	if (!*slice)
		*slice = min;
	else if (*slice < min || *slice % *row)
		return 1;
	return 0;
}

/* One past the last byte a rect (origin o, region r, every r[i] >= 1)
 * touches with these pitches; nonzero when that overflows. */
static inline int cmx_cl_rect_end(const size_t o[3], const size_t r[3], size_t row, size_t slice,
				  size_t *end)
{
	size_t z, y, a, b;

	return __builtin_add_overflow(o[2], r[2] - 1, &z) || __builtin_mul_overflow(z, slice, &a) ||
	       __builtin_add_overflow(o[1], r[1] - 1, &y) || __builtin_mul_overflow(y, row, &b) ||
	       __builtin_add_overflow(a, b, end) || __builtin_add_overflow(*end, o[0], end) ||
	       __builtin_add_overflow(*end, r[0], end);
}

/* [off, off + size) inside a memory object of `have` bytes. */
static inline int cmx_cl_range_bad(uint64_t off, uint64_t size, uint64_t have)
{
	return off > have || size > have - off;
}

#endif
