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
#   bench-timed.sh [--no-build | --dry-run]
#
# --dry-run builds and runs nothing: it checks that the qtest program lists
# the benchmark's case (-m perf) and that QEMU is there.
set -euo pipefail
. "$(dirname "$0")/common.sh"

BUILD_=1 DRY=0
case ${1:-} in
    --no-build) BUILD_=0 ;;
    --dry-run) BUILD_=0 DRY=1 ;;
    "") ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) die "unknown argument: $1 (--no-build, --dry-run or nothing)" ;;
esac
[ $# -le 1 ] || die "one argument at most (--no-build, --dry-run or nothing)"
if [ $BUILD_ = 1 ]; then
    "$TOP/scripts/build-qemu.sh"
fi
Q=$BUILD/qemu
[ -x "$Q/tests/qtest/cxl-shm-test" ] || die "no $Q/tests/qtest/cxl-shm-test: run scripts/build-qemu.sh"
if [ $DRY = 1 ]; then
    [ -x "$Q/qemu-system-x86_64" ] || die "no $Q/qemu-system-x86_64: run scripts/build-qemu.sh"
    QTEST_QEMU_BINARY=$Q/qemu-system-x86_64 "$Q/tests/qtest/cxl-shm-test" -m perf -l |
        grep -x '/x86_64/cxl-shm/timed-bench' >/dev/null ||
        die "$Q/tests/qtest/cxl-shm-test -m perf lists no /x86_64/cxl-shm/timed-bench case"
    log "dry run: the qtest program has the timed-bench case and QEMU is built; nothing run"
    exit 0
fi
QTEST_QEMU_BINARY=$Q/qemu-system-x86_64 "$Q/tests/qtest/cxl-shm-test" -m perf \
    --tap -k -p /x86_64/cxl-shm/timed-bench 2>&1 |
    sed -n 's/^# \(bench\|timed-bench\): /\1: /p'
