#!/usr/bin/env bash
# The device's fuzz target (tests/fuzz/fuzz-doorbell.c): libFuzzer with
# AddressSanitizer and UndefinedBehaviorSanitizer, clang from Debian
# (scripts/deps.sh installs clang and libclang-rt-14-dev).
#
#   fuzz.sh [--seconds N(30)] [--jobs J(1)] [--max-len B(512)]
#
# Builds build/fuzz/fuzz-doorbell from the device's doorbell decode and line
# engine, replays every input kept in tests/fuzz/corpus/doorbell (the seeds
# and the regression cases of earlier findings: each must pass), then fuzzes
# for N seconds (the suite: 30; a soak: e.g. --seconds 14400 --jobs 2),
# starting from those inputs and the corpus grown by earlier runs
# (build/fuzz/corpus).  A finding stops it with exit 1 and leaves the input
# in build/fuzz/findings/: reproduce with `build/fuzz/fuzz-doorbell FILE`,
# fix, and copy the file into tests/fuzz/corpus/doorbell as a regression case.
set -euo pipefail
. "$(dirname "$0")/common.sh"

SECONDS_=30 JOBS=1 MAXLEN=512
while [ $# -gt 0 ]; do
    case $1 in
        --seconds) SECONDS_=${2:?}; shift 2 ;;
        --jobs) JOBS=${2:?}; shift 2 ;;
        --max-len) MAXLEN=${2:?}; shift 2 ;;
        -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
        *) die "unknown argument: $1 (see --help)" ;;
    esac
done
[[ $SECONDS_ =~ ^[1-9][0-9]*$ && $JOBS =~ ^[1-9][0-9]*$ && $MAXLEN =~ ^[1-9][0-9]*$ ]] \
    || die "--seconds, --jobs and --max-len want positive numbers"
command -v clang >/dev/null || die "clang not found: run scripts/deps.sh"

F=$BUILD/fuzz
SEEDS=$TOP/tests/fuzz/corpus/doorbell
mkdir -p "$F/corpus" "$F/findings"
BIN=$F/fuzz-doorbell
SRC=("$TOP/tests/fuzz/fuzz-doorbell.c" "$TOP/hw-cxl/cxl-shm-doorbell.c" "$TOP/hw-cxl/cxl-shm-line.c")
if [ ! -x "$BIN" ] || [ -n "$(find "${SRC[@]}" "$TOP/hw-cxl" "$TOP/tests/unit/shim" -newer "$BIN" -name '*.[ch]' | head -n1)" ]; then
    log "building $BIN (clang, libFuzzer + ASan + UBSan)"
    clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
        -DCXLSHM_DB_DECODE_ONLY \
        $(pkg-config --cflags glib-2.0) \
        -I"$TOP/tests/unit/shim" -I"$TOP/hw-cxl" "${SRC[@]}" -o "$BIN" \
        >"$LOGDIR/fuzz-build.log" 2>&1 \
        || { tail -n 20 "$LOGDIR/fuzz-build.log" >&2; die "fuzz target build failed; see $LOGDIR/fuzz-build.log (is libclang-rt-14-dev installed? scripts/deps.sh)"; }
fi

# the kept inputs first: every one must pass
n=0
for f in "$SEEDS"/*; do
    [ -f "$f" ] || continue
    "$BIN" "$f" >"$F/replay.log" 2>&1 || { cat "$F/replay.log" >&2; die "regression input $f fails again"; }
    n=$((n + 1))
done
log "replayed $n kept inputs: all pass"

FORK=""
[ "$JOBS" = 1 ] || FORK="-fork=$JOBS -ignore_crashes=0"
log "fuzzing for $SECONDS_ s ($JOBS job(s))"
rc=0
# An input runs in milliseconds on an idle core; 10 s was once exceeded by
# an input that replays in 0.15 s, on a machine at load 10 with the fuzzer
# niced (2026-12-07): a false finding.  A real hang (a wait that never
# ends, which the device must not have) still stops it, at 60 s.
"$BIN" -max_total_time="$SECONDS_" -timeout=60 -max_len="$MAXLEN" -print_final_stats=1 \
    -artifact_prefix="$F/findings/" $FORK \
    "$F/corpus" "$SEEDS" >"$F/fuzz.log" 2>&1 || rc=$?
if [ $rc != 0 ]; then
    grep -E "ERROR|fuzz-doorbell:|SUMMARY|Test unit written|artifact" "$F/fuzz.log" | head -n 20 >&2
    die "the fuzzer found a failing input (exit $rc); see $F/fuzz.log and $F/findings/"
fi
execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$F/fuzz.log" | tail -n1)
cov=$(grep -oE 'cov: [0-9]+' "$F/fuzz.log" | tail -n1)
log "fuzz-doorbell: ${execs:-?} inputs in $SECONDS_ s, ${cov:-cov: ?} edges, no finding (corpus $(ls "$F/corpus" | wc -l) inputs)"
