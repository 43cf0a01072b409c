#!/usr/bin/env bash
# The device under AddressSanitizer and UndefinedBehaviorSanitizer: builds
# QEMU with both (scripts/build-qemu.sh --sanitize, into build/qemu-san: a
# second full QEMU build, about as long as the first), then runs every
# cxl-shm qtest case and the shell qtests (kill-steps, pool-tool) on it,
# and with --integration also the integration tests (their guests then
# run on the sanitized QEMU, several times slower).  Reports are found in
# the per-process report files (new_reports below), not in test output.
# Any sanitizer report fails the run: ASan aborts, UBSan is made fatal
# (but for the upstream QEMU report listed in tests/ubsan-suppressions.txt).
# Not part of scripts/test.sh (it doubles the build); run it after a device
# change.  The last line is "N passed, N failed".
#
#   bash scripts/test-sanitize.sh [--integration] [PATTERN]
set -uo pipefail
. "$(dirname "$0")/common.sh"

INTEGRATION=0
[ "${1:-}" = --integration ] && { INTEGRATION=1; shift; }
PATTERN=${1:-}
bash "$TOP/scripts/build-qemu.sh" --sanitize || die "sanitized QEMU build failed"
bash "$TOP/scripts/build-tools.sh" || die "tools build failed"
bash "$TOP/scripts/build-guest.sh" >/dev/null || die "guest image build failed"

SAN=$BUILD/qemu-san
R=$BUILD/test-logs-san
rm -rf "$R"; mkdir -p "$R/reports"
# Every report also goes to a file of its own in $R/reports (log_path):
# the shell tests and the launcher keep a QEMU's stderr where this script
# does not look.  Leak detection is off: QEMU leaves much allocated at
# exit on purpose (QOM objects, the machine), which is not a device bug.
export ASAN_OPTIONS=halt_on_error=1:abort_on_error=1:detect_leaks=0:log_path=$R/reports/asan
# one upstream QEMU report is let pass; the file says which and why
export UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1:suppressions=$TOP/tests/ubsan-suppressions.txt:log_path=$R/reports/ubsan
export QTEST_QEMU_BINARY=$SAN/qemu-system-x86_64
export CXLPOD_QEMU=$QTEST_QEMU_BINARY CXLPOD_TOP=$TOP
passed=0 failed=0
# reports written since the last call: fail the test that made them (the
# files also hold ASan's warnings, e.g. on QEMU's coroutine stacks, which
# are not reports)
new_reports() {
    local f found=1
    for f in "$R"/reports/*; do
        [ -e "$f" ] || continue
        if grep -qE 'ERROR: AddressSanitizer|runtime error:|^SUMMARY: ' "$f"; then
            found=0
            echo "FAIL  sanitizer report ($1): $R/$(basename "$f").$1"
            grep -E -A5 'ERROR: AddressSanitizer|runtime error:' "$f" | head -n 20
        fi
        mv "$f" "$R/$(basename "$f").$1"
    done
    return $found
}
while read -r target; do
    log="$R/qtest-$(basename "$target").log"
    # with a PATTERN, only a program that has a matching case runs
    if [ -n "$PATTERN" ] && ! "$SAN/$target" -l 2>/dev/null | grep -q -- "$PATTERN"; then
        continue
    fi
    timeout 1800 "$SAN/$target" --tap -k >"$log" 2>&1
    rc=$?
    while read -r line; do
        case $line in
        "ok "*) passed=$((passed + 1)); echo "PASS  ${line#ok * }" ;;
        "not ok "*) failed=$((failed + 1)); echo "FAIL  ${line#not ok * }" ;;
        esac
    done < <(grep -E '^(not )?ok ' "$log" | grep -v '# SKIP' | grep -- "$PATTERN")
    if [ "$rc" != 0 ] && ! grep -q '^not ok' "$log"; then
        failed=$((failed + 1)); echo "FAIL  $(basename "$target") exited $rc (log: $log)"
    fi
    ! new_reports "$(basename "$target")" || failed=$((failed + 1))
done < <(sed -n 's/^#\s*qtest:\s*//p' "$TOP/hw-cxl/cxlpod-devices.mak")
# the shell qtests (kill-steps, pool-tool) on the same QEMU
for t in "$TOP"/tests/qtest/*.sh; do
    n=qtest-$(basename "$t" .sh)
    [ -z "$PATTERN" ] || [[ $n == *$PATTERN* ]] || continue
    if timeout 1800 bash "$t" >"$R/$n.log" 2>&1; then
        passed=$((passed + 1)); echo "PASS  $n"
    else
        failed=$((failed + 1)); echo "FAIL  $n (log: $R/$n.log)"
    fi
    ! new_reports "$n" || failed=$((failed + 1))
done
if [ $INTEGRATION = 1 ]; then
    # the pod network's libvdeplug dlopens its plugins with RTLD_DEEPBIND,
    # which ASan refuses (the QEMU aborts at once): a preloaded dlopen()
    # drops the flag (tests/asan-nodeepbind.c)
    shim=$R/asan-nodeepbind.so
    cc -shared -fPIC -O2 -Wall -o "$shim" "$TOP/tests/asan-nodeepbind.c" -ldl \
        || die "could not build $shim"
    export LD_PRELOAD=$shim ASAN_OPTIONS=$ASAN_OPTIONS:verify_asan_link_order=0
    # the launcher's time limits of each test, 4 times as long: guests on
    # the sanitized QEMU run several times slower (tests/integration/lib.sh)
    export CXLPOD_TIME_SCALE=4
    for t in "$TOP"/tests/integration/[0-9]*.sh; do
        n=$(basename "$t" .sh)
        # the names scripts/test.sh prints: int-32-stopped-peer
        [ -z "$PATTERN" ] || [[ int-$n == *$PATTERN* ]] || continue
        if timeout 1800 bash "$t" >"$R/int-$n.log" 2>&1; then
            passed=$((passed + 1)); echo "PASS  int-$n"
        else
            failed=$((failed + 1)); echo "FAIL  int-$n (log: $R/int-$n.log)"
        fi
        ! new_reports "int-$n" || failed=$((failed + 1))
    done
fi
[ -z "$PATTERN" ] || [ $((passed + failed)) -gt 0 ] || {
    failed=1; echo "FAIL  no test matches '$PATTERN'"; }
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
