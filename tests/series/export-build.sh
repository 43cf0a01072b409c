#!/usr/bin/env bash
# The exported series (scripts/export-series.sh) applied with git am to the
# pristine upstream QEMU tree, checkpatch.pl clean on every patch, and the
# whole series built once (qemu-system-x86_64 and the device's qtest) with
# the project's configure flags: scripts/check-series.sh.  Every patch
# built on its own is the nightly check, scripts/check-series.sh
# --every-patch, and each stage built with its qtests run is
# scripts/check-series.sh --stage a,b,c (not run here either: about
# 10 min a stage with a warm ccache, docs/qemu/README).
#
# The export refuses a placeholder identity, and the suite's clone has
# one (its commits' author): the series is exported here as a realistic
# but made-up sender.
# covers: scripts/check-series.sh scripts/export-series.sh
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
export SERIES_AUTHOR="Series Check <series-check@lists.cxlpod.org>"
exec bash "$TOP/scripts/check-series.sh"
