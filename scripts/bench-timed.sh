#!/usr/bin/env bash
# mode=timed benchmark: prints, side by side in one run,
#   - the host cost of one access on the timed path against stock
#     cxl-type3's MMIO path (same firmware loop, same QEMU);
#   - the dependent-load latency a guest measures for configured miss
#     latencies 150, 250 and 400 ns under -icount shift=0 (two runs each:
#     exact and identical), and 500, 1000 and 2000 ns without icount
#     (approximate: in one QEMU per row, the fastest of 15 runs with the
#     latency less the fastest of 15 of the same chase without, the two
#     alternated).
# The guest is the bare-metal firmware of tests/qtest/cxl-shm-test.c
# (test_timed_bench).  A benchmark: it prints numbers and exits 0 unless
# the build or the run fails.  About a minute.
#
#   bench-timed.sh [--no-build]
set -euo pipefail
. "$(dirname "$0")/common.sh"

BUILD_=1
case ${1:-} in
    --no-build) BUILD_=0 ;;
    "") ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) die "unknown argument: $1 (--no-build or nothing)" ;;
esac
if [ $BUILD_ = 1 ]; then
    "$TOP/scripts/build-qemu.sh"
fi
Q=$BUILD/qemu
[ -x "$Q/tests/qtest/cxl-shm-test" ] || die "no $Q/tests/qtest/cxl-shm-test: run scripts/build-qemu.sh"
QTEST_QEMU_BINARY=$Q/qemu-system-x86_64 "$Q/tests/qtest/cxl-shm-test" -m perf \
    --tap -k -p /x86_64/cxl-shm/timed-bench 2>&1 |
    sed -n 's/^# \(bench\|timed-bench\): /\1: /p'
