#!/usr/bin/env bash
# hw-cxl/series.manifest names every file of hw-cxl/ and every patch of
# patches/, and the export refuses a project where one is not named: a file
# split out of another, or a new patch, must be given a place in the series
# before it can be exported.  Runs on a copy of the project's files.
# covers: scripts/series.py
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

# a stub that no later step replaces would stay in the upstream tree
copy; printf '/* stub */\nbool cxl_shm_never_real(void)\n{\n    return false;\n}\n' >"$T/p/hw-cxl/cxl-shm-never-stub.c"
sed -i 's|^stub hw-cxl/cxl-shm-timed-stub.c .*|&\nstub hw-cxl/cxl-shm-never-stub.c hw/mem/cxl-shm-never-stub.c|' "$T/p/hw-cxl/series.manifest"
refused "a stub never replaced" "stub hw-cxl/cxl-shm-never-stub.c is never replaced"

# each stage ends where the manifest says, in order
python3 "$TOP/scripts/series.py" stages "$TOP" >"$T/stages"
echo "the stages:"; cat "$T/stages"
[ "$(cut -d' ' -f1 "$T/stages" | tr '\n' ' ')" = "a b c " ] || fail "the stages are not a, b, c"
[ "$(cut -d' ' -f2 "$T/stages" | sort -n | tr '\n' ' ')" = "$(cut -d' ' -f2 "$T/stages" | tr '\n' ' ')" ] ||
    fail "the stages do not end in order"
# the upstream commit the series is based on is not exported
python3 "$TOP/scripts/series.py" base "$TOP" | grep -q 'memory-reintroduce-BQL-free-fine-grained-PIO-MMIO' ||
    fail "patches/*-memory-reintroduce-BQL-free-* (upstream 73c520b0) is not the series' base"
python3 "$TOP/scripts/series.py" plan "$TOP" | grep -q 'memory-reintroduce-BQL-free' &&
    fail "upstream's 73c520b0 is exported"

# the series' author: SERIES_AUTHOR, else the exporter's git identity;
# a placeholder is refused, saying how to set one
mkdir -p "$T/p/scripts"; cp "$TOP/scripts/export-series.sh" "$TOP/scripts/series.py" "$TOP/scripts/common.sh" "$T/p/scripts/"
author() {  # author GIT_NAME GIT_EMAIL [SERIES_AUTHOR]: prints the export's answer
    rm -rf "$T/p/.git"; git init -q "$T/p"
    [ -z "$1" ] || git -C "$T/p" config user.name "$1"
    [ -z "$2" ] || git -C "$T/p" config user.email "$2"
    HOME=$T/home XDG_CONFIG_HOME=$T/home GIT_CONFIG_NOSYSTEM=1 SERIES_AUTHOR=${3:-} \
        CXLPOD_BUILD=$T/build bash "$T/p/scripts/export-series.sh" --print-author 2>&1
}
mkdir -p "$T/home"
out=$(author "Ada Lovelace" "ada@lovelace.dev") || fail "a real git identity is refused: $out"
[ "$out" = "Ada Lovelace <ada@lovelace.dev>" ] || fail "the git identity is not the default author: $out"
echo "ok: the default author is git's identity: $out"
out=$(author "Ada Lovelace" "ada@lovelace.dev" "Grace Hopper <grace@hopper.dev>") || fail "SERIES_AUTHOR refused: $out"
[ "$out" = "Grace Hopper <grace@hopper.dev>" ] || fail "SERIES_AUTHOR is not the author: $out"
echo "ok: SERIES_AUTHOR wins: $out"
for bad in "cxlpod|cxlpod@localhost" "cxlpod authors|dev@cxlpod.org" \
           "Seed 754f7ffe maintainers|maintainers@users.noreply.a-seed-754f7ffe.example" \
           "Jane Doe|jane@example.com" "Jane Doe|jane@example.org" "Jane Doe|jane@host.example" \
           "Jane Doe|jane@localhost" "Jane Doe|12345+jane@users.noreply.github.com" "|" "Jane Doe|"; do
    if out=$(author "${bad%%|*}" "${bad#*|}"); then
        fail "the placeholder git identity \"$bad\" is accepted: $out"
    fi
    grep -q 'set SERIES_AUTHOR="Your Name <you@your.domain>"' <<<"$out" ||
        fail "the refusal of \"$bad\" does not say how to set an identity: $out"
    if out=$(author "Ada Lovelace" "ada@lovelace.dev" "${bad%%|*} <${bad#*|}>"); then
        fail "the placeholder SERIES_AUTHOR \"$bad\" is accepted: $out"
    fi
done
echo "ok: placeholder identities are refused: $out"

# and the export itself stops on it, before touching anything
copy; echo '/* split out */' >"$T/p/hw-cxl/cxl-shm-new.c"
mkdir -p "$T/p/scripts"; cp "$TOP/scripts/export-series.sh" "$TOP/scripts/series.py" "$TOP/scripts/common.sh" "$T/p/scripts/"
if SERIES_AUTHOR="Ada Lovelace <ada@lovelace.dev>" CXLPOD_BUILD=$T/build bash "$T/p/scripts/export-series.sh" "$T/out-series" >"$T/out" 2>&1; then
    fail "export-series.sh exported a project with an unassigned file"
fi
grep -qF "hw-cxl/cxl-shm-new.c is in no patch" "$T/out" || { cat "$T/out"; fail "export-series.sh does not name the file"; }
[ ! -e "$T/out-series" ] || fail "export-series.sh wrote patches anyway"
echo "ok: export-series.sh refuses it: $(grep -F 'cxl-shm-new.c' "$T/out" | head -n1)"
