#!/usr/bin/env bash
# Soak of host failure at random points (issue 9), outside the suite: the
# kill test tests/integration/16-kill-random.sh with many more kills.
#
#   bash scripts/soak-kill.sh [--dry-run] [KILLS [SEED]]
#                                   default 200 kills, a random seed
#
# --dry-run boots nothing: it checks the arguments, the tools and the pod's
# launcher options (cxlpod-launch --dry-run) and says what it would run.
#
# One pod run: host 0's QEMU is SIGKILLed KILLS times at random moments
# and restarted after each kill; the same checks as the suite's test (every
# published record intact after every kill, every kill seen as a failure
# in the host table, next generation in the rejoined guest, clean exit as
# left), and the same figures (how long a failure took to show in the
# host table: maximum and median).  A failing run prints its seed; SEED replays it.  Expect about
# 8-12 s per kill on an idle 2-core machine (one guest boot each).
# Uses the built launcher and guest image (scripts/build-tools.sh,
# scripts/build-guest.sh) and $CXLPOD_QEMU (default build/qemu/...).
set -euo pipefail
TOP=$(cd "$(dirname "$0")/.." && pwd)
DRY=0
[ "${1:-}" != --dry-run ] || { DRY=1; shift; }
KILLS=${1:-200}
case $KILLS in ''|*[!0-9]*) echo "usage: $0 [--dry-run] [KILLS [SEED]]" >&2; exit 2 ;; esac
[ "$KILLS" -ge 1 ] || { echo "usage: $0 [--dry-run] [KILLS [SEED]]" >&2; exit 2; }
case ${2:-0} in *[!0-9]*) echo "usage: $0 [--dry-run] [KILLS [SEED]]: SEED is a number" >&2; exit 2 ;; esac
[ $# -le 2 ] || { echo "usage: $0 [--dry-run] [KILLS [SEED]]" >&2; exit 2; }
export CXLPOD_KILLS=$KILLS
[ $# -lt 2 ] || export CXLPOD_SEED=$2
if [ $DRY = 1 ]; then
    export CXLPOD_DRY_RUN=1     # tests/integration/16-kill-random.sh: --dry-run
    bash "$TOP/tests/integration/16-kill-random.sh"
    echo "soak-kill (dry run): would run tests/integration/16-kill-random.sh with $KILLS kills, seed ${2:-random}"
    exit 0
fi
t0=$(date +%s)
rc=0
bash "$TOP/tests/integration/16-kill-random.sh" || rc=$?
echo "soak-kill: $KILLS kills, $(( $(date +%s) - t0 )) s, $([ $rc = 0 ] && echo passed || echo FAILED)"
exit $rc
