#!/usr/bin/env bash
# The exported series (scripts/export-series.sh) applied with git am to the
# pristine upstream QEMU tree, checkpatch.pl clean on every patch, and the
# whole series built once (qemu-system-x86_64 and the device's qtest) with
# the project's configure flags: scripts/check-series.sh.  Every patch
# built on its own is the nightly check, scripts/check-series.sh
# --every-patch (not run here: too long for the suite).
# covers: scripts/check-series.sh scripts/export-series.sh
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
exec bash "$TOP/scripts/check-series.sh"
