#!/bin/sh
# SPDX-License-Identifier: MIT
# make container-check: real podman containers get clmux through the CDI
# spec clmuxctl writes (--device clmux.dev/gpu=TENANT), from a root
# filesystem of Debian packages that holds the ICD loader and no clmux
# (vm-tests/mkrootfs.sh). Run from the build directory, as root.
#
# CLMUXD, CLMUXCTL name the programs; ROOTFS the root filesystem.
set -u
: "${CLMUXD:?}" "${CLMUXCTL:?}" "${ROOTFS:?}"
icd=$PWD/guest/.libs/libclmux.so
command -v podman >/dev/null || { echo "container-check: SKIP (no podman)"; exit 0; }
[ "$(id -u)" = 0 ] || { echo "container-check: SKIP (not root: the spec directory is root's)"; exit 0; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/clmux-ct-XXXXXX")
# Names no other spec or container on the machine holds.
a=check$$a
b=check$$b
spec=/var/run/cdi/clmux-check-$$.json
kname=clmux-check-$$-killed
rname=clmux-check-$$-restart
daemon_pid=""
rl=$tmp/rootless
cleanup() {
	podman rm -f "$kname" "$rname" >/dev/null 2>&1
	# Rootless podman leaves a process holding its user namespace.
	[ -s "$rl/run/libpod/tmp/pause.pid" ] && kill "$(cat "$rl/run/libpod/tmp/pause.pid")" 2>/dev/null
	[ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null && wait "$daemon_pid" 2>/dev/null
	rm -f "$spec" "${spec%.json}.icd"
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
pass=0
failed=""
ok() { echo "PASS: container/$1"; pass=$((pass + 1)); }
bad() { echo "FAIL: container/$1"; failed="$failed $1"; }

# The flags Debian 12's podman needs here (shared/FIELD.md): runc (crun
# refuses the hybrid cgroup layout), ulimits within the hard limits, and
# a root filesystem instead of an image (no registry).
run() {
	podman run --rm --runtime runc --cgroup-manager cgroupfs --network none \
		--ulimit nofile=20000:20000 --ulimit nproc=1000:1000 "$@"
}

if ! run --rootfs "$ROOTFS" true >"$tmp/out" 2>&1; then
	bad "podman-runs"
	cat "$tmp/out"
	exit 1
fi

# Two tenants with quotas, each on a socket in a directory of its own
# (a container is given the directory); the spec in the directory podman
# reads.
mkdir -p "$tmp/s/$a" "$tmp/s/$b"
# A third tenant is nobody's, by uid, on a shared socket (the rootless run).
printf '[tenant %s]\nmem = 256M\n[tenant %s]\nmem = 512M\n[tenant %s]\nuid = 65534\nmem = 128M\n' \
	"$a" "$b" "check$$nobody" >"$tmp/clmuxd.conf"
daemon() {
	CLMUX_LOG=info "$CLMUXD" --config "$tmp/clmuxd.conf" --admin "$tmp/admin.sock" \
		--listen "unix:$tmp/s/$a/clmuxd.sock,tenant=$a,mode=0600" \
		--listen "unix:$tmp/s/$b/clmuxd.sock,tenant=$b,mode=0600" \
		--listen "unix:$tmp/s/shared.sock,mode=0666" >>"$tmp/clmuxd.log" 2>&1 &
	daemon_pid=$!
	for _ in $(seq 100); do
		[ -S "$tmp/admin.sock" ] && break
		sleep 0.1
	done
}
daemon
ctl() { "$CLMUXCTL" --admin "$tmp/admin.sock" "$@"; }
if ctl cdi generate --output "$spec" --icd "$icd" >"$tmp/out" 2>&1; then
	ok "cdi-generate"
else
	bad "cdi-generate"
	cat "$tmp/out" "$tmp/clmuxd.log"
	exit 1
fi

# clinfo in a container lists clmux, and nothing else (no other ICD there).
run --device "clmux.dev/gpu=$a" --rootfs "$ROOTFS" clinfo -l >"$tmp/out" 2>&1
if grep -q "Platform #0: clmux" "$tmp/out" && ! grep -q "Platform #1" "$tmp/out"; then
	ok "clinfo"
else
	bad "clinfo"
	cat "$tmp/out"
fi

# An OpenCL application's results inside equal PoCL's outside.
mkdir "$tmp/native"
cp /etc/OpenCL/vendors/*.icd "$tmp/native/"
OCL_ICD_VENDORS=$tmp/native tools/clmux-sample >"$tmp/native.out" 2>&1
run --device "clmux.dev/gpu=$a" --rootfs "$ROOTFS" clmux-sample >"$tmp/out" 2>&1
if grep -q "^platform: clmux" "$tmp/out" && [ "$(grep -c ^result "$tmp/native.out")" = 3 ] &&
	[ "$(grep ^result "$tmp/out")" = "$(grep ^result "$tmp/native.out")" ]; then
	ok "sample-equals-native"
else
	bad "sample-equals-native"
	cat "$tmp/native.out" "$tmp/out"
fi

# Two containers of two tenants at once: each sees its own quota.
pids=""
for t in "$a" "$b"; do
	run --device "clmux.dev/gpu=$t" --rootfs "$ROOTFS" \
		sh -c 'clinfo | grep "Global memory size"' >"$tmp/$t.mem" 2>&1 &
	pids="$pids $!"
done
# shellcheck disable=SC2086
wait $pids
if grep -q " 268435456 " "$tmp/$a.mem" && grep -q " 536870912 " "$tmp/$b.mem"; then
	ok "two-tenants-quotas"
else
	bad "two-tenants-quotas"
	cat "$tmp/$a.mem" "$tmp/$b.mem"
fi

# The only socket a container sees is its tenant's (the same inode).
run --device "clmux.dev/gpu=$b" --rootfs "$ROOTFS" sh -c \
	'find / \( -path /proc -o -path /sys \) -prune -o -type s -print; busybox stat -c %i /run/clmux/clmuxd.sock' \
	>"$tmp/out" 2>&1
if [ "$(cat "$tmp/out")" = "$(printf '/run/clmux/clmuxd.sock\n%s' "$(stat -c %i "$tmp/s/$b/clmuxd.sock")")" ]; then
	ok "own-socket-only"
else
	bad "own-socket-only"
	cat "$tmp/out"
fi

# The spec asks for shm: the session's rings are a memfd passed across
# the container's namespaces.
before=$(grep -c "upgraded to shm rings" "$tmp/clmuxd.log")
run --device "clmux.dev/gpu=$b" --rootfs "$ROOTFS" sh -c 'echo $CLMUX_SERVER; clinfo -l' >"$tmp/out" 2>&1
after=$(grep -c "upgraded to shm rings" "$tmp/clmuxd.log")
if grep -q "^shm:/run/clmux/clmuxd.sock" "$tmp/out" && grep -q "Platform #0: clmux" "$tmp/out" &&
	[ "$after" -gt "$before" ] && ! grep -q "no usable rings" "$tmp/out"; then
	ok "shm"
else
	bad "shm ($before, then $after sessions upgraded)"
	cat "$tmp/out"
fi

# held TENANT: "SESSIONS MEM" from clmuxctl.
held() {
	ctl --json tenants | python3 -c 'import json, sys
t = [t for t in json.load(sys.stdin) if t["name"] == sys.argv[1]][0]
print(t["sessions"], t["mem"])' "$1"
}
# A container killed mid-transfer leaves its tenant holding nothing; the
# spec regenerated while it ran leaves its mounts working.
podman run -d --name "$kname" --runtime runc --cgroup-manager cgroupfs --network none \
	--ulimit nofile=20000:20000 --ulimit nproc=1000:1000 \
	--device "clmux.dev/gpu=$a" --rootfs "$ROOTFS" vm-transfer >"$tmp/out" 2>&1 || cat "$tmp/out"
for _ in $(seq 600); do
	podman logs "$kname" 2>&1 | grep -q transferring && break
	sleep 0.1
done
holding=$(held "$a")
ctl cdi generate --output "$spec" --icd "$icd" >/dev/null
podman exec "$kname" clinfo -l >"$tmp/out" 2>&1
if grep -q "Platform #0: clmux" "$tmp/out"; then
	ok "regenerated-while-running"
else
	bad "regenerated-while-running"
	cat "$tmp/out"
fi
podman kill "$kname" >/dev/null 2>&1
left=""
for _ in $(seq 300); do
	left=$(held "$a")
	[ "$left" = "0 0" ] && break
	sleep 0.2
done
case $holding in
"0 "* | *" 0") bad "killed-mid-transfer (it held nothing while running: $holding)" ;;
*)
	if [ "$left" = "0 0" ]; then
		ok "killed-mid-transfer (held sessions, bytes: $holding; then $left)"
	else
		bad "killed-mid-transfer (still held: $left)"
		podman logs "$kname" 2>&1 | tail -5
	fi
	;;
esac
podman rm -f "$kname" >/dev/null 2>&1
# And the tenant gets the device again.
run --device "clmux.dev/gpu=$a" --rootfs "$ROOTFS" clinfo -l >"$tmp/out" 2>&1
if grep -q "Platform #0: clmux" "$tmp/out"; then
	ok "after-kill"
else
	bad "after-kill"
	cat "$tmp/out"
fi

# Rootless podman, run by nobody (uid 65534): root in the container
# reaches clmuxd as uid 65534 (SO_PEERCRED through the user namespace), so
# the shared socket makes it the uid's tenant (128 MiB). The ICD comes by
# the spec (device $a, whose socket, root's, nobody cannot use).
mkdir -p "$rl/home" "$rl/run" "$rl/rootfs"
cp -a "$ROOTFS/." "$rl/rootfs/"
mkdir -p "$rl/rootfs/run/shared"
chmod 711 "$tmp"
chown -R 65534:65534 "$rl"
chmod 700 "$rl/run"
rootless() {
	(cd "$rl" && setpriv --reuid 65534 --regid 65534 --clear-groups \
		env HOME="$rl/home" XDG_RUNTIME_DIR="$rl/run" podman run --rm --runtime runc \
		--cgroup-manager cgroupfs --network none --ulimit nofile=1024:1024 \
		--ulimit nproc=1000:1000 "$@" 2>&1 | grep -v 'level=warning')
}
if ! command -v setpriv >/dev/null || ! rootless --rootfs "$rl/rootfs" true >"$tmp/out" 2>&1; then
	echo "SKIP: container/rootless (rootless podman cannot run here: $(tail -1 "$tmp/out"))"
else
	rootless --device "clmux.dev/gpu=$a" -v "$tmp/s/shared.sock:/run/shared/s.sock" \
		--rootfs "$rl/rootfs" sh -c \
		'id -u; CLMUX_SERVER=shm:/run/shared/s.sock clinfo | grep "Global memory size"' \
		>"$tmp/out" 2>&1
	if [ "$(head -n1 "$tmp/out")" = 0 ] && grep -q " 134217728 " "$tmp/out" &&
		grep -q "unix uid 65534 .*tenant check$$nobody" "$tmp/clmuxd.log"; then
		ok "rootless (root inside is uid 65534 to clmuxd)"
	else
		bad "rootless"
		cat "$tmp/out"
	fi
fi

# A restarted daemon makes a new socket file in the tenant's directory:
# a running container sees it through its mount of the directory, and its
# application's next clCreateContext connects again.
podman run -d --name "$rname" --runtime runc --cgroup-manager cgroupfs --network none \
	--ulimit nofile=20000:20000 --ulimit nproc=1000:1000 \
	--device "clmux.dev/gpu=$a" --rootfs "$ROOTFS" vm-transfer reconnect >"$tmp/out" 2>&1 ||
	cat "$tmp/out"
for _ in $(seq 600); do
	podman logs "$rname" 2>&1 | grep -q transferring && break
	sleep 0.1
done
old=$(stat -c %i "$tmp/s/$a/clmuxd.sock")
kill "$daemon_pid"
wait "$daemon_pid"
rm -f "$tmp/admin.sock"
daemon
rc=$(timeout 150 podman wait "$rname" 2>&1)
new=$(stat -c %i "$tmp/s/$a/clmuxd.sock" 2>&1)
podman logs "$rname" >"$tmp/out" 2>&1
if [ "$rc" = 0 ] && grep -q "^lost" "$tmp/out" && grep -q "^reconnected" "$tmp/out"; then
	ok "daemon-restart (socket inode $old, then $new; $(grep ^reconnected "$tmp/out"))"
else
	bad "daemon-restart (exit $rc, socket inode $old, then $new)"
	cat "$tmp/out"
	tail -5 "$tmp/clmuxd.log"
fi
podman rm -f "$rname" >/dev/null 2>&1

if ! kill -0 "$daemon_pid" 2>/dev/null; then
	bad "daemon-alive"
	tail -20 "$tmp/clmuxd.log"
fi
echo "# container-check: $pass passed, failed:${failed:- none}"
[ -z "$failed" ]
