#!/usr/bin/env bash
# hw-cxl/series.manifest names every file of hw-cxl/ and every patch of
# patches/, and the export refuses a project where one is not named: a file
# split out of another, or a new patch, must be given a place in the series
# before it can be exported.  Runs on a copy of the project's files.
set -euo pipefail
TOP=$(cd "$(dirname "$0")/../.." && pwd)
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

python3 "$TOP/scripts/series.py" check "$TOP" >"$T/plan" || fail "the project's own manifest is refused"
echo "the manifest's steps:"; cat "$T/plan"

copy() {
    rm -rf "$T/p"; mkdir -p "$T/p/tests/qtest" "$T/p/docs"
    cp -a "$TOP/hw-cxl" "$TOP/patches" "$T/p/"
    cp -a "$TOP/docs/qemu" "$T/p/docs/"
    cp "$TOP/tests/qtest/cxl-shm-test.c" "$T/p/tests/qtest/"
}
refused() {  # refused WHAT TEXT: check fails and names TEXT
    if python3 "$TOP/scripts/series.py" check "$T/p" >"$T/out" 2>&1; then
        fail "$1: accepted"
    fi
    grep -qF -- "$2" "$T/out" || { cat "$T/out"; fail "$1: the error does not name $2"; }
    echo "ok: $1: $(grep -F -- "$2" "$T/out" | head -n1)"
}

copy; python3 "$TOP/scripts/series.py" check "$T/p" >/dev/null || fail "a plain copy is refused"

copy; echo '/* split out */' >"$T/p/hw-cxl/cxl-shm-new.c"
refused "a new hw-cxl source" "hw-cxl/cxl-shm-new.c is in no patch of the series"

copy; echo '#pragma once' >"$T/p/hw-cxl/cxl-shm-new.h"
refused "a new hw-cxl header" "hw-cxl/cxl-shm-new.h is in no patch"

copy; cp "$T/p/patches/$(ls "$T/p/patches" | sed -n 2p)" "$T/p/patches/0099-accel-tcg-something-new.patch"
refused "a new patch" "patches/0099-accel-tcg-something-new.patch is in no step"

copy; rm "$T/p/hw-cxl/cxl-shm-doorbell.c"
refused "a removed file" "names hw-cxl/cxl-shm-doorbell.c, which does not exist"

copy; sed -i "s/'cxl-shm-qmp.c',/'cxl-shm-qmp.c',\n  'cxl-shm-extra.c',/" "$T/p/hw-cxl/meson.build"
echo '/* new */' >"$T/p/hw-cxl/cxl-shm-extra.c"
echo 'skip hw-cxl/cxl-shm-extra.c wrongly' >>"$T/p/hw-cxl/series.manifest"
refused "a built source skipped" "builds hw-cxl/cxl-shm-extra.c, which no step"

# and the export itself stops on it, before touching anything
copy; echo '/* split out */' >"$T/p/hw-cxl/cxl-shm-new.c"
mkdir -p "$T/p/scripts"; cp "$TOP/scripts/export-series.sh" "$TOP/scripts/series.py" "$TOP/scripts/common.sh" "$T/p/scripts/"
if CXLPOD_BUILD=$T/build bash "$T/p/scripts/export-series.sh" "$T/out-series" >"$T/out" 2>&1; then
    fail "export-series.sh exported a project with an unassigned file"
fi
grep -qF "hw-cxl/cxl-shm-new.c is in no patch" "$T/out" || { cat "$T/out"; fail "export-series.sh does not name the file"; }
[ ! -e "$T/out-series" ] || fail "export-series.sh wrote patches anyway"
echo "ok: export-series.sh refuses it: $(grep -F 'cxl-shm-new.c' "$T/out" | head -n1)"
