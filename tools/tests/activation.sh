#!/bin/sh
# SPDX-License-Identifier: MIT
# Socket activation: clmuxd started by systemd-socket-activate (the
# protocol of a systemd socket unit) takes the guests' and the admin
# socket it is passed instead of binding its own, closes one that no
# listener names, serves an OpenCL program whose connection waited in the
# socket's backlog while the daemon started, and leaves the socket files to
# their owner when it exits. Run from the build tree (make check).
set -u
clmuxd=${CLMUXD:-host/clmuxd}
command -v systemd-socket-activate >/dev/null ||
	{ echo "SKIP: no systemd-socket-activate (package systemd)"; exit 77; }
native=$(ls /etc/OpenCL/vendors/*.icd 2>/dev/null | grep -v '/clmux.icd$' | head -1)
[ -n "$native" ] || { echo "SKIP: no native ICD in /etc/OpenCL/vendors"; exit 77; }
tmp=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
fail=0
pass() { echo "PASS: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

# The daemon starts at the first connection, as a socket unit starts its
# service; it then is the process systemd-socket-activate was (an exec).
CLMUX_LOG=info systemd-socket-activate -l "$tmp/c.sock" -l "$tmp/a.sock" -l "$tmp/x.sock" \
	"$clmuxd" --listen "unix:$tmp/c.sock" --admin "$tmp/a.sock" >"$tmp/clmuxd.log" 2>&1 &
pid=$!
i=0
until [ -S "$tmp/x.sock" ] || [ $i -ge 200 ]; do sleep 0.05; i=$((i + 1)); done

OCL_ICD_VENDORS=$native timeout 120 tools/clmux-sample >"$tmp/native.out" 2>&1
if CLMUX_SERVER="unix:$tmp/c.sock" OCL_ICD_VENDORS=$PWD/icd/clmux.icd \
	timeout 120 tools/clmux-sample >"$tmp/clmux.out" 2>&1 && grep -qi '^platform: .*clmux' "$tmp/clmux.out" &&
	grep '^result' "$tmp/native.out" >"$tmp/native.sums" && [ -s "$tmp/native.sums" ] &&
	grep '^result' "$tmp/clmux.out" | cmp -s - "$tmp/native.sums"; then
	pass "an OpenCL program through the passed socket: the native checksums"
else
	bad "an OpenCL program through the passed socket"
	cat "$tmp/native.out" "$tmp/clmux.out"
fi
if timeout 60 tools/clmuxctl --admin "$tmp/a.sock" tenants >"$tmp/ctl.out" 2>&1 &&
	grep -q '^default ' "$tmp/ctl.out"; then
	pass "clmuxctl through the passed admin socket"
else
	bad "clmuxctl through the passed admin socket"
	cat "$tmp/ctl.out"
fi
for s in c.sock a.sock; do
	if grep -q "$tmp/$s: the socket the service manager opened" "$tmp/clmuxd.log"; then
		pass "$s taken from the service manager"
	else
		bad "$s was not taken from the service manager"
	fi
done
if grep -q "passed a socket (fd [0-9]*, $tmp/x.sock) that no listener names: closed" \
	"$tmp/clmuxd.log"; then
	pass "a passed socket no listener names is closed, with a line"
else
	bad "no line for the passed socket no listener names"
fi

kill -TERM "$pid"
wait "$pid"
rc=$?
pid=""
if [ $rc = 0 ] && [ -S "$tmp/c.sock" ] && [ -S "$tmp/a.sock" ]; then
	pass "clmuxd exits 0 and leaves the passed sockets' files to the service manager"
else
	bad "exit status $rc; files left: $(ls "$tmp")"
fi
[ $fail = 0 ] || { echo "--- clmuxd's log"; tail -30 "$tmp/clmuxd.log"; }
exit $fail
