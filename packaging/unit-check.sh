#!/bin/sh
# SPDX-License-Identifier: MIT
# clmuxd.service as make install writes it, and the socket units beside it,
# pass `systemd-analyze verify` (ExecStart and ExecStartPre pointed at this
# build's clmuxd, which is not installed yet); the sockets' paths are the
# ones ExecStart names, so that clmuxd takes them.
# 77 (skip) where systemd-analyze is missing.
set -eu
command -v systemd-analyze >/dev/null || { echo "SKIP: no systemd-analyze"; exit 77; }
b=$(pwd) # the build tree: tests run at its top
unit=$b/packaging/clmuxd.service
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
grep -q '^Type=notify$' "$unit"
sbin=$(sed -n 's|^ExecStart=\(/[^ ]*\)/clmuxd .*|\1|p' "$unit")
[ -n "$sbin" ]
sed -e "s|^ExecStart=$sbin/clmuxd|ExecStart=$b/host/clmuxd|" \
	-e "s|^ExecStartPre=$sbin/clmuxd|ExecStartPre=$b/host/clmuxd|" "$unit" >"$tmp/clmuxd.service"
# verify prints its findings and fails on an error (an unknown key, a
# missing executable); warnings are findings too: none is expected.
src=${srcdir:-.}/packaging
cp "$src/clmuxd.socket" "$src/clmuxd-admin.socket" "$tmp/"
# ExecStart's command line, continued lines joined.
exec_start=$(sed -e ':a' -e '/\\$/{N;s/\\\n[[:space:]]*/ /;ba' -e '}' "$tmp/clmuxd.service" |
	sed -n 's/^ExecStart=//p')
for s in clmuxd.socket:--listen clmuxd-admin.socket:--admin; do
	path=$(sed -n 's/^ListenStream=//p' "$tmp/${s%%:*}")
	echo "$exec_start" | grep -q " ${s#*:} \(unix:\)\?$path[, ]" ||
		{ echo "${s%%:*}: $path is not clmuxd's ${s#*:}"; exit 1; }
done
systemd-analyze verify --man=no "$tmp/clmuxd.service" "$tmp/clmuxd.socket" \
	"$tmp/clmuxd-admin.socket" >"$tmp/out" 2>&1 || { cat "$tmp/out"; exit 1; }
if [ -s "$tmp/out" ]; then cat "$tmp/out"; exit 1; fi
systemd-analyze security --offline=yes "$tmp/clmuxd.service" 2>/dev/null | tail -1 || true
echo "PASS: clmuxd.service, clmuxd.socket and clmuxd-admin.socket verify"
