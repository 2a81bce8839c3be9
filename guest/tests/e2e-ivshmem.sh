#!/bin/sh
# SPDX-License-Identifier: MIT
# The end-to-end programs over an ivshmem region (see e2e-shm.sh).
exec "$(dirname "$0")/e2e-shm.sh" ivshmem
