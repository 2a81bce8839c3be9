#!/bin/sh
# SPDX-License-Identifier: MIT
# clmuxd following a real libvirtd (make libvirt-check). A private libvirtd
# runs as an unprivileged user in session mode (nobody when the test runs
# as root): its sockets, config and domains live under a temporary folder,
# apart from any system libvirtd. clmuxd follows it through
# `libvirt = URI` in its config, and the test checks that
#   - metadata it must refuse (an unknown transport, mem=-1, a weight of
#     10^12, a name with path characters, a config tenant's name) is
#     logged with the domain and the attribute, and nothing is served;
#   - a domain without <clmux:gpu> gets nothing, running or not;
#   - a domain with it gets its device when defined, a tenant when it
#     starts, and runs OpenCL in the guest through clmux; changing its
#     mem quota with `virsh metadata` changes what a fresh guest process
#     sees; libvirtd restarted meanwhile is followed again, and the guest
#     keeps its service; its stop releases the tenant and its undefine the
#     device file;
#   - the prepare hook makes a transient domain's device before QEMU opens
#     it; destroyed while its guest holds device memory, the domain's
#     tenant, memory and device all go.
# Exit 77 only where libvirtd cannot run.
#
# CLMUXD, CLMUXCTL: the programs; VMDIR: vmlinux and initrd.img
# (mkguest.sh, with vm-memsize); HOOK: tools/libvirt-hook.in.
set -eu
: "${CLMUXD:?}" "${CLMUXCTL:?}" "${VMDIR:?}" "${HOOK:?}"
for p in libvirtd virsh qemu-system-x86_64 setpriv; do
	command -v "$p" >/dev/null || { echo "libvirt-check: no $p"; exit 77; }
done
NS=https://clmux.org/xmlns/libvirt/gpu/1
tmp=$(mktemp -d "${TMPDIR:-/tmp}/clmux-libvirt-XXXXXX")
chmod 755 "$tmp"
# Domain names are this run's: their device files are /dev/shm/clmux-NAME.
tag=lvt$$
lv=$tmp/lv
mkdir -p "$lv/config/libvirt" "$lv/cache" "$lv/run" "$lv/data" "$lv/home"
# QEMU's output to a file: no virtlogd needed.
echo 'stdio_handler = "file"' >"$lv/config/libvirt/qemu.conf"
if [ "$(id -u)" = 0 ]; then
	user=nobody
	group=$(id -gn nobody)
	run_as="setpriv --reuid=$user --regid=$group --clear-groups"
	chown -R "$user:$group" "$lv"
else
	group=""
	run_as=""
fi
URI="qemu:///session?socket=$lv/run/libvirt/libvirt-sock"
lvpid="" dpid=""

cleanup() {
	for d in $(virsh -q -c "$URI" list --all --name 2>/dev/null); do
		virsh -q -c "$URI" destroy "$d" >/dev/null 2>&1 || true
		virsh -q -c "$URI" undefine "$d" >/dev/null 2>&1 || true
	done
	[ -n "$dpid" ] && kill "$dpid" 2>/dev/null || true
	[ -n "$lvpid" ] && kill "$lvpid" 2>/dev/null || true
	sleep 0.5
	rm -f /dev/shm/clmux-"$tag"-*
	rm -rf "$tmp"
}
trap cleanup EXIT

fail() {
	echo "libvirt-check: FAIL: $*"
	for f in "$lv"/console-*.log; do [ -e "$f" ] && { echo "--- $f"; tail -20 "$f"; }; done
	echo "--- libvirtd"
	tail -20 "$tmp/libvirtd.log"
	echo "--- clmuxd"
	tail -60 "$tmp/clmuxd.log"
	exit 1
}
vsh() { virsh -q -c "$URI" "$@"; }
ctl() { "$CLMUXCTL" --admin "$tmp/admin.sock" "$@"; }
# Waits (at most $2 s, default 60) until file $3 (default clmuxd's log)
# has a line matching $1.
wait_for() {
	for _ in $(seq $((${2:-60} * 10))); do
		grep -q -- "$1" "${3:-$tmp/clmuxd.log}" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

start_libvirtd() {
	# shellcheck disable=SC2086
	$run_as env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME="$lv/home" \
		XDG_CONFIG_HOME="$lv/config" XDG_CACHE_HOME="$lv/cache" \
		XDG_RUNTIME_DIR="$lv/run" XDG_DATA_HOME="$lv/data" \
		libvirtd --timeout 0 >>"$tmp/libvirtd.log" 2>&1 &
	lvpid=$!
	for _ in $(seq 200); do
		vsh version >/dev/null 2>&1 && return 0
		kill -0 "$lvpid" 2>/dev/null || break
		sleep 0.1
	done
	return 1
}

# domain NAME METADATA COMMAND...: its XML in $tmp/NAME.xml; a TCG guest
# from mkguest.sh running COMMAND, with an ivshmem-plain device where
# METADATA asks for a GPU, or, with transport='vsock', the device lines
# clmuxctl domain-xml gives. The guest's ICD finds either device by itself
# (no CLMUX_SERVER), as an installed guest's does.
domain() {
	name=$1 meta=$2
	shift 2
	shmem="" vsock=""
	[ -n "$meta" ] && shmem="<shmem name='clmux-$name'><model type='ivshmem-plain'/><size unit='M'>128</size></shmem>"
	case $meta in *"transport='vsock'"*)
		shmem=""
		vsock=$(ctl domain-xml "$name" 2>/dev/null | grep -v '^<!--' || true) ;;
	esac
	[ -e "$tmp/$name.uuid" ] || cat /proc/sys/kernel/random/uuid >"$tmp/$name.uuid"
	cat >"$tmp/$name.xml" <<EOF
<domain type='qemu' xmlns:qemu='http://libvirt.org/schemas/domain/qemu/1.0'>
  <name>$name</name>
  <uuid>$(cat "$tmp/$name.uuid")</uuid>
  <memory unit='MiB'>512</memory>
  <vcpu>1</vcpu>
  <metadata>$meta</metadata>
  <os>
    <type arch='x86_64' machine='pc'>hvm</type>
    <kernel>$VMDIR/vmlinux</kernel>
    <initrd>$VMDIR/initrd.img</initrd>
    <cmdline>console=ttyS0 quiet panic=-1 no_timer_check -- $*</cmdline>
  </os>
  <features><acpi/></features>
  <on_poweroff>destroy</on_poweroff>
  <on_reboot>destroy</on_reboot>
  <on_crash>destroy</on_crash>
  <devices>
    <emulator>$(command -v qemu-system-x86_64)</emulator>
    <serial type='file'><source path='$lv/console-$name.log'/><target port='0'/></serial>
    $shmem
    <memballoon model='none'/>
  </devices>
  $vsock
</domain>
EOF
}
gpu() { echo "<clmux:gpu xmlns:clmux='$NS' $*/>"; }
state() { vsh domstate "$1" 2>/dev/null | head -1; }
wait_off() {
	for _ in $(seq $((${2:-120} * 10))); do
		case $(state "$1") in "shut off" | "") return 0 ;; esac
		sleep 0.1
	done
	return 1
}

if ! start_libvirtd; then
	echo "libvirt-check: libvirtd cannot run here:"
	tail -5 "$tmp/libvirtd.log"
	exit 77
fi

{
	echo "[clmuxd]"
	echo "libvirt = $URI"
	[ -n "$group" ] && echo "libvirt-group = $group"
	echo "[tenant $tag-cfg]"
	echo "mem = 1G"
} >"$tmp/clmuxd.conf"
CLMUX_LOG=info "$CLMUXD" --config "$tmp/clmuxd.conf" --admin "$tmp/admin.sock" \
	>"$tmp/clmuxd.log" 2>&1 &
dpid=$!
wait_for "libvirt: following" || fail "clmuxd did not follow libvirtd"

echo "== refused metadata"
domain "$tag-bad1" "$(gpu "transport='carrier-pigeon'")" true
domain "$tag-bad2" "$(gpu "mem='-1'")" true
domain "$tag-bad3" "$(gpu "weight='1000000000000'")" true
domain "$tag@x" "$(gpu "mem='1G'")" true
domain "$tag-cfg" "$(gpu "mem='1G'")" true
for n in "$tag-bad1" "$tag-bad2" "$tag-bad3" "$tag@x" "$tag-cfg"; do
	vsh define "$tmp/$n.xml" >/dev/null || fail "virsh define $n"
done
wait_for "domain $tag-bad1 .*transport='carrier-pigeon': ivshmem or vsock: not served" ||
	fail "an unknown transport was not refused by name"
wait_for "domain $tag-bad2 .*bad value '-1' for mem: not served" || fail "mem=-1 not refused"
wait_for "domain $tag-bad3 .*bad value '1000000000000' for weight: not served" ||
	fail "a weight of 10^12 not refused"
wait_for "domain $tag@x .*its name is not a tenant name" || fail "a name with '@' not refused"
wait_for "domain $tag-cfg .*tenant '$tag-cfg' of the config has that name" ||
	fail "a config tenant's name was not refused"
for n in "$tag-bad1" "$tag-bad2" "$tag-bad3" "$tag@x"; do
	[ ! -e "/dev/shm/clmux-$n" ] || fail "refused domain $n has a device file"
	ctl domain-xml "$n" >/dev/null 2>&1 && fail "refused domain $n has device lines"
	vsh undefine "$n" >/dev/null
done
vsh undefine "$tag-cfg" >/dev/null
ctl quota get "$tag-cfg" | grep -q "^mem *1G" || fail "the config tenant changed"

echo "== a domain without <clmux:gpu> gets nothing"
domain "$tag-plain" "" true
vsh define "$tmp/$tag-plain.xml" >/dev/null
vsh start "$tag-plain" >/dev/null || fail "virsh start $tag-plain"
wait_off "$tag-plain" || fail "$tag-plain did not end"
grep -q "CLMUX-VM-RESULT" "$lv/console-$tag-plain.log" || fail "$tag-plain did not boot"
grep -q "domain $tag-plain" "$tmp/clmuxd.log" && fail "clmuxd served $tag-plain"
[ ! -e "/dev/shm/clmux-$tag-plain" ] || fail "$tag-plain has a device file"
ctl tenants | grep -q "^$tag-plain " && fail "$tag-plain has a tenant"

echo "== a domain with <clmux:gpu>: tenant, OpenCL in the guest, live quota, libvirtd restart"
dom=$tag-gpu
domain "$dom" "$(gpu "transport='ivshmem' mem='256M' weight='2'")" vm-memsize
vsh define "$tmp/$dom.xml" >/dev/null
for _ in $(seq 100); do ctl domain-xml "$dom" >"$tmp/lines" 2>/dev/null && break; sleep 0.1; done
grep -q "<shmem name='clmux-$dom'>" "$tmp/lines" || fail "domain-xml $dom: $(cat "$tmp/lines")"
[ -e "/dev/shm/clmux-$dom" ] || fail "no device file for $dom once defined"
ctl tenants | grep -q "^$dom " && fail "$dom has a tenant before it runs"
t0=$(date +%s.%N)
vsh start "$dom" >/dev/null || fail "virsh start $dom"
wait_for "vm-memsize: first" 180 "$lv/console-$dom.log" || fail "the guest got no OpenCL answer"
t1=$(date +%s.%N)
echo "libvirt-check: virsh start to the first OpenCL answer in the guest:" \
	"$(awk "BEGIN { printf \"%.1f\", $t1 - $t0 }") s (TCG guest)"
grep -q "vm-memsize: first 268435456" "$lv/console-$dom.log" ||
	fail "the guest does not see its 256M quota: $(grep vm-memsize "$lv/console-$dom.log")"
ctl tenants | grep -q "^$dom " || fail "no tenant $dom while it runs"
ctl quota get "$dom" | grep -q "^weight *2" || fail "weight=2 not applied"
grep -q "session [0-9]*: connected (ivshmem" "$tmp/clmuxd.log" || fail "no ivshmem session"

kill "$lvpid"
wait "$lvpid" || true
lvpid=""
wait_for "libvirt: lost" || fail "clmuxd did not notice libvirtd gone"
start_libvirtd || fail "libvirtd did not start again"
for _ in $(seq 300); do
	[ "$(grep -c "libvirt: following" "$tmp/clmuxd.log")" -ge 2 ] && break
	sleep 0.1
done
[ "$(grep -c "libvirt: following" "$tmp/clmuxd.log")" -ge 2 ] || fail "clmuxd did not reconnect"
[ "$(state "$dom")" = running ] || fail "$dom no longer runs after the restart"
ctl tenants | grep -q "^$dom " || fail "tenant $dom lost over libvirtd's restart"

vsh metadata "$dom" "$NS" --key clmux --live --config \
	--set "<gpu transport='ivshmem' mem='128M' weight='3'/>" || fail "virsh metadata"
wait_for "domain $dom: quotas changed by its metadata" || fail "the metadata change was not followed"
ctl quota get "$dom" | grep -q "^mem *128M" || fail "mem=128M not applied: $(ctl quota get "$dom")"
wait_off "$dom" 300 || fail "$dom did not end"
grep -q "vm-memsize: then 134217728" "$lv/console-$dom.log" ||
	fail "a fresh guest process does not see the new quota"
grep -q "CLMUX-VM-RESULT rc=0" "$lv/console-$dom.log" || fail "the guest's program failed"
wait_for "domain $dom stopped: its tenant and everything it held are released" ||
	fail "the stop did not release $dom"
ctl tenants | grep -q "^$dom " && fail "tenant $dom outlives its domain"
ctl workers | grep -q "t:$dom" && fail "the worker of $dom outlives its domain"
ctl --json stats | grep -q '"sessions":0,"objects":0,"mem":0' || fail "something is still held"
[ -e "/dev/shm/clmux-$dom" ] || fail "the device file of defined $dom went with its stop"
vsh undefine "$dom" >/dev/null
wait_for "domain $dom is gone (undefined)" || fail "the undefine was not followed"
[ ! -e "/dev/shm/clmux-$dom" ] || fail "the device file outlives $dom"

echo "== the prepare hook: a transient domain's device before QEMU starts"
dom=$tag-hook
domain "$dom" "$(gpu "mem='256M'")" vm-transfer
sed "s|@sbindir@/clmuxctl|$CLMUXCTL --admin $tmp/admin.sock|" "$HOOK" >"$tmp/hook"
chmod +x "$tmp/hook"
vsh dumpxml "$tag-plain" | "$tmp/hook" "$tag-plain" prepare begin - ||
	fail "the hook failed a domain without the element"
"$tmp/hook" "$dom" prepare begin - <"$tmp/$dom.xml" || fail "the hook failed for $dom"
[ -e "/dev/shm/clmux-$dom" ] || fail "the hook made no device file"
vsh create "$tmp/$dom.xml" >/dev/null || fail "virsh create $dom"
wait_for "domain $dom (.*) runs: tenant $dom" || fail "transient $dom got no tenant"
# Destroyed while its guest holds device memory: all of it comes back.
wait_for transferring 180 "$lv/console-$dom.log" || fail "no transfers in $dom"
ctl --json tenants | grep -q "\"name\":\"$dom\",\"sessions\":[1-9][0-9]*,\"mem\":[1-9]" ||
	fail "$dom holds no memory: $(ctl tenants)"
vsh destroy "$dom" >/dev/null || fail "virsh destroy $dom"
wait_for "domain $dom is gone" || fail "transient $dom's end was not followed"
ctl tenants | grep -q "^$dom " && fail "tenant $dom outlives its domain"
ctl --json stats | grep -q '"sessions":0,"objects":0,"mem":0' || fail "$dom's memory is still held"
[ ! -e "/dev/shm/clmux-$dom" ] || fail "the device file outlives transient $dom"

if [ "$(id -u)" = 0 ]; then
	echo "== transport='vsock': clmuxd is the domain's vhost-user-vsock device"
	dom=$tag-vsock
	# Its device lines come from clmuxd, which learns of it from its XML:
	# a first definition without them, then the full one.
	domain "$dom" "$(gpu "transport='vsock' mem='64M'")" clinfo -l
	vsh define "$tmp/$dom.xml" >/dev/null || fail "virsh define $dom"
	for _ in $(seq 100); do ctl domain-xml "$dom" >/dev/null 2>&1 && break; sleep 0.1; done
	domain "$dom" "$(gpu "transport='vsock' mem='64M'")" clinfo -l
	grep -q "vhost-user-vsock-pci" "$tmp/$dom.xml" || fail "no vsock device lines for $dom"
	vsh define "$tmp/$dom.xml" >/dev/null || fail "virsh define $dom again"
	# libvirtd here is not the system's: its prepare hook is run by hand.
	vsh dumpxml "$dom" | "$tmp/hook" "$dom" prepare begin - || fail "the hook failed for $dom"
	vsh start "$dom" >/dev/null || fail "virsh start $dom"
	wait_off "$dom" 300 || fail "$dom did not end"
	grep -q "CLMUX-VM-RESULT rc=0" "$lv/console-$dom.log" || fail "clinfo failed in $dom"
	grep -q "VMM connected" "$tmp/clmuxd.log" || fail "QEMU never reached clmuxd"
	grep -q "session [0-9]*: connected.*tenant $dom" "$tmp/clmuxd.log" || fail "no vsock session"
	wait_for "domain $dom stopped: its tenant" || fail "the stop did not release $dom"
	vsh undefine "$dom" >/dev/null
	wait_for "domain $dom is gone" || fail "the undefine of $dom was not followed"
	[ ! -e "/run/clmux/vm-$dom.vsock" ] || fail "the socket outlives $dom"
fi

kill -TERM "$dpid"
wait "$dpid" || fail "clmuxd did not exit cleanly"
dpid=""
echo "libvirt-check: passed"
