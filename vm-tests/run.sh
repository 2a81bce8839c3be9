#!/bin/sh
# SPDX-License-Identifier: MIT
# Runs one command inside a QEMU guest whose vsock device is clmuxd (the
# vhost-user-vsock back end), or, with --ivshmem, that reaches clmuxd
# through an ivshmem-plain device (a region in /dev/shm, both sides
# polling), and checks the daemon came through healthy.
#
#   vm-tests/run.sh [--ivshmem] [--vms N] [--kill-on TEXT] [--rate RATE] [--env K=V]... -- COMMAND [ARG...]
#
# CLMUXD names the daemon, VMDIR holds vmlinux and initrd.img (mkguest.sh),
# VM_TIMEOUT bounds the guest (seconds), IVSHMEM_SIZE sizes an ivshmem
# region (default 128M). Exit 0 when the guest's command
# succeeded (or, with --kill-on, when the guest printed TEXT, was killed,
# and a second guest then still got the clmux platform), 77 when QEMU is
# missing. --vms 2 runs the command in two guests at once, each with its
# own device (socket) and CID in the one daemon (with --ivshmem: its own
# region; one region serves one VM, whose processes take its slots).
# --rate RATE puts the VMs in a tenant whose rate quota is RATE (1M/s).
# The guest is set up as an installed one (clmux-opencl-icd unpacked by
# mkguest.sh): no CLMUX_SERVER; its ICD finds the ivshmem device, or else
# /dev/vsock, by itself. --env K=V exports K=V to the guest's command.
set -eu
kill_on=""
envs=""
vms=1
ivshmem=""
rate=""
while [ $# -gt 0 ]; do
	case $1 in
	--ivshmem) ivshmem=1; shift ;;
	--kill-on) kill_on=$2; shift 2 ;;
	--vms) vms=$2; shift 2 ;;
	--env) envs="$envs clmux.$2"; shift 2 ;;
	--rate) rate=$2; shift 2 ;;
	--) shift; break ;;
	*) echo "run.sh: unknown option $1" >&2; exit 2 ;;
	esac
done
command -v qemu-system-x86_64 >/dev/null || { echo "run.sh: no qemu-system-x86_64"; exit 77; }
: "${CLMUXD:?}" "${VMDIR:?}"
timeout=${VM_TIMEOUT:-120}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clmux-vm-XXXXXX")
port=7447 # clmux's vsock port: the one the guest's ICD dials by default
daemon_pid=""
region=/dev/shm/$(basename "$tmp").ivshmem
ivs_size=${IVSHMEM_SIZE:-128M} # the region (BAR) of each VM, 4 slots
cleanup() {
	# No guest outlives the test, whatever ended it.
	for f in "$tmp"/qemu.*.pid; do
		[ -e "$f" ] && kill -9 "$(cat "$f")" 2>/dev/null || true
	done
	[ -n "$daemon_pid" ] && kill "$daemon_pid" 2>/dev/null || true
	rm -rf "$tmp" "$region".*
}
trap cleanup EXIT

# VM i (1..vms) is CID 2+i on socket vhost.i (a tenant per CID, once
# tenants exist).
listen=""
opts=""
if [ -n "$rate" ]; then
	printf '[tenant vm]\nrate = %s\n' "$rate" >"$tmp/clmuxd.conf"
	listen="--config $tmp/clmuxd.conf"
	opts=",tenant=vm"
fi
for i in $(seq "$vms"); do
	if [ -n "$ivshmem" ]; then
		# A region per VM: its processes take the region's slots.
		listen="$listen --listen ivshmem:$region.$i,size=$ivs_size,slots=4$opts"
	else
		listen="$listen --listen vhost-user-vsock:$tmp/vhost.$i,cid=$((2 + i)),port=$port$opts"
	fi
done
# shellcheck disable=SC2086
CLMUX_LOG=${CLMUX_LOG:-info} "$CLMUXD" $listen >"$tmp/clmuxd.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 100); do
	if [ -n "$ivshmem" ]; then grep -qs "serving ivshmem:$region.$vms" "$tmp/clmuxd.log" && break
	else [ -S "$tmp/vhost.$vms" ] && break; fi
	sleep 0.1
done

# Boots a guest on device $2 running the rest; its console goes to
# $tmp/serial.$1.
guest() {
	name=$1 dev=$2
	shift 2
	if [ -n "$ivshmem" ]; then
		# The ICD finds the device by its PCI ids.
		set -- -object memory-backend-file,id=ivs,mem-path="$region.$dev",size=$ivs_size,share=on \
			-device ivshmem-plain,memdev=ivs \
			-append "console=ttyS0 quiet panic=-1$envs -- $*"
	else
		# The ICD finds /dev/vsock and dials vsock:2:7447.
		set -- -object memory-backend-memfd,id=mem,size=1024M,share=on -numa node,memdev=mem \
			-chardev socket,id=vsock,path="$tmp/vhost.$dev" \
			-device vhost-user-vsock-pci,chardev=vsock \
			-append "console=ttyS0 quiet panic=-1$envs -- $*"
	fi
	timeout -k 5 "$timeout" qemu-system-x86_64 -accel tcg -m 1024 -smp 1 "$@" \
		-display none -nodefaults -no-reboot -serial "file:$tmp/serial.$name" \
		-pidfile "$tmp/qemu.$name.pid" \
		-kernel "$VMDIR/vmlinux" -initrd "$VMDIR/initrd.img" &
	qemu_pid=$!
}

fail() {
	echo "run.sh: $*"
	for f in "$tmp"/serial.*; do [ -e "$f" ] && { echo "--- guest console ($f)"; tail -40 "$f"; }; done
	echo "--- clmuxd"
	tail -40 "$tmp/clmuxd.log"
	exit 1
}

if [ -n "$kill_on" ]; then
	guest victim 1 "$@"
	for _ in $(seq $((timeout * 10))); do
		grep -q "$kill_on" "$tmp/serial.victim" 2>/dev/null && break
		sleep 0.1
	done
	grep -q "$kill_on" "$tmp/serial.victim" 2>/dev/null || fail "the guest never printed '$kill_on'"
	# The VMM dies at once, as on a host OOM kill: no vhost-user goodbye.
	kill -9 "$(cat "$tmp/qemu.victim.pid")"
	wait "$qemu_pid" || true
	rm -f "$tmp/qemu.victim.pid"
	# The daemon notices the VMM gone (ivshmem: the guest's beat stops
	# for 10 s), closes the VM's sessions and returns their charges; a
	# new guest then gets the GPU as before.
	for _ in $(seq 300); do grep -q "gone:" "$tmp/clmuxd.log" && break; sleep 0.1; done
	grep -q "gone:.*returned [1-9][0-9]* objects, [1-9][0-9]* bytes; daemon holds 0 objects, 0 bytes" \
		"$tmp/clmuxd.log" || fail "the killed VM's charges were not all returned"
	set -- clinfo -l
fi
pids=""
for i in $(seq "$vms"); do
	guest "main$i" "$i" "$@"
	pids="$pids $qemu_pid"
done
for p in $pids; do wait "$p" || true; done
for i in $(seq "$vms"); do
	grep -q "CLMUX-VM-RESULT rc=0" "$tmp/serial.main$i" || fail "the command failed in guest $i"
done
# The daemon's CPU time (clock ticks), all threads and its io_uring loop's
# (the main thread): the cost of serving the guest.
echo "run.sh: clmuxd cpu ticks $(awk '{print $14 + $15}' "/proc/$daemon_pid/stat")," \
	"loop $(awk '{print $14 + $15}' "/proc/$daemon_pid/task/$daemon_pid/stat") of $(getconf CLK_TCK)/s"
kill -TERM "$daemon_pid"
wait "$daemon_pid" || fail "clmuxd did not exit cleanly"
daemon_pid=""
if [ -n "$ivshmem" ]; then
	grep -q "session [0-9]*: connected (ivshmem" "$tmp/clmuxd.log" || fail "no session came over ivshmem"
else
	[ "$(grep -c "VMM connected" "$tmp/clmuxd.log")" -ge "$vms" ] || fail "a VMM never connected"
	grep -q "session [0-9]*: connected" "$tmp/clmuxd.log" || fail "no session came over vhost-user-vsock"
fi
sed -n '/CLMUX-VM-RESULT/!p' "$tmp/serial.main1" | tr -d '\r' | grep -v '^\[' | tail -n 30
echo "run.sh: passed"
