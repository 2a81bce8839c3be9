#!/bin/sh
# SPDX-License-Identifier: MIT
# docs/performance.md's tables are what tools/perf-report makes of
# docs/results/*.json: a result file changed without the report (or the
# report edited by hand) fails here. Runs no benchmark.
set -eu
# A tarball without docs/results/ (make dist leaves it out) has nothing to check.
[ -d "$srcdir/docs/results" ] || exit 77
exec "${PYTHON:-python3}" "$srcdir/tools/perf-report" --check --no-plots
