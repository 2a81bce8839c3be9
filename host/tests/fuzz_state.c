// SPDX-License-Identifier: MIT
// libFuzzer harness for the state file's reader: a file is checked whole,
// then its records are walked and each recorded call's arguments decoded
// with its schema descriptor, as a restore does before any handler runs.
#include <stdint.h>
#include <stdlib.h>

#include "codec.h"
#include "proto.gen.h"
#include "state.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint64_t args[4096]; /* the largest decoded struct fits with room */
	struct cmx_state_reader r;
	struct cmx_state_rec rec;
	uint8_t *copy;

	/* An aligned copy, as a mapped file is. */
	copy = malloc(size ? size : 1);
	if (!copy)
		return 0;
	for (size_t i = 0; i < size; i++)
		copy[i] = data[i];
	if (!cmx_state_open(&r, copy, size))
		while (cmx_state_next(&r, &rec) == 1)
			if (rec.type == CMX_STATE_CALL)
				(void)cmx_codec_decode(cmx_op_info(rec.hdr.op)->in, rec.args,
						       rec.hdr.size, args);
	free(copy);
	return 0;
}
