#!/usr/bin/env bash
# The whole suite, several times in a row, with a CPU hog beside it (issue
# 9: CI does not always run alone).  Outside the suite: it runs
# scripts/test.sh RUNS times (the first run builds whatever is missing),
# keeps each run's logs in build/soak-suite/run-N/, and prints one line per
# run with its time and its "N passed, N failed" line, then a summary.
# It goes on after a failing run (the summary counts them) and exits
# non-zero if any run failed.
#
#   bash scripts/soak-suite.sh [--no-hog] [--resume] [--dry-run] [RUNS]
#                                                             default 10 runs
#
# --dry-run runs nothing and changes nothing: it says which runs it would
# do (after --resume's decision) and where the logs would go.
# --resume goes on with the runs build/soak-suite/state records, when they
# were of the same code: ten runs of the suite with the hog take hours
# (15-18 minutes each on 2 cores, 2026-12-06), so a soak can be stopped
# (Ctrl-C, a reboot) and resumed.  The code is the tracked files but docs/ and the
# Markdown files (their blob hashes, and any uncommitted change to them);
# if it changed, or a recorded run failed, the soak starts again from run 1
# and says why.  A run that was interrupted is not recorded and runs again.
#
# The hog is one process that keeps one CPU busy for the whole soak (a
# shell loop: no extra package), started before the first run and killed
# at the end.
set -uo pipefail
. "$(dirname "$0")/common.sh"

HOG=1 RESUME=0 RUNS=10 DRY=0
while [ $# -gt 0 ]; do
    case $1 in
    --no-hog) HOG=0 ;;
    --resume) RESUME=1 ;;
    --dry-run) DRY=1 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    -*) die "unknown option $1; usage: $0 [--no-hog] [--resume] [--dry-run] [RUNS]" ;;
    *) RUNS=$1 ;;
    esac
    shift
done
case $RUNS in ''|*[!0-9]*|0) die "usage: $0 [--no-hog] [--resume] [--dry-run] [RUNS]" ;; esac

# What the suite tests: every tracked file but the documentation, as
# committed or as changed in the work tree.
code_fingerprint() {
    git -C "$TOP" rev-parse --git-dir >/dev/null 2>&1 || return 1
    { git -C "$TOP" ls-files -s -- . ':!docs' ':!*.md'
      git -C "$TOP" diff HEAD -- . ':!docs' ':!*.md'
      git -C "$TOP" ls-files -o --exclude-standard -- . ':!docs' ':!*.md'
    } | sha256sum | cut -d' ' -f1
}

OUT=$BUILD/soak-suite
STATE=$OUT/state
fp=$(code_fingerprint) || fp=
first=1 t_before=0
if [ $RESUME = 1 ]; then
    if [ -z "$fp" ]; then
        log "--resume: $TOP is not a git checkout, so the code cannot be compared: starting from run 1"
    elif [ ! -s "$STATE" ]; then
        log "--resume: no recorded runs in $OUT: starting from run 1"
    elif [ "$(sed -n 's/^code //p' "$STATE")" != "$fp" ]; then
        log "--resume: the code changed since the recorded runs ($(sed -n 's/^started //p' "$STATE")): starting again from run 1"
    elif [ "$(sed -n 's/^hog //p' "$STATE")" != $HOG ]; then
        log "--resume: the recorded runs were $([ $HOG = 1 ] && echo 'without' || echo 'with') the CPU hog: starting again from run 1"
    elif grep -q '^run .* rc=[1-9]' "$STATE"; then
        log "--resume: a recorded run failed ($(grep '^run .* rc=[1-9]' "$STATE" | head -n 1)): starting again from run 1"
    else
        done_runs=$(grep -c '^run ' "$STATE")
        first=$((done_runs + 1))
        t_before=$(awk '/^run / { sub(/s$/, "", $4); s += $4 } END { print s + 0 }' "$STATE")
        log "--resume: $done_runs run(s) of this code recorded ($(sed -n 's/^started //p' "$STATE")), all passed: going on with run $first"
        grep '^run ' "$STATE" | sed 's/^/[cxlpod]   recorded: /' >&2
    fi
fi
if [ $DRY = 1 ]; then
    if [ $first -gt "$RUNS" ]; then
        echo "soak-suite (dry run): $RUNS runs already recorded for this code, all passed: nothing to run"
    else
        echo "soak-suite (dry run): would run scripts/test.sh as runs $first..$RUNS$([ $HOG = 1 ] && echo ' beside a CPU hog' || echo ', no hog'), logs in $OUT$([ $first = 1 ] && echo ' (emptied first)')"
    fi
    [ -f "$TOP/scripts/test.sh" ] || die "no $TOP/scripts/test.sh"
    exit 0
fi
if [ $first = 1 ]; then
    rm -rf "$OUT"; mkdir -p "$OUT"
    printf 'code %s\nhog %s\nstarted %s\n' "$fp" $HOG "$(date -u '+%F %T UTC')" >"$STATE"
fi
if [ $first -gt "$RUNS" ]; then
    echo "soak-suite: $RUNS runs already recorded for this code, all passed (logs: $OUT)"
    exit 0
fi

hog_pid=
if [ $HOG = 1 ]; then
    bash -c 'while :; do :; done' &
    hog_pid=$!
    trap 'kill "$hog_pid" 2>/dev/null' EXIT
fi

failed_runs=0 t_all=$(date +%s)
for i in $(seq "$first" "$RUNS"); do
    t0=$(date +%s)
    bash "$TOP/scripts/test.sh" >"$OUT/run-$i.out" 2>&1
    rc=$?
    secs=$(( $(date +%s) - t0 ))
    rm -rf "$OUT/run-$i"; cp -r "$BUILD/test-logs" "$OUT/run-$i" 2>/dev/null
    [ $rc = 0 ] || failed_runs=$((failed_runs + 1))
    # recorded only once the run ended by itself (an interrupted test.sh
    # exits with a signal's status: not a result)
    [ $rc -ge 128 ] || printf 'run %d rc=%d %ss %s\n' "$i" "$rc" "$secs" \
        "$(date -u '+%F %T UTC')" >>"$STATE"
    printf 'run %2d/%d  %5d s  %s  (load %s)%s\n' "$i" "$RUNS" "$secs" \
        "$(tail -n 1 "$OUT/run-$i.out")" "$(cut -d' ' -f1-3 /proc/loadavg)" \
        "$([ $rc = 0 ] || grep '^failed:' "$OUT/run-$i.out" | sed 's/^/  /')"
    [ $rc -ge 128 ] && die "run $i was interrupted (status $rc): not recorded"
done
echo "soak-suite: $RUNS runs$([ $HOG = 1 ] && echo ' with a CPU hog')$([ $first -gt 1 ] && echo " ($((first - 1)) recorded before this sitting)"), \
$((RUNS - failed_runs)) passed, $failed_runs failed, \
$(( $(date +%s) - t_all + t_before )) s of runs in all (logs: $OUT)"
[ $failed_runs = 0 ]
