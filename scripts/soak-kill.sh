#!/usr/bin/env bash
# Soak of host failure at random points (issue 9), outside the suite: the
# kill test tests/integration/16-kill-random.sh with many more kills.
#
#   bash scripts/soak-kill.sh [KILLS [SEED]]     default 200 kills, a random seed
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
KILLS=${1:-200}
case $KILLS in ''|*[!0-9]*) echo "usage: $0 [KILLS [SEED]]" >&2; exit 2 ;; esac
[ "$KILLS" -ge 1 ] || { echo "usage: $0 [KILLS [SEED]]" >&2; exit 2; }
export CXLPOD_KILLS=$KILLS
[ $# -lt 2 ] || export CXLPOD_SEED=$2
t0=$(date +%s)
rc=0
bash "$TOP/tests/integration/16-kill-random.sh" || rc=$?
echo "soak-kill: $KILLS kills, $(( $(date +%s) - t0 )) s, $([ $rc = 0 ] && echo passed || echo FAILED)"
exit $rc
