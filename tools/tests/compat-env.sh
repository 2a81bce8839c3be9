# SPDX-License-Identifier: MIT
# Sourced by the compatibility scripts (tools/compat-*.sh): two vendors
# directories in $tmp (native/: the first native ICD of $OCL_ICD_VENDORS;
# clmux/: clmux.icd alone) and a clmuxd of their own on $tmp/s.sock, stopped
# on exit. Exits 77 where the check cannot run here.
icd=${OCL_ICD_VENDORS:-icd}
clmuxd=${CLMUXD:-host/clmuxd}
[ -f "$icd/clmux.icd" ] || { echo "FAIL: no $icd/clmux.icd"; exit 1; }
[ -x "$clmuxd" ] || { echo "FAIL: no daemon at $clmuxd"; exit 1; }
# An ASan build's ICD cannot load into an uninstrumented program (clinfo,
# /usr/bin/python3): the sanitizer runtime must come first.
nm -D "$(cat "$icd/clmux.icd")" 2>/dev/null | grep -q __asan_init &&
	{ echo "SKIP: sanitizer-instrumented libclmux cannot load into an uninstrumented program"; exit 77; }
native=$(ls "$icd"/*.icd | grep -v '/clmux\.icd$' | head -1)
[ -n "$native" ] || { echo "SKIP: no native ICD next to clmux.icd"; exit 77; }

tmp=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
mkdir "$tmp/native" "$tmp/clmux"
cp "$native" "$tmp/native/"
cp "$icd/clmux.icd" "$tmp/clmux/"

"$clmuxd" --listen "unix:$tmp/s.sock" 2>"$tmp/clmuxd.log" &
pid=$!
i=0
while [ ! -S "$tmp/s.sock" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
[ -S "$tmp/s.sock" ] || { echo "FAIL: clmuxd did not start"; cat "$tmp/clmuxd.log"; exit 1; }
