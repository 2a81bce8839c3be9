// SPDX-License-Identifier: MIT
// The state file of one session (checkpoint and restore): its format, a
// writer, and a reader that checks a whole file before anything uses it.
#ifndef CMX_HOST_STATE_H
#define CMX_HOST_STATE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "wire.h"

/* docs/architecture.md "Restarting the daemon" has the layout. Every
 * integer is little-endian; every record starts 8-byte aligned. */
#define CMX_STATE_MAGIC	     "CMXSTAT\n"
#define CMX_STATE_VERSION    3u
#define CMX_STATE_HEAD_SIZE  128u
#define CMX_STATE_REC_SIZE   16u
#define CMX_STATE_TENANT_MAX 64u
/* A state file's name, and the part of it that names the worker whose
 * file it is (cmx_state_key_name()). */
#define CMX_STATE_NAME_MAX 128u
#define CMX_STATE_KEY_MAX  32u
/* One record's payload, and a whole file: named limits checked before
 * anything is multiplied or allocated. */
#define CMX_STATE_REC_MAX  (CMX_HDR_SIZE + CMX_MAX_ARGS + (256ull << 20))
#define CMX_STATE_FILE_MAX (64ull << 30)
/* Contents travel in pieces of at most this many bytes. */
#define CMX_STATE_PIECE (64ull << 20)

enum cmx_state_type {
	/* A creation request as the guest sent it and the daemon applied it:
	 * struct cmx_hdr, its encoded arguments, its payload. */
	CMX_STATE_CALL = 1,
	/* Bytes of a buffer: u64 id, u64 offset, the bytes. */
	CMX_STATE_CONTENTS = 2,
	/* The last record: u64 the number of records before it. */
	CMX_STATE_END = 3,
	/* The session's shared area (OpenArea), before any call: u64 bytes
	 * of its data region, u64 CMX_AREA_* flags of its layout. */
	CMX_STATE_AREA = 4,
	/* An event the guest holds: struct cmx_state_event, then its
	 * callbacks not yet answered, nc struct cmx_state_event_cb. */
	CMX_STATE_EVENT = 5,
	/* Bytes of an image: struct cmx_state_image, then the box's
	 * elements, rows and slices packed. */
	CMX_STATE_IMAGE = 6,
};

/* An event as a checkpoint found it: its command ended (complete, or
 * failed with a negative status), or a user event the guest has not set
 * yet. What the guest answers itself (its queue, its context's handle)
 * is not here. */
struct cmx_state_event {
	uint64_t id;
	uint64_t context; /* the context's id; 0 for a failed one that has none */
	int64_t status;	  /* CL_COMPLETE, a negative status, or a user event's own */
	uint32_t type;	  /* CL_EVENT_COMMAND_TYPE */
	uint32_t flags;	  /* CMX_STATE_EV_* */
	/* CL_PROFILING_COMMAND_QUEUED .. _COMPLETE, where flags has
	 * CMX_STATE_EV_PROF << i */
	uint64_t prof[5];
	uint64_t nc; /* callbacks after it */
};
_Static_assert(sizeof(struct cmx_state_event) == 80, "state event layout");

/* A user event (else a command's), and which profiling values it has. */
#define CMX_STATE_EV_USER 0x1u
#define CMX_STATE_EV_PROF 0x2u
#define CMX_STATE_EV_ALL  0x3fu

/* A callback the guest registered and was not answered yet: the status
 * it waits for (CL_COMPLETE, CL_RUNNING, CL_SUBMITTED) and its tag. */
struct cmx_state_event_cb {
	uint64_t type, tag;
};
/* The daemon's own limit is 64 an event (host/exec_event.c). */
#define CMX_STATE_EVENT_CBS 64u

/* A box of an image as a checkpoint read it with clEnqueueReadImage,
 * its rows packed: one run of the image's packed bytes (part of one row,
 * whole rows of one slice, or whole slices), so that a restore knows an
 * image it holds whole. The image's own shape is here too: a restore
 * writes only into an image of that shape. */
struct cmx_state_image {
	uint64_t id;
	uint64_t elem;	    /* bytes of one element */
	uint64_t extent[3]; /* the image's: elements, rows, slices */
	uint64_t origin[3];
	uint64_t region[3];
};
_Static_assert(sizeof(struct cmx_state_image) == 88, "state image layout");

/* Larger than any device's image (a dimension), or element (RGBA of
 * 32-bit channels). */
#define CMX_STATE_IMAGE_DIM  (1u << 24)
#define CMX_STATE_IMAGE_ELEM 16u

struct cmx_state_head {
	char magic[8];
	uint32_t version;
	uint32_t head_size;
	uint32_t proto;	  /* CMX_PROTO_VERSION of the recorded calls */
	uint32_t crc;	  /* CRC32C of these 128 bytes with crc 0 */
	uint64_t session; /* the session's id and resume token */
	uint64_t token;
	/* Messages of the session after its Hello that the daemon applied:
	 * a resuming guest sends again those after them. */
	uint64_t applied;
	uint64_t records;		   /* records before END */
	uint64_t body;			   /* bytes after this header */
	char tenant[CMX_STATE_TENANT_MAX]; /* NUL-terminated, NUL-padded */
};
_Static_assert(sizeof(struct cmx_state_head) == CMX_STATE_HEAD_SIZE, "state head layout");

struct cmx_state_rechdr {
	uint32_t type; /* enum cmx_state_type */
	uint32_t crc;  /* CRC32C of the payload */
	uint64_t len;  /* payload bytes; padding to 8 follows */
};
_Static_assert(sizeof(struct cmx_state_rechdr) == CMX_STATE_REC_SIZE, "state record layout");

/* One record as the reader hands it out; pointers into the file. */
struct cmx_state_rec {
	uint32_t type;
	const uint8_t *data;
	uint64_t len;
	/* CMX_STATE_CALL; with CMX_HDR_AREA its payload is the hdr.bulk
	 * bytes at hdr.area_off of the area (a buffer's storage), not in
	 * the record, and bulk is NULL */
	struct cmx_hdr hdr;
	const uint8_t *args, *bulk;
	/* CMX_STATE_CONTENTS; CMX_STATE_IMAGE: its id, and the offset of
	 * its box in the image's packed bytes */
	uint64_t id, offset;
	/* CMX_STATE_IMAGE: its box, whose bytes are at data + sizeof(img),
	 * len - sizeof(img) of them */
	struct cmx_state_image img;
	/* CMX_STATE_AREA */
	uint64_t area_len, area_flags;
	/* CMX_STATE_EVENT: its callbacks are ev.nc at cbs (unaligned) */
	struct cmx_state_event ev;
	const uint8_t *cbs;
};

struct cmx_state_reader {
	const uint8_t *p;
	size_t n, pos;
	struct cmx_state_head head;
};

uint32_t cmx_state_crc(uint32_t crc, const void *p, size_t n);

/* Checks a whole file in memory: size, magic, version, header checksum,
 * then every record's bounds, checksum and shape, END last. 0, -EBADMSG
 * (damaged or hostile), -EPROTONOSUPPORT (another version of the file or
 * of the protocol). Nothing is allocated: this is the fuzzers' entry. */
int cmx_state_open(struct cmx_state_reader *r, const void *p, size_t n);
/* The next record of a file cmx_state_open() accepted: 1, or 0 after the
 * last one before END. */
int cmx_state_next(struct cmx_state_reader *r, struct cmx_state_rec *rec);

/* The header of the file `name` of dir alone, checked as
 * cmx_state_open() checks it (magic, version, size, checksum, tenant),
 * for whoever only needs to know whose file it is: 0, -EBADMSG,
 * -EPROTONOSUPPORT or -errno. The records are not looked at. */
int cmx_state_head_read(int dirfd, const char *name, struct cmx_state_head *h);

/*
 * State file names begin with the key of the worker that wrote the file
 * (docs/architecture.md, "The state file"): "t:ci" is "t_ci", every byte
 * but [A-Za-z0-9_] made '_', at most CMX_STATE_KEY_MAX - 1 bytes. A
 * tenant's key may lose bytes so (its worker also checks the tenant in
 * the header); a listener's or a VM device's ("l:N", "v:N") does not.
 */
void cmx_state_key_name(const char *key, char *out, size_t len);
/* The key part of a state file's name into key (len bytes): 1, or 0 for
 * a name without one (a file of an older clmuxd, or one put there by
 * hand), which its tenant's worker restores. */
int cmx_state_name_key(const char *name, char *key, size_t len);

/* The state directory: made 0700 when absent; refused (-EPERM) unless a
 * directory owned by this process's user with no access for others. An fd
 * or -errno. */
int cmx_state_dir_open(const char *path);
/* Maps the file `name` of dir (a regular file of this user, mode 0600 or
 * less) read-only: 0 or -errno; cmx_state_unmap() gives it back. */
int cmx_state_map(int dirfd, const char *name, const void **p, size_t *n);
void cmx_state_unmap(const void *p, size_t n);

struct cmx_state_writer {
	int dirfd, fd;
	int err;
	char name[CMX_STATE_NAME_MAX], tmp[CMX_STATE_NAME_MAX + 8];
	struct cmx_state_head head;
	size_t fill;
	uint8_t buf[1 << 16];
};

/* Starts `name` in dir: written as name.tmp (0600), renamed at commit. */
int cmx_state_begin(struct cmx_state_writer *w, int dirfd, const char *name, uint64_t session,
		    uint64_t token, uint64_t applied, const char *tenant);
/* One record from pieces; a failure is kept and reported by commit. */
void cmx_state_put(struct cmx_state_writer *w, uint32_t type, const struct iovec *iov, int n);
/* END, the header, rename: 0 or -errno (the file is gone then). */
int cmx_state_commit(struct cmx_state_writer *w);
void cmx_state_abort(struct cmx_state_writer *w);

#endif
