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
# scheduler between them.
out=$(tools/tenant-bench --tenants 2 --weights 1:3 --seconds 2 --work 500 --group)
echo "$out"
echo "$out" | grep -q "^Jain's fairness index"
