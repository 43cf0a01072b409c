#!/usr/bin/env bash
# Every script README.md and docs/ tell a user to run has a run in the
# suite.  A test says which scripts it runs on a comment line
# "# covers: scripts/A.sh ..."; the claim holds if a line of that test that
# is not a comment names the script, or names a script that does (one
# level: check-series.sh runs export-series.sh).  The build steps of
# scripts/test.sh count as run.  A script documented later without a test
# that covers it fails here, so that a change elsewhere cannot break it
# silently.  The exceptions say why.
# covers: (none: this test only reads)
. "$(dirname "$0")/lib.sh"
cd "$TOP"
declare -A why=(
    [common.sh]="sourced by the other scripts, not run"
    [test.sh]="the suite itself"
    [test-sanitize.sh]="a second, sanitized QEMU build and the qtests on it: run after a device change (docs/building.md)"
    [install-parts.sh]="run by meson install (meson.build), which scripts/install.sh runs in int-28-installed"
    [man-from-help.sh]="run by meson install (meson.build), which scripts/install.sh runs in int-28-installed"
)
# code FILE: FILE's lines that are not comments
code() { grep -vE '^[[:space:]]*#' "$1" 2>/dev/null || true; }
# invokes FILE NAME: FILE, or a script FILE names, names scripts/NAME
invokes() {
    local s
    grep -qE -- "/$2\\b|\\\$S/$2\\b" <<<"$(code "$1")" && return 0
    for s in $(code "$1" | grep -oE 'scripts/[A-Za-z0-9_-]+\.sh' | sort -u); do
        grep -qE -- "scripts/$2\\b" <<<"$(code "$s")" && return 0
    done
    return 1
}
declare -A by=()
for t in $(grep -rlE --include='*.sh' --include=meson.build '^[[:space:]]*# covers: ' tests); do
    for s in $(sed -n 's/^[[:space:]]*# covers: //p' "$t" | grep -oE 'scripts/[A-Za-z0-9_-]+\.(sh|py)'); do
        b=${s#scripts/}
        if invokes "$t" "$b"; then
            by[$b]=$t
        else
            bad "$t says it covers $s, and none of its lines runs it"
        fi
    done
done
for b in $(bash scripts/build-all.sh --steps) build-all; do
    by[$b.sh]="a build step of scripts/test.sh"
done
for s in $(grep -ohE 'scripts/[A-Za-z0-9_-]+\.(sh|py)' README.md docs/*.md | sort -u); do
    b=${s#scripts/}
    if [ -n "${why[$b]:-}" ]; then
        ok "$s: not in the suite: ${why[$b]}"
    elif [ -n "${by[$b]:-}" ]; then
        ok "$s: run by ${by[$b]}"
    else
        bad "$s is documented, and no test covers it (add a smoke run to tests/smoke/, with a '# covers:' line)"
    fi
done
finish
