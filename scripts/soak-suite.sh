#!/usr/bin/env bash
# The whole suite, several times in a row, with a CPU hog beside it (issue
# 9: CI does not always run alone).  Outside the suite: it runs
# scripts/test.sh RUNS times (the first run builds whatever is missing),
# keeps each run's logs in build/soak-suite/run-N/, and prints one line per
# run with its time and its "N passed, N failed" line, then a summary.
# It goes on after a failing run (the summary counts them) and exits
# non-zero if any run failed.
#
#   bash scripts/soak-suite.sh [--no-hog] [RUNS]     default 10 runs
#
# The hog is one process that keeps one CPU busy for the whole soak (a
# shell loop: no extra package), started before the first run and killed
# at the end.
set -uo pipefail
. "$(dirname "$0")/common.sh"

HOG=1
[ "${1:-}" = --no-hog ] && { HOG=0; shift; }
RUNS=${1:-10}
case $RUNS in ''|*[!0-9]*|0) die "usage: $0 [--no-hog] [RUNS]" ;; esac

OUT=$BUILD/soak-suite
rm -rf "$OUT"; mkdir -p "$OUT"
hog_pid=
if [ $HOG = 1 ]; then
    bash -c 'while :; do :; done' &
    hog_pid=$!
    trap 'kill "$hog_pid" 2>/dev/null' EXIT
fi

failed_runs=0 t_all=$(date +%s)
for i in $(seq 1 "$RUNS"); do
    t0=$(date +%s)
    bash "$TOP/scripts/test.sh" >"$OUT/run-$i.out" 2>&1
    rc=$?
    secs=$(( $(date +%s) - t0 ))
    cp -r "$BUILD/test-logs" "$OUT/run-$i" 2>/dev/null
    [ $rc = 0 ] || failed_runs=$((failed_runs + 1))
    printf 'run %2d/%d  %5d s  %s  (load %s)%s\n' "$i" "$RUNS" "$secs" \
        "$(tail -n 1 "$OUT/run-$i.out")" "$(cut -d' ' -f1-3 /proc/loadavg)" \
        "$([ $rc = 0 ] || grep '^failed:' "$OUT/run-$i.out" | sed 's/^/  /')"
done
echo "soak-suite: $RUNS runs$([ $HOG = 1 ] && echo ' with a CPU hog'), \
$((RUNS - failed_runs)) passed, $failed_runs failed, \
$(( $(date +%s) - t_all )) s in all (logs: $OUT)"
[ $failed_runs = 0 ]
