#!/bin/sh
# SPDX-License-Identifier: MIT
# docs/performance.md's tables are what tools/perf-report makes of
# docs/results/*.json: a result file changed without the report (or the
# report edited by hand) fails here. Runs no benchmark.
set -eu
exec "${PYTHON:-python3}" "$srcdir/tools/perf-report" --check --no-plots
