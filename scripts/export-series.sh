#!/usr/bin/env bash
# Export the whole product as one patch series against upstream QEMU: the
# core patches of patches/ and the device of hw-cxl/ (with its qtest and
# its documentation) as `git format-patch` files, with a cover letter.
#
#   scripts/export-series.sh OUTDIR
#   scripts/export-series.sh --print-author   the identity it would send
#                                             as (or why it refuses), and
#                                             nothing else
#
# hw-cxl/series.manifest says which patch holds what, in order (read it
# before adding a file to hw-cxl/ or a patch to patches/): a file or patch
# it does not name stops the export with its name.
#
# The base is QEMU's own release, not Debian's tree: Debian's orig tarball
# of the version the project builds (qemu_10.0.x+ds.orig.tar.xz, upstream
# minus a few non-free blobs) WITHOUT debian/patches, kept as a git
# repository in build/series/upstream (tag "upstream"), plus the patches
# the manifest's `base` lines name (upstream commits the 10.0 release
# lacks, which the series depends on: not exported, named in the cover
# letter).  The series is made in build/series/export (one commit per
# step) and written to OUTDIR as 0000-cover-letter.patch, 0001-....patch,
# ...; other *.patch files already in OUTDIR are removed first.  The
# manifest's stages are parts of the series that build and pass their
# qtests alone, in order (scripts/check-series.sh --stage).
#
#   CXLPOD_QEMU_VERSION   the Debian source version (default: the one
#                         build/qemu-src.base names, else the newest 10.0.x)
#   SERIES_AUTHOR         "Name <email>" of whoever sends the series: From: and
#                         Signed-off-by: of the steps the project writes, a
#                         Signed-off-by: on every patch and the MAINTAINERS
#                         entry (default: git config user.name and
#                         user.email).  A placeholder identity is refused
#                         (an empty name or email, "cxlpod" or "cxlpod
#                         authors", an example.com/.org/.net, .example,
#                         .test, .invalid, .localhost or localhost domain,
#                         a noreply address): nobody could answer a review
#                         sent to it.
#   SERIES_PREFIX         the subject's prefix (default PATCH; "RFC PATCH")
#   SERIES_VERSION        N for a resend: [PATCH vN 01/15], files v2-0001-...
set -euo pipefail
. "$(dirname "$0")/common.sh"

[ $# = 1 ] && [ -n "$1" ] || die "usage: scripts/export-series.sh OUTDIR | --print-author"

# The identity the series is sent as: checked first, before any work.
how_to_set="set SERIES_AUTHOR=\"Your Name <you@your.domain>\" (or git config user.name and user.email in $TOP) to the identity you send the series with"
if [ -n "${SERIES_AUTHOR:-}" ]; then
    author=$SERIES_AUTHOR
    from="SERIES_AUTHOR"
else
    author="$(git -C "$TOP" config user.name 2>/dev/null || true) <$(git -C "$TOP" config user.email 2>/dev/null || true)>"
    from="git config user.name/user.email (SERIES_AUTHOR unset)"
fi
[[ $author =~ ^([^<>]*[^<> ])\ \<([^<> ]+@[^<> ]+)\>$ ]] ||
    die "the series' author from $from is \"$author\", not \"Name <email>\": $how_to_set"
a_name=${BASH_REMATCH[1]} a_email=${BASH_REMATCH[2]}
a_domain=$(tr 'A-Z' 'a-z' <<<"${a_email##*@}")
case $(tr 'A-Z' 'a-z' <<<"$a_name") in
cxlpod|"cxlpod authors"|"your name"|"name")
    die "the series' author from $from is \"$author\", a placeholder name: $how_to_set" ;;
esac
if [[ $a_domain =~ (^|\.)(example\.(com|org|net)|example|test|invalid|localhost|localdomain)$ ]] ||
   [[ $(tr 'A-Z' 'a-z' <<<"$a_email") =~ no-?reply ]]; then
    die "the series' author from $from is \"$author\", a placeholder address (no one reads mail at $a_domain): $how_to_set"
fi
if [ "$1" = --print-author ]; then
    echo "$author"
    exit 0
fi
OUTDIR=$1
SERIES=$BUILD/series
UP=$SERIES/upstream
WORK=$SERIES/export
PY=(python3 "$TOP/scripts/series.py")

# 0. The manifest must name every file and patch (fails naming them).
"${PY[@]}" check "$TOP" >/dev/null || die "hw-cxl/series.manifest does not match the project (see above)"

# 1. The pristine upstream tree, made once.
upstream_tree() {
    local ver dl tarball dir
    if [ -f "$UP/.cxlpod-version" ] && git -C "$UP" rev-parse -q --verify upstream >/dev/null; then
        return 0
    fi
    ver=${CXLPOD_QEMU_VERSION:-$(cat "$BUILD/qemu-src.base" 2>/dev/null || true)}
    if [ -z "$ver" ]; then
        ver=$(apt-cache showsrc qemu 2>/dev/null | sed -n 's/^Version: //p' |
              grep -E '^(1:)?10\.0\.' | sort -V | tail -n1 || true)
        [ -n "$ver" ] || die "no qemu 10.0.x source package visible to apt (run scripts/deps.sh)"
    fi
    dl=$SERIES/dl
    mkdir -p "$dl"
    tarball=$(find "$dl" -maxdepth 1 -name "qemu_$(echo "${ver#*:}" | sed 's/-[^-]*$//').orig.tar.*" | head -n1)
    if [ -z "$tarball" ]; then
        log "downloading Debian source package qemu=$ver (its orig tarball is upstream's release)"
        (cd "$dl" && timeout 900 apt-get source -q --download-only --only-source "qemu=$ver") \
            >"$LOGDIR/series-source.log" 2>&1 \
            || die "apt-get source --download-only qemu=$ver failed; see $LOGDIR/series-source.log"
        tarball=$(find "$dl" -maxdepth 1 -name 'qemu_*.orig.tar.*' | head -n1)
        [ -n "$tarball" ] || die "no orig tarball in $dl; see $LOGDIR/series-source.log"
    fi
    log "unpacking $(basename "$tarball") (no debian/patches) into $UP"
    rm -rf "$UP" "$UP.tmp"; mkdir -p "$UP.tmp"
    tar -C "$UP.tmp" --strip-components=1 -xf "$tarball"
    [ -f "$UP.tmp/VERSION" ] && grep -q '^10\.0\.' "$UP.tmp/VERSION" \
        || die "$(basename "$tarball") is not QEMU 10.0.x"
    # -f: the release carries files QEMU's .gitignore lists (the sources of
    # subprojects/, which a build without network needs)
    (cd "$UP.tmp" && git init -q && git add -A -f &&
     git -c user.name=cxlpod -c user.email=cxlpod@localhost commit -q \
         -m "QEMU $(cat VERSION) (upstream release, from Debian's $(basename "$tarball"))" &&
     git tag upstream) >"$LOGDIR/series-git.log" 2>&1 \
        || die "could not record the upstream tree; see $LOGDIR/series-git.log"
    echo "$ver" >"$UP.tmp/.cxlpod-version"
    echo /.cxlpod-version >>"$UP.tmp/.git/info/exclude"
    mv "$UP.tmp" "$UP"
}
upstream_tree
QEMU_VERSION=$(cat "$UP/VERSION")

# 2. One commit per step, in a fresh clone of the upstream tree.
export GIT_AUTHOR_NAME=$a_name GIT_AUTHOR_EMAIL=$a_email
export GIT_COMMITTER_NAME=$GIT_AUTHOR_NAME GIT_COMMITTER_EMAIL=$GIT_AUTHOR_EMAIL
# one date for the steps the project writes, so an unchanged project
# exports byte-identical files
DATE=$(git -C "$TOP" log -1 --format=%cI)
export GIT_AUTHOR_DATE=$DATE GIT_COMMITTER_DATE=$DATE

# (kept between runs and reset to upstream: cheaper than a new clone)
if ! git -C "$WORK" rev-parse -q --verify upstream >/dev/null 2>&1 ||
   [ "$(git -C "$WORK" rev-parse upstream)" != "$(git -C "$UP" rev-parse upstream)" ]; then
    rm -rf "$WORK"
    git clone -q --shared "$UP" "$WORK"
fi
git -C "$WORK" am --abort >/dev/null 2>&1 || true
git -C "$WORK" checkout -q -f -B series upstream
git -C "$WORK" clean -fdxq
# the patches upstream has already, that its release lacks: the base
mapfile -t BASEP < <("${PY[@]}" base "$TOP")
# am PATCH WHY: apply patches/PATCH with its own author and date, or stop
# saying it does not apply WHY
am() {
    if ! (cd "$WORK" && env -u GIT_AUTHOR_NAME -u GIT_AUTHOR_EMAIL -u GIT_AUTHOR_DATE \
              git am -q --committer-date-is-author-date --whitespace=nowarn "$TOP/patches/$1") \
              >"$LOGDIR/series-am.log" 2>&1; then
        cat "$LOGDIR/series-am.log" >&2
        git -C "$WORK" am --abort 2>/dev/null || true
        die "patches/$1 $2"
    fi
}
for p in "${BASEP[@]}"; do
    am "$p" "(a base line of hw-cxl/series.manifest) does not apply to upstream QEMU $QEMU_VERSION"
done
git -C "$WORK" tag -f base >/dev/null
msg=$SERIES/step.msg
mapfile -t PLAN < <("${PY[@]}" plan "$TOP")
n=${#PLAN[@]}
for step in "${PLAN[@]}"; do
    i=${step%% *} p=${step#* }
    [ "$p" != - ] || p=
    if [ -n "$p" ]; then
        am "$p" "does not apply to upstream QEMU $QEMU_VERSION after the series' steps before it (step $i of hw-cxl/series.manifest)"
    fi
    added=()
    [ -z "$p" ] || mapfile -t added < <(git -C "$WORK" diff --name-only --diff-filter=A HEAD~1 HEAD)
    "${PY[@]}" apply "$TOP" "$i" "$WORK" "$msg" "$author" "${added[@]}" || die "step $i of hw-cxl/series.manifest failed"
    git -C "$WORK" add -A
    if [ -n "$p" ]; then
        if [ -s "$msg" ] || ! git -C "$WORK" diff --cached --quiet; then
            if [ -s "$msg" ]; then
                git -C "$WORK" commit -q --amend -s -F "$msg"
            else
                git -C "$WORK" commit -q --amend -s --no-edit
            fi
        elif ! git -C "$WORK" log -1 --format=%B | grep -q '^Signed-off-by: '; then
            git -C "$WORK" commit -q --amend -s --no-edit
        fi
    else
        git -C "$WORK" commit -q -s -F "$msg"
    fi
done

# Text a reviewer should not meet in an upstream tree: references to the
# project's own layout, issues and patch numbers (reported, not fixed).
leftovers=$( (git -C "$WORK" log --format='%s%n%b' base..series | sed 's/^/commit message: /'
             git -C "$WORK" diff base -- . ':!MAINTAINERS' | grep '^+') |
            grep -E 'hw-cxl|hw/cxlpod|cxlpod|\b(issue|patch) [0-9]+' | grep -vE '^commit message: Signed-off-by:|Copyright' || true)
[ -z "$leftovers" ] || warn "exported lines that name the project's files, issues or patch numbers:
$leftovers"

# 3. The files, and the cover letter's subject and text.
mkdir -p "$OUTDIR"
find "$OUTDIR" -maxdepth 1 -name '*.patch' -delete
git -C "$WORK" format-patch -q --cover-letter --thread=shallow --subject-prefix="${SERIES_PREFIX:-PATCH}" \
    ${SERIES_VERSION:+-v "$SERIES_VERSION"} -o "$(cd "$OUTDIR" && pwd)" base..series
cover=$(ls "$OUTDIR"/*0000-cover-letter.patch)
"${PY[@]}" cover "$TOP" >"$SERIES/cover.txt"
python3 - "$cover" "$SERIES/cover.txt" "$QEMU_VERSION" <<'EOF'
import sys
path, src, ver = sys.argv[1:]
subject, _, text = open(src).read().partition('\n')
text = text.strip('\n').replace('@QEMU_VERSION@', ver)
c = open(path).read()
assert '*** SUBJECT HERE ***' in c and '*** BLURB HERE ***' in c
c = c.replace('*** SUBJECT HERE ***', subject.strip()).replace('*** BLURB HERE ***', text)
open(path, 'w').write(c)
EOF
log "series of $n patches against QEMU $QEMU_VERSION${BASEP:+ with ${#BASEP[@]} upstream commit(s) as its base} written to $OUTDIR:"
(cd "$OUTDIR" && ls -1 *.patch) >&2
