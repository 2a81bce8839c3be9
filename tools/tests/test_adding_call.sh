#!/bin/sh
# SPDX-License-Identifier: MIT
# docs/protocol.md's "Adding a call" builds and runs: its schema block goes
# through cmxgen alone, its guest function and host handler are compiled
# against that C and run by tools/tests/adding_call.c on the host's OpenCL
# driver (the system's ICDs: the example is the daemon's side of a call).
set -u
srcdir=${srcdir:-.}
doc="$srcdir/docs/protocol.md"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# The fenced block after each "<!-- adding-call: NAME -->" marker.
block() {
	awk -v m="<!-- adding-call: $1 -->" '
		$0 == m { want = 1; next }
		want && /^```/ { if (inside) exit; inside = 1; next }
		inside { print }' "$doc"
}
{ echo "version 1"; block schema; } >"$tmp/example.schema"
block guest >"$tmp/doc_guest.c"
block host >"$tmp/doc_host.c"
for f in example.schema doc_guest.c doc_host.c; do
	[ -s "$tmp/$f" ] || { echo "not ok - docs/protocol.md has no $f block"; exit 1; }
done
${PYTHON:-python3} "$srcdir/tools/cmxgen.py" --schema "$tmp/example.schema" \
	--out-proto-h "$tmp/proto.gen.h" --out-proto-c "$tmp/proto.gen.c" \
	--out-guest-h "$tmp/stubs.gen.h" --out-host-h "$tmp/handlers.gen.h" \
	--out-host-c "$tmp/handlers.gen.c" || { echo "not ok - cmxgen on the example"; exit 1; }
# OCL_ICD_VENDORS names the build's clmux ICD in make check: the example
# is the host's half, which runs on the system's driver.
unset OCL_ICD_VENDORS
if ! ${CC:-cc} -std=gnu11 -Wall -Wextra -Werror -DCL_TARGET_OPENCL_VERSION=300 \
	-I"$tmp" -I"$srcdir/guest" -I"$srcdir/host" -I"$srcdir/transport" \
	-o "$tmp/adding_call" "$srcdir/tools/tests/adding_call.c" "$tmp/proto.gen.c" \
	"$tmp/handlers.gen.c" "$srcdir/transport/codec.c" -lOpenCL; then
	echo "not ok - the example compiles"
	exit 1
fi
"$tmp/adding_call"
