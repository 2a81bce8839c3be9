// SPDX-License-Identifier: MIT
// libFuzzer harness: fuzz_session with a second guest thread that rewrites
// the shared area and the rings while the daemon reads them (double fetches).
#define CMX_FUZZ_FLIP 1
#include "fuzz_session.c"
