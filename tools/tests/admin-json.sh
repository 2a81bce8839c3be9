#!/bin/sh
# SPDX-License-Identifier: MIT
# clmuxctl --json: every answer of the admin socket parses as JSON and
# carries strings byte for byte, a listener path with a quote, a backslash
# and control characters included; a tenant name with such bytes is refused
# where it would enter. Run from the build tree (make check).
set -u
clmuxd=${CLMUXD:-host/clmuxd}
ctl=tools/clmuxctl
tmp=$(mktemp -d)
pid=""
cleanup() {
	[ -z "$pid" ] || { kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null; }
	[ -n "${KEEP:-}" ] || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail=0
# printf, not echo: dash's echo reads the backslashes these lines hold.
pass() { printf 'PASS: %s\n' "$*"; }
bad() { printf 'FAIL: %s\n' "$*"; fail=1; }

# The admin socket answers root alone.
[ "$(id -u)" = 0 ] || { echo "SKIP: clmuxctl needs root (the admin socket is root's)"; exit 77; }
case $clmuxd in /*) ;; *) clmuxd=$PWD/$clmuxd ;; esac

# A tenant name with a quote never becomes a tenant: the daemon refuses it.
if "$clmuxd" --admin "$tmp/x.admin" --listen "unix:$tmp/x.sock,tenant=a\"b" \
	--check-config >"$tmp/out" 2>&1; then
	bad "tenant=a\"b accepted"
else
	pass "tenant=a\"b refused: $(head -1 "$tmp/out")"
fi

mkdir "$tmp/s"
tab=$(printf '\t')
esc=$(printf '\033')
odd="$tmp/s/q\"b\\s${tab}t${esc}e.sock"
(cd "$tmp" && exec "$clmuxd" --admin "$tmp/admin" --listen "unix:$odd,tenant=alpha" \
	--listen "unix:$tmp/s/plain.sock") >"$tmp/log" 2>&1 &
pid=$!
for _ in $(seq 100); do
	[ -S "$tmp/admin" ] && break
	sleep 0.1
done
[ -S "$tmp/admin" ] || { bad "clmuxd did not start"; cat "$tmp/log"; exit 1; }

# json CMD...: clmuxctl --json CMD... must print one JSON document.
json() {
	name=$1
	shift
	if ! "$ctl" --admin "$tmp/admin" --json "$@" >"$tmp/$name.json" 2>"$tmp/err"; then
		bad "clmuxctl --json $*: $(cat "$tmp/err")"
	elif ! "${PYTHON:-python3}" -c 'import json, sys; json.load(open(sys.argv[1]))' \
		"$tmp/$name.json" 2>"$tmp/err"; then
		bad "clmuxctl --json $*: not JSON: $(cat "$tmp/err")"
		cat "$tmp/$name.json"
	else
		pass "clmuxctl --json $*"
	fi
}
json tenants tenants
json quota quota get alpha
json stats stats
json workers workers
json listeners listeners
# A tenant name with a quote is refused by quota set, and the tables stay
# JSON.
if "$ctl" --admin "$tmp/admin" quota set 'a"b\c' mem=1G >"$tmp/out" 2>&1; then
	bad "quota set 'a\"b\\c' accepted"
else
	pass "quota set 'a\"b\\c' refused: $(cat "$tmp/out")"
fi
ctl1=$(printf 'a\001b')
if "$ctl" --admin "$tmp/admin" quota set "$ctl1" mem=1G >"$tmp/out" 2>&1; then
	bad "quota set with a control character accepted"
else
	pass "quota set with a control character refused"
fi
json tenants2 tenants
json evict evict alpha

# The values, read back as a program reads them.
if "${PYTHON:-python3}" - "$tmp" "$odd" >"$tmp/out" 2>&1 <<'EOF'; then
import json, os, sys
tmp, odd = sys.argv[1], sys.argv[2]
load = lambda n: json.load(open(os.path.join(tmp, n + ".json")))
ls = load("listeners")
assert [(l["kind"], l["tenant"], l["address"]) for l in ls] == \
    [("unix", "alpha", odd), ("unix", "", tmp + "/s/plain.sock")], ls
assert sorted(t["name"] for t in load("tenants")) == ["alpha", "default"], load("tenants")
assert sorted(t["name"] for t in load("tenants2")) == ["alpha", "default"], load("tenants2")
q = load("quota")
assert q["name"] == "alpha" and q["mem"] == "none" and q["weight"] == "1", q
s = load("stats")
assert s["tenants"] == 2 and isinstance(s["uptime_s"], float), s
w = load("workers")
assert any(x["tenants"] == ["alpha"] for x in w), w
assert load("evict") == {"evicted": 0}, load("evict")
print("listeners, tenants, quota, stats, workers, evict read back")
EOF
	pass "$(cat "$tmp/out")"
else
	bad "the values:"
	cat "$tmp/out"
fi
exit $fail
