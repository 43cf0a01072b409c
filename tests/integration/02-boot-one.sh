#!/usr/bin/env bash
# One guest boots, brings the CXL region up and sees /dev/dax0.0 of the
# pool's size.
. "$(dirname "$0")/lib.sh"

pod -n 1 -- 'ls -l /dev/dax0.0 && cat /sys/bus/dax/devices/dax0.0/size' \
    || fail "launcher reported a failure"
expect_line 0 '^c.* /dev/dax0\.0$'
expect_line 0 '^268435456$'
grep -q '@@CXLPOD-READY dax=/dev/dax0.0@@' "$WORK/pod/host0.log" || fail "guest never reported READY"
pass "guest booted and sees /dev/dax0.0 (256 MiB)"
