# SPDX-License-Identifier: MIT
EXTRA_DIST += docs/protocol.md docs/architecture.md docs/performance.md docs/compatibility.md docs/vm.md docs/admin.md docs/security.md docs/kubernetes.md README.md
dist_man_MANS += docs/clmuxd.8 docs/clmuxctl.8
