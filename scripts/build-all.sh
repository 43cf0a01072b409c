#!/usr/bin/env bash
# Everything the demo and the tests need, in order: Debian packages, the
# patched QEMU, the host and guest tools, the guest image.  Each step is
# incremental, so a second run only checks.
#
#   build-all.sh            run every step
#   build-all.sh --steps    list the steps (scripts/<step>.sh), one a line
set -euo pipefail
. "$(dirname "$0")/common.sh"

STEPS=(deps build-qemu build-tools build-guest)
if [ "${1:-}" = --steps ]; then
    printf '%s\n' "${STEPS[@]}"
    exit 0
fi
for s in "${STEPS[@]}"; do
    bash "$TOP/scripts/$s.sh"
done
