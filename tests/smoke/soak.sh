#!/usr/bin/env bash
# The soaks of README.md and docs/failure-model.md, without their hours:
# soak-suite.sh --dry-run (which runs it would do, with and without
# --resume's recorded runs; it changes nothing), soak-kill.sh and
# soak-stop.sh --dry-run (their arguments and their pod's launcher
# options), and bad arguments refused.
# covers: scripts/soak-suite.sh scripts/soak-kill.sh scripts/soak-stop.sh
. "$(dirname "$0")/lib.sh"
S=$TOP/scripts

# soak-suite keeps its state in $CXLPOD_BUILD/soak-suite: a scratch one here
B2=$WORK/build
mkdir -p "$B2"
expect "soak-suite.sh --dry-run" 0 'would run scripts/test.sh as runs 1\.\.10 beside a CPU hog' \
    env CXLPOD_BUILD="$B2" bash "$S/soak-suite.sh" --dry-run
expect "soak-suite.sh --dry-run --no-hog 3" 0 'runs 1\.\.3, no hog' env CXLPOD_BUILD="$B2" bash "$S/soak-suite.sh" --dry-run --no-hog 3
[ ! -e "$B2/soak-suite" ] && ok "soak-suite.sh --dry-run changes nothing" || bad "soak-suite.sh --dry-run wrote $B2/soak-suite"
# --resume: two recorded runs of other code, then of this code
mkdir -p "$B2/soak-suite"
printf 'code 0000\nhog 1\nstarted then\nrun 1 rc=0 900s then\n' >"$B2/soak-suite/state"
expect "soak-suite.sh --resume: recorded runs of other code start again" 0 'the code changed .* starting again from run 1' \
    env CXLPOD_BUILD="$B2" bash "$S/soak-suite.sh" --dry-run --resume 4
fp=$(cd "$TOP" && { git ls-files -s -- . ':!docs' ':!*.md'; git diff HEAD -- . ':!docs' ':!*.md';
      git ls-files -o --exclude-standard -- . ':!docs' ':!*.md'; } | sha256sum | cut -d' ' -f1)
printf 'code %s\nhog 1\nstarted then\nrun 1 rc=0 900s then\nrun 2 rc=0 950s then\n' "$fp" >"$B2/soak-suite/state"
expect "soak-suite.sh --resume: two recorded runs of this code, goes on with run 3" 0 'runs 3\.\.4 beside a CPU hog' \
    env CXLPOD_BUILD="$B2" bash "$S/soak-suite.sh" --dry-run --resume 4
expect "soak-suite.sh --resume 2: nothing left to run" 0 'already recorded .* nothing to run' \
    env CXLPOD_BUILD="$B2" bash "$S/soak-suite.sh" --dry-run --resume 2
expect "soak-suite.sh 0 is refused" 1 'usage' env CXLPOD_BUILD="$B2" bash "$S/soak-suite.sh" --dry-run 0
expect "soak-suite.sh --frob is refused" 1 'unknown option --frob' env CXLPOD_BUILD="$B2" bash "$S/soak-suite.sh" --frob

expect "soak-kill.sh --dry-run 5 42" 0 'would run .* with 5 kills, seed 42' bash "$S/soak-kill.sh" --dry-run 5 42
expect "soak-kill.sh --dry-run (200 kills)" 0 "the pod's options are fine \(200 kills" bash "$S/soak-kill.sh" --dry-run
expect "soak-kill.sh x is refused" 2 'usage' bash "$S/soak-kill.sh" --dry-run x
expect "soak-kill.sh 5 seed is refused" 2 'SEED is a number' bash "$S/soak-kill.sh" --dry-run 5 seed

expect "soak-stop.sh --dry-run 2 3 7" 0 '2 stops of 3 s \(seed 7\).*nothing booted' bash "$S/soak-stop.sh" --dry-run 2 3 7
expect "soak-stop.sh --dry-run (defaults)" 0 '20 stops of 20 s' bash "$S/soak-stop.sh" --dry-run
expect "soak-stop.sh x is refused" 2 'usage' bash "$S/soak-stop.sh" --dry-run x
finish
