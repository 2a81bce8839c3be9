// SPDX-License-Identifier: MIT
// Header validation shared by the daemon and the decoder fuzzer.
#include "frame.h"

#include <errno.h>

#include "proto.gen.h"

int cmx_frame_check_call(const struct cmx_hdr *h)
{
	const struct cmx_opinfo *oi = cmx_op_info(h->op);

	if (!oi || (oi->flags & CMX_OPF_NOTIFY))
		return -EOPNOTSUPP;
	if (h->size > CMX_MAX_ARGS || (h->size & 7))
		return -EMSGSIZE;
	if (h->bulk && !(oi->flags & CMX_OPF_BULK_IN) && !(h->flags & CMX_HDR_AREA))
		return -EBADMSG;
	if (h->bulk > CMX_MAX_BULK)
		return -EMSGSIZE;
	/* The schema says whether the call may be sent sync, async or both. */
	if (!(oi->flags & (h->flags & CMX_HDR_SYNC ? CMX_OPF_SYNC : CMX_OPF_ASYNC)) ||
	    (h->flags & ~(CMX_HDR_SYNC | CMX_HDR_AREA | CMX_HDR_LZ4)))
		return -EBADMSG;
	/* A compressed payload: one that travels in the stream, of a call
	 * that carries data. */
	if ((h->flags & CMX_HDR_LZ4) &&
	    (!h->bulk || (h->flags & CMX_HDR_AREA) || !(oi->flags & CMX_OPF_BULK_IN)))
		return -EBADMSG;
	/* An area block: the payload of a call with data, or the space where
	 * a read's data is to land: a sync read's reply, or an async read's
	 * that may land there (bulk area). */
	if ((h->flags & CMX_HDR_AREA) &&
	    !(oi->flags & (CMX_OPF_BULK_IN | (h->flags & CMX_HDR_SYNC ? CMX_OPF_BULK_OUT
									: CMX_OPF_BULK_AREA))))
		return -EBADMSG;
	return 0;
}
