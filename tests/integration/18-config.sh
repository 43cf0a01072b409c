#!/usr/bin/env bash
# A pod from a key file (cxlpod-launch --config): two hosts, a common job
# and a job of host 1's own (a path relative to the file), a device
# property for host 1 only, --json from the file, and a command-line
# option that overrides the file's value.
. "$(dirname "$0")/lib.sh"

t=$(token)
mkdir -p "$WORK/conf"
cat > "$WORK/conf/job1.sh" <<JOB
echo "job1 $t on host \$CXLPOD_HOST_ID"
cxlpod-info
JOB
cat > "$WORK/conf/pod.conf" <<CONF
# tests/integration/18-config.sh
[pod]
hosts = 2

[device]
device = cxl-shm
size = 256M
coherent-size = 16M

[job]
command = echo "common $t on host \$CXLPOD_HOST_ID"; cxlpod-info
timeout = 400
json = true

[host.1]
job = job1.sh
device-opt = latency-ns=400
CONF

# the command line overrides the file's coherent window
pod --config "$WORK/conf/pod.conf" --coherent-size 32M > "$WORK/stdout" \
    || { cat "$WORK/stdout"; fail "launcher reported a failure"; }

expect_line 0 "^common $t on host 0\$"
expect_line 1 "^job1 $t on host 1\$"
out 1 | grep -q "^common" && fail "host 1 ran the common job, not its own"
for h in 0 1; do
    expect_line $h "^  coherent +\[0, 0x2000000\) = 32 MiB\$"
done
expect_line 1 "^  latency +400 ns\$"
out 0 | grep -qE "^  latency +400 ns\$" && fail "host 0 got host 1's latency-ns"

json=$(tail -n1 "$WORK/stdout")
[ "$(jq -r '.hosts' <<<"$json")" = 2 ] || fail "JSON line: $json"
[ "$(jq -r '.ok' <<<"$json")" = true ] || fail "JSON line: $json"
[ "$(jq -r '[.results[].rc] | join(",")' <<<"$json")" = "0,0" ] \
    || fail "JSON line: $json"
pass "a pod from a key file: per-host job and property, --json, override"
