#!/usr/bin/env bash
# Check the exported series (scripts/export-series.sh) the way a maintainer
# would: QEMU's scripts/checkpatch.pl on every patch, then the series
# applied with `git am` to the pristine upstream tree and built.  Fails when
# checkpatch reports an error or a warning, a patch does not apply, the
# build fails, or the compiler warns about a file the series adds or
# changes.
#
#   scripts/check-series.sh                the whole series, built once
#   scripts/check-series.sh --every-patch  built after every patch (the
#                                          nightly check: each step must
#                                          build on its own)
#   scripts/check-series.sh --from N       built after patch N-1 and after
#                                          each patch from N on (the
#                                          device's steps: --from 12)
#   scripts/check-series.sh --no-build     export and checkpatch only
#   scripts/check-series.sh --stage S      the series up to the end of stage
#                                          S of hw-cxl/series.manifest (a, b,
#                                          c, or all: every patch), built, and
#                                          the cxl-shm qtest of that tree run
#                                          against its own QEMU
#                                          (QTEST_QEMU_BINARY): every case
#                                          passes or skips itself (one that
#                                          needs a later stage); several
#                                          stages: --stage a,b,c (each built
#                                          and tested in turn)
#
# Each stage must build and pass its qtests alone: the per-stage check is
# for whoever exports the series (about 10 min a stage with a warm ccache:
# docs/qemu/README); the suite (tests/series/export-build.sh) builds the
# whole series once, without the qtests.  The series' author comes from
# SERIES_AUTHOR or git config (scripts/export-series.sh refuses a
# placeholder identity).
#
# The tree is build/series/qemu-src (a clone of build/series/upstream, reset
# to it at each run, so files the series does not touch keep their mtimes)
# and the build folder build/series/qemu, configured as scripts/build-qemu.sh
# configures build/qemu (same flags, same device list, ccache in
# $CCACHE_DIR, default build/ccache) so its compiles are cache hits from the
# second run on.  Two things are added to the tree that are not part of the
# series and not QEMU's: the device list (configs/devices/x86_64-softmmu/
# cxlpod.mak, from hw-cxl/cxlpod-devices.mak, without the symbols the tree
# does not declare yet), and empty placeholders for the edk2 firmware
# images that Debian's +ds tarball leaves out (pc-bios/edk2-*.fd.bz2:
# QEMU's meson.build names them; nothing built here uses them).
set -euo pipefail
. "$(dirname "$0")/common.sh"

EVERY=0; BUILDIT=1; FROM=0; STAGES=
while [ $# -gt 0 ]; do
    case $1 in
    --stage) [[ ${2:-} =~ ^[a-z0-9]+(,[a-z0-9]+)*$ ]] || die "--stage S[,S...]: a stage of hw-cxl/series.manifest, or all"
             STAGES=$2; shift ;;
    --every-patch) EVERY=1; FROM=1 ;;
    --from) [[ ${2:-} =~ ^[1-9][0-9]*$ ]] || die "--from N: N is a patch number (1..)"
            EVERY=1; FROM=$2; shift ;;
    --no-build) BUILDIT=0 ;;
    *) die "unknown argument: $1 (--every-patch, --from N, --no-build, --stage S)" ;;
    esac
    shift
done
SERIES=$BUILD/series
OUT=$SERIES/out
SRC=$SERIES/qemu-src
BLD=$SERIES/qemu
export CCACHE_DIR=${CCACHE_DIR:-$BUILD/ccache}
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
# paths under build/series are hashed relative to it, so clones and
# worktrees that share a ccache share these entries too
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$SERIES}
t0=$(date +%s)

exec 8>"$BUILD/.series-check.lock"
# one check at a time (they share the tree and the build folder): wait
# for another, as build-qemu.sh does
if ! flock -n 8; then
    log "another scripts/check-series.sh runs in this clone: waiting for it"
    flock 8
fi

# 1. Export.
SERIES_VERSION= bash "$TOP/scripts/export-series.sh" "$OUT"
mapfile -t PATCHES < <(cd "$OUT" && ls -1 *.patch | grep -v '0000-cover-letter')
[ ${#PATCHES[@]} -gt 0 ] || die "the export wrote no patches"
[ "$FROM" -le ${#PATCHES[@]} ] || die "--from $FROM: the series has ${#PATCHES[@]} patches"
[ -z "$STAGES" ] || [ $EVERY = 0 ] || die "--stage and --every-patch/--from do not go together"
# stage name -> number of its last patch
declare -A STAGE_END=() STAGE_TITLE=()
while read -r name last title; do
    STAGE_END[$name]=$last STAGE_TITLE[$name]=$title
done < <(python3 "$TOP/scripts/series.py" stages "$TOP")
STAGE_END[all]=${#PATCHES[@]} STAGE_TITLE[all]="the whole series"
declare -A STAGE_AT=()      # patch number -> stage checked after it
if [ -n "$STAGES" ]; then
    prev=0
    for s in ${STAGES//,/ }; do
        [ -n "${STAGE_END[$s]:-}" ] || die "--stage $s: hw-cxl/series.manifest has stages ${!STAGE_END[*]}"
        [ "${STAGE_END[$s]}" -gt $prev ] || die "--stage $STAGES: stages in the series' order, each once"
        STAGE_AT[${STAGE_END[$s]}]=$s
        prev=${STAGE_END[$s]}
    done
fi

# 2. checkpatch: clean means no error and no warning.
bad=0
for p in "${PATCHES[@]}"; do
    if ! res=$("$SERIES/upstream/scripts/checkpatch.pl" --no-color "$OUT/$p" 2>&1) ||
       ! grep -q '^total: 0 errors, 0 warnings' <<<"$res"; then
        printf '%s\n' "$res" | grep -E -A3 '^(ERROR|WARNING)' | sed "s|^|$p: |" >&2
        log "checkpatch: $p: $(grep '^total:' <<<"$res" || echo 'no verdict')"
        bad=1
    fi
done
[ $bad = 0 ] || die "checkpatch.pl is not clean on the series (above)"
log "checkpatch.pl: ${#PATCHES[@]} patches clean"
[ $BUILDIT = 1 ] || exit 0

# 3. The pristine tree.
if ! git -C "$SRC" rev-parse -q --verify upstream >/dev/null 2>&1 ||
   [ "$(git -C "$SRC" rev-parse upstream)" != "$(git -C "$SERIES/upstream" rev-parse upstream)" ]; then
    rm -rf "$SRC" "$BLD"
    git clone -q --shared "$SERIES/upstream" "$SRC"
fi
EXTRA=(/configs/devices/x86_64-softmmu/cxlpod.mak '/pc-bios/edk2-*.fd.bz2')
for e in "${EXTRA[@]}"; do
    grep -qxF "$e" "$SRC/.git/info/exclude" || echo "$e" >>"$SRC/.git/info/exclude"
done
(cd "$SRC" && { git am --abort >/dev/null 2>&1 || true; } &&
    git checkout -q -f -B check upstream &&
    git clean -fdq) || die "could not reset $SRC to the upstream tree"
# the upstream commits the series is based on (the manifest's base lines)
while read -r p; do
    (cd "$SRC" && git -c user.name=cxlpod -c user.email=cxlpod@localhost am -q "$TOP/patches/$p") \
        >"$LOGDIR/series-am.log" 2>&1 ||
        { cat "$LOGDIR/series-am.log" >&2; die "the base patch patches/$p does not apply to upstream QEMU"; }
done < <(python3 "$TOP/scripts/series.py" base "$TOP")
for f in $(sed -n "s/^ *'\(edk2-[^']*\.fd\)',\$/\1/p" "$SRC/pc-bios/meson.build"); do
    [ -e "$SRC/pc-bios/$f.bz2" ] || bzip2 -c </dev/null >"$SRC/pc-bios/$f.bz2"
done

devices() {  # the device list, with only the symbols this tree declares
    local declared tmp
    declared=$(find "$SRC" -name 'Kconfig*' -not -path '*/roms/*' -exec sed -n 's/^config \([A-Z0-9_]*\).*/\1/p' {} + | sort -u)
    tmp=$(mktemp)
    while IFS= read -r line; do
        if [[ $line =~ ^CONFIG_([A-Z0-9_]+)= ]] && ! grep -qx "${BASH_REMATCH[1]}" <<<"$declared"; then
            continue
        fi
        printf '%s\n' "$line"
    done <"$TOP/hw-cxl/cxlpod-devices.mak" >"$tmp"
    if cmp -s "$tmp" "$SRC/configs/devices/x86_64-softmmu/cxlpod.mak"; then
        rm -f "$tmp"
    else
        mv "$tmp" "$SRC/configs/devices/x86_64-softmmu/cxlpod.mak"
    fi
}

configure() {
    local conf csum
    mapfile -t conf < <(qemu_configure_flags)
    csum=$( (printf '%s\n' "${conf[@]}" "$SRC" "$QEMU_CONF_REV") | sha256sum | cut -d' ' -f1)
    if [ "$(cat "$BLD/.cxlpod-config" 2>/dev/null)" != "$csum" ]; then
        log "configuring the upstream tree in $BLD"
        rm -rf "$BLD"; mkdir -p "$BLD"
        (cd "$BLD" && "$SRC/configure" "${conf[@]}") >"$LOGDIR/series-configure.log" 2>&1 \
            || { tail -n 20 "$LOGDIR/series-configure.log" >&2; die "configure failed on the upstream tree; see $LOGDIR/series-configure.log"; }
        qemu_configured "$BLD"
        echo "$csum" >"$BLD/.cxlpod-config"
    fi
}

# A compiler warning about a file the series adds or changes fails the
# check (the project builds with --disable-werror, as build-qemu.sh does;
# ccache replays a cached compile's warnings).
build() {  # build WHAT: the tree as it is now
    local what=$1 targets t1 touched warned
    devices
    targets=(qemu-system-x86_64)
    while read -r t; do
        [ -e "$SRC/$t.c" ] && targets+=("$t")
    done < <(sed -n 's/^#\s*qtest:\s*//p' "$TOP/hw-cxl/cxlpod-devices.mak")
    t1=$(date +%s)
    if ! nice -n 10 ninja -C "$BLD" "${targets[@]}" >"$LOGDIR/series-build.log" 2>&1; then
        grep -E 'error|FAILED' "$LOGDIR/series-build.log" | head -n 30 >&2
        die "the build fails $what; see $LOGDIR/series-build.log"
    fi
    touched=$(git -C "$SRC" diff --name-only upstream | grep -E '\.(c|h|inc)$' || true)
    warned=$(grep -E '^(\.\./)*[^ :]+:[0-9]+:[0-9]+: warning:' "$LOGDIR/series-build.log" |
             sed 's|^\(\.\./\)*||' | grep -F -f <(printf '%s\n' ${touched:-/nothing/} | sed 's/$/:/') || true)
    [ -z "$warned" ] || { printf '%s\n' "$warned" >&2; die "the compiler warns about the series $what"; }
    log "built $what: $(grep -c '^\[' "$LOGDIR/series-build.log") steps in $(( $(date +%s) - t1 )) s"
}

# qtest STAGE: the cxl-shm qtest of the tree as built, against its QEMU
QTESTS_RUN=()
qtest() {
    local stage=$1 bin=$BLD/tests/qtest/cxl-shm-test log=$LOGDIR/series-qtest-$1.log t1 rc pass skip fail
    [ -x "$bin" ] || die "stage $stage: the tree has no tests/qtest/cxl-shm-test"
    t1=$(date +%s)
    rc=0
    (cd "$BLD" && CXLPOD_TOP=$TOP QTEST_QEMU_BINARY=$BLD/qemu-system-x86_64 \
        timeout "${CXLPOD_SERIES_QTEST_TIMEOUT:-1800}" "$bin" --tap -k) >"$log" 2>&1 || rc=$?
    pass=$(grep -cE '^ok ' "$log" | tr -d ' ' || true)
    skip=$(grep -cE '^ok .*# SKIP' "$log" || true)
    fail=$(grep -cE '^not ok ' "$log" || true)
    pass=$((pass - skip))
    QTESTS_RUN+=("stage $stage: $pass passed, $skip skipped, $fail failed in $(( $(date +%s) - t1 )) s")
    if [ "$rc" != 0 ] || [ "$fail" != 0 ]; then
        grep -E '^not ok |ERROR|assertion' "$log" | head -n 20 >&2
        die "stage $stage (${STAGE_TITLE[$stage]}): the cxl-shm qtest fails (exit $rc, $fail failed); see $log"
    fi
    log "stage $stage (${STAGE_TITLE[$stage]}): qtest $pass passed, $skip skipped (cases of a later stage, or of what the machine lacks), $(( $(date +%s) - t1 )) s"
}

devices
configure
i=0
for p in "${PATCHES[@]}"; do
    i=$((i + 1))
    if ! (cd "$SRC" && git -c user.name=cxlpod -c user.email=cxlpod@localhost am -q "$OUT/$p") \
            >"$LOGDIR/series-am.log" 2>&1; then
        cat "$LOGDIR/series-am.log" >&2
        die "$p does not apply to upstream QEMU $(cat "$SRC/VERSION") with the patches before it"
    fi
    if [ -n "${STAGE_AT[$i]:-}" ]; then
        build "at the end of stage ${STAGE_AT[$i]} ($p, $i/${#PATCHES[@]})"
        qtest "${STAGE_AT[$i]}"
    elif [ $EVERY = 1 ] && [ $((i + 1)) = "$FROM" ]; then
        build "after $p ($i/${#PATCHES[@]}), before the patches to check one by one"
    elif [ $EVERY = 1 ] && [ $i -ge "$FROM" ]; then
        build "after $p ($i/${#PATCHES[@]})"
    fi
done
[ $EVERY = 1 ] || [ -n "$STAGES" ] || build "with all ${#PATCHES[@]} patches"
for r in "${QTESTS_RUN[@]}"; do log "qtest, $r"; done
log "series checked in $(( $(date +%s) - t0 )) s: ${#PATCHES[@]} patches apply to QEMU $(cat "$SRC/VERSION"), build$([ $EVERY = 1 ] && echo " after each one from patch $FROM" || echo ''), checkpatch clean"
