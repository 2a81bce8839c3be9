#!/bin/sh
# SPDX-License-Identifier: MIT
# Weights between isolated tenants: two tenants, each in a worker process
# of its own, at weights 1:3, both keep kernels in flight. The driver
# time-slices the two processes evenly; the front end's arbiter gives the
# second three times the first's device time. A share, not a timing: the
# band (2 to 4.5) holds on a loaded 2-core machine, and an even split
# (about 1) is far outside it.
set -eu
out=$(tools/tenant-bench --tenants 2 --weights 1:3 --seconds 5 --work 500 --json)
echo "$out"
echo "$out" | "${PYTHON:-python3}" -c '
import json, sys
j = json.loads(sys.stdin.read())
assert j["mode"] == "isolated" and len(j["completed"]) == 2, j
a, b = j["completed"]
assert a > 0 and b > 0, j
r = b / a
print("share ratio t1/t0: %.2f (weights 1:3)" % r)
assert 2.0 <= r <= 4.5, "share ratio %.2f is outside 2..4.5" % r'
