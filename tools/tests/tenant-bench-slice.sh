#!/bin/sh
# SPDX-License-Identifier: MIT
# A short slice of the tenant benchmark: two tenants at weights 1:3 keep
# kernels in flight through one clmuxd for two seconds. It must run to the
# end and report; the shares it prints are not judged here (timing).
set -eu
out=$(tools/tenant-bench --tenants 2 --weights 1:3 --seconds 2 --work 500)
echo "$out"
echo "$out" | grep -q "^Jain's fairness index"
# The same two tenants as one group: one worker process, clmuxd's
# scheduler between them; the --json form tools/bench-results reads.
out=$(tools/tenant-bench --tenants 2 --weights 1:3 --seconds 2 --work 500 --group --json)
echo "$out"
echo "$out" | "${PYTHON:-python3}" -c '
import json, sys
j = json.loads(sys.stdin.read())
assert j["mode"] == "grouped" and j["tenants"] == 2 and len(j["completed"]) == 2, j
assert j["total"] == sum(j["completed"]) and j["kernels_per_s"] > 0, j'
