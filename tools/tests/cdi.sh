#!/bin/sh
# SPDX-License-Identifier: MIT
# clmuxctl cdi: the spec a daemon's tenants make (one device per tenant
# with a unix listener, only its socket's directory mounted, read-only, and
# no other tenant's socket in it; the ICD and its libraries
# for every device), and the refusals that write nothing. Run from the
# build tree (make check); make container-check runs it in podman.
set -u
clmuxd=${CLMUXD:-host/clmuxd}
ctl=tools/clmuxctl
icd=guest/.libs/libclmux.so
tmp=$(mktemp -d)
pids=""
cleanup() {
	for p in $pids; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
	[ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail=0
pass() { echo "PASS: $*"; }
bad() { echo "FAIL: $*"; fail=1; }

# The admin socket answers root alone.
[ "$(id -u)" = 0 ] || { echo "SKIP: clmuxctl needs root (the admin socket is root's)"; exit 77; }

# daemon NAME ARGS...: a clmuxd with admin socket $tmp/NAME.admin, in $tmp.
daemon() {
	name=$1
	shift
	(cd "$tmp" && exec "$clmuxd" --admin "$tmp/$name.admin" "$@") >"$tmp/$name.log" 2>&1 &
	pids="$pids $!"
	for _ in $(seq 100); do
		[ -S "$tmp/$name.admin" ] && return 0
		sleep 0.1
	done
	bad "clmuxd $name did not start"
	cat "$tmp/$name.log"
	exit 1
}
case $clmuxd in /*) ;; *) clmuxd=$PWD/$clmuxd ;; esac

# A directory per tenant (beta has two sockets in its own), the shared
# socket beside them.
mkdir -p "$tmp/s/alpha" "$tmp/s/beta" "$tmp/s/two" "$tmp/s/ok" "$tmp/s/b" "$tmp/spec"
daemon good --listen "unix:$tmp/s/alpha/clmuxd.sock,tenant=alpha" \
	--listen "unix:$tmp/s/beta/beta.sock,tenant=beta,mode=0600" \
	--listen "unix:$tmp/s/beta/beta2.sock,tenant=beta" --listen "unix:$tmp/s/shared.sock"

# list: the tenants' listeners, not the shared one, a tenant once.
"$ctl" --admin "$tmp/good.admin" cdi list >"$tmp/list" 2>&1
if [ "$(awk '{print $1}' "$tmp/list" | tr '\n' ' ')" = "clmux.dev/gpu=alpha clmux.dev/gpu=beta " ] &&
	grep -q "beta  *$tmp/s/beta/beta.sock\$" "$tmp/list"; then
	pass "cdi list: $(awk '{print $1}' "$tmp/list" | tr '\n' ' ')"
else
	bad "cdi list:"
	cat "$tmp/list"
fi

spec=$tmp/spec/clmux.json
if "$ctl" --admin "$tmp/good.admin" cdi generate --output "$spec" --icd "$icd" >"$tmp/out" 2>&1; then
	pass "cdi generate: $(cat "$tmp/out")"
else
	bad "cdi generate:"
	cat "$tmp/out"
fi
# The spec's content, read as a runtime reads it (JSON).
if "${PYTHON:-python3}" - "$spec" "$tmp" "$icd" >"$tmp/out" 2>&1 <<'EOF'; then
import json, os, sys
spec, tmp, icd = sys.argv[1], sys.argv[2], sys.argv[3]
s = json.load(open(spec))
assert s["cdiVersion"] == "0.3.0" and s["kind"] == "clmux.dev/gpu", s
devs = {d["name"]: d["containerEdits"] for d in s["devices"]}
assert sorted(devs) == ["alpha", "beta"], devs
sock = {"alpha": "clmuxd.sock", "beta": "beta.sock"}
for name, e in devs.items():
    # Only the tenant's own directory, read-only, where the ICD looks;
    # the ICD told the socket's name there, over shm.
    assert [(m["hostPath"], m["containerPath"], "ro" in m["options"])
            for m in e["mounts"]] == [(f"{tmp}/s/{name}", "/run/clmux", True)], e
    assert e["env"] == ["CLMUX_SERVER=shm:/run/clmux/" + sock[name]], e
edits = s["containerEdits"]
assert "env" not in edits, edits
got = {m["containerPath"]: m["hostPath"] for m in edits["mounts"]}
assert os.path.samefile(got["/usr/lib/clmux/libclmux.so"], icd), got
# What the ICD links beyond glibc comes along (OpenSSL, LZ4 here).
for lib in ("libssl.so.3", "libcrypto.so.3", "liblz4.so.1"):
    assert os.path.exists(got["/usr/lib/clmux/" + lib]), lib
assert not any("libc.so" in p for p in got), got
vendors = got["/etc/OpenCL/vendors/clmux.icd"]
assert open(vendors).read() == "/usr/lib/clmux/libclmux.so\n"
assert oct(os.stat(spec).st_mode & 0o777) == "0o644"
print("spec:", len(devs), "devices,", len(got), "spec-wide mounts")
EOF
	pass "$(cat "$tmp/out")"
else
	bad "the spec's content:"
	cat "$tmp/out" "$spec"
fi
ls -a "$tmp/spec" | grep -q '\.json\.' && bad "a temporary file was left: $(ls -a "$tmp/spec")"

# The daemon keeps the spec itself where clmuxd.conf says so: written at
# start, written again at each reload (SIGHUP), at the path the reloaded
# file names; a spec it cannot write is logged and the daemon goes on.
# waitfor FILE: until it exists (10 s at most).
waitfor() {
	for _ in $(seq 100); do
		[ -e "$1" ] && return 0
		sleep 0.1
	done
	return 1
}
mkdir -p "$tmp/keep" "$tmp/s/kept"
printf '[clmuxd]\ncdi = %s\ncdi-icd = %s\n' "$tmp/keep/clmux.json" "$PWD/$icd" >"$tmp/keep.conf"
daemon keep --config "$tmp/keep.conf" --listen "unix:$tmp/s/kept/clmuxd.sock,tenant=kept"
keep_pid=${pids##* }
if waitfor "$tmp/keep/clmux.json" && grep -q '"name": *"kept"' "$tmp/keep/clmux.json" &&
	[ -e "$tmp/keep/clmux.icd" ]; then
	pass "cdi = PATH: written at start"
else
	bad "cdi = PATH: not written at start"
	cat "$tmp/keep.log"
fi
rm "$tmp/keep/clmux.json"
kill -HUP "$keep_pid"
if waitfor "$tmp/keep/clmux.json"; then
	pass "cdi = PATH: written again at a reload"
else
	bad "cdi = PATH: not written at a reload"
	cat "$tmp/keep.log"
fi
printf '[clmuxd]\ncdi = %s\ncdi-icd = %s\n' "$tmp/keep/other.json" "$PWD/$icd" >"$tmp/keep.conf"
kill -HUP "$keep_pid"
if waitfor "$tmp/keep/other.json"; then
	pass "cdi = PATH: a reload's new path"
else
	bad "cdi = PATH: the reloaded path not written"
	cat "$tmp/keep.log"
fi
printf '[clmuxd]\ncdi = %s\n' "$tmp/keep/none/clmux.json" >"$tmp/keep.conf"
kill -HUP "$keep_pid"
for _ in $(seq 100); do
	grep -q "not written" "$tmp/keep.log" && break
	sleep 0.1
done
if grep -q "clmuxd: cdi: cannot write in $tmp/keep/none" "$tmp/keep.log" &&
	grep -q "cdi: reload: .* not written" "$tmp/keep.log" && kill -0 "$keep_pid" &&
	[ ! -e "$tmp/keep/none" ]; then
	pass "cdi = PATH: an unwritable spec logged, the daemon goes on"
else
	bad "cdi = PATH: an unwritable spec"
	cat "$tmp/keep.log"
fi

# refused CMD... : the command fails with one clear line and the spec
# directory is as it was.
refused() {
	what=$1
	shift
	(cd "$tmp/spec" && ls -la --time-style=+%s.%N && md5sum ./*) >"$tmp/before" 2>&1
	if "$@" >"$tmp/out" 2>&1; then
		bad "$what: not refused"
	elif [ "$(wc -l <"$tmp/out")" != 1 ] || ! grep -q "^clmuxctl: " "$tmp/out"; then
		bad "$what: not one clear line:"
		cat "$tmp/out"
	elif ! (cd "$tmp/spec" && ls -la --time-style=+%s.%N && md5sum ./*) 2>&1 |
		cmp -s - "$tmp/before"; then
		bad "$what: the spec directory changed"
	else
		pass "$what refused: $(cat "$tmp/out")"
	fi
}
# A tenant name CDI cannot take (it must end in a letter or digit).
daemon badname --listen "unix:$tmp/s/ok/ok.sock,tenant=ok" --listen "unix:$tmp/s/b/b.sock,tenant=build-"
refused "tenant 'build-'" "$ctl" --admin "$tmp/badname.admin" cdi generate --output "$spec" --icd "$icd"
# A listener at a relative path: no runtime can mount that.
daemon relative --listen "unix:rel.sock,tenant=rel"
refused "listener unix:rel.sock" "$ctl" --admin "$tmp/relative.admin" cdi generate --output "$spec" \
	--icd "$icd"
# Two tenants' sockets in one directory: a container would see both.
daemon twodir --listen "unix:$tmp/s/two/x.sock,tenant=x" --listen "unix:$tmp/s/two/y.sock,tenant=y"
refused "two tenants in one directory" "$ctl" --admin "$tmp/twodir.admin" cdi generate \
	--output "$spec" --icd "$icd"
# A tenant's socket beside the shared one (good's $tmp/s/shared.sock).
daemon beside --listen "unix:$tmp/s/near.sock,tenant=near"
refused "a socket beside another" "$ctl" --admin "$tmp/beside.admin" cdi generate \
	--output "$spec" --icd "$icd"
# No tenant with a socket of its own: nothing to offer.
daemon shared --listen "unix:$tmp/s/only-shared.sock"
refused "no tenant listener" "$ctl" --admin "$tmp/shared.admin" cdi generate --output "$spec" \
	--icd "$icd"
# Spec directories it cannot write in.
refused "a missing directory" "$ctl" --admin "$tmp/good.admin" cdi generate \
	--output "$tmp/spec/none/clmux.json" --icd "$icd"
touch "$tmp/file"
refused "a file for a directory" "$ctl" --admin "$tmp/good.admin" cdi generate \
	--output "$tmp/file/clmux.json" --icd "$icd"
refused "a .yaml name" "$ctl" --admin "$tmp/good.admin" cdi generate \
	--output "$tmp/spec/clmux.yaml" --icd "$icd"
refused "an ICD that is not there" "$ctl" --admin "$tmp/good.admin" cdi generate \
	--output "$spec" --icd "$tmp/none.so"
# A daemon gone: nothing to describe.
refused "no daemon" "$ctl" --admin "$tmp/none.admin" cdi generate --output "$spec" --icd "$icd"
exit $fail
