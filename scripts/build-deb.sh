#!/usr/bin/env bash
# Build cxlpod's Debian package (debian/) with dpkg-buildpackage and check
# it with lintian (docs/building.md, "The Debian package").
#
#   scripts/build-deb.sh [--no-lintian]
#
# QEMU and the guest image come from the project's build folder (BUILD:
# build/, or $CXLPOD_BUILD), built there first if needed by the same
# scripts as always (incremental, ccache): a built tree is reused, nothing
# is rebuilt.  Needs the packages of scripts/deps.sh (it installs the
# package's build dependencies and sets up the apt sources the QEMU source
# and the guest kernel come from).  Output in BUILD/deb: the .deb (and its
# -dbgsym), its .buildinfo and .changes, dpkg-buildpackage.log and
# lintian.txt; the tree is cleaned afterwards (debian/rules clean).  The exit
# status is non-zero when the build fails or lintian reports an error.
set -euo pipefail
. "$(dirname "$0")/common.sh"

LINTIAN=1
case ${1:-} in
    --no-lintian) LINTIAN=0 ;;
    "") ;;
    *) die "unknown argument: $1 (--no-lintian or nothing)" ;;
esac
for t in dpkg-buildpackage dh dh_python3; do
    command -v "$t" >/dev/null || die "$t not found: run scripts/deps.sh (as root) first"
done
OUT=$BUILD/deb
rm -rf "$OUT"; mkdir -p "$OUT"
ver=$(dpkg-parsechangelog -l "$TOP/debian/changelog" -S Version)
arch=$(dpkg --print-architecture)
log "building cxlpod_${ver}_$arch.deb (log: $OUT/dpkg-buildpackage.log)"
t0=$(date +%s)
(cd "$TOP" && CXLPOD_BUILD=$BUILD CXLPOD_DEB_DIR=$OUT dpkg-buildpackage -b -us -uc \
    --buildinfo-file="$OUT/cxlpod_${ver}_$arch.buildinfo" --buildinfo-option=-u"$OUT" \
    --changes-file="$OUT/cxlpod_${ver}_$arch.changes" --changes-option=-u"$OUT") \
    >"$OUT/dpkg-buildpackage.log" 2>&1 \
    || { tail -n 30 "$OUT/dpkg-buildpackage.log" >&2; die "dpkg-buildpackage failed; see $OUT/dpkg-buildpackage.log"; }
deb=$OUT/cxlpod_${ver}_$arch.deb
[ -f "$deb" ] || die "dpkg-buildpackage made no $deb"
# the package tree (debian/cxlpod, about 120 MiB) and meson's folder
# (obj-*) are not needed any more
(cd "$TOP" && debian/rules clean) >>"$OUT/dpkg-buildpackage.log" 2>&1 \
    || warn "debian/rules clean failed; see $OUT/dpkg-buildpackage.log"
log "built $deb ($(du -h "$deb" | cut -f1), $(( $(date +%s) - t0 )) s)"
if [ $LINTIAN = 1 ]; then
    command -v lintian >/dev/null || die "lintian not found: run scripts/deps.sh (as root) first"
    rc=0 t0=$(date +%s)
    lintian --info --display-info "$OUT/cxlpod_${ver}_$arch.changes" >"$OUT/lintian.txt" 2>&1 || rc=$?
    grep -E '^(E|W):' "$OUT/lintian.txt" >&2 || true
    [ $rc = 0 ] || die "lintian reports errors (exit $rc): $OUT/lintian.txt"
    log "lintian ($(( $(date +%s) - t0 )) s): $(grep -c '^E:' "$OUT/lintian.txt" || true) errors, $(grep -c '^W:' "$OUT/lintian.txt" || true) warnings, $(grep -c '^I:' "$OUT/lintian.txt" || true) infos; see debian/cxlpod.lintian-overrides for the overridden ones"
fi
echo "$deb"
