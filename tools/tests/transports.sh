#!/bin/sh
# SPDX-License-Identifier: MIT
# The transports beyond unix: a representative part of the end-to-end suite
# and the bad-input test (a client killed mid-transfer, wrong and missing
# tokens, a token flood, malformed first bytes) and the bulk lanes' (lying
# lanes, a client killed mid-transfer on them) through tcp and vsock-uds,
# one program over IPv6; the programs again with every tenant in one
# process (--workers off); then a guest refused at the door offers no clmux
# platform and says why in one line. Run from the build tree (make check).
set -u
clmuxd=${CLMUXD:-host/clmuxd}
tmp=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
fail=0

run() { # TRANSPORT PROGRAM
	if CMX_E2E_TRANSPORT=$1 "./$2" >"$tmp/out" 2>&1; then
		echo "PASS: $2 over $1"
	else
		echo "FAIL: $2 over $1"
		tail -40 "$tmp/out"
		fail=1
	fi
}

# Listen addresses the daemon must refuse, with one line, before it starts.
(umask 022 && echo "t1 0123456789abcdef0123" >"$tmp/open-tokens")
(umask 077 && echo "t1 0123456789abcdef0123" >"$tmp/ok-tokens")
for bad in "tcp:127.0.0.1:1" "tcp:127.0.0.1:1,tokens=$tmp/open-tokens" "tcp:localhost:1,tokens=$tmp/ok-tokens" \
	"tcp:[::1:1" "vsock:2:7447" "vsock:x" "vsock-uds:$tmp/v,cid=2" "unix:$tmp/s,bogus=1" "udp:1"; do
	if "$clmuxd" --listen "$bad" >"$tmp/out" 2>&1 || [ "$(wc -l <"$tmp/out")" != 1 ]; then
		echo "FAIL: --listen $bad was not refused with one line:"
		cat "$tmp/out"
		fail=1
	else
		echo "PASS: --listen $bad: $(cat "$tmp/out")"
	fi
done

# AF_VSOCK: where the kernel has a vsock transport the daemon listens and
# stops cleanly; where it has none it says so in one line and exits 1.
CLMUX_LOG=info "$clmuxd" --listen vsock:47447 >"$tmp/out" 2>&1 &
vpid=$!
i=0
until grep -q "listening on vsock:47447\|cannot listen on vsock" "$tmp/out" || [ $i -ge 100 ]; do
	sleep 0.05
	i=$((i + 1))
done
kill "$vpid" 2>/dev/null
wait "$vpid"
rc=$?
if grep -q "listening on vsock:47447" "$tmp/out" && [ $rc = 0 ]; then
	echo "PASS: --listen vsock:47447 listens and stops cleanly"
elif grep -q "cannot listen on vsock:47447" "$tmp/out" && [ $rc = 1 ]; then
	echo "PASS: --listen vsock:47447: $(grep 'cannot listen' "$tmp/out")"
else
	echo "FAIL: --listen vsock:47447 (exit $rc):"
	cat "$tmp/out"
	fail=1
fi

for t in tcp vsock-uds; do
	for p in guest/tests/e2e_memory guest/tests/e2e_multi guest/tests/e2e_events \
		host/tests/test_badinput host/tests/test_lanes; do
		run "$t" "$p"
	done
done
run tcp6 guest/tests/e2e_memory
run tcp guest/tests/e2e_daemon_restart
# Every tenant in the daemon's one process (--workers off), as before
# worker processes: the same programs end the same.
for p in guest/tests/e2e_memory guest/tests/e2e_events host/tests/test_badinput; do
	if CMX_E2E_DAEMON_ARGS="--workers off" "./$p" >"$tmp/out" 2>&1; then
		echo "PASS: $p with --workers off"
	else
		echo "FAIL: $p with --workers off"
		tail -40 "$tmp/out"
		fail=1
	fi
done

# The guest's side of a refusal, through the real ICD (clinfo lists the
# platforms). An instrumented ICD cannot load into clinfo: skipped there.
if command -v clinfo >/dev/null 2>&1 && [ -f "${OCL_ICD_VENDORS:-icd}/clmux.icd" ] &&
	! nm -D "$(cat "${OCL_ICD_VENDORS:-icd}/clmux.icd")" 2>/dev/null | grep -q __asan_init; then
	port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
	(umask 077 && echo "t1 $token" >"$tmp/tokens")
	"$clmuxd" --listen "tcp:127.0.0.1:$port,tokens=$tmp/tokens" 2>"$tmp/clmuxd.log" &
	pid=$!
	i=0
	until grep -q listening "$tmp/clmuxd.log" || [ $i -ge 100 ]; do sleep 0.05; i=$((i + 1)); done
	export OCL_ICD_VENDORS=${OCL_ICD_VENDORS:-icd} CLMUX_SERVER="tcp:127.0.0.1:$port"
	for case in right wrong missing; do
		case $case in
		right) tok=$token want=1 ;;
		wrong) tok=x$token want=0 ;;
		missing) tok="" want=0 ;;
		esac
		CLMUX_TOKEN=$tok clinfo -l >"$tmp/list" 2>"$tmp/err"
		got=$(grep -c clmux "$tmp/list")
		lines=$(grep -c '^clmux:' "$tmp/err")
		if [ "$got" != "$want" ] || [ "$lines" != $((1 - want)) ]; then
			echo "FAIL: $case token: $got clmux platform(s) (want $want), $lines line(s) from the ICD"
			cat "$tmp/list" "$tmp/err"
			fail=1
		else
			echo "PASS: $case token: $got clmux platform(s) $(head -1 "$tmp/err")"
		fi
	done
	grep -q "refused: unknown token" "$tmp/clmuxd.log" && grep -q "refused: no token" "$tmp/clmuxd.log" ||
		{ echo "FAIL: the daemon did not log both refusals"; cat "$tmp/clmuxd.log"; fail=1; }
	if grep -q "$token" "$tmp/clmuxd.log" "$tmp/err"; then
		echo "FAIL: a token was logged"
		fail=1
	fi
fi
exit $fail
