#!/bin/sh
# SPDX-License-Identifier: MIT
# The packages as an admin meets them (make package-check): checks the
# three .debs of the build tree (packaging/debs.sh builds them into DEBS
# where they are not built yet) with lintian, installs them with dpkg, runs
# clmuxd.service's ExecStart as the unit would (systemctl where systemd
# runs; else the unit's user, groups, umask, runtime directory and
# NOTIFY_SOCKET by hand), runs an OpenCL program through the installed
# ICD and the loader, and clmuxctl as a member of clmux-admin; then an
# upgrade that keeps the admin's clmuxd.conf, removal (no daemon, no
# socket left) and purge (nothing of /etc/clmux left).
# Needs root and dpkg-buildpackage; 77 (skip) without them, or where a
# clmux package is installed already (the admin's, not ours to replace).
# Environment: PACKAGE_VERSION, top_srcdir, DEBS (the build tree's debs/),
# CLMUX_SAMPLE (an OpenCL program that prints checksums), all set by make;
# run from the build directory.
set -eu
skip() { echo "SKIP: $*"; exit 77; }
[ "$(id -u)" = 0 ] || skip "needs root (dpkg -i)"
for c in dpkg-buildpackage dh lintian python3 setpriv; do
	command -v $c >/dev/null || skip "no $c (tools/setup.sh installs it)"
done
for p in clmuxd clmux-tools clmux-opencl-icd; do
	if dpkg-query -W -f='${Status}' $p 2>/dev/null | grep -q "ok installed"; then
		skip "$p is installed on this machine"
	fi
done
# The packaged unit's sockets are /run/clmux's; a clmuxd started as root
# without --admin takes /run/clmux/admin.sock too.
for s in /run/clmux/admin.sock /run/clmux/clmuxd.sock; do
	if python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).connect(sys.argv[1])' "$s" 2>/dev/null; then
		skip "another clmuxd serves $s"
	fi
done
src=$(cd "$top_srcdir" && pwd)
user=clmux-pkgtest
tmp=$(mktemp -d)
chmod 755 "$tmp"
step() { echo "== package-check: $*"; }
# The clmux user's clmuxd processes that still run. Zombies do not count:
# where PID 1 reaps no orphans (a container's or a microVM's init), a daemon
# that has exited stays in the process table as one.
running() { ps -u clmux -o pid=,stat=,comm= 2>/dev/null | awk '$2 !~ /^Z/ && $3 == "clmuxd" { print $1; n++ } END { exit !n }'; }
cleanup() {
	rc=$?
	set +e
	[ $rc = 0 ] || [ ! -s "$tmp/clmuxd.log" ] || { echo "--- clmuxd's log"; tail -30 "$tmp/clmuxd.log"; }
	dpkg -P clmux-opencl-icd clmuxd clmux-tools >/dev/null 2>&1
	getent passwd $user >/dev/null && userdel $user
	[ -z "${notify_pid:-}" ] || kill "$notify_pid" 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT

step "changelog and configure.ac name one version"
v=$(dpkg-parsechangelog -l "$src/debian/changelog" -S Version)
[ "$v" = "$PACKAGE_VERSION" ] || { echo "debian/changelog: $v, configure.ac: $PACKAGE_VERSION"; exit 1; }

step "the .debs of this build tree ($DEBS)"
"$src/packaging/debs.sh" "$DEBS"
arch=$(dpkg --print-architecture)
icd=$DEBS/clmux-opencl-icd_${v}_$arch.deb
daemon=$DEBS/clmuxd_${v}_$arch.deb
tools=$DEBS/clmux-tools_${v}_$arch.deb
ls "$icd" "$daemon" "$tools"

step "lintian: no errors"
lintian --fail-on error --no-tag-display-limit "$DEBS/clmux_${v}_$arch.changes"

step "the guest package: the ICD with its SONAME, nothing of the daemon"
dpkg-deb -c "$icd" | awk '{print $6}' >"$tmp/icd.list"
cat "$tmp/icd.list"
grep -q '^./etc/OpenCL/vendors/clmux.icd$' "$tmp/icd.list"
grep -q '^./etc/clmux/client.conf$' "$tmp/icd.list"
! grep -q 'clmuxd\|clmuxctl\|systemd' "$tmp/icd.list"
dpkg-deb -x "$icd" "$tmp/icd-root"
lib=$(cat "$tmp/icd-root/etc/OpenCL/vendors/clmux.icd")
objdump -p "$tmp/icd-root$lib" | grep -q 'SONAME *libclmux\.so\.1$'

step "dpkg -i: the clmux user, the groups, the unit"
dpkg -i "$tools" "$daemon" "$icd" >"$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; exit 1; }
id clmux
getent group clmux-admin render >/dev/null
[ "$(stat -c %U:%G "$(dpkg -L clmuxd | grep '^/etc/clmux$')")" = root:clmux ]
unit=$(dpkg -L clmuxd | grep '/clmuxd.service$')
useradd --system --no-create-home --groups render,clmux-admin $user

# ExecStart's command line (continued lines joined), CLMUXD_OPTS from the
# unit's EnvironmentFile.
exec_start=$(sed -e ':a' -e '/\\$/{N;s/\\\n[[:space:]]*/ /;ba' -e '}' "$unit" | sed -n 's/^ExecStart=//p')
CLMUXD_OPTS=""
. /etc/default/clmuxd
exec_start=$(echo "$exec_start" | sed "s|\$CLMUXD_OPTS|$CLMUXD_OPTS|")
echo "ExecStart: $exec_start"
if [ -d /run/systemd/system ]; then
	step "systemctl start clmuxd (systemd runs here)"
	systemctl start clmuxd
else
	step "ExecStart as clmux, groups video render clmux-admin, umask 0077 (no systemd here)"
	# RuntimeDirectory=clmux, RuntimeDirectoryMode=0755.
	install -d -o clmux -g clmux -m 0755 /run/clmux
	# StateDirectory=, CacheDirectory= and Environment= (HOME, XDG_CACHE_HOME).
	install -d -o clmux -g clmux -m 0755 /var/lib/clmux /var/cache/clmux
	unit_env=$(sed -n 's/^Environment=//p' "$unit")
	# NOTIFY_SOCKET in the abstract namespace, as systemd gives it: clmuxd
	# must say READY=1, and only once its sockets are open.
	python3 - "$tmp/notify" <<'PY' &
import socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind("\0clmux-package-check")
open(sys.argv[1] + ".bound", "w").close()
msg = s.recv(4096).decode()
with open(sys.argv[1], "w") as f:
    f.write(msg)
PY
	notify_pid=$!
	while [ ! -e "$tmp/notify.bound" ]; do sleep 0.1; done
	(umask 0077; cd /; NOTIFY_SOCKET=@clmux-package-check CLMUX_LOG=info \
		setpriv --reuid clmux --regid clmux --groups video,render,clmux-admin --no-new-privs \
		env $unit_env $exec_start >"$tmp/clmuxd.log" 2>&1 &)
	wait "$notify_pid"
	notify_pid=
	grep -qx 'READY=1' "$tmp/notify" || { cat "$tmp/notify" "$tmp/clmuxd.log"; exit 1; }
	echo "READY=1 received"
fi
# Ready means listening: both sockets answer now, with no retry.
python3 -c 'import socket, sys
for p in sys.argv[1:]:
    s = socket.socket(socket.AF_UNIX); s.connect(p); s.close()' /run/clmux/clmuxd.sock /run/clmux/admin.sock
ls -l /run/clmux
[ "$(stat -c %G:%a /run/clmux/clmuxd.sock)" = render:660 ]
[ "$(stat -c %G:%a /run/clmux/admin.sock)" = clmux-admin:660 ]
running >/dev/null

step "an OpenCL program through the installed ICD, as a member of render"
install -m 0755 "$CLMUX_SAMPLE" "$tmp/clmux-sample"
native=$(ls /etc/OpenCL/vendors/*.icd | grep -v '/clmux.icd$' | head -1)
[ -n "$native" ] || skip "no native ICD in /etc/OpenCL/vendors"
OCL_ICD_VENDORS=$native "$tmp/clmux-sample" >"$tmp/native.out"
setpriv --reuid $user --regid $user --init-groups env -u CLMUX_SERVER \
	OCL_ICD_VENDORS=/etc/OpenCL/vendors/clmux.icd "$tmp/clmux-sample" >"$tmp/clmux.out"
cat "$tmp/clmux.out"
grep -qi '^platform: .*clmux' "$tmp/clmux.out"
grep '^result' "$tmp/native.out" >"$tmp/native.sums"
grep '^result' "$tmp/clmux.out" >"$tmp/clmux.sums"
[ -s "$tmp/clmux.sums" ]
diff "$tmp/native.sums" "$tmp/clmux.sums"

step "SIGHUP reads clmuxd.conf again, and clmuxd goes on serving"
kill -HUP "$(pgrep -u clmux -x -o clmuxd)"
if [ ! -d /run/systemd/system ]; then
	while ! grep -q 'SIGHUP: .* read again' "$tmp/clmuxd.log"; do
		running >/dev/null || { cat "$tmp/clmuxd.log"; exit 1; }
		sleep 0.2
	done
fi

step "clmuxctl as a member of clmux-admin; refused to others"
setpriv --reuid $user --regid $user --init-groups clmuxctl tenants
setpriv --reuid $user --regid $user --init-groups clmuxctl quota set default objects=5000
grep -A3 '^\[tenant default\]' /etc/clmux/clmuxd.conf | grep -q 'objects = 5000'
if setpriv --reuid nobody --regid nogroup --clear-groups clmuxctl tenants 2>"$tmp/refused"; then
	echo "clmuxctl as nobody was served"; exit 1
fi
cat "$tmp/refused"

step "an upgrade keeps the admin's clmuxd.conf"
echo "# the admin's line" >>/etc/clmux/clmuxd.conf
dpkg -i "$tools" "$daemon" "$icd" >"$tmp/upgrade.log" 2>&1 || { cat "$tmp/upgrade.log"; exit 1; }
grep -q "^# the admin's line$" /etc/clmux/clmuxd.conf

step "removal: no daemon, no socket"
dpkg -r clmux-opencl-icd clmuxd clmux-tools >"$tmp/remove.log" 2>&1 || { cat "$tmp/remove.log"; exit 1; }
if running; then echo "clmuxd still runs"; ps -u clmux -o pid,ppid,stat,args; exit 1; fi
gone() { for f; do [ ! -e "$f" ] || { echo "$f is left"; exit 1; }; done; }
gone /run/clmux/clmuxd.sock /run/clmux/admin.sock "$lib" /usr/sbin/clmuxd /usr/sbin/clmuxctl
# Conffiles: removal keeps them (the vendor file too, as every Debian ICD's).
[ -e /etc/clmux/clmuxd.conf ] && [ -e /etc/OpenCL/vendors/clmux.icd ]
tail -3 "$tmp/clmuxd.log" 2>/dev/null || true

step "purge: nothing of clmux in /etc or /run"
dpkg -P clmux-opencl-icd clmuxd clmux-tools >"$tmp/purge.log" 2>&1 || { cat "$tmp/purge.log"; exit 1; }
gone /etc/clmux /run/clmux /var/lib/clmux /var/cache/clmux /etc/OpenCL/vendors/clmux.icd \
	/etc/libvirt/hooks/qemu.d/clmux /etc/default/clmuxd
echo "PASS: package-check"
