# Helpers of tests/smoke/*.sh (sourced; not a test itself): the smoke runs
# of the scripts and commands that README.md and docs/ tell a user to run,
# each a --dry-run or the smallest real run that fits in the suite.
# scripts/test.sh runs them with CXLPOD_TOP (and CXLPOD_BUILD) set.
set -euo pipefail
: "${CXLPOD_TOP:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
TOP=$CXLPOD_TOP
BUILD=${CXLPOD_BUILD:-$TOP/build}
WORK=$(mktemp -d /tmp/cxlpod-smoke.XXXXXX)
trap 'rm -rf "$WORK"' EXIT
fails=0
ok()   { echo "ok: $*"; }
bad()  { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
fail() { echo "FAIL: $*" >&2; exit 1; }
# expect NAME RC REGEX CMD...: CMD exits RC and its output (both streams)
# matches REGEX
expect() {
    local name=$1 want=$2 pat=$3 out rc=0; shift 3
    out=$("$@" 2>&1) || rc=$?
    if [ "$rc" != "$want" ]; then
        bad "$name: exit $rc, wanted $want"; printf '%s\n' "$out" | tail -n 15 | sed 's/^/  | /' >&2
    elif [ -n "$pat" ] && ! grep -qE -- "$pat" <<<"$out"; then
        bad "$name: no /$pat/ in its output"; printf '%s\n' "$out" | tail -n 15 | sed 's/^/  | /' >&2
    else
        ok "$name"
    fi
}
finish() { [ "$fails" = 0 ] || fail "$fails check(s) failed"; echo "all checks passed"; }
