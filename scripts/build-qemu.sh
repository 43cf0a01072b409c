#!/usr/bin/env bash
# Fetch Debian's QEMU 10.0.x source package, add hw-cxl/, apply patches/ in
# order and build a minimal qemu-system-x86_64 (plus cxlpod's qtests) into
# build/qemu.  Re-running with nothing changed does nothing; a change in
# hw-cxl/ or patches/ rebuilds only what it touches.
#
#   CXLPOD_QEMU_VERSION=1:10.0.13+ds-0+deb13u1  pin a source version
#   --sanitize   build with AddressSanitizer and UndefinedBehaviorSanitizer
#                into build/qemu-san instead (same source tree, own build
#                folder; scripts/test-sanitize.sh runs the device tests on it)
set -euo pipefail
. "$(dirname "$0")/common.sh"

SANITIZE=0
case ${1:-} in
    --sanitize) SANITIZE=1 ;;
    "") ;;
    *) die "unknown argument: $1 (--sanitize or nothing)" ;;
esac
SRC=$BUILD/qemu-src        # Debian source + patches (a git work tree)
OUT=$BUILD/qemu            # meson/ninja build folder
[ $SANITIZE = 0 ] || OUT=$BUILD/qemu-san
DL=$BUILD/qemu-dl          # downloaded source package
BASE_STAMP=$BUILD/qemu-src.base        # Debian version the tree was made from
PATCH_STAMP=$BUILD/qemu-src.patches    # hash of the applied patch set
export CCACHE_DIR=${CCACHE_DIR:-$BUILD/ccache}
# Paths under build/ are hashed relative to it and the build folder's path
# is left out (as scripts/check-series.sh does under build/series): the
# exported series' build then finds this build's compiles in the cache,
# and so do other clones and worktrees that share the cache.
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$BUILD}
# Debian's tree without Debian's GNU/Hurd patch: it adds lines to
# include/qemu/osdep.h, which every file includes, so with it no compile
# of this tree could be shared with the upstream tree the series is built
# on; on Linux it changes nothing (it only adds #if defined(__GNU__)).
HURD=gnu-hurd.patch

# One build at a time (the demo, the tests and the benchmark all call this).
exec 9>"$BUILD/.qemu-build.lock"
flock 9

command -v meson >/dev/null && command -v ninja >/dev/null && command -v dpkg-source >/dev/null \
    || die "build tools missing: run scripts/deps.sh (as root) first"

# 1. Source: fetch and unpack once, atomically (a half-unpacked tree is never
#    renamed into place, so the next run cannot trust it).
if [ -f "$BASE_STAMP" ] && [ -d "$SRC/.git" ] &&
   [[ $(git -C "$SRC" show cxlpod-base:include/qemu/osdep.h 2>/dev/null) == *__GNU__* ]]; then
    log "the QEMU tree has Debian's $HURD: fetching it again without"
    rm -f "$BASE_STAMP"
fi
if [ ! -f "$BASE_STAMP" ] || [ ! -d "$SRC/.git" ]; then
    ver=${CXLPOD_QEMU_VERSION:-}
    if [ -z "$ver" ]; then
        ver=$(apt-cache showsrc qemu 2>/dev/null | sed -n 's/^Version: //p' |
              grep -E '^(1:)?10\.0\.' | sort -V | tail -n1 || true)
        [ -n "$ver" ] || die "no qemu 10.0.x source package visible to apt (is the trixie deb-src entry from scripts/deps.sh present, and apt-get update done?)"
    fi
    log "fetching Debian source package qemu=$ver"
    rm -rf "$DL" "$SRC.tmp"; mkdir -p "$DL"
    (cd "$DL" && timeout 900 apt-get source -q --only-source "qemu=$ver") >"$LOGDIR/qemu-source.log" 2>&1 \
        || die "apt-get source qemu=$ver failed (network? version gone from the archive?); see $LOGDIR/qemu-source.log"
    dir=$(find "$DL" -mindepth 1 -maxdepth 1 -type d -name 'qemu-*' | head -n1)
    [ -n "$dir" ] && [ -f "$dir/VERSION" ] || die "qemu source did not unpack; see $LOGDIR/qemu-source.log"
    grep -q '^10\.0\.' "$dir/VERSION" || die "unpacked QEMU is $(cat "$dir/VERSION"), not 10.0.x"
    if [ -f "$dir/debian/patches/$HURD" ]; then
        patch -d "$dir" -R -p1 -s <"$dir/debian/patches/$HURD" >>"$LOGDIR/qemu-source.log" 2>&1 \
            || die "could not take Debian's $HURD out of the QEMU tree; see $LOGDIR/qemu-source.log"
    fi
    rm -rf "$dir/debian"   # packaging, already applied by dpkg-source
    mv "$dir" "$SRC.tmp"
    (cd "$SRC.tmp" && git init -q && git add -A && git -c user.name=cxlpod -c user.email=cxlpod@localhost \
        commit -q -m "Debian qemu $ver" && git tag cxlpod-base) >"$LOGDIR/qemu-git.log" 2>&1 \
        || die "could not record the QEMU base tree; see $LOGDIR/qemu-git.log"
    rm -f "$BASE_STAMP" "$PATCH_STAMP"
    rm -rf "$SRC" "$OUT"; mv "$SRC.tmp" "$SRC"
    echo "$ver" > "$BASE_STAMP"
    rm -rf "$DL"
fi

# 2. hw-cxl/ is linked into the tree; the build glue patch refers to it.
ln -sfn "$TOP/hw-cxl" "$SRC/hw/cxlpod"
ln -sfn "$TOP/hw-cxl/cxlpod-devices.mak" "$SRC/configs/devices/x86_64-softmmu/cxlpod.mak"
for f in /hw/cxlpod /configs/devices/x86_64-softmmu/cxlpod.mak; do
    grep -qx "$f" "$SRC/.git/info/exclude" || echo "$f" >> "$SRC/.git/info/exclude"
done

# 3. Patches: when the set changed, the patched tree is first built in a
#    scratch git index (base + every patch), so a patch that does not apply
#    stops the build before the work tree is touched.  The work tree is then
#    moved to that tree with a two-way read-tree, which rewrites only files
#    whose content differs: unchanged sources keep their mtimes and ninja
#    recompiles only what the patch set really changed.
shopt -s nullglob; PATCHES=("$TOP"/patches/*.patch); shopt -u nullglob
sum=$(cat /dev/null "${PATCHES[@]}" | sha256sum | cut -d' ' -f1)
if [ "$(cat "$PATCH_STAMP" 2>/dev/null)" != "$sum" ]; then
    next=$SRC/.git/cxlpod-next.index
    rm -f "$next"
    (cd "$SRC" && GIT_INDEX_FILE=$next git read-tree cxlpod-base)
    for p in "${PATCHES[@]}"; do
        (cd "$SRC" && GIT_INDEX_FILE=$next git apply --cached --whitespace=nowarn "$p") 2>"$LOGDIR/patch.log" \
            || { cat "$LOGDIR/patch.log" >&2; rm -f "$next"; die "patch $(basename "$p") does not apply to QEMU $(cat "$BASE_STAMP")"; }
    done
    tree=$(cd "$SRC" && GIT_INDEX_FILE=$next git write-tree) && rm -f "$next"
    rm -f "$PATCH_STAMP"
    (cd "$SRC" && { git read-tree -u -m "$(git write-tree)" "$tree" 2>/dev/null ||
                    { git reset -q --hard && git read-tree -u -m HEAD "$tree"; }; } &&
        git clean -fdq -e /hw/cxlpod -e /configs/devices/x86_64-softmmu/cxlpod.mak) \
        || die "could not move $SRC to the patched tree"
    log "applied ${#PATCHES[@]} patches: $(cd "$SRC" && git diff --name-only HEAD | wc -l) QEMU files differ from Debian's"
    echo "$sum" > "$PATCH_STAMP"
fi

# 4. Configure again only when the options or the device list changed (ninja
#    re-runs meson by itself when a patched meson.build changes); ccache makes
#    a fresh configure cheap.
mapfile -t CONF < <(qemu_configure_flags)
[ $SANITIZE = 0 ] || CONF+=(--enable-asan --enable-ubsan)
csum=$( (printf '%s\n' "${CONF[@]}" "$QEMU_CONF_REV"; cat "$TOP/hw-cxl/cxlpod-devices.mak") | sha256sum | cut -d' ' -f1)
# A build folder configured from another source tree (copied or moved from
# another clone) is configured again: meson regenerates from the path it
# was configured with.
if [ -f "$OUT/build.ninja" ] && ! grep -qF -- "--internal regenerate $SRC " "$OUT/build.ninja"; then
    rm -f "$OUT/.cxlpod-config"
fi
if [ "$(cat "$OUT/.cxlpod-config" 2>/dev/null)" != "$csum" ]; then
    log "configuring QEMU in $OUT"
    rm -rf "$OUT"; mkdir -p "$OUT"
    (cd "$OUT" && "$SRC/configure" "${CONF[@]}") >"$LOGDIR/qemu-configure.log" 2>&1 \
        || { tail -n 30 "$LOGDIR/qemu-configure.log" >&2; die "QEMU configure failed; see $LOGDIR/qemu-configure.log"; }
    qemu_configured "$OUT"
    echo "$csum" > "$OUT/.cxlpod-config"
fi

# 5. Build.  ninja decides what is stale.
targets=(qemu-system-x86_64)
while read -r t; do targets+=("$t"); done < <(sed -n 's/^#\s*qtest:\s*//p' "$TOP/hw-cxl/cxlpod-devices.mak")
log "building ${targets[*]}"
ninja -C "$OUT" "${targets[@]}" >"$LOGDIR/qemu-build.log" 2>&1 \
    || { grep -E 'error|FAILED' "$LOGDIR/qemu-build.log" | head -n 30 >&2; die "QEMU build failed; see $LOGDIR/qemu-build.log"; }
log "QEMU ready: $OUT/qemu-system-x86_64 ($(grep -c '^\[' "$LOGDIR/qemu-build.log") build steps run)"
