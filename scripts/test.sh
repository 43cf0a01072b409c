#!/usr/bin/env bash
# cxlpod's whole test suite: builds what it needs (scripts/build-all.sh),
# then runs the unit tests (host only), the qtests (the device, QEMU's
# libqtest), the smoke runs of the documented scripts and commands, the
# integration tests (booted guests) and the check of the upstream patch
# series.  A qtest case that
# skipped itself (g_test_skip, e.g. no hugetlbfs) is printed as
# "SKIP  name  (reason)" and counted neither as passed nor as failed.  The
# last line is "N passed, N failed"; the exit status is non-zero on any
# failure.
#
#   bash scripts/test.sh [PATTERN]   run only tests whose name matches PATTERN
#   bash scripts/test.sh --installed PREFIX [PATTERN]
#                                    the integration tests against cxlpod
#                                    installed in PREFIX (scripts/install.sh,
#                                    or /usr for the Debian package): its
#                                    launcher, pool tool and QEMU; nothing is
#                                    built, the unit tests, qtests and series
#                                    (which need the build) do not run
set -uo pipefail
. "$(dirname "$0")/common.sh"

INSTALLED=
if [ "${1:-}" = --installed ]; then
    [ -n "${2:-}" ] || die "--installed needs the installation's prefix"
    INSTALLED=$(cd "$2" && pwd) || die "--installed $2: no such directory"
    [ -x "$INSTALLED/bin/cxlpod-launch" ] || die "no cxlpod installed in $INSTALLED (no bin/cxlpod-launch)"
    shift 2
fi
PATTERN=${1:-}
RESULTS=$BUILD/test-logs
# One run per clone: a second would delete this one's logs and rebuild
# under it.  A pid file, not a lock QEMUs started by the tests would
# inherit (one left behind would then refuse every later run).
mkdir -p "$BUILD"
if other=$(cat "$BUILD/.test.pid" 2>/dev/null) && [ "$other" != $$ ] &&
   tr '\0' ' ' 2>/dev/null <"/proc/$other/cmdline" | grep -q 'scripts/test\.sh'; then
    die "another scripts/test.sh (pid $other) is running in this clone ($TOP): wait for it, or run from another clone"
fi
echo $$ >"$BUILD/.test.pid"
rm -rf "$RESULTS"; mkdir -p "$RESULTS"
passed=0; failed=0; failures=(); skipped=()

record() {  # record NAME STATUS SECONDS
    if [ "$2" = 0 ]; then
        passed=$((passed + 1)); printf 'PASS  %-44s %5ss\n' "$1" "$3"
    else
        failed=$((failed + 1)); failures+=("$1"); printf 'FAIL  %-44s %5ss  (log: %s)\n' "$1" "$3" "$RESULTS/$1.log"
    fi
}

skip() {  # skip NAME REASON: a test that did not run (neither passed nor failed)
    skipped+=("$1"); printf 'SKIP  %-44s  (%s)\n' "$1" "${2:-no reason given}"
}

run() {  # run NAME TIMEOUT CMD...: one test, output to its own log
    local name=$1 limit=$2 t0 rc; shift 2
    [ -z "$PATTERN" ] || [[ $name == *$PATTERN* ]] || return 0
    t0=$(date +%s)
    timeout --kill-after=10 "$limit" "$@" >"$RESULTS/$name.log" 2>&1; rc=$?
    [ "$rc" = 124 ] && echo "test timed out after ${limit}s" >>"$RESULTS/$name.log"
    record "$name" "$rc" $(( $(date +%s) - t0 ))
}

finish() {
    if [ "${#skipped[@]}" -gt 0 ]; then
        echo "skipped (not counted): ${skipped[*]}"
    fi
    if [ "$failed" -gt 0 ]; then
        echo "failed: ${failures[*]}"
    fi
    echo "$passed passed, $failed failed"
    [ "$failed" = 0 ]
    exit
}

if [ -n "$INSTALLED" ]; then
    # The installation's own programs; the launcher finds its QEMU and
    # guest image relative to itself (CXLPOD_TOP is only the scripts').
    echo "installed: $INSTALLED"
    export CXLPOD_TOP=$TOP CXLPOD_INSTALLED=$INSTALLED
    export CXLPOD_LAUNCH=$INSTALLED/bin/cxlpod-launch CXLPOD_POOL=$INSTALLED/bin/cxlpod-pool
    export CXLPOD_QEMU=$INSTALLED/libexec/cxlpod/qemu-system-x86_64
    for t in "$TOP"/tests/integration/[0-9]*.sh; do
        [ -e "$t" ] && run "int-$(basename "$t" .sh)" 900 bash "$t"
    done
    finish
fi

# Build.  A step that fails is a failed test; the tests that need it are
# not run (they could only fail the same way).
for step in $(bash "$TOP/scripts/build-all.sh" --steps); do
    t0=$(date +%s)
    bash "$TOP/scripts/$step.sh" >"$RESULTS/$step.log" 2>&1
    rc=$?
    if [ "$rc" != 0 ]; then
        record "$step" "$rc" $(( $(date +%s) - t0 ))
        tail -n 5 "$RESULTS/$step.log"
        finish
    fi
done
echo "build: ok ($(cat "$BUILD/qemu-src.base"))"

export CXLPOD_TOP=$TOP
export CXLPOD_QEMU=$BUILD/qemu/qemu-system-x86_64
export CXLPOD_LAUNCH=$BUILD/meson/host-tools/cxlpod-launch
export QTEST_QEMU_BINARY=$CXLPOD_QEMU

# 1. Unit tests, one meson test each.
while read -r t; do
    [ -n "$t" ] && run "unit-${t##* / }" 300 meson test -C "$BUILD/meson" --no-rebuild --verbose "${t##* / }"
done < <(meson test -C "$BUILD/meson" --list 2>/dev/null)

# 2. qtests: the GLib test programs built inside the QEMU tree (one result
#    per test case, read from their TAP output), then tests/qtest/*.sh.
while read -r target; do
    bin=$BUILD/qemu/$target; name=qtest-$(basename "$target")
    [ -z "$PATTERN" ] || [[ $name == *$PATTERN* ]] || continue
    timeout 600 "$bin" --tap -k >"$RESULTS/$name.log" 2>&1
    rc=$?
    # "ok N CASE # SKIP REASON" is a case that did not run (g_test_skip);
    # "1..0 # SKIP REASON" a program that ran none
    while read -r line; do
        case $line in
        "ok "*"# SKIP"*|"1..0 # SKIP"*)
            reason=${line#*# SKIP}; reason=${reason# }; tcase=${line%% # SKIP*}
            case $tcase in "ok "*) tcase=$name:${tcase#ok * } ;; *) tcase=$name ;; esac
            skip "$tcase" "$reason" ;;
        "ok "*)     record "$name:${line#ok * }" 0 - ;;
        "not ok "*) record "$name:${line#not ok * }" 1 - ;;
        esac
    done < <(grep -E '^((not )?ok |1\.\.0 # SKIP)' "$RESULTS/$name.log")
    if [ "$rc" != 0 ] && ! grep -q '^not ok' "$RESULTS/$name.log"; then
        record "$name" "$rc" -   # crashed or timed out outside a test case
    fi
done < <(sed -n 's/^#\s*qtest:\s*//p' "$TOP/hw-cxl/cxlpod-devices.mak")
for t in "$TOP"/tests/qtest/*.sh; do
    [ -e "$t" ] && run "qtest-$(basename "$t" .sh)" 600 bash "$t"
done

# 3. Smoke runs (tests/smoke/*.sh) of the scripts and commands README.md
#    and docs/ tell a user to run: a --dry-run of each (the launcher's own
#    --dry-run checks every pod they would boot) or the smallest real run
#    that fits; none boots a guest.
for t in "$TOP"/tests/smoke/*.sh; do
    [ "$(basename "$t")" = lib.sh ] && continue
    run "smoke-$(basename "$t" .sh)" 300 bash "$t"
done

# 4. Integration tests: each script boots its own guests with the launcher.
for t in "$TOP"/tests/integration/[0-9]*.sh; do
    [ -e "$t" ] && run "int-$(basename "$t" .sh)" 900 bash "$t"
done

# 5. The upstream patch series (tests/series/*.sh): the manifest, and the
#    series exported, checkpatch-clean, applied to the upstream release and
#    built once, from build/qemu's ccache entries (248 s, the build 81 s
#    of it; docs/building.md says why they are shared); building after
#    every patch is
#    scripts/check-series.sh --every-patch, not run here.
for t in "$TOP"/tests/series/*.sh; do
    [ -e "$t" ] && run "series-$(basename "$t" .sh)" 2400 bash "$t"
done

finish
