// SPDX-License-Identifier: MIT
// Table-driven argument codec: the generator emits descriptors, this encodes.
#ifndef CMX_CODEC_H
#define CMX_CODEC_H

#include <stddef.h>
#include <stdint.h>

/*
 * Wire encoding of one message's arguments, field by field in schema order:
 *   u64, i64, id        8 bytes
 *   bytes, str          u64 length, then the bytes, zero-padded to 8
 *                       (a str's length counts its terminating NUL)
 *   u64[], id[]         u64 count, then count * 8 bytes
 *   rec[]:NAME          u64 count, then count records, each its fields in
 *                       this same encoding (a record of the schema)
 * Everything stays 8-byte aligned, so decoded arrays point into the receive
 * buffer without copies. Only record arrays are decoded into memory of
 * their own (an array of C structs), which cmx_codec_release() frees.
 */
enum cmx_ftype {
	CMX_T_U64,
	CMX_T_I64,
	CMX_T_ID,     /* an existing object; 0 only with CMX_F_NULLOK */
	CMX_T_NEWID,  /* a guest-chosen id for an object this call creates */
	CMX_T_BYTES,
	CMX_T_STR,
	CMX_T_U64S,
	CMX_T_IDS,
	CMX_T_RECS, /* an array of records (struct cmx_recs) */
};

#define CMX_F_NULLOK 0x1u /* id 0 (or an empty str) means "none" */
/* Attributes of an argument (schema/README.md), for the host's checks: */
#define CMX_F_POISONED 0x2u /* an id that may name a poisoned object, taken as it is */
#define CMX_F_WAITLIST 0x4u /* the wait list of a command enqueued on the call's queue */
#define CMX_F_PEEK 0x8u	    /* an event only looked at: a held command stays held */
/* The object the call changes: a checkpoint keeps the call with it. */
#define CMX_F_CHANGES 0x10u
/* With CMX_F_CHANGES: the part of it the call sets; a later call with the
 * same value replaces this one (a kernel argument's index). */
#define CMX_F_SLOT 0x20u

struct cmx_field {
	const char *name;
	uint8_t type;	/* enum cmx_ftype */
	uint8_t kind;	/* enum cmx_kind for ids */
	uint16_t flags; /* CMX_F_* */
	uint32_t offset; /* of the value in the C struct */
	uint32_t max;	 /* bytes or elements; 0 = the global limit */
	int32_t err;	 /* OpenCL error for a bad id here; 0 = the kind's */
	const struct cmx_msgdesc *rec; /* CMX_T_RECS: the record's layout */
};

/* A message's arguments, or one record's fields. */
struct cmx_msgdesc {
	const char *name;
	uint16_t op;	  /* 0 for a record */
	uint16_t nfields; /* a record has at least one */
	uint32_t size;	  /* sizeof the C struct */
	const struct cmx_field *fields;
	uint32_t flags; /* CMX_D_* */
};

/* Decoding allocates (record arrays, at any depth): release what it made. */
#define CMX_D_OWNS 0x1u

/* In C structs: bytes and str fields. */
struct cmx_blob {
	const void *ptr;
	uint64_t len;
};

/* In C structs: u64[] fields. */
struct cmx_u64s {
	const uint64_t *v;
	uint64_t n;
};

/* In C structs: id fields, and id[] fields; `h` is the receiver's resolved
 * handle(s), filled by the host, ignored on the wire. */
struct cmx_ref {
	uint64_t id;
	void *h;
};

struct cmx_refs {
	const uint64_t *v;
	uint64_t n;
	void **h;
};

/* In C structs: rec[] fields, n records of the field's rec->size bytes each
 * (the generator declares a typed twin, struct cmx_NAME_array). */
struct cmx_recs {
	const void *v;
	uint64_t n;
};

size_t cmx_codec_size(const struct cmx_msgdesc *d, const void *args);
/* Writes exactly cmx_codec_size() bytes to out. */
void cmx_codec_encode(const struct cmx_msgdesc *d, const void *args, uint8_t *out);
/* The smallest id of at least `from` that args name (id, new id and id[]
 * fields), or UINT64_MAX: the guest's check that a call names no object of
 * an earlier session. */
uint64_t cmx_codec_min_id(const struct cmx_msgdesc *d, const void *args, uint64_t from);
/* 0, or -EBADMSG when the bytes are not a well-formed message for d (-ENOMEM:
 * no memory for its records). Pointers in args refer into in[]; in must be
 * 8-byte aligned. Each byte of in[] is read once, so that a checked length
 * is the length used. With CMX_D_OWNS in d->flags, a successful decode is
 * undone by cmx_codec_release(); a failed one has released already. */
int cmx_codec_decode(const struct cmx_msgdesc *d, const uint8_t *in, size_t len, void *args);
/* Frees the record arrays cmx_codec_decode() made in args (no-op without
 * CMX_D_OWNS); never for arrays the sender built itself. */
void cmx_codec_release(const struct cmx_msgdesc *d, void *args);

#endif
