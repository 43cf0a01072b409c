#!/usr/bin/env bash
# Everything the demo and the tests need, in order: Debian packages, the
# patched QEMU, the host and guest tools, the guest image.  Each step is
# incremental, so a second run only checks.
set -euo pipefail
. "$(dirname "$0")/common.sh"

bash "$TOP/scripts/deps.sh"
bash "$TOP/scripts/build-qemu.sh"
bash "$TOP/scripts/build-tools.sh"
bash "$TOP/scripts/build-guest.sh"
