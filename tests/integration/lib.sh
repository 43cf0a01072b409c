# Helpers for integration tests: sourced by tests/integration/*.sh, which the
# test runner (scripts/test.sh) starts with CXLPOD_TOP, CXLPOD_QEMU and
# CXLPOD_LAUNCH set.  Each test gets its own work dir and pool.
set -euo pipefail
: "${CXLPOD_TOP:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
: "${CXLPOD_QEMU:=$CXLPOD_TOP/build/qemu/qemu-system-x86_64}"
: "${CXLPOD_LAUNCH:=$CXLPOD_TOP/build/meson/host-tools/cxlpod-launch}"
WORK=$(mktemp -d /tmp/cxlpod-test.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

fail() { echo "FAIL: $*" >&2; exit 1; }
pass() { echo "ok: $*"; }

# pod ARGS... : run the launcher with a fresh work dir under $WORK
pod() { "$CXLPOD_LAUNCH" -w "$WORK/pod" "$@"; }

# out I : what guest I's job printed in the last pod run
out() { cat "$WORK/pod/host$1.out"; }

# token : a fresh random token
token() { od -An -N8 -tx1 /dev/urandom | tr -d ' \n'; }

# expect_in TEXT FILE-OR-STRING-DESCRIPTION CONTENT
expect_line() {  # expect_line HOST REGEX
    out "$1" | grep -Eq -- "$2" || { echo "--- host$1 output:"; out "$1"; fail "host$1: no line matching '$2'"; }
}
