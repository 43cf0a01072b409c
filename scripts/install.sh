#!/usr/bin/env bash
# Install cxlpod into a prefix, all or nothing (docs/building.md,
# "Installing"):
#
#   scripts/install.sh [--no-build] PREFIX
#   scripts/install.sh --uninstall PREFIX
#
# First builds everything (scripts/build-all.sh; skipped with --no-build,
# which installs the build as it is), then lays
# the installation out with `meson install --destdir` into a staging folder
# and copies that into PREFIX:
#
#   PREFIX/bin/cxlpod-launch, cxlpod-pool
#   PREFIX/libexec/cxlpod/qemu-system-x86_64        (never on PATH)
#   PREFIX/share/cxlpod/guest/...                    kernel, modules, initramfs,
#                                                    bin/ (static guest tools)
#   PREFIX/lib/<triplet>/libcxlpod.{a,so*}, pkgconfig/cxlpod.pc (relocatable)
#   PREFIX/include/libcxlpod.h
#   PREFIX/lib/python3/dist-packages/cxlpod/         the Python module
#   PREFIX/share/man/man1/cxlpod-launch.1, cxlpod-pool.1
#   PREFIX/share/cxlpod/installed-files              what was installed
#
# Nothing in it depends on PREFIX: the tree can be moved or cached as a
# whole.  The copy is all or nothing: every folder is checked for writing
# first; every file is copied beside its place under a temporary name, and
# only when all are there are they renamed into place; on any failure the
# copies and the folders made are removed again and the exit status is 1.
set -euo pipefail
. "$(dirname "$0")/common.sh"

BUILD_FIRST=1 UNINSTALL=0
while [ $# -gt 0 ]; do
    case $1 in
        --no-build) BUILD_FIRST=0; shift ;;
        --uninstall) UNINSTALL=1; shift ;;
        -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
        -*) die "unknown option: $1 (see --help)" ;;
        *) break ;;
    esac
done
[ $# = 1 ] || die "usage: scripts/install.sh [--no-build] PREFIX | --uninstall PREFIX"
PREFIX=$1
case $PREFIX in /*) ;; *) PREFIX=$PWD/$PREFIX ;; esac
PREFIX=${PREFIX%/}
MANIFEST_REL=share/cxlpod/installed-files

if [ $UNINSTALL = 1 ]; then
    m=$PREFIX/$MANIFEST_REL
    [ -f "$m" ] || die "$m not found: nothing of cxlpod is installed in $PREFIX"
    list=$(cat "$m")
    # files first (the list itself too), then the folders that are left
    # empty, deepest first
    grep -v '/$' <<<"$list" | while IFS= read -r f; do rm -f -- "$PREFIX/$f"; done
    grep '/$' <<<"$list" | LC_ALL=C sort -r | while IFS= read -r d; do rmdir -- "$PREFIX/$d" 2>/dev/null || true; done
    log "removed cxlpod from $PREFIX"
    exit 0
fi

# 1. Before anything else: can PREFIX be written?  The nearest folder that
#    exists must be writable (its missing sub-folders are made later).
p=$PREFIX
while [ ! -e "$p" ]; do p=$(dirname "$p"); done
[ -d "$p" ] || die "cannot install into $PREFIX: $p is not a directory"
[ -w "$p" ] || die "cannot install into $PREFIX: $p is not writable (by uid $(id -u)); nothing was installed"

# 2. The build.
if [ $BUILD_FIRST = 1 ]; then
    bash "$TOP/scripts/build-all.sh"
fi
MB=$BUILD/meson
[ -f "$MB/build.ninja" ] || die "no build in $MB: run scripts/build-all.sh (or drop --no-build)"

# 3. The layout, staged: meson install into a folder of our own.
STAGE=$(mktemp -d "${TMPDIR:-/tmp}/cxlpod-install.XXXXXX")
NEW=() MADE=() DONE=0
cleanup() {
    local rc=$?
    if [ "$DONE" = 0 ]; then
        local f d i
        for f in "${NEW[@]}"; do rm -f -- "$f"; done
        for ((i = ${#MADE[@]} - 1; i >= 0; i--)); do rmdir -- "${MADE[i]}" 2>/dev/null || true; done
        [ "${#NEW[@]}${#MADE[@]}" = 00 ] || warn "removed what this run had copied into $PREFIX (${#NEW[@]} files, ${#MADE[@]} folders)"
    fi
    rm -rf "$STAGE"
    exit $rc
}
trap cleanup EXIT
trap 'exit 130' INT TERM
prefix=$(meson introspect --buildoptions "$MB" | jq -r '.[] | select(.name == "prefix") | .value')
meson install -C "$MB" --no-rebuild --quiet --destdir "$STAGE" >"$STAGE.log" 2>&1 \
    || { cat "$STAGE.log" >&2; rm -f "$STAGE.log"; die "meson install into the staging folder failed; nothing was installed"; }
rm -f "$STAGE.log"
ROOT=$STAGE$prefix
[ -x "$ROOT/bin/cxlpod-launch" ] || die "the staged installation has no bin/cxlpod-launch (prefix $prefix, bindir other than bin?)"
mkdir -p "$ROOT/share/cxlpod"
( cd "$ROOT" && find . -mindepth 1 -type d -printf '%P/\n' && find . ! -type d -printf '%P\n' ) \
    | grep -vx "$MANIFEST_REL" | LC_ALL=C sort >"$ROOT/$MANIFEST_REL"
echo "$MANIFEST_REL" >>"$ROOT/$MANIFEST_REL"

# 4. Every folder that will receive files: existing and writable, or
#    creatable.  Then the copy beside each place, then the renames.
while IFS= read -r d; do
    t=$PREFIX/${d%/}
    if [ -e "$t" ] || [ -L "$t" ]; then
        [ -d "$t" ] || die "cannot install into $PREFIX: $t is not a directory; nothing was installed"
        [ -w "$t" ] || die "cannot install into $PREFIX: $t is not writable (by uid $(id -u)); nothing was installed"
    fi
done < <(grep '/$' "$ROOT/$MANIFEST_REL")
# PREFIX and its missing parents, top down, then the folders inside it
missing=() p=$PREFIX
while [ ! -d "$p" ]; do missing=("$p" "${missing[@]}"); p=$(dirname "$p"); done
for t in "${missing[@]}" $(grep '/$' "$ROOT/$MANIFEST_REL" | sed "s|^|$PREFIX/|; s|/\$||"); do
    if [ ! -d "$t" ]; then
        mkdir -- "$t" || die "cannot create $t; nothing was installed"
        MADE+=("$t")
    fi
done
tag=.cxlpod-new.$$
while IFS= read -r f; do
    NEW+=("$PREFIX/$f$tag")
    cp -P --preserve=mode,timestamps -- "$ROOT/$f" "$PREFIX/$f$tag" \
        || die "copying $f into $PREFIX failed; nothing was installed"
done < <(grep -v '/$' "$ROOT/$MANIFEST_REL")
while IFS= read -r f; do
    mv -f -T -- "$PREFIX/$f$tag" "$PREFIX/$f" || die "renaming $PREFIX/$f$tag into place failed"
done < <(grep -v '/$' "$ROOT/$MANIFEST_REL")
DONE=1
log "installed cxlpod into $PREFIX ($(grep -vc '/$' "$ROOT/$MANIFEST_REL") files, $(du -sh "$ROOT" | cut -f1)): $PREFIX/bin/cxlpod-launch"
