# SPDX-License-Identifier: MIT
# Sourced by the compatibility scripts (tools/compat-*.sh): two vendors
# directories in $tmp (native/: the first native ICD of $OCL_ICD_VENDORS;
# clmux/: clmux.icd alone) and a clmuxd of their own on $tmp/s.sock, stopped
# on exit; the daemon sees the native ICD alone. Exits 77 where the check
# cannot run here. CMX_COMPAT_DAEMON_ARGS go to the daemon (`--device
# oclgrind`, with $OCL_ICD_VENDORS holding Oclgrind's ICD and clmux.icd:
# tools/compat-oclgrind-suites.sh). $device names the native ICD (pocl,
# oclgrind): the scripts' exception lists are per device.
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
device=$(basename "$native" .icd)

tmp=$(mktemp -d)
pid=""
# A failed run shows the daemon's log (CI keeps only the test's).
cleanup() {
	rc=$?
	[ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
	[ $rc -ne 0 ] && [ -s "$tmp/clmuxd.log" ] && { echo "--- clmuxd's log:"; tail -40 "$tmp/clmuxd.log"; }
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
mkdir "$tmp/native" "$tmp/clmux"
cp "$native" "$tmp/native/"
cp "$icd/clmux.icd" "$tmp/clmux/"

# Starts the daemon unless it runs: a driver that crashes (Oclgrind, on a
# test that crashes it natively too) takes the daemon with it, and the next
# test gets a fresh one.
clmuxd_up() {
	[ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && return 0
	[ -n "$pid" ] && { wait "$pid" 2>/dev/null; echo "note: clmuxd ended (driver crash?); restarted" >>"$tmp/restarts"; }
	rm -f "$tmp/s.sock"
	# shellcheck disable=SC2086 # CMX_COMPAT_DAEMON_ARGS: words
	OCL_ICD_VENDORS="$tmp/native" "$clmuxd" --listen "unix:$tmp/s.sock" --admin none \
		${CMX_COMPAT_DAEMON_ARGS:-} 2>>"$tmp/clmuxd.log" &
	pid=$!
	i=0
	while [ ! -S "$tmp/s.sock" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
	[ -S "$tmp/s.sock" ] || { echo "FAIL: clmuxd did not start"; cat "$tmp/clmuxd.log"; exit 1; }
}
clmuxd_up
