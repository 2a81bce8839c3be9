#!/bin/sh
# SPDX-License-Identifier: MIT
# TLS and compressed payloads on tcp: end-to-end programs over tls (a
# client killed mid-stream among them, in e2e_multi) and with LZ4; bad
# certificates refused with one line on each side; garbage, plaintext and
# a stalled handshake before TLS end only that connection. Run from the
# build tree (make check).
set -u
clmuxd=${CLMUXD:-host/clmuxd}
tmp=$(mktemp -d)
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
trap 'exit 1' INT TERM
fail=0
pass() { echo "PASS: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

command -v openssl >/dev/null 2>&1 || { echo "SKIP: no openssl command"; exit 77; }

run() { # TRANSPORT PROGRAM
	if CMX_E2E_TRANSPORT=$1 "./$2" >"$tmp/out" 2>&1; then
		pass "$2 over $1"
	else
		bad "$2 over $1"
		tail -40 "$tmp/out"
	fi
}
for p in guest/tests/e2e_memory guest/tests/e2e_multi guest/tests/e2e_events; do
	run tls "$p"
done
for p in guest/tests/e2e_memory guest/tests/e2e_compute; do
	run tcp-lz4 "$p"
done
run tls-lz4 guest/tests/e2e_memory

# cert NAME SAN: a self-signed certificate and key in $tmp.
cert() {
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
		-subj "/CN=$1" -addext "subjectAltName=$2" -keyout "$tmp/$1.key" \
		-out "$tmp/$1.pem" 2>/dev/null && chmod 600 "$tmp/$1.key"
}
cert server IP:127.0.0.1 && cert other IP:127.0.0.1 && cert elsewhere IP:192.0.2.1 ||
	{ bad "openssl could not make certificates"; exit 1; }
token=$(head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n')
(umask 077 && echo "t1 $token" >"$tmp/tokens")

# Listen forms the daemon must refuse with one line.
chmod 644 "$tmp/other.key"
for spec in "tls=$tmp/missing.pem:$tmp/server.key" "tls=$tmp/server.pem" \
	"tls=$tmp/server.pem:$tmp/elsewhere.key" "tls=$tmp/other.pem:$tmp/other.key"; do
	if "$clmuxd" --listen "tcp:127.0.0.1:1,tokens=$tmp/tokens,$spec" >"$tmp/out" 2>&1 ||
		[ "$(wc -l <"$tmp/out")" != 1 ]; then
		bad "--listen ...,$spec was not refused with one line:"
		cat "$tmp/out"
	else
		pass "--listen ...,${spec##*/}: $(cat "$tmp/out")"
	fi
done
chmod 600 "$tmp/other.key"

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
CLMUX_LOG=info "$clmuxd" --listen "tcp:127.0.0.1:$port,tokens=$tmp/tokens,tls=$tmp/server.pem:$tmp/server.key" \
	--listen "unix:$tmp/s.sock" 2>"$tmp/clmuxd.log" &
pid=$!
i=0
until [ -S "$tmp/s.sock" ] || [ $i -ge 200 ]; do sleep 0.05; i=$((i + 1)); done

# Before TLS: random bytes, a plaintext Auth, and a handshake left half
# way; each ends its own connection only, with a line in the log.
python3 - "$port" <<'EOF'
import os, socket, struct, sys, time
port = int(sys.argv[1])
def conn():
    return socket.create_connection(("127.0.0.1", port))
s = conn(); s.sendall(os.urandom(512)); s.settimeout(5)
try:
    assert s.recv(4096) is not None
except OSError:
    pass
s.close()
token = b"x" * 32
auth = struct.pack("<IHHIIQ", 8 + 32, 0x30, 1, 0, 0, 0) + struct.pack("<Q", 32) + token
s = conn(); s.sendall(auth); s.settimeout(5)
try:
    s.recv(4096)
except OSError:
    pass
s.close()
# A ClientHello cut short, then silence: the daemon's deadline ends it.
s = conn(); s.sendall(bytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01]))
time.sleep(0.2)
s.close()
EOF
n=$(grep -c "refused: TLS handshake failed" "$tmp/clmuxd.log")
if [ "$n" -ge 2 ] && kill -0 "$pid" 2>/dev/null; then
	pass "garbage and plaintext before TLS: $n connections refused, the daemon serves on"
else
	bad "garbage before TLS: $n refusals logged, daemon alive: $(kill -0 "$pid" 2>/dev/null && echo yes || echo no)"
	cat "$tmp/clmuxd.log"
fi

# The guest's side: the right CA works; a CA that did not sign the
# daemon's certificate, or a certificate for another address, is refused
# with one line and no platform. An instrumented ICD cannot load into
# clinfo: skipped there.
if command -v clinfo >/dev/null 2>&1 && [ -f "${OCL_ICD_VENDORS:-icd}/clmux.icd" ] &&
	! nm -D "$(cat "${OCL_ICD_VENDORS:-icd}/clmux.icd")" 2>/dev/null | grep -q __asan_init; then
	export OCL_ICD_VENDORS=${OCL_ICD_VENDORS:-icd} CLMUX_SERVER="tls:127.0.0.1:$port" CLMUX_TOKEN=$token
	for case in right wrong-ca plaintext; do
		server=$CLMUX_SERVER ca=$tmp/server.pem want=1 match="x^"
		case $case in
		wrong-ca) ca=$tmp/other.pem want=0 match="certificate is not trusted" ;;
		plaintext) server="tcp:127.0.0.1:$port" want=0 match="cannot reach clmuxd" ;;
		esac
		CLMUX_SERVER=$server CLMUX_TLS_CA=$ca timeout 60 clinfo -l >"$tmp/list" 2>"$tmp/err"
		got=$(grep -c clmux "$tmp/list")
		lines=$(grep -c '^clmux:' "$tmp/err")
		if [ "$got" != "$want" ] || [ "$lines" != $((1 - want)) ] ||
			{ [ "$want" = 0 ] && ! grep -q "$match" "$tmp/err"; }; then
			bad "$case: $got clmux platform(s) (want $want), $lines line(s) from the ICD"
			cat "$tmp/list" "$tmp/err"
		else
			pass "$case: $got clmux platform(s) $(head -1 "$tmp/err")"
		fi
	done
fi
kill "$pid"
wait "$pid"
rc=$?
pid=""
[ $rc = 0 ] && pass "the daemon drains and stops cleanly" || { bad "the daemon exited $rc"; tail -20 "$tmp/clmuxd.log"; }
exit $fail
