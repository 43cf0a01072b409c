#!/bin/sh
# The example project's pod test (docs/ci.md): build the program against
# the installed libcxlpod, boot a pod of host-userland guests, run the
# program on every host at once and judge the launcher's --json result.
#
#   ci/pod-test.sh [HOSTS]        (default 4; run from anywhere)
#
# Needs cxlpod installed: cxlpod-launch on PATH and `pkg-config cxlpod`
# (the Debian package; or scripts/install.sh PREFIX with PREFIX/bin on
# PATH and PREFIX/lib/<triplet>/pkgconfig on PKG_CONFIG_PATH), jq, make, cc.
# Runs as root (the guests map the pool's /dev/dax0.0 as root).  The pod's
# work folder is $CXLPOD_CI_WORKDIR (default: a new one under /tmp); keep
# it as a CI artifact, it has every guest's console log.
set -eu
HOSTS=${1:-4}
cd "$(dirname "$0")/.."

command -v cxlpod-launch >/dev/null || { echo "pod-test: cxlpod-launch is not on PATH (install cxlpod)" >&2; exit 2; }
pkg-config --exists cxlpod || { echo "pod-test: pkg-config finds no cxlpod (install cxlpod, or set PKG_CONFIG_PATH)" >&2; exit 2; }
make -s pod-counter

WORKDIR=${CXLPOD_CI_WORKDIR:-$(mktemp -d /tmp/pod-test.XXXXXX)}
mkdir -p "$WORKDIR"
# The guests run this machine's programs (--userland host), in this folder,
# shared at its own path: ./pod-counter is the binary just built.
rc=0
cxlpod-launch -n "$HOSTS" --userland host -w "$WORKDIR/pod" --json -q \
    -- ./pod-counter --adds 20000 >"$WORKDIR/result.txt" || rc=$?
cat "$WORKDIR/result.txt"
json=$(tail -n 1 "$WORKDIR/result.txt")

# Judge the JSON line, not only the exit status: every host ran the job
# (status ok, rc 0) and the pod booted completely.
echo "$json" | jq -e --argjson n "$HOSTS" '
    .ok == true and .hosts == $n and (.results | length) == $n and
    all(.results[]; .status == "ok" and .rc == 0)' >/dev/null || {
    echo "pod-test: FAIL (launcher exit $rc): $json" >&2
    echo "pod-test: consoles in $WORKDIR/pod/host*.log" >&2
    exit 1
}
# and what the program said on each host
pass=$(grep -c '^\[host[0-9]*\] pod-counter: host [0-9]* of '"$HOSTS"': PASS' "$WORKDIR/result.txt" || true)
[ "$pass" = "$HOSTS" ] || { echo "pod-test: FAIL: $pass of $HOSTS hosts passed" >&2; exit 1; }
echo "pod-test: PASS on $HOSTS hosts in $(echo "$json" | jq .wall_s) s (boot $(echo "$json" | jq .all_ready_s) s)"
