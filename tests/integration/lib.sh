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

# pod ARGS... : run the launcher with a fresh work dir (and pool) under $WORK
# pod ARGS... : the launcher on a fresh work dir.  CXLPOD_TIME_SCALE=K
# (scripts/test-sanitize.sh sets it: its QEMU runs several times slower)
# multiplies the launcher's --timeout and --boot-timeout by K (the boot
# timeout's default, 180 s, too).
pod() {
    local a k=${CXLPOD_TIME_SCALE:-1} args=() boot=0
    while [ $# -gt 0 ]; do
        a=$1; shift
        case $a in
        --timeout|--boot-timeout)
            [ "$a" = --timeout ] || boot=1
            args+=("$a" "$(($1 * k))"); shift ;;
        --timeout=*|--boot-timeout=*)
            [ "${a%%=*}" = --timeout ] || boot=1
            args+=("${a%%=*}=$((${a#*=} * k))") ;;
        --)
            args+=("$a" "$@"); break ;;
        *)
            args+=("$a") ;;
        esac
    done
    [ "$k" = 1 ] || [ $boot = 1 ] || args=(--boot-timeout $((180 * k)) "${args[@]}")
    rm -rf "$WORK/pod"
    "$CXLPOD_LAUNCH" -w "$WORK/pod" "${args[@]}"
}

# out I : what guest I's job printed in the last pod run
out() { cat "$WORK/pod/host$1.out"; }

# token : a fresh random token
token() { od -An -N8 -tx1 /dev/urandom | tr -d ' \n'; }

# expect_in TEXT FILE-OR-STRING-DESCRIPTION CONTENT
expect_line() {  # expect_line HOST REGEX
    out "$1" | grep -E -- "$2" >/dev/null || { echo "--- host$1 output:"; out "$1"; fail "host$1: no line matching '$2'"; }
}

# The cxl-shm pool used by the device and tool tests: 256 MiB, 64 MiB of it
# the coherent window.
SHM=(--device cxl-shm --size 256M --coherent-size 64M)

# pool_check [REGEX] : after a pod run, cxlpod-pool check finds no problem
# in its pool file (exit 0: the next start joins), and its output matches
# REGEX when one is given (e.g. the note on a host that died)
POOLTOOL=${CXLPOD_POOL:-$CXLPOD_TOP/build/meson/host-tools/cxlpod-pool}
pool_check() {
    local out
    [ -x "$POOLTOOL" ] || fail "no cxlpod-pool at $POOLTOOL (scripts/build-tools.sh)"
    out=$("$POOLTOOL" check "$WORK/pod/pool.img" 2>&1) \
        || fail "cxlpod-pool check found problems in the pool after the run: $out"
    [ -z "${1:-}" ] || grep -qE -- "$1" <<<"$out" \
        || fail "cxlpod-pool check: no /$1/ in: $out"
}
# pool_states : the host table's status of each host of the last run, comma-separated
pool_states() {
    "$POOLTOOL" inspect --json "$WORK/pod/pool.img" | jq -r '[.hosts[].status] | join(",")'
}

# json_of HOST TOOL : the --json line tool TOOL printed on guest HOST
json_of() { out "$1" | grep -F "{\"tool\":\"$2\"" | tail -n1; }

# litmus_outcome HOST METHOD TEST AREA PROTO : one cell of a litmus result
litmus_outcome() {
    json_of "$1" cxlpod-litmus | jq -r --arg m "$2" --arg t "$3" --arg a "$4" --arg p "$5" \
        '.results[] | select(.method==$m and .test==$t and .area==$a and .proto==$p) | .outcome'
}

# expect_litmus HOST METHOD TEST AREA PROTO REGEX
expect_litmus() {
    local got
    got=$(litmus_outcome "$1" "$2" "$3" "$4" "$5")
    [[ $got =~ $6 ]] || fail "host$1 $2 $3/$4/$5: outcome '$got', expected /$6/"
}
